//! Inputs that broke a documented decoder bound or an oracle check, found
//! while building the fuzz targets and by their campaigns (fuzz/README.md
//! "Findings"). Each is a named test over a file in
//! fuzz/regressions/<target>/, run through its target with every check. An
//! open finding's test carries `#[ignore = "finding Fn ..."]` until the
//! decoder is fixed (`cargo test --manifest-path fuzz/Cargo.toml --
//! --ignored` runs it); F1 to F3 are fixed (9f04fe3), so their tests guard
//! the fixes; F6 was the oracle's mistake, and its test guards the oracle.

use engine_protocol::Dialect;
use std::path::Path;
use std::time::Instant;

use engine_fuzz::alloc;
use engine_protocol::{decode_message, release, Limits, MessageKind};

engine_fuzz::install_counting_allocator!();

fn input(target: &str, name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions").join(target).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bytes of each finding, built by the functions below; `write` keeps
/// the files in fuzz/regressions/ in step with them.
pub mod build {
    use engine_fuzz::split::join;

    /// F1: `SamplingParams.extra_args = {"k": X}`, X twenty nested array32
    /// headers each declaring as many elements as bytes remain, then nils:
    /// every level preallocates 32 bytes per remaining byte before the
    /// elements are read.
    pub fn f1_nested_prealloc() -> Vec<u8> {
        let total = 4096usize;
        let mut p = vec![0x81, 0xaa];
        p.extend_from_slice(b"extra_args");
        p.extend_from_slice(&[0x81, 0xa1, b'k']);
        for _ in 0..20 {
            let remaining = total - p.len() - 5;
            p.push(0xdd);
            p.extend_from_slice(&(remaining as u32).to_be_bytes());
        }
        p.resize(total, 0xc0);
        p
    }

    fn output_with_tensor_ref(elem_count: u32, index: u8) -> Vec<u8> {
        // EngineCoreOutput [request_id "", new_token_ids [], nil, nil,
        // pooling_output = ["int8", [elem_count], index]]
        let mut o = vec![0x95, 0xa0, 0x90, 0xc0, 0xc0, 0x93, 0xa4];
        o.extend_from_slice(b"int8");
        o.extend_from_slice(&[0x91, 0xce]);
        o.extend_from_slice(&elem_count.to_be_bytes());
        o.push(index);
        o
    }

    /// F2 (aux): 600 outputs whose `pooling_output` all reference aux frame
    /// 1, a 64 KiB buffer (a fill descriptor): every reference copies it.
    pub fn f2_aux_frame_reuse() -> Vec<u8> {
        let n = 600u16;
        let mut p = vec![0x92, 0x00, 0xdc];
        p.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            p.extend(output_with_tensor_ref(65536, 1));
        }
        // Frames: [payload, 64 KiB of zeros (fill), ""].
        let mut data = vec![3];
        data.extend_from_slice(&(p.len() as u16).to_le_bytes());
        data.extend_from_slice(&p);
        data.extend_from_slice(&[0x00, 0x80, 0x00, 0x00, 0x04]); // literal 0, fill 0x00 * 1024 * 64
        data
    }

    /// F2 (payload): outputs whose tensors reference frame 0, the payload
    /// itself: quadratic copying from one frame.
    pub fn f2_payload_self_reference() -> Vec<u8> {
        let n = 1000u16;
        let len = 5 + 18 * n as usize;
        let mut p = vec![0x92, 0x00, 0xdc];
        p.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            p.extend(output_with_tensor_ref(len as u32, 0));
        }
        assert_eq!(p.len(), len);
        join(&[p]).unwrap()
    }

    /// F3: `finished_requests`, a set of 20 000 distinct strings: the
    /// decoder's set deduplication compares every pair.
    pub fn f3_set_dedup_quadratic() -> Vec<u8> {
        let n = 20_000u32;
        // EngineCoreOutputs [0, [], nil, 0, nil, finished_requests]
        let mut p = vec![0x96, 0x00, 0x90, 0xc0, 0x00, 0xc0, 0xdd];
        p.extend_from_slice(&n.to_be_bytes());
        for i in 0..n {
            p.push(0xa5);
            p.extend_from_slice(format!("{i:05}").as_bytes());
        }
        join(&[p]).unwrap()
    }
}

fn peak(kind: MessageKind, data: &[u8]) -> (usize, usize) {
    let frames = engine_fuzz::split::split(data);
    let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
    let input: usize = refs.iter().map(|f| f.len()).sum();
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let (_, peak) = alloc::measure(|| decode_message(rel, kind, &refs, &Limits::default()));
    (peak, input)
}

#[test]
fn regression_files_match_their_builders() {
    for (target, name, bytes) in [
        ("sampling_params", "f1-nested-prealloc", build::f1_nested_prealloc()),
        ("engine_core_outputs", "f2-aux-frame-reuse", build::f2_aux_frame_reuse()),
        ("engine_core_outputs", "f2-payload-self-reference", build::f2_payload_self_reference()),
        ("engine_core_outputs", "f3-set-dedup-quadratic", build::f3_set_dedup_quadratic()),
    ] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions").join(target);
        let path = dir.join(name);
        if std::env::var_os("ENGINE_FUZZ_WRITE_REGRESSIONS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        assert_eq!(std::fs::read(&path).ok(), Some(bytes), "{} is stale", path.display());
    }
}

/// F6: a greedy ADD without seed or string rid, which 0.1.1 runs (its seed
/// pin) and 08-03 drops; the `tokenspeed_request` target's cross-version
/// check must accept the difference (the fuzzer's own input, kept as found).
#[test]
fn f6_greedy_seed_pin_across_versions_passes_every_tokenspeed_check() {
    engine_fuzz::fuzz("tokenspeed_request", &input("tokenspeed_request", "f6-greedy-seed-pin-across-versions"));
}

#[test]
fn f1_nested_prealloc_stays_within_the_allocation_bound() {
    engine_fuzz::fuzz("sampling_params", &input("sampling_params", "f1-nested-prealloc"));
}

#[test]
fn f2_aux_frame_reuse_stays_within_the_allocation_bound() {
    engine_fuzz::fuzz("engine_core_outputs", &input("engine_core_outputs", "f2-aux-frame-reuse"));
}

#[test]
fn f2_payload_self_reference_stays_within_the_allocation_bound() {
    engine_fuzz::fuzz("engine_core_outputs", &input("engine_core_outputs", "f2-payload-self-reference"));
}

#[test]
fn f3_set_dedup_is_not_quadratic() {
    // Work, not time: the decoder counts its element comparisons in set
    // deduplication. Linear dedup of 20 000 strings takes one step per
    // element; the quadratic one took n(n+1)/2 = 200 million.
    let data = input("engine_core_outputs", "f3-set-dedup-quadratic");
    engine_protocol::internal::work::reset();
    let _ = peak(MessageKind::EngineCoreOutputs, &data);
    let steps = engine_protocol::internal::work::steps();
    assert!(steps >= 20_000, "the 20 000-element set was not deduplicated ({steps} steps)");
    assert!(steps <= 2 * 20_000, "deduplicating 20 000 set elements took {steps} steps");
}

/// Prints the measurements quoted in fuzz/README.md (not a check).
#[test]
#[ignore = "measurement, run by hand"]
fn measure_findings() {
    let (p, i) = peak(MessageKind::EngineCoreOutputs, &build::f2_aux_frame_reuse());
    println!("F2 aux: input {i} bytes, peak {p} bytes ({:.0}x)", p as f64 / i as f64);
    let (p, i) = peak(MessageKind::EngineCoreOutputs, &build::f2_payload_self_reference());
    println!("F2 self: input {i} bytes, peak {p} bytes ({:.0}x)", p as f64 / i as f64);
    let data = build::f1_nested_prealloc();
    let ty = engine_protocol::schema::Ty::Struct(&engine_protocol::schema::vllm::SAMPLING_PARAMS);
    let ty: &'static _ = Box::leak(Box::new(ty));
    let (_, p) = alloc::measure(|| engine_protocol::decode_payload("SamplingParams", ty, &[&data], &Limits::default()));
    println!("F1: input {} bytes, peak {p} bytes ({:.0}x)", data.len(), p as f64 / data.len() as f64);
    let data = build::f3_set_dedup_quadratic();
    let t = Instant::now();
    let _ = peak(MessageKind::EngineCoreOutputs, &data);
    println!("F3: input {} bytes, decode took {:?}", data.len(), t.elapsed());
}

/// Prints how the current decoder classifies each finding's input.
#[test]
#[ignore = "measurement, run by hand"]
fn classify_findings() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    for (kind, data) in [
        (MessageKind::EngineCoreOutputs, build::f2_aux_frame_reuse()),
        (MessageKind::EngineCoreOutputs, build::f2_payload_self_reference()),
        (MessageKind::EngineCoreOutputs, build::f3_set_dedup_quadratic()),
    ] {
        let frames = engine_fuzz::split::split(&data);
        let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
        println!("{:?}", engine_protocol::classify(rel, kind, &refs, &Limits::default()));
    }
    let data = build::f1_nested_prealloc();
    let ty: &'static _ =
        Box::leak(Box::new(engine_protocol::schema::Ty::Struct(&engine_protocol::schema::vllm::SAMPLING_PARAMS)));
    let r = engine_protocol::decode_payload("SamplingParams", ty, &[&data], &Limits::default());
    println!("{:?}", r.map(|_| ()));
}
