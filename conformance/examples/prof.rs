//! Profiling helper (not part of the suite): `prof <case.json> <iters> <dec|enc|hot>`
//! (`hot`: the fast output decoder, `engine_protocol::hot::decode_outputs`;
//! `conv`: the typed API's conversion of a decoded request to its struct).
use engine_protocol::Dialect;
use engine_protocol::{decode_message, encode_message, release, Limits, MessageKind};
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
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let n: usize = a[2].parse().unwrap();
    let value = decode_message(rel, kind, &refs, &Limits::default()).unwrap().value;
    let t = std::time::Instant::now();
    if a[3] == "hot" {
        for _ in 0..n {
            let h = engine_protocol::hot::decode_outputs(rel, std::hint::black_box(&refs), &Limits::default());
            std::hint::black_box(h.unwrap());
        }
    } else if a[3] == "conv" {
        for _ in 0..n {
            let r = engine_protocol::typed::EngineCoreRequest::from_value(rel, std::hint::black_box(&value));
            std::hint::black_box(r.unwrap());
        }
    } else if a[3] == "dec" {
        for _ in 0..n {
            std::hint::black_box(decode_message(rel, kind, std::hint::black_box(&refs), &Limits::default()).unwrap());
        }
    } else {
        for _ in 0..n {
            std::hint::black_box(encode_message(rel, kind, std::hint::black_box(&value)).unwrap());
        }
    }
    println!("{:?}/iter", t.elapsed() / n as u32);
}
