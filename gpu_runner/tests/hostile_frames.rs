//! The gateway's sockets against an engine that declares a huge ZeroMQ
//! frame: a fake engine written here opens a raw connection (tcp to the
//! handshake socket, ipc to the input and output sockets), sends a valid
//! ZMTP 3 greeting and a NULL-mechanism READY, then a frame header
//! declaring 64 GiB and a few bytes. The socket guard
//! (`gpu_runner::transport::guard`) closes the connection at the header:
//! start-up ends with a typed error naming the engine, the socket, the
//! declared size and the limit, within seconds, and resident memory does
//! not grow. Without the guard, the `zeromq` crate reserves the declared
//! size (shown in a child process: the allocation fails and the process
//! aborts, or, where memory is overcommitted, the reservation is held)
//! (docs/limits.md "Limits on the suite's peers").

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine_protocol::{engine_identity, ReleaseSchema};
use gpu_runner::transport::guard::{GuardedSocket, MAX_HANDSHAKE_SOCKET_FRAME_BYTES};
use gpu_runner::transport::handshake::{self, MAX_HANDSHAKE_FRAME_BYTES};
use gpu_runner::transport::{ClientConfig, DeathCause, EngineClient, TransportError};
use zeromq::util::PeerIdentity;
use zeromq::{DealerSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqMessage};

const TEST_DEADLINE: Duration = Duration::from_secs(60);
/// How soon the refusal must end start-up.
const VERDICT: Duration = Duration::from_secs(5);
/// What the frame header declares: 64 GiB.
const HUGE: u64 = 64 << 30;
/// The output socket's limit: the decoder's default frame limit.
const OUTPUT_LIMIT: u64 = 1 << 30;

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

/// The tests here run one at a time, so that one's resident memory
/// measure is not another's gateway.
static SERIAL: std::sync::LazyLock<tokio::sync::Mutex<()>> = std::sync::LazyLock::new(|| tokio::sync::Mutex::new(()));

async fn within<F: Future<Output = ()>>(f: F) {
    let _one_at_a_time = SERIAL.lock().await;
    tokio::time::timeout(TEST_DEADLINE, f).await.expect("test ran past its deadline");
}

fn resident_kib() -> u64 {
    status_kib("VmRSS:")
}

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().trim_end_matches(" kB").parse().ok()).unwrap()
}

/// A ZMTP 3.0 greeting, NULL mechanism, as a client.
fn greeting() -> Vec<u8> {
    let mut g = vec![0u8; 64];
    g[0] = 0xFF;
    g[9] = 0x7F;
    g[10] = 3;
    g[11] = 0;
    g[12..16].copy_from_slice(b"NULL");
    g
}

/// A READY command frame with `Socket-Type` and, if given, `Identity`.
fn ready(socket_type: &str, identity: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![5];
    body.extend_from_slice(b"READY");
    let mut props = vec![(&b"Socket-Type"[..], socket_type.as_bytes())];
    props.extend(identity.map(|i| (&b"Identity"[..], i)));
    for (name, value) in props {
        body.push(name.len() as u8);
        body.extend_from_slice(name);
        body.extend_from_slice(&(value.len() as u32).to_be_bytes());
        body.extend_from_slice(value);
    }
    let mut frame = vec![0x04, body.len() as u8];
    frame.extend(body);
    frame
}

/// Greeting, READY, then a long frame header declaring `declared` bytes and
/// the first few bytes of its body.
fn hostile_bytes(socket_type: &str, identity: Option<&[u8]>, declared: u64) -> Vec<u8> {
    let mut b = greeting();
    b.extend(ready(socket_type, identity));
    b.push(0x02);
    b.extend_from_slice(&declared.to_be_bytes());
    b.extend_from_slice(b"abc");
    b
}

/// Writes `bytes` on a raw connection to `endpoint` (tcp or ipc) and reads
/// until the other side closes; returns how long that took.
fn hostile_peer(endpoint: &str, bytes: Vec<u8>) -> tokio::task::JoinHandle<Duration> {
    let endpoint = endpoint.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let start = Instant::now();
        let mut conn: Box<dyn ReadWrite> = if let Some(addr) = endpoint.strip_prefix("tcp://") {
            Box::new(std::net::TcpStream::connect(addr).unwrap())
        } else {
            Box::new(std::os::unix::net::UnixStream::connect(endpoint.strip_prefix("ipc://").unwrap()).unwrap())
        };
        conn.set_timeout(TEST_DEADLINE);
        // A write may fail once the guard has closed the connection.
        let _ = conn.write_all(&bytes);
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    })
}

trait ReadWrite: std::io::Read + std::io::Write {
    fn set_timeout(&self, d: Duration);
}
impl ReadWrite for std::net::TcpStream {
    fn set_timeout(&self, d: Duration) {
        self.set_read_timeout(Some(d)).unwrap();
    }
}
impl ReadWrite for std::os::unix::net::UnixStream {
    fn set_timeout(&self, d: Duration) {
        self.set_read_timeout(Some(d)).unwrap();
    }
}

async fn bind(dir: &tempfile::TempDir) -> EngineClient {
    EngineClient::bind(ClientConfig::new(release(), dir.path())).await.unwrap()
}

/// Sends `bytes` from a raw peer to `endpoint` and returns how start-up
/// ended, checking that it ended within [`VERDICT`] and that the peer's
/// connection was closed.
async fn refused(gw: &EngineClient, endpoint: &str, bytes: Vec<u8>) -> TransportError {
    let start = Instant::now();
    let peer = hostile_peer(endpoint, bytes);
    let e = gw.wait_ready(1, VERDICT * 2).await.unwrap_err();
    let took = start.elapsed();
    assert!(took < VERDICT, "start-up ended after {took:?}: {e}");
    let closed_after = peer.await.unwrap();
    assert!(closed_after < VERDICT, "the hostile connection stayed open for {closed_after:?}");
    e
}

fn dealer() -> DealerSocket {
    let mut opts = SocketOptions::default();
    opts.peer_identity(PeerIdentity::try_from(engine_identity(0).to_vec()).unwrap());
    DealerSocket::with_options(opts)
}

fn frame_too_large(socket: GuardedSocket, limit: u64) -> TransportError {
    TransportError::EngineDead { engine: 0, cause: DeathCause::FrameTooLarge { socket, declared: HUGE, limit } }
}

/// One refusal on each socket: the handshake (tcp) and input (ipc) from a
/// peer whose READY names engine 0, the output (ipc) once engine 0 has said
/// HELLO and been given its address (a PUSH has no identity: the socket
/// names the engine).
async fn a_huge_frame_on_each_socket() {
    let dir = tempfile::tempdir().unwrap();
    let gw = bind(&dir).await;
    assert!(gw.handshake_endpoint().starts_with("tcp://127.0.0.1:"), "{}", gw.handshake_endpoint());
    let bytes = hostile_bytes("DEALER", Some(&engine_identity(0)), HUGE);
    let e = refused(&gw, gw.handshake_endpoint(), bytes).await;
    assert_eq!(e, frame_too_large(GuardedSocket::Handshake, MAX_HANDSHAKE_FRAME_BYTES as u64));
    assert_eq!(
        e.to_string(),
        "engine 0 is dead: engine declared a frame of 68719476736 bytes on the handshake socket \
         (limit 1048576 bytes)"
    );
    gw.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let gw = bind(&dir).await;
    assert!(gw.input_endpoint().starts_with("ipc://"));
    let input = gw.input_endpoint().to_string();
    let e = refused(&gw, &input, hostile_bytes("DEALER", Some(&engine_identity(0)), HUGE)).await;
    assert_eq!(e, frame_too_large(GuardedSocket::Input, MAX_HANDSHAKE_SOCKET_FRAME_BYTES));
    gw.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let gw = bind(&dir).await;
    let mut hs = dealer();
    hs.connect(gw.handshake_endpoint()).await.unwrap();
    let hello = handshake::encode_status(release(), "HELLO", false, true);
    hs.send(ZmqMessage::from(Bytes::from(hello))).await.unwrap();
    let init = hs.recv().await.unwrap().into_vec();
    let output = handshake::decode_init(release(), &init[0]).unwrap().outputs[0].clone();
    let e = refused(&gw, &output, hostile_bytes("PUSH", None, HUGE)).await;
    assert_eq!(e, frame_too_large(GuardedSocket::Output, OUTPUT_LIMIT));
    assert!(gw.stats().await.protocol_errors.iter().any(|p| p.contains("68719476736")));
    gw.shutdown().await;
}

// Resident memory, measured over a second round (the first warms up the
// runtime, the schema tables and the allocator): +0 to +300 KiB for three
// refusals on this machine (docs/limits.md); without the guard the first
// header alone asks for 64 GiB (the child-process test below).
#[tokio::test]
async fn a_64_gib_frame_on_each_socket_ends_start_up_naming_the_socket_the_size_and_the_limit_without_memory_growth() {
    within(async {
        a_huge_frame_on_each_socket().await;
        let before = resident_kib();
        a_huge_frame_on_each_socket().await;
        let grown = resident_kib().saturating_sub(before);
        eprintln!("three 64 GiB frame headers refused; resident memory +{grown} KiB");
        assert!(grown < 4 * 1024, "resident memory grew by {grown} KiB");
    })
    .await;
}

#[tokio::test]
async fn a_huge_frame_from_a_peer_naming_no_engine_ends_start_up_with_a_run_level_error() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let gw = bind(&dir).await;
        let e = refused(&gw, gw.handshake_endpoint(), hostile_bytes("DEALER", None, HUGE)).await;
        let limit = MAX_HANDSHAKE_SOCKET_FRAME_BYTES;
        assert_eq!(e, TransportError::FrameTooLarge { socket: GuardedSocket::Handshake, declared: HUGE, limit });
        assert_eq!(
            e.to_string(),
            "a peer declared a frame of 68719476736 bytes on the handshake socket (limit 1048576 bytes)"
        );
        let r = gw.refused_frame().unwrap();
        assert_eq!((r.engine, r.declared), (None, HUGE));
        gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_frame_at_the_limit_passes_the_guard_and_one_byte_over_is_refused() {
    within(async {
        // One byte over: refused at the header, naming the limit.
        let dir = tempfile::tempdir().unwrap();
        let gw = bind(&dir).await;
        let over = MAX_HANDSHAKE_SOCKET_FRAME_BYTES + 1;
        let e = refused(&gw, gw.handshake_endpoint(), hostile_bytes("DEALER", Some(&engine_identity(0)), over)).await;
        let limit = MAX_HANDSHAKE_SOCKET_FRAME_BYTES;
        let cause = DeathCause::FrameTooLarge { socket: GuardedSocket::Handshake, declared: over, limit };
        assert_eq!(e, TransportError::EngineDead { engine: 0, cause });
        gw.shutdown().await;

        // At the limit: through the guard to the handshake decoder, which
        // reads it as a (malformed) handshake message, not a refusal.
        let dir = tempfile::tempdir().unwrap();
        let gw = bind(&dir).await;
        let mut hs = dealer();
        hs.connect(gw.handshake_endpoint()).await.unwrap();
        let at_limit = vec![0xc0u8; MAX_HANDSHAKE_FRAME_BYTES];
        hs.send(ZmqMessage::from(Bytes::from(at_limit))).await.unwrap();
        let deadline = Instant::now() + VERDICT;
        loop {
            let errors = gw.stats().await.protocol_errors;
            if !errors.is_empty() {
                assert!(errors.iter().all(|p| !p.contains("declared a frame")), "{errors:?}");
                break;
            }
            assert!(Instant::now() < deadline, "the frame at the limit never reached the gateway");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(gw.refused_frame().is_none());
        gw.shutdown().await;
    })
    .await;
}

/// The negative check, in a child process (the reservation may abort it):
/// a `zeromq` ROUTER bound with no guard in front, and the same hostile
/// bytes. Run by the test below; ignored on its own.
#[tokio::test]
#[ignore = "run as a child process by without_the_guard_the_socket_layer_reserves_the_declared_size"]
async fn unguarded_router_child() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("ipc://{}", dir.path().join("bare.sock").display());
    let mut router = zeromq::RouterSocket::new();
    router.bind(&endpoint).await.unwrap();
    let recv = tokio::spawn(async move {
        let _ = router.recv().await;
    });
    let before = status_kib("VmSize:");
    let _peer = hostile_peer(&endpoint, hostile_bytes("DEALER", Some(&engine_identity(0)), HUGE));
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Still alive: the reservation was granted (overcommit) and is held.
    println!("UNGUARDED-VMSIZE-GROWTH-KIB {}", status_kib("VmSize:").saturating_sub(before));
    recv.abort();
}

#[test]
fn without_the_guard_the_socket_layer_reserves_the_declared_size() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "unguarded_router_child", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let growth = stdout
        .lines()
        .find_map(|l| l.strip_prefix("UNGUARDED-VMSIZE-GROWTH-KIB "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    match growth {
        // Overcommitted: the process holds a 64 GiB reservation a peer asked for.
        Some(kib) => {
            eprintln!("unguarded: the reservation was granted, virtual size +{kib} KiB");
            assert!(kib >= HUGE / 1024, "virtual size grew by only {kib} KiB");
        }
        // The allocation failed: the process aborted.
        None => {
            eprintln!("unguarded: the child ended with {:?}: {}", out.status, stderr.lines().last().unwrap_or(""));
            assert!(!out.status.success(), "the child neither aborted nor reported: {stdout}\n{stderr}");
            assert!(stderr.contains("memory allocation of"), "{stderr}");
        }
    }
}
