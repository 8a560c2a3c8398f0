//! The direct request decoder (`engine_protocol::hot::decode_request`,
//! which `typed::decode_typed::<EngineCoreRequest>` runs) against the
//! reference typed path (`typed::decode_typed_via_value`: `decode_message`,
//! then the conversion to the struct): the same verdict (accept, or the
//! same error: class, path and text), the same drift and the same struct,
//! over every golden `EngineCoreRequest` case (vLLM's own bytes: requests,
//! mutants, live recordings; accepts and rejects) read with both release
//! tables, under the default limits and under tight ones; then over
//! arbitrary requests drawn from the schema tables and bytes mutated from
//! them. The reference path's verdict is `decode_message`'s, integers above
//! `i64::MAX` included (the struct holds every wire integer).

mod common;

use std::path::{Path, PathBuf};

use arbitrary::Unstructured;
use common::*;
use engine_protocol::bytes::Bytes;
use engine_protocol::hot::decode_request;
use engine_protocol::hot::decode_request_shared;
use engine_protocol::internal::decode_request_direct;
use engine_protocol::schema::VLLM_RELEASES;
use engine_protocol::typed::{decode_typed, decode_typed_via_value, EngineCoreRequest};
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, RejectClass, ReleaseSchema};
use proptest::prelude::*;

fn golden_request_cases() -> Vec<(String, Vec<Vec<u8>>)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/vllm"), &mut files);
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap()) else {
            continue;
        };
        if json["message"] != "EngineCoreRequest" {
            continue;
        }
        let Some(frames) = json["frames"].as_array() else { continue };
        let frames = frames.iter().map(|x| unhex(x.as_str().expect("hex frame"))).collect();
        cases.push((format!("{}@{}", json["case"].as_str().unwrap_or("?"), json["version"]), frames));
    }
    cases
}

/// Struct equality with NaN equal to itself (the typed structs hold no
/// schema references, so their debug form prints every field and every
/// float exactly).
fn same_request(a: &EngineCoreRequest, b: &EngineCoreRequest) -> bool {
    a == b || format!("{a:?}") == format!("{b:?}")
}

/// What one differential run saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// Accepted, by the direct path itself.
    Direct,
    /// Accepted, handed to the reference path (drift, a value out of a
    /// rule's plain range, an integer above `i64::MAX`...).
    HandedOver,
    Rejected,
}

/// Runs the decoders on `frames`; `Err` describes the first difference.
fn differential(rel: &'static ReleaseSchema, frames: &[&[u8]], limits: &Limits) -> Result<Seen, String> {
    let reference = decode_typed_via_value::<EngineCoreRequest>(rel, frames, limits);
    let message = decode_message(rel, MessageKind::EngineCoreRequest, frames, limits);
    // The reference typed path has decode_message's verdict, save for a
    // value the struct cannot hold.
    match (&reference, &message) {
        (Ok((_, drift)), Ok(d)) if *drift == d.drift => {}
        (Ok((_, drift)), Ok(d)) => return Err(format!("reference drift {drift:?} vs decode_message {:?}", d.drift)),
        (Err(a), Err(b)) if a == b => {}
        (a, b) => return Err(format!("reference {a:?} vs decode_message {b:?}")),
    }
    let direct = decode_request_direct(rel, frames, limits);
    let full = decode_request(rel, frames, limits);
    let typed = decode_typed::<EngineCoreRequest>(rel, frames, limits);
    if format!("{full:?}") != format!("{typed:?}") {
        return Err("decode_typed is not decode_request".into());
    }
    // On frames held as shared buffers: the same verdict, struct and drift
    // (a 0.34.0 prompt array a view of its frame instead of a copy).
    let shared: Vec<Bytes> = frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
    let viewed = decode_request_shared(rel, &shared, limits);
    if format!("{viewed:?}") != format!("{full:?}") {
        return Err(format!("decode_request_shared {viewed:?} is not decode_request {full:?}"));
    }
    match (&reference, &full) {
        (Ok((a, da)), Ok((b, db))) => {
            if da != db {
                return Err(format!("drift {db:?} vs {da:?}"));
            }
            if !same_request(a, b) {
                return Err(format!("structs differ:\n direct {b:?}\n reference {a:?}"));
            }
        }
        (Err(a), Err(b)) if a == b => {}
        (Err(a), Err(b)) => return Err(format!("errors differ: {b} vs {a}")),
        (Ok(_), Err(b)) => return Err(format!("rejects what the reference accepts: {b}")),
        (Err(a), Ok(_)) => return Err(format!("accepts what the reference rejects: {a}")),
    }
    match (direct, &reference) {
        (Some(d), Ok((r, drift))) if drift.is_empty() && same_request(&d, r) => Ok(Seen::Direct),
        (Some(d), r) => Err(format!("the direct path read {d:?}, the reference {r:?}")),
        (None, Ok(_)) => Ok(Seen::HandedOver),
        (None, Err(_)) => Ok(Seen::Rejected),
    }
}

fn tight_limits() -> Vec<Limits> {
    let mut out: Vec<Limits> = (1..=5).map(|d| Limits { max_depth: d, ..Limits::default() }).collect();
    out.push(Limits { max_frames: 1, ..Limits::default() });
    out.push(Limits { max_frame_bytes: 64, ..Limits::default() });
    out
}

#[test]
fn direct_request_decoder_gives_the_verdict_drift_and_struct_of_the_reference_on_every_golden_request() {
    let cases = golden_request_cases();
    assert!(cases.len() >= 740, "only {} EngineCoreRequest cases under golden/vllm", cases.len());
    let (mut direct, mut handed_over, mut rejected) = (0, 0, 0);
    let mut failures = Vec::new();
    for (id, frames) in &cases {
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        for &rel in VLLM_RELEASES {
            match differential(rel, &refs, &Limits::default()) {
                Ok(Seen::Direct) => direct += 1,
                Ok(Seen::HandedOver) => handed_over += 1,
                Ok(Seen::Rejected) => rejected += 1,
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
    // Accepts by the direct path, hand-overs and rejections are all
    // exercised; most accepted requests take the direct path.
    assert!(
        direct > 500 && handed_over > 5 && rejected > 250 && direct > 3 * handed_over,
        "{direct} direct, {handed_over} handed over, {rejected} rejected"
    );
}

#[test]
fn the_bench_requests_take_the_direct_path() {
    for (version, rel, ids) in [
        ("0.32.0", v032(), &["request/prompt_512_tokens", "request/add_default"][..]),
        ("0.33.0", v033(), &["request/prompt_512_tokens", "request/add_default"][..]),
        (
            "0.34.0",
            v034(),
            &[
                "request/prompt_512_tokens",
                "request/add_default",
                "request/prompt_array_63",
                "request/prompt_array_64",
                "request/prompt_array_70000",
                "request/prompt_array_uint32",
            ][..],
        ),
    ] {
        for &id in ids {
            let frames = golden_frames(version, id);
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let d = decode_request_direct(rel, &refs, &Limits::default());
            let d = d.unwrap_or_else(|| panic!("{version} {id}: handed over"));
            let (r, drift) = decode_typed_via_value::<EngineCoreRequest>(rel, &refs, &Limits::default()).unwrap();
            assert!(drift.is_empty());
            assert_eq!(d, r, "{version} {id}");
        }
    }
}

#[test]
fn a_sampling_rule_violation_gets_the_reference_error() {
    // `SamplingParams(n=2, temperature=0)`: greedy sampling with n > 1.
    let rel = v033();
    let mut req = EngineCoreRequest {
        request_id: "r".into(),
        prompt_token_ids: Some(vec![1, 2].into()),
        sampling_params: Some(engine_protocol::typed::SamplingParams { n: 2, temperature: 0.0, ..Default::default() }),
        ..Default::default()
    };
    let frames = req.encode(rel).unwrap();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert!(decode_request_direct(rel, &refs, &Limits::default()).is_none());
    let e = decode_request(rel, &refs, &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Validation);
    assert_eq!(e.path, "EngineCoreRequest.sampling_params.n");
    // With a temperature above greedy it is read directly.
    req.sampling_params.as_mut().unwrap().temperature = 0.5;
    let frames = req.encode(rel).unwrap();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert_eq!(decode_request_direct(rel, &refs, &Limits::default()), Some(req));
}

#[test]
fn drift_is_handed_over_and_keeps_the_unknown_fields() {
    // A 0.33 request with one trailing element and one unknown sampling key
    // (a newer engine's fields).
    let rel = v033();
    let mut req =
        EngineCoreRequest { request_id: "r".into(), prompt_token_ids: Some(vec![7].into()), ..Default::default() };
    let mut sp = engine_protocol::typed::SamplingParams { max_tokens: Some(8), ..Default::default() };
    sp.unknown.push(("future_knob".into(), engine_protocol::Value::Int(3)));
    req.sampling_params = Some(sp);
    req.unknown.push(engine_protocol::Value::Str("extra".into()));
    let frames = req.encode(rel).unwrap();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    assert!(decode_request_direct(rel, &refs, &Limits::default()).is_none());
    let (got, drift) = decode_request(rel, &refs, &Limits::default()).unwrap();
    assert_eq!(drift, ["EngineCoreRequest.sampling_params.future_knob", "EngineCoreRequest[22]"]);
    assert_eq!(got, req);
}

fn arbitrary_request(bytes: &[u8], rel: &'static ReleaseSchema) -> Option<Vec<Vec<u8>>> {
    let v = engine_protocol::internal::arbitrary::message(
        &mut Unstructured::new(bytes),
        rel,
        MessageKind::EngineCoreRequest,
    )
    .ok()?;
    encode_message(rel, MessageKind::EngineCoreRequest, &v).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn direct_request_decoder_agrees_with_the_reference_on_arbitrary_requests(
        seed in proptest::collection::vec(any::<u8>(), 0..4096),
        which in 0..3usize,
    ) {
        let rel = VLLM_RELEASES[which];
        if let Some(frames) = arbitrary_request(&seed, rel) {
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let r = differential(rel, &refs, &Limits::default());
            prop_assert!(r.is_ok(), "{:?}", r);
            // Read with the other releases' tables too.
            for &other in VLLM_RELEASES.iter().filter(|r| !std::ptr::eq(**r, rel)) {
                let r = differential(other, &refs, &Limits::default());
                prop_assert!(r.is_ok(), "read with {}'s table: {:?}", other.version, r);
            }
            for limits in tight_limits() {
                let r = differential(rel, &refs, &limits);
                prop_assert!(r.is_ok(), "under {:?}: {:?}", limits, r);
            }
        }
    }

    #[test]
    fn direct_request_decoder_agrees_with_the_reference_on_mutated_requests(
        seed in proptest::collection::vec(any::<u8>(), 0..2048),
        edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 1..6),
        cut in any::<u16>(),
    ) {
        let rel = v033();
        if let Some(mut frames) = arbitrary_request(&seed, rel) {
            let p = &mut frames[1];
            for (at, b) in &edits {
                let i = *at as usize % p.len();
                p[i] = *b;
            }
            if cut % 4 == 0 {
                let keep = cut as usize % (p.len() + 1);
                p.truncate(keep);
            }
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let r = differential(rel, &refs, &Limits::default());
            prop_assert!(r.is_ok(), "{:?}", r);
        }
    }
}

/// The arbitrary requests of the property tests exercise the direct path,
/// not only the hand-over (deterministic seeds, so the count is stable).
#[test]
fn arbitrary_requests_are_read_by_the_direct_path_too() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as u8
    };
    let (mut made, mut direct) = (0, 0);
    for i in 0..300 {
        let seed: Vec<u8> = (0..64 + (i * 13) % 2048).map(|_| next()).collect();
        let rel = VLLM_RELEASES[i % VLLM_RELEASES.len()];
        let Some(frames) = arbitrary_request(&seed, rel) else { continue };
        made += 1;
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        match differential(rel, &refs, &Limits::default()) {
            Ok(Seen::Direct) => direct += 1,
            Ok(_) => {}
            Err(e) => panic!("seed {i}: {e}"),
        }
    }
    eprintln!("{made} requests made, {direct} read by the direct path");
    assert!(made > 200 && direct * 5 > made, "{made} made, {direct} direct");
}

#[test]
fn encode_checked_refuses_what_vllm_refuses_and_writes_what_encode_writes() {
    let rel = v033();
    // Every accepted golden request: the same bytes as `encode`, unless the
    // engine fails it at run time (then the first fatal serving problem).
    let (mut checked, mut unservable) = (0, 0);
    for (id, frames) in golden_request_cases() {
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let Ok((req, _)) = decode_request(rel, &refs, &Limits::default()) else { continue };
        match req.serving_problems(None).into_iter().find(|p| p.is_fatal()) {
            Some(p) => {
                assert_eq!(req.encode_checked(rel), Err(engine_protocol::Error::unservable(p)), "{id}");
                unservable += 1;
            }
            None => assert_eq!(req.encode_checked(rel), req.encode(rel), "{id}"),
        }
        checked += 1;
    }
    assert!(checked > 250, "{checked}");
    assert!(unservable > 0 && unservable * 2 < checked, "{unservable} of {checked} unservable");
    // Greedy sampling with n > 1 (a plain struct), and repetition detection
    // enabled with a `min_count` below 2 (a nested struct with rules of its
    // own): the errors `encode_message` gives on the value.
    let sp = engine_protocol::typed::SamplingParams { n: 2, temperature: 0.0, ..Default::default() };
    let rd =
        engine_protocol::typed::RepetitionDetectionParams { max_pattern_size: 4, min_count: 1, ..Default::default() };
    let bad_rd = engine_protocol::typed::SamplingParams { repetition_detection: Some(rd), ..Default::default() };
    for sp in [sp, bad_rd] {
        let req = EngineCoreRequest {
            request_id: "r".into(),
            prompt_token_ids: Some(vec![1].into()),
            sampling_params: Some(sp),
            ..Default::default()
        };
        let want = encode_message(rel, MessageKind::EngineCoreRequest, &req.to_value(rel).unwrap()).unwrap_err();
        assert_eq!(want.class, RejectClass::Validation);
        assert_eq!(req.encode_checked(rel), Err(want));
        assert!(req.encode(rel).is_ok(), "the unchecked encoder writes it");
    }
}

/// A finding of the `hot_request` fuzz target (shrunk by hand): a request
/// with drift (an unknown sampling key) and a tensor
/// (`prompt_logprob_token_ids`) whose shape array sits exactly at the depth
/// limit. `decode_message` accepts it (the schema decoder counts a tensor as
/// one level, its shape included); the reference typed path's second,
/// schema-less decode (to find the unknown fields) counted the shape array
/// as a level of its own and refused the message as `limits`.
#[test]
fn regression_drift_beside_a_tensor_at_the_depth_limit() {
    let mut payload = vec![0xdc, 0x00, 0x16, 0xa1, b'r', 0x93, 1, 2, 3, 0xc0, 0x82];
    payload.extend(b"\xa9future_kx\x90");
    payload.extend(b"\xb8prompt_logprob_token_ids\x93\xa3<i8\x92\x02\x02\xc7\x20\x03");
    payload.extend([1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
    payload.extend([0xff; 8]);
    payload.extend(b"\xc0\xcb\x41\xd9\x54\xfc\x40\x10\x00\x00\xc0\xc0\xc0");
    payload.extend([0xc0, 0xc0, 0, 0, 0, 0xc0, 0xc2, 0xc0, 0xc0, 0xc0, 0xc2, 0xc0, 0xc0]);
    let frames = [vec![0x00], payload];
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let limits = Limits { max_depth: 3, ..Limits::default() };
    for rel in [v032(), v033()] {
        let d = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &limits).expect("accepted");
        assert_eq!(d.drift, ["EngineCoreRequest.sampling_params.future_kx"]);
        let (req, drift) = decode_typed::<EngineCoreRequest>(rel, &refs, &limits).expect("accepted too");
        assert_eq!(drift, d.drift);
        let sp = req.sampling_params.expect("sampling params");
        assert_eq!(sp.unknown.len(), 1);
        assert_eq!(sp.prompt_logprob_token_ids.expect("tensor").shape, [2, 2]);
        assert_eq!(differential(rel, &refs, &limits).map(|_| ()), Ok(()));
    }
}

/// A finding of the `hot_request` fuzz target: an unknown sampling key
/// whose value holds a string of invalid UTF-8 (`max_\x93attern_size`).
/// `decode_message` accepts it (an unknown field is skipped unread, as
/// msgspec skips it) and reports the drift; the reference typed path's
/// schema-less decode (to keep the unknown fields) refused the string as
/// `malformed`. The typed decode now accepts it, reports the drift and
/// keeps no unknown field it cannot hold.
#[test]
fn regression_an_unknown_field_holding_invalid_utf8_is_drift_not_an_error() {
    let frames = [
        vec![0x00],
        unhex(
            "dc0016b87265712d72657065746974696f6e5f646574656374696f6e93010203c0de0005a473746f7090ae73746f705f\
             746f6b656e5f69647390a96261645f776f72647390b9736b69705f72656164696e675f7072656669785f6361636865c2\
             b472657065746974696f6e655f7474636465696f6e83b06d61785f9361747465726e5f73697a6508b06d696e5f706174\
             7465726e5f73697a6502a96d696e5f636f756e7403c0cb41d954fc40100000c0c0c0c0c0000000c0c2c0c0c0c2c0c0",
        ),
    ];
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    for rel in [v032(), v033()] {
        let d = decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).expect("accepted");
        assert_eq!(d.drift, ["EngineCoreRequest.sampling_params.repetitione_ttcdeion"]);
        let (req, drift) = decode_typed::<EngineCoreRequest>(rel, &refs, &Limits::default()).expect("accepted too");
        assert_eq!(drift, d.drift);
        assert!(req.sampling_params.expect("sampling params").unknown.is_empty());
        assert_eq!(differential(rel, &refs, &Limits::default()).map(|_| ()), Ok(()));
    }
}

/// vLLM 0.34.0 reads a long prompt as a view of its aux frame and writes
/// it back from the array's memory (docs/wire-protocol.md §6.9): so do
/// the shared decoder and the shared encoder, byte-identical to vLLM's
/// frames, the 280 000 bytes never copied.
#[test]
fn a_70000_token_prompt_is_read_and_written_in_place() {
    use engine_protocol::typed::EncodeOptions;
    let frames = golden_frames("0.34.0", "request/prompt_array_70000");
    assert_eq!(frames.len(), 3, "ADD, payload, the prompt's aux frame");
    assert_eq!(frames[2].len(), 280_000);
    let shared: Vec<Bytes> = frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
    let (request, drift) = decode_request_shared(v034(), &shared, &Limits::default()).expect("accepted");
    assert!(drift.is_empty());
    let ids = request.prompt_token_ids.as_ref().expect("a prompt");
    let array = ids.array().expect("an array");
    assert_eq!((array.dtype(), array.shape(), ids.len()), ("<i4", &[70_000][..], 70_000));
    assert_eq!(array.bytes().as_ptr(), shared[2].as_ptr(), "a view of the received frame");
    let again = request.encode_shared(v034(), &EncodeOptions::default()).expect("encodes");
    assert_eq!(again.iter().map(|f| f.to_vec()).collect::<Vec<_>>(), frames, "vLLM's bytes");
    assert_eq!(again[2].as_ptr(), shared[2].as_ptr(), "the aux frame is the array's memory");
}

/// The threshold is vLLM's `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`: 63 ids
/// (252 bytes) inline, 64 (256 bytes) in an aux frame, as vLLM's encoder
/// wrote the goldens; another threshold moves the boundary.
#[test]
fn the_inline_or_aux_choice_follows_the_zero_copy_threshold() {
    use engine_protocol::typed::EncodeOptions;
    for (id, frames_sent) in
        [("request/prompt_array_63", 2), ("request/prompt_array_64", 3), ("request/prompt_array_65", 3)]
    {
        let frames = golden_frames("0.34.0", id);
        assert_eq!(frames.len(), frames_sent, "{id}");
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let (request, _) = decode_request(v034(), &refs, &Limits::default()).expect("accepted");
        let ours = request.encode(v034()).expect("encodes");
        assert_eq!(ours, frames, "{id}");
        // With a threshold of 1 KiB every one of them goes inline, and the
        // engine reads the same request.
        let inline = request.encode_shared(v034(), &EncodeOptions::default().with_zero_copy_threshold(1024)).unwrap();
        assert_eq!(inline.len(), 2, "{id}");
        let (back, _) = decode_request_shared(v034(), &inline, &Limits::default()).expect("accepted");
        assert_eq!(back, request, "{id}");
    }
}

/// What a 0.33 gateway sends is refused by a 0.34.0 engine (vLLM 0.34.0's
/// decoder on the 0.33.0 tree's bytes: `mutant/req_033_*`), while the same
/// typed request encoded for 0.34.0 is accepted.
#[test]
fn a_0_33_add_is_refused_by_0_34_and_the_same_request_encoded_for_0_34_is_not() {
    for id in ["request/all_request_fields", "request/add_frontend_like"] {
        let old = golden_frames("0.33.0", id);
        let refs: Vec<&[u8]> = old.iter().map(Vec::as_slice).collect();
        let e = decode_request(v034(), &refs, &Limits::default()).expect_err("a list prompt");
        assert!(matches!(e.class, RejectClass::Frames | RejectClass::Type), "{id}: {e}");
        let (request, _) = decode_request(v033(), &refs, &Limits::default()).expect("a 0.33.0 request");
        let new = request.encode(v034()).expect("encodes for 0.34.0");
        let refs: Vec<&[u8]> = new.iter().map(Vec::as_slice).collect();
        let (back, drift) = decode_request(v034(), &refs, &Limits::default()).expect("accepted by 0.34.0");
        assert!(drift.is_empty());
        assert_eq!(back, request, "{id}");
    }
}
