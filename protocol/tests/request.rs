//! EngineCoreRequest and SamplingParams: decoding vLLM's bytes, encoding
//! vLLM's bytes, and naming the path of every rejection.

mod common;

use common::*;
use engine_protocol::internal::{engine_core_request_value as request_value, sampling_params_value};
use engine_protocol::typed::{
    decode_typed, Constraint, EngineCoreRequest, JsonSchema, SamplingParams, StructuredOutputsParams,
};
use engine_protocol::Limits;
use engine_protocol::{encode_message, MessageKind, RejectClass};
use engine_protocol::{StructValue, Value};

fn add(payload: &str) -> Vec<Vec<u8>> {
    vec![vec![0x00], unhex(payload)]
}

#[test]
fn add_default_decodes_with_the_four_keys_post_init_adds() {
    let d = decode(v032(), MessageKind::EngineCoreRequest, &add(ADD_DEFAULT)).expect("accepted");
    assert!(d.drift.is_empty());
    let Value::Struct(req) = &d.value else { panic!("struct") };
    assert_eq!(req.str_field("request_id"), Some("req-default"));
    assert_eq!(req.get("prompt_token_ids"), Some(&Value::IntArray(vec![1, 2, 3, 4])));
    assert_eq!(req.float_field("arrival_time"), Some(1700000000.25));
    let sp = req.struct_field("sampling_params").expect("sampling params");
    assert_eq!(sp.get("stop"), Some(&Value::Array(vec![])));
    assert_eq!(sp.get("skip_reading_prefix_cache"), Some(&Value::Bool(false)));
    // Absent keys hold their defaults, including the dangerous max_tokens=16.
    assert_eq!(sp.int_field("max_tokens"), Some(16));
}

#[test]
fn add_default_reencodes_byte_for_byte() {
    let frames = add(ADD_DEFAULT);
    let d = decode(v032(), MessageKind::EngineCoreRequest, &frames).unwrap();
    assert_eq!(encode_message(v032(), MessageKind::EngineCoreRequest, &d.value).unwrap(), frames);
}

#[test]
fn sampling_params_omit_every_default_field() {
    let sp = sampling_params_value(v033());
    let req = request_value(v033(), "r", vec![1], sp, 1.5);
    let frames = encode_message(v033(), MessageKind::EngineCoreRequest, &req).unwrap();
    // `de 00 00`: a map16 header (43 fields) with no entries.
    let payload = &frames[1];
    let at = payload.windows(3).position(|w| w == [0xde, 0x00, 0x00]);
    assert!(at.is_some(), "empty map16 SamplingParams in {}", hex::encode(payload));
}

#[test]
fn engine_core_request_writes_all_22_elements() {
    let req = request_value(v033(), "r", vec![], sampling_params_value(v033()), 0.5);
    let frames = encode_message(v033(), MessageKind::EngineCoreRequest, &req).unwrap();
    assert_eq!(frames[0], [0x00]);
    assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x16]);
}

#[test]
fn wrong_type_names_the_full_path() {
    // `temperature` (cb 3f.. float) replaced by the string "hot".
    let mut sp = sampling_params_value(v033());
    sp.set("temperature", Value::Str("hot".into()));
    let req = request_value(v033(), "r", vec![1], sp, 0.5);
    // The encoder refuses to write it...
    let e = encode_message(v033(), MessageKind::EngineCoreRequest, &req).unwrap_err();
    assert_eq!(e.path, "EngineCoreRequest.sampling_params.temperature");
    // ...and the decoder names the same path when it arrives on the wire.
    let payload = unhex("99 a17291 01 c0 de0001 ab74656d7065726174757265 a3686f74 c0 cb3fe0000000000000 c0c0c0");
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], payload]).unwrap_err();
    assert_eq!(e.class, RejectClass::Type);
    assert_eq!(e.to_string(), "EngineCoreRequest.sampling_params.temperature: expected float, got str (type)");
}

#[test]
fn temperature_out_of_range_is_refused_by_the_encoder_and_the_decoder() {
    let mut sp = sampling_params_value(v033());
    sp.set("temperature", Value::Float(3.0));
    let req = request_value(v033(), "r", vec![1], sp, 0.5);
    let path = "EngineCoreRequest.sampling_params.temperature";
    let e = encode_message(v033(), MessageKind::EngineCoreRequest, &req).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, path));
    let e = decode(v033(), MessageKind::EngineCoreRequest, &unvalidated(&req)).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, path));
}

#[test]
fn two_constraints_are_refused_naming_both_fields() {
    let mut so = StructValue::with_defaults(v033().structured_outputs_params);
    so.set("regex", Value::Str("a+".into()));
    so.set("_backend", Value::Str("xgrammar".into()));
    so.set("grammar", Value::Str("root ::= \"a\"".into()));
    let mut sp = sampling_params_value(v033());
    sp.set("structured_outputs", Value::Struct(so));
    let req = request_value(v033(), "r", vec![1], sp, 0.5);
    let path = "EngineCoreRequest.sampling_params.structured_outputs.regex,grammar";
    let e = encode_message(v033(), MessageKind::EngineCoreRequest, &req).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, path));
    let frames = unvalidated(&req);
    let e = decode(v033(), MessageKind::EngineCoreRequest, &frames).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, path));
    // The typed decoder has the same verdict: the typed struct cannot hold two.
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let e = decode_typed::<EngineCoreRequest>(v033(), &refs, &Limits::default()).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, path));
}

#[test]
fn no_constraint_is_refused_by_the_typed_decoder_as_by_the_engine() {
    let mut so = StructValue::with_defaults(v033().structured_outputs_params);
    so.set("_backend", Value::Str("xgrammar".into()));
    let mut sp = sampling_params_value(v033());
    sp.set("structured_outputs", Value::Struct(so));
    let frames = unvalidated(&request_value(v033(), "r", vec![1], sp, 0.5));
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let e = decode_typed::<EngineCoreRequest>(v033(), &refs, &Limits::default()).unwrap_err();
    assert_eq!(
        (e.class, e.path.as_str()),
        (RejectClass::Validation, "EngineCoreRequest.sampling_params.structured_outputs")
    );
}

/// Request frames written without the encoder's validations.
fn unvalidated(req: &Value) -> Vec<Vec<u8>> {
    let ty = MessageKind::EngineCoreRequest.payload_type(v033());
    let mut frames = engine_protocol::internal::encode_payload_unvalidated("EngineCoreRequest", ty, req).unwrap();
    frames.insert(0, vec![0x00]);
    frames
}

#[test]
fn structured_outputs_roundtrip_through_the_typed_enum_in_every_release() {
    // The typed struct is written by hand against the tables, by field
    // name: a field a release adds that it has no place for fails here.
    for &rel in engine_protocol::schema::VLLM_RELEASES {
        for c in [
            Constraint::Json(JsonSchema::Text("{}".into())),
            Constraint::Json(JsonSchema::Object(vec![("type".into(), Value::Str("object".into()))])),
            Constraint::Regex("[0-9]+".into()),
            Constraint::Choice(vec!["yes".into(), "no".into()]),
            Constraint::Grammar("root ::= \"x\"".into()),
            Constraint::JsonObject(true),
            Constraint::JsonObject(false),
            Constraint::StructuralTag("{}".into()),
        ] {
            let request = EngineCoreRequest {
                request_id: "r".into(),
                prompt_token_ids: Some(vec![1].into()),
                sampling_params: Some(SamplingParams {
                    structured_outputs: Some(StructuredOutputsParams::new(c, "xgrammar")),
                    ..SamplingParams::default()
                }),
                ..EngineCoreRequest::default()
            };
            // The direct encoder and the value path write the same bytes,
            // every field of the table in its order.
            let frames = request.encode_checked(rel).unwrap();
            let via_value = encode_message(rel, MessageKind::EngineCoreRequest, &request.to_value(rel).unwrap());
            assert_eq!(frames, via_value.unwrap());
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let (back, drift) = decode_typed::<EngineCoreRequest>(rel, &refs, &Limits::default()).unwrap();
            assert!(drift.is_empty());
            assert_eq!(back, request);
        }
    }
}

#[test]
fn short_request_of_nine_elements_is_accepted_and_eight_is_not() {
    // Fields 0-8 have no default (docs/wire-protocol.md §7.1).
    let nine = unhex("99 a17291 01 c0 c0 c0 cb3ff0000000000000 c0 c0 c0");
    let d = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], nine]).expect("nine elements");
    let Value::Struct(req) = d.value else { panic!() };
    assert_eq!(req.int_field("client_index"), Some(0));
    let eight = unhex("98 a17291 01 c0 c0 c0 cb3ff0000000000000 c0 c0");
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], eight]).unwrap_err();
    assert_eq!((e.class, e.path.as_str()), (RejectClass::MissingField, "EngineCoreRequest"));
}

#[test]
fn extra_trailing_element_is_accepted_and_reported_as_drift() {
    let mut payload = unhex(ADD_DEFAULT);
    payload[2] = 0x17; // 23 elements
    payload.push(0xc3);
    let d = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], payload]).expect("accepted");
    assert_eq!(d.drift, ["EngineCoreRequest[22]"]);
}

#[test]
fn unknown_sampling_key_is_accepted_and_reported_as_drift() {
    // `de0001` + "future_knob": true, in place of the 4-key map of add_default.
    let payload = unhex("99 a17291 01 c0 de0001 ab6675747572655f6b6e6f62 c3 c0 cb3ff0000000000000 c0c0c0");
    let d = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], payload]).expect("accepted");
    assert_eq!(d.drift, ["EngineCoreRequest.sampling_params.future_knob"]);
}

#[test]
fn an_integer_temperature_is_judged_as_the_float_msgspec_makes_of_it() {
    // msgspec reads an int into a `float` field as that float, and
    // `_verify_args` then judges it: 3 is out of [0, 2], 1 is in.
    let path = "EngineCoreRequest.sampling_params.temperature";
    for (t, refused) in [(3, true), (1, false)] {
        let mut sp = sampling_params_value(v033());
        sp.set("temperature", Value::Int(t));
        let req = request_value(v033(), "r", vec![1], sp, 0.5);
        let got = decode(v033(), MessageKind::EngineCoreRequest, &unvalidated(&req));
        match got {
            Err(e) => assert!(refused && (e.class, e.path.as_str()) == (RejectClass::Validation, path), "{t}: {e:?}"),
            Ok(_) => assert!(!refused, "temperature {t} accepted"),
        }
    }
}

#[test]
fn a_stop_given_as_one_string_needs_detokenize_as_a_list_of_them_does() {
    // `SamplingParams.__post_init__` makes a lone string a list of one,
    // and `_verify_args` refuses stop strings without detokenize.
    for stop in [Value::Str("x".into()), Value::Array(vec![Value::Str("x".into())])] {
        let mut sp = sampling_params_value(v033());
        sp.set("stop", stop.clone());
        sp.set("detokenize", Value::Bool(false));
        let e = engine_protocol::validate::sampling_params(&sp).expect_err("refused");
        assert_eq!(e.fields, ["stop"], "{stop:?}");
        sp.set("detokenize", Value::Bool(true));
        assert!(engine_protocol::validate::sampling_params(&sp).is_ok(), "{stop:?}");
    }
}

#[test]
fn float32_temperature_is_accepted_and_widened_exactly() {
    // docs/wire-protocol.md §6.4: 0.8 as float32 decodes as 0.800000011920929.
    let payload = unhex("99 a17291 01 c0 de0001 ab74656d7065726174757265 ca3f4ccccd c0 cb3ff0000000000000 c0c0c0");
    let d = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0], payload]).unwrap();
    let Value::Struct(req) = d.value else { panic!() };
    let t = req.struct_field("sampling_params").unwrap().float_field("temperature").unwrap();
    assert_eq!(t, 0.8f32 as f64);
}

#[test]
fn wrong_request_type_byte_is_a_frames_error() {
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0x03], unhex(ADD_DEFAULT)]).unwrap_err();
    assert_eq!(e.class, RejectClass::Frames);
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0x09], unhex(ADD_DEFAULT)]).unwrap_err();
    assert_eq!(e.class, RejectClass::Frames);
    let e = decode(v033(), MessageKind::EngineCoreRequest, &[vec![0x00]]).unwrap_err();
    assert_eq!(e.class, RejectClass::Frames);
}

#[test]
fn json_converts_to_values_keeping_integers_and_object_order() {
    let j: serde_json::Value =
        serde_json::from_str(r#"{"b": 1, "a": [18446744073709551615, -3, 1.5, null, true, "s"]}"#).unwrap();
    assert_eq!(
        Value::from_json(&j),
        Value::Map(vec![
            (Value::Str("b".into()), Value::Int(1)),
            (
                Value::Str("a".into()),
                Value::Array(vec![
                    Value::UInt(u64::MAX),
                    Value::Int(-3),
                    Value::Float(1.5),
                    Value::Nil,
                    Value::Bool(true),
                    Value::Str("s".into()),
                ]),
            ),
        ])
    );
}
