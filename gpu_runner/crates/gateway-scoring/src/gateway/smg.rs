//! SMG (Shepherd Model Gateway, PyPI `smg`) as a gateway under test: where
//! it binds its engine sockets and how it is started.
//!
//! Facts relied on (smg 1.13.0 wheel, `smg/serve.py` and `smg/router_args.py`;
//! checked live, docs/runner/gateway.md "Scoring a gateway"):
//!
//! - `smg launch --worker-urls ipc://P --backend vllm` makes the worker a
//!   ZMQ worker speaking vLLM's EngineCore wire; SMG binds the input ROUTER
//!   on `ipc://P-in.sock`, the output PULL on `ipc://P-out.sock` and the
//!   handshake ROUTER on `tcp://127.0.0.1:<port>` with the port derived from
//!   the URL ([`handshake_port`]); the engine dials in;
//! - SMG binds those sockets on its worker start-up probe, which runs every
//!   `--worker-startup-check-interval` seconds (default 30): with `1` the
//!   handshake port is open about a second after start; when the worker
//!   registers after the health-probe loop's first tick the sockets come
//!   with the next health probe (`--health-check-interval-secs`, default
//!   60), so every launch here also passes `--health-check-interval-secs 1`;
//! - SMG's OpenAI routes take text prompts only (a list of token ids is
//!   refused: `prompt: data did not match any variant of untagged enum
//!   StringOrArray`), tokenized with `--tokenizer-path`;
//! - `/readiness` answers 200 once a worker is up; SIGTERM waits up to
//!   `--shutdown-grace-period-secs` (default 180) for in-flight requests;
//! - `--request-timeout-secs` (default 1800, `RouterArgs.request_timeout_secs`)
//!   bounds a request: the silent-engine scenario launches with a short one;
//! - the metrics listener binds `0.0.0.0:29000` unless `--prometheus-port`
//!   and `--prometheus-host` say otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::error::GatewayError;

use process_sandbox::launcher::EngineProcess;

/// The version this suite was written against (setup-smg.sh pins it).
pub const VERSION: &str = "1.13.0";

/// The handshake port SMG derives from an `ipc://` worker URL: FNV-1a
/// (64-bit, offset `0xcbf29ce484222325`, prime `0x100000001b3`) over the
/// UTF-8 bytes of the path after `ipc://`, folded into `20000..=29999`.
/// The wheel's Python twin is `smg.serve._zmq_handshake_port`, which hashes
/// a string without the scheme as it is.
pub fn handshake_port(ipc_url: &str) -> u16 {
    let path = ipc_url.strip_prefix("ipc://").unwrap_or(ipc_url);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in path.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    20000 + (h % 10000) as u16
}

/// `tcp://127.0.0.1:<handshake_port(url)>`.
pub fn handshake_address(ipc_url: &str) -> String {
    format!("tcp://127.0.0.1:{}", handshake_port(ipc_url))
}

/// The venv `gpu_runner/python/setup-smg.sh` makes.
pub fn default_venv() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(format!(".cache/engine-conformance/venvs/smg-{VERSION}"))
}

/// Checks the venv is complete (setup-smg.sh touches `.complete` last).
pub fn check_venv(venv: &Path) -> Result<(), GatewayError> {
    if venv.join(".complete").is_file() && venv.join("bin/smg").exists() {
        Ok(())
    } else {
        Err(GatewayError::NoVenv { venv: venv.to_path_buf() })
    }
}

/// `smg --version` of the venv, e.g. `1.13.0` (the first version-looking
/// word of its output).
pub fn version(venv: &Path) -> Result<String, GatewayError> {
    let out = Command::new(venv.join("bin/smg"))
        .arg("--version")
        .output()
        .map_err(|source| GatewayError::Io { path: venv.join("bin/smg"), source })?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.split(|c: char| c.is_whitespace() || c == ',')
        .map(|w| w.trim_start_matches('v'))
        .find(|w| {
            w.split('.').count() == 3 && w.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
        .ok_or_else(|| GatewayError::NoVersion { output: text.trim().to_string() })
}

/// Where one SMG instance listens.
#[derive(Debug, Clone)]
pub struct SmgSpec {
    pub http_port: u16,
    pub prometheus_port: u16,
    /// `ipc://<dir>/engine-1`.
    pub worker_url: String,
    /// Model directory: tokenizer, chat template, config (EOS ids).
    pub model: PathBuf,
}

/// The arguments after `smg`.
pub fn launch_args(spec: &SmgSpec) -> Vec<String> {
    let model = spec.model.display().to_string();
    [
        "launch",
        "--host",
        "127.0.0.1",
        "--port",
        &spec.http_port.to_string(),
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        &spec.prometheus_port.to_string(),
        "--worker-urls",
        &spec.worker_url,
        "--backend",
        "vllm",
        "--model-path",
        &model,
        "--tokenizer-path",
        &model,
        "--worker-startup-check-interval",
        "1",
        "--health-check-interval-secs",
        "1",
        "--shutdown-grace-period-secs",
        "2",
        "--log-level",
        "debug",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Starts SMG from `venv` in its own process group, logging to `log`.
pub fn launch(venv: &Path, spec: &SmgSpec, log: &Path) -> Result<EngineProcess, GatewayError> {
    launch_with(venv, spec, &[], log)
}

/// [`launch`] with `extra` arguments after [`launch_args`] (a scenario's
/// `gateway_args`, e.g. `--request-timeout-secs 3`).
pub fn launch_with(venv: &Path, spec: &SmgSpec, extra: &[String], log: &Path) -> Result<EngineProcess, GatewayError> {
    let mut cmd = Command::new(venv.join("bin/smg"));
    let args: Vec<String> = launch_args(spec).into_iter().chain(extra.iter().cloned()).collect();
    cmd.args(&args);
    let io = |source| GatewayError::Io { path: log.to_path_buf(), source };
    let mut f = std::fs::File::create(log).map_err(io)?;
    // The command heads its log, credentials redacted (process_sandbox::redact).
    let line = process_sandbox::redact::command_line(venv.join("bin/smg").display().to_string(), &args);
    std::io::Write::write_all(&mut f, format!("# gpu-runner started: {line}\n").as_bytes()).map_err(io)?;
    let g = f.try_clone().map_err(io)?;
    cmd.stdout(f).stderr(g);
    // Colourless logs; the socket directory stays the one in the URL.
    cmd.env("NO_COLOR", "1").env("RUST_LOG_STYLE", "never");
    cmd.env("TMPDIR", super::command::private_tmp(log)?);
    EngineProcess::spawn(cmd, Duration::from_secs(10)).map_err(GatewayError::Spawn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed by the smg 1.13.0 wheel's `smg.serve._zmq_handshake_port`
    /// (the first four are also the vectors SMG's own tests pin).
    #[test]
    fn handshake_port_matches_the_wheels_python() {
        for (url, port) in [
            ("ipc:///tmp/smg-zmq/ts0.ipc", 25152),
            ("ipc:///tmp/smg-zmq/ts1.ipc", 22735),
            ("ipc:///tmp/smg-zmq/engine-31000", 22714),
            ("ts0.ipc", 23912),
            ("", 26037),
            ("a", 21996),
            ("/x/y/z.ipc", 25483),
            ("ipc:///tmp/gpu-runner-1/smg/engine-1", 21140),
            ("ipc:///tmp/日本/engine-1", 21917),
        ] {
            assert_eq!(handshake_port(url), port, "{url:?}");
        }
        assert_eq!(handshake_address("ipc:///tmp/smg-zmq/ts0.ipc"), "tcp://127.0.0.1:25152");
    }

    #[test]
    fn launch_args_name_the_zmq_worker_and_private_ports() {
        let a = launch_args(&SmgSpec {
            http_port: 18080,
            prometheus_port: 18081,
            worker_url: "ipc:///tmp/x/engine-1".into(),
            model: "golden/tiny".into(),
        });
        let at = |k: &str| a.iter().position(|x| x == k).map(|i| a[i + 1].as_str());
        assert_eq!(a[0], "launch");
        assert_eq!(at("--worker-urls"), Some("ipc:///tmp/x/engine-1"));
        assert_eq!(at("--backend"), Some("vllm"));
        assert_eq!(at("--prometheus-host"), Some("127.0.0.1"));
        assert_eq!(at("--worker-startup-check-interval"), Some("1"));
    }
}
