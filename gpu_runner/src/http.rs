//! A small blocking HTTP/1.1 client over `std::net::TcpStream`, enough to
//! drive a gateway's OpenAI-compatible API: one request per connection
//! (`Connection: close`), bodies by `Content-Length`, `chunked` transfer
//! encoding or read to EOF, and the `data:` lines of a server-sent event
//! stream. No TLS, no redirects, no keep-alive.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

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

    pub fn json(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.body)
            .map_err(|e| format!("response body is not JSON ({e}): {}", short(&self.text())))
    }
}

fn short(s: &str) -> String {
    let mut t: String = s.chars().take(300).collect();
    if t.len() < s.len() {
        t.push('…');
    }
    t
}

/// Sends one request to `addr` (`host:port`) and reads the whole response
/// within `timeout`.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<(&str, &[u8])>,
    timeout: Duration,
) -> Result<Response, String> {
    let deadline = Instant::now() + timeout;
    let sock = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut s = TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = s.set_nodelay(true);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: */*\r\n");
    if let Some((ctype, b)) = body {
        head.push_str(&format!("Content-Type: {ctype}\r\nContent-Length: {}\r\n", b.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some((_, b)) = body {
        out.extend_from_slice(b);
    }
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.write_all(&out).map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "{method} {path}: no complete response within {:.1}s ({} bytes so far)",
                timeout.as_secs_f64(),
                raw.len()
            ));
        }
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if let Some(r) = parse(&raw, false)? {
                    return Ok(r);
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read from {addr}: {e}")),
        }
    }
    parse(&raw, true)?.ok_or_else(|| format!("{method} {path}: connection closed before a complete response"))
}

/// `POST path` with a JSON body.
pub fn post_json(addr: &str, path: &str, body: &serde_json::Value, timeout: Duration) -> Result<Response, String> {
    let b = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    request(addr, "POST", path, Some(("application/json", &b)), timeout)
}

/// `GET path`.
pub fn get(addr: &str, path: &str, timeout: Duration) -> Result<Response, String> {
    request(addr, "GET", path, None, timeout)
}

/// Parses a response from `raw`; `None` while incomplete. `eof`: the peer
/// closed, so a body without a length ends here.
pub fn parse(raw: &[u8], eof: bool) -> Result<Option<Response>, String> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if eof { Err("connection closed inside the response head".into()) } else { Ok(None) };
    };
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "response head is not UTF-8".to_string())?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP/1.x response: {}", short(status_line)));
    }
    let status: u16 =
        parts.next().and_then(|c| c.parse().ok()).ok_or_else(|| format!("bad status line: {}", short(status_line)))?;
    let mut headers = Vec::new();
    for l in lines {
        let (k, v) = l.split_once(':').ok_or_else(|| format!("bad header line: {}", short(l)))?;
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
        let len: usize = len.parse().map_err(|_| format!("bad content-length {len:?}"))?;
        (rest.len() >= len).then(|| rest[..len].to_vec())
    } else if eof {
        Some(rest.to_vec())
    } else {
        None
    };
    match body {
        Some(body) => Ok(Some(Response { status, headers, body })),
        None if eof => Err("connection closed before the body was complete".into()),
        None => Ok(None),
    }
}

/// The body of a complete chunked encoding, `None` while incomplete.
fn dechunk(mut rest: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| "chunk size is not UTF-8".to_string())?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
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
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", true).is_err());
        assert!(parse(b"SSH-2.0-x\r\n\r\n", true).is_err());
    }

    #[test]
    fn sse_data_lines_in_order() {
        let body = "data: {\"a\":1}\n\n: comment\ndata: {\"a\":2}\r\n\r\ndata: [DONE]\n\n";
        assert_eq!(sse_data(body), vec!["{\"a\":1}", "{\"a\":2}", "[DONE]"]);
    }
}
