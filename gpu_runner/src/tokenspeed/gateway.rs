//! The gateway side of the TokenSpeed dialect over real ZeroMQ: bind,
//! handshake one engine, send ADD / ABORT, demultiplex
//! `BatchTokenIDOutSlim` rows to requests, and see the engine die.
//!
//! Wire facts relied on (docs/tokenspeed-wire.md, docs/runner.md
//! "TokenSpeed"; TokenSpeed 0.1.1 `tokenspeed/runtime/engine/zmq_msgpack.py`):
//!
//! - topology and handshake are vLLM's (docs/runner.md "Transport"): a
//!   ROUTER on tcp for HELLO / INIT / READY, a ROUTER for input on which the
//!   engine registers first (`WireEngineCoreReadyResponse`), a PULL for
//!   output; TokenSpeed says HELLO only once its model is loaded, so the
//!   wait for HELLO covers the whole load;
//! - input is `[identity, type, payload]` with `00` ADD
//!   (`TokenizedGenerateReqInput`) and `01` ABORT (a plain array of rids);
//!   there are no utility calls;
//! - output is `[BatchTokenIDOutSlim, aux...]` (aux ignored) or the one
//!   frame `ENGINE_CORE_DEAD`; a batch is columnar, one row per rid with
//!   delta ids and cumulative counts; a row whose finish string is not
//!   empty is terminal; a ragged batch (a column whose length differs from
//!   `rids`) is refused whole and counted. Batches are read as the typed
//!   `BatchTokenIDOutSlim` (the direct decoder `decode_batch`) and split
//!   into rows by its `rows()` (`engine_protocol::typed::tokenspeed`);
//! - a client ABORT gets no row back: the gateway ends such requests itself.
//!
//! One engine only (TokenSpeed over msgpack is one engine per gateway in
//! this runner). Decoding and encoding go through `engine_protocol`.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use engine_protocol::hot::tokenspeed::decode_batch;
use engine_protocol::typed::tokenspeed::{self as ts, BatchRow};
use engine_protocol::Limits;
use engine_protocol::{engine_index, is_engine_dead};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zeromq::{PullSocket, RouterSendHalf, RouterSocket, Socket, SocketEvent, SocketRecv, SocketSend, ZmqMessage};

use super::mock::release;
use crate::handshake::{self, EngineFacts};
use crate::transport::{ipc_path, remove_stale_socket, TapSocket, Tapped};

/// One row of a `BatchTokenIDOutSlim` for one request, with when it
/// arrived; reads as the [`BatchRow`] it holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TsRow {
    /// The row as the batch carried it.
    pub row: BatchRow,
    /// When the row arrived.
    pub at: Option<Instant>,
}

impl std::ops::Deref for TsRow {
    type Target = BatchRow;
    fn deref(&self) -> &BatchRow {
        &self.row
    }
}

/// Why the gateway holds the engine dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TsDeath {
    /// The engine pushed the one frame `ENGINE_CORE_DEAD`.
    Sentinel,
    /// The engine's output connection dropped (a crash).
    OutputDropped,
    /// The handshake or the registration failed; why.
    Handshake(String),
}

impl std::fmt::Display for TsDeath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TsDeath::Sentinel => f.write_str("engine sent ENGINE_CORE_DEAD"),
            TsDeath::OutputDropped => f.write_str("engine's output connection dropped"),
            TsDeath::Handshake(why) => f.write_str(why),
        }
    }
}

/// What a request's stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum TsEvent {
    Row(TsRow),
    /// The engine died (sentinel or dropped connection); the cause.
    Dead(TsDeath),
}

/// Where the gateway binds.
#[derive(Debug, Clone)]
pub struct TsGatewayConfig {
    /// The handshake endpoint (`tcp://127.0.0.1:0` picks a port).
    pub handshake: String,
    pub ipc_dir: PathBuf,
    /// Where to copy every frame set sent or received (record mode,
    /// `crate::record`), routing identity removed.
    pub tap: Option<mpsc::UnboundedSender<Tapped>>,
}

impl TsGatewayConfig {
    /// Binds `handshake` with ipc sockets under `ipc_dir`, no tap.
    pub fn new(handshake: impl Into<String>, ipc_dir: impl Into<PathBuf>) -> TsGatewayConfig {
        TsGatewayConfig { handshake: handshake.into(), ipc_dir: ipc_dir.into(), tap: None }
    }
}

/// Counters of what the gateway saw.
#[derive(Debug, Clone, Default)]
pub struct TsStats {
    pub batches: u64,
    /// Batches refused (undecodable or ragged), with why.
    pub bad_batches: Vec<String>,
    /// Rows for rids the gateway does not know (or no longer waits for).
    pub orphan_rows: u64,
    /// Drift paths the decoder reported.
    pub drift: BTreeSet<String>,
}

enum Cmd {
    Add { rid: String, frames: Vec<Vec<u8>>, reply: oneshot::Sender<Result<mpsc::UnboundedReceiver<TsEvent>, String>> },
    Abort { rids: Vec<String>, reply: oneshot::Sender<Result<(), String>> },
    Forget { rid: String },
    Stats { reply: oneshot::Sender<TsStats> },
    Shutdown,
}

enum Inbound {
    Handshake(Vec<Bytes>),
    Input(Vec<Bytes>),
    Output(Vec<Bytes>),
    OutputDropped,
}

/// The gateway's view of the engine.
#[derive(Debug, Clone, PartialEq)]
pub enum TsEngineState {
    Waiting,
    Up(Box<EngineFacts>),
    Dead(TsDeath),
}

/// The TokenSpeed gateway (one engine).
pub struct TsGateway {
    cmd: mpsc::UnboundedSender<Cmd>,
    state: watch::Receiver<TsEngineState>,
    handshake_endpoint: String,
    actor: Option<JoinHandle<()>>,
}

async fn bind<S: Socket>(s: &mut S, endpoint: &str) -> Result<String, String> {
    if let Some(p) = ipc_path(endpoint) {
        remove_stale_socket(p)?;
    }
    s.bind(endpoint).await.map(|e| e.to_string()).map_err(|e| format!("bind {endpoint}: {e}"))
}

impl TsGateway {
    /// Binds the output PULL, the input ROUTER and the handshake ROUTER.
    pub async fn bind(cfg: TsGatewayConfig) -> Result<TsGateway, String> {
        std::fs::create_dir_all(&cfg.ipc_dir).map_err(|e| format!("{}: {e}", cfg.ipc_dir.display()))?;
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let output_endpoint = format!("ipc://{}", cfg.ipc_dir.join("ts-out.sock").display());
        let mut pull = PullSocket::new();
        let monitor = pull.monitor().boxed();
        bind(&mut pull, &output_endpoint).await?;
        let input_endpoint = format!("ipc://{}", cfg.ipc_dir.join("ts-in.sock").display());
        let mut input = RouterSocket::new();
        bind(&mut input, &input_endpoint).await?;
        let mut hs = RouterSocket::new();
        let handshake_endpoint = bind(&mut hs, &cfg.handshake).await?;
        let (input_send, mut input_recv) = input.split();
        let (hs_send, mut hs_recv) = hs.split();
        let mut tasks = Vec::new();
        let tx = in_tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(m) = input_recv.recv().await {
                if tx.send(Inbound::Input(m.into_vec())).is_err() {
                    return;
                }
            }
        }));
        let tx = in_tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(m) = hs_recv.recv().await {
                if tx.send(Inbound::Handshake(m.into_vec())).is_err() {
                    return;
                }
            }
        }));
        let tx = in_tx;
        tasks.push(tokio::spawn(async move {
            let mut monitor = Some(monitor);
            loop {
                tokio::select! {
                    biased;
                    m = pull.recv() => match m {
                        Ok(m) => if tx.send(Inbound::Output(m.into_vec())).is_err() { return },
                        Err(_) => return,
                    },
                    ev = async { match monitor.as_mut() { Some(m) => m.next().await, None => std::future::pending().await } } => match ev {
                        Some(SocketEvent::Disconnected(_)) => {
                            if tx.send(Inbound::OutputDropped).is_err() { return }
                        }
                        Some(_) => {}
                        None => monitor = None,
                    },
                }
            }
        }));
        let (state_tx, state_rx) = watch::channel(TsEngineState::Waiting);
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let paths = vec![output_endpoint.clone(), input_endpoint.clone()];
        let actor = Actor {
            input_endpoint,
            output_endpoint,
            input_send,
            hs_send,
            identity: None,
            registration: None,
            ready: false,
            dead: None,
            streams: HashMap::new(),
            stats: TsStats::default(),
            state_tx,
            tasks,
            paths,
            tap: cfg.tap,
        };
        let actor = tokio::spawn(actor.run(cmd_rx, in_rx));
        Ok(TsGateway { cmd: cmd_tx, state: state_rx, handshake_endpoint, actor: Some(actor) })
    }

    /// The resolved handshake endpoint to give the engine.
    pub fn handshake_endpoint(&self) -> &str {
        &self.handshake_endpoint
    }

    /// The handshake port, when the endpoint is tcp.
    pub fn handshake_port(&self) -> Option<u16> {
        self.handshake_endpoint.rsplit(':').next().and_then(|p| p.parse().ok())
    }

    pub fn state(&self) -> TsEngineState {
        self.state.borrow().clone()
    }

    /// Waits for the engine's HELLO, READY and registration.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<EngineFacts, String> {
        let until = Instant::now() + timeout;
        let mut rx = self.state.clone();
        loop {
            let s = rx.borrow_and_update().clone();
            match s {
                TsEngineState::Up(f) => return Ok(*f),
                TsEngineState::Dead(c) => return Err(format!("engine died while starting: {c}")),
                TsEngineState::Waiting => {}
            }
            match tokio::time::timeout_at(until, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err("gateway closed".into()),
                Err(_) => {
                    return Err(format!(
                        "handshake not complete after {}s: no TokenSpeed engine came up on {} \
                         (TokenSpeed says HELLO only after loading its model)",
                        timeout.as_secs(),
                        self.handshake_endpoint
                    ))
                }
            }
        }
    }

    /// Sends input frames (`[type, payload, aux...]`) for `rid` and
    /// returns the stream of its rows.
    pub async fn add_frames(
        &self,
        rid: &str,
        frames: Vec<Vec<u8>>,
    ) -> Result<mpsc::UnboundedReceiver<TsEvent>, String> {
        let (reply, rx) = oneshot::channel();
        self.cmd.send(Cmd::Add { rid: rid.to_string(), frames, reply }).map_err(|_| "gateway closed".to_string())?;
        rx.await.map_err(|_| "gateway closed".to_string())?
    }

    /// Sends an ABORT for `rids` (a plain array of strings). No row comes
    /// back for a client abort; rows that still come are delivered, so the
    /// caller can time them, and it ends the request with [`Self::forget`].
    pub async fn abort(&self, rids: &[String]) -> Result<(), String> {
        let (reply, rx) = oneshot::channel();
        self.cmd.send(Cmd::Abort { rids: rids.to_vec(), reply }).map_err(|_| "gateway closed".to_string())?;
        rx.await.map_err(|_| "gateway closed".to_string())?
    }

    /// Stops waiting for `rid` without telling the engine.
    pub fn forget(&self, rid: &str) {
        let _ = self.cmd.send(Cmd::Forget { rid: rid.to_string() });
    }

    pub async fn stats(&self) -> TsStats {
        let (reply, rx) = oneshot::channel();
        if self.cmd.send(Cmd::Stats { reply }).is_err() {
            return TsStats::default();
        }
        rx.await.unwrap_or_default()
    }

    /// Closes the sockets and removes the ipc socket files.
    pub async fn shutdown(mut self) {
        let _ = self.cmd.send(Cmd::Shutdown);
        if let Some(a) = self.actor.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), a).await;
        }
    }
}

impl Drop for TsGateway {
    fn drop(&mut self) {
        let _ = self.cmd.send(Cmd::Shutdown);
    }
}

struct Actor {
    input_endpoint: String,
    output_endpoint: String,
    input_send: RouterSendHalf,
    hs_send: RouterSendHalf,
    identity: Option<Vec<u8>>,
    registration: Option<EngineFacts>,
    ready: bool,
    dead: Option<TsDeath>,
    streams: HashMap<String, mpsc::UnboundedSender<TsEvent>>,
    stats: TsStats,
    state_tx: watch::Sender<TsEngineState>,
    tasks: Vec<JoinHandle<()>>,
    paths: Vec<String>,
    tap: Option<mpsc::UnboundedSender<Tapped>>,
}

async fn send_router(s: &mut RouterSendHalf, frames: Vec<Vec<u8>>) -> Result<(), String> {
    let m = ZmqMessage::try_from(frames.into_iter().map(Bytes::from).collect::<Vec<_>>()).map_err(|e| e.to_string())?;
    match tokio::time::timeout(Duration::from_secs(10), s.send(m)).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("send timed out".into()),
    }
}

impl Actor {
    /// The engine's index, from its routing identity once it has one.
    fn engine(&self) -> Option<u16> {
        self.identity.as_deref().and_then(|id| engine_index(id).ok())
    }

    /// Copies a frame set the gateway sends to the engine to the tap, if
    /// any.
    fn tap_sent<F: AsRef<[u8]>>(&self, socket: TapSocket, frames: &[F]) {
        self.tap(socket, false, self.engine(), frames);
    }

    /// Copies a frame set received with a routing identity (first) to the
    /// tap, if any, without the identity.
    fn tap_routed(&self, socket: TapSocket, frames: &[Bytes]) {
        if let Some((id, rest)) = frames.split_first() {
            self.tap(socket, true, engine_index(id).ok(), rest);
        }
    }

    fn tap<F: AsRef<[u8]>>(&self, socket: TapSocket, from_engine: bool, engine: Option<u16>, frames: &[F]) {
        if let Some(t) = &self.tap {
            let frames = frames.iter().map(|f| f.as_ref().to_vec()).collect();
            let _ = t.send(Tapped { socket, from_engine, engine, frames, at: SystemTime::now() });
        }
    }

    async fn run(mut self, mut cmd: mpsc::UnboundedReceiver<Cmd>, mut inbound: mpsc::UnboundedReceiver<Inbound>) {
        loop {
            tokio::select! {
                c = cmd.recv() => match c {
                    None | Some(Cmd::Shutdown) => break,
                    Some(c) => self.on_cmd(c).await,
                },
                i = inbound.recv() => match i {
                    None => break,
                    Some(i) => self.on_inbound(i).await,
                },
            }
        }
        for t in &self.tasks {
            t.abort();
        }
        for p in &self.paths {
            if let Some(path) = ipc_path(p) {
                let _ = remove_stale_socket(path);
            }
        }
    }

    async fn on_cmd(&mut self, c: Cmd) {
        match c {
            Cmd::Add { rid, frames, reply } => {
                let r = self.add(rid, frames).await;
                let _ = reply.send(r);
            }
            Cmd::Abort { rids, reply } => {
                let r = self.abort(&rids).await;
                let _ = reply.send(r);
            }
            Cmd::Forget { rid } => {
                self.streams.remove(&rid);
            }
            Cmd::Stats { reply } => {
                let _ = reply.send(self.stats.clone());
            }
            Cmd::Shutdown => {}
        }
    }

    async fn add(&mut self, rid: String, frames: Vec<Vec<u8>>) -> Result<mpsc::UnboundedReceiver<TsEvent>, String> {
        if let Some(d) = &self.dead {
            return Err(format!("engine is dead: {d}"));
        }
        let Some(id) = self.identity.clone().filter(|_| self.registration.is_some()) else {
            return Err("no engine registered yet".into());
        };
        if self.streams.contains_key(&rid) {
            return Err(format!("request {rid} is already in flight"));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.streams.insert(rid.clone(), tx);
        self.tap_sent(TapSocket::Input, &frames);
        let mut all = vec![id];
        all.extend(frames);
        if let Err(e) = send_router(&mut self.input_send, all).await {
            self.streams.remove(&rid);
            return Err(format!("send ADD {rid}: {e}"));
        }
        Ok(rx)
    }

    async fn abort(&mut self, rids: &[String]) -> Result<(), String> {
        // The streams stay: rows that still come are delivered (the caller
        // watches for them, then forgets the rid).
        if self.dead.is_some() {
            return Ok(());
        }
        let Some(id) = self.identity.clone() else { return Err("no engine".into()) };
        let abort = ts::encode_abort(rids);
        self.tap_sent(TapSocket::Input, &abort);
        let mut all = vec![id];
        all.extend(abort);
        send_router(&mut self.input_send, all).await.map_err(|e| format!("send ABORT: {e}"))
    }

    async fn on_inbound(&mut self, i: Inbound) {
        match i {
            Inbound::Handshake(frames) => self.on_handshake(frames).await,
            Inbound::Input(frames) => {
                // The only thing an engine sends on input is its registration.
                self.tap_routed(TapSocket::Input, &frames);
                let [id, payload] = frames.as_slice() else { return };
                let Ok(index) = engine_index(id) else { return };
                match handshake::decode_registration(release(), index, payload) {
                    Ok(f) => {
                        self.stats.drift.extend(f.drift.iter().cloned());
                        self.identity.get_or_insert_with(|| id.to_vec());
                        self.registration = Some(f);
                        self.publish();
                    }
                    Err(e) => self.die(TsDeath::Handshake(format!("bad registration: {e}"))),
                }
            }
            Inbound::Output(frames) => self.on_output(frames),
            Inbound::OutputDropped => self.die(TsDeath::OutputDropped),
        }
    }

    async fn on_handshake(&mut self, frames: Vec<Bytes>) {
        self.tap_routed(TapSocket::Handshake, &frames);
        let [id, payload] = frames.as_slice() else { return };
        let status = match handshake::decode_status(release(), payload) {
            Ok(s) => s,
            Err(e) => {
                self.die(TsDeath::Handshake(format!("bad handshake message: {e}")));
                return;
            }
        };
        match status.status.as_str() {
            "HELLO" => {
                self.identity = Some(id.to_vec());
                let init = match handshake::encode_init(release(), &self.input_endpoint, &self.output_endpoint) {
                    Ok(i) => i,
                    Err(e) => {
                        self.die(TsDeath::Handshake(e));
                        return;
                    }
                };
                self.tap(TapSocket::Handshake, false, engine_index(id).ok(), std::slice::from_ref(&init));
                if let Err(e) = send_router(&mut self.hs_send, vec![id.to_vec(), init]).await {
                    self.die(TsDeath::Handshake(format!("send INIT: {e}")));
                }
            }
            "READY" => {
                self.ready = true;
                self.publish();
            }
            other => self.die(TsDeath::Handshake(format!("unexpected handshake status {other:?}"))),
        }
    }

    fn publish(&mut self) {
        if let (true, Some(f)) = (self.ready, &self.registration) {
            let _ = self.state_tx.send(TsEngineState::Up(Box::new(f.clone())));
        }
    }

    fn die(&mut self, cause: TsDeath) {
        if self.dead.is_some() {
            return;
        }
        for (_, tx) in self.streams.drain() {
            let _ = tx.send(TsEvent::Dead(cause.clone()));
        }
        let _ = self.state_tx.send(TsEngineState::Dead(cause.clone()));
        self.dead = Some(cause);
    }

    fn on_output(&mut self, frames: Vec<Bytes>) {
        // One engine: the output socket names none, the registration does.
        self.tap(TapSocket::Output, true, self.engine(), &frames);
        let slices: Vec<&[u8]> = frames.iter().map(|b| b.as_ref()).collect();
        if is_engine_dead(&slices) {
            self.die(TsDeath::Sentinel);
            return;
        }
        if slices.is_empty() {
            return;
        }
        self.stats.batches += 1;
        // Aux frames are ignored: the slim batch has no tensors.
        let (batch, drift) = match decode_batch(release(), &slices[..1], &Limits::default()) {
            Ok(d) => d,
            Err(e) => {
                self.stats.bad_batches.push(e.to_string());
                return;
            }
        };
        self.stats.drift.extend(drift);
        match batch.into_rows() {
            Ok(rows) => {
                let now = Instant::now();
                for row in rows {
                    let terminal = row.finish.is_terminal();
                    match self.streams.get(&row.rid) {
                        Some(tx) => {
                            let rid = row.rid.clone();
                            let _ = tx.send(TsEvent::Row(TsRow { row, at: Some(now) }));
                            if terminal {
                                self.streams.remove(&rid);
                            }
                        }
                        None => self.stats.orphan_rows += 1,
                    }
                }
            }
            Err(e) => self.stats.bad_batches.push(format!("{e} (ragged batch)")),
        }
    }
}
