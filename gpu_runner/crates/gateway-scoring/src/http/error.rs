//! The client's failures, typed: no complete response ([`HttpError`]),
//! a response hyper could not frame ([`MalformedResponse`]), a body that
//! is not JSON ([`NotJson`]). The checks decide on the variant; the
//! messages are the ones reports quote.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
    /// The response passed a limit ([`HttpLimits`](super::HttpLimits), [`MAX_HEAD_BYTES`](super::MAX_HEAD_BYTES)):
    /// what (`head`, `body`, `event`) and the limit in bytes.
    TooLarge { method: String, path: String, what: &'static str, limit: usize },
    /// The client closed the connection on purpose
    /// ([`ClientBehavior::close_after_events`](super::ClientBehavior::close_after_events)) after `events` server-sent
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
