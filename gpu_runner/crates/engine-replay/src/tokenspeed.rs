//! `gpu-runner run --dialect tokenspeed` (the mock) and `--engine
//! tokenspeed` (a live TokenSpeed 0.1.1 headless engine, GPU only): bind the
//! TokenSpeed gateway, start or attach the engine, replay the TokenSpeed
//! scenarios, and give each the shared verdict (`scenario_checks::report::Verdict`).
//!
//! Facts relied on (docs/runner/tokenspeed.md "TokenSpeed"): TokenSpeed's headless
//! engine dials `tcp://<--data-parallel-address>:<--data-parallel-rpc-port>`
//! and says HELLO only after loading its model, so the startup timeout
//! covers the load; it needs a CUDA GPU (its kernels are CUDA only), so
//! `--engine tokenspeed` on a machine without one fails at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use engine_protocol::translate::GatewayTokenizer;

use crate::dialect::tokenspeed::ReplayOptions;
use crate::record::{self, RecordMeta, Recorder};
use crate::replay::run::Context;
use crate::replay::runner::{self, Harness, NotUp, RunAll, RunAllError};
use engine_client::dialect::tokenspeed::release;
use engine_client::dialect::Tokenspeed as Wire;
use engine_client::transport::handshake::EngineFacts;
use engine_client::transport::{ClientConfig, EngineClient, EngineState, Tapped};
use mock_engine::tokenspeed::Script as MockScript;
use process_sandbox::launcher::{self, EngineProcess};
use scenario_checks::report::{self, keep_shard, not_finished, within, Expectations, ScenarioResult, Verdict};
use scenario_checks::scenario::tokenspeed::{self as scenario, Scenario};

type Tap = tokio::sync::mpsc::UnboundedSender<Tapped>;

/// The release named in recorded files: the engine's `vllm_version`
/// (`tokenspeed-0.1.1`) without its prefix, as the golden trees name it.
fn recorded_version(vllm_version: &str) -> String {
    vllm_version.strip_prefix("tokenspeed-").unwrap_or(vllm_version).to_string()
}

/// What a TokenSpeed run needs.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `mock`, `tokenspeed` or `attach`.
    pub engine: String,
    pub scenarios: PathBuf,
    /// The tokenizer directory (and, for `tokenspeed`, the model served).
    pub model: PathBuf,
    /// Handshake address to bind (default `tcp://127.0.0.1:0`; attach:
    /// TokenSpeed's default dial target `tcp://127.0.0.1:30500`).
    pub handshake: Option<String>,
    pub startup_timeout: Duration,
    pub silence: Duration,
    pub max_model_len: i64,
    /// The mock's script for the shared mock engine.
    pub mock_script: Option<MockScript>,
    /// `ts` (or `tokenspeed`) to launch; default `ts` from PATH.
    pub ts_bin: Option<PathBuf>,
    /// Extra arguments for `ts serve --headless`.
    pub extra_args: Vec<String>,
    pub expectations: Expectations,
    pub work_dir: PathBuf,
    /// When the run's `--deadline` ends, if it has one: no scenario starts
    /// after it, and a scenario still running then fails.
    pub deadline_at: Option<Instant>,
    /// `--shard i/n`: run only the scenarios whose position (in the run
    /// order) is `i-1` modulo `n`.
    pub shard: Option<(usize, usize)>,
    /// `--record DIR`: every frame set the gateway sent or received,
    /// written as a golden case without a verdict (`crate::record`).
    pub record: Option<PathBuf>,
}

enum Engine {
    Mock(mock_engine::Engine<Wire>),
    Process(EngineProcess),
    None,
}

struct Session {
    gw: EngineClient<Wire>,
    engine: Engine,
    facts: EngineFacts,
}

impl Session {
    async fn stop(self) {
        self.gw.shutdown().await;
        match self.engine {
            Engine::Mock(m) => {
                let _ = m.stop().await;
            }
            Engine::Process(mut p) => p.stop(),
            Engine::None => {}
        }
    }

    /// Why the engine can no longer serve, if it cannot.
    fn gone(&mut self) -> Option<String> {
        if let Some(EngineState::Dead(c)) = self.gw.engines().into_iter().next().map(|e| e.state) {
            return Some(format!("the engine is dead: {c}"));
        }
        match &mut self.engine {
            Engine::Process(p) => p.try_status().map(|s| format!("the engine exited: {s}")),
            Engine::Mock(m) if m.is_finished() => Some("the mock engine ended".into()),
            _ => None,
        }
    }
}

/// Why a TokenSpeed run could not run (a scenario's failure is its
/// verdict, not an error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// `--engine tokenspeed` on a machine without an NVIDIA GPU.
    #[error(
        "--engine tokenspeed needs an NVIDIA GPU (TokenSpeed 0.1.1 runs on CUDA only): \
         no /dev/nvidia0 and `nvidia-smi -L` lists no GPU on this machine. \
         Use --engine mock --dialect tokenspeed for the hermetic run."
    )]
    NoGpu,
    /// The scenarios did not load (the file and why).
    #[error(transparent)]
    Scenarios(scenario_checks::load::LoadError),
    /// A fresh scenario's mock script does not read.
    #[error("{0}")]
    Script(#[from] mock_engine::ScriptError),
    /// The recorder could not write.
    #[error(transparent)]
    Record(crate::record::RecordError),
}

/// Whether this machine has an NVIDIA GPU TokenSpeed can use: `Err` with
/// a clear reason when it has none.
pub fn require_gpu() -> Result<(), RunError> {
    let dev = Path::new("/dev/nvidia0").exists();
    let smi = std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("GPU"))
        .unwrap_or(false);
    if dev || smi {
        Ok(())
    } else {
        Err(RunError::NoGpu)
    }
}

async fn start(opts: &RunOptions, dir: &Path, script: Option<MockScript>, tap: Option<Tap>) -> Result<Session, String> {
    let default_hs = if opts.engine == "attach" { "tcp://127.0.0.1:30500" } else { "tcp://127.0.0.1:0" };
    let handshake = opts.handshake.clone().unwrap_or_else(|| default_hs.to_string());
    let gw = EngineClient::bind(ClientConfig { tap, ..ClientConfig::tokenspeed(handshake, dir) })
        .await
        .map_err(|e| e.to_string())?;
    let engine = match opts.engine.as_str() {
        "mock" => {
            let s = script
                .or_else(|| opts.mock_script.clone())
                .unwrap_or_else(|| MockScript { max_model_len: opts.max_model_len, ..MockScript::default() });
            Engine::Mock(mock_engine::Engine::spawn(gw.handshake_endpoint(), s))
        }
        "tokenspeed" => {
            let port = gw.handshake_port().ok_or("the handshake endpoint has no tcp port")?;
            let spec = launcher::LaunchSpec {
                model: opts.model.clone(),
                port,
                max_model_len: opts.max_model_len,
                work_dir: dir.to_path_buf(),
                grace: Duration::from_secs(20),
                data_parallel_size: 1,
                dp_ports: Vec::new(),
            };
            Engine::Process(
                launcher::launch_tokenspeed(opts.ts_bin.as_deref(), &spec, &opts.extra_args)
                    .map_err(|e| e.to_string())?,
            )
        }
        "attach" => Engine::None,
        other => return Err(format!("unknown TokenSpeed engine {other:?} (mock, tokenspeed, attach)")),
    };
    let facts = match gw.wait_ready(1, within(opts.startup_timeout, opts.deadline_at)).await {
        Ok(mut f) => f.swap_remove(0),
        Err(e) => {
            let tail = match &engine {
                Engine::Process(_) => format!("\n{}", launcher::log_tail(&dir.join("engine.log"), 30)),
                _ => String::new(),
            };
            let s = Session { gw, engine, facts: placeholder_facts() };
            s.stop().await;
            let hint = if matches!(e, engine_client::transport::TransportError::HandshakeTimeout { .. }) {
                " (TokenSpeed says HELLO only after loading its model)"
            } else {
                ""
            };
            return Err(format!("{e}{hint}{tail}"));
        }
    };
    if !facts.vllm_version.starts_with("tokenspeed-") {
        eprintln!("gpu-runner: warning: the engine says vllm_version {:?}, not tokenspeed-*", facts.vllm_version);
    }
    Ok(Session { gw, engine, facts })
}

fn placeholder_facts() -> EngineFacts {
    let schema = release().ready_response.as_struct().expect("the ready response is a struct");
    EngineFacts {
        index: 0,
        max_model_len: 0,
        vllm_version: String::new(),
        dtype: String::new(),
        max_num_seqs: 0,
        data_parallel_size: 1,
        ready_response: engine_protocol::StructValue::with_defaults(schema),
        drift: Vec::new(),
    }
}

async fn run_one(
    session: &Session,
    tok: &GatewayTokenizer,
    s: &Scenario,
    opts: &RunOptions,
    logprobs: bool,
) -> Verdict {
    let ctx = Context {
        kill: None,
        gateway: &session.gw,
        engine: session.facts.index,
        facts: &session.facts,
        tokenizer: tok,
        options: ReplayOptions { enable_output_logprobs: logprobs },
        silence: opts.silence,
    };
    let limit = within(s.timeout, opts.deadline_at);
    match tokio::time::timeout(limit, crate::replay::run::run(&ctx, s)).await {
        Err(_) => not_finished(limit, s.timeout),
        Ok(r) => {
            let failures = s.judge(&(&r).into(), &opts.engine);
            scenario_checks::report::verdict_of(&failures, r.drift)
        }
    }
}

/// TokenSpeed's part of the shared loop ([`crate::replay::runner`]).
struct TokenspeedHarness<'a> {
    opts: &'a RunOptions,
    tok: &'a GatewayTokenizer,
    /// Whether the shared engine runs with output logprobs.
    logprobs: bool,
    recorder: Option<Recorder>,
}

impl Harness for TokenspeedHarness<'_> {
    type Spec = scenario::Tokenspeed;
    type Session = (Session, bool);

    fn engine(&self) -> &str {
        &self.opts.engine
    }

    fn attached(&self) -> bool {
        self.opts.engine == "attach"
    }

    fn deadline_at(&self) -> Option<Instant> {
        self.opts.deadline_at
    }

    fn recorder(&mut self) -> Option<&mut Recorder> {
        self.recorder.as_mut()
    }

    async fn start(&mut self, dir: &Path, fresh: Option<&Scenario>) -> Result<(Session, bool), NotUp> {
        // Checked before the run started (`mock_scripts`).
        let script = match (fresh.and_then(|s| s.dialect.mock.as_ref()), self.opts.engine.as_str()) {
            (Some(j), "mock") => MockScript::from_json(&j.to_string()).ok(),
            _ => None,
        };
        let lp = script.as_ref().map_or(self.logprobs, |x| x.enable_output_logprobs);
        let tap = self.recorder.as_ref().map(Recorder::tap);
        let session = start(self.opts, dir, script, tap).await?;
        Ok((session, lp))
    }

    async fn stop(&mut self, (session, _): (Session, bool)) {
        session.stop().await;
    }

    fn gone(&mut self, (session, _): &mut (Session, bool)) -> Option<String> {
        session.gone()
    }

    async fn replay(&mut self, (session, lp): &(Session, bool), s: &Scenario) -> Result<Verdict, RunAllError> {
        Ok(run_one(session, self.tok, s, self.opts, *lp).await)
    }

    fn started(&mut self, (session, _): &(Session, bool)) {
        if let Some(r) = self.recorder.as_mut() {
            r.meta.engine_version = recorded_version(&session.facts.vllm_version);
        }
    }
}

/// Runs every scenario; the results in order, and whether the shared
/// engine failed to come up.
pub async fn run_all(opts: &RunOptions, tok: &GatewayTokenizer) -> Result<(Vec<ScenarioResult>, bool), RunError> {
    if opts.engine == "tokenspeed" {
        require_gpu()?;
    }
    let mut scenarios = scenario::load_dir(&opts.scenarios).map_err(RunError::Scenarios)?;
    scenarios.sort_by(|a, b| (a.fresh_engine, &a.name).cmp(&(b.fresh_engine, &b.name)));
    if let Some(shard) = opts.shard {
        scenarios = keep_shard(scenarios, shard);
    }
    // A fresh scenario's mock script that does not read is an error of the
    // run, before any engine starts.
    if opts.engine == "mock" {
        for s in &scenarios {
            if let (Some(j), true) = (&s.dialect.mock, s.fresh_engine) {
                MockScript::from_json(&j.to_string())?;
            }
        }
    }
    // The mock runs with output logprobs on; a live engine as launched
    // (`--enable-output-logprobs` is passed by the launcher).
    let logprobs = opts.mock_script.as_ref().is_none_or(|s| s.enable_output_logprobs);
    let started = Instant::now();
    let recorder = match &opts.record {
        Some(d) => {
            let meta = RecordMeta {
                engine_version: release().version.to_string(),
                model_path: opts.model.display().to_string(),
                model_fingerprint: record::model_fingerprint(&opts.model),
                launcher: if opts.engine == "tokenspeed" { "ts serve".into() } else { opts.engine.clone() },
                engine: format!("tokenspeed-{}", opts.engine),
            };
            Some(
                Recorder::new(d, release(), scenarios.iter().map(|s| s.name.clone()), meta)
                    .map_err(RunError::Record)?,
            )
        }
        None => None,
    };
    let mut h = TokenspeedHarness { opts, tok, logprobs, recorder };
    let main_dir = opts.work_dir.join("main");
    let RunAll { results, main_error } =
        runner::run_all(&mut h, &scenarios, &main_dir, &opts.work_dir, &opts.expectations).await.map_err(
            |e| match e {
                RunAllError::Record(r) => RunError::Record(r),
            },
        )?;
    if let Some(r) = h.recorder.as_mut() {
        let name = format!("tokenspeed-{}", opts.engine);
        r.finish(&name, started.elapsed().as_secs_f64(), &report::json(&name, &results)).map_err(RunError::Record)?;
    }
    Ok((results, main_error.is_some()))
}
