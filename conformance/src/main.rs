//! The `conformance` command line.
//!
//! - `conformance verify --corpus DIR [--format text|json|junit] [--output FILE]
//!   [--deny-skips] [--expected-skips FILE]` checks every golden case below
//!   DIR (format: docs/case-format.md); prints one line per failing case and
//!   ends with `N passed, M failed[, K skipped]`; exits 0 exactly when
//!   nothing failed. Skips are failures under `--deny-skips` unless the
//!   expected-skips list names them ([`conformance::skips`]). With
//!   `--testee CMD [--testee-timeout SECS]` the message cases are checked
//!   against an outside codec speaking the testee protocol of docs/testee.md
//!   instead of the reference implementation; the gateway kinds are then
//!   skipped.
//! - `conformance testee` serves the testee protocol with the reference
//!   implementation on standard input and output ([`conformance::testee::serve`]).
//! - `conformance schema-diff A B [--dialect vllm|tokenspeed] [--schemas DIR]
//!   [--format text|json|markdown] [--fail-on compatible|drift|breaking]`
//!   prints every wire change between two releases' schema dumps, each
//!   classified for a peer of A reading B and a peer of B reading A
//!   ([`conformance::schema_diff`]); with `--fail-on`, exits 1 when a change
//!   is that bad or worse in either direction.
//! - `conformance bench --corpus DIR [--repeats N]` prints
//!   `<case id> decode_ns=<n> encode_ns=<n>` for every accepted message case
//!   (` fast_decode_ns=<n>` added for `EngineCoreOutputs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The global allocator this binary was built with (for bench reports).
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") { "mimalloc" } else { "system" };
use conformance::testee::{self, serve::TesteeFault, Testee};
use conformance::{bench, corpus, report, skips, verify_dir, verify_dir_with};

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

#[derive(Clone, Copy, ValueEnum)]
enum DiffFormat {
    Text,
    Json,
    Markdown,
}

#[derive(Clone, Copy, ValueEnum)]
enum Dialect {
    Vllm,
    Tokenspeed,
}

#[derive(Clone, Copy, ValueEnum)]
enum FailOn {
    Compatible,
    Drift,
    Breaking,
}

#[derive(Clone, Copy, ValueEnum)]
enum CompatFormat {
    Markdown,
    Json,
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
        /// Check the message cases against this testee command instead of
        /// the reference implementation (docs/testee.md); split into words
        /// like a shell, run without one.
        #[arg(long, value_name = "CMD")]
        testee: Option<String>,
        /// Seconds the testee may take to answer one request before the
        /// case fails and the testee is restarted.
        #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds, requires = "testee")]
        testee_timeout: Duration,
    },
    /// Serve the testee protocol (docs/testee.md) on stdin/stdout with the
    /// reference implementation.
    Testee {
        /// A deliberate fault, for testing the runner (docs/testee.md §9).
        #[arg(long, hide = true)]
        fault: Option<TesteeFault>,
    },
    /// Every wire change between two releases, classified for a peer of
    /// each reading the other's bytes.
    SchemaDiff {
        /// The first release (e.g. the one a gateway was built for).
        a: String,
        /// The second release (e.g. the engine it meets).
        b: String,
        #[arg(long, value_enum, default_value = "vllm")]
        dialect: Dialect,
        /// Directory of the releases' schema dumps (`<dialect>-<version>.json`).
        #[arg(long, default_value = "golden/generate/schema")]
        schemas: PathBuf,
        #[arg(long, value_enum, default_value = "text")]
        format: DiffFormat,
        /// Exit 1 when a change is this bad or worse in either direction
        /// (for an engine's CI: `--fail-on breaking`).
        #[arg(long, value_enum)]
        fail_on: Option<FailOn>,
    },
    /// The cross-release matrix: every release's own messages read with
    /// every other release's table (docs/reports/compatibility.md).
    Compat {
        /// Directory holding one golden tree per vLLM release.
        #[arg(long, default_value = "golden/vllm")]
        corpus: PathBuf,
        #[arg(long, value_enum, default_value = "markdown")]
        format: CompatFormat,
        /// Write here instead of standard output.
        #[arg(long)]
        output: Option<PathBuf>,
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

/// Why a `--testee-timeout` value is not a number of seconds.
#[derive(Debug, thiserror::Error)]
enum SecondsError {
    #[error("{0}")]
    NotANumber(#[from] std::num::ParseFloatError),
    #[error("`{0}` is not a positive number of seconds")]
    OutOfRange(String),
}

/// A positive, finite number of seconds.
fn seconds(s: &str) -> Result<Duration, SecondsError> {
    let x: f64 = s.parse()?;
    if x.is_finite() && x > 0.0 && x < 1e9 {
        Ok(Duration::from_secs_f64(x))
    } else {
        Err(SecondsError::OutOfRange(s.to_string()))
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Testee { fault } => {
            match testee::serve::serve(std::io::stdin().lock(), std::io::stdout().lock(), fault) {
                Ok(testee::serve::Ending::EndOfInput) => ExitCode::SUCCESS,
                Ok(testee::serve::Ending::Crash) => ExitCode::from(3),
                Err(e) => {
                    eprintln!("conformance testee: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Verify { corpus, format, output, deny_skips, expected_skips, testee, testee_timeout } => {
            let expected = match expected_skips.as_deref().map(skips::ExpectedSkips::load).transpose() {
                Ok(list) => list.unwrap_or_default(),
                Err(e) => {
                    eprintln!("conformance: bad expected-skips list: {e}");
                    return ExitCode::from(2);
                }
            };
            let verified = match testee {
                None => verify_dir(&corpus),
                Some(command) => {
                    let mut t = match Testee::start(&command, testee_timeout) {
                        Ok(t) => t,
                        Err(e) => {
                            eprintln!("conformance: {e}");
                            return ExitCode::from(2);
                        }
                    };
                    let results = verify_dir_with(&corpus, |case| testee::check(&mut t, case));
                    eprintln!(
                        "conformance: testee {}: {} requests, {} restarts",
                        t.hello().implementation,
                        t.requests,
                        t.restarts
                    );
                    t.finish();
                    results
                }
            };
            let mut results = match verified {
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
        Command::SchemaDiff { a, b, dialect, schemas, format, fail_on } => {
            schema_diff(&a, &b, dialect, &schemas, format, fail_on)
        }
        Command::Compat { corpus: dir, format, output } => {
            let m = match conformance::compat::build(&dir) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("conformance compat: {e}");
                    return ExitCode::from(2);
                }
            };
            let text = match format {
                CompatFormat::Markdown => m.markdown(),
                CompatFormat::Json => format!("{:#}\n", m.json()),
            };
            match output {
                Some(path) => {
                    if let Err(e) = std::fs::write(&path, text) {
                        eprintln!("conformance compat: {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                    eprintln!("conformance compat: {} releases -> {}", m.releases.len(), path.display());
                }
                None => print!("{text}"),
            }
            ExitCode::SUCCESS
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
                eprintln!("conformance: malformed case file {}: {}", e.file.display(), e.error);
            }
            eprintln!("conformance bench: allocator {ALLOCATOR_NAME}, best of {repeats} batches of >= {batch_ms} ms");
            let (lines, skipped) = bench::run(&cases, repeats.max(1), Duration::from_millis(batch_ms));
            for l in &lines {
                println!("{l}");
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

fn schema_diff(
    a: &str,
    b: &str,
    dialect: Dialect,
    dir: &std::path::Path,
    format: DiffFormat,
    fail_on: Option<FailOn>,
) -> ExitCode {
    use conformance::schema_diff as sd;
    let dialect = match dialect {
        Dialect::Vllm => "vllm",
        Dialect::Tokenspeed => "tokenspeed",
    };
    let load = |v: &str| {
        let path = sd::dump_path(dir, dialect, v);
        if !path.exists() {
            let known = sd::releases(dir, dialect);
            return Err(format!(
                "no schema dump for {dialect} {v} ({}); dumps under {}: {}",
                path.display(),
                dir.display(),
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ));
        }
        sd::load(&path).map_err(|e| e.to_string())
    };
    let (sa, sb) = match (load(a), load(b)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("conformance schema-diff: {e}");
            return ExitCode::from(2);
        }
    };
    let changes = sd::diff(&sa, &sb);
    match format {
        DiffFormat::Text => print!("{}", sd::text(a, b, &changes)),
        DiffFormat::Json => {
            println!("{}", serde_json::to_string_pretty(&sd::to_json(a, b, &changes)).unwrap_or_default())
        }
        DiffFormat::Markdown => print!("{}", sd::markdown(a, b, &changes)),
    }
    let limit = fail_on.map(|f| match f {
        FailOn::Compatible => sd::DriftVerdict::Compatible,
        FailOn::Drift => sd::DriftVerdict::Drift,
        FailOn::Breaking => sd::DriftVerdict::Breaking,
    });
    match (limit, sd::worst(&changes)) {
        (Some(l), Some(w)) if w >= l => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    }
}
