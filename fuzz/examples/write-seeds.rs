//! Writes the seed corpus (`fuzz/corpus/<target>/`) from the goldens and the
//! dictionary (`fuzz/engine.dict`) from the schema tables. Stable Rust:
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example write-seeds            # write
//! cargo run --manifest-path fuzz/Cargo.toml --example write-seeds -- --check # compare only
//! ```
//!
//! Options: `--golden DIR` (default `golden/`), `--out DIR` (default
//! `fuzz/corpus/`), `--dict FILE` (default `fuzz/engine.dict`). `--check`
//! exits 1 when the committed corpus or dictionary differs from what would
//! be written.

use std::path::PathBuf;
use std::process::ExitCode;

use engine_fuzz::seeds;

fn main() -> ExitCode {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut golden = engine_testkit::corpus::golden_dir();
    let mut out = here.join("corpus");
    let mut dict = here.join("engine.dict");
    let mut check = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--check" => check = true,
            "--golden" => golden = args.next().map(PathBuf::from).unwrap_or(golden),
            "--out" => out = args.next().map(PathBuf::from).unwrap_or(out),
            "--dict" => dict = args.next().map(PathBuf::from).unwrap_or(dict),
            other => {
                eprintln!(
                    "unknown argument {other}\nusage: write-seeds [--check] [--golden DIR] [--out DIR] [--dict FILE]"
                );
                return ExitCode::from(2);
            }
        }
    }
    let corpus = match seeds::from_goldens(&golden) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("write-seeds: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut diffs = match seeds::write(&out, &corpus, check) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("write-seeds: {e}");
            return ExitCode::FAILURE;
        }
    };
    let text = seeds::dictionary();
    if std::fs::read_to_string(&dict).ok().as_deref() != Some(text.as_str()) {
        diffs.push(format!("{}: changed", dict.display()));
        if !check {
            if let Err(e) = std::fs::write(&dict, &text) {
                eprintln!("write-seeds: {}: {e}", dict.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let (files, bytes) = corpus.values().flat_map(|s| s.values()).fold((0, 0), |(n, b), v| (n + 1, b + v.len()));
    for (target, s) in &corpus {
        println!("{target}: {} seeds", s.len());
    }
    println!("{files} seeds, {bytes} bytes, {} differences from what was there", diffs.len());
    if check && !diffs.is_empty() {
        for d in diffs.iter().take(20) {
            eprintln!("  {d}");
        }
        eprintln!("the seed corpus is stale: run `cargo run --manifest-path fuzz/Cargo.toml --example write-seeds`");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
