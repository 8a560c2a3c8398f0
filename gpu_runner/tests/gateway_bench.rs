//! The gateway benchmark's load generator against a tiny in-process fake
//! gateway that streams SSE chunks with known gaps (or fails on purpose).

use std::sync::Arc;
use std::time::Duration;

use gpu_runner::gateway::loadgen::{self, classify, Event, LoadRequest, LoadRequestError, Spacing, SseLines};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the fake gateway answers every request with.
#[derive(Clone, Copy)]
enum Answer {
    /// 200, a text chunk after each gap (ms), the usage chunk, `[DONE]`.
    Stream(&'static [u64]),
    /// 500 with a JSON error body.
    Status500,
    /// 200, one text chunk, then an error event.
    ErrorEvent,
    /// 200, one text chunk, then the body ends without `[DONE]`.
    Truncated,
}

async fn read_request(s: &mut TcpStream) -> Option<()> {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let n = s.read(&mut b).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&b[..n]);
        if let Some(h) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                .unwrap_or(0);
            while buf.len() < h + 4 + len {
                let n = s.read(&mut b).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&b[..n]);
            }
            return Some(());
        }
    }
}

async fn chunk(s: &mut TcpStream, data: &str) -> std::io::Result<()> {
    let body = format!("data: {data}\n\n");
    s.write_all(format!("{:x}\r\n{body}\r\n", body.len()).as_bytes()).await?;
    s.flush().await
}

async fn serve_conn(mut s: TcpStream, answer: Answer) -> std::io::Result<()> {
    while read_request(&mut s).await.is_some() {
        let text = r#"{"choices":[{"index":0,"text":"a"}]}"#;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        match answer {
            Answer::Status500 => {
                let body = r#"{"error":{"message":"boom"}}"#;
                let r = format!("HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                s.write_all(r.as_bytes()).await?;
                continue;
            }
            Answer::Stream(gaps) => {
                s.write_all(head.as_bytes()).await?;
                for g in gaps {
                    tokio::time::sleep(Duration::from_millis(*g)).await;
                    chunk(&mut s, text).await?;
                }
                chunk(&mut s, r#"{"choices":[],"usage":{"completion_tokens":7}}"#).await?;
                chunk(&mut s, "[DONE]").await?;
            }
            Answer::ErrorEvent => {
                s.write_all(head.as_bytes()).await?;
                chunk(&mut s, text).await?;
                chunk(&mut s, r#"{"error":{"message":"engine dead"}}"#).await?;
                chunk(&mut s, "[DONE]").await?;
            }
            Answer::Truncated => {
                s.write_all(head.as_bytes()).await?;
                chunk(&mut s, text).await?;
            }
        }
        s.write_all(b"0\r\n\r\n").await?;
        s.flush().await?;
    }
    Ok(())
}

async fn fake_gateway(answer: Answer) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            tokio::spawn(serve_conn(s, answer));
        }
    });
    addr
}

fn spec(addr: &str) -> Arc<LoadRequest> {
    Arc::new(LoadRequest::completion(addr, "m", "p", 7, Duration::from_secs(5)))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::test]
async fn chunk_gaps_are_timed_as_the_server_spaced_them() {
    let addr = fake_gateway(Answer::Stream(&[30, 60, 120])).await;
    let mut c = loadgen::Client::new(spec(&addr));
    let t = c.run().await.unwrap();
    let ttft = ms(t.ttft.unwrap());
    assert!((30.0..60.0).contains(&ttft), "ttft {ttft}");
    let gaps: Vec<f64> = t.gaps.iter().map(|g| ms(*g)).collect();
    assert_eq!(gaps.len(), 2);
    assert!((55.0..90.0).contains(&gaps[0]) && (115.0..160.0).contains(&gaps[1]), "{gaps:?}");
    assert_eq!((t.chunks, t.usage_tokens), (3, Some(7)));
    // The keep-alive connection serves a second request.
    assert!(c.run().await.is_ok());
}

#[tokio::test]
async fn a_gateway_answering_500_is_counted_as_errors_not_latency() {
    let addr = fake_gateway(Answer::Status500).await;
    let o = loadgen::closed_loop(spec(&addr), 2, Duration::from_millis(200)).await;
    assert!(o.ok.is_empty() && !o.errors.is_empty());
    assert!(o.errors.iter().all(|e| matches!(e, LoadRequestError::Status { status: 500, .. })), "{:?}", o.errors[0]);
}

#[tokio::test]
async fn an_error_event_or_a_stream_without_done_fails_the_request() {
    let addr = fake_gateway(Answer::ErrorEvent).await;
    let e = loadgen::Client::new(spec(&addr)).run().await.unwrap_err();
    assert_eq!(e.kind(), "error_event", "{e}");
    let addr = fake_gateway(Answer::Truncated).await;
    let e = loadgen::Client::new(spec(&addr)).run().await.unwrap_err();
    assert_eq!(e.kind(), "no_done", "{e}");
}

#[tokio::test]
async fn a_refused_connection_is_an_error_naming_the_address() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let e = loadgen::Client::new(spec(&addr)).run().await.unwrap_err();
    assert!(e.kind() == "connect" && e.to_string().contains(&addr), "{e}");
}

#[tokio::test]
async fn the_open_loop_starts_requests_on_schedule_whatever_their_length() {
    // Each stream takes ~150 ms; 40/s for 0.5 s still starts 19 requests.
    let addr = fake_gateway(Answer::Stream(&[50, 50, 50])).await;
    let at = loadgen::arrivals(40.0, Duration::from_millis(500), Spacing::Fixed, 1);
    assert_eq!(at.len(), 19);
    let o = loadgen::open_loop(spec(&addr), &at, 64).await;
    assert_eq!((o.ok.len(), o.errors.len(), o.shed), (19, 0, 0));
    let secs = o.elapsed.as_secs_f64();
    assert!((0.6..1.0).contains(&secs), "{secs}: the last start at 0.475 s plus one stream");
}

#[tokio::test]
async fn the_open_loop_sheds_arrivals_beyond_its_in_flight_cap() {
    let addr = fake_gateway(Answer::Stream(&[200])).await;
    let at = vec![Duration::ZERO, Duration::from_millis(1), Duration::from_millis(2)];
    let o = loadgen::open_loop(spec(&addr), &at, 1).await;
    assert_eq!((o.ok.len(), o.shed), (1, 2));
}

#[test]
fn poisson_arrivals_average_the_asked_rate() {
    let at = loadgen::arrivals(200.0, Duration::from_secs(50), Spacing::Poisson, 3);
    let rate = at.len() as f64 / 50.0;
    assert!((190.0..210.0).contains(&rate), "{rate}");
    assert!(at.windows(2).all(|w| w[0] <= w[1]));
    assert!(loadgen::arrivals(0.0, Duration::from_secs(1), Spacing::Fixed, 0).is_empty());
}

#[test]
fn sse_payloads_are_split_across_chunk_borders() {
    let mut s = SseLines::default();
    assert!(s.push(b"data: {\"a\"").is_empty());
    assert_eq!(s.push(b":1}\r\n\r\ndata: [DONE]\n\n"), vec![b"{\"a\":1}".to_vec(), b"[DONE]".to_vec()]);
    assert_eq!(classify(b"[DONE]"), Event::Done);
    assert_eq!(classify(br#"{"choices":[{"text":""}]}"#), Event::Text { nonempty: false });
    assert_eq!(classify(br#"{"choices":[],"usage":{"completion_tokens":3}}"#), Event::Usage(3));
    assert_eq!(classify(b"not json"), Event::Error);
}
