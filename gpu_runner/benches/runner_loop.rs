//! The gateway's own cost: output batches decoded and demultiplexed per
//! second by the gpu-runner transport, fed at full speed over a real ZeroMQ
//! PUSH -> PULL ipc socket by a fake engine (`bench/runner_loop.py source`,
//! pyzmq + vLLM's own `MsgpackEncoder`, the same source the Python loop is
//! timed against). See docs/bench.md "The runner's output loop".
//!
//! The whole runner path runs, nothing is bypassed: `EngineClient::bind`, the
//! handshake with the source as engine 0, one ADD per in-flight request,
//! then for every batch the PULL pump, `decode_message` (release 0.32.0),
//! the demultiplex by `request_id` onto each request's stream, and one
//! reader task per request taking its outputs (`RequestEvents::next`), all
//! on a current-thread tokio runtime as `gpu-runner` uses.
//!
//! - `cargo bench -p gpu-runner --bench runner_loop`: criterion, one bench
//!   per batch shape, time per batch and outputs per second;
//! - `runner_loop --serve ...`: line protocol for bench/runner-compare.sh
//!   (`<shape> <count>` in, `<shape> <count> <outputs> <wall_ns> <cpu_ns>`
//!   out), which interleaves it with the Python loop.
//!
//! The source needs a Python with vLLM 0.32.0 and pyzmq:
//! `RUNNER_BENCH_PYTHON` (default
//! `~/.cache/engine-conformance/venvs/vllm-0.32.0/bin/python`); without it
//! the criterion benches are skipped with a message.

// The allocator the `gpu-runner` binary uses (feature `mimalloc`, default).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::hint::black_box;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use engine_protocol::internal::{
    engine_core_request_value as engine_core_request, sampling_params_value as sampling_params,
};
use engine_protocol::ReleaseSchema;
use engine_protocol::Value;
use gpu_runner::transport::{ClientConfig, EngineClient, RequestEvent};
use tokio::runtime::Runtime;
use tokio::sync::Notify;

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").expect("the 0.32.0 schema")
}

/// The request ids `bench/runner_loop.py` derives (`request_ids`).
fn request_ids(n: usize) -> Vec<String> {
    fn splitmix64(x: u64) -> u64 {
        let x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let z = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    (0..n as u64).map(|i| format!("chatcmpl-{:016x}{:016x}", splitmix64(2 * i), splitmix64(2 * i + 1))).collect()
}

#[derive(Debug, Clone)]
struct Options {
    python: PathBuf,
    script: PathBuf,
    shapes: Vec<usize>,
    requests: usize,
    pool: usize,
}

impl Options {
    fn defaults() -> Options {
        let python = std::env::var_os("RUNNER_BENCH_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
            let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
            home.join(".cache/engine-conformance/venvs/vllm-0.32.0/bin/python")
        });
        Options {
            python,
            script: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/runner_loop.py")),
            shapes: vec![1, 32, 128],
            requests: 256,
            pool: 256,
        }
    }

    /// `--python P --script S --shapes 1,32 --requests N --pool P`.
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::defaults();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
            match a.as_str() {
                "--serve" => {}
                "--python" => o.python = val()?.into(),
                "--script" => o.script = val()?.into(),
                "--shapes" => {
                    o.shapes = val()?
                        .split(',')
                        .map(|s| s.parse().map_err(|e| format!("--shapes: {e}")))
                        .collect::<Result<_, _>>()?
                }
                "--requests" => o.requests = val()?.parse().map_err(|e| format!("--requests: {e}"))?,
                "--pool" => o.pool = val()?.parse().map_err(|e| format!("--pool: {e}"))?,
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(o)
    }

    fn join(v: &[usize]) -> String {
        v.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
    }
}

/// Counts the outputs the request readers take, and wakes the timer when
/// the expected number has arrived.
#[derive(Default)]
struct Tally {
    outputs: AtomicU64,
    target: AtomicU64,
    failures: AtomicU64,
    done: Notify,
    /// Set before the gateway shuts down (the streams then end `Closed`).
    closing: AtomicBool,
}

/// The gateway with its engine (the Python source) up and `requests`
/// requests in flight, each with a reader task.
struct Rig {
    rt: Runtime,
    gw: Option<EngineClient>,
    source: Child,
    source_in: Option<ChildStdin>,
    tally: Arc<Tally>,
    batches_seen: u64,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn start(o: &Options) -> Result<Rig, String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut cfg = ClientConfig::new(release(), dir.path());
        cfg.silence = Duration::from_secs(3600);
        let tally = Arc::new(Tally::default());
        let (gw, source) = rt.block_on(async {
            let gw = EngineClient::bind(cfg).await.map_err(|e| e.to_string())?;
            let mut source = Command::new(&o.python)
                .arg(&o.script)
                .arg("source")
                .args(["--handshake", gw.handshake_endpoint()])
                .args(["--shapes", &Options::join(&o.shapes)])
                .args(["--requests", &o.requests.to_string(), "--pool", &o.pool.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {} {}: {e}", o.python.display(), o.script.display()))?;
            // vLLM's import takes seconds on this machine.
            if let Err(e) = gw.wait_ready(1, Duration::from_secs(180)).await {
                let _ = source.kill();
                return Err(format!("the source engine did not come up: {e}"));
            }
            let mut sp = sampling_params(release());
            sp.set("temperature", Value::Float(0.0))
                .set("max_tokens", Value::Int(1 << 30))
                .set("output_kind", Value::Int(1))
                .set("ignore_eos", Value::Bool(true));
            for id in request_ids(o.requests) {
                let req = engine_core_request(release(), id, vec![1, 345, 305, 463, 406], sp.clone(), 1.7e9);
                let mut stream = gw.add(0, &req).await.map_err(|e| format!("add: {e}"))?;
                let tally = tally.clone();
                tokio::spawn(async move {
                    while let Some(ev) = stream.next().await {
                        match ev {
                            RequestEvent::Output(step) => {
                                black_box(&step);
                                drop(step);
                                let n = tally.outputs.fetch_add(1, Ordering::Relaxed) + 1;
                                if n == tally.target.load(Ordering::Relaxed) {
                                    tally.done.notify_one();
                                }
                            }
                            _ if tally.closing.load(Ordering::Relaxed) => return,
                            other => {
                                eprintln!("runner_loop: request {}: {other:?}", stream.request_id);
                                tally.failures.fetch_add(1, Ordering::Relaxed);
                                tally.done.notify_one();
                                return;
                            }
                        }
                    }
                });
            }
            Ok((gw, source))
        })?;
        let source_in = source_stdin(source)?;
        Ok(Rig {
            rt,
            gw: Some(gw),
            source: source_in.0,
            source_in: Some(source_in.1),
            tally,
            batches_seen: 0,
            _dir: dir,
        })
    }

    /// Has the source push `count` batches of `shape` outputs and returns the
    /// time until the last output reached its request's reader.
    fn measure(&mut self, shape: usize, count: u64) -> Result<Duration, String> {
        self.measure_with_cpu(shape, count).map(|(wall, _)| wall)
    }

    /// [`Rig::measure`], with the CPU time this process spent meanwhile.
    fn measure_with_cpu(&mut self, shape: usize, count: u64) -> Result<(Duration, Duration), String> {
        let gw = self.gw.as_ref().ok_or("gateway closed")?;
        let tally = self.tally.clone();
        let input = self.source_in.as_mut().ok_or("source closed")?;
        let timed = self.rt.block_on(async {
            tally.outputs.store(0, Ordering::Relaxed);
            tally.target.store(shape as u64 * count, Ordering::Relaxed);
            let cpu0 = cpu_time();
            let t0 = Instant::now();
            input
                .write_all(format!("push {shape} {count}\n").as_bytes())
                .and_then(|()| input.flush())
                .map_err(|e| format!("source: {e}"))?;
            if tokio::time::timeout(Duration::from_secs(600), tally.done.notified()).await.is_err() {
                return Err(format!(
                    "stalled: {} of {} outputs after 600s",
                    tally.outputs.load(Ordering::Relaxed),
                    shape as u64 * count
                ));
            }
            let elapsed = t0.elapsed();
            let cpu = cpu_time().saturating_sub(cpu0);
            if tally.failures.load(Ordering::Relaxed) > 0 {
                return Err("a request failed (see above)".into());
            }
            Ok((elapsed, cpu))
        })?;
        let stats = self.rt.block_on(gw.stats());
        if stats.orphan_outputs != 0 || stats.malformed_batches != 0 || stats.batches != self.batches_seen + count {
            return Err(format!(
                "gateway saw {} batches (expected {}), {} orphan outputs, {} malformed",
                stats.batches - self.batches_seen,
                count,
                stats.orphan_outputs,
                stats.malformed_batches
            ));
        }
        self.batches_seen = stats.batches;
        Ok(timed)
    }

    fn close(mut self) {
        self.tally.closing.store(true, Ordering::Relaxed);
        drop(self.source_in.take());
        if let Some(gw) = self.gw.take() {
            self.rt.block_on(gw.shutdown());
        }
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.source.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.source.kill();
        let _ = self.source.wait();
    }
}

/// User + system CPU time of this process (the gateway's one runtime thread
/// does all the work while a measurement runs).
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn source_stdin(mut c: Child) -> Result<(Child, ChildStdin), String> {
    let s = c.stdin.take().ok_or("source without stdin")?;
    Ok((c, s))
}

/// `--serve`: one measurement per stdin line `<shape> <count>` (or `decode
/// <shape> <count>`, the Python side's spelling); answers `<shape> <count>
/// <outputs> <wall ns> <cpu ns>`.
fn serve(o: &Options) -> Result<(), String> {
    let mut rig = Rig::start(o)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").and_then(|()| out.flush()).map_err(|e| e.to_string())?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let words: Vec<&str> = line.split_whitespace().filter(|w| *w != "decode").collect();
        let [shape, count] = words.as_slice() else {
            if words.is_empty() {
                continue;
            }
            return Err(format!("expected `<shape> <count>`, got {line:?}"));
        };
        let shape: usize = shape.parse().map_err(|e| format!("shape: {e}"))?;
        let count: u64 = count.parse().map_err(|e| format!("count: {e}"))?;
        if !o.shapes.contains(&shape) {
            return Err(format!("shape {shape} is not among --shapes"));
        }
        let (wall, cpu) = rig.measure_with_cpu(shape, count)?;
        writeln!(out, "{shape} {count} {} {} {}", shape as u64 * count, wall.as_nanos(), cpu.as_nanos())
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    rig.close();
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--serve") {
        let r = Options::parse(&args).and_then(|o| serve(&o));
        if let Err(e) = r {
            eprintln!("runner_loop: {e}");
            std::process::exit(1);
        }
        return;
    }
    let o = Options::defaults();
    if !o.python.exists() {
        eprintln!(
            "runner_loop: skipped, no Python at {} (set RUNNER_BENCH_PYTHON to a venv with vLLM 0.32.0: \
             golden/generate/setup-venvs.sh 0.32.0)",
            o.python.display()
        );
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let mut rig = match Rig::start(&o) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runner_loop: {e}");
            std::process::exit(1);
        }
    };
    let mut g = c.benchmark_group("runner_output_loop");
    for &shape in &o.shapes {
        g.throughput(Throughput::Elements(shape as u64));
        g.bench_function(BenchmarkId::new("batch", shape), |b| {
            b.iter_custom(|iters| rig.measure(shape, iters).unwrap_or_else(|e| panic!("runner_loop: {e}")))
        });
    }
    g.finish();
    rig.close();
    c.final_summary();
}
