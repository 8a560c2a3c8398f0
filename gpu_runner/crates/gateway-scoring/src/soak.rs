//! The soak: the runner's own transport ([`engine_client::transport::EngineClient`])
//! drives the mock engine (`gpu-runner mock-engine`, lean mode, instant
//! steps) in a child process at full speed, for a set time, and checks that
//! nothing is lost, duplicated or leaked (docs/soak.md).
//!
//! - Closed loop: `concurrency` requests are kept in flight; each asks for
//!   `max_tokens` tokens with `ignore_eos`, so the engine sends exactly
//!   `max_tokens` outputs (one token each), the last one finishing LENGTH
//!   (vLLM's `check_stop`; docs/runner/mock.md "The mock engine"). A new request
//!   starts as one finishes.
//! - Accounting: every request id sent must end with exactly one finish
//!   after exactly `max_tokens` outputs. A stream that fails (the
//!   transport's silence deadline: an engine that dropped the finish), ends
//!   without a finish, or finishes short is a lost request; an output for an
//!   id the gateway does not know (the transport counts them as
//!   `orphan_outputs`: a second finish of a finished request, or an id never
//!   sent) is a duplicate. Either fails the soak.
//! - Resources: resident memory (`VmRSS` of `/proc/<pid>/status`), open
//!   file descriptors (`/proc/<pid>/fd`) and those of them that are sockets
//!   (links `socket:[...]`), of the runner's process and of the engine's,
//!   sampled at the start, every `sample_every`, and at the end. Growth is
//!   measured from the first sample after the warm-up (`warmup` of the
//!   duration) to the end, and fails the soak above the limits.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine_protocol::internal::{engine_core_request_value, sampling_params_value};
use engine_protocol::{ReleaseSchema, Value};
use serde::Serialize;

use engine_client::transport::{ClientConfig, EngineClient, RequestEvent, TransportError};

/// What the soak runs.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// The `gpu-runner` executable that runs the engine (`mock-engine`).
    pub engine_exe: PathBuf,
    /// A fault for the engine's script (`{"kind": "drop_finish", "nth": 3}`;
    /// for the tests of the accounting).
    pub engine_fault: Option<serde_json::Value>,
    pub concurrency: usize,
    pub max_tokens: u32,
    pub duration: Duration,
    /// The share of the duration after which the resources are the baseline.
    pub warmup: f64,
    pub sample_every: Duration,
    /// A request silent this long fails (the transport's silence deadline).
    pub silence: Duration,
    pub limits: GrowthLimits,
    /// Print a line per sample to stderr.
    pub progress: bool,
}

/// How much each process may grow from the warmed-up sample to the end.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct GrowthLimits {
    pub rss_kib: u64,
    pub fds: u64,
}

impl Default for GrowthLimits {
    /// 32 MiB of resident memory, 8 file descriptors (docs/soak.md).
    fn default() -> Self {
        GrowthLimits { rss_kib: 32 * 1024, fds: 8 }
    }
}

impl SoakOptions {
    pub fn new(engine_exe: impl Into<PathBuf>, duration: Duration) -> Self {
        SoakOptions {
            engine_exe: engine_exe.into(),
            engine_fault: None,
            concurrency: 64,
            max_tokens: 128,
            duration,
            warmup: 0.1,
            sample_every: Duration::from_secs(10),
            silence: Duration::from_secs(10),
            limits: GrowthLimits::default(),
            progress: false,
        }
    }
}

/// Why the soak could not run.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("soak: cannot write the engine script {path}: {source}")]
    Script { path: PathBuf, source: std::io::Error },
    #[error("soak: cannot start the engine {exe}: {source}")]
    Spawn { exe: PathBuf, source: std::io::Error },
    #[error("soak: {0}")]
    Transport(#[from] TransportError),
    #[error("soak: cannot make the ipc directory: {0}")]
    TempDir(std::io::Error),
}

/// Why a soak that ran failed (each is a finding).
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SoakFailure {
    #[error("request {request_id} lost: {why}")]
    Lost { request_id: String, why: String },
    #[error("{count} output(s) for request ids the gateway did not know (a duplicated finish or an unknown id)")]
    Duplicated { count: u64 },
    #[error("request {request_id} finished after {outputs} outputs, not {expected}")]
    Short { request_id: String, outputs: u64, expected: u64 },
    #[error("{process}: resident memory grew {grew_kib} KiB after the warm-up (limit {limit_kib} KiB)")]
    RssGrowth { process: String, grew_kib: u64, limit_kib: u64 },
    #[error("{process}: open file descriptors grew by {grew} after the warm-up (limit {limit})")]
    FdGrowth { process: String, grew: u64, limit: u64 },
    #[error("the engine (pid {pid}) exited during the soak: {status}")]
    EngineExited { pid: u32, status: String },
    #[error("{left} request(s) still in flight {waited:?} after the end")]
    NotDrained { left: usize, waited: Duration },
}

/// One sample of one process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Resources {
    pub rss_kib: u64,
    pub fds: u64,
    pub sockets: u64,
    /// CPU time used so far (user + system, `/proc/<pid>/stat`), seconds:
    /// which side of the pair is the bottleneck.
    pub cpu_s: f64,
}

impl Resources {
    /// Reads `/proc/<pid>`: `None` when the process is gone.
    pub fn of(pid: u32) -> Option<Resources> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let (mut fds, mut sockets) = (0, 0);
        for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
            fds += 1;
            if std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")) {
                sockets += 1;
            }
        }
        Some(Resources { rss_kib, fds, sockets, cpu_s: cpu_seconds(pid).unwrap_or(0.0) })
    }
}

/// `utime + stime` of `/proc/<pid>/stat` in seconds (fields 14 and 15,
/// counted after the parenthesised command name, in clock ticks).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf reads a configuration value; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| (utime + stime) as f64 / ticks as f64)
}

/// The two processes at one moment.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub at_s: f64,
    pub outputs: u64,
    pub requests: u64,
    pub runner: Resources,
    pub engine: Resources,
}

/// The soak's report (written as JSON).
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub concurrency: usize,
    pub max_tokens: u32,
    pub duration_s: f64,
    pub runner_pid: u32,
    pub engine_pid: u32,
    pub requests_sent: u64,
    pub requests_finished: u64,
    pub outputs: u64,
    pub outputs_per_s: f64,
    pub requests_per_s: f64,
    /// Requests whose finish arrived exactly once, after all their outputs.
    pub requests_accounted: u64,
    pub orphan_outputs: u64,
    pub batches: u64,
    pub start: Sample,
    pub warm: Sample,
    pub end: Sample,
    pub limits: GrowthLimits,
    pub samples: Vec<Sample>,
    pub failures: Vec<SoakFailure>,
    pub passed: bool,
}

/// Counters the request loops share.
#[derive(Default)]
struct Tally {
    outputs: AtomicU64,
    finished: AtomicU64,
    accounted: AtomicU64,
    sent: AtomicU64,
    stop: AtomicBool,
    in_flight: Mutex<HashSet<String>>,
    failures: Mutex<Vec<SoakFailure>>,
}

impl Tally {
    fn fail(&self, f: SoakFailure) {
        if let Ok(mut v) = self.failures.lock() {
            // The first hundred tell the story.
            if v.len() < 100 {
                v.push(f);
            }
        }
    }
}

/// The engine's child process, killed when dropped.
struct EngineChild(Child);

impl Drop for EngineChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").expect("the 0.32.0 schema is built in")
}

/// The engine's script: lean, instant steps, room for every request.
fn engine_script(o: &SoakOptions) -> serde_json::Value {
    let mut s = serde_json::json!({
        "version": "0.32.0",
        "lean": true,
        "step_delay_ms": 0,
        "max_num_seqs": o.concurrency.max(1),
        "max_model_len": i64::from(o.max_tokens) + 64,
        "lifetime_s": o.duration.as_secs() + 120,
    });
    if let Some(f) = &o.engine_fault {
        s["fault"] = f.clone();
    }
    s
}

/// Runs the soak (module docs). `Err` when it could not run; a soak that
/// ran gives its report, `passed` false with the failures when it failed.
pub async fn run(o: &SoakOptions) -> Result<SoakReport, SoakError> {
    let dir = tempfile::Builder::new().prefix("gpu-runner-soak").tempdir().map_err(SoakError::TempDir)?;
    let script_path = dir.path().join("engine.json");
    std::fs::write(&script_path, engine_script(o).to_string())
        .map_err(|source| SoakError::Script { path: script_path.clone(), source })?;
    let mut cfg = ClientConfig::new(release(), dir.path().join("ipc"));
    cfg.silence = o.silence;
    let gw = EngineClient::bind(cfg).await?;
    let mut child = EngineChild(
        Command::new(&o.engine_exe)
            .arg("mock-engine")
            .args(["--handshake", gw.handshake_endpoint()])
            .arg("--script")
            .arg(&script_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|source| SoakError::Spawn { exe: o.engine_exe.clone(), source })?,
    );
    let engine_pid = child.0.id();
    gw.wait_ready(1, Duration::from_secs(60)).await?;
    let gw = Arc::new(gw);
    let tally = Arc::new(Tally::default());
    let runner_pid = std::process::id();
    let started = Instant::now();
    let sample = |tally: &Tally| Sample {
        at_s: started.elapsed().as_secs_f64(),
        outputs: tally.outputs.load(Ordering::Relaxed),
        requests: tally.finished.load(Ordering::Relaxed),
        runner: Resources::of(runner_pid).unwrap_or_default(),
        engine: Resources::of(engine_pid).unwrap_or_default(),
    };
    let start = sample(&tally);
    let loops: Vec<_> = (0..o.concurrency.max(1))
        .map(|lane| tokio::spawn(request_loop(gw.clone(), tally.clone(), lane, u64::from(o.max_tokens))))
        .collect();
    let mut samples = vec![start];
    let warm_at = o.duration.mul_f64(o.warmup.clamp(0.0, 0.9));
    let mut warm: Option<Sample> = None;
    let mut exited = None;
    let tick = o.sample_every.min(o.duration).max(Duration::from_millis(100));
    while started.elapsed() < o.duration {
        let left = o.duration.saturating_sub(started.elapsed());
        let until_warm = warm_at.saturating_sub(started.elapsed());
        let wait = if warm.is_none() && !until_warm.is_zero() { tick.min(until_warm) } else { tick };
        tokio::time::sleep(wait.min(left)).await;
        if let Ok(Some(status)) = child.0.try_wait() {
            exited = Some(status.to_string());
            break;
        }
        let s = sample(&tally);
        if warm.is_none() && started.elapsed() >= warm_at {
            warm = Some(s);
        }
        if o.progress {
            eprintln!(
                "soak {:>7.1}s outputs {} requests {} runner rss {} KiB fds {} | engine rss {} KiB fds {}",
                s.at_s, s.outputs, s.requests, s.runner.rss_kib, s.runner.fds, s.engine.rss_kib, s.engine.fds
            );
        }
        samples.push(s);
    }
    let elapsed = started.elapsed();
    let end = sample(&tally);
    samples.push(end);
    let (outputs, finished) = (end.outputs, end.requests);
    // Stop starting requests; let the ones in flight finish.
    tally.stop.store(true, Ordering::Relaxed);
    let drain = o.silence + Duration::from_secs(5);
    let drained = tokio::time::timeout(drain, futures_util::future::join_all(loops)).await.is_ok();
    let stats = gw.stats().await;
    let mut failures = tally.failures.lock().map(|v| v.clone()).unwrap_or_default();
    if let Some(status) = exited {
        failures.push(SoakFailure::EngineExited { pid: engine_pid, status });
    }
    if !drained {
        let left = tally.in_flight.lock().map(|s| s.len()).unwrap_or(0);
        failures.push(SoakFailure::NotDrained { left, waited: drain });
    }
    if stats.orphan_outputs > 0 {
        failures.push(SoakFailure::Duplicated { count: stats.orphan_outputs });
    }
    let warm = warm.unwrap_or(start);
    failures.extend(growth_failures(&warm, &end, o.limits));
    if let Ok(gw) = Arc::try_unwrap(gw) {
        gw.shutdown().await;
    }
    drop(child);
    let secs = elapsed.as_secs_f64().max(1e-9);
    Ok(SoakReport {
        concurrency: o.concurrency,
        max_tokens: o.max_tokens,
        duration_s: secs,
        runner_pid,
        engine_pid,
        requests_sent: tally.sent.load(Ordering::Relaxed),
        requests_finished: tally.finished.load(Ordering::Relaxed),
        outputs: tally.outputs.load(Ordering::Relaxed),
        outputs_per_s: outputs as f64 / secs,
        requests_per_s: finished as f64 / secs,
        requests_accounted: tally.accounted.load(Ordering::Relaxed),
        orphan_outputs: stats.orphan_outputs,
        batches: stats.batches,
        start,
        warm,
        end,
        limits: o.limits,
        samples,
        passed: failures.is_empty(),
        failures,
    })
}

/// The growth of each process from `warm` to `end` beyond `limits`.
pub fn growth_failures(warm: &Sample, end: &Sample, limits: GrowthLimits) -> Vec<SoakFailure> {
    let mut failures = Vec::new();
    for (process, w, e) in [("runner", warm.runner, end.runner), ("engine", warm.engine, end.engine)] {
        let grew_kib = e.rss_kib.saturating_sub(w.rss_kib);
        if grew_kib > limits.rss_kib {
            failures.push(SoakFailure::RssGrowth { process: process.into(), grew_kib, limit_kib: limits.rss_kib });
        }
        let grew = e.fds.saturating_sub(w.fds);
        if grew > limits.fds {
            failures.push(SoakFailure::FdGrowth { process: process.into(), grew, limit: limits.fds });
        }
    }
    failures
}

/// One lane of the closed loop: a request, read to its finish, then the
/// next, until the soak stops.
async fn request_loop(gw: Arc<EngineClient>, tally: Arc<Tally>, lane: usize, max_tokens: u64) {
    let mut sp = sampling_params_value(release());
    sp.set("temperature", Value::Float(0.0))
        .set("max_tokens", Value::Int(max_tokens as i64))
        .set("output_kind", Value::Int(1))
        .set("ignore_eos", Value::Bool(true));
    let mut n = 0u64;
    while !tally.stop.load(Ordering::Relaxed) {
        let id = format!("soak-{lane}-{n}");
        n += 1;
        let req = engine_core_request_value(release(), id.clone(), vec![1, 345, 305, 463, 406], sp.clone(), 1.7e9);
        if let Ok(mut set) = tally.in_flight.lock() {
            set.insert(id.clone());
        }
        tally.sent.fetch_add(1, Ordering::Relaxed);
        let mut stream = match gw.add(0, &req).await {
            Ok(s) => s,
            Err(e) => {
                tally.fail(SoakFailure::Lost { request_id: id, why: e.to_string() });
                return;
            }
        };
        let mut outputs = 0u64;
        let ended = loop {
            match stream.next().await {
                Some(RequestEvent::Output(step)) => {
                    outputs += 1;
                    tally.outputs.fetch_add(1, Ordering::Relaxed);
                    if step.finish_reason.is_some() {
                        break Ok(());
                    }
                }
                Some(RequestEvent::Aborted) => break Err("aborted".to_string()),
                Some(RequestEvent::Failed(e)) => break Err(e.to_string()),
                None => break Err("the stream ended without a finish".to_string()),
            }
        };
        let known = tally.in_flight.lock().map(|mut s| s.remove(&id)).unwrap_or(false);
        match ended {
            Err(why) => tally.fail(SoakFailure::Lost { request_id: id, why }),
            Ok(()) => {
                tally.finished.fetch_add(1, Ordering::Relaxed);
                if outputs != max_tokens {
                    tally.fail(SoakFailure::Short { request_id: id, outputs, expected: max_tokens });
                } else if known {
                    tally.accounted.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.fail(SoakFailure::Duplicated { count: 1 });
                }
            }
        }
    }
}

/// Writes the report as JSON.
pub fn write_report(path: &Path, r: &SoakReport) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(r).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// The summary lines printed after a soak.
pub fn summary(r: &SoakReport) -> String {
    let mut s = format!(
        "soak: concurrency {} max_tokens {} for {:.1}s: {} outputs ({:.0}/s), {} requests ({:.0}/s), {} of {} sent accounted, {} orphan outputs\n",
        r.concurrency,
        r.max_tokens,
        r.duration_s,
        r.outputs,
        r.outputs_per_s,
        r.requests_finished,
        r.requests_per_s,
        r.requests_accounted,
        r.requests_sent,
        r.orphan_outputs,
    );
    for (name, pick) in [("runner", 0), ("engine", 1)] {
        let get = |x: &Sample| if pick == 0 { x.runner } else { x.engine };
        let (a, w, e) = (get(&r.start), get(&r.warm), get(&r.end));
        s += &format!(
            "  {name}: rss {} / {} / {} KiB, fds {} / {} / {}, sockets {} / {} / {} (start / warm / end), cpu {:.0}% of a core\n",
            a.rss_kib,
            w.rss_kib,
            e.rss_kib,
            a.fds,
            w.fds,
            e.fds,
            a.sockets,
            w.sockets,
            e.sockets,
            100.0 * (e.cpu_s - a.cpu_s) / r.duration_s.max(1e-9)
        );
    }
    if r.passed {
        s += "soak passed\n";
    } else {
        for f in &r.failures {
            s += &format!("soak FAILED: {f}\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(runner: (u64, u64), engine: (u64, u64)) -> Sample {
        let r = |(rss_kib, fds)| Resources { rss_kib, fds, sockets: 0, cpu_s: 0.0 };
        Sample { at_s: 0.0, outputs: 0, requests: 0, runner: r(runner), engine: r(engine) }
    }

    #[test]
    fn growth_within_the_limits_is_no_failure() {
        let limits = GrowthLimits { rss_kib: 1024, fds: 2 };
        let f = growth_failures(&sample((10_000, 10), (8_000, 9)), &sample((11_000, 12), (7_000, 9)), limits);
        assert_eq!(f, vec![]);
    }

    #[test]
    fn memory_growth_past_the_limit_fails_naming_the_process() {
        let limits = GrowthLimits { rss_kib: 1024, fds: 2 };
        let f = growth_failures(&sample((10_000, 10), (8_000, 9)), &sample((10_000, 10), (9_025, 9)), limits);
        assert_eq!(f, vec![SoakFailure::RssGrowth { process: "engine".into(), grew_kib: 1025, limit_kib: 1024 }]);
    }

    #[test]
    fn descriptor_growth_past_the_limit_fails_naming_the_process() {
        let limits = GrowthLimits { rss_kib: 1024, fds: 2 };
        let f = growth_failures(&sample((10_000, 10), (8_000, 9)), &sample((10_000, 13), (8_000, 9)), limits);
        assert_eq!(f, vec![SoakFailure::FdGrowth { process: "runner".into(), grew: 3, limit: 2 }]);
    }

    #[test]
    fn resources_of_this_process_are_read_from_proc() {
        let r = Resources::of(std::process::id()).expect("this process is alive");
        assert!(r.rss_kib > 0 && r.fds >= 3 && r.cpu_s >= 0.0, "{r:?}");
        assert_eq!(Resources::of(u32::MAX), None);
    }
}
