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
//! command line; 0.34.0 likewise. vLLM 0.34.0's CPU platform refuses an
//! x86 machine without triton-cpu while the frontend builds its config
//! (`vllm/platforms/cpu.py`, `CpuPlatform.check_and_update_config`), so its
//! lines name the launch shim `x86-without-triton` ([`shims_dir`];
//! docs/new-release.md "Launch shims").
//!
//! The gateways themselves are data: `gpu_runner/named-gateways.json` (a
//! line per gateway: release, environment, venv, ready marker, setup
//! command; one launch command line for all), embedded at build time, so
//! adding a frontend of a new release touches no Rust code.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

/// The recipes file, as committed (`gpu_runner/named-gateways.json`).
const RECIPES: &str = include_str!("../../../../named-gateways.json");

/// A frontend the suite can start by name (a line of the recipes file).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedGateway {
    /// `vllm-0.32.0`, `vllm-0.33.0`, `vllm-rs-0.33.0`, ...
    pub name: String,
    /// The vLLM release (the registration the mock sends it).
    pub release: String,
    /// What it adds to the launch command's environment
    /// (`VLLM_USE_RUST_FRONTEND=1 ` for vLLM's Rust frontend).
    pub env: String,
    /// Its venv's directory name under the venv root.
    pub venv: String,
    /// The file whose presence says the venv can run it.
    pub ready_marker: String,
    /// The command that sets the venv up.
    pub setup: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Recipes {
    #[serde(rename = "doc")]
    _doc: String,
    launch: String,
    gateways: Vec<NamedGateway>,
}

/// The launch shims (`gpu_runner/launch-shims/`): a folder per shim, with
/// the `sitecustomize.py` Python imports at start-up when a recipe's
/// environment puts `{shims}/NAME` on `PYTHONPATH` (`x86-without-triton`:
/// vLLM 0.34.0's CPU platform refuses an x86 machine without triton-cpu
/// even in a frontend that runs no kernel; the file says what it changes).
pub fn shims_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../launch-shims");
    dir.canonicalize().unwrap_or(dir)
}

/// The recipes file, read once.
fn recipes() -> &'static Recipes {
    static R: OnceLock<Recipes> = OnceLock::new();
    // The file is part of the build; `the_recipes_file_reads` pins that it
    // parses, so this cannot fail in a build whose tests passed.
    R.get_or_init(|| serde_json::from_str(RECIPES).expect("gpu_runner/named-gateways.json"))
}

/// Every named gateway, in the file's order.
pub fn all() -> &'static [NamedGateway] {
    &recipes().gateways
}

/// The named gateway `name`, if there is one.
pub fn named(name: &str) -> Option<&'static NamedGateway> {
    all().iter().find(|g| g.name == name)
}

impl NamedGateway {
    /// Its venv under `root` (`~/.cache/engine-conformance/venvs`).
    pub fn venv(&self, root: &Path) -> PathBuf {
        root.join(&self.venv)
    }

    /// The file whose presence says the venv can run this frontend, and
    /// the setup command that makes it.
    pub fn ready_marker(&self) -> (&str, &str) {
        (&self.ready_marker, &self.setup)
    }

    /// The launch command (placeholders `{model}`, `{http_port}`,
    /// `{handshake_port}` as `--launch` takes them).
    pub fn launch_command(&self, venv: &Path) -> String {
        let env = self.env.replace("{shims}", &shims_dir().display().to_string());
        recipes().launch.replace("{env}", &env).replace("{venv}", &venv.display().to_string())
    }

    /// The launch shims its environment names (`{shims}/NAME`).
    pub fn shims(&self) -> Vec<&str> {
        self.env
            .split_whitespace()
            .flat_map(|w| w.split(['=', ':']))
            .filter_map(|w| w.strip_prefix("{shims}/"))
            .collect()
    }

    /// Its launch from `venv` (default: the project's venv of its release,
    /// beside `launcher::default_cpu_venv`), or why that venv cannot run
    /// it (no ready marker; the message names the setup command).
    pub fn launch(&self, venv: Option<&Path>) -> Result<super::GatewayLaunch, NoReadyVenv> {
        let root = process_sandbox::launcher::default_cpu_venv().parent().map(Path::to_path_buf).unwrap_or_default();
        let v = venv.map_or_else(|| self.venv(&root), Path::to_path_buf);
        let (marker, setup) = self.ready_marker();
        if !v.join(marker).is_file() {
            return Err(NoReadyVenv { gateway: self.name.clone(), venv: v, setup: setup.to_string() });
        }
        Ok(super::GatewayLaunch::Command(self.launch_command(&v)))
    }

    /// The registration the mock engine sends it, relative to the
    /// repository `root`: the recorded capture of a live engine of its
    /// release, or where none exists the one that release's own encoder
    /// wrote ([`super::releases::registration_case`]; the recorded path
    /// when neither is there, so that the error names it).
    pub fn registration_case(&self, root: &Path) -> String {
        super::releases::registration_case(&self.release, root)
            .unwrap_or_else(|| super::releases::recorded_case(&self.release))
    }
}

/// A named gateway's venv is not ready: the venv and the command that
/// sets it up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{gateway}: no ready venv at {} (run {setup})", venv.display())]
pub struct NoReadyVenv {
    pub gateway: String,
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
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        assert_eq!(g.registration_case(&root), "golden/vllm/0.33.0/live/handshake-ready-response.json");
        assert_eq!(named("vllm-0.32.0").unwrap().ready_marker().0, ".complete");
        let g = named("vllm-rs-0.34.0").unwrap();
        assert_eq!(g.registration_case(&root), "golden/vllm/0.34.0/ready/cpu_engine.json", "no live 0.34.0 engine");
        assert!(named("vllm-0.11.0").is_none());
    }

    #[test]
    fn vllm_0_34_starts_with_the_shim_for_its_x86_triton_check_and_older_releases_without() {
        let v = Path::new("/v");
        let shim = shims_dir().join("x86-without-triton");
        for name in ["vllm-0.34.0", "vllm-rs-0.34.0"] {
            let g = named(name).unwrap();
            assert_eq!(g.shims(), ["x86-without-triton"], "{name}");
            let cmd = g.launch_command(v);
            assert!(cmd.contains(&format!("PYTHONPATH={} ", shim.display())), "{cmd}");
        }
        assert!(named("vllm-rs-0.34.0").unwrap().launch_command(v).contains(" VLLM_USE_RUST_FRONTEND=1 "));
        for name in ["vllm-0.32.0", "vllm-0.33.0", "vllm-rs-0.33.0"] {
            assert!(named(name).unwrap().shims().is_empty(), "{name}");
        }
    }

    #[test]
    fn every_shim_a_recipe_names_is_a_folder_with_its_sitecustomize() {
        for g in all() {
            for shim in g.shims() {
                let file = shims_dir().join(shim).join("sitecustomize.py");
                assert!(file.is_file(), "{}: {} is missing", g.name, file.display());
            }
        }
    }

    #[test]
    fn the_launch_command_is_vllm_serve_without_a_local_engine() {
        assert_eq!(
            named("vllm-0.32.0").unwrap().launch_command(Path::new("/v")),
            "VLLM_TARGET_DEVICE=cpu /v/bin/vllm serve {model} --host 127.0.0.1 --port {http_port} \
             --data-parallel-size 1 --data-parallel-size-local 0 --data-parallel-address 127.0.0.1 \
             --data-parallel-rpc-port {handshake_port} --max-model-len 512"
        );
    }

    #[test]
    fn the_recipes_file_reads_and_names_each_gateway_once() {
        let names: Vec<&str> = all().iter().map(|g| g.name.as_str()).collect();
        assert!(names.len() >= 3, "{names:?}");
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "a name twice: {names:?}");
        for g in all() {
            assert!(engine_protocol::release(engine_protocol::Dialect::Vllm, &g.release).is_ok(), "{}", g.release);
        }
    }

    #[test]
    fn a_recipe_with_an_unknown_key_is_refused() {
        let bad = r#"{"doc": "", "launch": "", "gateways": [{"name": "x", "release": "0.32.0", "env": "", "venv": "v", "ready_marker": "m", "setup": "s", "rust": true}]}"#;
        let e = serde_json::from_str::<Recipes>(bad).err().expect("refused");
        assert!(e.to_string().contains("unknown field `rust`"), "{e}");
    }
}
