//! The client against raw peers: framing, limits, timeouts, slow and
//! impatient readers, event streams.

use super::sse::EventScan;
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
        let _ =
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
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
