//! Every golden message, truncated at every length and with bytes flipped
//! and replaced at spread positions, decodes to a value or a typed error:
//! never a panic. (The fuzz targets in `fuzz/` go much further.)

mod common;

use engine_protocol::{decode_message, Limits, MessageKind};

fn golden_messages() -> Vec<(String, MessageKind, Vec<Vec<u8>>)> {
    // Reading the deep cases' values recurses past a debug test thread's stack.
    engine_testkit::on_large_stack(|| {
        let dir = engine_testkit::corpus::golden_dir().join("vllm/0.33.0");
        engine_testkit::corpus::message_cases(&dir)
            .unwrap()
            .iter()
            .filter_map(|c| c.message().map(|(kind, frames, _)| (c.file.display().to_string(), kind, frames.to_vec())))
            .collect()
    })
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
