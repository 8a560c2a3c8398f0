//! The reports the site is built from, read into types at load time: a
//! field the pages rely on that is missing or of the wrong kind refuses the
//! file with an error naming it (never a page with a hole).
//!
//! The shapes are those the runner writes (docs/runner/gateway.md "Scoring
//! a gateway", docs/runner/differential.md, docs/runner/releases.md,
//! docs/runner/fault-wire.md): `gpu-runner gateway --report-json`,
//! `differential --report-json`, `release-sweep --report-json`, `faults
//! --report-json`, and the scenario files under `golden/gateway/`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value as Json;

/// A scenario's verdict for one gateway, the vocabulary of
/// `scenario_checks::report` as the reports write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Outcome {
    #[serde(rename = "pass")]
    Pass,
    #[serde(rename = "fail")]
    Fail,
    /// A known finding, listed with its reason in the gateway's
    /// expectations file.
    #[serde(rename = "expected failure")]
    ExpectedFailure,
    #[serde(rename = "skip")]
    Skip,
    /// The checks passed while the decoder read fields its release's
    /// table does not have (`scenario_checks::report`).
    #[serde(rename = "drift")]
    Drift,
}

impl Outcome {
    /// The CSS class of its cell (`xfail` for an expected failure).
    pub fn class(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::ExpectedFailure => "xfail",
            Outcome::Skip => "skip",
            Outcome::Drift => "drift",
        }
    }

    /// As the reports write it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::ExpectedFailure => "expected failure",
            Outcome::Skip => "skip",
            Outcome::Drift => "drift",
        }
    }

    /// A fail or an expected failure: a finding about the gateway.
    pub fn is_finding(self) -> bool {
        matches!(self, Outcome::Fail | Outcome::ExpectedFailure)
    }
}

/// `gpu-runner gateway --report-json`.
#[derive(Debug, Clone, Deserialize)]
pub struct GatewayReport {
    pub gateway: String,
    #[serde(default)]
    pub engine_side: String,
    pub results: Vec<ScenarioRow>,
}

/// One scenario of a gateway report.
#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioRow {
    pub scenario: String,
    #[serde(default)]
    pub doc: String,
    pub outcome: Outcome,
    #[serde(default)]
    pub detail: Option<String>,
    #[serde(default)]
    pub seconds: f64,
    #[serde(default)]
    pub checks: Vec<CheckRow>,
    #[serde(default)]
    pub requests: Vec<RequestRow>,
}

/// One check of a scenario: which request, what, its verdict and where
/// the expected value comes from.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckRow {
    #[serde(default)]
    pub request: String,
    pub check: String,
    pub ok: bool,
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub reference: String,
}

/// What one request of a scenario did: the HTTP answer and the engine
/// messages the gateway sent for it, decoded.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestRow {
    pub id: String,
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub error: Option<String>,
    /// The ADDs (EngineCoreRequest as JSON), in the order sent.
    #[serde(default)]
    pub sent: Vec<Json>,
    /// The ABORTs (their request ids).
    #[serde(default)]
    pub aborts: Vec<Json>,
}

impl GatewayReport {
    pub fn row(&self, scenario: &str) -> Option<&ScenarioRow> {
        self.results.iter().find(|r| r.scenario == scenario)
    }
}

/// A scenario file of `golden/gateway/` (the parts the site shows).
#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioFile {
    pub scenario: String,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub reference: String,
    /// What the engine does when the gateway starts (a scenario of the
    /// engine's lifecycle).
    #[serde(default)]
    pub engine_at_start: Option<Json>,
    pub requests: Vec<ScenarioRequest>,
}

/// One request of a scenario file.
#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioRequest {
    pub id: String,
    /// `completions` or `chat` (absent for a step that sends no request).
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub body: Option<Json>,
    /// The engine's script for this request.
    #[serde(default)]
    pub engine: Option<Json>,
    /// The golden case whose outputs the engine plays.
    #[serde(default)]
    pub from_golden: Option<Json>,
    /// What vLLM's frontend puts in the ADD's sampling params.
    #[serde(default)]
    pub vllm: Option<Json>,
    /// A lifecycle step (kill the engine, SIGTERM the gateway, ...).
    #[serde(default)]
    pub action: Option<Json>,
    #[serde(default)]
    pub doc: Option<String>,
}

impl ScenarioFile {
    pub fn request(&self, id: &str) -> Option<&ScenarioRequest> {
        self.requests.iter().find(|r| r.id == id)
    }
}

/// A cell of a differential's parameter matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffCell {
    Same,
    Differs,
    Refused,
}

impl DiffCell {
    pub fn label(self) -> &'static str {
        match self {
            DiffCell::Same => "same",
            DiffCell::Differs => "differs",
            DiffCell::Refused => "refused",
        }
    }
}

/// `gpu-runner differential --report-json`.
#[derive(Debug, Clone, Deserialize)]
pub struct DifferentialReport {
    pub reference: String,
    pub gateway: String,
    pub probes: u64,
    /// Field -> column (`completions`, `chat/completions (stream)`) -> cell.
    pub matrix: BTreeMap<String, BTreeMap<String, DiffCell>>,
    pub findings: Vec<DiffFinding>,
    #[serde(default)]
    pub combinations: Option<Vec<Json>>,
}

/// One request the two sides answered differently.
#[derive(Debug, Clone, Deserialize)]
pub struct DiffFinding {
    pub endpoint: String,
    pub stream: bool,
    /// The field set on the base request; `None` for the base request.
    pub field: Option<String>,
    #[serde(default)]
    pub value: Json,
    pub request: Json,
    /// What differed in what was sent or answered (a served probe).
    #[serde(default)]
    pub differences: Vec<Difference>,
    /// The HTTP status the gateway refused the probe with, where the
    /// reference served it.
    #[serde(default)]
    pub refused: Option<u16>,
}

/// One differing value: where, the reference's and the gateway's.
#[derive(Debug, Clone, Deserialize)]
pub struct Difference {
    pub path: String,
    #[serde(default)]
    pub reference: Json,
    #[serde(default)]
    pub test: Json,
}

/// The matrix row of the base request, as the differential names it.
pub const BASE_REQUEST: &str = "(base request)";

impl DiffFinding {
    /// The matrix row it belongs to.
    pub fn row(&self) -> &str {
        self.field.as_deref().unwrap_or(BASE_REQUEST)
    }

    /// The matrix column it belongs to (`chat/completions (stream)`).
    pub fn column(&self) -> String {
        let e = self.endpoint.trim_start_matches("/v1/");
        if self.stream {
            format!("{e} (stream)")
        } else {
            e.to_string()
        }
    }
}

/// `gpu-runner release-sweep --report-json`.
#[derive(Debug, Clone, Deserialize)]
pub struct SweepReport {
    pub gateway: String,
    pub own_release: String,
    pub releases: Vec<SweepRelease>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SweepRelease {
    pub release: String,
    pub outcome: String,
    pub passed: u64,
    pub total: u64,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub engine_side: String,
    #[serde(default)]
    pub items: Vec<SweepItem>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SweepItem {
    pub name: String,
    #[serde(default)]
    pub outcome: String,
    #[serde(default)]
    pub detail: String,
}

/// `gpu-runner faults --report-json`.
#[derive(Debug, Clone, Deserialize)]
pub struct FaultsReport {
    pub gateway: String,
    #[serde(default)]
    pub deadline_s: f64,
    pub cases: Vec<FaultCase>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FaultCase {
    pub case: String,
    #[serde(default)]
    pub schedule: Json,
    #[serde(default)]
    pub applied: Json,
    #[serde(default)]
    pub affected: Json,
    #[serde(default)]
    pub next: Json,
    #[serde(default)]
    pub gateway_alive: Option<bool>,
    #[serde(default)]
    pub error: Option<String>,
}
