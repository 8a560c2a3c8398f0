//! One request on the wire: the socket opened (`SO_RCVBUF` as the
//! client asks), the request sent and the response read through hyper
//! within the limits ([`super::HttpLimits`]), the event stream scanned as
//! it arrives ([`super::sse::EventScan`]), hyper's errors turned into
//! ours.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

use super::paced::Paced;
use super::sse::EventScan;
use super::{short, ClientBehavior, HttpError, MalformedResponse, Response, MAX_HEADERS, MAX_HEAD_BYTES};

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

pub(super) async fn request_async(
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
