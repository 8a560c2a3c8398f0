//! Mock engines: the engine side of each dialect, in Rust, scripted and
//! with fault modes, so the gateway side can be tested without Python.
//! One handle, [`Engine<D>`], runs the mock of dialect `D` (a task that
//! dials the gateway's handshake address); the dialect's script says what
//! it does ([`vllm_script::Script`], [`tokenspeed::Script`]).
//!
//! Wire facts shared by both mocks (docs/runner/mock.md "The mock engine",
//! docs/runner/tokenspeed.md "The TokenSpeed mock"; docs/tokenspeed-wire.md
//! §3): the engine dials the handshake address with a DEALER whose identity
//! is its index (2 bytes little-endian), says HELLO, reads INIT, dials the
//! first input address (DEALER, same identity) and the first output address
//! (PUSH), registers on input and says READY; ABORT frees a request with no
//! output; a crash drops every socket at once, the death sentinel is the
//! one frame `ENGINE_CORE_DEAD`.
//!
//! Rooms: [`vllm`] (vLLM 0.32.0's `EngineCoreProc`), [`vllm_script`] (its
//! script and the scripted plans of gateway mode), [`retarget`] (its
//! outputs and registration for a release without the typed API), [`tokenspeed`]
//! (TokenSpeed 0.1.1's scheduler loop), [`tokens`] (the token functions
//! both share).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use engine_protocol::engine_identity;
use tokio::sync::oneshot;
use zeromq::util::PeerIdentity;
use zeromq::{DealerSocket, Socket, SocketOptions, SocketSend, ZmqMessage};

use engine_client::dialect::EngineWire;

pub mod registration;
pub mod retarget;
pub mod tokens;
pub mod tokenspeed;
pub mod vllm;
pub mod vllm_script;

/// Why a mock engine ended in error, or could not be stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MockError {
    /// Serving failed (a socket, the handshake, an encode): what and why.
    #[error("{0}")]
    Serve(String),
    /// The mock's task panicked or was cancelled.
    #[error("mock task failed: {0}")]
    Task(String),
    /// [`Engine::stop`]: the task did not end within 5 s.
    #[error("mock did not stop within 5s")]
    StopTimeout,
    /// [`Engine::join`]: the task was still running.
    #[error("mock still running after {:.1}s", .0.as_secs_f64())]
    StillRunning(Duration),
}

impl From<String> for MockError {
    fn from(s: String) -> MockError {
        MockError::Serve(s)
    }
}

/// A mock script that does not read (`mock script: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// What is wrong, with the key's path.
    #[error("{0}")]
    Invalid(String),
    /// `version` names a release this build has no table for.
    #[error("mock script: {0}")]
    UnknownRelease(engine_protocol::UnknownRelease),
}

impl From<String> for ScriptError {
    fn from(s: String) -> ScriptError {
        ScriptError::Invalid(s)
    }
}

impl From<&str> for ScriptError {
    fn from(s: &str) -> ScriptError {
        ScriptError::Invalid(s.to_string())
    }
}

/// A dialect with a mock engine: its script, its log, and how it serves.
pub trait MockDialect: EngineWire {
    /// What the mock does (docs/runner/mock.md, docs/runner/tokenspeed.md:
    /// every key optional).
    type Script: Clone + Send + 'static;
    /// What the mock saw and did, readable while it runs.
    type Log: Clone + Default + Send + 'static;

    /// Serves until the mock ends, `stop` fires or its lifetime passes;
    /// notes how it ended in the log.
    fn serve(
        script: Self::Script,
        handshake: String,
        log: Arc<Mutex<Self::Log>>,
        stop: oneshot::Receiver<()>,
    ) -> impl Future<Output = Result<(), MockError>> + Send + 'static;
}

/// A running mock engine of dialect `D`.
pub struct Engine<D: MockDialect> {
    /// What it saw and did so far.
    pub log: Arc<Mutex<D::Log>>,
    task: MockTask,
}

impl<D: MockDialect> Engine<D> {
    /// Starts a mock that dials `handshake`.
    pub fn spawn(handshake: &str, script: D::Script) -> Engine<D> {
        let log = Arc::new(Mutex::new(D::Log::default()));
        let handshake = handshake.to_string();
        let task = MockTask::spawn({
            let log = log.clone();
            move |stop| D::serve(script, handshake, log, stop)
        });
        Engine { log, task }
    }

    /// A copy of its log.
    pub fn log(&self) -> D::Log {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Whether it has ended on its own (death sentinel, crash).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the mock (its sockets close) and returns how it ended.
    pub async fn stop(self) -> Result<(), MockError> {
        self.task.stop().await
    }

    /// Waits for the mock to end on its own.
    pub async fn join(self, timeout: Duration) -> Result<(), MockError> {
        self.task.join(timeout).await
    }
}

/// The task serving a mock engine, with its stop signal: stopping fires
/// the signal and waits up to 5 s; dropping aborts the task, so its sockets
/// close as a killed engine's do.
struct MockTask {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), MockError>>,
}

impl MockTask {
    fn spawn<F>(serve: impl FnOnce(oneshot::Receiver<()>) -> F) -> MockTask
    where
        F: Future<Output = Result<(), MockError>> + Send + 'static,
    {
        let (stop, stop_rx) = oneshot::channel();
        MockTask { stop: Some(stop), task: tokio::spawn(serve(stop_rx)) }
    }

    fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    async fn stop(mut self) -> Result<(), MockError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match tokio::time::timeout(Duration::from_secs(5), &mut self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(MockError::Task(e.to_string())),
            Err(_) => {
                self.task.abort();
                Err(MockError::StopTimeout)
            }
        }
    }

    async fn join(mut self, timeout: Duration) -> Result<(), MockError> {
        match tokio::time::timeout(timeout, &mut self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(MockError::Task(e.to_string())),
            Err(_) => {
                self.task.abort();
                Err(MockError::StillRunning(timeout))
            }
        }
    }
}

impl Drop for MockTask {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs a mock's `serve` until it ends, `stop` fires (`stopped`) or the
/// script's lifetime passes (`lifetime_end`), whichever comes first: every
/// dialect's mock ends the same three ways.
async fn serve_until<T>(
    lifetime: Duration,
    stop: oneshot::Receiver<()>,
    serve: impl Future<Output = Result<T, String>>,
    lifetime_end: T,
    stopped: T,
) -> Result<T, String> {
    tokio::select! {
        r = tokio::time::timeout(lifetime, serve) => r.unwrap_or(Ok(lifetime_end)),
        _ = stop => Ok(stopped),
    }
}

/// Notes something in a mock's log.
fn note<L>(log: &Mutex<L>, f: impl FnOnce(&mut L)) {
    if let Ok(mut l) = log.lock() {
        f(&mut l);
    }
}

/// A DEALER with engine `index`'s routing identity.
fn dealer(index: u16) -> Result<DealerSocket, String> {
    let id = PeerIdentity::try_from(engine_identity(index).to_vec()).map_err(|e| format!("identity: {e}"))?;
    let mut opts = SocketOptions::default();
    opts.peer_identity(id);
    Ok(DealerSocket::with_options(opts))
}

fn msg(frames: Vec<Vec<u8>>) -> Result<ZmqMessage, String> {
    ZmqMessage::try_from(frames.into_iter().map(Bytes::from).collect::<Vec<_>>()).map_err(|e| format!("{e}"))
}

/// Sends `frames`, giving up after 10 s (a peer that reads nothing).
async fn send<S: SocketSend>(s: &mut S, frames: Vec<Vec<u8>>, what: &str) -> Result<(), String> {
    match tokio::time::timeout(Duration::from_secs(10), s.send(msg(frames)?)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("send {what}: {e}")),
        Err(_) => Err(format!("send {what}: timed out")),
    }
}

/// Drawing the house of `mock-engine`: its rooms (the vLLM mock, its
/// script, the TokenSpeed mock, retargeting to older releases, recorded
/// registrations, token functions) use each other without a cycle.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_rooms_of_the_mock_use_each_other_without_a_cycle() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        assert!(g.edges["tokens"].is_empty(), "tokens uses {:?}", g.edges["tokens"]);
    }
}
