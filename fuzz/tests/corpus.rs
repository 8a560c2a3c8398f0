//! The committed seed corpus and the regression inputs, run through every
//! target with every check (the `rmpv` comparison and the allocation bound
//! included) on stable Rust: `cargo test --manifest-path fuzz/Cargo.toml`.

use std::path::{Path, PathBuf};

engine_fuzz::install_counting_allocator!();

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

#[test]
fn every_seed_passes_every_check() {
    let mut n = 0;
    for target in engine_fuzz::oracle::TARGETS {
        let dir = corpus().join(target);
        let seeds = files(&dir);
        assert!(!seeds.is_empty(), "{}: no seeds (run write-seeds)", dir.display());
        for f in seeds {
            let data = std::fs::read(&f).unwrap();
            let r = std::panic::catch_unwind(|| engine_fuzz::fuzz(target, &data));
            assert!(r.is_ok(), "{target}: seed {} fails", f.display());
            n += 1;
        }
    }
    assert!(n > 500, "only {n} seeds");
}

#[test]
fn the_seed_corpus_is_what_write_seeds_writes() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden");
    let corpus_now = engine_fuzz::seeds::from_goldens(&golden).unwrap();
    let diffs = engine_fuzz::seeds::write(&corpus(), &corpus_now, true).unwrap();
    assert!(diffs.is_empty(), "stale seed corpus (run write-seeds): {diffs:?}");
}

/// Prints the largest allocation peak per input byte over the seeds of each
/// target (the figures of fuzz/README.md "Decoder limits"; not a check).
#[test]
#[ignore = "measurement, run by hand"]
fn measure_seed_allocation_peaks() {
    use engine_fuzz::oracle::{Probe, MULTI_FRAME_TARGETS};
    struct Peak(f64, usize, usize);
    impl Probe for Peak {
        fn decode<R>(&mut self, input: &[&[u8]], f: impl FnOnce() -> R) -> R {
            let (r, peak) = engine_fuzz::alloc::measure(f);
            let n: usize = input.iter().map(|f| f.len()).sum();
            let ratio = peak as f64 / n.max(1) as f64;
            if peak > self.2 {
                self.2 = peak;
            }
            if ratio > self.0 && n > 64 {
                (self.0, self.1) = (ratio, n);
            }
            r
        }
    }
    for target in engine_fuzz::oracle::TARGETS.iter().filter(|t| **t != "roundtrip") {
        let mut p = Peak(0.0, 0, 0);
        for f in files(&corpus().join(target)) {
            engine_fuzz::oracle::run(target, &std::fs::read(&f).unwrap(), &mut p);
        }
        let multi = MULTI_FRAME_TARGETS.contains(target);
        println!(
            "{target}: max {:.1} bytes per input byte (input {} bytes), max peak {} bytes, multi-frame {multi}",
            p.0, p.1, p.2
        );
    }
}
