//! The mock TokenSpeed 0.1.1 engine: the engine side of the TokenSpeed
//! dialect in Rust, so the gateway side can be tested without a GPU.
//!
//! Wire facts relied on (docs/tokenspeed-wire.md, docs/runner/tokenspeed.md
//! "TokenSpeed"; TokenSpeed 0.1.1 `tokenspeed/runtime/engine/zmq_msgpack.py`,
//! `zmq_wire.py`, `generation_output_processor.py`, `request_handler.py`):
//!
//! - the handshake is vLLM's (identity = engine index, 2 bytes LE): HELLO
//!   `{status, local: true, headless: true, parallel_config_hash: nil}`,
//!   INIT read from the last frame received, READY, then the registration
//!   (`WireEngineCoreReadyResponse`, `prefix_granularity` instead of
//!   `block_size`, `vllm_version` `"tokenspeed-0.1.1"`) on the input socket;
//!   the real engine says HELLO only after its model has loaded, modelled by
//!   `hello_delay`;
//! - input is `[type, payload, aux...]` with `00` ADD and `01` ABORT only;
//!   an ADD that does not decode (or any other type byte, or fewer than two
//!   frames) is dropped with no output and the engine goes on; a decodable
//!   ADD goes through the receive path (`validate::tokenspeed::receive`,
//!   the mock's own verdicts are TokenSpeed's) and a refused one gets one
//!   terminal row: `"abort"`, no ids, completion 0;
//! - an ABORT is a plain array of rids; each is finished with no row; an
//!   ABORT for a rid not yet seen is remembered and kills that rid when it
//!   arrives;
//! - `max_new_tokens` is clamped to `max_model_len - prompt_len - 1` (nil:
//!   that value); a request finishes `"length"` at `max_new_tokens` first,
//!   then, unless `ignore_eos`, `"stop"` on an EOS id or a `stop_token_ids`
//!   entry (`ignore_eos` disables both, as `check_finished` does);
//!   `min_new_tokens` is accepted and verified but not enforced: the 0.1.1
//!   wheel's Python has no min-tokens check (`check_finished`) or mask (its
//!   sampling backends; the scheduler is given only `max_new_tokens`);
//! - rows go out as `BatchTokenIDOutSlim`: delta `output_ids`, cumulative
//!   `prompt_tokens` / `completion_tokens` / `cached_tokens` (0 here), and,
//!   when `return_logprob`, the sampled token's logprob (f64) and id per new
//!   id; cadence: with `stream` a row every `stream_interval` tokens
//!   (`len % interval == 1` when the interval is above 1), without it a row
//!   at the first token and every 50 tokens; the terminal row always;
//! - on a fatal error (the `death_sentinel` fault) it pushes the one frame
//!   `ENGINE_CORE_DEAD` and exits.
//!
//! Tokens are those of the vLLM mock ([`super::tokens::generated_token`],
//! [`super::tokens::sampled_token`]): a fixed function of prompt, position and (when
//! sampling) seed, or the token a `logit_bias` of 10 or more forces, or the
//! script's list for the rid. Greedy requests (`top_k` 1 after the receive
//! path) are generated as greedy.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_protocol::schema::tokenspeed::RECEIVE_0_1_1;
use engine_protocol::typed::tokenspeed::{decode_abort, BatchRow, BatchTokenIDOutSlim, Finish, LoadTail};
use engine_protocol::validate::tokenspeed::{receive, EngineConfig};
use engine_protocol::ENGINE_CORE_DEAD;
use engine_protocol::{
    decode_message, decode_message_with, encode_message, Limits, MessageKind, RejectClass, StructValue, Value,
};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zeromq::{DealerSocket, PushSocket, Socket, SocketRecv};

use super::tokens::{generated_token, ints, sampled_token};
use super::{dealer, note, send, serve_until, MockDialect, MockError, ScriptError};
use engine_client::dialect::Tokenspeed;

/// `DEFAULT_FORCE_STREAM_INTERVAL`: a non-stream request still gets a row
/// at its first token and every this many tokens.
pub const FORCE_STREAM_INTERVAL: usize = 50;

pub use engine_client::dialect::tokenspeed::release;

/// A fault the TokenSpeed mock injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// After `after_steps` steps, push `ENGINE_CORE_DEAD` and exit.
    DeathSentinel { after_steps: u64 },
    /// After `after_steps` steps, produce nothing more, stay connected.
    Stall { after_steps: u64 },
    /// After `after_steps` steps, drop every socket at once (a kill).
    Crash { after_steps: u64 },
}

/// What the TokenSpeed mock does (JSON script: docs/runner/tokenspeed.md "TokenSpeed").
#[derive(Debug, Clone)]
pub struct Script {
    pub engine_index: u16,
    /// `max_model_len` in the registration; also the engine's `max_req_len`.
    pub max_model_len: i64,
    pub max_num_seqs: i64,
    pub vocab_size: i64,
    /// The model's EOS ids (golden/tiny: 2 and 4).
    pub eos_token_ids: Vec<i64>,
    /// `--enable-output-logprobs`.
    pub enable_output_logprobs: bool,
    /// `--stream-interval` (the server default for rows of `stream` requests).
    pub stream_interval: usize,
    pub step_delay: Duration,
    pub hello_delay: Duration,
    pub fault: Option<Fault>,
    pub tokens: HashMap<String, Vec<i64>>,
    pub lifetime: Duration,
    /// A broken engine: ABORTs are logged and otherwise ignored (the
    /// request goes on), to show that the runner sees rows after an ABORT.
    pub ignore_aborts: bool,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            engine_index: 0,
            max_model_len: 512,
            max_num_seqs: 256,
            vocab_size: 512,
            eos_token_ids: vec![2, 4],
            enable_output_logprobs: true,
            stream_interval: 1,
            step_delay: Duration::from_millis(2),
            hello_delay: Duration::ZERO,
            fault: None,
            tokens: HashMap::new(),
            lifetime: Duration::from_secs(3600),
            ignore_aborts: false,
        }
    }
}

impl Script {
    /// Reads a script; every key is optional.
    pub fn from_json(text: &str) -> Result<Script, ScriptError> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("script: {e}"))?;
        let mut s = Script::default();
        let int = |k: &str| v.get(k).and_then(serde_json::Value::as_i64);
        if let Some(x) = int("engine_index") {
            s.engine_index = u16::try_from(x).map_err(|_| format!("script.engine_index: {x} is not a u16"))?;
        }
        if let Some(x) = int("max_model_len") {
            s.max_model_len = x;
        }
        if let Some(x) = int("max_num_seqs") {
            s.max_num_seqs = x;
        }
        if let Some(x) = int("vocab_size") {
            if x < 6 {
                return Err(format!("script.vocab_size: {x} is below 6").into());
            }
            s.vocab_size = x;
        }
        if let Some(x) = int("stream_interval") {
            s.stream_interval = usize::try_from(x).ok().filter(|&i| i > 0).ok_or("script.stream_interval: not > 0")?;
        }
        if let Some(x) = int("step_delay_ms") {
            s.step_delay = Duration::from_millis(x.max(0) as u64);
        }
        if let Some(x) = int("hello_delay_ms") {
            s.hello_delay = Duration::from_millis(x.max(0) as u64);
        }
        if let Some(x) = int("lifetime_s") {
            s.lifetime = Duration::from_secs(x.max(0) as u64);
        }
        if let Some(b) = v.get("ignore_aborts").and_then(serde_json::Value::as_bool) {
            s.ignore_aborts = b;
        }
        if let Some(b) = v.get("enable_output_logprobs").and_then(serde_json::Value::as_bool) {
            s.enable_output_logprobs = b;
        }
        if let Some(ids) = v.get("eos_token_ids") {
            s.eos_token_ids = json_ints(ids).ok_or("script.eos_token_ids: not a list of integers")?;
        }
        if let Some(t) = v.get("tokens") {
            let m = t.as_object().ok_or("script.tokens: not an object")?;
            for (rid, ids) in m {
                let ids = json_ints(ids).ok_or_else(|| format!("script.tokens.{rid}: not a list of integers"))?;
                s.tokens.insert(rid.clone(), ids);
            }
        }
        if let Some(f) = v.get("fault") {
            let after = f.get("after_steps").and_then(serde_json::Value::as_u64).unwrap_or(0);
            s.fault = Some(match f.get("kind").and_then(serde_json::Value::as_str) {
                Some("death_sentinel") => Fault::DeathSentinel { after_steps: after },
                Some("stall") => Fault::Stall { after_steps: after },
                Some("crash") => Fault::Crash { after_steps: after },
                other => {
                    return Err(format!("script.fault.kind: {other:?} is not death_sentinel, stall or crash").into())
                }
            });
        }
        Ok(s)
    }

    fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            vocab_size: u32::try_from(self.vocab_size).ok(),
            enable_output_logprobs: self.enable_output_logprobs,
        }
    }
}

fn json_ints(v: &serde_json::Value) -> Option<Vec<i64>> {
    v.as_array()?.iter().map(serde_json::Value::as_i64).collect()
}

/// What the mock saw and did.
#[derive(Debug, Clone, Default)]
pub struct Log {
    pub hello_sent: bool,
    /// ADDs dropped because they did not decode, with the decoder's error.
    pub dropped: Vec<String>,
    /// Requests refused by the receive path: `(rid, why)`.
    pub refused: Vec<(String, String)>,
    /// Rids aborted by the client.
    pub aborted: Vec<String>,
    /// `(rid, finish reason, tokens)` of every finished request.
    pub finished: Vec<(String, String, usize)>,
    /// Rows pushed, per rid.
    pub rows: HashMap<String, usize>,
    pub steps: u64,
    pub ended: Option<String>,
}

impl MockDialect for Tokenspeed {
    type Script = Script;
    type Log = Log;

    fn serve(
        script: Script,
        handshake: String,
        log: Arc<Mutex<Log>>,
        stop: oneshot::Receiver<()>,
    ) -> impl Future<Output = Result<(), MockError>> + Send + 'static {
        run(handshake, script, log, stop)
    }
}

/// Runs the mock until it ends, `stop` fires or its lifetime passes.
pub async fn run(
    handshake: String,
    script: Script,
    log: Arc<Mutex<Log>>,
    stop: oneshot::Receiver<()>,
) -> Result<(), MockError> {
    let lifetime_end = "lifetime".to_string();
    let result =
        serve_until(script.lifetime, stop, serve(&handshake, &script, &log), lifetime_end, "stopped".to_string()).await;
    let ended = match &result {
        Ok(e) => e.clone(),
        Err(e) => format!("error: {e}"),
    };
    note(&log, |l| l.ended = Some(ended));
    result.map(|_| ()).map_err(MockError::Serve)
}

/// `WireReadyMessage` (HELLO / READY) as the engine sends it.
fn encode_status(status: &str) -> Result<Vec<u8>, String> {
    let rel = release();
    let schema = rel.handshake_status.as_struct().ok_or("status schema is not a struct")?;
    let mut s = StructValue::with_defaults(schema);
    s.set("status", Value::Str(status.into()))
        .set("local", Value::Bool(true))
        .set("headless", Value::Bool(true))
        .set("parallel_config_hash", Value::Nil);
    let mut f = encode_message(rel, MessageKind::HandshakeHello, &Value::Struct(s)).map_err(|e| e.to_string())?;
    Ok(f.swap_remove(0))
}

/// The mock's registration (`WireEngineCoreReadyResponse`).
fn encode_registration(script: &Script) -> Result<Vec<u8>, String> {
    let rel = release();
    let schema = rel.ready_response.as_struct().ok_or("ready response schema is not a struct")?;
    let mut s = StructValue::with_defaults(schema);
    let int = Value::Int;
    s.set("max_model_len", int(script.max_model_len))
        .set("num_gpu_blocks", int(1000))
        .set("prefix_granularity", int(16))
        .set("dtype", Value::Str("bfloat16".into()))
        .set("vllm_version", Value::Str("tokenspeed-0.1.1".into()))
        .set("world_size", int(1))
        .set("data_parallel_size", int(1))
        .set("tensor_parallel_size", int(1))
        .set("pipeline_parallel_size", int(1))
        .set("decode_context_parallel_size", int(1))
        .set("data_parallel_rank", int(i64::from(script.engine_index)))
        .set("max_num_seqs", int(script.max_num_seqs))
        .set("max_num_batched_tokens", int(8192))
        .set("instance_id", Value::Str("tiny".into()))
        .set("kv_cache_size_tokens", int(16000));
    let mut f =
        encode_message(rel, MessageKind::EngineCoreReadyResponse, &Value::Struct(s)).map_err(|e| e.to_string())?;
    Ok(f.swap_remove(0))
}

async fn serve(handshake: &str, script: &Script, log: &Mutex<Log>) -> Result<String, String> {
    let rel = release();
    // TokenSpeed says HELLO only after loading its model.
    tokio::time::sleep(script.hello_delay).await;
    let mut hs = dealer(script.engine_index)?;
    hs.connect(handshake).await.map_err(|e| format!("connect {handshake}: {e}"))?;
    send(&mut hs, vec![encode_status("HELLO")?], "HELLO").await?;
    note(log, |l| l.hello_sent = true);
    let init = tokio::time::timeout(Duration::from_secs(600), hs.recv())
        .await
        .map_err(|_| "no INIT within 600s".to_string())?
        .map_err(|e| format!("recv INIT: {e}"))?
        .into_vec();
    let frames: Vec<&[u8]> = init.iter().map(|b| b.as_ref()).collect();
    // The engine reads INIT from the last frame (and needs an input and an
    // output address: the decoder applies that rule).
    let d = decode_message(rel, MessageKind::HandshakeInit, &frames, &Limits::default())
        .map_err(|e| format!("undecodable INIT: {e}"))?;
    let Value::Struct(init) = &d.value else { return Err("INIT is not a struct".into()) };
    let addr = init.struct_field("addresses").ok_or("INIT has no addresses")?;
    let first = |k: &str| match addr.get(k) {
        Some(Value::Array(xs)) => xs.first().and_then(|x| if let Value::Str(s) = x { Some(s.clone()) } else { None }),
        _ => None,
    };
    let (Some(input_addr), Some(output_addr)) = (first("inputs"), first("outputs")) else {
        return Err("INIT without input or output address".into());
    };
    send(&mut hs, vec![encode_status("READY")?], "READY").await?;
    let mut input = dealer(script.engine_index)?;
    input.connect(&input_addr).await.map_err(|e| format!("connect {input_addr}: {e}"))?;
    send(&mut input, vec![encode_registration(script)?], "registration").await?;
    let mut output = PushSocket::new();
    output.connect(&output_addr).await.map_err(|e| format!("connect {output_addr}: {e}"))?;
    let hs_closer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(hs);
    });
    let mut engine = Mock { script, running: Vec::new(), pending_aborts: HashSet::new(), steps: 0 };
    let r = engine.serve(&mut input, &mut output, log).await;
    hs_closer.abort();
    r
}

/// A request as the engine runs it.
struct Running {
    rid: String,
    prompt: Vec<i64>,
    out: Vec<i64>,
    /// Ids already sent.
    sent: usize,
    max_new: i64,
    ignore_eos: bool,
    stop_ids: Vec<i64>,
    greedy: bool,
    seed: Option<i64>,
    forced: Option<i64>,
    logprobs: bool,
    stream: bool,
    stream_interval: usize,
    finish: Option<&'static str>,
}

struct Mock<'a> {
    script: &'a Script,
    running: Vec<Running>,
    pending_aborts: HashSet<String>,
    steps: u64,
}

impl Mock<'_> {
    async fn serve(
        &mut self,
        input: &mut DealerSocket,
        output: &mut PushSocket,
        log: &Mutex<Log>,
    ) -> Result<String, String> {
        let mut stalled = false;
        let mut next_step = Instant::now() + self.script.step_delay;
        loop {
            let stepping = !self.running.is_empty() && !stalled;
            tokio::select! {
                m = input.recv() => {
                    let m = m.map_err(|e| format!("input recv: {e}"))?;
                    let frames: Vec<Vec<u8>> = m.into_vec().into_iter().map(|b| b.to_vec()).collect();
                    let rows = self.on_input(&frames, log);
                    if !rows.is_empty() {
                        self.push(output, rows, log).await?;
                    }
                },
                _ = tokio::time::sleep_until(next_step), if stepping => {
                    next_step = Instant::now() + self.script.step_delay;
                    match self.script.fault {
                        Some(Fault::DeathSentinel { after_steps }) if self.steps >= after_steps => {
                            send(output, vec![ENGINE_CORE_DEAD.to_vec()], "ENGINE_CORE_DEAD").await?;
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            return Ok("death_sentinel".into());
                        }
                        Some(Fault::Crash { after_steps }) if self.steps >= after_steps => {
                            return Ok("crashed".into());
                        }
                        Some(Fault::Stall { after_steps }) if self.steps >= after_steps => {
                            stalled = true;
                            continue;
                        }
                        _ => {}
                    }
                    self.steps += 1;
                    let rows = self.step(log);
                    note(log, |l| l.steps += 1);
                    if !rows.is_empty() {
                        self.push(output, rows, log).await?;
                    }
                },
            }
        }
    }

    /// One input message: the rows it causes at once (a refused ADD's
    /// terminal abort row), none for anything else.
    fn on_input(&mut self, frames: &[Vec<u8>], log: &Mutex<Log>) -> Vec<BatchRow> {
        let rel = release();
        let slices: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let limits = Limits::default();
        if slices.first() == Some(&&[1u8][..]) {
            return match decode_abort(rel, &slices, &limits) {
                Ok(rids) => {
                    for rid in rids {
                        self.abort(&rid, log);
                    }
                    Vec::new()
                }
                Err(e) => {
                    note(log, |l| l.dropped.push(e.to_string()));
                    Vec::new()
                }
            };
        }
        let cfg = self.script.engine_config();
        match decode_message_with(rel, MessageKind::EngineCoreRequest, &slices, &limits, &cfg) {
            Ok(d) => {
                let Value::Struct(req) = &d.value else {
                    note(log, |l| l.dropped.push("ADD is not a struct".into()));
                    return Vec::new();
                };
                match self.admit(req) {
                    Ok(rows) => rows,
                    Err(e) => {
                        note(log, |l| l.dropped.push(e));
                        Vec::new()
                    }
                }
            }
            Err(e) if e.class == RejectClass::Validation && slices.len() >= 2 => {
                // Decodable but refused by the receive path: admitted
                // finished, one terminal abort row. A request the engine
                // drops outright (nil seed with a rid that is not a string)
                // has no string rid and gets nothing.
                let ty = MessageKind::EngineCoreRequest.payload_type(rel);
                let root = MessageKind::EngineCoreRequest.name_in(rel);
                let decoded = engine_protocol::decode_payload(root, ty, &slices[1..], &limits).ok();
                let Some((rid, input_len)) = decoded.and_then(|d| match d.value {
                    Value::Struct(s) => {
                        s.str_field("rid").map(|rid| (rid.to_string(), ints(s.get("input_ids")).len() as i64))
                    }
                    _ => None,
                }) else {
                    note(log, |l| l.dropped.push(e.to_string()));
                    return Vec::new();
                };
                note(log, |l| l.refused.push((rid.clone(), e.to_string())));
                if self.pending_aborts.remove(&rid) {
                    return Vec::new();
                }
                note(log, |l| l.finished.push((rid.clone(), "abort".into(), 0)));
                vec![BatchRow { rid, finish: Finish::Abort, prompt_tokens: input_len.into(), ..BatchRow::default() }]
            }
            Err(e) => {
                note(log, |l| l.dropped.push(e.to_string()));
                Vec::new()
            }
        }
    }

    fn abort(&mut self, rid: &str, log: &Mutex<Log>) {
        note(log, |l| l.aborted.push(rid.to_string()));
        if self.script.ignore_aborts {
            return;
        }
        if let Some(i) = self.running.iter().position(|r| r.rid == rid) {
            self.running.remove(i);
        } else {
            // Remembered until the ADD comes (TokenSpeed keeps it 300 s).
            self.pending_aborts.insert(rid.to_string());
        }
    }

    /// Starts a request the receive path accepted.
    fn admit(&mut self, req: &StructValue) -> Result<Vec<BatchRow>, String> {
        let fin = receive(req, &RECEIVE_0_1_1, &self.script.engine_config())
            .map_err(|v| format!("{}: {}", v.path(), v.message))?;
        let rid = req.str_field("rid").ok_or("ADD without a string rid")?.to_string();
        if self.pending_aborts.remove(&rid) {
            return Ok(Vec::new());
        }
        let sp = &fin.sampling_params;
        let prompt = ints(req.get("input_ids"));
        let room = self.script.max_model_len - prompt.len() as i64 - 1;
        let max_new = match sp.int_field("max_new_tokens") {
            Some(m) => m.min(room),
            None => room,
        };
        let top_k = sp.int_field("top_k").unwrap_or(engine_protocol::validate::tokenspeed::TOP_K_ALL);
        let stream_interval = sp
            .int_field("stream_interval")
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i > 0)
            .unwrap_or(self.script.stream_interval);
        let r = Running {
            rid: rid.clone(),
            prompt,
            out: Vec::new(),
            sent: 0,
            max_new,
            ignore_eos: matches!(sp.get("ignore_eos"), Some(Value::Bool(true))),
            stop_ids: ints(sp.get("stop_token_ids")),
            greedy: top_k == 1,
            seed: sp.int_field("seed"),
            forced: forced_token(sp.get("logit_bias")),
            logprobs: matches!(req.get("return_logprob"), Some(Value::Bool(true))),
            stream: matches!(req.get("stream"), Some(Value::Bool(true))),
            stream_interval,
            finish: None,
        };
        if r.max_new <= 0 {
            // Nothing to generate: finished at admission.
            let row =
                BatchRow { rid, finish: Finish::Length, prompt_tokens: r.prompt.len() as i128, ..BatchRow::default() };
            return Ok(vec![row]);
        }
        self.running.push(r);
        Ok(Vec::new())
    }

    /// One decode step: a token for every running request, rows as the
    /// cadence says.
    fn step(&mut self, log: &Mutex<Log>) -> Vec<BatchRow> {
        let script = self.script;
        let mut rows = Vec::new();
        for r in &mut self.running {
            let pos = r.out.len();
            let tok = match script.tokens.get(&r.rid).and_then(|t| t.get(pos)) {
                Some(&t) => t,
                None => match r.forced {
                    Some(t) => t,
                    None if r.greedy => generated_token(&r.prompt, pos, script.vocab_size),
                    None => sampled_token(&r.prompt, pos, r.seed, script.vocab_size),
                },
            };
            r.out.push(tok);
            let len = r.out.len();
            if len as i64 >= r.max_new {
                r.finish = Some("length");
            } else if !r.ignore_eos && (script.eos_token_ids.contains(&tok) || r.stop_ids.contains(&tok)) {
                r.finish = Some("stop");
            }
            let emit = r.finish.is_some()
                || if r.stream {
                    if r.stream_interval > 1 {
                        len % r.stream_interval == 1
                    } else {
                        true
                    }
                } else {
                    len == 1 || len % FORCE_STREAM_INTERVAL == 0
                };
            if emit {
                let ids = r.out[r.sent..].to_vec();
                r.sent = len;
                let (logprobs, logprob_ids) = if r.logprobs {
                    (ids.iter().map(|&t| token_logprob(t, script.vocab_size)).collect(), ids.clone())
                } else {
                    (Vec::new(), Vec::new())
                };
                rows.push(BatchRow {
                    rid: r.rid.clone(),
                    output_ids: ids.into(),
                    finish: Finish::from_wire(r.finish.unwrap_or("")),
                    prompt_tokens: r.prompt.len() as i128,
                    completion_tokens: len as i128,
                    cached_tokens: 0,
                    logprob_vals: logprobs,
                    logprob_ids: logprob_ids.into(),
                });
            }
        }
        let done: Vec<(String, String, usize)> =
            self.running.iter().filter_map(|r| r.finish.map(|f| (r.rid.clone(), f.to_string(), r.out.len()))).collect();
        self.running.retain(|r| r.finish.is_none());
        if !done.is_empty() {
            note(log, |l| l.finished.extend(done));
        }
        rows
    }

    async fn push(&self, output: &mut PushSocket, rows: Vec<BatchRow>, log: &Mutex<Log>) -> Result<(), String> {
        note(log, |l| {
            for r in &rows {
                *l.rows.entry(r.rid.clone()).or_default() += 1;
            }
        });
        let frames = encode_batch(&rows, self.script.engine_index, self.running.len() as i64)?;
        send(output, frames, "output batch").await
    }
}

/// The sampled token's logprob the mock reports: a fixed function of the
/// id, finite and negative.
pub fn token_logprob(tok: i64, vocab: i64) -> f64 {
    -(((tok.rem_euclid(vocab.max(1))) % 97) as f64 + 1.0) / 16.0
}

/// The batch of `rows` as TokenSpeed's scheduler writes it (the typed
/// `BatchTokenIDOutSlim::from_rows`, load tail: `running` requests, 1000
/// KV pages).
fn encode_batch(rows: &[BatchRow], engine_index: u16, running: i64) -> Result<Vec<Vec<u8>>, String> {
    let load = LoadTail { num_running: running.into(), kv_total_pages: 1000, ..LoadTail::default() };
    BatchTokenIDOutSlim::from_rows(rows, i64::from(engine_index), load).encode(release()).map_err(|e| e.to_string())
}

/// The token a `logit_bias` entry of 10 or more forces (keys are decimal
/// strings on this wire).
fn forced_token(bias: Option<&Value>) -> Option<i64> {
    let Some(Value::Map(entries)) = bias else { return None };
    entries.iter().find_map(|(k, v)| {
        let id = match k {
            Value::Str(s) => s.trim().parse::<i64>().ok()?,
            Value::Int(i) => *i,
            _ => return None,
        };
        let b = match v {
            Value::Float(f) => *f,
            Value::Int(i) => *i as f64,
            _ => return None,
        };
        (b >= 10.0).then_some(id)
    })
}
