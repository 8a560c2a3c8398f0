//! The gateway's sockets below the actor: binding (with the stale-socket
//! clean-up zeromq 0.7 needs) and the receive loops that keep every socket
//! polled so that its monitor reports a dead peer.
//!
//! Facts relied on (docs/runner/transport.md "zeromq 0.7 versus libzmq"): bind does
//! not unlink a stale ipc socket file; `recv()` never fails when a peer
//! dies, so death is seen through monitor `Disconnected` events, which only
//! fire while the socket is read; PULL carries no identity, so each
//! engine's output socket is its own (and its loop names the engine).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use zeromq::{PullSocket, Socket, SocketEvent, SocketRecv, ZmqMessage};

use super::TransportError;

/// What the socket loops hand the actor, in arrival order.
pub(crate) enum Inbound {
    Handshake(Vec<Bytes>),
    Input(Vec<Bytes>),
    InputDisconnected(Vec<u8>),
    Output { engine: u16, generation: u64, frames: Vec<Bytes> },
    OutputDisconnected { engine: u16, generation: u64 },
    SocketError(String),
    FrameRefused(super::guard::FrameRefused),
}

/// Removes a stale ipc socket file (zeromq 0.7 does not), then binds.
pub(crate) async fn bind_socket<S: Socket>(socket: &mut S, endpoint: &str) -> Result<String, TransportError> {
    if let Some(path) = ipc_path(endpoint) {
        remove_stale_socket(path)
            .map_err(|e| TransportError::Bind { endpoint: endpoint.to_string(), detail: e.to_string() })?;
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
pub fn remove_stale_socket(path: &Path) -> Result<(), StaleSocketError> {
    use std::os::unix::fs::FileTypeExt;
    let at = || path.to_path_buf();
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StaleSocketError::Inspect { path: at(), source: e.into() }),
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| StaleSocketError::Remove { path: at(), source: e.into() })
        }
        Ok(_) => Err(StaleSocketError::NotASocket(at())),
    }
}

/// Why a stale ipc socket file could not be cleared.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StaleSocketError {
    #[error("cannot inspect {}: {source}", path.display())]
    Inspect { path: PathBuf, source: Arc<std::io::Error> },
    #[error("cannot remove stale socket {}: {source}", path.display())]
    Remove { path: PathBuf, source: Arc<std::io::Error> },
    #[error("{} exists and is not a socket", .0.display())]
    NotASocket(PathBuf),
}

#[derive(Clone, Copy)]
pub(crate) enum Channel {
    Handshake,
    Input,
}

/// Keeps `recv()` running on a ROUTER (the monitor only reports a dead
/// peer while the read side is polled) and forwards messages and
/// disconnects, in order, to the actor.
pub(crate) async fn pump_router(
    mut rx: zeromq::RouterRecvHalf,
    mut monitor: Option<futures_util::stream::BoxStream<'static, SocketEvent>>,
    tx: mpsc::Sender<Inbound>,
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
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    errors += 1;
                    if tx.send(Inbound::SocketError(format!("recv: {e}"))).await.is_err() || errors > 100 {
                        return;
                    }
                }
            },
            ev = next_event(&mut monitor) => match ev {
                Some(SocketEvent::Disconnected(id)) => {
                    if tx.send(Inbound::InputDisconnected(id.to_vec())).await.is_err() {
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
pub(crate) async fn pump_pull(
    mut pull: PullSocket,
    monitor: futures_util::stream::BoxStream<'static, SocketEvent>,
    tx: mpsc::Sender<Inbound>,
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
                    if tx.send(Inbound::Output { engine, generation, frames: msg.into_vec() }).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    errors += 1;
                    if tx.send(Inbound::SocketError(format!("engine {engine} output recv: {e}"))).await.is_err() || errors > 100 {
                        return;
                    }
                }
            },
            ev = next_event(&mut monitor) => match ev {
                Some(SocketEvent::Disconnected(_)) => {
                    if tx.send(Inbound::OutputDisconnected { engine, generation }).await.is_err() {
                        return;
                    }
                }
                Some(_) => {}
                None => monitor = None,
            },
        }
    }
}

pub(crate) fn zmq_message(parts: Vec<Bytes>) -> ZmqMessage {
    // `parts` is never empty here (identity + payload at least).
    ZmqMessage::try_from(parts).unwrap_or_else(|_| ZmqMessage::from(Bytes::new()))
}
