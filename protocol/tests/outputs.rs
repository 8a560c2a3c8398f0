//! EngineCoreOutputs: live-engine bytes, the typed structs, release drift,
//! and the frame layer of outputs (aux frames, the death sentinel).

mod common;

use common::*;
use engine_protocol::is_engine_dead;
use engine_protocol::typed::{decode_typed, EngineCoreOutputs, FinishReason, StopReason};
use engine_protocol::Numbers;
use engine_protocol::{encode_message, MessageKind, RejectClass};
use engine_protocol::{Limits, ReleaseSchema};

/// The batch as the typed struct.
fn typed(rel: &'static ReleaseSchema, frames: &[Vec<u8>]) -> EngineCoreOutputs {
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    decode_typed::<EngineCoreOutputs>(rel, &refs, &Limits::default()).expect("accepted").0
}

#[test]
fn live_length_output_decodes_as_the_final_step() {
    let frames = vec![unhex(LIVE_LENGTH_OUTPUT)];
    let d = decode(v032(), MessageKind::EngineCoreOutputs, &frames).expect("accepted");
    let batch = typed(v032(), &frames);
    assert_eq!(batch.weight_version.as_deref(), Some("default"));
    let outs = &batch.outputs;
    assert_eq!(outs.len(), 1);
    assert_eq!(outs[0].request_id, "r1");
    assert_eq!(outs[0].new_token_ids, [314]);
    assert_eq!(outs[0].finish_reason, Some(FinishReason::Length));
    assert_eq!(outs[0].stop_reason, None);
    assert_eq!(encode_message(v032(), MessageKind::EngineCoreOutputs, &d.value).unwrap(), frames);
}

#[test]
fn a_0_33_reader_accepts_0_32_outputs_with_the_error_field_defaulted() {
    // 18-element outputs are one short of 0.33's 19: the trailing default fills.
    let d = decode(v033(), MessageKind::EngineCoreOutputs, &[unhex(LIVE_LENGTH_OUTPUT)]).expect("accepted");
    assert!(d.drift.is_empty());
    assert_eq!(typed(v033(), &[unhex(LIVE_LENGTH_OUTPUT)]).outputs[0].error, None);
}

#[test]
fn a_0_32_reader_reports_the_0_33_error_field_as_drift() {
    let frames = golden_frames("0.33.0", "output/error_engine_paused");
    let d = decode(v032(), MessageKind::EngineCoreOutputs, &frames).expect("accepted");
    assert_eq!(d.drift, ["EngineCoreOutputs.outputs[0][18]"]);
    let d33 = decode(v033(), MessageKind::EngineCoreOutputs, &frames).unwrap();
    assert!(d33.drift.is_empty());
    let error = typed(v033(), &frames).outputs[0].error.clone().expect("error field");
    assert_eq!((error.code.as_str(), error.retryable), ("engine_paused", true));
}

#[test]
fn inline_logprobs_keep_the_real_engine_dtypes() {
    let frames = golden_frames("0.33.0", "output/logprobs_inline");
    let out = typed(v033(), &frames).outputs.remove(0);
    let lp = out.new_logprobs.expect("logprobs");
    let (ids, lps, ranks) = (&lp.logprob_token_ids, &lp.logprobs, &lp.sampled_token_ranks);
    assert_eq!((ids.dtype.as_str(), lps.dtype.as_str(), ranks.dtype.as_str()), ("<i4", "<f4", "<i8"));
    assert_eq!(ids.shape.len(), 2);
    assert!(matches!(lps.numbers(), Some(Numbers::Floats(_))));
}

#[test]
fn aux_frame_logprobs_resolve_by_index_and_reencode_to_the_same_frames() {
    let frames = golden_frames("0.33.0", "output/logprobs_aux");
    assert!(frames.len() >= 2, "an aux-frame case");
    let d = decode(v033(), MessageKind::EngineCoreOutputs, &frames).unwrap();
    assert_eq!(encode_message(v033(), MessageKind::EngineCoreOutputs, &d.value).unwrap(), frames);
}

#[test]
fn aux_index_beyond_the_frames_is_a_frames_error() {
    let mut frames = golden_frames("0.33.0", "output/logprobs_aux");
    frames.truncate(1);
    let e = decode(v033(), MessageKind::EngineCoreOutputs, &frames).unwrap_err();
    assert_eq!(e.class, RejectClass::Frames);
    assert!(e.path.starts_with("EngineCoreOutputs.outputs[0].new_logprobs."), "{e}");
}

#[test]
fn unreferenced_extra_frame_is_accepted() {
    let mut frames = vec![unhex(LIVE_LENGTH_OUTPUT)];
    frames.push(vec![1, 2, 3]);
    assert!(decode(v033(), MessageKind::EngineCoreOutputs, &frames).is_ok());
}

#[test]
fn stop_reason_is_an_int_or_a_string() {
    let tok = golden_frames("0.33.0", "output/finish_stop_token");
    let r = typed(v033(), &tok).outputs.remove(0).stop_reason;
    assert!(matches!(r, Some(StopReason::TokenId(_))), "{r:?}");
    let text = golden_frames("0.33.0", "output/finish_stop_string");
    let r = typed(v033(), &text).outputs.remove(0).stop_reason;
    assert!(matches!(r, Some(StopReason::Text(_))), "{r:?}");
}

#[test]
fn finish_reason_outside_the_enum_is_an_enum_error() {
    // LIVE_LENGTH_OUTPUT with finish_reason 1 changed to 7.
    let hex = LIVE_LENGTH_OUTPUT.replacen("cd013ac0c0c001", "cd013ac0c0c007", 1);
    let e = decode(v033(), MessageKind::EngineCoreOutputs, &[unhex(&hex)]).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Enum, "EngineCoreOutputs.outputs[0].finish_reason"));
}

#[test]
fn death_sentinel_is_not_an_outputs_message() {
    let frames: [&[u8]; 1] = [b"ENGINE_CORE_DEAD"];
    assert!(is_engine_dead(&frames));
    // Read as MessagePack, `E` (0x45) is the integer 69: not an outputs array.
    let e = decode(v033(), MessageKind::EngineCoreOutputs, &[b"ENGINE_CORE_DEAD".to_vec()]).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Type, "EngineCoreOutputs"));
}

#[test]
fn trailing_bytes_after_the_payload_are_malformed() {
    let mut p = unhex(LIVE_LENGTH_OUTPUT);
    p.push(0xc0);
    let e = decode(v033(), MessageKind::EngineCoreOutputs, &[p]).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

// ---- tensor shapes with a dimension to infer (vLLM's numpy `reshape` and
// torch `view`), and the arrays decode hooks unpack.
// The frames are those of the golden mutants; their verdicts come from
// vLLM's decoder.

fn shape_view(version: &str, id: &str, kind: MessageKind) -> serde_json::Value {
    let rel = if version == "0.32.0" { v032() } else { v033() };
    let d = decode(rel, kind, &golden_frames(version, id)).unwrap_or_else(|e| panic!("{id}: {e}"));
    engine_protocol::view::to_view(kind.payload_type(rel), &d.value)
}

#[test]
fn a_minus_one_dimension_is_inferred_and_the_view_keeps_the_shape_as_sent() {
    for version in ["0.32.0", "0.33.0", "0.34.0"] {
        let v = shape_view(version, "mutant/lp_shape_minus_one", MessageKind::EngineCoreOutputs);
        let ids = &v["outputs"][0]["new_logprobs"]["logprob_token_ids"];
        assert_eq!(ids["shape"], serde_json::json!([1, -1]));
        assert_eq!(ids["data"].as_array().unwrap().len(), 6);
        // numpy takes any negative dimension as the unknown one
        let v = shape_view(version, "mutant/lp_shape_minus_two", MessageKind::EngineCoreOutputs);
        assert_eq!(v["outputs"][0]["new_logprobs"]["logprob_token_ids"]["shape"], serde_json::json!([-2, 6]));
        // an aux frame, and torch tensors
        shape_view(version, "mutant/lp_aux_shape_minus_one", MessageKind::EngineCoreOutputs);
        let v = shape_view(version, "mutant/embeds_shape_minus_one", MessageKind::EngineCoreRequest);
        assert_eq!(v["prompt_embeds"]["shape"], serde_json::json!([-1, 4]));
        assert_eq!(v["prompt_embeds"]["data"].as_array().unwrap().len(), 8);
        shape_view(version, "mutant/embeds_aux_shape_minus_one", MessageKind::EngineCoreRequest);
        // an empty numpy buffer infers 0
        let v = shape_view(version, "mutant/lp_shape_two_minus_one_empty_buffer", MessageKind::EngineCoreOutputs);
        assert_eq!(v["outputs"][0]["new_logprobs"]["logprob_token_ids"]["data"], serde_json::json!([]));
    }
}

#[test]
fn shapes_vllm_refuses_are_rejected_with_its_class() {
    let cases = [
        ("mutant/lp_shape_two_unknown", MessageKind::EngineCoreOutputs, RejectClass::Validation),
        ("mutant/lp_shape_minus_one_not_dividing", MessageKind::EngineCoreOutputs, RejectClass::Frames),
        ("mutant/lp_shape_minus_one_zero_dim", MessageKind::EngineCoreOutputs, RejectClass::Frames),
        ("mutant/lp_shape_zero_minus_one_empty_buffer", MessageKind::EngineCoreOutputs, RejectClass::Frames),
        ("mutant/embeds_shape_two_unknown", MessageKind::EngineCoreRequest, RejectClass::Validation),
        ("mutant/embeds_shape_minus_two", MessageKind::EngineCoreRequest, RejectClass::Validation),
        ("mutant/embeds_shape_minus_one_not_dividing", MessageKind::EngineCoreRequest, RejectClass::Frames),
        ("mutant/embeds_shape_minus_one_empty_buffer", MessageKind::EngineCoreRequest, RejectClass::Validation),
        ("mutant/embeds_empty_buffer_without_zero_dim", MessageKind::EngineCoreRequest, RejectClass::Validation),
        ("mutant/embeds_not_multiple_of_item", MessageKind::EngineCoreRequest, RejectClass::Frames),
    ];
    for (id, kind, class) in cases {
        let e = decode(v033(), kind, &golden_frames("0.33.0", id)).expect_err(id);
        assert_eq!(e.class, class, "{id}: {e}");
        assert!(e.path.contains("prompt_embeds") || e.path.contains("logprob_token_ids"), "{id}: {e}");
    }
    // torch accepts an empty buffer with a 0 dimension
    decode(v033(), MessageKind::EngineCoreRequest, &golden_frames("0.33.0", "mutant/embeds_empty_buffer_zero_dim"))
        .expect("an empty tensor");
}

#[test]
fn short_unpacked_arrays_are_missing_fields_and_long_ones_wrong_types() {
    // docs/case-format.md §5.2: fewer elements than fields without default is
    // missing-field, more than the schema allows is type.
    let cases = [
        ("mutant/util_result_one", RejectClass::MissingField),
        ("mutant/util_result_empty", RejectClass::MissingField),
        ("mutant/util_result_three", RejectClass::Type),
        ("mutant/lp_tensor_two_elements", RejectClass::MissingField),
        ("mutant/lp_tensor_four_elements", RejectClass::Type),
    ];
    for (id, class) in cases {
        for (version, rel) in [("0.32.0", v032()), ("0.33.0", v033())] {
            let e = decode(rel, MessageKind::EngineCoreOutputs, &golden_frames(version, id)).expect_err(id);
            assert_eq!(e.class, class, "{version} {id}: {e}");
        }
    }
    let e =
        decode(v033(), MessageKind::EngineCoreRequest, &golden_frames("0.33.0", "mutant/embeds_tensor_two_elements"))
            .unwrap_err();
    assert_eq!(e.class, RejectClass::MissingField, "{e}");
}
