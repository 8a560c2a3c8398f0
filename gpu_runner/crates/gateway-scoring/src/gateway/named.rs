//! Gateways the suite knows how to start by name: vLLM's own OpenAI
//! frontends from the project's venvs (`golden/generate/setup-venvs.sh`),
//! the references every other gateway is scored against.
//!
//! Facts relied on (docs/runner/gateway.md "The reference run"; vLLM 0.32.0 and
//! 0.33.0 `vllm/entrypoints/cli/serve.py`): `vllm serve MODEL
//! --data-parallel-size 1 --data-parallel-size-local 0
//! --data-parallel-address A --data-parallel-rpc-port P` starts the API
//! server with no local engine; it binds the handshake socket on `A:P` and
//! waits for an engine to dial in, and answers `/health` once one has.
//! With `VLLM_USE_RUST_FRONTEND=1` vLLM 0.33.0 starts its Rust frontend
//! (`vllm/vllm-rs` in the wheel) in the Python one's place, with the same
//! command line.

use std::path::{Path, PathBuf};

/// A frontend the suite can start by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NamedGateway {
    /// `vllm-0.32.0`, `vllm-0.33.0`, `vllm-rs-0.33.0`.
    pub name: &'static str,
    /// The vLLM release (its venv, and the registration the mock sends).
    pub release: &'static str,
    /// The Rust frontend instead of the Python one.
    pub rust: bool,
}

/// Every named gateway.
pub const NAMED: &[NamedGateway] = &[
    NamedGateway { name: "vllm-0.32.0", release: "0.32.0", rust: false },
    NamedGateway { name: "vllm-0.33.0", release: "0.33.0", rust: false },
    NamedGateway { name: "vllm-rs-0.33.0", release: "0.33.0", rust: true },
];

/// The named gateway `name`, if there is one.
pub fn named(name: &str) -> Option<&'static NamedGateway> {
    NAMED.iter().find(|g| g.name == name)
}

impl NamedGateway {
    /// Its venv under `root` (`~/.cache/engine-conformance/venvs`).
    pub fn venv(&self, root: &Path) -> PathBuf {
        root.join(format!("vllm-{}", self.release))
    }

    /// The file whose presence says the venv can run this frontend, and
    /// the setup command that makes it.
    pub fn ready_marker(&self) -> (&'static str, String) {
        match self.release {
            "0.32.0" => (".complete", "golden/generate/setup-venvs.sh 0.32.0".into()),
            r => (".frontend-complete", format!("golden/generate/setup-venvs.sh {r}-frontend")),
        }
    }

    /// The launch command (placeholders as `--launch` takes them).
    pub fn launch_command(&self, venv: &Path) -> String {
        let rust = if self.rust { "VLLM_USE_RUST_FRONTEND=1 " } else { "" };
        format!(
            "VLLM_TARGET_DEVICE=cpu {rust}{}/bin/vllm serve {{model}} --host 127.0.0.1 --port {{http_port}} \
             --data-parallel-size 1 --data-parallel-size-local 0 --data-parallel-address 127.0.0.1 \
             --data-parallel-rpc-port {{handshake_port}} --max-model-len 512",
            venv.display()
        )
    }

    /// Its launch from `venv` (default: the project's venv of its release,
    /// beside `launcher::default_cpu_venv`), or why that venv cannot run
    /// it (no ready marker; the message names the setup command).
    pub fn launch(&self, venv: Option<&Path>) -> Result<super::GatewayLaunch, NoReadyVenv> {
        let root = process_sandbox::launcher::default_cpu_venv().parent().map(Path::to_path_buf).unwrap_or_default();
        let v = venv.map_or_else(|| self.venv(&root), Path::to_path_buf);
        let (marker, setup) = self.ready_marker();
        if !v.join(marker).is_file() {
            return Err(NoReadyVenv { gateway: self.name, venv: v, setup });
        }
        Ok(super::GatewayLaunch::Command(self.launch_command(&v)))
    }

    /// The recorded registration of a live engine of its release, which
    /// the mock engine sends it.
    pub fn registration_case(&self) -> String {
        format!("golden/vllm/{}/live/handshake-ready-response.json", self.release)
    }
}

/// A named gateway's venv is not ready: the venv and the command that
/// sets it up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{gateway}: no ready venv at {} (run {setup})", venv.display())]
pub struct NoReadyVenv {
    pub gateway: &'static str,
    pub venv: PathBuf,
    pub setup: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_frontend_is_the_python_command_with_its_switch() {
        let v = Path::new("/v");
        let py = named("vllm-0.33.0").unwrap().launch_command(v);
        let rs = named("vllm-rs-0.33.0").unwrap().launch_command(v);
        assert_eq!(rs, py.replacen("VLLM_TARGET_DEVICE=cpu ", "VLLM_TARGET_DEVICE=cpu VLLM_USE_RUST_FRONTEND=1 ", 1));
        assert!(py.contains("/v/bin/vllm serve {model}") && py.contains("--data-parallel-size-local 0"), "{py}");
        assert!(py.contains("--data-parallel-rpc-port {handshake_port}"), "{py}");
    }

    #[test]
    fn each_names_its_venv_marker_and_registration() {
        let g = named("vllm-rs-0.33.0").unwrap();
        assert_eq!(g.venv(Path::new("/r")), Path::new("/r/vllm-0.33.0"));
        assert_eq!(g.ready_marker().0, ".frontend-complete");
        assert_eq!(g.registration_case(), "golden/vllm/0.33.0/live/handshake-ready-response.json");
        assert_eq!(named("vllm-0.32.0").unwrap().ready_marker().0, ".complete");
        assert!(named("vllm-0.34.0").is_none());
    }
}
