//! Codec properties the translation layer relies on, over arbitrary values
//! drawn with the crate's own schema-driven generator
//! (`engine_protocol::internal::arbitrary`):
//!
//! - roundtrip for every message type and release: decode(encode(x)) has
//!   x's canonical view, and re-encodes to the same bytes;
//! - omit-defaults sparseness: the encoded `SamplingParams` map holds
//!   exactly the keys whose values differ from the release's defaults;
//! - positional structs are written with every field;
//! - constraint exactly-one: a `StructuredOutputsParams` with any number of
//!   constraints other than one is rejected on decode with an error naming
//!   the fields (the send path rejects it earlier: `translate`, see
//!   tests/translate_request.rs, and `typed::StructuredOutputs` holds one
//!   constraint by construction).

use arbitrary::Unstructured;
use engine_protocol::internal::msgpack::{Reader, Token};
use engine_protocol::schema::{Layout, Ty};
use engine_protocol::view::{diff, to_view};
use engine_protocol::Dialect;
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind, RejectClass};
use engine_protocol::{StructValue, Value};
use proptest::prelude::*;

const VERSIONS: [&str; 3] = ["0.32.0", "0.33.0", "0.34.0"];

fn draw(bytes: &[u8], version: &str, kind: MessageKind) -> Option<Value> {
    let rel = release(Dialect::Vllm, version).ok()?;
    engine_protocol::internal::arbitrary::message(&mut Unstructured::new(bytes), rel, kind).ok()
}

fn payload_index(kind: MessageKind) -> usize {
    usize::from(kind.request_type().is_some())
}

/// Keys of the map at position `field` of the positional struct `payload`.
fn map_keys_at(payload: &[u8], field: usize) -> Option<Vec<String>> {
    let mut r = Reader::new(payload);
    let Ok(Token::Array(_)) = r.token() else { return None };
    for _ in 0..field {
        r.skip_value().ok()?;
    }
    let Ok(Token::Map(n)) = r.token() else { return None };
    let mut keys = Vec::new();
    for _ in 0..n {
        match r.token().ok()? {
            Token::Str(k) => keys.push(String::from_utf8_lossy(k).into_owned()),
            _ => return None,
        }
        r.skip_value().ok()?;
    }
    Some(keys)
}

/// Whether a field value differs from its default as the encoder's
/// `omit_defaults` sees it: floats by bit pattern (so `-0.0` differs from
/// a `0.0` default and NaN always differs), and an integer in a float
/// field always differs (shrunk failure in
/// proptest-regressions/translate_props.txt, pinned by
/// `regression_int_zero_in_float_field_is_written`).
fn differs(v: &Value, d: &Value) -> bool {
    match (v, d) {
        (Value::Float(a), Value::Float(b)) => a.to_bits() != b.to_bits(),
        // an integer in a float field is a different object than the
        // float default: written, as msgspec does (second shrunk failure)
        (Value::Int(_), Value::Float(_)) => true,
        (Value::IntArray(a), Value::Array(b)) | (Value::Array(b), Value::IntArray(a)) => {
            !(a.is_empty() && b.is_empty())
        }
        _ => v != d,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/translate_props.txt"))), ..ProptestConfig::default() })]

    #[test]
    fn roundtrip_every_message_type(bytes in prop::collection::vec(any::<u8>(), 16..2048), k in 0usize..10, ver in 0usize..VERSIONS.len()) {
        let kind = MessageKind::ALL[k];
        let rel = release(Dialect::Vllm, VERSIONS[ver]).unwrap();
        let Some(v) = draw(&bytes, VERSIONS[ver], kind) else { return Ok(()) };
        let frames = encode_message(rel, kind, &v).expect("a generated value encodes");
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let d = decode_message(rel, kind, &refs, &Limits::default()).expect("decode(encode(x)) accepts");
        let ty = kind.payload_type(rel);
        if let Some((path, what)) = diff(&to_view(ty, &v), &to_view(ty, &d.value)) {
            prop_assert!(false, "{} view differs at {}: {}", kind.name(), path, what);
        }
        let again = encode_message(rel, kind, &d.value).expect("re-encodes");
        prop_assert_eq!(again, frames);
    }

    #[test]
    fn sampling_params_are_sparse_and_positional_structs_full(bytes in prop::collection::vec(any::<u8>(), 64..2048), ver in 0usize..VERSIONS.len()) {
        let rel = release(Dialect::Vllm, VERSIONS[ver]).unwrap();
        let kind = MessageKind::EngineCoreRequest;
        let Some(v) = draw(&bytes, VERSIONS[ver], kind) else { return Ok(()) };
        let Value::Struct(req) = &v else { panic!("request is a struct") };
        let frames = encode_message(rel, kind, &v).unwrap();
        let payload = &frames[payload_index(kind)];
        // positional: every field written
        let mut r = Reader::new(payload);
        let Ok(Token::Array(n)) = r.token() else { panic!("positional array") };
        prop_assert_eq!(n as usize, req.schema.fields.len());
        prop_assert_eq!(req.schema.layout, Layout::Positional);
        // sparse sampling params
        let at = req.schema.index_of("sampling_params").unwrap();
        let Some(Value::Struct(sp)) = req.get("sampling_params") else { return Ok(()) };
        let keys = map_keys_at(payload, at).expect("a map");
        let d = StructValue::with_defaults(sp.schema);
        let want: Vec<String> = sp
            .schema
            .fields
            .iter()
            .enumerate()
            .filter(|(i, _)| differs(sp.field(*i), d.field(*i)))
            .map(|(_, f)| f.name.to_string())
            .collect();
        prop_assert_eq!(&keys, &want, "{:?}", sp.entries());
    }

    #[test]
    fn constraint_count_other_than_one_is_rejected_on_encode_and_decode_naming_the_fields(
        bytes in prop::collection::vec(any::<u8>(), 64..1024),
        mask in 0u8..64,
        ver in 0usize..VERSIONS.len(),
    ) {
        let rel = release(Dialect::Vllm, VERSIONS[ver]).unwrap();
        let kind = MessageKind::EngineCoreRequest;
        let Some(mut v) = draw(&bytes, VERSIONS[ver], kind) else { return Ok(()) };
        let Value::Struct(req) = &mut v else { panic!() };
        let mut sp = match req.get("sampling_params") {
            Some(Value::Struct(sp)) => sp.clone(),
            _ => StructValue::with_defaults(rel.sampling_params),
        };
        // a valid base: max_tokens set, no other rule broken by the draw
        let fields = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];
        let mut so = StructValue::with_defaults(rel.structured_outputs_params);
        let mut set = Vec::new();
        for (i, f) in fields.iter().enumerate() {
            if mask & (1 << i) != 0 {
                set.push(*f);
                so.set(f, match *f {
                    "choice" => Value::Array(vec![Value::Str("a".into())]),
                    "json_object" => Value::Bool(true),
                    _ => Value::Str("x".into()),
                });
            }
        }
        so.set("_backend", Value::Str("xgrammar".into()));
        sp.set("structured_outputs", Value::Struct(so));
        req.set("sampling_params", Value::Struct(sp));
        // The encoder refuses what vLLM's decoder rejects; the bytes for the
        // decode side are written without that check.
        let encoded = encode_message(rel, kind, &v).map(|_| ());
        let mut frames =
            engine_protocol::internal::encode_payload_unvalidated("EngineCoreRequest", kind.payload_type(rel), &v)
                .unwrap();
        frames.insert(0, vec![0x00]);
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let decoded = decode_message(rel, kind, &refs, &Limits::default()).map(|_| ());
        for outcome in [encoded, decoded] {
            match outcome {
                Ok(()) => prop_assert_eq!(set.len(), 1),
                Err(e) if set.len() == 1 => {
                    // another rule of the drawn request: not about constraints
                    prop_assert!(!e.path.contains("structured_outputs"), "{e}");
                }
                Err(e) => {
                    if e.path.contains("structured_outputs") {
                        prop_assert_eq!(e.class, RejectClass::Validation);
                        for f in &set {
                            prop_assert!(e.path.contains(f) || e.detail.contains(f), "{} does not name {}", e, f);
                        }
                    }
                }
            }
        }
    }
}

/// `frequency_penalty = -0.0` equals the default 0.0 by value but not by
/// bits; the encoder writes it (vLLM's msgspec would too: the default is
/// compared by identity) and decoding gives -0.0 back.
#[test]
fn regression_negative_zero_penalty_is_written() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let mut sp = engine_protocol::internal::sampling_params_value(rel);
    sp.set("max_tokens", Value::Int(4));
    sp.set("frequency_penalty", Value::Float(-0.0));
    let v = engine_protocol::internal::engine_core_request_value(rel, "r", vec![1], sp, 1.5);
    let frames = encode_message(rel, MessageKind::EngineCoreRequest, &v).unwrap();
    let Value::Struct(req) = &v else { unreachable!() };
    let keys = map_keys_at(&frames[1], req.schema.index_of("sampling_params").unwrap()).unwrap();
    assert!(keys.iter().any(|k| k == "frequency_penalty"), "{keys:?}");
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let d = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).unwrap();
    let Value::Struct(r) = &d.value else { unreachable!() };
    let fp = r.struct_field("sampling_params").unwrap().float_field("frequency_penalty").unwrap();
    assert!(fp == 0.0 && fp.is_sign_negative());
}

/// Regression (the shrunk failure of
/// `sampling_params_are_sparse_and_positional_structs_full`): an integer
/// `0` in the float field `presence_penalty` (as a wire peer may send it)
/// equals the default `0.0` by value, yet it is a different object for
/// msgspec's `omit_defaults`, so the key is written and decodes back as
/// the integer.
#[test]
fn regression_int_zero_in_float_field_is_written() {
    let rel = release(Dialect::Vllm, "0.32.0").unwrap();
    let mut sp = engine_protocol::internal::sampling_params_value(rel);
    sp.set("max_tokens", Value::Int(4));
    sp.set("presence_penalty", Value::Int(0));
    let v = engine_protocol::internal::engine_core_request_value(rel, "r", vec![1], sp, 1.5);
    let frames = encode_message(rel, MessageKind::EngineCoreRequest, &v).unwrap();
    let Value::Struct(req) = &v else { unreachable!() };
    let keys = map_keys_at(&frames[1], req.schema.index_of("sampling_params").unwrap()).unwrap();
    assert!(keys.iter().any(|k| k == "presence_penalty"), "{keys:?}");
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let d = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).unwrap();
    let Value::Struct(r) = &d.value else { unreachable!() };
    assert_eq!(r.struct_field("sampling_params").unwrap().get("presence_penalty"), Some(&Value::Int(0)));
}

#[test]
fn every_message_kind_is_drawn_for_both_releases() {
    for ver in VERSIONS {
        for kind in MessageKind::ALL {
            let drawn = (0u8..64).any(|seed| {
                let bytes: Vec<u8> = (0..1024u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
                draw(&bytes, ver, kind).is_some()
            });
            assert!(drawn, "no {} drawn for {ver}", kind.name());
        }
    }
    let _ = Ty::Str;
}
