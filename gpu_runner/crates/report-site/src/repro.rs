//! The commands that reproduce one finding with the suite, from a fresh
//! checkout: the venv's setup line, then one `gpu-runner` call that runs
//! just that scenario, probe, release or fault case.
//!
//! How a gateway is started by name is data (`gpu_runner/named-gateways.json`,
//! read by `gateway_scoring::gateway::named`); SMG is the one gateway the
//! runner starts from its own venv (`--gateway smg`, set up by
//! `gpu_runner/python/setup-smg.sh`), and its reports are named
//! `smg-<version>`. A report named `<named>-frontend` is a named gateway's
//! run kept under another name (`--name`).

use gateway_scoring::gateway::named::NamedGateway;

use crate::model::DiffFinding;

/// Set-up, then the command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repro {
    /// The command that installs what the gateway needs (once).
    pub setup: Option<String>,
    /// The suite's command for just this finding.
    pub command: String,
}

impl Repro {
    /// Both lines, as a shell snippet.
    pub fn script(&self) -> String {
        match &self.setup {
            Some(s) => format!("{s}\n{}", self.command),
            None => self.command.clone(),
        }
    }
}

const RUN: &str = "cargo run -q -p gpu-runner --";

/// How the runner starts the gateway a report names.
struct Launch {
    /// Its `--gateway` argument.
    gateway: String,
    /// The report's name where it is not that (`--name`).
    name: Option<String>,
    /// The command that installs what it needs.
    setup: Option<String>,
}

impl Launch {
    fn of(named: &[NamedGateway], report_name: &str) -> Launch {
        let setup_of = |n: &NamedGateway| Some(n.setup.clone()).filter(|s| !s.is_empty());
        if let Some(n) = named.iter().find(|n| n.name == report_name) {
            return Launch { gateway: n.name.clone(), name: None, setup: setup_of(n) };
        }
        if let Some(n) = report_name.strip_suffix("-frontend").and_then(|b| named.iter().find(|n| n.name == b)) {
            return Launch { gateway: n.name.clone(), name: Some(report_name.into()), setup: setup_of(n) };
        }
        if report_name.starts_with("smg-") || report_name == "smg" {
            return Launch { gateway: "smg".into(), name: None, setup: Some("gpu_runner/python/setup-smg.sh".into()) };
        }
        Launch { gateway: report_name.into(), name: None, setup: None }
    }

    /// `--gateway G` and, where the report's name differs, `--name N`.
    fn args(&self) -> String {
        match &self.name {
            Some(n) => format!("--gateway {} --name {n}", self.gateway),
            None => format!("--gateway {}", self.gateway),
        }
    }
}

/// `gpu-runner gateway ... --only SCENARIO`: without the expectations file
/// the known finding is reported as a failure (exit status 1), with the
/// checks that fail.
pub fn scenario(named: &[NamedGateway], gateway: &str, scenario: &str) -> Repro {
    let l = Launch::of(named, gateway);
    Repro { command: format!("{RUN} gateway {} --only {scenario}", l.args()), setup: l.setup }
}

/// `gpu-runner differential` for one field on one endpoint: the base
/// request is probed on every run, so a finding of the base request alone
/// is reproduced with any one field (`max_tokens`).
pub fn differential(named: &[NamedGateway], reference: &str, gateway: &str, f: &DiffFinding) -> Repro {
    // Both frontends need their venvs.
    let mut setups: Vec<String> = Vec::new();
    for name in [reference, gateway] {
        if let Some(s) = Launch::of(named, name).setup {
            if !setups.contains(&s) {
                setups.push(s);
            }
        }
    }
    let setup = Some(setups.join("\n")).filter(|s| !s.is_empty());
    let endpoint = if f.endpoint.contains("chat") { "chat" } else { "completions" };
    let stream = if f.stream { "yes" } else { "no" };
    let field = f.field.as_deref().unwrap_or("max_tokens");
    Repro {
        setup,
        command: format!(
            "{RUN} differential --reference {reference} --gateway {gateway} --field {field} --endpoints {endpoint} --stream {stream}"
        ),
    }
}

/// `gpu-runner release-sweep` against one engine release.
pub fn release(named: &[NamedGateway], gateway: &str, release: &str) -> Repro {
    // The sweep names its report after the gateway itself: no `--name`.
    let l = Launch::of(named, gateway);
    Repro { command: format!("{RUN} release-sweep --gateway {} --engine-release {release}", l.gateway), setup: l.setup }
}

/// `gpu-runner faults` for one fault case.
pub fn fault(named: &[NamedGateway], gateway: &str, case: &str) -> Repro {
    let l = Launch::of(named, gateway);
    Repro { command: format!("{RUN} faults {} --only {case}", l.args()), setup: l.setup }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named() -> Vec<NamedGateway> {
        vec![NamedGateway {
            name: "vllm-rs-0.34.0".into(),
            release: "0.34.0".into(),
            env: "VLLM_USE_RUST_FRONTEND=1 ".into(),
            venv: "vllm-0.34.0".into(),
            ready_marker: ".complete".into(),
            setup: "golden/generate/setup-venvs.sh 0.34.0".into(),
        }]
    }

    #[test]
    fn a_named_gateway_is_started_by_its_name_after_its_venv_is_set_up() {
        let r = scenario(&named(), "vllm-rs-0.34.0", "logprobs_top_k");
        assert_eq!(r.setup.as_deref(), Some("golden/generate/setup-venvs.sh 0.34.0"));
        assert!(r.command.ends_with("gateway --gateway vllm-rs-0.34.0 --only logprobs_top_k"), "{}", r.command);
    }

    #[test]
    fn an_smg_report_is_reproduced_with_smg_from_its_venv() {
        let r = scenario(&named(), "smg-1.13.0", "max_tokens_default");
        assert_eq!(r.setup.as_deref(), Some("gpu_runner/python/setup-smg.sh"));
        assert!(r.command.ends_with("gateway --gateway smg --only max_tokens_default"), "{}", r.command);
    }

    #[test]
    fn a_frontend_run_kept_under_another_name_keeps_that_name() {
        let r = scenario(&named(), "vllm-rs-0.34.0-frontend", "x");
        assert!(r.command.contains("--gateway vllm-rs-0.34.0 --name vllm-rs-0.34.0-frontend"), "{}", r.command);
    }

    #[test]
    fn a_differential_finding_is_rerun_for_its_field_endpoint_and_stream_only() {
        let f: DiffFinding = serde_json::from_value(serde_json::json!({
            "endpoint": "/v1/chat/completions", "stream": true, "field": "top_k", "value": 0,
            "request": {}, "differences": []}))
        .unwrap();
        let r = differential(&named(), "vllm-0.34.0", "vllm-rs-0.34.0", &f);
        assert!(
            r.command.ends_with(
                "differential --reference vllm-0.34.0 --gateway vllm-rs-0.34.0 --field top_k --endpoints chat --stream yes"
            ),
            "{}",
            r.command
        );
    }
}
