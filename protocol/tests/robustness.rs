//! Every golden message, truncated at every length and with bytes flipped
//! and replaced at spread positions, decodes to a value or a typed error:
//! never a panic. (The fuzz targets in `fuzz/` go much further.)

mod common;

use common::*;
use engine_protocol::{decode_message, Limits, MessageKind};

fn golden_messages() -> Vec<(String, MessageKind, Vec<Vec<u8>>)> {
    let mut out = Vec::new();
    let root = format!("{}/../golden/vllm/0.33.0", env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![std::path::PathBuf::from(root)];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            let j = engine_protocol::view::parse_json(&std::fs::read_to_string(&p).unwrap()).unwrap();
            if j["kind"] != "message" {
                continue;
            }
            let kind = MessageKind::parse(j["message"].as_str().unwrap()).unwrap();
            let frames = j["frames"].as_array().unwrap().iter().map(|f| unhex(f.as_str().unwrap())).collect();
            out.push((p.display().to_string(), kind, frames));
        }
    }
    out
}

#[test]
fn truncated_and_mutated_golden_messages_never_panic() {
    let limits = Limits::default();
    let cases = golden_messages();
    assert!(cases.len() > 100, "golden corpus present");
    let mut decoded = 0usize;
    for (file, kind, frames) in cases {
        let payload_at = usize::from(kind.request_type().is_some());
        if frames.len() <= payload_at {
            continue;
        }
        let payload = frames[payload_at].clone();
        let step = (payload.len() / 64).max(1);
        let mut variants: Vec<Vec<u8>> = (0..payload.len()).step_by(step).map(|n| payload[..n].to_vec()).collect();
        for i in (0..payload.len()).step_by(step) {
            for b in [0x00, 0xff, 0xc1, 0xdd, 0xdf, 0xc7, 0x7f] {
                let mut m = payload.clone();
                m[i] = b;
                variants.push(m);
            }
            let mut m = payload.clone();
            m[i] ^= 0x80;
            variants.push(m);
        }
        for v in variants {
            let mut fs = frames.clone();
            fs[payload_at] = v;
            let refs: Vec<&[u8]> = fs.iter().map(Vec::as_slice).collect();
            let r = std::panic::catch_unwind(|| decode_message(common::v033(), kind, &refs, &limits).is_ok());
            assert!(r.is_ok(), "panic decoding a variant of {file}");
            decoded += 1;
        }
    }
    assert!(decoded > 10_000, "{decoded} variants");
}
