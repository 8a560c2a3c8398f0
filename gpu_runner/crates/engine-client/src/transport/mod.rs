//! The gateway side of an engine dialect over the `zeromq` crate: bind,
//! handshake, send ADD / ABORT / UTILITY, demultiplex output batches to
//! requests, and turn every way an engine can fail into a clear error on
//! the requests it affects. One [`EngineClient<D>`] serves every dialect
//! ([`crate::dialect`]): the dialect encodes the input and decodes the
//! batches, this module owns the sockets.
//!
//! Wire facts relied on (docs/runner/transport.md "Transport" and
//! docs/runner/tokenspeed.md "TokenSpeed";
//! docs/tokenspeed-wire.md; vLLM 0.32.0 `vllm/v1/engine/core.py`
//! `EngineCoreProc` and `vllm/v1/engine/utils.py`):
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
//! handled here (docs/runner/transport.md "zeromq 0.7 versus libzmq"):
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
//!   previous gateway process) are counted, dropped and aborted once, with
//!   the ids remembered up to a bound; an engine that floods them is ended
//!   (`orphans`);
//! - nothing legitimate follows `ENGINE_CORE_DEAD` or a dropped connection:
//!   a dead engine's output messages are counted and dropped undecoded,
//!   and its output socket closed after [`MAX_MESSAGES_AFTER_DEATH`];
//! - the socket loops hand the actor at most [`INBOUND_QUEUE`] message sets
//!   ahead of it; past that they stop reading (the peer's sends wait).
//!
//! Every frame set the gateway sends or receives (handshake, registration,
//! ADD / ABORT / UTILITY, output batches, the death sentinel) can be copied,
//! raw, to a tap ([`ClientConfig::tap`]) for `gpu-runner run --record`.
//!
//! Rooms: [`handshake`] (HELLO / INIT / READY / registration as data),
//! `sockets` (bind and receive loops), `actor` (the task that owns the
//! state), `orphans` (what an engine's unwanted outputs may cost).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{Limits, ReleaseSchema, Value};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zeromq::{RouterSocket, Socket};

mod actor;
pub mod guard;
pub mod handshake;
mod orphans;
mod sockets;
pub mod waves;

use crate::dialect::{EngineWire, Tokenspeed, Vllm, WireError};
use actor::{Actor, Command};
use guard::{bind_guarded, FrameRefused, GuardSpec, GuardedSocket};
use handshake::{EngineFacts, HandshakeError};
use sockets::{pump_router, Channel};

pub use crate::dialect::vllm::{OutputValue, Step};
pub use orphans::{
    DEFAULT_ORPHAN_FLOOD_LIMIT, MAX_MESSAGES_AFTER_DEATH, ORPHAN_IDS_REMEMBERED, ORPHAN_ID_BYTES_REMEMBERED,
};
pub use sockets::{ipc_path, remove_stale_socket, StaleSocketError};

/// Message sets the socket loops may queue for the actor. Past it they stop
/// reading their sockets until the actor catches up, so what a fast engine
/// sends waits in its own queue (and the kernel's), not in the gateway.
pub const INBOUND_QUEUE: usize = 1024;

/// How the gateway binds and how long it waits, for dialect `D`.
#[derive(Debug)]
pub struct ClientConfig<D = Vllm> {
    /// The release whose tables encode and decode (a `D` release).
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
    /// Outputs for unknown request ids one engine incarnation may send
    /// before it is ended with [`DeathCause::OrphanFlood`] (default
    /// [`DEFAULT_ORPHAN_FLOOD_LIMIT`]).
    pub orphan_flood_limit: u64,
    /// Receives a copy of every frame set sent or received ([`Tapped`]).
    pub tap: Option<mpsc::UnboundedSender<Tapped>>,
    pub dialect: PhantomData<D>,
}

impl<D> Clone for ClientConfig<D> {
    fn clone(&self) -> Self {
        ClientConfig {
            release: self.release,
            handshake: self.handshake.clone(),
            ipc_dir: self.ipc_dir.clone(),
            silence: self.silence,
            utility_timeout: self.utility_timeout,
            limits: self.limits,
            orphan_flood_limit: self.orphan_flood_limit,
            tap: self.tap.clone(),
            dialect: PhantomData,
        }
    }
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

impl<D: EngineWire> ClientConfig<D> {
    /// Binds `tcp://127.0.0.1:0` (a free port) with ipc sockets under
    /// `ipc_dir`, speaking `release`; 30 s silence and utility deadlines.
    pub fn with_release(release: &'static ReleaseSchema, ipc_dir: impl Into<PathBuf>) -> Self {
        ClientConfig {
            release,
            handshake: "tcp://127.0.0.1:0".into(),
            ipc_dir: ipc_dir.into(),
            silence: Duration::from_secs(30),
            utility_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            orphan_flood_limit: DEFAULT_ORPHAN_FLOOD_LIMIT,
            tap: None,
            dialect: PhantomData,
        }
    }
}

impl ClientConfig<Vllm> {
    /// A vLLM gateway of `release` ([`ClientConfig::with_release`]).
    pub fn new(release: &'static ReleaseSchema, ipc_dir: impl Into<PathBuf>) -> Self {
        Self::with_release(release, ipc_dir)
    }
}

impl ClientConfig<Tokenspeed> {
    /// A TokenSpeed 0.1.1 gateway binding `handshake`. It has no silence
    /// deadline of its own (the TokenSpeed run waits per request,
    /// docs/runner/tokenspeed.md "Gateway side").
    pub fn tokenspeed(handshake: impl Into<String>, ipc_dir: impl Into<PathBuf>) -> Self {
        ClientConfig {
            handshake: handshake.into(),
            silence: NO_SILENCE_DEADLINE,
            ..Self::with_release(crate::dialect::tokenspeed::release(), ipc_dir)
        }
    }
}

/// A silence deadline that never expires in a run (a year).
pub const NO_SILENCE_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

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
    /// The engine's registration could not be read (why): it cannot come up.
    BadRegistration(HandshakeError),
    /// The engine sent more than `limit` outputs for request ids the
    /// gateway does not know ([`ClientConfig::orphan_flood_limit`]).
    OrphanFlood { limit: u64 },
    /// A frame header on one of the gateway's sockets declared `declared`
    /// bytes, past that socket's `limit` ([`guard`]): the connection was
    /// closed before the frame was read.
    FrameTooLarge { socket: GuardedSocket, declared: u64, limit: u64 },
}

impl fmt::Display for DeathCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeathCause::Sentinel => "engine sent ENGINE_CORE_DEAD",
            DeathCause::OutputDisconnected => "engine's output connection dropped",
            DeathCause::InputDisconnected => "engine's input connection dropped",
            DeathCause::Restarted => "engine restarted (a new HELLO) and lost its requests",
            DeathCause::BadRegistration(why) => return write!(f, "bad registration: {why}"),
            DeathCause::OrphanFlood { limit } => {
                return write!(f, "engine sent more than {limit} outputs for request ids the gateway does not know")
            }
            DeathCause::FrameTooLarge { socket, declared, limit } => {
                return write!(
                    f,
                    "engine declared a frame of {declared} bytes on the {socket} socket (limit {limit} bytes)"
                )
            }
        })
    }
}

/// Every failure the transport reports, each naming what happened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    Encode(WireError),
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
    /// A deadline given to [`RequestEvents::finish`] passed.
    Deadline {
        request_id: String,
        waited: Duration,
    },
    /// A peer that named no engine (no `Identity` in its READY) declared a
    /// frame past the limit of one of the gateway's sockets ([`guard`]);
    /// start-up ([`EngineClient::wait_ready`]) ends with it.
    FrameTooLarge {
        socket: GuardedSocket,
        declared: u64,
        limit: u64,
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
            TransportError::FrameTooLarge { socket, declared, limit } => {
                write!(f, "a peer declared a frame of {declared} bytes on the {socket} socket (limit {limit} bytes)")
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

/// What a request stream yields.
pub enum RequestEvent<D: EngineWire = Vllm> {
    /// One output (a vLLM `EngineCoreOutput`, a TokenSpeed row).
    Output(D::Step),
    /// Finished locally after [`EngineClient::abort`] (the engine sends nothing).
    Aborted,
    Failed(TransportError),
}

impl<D: EngineWire> Clone for RequestEvent<D> {
    fn clone(&self) -> Self {
        match self {
            RequestEvent::Output(s) => RequestEvent::Output(s.clone()),
            RequestEvent::Aborted => RequestEvent::Aborted,
            RequestEvent::Failed(e) => RequestEvent::Failed(e.clone()),
        }
    }
}

impl<D: EngineWire> PartialEq for RequestEvent<D> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RequestEvent::Output(a), RequestEvent::Output(b)) => a == b,
            (RequestEvent::Aborted, RequestEvent::Aborted) => true,
            (RequestEvent::Failed(a), RequestEvent::Failed(b)) => a == b,
            _ => false,
        }
    }
}

impl<D: EngineWire> fmt::Debug for RequestEvent<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestEvent::Output(s) => f.debug_tuple("Output").field(s).finish(),
            RequestEvent::Aborted => f.write_str("Aborted"),
            RequestEvent::Failed(e) => f.debug_tuple("Failed").field(e).finish(),
        }
    }
}

/// A finished vLLM request.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub request_id: String,
    pub token_ids: Vec<i64>,
    pub finish_reason: FinishReason,
    pub stop_reason: Option<StopReason>,
    pub steps: Vec<Step>,
}

/// The outputs of one request, in order.
pub struct RequestEvents<D: EngineWire = Vllm> {
    pub request_id: String,
    pub engine: u16,
    rx: mpsc::UnboundedReceiver<RequestEvent<D>>,
}

impl<D: EngineWire> fmt::Debug for RequestEvents<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestStream").field("request_id", &self.request_id).field("engine", &self.engine).finish()
    }
}

impl<D: EngineWire> RequestEvents<D> {
    /// The next event; `None` once the request is finished or failed.
    pub async fn next(&mut self) -> Option<RequestEvent<D>> {
        self.rx.recv().await
    }
}

impl RequestEvents<Vllm> {
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
pub struct ClientStats {
    pub batches: u64,
    /// Batches that did not decode (TokenSpeed: ragged ones too).
    pub malformed_batches: u64,
    /// Outputs for request ids this gateway never sent or already finished.
    pub orphan_outputs: u64,
    /// Unknown request ids remembered as aborted (at most
    /// [`ORPHAN_IDS_REMEMBERED`]).
    pub orphan_ids_remembered: usize,
    /// Output messages of dead engines, dropped undecoded.
    pub dropped_after_death: u64,
    /// Paths the decoder reported as drift (engine newer than the schema).
    pub drift: BTreeSet<String>,
    /// Handshake or framing violations (bad identity, unknown status, ...).
    pub protocol_errors: Vec<String>,
    /// Data-parallel wave messages, in arrival order, with the engine
    /// (the output connection) that sent each (the first 1000).
    pub dp_control: Vec<(u16, crate::dialect::DpControl)>,
    /// Batches whose `engine_index` was not the index of the engine whose
    /// connection carried them.
    pub engine_index_mismatches: u64,
    /// START_DP_WAVE messages this gateway sent (engines in lockstep), each
    /// as (engine, wave, excluded engine) (the first 1000).
    pub start_waves_sent: Vec<(u16, i64, Option<u16>)>,
}

/// request streams.
pub struct EngineClient<D: EngineWire = Vllm> {
    release: &'static ReleaseSchema,
    cmd: mpsc::UnboundedSender<Command<D>>,
    state: watch::Receiver<Vec<EngineStatus>>,
    /// The first frame refused from a peer that named no engine.
    refused: watch::Receiver<Option<FrameRefused>>,
    handshake_endpoint: String,
    input_endpoint: String,
    actor: Option<JoinHandle<()>>,
}

impl<D: EngineWire> EngineClient<D> {
    /// Binds the input ROUTER and the handshake ROUTER and starts serving.
    pub async fn bind(cfg: ClientConfig<D>) -> Result<EngineClient<D>, TransportError> {
        std::fs::create_dir_all(&cfg.ipc_dir).map_err(|e| TransportError::Bind {
            endpoint: cfg.ipc_dir.display().to_string(),
            detail: format!("cannot create the ipc directory: {e}"),
        })?;
        let (in_tx, in_rx) = mpsc::channel(INBOUND_QUEUE);

        // The sockets themselves bind private paths in here; engines dial
        // the guards in front of them (`guard`).
        let inner_dir =
            tempfile::Builder::new().prefix(".g").tempdir_in(&cfg.ipc_dir).map_err(|e| TransportError::Bind {
                endpoint: cfg.ipc_dir.display().to_string(),
                detail: format!("cannot create the guarded sockets' directory: {e}"),
            })?;
        let spec = |socket| GuardSpec {
            socket,
            engine: None,
            limit: guard::MAX_HANDSHAKE_SOCKET_FRAME_BYTES,
            report: in_tx.clone(),
        };

        let input_public = format!("ipc://{}", cfg.ipc_dir.join("in.sock").display());
        let mut input = RouterSocket::new();
        let input_monitor = input.monitor();
        let input_guard =
            bind_guarded(&mut input, &input_public, inner_dir.path(), "in.sock", spec(GuardedSocket::Input)).await?;
        let input_endpoint = input_guard.public;
        let (input_send, input_recv) = input.split();
        let input_task =
            tokio::spawn(pump_router(input_recv, Some(input_monitor.boxed()), in_tx.clone(), Channel::Input));

        let mut hs = RouterSocket::new();
        let hs_guard =
            bind_guarded(&mut hs, &cfg.handshake, inner_dir.path(), "hs.sock", spec(GuardedSocket::Handshake)).await?;
        let handshake_endpoint = hs_guard.public;
        let (hs_send, hs_recv) = hs.split();
        let hs_task = tokio::spawn(pump_router(hs_recv, None, in_tx.clone(), Channel::Handshake));

        let (state_tx, state_rx) = watch::channel(Vec::new());
        let (refused_tx, refused_rx) = watch::channel(None);
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
            orphans: orphans::Remembered::default(),
            aborted: HashMap::new(),
            utilities: HashMap::new(),
            next_call_id: (1u64 << 63) + 1,
            next_generation: 1,
            stats: ClientStats::default(),
            waves: waves::Waves::default(),
            state_tx,
            refused_tx,
            socket_tasks: vec![input_task, hs_task, input_guard.task, hs_guard.task],
            inner_dir,
        };
        let actor = tokio::spawn(actor.run(cmd_rx, in_rx));
        Ok(EngineClient {
            release: cfg.release,
            cmd: cmd_tx,
            state: state_rx,
            refused: refused_rx,
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

    /// The first frame a socket guard refused from a peer that named no
    /// engine (refusals naming an engine end that engine instead,
    /// [`DeathCause::FrameTooLarge`]).
    pub fn refused_frame(&self) -> Option<FrameRefused> {
        *self.refused.borrow()
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
        let mut refused = self.refused.clone();
        loop {
            if let Some(r) = *refused.borrow_and_update() {
                return Err(TransportError::FrameTooLarge { socket: r.socket, declared: r.declared, limit: r.limit });
            }
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
            let changed = async {
                tokio::select! {
                    r = rx.changed() => r,
                    r = refused.changed() => r,
                }
            };
            match tokio::time::timeout_at(until, changed).await {
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

    /// Sends an ADD (`request` is an engine-bound request of this
    /// gateway's release) and returns the stream of its outputs.
    pub async fn add(&self, engine: u16, request: &D::Request) -> Result<RequestEvents<D>, TransportError> {
        let request_id =
            D::request_id(request).ok_or(TransportError::Encode(WireError::NoRequestId(D::REQUEST_NAME)))?;
        let frames = D::encode_add(self.release, request).map_err(TransportError::Encode)?;
        self.add_frames(engine, request_id, frames).await
    }

    /// Sends input frames as they are (`[type byte, payload, aux...]`, not
    /// checked or encoded here) and streams what comes back for
    /// `request_id`: requests the engine must refuse, built around the
    /// gateway's own validation, and requests a caller encoded itself
    /// (`EngineCoreRequest::encode_checked`'s frames).
    pub async fn add_frames(
        &self,
        engine: u16,
        request_id: &str,
        frames: Vec<Vec<u8>>,
    ) -> Result<RequestEvents<D>, TransportError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Add { engine, request_id: request_id.to_string(), frames, reply })?;
        let events = rx.await.map_err(|_| TransportError::Closed)??;
        Ok(RequestEvents { request_id: request_id.to_string(), engine, rx: events })
    }

    /// Finishes requests here without sending anything (a request the
    /// engine never registered, e.g. one it could not decode).
    pub fn forget(&self, ids: &[String]) {
        let _ = self.command(Command::Forget { ids: ids.to_vec() });
    }

    /// For a request aborted by [`EngineClient::abort`]: how long after the
    /// ABORT each output that still arrived for it came (empty when the
    /// engine fell silent); `None` when no ABORT was sent for it.
    pub async fn late_outputs(&self, request_id: &str) -> Option<Vec<Duration>> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::LateOutputs { id: request_id.to_string(), reply }).ok()?;
        rx.await.ok().flatten()
    }

    /// Sends an ABORT for `ids`; those in flight finish with
    /// [`RequestEvent::Aborted`] (no dialect sends anything back for a
    /// client abort); outputs that still come are timed
    /// ([`EngineClient::late_outputs`]). An id not yet sent is remembered as
    /// finished, so its ADD starts afresh.
    pub async fn abort(&self, engine: u16, ids: &[String]) -> Result<(), TransportError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Abort { engine, ids: ids.to_vec(), reply })?;
        rx.await.map_err(|_| TransportError::Closed)?
    }

    /// Calls a utility method on the engine and returns its result value
    /// (the second element of vLLM's `UtilityResult`); a dialect without
    /// UTILITY refuses at once.
    pub async fn utility(&self, engine: u16, method: &str, args: Vec<Value>) -> Result<Value, TransportError> {
        if !D::UTILITIES {
            return Err(TransportError::Encode(WireError::Unsupported { dialect: D::NAME, what: "UTILITY call" }));
        }
        let (reply, rx) = oneshot::channel();
        self.command(Command::Utility { engine, method: method.into(), args, reply })?;
        rx.await.map_err(|_| TransportError::Closed)?
    }

    pub async fn stats(&self) -> ClientStats {
        let (reply, rx) = oneshot::channel();
        if self.command(Command::Stats { reply }).is_err() {
            return ClientStats::default();
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

    fn command(&self, c: Command<D>) -> Result<(), TransportError> {
        self.cmd.send(c).map_err(|_| TransportError::Closed)
    }
}

impl<D: EngineWire> Drop for EngineClient<D> {
    fn drop(&mut self) {
        // The actor cleans up when its command channel closes.
        let _ = self.cmd.send(Command::Shutdown);
    }
}
