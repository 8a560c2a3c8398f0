//! The `conformance` command line.
//!
//! - `conformance verify --corpus DIR [--format text|json|junit] [--output FILE]
//!   [--deny-skips] [--expected-skips FILE]` checks every golden case below
//!   DIR (format: docs/case-format.md); prints one line per failing case and
//!   ends with `N passed, M failed[, K skipped]`; exits 0 exactly when
//!   nothing failed. Skips are failures under `--deny-skips` unless the
//!   expected-skips list names them ([`conformance::skips`]).
//! - `conformance bench --corpus DIR [--repeats N]` prints
//!   `<case id> decode_ns=<n> encode_ns=<n>` for every accepted message case.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The global allocator this binary was built with (for bench reports).
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") { "mimalloc" } else { "system" };
use conformance::{bench, corpus, report, skips, verify_dir};

#[derive(Parser)]
#[command(name = "conformance", version, about = "Conformance suite for the vLLM EngineCore wire protocol")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
}

#[derive(Subcommand)]
enum Command {
    /// Check every golden case under a corpus directory.
    Verify {
        /// Directory (or single file) of golden cases.
        #[arg(long, default_value = "golden")]
        corpus: PathBuf,
        /// Report format.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
        /// Write the report here instead of standard output (the closing
        /// summary line is still printed).
        #[arg(long)]
        output: Option<PathBuf>,
        /// Fail every skipped case that the expected-skips list does not
        /// name (for a corpus meant to be fully supported).
        #[arg(long)]
        deny_skips: bool,
        /// Cases that may be skipped, one `<case id> <reason>` per line; an
        /// entry whose case is not skipped fails the run (stale entry).
        #[arg(long, value_name = "FILE")]
        expected_skips: Option<PathBuf>,
    },
    /// Time decode and encode of every accepted message case.
    Bench {
        #[arg(long, default_value = "golden")]
        corpus: PathBuf,
        /// Timed batches per case; the best is reported.
        #[arg(long, default_value_t = 7)]
        repeats: usize,
        /// Minimum wall time of one batch, in milliseconds.
        #[arg(long, default_value_t = 2)]
        batch_ms: u64,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Verify { corpus, format, output, deny_skips, expected_skips } => {
            let expected = match expected_skips.as_deref().map(skips::ExpectedSkips::load).transpose() {
                Ok(list) => list.unwrap_or_default(),
                Err(e) => {
                    eprintln!("conformance: bad expected-skips list: {e}");
                    return ExitCode::from(2);
                }
            };
            let mut results = match verify_dir(&corpus) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("conformance: cannot read corpus {e}");
                    return ExitCode::from(2);
                }
            };
            skips::apply(&mut results, deny_skips, &expected);
            let t = report::totals(&results);
            let text = match format {
                Format::Text => report::text(&results),
                Format::Json => report::json(&results),
                Format::Junit => report::junit(&results),
            };
            match output {
                Some(path) => {
                    if let Err(e) = std::fs::write(&path, text) {
                        eprintln!("conformance: cannot write {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                    if !matches!(format, Format::Text) {
                        // Keep the failing lines visible on the terminal too.
                        print!("{}", report::text(&results));
                    } else {
                        println!("{}", report::summary_line(t));
                    }
                }
                None => {
                    print!("{text}");
                    if !matches!(format, Format::Text) {
                        eprintln!("{}", report::summary_line(t));
                    }
                }
            }
            if t.passed + t.failed == 0 {
                eprintln!("conformance: no case was checked under {}", corpus.display());
                return ExitCode::FAILURE;
            }
            if t.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Bench { corpus: dir, repeats, batch_ms } => {
            let (cases, errors) = match corpus::load(&dir) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("conformance: cannot read corpus {e}");
                    return ExitCode::from(2);
                }
            };
            for e in &errors {
                eprintln!("conformance: malformed case file {}: {}", e.file.display(), e.message);
            }
            eprintln!("conformance bench: allocator {ALLOCATOR_NAME}, best of {repeats} batches of >= {batch_ms} ms");
            let (lines, skipped) = bench::run(&cases, repeats.max(1), Duration::from_millis(batch_ms));
            for l in &lines {
                println!("{} decode_ns={} encode_ns={}", l.id, l.decode_ns, l.encode_ns);
            }
            for (id, why) in &skipped {
                eprintln!("not timed: {id}: {why}");
            }
            if lines.is_empty() {
                eprintln!("conformance: no accepted message case to time under {}", dir.display());
                return ExitCode::FAILURE;
            }
            if errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
