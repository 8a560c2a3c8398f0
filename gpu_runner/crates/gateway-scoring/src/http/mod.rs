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
//!
//! Parts: `error` (the failures), `exchange` (one request on the wire),
//! `paced` (a slow reader's socket), `sse` (event streams).

mod error;
mod exchange;
mod paced;
mod sse;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

pub use error::{HttpError, MalformedResponse, NotJson};
pub use sse::sse_data;

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
        rt.block_on(exchange::request_async(addr, method, path, body, timeout, client))
    };
    if tokio::runtime::Handle::try_current().is_ok() {
        std::thread::scope(|s| s.spawn(run).join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    } else {
        run()
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
