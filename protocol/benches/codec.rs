//! Codec benches on vLLM's own bytes: the inputs are golden cases produced by
//! vLLM 0.33.0's `MsgpackEncoder` (`golden/vllm/0.33.0/...`), the same bytes
//! that `bench/msgspec_compare.py` times with vLLM's own encoder and decoder.
//!
//! Run: `cargo bench -p engine-protocol --bench codec`.

use engine_protocol::Dialect;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind};

/// (bench name, golden case id) of version 0.33.0.
pub const CASES: &[(&str, &str)] = &[
    ("request_512_tokens", "request/prompt_512_tokens"),
    ("outputs_64", "output/batch_64"),
    ("outputs_64_top5_logprobs", "output/batch_64_top5_logprobs"),
    ("outputs_256", "output/batch_256"),
    ("outputs_aux_logprobs_large", "output/batch_logprobs_aux_large"),
];

fn load(id: &str) -> (MessageKind, Vec<Vec<u8>>) {
    let path = format!("{}/../golden/vllm/0.33.0/{id}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let j: serde_json::Value = serde_json::from_str(&text).expect("golden JSON");
    let kind = MessageKind::parse(j["message"].as_str().expect("message")).expect("kind");
    let frames =
        j["frames"].as_array().expect("frames").iter().map(|f| hex::decode(f.as_str().unwrap()).unwrap()).collect();
    (kind, frames)
}

fn codec(c: &mut Criterion) {
    let rel = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    let limits = Limits::default();
    for (name, id) in CASES {
        let (kind, frames) = load(id);
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let bytes: usize = frames.iter().map(Vec::len).sum();
        let value = decode_message(rel, kind, &refs, &limits).expect("golden decodes").value;
        let mut g = c.benchmark_group(*name);
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function("decode", |b| b.iter(|| decode_message(rel, kind, black_box(&refs), &limits).unwrap()));
        g.bench_function("encode", |b| b.iter(|| encode_message(rel, kind, black_box(&value)).unwrap()));
        g.finish();
    }
}

/// `hot_decode/<case>`: the borrowing fast decoder of output batches
/// (`engine_protocol::hot::decode_outputs`) on the output cases above; compare
/// with `<case>/decode`.
fn hot_decode(c: &mut Criterion) {
    let rel = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    let limits = Limits::default();
    let mut g = c.benchmark_group("hot_decode");
    for (name, id) in CASES {
        let (kind, frames) = load(id);
        if kind != MessageKind::EngineCoreOutputs {
            continue;
        }
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let bytes: usize = frames.iter().map(Vec::len).sum();
        engine_protocol::hot::decode_outputs(rel, &refs, &limits).expect("golden decodes");
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function(*name, |b| {
            b.iter(|| engine_protocol::hot::decode_outputs(rel, black_box(&refs), &limits).unwrap())
        });
    }
    g.finish();
}

/// The typed API's direct encoder on the same inputs: decode the golden into
/// the generated struct once, then time `encode` (frames written straight
/// from the struct, no value tree), as `encode` above times the Value
/// encoder.
fn typed_encode(c: &mut Criterion) {
    use engine_protocol::typed::{decode_typed, EngineCoreOutputs, EngineCoreRequest};
    let rel = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    let limits = Limits::default();
    let mut g = c.benchmark_group("typed_encode");
    for (name, id) in CASES {
        let (kind, frames) = load(id);
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        g.throughput(Throughput::Bytes(frames.iter().map(Vec::len).sum::<usize>() as u64));
        match kind {
            MessageKind::EngineCoreRequest => {
                let (req, _) = decode_typed::<EngineCoreRequest>(rel, &refs, &limits).expect("golden decodes");
                assert_eq!(req.encode(rel).unwrap(), frames, "{id}: typed encode is byte-exact");
                g.bench_function(*name, |b| b.iter(|| black_box(&req).encode(rel).unwrap()));
                // With vLLM's `__post_init__` rules checked first.
                assert_eq!(req.encode_checked(rel).unwrap(), frames, "{id}: checked encode is byte-exact");
                g.bench_function(format!("checked/{name}"), |b| {
                    b.iter(|| black_box(&req).encode_checked(rel).unwrap())
                });
            }
            MessageKind::EngineCoreOutputs => {
                let (out, _) = decode_typed::<EngineCoreOutputs>(rel, &refs, &limits).expect("golden decodes");
                assert_eq!(out.encode(rel).unwrap(), frames, "{id}: typed encode is byte-exact");
                g.bench_function(*name, |b| b.iter(|| black_box(&out).encode(rel).unwrap()));
            }
            _ => {}
        }
    }
    g.finish();
}

/// `typed_decode/<case>`: the typed API's decode of the request case into
/// the generated struct: `decode_typed` (the direct decoder
/// `engine_protocol::hot::decode_request`) and, for reference,
/// `typed_via_value/<case>` (`decode_message` plus the conversion, what
/// `decode_typed` was before the direct decoder).
fn typed_decode(c: &mut Criterion) {
    use engine_protocol::typed::{decode_typed, decode_typed_via_value, EngineCoreRequest};
    let rel = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    let limits = Limits::default();
    let mut g = c.benchmark_group("typed_decode");
    for (name, id) in CASES {
        let (kind, frames) = load(id);
        if kind != MessageKind::EngineCoreRequest {
            continue;
        }
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        g.throughput(Throughput::Bytes(frames.iter().map(Vec::len).sum::<usize>() as u64));
        assert!(engine_protocol::internal::decode_request_direct(rel, &refs, &limits).is_some(), "{id}: direct path");
        g.bench_function(*name, |b| {
            b.iter(|| decode_typed::<EngineCoreRequest>(rel, black_box(&refs), &limits).unwrap())
        });
        g.bench_function(format!("typed_via_value/{name}"), |b| {
            b.iter(|| decode_typed_via_value::<EngineCoreRequest>(rel, black_box(&refs), &limits).unwrap())
        });
    }
    g.finish();
}

/// `tokenspeed_decode/<case>/{value,typed,direct}`: TokenSpeed 0.1.1's
/// output batch (goldens made by TokenSpeed's own encoder) through
/// `decode_message` (the value tree), the typed API's `decode_typed` (the
/// value tree, then the conversion) and `decode_batch` (the direct
/// decoder into the typed struct).
fn tokenspeed_decode(c: &mut Criterion) {
    use engine_protocol::hot::tokenspeed::decode_batch;
    use engine_protocol::internal::decode_batch_direct;
    use engine_protocol::typed::tokenspeed::{decode_typed, BatchTokenIDOutSlim};
    let rel = release(Dialect::TokenSpeed, "0.1.1").expect("0.1.1");
    let limits = Limits::default();
    let mut g = c.benchmark_group("tokenspeed_decode");
    for id in ["output/many_rows", "output/logprobs_multi"] {
        let path = format!("{}/../golden/tokenspeed/0.1.1/{id}.json", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let j: serde_json::Value = serde_json::from_str(&text).expect("golden JSON");
        let frames: Vec<Vec<u8>> =
            j["frames"].as_array().expect("frames").iter().map(|f| hex::decode(f.as_str().unwrap()).unwrap()).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let name = id.trim_start_matches("output/");
        g.throughput(Throughput::Bytes(frames.iter().map(Vec::len).sum::<usize>() as u64));
        assert!(decode_batch_direct(rel, &refs, &limits).is_some(), "{id}: direct path");
        let kind = MessageKind::EngineCoreOutputs;
        g.bench_function(format!("{name}/value"), |b| {
            b.iter(|| decode_message(rel, kind, black_box(&refs), &limits).unwrap())
        });
        g.bench_function(format!("{name}/typed"), |b| {
            b.iter(|| decode_typed::<BatchTokenIDOutSlim>(rel, black_box(&refs), &limits).unwrap())
        });
        g.bench_function(format!("{name}/direct"), |b| {
            b.iter(|| decode_batch(rel, black_box(&refs), &limits).unwrap())
        });
    }
    g.finish();
}

/// `int_run/<what>`: the request's run of 512 prompt token ids written by
/// `msgpack::write::int_array` (most of `typed_encode/request_512_tokens`)
/// against this machine's memory bandwidth for the same bytes: `memcpy`
/// (`copy_from_slice` of the encoded run) and `memset` (`fill`) of as many
/// bytes, each into a buffer reused across iterations, as the encoder's
/// output is written. The throughput is the run's size on the wire, so
/// criterion's GiB/s compare directly (`docs/bench.md`, "The integer run
/// against memory bandwidth").
fn int_run(c: &mut Criterion) {
    use engine_protocol::internal::msgpack::write;
    use engine_protocol::typed::{decode_typed, EngineCoreRequest};
    let rel = release(Dialect::Vllm, "0.33.0").expect("0.33.0");
    let (_, frames) = load("request/prompt_512_tokens");
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let (req, _) = decode_typed::<EngineCoreRequest>(rel, &refs, &Limits::default()).expect("golden decodes");
    let ids = req.prompt_token_ids.as_ref().and_then(|l| l.to_i64_vec()).expect("512 token ids");
    let mut run = Vec::new();
    write::int_array(&mut run, &ids);
    let mut g = c.benchmark_group("int_run");
    g.throughput(Throughput::Bytes(run.len() as u64));
    let mut out: Vec<u8> = Vec::with_capacity(run.len() * 4);
    g.bench_function("int_array", |b| {
        b.iter(|| {
            out.clear();
            write::int_array(&mut out, black_box(&ids));
            black_box(out.len())
        })
    });
    let mut dst = vec![0u8; run.len()];
    g.bench_function("memcpy", |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&run));
            black_box(dst.as_ptr());
        })
    });
    g.bench_function("memset", |b| {
        b.iter(|| {
            dst.fill(black_box(0x5a));
            black_box(dst.as_ptr());
        })
    });
    g.finish();
}

criterion_group!(benches, codec, typed_encode, typed_decode, int_run);
criterion_group!(hot_benches, hot_decode, tokenspeed_decode);
criterion_main!(benches, hot_benches);
