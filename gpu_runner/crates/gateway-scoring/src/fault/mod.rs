//! The fault-injecting wire: a proxy between a gateway's bound sockets and
//! an engine that applies a seeded [`Schedule`] of faults to the messages
//! it forwards (delay, drop, duplicate, reorder, truncate, corrupt, cut),
//! and logs every fault applied with its schedule entry.
//!
//! Wire facts relied on (docs/runner/transport.md "Transport" and
//! docs/runner/fault-wire.md "The fault-injecting wire";
//! docs/wire-protocol.md; vLLM 0.32.0
//! `vllm/v1/engine/core.py` `EngineCoreProc._perform_handshake`):
//!
//! - the gateway binds a handshake ROUTER, an input ROUTER and an output
//!   PULL; the engine dials a DEALER (handshake, identity = its index, 2
//!   bytes little-endian), a DEALER of the same identity (input) and a PUSH
//!   (output), the last two at the addresses the INIT message names;
//! - so the proxy binds its own handshake ROUTER (tcp) for the engine, and
//!   on the engine's HELLO dials the gateway's handshake with a DEALER of the
//!   engine's identity; it reads the gateway's INIT, dials the input and
//!   output addresses it names (DEALER of the same identity, PUSH), binds
//!   its own input ROUTER and output PULL (ipc) and hands the engine an INIT
//!   naming those, every other INIT field left as the gateway wrote it;
//! - the registration (the engine's first input-socket message) and the
//!   handshake messages pass untouched; input messages `[type, payload,
//!   aux...]` and output messages `[payload, aux...]` go through the
//!   schedule ([`schedule::FrameKind`]).
//!
//! One engine per wire (the first HELLO's identity; a new HELLO of that
//! identity starts the link afresh).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, ReleaseSchema, Value};
use futures_util::StreamExt;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zeromq::util::PeerIdentity;
use zeromq::{
    DealerSocket, PullSocket, PushSocket, RouterSocket, Socket, SocketEvent, SocketOptions, SocketRecv, SocketSend,
    ZmqMessage,
};

pub mod rewrite;
pub mod schedule;

pub use rewrite::{Replacement, Rewrite, RewriteError};
pub use schedule::{Decider, Direction, FrameKind, Schedule, Side, WireFault};

/// Where the wire sits.
#[derive(Debug, Clone)]
pub struct WireConfig {
    /// The gateway's handshake address (what the engine would dial).
    pub gateway_handshake: String,
    /// Where the proxy's own ipc input and output sockets go.
    pub ipc_dir: PathBuf,
    /// The release whose INIT table the proxy reads and writes.
    pub release: &'static ReleaseSchema,
    pub schedule: Schedule,
    /// Apply the schedule from the start; otherwise from [`FaultWire::arm`].
    pub armed: bool,
}

/// One fault applied, with the entry that chose it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Applied {
    pub entry: usize,
    pub fault: WireFault,
    pub direction: Direction,
    pub kind: FrameKind,
    /// The message's index among those of its direction and kind (0-based).
    pub index: u64,
    /// Milliseconds since the wire started.
    pub at_ms: u64,
    /// What the fault did, in words.
    pub detail: String,
}

/// What the wire saw and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WireLog {
    pub applied: Vec<Applied>,
    pub forwarded_to_engine: u64,
    pub forwarded_to_gateway: u64,
    /// Messages that arrived for a side already cut.
    pub lost_after_cut: u64,
    /// INITs rewritten (one per engine start).
    pub inits_rewritten: u64,
    /// Connections the engine dropped and the wire passed on, in words.
    pub events: Vec<String>,
    /// What went wrong on the wire itself (a dial, a send, an INIT that
    /// did not decode), in words.
    pub problems: Vec<String>,
    /// Messages a rewrite changed (one that found its field already
    /// holding the replacement is delivered as it was and not counted).
    pub rewritten: u64,
}

/// Why the wire could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FaultWireError {
    #[error("fault wire: cannot bind {endpoint}: {detail}")]
    Bind { endpoint: String, detail: String },
    #[error("fault wire: cannot create {}: {source}", path.display())]
    Dir { path: PathBuf, source: std::io::Error },
}

/// A running wire; dropping it stops it.
pub struct FaultWire {
    handshake: String,
    log: Arc<Mutex<WireLog>>,
    armed: Arc<AtomicBool>,
    shared: Arc<Shared>,
    stop: mpsc::UnboundedSender<()>,
    task: Option<JoinHandle<()>>,
}

impl FaultWire {
    /// Binds the engine-facing handshake ROUTER on a free tcp port and
    /// starts forwarding.
    pub async fn start(cfg: WireConfig) -> Result<FaultWire, FaultWireError> {
        std::fs::create_dir_all(&cfg.ipc_dir)
            .map_err(|source| FaultWireError::Dir { path: cfg.ipc_dir.clone(), source })?;
        let mut hs = RouterSocket::new();
        let endpoint = "tcp://127.0.0.1:0";
        let bound = hs
            .bind(endpoint)
            .await
            .map_err(|e| FaultWireError::Bind { endpoint: endpoint.into(), detail: e.to_string() })?
            .to_string();
        let log = Arc::new(Mutex::new(WireLog::default()));
        let (stop, stop_rx) = mpsc::unbounded_channel();
        let armed = Arc::new(AtomicBool::new(cfg.armed));
        let shared = Arc::new(Shared::default());
        let proxy = Proxy {
            armed: armed.clone(),
            shared: shared.clone(),
            release: cfg.release,
            gateway_handshake: cfg.gateway_handshake,
            ipc_dir: cfg.ipc_dir,
            decider: Decider::new(cfg.schedule),
            log: log.clone(),
            started: Instant::now(),
            identity: None,
            links: 0,
            eng_hs: hs,
            gw_hs: None,
            gw_input: None,
            gw_output: None,
            eng_input: None,
            eng_output: None,
            eng_input_events: None,
            eng_output_events: None,
            to_engine: Lane::default(),
            to_gateway: Lane::default(),
            seen: Default::default(),
            gateway_cut: false,
        };
        let task = tokio::spawn(proxy.run(stop_rx));
        Ok(FaultWire { handshake: bound, log, armed, shared, stop, task: Some(task) })
    }

    /// Replaces the schedule (its counts start again from the next
    /// message) and arms the wire: one wire, one gateway, many campaigns'
    /// bugs in turn.
    pub fn rearm(&self, schedule: Schedule) {
        if let Ok(mut p) = self.shared.pending.lock() {
            *p = Some(schedule);
        }
        self.arm();
    }

    /// Keeps (or stops keeping) a copy of every output batch as the engine
    /// sent it, before any fault: what a rewrite of outputs would find.
    pub fn keep_outputs(&self, on: bool) {
        self.shared.keep_outputs.store(on, Ordering::SeqCst);
    }

    /// The output batches kept since the last call (frames as sent).
    pub fn take_outputs(&self) -> Vec<Vec<Vec<u8>>> {
        self.shared.outputs.lock().map(|mut o| std::mem::take(&mut *o)).unwrap_or_default()
    }

    /// The address the engine dials (`tcp://127.0.0.1:<port>`).
    pub fn handshake_endpoint(&self) -> &str {
        &self.handshake
    }

    /// Starts applying the schedule: messages before are forwarded as they
    /// are and not counted (a gateway's start-up UTILITY calls, say).
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// What happened so far.
    pub fn log(&self) -> WireLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// `f` of the log as it stands, read in place (no copy of its lists):
    /// a counter or two between messages.
    pub fn read_log<R>(&self, f: impl FnOnce(&WireLog) -> R) -> R {
        let log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&log)
    }

    /// Stops forwarding and closes every socket.
    pub async fn stop(mut self) -> WireLog {
        let _ = self.stop.send(());
        if let Some(t) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        self.log()
    }
}

impl Drop for FaultWire {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

type Frames = Vec<Vec<u8>>;

/// What the wire's owner changes while it runs.
#[derive(Default)]
struct Shared {
    /// A schedule to start from the next message ([`FaultWire::rearm`]).
    pending: Mutex<Option<Schedule>>,
    keep_outputs: AtomicBool,
    outputs: Mutex<Vec<Frames>>,
}
type Events = futures_util::stream::BoxStream<'static, SocketEvent>;

/// One direction's held messages: a delay holds the line until `until`;
/// a reorder keeps one message aside until the next one passed.
#[derive(Default)]
struct Lane {
    held: VecDeque<Frames>,
    until: Option<Instant>,
    swap: Option<(Frames, Instant)>,
}

impl Lane {
    fn wake(&self) -> Option<Instant> {
        match (self.until, self.swap.as_ref().map(|s| s.1)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

struct Proxy {
    armed: Arc<AtomicBool>,
    shared: Arc<Shared>,
    release: &'static ReleaseSchema,
    gateway_handshake: String,
    ipc_dir: PathBuf,
    decider: Decider,
    log: Arc<Mutex<WireLog>>,
    started: Instant,
    identity: Option<Vec<u8>>,
    links: u64,
    eng_hs: RouterSocket,
    gw_hs: Option<DealerSocket>,
    gw_input: Option<DealerSocket>,
    gw_output: Option<PushSocket>,
    eng_input: Option<RouterSocket>,
    eng_output: Option<PullSocket>,
    /// The monitors of the engine-facing input and output sockets: when
    /// the engine drops a connection, the wire drops its twin to the
    /// gateway, so the gateway sees what it would see without the wire.
    eng_input_events: Option<Events>,
    eng_output_events: Option<Events>,
    to_engine: Lane,
    to_gateway: Lane,
    seen: std::collections::HashMap<(Direction, FrameKind), u64>,
    gateway_cut: bool,
}

async fn recv_opt<S: SocketRecv>(s: &mut Option<S>) -> zeromq::ZmqResult<ZmqMessage> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

async fn event_opt(m: &mut Option<Events>) -> Option<SocketEvent> {
    match m {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn message(frames: Frames) -> Option<ZmqMessage> {
    ZmqMessage::try_from(frames.into_iter().map(Bytes::from).collect::<Vec<_>>()).ok()
}

fn frames_of(m: ZmqMessage) -> Frames {
    m.into_vec().into_iter().map(|b| b.to_vec()).collect()
}

fn dealer(identity: &[u8]) -> Result<DealerSocket, String> {
    let id = PeerIdentity::try_from(identity.to_vec()).map_err(|e| format!("identity: {e}"))?;
    let mut opts = SocketOptions::default();
    opts.peer_identity(id);
    Ok(DealerSocket::with_options(opts))
}

/// Why an INIT could not be rewritten to point the engine at the wire.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InitRewriteError {
    /// The INIT does not decode.
    #[error("INIT does not decode: {0}")]
    Decode(engine_protocol::Error),
    /// The INIT is not a map.
    #[error("INIT is not a map")]
    NotAMap,
    /// The INIT has no `addresses`.
    #[error("INIT has no addresses")]
    NoAddresses,
    /// `addresses` has no `key`.
    #[error("INIT addresses have no {key}")]
    NoKey { key: &'static str },
    /// `addresses.key` is an empty list.
    #[error("INIT {key} is empty")]
    Empty { key: &'static str },
    /// `addresses.key` is not a list.
    #[error("INIT {key} is not a list")]
    NotAList { key: &'static str },
    /// The rewritten INIT does not encode.
    #[error("rewritten INIT does not encode: {0}")]
    Encode(engine_protocol::Error),
}

/// Rewrites an INIT so that the engine dials `input` and `output`; returns
/// the new payload and the gateway's (first) input and output addresses.
pub fn rewrite_init(
    release: &'static ReleaseSchema,
    frame: &[u8],
    input: &str,
    output: &str,
) -> Result<(Vec<u8>, String, String), InitRewriteError> {
    let d = decode_message(release, MessageKind::HandshakeInit, &[frame], &Limits::default())
        .map_err(InitRewriteError::Decode)?;
    let Value::Struct(mut init) = d.value else { return Err(InitRewriteError::NotAMap) };
    let Some(Value::Struct(addr)) = init.get_mut("addresses") else { return Err(InitRewriteError::NoAddresses) };
    let mut first = |key: &'static str, to: &str| -> Result<String, InitRewriteError> {
        let slot = addr.get_mut(key).ok_or(InitRewriteError::NoKey { key })?;
        let old = match slot {
            Value::Array(xs) => match xs.first() {
                Some(Value::Str(s)) => s.clone(),
                _ => return Err(InitRewriteError::Empty { key }),
            },
            _ => return Err(InitRewriteError::NotAList { key }),
        };
        *slot = Value::Array(vec![Value::Str(to.into())]);
        Ok(old)
    };
    let gw_in = first("inputs", input)?;
    let gw_out = first("outputs", output)?;
    let mut frames =
        encode_message(release, MessageKind::HandshakeInit, &Value::Struct(init)).map_err(InitRewriteError::Encode)?;
    Ok((frames.swap_remove(0), gw_in, gw_out))
}

/// `frames` (an ADD or an output batch) with `rw` applied, and how many
/// places it changed; `None` when it changed none.
pub fn rewrite_frames(
    release: &'static ReleaseSchema,
    kind: FrameKind,
    frames: &[Vec<u8>],
    rw: &Rewrite,
) -> Result<Option<(Frames, usize)>, String> {
    let (mk, ty) = match kind {
        FrameKind::Add => (MessageKind::EngineCoreRequest, release.engine_core_request),
        FrameKind::Outputs => (MessageKind::EngineCoreOutputs, release.engine_core_outputs),
        k => return Err(format!("a {k:?} message is not rewritten")),
    };
    let mut v =
        decode_message(release, mk, frames, &Limits::default()).map_err(|e| format!("does not decode: {e}"))?.value;
    let n = rewrite::apply(&mut v, ty, rw).map_err(|e| e.to_string())?;
    if n == 0 {
        return Ok(None);
    }
    let out = encode_message(release, mk, &v).map_err(|e| format!("rewritten, does not encode: {e}"))?;
    Ok(Some((out, n)))
}

impl Proxy {
    async fn run(mut self, mut stop: mpsc::UnboundedReceiver<()>) {
        loop {
            let wake = match (self.to_engine.wake(), self.to_gateway.wake()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                _ = stop.recv() => break,
                m = self.eng_hs.recv() => match m {
                    Ok(m) => self.on_engine_handshake(frames_of(m)).await,
                    Err(e) => self.problem(format!("engine handshake recv: {e}")),
                },
                m = recv_opt(&mut self.gw_hs) => match m {
                    Ok(m) => self.on_gateway_handshake(frames_of(m)).await,
                    Err(e) => self.problem(format!("gateway handshake recv: {e}")),
                },
                m = recv_opt(&mut self.eng_input) => match m {
                    // The engine's input socket carries its registration
                    // (and nothing else): it passes untouched.
                    Ok(m) => {
                        let mut f = frames_of(m);
                        if !f.is_empty() {
                            f.remove(0);
                        }
                        self.send_to_gateway_input(f).await;
                    }
                    Err(e) => self.problem(format!("engine input recv: {e}")),
                },
                m = recv_opt(&mut self.gw_input) => match m {
                    Ok(m) => self.on_message(Direction::ToEngine, frames_of(m)).await,
                    Err(e) => self.problem(format!("gateway input recv: {e}")),
                },
                m = recv_opt(&mut self.eng_output) => match m {
                    Ok(m) => self.on_message(Direction::ToGateway, frames_of(m)).await,
                    Err(e) => self.problem(format!("engine output recv: {e}")),
                },
                ev = event_opt(&mut self.eng_input_events) => match ev {
                    Some(SocketEvent::Disconnected(_)) => {
                        self.event("the engine dropped its input connection; the wire dropped its input connection to the gateway");
                        self.gw_input = None;
                    }
                    Some(_) => {}
                    None => self.eng_input_events = None,
                },
                ev = event_opt(&mut self.eng_output_events) => match ev {
                    Some(SocketEvent::Disconnected(_)) => {
                        self.event("the engine dropped its output connection; the wire dropped its output connection to the gateway");
                        self.gw_output = None;
                    }
                    Some(_) => {}
                    None => self.eng_output_events = None,
                },
                _ = sleep_opt(wake) => self.on_wake().await,
            }
        }
    }

    fn problem(&self, p: String) {
        if let Ok(mut l) = self.log.lock() {
            if l.problems.len() < 100 {
                l.problems.push(p);
            }
        }
    }

    fn event(&self, e: &str) {
        self.note(|l| l.events.push(e.to_string()));
    }

    fn note(&self, f: impl FnOnce(&mut WireLog)) {
        if let Ok(mut l) = self.log.lock() {
            f(&mut l);
        }
    }

    async fn on_engine_handshake(&mut self, frames: Frames) {
        let Some((id, rest)) = frames.split_first() else { return };
        if self.identity.as_deref() != Some(id.as_slice()) || self.gw_hs.is_none() || self.gateway_cut {
            let mut d = match dealer(id) {
                Ok(d) => d,
                Err(e) => return self.problem(e),
            };
            if let Err(e) = d.connect(&self.gateway_handshake).await {
                return self.problem(format!("dial gateway handshake {}: {e}", self.gateway_handshake));
            }
            self.identity = Some(id.clone());
            self.gw_hs = Some(d);
            self.gateway_cut = false;
        }
        if let (Some(hs), Some(m)) = (self.gw_hs.as_mut(), message(rest.to_vec())) {
            if let Err(e) = hs.send(m).await {
                self.problem(format!("forward handshake to gateway: {e}"));
            }
        }
    }

    async fn on_gateway_handshake(&mut self, frames: Frames) {
        let Some(id) = self.identity.clone() else { return };
        let mut out = frames;
        if let [payload] = out.as_slice() {
            match self.link(payload).await {
                Ok(init) => out = vec![init],
                Err(e) => self.problem(e),
            }
        }
        let mut all = vec![id];
        all.extend(out);
        if let Some(m) = message(all) {
            if let Err(e) = self.eng_hs.send(m).await {
                self.problem(format!("forward handshake to engine: {e}"));
            }
        }
    }

    /// Reads the gateway's INIT, dials its input and output, binds the
    /// engine-facing ones and returns the INIT that names them.
    async fn link(&mut self, init: &[u8]) -> Result<Vec<u8>, String> {
        let id = self.identity.clone().unwrap_or_default();
        self.links += 1;
        let n = self.links;
        let my_in = format!("ipc://{}", self.ipc_dir.join(format!("wire-in-{n}.sock")).display());
        let my_out = format!("ipc://{}", self.ipc_dir.join(format!("wire-out-{n}.sock")).display());
        let (rewritten, gw_in, gw_out) =
            rewrite_init(self.release, init, &my_in, &my_out).map_err(|e| e.to_string())?;
        let mut gi = dealer(&id)?;
        gi.connect(&gw_in).await.map_err(|e| format!("dial gateway input {gw_in}: {e}"))?;
        let mut go = PushSocket::new();
        go.connect(&gw_out).await.map_err(|e| format!("dial gateway output {gw_out}: {e}"))?;
        let mut ei = RouterSocket::new();
        let ei_events = ei.monitor().boxed();
        ei.bind(&my_in).await.map_err(|e| format!("bind {my_in}: {e}"))?;
        let mut eo = PullSocket::new();
        let eo_events = eo.monitor().boxed();
        eo.bind(&my_out).await.map_err(|e| format!("bind {my_out}: {e}"))?;
        self.eng_input_events = Some(ei_events);
        self.eng_output_events = Some(eo_events);
        self.gw_input = Some(gi);
        self.gw_output = Some(go);
        self.eng_input = Some(ei);
        self.eng_output = Some(eo);
        self.note(|l| l.inits_rewritten += 1);
        Ok(rewritten)
    }

    async fn on_message(&mut self, dir: Direction, mut frames: Frames) {
        if let Some(s) = self.shared.pending.lock().ok().and_then(|mut p| p.take()) {
            self.decider = Decider::new(s);
            self.seen.clear();
        }
        if dir == Direction::ToGateway && self.shared.keep_outputs.load(Ordering::SeqCst) {
            if let Ok(mut o) = self.shared.outputs.lock() {
                o.push(frames.clone());
            }
        }
        if !self.armed.load(Ordering::SeqCst) {
            return self.deliver(dir, frames).await;
        }
        let kind = FrameKind::of(dir, &frames);
        let count = self.seen.entry((dir, kind)).or_insert(0);
        let index = *count;
        *count += 1;
        let Some(decision) = self.decider.decide(dir, kind) else {
            return self.deliver(dir, frames).await;
        };
        let now = Instant::now();
        let detail = match &decision.fault {
            WireFault::Delay { ms } => format!("held this and later {} messages for {ms} ms", dir.name()),
            WireFault::Drop => "not delivered".to_string(),
            WireFault::Duplicate => "delivered twice".to_string(),
            WireFault::Reorder { hold_ms } => {
                format!("delivered after the next {} message (at most {hold_ms} ms)", dir.name())
            }
            WireFault::Truncate { frame, keep } => {
                let len = frames.get(*frame).map(|f| f.len());
                match len {
                    Some(len) if schedule::truncate(&mut frames, *frame, *keep) => {
                        format!("frame {frame} cut from {len} to {} bytes", len.min(*keep))
                    }
                    _ => format!("no frame {frame}: delivered as it was"),
                }
            }
            WireFault::Corrupt { frame, bytes, offset } => {
                let len = frames.get(*frame).map_or(0, |f| f.len());
                let positions: Vec<usize> = match offset {
                    Some(o) => (*o..o.saturating_add(*bytes)).collect(),
                    None => (0..*bytes).map(|_| self.decider.position(len)).collect(),
                };
                let n = schedule::corrupt(&mut frames, *frame, &positions);
                format!("{n} bytes of frame {frame} flipped at {positions:?}")
            }
            WireFault::Cut { side } => format!("closed the wire's sockets to the {side:?} side").to_lowercase(),
            WireFault::Rewrite(rw) => match rewrite_frames(self.release, kind, &frames, rw) {
                Ok(Some((new, n))) => {
                    frames = new;
                    self.note(|l| l.rewritten += 1);
                    format!("{}: {n} set to {}", rw.path, rw.to.name())
                }
                Ok(None) => format!("{}: already {}, delivered as it was", rw.path, rw.to.name()),
                Err(e) => format!("delivered as it was: {e}"),
            },
        };
        let applied = Applied {
            entry: decision.entry,
            fault: decision.fault.clone(),
            direction: dir,
            kind,
            index,
            at_ms: now.duration_since(self.started).as_millis() as u64,
            detail,
        };
        self.note(|l| l.applied.push(applied));
        match decision.fault {
            WireFault::Drop => {}
            WireFault::Duplicate => {
                self.deliver(dir, frames.clone()).await;
                self.deliver(dir, frames).await;
            }
            WireFault::Delay { ms } => {
                let lane = self.lane(dir);
                let until = now + Duration::from_millis(ms);
                lane.until = Some(lane.until.map_or(until, |u| u.max(until)));
                lane.held.push_back(frames);
            }
            WireFault::Reorder { hold_ms } => {
                let lane = self.lane(dir);
                if lane.swap.is_none() {
                    lane.swap = Some((frames, now + Duration::from_millis(hold_ms)));
                } else {
                    self.deliver(dir, frames).await;
                }
            }
            WireFault::Truncate { .. } | WireFault::Corrupt { .. } | WireFault::Rewrite(_) => {
                self.deliver(dir, frames).await
            }
            WireFault::Cut { side } => self.cut(side),
        }
    }

    fn lane(&mut self, dir: Direction) -> &mut Lane {
        match dir {
            Direction::ToEngine => &mut self.to_engine,
            Direction::ToGateway => &mut self.to_gateway,
        }
    }

    /// Closes the proxy's sockets to `side`: its peers there see their
    /// connections drop.
    fn cut(&mut self, side: Side) {
        if matches!(side, Side::Gateway | Side::Both) {
            self.gw_hs = None;
            self.gw_input = None;
            self.gw_output = None;
            self.gateway_cut = true;
        }
        if matches!(side, Side::Engine | Side::Both) {
            self.eng_input = None;
            self.eng_output = None;
            self.eng_input_events = None;
            self.eng_output_events = None;
        }
    }

    /// Passes a message on, behind any delay; a message set aside by a
    /// reorder follows it.
    async fn deliver(&mut self, dir: Direction, frames: Frames) {
        let lane = self.lane(dir);
        if lane.until.is_some() {
            lane.held.push_back(frames);
            return;
        }
        let swapped = lane.swap.take().map(|s| s.0);
        self.send(dir, frames).await;
        if let Some(s) = swapped {
            self.send(dir, s).await;
        }
    }

    async fn on_wake(&mut self) {
        let now = Instant::now();
        for dir in [Direction::ToEngine, Direction::ToGateway] {
            let lane = self.lane(dir);
            let mut out = Vec::new();
            if lane.until.is_some_and(|u| u <= now) {
                lane.until = None;
                out.extend(lane.held.drain(..));
            }
            if lane.swap.as_ref().is_some_and(|s| s.1 <= now) || (!out.is_empty() && lane.swap.is_some()) {
                out.extend(lane.swap.take().map(|s| s.0));
            }
            for f in out {
                self.send(dir, f).await;
            }
        }
    }

    async fn send(&mut self, dir: Direction, frames: Frames) {
        match dir {
            Direction::ToEngine => {
                let (Some(id), Some(sock)) = (self.identity.clone(), self.eng_input.as_mut()) else {
                    return self.note(|l| l.lost_after_cut += 1);
                };
                let mut all = vec![id];
                all.extend(frames);
                let Some(m) = message(all) else { return };
                match sock.send(m).await {
                    Ok(()) => self.note(|l| l.forwarded_to_engine += 1),
                    Err(e) => self.problem(format!("send to engine: {e}")),
                }
            }
            Direction::ToGateway => {
                let Some(sock) = self.gw_output.as_mut() else {
                    return self.note(|l| l.lost_after_cut += 1);
                };
                let Some(m) = message(frames) else { return };
                match sock.send(m).await {
                    Ok(()) => self.note(|l| l.forwarded_to_gateway += 1),
                    Err(e) => self.problem(format!("send to gateway: {e}")),
                }
            }
        }
    }

    async fn send_to_gateway_input(&mut self, frames: Frames) {
        let Some(sock) = self.gw_input.as_mut() else { return self.note(|l| l.lost_after_cut += 1) };
        let Some(m) = message(frames) else { return };
        if let Err(e) = sock.send(m).await {
            self.problem(format!("forward registration to gateway: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine_client::transport::handshake::{decode_init, encode_init};

    fn release() -> &'static ReleaseSchema {
        engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
    }

    #[test]
    fn an_init_is_rewritten_to_the_wires_addresses_and_names_the_gateways() {
        let init = encode_init(release(), "ipc:///g/in.sock", "ipc:///g/out.sock").unwrap();
        let (new, gi, go) = rewrite_init(release(), &init, "ipc:///w/in.sock", "ipc:///w/out.sock").unwrap();
        assert_eq!((gi.as_str(), go.as_str()), ("ipc:///g/in.sock", "ipc:///g/out.sock"));
        let a = decode_init(release(), &new).unwrap();
        assert_eq!(
            (a.inputs, a.outputs),
            (vec!["ipc:///w/in.sock".to_string()], vec!["ipc:///w/out.sock".to_string()])
        );
    }

    #[test]
    fn an_init_that_does_not_decode_is_an_error_not_a_panic() {
        for bad in [&b""[..], b"\xc1", b"\x93\x01\x02\x03"] {
            assert!(rewrite_init(release(), bad, "a", "b").is_err(), "{bad:?}");
        }
    }
}
