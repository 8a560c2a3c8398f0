//! The gateway under test's life: starting it (one module per launcher:
//! [`super::smg`], [`super::command`]; or attached), letting the mock
//! engine dial its handshake address and register with the recorded live
//! registration, waiting for its readiness route, running each request
//! (the engine scripted by a shared plan; every ADD / ABORT the engine
//! reads up to `grace_ms` after the response belongs to the request), the
//! probes and actions of lifecycle scenarios (a late or returning engine,
//! SIGTERM; judged by [`super::steps`]), the verdicts and the report
//! (docs/runner/gateway.md "Scoring a gateway", "Gateway lifecycle").
//!
//! The handshake port is the gateway's own choice (SMG derives it from the
//! worker URL, [`super::smg::handshake_address`]); the engine dials only
//! once that port accepts TCP connections.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine_protocol::translate::GatewayTokenizer;
use engine_protocol::ReleaseSchema;
use serde_json::{json, Value as Json};

use super::checks::{check_request, CheckCtx, CheckResult};
use super::error::GatewayError;
use super::observe::{assemble_stream, observe_inputs, NoResponse, Observed};
use super::scenario::{set_if_absent, ActionKind, GwAction, GwProbe, GwRequest, GwScenario, GwStep};
use super::steps::{self, ActionObserved, ProbeObserved};
use super::{command, smg};
use crate::http;
use engine_client::dialect::Vllm;
use engine_client::transport::handshake;
use mock_engine::vllm_script::{Plan, Script};
use process_sandbox::launcher::EngineProcess;
use scenario_checks::report::{Expectations, ScenarioResult, Verdict};

pub use mock_engine::registration::{registration_from_case, READY_RESPONSE_CASE};

/// How the gateway under test is started.
#[derive(Debug, Clone)]
pub enum GatewayLaunch {
    /// SMG from its venv.
    Smg { venv: PathBuf },
    /// A shell command with placeholders `{http_port}`, `{prometheus_port}`,
    /// `{worker_url}`, `{handshake_port}`, `{model}`.
    Command(String),
    /// Already running: `http` and `handshake` are given.
    Attach,
}

/// Everything a gateway session is started from.
#[derive(Debug, Clone)]
pub struct GatewayTarget {
    pub launch: GatewayLaunch,
    /// `host:port` of the gateway's HTTP API (required with attach).
    pub http: Option<String>,
    /// The gateway's handshake address (default: derived from the worker
    /// URL by SMG's rule).
    pub handshake: Option<String>,
    pub model: PathBuf,
    /// The model name requests carry (default: the model path as given).
    pub model_name: String,
    pub ready_path: String,
    pub startup_timeout: Duration,
    /// The engine's registration frame (the recorded live bytes).
    pub registration: Vec<u8>,
    pub release: &'static ReleaseSchema,
}

/// A gateway with the mock engine registered to it.
pub struct Session {
    proc: Option<EngineProcess>,
    pub http: String,
    pub handshake: String,
    /// The engine registered now: none before the `register_engine` step
    /// of a scenario whose engine comes later.
    pub mock: Option<mock_engine::Engine<Vllm>>,
    /// What a registering mock is started from.
    script: Script,
    pub plan: Plan,
    pub log: Option<PathBuf>,
    /// The gateway's directory (its log, `TMPDIR`, `ipc://` paths).
    pub dir: PathBuf,
    /// Its readiness route.
    pub ready_path: String,
}

impl Session {
    /// The vLLM release its mock engine plays: the table it registers
    /// with and reads the gateway's requests with.
    pub fn release(&self) -> &'static ReleaseSchema {
        self.script.release
    }

    /// Polls the readiness route (every 200 ms, 2 s a request) until it
    /// answers 200; an error after `limit`. For a gateway whose engine
    /// registered after it started (the bench's and the fault wire's).
    pub async fn wait_ready(&self, limit: Duration) -> Result<(), ReadyError> {
        let t0 = Instant::now();
        loop {
            let (h, p) = (self.http.clone(), self.ready_path.clone());
            let r = tokio::task::spawn_blocking(move || crate::http::get(&h, &p, Duration::from_secs(2))).await;
            if matches!(r, Ok(Ok(ref r)) if r.status == 200) {
                return Ok(());
            }
            if t0.elapsed() > limit {
                return Err(ReadyError::NotReady { limit });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn stop(mut self) {
        if let Some(m) = self.mock.take() {
            let _ = m.stop().await;
        }
        if let Some(p) = self.proc.as_mut() {
            p.stop();
        }
    }

    /// The gateway's process id (none when attached).
    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().map(|p| p.pid())
    }

    /// Registers a fresh mock engine whose script `tune` changed first
    /// (the benchmark's instant engine); as `register_engine`.
    pub async fn register_tuned(
        &mut self,
        tune: impl FnOnce(&mut Script),
        limit: Duration,
    ) -> Result<Duration, ReadyError> {
        tune(&mut self.script);
        self.register_engine(limit).await
    }

    fn gateway_gone(&mut self) -> Option<String> {
        self.proc.as_mut().and_then(|p| p.try_status()).map(|s| format!("the gateway process exited ({s})"))
    }

    /// The registered engine's log (empty before one registered).
    fn engine_log(&self) -> mock_engine::vllm_script::Log {
        self.mock.as_ref().map(|m| m.log()).unwrap_or_default()
    }

    /// A fresh mock engine dials the handshake address and registers with
    /// the recorded registration (the previous one, if any, is stopped
    /// first: its sockets close). Waits until it got INIT, the end of a
    /// registration, or `limit` passes.
    async fn register_engine(&mut self, limit: Duration) -> Result<Duration, ReadyError> {
        if let Some(old) = self.mock.take() {
            let _ = old.stop().await;
        }
        let t0 = Instant::now();
        let mock = mock_engine::Engine::spawn(&self.handshake, self.script.clone());
        self.mock = Some(mock);
        loop {
            let l = self.engine_log();
            if l.init_received {
                return Ok(t0.elapsed());
            }
            if let Some(how) = l.ended {
                return Err(ReadyError::EngineEnded { how });
            }
            if t0.elapsed() >= limit {
                return Err(ReadyError::NoInit { hello_sent: l.hello_sent, limit });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Why a mock engine did not register with the gateway, or the gateway
/// did not become ready ([`Session::register_tuned`],
/// [`Session::wait_ready`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadyError {
    /// The mock engine ended before the gateway's INIT, and how.
    #[error("the engine ended before INIT: {how}")]
    EngineEnded { how: String },
    /// No INIT within the limit (`hello_sent`: the engine said HELLO).
    #[error("{}no INIT within {:.1}s", if *.hello_sent { "HELLO sent, " } else { "" }, .limit.as_secs_f64())]
    NoInit { hello_sent: bool, limit: Duration },
    /// The readiness route did not answer 200 within the limit.
    #[error("not ready within {}s", .limit.as_secs())]
    NotReady { limit: Duration },
}

fn free_port() -> Result<u16, GatewayError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(GatewayError::NoFreePort)?;
    l.local_addr().map(|a| a.port()).map_err(GatewayError::NoFreePort)
}

fn tcp_port(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

fn log_tail(p: &Option<PathBuf>) -> String {
    p.as_deref().map(|p| process_sandbox::launcher::log_tail(p, 12)).unwrap_or_default()
}

/// Starts the gateway (unless attached), lets the mock engine dial it and
/// waits until the gateway says it is ready.
pub async fn start(target: &GatewayTarget, dir: &Path, smg_args: &[String]) -> Result<Session, GatewayError> {
    start_with(target, dir, smg_args, true).await
}

/// [`start`]; with `engine_at_start` false the gateway is only started
/// (its handshake port accepts connections) and no engine registers yet.
pub async fn start_with(
    target: &GatewayTarget,
    dir: &Path,
    smg_args: &[String],
    engine_at_start: bool,
) -> Result<Session, GatewayError> {
    std::fs::create_dir_all(dir).map_err(|source| GatewayError::Io { path: dir.to_path_buf(), source })?;
    let a = Addresses::of(target, dir)?;
    let log = dir.join("gateway.log");
    let mut proc = launch_gateway(target, &a, smg_args, &log)?;
    let logp = proc.as_ref().map(|_| log.clone());
    let started = Instant::now();
    let deadline = started + target.startup_timeout;
    wait_handshake_bound(target, &a, &mut proc, &logp, deadline).await?;
    let plan: Plan = Arc::new(Mutex::new(None));
    let script = engine_script(target, &plan)?;
    let mock = engine_at_start.then(|| mock_engine::Engine::spawn(&a.handshake, script.clone()));
    let session = Session {
        proc,
        http: a.http,
        handshake: a.handshake,
        mock,
        script,
        plan,
        log: logp,
        dir: dir.to_path_buf(),
        ready_path: target.ready_path.clone(),
    };
    if !engine_at_start {
        eprintln!("gateway up in {:.1}s (no engine yet)", started.elapsed().as_secs_f64());
        return Ok(session);
    }
    // Ready: the engine got INIT and the gateway's readiness route says 200.
    let session = wait_started(session, target, deadline).await?;
    eprintln!("gateway ready in {:.1}s", started.elapsed().as_secs_f64());
    // Loopback only: the launched gateway's whole process tree, its
    // metrics listener included.
    if let Some(e) = session.pid().and_then(beyond_loopback) {
        session.stop().await;
        return Err(e);
    }
    Ok(session)
}

/// Where the gateway listens and the engine connects.
struct Addresses {
    /// The engine's worker URL (`ipc://<dir>/engine-1`).
    worker_url: String,
    http_port: u16,
    /// `host:port` of the gateway's HTTP API.
    http: String,
    /// The gateway's handshake address.
    handshake: String,
    hs_port: u16,
    /// The handshake address's host (empty: none given).
    hs_host: String,
}

impl Addresses {
    /// The addresses of `target` with its directory `dir`: the given ones,
    /// a free HTTP port, the handshake address by SMG's rule.
    fn of(target: &GatewayTarget, dir: &Path) -> Result<Addresses, GatewayError> {
        let worker_url = format!("ipc://{}/engine-1", dir.display());
        let http_port = match &target.http {
            Some(h) => tcp_port(h)
                .ok_or_else(|| GatewayError::Address { given: format!("--http {h}"), expected: "host:port" })?,
            None => free_port()?,
        };
        let http = target.http.clone().unwrap_or_else(|| format!("127.0.0.1:{http_port}"));
        let handshake = target.handshake.clone().unwrap_or_else(|| smg::handshake_address(&worker_url));
        let hs_port = tcp_port(&handshake).ok_or_else(|| GatewayError::Address {
            given: format!("handshake {handshake}"),
            expected: "tcp://host:port",
        })?;
        let hs_host =
            handshake.trim_start_matches("tcp://").rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_default();
        Ok(Addresses { worker_url, http_port, http, handshake, hs_port, hs_host })
    }
}

/// Launches the gateway as `target` says (none when attached), its output
/// to `log`.
fn launch_gateway(
    target: &GatewayTarget,
    a: &Addresses,
    smg_args: &[String],
    log: &Path,
) -> Result<Option<EngineProcess>, GatewayError> {
    if let GatewayLaunch::Attach = target.launch {
        return Ok(None);
    }
    if std::net::TcpListener::bind(("127.0.0.1", a.hs_port)).is_err() {
        return Err(GatewayError::PortInUse { port: a.hs_port, worker_url: a.worker_url.clone() });
    }
    let prometheus_port = free_port()?;
    let p = match &target.launch {
        GatewayLaunch::Smg { venv } => {
            smg::check_venv(venv)?;
            let spec = smg::SmgSpec {
                http_port: a.http_port,
                prometheus_port,
                worker_url: a.worker_url.clone(),
                model: PathBuf::from(&target.model_name),
            };
            smg::launch_with(venv, &spec, smg_args, log)?
        }
        GatewayLaunch::Command(tmpl) => {
            let ports = command::Placeholders {
                http_port: a.http_port,
                prometheus_port,
                worker_url: &a.worker_url,
                handshake_port: a.hs_port,
                model: &target.model_name,
            };
            command::launch(tmpl, &ports, log)?
        }
        GatewayLaunch::Attach => unreachable!(),
    };
    eprintln!("gateway pid {} (http {}, handshake {}, log {})", p.pid(), a.http, a.handshake, log.display());
    Ok(Some(p))
}

/// The gateway binds its handshake socket on its own schedule: waits
/// until it accepts connections before the engine dials (the gateway
/// stopped when it does not by `deadline`).
async fn wait_handshake_bound(
    target: &GatewayTarget,
    a: &Addresses,
    proc: &mut Option<EngineProcess>,
    logp: &Option<PathBuf>,
    deadline: Instant,
) -> Result<(), GatewayError> {
    let host = if a.hs_host.is_empty() { "127.0.0.1" } else { &a.hs_host };
    loop {
        if std::net::TcpStream::connect_timeout(
            &format!("{host}:{}", a.hs_port)
                .parse()
                .map_err(|_| GatewayError::Address { given: a.handshake.clone(), expected: "tcp://host:port" })?,
            Duration::from_millis(200),
        )
        .is_ok()
        {
            return Ok(());
        }
        if let Some(s) = proc.as_mut().and_then(|p| p.try_status()) {
            return Err(GatewayError::ExitedBeforeBind {
                what: "the gateway",
                status: s.to_string(),
                address: a.handshake.clone(),
                log: log_tail(logp),
            });
        }
        if Instant::now() >= deadline {
            if let Some(p) = proc.as_mut() {
                p.stop();
            }
            return Err(GatewayError::NotListening {
                address: a.handshake.clone(),
                secs: target.startup_timeout.as_secs_f64(),
                log: log_tail(logp),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The mock engine's script for `target`: its release and recorded
/// registration, the limits that registration announces, the shared
/// `plan`.
fn engine_script(target: &GatewayTarget, plan: &Plan) -> Result<Script, GatewayError> {
    let mut script = Script::new(target.release);
    let facts =
        handshake::decode_registration(target.release, 0, &target.registration).map_err(GatewayError::Registration)?;
    script.max_model_len = facts.max_model_len;
    script.max_num_seqs = facts.max_num_seqs;
    script.registration = Some(target.registration.clone());
    script.plan = Some(plan.clone());
    script.lifetime = Duration::from_secs(24 * 3600);
    script.prefill_stats = true;
    Ok(script)
}

/// Waits until the session is ready: the engine got INIT and the
/// gateway's readiness route says 200; the session stopped when the
/// engine ends, the gateway exits or `deadline` passes first.
async fn wait_started(
    mut session: Session,
    target: &GatewayTarget,
    deadline: Instant,
) -> Result<Session, GatewayError> {
    let mut last = String::from("no answer yet");
    loop {
        let l = session.engine_log();
        if let Some(how) = l.ended {
            let tail = log_tail(&session.log);
            session.stop().await;
            return Err(GatewayError::EngineEnded { how: how.to_string(), log: tail });
        }
        if l.init_received {
            let h = session.http.clone();
            let path = target.ready_path.clone();
            let r = tokio::task::spawn_blocking(move || http::get(&h, &path, Duration::from_secs(2)))
                .await
                .map_err(|e| GatewayError::Task(e.to_string()))?;
            match r {
                Ok(r) if r.status == 200 => return Ok(session),
                Ok(r) => last = format!("GET {} -> {} {}", target.ready_path, r.status, r.text().trim()),
                Err(e) => last = e.to_string(),
            }
        }
        if let Some(g) = session.gateway_gone() {
            let tail = log_tail(&session.log);
            session.stop().await;
            return Err(GatewayError::ExitedDuringStartup { what: g, log: tail });
        }
        if Instant::now() >= deadline {
            let tail = log_tail(&session.log);
            let init = l.init_received;
            session.stop().await;
            return Err(GatewayError::NotReady { secs: target.startup_timeout.as_secs_f64(), init, last, log: tail });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// [`GatewayError::BeyondLoopback`] when the process tree of `pid`
/// listens on anything but loopback.
pub fn beyond_loopback(pid: u32) -> Option<GatewayError> {
    let beyond = process_sandbox::listening::beyond_loopback(&process_sandbox::listening::process_tree(pid));
    (!beyond.is_empty()).then(|| GatewayError::BeyondLoopback {
        listeners: beyond.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
    })
}

/// Runs one request: scripts the engine, sends the HTTP request, waits
/// `grace`, and collects what the engine read.
pub async fn run_request(session: &Session, req: &GwRequest, model: &str, release: &'static ReleaseSchema) -> Observed {
    if let Ok(mut p) = session.plan.lock() {
        *p = req.engine.clone();
    }
    let mark = session.engine_log().inputs.len();
    let mut body = req.body.clone();
    set_if_absent(&mut body, "model", Json::String(model.to_string()));
    let http = session.http.clone();
    let path = req.endpoint.path();
    let timeout = req.timeout;
    let t0 = Instant::now();
    let client = req.client;
    let r = tokio::task::spawn_blocking(move || http::post_json_as(&http, path, &body, timeout, &client)).await;
    let response_at = Instant::now();
    let mut obs = Observed { seconds: t0.elapsed().as_secs_f64(), ..Default::default() };
    match r {
        Err(e) => obs.error = Some(NoResponse::Task(e.to_string())),
        Ok(Err(e)) => obs.error = Some(NoResponse::Http(e)),
        Ok(Ok(resp)) => {
            obs.status = Some(resp.status);
            let sse = resp.header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
            if sse {
                let data = http::sse_data(&resp.text());
                obs.body = Some(assemble_stream(req.endpoint, &data));
                obs.sse = Some(data);
            } else {
                obs.body = Some(resp.json().unwrap_or_else(|e| json!({"_not_json": e.to_string()})));
            }
        }
    }
    tokio::time::sleep(req.grace).await;
    if let Ok(mut p) = session.plan.lock() {
        *p = None;
    }
    let log = session.engine_log();
    observe_inputs(release, log.inputs.get(mark..).unwrap_or(&[]), response_at, &mut obs);
    let ids: Vec<&str> = obs.adds.iter().map(|(i, _)| i.as_str()).collect();
    obs.engine_finished = log.finished.iter().filter(|(i, _)| ids.contains(&i.as_str())).cloned().collect();
    obs
}

/// A scenario's checks and what each request looked like.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    pub checks: Vec<CheckResult>,
    pub requests: Vec<Json>,
}

pub async fn run_scenario(session: &mut Session, s: &GwScenario, model: &str, ctx: &CheckCtx<'_>) -> ScenarioRun {
    let mut checks = Vec::new();
    let mut requests = Vec::new();
    for step in &s.steps {
        match step {
            GwStep::Request(req) => {
                let mut obs = run_request(session, req, model, ctx.release).await;
                obs.gateway_exited = session.gateway_gone().is_some();
                checks.extend(check_request(req, &obs, ctx));
                requests.push(json!({
                    "id": req.id,
                    "endpoint": req.endpoint.path(),
                    "golden": req.golden,
                    "status": obs.status,
                    "error": obs.error.as_ref().map(ToString::to_string),
                    "response": obs.body,
                    "sent": obs.adds.iter().map(|(_, a)| engine_protocol::view::struct_view(a)).collect::<Vec<_>>(),
                    "aborts": obs.aborts.iter().map(|(i, t)| json!({"request_id": i, "after_response_s": t})).collect::<Vec<_>>(),
                    "engine_finished": obs.engine_finished.iter().map(|(i, n)| json!({"request_id": i, "tokens": n})).collect::<Vec<_>>(),
                    "invalid": obs.invalid,
                    "sse": obs.sse,
                    "seconds": obs.seconds,
                    "gateway_exited": obs.gateway_exited,
                }));
            }
            GwStep::Probe(p) => {
                let o = run_probe(session, p).await;
                checks.extend(steps::check_probe(p, &o));
                requests.push(o.report(&p.id));
            }
            GwStep::Action(a) => {
                let o = run_action(session, a).await;
                checks.extend(steps::check_action(a, &o));
                requests.push(o.report(&a.id, a.kind.name()));
            }
        }
    }
    ScenarioRun { checks, requests }
}

/// `GET` of the probe's route (again until its `until` holds, up to its
/// `wait`).
async fn run_probe(session: &Session, p: &GwProbe) -> ProbeObserved {
    let path = p.route.path(&session.ready_path);
    let t0 = Instant::now();
    loop {
        let (http, timeout, q) = (session.http.clone(), p.timeout, path.clone());
        let r = tokio::task::spawn_blocking(move || http::get(&http, &q, timeout)).await;
        let mut o = ProbeObserved { path: path.clone(), seconds: t0.elapsed().as_secs_f64(), ..Default::default() };
        match r {
            Err(e) => o.error = Some(NoResponse::Task(e.to_string())),
            Ok(Err(e)) => o.error = Some(NoResponse::Http(e)),
            Ok(Ok(resp)) => {
                o.status = Some(resp.status);
                o.body_start = resp.text().chars().take(300).collect();
            }
        }
        match p.until {
            Some(want) if (o.status == Some(200)) != want && t0.elapsed() < p.wait => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return o,
        }
    }
}

async fn run_action(session: &mut Session, a: &GwAction) -> ActionObserved {
    match a.kind {
        ActionKind::RegisterEngine => match session.register_engine(a.timeout).await {
            Ok(d) => ActionObserved {
                ok: true,
                seconds: d.as_secs_f64(),
                detail: format!("a new engine registered (INIT after {:.2}s)", d.as_secs_f64()),
                ..Default::default()
            },
            Err(why) => ActionObserved {
                ok: false,
                seconds: a.timeout.as_secs_f64(),
                detail: why.to_string(),
                ..Default::default()
            },
        },
        ActionKind::StopGateway => {
            let Some(mut proc) = session.proc.take() else {
                return ActionObserved {
                    detail: "attached: the gateway is not this runner's to stop".into(),
                    ..Default::default()
                };
            };
            let limit = a.timeout;
            let (proc, exited_after) = match tokio::task::spawn_blocking(move || {
                let t = proc.terminate(limit);
                (proc, t)
            })
            .await
            {
                Ok(x) => x,
                Err(e) => return ActionObserved { detail: format!("the stop task failed: {e}"), ..Default::default() },
            };
            session.proc = Some(proc);
            let searched = vec![session.dir.clone()];
            let (ok, seconds, detail) = match exited_after {
                Some(d) => {
                    (true, d.as_secs_f64(), format!("SIGTERM: every process gone after {:.2}s", d.as_secs_f64()))
                }
                None => (
                    false,
                    limit.as_secs_f64(),
                    format!("SIGTERM: still running after {:.1}s (SIGKILLed)", limit.as_secs_f64()),
                ),
            };
            ActionObserved { ok, seconds, detail, socket_files: steps::socket_files(&searched), searched }
        }
    }
}

/// The verdict: every check passed, or the failed checks in words.
pub fn verdict(run: &ScenarioRun) -> Verdict {
    let failed: Vec<String> =
        run.checks.iter().filter(|c| !c.ok).map(|c| format!("[{}] {}: {}", c.request, c.check, c.detail)).collect();
    if failed.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(failed.join("; "))
    }
}

/// One scenario's entry in the gateway report.
#[derive(Debug, Clone)]
pub struct GwResult {
    pub result: ScenarioResult,
    pub doc: String,
    pub run: Option<ScenarioRun>,
}

/// The gateway report: the runner's JSON report (`results` with
/// `scenario`, `outcome`, `detail`, `seconds`) plus per scenario its doc,
/// its checks and what each request sent and got.
pub fn report_json(gateway: &str, engine_side: &str, results: &[GwResult]) -> String {
    let rs: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    let t = scenario_checks::report::totals(&rs);
    let v = json!({
        "gateway": gateway,
        "engine_side": engine_side,
        "totals": {"passed": t.passed, "failed": t.failed, "expected_failures": t.expected_failures, "drift": t.drift, "skipped": t.skipped},
        "results": results.iter().map(|r| json!({
            "scenario": r.result.scenario,
            "doc": r.doc,
            "outcome": r.result.verdict.label(),
            "detail": r.result.verdict.detail(),
            "seconds": r.result.seconds,
            "checks": r.run.as_ref().map(|x| x.checks.iter().map(|c| json!({
                "request": c.request, "check": c.check, "ok": c.ok, "detail": c.detail, "reference": c.reference,
            })).collect::<Vec<_>>()),
            "requests": r.run.as_ref().map(|x| x.requests.clone()),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// Runs every scenario against the target: shared-gateway scenarios on one
/// session, `fresh_gateway` ones each on their own (skipped when attached).
pub async fn run_all(
    target: &GatewayTarget,
    scenarios: &[GwScenario],
    tok: &GatewayTokenizer,
    expectations: &Expectations,
    work: &Path,
) -> Result<Vec<GwResult>, GatewayError> {
    let facts =
        handshake::decode_registration(target.release, 0, &target.registration).map_err(GatewayError::Registration)?;
    let ctx = CheckCtx { tokenizer: tok, facts: &facts, release: target.release };
    let mut order: Vec<&GwScenario> = scenarios.iter().collect();
    order.sort_by(|a, b| (a.fresh_gateway, &a.name).cmp(&(b.fresh_gateway, &b.name)));
    let needs_shared = order.iter().any(|s| !s.fresh_gateway);
    let (mut shared, shared_err) = if needs_shared {
        match start(target, &work.join("gw"), &[]).await {
            Ok(s) => (Some(s), None),
            Err(e) => {
                eprintln!("gpu-runner: the gateway did not come up: {e}");
                (None, Some(e))
            }
        }
    } else {
        (None, None)
    };
    let mut results = Vec::new();
    for s in order {
        let t0 = Instant::now();
        let (verdict, run) = if s.fresh_gateway {
            if matches!(target.launch, GatewayLaunch::Attach) {
                (Verdict::Skip("needs a gateway of its own; an attached gateway cannot be restarted".into()), None)
            } else {
                if let Some(sh) = shared.take() {
                    sh.stop().await;
                }
                // A second try in another directory (hence another derived
                // handshake port), should the gateway still not come up.
                let dir = |k: &str| work.join(format!("fresh-{}{k}", s.name));
                let mut started = start_with(target, &dir(""), &s.smg_args, s.engine_at_start).await;
                if let Err(e) = &started {
                    eprintln!("gpu-runner: the gateway of {} did not come up, trying once more: {e}", s.name);
                    started = start_with(target, &dir("-2"), &s.smg_args, s.engine_at_start).await;
                }
                match started {
                    Err(e) => (Verdict::Fail(format!("its gateway did not come up: {e}")), None),
                    Ok(mut sess) => {
                        let run = run_scenario(&mut sess, s, &target.model_name, &ctx).await;
                        sess.stop().await;
                        (verdict(&run), Some(run))
                    }
                }
            }
        } else {
            match (shared.as_mut(), &shared_err) {
                (Some(sess), _) => match sess.gateway_gone() {
                    Some(g) => (Verdict::Fail(g), None),
                    None => {
                        let run = run_scenario(sess, s, &target.model_name, &ctx).await;
                        (verdict(&run), Some(run))
                    }
                },
                (None, Some(e)) => {
                    let e = e.to_string();
                    (Verdict::Fail(format!("the gateway did not come up: {}", e.lines().next().unwrap_or(""))), None)
                }
                (None, None) => (Verdict::Fail("no gateway".into()), None),
            }
        };
        let mut result = ScenarioResult { scenario: s.name.clone(), verdict, seconds: t0.elapsed().as_secs_f64() };
        expectations.apply_if_ran(&mut result, run.is_some());
        eprintln!("{:<18} {} ({:.1}s)", result.verdict.label(), result.scenario, result.seconds);
        results.push(GwResult { result, doc: s.doc.clone(), run });
    }
    if let Some(sh) = shared.take() {
        sh.stop().await;
    }
    Ok(results)
}
