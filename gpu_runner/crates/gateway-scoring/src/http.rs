//! The blocking HTTP/1.1 client of gateway mode, on `hyper` (the HTTP
//! framing: status line, headers, `Content-Length`, `chunked`, bodies to
//! EOF, is hyper's, not ours): one request per connection (`Connection:
//! close`), the `data:` lines of a server-sent event stream. No TLS, no
//! redirects (a 3xx is a response like any other), no keep-alive.
//!
//! The gateway under test is untrusted (docs/limits.md "Peers"): its
//! response head is bounded by hyper's read buffer ([`MAX_HEAD_BYTES`]),
//! its body by [`HttpLimits::body_bytes`], one server-sent event by
//! [`HttpLimits::event_bytes`], and everything by the request's deadline;
//! a peer past a limit gets [`HttpError::TooLarge`], naming the limit, and
//! the connection is dropped.
//!
//! Failures are typed ([`HttpError`], [`MalformedResponse`], [`NotJson`]):
//! the gateway checks decide on the variant (a client that gave up waiting
//! is [`HttpError::Timeout`], a refused connection [`HttpError::Connect`]),
//! never on the message. The messages are the ones reports and
//! docs/reports/scoreboard.md quote.

use std::fmt;
use std::net::{TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Why a request got no complete response. `Clone` (I/O errors are shared)
/// so an observation that holds one can be copied.
#[derive(Debug, Clone)]
pub enum HttpError {
    /// `addr` did not resolve, or resolved to no address (`source: None`).
    Resolve { addr: String, source: Option<Arc<std::io::Error>> },
    /// The TCP connection was not made (refused, unreachable, timed out).
    Connect { addr: String, source: Arc<std::io::Error> },
    /// Setting a socket option failed.
    Socket(Arc<std::io::Error>),
    /// The request could not be sent.
    Send { addr: String, source: Arc<std::io::Error> },
    /// Reading the response failed (other than by the deadline).
    Read { addr: String, source: Arc<std::io::Error> },
    /// The client gave up: no complete response within `timeout`.
    Timeout { method: String, path: String, timeout: Duration, received: usize },
    /// The peer closed the connection before a complete response (and what
    /// it sent parses as an incomplete one).
    Closed { method: String, path: String },
    /// What arrived is not a well-formed HTTP/1.x response.
    Malformed(MalformedResponse),
    /// The JSON request body could not be serialised.
    Encode(String),
    /// The response passed a limit ([`HttpLimits`], [`MAX_HEAD_BYTES`]):
    /// what (`head`, `body`, `event`) and the limit in bytes.
    TooLarge { method: String, path: String, what: &'static str, limit: usize },
    /// The client closed the connection on purpose
    /// ([`ClientBehavior::close_after_events`]) after `events` server-sent
    /// events (`received` bytes).
    ClosedByClient { method: String, path: String, events: usize, received: usize },
}

impl HttpError {
    /// The client gave up waiting (as opposed to the connection failing or
    /// the peer answering something unusable).
    pub fn is_timeout(&self) -> bool {
        matches!(self, HttpError::Timeout { .. })
    }

    /// The client hung up on purpose (a disconnecting client).
    pub fn is_closed_by_client(&self) -> bool {
        matches!(self, HttpError::ClosedByClient { .. })
    }

    /// Nothing accepted the connection (no server listening: a gateway
    /// that exited, or one not serving HTTP yet).
    pub fn is_refused(&self) -> bool {
        matches!(self, HttpError::Connect { source, .. } if source.kind() == std::io::ErrorKind::ConnectionRefused)
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Resolve { addr, source: Some(e) } => write!(f, "{addr}: {e}"),
            HttpError::Resolve { addr, source: None } => write!(f, "{addr}: no address"),
            HttpError::Connect { addr, source } => write!(f, "connect {addr}: {source}"),
            HttpError::Socket(e) => write!(f, "{e}"),
            HttpError::Send { addr, source } => write!(f, "send to {addr}: {source}"),
            HttpError::Read { addr, source } => write!(f, "read from {addr}: {source}"),
            HttpError::Timeout { method, path, timeout, received } => write!(
                f,
                "{method} {path}: no complete response within {:.1}s ({received} bytes so far)",
                timeout.as_secs_f64()
            ),
            HttpError::Closed { method, path } => {
                write!(f, "{method} {path}: connection closed before a complete response")
            }
            HttpError::Malformed(e) => write!(f, "{e}"),
            HttpError::Encode(e) => write!(f, "{e}"),
            HttpError::TooLarge { method, path, what, limit } => {
                write!(f, "{method} {path}: the response {what} passed the client's limit of {limit} bytes")
            }
            HttpError::ClosedByClient { method, path, events, received } => {
                write!(f, "{method} {path}: the client closed the connection after {events} events ({received} bytes)")
            }
        }
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HttpError::Resolve { source: Some(e), .. }
            | HttpError::Connect { source: e, .. }
            | HttpError::Socket(e)
            | HttpError::Send { source: e, .. }
            | HttpError::Read { source: e, .. } => Some(e.as_ref()),
            HttpError::Malformed(e) => Some(e),
            _ => None,
        }
    }
}

impl From<MalformedResponse> for HttpError {
    fn from(e: MalformedResponse) -> Self {
        HttpError::Malformed(e)
    }
}

/// Bytes that are not (the start of) an HTTP/1.x response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MalformedResponse {
    /// The peer closed inside the status line or headers.
    HeadCut,
    /// The head is not UTF-8.
    HeadNotUtf8,
    /// The status line does not start with `HTTP/1.` (the line, shortened).
    NotHttp1(String),
    /// The status line has no numeric status code.
    BadStatusLine(String),
    /// A header line without a colon.
    BadHeader(String),
    /// A `Content-Length` that is not a number.
    BadContentLength(String),
    /// The peer closed before the body was complete.
    BodyCut,
    /// A chunk-size line that is not UTF-8.
    ChunkSizeNotUtf8,
    /// A chunk-size line that is not hexadecimal.
    BadChunkSize(String),
    /// hyper refused the response head or body framing (its reason).
    Invalid(String),
}

impl fmt::Display for MalformedResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MalformedResponse::HeadCut => f.write_str("connection closed inside the response head"),
            MalformedResponse::HeadNotUtf8 => f.write_str("response head is not UTF-8"),
            MalformedResponse::NotHttp1(l) => write!(f, "not an HTTP/1.x response: {l}"),
            MalformedResponse::BadStatusLine(l) => write!(f, "bad status line: {l}"),
            MalformedResponse::BadHeader(l) => write!(f, "bad header line: {l}"),
            MalformedResponse::BadContentLength(v) => write!(f, "bad content-length {v:?}"),
            MalformedResponse::BodyCut => f.write_str("connection closed before the body was complete"),
            MalformedResponse::ChunkSizeNotUtf8 => f.write_str("chunk size is not UTF-8"),
            MalformedResponse::BadChunkSize(l) => write!(f, "bad chunk size {l:?}"),
            MalformedResponse::Invalid(why) => write!(f, "not a valid HTTP/1.x response: {why}"),
        }
    }
}

impl std::error::Error for MalformedResponse {}

/// A response body that is not JSON: serde_json's reason and the start of
/// the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotJson {
    pub reason: String,
    /// The body as text, shortened to 300 characters.
    pub body_start: String,
}

impl fmt::Display for NotJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "response body is not JSON ({}): {}", self.reason, self.body_start)
    }
}

impl std::error::Error for NotJson {}

/// A response as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased, grouped by name (as hyper keeps them).
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Result<serde_json::Value, NotJson> {
        serde_json::from_slice(&self.body)
            .map_err(|e| NotJson { reason: e.to_string(), body_start: short(&self.text()) })
    }
}

fn short(s: &str) -> String {
    let mut t: String = s.chars().take(300).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// How the client reads a response: as fast as it can (the default), or
/// as a slow or an impatient client does (gateway lifecycle scenarios).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientBehavior {
    /// A pause before each read after the first.
    pub read_delay: Option<Duration>,
    /// Bytes per read (default 16 KiB).
    pub read_size: Option<usize>,
    /// The socket's receive buffer (`SO_RCVBUF`, which Linux doubles), so
    /// that a slow reader pushes back on the server instead of the kernel
    /// buffering the whole response.
    pub recv_buffer: Option<usize>,
    /// Close the connection once this many server-sent events (`data:`
    /// lines) have arrived: a client that goes away mid-stream.
    pub close_after_events: Option<usize>,
    /// What the client accepts of the response.
    pub limits: HttpLimits,
}

/// The most of a response the client takes (docs/limits.md "Peers").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// The body, de-chunked.
    pub body_bytes: usize,
    /// One server-sent event (the bytes between two blank lines) of a
    /// `text/event-stream` body.
    pub event_bytes: usize,
}

/// The default [`HttpLimits::body_bytes`]: 64 MiB, far above any answer
/// of a gateway to the suite's requests (the largest, prompt logprobs of
/// a long prompt, is well under 1 MiB).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// The default [`HttpLimits::event_bytes`]: 1 MiB.
pub const MAX_EVENT_BYTES: usize = 1024 * 1024;
/// The response head (status line and headers) fits in hyper's read
/// buffer, which is bounded to this.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The most header lines a response head may have (hyper refuses more as
/// a parse error).
pub const MAX_HEADERS: usize = 4096;

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits { body_bytes: MAX_BODY_BYTES, event_bytes: MAX_EVENT_BYTES }
    }
}

/// Sends one request to `addr` (`host:port`) and reads the whole response
/// within `timeout`.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
) -> Result<Response, HttpError> {
    request_as(addr, method, path, body, timeout, &ClientBehavior::default())
}

fn set_recv_buffer(s: &TcpStream, bytes: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket descriptor and a c_int option of its size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// [`request`], the response read as `client` reads it. Blocking: it runs
/// the request on a runtime of its own (on a thread of its own when called
/// from inside a tokio runtime).
pub fn request_as(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
    client: &ClientBehavior,
) -> Result<Response, HttpError> {
    let run = || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| HttpError::Socket(Arc::new(e)))?;
        rt.block_on(request_async(addr, method, path, body, timeout, client))
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    } else {
        run()
    }
}

async fn request_async(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
    client: &ClientBehavior,
) -> Result<Response, HttpError> {
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| HttpError::Resolve { addr: addr.to_string(), source: Some(Arc::new(e)) })?
        .next()
        .ok_or_else(|| HttpError::Resolve { addr: addr.to_string(), source: None })?;
    let s = TcpStream::connect_timeout(&sock, timeout)
        .map_err(|e| HttpError::Connect { addr: addr.to_string(), source: Arc::new(e) })?;
    let socket_err = |e| HttpError::Socket(Arc::new(e));
    let _ = s.set_nodelay(true);
    if let Some(b) = client.recv_buffer {
        set_recv_buffer(&s, b).map_err(socket_err)?;
    }
    s.set_nonblocking(true).map_err(socket_err)?;
    let s = tokio::net::TcpStream::from_std(s).map_err(socket_err)?;
    let mut exchange =
        Exchange { addr, method, path, client, received: 0, wire_bytes: Arc::default(), events: EventScan::default() };
    match tokio::time::timeout(timeout, exchange.run(s, body)).await {
        Ok(r) => r,
        Err(_) => Err(HttpError::Timeout {
            method: method.to_string(),
            path: path.to_string(),
            timeout,
            received: exchange.received,
        }),
    }
}

/// One request and its response; what was received so far survives a
/// timeout.
struct Exchange<'a> {
    addr: &'a str,
    method: &'a str,
    path: &'a str,
    client: &'a ClientBehavior,
    /// Body bytes so far.
    received: usize,
    /// Bytes read off the socket so far (head included).
    wire_bytes: Arc<AtomicUsize>,
    events: EventScan,
}

impl Exchange<'_> {
    async fn run(&mut self, s: tokio::net::TcpStream, body: Option<(&str, &[u8])>) -> Result<Response, HttpError> {
        let io = TokioIo::new(Paced::new(s, self.client, self.wire_bytes.clone()));
        let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
            .max_buf_size(MAX_HEAD_BYTES)
            .max_headers(MAX_HEADERS)
            .handshake::<_, Full<Bytes>>(io)
            .await
            .map_err(|e| self.hyper_error(e, false))?;
        let conn = tokio::spawn(conn);
        let mut req = hyper::Request::builder()
            .method(self.method)
            .uri(self.path)
            .header("host", self.addr)
            .header("connection", "close")
            .header("accept", "*/*");
        if let Some((ctype, _)) = body {
            req = req.header("content-type", ctype);
        }
        let bytes = body.map(|(_, b)| Bytes::copy_from_slice(b)).unwrap_or_default();
        let req = req.body(Full::new(bytes)).map_err(|e| HttpError::Encode(e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| self.hyper_error(e, false));
        let resp = match resp {
            Ok(r) => r,
            Err(e) => {
                conn.abort();
                return Err(e);
            }
        };
        let status = resp.status().as_u16();
        let headers: Vec<(String, String)> = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).trim().to_string()))
            .collect();
        let is_sse = headers.iter().any(|(k, v)| k == "content-type" && v.starts_with("text/event-stream"));
        let mut incoming = resp.into_body();
        let mut out = Vec::new();
        let limits = self.client.limits;
        let result = loop {
            let Some(frame) = incoming.frame().await else { break Ok(()) };
            let frame = match frame {
                Ok(f) => f,
                Err(e) => break Err(self.hyper_error(e, true)),
            };
            let Ok(data) = frame.into_data() else { continue }; // trailers
            self.received += data.len();
            if self.received > limits.body_bytes {
                break Err(self.too_large("body", limits.body_bytes));
            }
            out.extend_from_slice(&data);
            if is_sse || self.client.close_after_events.is_some() {
                self.events.feed(&data);
                if is_sse && self.events.longest_event > limits.event_bytes {
                    break Err(self.too_large("event", limits.event_bytes));
                }
                if let Some(limit) = self.client.close_after_events {
                    if self.events.events >= limit {
                        break Err(HttpError::ClosedByClient {
                            method: self.method.to_string(),
                            path: self.path.to_string(),
                            events: self.events.events,
                            received: self.received,
                        });
                    }
                }
            }
        };
        // Dropping the body and the connection task closes the socket.
        drop(incoming);
        conn.abort();
        result.map(|()| Response { status, headers, body: out })
    }

    fn too_large(&self, what: &'static str, limit: usize) -> HttpError {
        HttpError::TooLarge { method: self.method.to_string(), path: self.path.to_string(), what, limit }
    }

    /// hyper's error as ours: an I/O failure, a head past the read buffer,
    /// a peer that closed early (in the head, or in the body once the head
    /// was read), or framing hyper refused.
    fn hyper_error(&self, e: hyper::Error, in_body: bool) -> HttpError {
        // hyper refuses a head that overflows its read buffer as a parse
        // error: told apart by what was read.
        if !in_body && e.is_parse() && self.wire_bytes.load(Ordering::Relaxed) >= MAX_HEAD_BYTES {
            return self.too_large("head", MAX_HEAD_BYTES);
        }
        if e.is_incomplete_message() {
            return HttpError::Malformed(if in_body { MalformedResponse::BodyCut } else { MalformedResponse::HeadCut });
        }
        let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
        while let Some(s) = src {
            if let Some(io) = s.downcast_ref::<std::io::Error>() {
                if in_body && io.kind() == std::io::ErrorKind::UnexpectedEof {
                    return HttpError::Malformed(MalformedResponse::BodyCut);
                }
                let source = Arc::new(std::io::Error::new(io.kind(), io.to_string()));
                return HttpError::Read { addr: self.addr.to_string(), source };
            }
            src = s.source();
        }
        if e.is_parse() || e.is_parse_status() || in_body {
            return HttpError::Malformed(MalformedResponse::Invalid(short(&e.to_string())));
        }
        HttpError::Send { addr: self.addr.to_string(), source: Arc::new(std::io::Error::other(e.to_string())) }
    }
}

/// Counts server-sent events (`data:` at a line's start) and the longest
/// event (bytes between blank lines) over a body fed in pieces.
#[derive(Debug, Default)]
struct EventScan {
    events: usize,
    longest_event: usize,
    /// Bytes of the current event so far.
    event_len: usize,
    /// The current line's first bytes (up to 5) and its length.
    line_start: [u8; 5],
    line_len: usize,
}

impl EventScan {
    fn feed(&mut self, data: &[u8]) {
        for &b in data {
            if b == b'\n' {
                let blank = self.line_len == 0 || (self.line_len == 1 && self.line_start[0] == b'\r');
                if blank {
                    self.event_len = 0;
                } else {
                    self.event_len += 1;
                    self.longest_event = self.longest_event.max(self.event_len);
                }
                self.line_len = 0;
                continue;
            }
            if self.line_len < 5 {
                self.line_start[self.line_len] = b;
                if self.line_len == 4 && &self.line_start == b"data:" {
                    self.events += 1;
                }
            }
            self.line_len += 1;
            self.event_len += 1;
            self.longest_event = self.longest_event.max(self.event_len);
        }
    }
}

/// The connection as a slow or impatient client reads it
/// ([`ClientBehavior`]): at most `read_size` bytes per read, and a pause
/// before every read after the first.
struct Paced {
    inner: tokio::net::TcpStream,
    read_size: Option<usize>,
    delay: Option<Duration>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    first: bool,
    /// Bytes read so far.
    read: Arc<AtomicUsize>,
}

impl Paced {
    fn new(inner: tokio::net::TcpStream, client: &ClientBehavior, read: Arc<AtomicUsize>) -> Paced {
        Paced {
            inner,
            read_size: client.read_size.map(|n| n.max(1)),
            delay: client.read_delay,
            pause: None,
            first: true,
            read,
        }
    }
}

impl AsyncRead for Paced {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if let (Some(d), false) = (this.delay, this.first) {
            let pause = this.pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(d)));
            if std::future::Future::poll(pause.as_mut(), cx).is_pending() {
                return Poll::Pending;
            }
        }
        let Some(max) = this.read_size else {
            let before = buf.filled().len();
            let r = Pin::new(&mut this.inner).poll_read(cx, buf);
            if let Poll::Ready(Ok(())) = r {
                this.done_read(buf.filled().len() - before);
            }
            return r;
        };
        let mut sub = buf.take(max);
        let r = Pin::new(&mut this.inner).poll_read(cx, &mut sub);
        let n = sub.filled().len();
        if let Poll::Ready(Ok(())) = r {
            // SAFETY: `sub` is the start of `buf`'s unfilled part, and the
            // read initialised and filled `n` bytes of it.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            this.done_read(n);
        }
        r
    }
}

impl Paced {
    fn done_read(&mut self, n: usize) {
        self.read.fetch_add(n, Ordering::Relaxed);
        self.first = false;
        self.pause = None;
    }
}

impl AsyncWrite for Paced {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// `POST path` with a JSON body.
pub fn post_json(addr: &str, path: &str, body: &serde_json::Value, timeout: Duration) -> Result<Response, HttpError> {
    let b = serde_json::to_vec(body).map_err(|e| HttpError::Encode(e.to_string()))?;
    request(addr, "POST", path, Some(("application/json", &b)), timeout)
}

/// [`post_json`], the response read as `client` reads it.
pub fn post_json_as(
    addr: &str,
    path: &str,
    body: &serde_json::Value,
    timeout: Duration,
    client: &ClientBehavior,
) -> Result<Response, HttpError> {
    let b = serde_json::to_vec(body).map_err(|e| HttpError::Encode(e.to_string()))?;
    request_as(addr, "POST", path, Some(("application/json", &b)), timeout, client)
}

/// `GET path`.
pub fn get(addr: &str, path: &str, timeout: Duration) -> Result<Response, HttpError> {
    request(addr, "GET", path, None, timeout)
}

/// The `data:` payloads of a server-sent event stream, in order (`[DONE]`
/// included as it is).
pub fn sse_data(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = cur.take() {
                out.push(d);
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            let d = d.strip_prefix(' ').unwrap_or(d);
            match &mut cur {
                Some(c) => {
                    c.push('\n');
                    c.push_str(d);
                }
                None => cur = Some(d.to_string()),
            }
        }
    }
    if let Some(d) = cur {
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    /// Reads a request head from `s` (closing with unread input would be a
    /// reset).
    fn read_request(s: &mut std::net::TcpStream) {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// A peer that answers one request with `raw`, then closes.
    fn serve_raw(raw: &'static [u8]) -> String {
        serve_with(move |s| {
            let _ = s.write_all(raw);
        })
    }

    /// A peer that answers one request by running `f` on the connection.
    fn serve_with(f: impl FnOnce(&mut std::net::TcpStream) + Send + 'static) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            read_request(&mut s);
            f(&mut s);
        });
        addr
    }

    fn small(body_bytes: usize, event_bytes: usize) -> ClientBehavior {
        ClientBehavior { limits: HttpLimits { body_bytes, event_bytes }, ..Default::default() }
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let addr = serve_raw(
            b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nA;x=y\r\n0123456789\r\n0\r\n\r\n",
        );
        let r = get(&addr, "/", Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.text()), (400, "abc0123456789".to_string()));
    }

    #[test]
    fn a_content_length_body_and_its_headers_are_read() {
        let addr = serve_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello");
        let r = get(&addr, "/", Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.text(), r.header("x-a")), (200, "hello".to_string(), Some("b")));
    }

    #[test]
    fn a_body_without_length_ends_at_eof() {
        let addr = serve_raw(b"HTTP/1.0 200 OK\r\n\r\nall of it");
        assert_eq!(get(&addr, "/", Duration::from_secs(5)).unwrap().text(), "all of it");
    }

    #[test]
    fn a_cut_body_a_cut_head_and_a_peer_that_is_not_http_are_malformed() {
        let addr = serve_raw(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort");
        let e = get(&addr, "/", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, HttpError::Malformed(MalformedResponse::BodyCut)), "{e:?}");
        assert_eq!(e.to_string(), "connection closed before the body was complete");
        let addr = serve_raw(b"HTTP/1.1 200 OK\r\nX-A");
        let e = get(&addr, "/", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, HttpError::Malformed(MalformedResponse::HeadCut)), "{e:?}");
        let addr = serve_raw(b"SSH-2.0-x\r\n\r\n");
        let e = get(&addr, "/", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, HttpError::Malformed(MalformedResponse::Invalid(_))), "{e:?}");
    }

    #[test]
    fn sse_data_lines_in_order() {
        let body = "data: {\"a\":1}\n\n: comment\ndata: {\"a\":2}\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(sse_data(body), vec!["{\"a\":1}", "{\"a\":2}", "[DONE]"]);
    }

    #[test]
    fn a_silent_server_is_a_timeout() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || silent.accept().map(|(s, _)| s));
        let e = post_json(&addr, "/v1/completions", &serde_json::json!({}), Duration::from_millis(300)).unwrap_err();
        assert!(e.is_timeout(), "{e:?}");
        assert_eq!(e.to_string(), "POST /v1/completions: no complete response within 0.3s (0 bytes so far)");
        drop(held.join());
    }

    #[test]
    fn a_body_that_is_not_json_says_why_and_how_it_starts() {
        let r = Response { status: 200, headers: Vec::new(), body: b"<html>".to_vec() };
        let e = r.json().unwrap_err();
        assert_eq!(e.body_start, "<html>");
        assert!(e.to_string().starts_with("response body is not JSON (expected value"), "{e}");
    }

    /// A server streaming `n` events, one every `gap`; it reports how many
    /// it wrote before the client went away.
    fn streaming_server(n: usize, gap: Duration) -> (String, std::thread::JoinHandle<usize>) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            read_request(&mut s);
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
            for i in 0..n {
                let ev = format!("data: {{\"i\":{i}}}\n\n");
                if s.write_all(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes()).is_err() {
                    return i;
                }
                std::thread::sleep(gap);
            }
            let _ = s.write_all(b"0\r\n\r\n");
            n
        });
        (addr, t)
    }

    #[test]
    fn a_disconnecting_client_hangs_up_after_its_events_and_says_so() {
        let (addr, server) = streaming_server(200, Duration::from_millis(5));
        let client = ClientBehavior { close_after_events: Some(3), ..Default::default() };
        let e = request_as(&addr, "GET", "/s", None, Duration::from_secs(5), &client).unwrap_err();
        assert!(e.is_closed_by_client() && !e.is_timeout(), "{e:?}");
        assert!(matches!(e, HttpError::ClosedByClient { events: 3, .. }), "{e:?}");
        // The server finds the connection gone long before its 200 events.
        assert!(server.join().unwrap() < 200);
    }

    #[test]
    fn a_slow_client_still_reads_the_whole_stream() {
        let (addr, server) = streaming_server(20, Duration::ZERO);
        let client = ClientBehavior {
            read_delay: Some(Duration::from_millis(2)),
            read_size: Some(7),
            recv_buffer: Some(1024),
            ..Default::default()
        };
        let t = Instant::now();
        let r = request_as(&addr, "GET", "/s", None, Duration::from_secs(10), &client).unwrap();
        assert_eq!(server.join().unwrap(), 20);
        assert_eq!(sse_data(&r.text()).len(), 20);
        // 20 events of about 20 bytes, 7 bytes a read, 2 ms between reads.
        assert!(t.elapsed() >= Duration::from_millis(100), "{:?}: not paced", t.elapsed());
    }

    #[test]
    fn a_refused_connection_is_told_apart() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        let e = get(&addr, "/health", Duration::from_secs(2)).unwrap_err();
        assert!(e.is_refused(), "{e:?}");
    }

    #[test]
    fn events_are_counted_at_line_starts_only_across_pieces() {
        let mut scan = EventScan::default();
        for piece in [&b"data: a\n\nda"[..], b"ta: b data: c\n", b"\n: x\r\n\r\ndata:"] {
            scan.feed(piece);
        }
        assert_eq!(scan.events, 3);
        assert_eq!(scan.longest_event, "data: b data: c\n".len());
    }

    // Hostile peers: each ends with a typed error naming the limit, within
    // the deadline, having held at most the limit.

    #[test]
    fn a_body_that_never_ends_stops_at_the_body_limit() {
        let addr = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\n");
            let block = [b'x'; 8192];
            while s.write_all(&block).is_ok() {}
        });
        let t = Instant::now();
        let e = request_as(&addr, "GET", "/", None, Duration::from_secs(20), &small(1 << 20, 1 << 20)).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { what: "body", limit: 1048576, .. }), "{e:?}");
        assert_eq!(e.to_string(), "GET /: the response body passed the client's limit of 1048576 bytes");
        assert!(t.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_chunked_response_that_never_terminates_stops_at_the_body_limit() {
        let addr = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            let chunk = format!("2000\r\n{}\r\n", "y".repeat(0x2000));
            while s.write_all(chunk.as_bytes()).is_ok() {}
        });
        let e = request_as(&addr, "GET", "/", None, Duration::from_secs(20), &small(1 << 20, 1 << 20)).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { what: "body", .. }), "{e:?}");
    }

    #[test]
    fn a_chunked_response_that_stalls_is_a_timeout_within_the_deadline() {
        let addr = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
            std::thread::sleep(Duration::from_secs(3));
        });
        let t = Instant::now();
        let e = get(&addr, "/", Duration::from_millis(400)).unwrap_err();
        assert!(matches!(e, HttpError::Timeout { received: 3, .. }), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn an_event_that_never_ends_stops_at_the_event_limit() {
        let addr = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ");
            let block = [b'z'; 8192];
            while s.write_all(&block).is_ok() {}
        });
        let e = request_as(&addr, "GET", "/", None, Duration::from_secs(20), &small(64 << 20, 64 << 10)).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { what: "event", limit: 65536, .. }), "{e:?}");
    }

    #[test]
    fn a_head_of_endless_headers_stops_at_the_head_limit() {
        let addr = serve_with(|s| {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\n");
            while s.write_all(b"X-Flood: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n").is_ok() {}
        });
        let e = get(&addr, "/", Duration::from_secs(20)).unwrap_err();
        assert!(matches!(e, HttpError::TooLarge { what: "head", .. }), "{e:?}");
    }

    #[test]
    fn a_request_from_inside_a_tokio_runtime_does_not_panic() {
        let addr = serve_raw(b"HTTP/1.1 204 No Content\r\n\r\n");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let r = rt.block_on(async { get(&addr, "/", Duration::from_secs(5)) }).unwrap();
        assert_eq!(r.status, 204);
    }
}
