//! The gateway's actor: one task owns the sockets' send halves and every
//! request's state; it answers commands, reads what the socket loops hand
//! it, and expires silence deadlines (docs/runner/transport.md "Transport",
//! "Failure paths").
//!
//! Facts relied on: nothing is sent to an engine before its registration
//! (which proves its input connection) and READY; a HELLO from a known
//! identity is a restart; the engine's PULL is bound when its HELLO
//! arrives, at the address its INIT names; a client ABORT produces no
//! output, so aborted requests end here and what still comes for them is
//! timed (late outputs); outputs for unknown ids are counted, dropped and
//! aborted once.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use engine_protocol::Value;
use engine_protocol::{engine_identity, engine_index};
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zeromq::{PullSocket, RouterSendHalf, Socket, SocketSend};

use super::guard::{bind_guarded, FrameRefused, GuardSpec, GuardedSocket};
use super::handshake::{self, Phase};
use super::sockets::{ipc_path, pump_pull, remove_stale_socket, zmq_message, Inbound};
use super::{
    ClientConfig, ClientStats, DeathCause, EngineState, EngineStatus, RequestEvent, TapSocket, Tapped, TransportError,
};
use crate::dialect::{Demux, EngineWire};

/// How long one send may wait for room in a peer's queue.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Client-aborted requests whose late outputs are timed (memory bound).
const MAX_ABORTED_TRACKED: usize = 100_000;

pub(crate) enum Command<D: EngineWire> {
    Add {
        engine: u16,
        request_id: String,
        frames: Vec<Vec<u8>>,
        reply: oneshot::Sender<AddReply<D>>,
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
        reply: oneshot::Sender<ClientStats>,
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

pub(crate) type AddReply<D> = Result<mpsc::UnboundedReceiver<RequestEvent<D>>, TransportError>;

pub(crate) struct EngineEntry {
    phase: Phase,
    dead: Option<DeathCause>,
    output_endpoint: String,
    output_task: Option<JoinHandle<()>>,
    /// The guard accepting on the output endpoint (`super::guard`).
    guard_task: Option<JoinHandle<()>>,
    generation: u64,
    /// Outputs this incarnation sent for ids the gateway never knew (late
    /// outputs of its own finished requests not counted), against
    /// `ClientConfig::orphan_flood_limit`.
    unknown_outputs: u64,
    /// Output messages received after it died, dropped undecoded.
    after_death: u64,
}

impl Default for EngineEntry {
    /// An engine before its HELLO: no output socket, nothing counted.
    fn default() -> EngineEntry {
        EngineEntry {
            phase: Phase::new(),
            dead: None,
            output_endpoint: String::new(),
            output_task: None,
            guard_task: None,
            generation: 0,
            unknown_outputs: 0,
            after_death: 0,
        }
    }
}

pub(crate) struct InFlight<D: EngineWire> {
    engine: u16,
    tx: mpsc::UnboundedSender<RequestEvent<D>>,
    last_activity: Instant,
}

pub(crate) struct PendingUtility {
    engine: u16,
    method: String,
    deadline: Instant,
    reply: oneshot::Sender<Result<Value, TransportError>>,
}

pub(crate) struct Actor<D: EngineWire> {
    pub(crate) cfg: ClientConfig<D>,
    pub(crate) input_endpoint: String,
    pub(crate) input_send: RouterSendHalf,
    pub(crate) hs_send: RouterSendHalf,
    pub(crate) in_tx: mpsc::Sender<Inbound>,
    pub(crate) engines: HashMap<u16, EngineEntry>,
    /// Keyed with FxHash (`rustc-hash`): one lookup per output on the hot
    /// path, and the ids are the gateway's own, so no DoS-resistant hash is
    /// needed.
    pub(crate) in_flight: HashMap<String, InFlight<D>, rustc_hash::FxBuildHasher>,
    /// Requests finished here (abort, silence, local stop) whose late
    /// outputs are expected and dropped.
    pub(crate) finished_locally: HashSet<String>,
    /// Unknown request ids aborted once, bounded (`super::orphans`).
    pub(crate) orphans: super::orphans::Remembered,
    /// Requests aborted by the client: when the ABORT went out, and when
    /// (after it) each late output arrived.
    pub(crate) aborted: HashMap<String, (Instant, Vec<Duration>)>,
    pub(crate) utilities: HashMap<u64, PendingUtility>,
    pub(crate) next_call_id: u64,
    pub(crate) next_generation: u64,
    pub(crate) stats: ClientStats,
    /// Lockstep engines' waves, as this client sees them.
    pub(crate) waves: super::waves::Waves,
    pub(crate) state_tx: watch::Sender<Vec<EngineStatus>>,
    /// The first frame refused from a peer that named no engine.
    pub(crate) refused_tx: watch::Sender<Option<FrameRefused>>,
    pub(crate) socket_tasks: Vec<JoinHandle<()>>,
    /// Where the sockets bind, behind their guards; removed with the actor.
    pub(crate) inner_dir: tempfile::TempDir,
}

impl<D: EngineWire> Actor<D> {
    pub(crate) async fn run(
        mut self,
        mut cmd_rx: mpsc::UnboundedReceiver<Command<D>>,
        mut in_rx: mpsc::Receiver<Inbound>,
    ) {
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
            if let Some(t) = e.guard_task.take() {
                t.abort();
            }
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
                let Some(e) = self.engines.get_mut(&engine).filter(|e| e.generation == generation) else { return };
                if e.dead.is_some() {
                    // Nothing legitimate follows a death: dropped undecoded,
                    // and a dead engine that keeps sending loses its socket.
                    e.after_death += 1;
                    self.stats.dropped_after_death += 1;
                    if e.after_death >= super::MAX_MESSAGES_AFTER_DEATH {
                        if let Some(t) = e.output_task.take() {
                            t.abort();
                        }
                    }
                    return;
                }
                self.on_output(engine, frames).await;
            }
            Inbound::OutputDisconnected { engine, generation } => {
                if self.engines.get(&engine).is_some_and(|e| e.generation == generation) {
                    self.engine_died(engine, DeathCause::OutputDisconnected);
                }
            }
            Inbound::SocketError(e) => self.protocol_error(format!("socket: {e}")),
            Inbound::FrameRefused(r) => self.on_frame_refused(r),
        }
    }

    /// A guard closed a connection at a frame past its limit: the engine it
    /// names dies of it (one not yet known is entered dead, so start-up
    /// ends naming it); a refusal naming no engine ends start-up.
    fn on_frame_refused(&mut self, r: FrameRefused) {
        self.protocol_error(r.to_string());
        let Some(index) = r.engine else {
            self.refused_tx.send_if_modified(|first| {
                let new = first.is_none();
                first.get_or_insert(r);
                new
            });
            return;
        };
        self.engines.entry(index).or_default();
        self.engine_died(index, DeathCause::FrameTooLarge { socket: r.socket, declared: r.declared, limit: r.limit });
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
        if let Some(e) = self.engines.get_mut(&index) {
            let old = [e.output_task.take(), e.guard_task.take()];
            if old.iter().any(Option::is_some) {
                old.into_iter().flatten().for_each(|t| t.abort());
                // Let the aborted tasks drop their sockets before rebinding
                // the paths.
                tokio::task::yield_now().await;
            }
        }
        let mut pull = PullSocket::new();
        let monitor = pull.monitor().boxed();
        let spec = GuardSpec {
            socket: GuardedSocket::Output,
            engine: Some(index),
            limit: self.cfg.limits.max_frame_bytes as u64,
            report: self.in_tx.clone(),
        };
        let inner_name = format!("out-{index}.sock");
        let guard = match bind_guarded(&mut pull, &output_endpoint, self.inner_dir.path(), &inner_name, spec).await {
            Ok(g) => g,
            Err(e) => {
                self.protocol_error(format!("engine {index}: {e}"));
                return;
            }
        };
        let task = tokio::spawn(pump_pull(pull, monitor, self.in_tx.clone(), index, generation));
        self.engines.insert(
            index,
            EngineEntry {
                output_endpoint: output_endpoint.clone(),
                output_task: Some(task),
                guard_task: Some(guard.task),
                generation,
                ..EngineEntry::default()
            },
        );
        let init = match handshake::encode_init(self.cfg.release, &self.input_endpoint, &output_endpoint) {
            Ok(b) => b,
            Err(e) => return self.protocol_error(e.to_string()),
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
            Err(e) => {
                self.protocol_error(format!("engine {index}: {e}"));
                // An engine whose registration cannot be read never comes
                // up: say so now rather than at the startup deadline.
                return self.engine_died(index, DeathCause::BadRegistration(e));
            }
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
        if D::is_death_sentinel(&frames) {
            self.engine_died(engine, DeathCause::Sentinel);
            return;
        }
        self.stats.batches += 1;
        let mut demux = Demultiplexer::<D> {
            engine,
            in_flight: &mut self.in_flight,
            aborted: &mut self.aborted,
            finished_locally: &self.finished_locally,
            orphans: Vec::new(),
            orphan_outputs: 0,
            unknown_outputs: 0,
            now: Instant::now(),
        };
        let decoded = D::decode_batch(self.cfg.release, frames, &self.cfg.limits, &mut demux);
        let Demultiplexer { orphans, orphan_outputs, unknown_outputs, .. } = demux;
        self.stats.orphan_outputs += orphan_outputs;
        if unknown_outputs > 0 {
            let limit = self.cfg.orphan_flood_limit;
            let flooded = self.engines.get_mut(&engine).is_some_and(|e| {
                e.unknown_outputs += unknown_outputs;
                e.unknown_outputs > limit
            });
            if flooded {
                self.protocol_error(format!(
                    "engine {engine}: more than {limit} outputs for request ids the gateway does not know"
                ));
                return self.engine_died(engine, DeathCause::OrphanFlood { limit });
            }
        }
        let info = match decoded {
            Ok(info) => info,
            Err(e) => {
                self.stats.malformed_batches += 1;
                let err = TransportError::MalformedBatch { engine, detail: e.to_string() };
                if !D::BAD_BATCH_FAILS_REQUESTS {
                    self.protocol_error(err.to_string());
                    return;
                }
                let failed = self.fail_engine_requests(engine, &err);
                // The engine may still be generating them: stop it.
                self.finished_locally.extend(failed.iter().cloned());
                if !failed.is_empty() {
                    let _ = self.send_abort(engine, &failed).await;
                }
                return;
            }
        };
        if !info.drift.is_empty() {
            self.stats.drift.extend(info.drift);
        }
        if let Some(i) = info.engine_index.filter(|&i| i != i64::from(engine)) {
            self.stats.engine_index_mismatches += 1;
            self.protocol_error(format!("engine {engine}: a batch on its output connection says engine_index {i}"));
        }
        if let Some(c) = info.dp_control {
            if self.stats.dp_control.len() < 1000 {
                self.stats.dp_control.push((engine, c));
            }
            if let Some(w) = self.waves.on_control(c, !self.in_flight.is_empty()) {
                self.start_wave(w).await;
            }
        }
        if let Some(reply) = info.utility {
            match reply.call_id.and_then(|id| self.utilities.remove(&id)) {
                Some(u) => {
                    let r = match reply.failure {
                        Some(message) => Err(TransportError::Utility { method: u.method, message }),
                        None => Ok(reply.result),
                    };
                    let _ = u.reply.send(r);
                }
                None => self.protocol_error(format!(
                    "engine {engine}: utility reply for unknown call id {:?}",
                    reply.raw_call_id
                )),
            }
        }
        // Leftovers of a previous gateway: stop the engine generating them,
        // once each, while there is room to remember them.
        let to_abort: Vec<String> = orphans.into_iter().filter(|id| self.orphans.first_sight(id)).collect();
        self.stats.orphan_ids_remembered = self.orphans.len();
        if !to_abort.is_empty() {
            let _ = self.send_abort(engine, &to_abort).await;
        }
    }

    async fn on_command(&mut self, c: Command<D>) {
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

    async fn add(&mut self, engine: u16, request_id: String, frames: Vec<Vec<u8>>) -> AddReply<D> {
        self.check_ready(engine)?;
        if self.in_flight.contains_key(&request_id) {
            return Err(TransportError::DuplicateRequest(request_id));
        }
        self.send_input(engine, frames).await?;
        if self.lockstep() {
            if let Some(w) = self.waves.on_add(engine) {
                self.start_wave(w).await;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        self.finished_locally.remove(&request_id);
        self.orphans.forget(&request_id);
        self.in_flight.insert(request_id, InFlight { engine, tx, last_activity: Instant::now() });
        Ok(rx)
    }

    /// Whether the engines run in lockstep waves: an engine up says its
    /// data-parallel size is above 1 (`super::waves`).
    fn lockstep(&self) -> bool {
        self.engines.values().any(|e| e.dead.is_none() && matches!(&e.phase, Phase::Up(f) if f.data_parallel_size > 1))
    }

    /// Sends START_DP_WAVE to every live engine but the excluded one.
    async fn start_wave(&mut self, w: super::waves::StartWave) {
        let frames = match D::encode_start_wave(self.cfg.release, w.wave, w.exclude) {
            Ok(f) => f,
            Err(e) => {
                self.protocol_error(format!("cannot encode START_DP_WAVE: {e}"));
                return;
            }
        };
        let mut to: Vec<u16> = self
            .engines
            .iter()
            .filter(|(i, e)| Some(**i) != w.exclude && e.dead.is_none() && matches!(e.phase, Phase::Up(_)))
            .map(|(i, _)| *i)
            .collect();
        to.sort_unstable();
        for engine in to {
            if self.send_input(engine, frames.clone()).await.is_ok() && self.stats.start_waves_sent.len() < 1000 {
                self.stats.start_waves_sent.push((engine, w.wave, w.exclude));
            }
        }
    }

    async fn send_abort(&mut self, engine: u16, ids: &[String]) -> Result<(), TransportError> {
        self.check_ready(engine)?;
        let frames = D::encode_abort(self.cfg.release, ids).map_err(TransportError::Encode)?;
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
        let frames = D::encode_utility(self.cfg.release, call_id, method, args).map_err(TransportError::Encode)?;
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

/// The output loop's view of the actor while a batch is decoded: each
/// output goes to its request's stream, or is counted as an orphan.
struct Demultiplexer<'a, D: EngineWire> {
    engine: u16,
    in_flight: &'a mut HashMap<String, InFlight<D>, rustc_hash::FxBuildHasher>,
    aborted: &'a mut HashMap<String, (Instant, Vec<Duration>)>,
    finished_locally: &'a HashSet<String>,
    /// Unknown request ids seen in this batch, once each (leftovers of a
    /// previous gateway), for the actor to abort.
    orphans: Vec<String>,
    /// Outputs for ids not in flight (late outputs included).
    orphan_outputs: u64,
    /// Outputs for ids this gateway never finished or aborted itself.
    unknown_outputs: u64,
    now: Instant,
}

impl<D: EngineWire> Demux<D::Step> for Demultiplexer<'_, D> {
    fn offer(&mut self, id: &str, terminal: bool, build: impl FnOnce() -> D::Step) {
        let Some(f) = self.in_flight.get_mut(id) else {
            if let Some((at, late)) = self.aborted.get_mut(id) {
                late.push(self.now.saturating_duration_since(*at));
            }
            self.orphan_outputs += 1;
            if !self.finished_locally.contains(id) && !self.aborted.contains_key(id) {
                self.unknown_outputs += 1;
                if self.orphans.last().is_none_or(|last| last != id)
                    && self.orphans.len() < super::ORPHAN_IDS_REMEMBERED
                {
                    self.orphans.push(id.to_string());
                }
            }
            return;
        };
        debug_assert_eq!(f.engine, self.engine);
        f.last_activity = self.now;
        let _ = f.tx.send(RequestEvent::Output(build()));
        if terminal {
            self.in_flight.remove(id);
        }
    }
}
