//! Profiling helper (not part of the suite): `prof <case.json> <iters> <path>`
//! on one golden case of a vLLM release the typed API covers (the case's
//! `version`), printing the time per call. Paths:
//! `dec` / `enc` (the value decoder and encoder, `decode_message` /
//! `encode_message`), `tdec` / `tenc` (`decode_typed` and the typed
//! structs' direct encode), `sdec` / `senc` (a request on shared frames:
//! `hot::decode_request_shared` and `encode_shared`, a 0.34.0 prompt array
//! read and written without a copy), `hot` (the fast decoders:
//! `engine_protocol::hot::decode_request` for an ADD,
//! `engine_protocol::hot::decode_outputs` for an output batch), `conv` (the
//! typed API's conversion of a decoded request to its struct).
//!
//! Instructions per call (docs/bench.md, "Instruction counts across the
//! module restructuring"):
//!
//! ```sh
//! cargo build --release -p conformance --example prof
//! for n in 20 120; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/examples/prof golden/vllm/0.33.0/output/batch_64.json $n tenc; done
//! # (instructions at 120 - instructions at 20) / 100
//! ```
use engine_protocol::bytes::Bytes;
use engine_protocol::typed::{decode_typed, EncodeOptions, EngineCoreOutputs, EngineCoreRequest};
use engine_protocol::Dialect;
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind};
use std::hint::black_box;
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&a[1]).unwrap()).unwrap();
    let kind = MessageKind::parse(j["message"].as_str().unwrap()).unwrap();
    let frames: Vec<Vec<u8>> =
        j["frames"].as_array().unwrap().iter().map(|f| hex::decode(f.as_str().unwrap()).unwrap()).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let rel = release(Dialect::Vllm, j["version"].as_str().unwrap()).unwrap();
    let shared: Vec<Bytes> = frames.iter().map(|f| Bytes::copy_from_slice(f)).collect();
    let opts = EncodeOptions::default();
    let n: usize = a[2].parse().unwrap();
    let lim = Limits::default();
    let value = decode_message(rel, kind, &refs, &lim).unwrap().value;
    let is_req = kind == MessageKind::EngineCoreRequest;
    let treq = if is_req { Some(decode_typed::<EngineCoreRequest>(rel, &refs, &lim).unwrap().0) } else { None };
    let tout = if is_req { None } else { Some(decode_typed::<EngineCoreOutputs>(rel, &refs, &lim).unwrap().0) };
    let t = std::time::Instant::now();
    for _ in 0..n {
        match a[3].as_str() {
            "dec" => {
                black_box(decode_message(rel, kind, black_box(&refs), &lim).unwrap());
            }
            "enc" => {
                black_box(encode_message(rel, kind, black_box(&value)).unwrap());
            }
            "tdec" if is_req => {
                black_box(decode_typed::<EngineCoreRequest>(rel, black_box(&refs), &lim).unwrap());
            }
            "tdec" => {
                black_box(decode_typed::<EngineCoreOutputs>(rel, black_box(&refs), &lim).unwrap());
            }
            "tenc" => {
                if let Some(r) = &treq {
                    black_box(black_box(r).encode(rel).unwrap());
                }
                if let Some(o) = &tout {
                    black_box(black_box(o).encode(rel).unwrap());
                }
            }
            "sdec" => {
                black_box(engine_protocol::hot::decode_request_shared(rel, black_box(&shared), &lim).unwrap());
            }
            "senc" => {
                if let Some(r) = &treq {
                    black_box(black_box(r).encode_shared(rel, &opts).unwrap());
                }
                if let Some(o) = &tout {
                    black_box(black_box(o).encode_shared(rel, &opts).unwrap());
                }
            }
            "hot" if is_req => {
                black_box(engine_protocol::hot::decode_request(rel, black_box(&refs), &lim).unwrap());
            }
            "hot" => {
                black_box(engine_protocol::hot::decode_outputs(rel, black_box(&refs), &lim).unwrap());
            }
            "conv" => {
                black_box(EngineCoreRequest::from_value(rel, black_box(&value)).unwrap());
            }
            other => panic!("unknown path {other:?}: dec, enc, tdec, tenc, sdec, senc, hot or conv"),
        }
    }
    println!("{:?}/iter", t.elapsed() / n as u32);
}
