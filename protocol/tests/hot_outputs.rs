//! The fast output decoder (`engine_protocol::hot`) against the
//! schema-driven one (`decode_message`): the same verdict (accept, or the
//! same error: class, path and text), the same drift, and on accept the same
//! field values, over every golden `EngineCoreOutputs` case (vLLM's own
//! bytes, accepts and rejects, mutants included) read with both release
//! tables, under the default limits and under tight ones; then over
//! arbitrary batches drawn from the schema tables and bytes mutated from
//! them.

mod common;

use arbitrary::Unstructured;
use common::*;
use engine_protocol::hot::{decode_output_value, decode_outputs, IntRun, Output, Outputs, TensorRef};
use engine_protocol::typed::EngineCoreOutputs;
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::view::struct_view;
use engine_protocol::Dialect;
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use engine_testkit::build::refs;
use engine_testkit::corpus::{golden_dir, message_cases};
use engine_testkit::on_large_stack;
use proptest::prelude::*;

/// Every golden `EngineCoreOutputs` case (any vLLM version): its report id
/// and frames.
fn golden_output_cases() -> Vec<(String, Vec<Vec<u8>>)> {
    on_large_stack(|| {
        let cases = message_cases(&golden_dir()).expect("golden/ loads");
        cases
            .iter()
            .filter_map(|c| match c.message() {
                Some((MessageKind::EngineCoreOutputs, frames, _)) if c.dialect.parse() == Ok(Dialect::Vllm) => {
                    Some((c.report_id(), frames.to_vec()))
                }
                _ => None,
            })
            .collect()
    })
}

fn int_value(run: IntRun<'_>) -> Value {
    Value::IntArray(run.to_vec())
}

fn same_tensor(t: &TensorRef<'_>, v: &Value) -> Result<(), String> {
    let Value::Tensor(v) = v else { return Err(format!("tensor vs {v:?}")) };
    if t.dtype != v.dtype || t.shape.to_vec() != v.shape || t.data != v.data.as_slice() {
        return Err(format!("tensor {} {:?} {}B vs {v:?}", t.dtype, t.shape.to_vec(), t.data.len()));
    }
    Ok(())
}

/// Value equality with NaN equal to itself (the values hold any float bit
/// pattern; the debug form prints every field and every float exactly).
fn same_value(a: &Value, b: &Value) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

fn short(s: String) -> String {
    s.chars().take(400).collect()
}

/// A field the fast decoder hands to `other`: equal to the schema-driven
/// decoder's value `v` (nil when absent).
fn same_other(other: Option<&Value>, v: &Value) -> Result<(), String> {
    match (other, v) {
        (None, Value::Nil) => Ok(()),
        (Some(o), v) if same_value(o, v) => Ok(()),
        (o, v) => Err(short(format!("other {o:?} vs {v:?}"))),
    }
}

fn same_output(
    rel: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    o: &Output<'_>,
    s: &StructValue,
) -> Result<(), String> {
    for (i, field) in s.schema.fields.iter().enumerate() {
        let v = s.field(i);
        let r = match field.name {
            "request_id" => (Value::Str(o.request_id.to_string()) == *v).then_some(()).ok_or("request_id".into()),
            "new_token_ids" => match engine_protocol::internal::output_rare_field(o, i) {
                Some(x) => same_other(Some(x), v),
                None => (int_value(o.new_token_ids) == *v).then_some(()).ok_or(format!("tokens {v:?}")),
            },
            "new_logprobs" => match (&o.new_logprobs, v) {
                (None, v) => same_other(engine_protocol::internal::output_rare_field(o, i), v),
                (Some(l), Value::Struct(lv)) => (|| {
                    same_tensor(&l.logprob_token_ids, lv.field(0))?;
                    same_tensor(&l.logprobs, lv.field(1))?;
                    same_tensor(&l.sampled_token_ranks, lv.field(2))?;
                    let cu = l.cu_num_generated_tokens.map_or(Value::Nil, int_value);
                    (cu == *lv.field(3)).then_some(()).ok_or(format!("cu {cu:?} vs {:?}", lv.field(3)))
                })(),
                (Some(_), v) => Err(format!("logprobs vs {v:?}")),
            },
            "finish_reason" => {
                let want = match v {
                    Value::Int(x) => FinishReason::from_wire(*x),
                    _ => None,
                };
                (want == o.finish_reason).then_some(()).ok_or(format!("finish {:?} vs {v:?}", o.finish_reason))
            }
            "stop_reason" => match (o.stop_reason.map(|s| s.to_owned()), v) {
                (None, v) => same_other(engine_protocol::internal::output_rare_field(o, i), v),
                (Some(StopReason::TokenId(t)), Value::Int(x)) if t == i128::from(*x) => Ok(()),
                (Some(StopReason::Text(t)), Value::Str(x)) if t == *x => Ok(()),
                (got, v) => Err(format!("stop {got:?} vs {v:?}")),
            },
            "num_nans_in_logits" => match engine_protocol::internal::output_rare_field(o, i) {
                Some(x) => same_other(Some(x), v),
                None => (Value::Int(o.num_nans_in_logits) == *v).then_some(()).ok_or(format!("nans {v:?}")),
            },
            _ => same_other(engine_protocol::internal::output_rare_field(o, i), v),
        };
        r.map_err(|e| format!(".{}: {e}", field.name))?;
    }
    let whole = decode_output_value(rel, frames, o.raw.clone(), limits).map_err(|e| format!("raw: {e}"))?;
    // NaN != NaN: where `==` says no, compare the canonical views (NaN is
    // "NaN" there). Not Debug strings: those print the schema's lazily
    // filled defaults, which another test thread may fill in between.
    if whole != *s && struct_view(&whole) != struct_view(s) {
        return Err("decode_output_value differs".into());
    }
    Ok(())
}

fn same_batch(
    rel: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    h: &Outputs<'_>,
    v: &Value,
) -> Result<(), String> {
    let Value::Struct(s) = v else { return Err("root not a struct".into()) };
    let opt_int = |x: Option<i64>| x.map_or(Value::Nil, Value::Int);
    for (i, field) in s.schema.fields.iter().enumerate() {
        let v = s.field(i);
        let r = match (field.name, engine_protocol::internal::batch_rare_field(h, i)) {
            ("engine_index", None) => {
                (Value::Int(h.engine_index) == *v).then_some(()).ok_or(format!("{}", h.engine_index))
            }
            ("timestamp", None) => {
                let want = match v {
                    Value::Float(f) => *f,
                    Value::Int(x) => *x as f64,
                    Value::UInt(x) => *x as f64,
                    _ => f64::NAN,
                };
                (want.to_bits() == h.timestamp.to_bits()).then_some(()).ok_or(format!("{}", h.timestamp))
            }
            ("wave_complete", None) => (opt_int(h.wave_complete) == *v).then_some(()).ok_or(String::new()),
            ("start_wave", None) => (opt_int(h.start_wave) == *v).then_some(()).ok_or(String::new()),
            ("weight_version", None) => {
                let w = h.weight_version.map_or(Value::Nil, |w| Value::Str(w.to_string()));
                (w == *v).then_some(()).ok_or(format!("{w:?}"))
            }
            ("outputs", None) => {
                let Value::Array(xs) = v else { return Err(format!("outputs {v:?}")) };
                if xs.len() != h.outputs.len() {
                    return Err(format!("{} outputs vs {}", h.outputs.len(), xs.len()));
                }
                xs.iter().zip(&h.outputs).enumerate().try_for_each(|(k, (x, o))| match x {
                    Value::Struct(xs) => same_output(rel, frames, limits, o, xs).map_err(|e| format!("[{k}]{e}")),
                    _ => Err(format!("[{k}] not a struct")),
                })
            }
            (_, other) => same_other(other, v),
        };
        r.map_err(|e| format!("EngineCoreOutputs.{}: {e}", field.name))?;
    }
    Ok(())
}

/// Runs both decoders on `frames`; `Err` describes the first difference.
/// Returns whether the batch was accepted.
fn differential(rel: &'static ReleaseSchema, frames: &[&[u8]], limits: &Limits) -> Result<bool, String> {
    let full = decode_message(rel, MessageKind::EngineCoreOutputs, frames, limits);
    let fast = decode_outputs(rel, frames, limits);
    match (full, fast) {
        (Ok(d), Ok(h)) => {
            if d.drift != h.drift {
                return Err(format!("drift {:?} vs {:?}", h.drift, d.drift));
            }
            same_batch(rel, frames, limits, &h, &d.value)?;
            Ok(true)
        }
        (Err(a), Err(b)) if a == b => Ok(false),
        (Err(a), Err(b)) => Err(format!("errors differ: fast {b} vs {a}")),
        (Ok(_), Err(b)) => Err(format!("fast rejects what decode_message accepts: {b}")),
        (Err(a), Ok(_)) => Err(format!("fast accepts what decode_message rejects: {a}")),
    }
}

fn tight_limits() -> Vec<Limits> {
    let mut out: Vec<Limits> = (1..=6).map(|d| Limits { max_depth: d, ..Limits::default() }).collect();
    out.push(Limits { max_frames: 1, ..Limits::default() });
    out.push(Limits { max_frame_bytes: 64, ..Limits::default() });
    out
}

#[test]
fn fast_decoder_gives_the_verdict_drift_and_fields_of_decode_message_on_every_golden_output_case() {
    let cases = golden_output_cases();
    assert!(cases.len() > 250, "only {} EngineCoreOutputs cases under golden/", cases.len());
    let (mut accepted, mut rejected, mut drifted) = (0, 0, 0);
    let mut failures = Vec::new();
    for (id, frames) in &cases {
        let refs = refs(frames);
        for rel in [v032(), v033()] {
            match differential(rel, &refs, &Limits::default()) {
                Ok(true) => {
                    accepted += 1;
                    if !decode_outputs(rel, &refs, &Limits::default()).unwrap().drift.is_empty() {
                        drifted += 1;
                    }
                }
                Ok(false) => rejected += 1,
                Err(e) => failures.push(format!("{id} read as {}: {e}", rel.version)),
            }
            for limits in tight_limits() {
                if let Err(e) = differential(rel, &refs, &limits) {
                    failures.push(format!("{id} read as {} under {limits:?}: {e}", rel.version));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    // Both verdicts and drift are exercised, not just one of them.
    assert!(
        accepted > 400 && rejected > 100 && drifted > 10,
        "{accepted} accepted, {rejected} rejected, {drifted} drift"
    );
}

#[test]
fn the_owned_batch_of_the_fast_decoder_is_the_typed_decoders_on_every_golden_output_case() {
    let (mut compared, mut failures) = (0, Vec::new());
    for (id, frames) in golden_output_cases() {
        let refs = refs(&frames);
        for rel in [v032(), v033()] {
            let Ok(h) = decode_outputs(rel, &refs, &Limits::default()) else { continue };
            // A value carries no unknown (drift) fields, at any depth:
            // to_owned leaves them out; decode_typed keeps them.
            if !h.drift.is_empty() {
                continue;
            }
            let (want, _) =
                engine_protocol::typed::decode_typed_via_value::<EngineCoreOutputs>(rel, &refs, &Limits::default())
                    .expect("the verdicts agree");
            match h.to_owned() {
                // NaN != NaN: compare the debug forms where `==` says no.
                Ok(got) if got == want || format!("{got:?}") == format!("{want:?}") => compared += 1,
                Ok(got) => failures.push(format!("{id} as {}: {got:?}\n  vs {want:?}", rel.version)),
                Err(e) => failures.push(format!("{id} as {}: {e}", rel.version)),
            }
            // The named accessors agree with the owned struct.
            for (o, w) in h.outputs.iter().zip(&want.outputs) {
                assert_eq!(o.error().unwrap(), w.error, "{id}");
                assert_eq!(o.events().unwrap(), w.events, "{id}");
                assert_eq!(o.stop_reason_owned(), w.stop_reason, "{id}");
            }
            assert_eq!(h.utility_output().unwrap(), want.utility_output, "{id}");
            assert_eq!(h.finished_requests().unwrap(), want.finished_requests, "{id}");
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert!(compared > 400, "{compared}");
}

#[test]
fn the_error_accessor_answers_none_for_a_release_without_the_field() {
    // `EngineCoreOutput.error` is a 0.33.0 field: read with the 0.32.0
    // table it is drift, and the accessor answers `None`, not an error.
    // The frames go in as they are (`Vec<Vec<u8>>`: any `AsRef<[u8]>`).
    let frames = golden_frames("0.33.0", "output/error_engine_paused");
    let h = decode_outputs(v032(), &frames, &Limits::default()).expect("drift is accepted");
    assert_eq!(h.outputs[0].error().unwrap(), None, "0.32.0 has no error field");
    let h = decode_outputs(v033(), &frames, &Limits::default()).unwrap();
    assert_eq!(h.outputs[0].error().unwrap().map(|e| e.code), Some("engine_paused".to_string()));
}

#[test]
fn plain_batch_fields_are_borrowed_from_the_payload() {
    let frames = golden_frames("0.33.0", "output/batch_64");
    let refs = refs(&frames);
    let h = decode_outputs(v033(), &refs, &Limits::default()).expect("accepted");
    assert_eq!(h.outputs.len(), 64);
    let payload = refs[0].as_ptr_range();
    let o = &h.outputs[7];
    assert!(payload.contains(&o.request_id.as_ptr()), "request id points into the payload");
    assert_eq!(o.request_id, "req-7");
    assert_eq!(o.new_token_ids.to_vec(), [1007]);
    assert_eq!(o.finish_reason, Some(FinishReason::Length));
    assert!(h.outputs[6].finish_reason.is_none());
    let (schema, output) = (v033().engine_core_outputs.as_struct().unwrap(), v033().engine_core_output);
    assert!((0..schema.fields.len()).all(|i| engine_protocol::internal::batch_rare_field(&h, i).is_none()));
    assert!(h
        .outputs
        .iter()
        .all(|o| (0..output.fields.len()).all(|i| engine_protocol::internal::output_rare_field(o, i).is_none())));
}

#[test]
fn aux_frame_logprobs_are_the_aux_frames_themselves() {
    let frames = golden_frames("0.33.0", "output/batch_logprobs_aux_large");
    let refs = refs(&frames);
    let h = decode_outputs(v033(), &refs, &Limits::default()).expect("accepted");
    let l = h.outputs[0].new_logprobs.as_ref().expect("logprobs");
    let i = l.logprobs.frame.expect("an aux frame");
    assert!(i > 0);
    assert!(std::ptr::eq(l.logprobs.data, refs[i]));
    assert_eq!(l.logprobs.item_size(), 4);
}

fn arbitrary_batch(bytes: &[u8], rel: &'static ReleaseSchema) -> Option<Vec<Vec<u8>>> {
    let v = engine_protocol::internal::arbitrary::message(
        &mut Unstructured::new(bytes),
        rel,
        MessageKind::EngineCoreOutputs,
    )
    .ok()?;
    encode_message(rel, MessageKind::EngineCoreOutputs, &v).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn fast_decoder_agrees_with_decode_message_on_arbitrary_batches(
        seed in proptest::collection::vec(any::<u8>(), 0..4096),
        newer in any::<bool>(),
    ) {
        let rel = if newer { v033() } else { v032() };
        if let Some(frames) = arbitrary_batch(&seed, rel) {
            let refs = refs(&frames);
            prop_assert_eq!(differential(rel, &refs, &Limits::default()), Ok(true));
            // Read with the other release's table too (drift or defaults).
            let other = if newer { v032() } else { v033() };
            let read_by_other = differential(other, &refs, &Limits::default());
            prop_assert!(read_by_other.is_ok(), "read with the other table: {:?}", read_by_other);
        }
    }

    #[test]
    fn fast_decoder_agrees_with_decode_message_on_mutated_batches(
        seed in proptest::collection::vec(any::<u8>(), 0..2048),
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..6),
        cut in any::<u16>(),
    ) {
        let rel = v033();
        if let Some(mut frames) = arbitrary_batch(&seed, rel) {
            let p = &mut frames[0];
            for (at, b) in &edits {
                let i = *at as usize % p.len();
                p[i] = *b;
            }
            if cut % 4 == 0 {
                let keep = cut as usize % (p.len() + 1);
                p.truncate(keep);
            }
            let refs = refs(&frames);
            let r = differential(rel, &refs, &Limits::default());
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }
}

/// A shrunk proptest failure of
/// `fast_decoder_agrees_with_decode_message_on_arbitrary_batches` (seed
/// bytes for `arbitrary::message`, a 0.33.0 batch read with 0.32.0's
/// table): the batch holds a NaN, and the failure was the test's NaN
/// fallback (see `regression_an_output_holding_nan_is_compared_by_its_view`).
#[test]
fn regression_033_batch_read_with_the_032_table() {
    let seed = include_bytes!("regressions/hot_outputs_033_batch_read_as_032.seed");
    let frames = arbitrary_batch(seed, v033()).expect("the seed makes a batch");
    let refs = refs(&frames);
    assert_eq!(differential(v033(), &refs, &Limits::default()), Ok(true));
    let read_by_032 = differential(v032(), &refs, &Limits::default());
    assert!(read_by_032.is_ok(), "{read_by_032:?}");
}

/// A shrunk proptest failure of
/// `fast_decoder_agrees_with_decode_message_on_arbitrary_batches`: a batch
/// whose first output holds a NaN float. The decoders agreed; the test's
/// NaN fallback compared Debug strings, which include the schema's lazily
/// filled defaults and so depended on other test threads.
#[test]
fn regression_an_output_holding_nan_is_compared_by_its_view() {
    let seed = include_bytes!("regressions/hot_outputs_arbitrary_output_value.seed");
    let frames = arbitrary_batch(seed, v033()).expect("the seed makes a batch");
    let refs = refs(&frames);
    assert_eq!(differential(v033(), &refs, &Limits::default()), Ok(true));
    let read_by_032 = differential(v032(), &refs, &Limits::default());
    assert!(read_by_032.is_ok(), "{read_by_032:?}");
}
