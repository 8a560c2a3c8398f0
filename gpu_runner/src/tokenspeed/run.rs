//! `gpu-runner run --dialect tokenspeed` (the mock) and `--engine
//! tokenspeed` (a live TokenSpeed 0.1.1 headless engine, GPU only): bind the
//! TokenSpeed gateway, start or attach the engine, replay the TokenSpeed
//! scenarios, and give each the shared verdict (`crate::report::Verdict`).
//!
//! Facts relied on (docs/runner.md "TokenSpeed"): TokenSpeed's headless
//! engine dials `tcp://<--data-parallel-address>:<--data-parallel-rpc-port>`
//! and says HELLO only after loading its model, so the startup timeout
//! covers the load; it needs a CUDA GPU (its kernels are CUDA only), so
//! `--engine tokenspeed` on a machine without one fails at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use engine_protocol::translate::GatewayTokenizer;

use super::gateway::{TsEngineState, TsGateway, TsGatewayConfig};
use super::mock::{TsMock, TsScript};
use super::scenario::{self, TsContext, TsScenario};
use crate::handshake::EngineFacts;
use crate::launcher::{self, EngineProcess};
use crate::record::{self, RecordMeta, Recorder};
use crate::report::{self, deadline_passed, keep_shard, not_finished, within, Expectations, ScenarioResult, Verdict};
use crate::transport::Tapped;

type Tap = tokio::sync::mpsc::UnboundedSender<Tapped>;

/// The release named in recorded files: the engine's `vllm_version`
/// (`tokenspeed-0.1.1`) without its prefix, as the golden trees name it.
fn recorded_version(vllm_version: &str) -> String {
    vllm_version.strip_prefix("tokenspeed-").unwrap_or(vllm_version).to_string()
}

/// What a TokenSpeed run needs.
#[derive(Debug, Clone)]
pub struct TsRunOptions {
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
    pub mock_script: Option<TsScript>,
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
    Mock(TsMock),
    Process(EngineProcess),
    None,
}

struct Session {
    gw: TsGateway,
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
        if let TsEngineState::Dead(c) = self.gw.state() {
            return Some(format!("the engine is dead: {c}"));
        }
        match &mut self.engine {
            Engine::Process(p) => p.try_status().map(|s| format!("the engine exited: {s}")),
            Engine::Mock(m) if m.is_finished() => Some("the mock engine ended".into()),
            _ => None,
        }
    }
}

/// Whether this machine has an NVIDIA GPU TokenSpeed can use: `Err` with
/// a clear reason when it has none.
pub fn require_gpu() -> Result<(), String> {
    let dev = Path::new("/dev/nvidia0").exists();
    let smi = std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .map(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains("GPU"))
        .unwrap_or(false);
    if dev || smi {
        Ok(())
    } else {
        Err("--engine tokenspeed needs an NVIDIA GPU (TokenSpeed 0.1.1 runs on CUDA only): \
             no /dev/nvidia0 and `nvidia-smi -L` lists no GPU on this machine. \
             Use --engine mock --dialect tokenspeed for the hermetic run."
            .into())
    }
}

async fn start(opts: &TsRunOptions, dir: &Path, script: Option<TsScript>, tap: Option<Tap>) -> Result<Session, String> {
    let default_hs = if opts.engine == "attach" { "tcp://127.0.0.1:30500" } else { "tcp://127.0.0.1:0" };
    let handshake = opts.handshake.clone().unwrap_or_else(|| default_hs.to_string());
    let gw = TsGateway::bind(TsGatewayConfig { tap, ..TsGatewayConfig::new(handshake, dir) }).await?;
    let engine = match opts.engine.as_str() {
        "mock" => {
            let s = script
                .or_else(|| opts.mock_script.clone())
                .unwrap_or_else(|| TsScript { max_model_len: opts.max_model_len, ..TsScript::default() });
            Engine::Mock(TsMock::spawn(gw.handshake_endpoint(), s))
        }
        "tokenspeed" => {
            let port = gw.handshake_port().ok_or("the handshake endpoint has no tcp port")?;
            let spec = launcher::LaunchSpec {
                model: opts.model.clone(),
                port,
                max_model_len: opts.max_model_len,
                work_dir: dir.to_path_buf(),
                grace: Duration::from_secs(20),
            };
            Engine::Process(launcher::launch_tokenspeed(opts.ts_bin.as_deref(), &spec, &opts.extra_args)?)
        }
        "attach" => Engine::None,
        other => return Err(format!("unknown TokenSpeed engine {other:?} (mock, tokenspeed, attach)")),
    };
    let facts = match gw.wait_ready(within(opts.startup_timeout, opts.deadline_at)).await {
        Ok(f) => f,
        Err(e) => {
            let tail = match &engine {
                Engine::Process(_) => format!("\n{}", launcher::log_tail(&dir.join("engine.log"), 30)),
                _ => String::new(),
            };
            let s = Session { gw, engine, facts: placeholder_facts() };
            s.stop().await;
            return Err(format!("{e}{tail}"));
        }
    };
    if !facts.vllm_version.starts_with("tokenspeed-") {
        eprintln!("gpu-runner: warning: the engine says vllm_version {:?}, not tokenspeed-*", facts.vllm_version);
    }
    Ok(Session { gw, engine, facts })
}

fn placeholder_facts() -> EngineFacts {
    let schema = super::mock::release().ready_response.as_struct().expect("the ready response is a struct");
    EngineFacts {
        index: 0,
        max_model_len: 0,
        vllm_version: String::new(),
        dtype: String::new(),
        max_num_seqs: 0,
        ready_response: engine_protocol::StructValue::with_defaults(schema),
        drift: Vec::new(),
    }
}

async fn run_one(
    session: &Session,
    tok: &GatewayTokenizer,
    s: &TsScenario,
    opts: &TsRunOptions,
    logprobs: bool,
) -> Verdict {
    let ctx = TsContext {
        gateway: &session.gw,
        facts: &session.facts,
        tokenizer: tok,
        enable_output_logprobs: logprobs,
        silence: opts.silence,
    };
    let limit = within(s.timeout, opts.deadline_at);
    match tokio::time::timeout(limit, scenario::run(&ctx, s)).await {
        Err(_) => not_finished(limit, s.timeout),
        Ok(r) => {
            let failures = s.judge(&(&r).into(), &opts.engine);
            crate::report::verdict_of(&failures, r.drift)
        }
    }
}

/// Runs every scenario; the results in order, and whether the shared
/// engine failed to come up.
pub async fn run_all(opts: &TsRunOptions, tok: &GatewayTokenizer) -> Result<(Vec<ScenarioResult>, bool), String> {
    if opts.engine == "tokenspeed" {
        require_gpu()?;
    }
    let mut scenarios = scenario::load_dir(&opts.scenarios)?;
    scenarios.sort_by(|a, b| (a.fresh_engine, &a.name).cmp(&(b.fresh_engine, &b.name)));
    if let Some(shard) = opts.shard {
        scenarios = keep_shard(scenarios, shard);
    }
    // The mock runs with output logprobs on; a live engine as launched
    // (`--enable-output-logprobs` is passed by the launcher).
    let logprobs = opts.mock_script.as_ref().is_none_or(|s| s.enable_output_logprobs);
    let started = Instant::now();
    let mut recorder = match &opts.record {
        Some(d) => {
            let meta = RecordMeta {
                engine_version: super::mock::release().version.to_string(),
                model_path: opts.model.display().to_string(),
                model_fingerprint: record::model_fingerprint(&opts.model),
                launcher: if opts.engine == "tokenspeed" { "ts serve".into() } else { opts.engine.clone() },
                engine: format!("tokenspeed-{}", opts.engine),
            };
            Some(Recorder::new(d, super::mock::release(), scenarios.iter().map(|s| s.name.clone()), meta)?)
        }
        None => None,
    };
    let needs_main =
        scenarios.iter().any(|s| !s.fresh_engine && s.runs_on(&opts.engine)) && !deadline_passed(opts.deadline_at);
    let (mut main, main_error) = if needs_main {
        match start(opts, &opts.work_dir.join("main"), None, recorder.as_ref().map(Recorder::tap)).await {
            Ok(m) => (Some(m), None),
            Err(e) => {
                eprintln!("gpu-runner: the TokenSpeed engine did not come up: {e}");
                (None, Some(e))
            }
        }
    } else {
        (None, None)
    };
    if let (Some(r), Some(m)) = (recorder.as_mut(), main.as_ref()) {
        r.meta.engine_version = recorded_version(&m.facts.vllm_version);
    }
    if let Some(r) = recorder.as_mut() {
        r.flush("handshake")?;
    }
    let mut results = Vec::new();
    for s in &scenarios {
        let t0 = Instant::now();
        // Whether the scenario ran on an engine (`Expectations::apply_if_ran`).
        let mut ran = false;
        let verdict = if !s.runs_on(&opts.engine) {
            Verdict::Skip(format!("runs on {} only", s.engines.join(", ")))
        } else if let (Some(e), false) = (&main_error, s.fresh_engine) {
            Verdict::Fail(format!("the engine did not come up: {}", e.lines().next().unwrap_or("")))
        } else if deadline_passed(opts.deadline_at) {
            Verdict::Skip("--deadline reached before it started".into())
        } else if s.fresh_engine && opts.engine == "attach" {
            Verdict::Skip("needs an engine started for it alone; --engine attach cannot start one".into())
        } else if s.fresh_engine {
            if let Some(m) = main.take() {
                m.stop().await;
            }
            let script = match (&s.dialect.mock, opts.engine.as_str()) {
                (Some(j), "mock") => Some(TsScript::from_json(&j.to_string())?),
                _ => None,
            };
            let lp = script.as_ref().map_or(logprobs, |x| x.enable_output_logprobs);
            let tap = recorder.as_ref().map(Recorder::tap);
            match start(opts, &opts.work_dir.join(format!("fresh-{}", s.name)), script, tap).await {
                Err(e) => Verdict::Fail(format!("its engine did not come up: {e}")),
                Ok(session) => {
                    ran = true;
                    let v = run_one(&session, tok, s, opts, lp).await;
                    session.stop().await;
                    v
                }
            }
        } else {
            match main.as_mut() {
                None => Verdict::Fail("no engine (stopped for a fresh-engine scenario)".into()),
                Some(m) => match m.gone() {
                    Some(why) => Verdict::Fail(why),
                    None => {
                        ran = true;
                        run_one(m, tok, s, opts, logprobs).await
                    }
                },
            }
        };
        if let Some(r) = recorder.as_mut() {
            r.flush(&s.name)?;
        }
        let mut res = ScenarioResult { scenario: s.name.clone(), verdict, seconds: t0.elapsed().as_secs_f64() };
        opts.expectations.apply_if_ran(&mut res, ran);
        eprintln!("{:<18} {} ({:.1}s)", res.verdict.label(), res.scenario, res.seconds);
        results.push(res);
    }
    if let Some(m) = main.take() {
        m.stop().await;
    }
    if let Some(r) = recorder.as_mut() {
        let name = format!("tokenspeed-{}", opts.engine);
        r.finish(&name, started.elapsed().as_secs_f64(), &report::json(&name, &results))?;
    }
    Ok((results, main_error.is_some()))
}
