//! The fast decoders against the reference path: `engine_protocol::hot`'s
//! output and request decoders must give `decode_message`'s verdict (the
//! same error, class, path and text on reject; the same drift on accept)
//! and, on accept, the same fields, under the default limits and tight ones.

use engine_protocol::hot::{decode_output_value, decode_outputs, Outputs as HotOutputs, StopRef};
use engine_protocol::schema::VLLM_RELEASES;
use engine_protocol::{decode_message, Limits, MessageKind, ReleaseSchema, Value};

use super::{differs, OracleError};
use super::{refs, same_value, Probe};
use crate::split::split;

/// `[payload, aux...]` through the fast output decoder
/// (`engine_protocol::hot::decode_outputs`) and through `decode_message`,
/// with both vLLM tables, under the default limits and tight ones (depth 6, 3
/// frames, 64 KiB frames): the same verdict (the same error, class, path and
/// text, on reject; the same drift on accept) and, on accept, the same
/// fields ([`same_hot_fields`]). The fast decode gets the allocation bound.
pub fn hot_outputs<P: Probe>(data: &[u8], p: &mut P) {
    let frames = split(data);
    let frames = refs(&frames);
    let tight = [
        Limits::default(),
        Limits { max_depth: 6, ..Limits::default() },
        Limits { max_frames: 3, ..Limits::default() },
        Limits { max_frame_bytes: 64 << 10, ..Limits::default() },
    ];
    // The vLLM tables (the fast decoder reads vLLM's `EngineCoreOutputs`).
    for &release in VLLM_RELEASES.iter() {
        for limits in &tight {
            let full = decode_message(release, MessageKind::EngineCoreOutputs, &frames, limits);
            let fast = p.decode(&frames, || decode_outputs(release, &frames, limits));
            match (full, fast) {
                (Ok(d), Ok(h)) => {
                    assert_eq!(d.drift, h.drift, "drift differs ({} {limits:?})", release.version);
                    if let Err(e) = same_hot_fields(release, &frames, limits, &d.value, &h) {
                        panic!("fast decoder differs at {e} ({} {limits:?})", release.version);
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "errors differ ({} {limits:?})", release.version),
                (Ok(_), Err(b)) => panic!("fast decoder rejects an accepted batch: {b} ({})", release.version),
                (Err(a), Ok(_)) => panic!("fast decoder accepts a rejected batch: {a} ({})", release.version),
            }
        }
    }
}

/// `[type byte, payload, aux...]` through the direct request decoder
/// (`engine_protocol::internal::decode_request_direct`, behind
/// `typed::decode_typed::<EngineCoreRequest>`) and through the reference
/// typed path (`typed::decode_typed_via_value`: `decode_message`, then the
/// conversion), with both vLLM tables, under the default limits and tight
/// ones (depth 3, 2 frames, 256-byte frames):
/// - the reference path has `decode_message`'s verdict and drift, save for
///   an accepted value the typed struct cannot hold (an integer above
///   `i64::MAX`, refused as `type`);
/// - whenever the direct path reads a message itself, the reference path
///   accepts it without drift and builds the same struct (NaN equal to
///   itself); everything the direct path hands over is the reference
///   path's answer by construction.
///
/// The direct decode gets the allocation bound.
pub fn hot_request<P: Probe>(data: &[u8], p: &mut P) {
    use engine_protocol::internal::decode_request_direct;
    use engine_protocol::typed::{decode_typed_via_value, EngineCoreRequest};
    fn same(a: &EngineCoreRequest, b: &EngineCoreRequest) -> bool {
        a == b || format!("{a:?}") == format!("{b:?}")
    }
    let frames = split(data);
    let frames = refs(&frames);
    let limits = [
        Limits::default(),
        Limits { max_depth: 3, ..Limits::default() },
        Limits { max_frames: 2, ..Limits::default() },
        Limits { max_frame_bytes: 256, ..Limits::default() },
    ];
    for &release in VLLM_RELEASES.iter() {
        for limits in &limits {
            let v = release.version;
            let reference = decode_typed_via_value::<EngineCoreRequest>(release, &frames, limits);
            let message = decode_message(release, MessageKind::EngineCoreRequest, &frames, limits);
            match (&reference, &message) {
                (Ok((_, a)), Ok(d)) => assert_eq!(a, &d.drift, "drift differs ({v} {limits:?})"),
                (Err(a), Err(b)) => assert_eq!(a, b, "errors differ ({v} {limits:?})"),
                (Err(a), Ok(_)) => panic!("the conversion refuses an accepted request: {a} ({v} {limits:?})"),
                (Ok(_), Err(b)) => panic!("the reference accepts a rejected request: {b} ({v} {limits:?})"),
            }
            if let Some(d) = p.decode(&frames, || decode_request_direct(release, &frames, limits)) {
                match &reference {
                    Ok((r, drift)) => {
                        assert!(drift.is_empty(), "the direct path read a request with drift ({v} {limits:?})");
                        assert!(same(&d, r), "structs differ ({v} {limits:?}):\n{d:?}\n{r:?}");
                    }
                    Err(e) => panic!("the direct path accepts what the reference rejects: {e} ({v} {limits:?})"),
                }
            }
        }
    }
}

/// The fields the fast decoder exposes against the schema-driven value:
/// `Err` names the first difference.
pub fn same_hot_fields(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    v: &Value,
    h: &HotOutputs<'_>,
) -> Result<(), OracleError> {
    static NIL: Value = Value::Nil;
    let Value::Struct(s) = v else { return Err(differs("the root")) };
    // By reference: values may nest as deep as the limit admits, and a
    // clone or a drop of one recurses.
    fn field<'v>(st: &'v engine_protocol::StructValue, name: &str) -> &'v Value {
        match st.schema.index_of(name) {
            Some(i) => st.field(i),
            None => &NIL,
        }
    }
    let check = |what: &str, a: &Value, b: &Value| match same_value(a, b) {
        None => Ok(()),
        Some(at) => Err(differs(format!("{what}{at}"))),
    };
    check(
        "engine_index",
        engine_protocol::internal::batch_rare_field(h, 0).unwrap_or(&Value::Int(h.engine_index)),
        field(s, "engine_index"),
    )?;
    let want_ts = match *field(s, "timestamp") {
        Value::Float(f) => f,
        Value::Int(i) => i as f64,
        Value::UInt(u) => u as f64,
        _ => f64::NAN,
    };
    if want_ts.to_bits() != h.timestamp.to_bits() {
        return Err(differs("timestamp"));
    }
    let opt = |x: Option<i64>| x.map_or(Value::Nil, Value::Int);
    check(
        "wave_complete",
        engine_protocol::internal::batch_rare_field(h, 6).unwrap_or(&opt(h.wave_complete)),
        field(s, "wave_complete"),
    )?;
    check(
        "start_wave",
        engine_protocol::internal::batch_rare_field(h, 7).unwrap_or(&opt(h.start_wave)),
        field(s, "start_wave"),
    )?;
    let wv = h.weight_version.map_or(Value::Nil, |w| Value::Str(w.to_string()));
    check("weight_version", &wv, field(s, "weight_version"))?;
    for (i, name) in [(2, "scheduler_stats"), (4, "utility_output"), (5, "finished_requests")] {
        check(name, engine_protocol::internal::batch_rare_field(h, i).unwrap_or(&NIL), field(s, name))?;
    }
    let Value::Array(outs) = field(s, "outputs") else { return Err(differs("outputs")) };
    if outs.len() != h.outputs.len() {
        return Err(OracleError::OutputCount { hot: h.outputs.len(), value: outs.len() });
    }
    for (k, (o, hv)) in outs.iter().zip(&h.outputs).enumerate() {
        let Value::Struct(o) = o else { return Err(differs(format!("outputs[{k}]"))) };
        let at = |f: &str| format!("outputs[{k}].{f}");
        check(&at("request_id"), &Value::Str(hv.request_id.to_string()), field(o, "request_id"))?;
        let tokens = Value::IntArray(hv.new_token_ids.to_vec());
        check(
            &at("new_token_ids"),
            engine_protocol::internal::output_rare_field(hv, 1).unwrap_or(&tokens),
            field(o, "new_token_ids"),
        )?;
        let fr = hv.finish_reason.map_or(Value::Nil, |r| Value::Int(r.wire()));
        check(&at("finish_reason"), &fr, field(o, "finish_reason"))?;
        let sr = match hv.stop_reason {
            None => Value::Nil,
            Some(StopRef::TokenId(t)) => Value::Int(t),
            Some(StopRef::Text(t)) => Value::Str(t.to_string()),
        };
        check(
            &at("stop_reason"),
            engine_protocol::internal::output_rare_field(hv, 6).unwrap_or(&sr),
            field(o, "stop_reason"),
        )?;
        let nans = Value::Int(hv.num_nans_in_logits);
        check(
            &at("num_nans_in_logits"),
            engine_protocol::internal::output_rare_field(hv, 13).unwrap_or(&nans),
            field(o, "num_nans_in_logits"),
        )?;
        match (&hv.new_logprobs, field(o, "new_logprobs")) {
            (None, want) => {
                check(&at("new_logprobs"), engine_protocol::internal::output_rare_field(hv, 2).unwrap_or(&NIL), want)?
            }
            (Some(l), Value::Struct(lv)) => {
                for (i, t) in [l.logprob_token_ids, l.logprobs, l.sampled_token_ranks].iter().enumerate() {
                    let Value::Tensor(w) = lv.field(i) else { return Err(differs(at("new_logprobs"))) };
                    if t.dtype != w.dtype || t.shape.to_vec() != w.shape || t.data != w.data.as_slice() {
                        return Err(differs(at(&format!("new_logprobs[{i}]"))));
                    }
                }
                let cu = l.cu_num_generated_tokens.map_or(Value::Nil, |r| Value::IntArray(r.to_vec()));
                check(&at("new_logprobs[3]"), &cu, lv.field(3))?;
            }
            (Some(_), _) => return Err(differs(at("new_logprobs"))),
        }
        for (i, f) in o.schema.fields.iter().enumerate() {
            if [0, 1, 2, 5, 6, 13].contains(&i) {
                continue;
            }
            check(&at(f.name), engine_protocol::internal::output_rare_field(hv, i).unwrap_or(&NIL), o.field(i))?;
        }
        let whole = decode_output_value(release, frames, hv.raw.clone(), limits)
            .map_err(|e| OracleError::WholeOutput { path: at("raw"), error: Box::new(e) })?;
        for (i, f) in o.schema.fields.iter().enumerate() {
            check(&at(&format!("{} (whole)", f.name)), whole.field(i), o.field(i))?;
        }
    }
    Ok(())
}
