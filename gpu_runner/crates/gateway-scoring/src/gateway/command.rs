//! Any gateway started by a command line (`--launch 'CMD'`; docs/runner/gateway.md
//! "Scoring a gateway"), vLLM's own OpenAI frontend among them ("The
//! reference run": `vllm serve {model} ... --data-parallel-rpc-port
//! {handshake_port}`): the placeholders `{http_port}`, `{prometheus_port}`,
//! `{worker_url}`, `{handshake_port}`, `{model}` filled in, run by `sh -c`
//! in its own process group, its output in the gateway log.
//!
//! Every launched gateway gets a temporary directory of its own (`TMPDIR`,
//! which Python's `tempfile` and so vLLM's `ipc://` socket paths follow):
//! `t/` beside its log, so that what it leaves behind after a shutdown
//! (socket files) can be found and counted.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::error::GatewayError;
use process_sandbox::launcher::EngineProcess;

/// The values a command's placeholders take.
#[derive(Debug, Clone, Copy)]
pub struct Placeholders<'a> {
    pub http_port: u16,
    pub prometheus_port: u16,
    pub worker_url: &'a str,
    pub handshake_port: u16,
    pub model: &'a str,
}

/// The command with its placeholders filled in.
pub fn expand(template: &str, p: &Placeholders<'_>) -> String {
    template
        .replace("{http_port}", &p.http_port.to_string())
        .replace("{prometheus_port}", &p.prometheus_port.to_string())
        .replace("{worker_url}", p.worker_url)
        .replace("{handshake_port}", &p.handshake_port.to_string())
        .replace("{model}", p.model)
}

/// The launched gateway's `TMPDIR`: `t/` beside its log, created. Short,
/// because a Unix socket path inside it has at most 107 bytes.
pub fn private_tmp(log: &Path) -> Result<std::path::PathBuf, GatewayError> {
    let dir = log.parent().unwrap_or(Path::new(".")).join("t");
    std::fs::create_dir_all(&dir).map_err(|source| GatewayError::Io { path: dir.clone(), source })?;
    Ok(dir)
}

/// Starts the command, its output going to `log`.
pub fn launch(template: &str, p: &Placeholders<'_>, log: &Path) -> Result<EngineProcess, GatewayError> {
    let mut c = std::process::Command::new("sh");
    c.arg("-c").arg(expand(template, p));
    let io = |source| GatewayError::Io { path: log.to_path_buf(), source };
    let mut f = std::fs::File::create(log).map_err(io)?;
    // The command heads its log, credentials redacted (process_sandbox::redact).
    writeln!(f, "# gpu-runner started: {}", process_sandbox::redact::text(&expand(template, p))).map_err(io)?;
    let g = f.try_clone().map_err(io)?;
    c.stdout(f).stderr(g).env("TMPDIR", private_tmp(log)?);
    EngineProcess::spawn(c, Duration::from_secs(10)).map_err(GatewayError::Spawn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_placeholder_is_filled_in() {
        let p =
            Placeholders { http_port: 1, prometheus_port: 2, worker_url: "ipc:///w", handshake_port: 3, model: "/m" };
        assert_eq!(
            expand("x {http_port} {prometheus_port} {worker_url} {handshake_port} {model} {model}", &p),
            "x 1 2 ipc:///w 3 /m /m"
        );
    }
}
