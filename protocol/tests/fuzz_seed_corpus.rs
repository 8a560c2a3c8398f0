//! The fuzz seed corpus (`fuzz/corpus/<target>/`), read by `cargo test` on
//! stable Rust so that seeds never rot: every file goes through the entry
//! point of its fuzz target with the same checks (`engine_testkit::oracle`,
//! which the fuzz targets run:
//! outcome agreement with `classify`, the decode/encode fixed point, tensor
//! and depth invariants, the frame-layer rules), without libFuzzer.
//!
//! The fuzz crate (outside the workspace) runs the same files with two more
//! checks that need its own dependencies, the `rmpv` comparison and the
//! allocation bound: `cargo test --manifest-path fuzz/Cargo.toml`.

use std::path::{Path, PathBuf};

use engine_testkit::oracle;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn every_fuzz_seed_decodes_without_panic_and_passes_the_oracles() {
    let mut failures = Vec::new();
    let mut n = 0;
    for target in oracle::TARGETS {
        let dir = corpus_dir().join(target);
        let seeds = files(&dir);
        assert!(!seeds.is_empty(), "{}: no seeds (run the seed writer, fuzz/README.md)", dir.display());
        for file in seeds {
            let data = std::fs::read(&file).unwrap();
            n += 1;
            let r = std::panic::catch_unwind(|| {
                if *target == "roundtrip" {
                    roundtrip(&data);
                } else {
                    assert!(oracle::run(target, &data, &mut oracle::NoProbe), "no target {target}");
                }
            });
            if r.is_err() {
                failures.push(format!("{target}/{}", file.file_name().unwrap().to_string_lossy()));
            }
        }
    }
    assert!(failures.is_empty(), "{} of {n} seeds fail: {failures:?}", failures.len());
    assert!(n > 500, "only {n} seeds under {}", corpus_dir().display());
}

/// `roundtrip` seeds drive the message generator (feature `arbitrary`);
/// without the feature they are only read.
#[cfg(feature = "arbitrary")]
fn roundtrip(data: &[u8]) {
    use arbitrary::{Arbitrary, Unstructured};
    use engine_protocol::internal::arbitrary::GeneratedMessage;
    let Ok(g) = GeneratedMessage::arbitrary_take_rest(Unstructured::new(data)) else { return };
    let frames = engine_protocol::encode_message(g.release, g.kind, &g.value).expect("a generated value encodes");
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let (_, decoded) = oracle::message(&mut oracle::NoProbe, g.release, g.kind, &refs);
    let decoded = decoded.expect("a generated value is accepted");
    assert_eq!(oracle::same_value(&g.value, &decoded), None);
}

#[cfg(not(feature = "arbitrary"))]
fn roundtrip(data: &[u8]) {
    let _ = data;
}
