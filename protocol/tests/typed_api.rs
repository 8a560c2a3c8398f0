//! The generated typed API (`engine_protocol::typed`) against vLLM's own
//! bytes: every golden message decodes into the typed structs, converts back
//! to the value tree unchanged, and (for `encode: exact` cases) the direct
//! encoder reproduces vLLM's frames byte for byte.

mod common;

use common::*;
use engine_protocol::typed::{
    self, decode_typed, EngineCoreOutput, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest,
    EngineHandshakeMetadata, FinishReason, HandshakeStatus, IntList, Message, RequestError, SamplingParams,
    StartDpWave, StopStrings, UtilityOutput, UtilityRequest,
};
use engine_protocol::Dialect;
use engine_protocol::Value;
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, RejectClass, ReleaseSchema};
use engine_testkit::build::refs;
use engine_testkit::corpus::{golden_dir, message_cases, Body, EncodeMode, Expect};
use engine_testkit::on_large_stack;

/// A golden message case: id, kind, frames, whether vLLM's bytes are the
/// exact encoding of the value.
struct Case {
    id: String,
    kind: MessageKind,
    frames: Vec<Vec<u8>>,
    exact: bool,
}

/// Every accepted message case of `version` (below golden/vllm/<version>/),
/// live recordings and mutants included.
fn accepted_cases(version: &str) -> Vec<Case> {
    let dir = golden_dir().join("vllm").join(version);
    on_large_stack(move || {
        let cases = message_cases(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        cases
            .into_iter()
            .filter_map(|c| match c.body {
                Body::Message { message, frames, expect: Expect::Accept, encode, .. } => {
                    Some(Case { id: c.id, kind: message, frames, exact: encode == EncodeMode::Exact })
                }
                _ => None,
            })
            .collect()
    })
}

fn typed_frames<M: Message + TypedEncode>(rel: &'static ReleaseSchema, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let (m, _) = decode_typed::<M>(rel, &refs(frames), &Limits::default()).expect("typed decode");
    m.frames(rel)
}

/// The inherent `encode` of each message struct, as one trait for the
/// tests.
trait TypedEncode {
    fn frames(&self, rel: &'static ReleaseSchema) -> Vec<Vec<u8>>;
    fn value(&self, rel: &'static ReleaseSchema) -> Value;
}

macro_rules! typed_encode {
    ($($t:ty),*) => {$(
        impl TypedEncode for $t {
            fn frames(&self, rel: &'static ReleaseSchema) -> Vec<Vec<u8>> {
                self.encode(rel).expect("typed encode")
            }
            fn value(&self, rel: &'static ReleaseSchema) -> Value {
                self.to_value(rel).expect("to_value")
            }
        }
    )*};
}
typed_encode!(
    EngineCoreRequest,
    EngineCoreOutputs,
    UtilityOutput,
    EngineCoreReadyResponse,
    HandshakeStatus,
    EngineHandshakeMetadata,
    UtilityRequest,
    StartDpWave
);

/// (direct-encoded frames, frames of the converted-back value) of a case;
/// both decode back to the same typed struct.
fn both_ways<M: Message + TypedEncode + PartialEq + std::fmt::Debug>(
    rel: &'static ReleaseSchema,
    c: &Case,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let typed = |frames: &[Vec<u8>]| {
        decode_typed::<M>(rel, &refs(frames), &Limits::default())
            .unwrap_or_else(|e| panic!("{}: typed decode: {e}", c.id))
            .0
    };
    let m = typed(&c.frames);
    let direct = m.frames(rel);
    let via_value = encode_message(rel, c.kind, &m.value(rel)).unwrap_or_else(|e| panic!("{}: {e}", c.id));
    assert_eq!(typed(&direct), m, "{}: direct bytes decode to another struct", c.id);
    // `to_value` leaves unknown fields out, so compare what it keeps.
    assert_eq!(typed(&via_value).value(rel), m.value(rel), "{}: to_value bytes decode to another struct", c.id);
    (direct, via_value)
}

/// The accepted goldens whose float fields hold integers (mutants, encode
/// `equivalent`): re-encoded from the typed structs, they carry float64s.
const WIDENED: &[&str] = &["mutant/out_timestamp_int", "mutant/req_arrival_time_int", "mutant/sp_int_temperature"];

fn check_release(version: &str) -> (usize, usize) {
    let rel = engine_protocol::release(Dialect::Vllm, version).expect("table");
    let mut exact_hot = 0;
    let mut checked = 0;
    let mut drifted = 0;
    let mut widened = 0;
    for c in accepted_cases(version) {
        let (direct, via_value) = match c.kind {
            MessageKind::EngineCoreRequest => both_ways::<EngineCoreRequest>(rel, &c),
            MessageKind::EngineCoreOutputs => both_ways::<EngineCoreOutputs>(rel, &c),
            MessageKind::UtilityOutput => both_ways::<UtilityOutput>(rel, &c),
            MessageKind::EngineCoreReadyResponse => both_ways::<EngineCoreReadyResponse>(rel, &c),
            MessageKind::HandshakeHello | MessageKind::HandshakeReady => both_ways::<HandshakeStatus>(rel, &c),
            MessageKind::HandshakeInit => both_ways::<EngineHandshakeMetadata>(rel, &c),
            MessageKind::UtilityRequest => both_ways::<UtilityRequest>(rel, &c),
            MessageKind::StartDpWave => both_ways::<StartDpWave>(rel, &c),
            _ => continue,
        };
        checked += 1;
        // The typed value converts back to what the Value codec decoded,
        // except where a float field held an integer (the typed field is an
        // f64; see a_float_field_holding_an_integer_reencodes_as_a_float64).
        let decoded = decode_message(rel, c.kind, &refs(&c.frames), &Limits::default()).expect("decodes");
        let again = encode_message(rel, c.kind, &decoded.value).expect("value encodes");
        if via_value != again {
            assert!(
                !c.exact && WIDENED.contains(&c.id.as_str()),
                "{version}/{}: typed -> value -> bytes differs",
                c.id
            );
            widened += 1;
            continue;
        }
        if c.exact {
            assert_eq!(direct, c.frames, "{version}/{}: direct typed encode differs from vLLM's bytes", c.id);
            if matches!(c.kind, MessageKind::EngineCoreRequest | MessageKind::EngineCoreOutputs) {
                exact_hot += 1;
            }
        } else if decoded.drift.is_empty() {
            assert_eq!(direct, again, "{version}/{}: direct typed encode differs from the Value encoder", c.id);
        } else {
            // Unknown fields are written back (the Value encoder drops them):
            // decoding the direct bytes reports the same drift and the same
            // value.
            let back = decode_message(rel, c.kind, &refs(&direct), &Limits::default()).expect("re-decodes");
            assert_eq!(back.drift, decoded.drift, "{version}/{}: unknown fields not kept", c.id);
            assert_eq!(back.value, decoded.value, "{version}/{}", c.id);
            drifted += 1;
        }
    }
    assert!(drifted > 0, "no golden with unknown fields exercised");
    assert_eq!(widened, WIDENED.len(), "a case of WIDENED no longer differs");
    (exact_hot, checked)
}

#[test]
fn typed_encode_reproduces_every_exact_golden_of_0_32_0() {
    let (exact_hot, checked) = check_release("0.32.0");
    assert!(exact_hot >= 180, "only {exact_hot} exact request/output goldens checked");
    assert!(checked > exact_hot);
}

#[test]
fn typed_encode_reproduces_every_exact_golden_of_0_33_0() {
    let (exact_hot, checked) = check_release("0.33.0");
    assert!(exact_hot >= 150, "only {exact_hot} exact request/output goldens checked");
    assert!(checked > exact_hot);
}

#[test]
fn outputs_with_logprobs_reencode_byte_for_byte() {
    for id in ["output/batch_64_top5_logprobs", "output/batch_logprobs_aux_large"] {
        let frames = golden_frames("0.33.0", id);
        assert_eq!(typed_frames::<EngineCoreOutputs>(v033(), &frames), frames, "{id}");
        let (o, _) = decode_typed::<EngineCoreOutputs>(v033(), &refs(&frames), &Limits::default()).unwrap();
        assert!(o.outputs.iter().any(|x| x.new_logprobs.is_some()), "{id} carries logprobs");
    }
}

#[test]
fn a_request_built_with_the_typed_api_is_vllms_add_default() {
    // golden/vllm/0.32.0/request/add_default: EngineCoreRequest('req-default',
    // [1, 2, 3, 4], SamplingParams()) as vLLM 0.32.0 builds and encodes it
    // (its __post_init__ sets stop=[], stop_token_ids=[], bad_words=[],
    // skip_reading_prefix_cache=False).
    let req = EngineCoreRequest {
        request_id: "req-default".into(),
        prompt_token_ids: Some(vec![1, 2, 3, 4].into()),
        sampling_params: Some(SamplingParams {
            stop: Some(StopStrings::Many(vec![])),
            stop_token_ids: Some(IntList::new()),
            bad_words: Some(vec![]),
            skip_reading_prefix_cache: Some(false),
            ..SamplingParams::default()
        }),
        arrival_time: 1700000000.25,
        ..EngineCoreRequest::default()
    };
    assert_eq!(req.encode(v032()).unwrap(), golden_frames("0.32.0", "request/add_default"));
}

#[test]
fn a_field_the_target_release_lacks_is_an_error_not_dropped() {
    let out = EngineCoreOutputs {
        outputs: vec![EngineCoreOutput {
            request_id: "r".into(),
            finish_reason: Some(FinishReason::Error),
            error: Some(RequestError { code: "oom".into(), message: "out of memory".into(), ..Default::default() }),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert!(out.encode(v033()).is_ok());
    let e = out.encode(v032()).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, "EngineCoreOutputs.outputs[0].error"));
    let e = out.to_value(v032()).unwrap_err();
    assert_eq!(e.path, "EngineCoreOutputs.outputs[0].error");
    // Left at its default, the field is simply not written for 0.32.0.
    let mut ok = out.clone();
    ok.outputs[0].error = None;
    let frames = ok.encode(v032()).unwrap();
    let d = decode(v032(), MessageKind::EngineCoreOutputs, &frames).unwrap();
    assert!(d.drift.is_empty());
}

#[test]
fn unknown_trailing_fields_survive_decode_typed_encode() {
    // vLLM 0.33.0's outputs carry a 19th element (`error`) that the 0.32.0
    // table does not know: decoded as 0.32.0 it is drift, kept in
    // `unknown`, and written back.
    let frames = golden_frames("0.33.0", "output/batch_64");
    let (o, drift) = decode_typed::<EngineCoreOutputs>(v032(), &refs(&frames), &Limits::default()).unwrap();
    assert_eq!(drift.len(), 64);
    assert_eq!(drift[0], "EngineCoreOutputs.outputs[0][18]");
    assert_eq!(o.outputs[0].unknown, vec![Value::Nil]);
    assert_eq!(o.encode(v032()).unwrap(), frames);
}

#[test]
fn unknown_map_keys_survive_decode_typed_encode() {
    // A SamplingParams key no table has, appended to add_default's map.
    let mut frames = golden_frames("0.32.0", "request/add_default");
    let p = &mut frames[1];
    let at = p.windows(3).position(|w| w == [0xde, 0x00, 0x04]).expect("map16 of 4 entries");
    p[at + 2] = 5;
    let tail_at = at + 3; // the new entry goes first
    let mut key = vec![0xaa];
    key.extend_from_slice(b"future_knb");
    key.push(0x07);
    p.splice(tail_at..tail_at, key);
    let (req, drift) = decode_typed::<EngineCoreRequest>(v032(), &refs(&frames), &Limits::default()).unwrap();
    assert_eq!(drift, ["EngineCoreRequest.sampling_params.future_knb"]);
    let sp = req.sampling_params.as_ref().unwrap();
    assert_eq!(sp.unknown, vec![("future_knb".to_string(), Value::Int(7))]);
    // Known keys go first, in declaration order, then the unknown one.
    let again = req.encode(v032()).unwrap();
    let d = decode(v032(), MessageKind::EngineCoreRequest, &again).unwrap();
    assert_eq!(d.drift, drift);
    let (back, _) = decode_typed::<EngineCoreRequest>(v032(), &refs(&again), &Limits::default()).unwrap();
    assert_eq!(back, req);
}

#[test]
fn a_wrongly_typed_value_names_the_path_of_the_field() {
    let frames = golden_frames("0.32.0", "request/add_default");
    let mut v = decode(v032(), MessageKind::EngineCoreRequest, &frames).unwrap().value;
    let Value::Struct(req) = &mut v else { panic!("struct") };
    let Some(Value::Struct(sp)) = req.get_mut("sampling_params") else { panic!("sampling params") };
    sp.set("temperature", Value::Str("hot".into()));
    let e = EngineCoreRequest::from_value(v032(), &v).unwrap_err();
    assert_eq!(e.class, RejectClass::Type);
    assert_eq!(e.to_string(), "EngineCoreRequest.sampling_params.temperature: expected float, got str (type)");
}

#[test]
fn a_message_of_another_kind_is_refused_with_its_name() {
    let frames = golden_frames("0.33.0", "output/batch_64");
    let v = decode(v033(), MessageKind::EngineCoreOutputs, &frames).unwrap().value;
    let e = EngineCoreRequest::from_value(v033(), &v).unwrap_err();
    assert_eq!(e.class, RejectClass::Type);
    assert!(e.to_string().starts_with("EngineCoreRequest: expected struct EngineCoreRequest"), "{e}");
}

#[test]
fn typed_decode_rejects_exactly_as_the_value_decoder() {
    // A truncated payload: same class and path as decode_message.
    let mut frames = golden_frames("0.33.0", "output/batch_64");
    frames[0].truncate(40);
    let want = decode(v033(), MessageKind::EngineCoreOutputs, &frames).unwrap_err();
    let got = decode_typed::<EngineCoreOutputs>(v033(), &refs(&frames), &Limits::default()).unwrap_err();
    assert_eq!(got, want);
}

#[test]
fn a_literal_outside_its_values_is_refused_by_the_direct_encoder() {
    let mut req = EngineCoreRequest {
        request_id: "r".into(),
        pooling_params: Some(typed::PoolingParams { task: Some("summarize".into()), ..Default::default() }),
        ..Default::default()
    };
    let e = req.encode(v033()).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Enum, "EngineCoreRequest.pooling_params.task"));
    req.pooling_params.as_mut().unwrap().task = Some("embed".into());
    assert!(req.encode(v033()).is_ok());
}

#[test]
fn a_float_field_holding_an_integer_reencodes_as_a_float64() {
    // mutant/sp_int_temperature: `temperature` sent as the integer 0 (as
    // msgspec writes SamplingParams(temperature=0)); vLLM accepts it.
    let frames = golden_frames("0.33.0", "mutant/sp_int_temperature");
    let (req, _) = decode_typed::<EngineCoreRequest>(v033(), &refs(&frames), &Limits::default()).unwrap();
    let sp = req.sampling_params.as_ref().unwrap();
    let again = req.encode(v033()).unwrap();
    assert_ne!(again, frames);
    let d = decode(v033(), MessageKind::EngineCoreRequest, &again).unwrap();
    let Value::Struct(r) = &d.value else { panic!("struct") };
    assert_eq!(r.struct_field("sampling_params").unwrap().get("temperature"), Some(&Value::Float(sp.temperature)));
}

#[test]
fn a_request_built_as_a_value_and_as_a_typed_struct_encode_to_the_same_frames() {
    use engine_testkit::build::Request;
    for rel in [v032(), v033()] {
        let built = Request::new(rel)
            .id("req-b")
            .prompt(vec![7, 8, 9])
            .arrival(12.5)
            .sampling("max_tokens", Value::Int(4))
            .sampling("temperature", Value::Float(0.0))
            .frames()
            .unwrap();
        let typed = EngineCoreRequest {
            request_id: "req-b".into(),
            prompt_token_ids: Some(vec![7, 8, 9].into()),
            sampling_params: Some(SamplingParams {
                max_tokens: Some(4),
                temperature: 0.0,
                ..SamplingParams::default()
            }),
            arrival_time: 12.5,
            ..EngineCoreRequest::default()
        };
        assert_eq!(typed.encode(rel).unwrap(), built, "{}", rel.version);
    }
}

#[test]
fn an_output_batch_built_as_a_value_and_as_a_typed_struct_encode_to_the_same_frames() {
    use engine_testkit::build::{OutputBatch, OutputBuilder};
    for rel in [v032(), v033()] {
        let built = OutputBatch::new(rel)
            .output(OutputBuilder::new(rel, "a", vec![1, 2]))
            .output(OutputBuilder::new(rel, "b", vec![3]).finish(FinishReason::Stop))
            .field("engine_index", Value::Int(1))
            .frames()
            .unwrap();
        let typed = EngineCoreOutputs {
            engine_index: 1,
            timestamp: 1.0,
            outputs: vec![
                EngineCoreOutput { request_id: "a".into(), new_token_ids: vec![1, 2].into(), ..Default::default() },
                EngineCoreOutput {
                    request_id: "b".into(),
                    new_token_ids: vec![3].into(),
                    finish_reason: Some(FinishReason::Stop),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(typed.encode(rel).unwrap(), built, "{}", rel.version);
    }
}

#[test]
fn a_field_set_among_absent_ones_is_written_in_its_own_place() {
    // The direct encoder writes a run of absent optional fields in one go
    // when all are absent; each field of such a run set alone must still be
    // written where the value encoder writes it.
    use engine_protocol::typed::StopReason;
    let rel = v033();
    let outputs = [
        EngineCoreOutput { finish_reason: Some(FinishReason::Length), ..Default::default() },
        EngineCoreOutput { stop_reason: Some(StopReason::Text("x".into())), ..Default::default() },
        EngineCoreOutput { stop_reason: Some(StopReason::TokenId(7)), ..Default::default() },
        EngineCoreOutput { kv_transfer_params: Some(vec![("k".into(), Value::Int(1))]), ..Default::default() },
        EngineCoreOutput { trace_headers: Some(vec![("a".into(), "b".into())]), ..Default::default() },
        EngineCoreOutput { mm_cache_miss_hashes: Some(vec!["h".into()]), ..Default::default() },
        EngineCoreOutput { events: Some(vec![]), ..Default::default() },
    ];
    for o in outputs {
        let batch = EngineCoreOutputs {
            outputs: vec![EngineCoreOutput { request_id: "r".into(), new_token_ids: vec![5].into(), ..o }],
            ..Default::default()
        };
        let value = batch.to_value(rel).unwrap();
        let via_value = encode_message(rel, MessageKind::EngineCoreOutputs, &value).unwrap();
        assert_eq!(batch.encode(rel).unwrap(), via_value, "{batch:?}");
    }
    let requests = [
        EngineCoreRequest { cache_salt: Some("salt".into()), ..Default::default() },
        EngineCoreRequest { data_parallel_rank: Some(1), ..Default::default() },
        EngineCoreRequest { prompt_is_token_ids: Some(vec![true]), ..Default::default() },
        EngineCoreRequest { reasoning_ended: Some(false), ..Default::default() },
        EngineCoreRequest { session_id: Some("s".into()), ..Default::default() },
    ];
    for r in requests {
        let request = EngineCoreRequest {
            request_id: "r".into(),
            prompt_token_ids: Some(vec![1, 2].into()),
            sampling_params: Some(SamplingParams::default()),
            ..r
        };
        let value = request.to_value(rel).unwrap();
        let via_value = encode_message(rel, MessageKind::EngineCoreRequest, &value).unwrap();
        assert_eq!(request.encode(rel).unwrap(), via_value, "{request:?}");
    }
}
