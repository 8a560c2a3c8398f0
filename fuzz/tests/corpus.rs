//! The committed seed corpus and the regression inputs, run through every
//! target with every check (the `rmpv` comparison and the allocation bound
//! included) on stable Rust: `cargo test --manifest-path fuzz/Cargo.toml`.

use std::path::{Path, PathBuf};

use engine_fuzz::oracle::{agrees_with_verdict, EngineVerdict as Verdict};
use engine_protocol::{Dialect, MessageKind, RejectClass};
use engine_testkit::corpus::{golden_dir, message_cases};
use engine_testkit::on_large_stack;

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

/// Every golden message case, through the fuzz targets' input convention
/// and decode path: `(file, release, kind, joined frames, the engine's
/// verdict)` (vLLM's and TokenSpeed's goldens).
fn golden_messages() -> Vec<(PathBuf, &'static engine_protocol::ReleaseSchema, MessageKind, Vec<u8>, Verdict)> {
    on_large_stack(|| {
        let cases = message_cases(&golden_dir()).expect("golden/ loads");
        let mut out = Vec::new();
        for c in &cases {
            let (Some(rel), Some((kind, frames, expect))) = (c.release(), c.message()) else { continue };
            let Some(joined) = engine_fuzz::split::join(frames) else { continue };
            out.push((c.file.clone(), rel, kind, joined, expect.clone()));
        }
        out
    })
}

#[test]
fn every_golden_message_gets_the_engines_verdict_through_the_fuzz_decode_path() {
    let cases = golden_messages();
    assert!(cases.len() > 600, "only {} golden message cases", cases.len());
    let mut wrong = Vec::new();
    for (file, rel, kind, joined, verdict) in &cases {
        let frames = engine_fuzz::split::split(joined);
        let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
        if let Err(e) = agrees_with_verdict(rel, *kind, &refs, verdict) {
            wrong.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn the_verdict_oracle_reports_a_wrong_verdict() {
    let cases = golden_messages();
    let (file, rel, kind, joined, _) = cases.iter().find(|c| c.4 == Verdict::Accept).unwrap();
    let frames = engine_fuzz::split::split(joined);
    let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
    let wrong = agrees_with_verdict(rel, *kind, &refs, &Verdict::Reject(RejectClass::Type));
    assert!(wrong.is_err(), "{}: a claimed `type` reject of an accepted case went unnoticed", file.display());
    let (file, rel, kind, joined, verdict) = cases.iter().find(|c| c.4 != Verdict::Accept).unwrap();
    let frames = engine_fuzz::split::split(joined);
    let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
    assert!(agrees_with_verdict(rel, *kind, &refs, &Verdict::Accept).is_err(), "{}", file.display());
    assert!(agrees_with_verdict(rel, *kind, &refs, verdict).is_ok());
}

/// TokenSpeed's goldens are judged as the fuzz targets judge them: each
/// gets the verdict TokenSpeed's own code gave it (the golden's
/// `expect`), and was judged by the engine configuration the fuzz decode
/// path assumes (`decode_message` runs the receive path with
/// `EngineConfig::default()`; the golden records its engine in
/// `provenance.engine_config` of its ADD cases). A wrong verdict is noticed.
#[test]
fn every_tokenspeed_golden_gets_tokenspeeds_verdict_through_the_fuzz_decode_path() {
    use engine_protocol::validate::tokenspeed::EngineConfig;
    let engine = EngineConfig::default();
    let cases: Vec<_> = golden_messages().into_iter().filter(|c| c.1.dialect == Dialect::TokenSpeed).collect();
    assert!(cases.len() > 300, "only {} TokenSpeed golden message cases", cases.len());
    let mut wrong = Vec::new();
    for (file, rel, kind, joined, verdict) in &cases {
        if *kind == MessageKind::EngineCoreRequest {
            // Only the ADD goes through the engine's receive path.
            let j = engine_testkit::corpus::read_json(file).unwrap();
            let cfg = &j["provenance"]["engine_config"];
            assert_eq!(cfg["vocab_size"].as_u64().map(|v| v as u32), engine.vocab_size, "{}", file.display());
            let logprobs = cfg["enable_output_logprobs"].as_bool();
            assert_eq!(logprobs, Some(engine.enable_output_logprobs), "{}", file.display());
        }
        let frames = engine_fuzz::split::split(joined);
        let refs: Vec<&[u8]> = frames.iter().map(|f| &**f).collect();
        if let Err(e) = agrees_with_verdict(rel, *kind, &refs, verdict) {
            wrong.push(format!("{}: {e}", file.display()));
        }
        let claimed = verdict.wrong();
        assert!(
            agrees_with_verdict(rel, *kind, &refs, &claimed).is_err(),
            "{}: wrong verdict unnoticed",
            file.display()
        );
    }
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
    for want in ["accept", "type", "frames", "validation"] {
        assert!(cases.iter().any(|c| c.4.label() == want), "no TokenSpeed golden with verdict {want}");
    }
}

#[test]
fn the_seed_corpus_is_what_write_seeds_writes() {
    let corpus_now = engine_fuzz::seeds::from_goldens(&golden_dir()).unwrap();
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
