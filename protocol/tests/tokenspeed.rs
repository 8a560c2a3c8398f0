//! TokenSpeed 0.1.1: the tagged positional layout, the engine's frame rules,
//! its receive path (the normalised contract pinned by the goldens'
//! `finalized`), the engine configuration it depends on, and error paths
//! named in TokenSpeed's terms (docs/tokenspeed-wire.md).

mod common;

use common::unhex;
use engine_protocol::decode_payload;
use engine_protocol::schema::{tokenspeed, Ty};
use engine_protocol::validate::tokenspeed::{receive, EngineConfig, TOP_K_ALL};
use engine_protocol::view::{diff, from_view_in, to_view};
use engine_protocol::Dialect;
use engine_protocol::{
    decode_message, decode_message_with, encode_message, release, Limits, MessageKind, RejectClass, ReleaseSchema,
    Value,
};
use engine_testkit::build::{add_frames, refs as frame_refs, tokenspeed as tokenspeed_table};
use engine_testkit::corpus::{golden_dir, golden_json, json_files, read_json};
use engine_testkit::hex::decode_frames;
use serde_json::Value as Json;

fn ts() -> &'static ReleaseSchema {
    tokenspeed_table()
}

fn golden(id: &str) -> Json {
    golden_json("tokenspeed", "0.1.1", id)
}

fn frames_of(case: &Json) -> Vec<Vec<u8>> {
    decode_frames(&case["frames"]).expect("hex frames")
}

fn decode(kind: MessageKind, frames: &[Vec<u8>]) -> Result<engine_protocol::Decoded, engine_protocol::Error> {
    engine_testkit::build::decode(ts(), kind, frames)
}

/// The ADD payload of §15.1 of the TokenSpeed wire note: SMG's 11-element
/// prefix for rid `r1`, ids `[1,2,3]`, `max_new_tokens` 4, `stream` true.
const SMG_R01: &str = "9bb9546f6b656e697a656447656e6572617465526571496e707574a27231c0c093010203dc001d04c0c0cb3ff0000000000000cb3ff0000000000000ce40000000cb0000000000000000cb0000000000000000cb0000000000000000cb3ff000000000000000c0c0c0c0c2c3c3c2c0c0c0c0c0c0019000c3c2ff00c0c3";

fn add(payload: &[u8]) -> Vec<Vec<u8>> {
    add_frames(payload)
}

#[test]
fn smgs_eleven_element_prefix_decodes_with_the_rest_defaulted() {
    let d = decode(MessageKind::EngineCoreRequest, &add(&unhex(SMG_R01))).expect("accepted");
    assert!(d.drift.is_empty());
    let Value::Struct(req) = &d.value else { panic!("a struct") };
    assert_eq!(req.str_field("rid"), Some("r1"));
    assert_eq!(req.get("stream"), Some(&Value::Bool(true)));
    assert_eq!(req.get("data_parallel_rank"), Some(&Value::Nil));
    let sp = req.struct_field("sampling_params").expect("sampling_params");
    assert_eq!(sp.int_field("max_new_tokens"), Some(4));
    assert_eq!(sp.int_field("top_k"), Some(TOP_K_ALL));
}

#[test]
fn the_encoder_writes_the_tag_first_and_every_field() {
    let d = decode(MessageKind::EngineCoreRequest, &add(&unhex(SMG_R01))).expect("accepted");
    let frames = encode_message(ts(), MessageKind::EngineCoreRequest, &d.value).expect("encodes");
    assert_eq!(frames[0], [0x00]);
    // 25 elements: the tag and the 24 fields of 0.1.1.
    assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x19]);
    assert_eq!(&frames[1][3..4], &[0xb9]);
    assert_eq!(&frames[1][4..29], b"TokenizedGenerateReqInput");
    assert_eq!(decode(MessageKind::EngineCoreRequest, &frames).expect("round trip").value, d.value);
}

#[test]
fn the_encoder_reproduces_tokenspeeds_output_batch_byte_for_byte() {
    // TokenSpeed wire note §15.6: a terminal "stop" row with the load tail.
    let case = golden("output/load_tail");
    let value = from_view_in(ts(), "BatchTokenIDOutSlim", ts().engine_core_outputs, &case["value"]).expect("a view");
    let frames = encode_message(ts(), MessageKind::EngineCoreOutputs, &value).expect("encodes");
    assert_eq!(frames, frames_of(&case));
    assert_eq!(
        hex::encode(&frames[0]),
        "9eb34261746368546f6b656e49444f7574536c696d91a2723191910b91a473746f709103910291009190919000050278cd03e8"
    );
}

#[test]
fn a_wrong_tag_is_an_enum_error_and_a_non_string_tag_a_type_error() {
    // Byte 1 of the payload is the tag's str header (0xb9, 25 bytes).
    let mut wrong = unhex(SMG_R01);
    wrong[2] = b't';
    let e = decode(MessageKind::EngineCoreRequest, &add(&wrong)).unwrap_err();
    assert_eq!(e.class, RejectClass::Enum, "{e}");
    assert_eq!(e.path, "TokenizedGenerateReqInput[0]");
    let mut not_a_string = unhex(SMG_R01);
    not_a_string.splice(1..27, [0x07]);
    let e = decode(MessageKind::EngineCoreRequest, &add(&not_a_string)).unwrap_err();
    assert_eq!(e.class, RejectClass::Type, "{e}");
}

#[test]
fn a_request_shorter_than_its_last_required_field_is_missing_a_field() {
    // Tag and four defaulted fields before `sampling_params`: 5 elements.
    let short = unhex("95b9546f6b656e697a656447656e6572617465526571496e707574a27231c0c0c0");
    let e = decode(MessageKind::EngineCoreRequest, &add(&short)).unwrap_err();
    assert_eq!(e.class, RejectClass::MissingField, "{e}");
    assert!(e.detail.contains("at least length 6"), "{e}");
    // With an empty SamplingParams prefix it is complete.
    let six = unhex("96b9546f6b656e697a656447656e6572617465526571496e707574a27231c0c0c090");
    assert!(decode(MessageKind::EngineCoreRequest, &add(&six)).is_ok());
}

#[test]
fn drift_of_a_tagged_struct_is_numbered_by_wire_position_tag_counting_as_zero() {
    let d = decode(MessageKind::EngineCoreRequest, &frames_of(&golden("mutant/req_extra_trailing"))).expect("accepted");
    assert_eq!(d.drift, ["TokenizedGenerateReqInput[25]", "TokenizedGenerateReqInput[26]"]);
    // The nested SamplingParams is untagged: its 30th element is [29].
    let d = decode(MessageKind::EngineCoreRequest, &frames_of(&golden("mutant/sp_extra_trailing"))).expect("accepted");
    assert_eq!(
        d.drift,
        ["TokenizedGenerateReqInput.sampling_params[29]", "TokenizedGenerateReqInput.sampling_params[30]"]
    );
}

#[test]
fn type_errors_name_the_path_in_tokenspeeds_terms() {
    // SMG_R01 with temperature (the float64 at offset 42) replaced by "x".
    let payload = unhex(SMG_R01);
    let at = 42;
    assert_eq!(payload[at], 0xcb);
    let mut bad = payload.clone();
    bad.splice(at..at + 9, [0xa1, b'x']);
    let e = decode(MessageKind::EngineCoreRequest, &add(&bad)).unwrap_err();
    assert_eq!(e.to_string(), "TokenizedGenerateReqInput.sampling_params.temperature: expected float, got str (type)");
}

#[test]
fn the_type_byte_decides_how_the_engine_reads_the_payload() {
    // A request payload behind the ABORT byte is read as a list of rids.
    let e = decode(MessageKind::EngineCoreRequest, &[vec![0x01], unhex(SMG_R01)]).unwrap_err();
    assert_eq!(e.class, RejectClass::Type, "{e}");
    assert_eq!(e.path, "AbortRequest[2]");
    // vLLM's START_DP_WAVE and UTILITY bytes do not exist in TokenSpeed.
    for byte in [0x02, 0x03, 0x09] {
        let e = decode(MessageKind::EngineCoreRequest, &[vec![byte], unhex(SMG_R01)]).unwrap_err();
        assert_eq!(e.class, RejectClass::Frames, "{e}");
    }
    // One frame is not enough, whatever it holds.
    let e = decode(MessageKind::AbortRequest, &[vec![0x01]]).unwrap_err();
    assert_eq!(e.class, RejectClass::Frames, "{e}");
}

#[test]
fn tokenspeed_has_no_utility_or_wave_messages() {
    for kind in [MessageKind::UtilityRequest, MessageKind::StartDpWave, MessageKind::UtilityOutput] {
        assert!(!kind.in_release(ts()));
        assert_eq!(decode(kind, &[vec![0x02], vec![0x90]]).unwrap_err().class, RejectClass::Frames);
        assert!(encode_message(ts(), kind, &Value::Array(vec![])).is_err());
    }
}

#[test]
fn message_names_follow_the_dialect() {
    assert_eq!(MessageKind::parse("TokenizedGenerateReqInput"), Some(MessageKind::EngineCoreRequest));
    assert_eq!(MessageKind::parse("BatchTokenIDOutSlim"), Some(MessageKind::EngineCoreOutputs));
    assert_eq!(MessageKind::EngineCoreRequest.name_in(ts()), "TokenizedGenerateReqInput");
    assert_eq!(MessageKind::EngineCoreOutputs.name_in(ts()), "BatchTokenIDOutSlim");
    let v033 = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    assert_eq!(MessageKind::EngineCoreRequest.name_in(v033), "EngineCoreRequest");
    assert_eq!(MessageKind::AbortRequest.name_in(ts()), "AbortRequest");
}

#[test]
fn init_is_read_from_the_last_frame_and_needs_both_addresses() {
    let d = decode(MessageKind::HandshakeInit, &frames_of(&golden("mutant/init_two_frames"))).expect("accepted");
    assert!(matches!(d.value, Value::Struct(_)));
    let e = decode(MessageKind::HandshakeInit, &frames_of(&golden("handshake/init_no_outputs"))).unwrap_err();
    assert_eq!(e.class, RejectClass::Validation, "{e}");
}

#[test]
fn the_ready_response_takes_block_size_as_drift() {
    let d = decode(MessageKind::EngineCoreReadyResponse, &frames_of(&golden("mutant/ready_block_size"))).expect("ok");
    assert_eq!(d.drift, ["EngineCoreReadyResponse.block_size"]);
}

#[test]
fn the_engine_configuration_decides_the_rules_that_depend_on_it() {
    let out_of_vocab = frames_of(&golden("request/add_logit_bias_out_of_vocab"));
    let logprobs = frames_of(&golden("request/add_return_logprob"));
    let with = |frames: &[Vec<u8>], engine: &EngineConfig| {
        let refs = frame_refs(frames);
        decode_message_with(ts(), MessageKind::EngineCoreRequest, &refs, &Limits::default(), engine)
    };
    // The goldens' engine: vocabulary 512, output logprobs enabled.
    assert_eq!(EngineConfig::default(), EngineConfig::CONFORMANCE);
    assert_eq!(with(&out_of_vocab, &EngineConfig::CONFORMANCE).unwrap_err().class, RejectClass::Validation);
    assert!(with(&logprobs, &EngineConfig::CONFORMANCE).is_ok());
    // A larger vocabulary admits key 600; no vocabulary checks only the syntax.
    let big = EngineConfig { vocab_size: Some(32_000), ..EngineConfig::CONFORMANCE };
    assert!(with(&out_of_vocab, &big).is_ok());
    let unknown = EngineConfig { vocab_size: None, ..EngineConfig::CONFORMANCE };
    assert!(with(&out_of_vocab, &unknown).is_ok());
    assert!(with(&frames_of(&golden("request/add_logit_bias_not_a_number")), &unknown).is_err());
    // Without --enable-output-logprobs a logprob request is refused.
    let no_logprobs = EngineConfig { enable_output_logprobs: false, ..EngineConfig::CONFORMANCE };
    assert_eq!(with(&logprobs, &no_logprobs).unwrap_err().class, RejectClass::Validation);
}

/// Every request case TokenSpeed's receive path got through (accepted or
/// aborted) records the request as the engine then held it; the receive
/// path here must arrive at the same sampling parameters, the same resolved
/// `logprob_start_len`, and the same decision to abort, in both versions
/// (each with its own receive rules).
#[test]
fn the_receive_path_finalizes_requests_as_tokenspeed_does() {
    for version in ["0.1.1", "git-57b49061"] {
        let rel = release(Dialect::TokenSpeed, version).expect("a TokenSpeed release");
        finalizes_requests_as_tokenspeed_does(rel);
    }
}

fn finalizes_requests_as_tokenspeed_does(rel: &'static ReleaseSchema) {
    let rules = tokenspeed::receive_rules(rel).expect("receive rules");
    let dir = golden_dir().join(format!("tokenspeed/{}/request", rel.version));
    let sp_ty: &'static Ty = Box::leak(Box::new(Ty::Struct(&tokenspeed::SAMPLING_PARAMS)));
    let mut checked = 0;
    let mut dropped = 0;
    let mut problems = Vec::new();
    for path in json_files(&dir).expect("request dir") {
        let case = read_json(&path).expect("a case file");
        let id = case["case"].as_str().expect("id").to_string();
        let frames = frames_of(&case);
        let refs = frame_refs(&frames[1..]);
        let d = decode_payload("TokenizedGenerateReqInput", rel.engine_core_request, &refs, &Limits::default())
            .unwrap_or_else(|e| panic!("{id}: the payload decodes: {e}"));
        let Value::Struct(req) = &d.value else { panic!("{id}: a struct") };
        let got = receive(req, rules, &EngineConfig::CONFORMANCE);
        let Some(fin) = case.get("finalized") else {
            // The engine dropped it (a nil seed and a rid that is no string).
            assert_eq!(case["provenance"]["engine_outcome"], "dropped", "{id}");
            assert!(got.is_err(), "{id}: the receive path must drop it");
            dropped += 1;
            continue;
        };
        let got = got.unwrap_or_else(|v| panic!("{id}: dropped: {}", v.message));
        if let Some((p, what)) = diff(&fin["sampling_params"], &to_view(sp_ty, &Value::Struct(got.sampling_params))) {
            problems.push(format!("{id}: sampling_params{p}: {what}"));
        }
        if fin["logprob_start_len"].as_i64().map(i128::from) != Some(got.logprob_start_len) {
            problems.push(format!("{id}: logprob_start_len {} vs {}", fin["logprob_start_len"], got.logprob_start_len));
        }
        if fin["validation_error"].is_null() != got.validation_error.is_none() {
            problems.push(format!("{id}: validation_error {} vs {:?}", fin["validation_error"], got.validation_error));
        }
        checked += 1;
    }
    assert!(checked >= 80, "{}: only {checked} finalized requests", rel.version);
    // The unseeded requests whose rid is no string (nil, a list); at 08-03
    // also the greedy one, which 0.1.1's seed pin rescues.
    let want = if rules.pin_greedy_seed { 2 } else { 3 };
    assert_eq!(dropped, want, "{}: the unseeded requests without a string rid", rel.version);
    assert!(problems.is_empty(), "{}: receive path differs from TokenSpeed's:\n{}", rel.version, problems.join("\n"));
}

#[test]
fn greedy_requests_are_pinned_to_seed_zero_and_unseeded_ones_take_the_rids_crc() {
    // add_unnormalized_greedy: temperature 0 with top_k -1, not normalised.
    let case = golden("request/add_unnormalized_greedy");
    let frames = frames_of(&case);
    let refs = frame_refs(&frames[1..]);
    let d = decode_payload("TokenizedGenerateReqInput", ts().engine_core_request, &refs, &Limits::default()).unwrap();
    let Value::Struct(req) = &d.value else { panic!("a struct") };
    let fin = receive(req, &tokenspeed::RECEIVE_0_1_1, &EngineConfig::CONFORMANCE).expect("kept");
    assert_eq!(fin.sampling_params.float_field("temperature"), Some(1.0));
    assert_eq!(fin.sampling_params.int_field("top_k"), Some(1));
    assert_eq!(fin.sampling_params.int_field("seed"), Some(0));
    // add_seed_nil_rid_r1: crc32(b"r1").
    let frames = frames_of(&golden("request/add_seed_nil_rid_r1"));
    let refs = frame_refs(&frames[1..]);
    let d = decode_payload("TokenizedGenerateReqInput", ts().engine_core_request, &refs, &Limits::default()).unwrap();
    let Value::Struct(req) = &d.value else { panic!("a struct") };
    let fin = receive(req, &tokenspeed::RECEIVE_0_1_1, &EngineConfig::CONFORMANCE).expect("kept");
    assert_eq!(fin.sampling_params.int_field("seed"), Some(219_023_793));
}

#[test]
fn a_negative_aux_index_counts_from_the_last_frame_in_tokenspeed_only() {
    let frames = frames_of(&golden("mutant/mm_aux_index_negative"));
    let d = decode(MessageKind::EngineCoreRequest, &frames).expect("TokenSpeed accepts index -1");
    let view = to_view(ts().engine_core_request, &d.value);
    assert_eq!(view["multimodal_inputs"]["mm_items"][0]["feature"]["data"][0], -7);
}

fn golden_08_03(id: &str) -> Json {
    golden_json("tokenspeed", "git-57b49061", id)
}

fn git_57b49061() -> &'static ReleaseSchema {
    release(Dialect::TokenSpeed, "git-57b49061").expect("TokenSpeed at 57b49061 is a release")
}

/// The 08-03 engine (commit 57b49061) has no greedy seed pin and gates only
/// `return_logprob`; 0.1.1 pins greedy to seed 0 and refuses top-k
/// logprobs. The same bytes get each engine's own verdict (both taken from
/// TokenSpeed's code: the goldens of each version).
#[test]
fn the_08_03_engine_keeps_a_greedy_seed_and_gates_only_return_logprob() {
    let old = git_57b49061();
    let rules_old = tokenspeed::receive_rules(old).expect("rules");
    let rules_new = tokenspeed::receive_rules(ts()).expect("rules");
    assert!(!rules_old.pin_greedy_seed && rules_new.pin_greedy_seed);

    // top_k 1 with seed 42, un-normalised: 08-03 keeps 42, 0.1.1 pins 0.
    let frames = frames_of(&golden_08_03("request/add_top_k_one_seed_kept"));
    let refs = frame_refs(&frames[1..]);
    let d = decode_payload("TokenizedGenerateReqInput", old.engine_core_request, &refs, &Limits::default()).unwrap();
    let Value::Struct(req) = &d.value else { panic!("a struct") };
    let kept = receive(req, rules_old, &EngineConfig::CONFORMANCE).expect("kept");
    assert_eq!(kept.sampling_params.int_field("seed"), Some(42));
    let pinned = receive(req, rules_new, &EngineConfig::CONFORMANCE).expect("kept");
    assert_eq!(pinned.sampling_params.int_field("seed"), Some(0));

    // return_logprob with top_logprobs_num 1: 08-03 runs it, 0.1.1 aborts it.
    let case = golden_08_03("request/add_return_logprob_top");
    assert_eq!(case["expect"], "accept");
    let frames = frames_of(&case);
    let refs = frame_refs(&frames);
    let engine = EngineConfig::CONFORMANCE;
    let limits = Limits::default();
    assert!(decode_message_with(old, MessageKind::EngineCoreRequest, &refs, &limits, &engine).is_ok());
    let refused = decode_message_with(ts(), MessageKind::EngineCoreRequest, &refs, &limits, &engine).unwrap_err();
    assert_eq!(refused.class, RejectClass::Validation);
    assert_eq!(golden("request/add_return_logprob_top")["expect"]["reject"], "validation");
    // Both still refuse logprobs when the engine runs without them.
    let off = EngineConfig { enable_output_logprobs: false, ..EngineConfig::CONFORMANCE };
    let r = decode_message_with(old, MessageKind::EngineCoreRequest, &refs, &limits, &off).unwrap_err();
    assert_eq!(r.class, RejectClass::Validation);
}

/// Fields are only appended between the two versions: SMG's pinned 08-03
/// vectors are the 08-03 engine's own bytes, read by 0.1.1 with the new
/// fields at their defaults; 0.1.1's longer forms are read by 08-03 with
/// the new elements as drift.
#[test]
fn the_08_03_shapes_are_prefixes_of_0_1_1s() {
    let old = git_57b49061();
    let limits = Limits::default();
    // SMG's 9-element output vector, as the 08-03 engine sends it.
    let case = golden_08_03("output/smg_vector_vec1");
    assert!(case["matches"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m.as_str().unwrap().contains("PYTHON_OUTPUT_VECTOR_PRE_DP")));
    let frames = frames_of(&case);
    let by_new = decode_message(ts(), MessageKind::EngineCoreOutputs, &frame_refs(&frames), &limits).unwrap();
    assert!(by_new.drift.is_empty(), "{:?}", by_new.drift);
    let Value::Struct(batch) = &by_new.value else { panic!("a struct") };
    assert_eq!(batch.int_field("engine_index"), Some(0));
    // SMG's 24-element request vector is the 08-03 engine's ADD, byte for byte.
    let case = golden_08_03("request/add_smg_vector_vec1");
    assert!(case["matches"].as_array().unwrap().iter().any(|m| m.as_str().unwrap().contains("PYTHON_REQUEST_VECTOR")));
    let frames = frames_of(&case);
    let by_new = decode_message(ts(), MessageKind::EngineCoreRequest, &frame_refs(&frames), &limits).unwrap();
    assert!(by_new.drift.is_empty());
    // 0.1.1's 14-element batch read by 08-03: five trailing elements of drift.
    let case = golden_08_03("mutant/out_with_load_tail_14");
    let frames = frames_of(&case);
    let by_old = decode_message(old, MessageKind::EngineCoreOutputs, &frame_refs(&frames), &limits).unwrap();
    let drift: Vec<&str> = by_old.drift.iter().map(String::as_str).collect();
    assert_eq!(
        drift,
        [
            "BatchTokenIDOutSlim[9]",
            "BatchTokenIDOutSlim[10]",
            "BatchTokenIDOutSlim[11]",
            "BatchTokenIDOutSlim[12]",
            "BatchTokenIDOutSlim[13]"
        ]
    );
    // The ready response renamed block_size: each version treats the
    // other's key as unknown (drift) and its own as absent (default 0).
    let case = golden_08_03("mutant/ready_prefix_granularity");
    assert_eq!(case["expect"], "accept");
    let frames = frames_of(&case);
    let by_old = decode_message(old, MessageKind::EngineCoreReadyResponse, &frame_refs(&frames), &limits).unwrap();
    let Value::Struct(ready) = &by_old.value else { panic!("a struct") };
    assert_eq!(ready.int_field("block_size"), Some(0));
    assert!(by_old.drift.iter().any(|d| d.ends_with("prefix_granularity")), "{:?}", by_old.drift);
}

/// Found by the `tokenspeed_request` fuzz target's check that 08-03 accepts
/// what 0.1.1 accepts: a greedy ADD (temperature below the threshold) with
/// no seed and a nil rid. 0.1.1 pins greedy to seed 0 and runs it; 08-03
/// has no pin, derives the seed from the rid, and drops it. The 08-03
/// verdict is TokenSpeed's own (`request/add_rid_nil_greedy_unseeded` of
/// git-57b49061: built by 08-03's classes, so the bytes carry no seed);
/// 0.1.1 builds the same request with seed 0 already set, so its golden of
/// that name runs everywhere.
#[test]
fn regression_a_greedy_request_without_seed_or_rid_runs_on_0_1_1_and_is_dropped_by_08_03() {
    let limits = Limits::default();
    let engine = EngineConfig::CONFORMANCE;
    let case = golden_08_03("request/add_rid_nil_greedy_unseeded");
    assert_eq!(case["expect"]["reject"], "validation");
    let frames = frames_of(&case);
    let refs = frame_refs(&frames);
    let dropped = decode_message_with(git_57b49061(), MessageKind::EngineCoreRequest, &refs, &limits, &engine);
    assert_eq!(dropped.unwrap_err().class, RejectClass::Validation);
    let ran = decode_message_with(ts(), MessageKind::EngineCoreRequest, &refs, &limits, &engine);
    assert!(ran.is_ok(), "0.1.1 pins the seed and runs it: {ran:?}");
    assert_eq!(golden("request/add_rid_nil_greedy_unseeded")["expect"], "accept");
}
