//! A small blocking HTTP/1.1 client over `std::net::TcpStream`, enough to
//! drive a gateway's OpenAI-compatible API: one request per connection
//! (`Connection: close`), bodies by `Content-Length`, `chunked` transfer
//! encoding or read to EOF, and the `data:` lines of a server-sent event
//! stream. No TLS, no redirects, no keep-alive.
//!
//! Failures are typed ([`HttpError`], [`MalformedResponse`], [`NotJson`]):
//! the gateway checks decide on the variant (a client that gave up waiting
//! is [`HttpError::Timeout`], a refused connection [`HttpError::Connect`]),
//! never on the message. The messages are the ones reports and
//! docs/scoreboard.md quote.

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Header names lower-cased, in arrival order.
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

/// Server-sent events in the body received so far (`data:` at a line's
/// start), head excluded.
fn events_so_far(raw: &[u8]) -> usize {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { return 0 };
    let body = &raw[end + 4..];
    body.windows(6).filter(|w| w[0] == b'\n' && &w[1..] == b"data:").count() + usize::from(body.starts_with(b"data:"))
}

/// [`request`], the response read as `client` reads it.
pub fn request_as(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
    client: &ClientBehavior,
) -> Result<Response, HttpError> {
    let deadline = Instant::now() + timeout;
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| HttpError::Resolve { addr: addr.to_string(), source: Some(Arc::new(e)) })?
        .next()
        .ok_or_else(|| HttpError::Resolve { addr: addr.to_string(), source: None })?;
    let mut s = TcpStream::connect_timeout(&sock, timeout)
        .map_err(|e| HttpError::Connect { addr: addr.to_string(), source: Arc::new(e) })?;
    let _ = s.set_nodelay(true);
    if let Some(b) = client.recv_buffer {
        set_recv_buffer(&s, b).map_err(|e| HttpError::Socket(Arc::new(e)))?;
    }
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: */*\r\n");
    if let Some((ctype, b)) = body {
        head.push_str(&format!("Content-Type: {ctype}\r\nContent-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some((_, b)) = body {
        out.extend_from_slice(b);
    }
    s.set_write_timeout(Some(timeout)).map_err(|e| HttpError::Socket(Arc::new(e)))?;
    s.write_all(&out).map_err(|e| HttpError::Send { addr: addr.to_string(), source: Arc::new(e) })?;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; client.read_size.unwrap_or(16384).max(1)];
    let mut first = true;
    loop {
        if let (Some(d), false) = (client.read_delay, first) {
            std::thread::sleep(d.min(deadline.saturating_duration_since(Instant::now())));
        }
        first = false;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HttpError::Timeout {
                method: method.to_string(),
                path: path.to_string(),
                timeout,
                received: raw.len(),
            });
        }
        s.set_read_timeout(Some(left)).map_err(|e| HttpError::Socket(Arc::new(e)))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if let Some(r) = parse(&raw, false)? {
                    return Ok(r);
                }
                if let Some(limit) = client.close_after_events {
                    let events = events_so_far(&raw);
                    if events >= limit {
                        drop(s);
                        return Err(HttpError::ClosedByClient {
                            method: method.to_string(),
                            path: path.to_string(),
                            events,
                            received: raw.len(),
                        });
                    }
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(HttpError::Read { addr: addr.to_string(), source: Arc::new(e) }),
        }
    }
    parse(&raw, true)?.ok_or_else(|| HttpError::Closed { method: method.to_string(), path: path.to_string() })
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

/// Parses a response from `raw`; `None` while incomplete. `eof`: the peer
/// closed, so a body without a length ends here.
pub fn parse(raw: &[u8], eof: bool) -> Result<Option<Response>, MalformedResponse> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if eof { Err(MalformedResponse::HeadCut) } else { Ok(None) };
    };
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| MalformedResponse::HeadNotUtf8)?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(MalformedResponse::NotHttp1(short(status_line)));
    }
    let status: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| MalformedResponse::BadStatusLine(short(status_line)))?;
    let mut headers = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(':').ok_or_else(|| MalformedResponse::BadHeader(short(l)))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let rest = &raw[end + 4..];
    let find = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let no_body = (100..200).contains(&status) || status == 204 || status == 304;
    let body = if no_body {
        Some(Vec::new())
    } else if find("transfer-encoding").is_some_and(|t| t.to_ascii_lowercase().contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = find("content-length") {
        let len: usize = len.parse().map_err(|_| MalformedResponse::BadContentLength(len.to_string()))?;
        (rest.len() >= len).then(|| rest[..len].to_vec())
    } else if eof {
        Some(rest.to_vec())
    } else {
        None
    };
    match body {
        Some(body) => Ok(Some(Response { status, headers, body })),
        None if eof => Err(MalformedResponse::BodyCut),
        None => Ok(None),
    }
}

/// The body of a complete chunked encoding, `None` while incomplete.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, MalformedResponse> {
    let mut body = Vec::new();
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| MalformedResponse::ChunkSizeNotUtf8)?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_hex, 16).map_err(|_| MalformedResponse::BadChunkSize(line.to_string()))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            // Trailers (if any) end with an empty line; the body is complete.
            return Ok(Some(body));
        }
        if rest.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
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

    #[test]
    fn content_length_body_is_complete_only_when_all_bytes_are_in() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhel";
        assert_eq!(parse(raw, false).unwrap(), None);
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello";
        let r = parse(raw, false).unwrap().unwrap();
        assert_eq!((r.status, r.text(), r.header("x-a")), (200, "hello".to_string(), Some("b")));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let raw = b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n";
        assert_eq!(parse(raw, false).unwrap(), None);
        let raw = b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nA;x=y\r\n0123456789\r\n0\r\n\r\n";
        let r = parse(raw, false).unwrap().unwrap();
        assert_eq!((r.status, r.text()), (400, "abc0123456789".to_string()));
    }

    #[test]
    fn body_without_length_ends_at_eof() {
        let raw = b"HTTP/1.0 200 OK\r\n\r\nall of it";
        assert_eq!(parse(raw, false).unwrap(), None);
        assert_eq!(parse(raw, true).unwrap().unwrap().text(), "all of it");
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", true), Err(MalformedResponse::BodyCut));
        assert_eq!(parse(b"SSH-2.0-x\r\n\r\n", true), Err(MalformedResponse::NotHttp1("SSH-2.0-x".into())));
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nX-A", true), Err(MalformedResponse::HeadCut));
    }

    #[test]
    fn sse_data_lines_in_order() {
        let body = "data: {\"a\":1}\n\n: comment\ndata: {\"a\":2}\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(sse_data(body), vec!["{\"a\":1}", "{\"a\":2}", "[DONE]"]);
    }

    #[test]
    fn a_silent_server_is_a_timeout_and_a_closing_one_is_not() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let held = std::thread::spawn(move || silent.accept().map(|(s, _)| s));
        let e = post_json(&addr, "/v1/completions", &serde_json::json!({}), Duration::from_millis(300)).unwrap_err();
        assert!(e.is_timeout(), "{e:?}");
        assert_eq!(e.to_string(), "POST /v1/completions: no complete response within 0.3s (0 bytes so far)");
        drop(held.join());

        let closing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closing.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (mut s, _) = closing.accept().unwrap();
            // Read the request first: closing with unread input is a reset.
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        });
        let e = get(&addr, "/", Duration::from_secs(5)).unwrap_err();
        t.join().unwrap();
        assert!(!e.is_timeout());
        assert!(matches!(e, HttpError::Malformed(MalformedResponse::BodyCut)), "{e:?}");
        assert_eq!(e.to_string(), "connection closed before the body was complete");
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
            let mut buf = [0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => return 0,
                    Ok(k) => got.extend_from_slice(&buf[..k]),
                }
            }
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
        let r = request_as(&addr, "GET", "/s", None, Duration::from_secs(10), &client).unwrap();
        assert_eq!(server.join().unwrap(), 20);
        assert_eq!(sse_data(&r.text()).len(), 20);
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
    fn events_are_counted_at_line_starts_only() {
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        let raw = [&head[..], b"data: a\n\ndata: b data: c\n\n"].concat();
        assert_eq!(events_so_far(&raw), 2);
        assert_eq!(events_so_far(b"HTTP/1.1 200 OK\r\n"), 0);
    }
}
