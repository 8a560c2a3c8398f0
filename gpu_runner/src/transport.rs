//! The gateway side of vLLM's engine-core transport over the `zeromq`
//! crate: bind, handshake, send ADD / ABORT / UTILITY, demultiplex output
//! batches to requests, and turn every way an engine can fail into a clear
//! error on the requests it affects.
//!
//! Wire facts relied on (docs/runner.md "Transport"; vLLM 0.32.0
//! `vllm/v1/engine/core.py` `EngineCoreProc` and `vllm/v1/engine/utils.py`):
//!
//! - the gateway binds a ROUTER on tcp for the handshake, a ROUTER for input
//!   and a PULL for output (ipc here); the engine dials all three;
//! - the engine's routing identity is its index as 2 bytes little-endian;
//!   requests go out as `[identity, type byte, payload, aux...]` (`00` ADD,
//!   `01` ABORT, `03` UTILITY);
//! - outputs arrive on PULL as `[payload, aux...]` with no identity frame, or
//!   as the one frame `ENGINE_CORE_DEAD` when the engine dies of a fatal
//!   error. Because PULL carries no identity, each engine gets its own output
//!   address in its INIT (`out-<index>.sock`), so a death sentinel or a
//!   dropped output connection names exactly one engine;
//! - a client ABORT produces no output: aborted requests are finished here;
//! - a UTILITY reply is an `EngineCoreOutputs` whose `utility_output` holds
//!   `[call_id, failure_message, [type_info, result]]`; call ids are u64.
//!
//! What the `zeromq` crate (0.7) does differently from libzmq, and how it is
//! handled here (docs/runner.md "zeromq 0.7 versus libzmq"):
//!
//! - bind does not unlink a stale ipc socket file: stale sockets are removed
//!   before binding and on shutdown;
//! - `recv()` never fails when a peer dies: engine death is seen through the
//!   sockets' monitor events (`Disconnected`), through the sentinel, and
//!   through per-request silence deadlines; a recv loop runs on every socket
//!   so that the monitors fire;
//! - a ROUTER send to a dead peer not yet noticed returns `Ok`: `Ok` is never
//!   taken as delivery, which is why silence deadlines exist; nothing is sent
//!   to an engine before its registration (which proves its input connection);
//! - outputs for request ids this gateway does not know (left over from a
//!   previous gateway process) are counted, dropped and aborted once.
//!
//! Output batches are decoded with `engine_protocol::hot::decode_outputs`
//! (the verdict, errors and drift of `decode_message`, with request ids,
//! token ids and finish and stop reasons borrowed from the frames); each
//! [`Step`]'s whole output is decoded from the shared frames only when read
//! ([`OutputValue`]).
//!
//! Every frame set the gateway sends or receives (handshake, registration,
//! ADD / ABORT / UTILITY, output batches, the death sentinel) can be copied,
//! raw, to a tap ([`GatewayConfig::tap`]) for `gpu-runner run --record`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::ops::{Deref, Range};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use engine_protocol::hot::{decode_output_value, decode_outputs};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use engine_protocol::{engine_identity, engine_index, is_engine_dead, RequestType};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zeromq::{PullSocket, RouterSendHalf, RouterSocket, Socket, SocketEvent, SocketRecv, SocketSend, ZmqMessage};

use crate::handshake::{self, EngineFacts, Phase};

/// How long one send may wait for room in a peer's queue.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Client-aborted requests whose late outputs are timed (memory bound).
const MAX_ABORTED_TRACKED: usize = 100_000;

/// How the gateway binds and how long it waits.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub release: &'static ReleaseSchema,
    /// The handshake ROUTER endpoint; `tcp://127.0.0.1:0` picks a free port.
    pub handshake: String,
    /// Directory for the ipc input and output sockets (created if missing).
    pub ipc_dir: PathBuf,
    /// A request with no output for this long fails with [`TransportError::Silence`].
    pub silence: Duration,
    /// A utility call without reply for this long fails.
    pub utility_timeout: Duration,
    pub limits: Limits,
    /// Receives a copy of every frame set sent or received ([`Tapped`]).
    pub tap: Option<mpsc::UnboundedSender<Tapped>>,
}

/// The socket a tapped frame set travelled on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapSocket {
    Handshake,
    Input,
    Output,
}

impl TapSocket {
    pub fn name(self) -> &'static str {
        match self {
            TapSocket::Handshake => "handshake",
            TapSocket::Input => "input",
            TapSocket::Output => "output",
        }
    }
}

/// One frame set as it crossed a socket, without the routing identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Tapped {
    pub socket: TapSocket,
    /// True when the engine sent it.
    pub from_engine: bool,
    /// The engine, from the routing identity or the output socket; `None`
    /// when the identity frame does not name one.
    pub engine: Option<u16>,
    pub frames: Vec<Vec<u8>>,
    pub at: SystemTime,
}

impl GatewayConfig {
    pub fn new(release: &'static ReleaseSchema, ipc_dir: impl Into<PathBuf>) -> Self {
        GatewayConfig {
            release,
            handshake: "tcp://127.0.0.1:0".into(),
            ipc_dir: ipc_dir.into(),
            silence: Duration::from_secs(30),
            utility_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            tap: None,
        }
    }
}

/// Why the gateway considers an engine dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeathCause {
    /// The engine pushed `ENGINE_CORE_DEAD` (a fatal engine error).
    Sentinel,
    /// The engine's output (PUSH) connection went away.
    OutputDisconnected,
    /// The engine's input (DEALER) connection went away.
    InputDisconnected,
    /// The engine said HELLO again: it restarted, and what it was running
    /// is lost.
    Restarted,
}

impl fmt::Display for DeathCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeathCause::Sentinel => "engine sent ENGINE_CORE_DEAD",
            DeathCause::OutputDisconnected => "engine's output connection dropped",
            DeathCause::InputDisconnected => "engine's input connection dropped",
            DeathCause::Restarted => "engine restarted (a new HELLO) and lost its requests",
        })
    }
}

/// Every failure the transport reports, each naming what happened.
#[derive(Debug, Clone, PartialEq)]
pub enum TransportError {
    Bind {
        endpoint: String,
        detail: String,
    },
    /// No engine (or not enough engines) came up in time.
    HandshakeTimeout {
        waited: Duration,
        detail: String,
    },
    EngineDead {
        engine: u16,
        cause: DeathCause,
    },
    /// No output for this request within the silence deadline.
    Silence {
        request_id: String,
        engine: u16,
        waited: Duration,
    },
    /// An output batch that does not decode; every in-flight request of the
    /// engine fails with it, since its outputs may be in that batch.
    MalformedBatch {
        engine: u16,
        detail: String,
    },
    UnknownEngine(u16),
    EngineNotReady {
        engine: u16,
        missing: &'static str,
    },
    DuplicateRequest(String),
    Encode(String),
    Send {
        engine: u16,
        detail: String,
    },
    Utility {
        method: String,
        message: String,
    },
    UtilityTimeout {
        method: String,
        waited: Duration,
    },
    /// The request stream ended without a finish reason (gateway closed).
    Closed,
    /// A deadline given to [`RequestStream::finish`] passed.
    Deadline {
        request_id: String,
        waited: Duration,
    },
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Bind { endpoint, detail } => write!(f, "cannot bind {endpoint}: {detail}"),
            TransportError::HandshakeTimeout { waited, detail } => {
                write!(f, "handshake not complete after {:.1}s: {detail}", waited.as_secs_f64())
            }
            TransportError::EngineDead { engine, cause } => write!(f, "engine {engine} is dead: {cause}"),
            TransportError::Silence { request_id, engine, waited } => write!(
                f,
                "request {request_id}: no output from engine {engine} for {:.1}s (silence deadline)",
                waited.as_secs_f64()
            ),
            TransportError::MalformedBatch { engine, detail } => {
                write!(f, "engine {engine} sent a malformed output batch: {detail}")
            }
            TransportError::UnknownEngine(e) => write!(f, "engine {e} never said HELLO"),
            TransportError::EngineNotReady { engine, missing } => {
                write!(f, "engine {engine} is not ready (missing {missing})")
            }
            TransportError::DuplicateRequest(id) => write!(f, "request id {id} is already in flight"),
            TransportError::Encode(e) => write!(f, "cannot encode: {e}"),
            TransportError::Send { engine, detail } => write!(f, "send to engine {engine} failed: {detail}"),
            TransportError::Utility { method, message } => write!(f, "utility {method} failed: {message}"),
            TransportError::UtilityTimeout { method, waited } => {
                write!(f, "utility {method}: no reply within {:.1}s", waited.as_secs_f64())
            }
            TransportError::Closed => f.write_str("gateway closed before the request finished"),
            TransportError::Deadline { request_id, waited } => {
                write!(f, "request {request_id}: not finished within {:.1}s", waited.as_secs_f64())
            }
        }
    }
}

impl std::error::Error for TransportError {}

/// One engine's place in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineState {
    Initialising { missing: &'static str },
    Up(Box<EngineFacts>),
    Dead(DeathCause),
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineStatus {
    pub index: u16,
    pub state: EngineState,
}

/// One `EngineCoreOutput` for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub new_token_ids: Vec<i64>,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    /// The whole decoded output (logprobs, kv params, ...), decoded when
    /// first read.
    pub output: OutputValue,
}

/// One whole `EngineCoreOutput` as the schema-driven decoder decodes it
/// (dereferences to its `StructValue`). The output loop reads only what it
/// needs with `engine_protocol::hot`; the rest is decoded on first access
/// from the batch's frames, which the steps of a batch share (one reference
/// count each, no copy). The batch was validated as a whole, so that decode
/// cannot fail.
#[derive(Clone)]
pub struct OutputValue {
    batch: Arc<BatchFrames>,
    raw: Range<usize>,
    value: OnceLock<StructValue>,
}

/// An output batch's frames and how it was decoded, shared by its steps.
struct BatchFrames {
    frames: Vec<Bytes>,
    release: &'static ReleaseSchema,
    limits: Limits,
}

impl OutputValue {
    /// The decoded output.
    pub fn value(&self) -> &StructValue {
        self.value.get_or_init(|| {
            let b = &self.batch;
            let slices: Vec<&[u8]> = b.frames.iter().map(|f| f.as_ref()).collect();
            decode_output_value(b.release, &slices, self.raw.clone(), &b.limits)
                .unwrap_or_else(|_| StructValue::with_defaults(b.release.engine_core_output))
        })
    }
}

impl Deref for OutputValue {
    type Target = StructValue;
    fn deref(&self) -> &StructValue {
        self.value()
    }
}

impl PartialEq for OutputValue {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for OutputValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

/// What a request stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestEvent {
    Output(Step),
    /// Finished locally after [`Gateway::abort`] (the engine sends nothing).
    Aborted,
    Failed(TransportError),
}

/// A finished request.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub request_id: String,
    pub token_ids: Vec<i64>,
    pub finish_reason: FinishReason,
    pub stop_reason: Option<StopReason>,
    pub steps: Vec<Step>,
}

/// The outputs of one request, in order.
#[derive(Debug)]
pub struct RequestStream {
    pub request_id: String,
    pub engine: u16,
    rx: mpsc::UnboundedReceiver<RequestEvent>,
}

impl RequestStream {
    /// The next event; `None` once the request is finished or failed.
    pub async fn next(&mut self) -> Option<RequestEvent> {
        self.rx.recv().await
    }

    /// Collects outputs until the request finishes, fails or `deadline`
    /// passes.
    pub async fn finish(mut self, deadline: Duration) -> Result<Finished, TransportError> {
        let until = Instant::now() + deadline;
        let mut steps = Vec::new();
        loop {
            let ev = match tokio::time::timeout_at(until, self.rx.recv()).await {
                Err(_) => return Err(TransportError::Deadline { request_id: self.request_id, waited: deadline }),
                Ok(None) => return Err(TransportError::Closed),
                Ok(Some(ev)) => ev,
            };
            match ev {
                RequestEvent::Failed(e) => return Err(e),
                RequestEvent::Aborted => return Ok(finished(self.request_id, steps, FinishReason::Abort, None)),
                RequestEvent::Output(step) => {
                    let done = step.finish_reason.map(|r| (r, step.stop_reason.clone()));
                    steps.push(step);
                    if let Some((reason, stop)) = done {
                        return Ok(finished(self.request_id, steps, reason, stop));
                    }
                }
            }
        }
    }
}

fn finished(request_id: String, steps: Vec<Step>, reason: FinishReason, stop: Option<StopReason>) -> Finished {
    let token_ids = steps.iter().flat_map(|s| s.new_token_ids.iter().copied()).collect();
    Finished { request_id, token_ids, finish_reason: reason, stop_reason: stop, steps }
}

/// Counters a run reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayStats {
    pub batches: u64,
    pub malformed_batches: u64,
    /// Outputs for request ids this gateway never sent or already finished.
    pub orphan_outputs: u64,
    /// Paths the decoder reported as drift (engine newer than the schema).
    pub drift: BTreeSet<String>,
    /// Handshake or framing violations (bad identity, unknown status, ...).
    pub protocol_errors: Vec<String>,
}

enum Command {
    Add {
        engine: u16,
        request_id: String,
        frames: Vec<Vec<u8>>,
        reply: oneshot::Sender<AddReply>,
    },
    Abort {
        engine: u16,
        ids: Vec<String>,
        reply: oneshot::Sender<Result<(), TransportError>>,
    },
    Utility {
        engine: u16,
        method: String,
        args: Vec<Value>,
        reply: oneshot::Sender<Result<Value, TransportError>>,
    },
    Stats {
        reply: oneshot::Sender<GatewayStats>,
    },
    /// Finish requests locally without telling the engine.
    Forget {
        ids: Vec<String>,
    },
    /// How long after its ABORT each late output of a request arrived.
    LateOutputs {
        id: String,
        reply: oneshot::Sender<Option<Vec<Duration>>>,
    },
    Shutdown,
}

type AddReply = Result<mpsc::UnboundedReceiver<RequestEvent>, TransportError>;

enum Inbound {
    Handshake(Vec<Bytes>),
    Input(Vec<Bytes>),
    InputDisconnected(Vec<u8>),
    Output { engine: u16, generation: u64, frames: Vec<Bytes> },
    OutputDisconnected { engine: u16, generation: u64 },
    SocketError(String),
}

/// The gateway: owns the sockets (through a background task) and hands out
/// request streams.
pub struct Gateway {
    release: &'static ReleaseSchema,
    cmd: mpsc::UnboundedSender<Command>,
    state: watch::Receiver<Vec<EngineStatus>>,
    handshake_endpoint: String,
    input_endpoint: String,
    actor: Option<JoinHandle<()>>,
}

impl Gateway {
    /// Binds the input ROUTER and the handshake ROUTER and starts serving.
    pub async fn bind(cfg: GatewayConfig) -> Result<Gateway, TransportError> {
        std::fs::create_dir_all(&cfg.ipc_dir).map_err(|e| TransportError::Bind {
            endpoint: cfg.ipc_dir.display().to_string(),
            detail: format!("cannot create the ipc directory: {e}"),
        })?;
        let (in_tx, in_rx) = mpsc::unbounded_channel();

        let input_endpoint = format!("ipc://{}", cfg.ipc_dir.join("in.sock").display());
        let mut input = RouterSocket::new();
        let input_monitor = input.monitor();
        bind_socket(&mut input, &input_endpoint).await?;
        let (input_send, input_recv) = input.split();
        let input_task =
            tokio::spawn(pump_router(input_recv, Some(input_monitor.boxed()), in_tx.clone(), Channel::Input));

        let mut hs = RouterSocket::new();
        let handshake_endpoint = bind_socket(&mut hs, &cfg.handshake).await?;
        let (hs_send, hs_recv) = hs.split();
        let hs_task = tokio::spawn(pump_router(hs_recv, None, in_tx.clone(), Channel::Handshake));

        let (state_tx, state_rx) = watch::channel(Vec::new());
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let actor = Actor {
            cfg: cfg.clone(),
            input_endpoint: input_endpoint.clone(),
            input_send,
            hs_send,
            in_tx,
            engines: HashMap::new(),
            in_flight: HashMap::default(),
            finished_locally: HashSet::new(),
            aborted: HashMap::new(),
            utilities: HashMap::new(),
            next_call_id: (1u64 << 63) + 1,
            next_generation: 1,
            stats: GatewayStats::default(),
            state_tx,
            socket_tasks: vec![input_task, hs_task],
        };
        let actor = tokio::spawn(actor.run(cmd_rx, in_rx));
        Ok(Gateway {
            release: cfg.release,
            cmd: cmd_tx,
            state: state_rx,
            handshake_endpoint,
            input_endpoint,
            actor: Some(actor),
        })
    }

    /// The resolved handshake endpoint (`tcp://127.0.0.1:<port>`), to give to
    /// the engine (`--data-parallel-rpc-port`).
    pub fn handshake_endpoint(&self) -> &str {
        &self.handshake_endpoint
    }

    /// The handshake port, when the endpoint is tcp.
    pub fn handshake_port(&self) -> Option<u16> {
        self.handshake_endpoint.rsplit(':').next().and_then(|p| p.parse().ok())
    }

    pub fn input_endpoint(&self) -> &str {
        &self.input_endpoint
    }

    pub fn release(&self) -> &'static ReleaseSchema {
        self.release
    }

    /// Every engine seen so far.
    pub fn engines(&self) -> Vec<EngineStatus> {
        self.state.borrow().clone()
    }

    /// Waits until `count` engines are up; fails at once if an engine dies
    /// while starting, and with a description of where each engine stands
    /// when `timeout` passes.
    pub async fn wait_ready(&self, count: usize, timeout: Duration) -> Result<Vec<EngineFacts>, TransportError> {
        let until = Instant::now() + timeout;
        let mut rx = self.state.clone();
        loop {
            let snapshot = rx.borrow_and_update().clone();
            let up: Vec<EngineFacts> = snapshot
                .iter()
                .filter_map(|e| if let EngineState::Up(f) = &e.state { Some((**f).clone()) } else { None })
                .collect();
            if up.len() >= count {
                return Ok(up);
            }
            if let Some(dead) =
                snapshot
                    .iter()
                    .find_map(|e| if let EngineState::Dead(c) = &e.state { Some((e.index, c)) } else { None })
            {
                return Err(TransportError::EngineDead { engine: dead.0, cause: dead.1.clone() });
            }
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => continue,
                Ok(Err(_)) => return Err(TransportError::Closed),
                Err(_) => {
                    let detail = if snapshot.is_empty() {
                        format!("no engine said HELLO on {}", self.handshake_endpoint)
                    } else {
                        let parts: Vec<String> = snapshot
                            .iter()
                            .map(|e| match &e.state {
                                EngineState::Initialising { missing } => {
                                    format!("engine {} sent HELLO, got INIT, still missing {missing}", e.index)
                                }
                                EngineState::Up(_) => format!("engine {} up", e.index),
                                EngineState::Dead(c) => format!("engine {} dead: {c}", e.index),
                            })
                            .collect();
                        format!("{} of {count} engines up; {}", up.len(), parts.join("; "))
                    };
                    return Err(TransportError::HandshakeTimeout { waited: timeout, detail });
                }
            }
        }
    }

    /// Sends an ADD (`request` is an `EngineCoreRequest` value of this
    /// gateway's release) and returns the stream of its outputs.
    pub async fn add(&self, engine: u16, request: &Value) -> Result<RequestStream, TransportError> {
        let request_id = match request {
            Value::Struct(s) => s.str_field("request_id").map(str::to_string),
            _ => None,
        }
        .ok_or_else(|| TransportError::Encode("EngineCoreRequest without a string request_id".into()))?;
        let frames = encode_message(self.release, MessageKind::EngineCoreRequest, request)
            .map_err(|e| TransportError::Encode(e.to_string()))?;
        self.add_frames(engine, &request_id, frames).await
    }

    /// Sends input frames as they are (`[type byte, payload, aux...]`, not
    /// checked or encoded here) and streams what comes back for
    /// `request_id`. For requests the engine must refuse, built around the
    /// gateway's own validation; never for ordinary traffic.
    pub async fn add_frames(
        &self,
        engine: u16,
        request_id: &str,
        frames: Vec<Vec<u8>>,
    ) -> Result<RequestStream, TransportError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Add { engine, request_id: request_id.to_string(), frames, reply })?;
        let events = rx.await.map_err(|_| TransportError::Closed)??;
        Ok(RequestStream { request_id: request_id.to_string(), engine, rx: events })
    }

    /// Finishes requests here without sending anything (a request the
    /// engine never registered, e.g. one it could not decode).
    pub fn forget(&self, ids: &[String]) {
        let _ = self.command(Command::Forget { ids: ids.to_vec() });
    }

    /// For a request aborted by [`Gateway::abort`]: how long after the
    /// ABORT each output that still arrived for it came (empty when the
    /// engine fell silent); `None` when no ABORT was sent for it.
    pub async fn late_outputs(&self, request_id: &str) -> Option<Vec<Duration>> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::LateOutputs { id: request_id.to_string(), reply }).ok()?;
        rx.await.ok().flatten()
    }

    /// Sends an ABORT for `ids`; those in flight finish with
    /// [`RequestEvent::Aborted`] (vLLM sends nothing back for a client abort).
    pub async fn abort(&self, engine: u16, ids: &[String]) -> Result<(), TransportError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Abort { engine, ids: ids.to_vec(), reply })?;
        rx.await.map_err(|_| TransportError::Closed)?
    }

    /// Calls a utility method on the engine and returns its result value
    /// (the second element of vLLM's `UtilityResult`).
    pub async fn utility(&self, engine: u16, method: &str, args: Vec<Value>) -> Result<Value, TransportError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Utility { engine, method: method.into(), args, reply })?;
        rx.await.map_err(|_| TransportError::Closed)?
    }

    pub async fn stats(&self) -> GatewayStats {
        let (reply, rx) = oneshot::channel();
        if self.command(Command::Stats { reply }).is_err() {
            return GatewayStats::default();
        }
        rx.await.unwrap_or_default()
    }

    /// Closes every socket and removes the ipc socket files.
    pub async fn shutdown(mut self) {
        let _ = self.cmd.send(Command::Shutdown);
        if let Some(actor) = self.actor.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), actor).await;
        }
    }

    fn command(&self, c: Command) -> Result<(), TransportError> {
        self.cmd.send(c).map_err(|_| TransportError::Closed)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // The actor cleans up when its command channel closes.
        let _ = self.cmd.send(Command::Shutdown);
    }
}

/// Removes a stale ipc socket file (zeromq 0.7 does not), then binds.
async fn bind_socket<S: Socket>(socket: &mut S, endpoint: &str) -> Result<String, TransportError> {
    if let Some(path) = ipc_path(endpoint) {
        remove_stale_socket(path).map_err(|detail| TransportError::Bind { endpoint: endpoint.to_string(), detail })?;
    }
    socket
        .bind(endpoint)
        .await
        .map(|e| e.to_string())
        .map_err(|e| TransportError::Bind { endpoint: endpoint.to_string(), detail: e.to_string() })
}

/// The filesystem path of an `ipc://` endpoint.
pub fn ipc_path(endpoint: &str) -> Option<&Path> {
    endpoint.strip_prefix("ipc://").map(Path::new)
}

/// Removes `path` if it is a socket; a missing file is fine; any other kind
/// of file is left alone and reported.
pub fn remove_stale_socket(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot inspect {}: {e}", path.display())),
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| format!("cannot remove stale socket {}: {e}", path.display()))
        }
        Ok(_) => Err(format!("{} exists and is not a socket", path.display())),
    }
}

#[derive(Clone, Copy)]
enum Channel {
    Handshake,
    Input,
}

/// Keeps `recv()` running on a ROUTER (the monitor only reports a dead
/// peer while the read side is polled) and forwards messages and
/// disconnects, in order, to the actor.
async fn pump_router(
    mut rx: zeromq::RouterRecvHalf,
    mut monitor: Option<futures_util::stream::BoxStream<'static, SocketEvent>>,
    tx: mpsc::UnboundedSender<Inbound>,
    channel: Channel,
) {
    let mut errors = 0u32;
    loop {
        tokio::select! {
            biased;
            m = rx.recv() => match m {
                Ok(msg) => {
                    errors = 0;
                    let frames = msg.into_vec();
                    let ev = match channel {
                        Channel::Handshake => Inbound::Handshake(frames),
                        Channel::Input => Inbound::Input(frames),
                    };
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    errors += 1;
                    if tx.send(Inbound::SocketError(format!("recv: {e}"))).is_err() || errors > 100 {
                        return;
                    }
                }
            },
            ev = next_event(&mut monitor) => match ev {
                Some(SocketEvent::Disconnected(id)) => {
                    if tx.send(Inbound::InputDisconnected(id.to_vec())).is_err() {
                        return;
                    }
                }
                Some(_) => {}
                None => monitor = None,
            },
        }
    }
}

async fn next_event(m: &mut Option<futures_util::stream::BoxStream<'static, SocketEvent>>) -> Option<SocketEvent> {
    match m {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Receives one engine's outputs and reports its output connection going
/// away (PULL `recv()` itself never fails on a peer's death).
async fn pump_pull(
    mut pull: PullSocket,
    monitor: futures_util::stream::BoxStream<'static, SocketEvent>,
    tx: mpsc::UnboundedSender<Inbound>,
    engine: u16,
    generation: u64,
) {
    let mut monitor = Some(monitor);
    let mut errors = 0u32;
    loop {
        tokio::select! {
            biased;
            m = pull.recv() => match m {
                Ok(msg) => {
                    errors = 0;
                    if tx.send(Inbound::Output { engine, generation, frames: msg.into_vec() }).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    errors += 1;
                    if tx.send(Inbound::SocketError(format!("engine {engine} output recv: {e}"))).is_err() || errors > 100 {
                        return;
                    }
                }
            },
            ev = next_event(&mut monitor) => match ev {
                Some(SocketEvent::Disconnected(_)) => {
                    if tx.send(Inbound::OutputDisconnected { engine, generation }).is_err() {
                        return;
                    }
                }
                Some(_) => {}
                None => monitor = None,
            },
        }
    }
}

struct EngineEntry {
    phase: Phase,
    dead: Option<DeathCause>,
    output_endpoint: String,
    output_task: Option<JoinHandle<()>>,
    generation: u64,
}

struct InFlight {
    engine: u16,
    tx: mpsc::UnboundedSender<RequestEvent>,
    last_activity: Instant,
}

struct PendingUtility {
    engine: u16,
    method: String,
    deadline: Instant,
    reply: oneshot::Sender<Result<Value, TransportError>>,
}

struct Actor {
    cfg: GatewayConfig,
    input_endpoint: String,
    input_send: RouterSendHalf,
    hs_send: RouterSendHalf,
    in_tx: mpsc::UnboundedSender<Inbound>,
    engines: HashMap<u16, EngineEntry>,
    /// Keyed with FxHash (`rustc-hash`): one lookup per output on the hot
    /// path, and the ids are the gateway's own, so no DoS-resistant hash is
    /// needed.
    in_flight: HashMap<String, InFlight, rustc_hash::FxBuildHasher>,
    /// Requests finished here (abort, silence, local stop) whose late
    /// outputs are expected and dropped.
    finished_locally: HashSet<String>,
    /// Requests aborted by the client: when the ABORT went out, and when
    /// (after it) each late output arrived.
    aborted: HashMap<String, (Instant, Vec<Duration>)>,
    utilities: HashMap<u64, PendingUtility>,
    next_call_id: u64,
    next_generation: u64,
    stats: GatewayStats,
    state_tx: watch::Sender<Vec<EngineStatus>>,
    socket_tasks: Vec<JoinHandle<()>>,
}

impl Actor {
    async fn run(mut self, mut cmd_rx: mpsc::UnboundedReceiver<Command>, mut in_rx: mpsc::UnboundedReceiver<Inbound>) {
        // One timer, reset only when it fires or a command (ADD, UTILITY)
        // brings an earlier deadline: outputs only push deadlines later, so
        // an early wake-up just re-arms it. Not recomputed per batch.
        let sleep = tokio::time::sleep_until(self.next_deadline());
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                ev = in_rx.recv() => match ev {
                    Some(ev) => self.on_inbound(ev).await,
                    None => break,
                },
                c = cmd_rx.recv() => match c {
                    None | Some(Command::Shutdown) => break,
                    Some(c) => {
                        self.on_command(c).await;
                        let d = self.next_deadline();
                        if d < sleep.deadline() {
                            sleep.as_mut().reset(d);
                        }
                    }
                },
                _ = &mut sleep => {
                    self.expire().await;
                    let d = self.next_deadline();
                    sleep.as_mut().reset(d);
                }
            }
        }
        self.close();
    }

    fn close(&mut self) {
        for (_, f) in self.in_flight.drain() {
            let _ = f.tx.send(RequestEvent::Failed(TransportError::Closed));
        }
        for (_, u) in self.utilities.drain() {
            let _ = u.reply.send(Err(TransportError::Closed));
        }
        for t in self.socket_tasks.drain(..) {
            t.abort();
        }
        let mut paths = vec![self.input_endpoint.clone()];
        for e in self.engines.values_mut() {
            if let Some(t) = e.output_task.take() {
                t.abort();
            }
            paths.push(e.output_endpoint.clone());
        }
        for p in paths {
            if let Some(path) = ipc_path(&p) {
                let _ = remove_stale_socket(path);
            }
        }
    }

    fn next_deadline(&self) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        let req = self.in_flight.values().map(|f| f.last_activity + self.cfg.silence);
        let util = self.utilities.values().map(|u| u.deadline);
        req.chain(util).min().unwrap_or(far)
    }

    fn publish(&self) {
        let mut v: Vec<EngineStatus> = self
            .engines
            .iter()
            .map(|(i, e)| EngineStatus {
                index: *i,
                state: match (&e.dead, &e.phase) {
                    (Some(c), _) => EngineState::Dead(c.clone()),
                    (None, Phase::Up(f)) => EngineState::Up(Box::new(f.clone())),
                    (None, p) => EngineState::Initialising { missing: p.missing() },
                },
            })
            .collect();
        v.sort_by_key(|e| e.index);
        self.state_tx.send_replace(v);
    }

    async fn on_inbound(&mut self, ev: Inbound) {
        match ev {
            Inbound::Handshake(frames) => self.on_handshake(frames).await,
            Inbound::Input(frames) => self.on_input(frames),
            Inbound::InputDisconnected(id) => {
                if let Ok(index) = engine_index(&id) {
                    self.engine_died(index, DeathCause::InputDisconnected);
                }
            }
            Inbound::Output { engine, generation, frames } => {
                if self.engines.get(&engine).is_some_and(|e| e.generation == generation) {
                    self.on_output(engine, frames).await;
                }
            }
            Inbound::OutputDisconnected { engine, generation } => {
                if self.engines.get(&engine).is_some_and(|e| e.generation == generation) {
                    self.engine_died(engine, DeathCause::OutputDisconnected);
                }
            }
            Inbound::SocketError(e) => self.protocol_error(format!("socket: {e}")),
        }
    }

    fn protocol_error(&mut self, e: String) {
        if self.stats.protocol_errors.len() < 100 {
            self.stats.protocol_errors.push(e);
        }
    }

    /// Copies a frame set to the tap, if there is one.
    fn tap(&self, socket: TapSocket, from_engine: bool, engine: Option<u16>, frames: &[Bytes]) {
        if let Some(t) = &self.cfg.tap {
            let frames = frames.iter().map(|f| f.to_vec()).collect();
            let _ = t.send(Tapped { socket, from_engine, engine, frames, at: SystemTime::now() });
        }
    }

    async fn on_handshake(&mut self, frames: Vec<Bytes>) {
        if let Some((identity, rest)) = frames.split_first() {
            self.tap(TapSocket::Handshake, true, engine_index(identity).ok(), rest);
        }
        let [identity, payload] = frames.as_slice() else {
            self.protocol_error(format!("handshake message of {} frames (expected identity + payload)", frames.len()));
            return;
        };
        let index = match engine_index(identity) {
            Ok(i) => i,
            Err(e) => return self.protocol_error(format!("handshake: {e}")),
        };
        let status = match handshake::decode_status(self.cfg.release, payload) {
            Ok(s) => s,
            Err(e) => return self.protocol_error(format!("engine {index}: {e}")),
        };
        match status.status.as_str() {
            "HELLO" => self.on_hello(index, identity.clone()).await,
            "READY" => match self.engines.get_mut(&index) {
                Some(e) => {
                    e.phase.on_ready();
                    self.publish();
                }
                None => self.protocol_error(format!("engine {index}: READY before HELLO")),
            },
            other => self.protocol_error(format!("engine {index}: unknown handshake status {other:?}")),
        }
    }

    async fn on_hello(&mut self, index: u16, identity: Bytes) {
        // A HELLO from a known identity is an engine (re)start: it gets the
        // same addresses and a fresh state; requests still in flight on the
        // previous incarnation are lost with it.
        if self.engines.get(&index).is_some_and(|e| e.dead.is_none() && matches!(e.phase, Phase::Up(_))) {
            self.engine_died(index, DeathCause::Restarted);
        }
        let output_endpoint = format!("ipc://{}", self.cfg.ipc_dir.join(format!("out-{index}.sock")).display());
        let generation = self.next_generation;
        self.next_generation += 1;
        if let Some(old) = self.engines.get_mut(&index).and_then(|e| e.output_task.take()) {
            old.abort();
            // Let the aborted task drop its socket before rebinding the path.
            tokio::task::yield_now().await;
        }
        let mut pull = PullSocket::new();
        let monitor = pull.monitor().boxed();
        if let Err(e) = bind_socket(&mut pull, &output_endpoint).await {
            self.protocol_error(format!("engine {index}: {e}"));
            return;
        }
        let task = tokio::spawn(pump_pull(pull, monitor, self.in_tx.clone(), index, generation));
        self.engines.insert(
            index,
            EngineEntry {
                phase: Phase::new(),
                dead: None,
                output_endpoint: output_endpoint.clone(),
                output_task: Some(task),
                generation,
            },
        );
        let init = match handshake::encode_init(self.cfg.release, &self.input_endpoint, &output_endpoint) {
            Ok(b) => b,
            Err(e) => return self.protocol_error(e),
        };
        let init = Bytes::from(init);
        self.tap(TapSocket::Handshake, false, Some(index), std::slice::from_ref(&init));
        let msg = zmq_message(vec![identity, init]);
        match tokio::time::timeout(SEND_TIMEOUT, self.hs_send.send(msg)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.protocol_error(format!("engine {index}: INIT send failed: {e}")),
            Err(_) => self.protocol_error(format!("engine {index}: INIT send timed out")),
        }
        self.publish();
    }

    fn on_input(&mut self, frames: Vec<Bytes>) {
        if let Some((identity, rest)) = frames.split_first() {
            self.tap(TapSocket::Input, true, engine_index(identity).ok(), rest);
        }
        let [identity, payload] = frames.as_slice() else {
            self.protocol_error(format!("input-socket message of {} frames (expected a registration)", frames.len()));
            return;
        };
        let index = match engine_index(identity) {
            Ok(i) => i,
            Err(e) => return self.protocol_error(format!("input: {e}")),
        };
        let facts = match handshake::decode_registration(self.cfg.release, index, payload) {
            Ok(f) => f,
            Err(e) => return self.protocol_error(format!("engine {index}: {e}")),
        };
        self.stats.drift.extend(facts.drift.iter().cloned());
        match self.engines.get_mut(&index) {
            Some(e) => {
                e.phase.on_registration(facts);
                self.publish();
            }
            None => self.protocol_error(format!("engine {index}: registration before HELLO")),
        }
    }

    fn engine_died(&mut self, index: u16, cause: DeathCause) {
        let Some(e) = self.engines.get_mut(&index) else { return };
        if e.dead.is_some() {
            return;
        }
        e.dead = Some(cause.clone());
        let err = TransportError::EngineDead { engine: index, cause };
        self.fail_engine_requests(index, &err);
        let calls: Vec<u64> = self.utilities.iter().filter(|(_, u)| u.engine == index).map(|(k, _)| *k).collect();
        for k in calls {
            if let Some(u) = self.utilities.remove(&k) {
                let _ = u.reply.send(Err(err.clone()));
            }
        }
        self.publish();
    }

    /// Fails every in-flight request of engine `index`; returns their ids.
    fn fail_engine_requests(&mut self, index: u16, err: &TransportError) -> Vec<String> {
        let mut ids: Vec<String> =
            self.in_flight.iter().filter(|(_, f)| f.engine == index).map(|(k, _)| k.clone()).collect();
        ids.sort();
        for id in &ids {
            if let Some(f) = self.in_flight.remove(id) {
                let _ = f.tx.send(RequestEvent::Failed(err.clone()));
            }
        }
        ids
    }

    async fn on_output(&mut self, engine: u16, frames: Vec<Bytes>) {
        self.tap(TapSocket::Output, true, Some(engine), &frames);
        // Shared by the batch's steps (their `output`, decoded on demand).
        let release = self.cfg.release;
        let limits = self.cfg.limits;
        let shared = Arc::new(BatchFrames { frames, release, limits });
        let slices: Vec<&[u8]> = shared.frames.iter().map(|b| b.as_ref()).collect();
        if is_engine_dead(&slices) {
            self.engine_died(engine, DeathCause::Sentinel);
            return;
        }
        self.stats.batches += 1;
        // The fast decoder: same verdict, errors and drift as
        // `decode_message`, fields borrowed from the frames.
        let batch = match decode_outputs(release, &slices, &limits) {
            Ok(d) => d,
            Err(e) => {
                self.stats.malformed_batches += 1;
                let err = TransportError::MalformedBatch { engine, detail: e.to_string() };
                let failed = self.fail_engine_requests(engine, &err);
                // The engine may still be generating them: stop it.
                self.finished_locally.extend(failed.iter().cloned());
                if !failed.is_empty() {
                    let _ = self.send_abort(engine, &failed).await;
                }
                return;
            }
        };
        if !batch.drift.is_empty() {
            self.stats.drift.extend(batch.drift.iter().cloned());
        }
        if let Some((call_id, failure, result)) = batch.utility_output() {
            let id = match call_id {
                Value::UInt(u) => Some(*u),
                Value::Int(i) => u64::try_from(*i).ok(),
                _ => None,
            };
            match id.and_then(|id| self.utilities.remove(&id)) {
                Some(u) => {
                    let r = match failure {
                        Some(m) => Err(TransportError::Utility { method: u.method, message: m.to_string() }),
                        None => Ok(result.cloned().unwrap_or(Value::Nil)),
                    };
                    let _ = u.reply.send(r);
                }
                None => self.protocol_error(format!("engine {engine}: utility reply for unknown call id {call_id:?}")),
            }
        }
        let now = Instant::now();
        let mut orphans = Vec::new();
        for out in &batch.outputs {
            let id = out.request_id;
            let Some(f) = self.in_flight.get_mut(id) else {
                if let Some((at, late)) = self.aborted.get_mut(id) {
                    late.push(now.saturating_duration_since(*at));
                }
                self.stats.orphan_outputs += 1;
                if !self.finished_locally.contains(id) {
                    orphans.push(id.to_string());
                }
                continue;
            };
            f.last_activity = now;
            let step = Step {
                new_token_ids: out.new_token_ids.to_vec(),
                finish_reason: out.finish_reason,
                stop_reason: out.stop_reason_owned(),
                output: OutputValue { batch: Arc::clone(&shared), raw: out.raw.clone(), value: OnceLock::new() },
            };
            let _ = f.tx.send(RequestEvent::Output(step));
            if out.finish_reason.is_some() {
                self.in_flight.remove(id);
            }
        }
        if !orphans.is_empty() {
            // Leftovers of a previous gateway: stop the engine generating
            // them, once.
            self.finished_locally.extend(orphans.iter().cloned());
            let _ = self.send_abort(engine, &orphans).await;
        }
    }

    async fn on_command(&mut self, c: Command) {
        match c {
            Command::Add { engine, request_id, frames, reply } => {
                let r = self.add(engine, request_id, frames).await;
                let _ = reply.send(r);
            }
            Command::Abort { engine, ids, reply } => {
                let r = self.send_abort(engine, &ids).await;
                let now = Instant::now();
                for id in &ids {
                    if let Some(f) = self.in_flight.remove(id) {
                        let _ = f.tx.send(RequestEvent::Aborted);
                    }
                    self.finished_locally.insert(id.clone());
                    if self.aborted.len() < MAX_ABORTED_TRACKED {
                        self.aborted.entry(id.clone()).or_insert((now, Vec::new()));
                    }
                }
                let _ = reply.send(r);
            }
            Command::Forget { ids } => {
                for id in ids {
                    if let Some(f) = self.in_flight.remove(&id) {
                        let _ = f.tx.send(RequestEvent::Aborted);
                    }
                    self.finished_locally.insert(id);
                }
            }
            Command::LateOutputs { id, reply } => {
                let _ = reply.send(self.aborted.get(&id).map(|(_, late)| late.clone()));
            }
            Command::Utility { engine, method, args, reply } => {
                let call_id = self.next_call_id;
                self.next_call_id = self.next_call_id.wrapping_add(1).max(1);
                match self.send_utility(engine, call_id, &method, args).await {
                    Ok(()) => {
                        let deadline = Instant::now() + self.cfg.utility_timeout;
                        self.utilities.insert(call_id, PendingUtility { engine, method, deadline, reply });
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e));
                    }
                }
            }
            Command::Stats { reply } => {
                let _ = reply.send(self.stats.clone());
            }
            Command::Shutdown => {}
        }
    }

    fn check_ready(&self, engine: u16) -> Result<(), TransportError> {
        match self.engines.get(&engine) {
            None => Err(TransportError::UnknownEngine(engine)),
            Some(EngineEntry { dead: Some(c), .. }) => Err(TransportError::EngineDead { engine, cause: c.clone() }),
            Some(EngineEntry { phase: Phase::Up(_), .. }) => Ok(()),
            Some(e) => Err(TransportError::EngineNotReady { engine, missing: e.phase.missing() }),
        }
    }

    async fn add(&mut self, engine: u16, request_id: String, frames: Vec<Vec<u8>>) -> AddReply {
        self.check_ready(engine)?;
        if self.in_flight.contains_key(&request_id) {
            return Err(TransportError::DuplicateRequest(request_id));
        }
        self.send_input(engine, frames).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        self.finished_locally.remove(&request_id);
        self.in_flight.insert(request_id, InFlight { engine, tx, last_activity: Instant::now() });
        Ok(rx)
    }

    async fn send_abort(&mut self, engine: u16, ids: &[String]) -> Result<(), TransportError> {
        self.check_ready(engine)?;
        let v = Value::Array(ids.iter().cloned().map(Value::Str).collect());
        let frames = encode_message(self.cfg.release, MessageKind::AbortRequest, &v)
            .map_err(|e| TransportError::Encode(e.to_string()))?;
        self.send_input(engine, frames).await
    }

    async fn send_utility(
        &mut self,
        engine: u16,
        call_id: u64,
        method: &str,
        args: Vec<Value>,
    ) -> Result<(), TransportError> {
        self.check_ready(engine)?;
        let schema = self
            .cfg
            .release
            .utility_request
            .as_struct()
            .ok_or_else(|| TransportError::Encode("no UtilityRequest schema".into()))?;
        let mut s = StructValue::with_defaults(schema);
        let id = i64::try_from(call_id).map(Value::Int).unwrap_or(Value::UInt(call_id));
        s.set("client_index", Value::Int(0))
            .set("call_id", id)
            .set("method_name", Value::Str(method.into()))
            .set("args", Value::Array(args));
        let frames = encode_message(self.cfg.release, MessageKind::UtilityRequest, &Value::Struct(s))
            .map_err(|e| TransportError::Encode(e.to_string()))?;
        debug_assert_eq!(frames[0], [RequestType::Utility.byte()]);
        self.send_input(engine, frames).await
    }

    async fn send_input(&mut self, engine: u16, frames: Vec<Vec<u8>>) -> Result<(), TransportError> {
        let mut parts = Vec::with_capacity(frames.len() + 1);
        parts.push(Bytes::copy_from_slice(&engine_identity(engine)));
        parts.extend(frames.into_iter().map(Bytes::from));
        let sent: Vec<Bytes> = if self.cfg.tap.is_some() { parts[1..].to_vec() } else { Vec::new() };
        match tokio::time::timeout(SEND_TIMEOUT, self.input_send.send(zmq_message(parts))).await {
            Ok(Ok(())) => {
                self.tap(TapSocket::Input, false, Some(engine), &sent);
                Ok(())
            }
            Ok(Err(e)) => Err(TransportError::Send { engine, detail: e.to_string() }),
            Err(_) => {
                Err(TransportError::Send { engine, detail: format!("queue full for {}s", SEND_TIMEOUT.as_secs()) })
            }
        }
    }

    async fn expire(&mut self) {
        let now = Instant::now();
        let silence = self.cfg.silence;
        let stale: Vec<String> =
            self.in_flight.iter().filter(|(_, f)| f.last_activity + silence <= now).map(|(k, _)| k.clone()).collect();
        let mut aborts: HashMap<u16, Vec<String>> = HashMap::new();
        for id in stale {
            if let Some(f) = self.in_flight.remove(&id) {
                let err = TransportError::Silence { request_id: id.clone(), engine: f.engine, waited: silence };
                let _ = f.tx.send(RequestEvent::Failed(err));
                aborts.entry(f.engine).or_default().push(id.clone());
                self.finished_locally.insert(id);
            }
        }
        for (engine, ids) in aborts {
            // Best effort: the engine may be alive but stuck.
            let _ = self.send_abort(engine, &ids).await;
        }
        let late: Vec<u64> = self.utilities.iter().filter(|(_, u)| u.deadline <= now).map(|(k, _)| *k).collect();
        for k in late {
            if let Some(u) = self.utilities.remove(&k) {
                let waited = self.cfg.utility_timeout;
                let _ = u.reply.send(Err(TransportError::UtilityTimeout { method: u.method, waited }));
            }
        }
    }
}

fn zmq_message(parts: Vec<Bytes>) -> ZmqMessage {
    // `parts` is never empty here (identity + payload at least).
    ZmqMessage::try_from(parts).unwrap_or_else(|_| ZmqMessage::from(Bytes::new()))
}
