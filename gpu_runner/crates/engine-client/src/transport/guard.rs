//! The frame guard: a byte proxy in front of every socket the gateway binds
//! for engines, refusing a ZeroMQ frame whose declared size is past a limit
//! before the `zeromq` crate sees its header.
//!
//! Why: `zeromq` 0.7 reserves a frame's declared length as soon as it has
//! read the header, before the body arrives, and has no maximum message
//! size. A local peer declaring a frame of 64 GiB would make the gateway
//! reserve it (and abort when the allocation fails).
//!
//! How: the `zeromq` socket binds a private `ipc://` path (in a fresh mode
//! 0700 directory inside the ipc directory, named nowhere an engine is
//! told). The guard listens on the public endpoint, the one the engine is
//! told to dial (tcp on 127.0.0.1 or an `ipc://` path, as before), and for
//! each connection it accepts, connects to the private path and copies
//! bytes both ways, in chunks of at most [`CHUNK_BYTES`]. What goes to the
//! engine is copied as it is; what comes from it is read by a
//! [`FrameScanner`], incrementally, and forwarded only once each chunk
//! passed: a frame header declaring more than the socket's limit closes
//! both halves of that connection at once, before any byte of that chunk is
//! forwarded (so `zeromq` never sees the header), and is reported to the
//! transport ([`FrameRefused`]).
//!
//! ZMTP 3.0 / 3.1 facts relied on (RFC 23/ZMTP,
//! <https://rfc.zeromq.org/spec/23/>; RFC 37/ZMTP 3.1,
//! <https://rfc.zeromq.org/spec/37/>):
//!
//! - a connection starts with a 64-byte greeting from each side: the
//!   10-byte signature (`0xFF`, 8 padding bytes, `0x7F`), the version (major,
//!   minor; 3.x here), a 20-byte mechanism name (`NULL`, `PLAIN`, `CURVE`),
//!   the as-server byte and 31 filler bytes;
//! - everything after the greeting is frames: `flags | size | body`. Flags
//!   bit 0 is MORE, bit 1 LONG (the size is 8 bytes, big-endian, else
//!   1 byte), bit 2 COMMAND; bits 3 to 7 are reserved and zero;
//! - the security handshake and control traffic (READY, ERROR, PING / PONG,
//!   SUBSCRIBE / CANCEL in 3.1) are command frames: the body is a
//!   length-prefixed name (1 byte, then the name), then the command's data;
//!   READY's data is metadata properties, each `name-size (1 byte) | name |
//!   value-size (4 bytes, big-endian) | value`, names case-insensitive; the
//!   `Identity` property is the peer's routing identity (a ROUTER names
//!   the peer's messages with it; an engine's is its index, 2 bytes
//!   little-endian).
//!
//! A greeting that is not ZMTP 3 (`zeromq` refuses those too) or a frame
//! with reserved flag bits set also closes the connection, reported as a
//! protocol error. The identity in a READY of at most
//! [`CAPTURED_COMMAND_BYTES`] is read so that a refused frame on the
//! handshake or input socket names the engine.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use zeromq::Socket;

use super::sockets::{bind_socket, ipc_path, remove_stale_socket, Inbound};
use super::TransportError;

/// The largest read or write the guard makes; what it holds per connection
/// and direction.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// The largest frame an engine may send on the handshake and input sockets:
/// what crosses them is HELLO, READY and the registration, each one frame
/// the decoder refuses past [`super::handshake::MAX_HANDSHAKE_FRAME_BYTES`].
pub const MAX_HANDSHAKE_SOCKET_FRAME_BYTES: u64 = super::handshake::MAX_HANDSHAKE_FRAME_BYTES as u64;

/// Connections one guard serves at once (an engine makes one per socket);
/// past it a new connection is closed as soon as it is accepted. Bounds the
/// guard's buffers at `2 * CHUNK_BYTES` per connection.
pub const MAX_CONNECTIONS_PER_SOCKET: usize = 128;

/// Command bodies up to this size are kept (inline) to read READY's
/// `Identity`; a larger command is forwarded without being read.
pub const CAPTURED_COMMAND_BYTES: usize = 512;

const GREETING_BYTES: u64 = 64;
const FLAG_LONG: u8 = 0x02;
const FLAG_COMMAND: u8 = 0x04;
const FLAGS_RESERVED: u8 = 0xF8;

/// A socket the gateway binds for engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GuardedSocket {
    /// The handshake ROUTER (HELLO, INIT, READY).
    Handshake,
    /// The input ROUTER (ADD, ABORT, UTILITY out; the registration in).
    Input,
    /// One engine's output PULL.
    Output,
}

impl GuardedSocket {
    pub fn name(self) -> &'static str {
        match self {
            GuardedSocket::Handshake => "handshake",
            GuardedSocket::Input => "input",
            GuardedSocket::Output => "output",
        }
    }
}

impl std::fmt::Display for GuardedSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A frame a guard refused, as the transport is told of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRefused {
    pub socket: GuardedSocket,
    /// The engine: the output socket's own, or the `Identity` of the
    /// connection's READY; `None` when the peer gave none.
    pub engine: Option<u16>,
    /// The size the frame header declared.
    pub declared: u64,
    pub limit: u64,
}

impl std::fmt::Display for FrameRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.engine {
            Some(e) => write!(f, "engine {e}")?,
            None => f.write_str("a peer that gave no engine identity")?,
        }
        write!(
            f,
            " declared a frame of {} bytes on the {} socket (limit {} bytes); connection closed",
            self.declared, self.socket, self.limit
        )
    }
}

/// Why the scanner stopped a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameRefusal {
    /// A frame header declared `declared` bytes, past `limit`.
    TooLarge { declared: u64, limit: u64 },
    /// The greeting is not a ZMTP 3 greeting (byte `at` is `byte`).
    Greeting { at: u8, byte: u8 },
    /// A frame's flags have reserved bits set.
    ReservedFlags(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Bytes of the greeting seen so far.
    Greeting(u8),
    /// Bytes of a frame header seen so far (flags, then 1 or 8 size bytes).
    Header(u8),
    /// Body bytes still to come.
    Body(u64),
}

/// Reads the engine-to-gateway byte stream of one connection, incrementally
/// and without allocating: the greeting, then each frame header against
/// the limit; bodies are skipped (small commands are kept to read READY's
/// `Identity`).
#[derive(Debug, Clone)]
pub struct FrameScanner {
    limit: u64,
    state: State,
    header: [u8; 9],
    /// The current frame is a command being kept.
    capturing: bool,
    captured: [u8; CAPTURED_COMMAND_BYTES],
    captured_len: usize,
    identity: Option<u16>,
}

impl FrameScanner {
    pub fn new(limit: u64) -> Self {
        FrameScanner {
            limit,
            state: State::Greeting(0),
            header: [0; 9],
            capturing: false,
            captured: [0; CAPTURED_COMMAND_BYTES],
            captured_len: 0,
            identity: None,
        }
    }

    /// The engine the connection's READY named (its `Identity`), if any.
    pub fn engine(&self) -> Option<u16> {
        self.identity
    }

    /// Reads `bytes`, the next bytes of the stream. After an error the
    /// connection must be closed (the scanner's state is undefined).
    pub fn scan(&mut self, mut bytes: &[u8]) -> Result<(), FrameRefusal> {
        while !bytes.is_empty() {
            match self.state {
                State::Greeting(seen) => {
                    let take = (GREETING_BYTES - u64::from(seen)).min(bytes.len() as u64) as usize;
                    for (i, &b) in bytes[..take].iter().enumerate() {
                        let at = seen + i as u8;
                        let bad = match at {
                            0 => b != 0xFF,
                            9 => b != 0x7F,
                            10 => b < 3,
                            _ => false,
                        };
                        if bad {
                            return Err(FrameRefusal::Greeting { at, byte: b });
                        }
                    }
                    let seen = seen + take as u8;
                    self.state =
                        if u64::from(seen) == GREETING_BYTES { State::Header(0) } else { State::Greeting(seen) };
                    bytes = &bytes[take..];
                }
                State::Header(seen) => {
                    let seen = usize::from(seen);
                    let flags = if seen == 0 { bytes[0] } else { self.header[0] };
                    if flags & FLAGS_RESERVED != 0 {
                        return Err(FrameRefusal::ReservedFlags(flags));
                    }
                    let need = if flags & FLAG_LONG != 0 { 9 } else { 2 };
                    let take = (need - seen).min(bytes.len());
                    self.header[seen..seen + take].copy_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                    let seen = seen + take;
                    if seen < need {
                        self.state = State::Header(seen as u8);
                        continue;
                    }
                    let flags = self.header[0];
                    let declared = if need == 9 {
                        let mut size = [0u8; 8];
                        size.copy_from_slice(&self.header[1..9]);
                        u64::from_be_bytes(size)
                    } else {
                        u64::from(self.header[1])
                    };
                    if declared > self.limit {
                        return Err(FrameRefusal::TooLarge { declared, limit: self.limit });
                    }
                    self.capturing = flags & FLAG_COMMAND != 0 && declared <= CAPTURED_COMMAND_BYTES as u64;
                    self.captured_len = 0;
                    self.state = State::Body(declared);
                    if declared == 0 {
                        self.end_frame();
                    }
                }
                State::Body(left) => {
                    let take = left.min(bytes.len() as u64) as usize;
                    if self.capturing {
                        self.captured[self.captured_len..self.captured_len + take].copy_from_slice(&bytes[..take]);
                        self.captured_len += take;
                    }
                    bytes = &bytes[take..];
                    let left = left - take as u64;
                    self.state = State::Body(left);
                    if left == 0 {
                        self.end_frame();
                    }
                }
            }
        }
        Ok(())
    }

    fn end_frame(&mut self) {
        if self.capturing {
            if let Some(id) = ready_identity(&self.captured[..self.captured_len]) {
                self.identity = engine_protocol::engine_index(id).ok();
            }
            self.capturing = false;
        }
        self.state = State::Header(0);
    }
}

/// The `Identity` property of a READY command body; `None` for another
/// command, no such property, or a body that does not parse.
fn ready_identity(body: &[u8]) -> Option<&[u8]> {
    let (&name_len, rest) = body.split_first()?;
    let name = rest.get(..usize::from(name_len))?;
    if name != b"READY" {
        return None;
    }
    let mut rest = &rest[usize::from(name_len)..];
    while let Some((&len, after)) = rest.split_first() {
        let name = after.get(..usize::from(len))?;
        let after = &after[usize::from(len)..];
        let size = u32::from_be_bytes(after.get(..4)?.try_into().ok()?) as usize;
        let value = after.get(4..4usize.checked_add(size)?)?;
        if name.eq_ignore_ascii_case(b"Identity") {
            return Some(value);
        }
        rest = &after[4 + size..];
    }
    None
}

/// A bound guard: the public endpoint engines dial, and the task that
/// accepts on it (abort it to stop accepting).
pub(crate) struct Guard {
    pub(crate) public: String,
    pub(crate) task: JoinHandle<()>,
}

/// What a guard's connections report to.
#[derive(Clone)]
pub(crate) struct GuardSpec {
    pub(crate) socket: GuardedSocket,
    /// The engine, for an output socket.
    pub(crate) engine: Option<u16>,
    pub(crate) limit: u64,
    pub(crate) report: mpsc::Sender<Inbound>,
}

/// Binds `socket` on a private path `inner_dir/inner_name`, then the guard
/// on `public`, in front of it. Returns the resolved public endpoint.
pub(crate) async fn bind_guarded<S: Socket>(
    socket: &mut S,
    public: &str,
    inner_dir: &Path,
    inner_name: &str,
    spec: GuardSpec,
) -> Result<Guard, TransportError> {
    let inner_path = inner_dir.join(inner_name);
    bind_socket(socket, &format!("ipc://{}", inner_path.display())).await?;
    let bind_err = |detail: String| TransportError::Bind { endpoint: public.to_string(), detail };
    let (listener, resolved) = if let Some(path) = ipc_path(public) {
        remove_stale_socket(path).map_err(|e| bind_err(e.to_string()))?;
        (Listener::Unix(UnixListener::bind(path).map_err(|e| bind_err(e.to_string()))?), public.to_string())
    } else if let Some(addr) = public.strip_prefix("tcp://") {
        let addr = match addr.strip_prefix("*:") {
            Some(port) => format!("0.0.0.0:{port}"),
            None => addr.to_string(),
        };
        let l = TcpListener::bind(addr.as_str()).await.map_err(|e| bind_err(e.to_string()))?;
        let local = l.local_addr().map_err(|e| bind_err(e.to_string()))?;
        (Listener::Tcp(l), format!("tcp://{local}"))
    } else {
        return Err(bind_err("only tcp:// and ipc:// endpoints are supported".into()));
    };
    let task = tokio::spawn(accept_loop(listener, inner_path, spec));
    Ok(Guard { public: resolved, task })
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    async fn readable(&self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.readable().await,
            Conn::Unix(s) => s.readable().await,
        }
    }
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.try_read(buf),
            Conn::Unix(s) => s.try_read(buf),
        }
    }
    async fn writable(&self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.writable().await,
            Conn::Unix(s) => s.writable().await,
        }
    }
    fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.try_write(buf),
            Conn::Unix(s) => s.try_write(buf),
        }
    }

    /// Reads at least one byte; `Ok(0)` at the end of the stream.
    async fn read_some(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.readable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }

    async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.try_write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

async fn accept_loop(listener: Listener, inner: PathBuf, spec: GuardSpec) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS_PER_SOCKET));
    let inner = Arc::new(inner);
    loop {
        let accepted = match &listener {
            Listener::Tcp(l) => l.accept().await.map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Conn::Tcp(s)
            }),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Conn::Unix(s)),
        };
        let conn = match accepted {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors and the like: say so, wait, go on.
                let _ =
                    spec.report.try_send(Inbound::SocketError(format!("{} socket guard: accept: {e}", spec.socket)));
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            let _ = spec.report.try_send(Inbound::SocketError(format!(
                "{} socket guard: more than {MAX_CONNECTIONS_PER_SOCKET} connections at once; closed a new one",
                spec.socket
            )));
            continue;
        };
        let (inner, spec) = (inner.clone(), spec.clone());
        tokio::spawn(async move {
            serve(conn, &inner, spec).await;
            drop(permit);
        });
    }
}

/// How a proxied connection ended.
enum Ended {
    Closed,
    Refused(FrameRefusal),
}

async fn serve(outer: Conn, inner_path: &Path, spec: GuardSpec) {
    let inner = match UnixStream::connect(inner_path).await {
        Ok(s) => Conn::Unix(s),
        Err(e) => {
            let _ = spec.report.send(Inbound::SocketError(format!("{} socket guard: connect: {e}", spec.socket))).await;
            return;
        }
    };
    let mut scanner = FrameScanner::new(spec.limit);
    let ended = tokio::select! {
        e = engine_to_gateway(&outer, &inner, &mut scanner) => e,
        () = copy(&inner, &outer) => Ended::Closed,
    };
    if let Ended::Refused(why) = ended {
        // The engine's side first; the socket's connection only once the
        // transport has the cause, so that the disconnect it sees next is
        // not taken for the cause.
        drop(outer);
        let report = match why {
            FrameRefusal::TooLarge { declared, limit } => Inbound::FrameRefused(FrameRefused {
                socket: spec.socket,
                engine: spec.engine.or(scanner.engine()),
                declared,
                limit,
            }),
            other => Inbound::SocketError(format!("{} socket guard: connection closed: {other:?}", spec.socket)),
        };
        let _ = spec.report.send(report).await;
    }
    drop(inner);
}

async fn engine_to_gateway(from: &Conn, to: &Conn, scanner: &mut FrameScanner) -> Ended {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match from.read_some(&mut buf).await {
            Ok(0) | Err(_) => return Ended::Closed,
            Ok(n) => n,
        };
        if let Err(why) = scanner.scan(&buf[..n]) {
            return Ended::Refused(why);
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return Ended::Closed;
        }
    }
}

async fn copy(from: &Conn, to: &Conn) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        let n = match from.read_some(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greeting() -> Vec<u8> {
        let mut g = vec![0u8; 64];
        g[0] = 0xFF;
        g[9] = 0x7F;
        g[10] = 3;
        g[11] = 1;
        g[12..16].copy_from_slice(b"NULL");
        g
    }

    fn frame(flags: u8, body: &[u8], long: bool) -> Vec<u8> {
        let mut f = Vec::new();
        if long {
            f.push(flags | FLAG_LONG);
            f.extend_from_slice(&(body.len() as u64).to_be_bytes());
        } else {
            f.push(flags);
            f.push(body.len() as u8);
        }
        f.extend_from_slice(body);
        f
    }

    fn ready(identity: &[u8]) -> Vec<u8> {
        let mut b = vec![5];
        b.extend_from_slice(b"READY");
        for (name, value) in [(&b"Socket-Type"[..], &b"DEALER"[..]), (b"Identity", identity)] {
            b.push(name.len() as u8);
            b.extend_from_slice(name);
            b.extend_from_slice(&(value.len() as u32).to_be_bytes());
            b.extend_from_slice(value);
        }
        frame(FLAG_COMMAND, &b, false)
    }

    /// Scans `stream` cut at `cut`, and as one piece; both answers agree.
    fn scan_split(limit: u64, stream: &[u8], cut: usize) -> (Result<(), FrameRefusal>, Option<u16>) {
        let mut s = FrameScanner::new(limit);
        let r = s.scan(&stream[..cut]).and_then(|()| s.scan(&stream[cut..]));
        (r, s.engine())
    }

    fn header_long(size: u64) -> Vec<u8> {
        let mut h = vec![FLAG_LONG];
        h.extend_from_slice(&size.to_be_bytes());
        h
    }

    #[test]
    fn frames_split_across_reads_at_every_byte_scan_alike_and_a_frame_at_the_limit_passes() {
        let limit = 300u64;
        let mut stream = greeting();
        stream.extend(ready(&[7, 0]));
        stream.extend(frame(0x01, b"more to come", false));
        stream.extend(frame(0, &[0xAB; 200], true));
        stream.extend(frame(0, &[], false));
        stream.extend(frame(FLAG_COMMAND, b"\x04PING\x00\x00", false));
        stream.extend(frame(0, &vec![1u8; limit as usize], true));
        stream.extend(frame(0, &[2u8; 255], false));
        for cut in 0..=stream.len() {
            assert_eq!(scan_split(limit, &stream, cut), (Ok(()), Some(7)), "cut at {cut}");
        }
        // Byte by byte.
        let mut s = FrameScanner::new(limit);
        for b in &stream {
            s.scan(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(s.engine(), Some(7));
    }

    #[test]
    fn a_frame_one_byte_over_the_limit_is_refused_at_its_header_wherever_the_header_is_cut() {
        for limit in [100u64, 255, 256, 1 << 20] {
            for (header, declared) in [(header_long(limit + 1), limit + 1), (header_long(64 << 30), 64 << 30)] {
                let mut stream = greeting();
                stream.extend(ready(&[1, 0]));
                stream.extend(&header);
                // A few body bytes; the refusal does not wait for them.
                stream.extend([0u8; 3]);
                let header_end = stream.len() - 3;
                for cut in 0..=stream.len() {
                    let (r, _) = scan_split(limit, &stream, cut);
                    assert_eq!(r, Err(FrameRefusal::TooLarge { declared, limit }), "limit {limit}, cut at {cut}");
                }
                // The header alone is refused; one byte short of it is not.
                let mut s = FrameScanner::new(limit);
                assert_eq!(s.scan(&stream[..header_end - 1]), Ok(()));
                assert_eq!(
                    s.scan(&stream[header_end - 1..header_end]),
                    Err(FrameRefusal::TooLarge { declared, limit })
                );
            }
        }
        // Short frames: 255 bytes at most, so a limit under 255 refuses them.
        let mut stream = greeting();
        stream.extend(frame(0, &[0; 11], false));
        assert_eq!(scan_split(10, &stream, 64).0, Err(FrameRefusal::TooLarge { declared: 11, limit: 10 }));
        assert_eq!(scan_split(11, &stream, 64).0, Ok(()));
        // Commands are frames like any other.
        let mut stream = greeting();
        let mut command = header_long(1 << 40);
        command[0] |= FLAG_COMMAND;
        stream.extend(command);
        assert_eq!(
            scan_split(1 << 20, &stream, 70).0,
            Err(FrameRefusal::TooLarge { declared: 1 << 40, limit: 1 << 20 })
        );
    }

    #[test]
    fn a_greeting_that_is_not_zmtp_3_and_reserved_flags_are_refused() {
        let mut g = greeting();
        g[10] = 2;
        assert_eq!(FrameScanner::new(10).scan(&g), Err(FrameRefusal::Greeting { at: 10, byte: 2 }));
        let mut g = greeting();
        g[0] = 0x00;
        assert_eq!(FrameScanner::new(10).scan(&g), Err(FrameRefusal::Greeting { at: 0, byte: 0 }));
        let mut g = greeting();
        g.push(0x10);
        assert_eq!(FrameScanner::new(10).scan(&g), Err(FrameRefusal::ReservedFlags(0x10)));
    }

    #[test]
    fn the_identity_is_read_from_ready_only() {
        assert_eq!(ready_identity(&ready(&[3, 1])[2..]), Some(&[3, 1][..]));
        // Not READY; a truncated property; an empty body.
        assert_eq!(ready_identity(b"\x04PING\x00\x00"), None);
        assert_eq!(ready_identity(b"\x05READY\x08Identity\x00\x00\x00\x09ab"), None);
        assert_eq!(ready_identity(b""), None);
        // A READY larger than the kept size is forwarded without an identity.
        let mut stream = greeting();
        let mut body = vec![5];
        body.extend_from_slice(b"READY");
        body.push(4);
        body.extend_from_slice(b"Junk");
        body.extend_from_slice(&(CAPTURED_COMMAND_BYTES as u32).to_be_bytes());
        body.extend(vec![0u8; CAPTURED_COMMAND_BYTES]);
        stream.extend(frame(FLAG_COMMAND, &body, true));
        let mut s = FrameScanner::new(1 << 20);
        assert_eq!(s.scan(&stream), Ok(()));
        assert_eq!(s.engine(), None);
    }
}
