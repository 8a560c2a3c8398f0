//! Decoder limits: hostile lengths, deep nesting, frame counts and sizes.
//! Every case must be a typed rejection, never a panic, a stack overflow or
//! an allocation sized by the declared length.

mod common;

use common::*;
use engine_protocol::schema::Ty;
use engine_protocol::{decode_message, MessageKind, RejectClass};
use engine_protocol::{decode_payload, Limits, VLLM_ENGINE_MAX_DEPTH};

static ANY: Ty = Ty::Any;

#[test]
fn array32_declaring_four_billion_elements_is_malformed_without_allocating() {
    let p = [0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn map32_declaring_four_billion_entries_is_malformed() {
    let p = [0xdf, 0xff, 0xff, 0xff, 0xff];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn str32_longer_than_the_input_is_malformed() {
    let p = [0xdb, 0x7f, 0xff, 0xff, 0xff, b'a'];
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Malformed);
}

#[test]
fn nesting_deeper_than_the_limit_is_a_limits_error_not_a_stack_overflow() {
    // 100 000 nested one-element arrays.
    let mut p = vec![0x91; 100_000];
    p.push(0xc0);
    let e = decode_payload("X", &ANY, &[&p], &Limits::default()).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

/// An ADD whose `sampling_params.extra_args` is `maps` maps nested in each
/// other (`{"k": {"k": ... nil}}`): the message nests `2 + maps` levels
/// (request struct, `SamplingParams`, then the maps).
fn request_with_nested_extra_args(maps: usize) -> Vec<Vec<u8>> {
    let mut sp = vec![0xde, 0x00, 0x01];
    sp.extend_from_slice(b"\xaaextra_args");
    for _ in 0..maps {
        sp.extend_from_slice(&[0x81, 0xa1, b'k']);
    }
    sp.push(0xc0);
    let mut p = vec![0x99, 0xa1, b'r', 0x90, 0xc0];
    p.extend_from_slice(&sp);
    p.extend_from_slice(&[0xc0, 0xcb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xc0, 0xc0, 0xc0]);
    vec![vec![0], p]
}

#[test]
fn nesting_inside_extra_args_is_bounded_too() {
    let e = decode(v033(), MessageKind::EngineCoreRequest, &request_with_nested_extra_args(5000)).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
    assert!(e.path.starts_with("EngineCoreRequest.sampling_params.extra_args.k.k"), "{e}");
}

#[test]
fn default_depth_is_what_the_engine_admits() {
    assert_eq!(Limits::default().max_depth, VLLM_ENGINE_MAX_DEPTH);
    assert_eq!(VLLM_ENGINE_MAX_DEPTH, 995);
    assert_eq!(Limits::for_recursion_limit(1000).max_depth, 995);
    assert_eq!(Limits::for_recursion_limit(2000).max_depth, 1995);
}

/// Runs `f` on a thread with the 2 MiB stack test threads get by default,
/// so that a debug build shows the decoder's real stack use at the limit.
fn on_default_test_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(2 << 20).spawn(f).expect("spawn").join().expect("no stack overflow")
}

#[test]
fn extra_args_at_the_depth_limit_is_accepted_and_one_level_more_is_limits() {
    on_default_test_stack(|| {
        let at = request_with_nested_extra_args(VLLM_ENGINE_MAX_DEPTH - 2);
        let d = decode(v033(), MessageKind::EngineCoreRequest, &at).expect("995 levels are accepted");
        // The view, the encoder and decode(encode(view)) cope too.
        let ty = MessageKind::EngineCoreRequest.payload_type(v033());
        let view = engine_protocol::view::to_view(ty, &d.value);
        let built = engine_protocol::view::from_view("EngineCoreRequest", ty, &view).expect("view builds");
        let again = engine_protocol::encode_message(v033(), MessageKind::EngineCoreRequest, &built).expect("encodes");
        let round = decode(v033(), MessageKind::EngineCoreRequest, &again).expect("decode(encode) accepted");
        assert!(engine_protocol::view::diff(&view, &engine_protocol::view::to_view(ty, &round.value)).is_none());
        let past = request_with_nested_extra_args(VLLM_ENGINE_MAX_DEPTH - 1);
        let e = decode(v033(), MessageKind::EngineCoreRequest, &past).unwrap_err();
        assert_eq!(e.class, RejectClass::Limits, "{e}");
        assert!(e.detail.contains("995"), "{e}");
    });
}

#[test]
fn a_configured_depth_is_honoured_at_and_past_it() {
    let limits = Limits { max_depth: 10, ..Limits::default() };
    let refs = |f: &[Vec<u8>]| f.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    let ok = refs(&request_with_nested_extra_args(8));
    let ok: Vec<&[u8]> = ok.iter().map(Vec::as_slice).collect();
    assert!(decode_message(v033(), MessageKind::EngineCoreRequest, &ok, &limits).is_ok());
    let bad = refs(&request_with_nested_extra_args(9));
    let bad: Vec<&[u8]> = bad.iter().map(Vec::as_slice).collect();
    let e = decode_message(v033(), MessageKind::EngineCoreRequest, &bad, &limits).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

/// Stack probe (not run by default): runs one step at `DEPTH` (default:
/// the default depth limit) on a thread of `STACK_KIB` KiB, e.g.
/// `STEP=decode STACK_KIB=256 cargo test -p engine-protocol --test limits -- --ignored stack_probe`.
/// Steps: `decode`, `drop` (dropping the decoded value), `view`,
/// `from_view`, `encode`, `diff`, `clone_view`, `drop_view`, `to_string`,
/// `parse_json` (results are
/// not dropped on the measured stack). A stack overflow
/// aborts the process; the smallest size that passes is what the step needs.
#[test]
#[ignore]
fn stack_probe() {
    let kib: usize = std::env::var("STACK_KIB").ok().and_then(|s| s.parse().ok()).unwrap_or(2048);
    let depth: usize = std::env::var("DEPTH").ok().and_then(|s| s.parse().ok()).unwrap_or(VLLM_ENGINE_MAX_DEPTH);
    let step = std::env::var("STEP").unwrap_or_else(|_| "decode".into());
    let limits = Limits { max_depth: depth, ..Limits::default() };
    let frames = request_with_nested_extra_args(depth - 2);
    let ty = MessageKind::EngineCoreRequest.payload_type(v033());
    // Everything but the measured step runs on a big stack.
    let big =
        |f: Box<dyn FnOnce() + Send>| std::thread::Builder::new().stack_size(1 << 30).spawn(f).unwrap().join().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let fr = frames.clone();
    big(Box::new(move || {
        let refs: Vec<&[u8]> = fr.iter().map(Vec::as_slice).collect();
        let d = decode_message(v033(), MessageKind::EngineCoreRequest, &refs, &limits).expect("accepted");
        let view = engine_protocol::view::to_view(ty, &d.value);
        let built = engine_protocol::view::from_view("EngineCoreRequest", ty, &view).expect("view builds");
        let copy = view.clone();
        let text = view.to_string();
        tx.send((d, view, built, copy, text)).unwrap();
    }));
    let (d, view, built, copy, text) = rx.recv().unwrap();
    // Only the measured step may drop anything on the small stack.
    let (d, view, built, copy) = (
        std::mem::ManuallyDrop::new(d),
        std::mem::ManuallyDrop::new(view),
        std::mem::ManuallyDrop::new(built),
        std::mem::ManuallyDrop::new(copy),
    );
    let keep = std::thread::Builder::new()
        .stack_size(kib << 10)
        .spawn(move || {
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let mut keep: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
            match step.as_str() {
                "decode" => keep.push(Box::new(decode_message(v033(), MessageKind::EngineCoreRequest, &refs, &limits))),
                "drop" => drop(std::mem::ManuallyDrop::into_inner(d)),
                "view" => keep.push(Box::new(engine_protocol::view::to_view(ty, &d.value))),
                "from_view" => keep.push(Box::new(engine_protocol::view::from_view("EngineCoreRequest", ty, &view))),
                "encode" => {
                    keep.push(Box::new(engine_protocol::encode_message(v033(), MessageKind::EngineCoreRequest, &built)))
                }
                "clone_view" => keep.push(Box::new((*view).clone())),
                "parse_json" => keep.push(Box::new(engine_protocol::view::parse_json(&text))),
                "to_string" => keep.push(Box::new(copy.to_string())),
                "diff" => assert!(engine_protocol::view::diff(&view, &copy).is_none()),
                "drop_view" => drop(std::mem::ManuallyDrop::into_inner(view)),
                other => panic!("unknown step {other}"),
            }
            keep
        })
        .unwrap()
        .join()
        .unwrap();
    std::mem::forget(keep);
    eprintln!("depth {depth} fits in {kib} KiB");
}

#[test]
fn too_many_frames_is_a_limits_error() {
    let limits = Limits { max_frames: 4, ..Limits::default() };
    let frames: Vec<&[u8]> = vec![&[0x90]; 5];
    let e = decode_payload("X", &ANY, &frames, &limits).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

#[test]
fn oversized_frame_is_a_limits_error() {
    let limits = Limits { max_frame_bytes: 16, ..Limits::default() };
    let big = [0u8; 17];
    let e = decode_payload("X", &ANY, &[&[0xc0][..], &big[..]], &limits).unwrap_err();
    assert_eq!(e.class, RejectClass::Limits);
}

#[test]
fn tensor_shape_product_overflow_is_a_frames_error() {
    // LogprobsLists ids with shape [2^62, 2^62] and 4 bytes of data.
    let frames = golden_frames("0.33.0", "output/logprobs_inline");
    let p = &frames[0];
    // Find the first shape header `92` after the "<i4" dtype string.
    let at = p.windows(4).position(|w| w == [0xa3, 0x3c, 0x69, 0x34]).unwrap() + 4;
    let mut bad = p[..at].to_vec();
    bad.extend_from_slice(&[0x92, 0xcf, 0x40, 0, 0, 0, 0, 0, 0, 0, 0xcf, 0x40, 0, 0, 0, 0, 0, 0, 0]);
    bad.extend_from_slice(&[0xd6, 0x03, 0, 0, 0, 0]);
    let e = decode_message(v033(), MessageKind::EngineCoreOutputs, &[&bad], &Limits::default()).unwrap_err();
    // Truncated after the tensor, but the tensor check comes first.
    assert_eq!(e.class, RejectClass::Frames, "{e}");
}

#[test]
fn case_files_read_as_serde_json_reads_them_and_as_deep_as_the_depth_limit() {
    use engine_protocol::view::{parse_json, JsonErrorKind, MAX_JSON_DEPTH};
    let files = engine_testkit::corpus::json_files(&engine_testkit::corpus::golden_dir().join("vllm")).unwrap();
    let (mut same, mut deep) = (0, 0);
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        let ours = parse_json(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(theirs) => {
                assert!(ours == theirs, "{}", p.display());
                same += 1;
            }
            // serde_json's own limit of 128 levels: the deep cases.
            Err(e) => {
                assert!(e.to_string().contains("recursion limit"), "{}: {e}", p.display());
                deep += 1;
            }
        }
    }
    assert!(same > 700 && deep >= 4, "{same} files, {deep} deep");
    // Scalars, escapes, numbers and errors as serde_json has them.
    for text in [r#" {"a": [1, -0, 2.5e3, -1.0, 18446744073709551615, "x\"\\\u00e9", true, null, {}, []]} "#, "[]", "7"]
    {
        assert_eq!(parse_json(text).unwrap(), serde_json::from_str::<serde_json::Value>(text).unwrap(), "{text}");
    }
    for bad in ["", "[1,]", "{\"a\" 1}", "[1] 2", "{\"a\":1,}", "[\"x]", "nul", "{1: 2}"] {
        assert!(parse_json(bad).is_err(), "{bad:?}");
    }
    // At the bound, and one level past it: an error, not a stack overflow.
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    on_default_test_stack(move || {
        assert!(parse_json(&nest(MAX_JSON_DEPTH)).is_ok());
        assert_eq!(parse_json(&nest(MAX_JSON_DEPTH + 1)).unwrap_err().kind, JsonErrorKind::TooDeep);
        assert!(parse_json(&nest(1_000_000)).is_err());
    });
}
