//! The gateway benchmark's load generator: streamed `/v1/completions`
//! requests over HTTP/1.1 keep-alive connections (hyper), timed chunk by
//! chunk on the client side.
//!
//! Wire facts relied on (OpenAI completions API as vLLM's frontend serves
//! it, vLLM 0.33.0 `vllm/entrypoints/openai/completion/serving.py`; SMG
//! serves the same shape): with `"stream": true` the answer is
//! `text/event-stream`; each event is one `data: <json>` line followed by a
//! blank line; a chunk carrying generated text has `choices[0].text`; the
//! stream ends with `data: [DONE]`. With `stream_options.include_usage`
//! the last chunk before it has empty `choices` and
//! `usage.completion_tokens`. A failure inside a stream is a `data:`
//! event whose JSON has an `error` member. `ignore_eos` (a vLLM sampling
//! extension) keeps the engine generating until `max_tokens`.
//!
//! Two drivers: [`closed_loop`] (C clients, each sends its next request when
//! its stream ends) and [`open_loop`] (requests start on a schedule,
//! [`arrivals`], independent of completions).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What went wrong with one request (counted as an error, never as latency).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadRequestError {
    #[error("connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{addr}: HTTP {status}")]
    Status { addr: String, status: u16 },
    #[error("{addr}: the stream broke: {reason}")]
    Stream { addr: String, reason: String },
    #[error("{addr}: the stream carried an error event")]
    ErrorEvent { addr: String },
    #[error("{addr}: the stream ended without [DONE]")]
    NoDone { addr: String },
    #[error("{addr}: no answer within {secs:.1}s")]
    Timeout { addr: String, secs: f64 },
}

impl LoadRequestError {
    /// A short stable label for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            LoadRequestError::Connect { .. } => "connect",
            LoadRequestError::Status { .. } => "status",
            LoadRequestError::Stream { .. } => "stream",
            LoadRequestError::ErrorEvent { .. } => "error_event",
            LoadRequestError::NoDone { .. } => "no_done",
            LoadRequestError::Timeout { .. } => "timeout",
        }
    }
}

/// The timing of one streamed request that ended with `[DONE]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamTiming {
    /// Request sent to the first chunk with non-empty text.
    pub ttft: Option<Duration>,
    /// Gaps between successive text chunks (after the first).
    pub gaps: Vec<Duration>,
    /// Text chunks received (a gateway may put several tokens in one).
    pub chunks: u64,
    /// Completion tokens as the usage chunk states them.
    pub usage_tokens: Option<u64>,
    /// Request sent to `[DONE]`.
    pub total: Duration,
}

/// Splits an SSE byte stream into `data:` payloads, across chunk borders.
#[derive(Debug, Default)]
pub struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// Feeds bytes; returns the `data:` payloads completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(d) = line.strip_prefix(b"data:") {
                out.push(d.strip_prefix(b" ").unwrap_or(d).to_vec());
            }
            start += nl + 1;
        }
        self.buf.drain(..start);
        out
    }
}

/// What one `data:` payload is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Done,
    /// A chunk with `choices[0].text`; whether that text is non-empty.
    Text {
        nonempty: bool,
    },
    Error,
    /// The usage chunk (`stream_options.include_usage`): completion tokens.
    Usage(u64),
    /// Anything else (a role chunk).
    Other,
}

/// Classifies a `data:` payload (module doc: the wire facts).
pub fn classify(payload: &[u8]) -> Event {
    if payload == b"[DONE]" {
        return Event::Done;
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return Event::Error;
    };
    if v.get("error").is_some_and(|e| !e.is_null()) {
        return Event::Error;
    }
    match v.pointer("/choices/0/text").and_then(|t| t.as_str()) {
        Some(t) => Event::Text { nonempty: !t.is_empty() },
        None => match v.pointer("/usage/completion_tokens").and_then(|n| n.as_u64()) {
            Some(n) => Event::Usage(n),
            None => Event::Other,
        },
    }
}

/// One request's shape: the same body every time.
#[derive(Debug, Clone)]
pub struct LoadRequest {
    /// `host:port`.
    pub addr: String,
    pub path: String,
    pub body: Bytes,
    pub timeout: Duration,
}

impl LoadRequest {
    /// A streamed completion of `max_tokens` tokens for `prompt`.
    pub fn completion(addr: &str, model: &str, prompt: &str, max_tokens: u32, timeout: Duration) -> LoadRequest {
        let body = serde_json::json!({
            "model": model, "prompt": prompt, "max_tokens": max_tokens,
            "stream": true, "ignore_eos": true, "temperature": 0.0,
            "stream_options": {"include_usage": true},
        });
        LoadRequest {
            addr: addr.to_string(),
            path: "/v1/completions".into(),
            body: Bytes::from(body.to_string()),
            timeout,
        }
    }
}

/// A keep-alive HTTP/1.1 connection to the gateway (reconnects after an error).
pub struct Client {
    spec: Arc<LoadRequest>,
    conn: Option<http1::SendRequest<Full<Bytes>>>,
}

impl Client {
    pub fn new(spec: Arc<LoadRequest>) -> Client {
        Client { spec, conn: None }
    }

    async fn connect(&mut self) -> Result<&mut http1::SendRequest<Full<Bytes>>, LoadRequestError> {
        let addr = &self.spec.addr;
        let ce = |e: &dyn std::fmt::Display| LoadRequestError::Connect { addr: addr.clone(), reason: e.to_string() };
        if self.conn.as_ref().is_none_or(|c| c.is_closed()) {
            let tcp = TcpStream::connect(addr).await.map_err(|e| ce(&e))?;
            let _ = tcp.set_nodelay(true);
            let (send, conn) = http1::handshake(TokioIo::new(tcp)).await.map_err(|e| ce(&e))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            self.conn = Some(send);
        }
        let c = self.conn.as_mut().ok_or_else(|| ce(&"no connection"))?;
        c.ready().await.map_err(|e| ce(&e))?;
        Ok(c)
    }

    /// Sends one request and times its stream.
    pub async fn run(&mut self) -> Result<StreamTiming, LoadRequestError> {
        let timeout = self.spec.timeout;
        let r = tokio::time::timeout(timeout, self.run_inner()).await;
        let r = r.unwrap_or_else(|_| {
            Err(LoadRequestError::Timeout { addr: self.spec.addr.clone(), secs: timeout.as_secs_f64() })
        });
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    async fn run_inner(&mut self) -> Result<StreamTiming, LoadRequestError> {
        let spec = self.spec.clone();
        let addr = &spec.addr;
        let req = hyper::Request::post(spec.path.as_str())
            .header(hyper::header::HOST, addr.as_str())
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .header(hyper::header::ACCEPT, "text/event-stream")
            .body(Full::new(spec.body.clone()))
            .map_err(|e| LoadRequestError::Connect { addr: addr.clone(), reason: e.to_string() })?;
        let conn = self.connect().await?;
        let t0 = Instant::now();
        let broke = |e: &dyn std::fmt::Display| LoadRequestError::Stream { addr: addr.clone(), reason: e.to_string() };
        let resp = conn.send_request(req).await.map_err(|e| broke(&e))?;
        let status = resp.status().as_u16();
        let mut body = resp.into_body();
        if status != 200 {
            while let Some(f) = body.frame().await {
                f.map_err(|e| broke(&e))?;
            }
            return Err(LoadRequestError::Status { addr: addr.clone(), status });
        }
        let mut sse = SseLines::default();
        let mut t = StreamTiming::default();
        let mut last: Option<Instant> = None;
        let mut done = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| broke(&e))?;
            let Some(data) = frame.data_ref() else { continue };
            let now = Instant::now();
            for payload in sse.push(data) {
                match classify(&payload) {
                    Event::Done => done = true,
                    Event::Error => return Err(LoadRequestError::ErrorEvent { addr: addr.clone() }),
                    Event::Text { nonempty } => {
                        t.chunks += 1;
                        if nonempty && t.ttft.is_none() {
                            t.ttft = Some(now - t0);
                        }
                        if let Some(l) = last {
                            t.gaps.push(now - l);
                        }
                        last = Some(now);
                    }
                    Event::Usage(n) => t.usage_tokens = Some(n),
                    Event::Other => {}
                }
            }
        }
        if !done {
            return Err(LoadRequestError::NoDone { addr: addr.clone() });
        }
        t.total = t0.elapsed();
        Ok(t)
    }
}

/// What a driver collected: each request's outcome, as it ended.
#[derive(Debug, Default)]
pub struct Outcomes {
    pub ok: Vec<StreamTiming>,
    pub errors: Vec<LoadRequestError>,
    /// Open loop: arrivals not started because `max_in_flight` were running.
    pub shed: u64,
    /// From the first request sent to the last one ended.
    pub elapsed: Duration,
}

/// `clients` clients, each sending its next request when its stream ends,
/// until `duration` has passed (requests under way then finish).
pub async fn closed_loop(spec: Arc<LoadRequest>, clients: usize, duration: Duration) -> Outcomes {
    let t0 = Instant::now();
    let end = t0 + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let spec = spec.clone();
        tasks.spawn(async move {
            let mut c = Client::new(spec);
            let mut out = Outcomes::default();
            while Instant::now() < end {
                match c.run().await {
                    Ok(t) => out.ok.push(t),
                    Err(e) => {
                        out.errors.push(e);
                        // A refusing gateway is not hammered in a tight loop.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
            out
        });
    }
    let mut all = Outcomes::default();
    while let Some(r) = tasks.join_next().await {
        if let Ok(o) = r {
            all.ok.extend(o.ok);
            all.errors.extend(o.errors);
        }
    }
    all.elapsed = t0.elapsed();
    all
}

/// How open-loop requests are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Spacing {
    Fixed,
    /// Exponential gaps (a Poisson process), seeded.
    Poisson,
}

/// The start offsets of the open-loop requests: `rate` per second for
/// `duration`.
pub fn arrivals(rate: f64, duration: Duration, spacing: Spacing, seed: u64) -> Vec<Duration> {
    if rate <= 0.0 || !rate.is_finite() {
        return Vec::new();
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    let mut at = 0.0f64;
    let end = duration.as_secs_f64();
    loop {
        at += match spacing {
            Spacing::Fixed => 1.0 / rate,
            // 1 - U is in (0, 1]: ln never sees 0.
            Spacing::Poisson => -(1.0 - rng.f64()).ln() / rate,
        };
        if at >= end {
            return out;
        }
        out.push(Duration::from_secs_f64(at));
    }
}

/// Starts a request at each of `schedule`'s offsets (a fresh connection
/// pool of up to `max_in_flight` clients), whatever the earlier ones are
/// doing; waits for the last to end.
pub async fn open_loop(spec: Arc<LoadRequest>, schedule: &[Duration], max_in_flight: usize) -> Outcomes {
    let t0 = Instant::now();
    let idle: Arc<std::sync::Mutex<Vec<Client>>> = Arc::default();
    let in_flight = Arc::new(tokio::sync::Semaphore::new(max_in_flight.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut shed = 0;
    for &at in schedule {
        tokio::time::sleep_until((t0 + at).into()).await;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            shed += 1;
            continue;
        };
        let idle = idle.clone();
        let spec = spec.clone();
        tasks.spawn(async move {
            let mut c = idle.lock().ok().and_then(|mut v| v.pop()).unwrap_or_else(|| Client::new(spec));
            let r = c.run().await;
            if let Ok(mut v) = idle.lock() {
                v.push(c);
            }
            drop(permit);
            r
        });
    }
    let mut all = Outcomes { shed, ..Default::default() };
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(t)) => all.ok.push(t),
            Ok(Err(e)) => all.errors.push(e),
            Err(_) => {}
        }
    }
    all.elapsed = t0.elapsed();
    all
}
