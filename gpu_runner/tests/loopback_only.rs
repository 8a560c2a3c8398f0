//! Loopback only: while `gpu-runner` runs (the runner and its mock engine,
//! a separate process), every socket its process tree listens on is on
//! 127.0.0.1 (or an `ipc://` path, which is no network socket at all). The
//! same watcher catches a process that listens on every address.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpu_runner::listening::{listeners, process_tree, Listener};

/// Every listener the tree of `child` showed while it ran (polled), until
/// it exits or `limit` passes.
fn watch(mut child: Child, limit: Duration) -> BTreeSet<Listener> {
    let until = Instant::now() + limit;
    let mut seen = BTreeSet::new();
    loop {
        seen.extend(listeners(&process_tree(child.id())));
        if child.try_wait().unwrap().is_some() || Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_run_against_the_mock_engine_listens_on_loopback_only() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let child = Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .args(["run", "--engine", "mock", "--shard", "1/4"])
        .current_dir(&repo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let seen = watch(child, Duration::from_secs(60));
    assert!(!seen.is_empty(), "the watcher saw no listener at all (the handshake socket is TCP)");
    let beyond: Vec<_> = seen.iter().filter(|l| !l.addr.ip().is_loopback()).collect();
    assert!(beyond.is_empty(), "listening beyond loopback: {beyond:?} (all: {seen:?})");
}

#[test]
fn the_watcher_catches_a_process_listening_on_every_address() {
    let child = Command::new("python3")
        .args(["-c", "import socket,time; s=socket.socket(); s.bind(('0.0.0.0',0)); s.listen(); time.sleep(1)"])
        .spawn()
        .unwrap();
    let seen = watch(child, Duration::from_secs(10));
    assert!(seen.iter().any(|l| l.addr.ip().is_unspecified()), "{seen:?}");
}

#[test]
fn a_gateway_listening_on_every_address_is_refused_naming_the_listener() {
    let mut child = Command::new("python3")
        .args(["-c", "import socket,time; s=socket.socket(); s.bind(('0.0.0.0',0)); s.listen(); time.sleep(30)"])
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    let e = loop {
        if let Some(e) = gpu_runner::gateway::lifecycle::beyond_loopback(child.id()) {
            break e;
        }
        assert!(Instant::now() < until, "never seen listening");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(matches!(e, gpu_runner::gateway::error::GatewayError::BeyondLoopback { .. }), "{e}");
    assert!(e.to_string().contains("tcp 0.0.0.0:"), "{e}");
    // And one on loopback passes.
    let mut child = Command::new("python3")
        .args(["-c", "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); time.sleep(30)"])
        .spawn()
        .unwrap();
    while listeners(&[child.id()]).is_empty() {
        assert!(Instant::now() < until, "never seen listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gpu_runner::gateway::lifecycle::beyond_loopback(child.id()).is_none());
    let _ = child.kill();
    let _ = child.wait();
}
