//! Writes the seed corpus (`gpu_runner/fuzz/corpus/<target>/`) and the
//! dictionary (`gpu_runner/fuzz/gpu-runner.dict`) from the committed
//! golden files (`gpu_runner_fuzz::seeds`). Stable Rust:
//!
//! ```text
//! cargo run --manifest-path gpu_runner/fuzz/Cargo.toml --example write-seeds            # write
//! cargo run --manifest-path gpu_runner/fuzz/Cargo.toml --example write-seeds -- --check # compare only
//! ```
//!
//! `--check` exits 1 when the committed corpus or dictionary differs from
//! what would be written.

use std::path::PathBuf;
use std::process::ExitCode;

use gpu_runner_fuzz::seeds;

fn main() -> ExitCode {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let golden = here.join("../../golden");
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("unknown argument {other}\nusage: write-seeds [--check]");
            return ExitCode::from(2);
        }
    };
    let written = seeds::from_golden(&golden).and_then(|corpus| {
        let mut diffs = seeds::write(&here.join("corpus"), &corpus, check)?;
        let dict = here.join("gpu-runner.dict");
        let text = seeds::dictionary(&golden)?;
        if std::fs::read_to_string(&dict).ok().as_deref() != Some(text.as_str()) {
            diffs.push(format!("{}: changed", dict.display()));
            if !check {
                std::fs::write(&dict, &text).map_err(|source| seeds::SeedsError::Io { path: dict.clone(), source })?;
            }
        }
        Ok((corpus, diffs))
    });
    let (corpus, diffs) = match written {
        Ok(x) => x,
        Err(e) => {
            eprintln!("write-seeds: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (target, s) in &corpus {
        let bytes: usize = s.values().map(Vec::len).sum();
        println!("{target}: {} seeds, {bytes} bytes", s.len());
    }
    println!("{} differences from what was there", diffs.len());
    if check && !diffs.is_empty() {
        for d in diffs.iter().take(20) {
            eprintln!("  {d}");
        }
        eprintln!(
            "the seed corpus is stale: run `cargo run --manifest-path gpu_runner/fuzz/Cargo.toml --example write-seeds`"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
