//! A finding as a bug report: one scenario a gateway fails (or fails as
//! its expectations file says it does), written so that its maintainers
//! can act on it: the gateway and version, the scenario in one sentence,
//! the HTTP request as `curl`, what the engine was scripted to do, what
//! vLLM's frontend does and where that expectation comes from, what the
//! gateway did, the decoded ADD/ABORT diff against vLLM's frontend on the
//! same script, and one command that reproduces just this finding.
//!
//! The scenario files (`golden/gateway/*.json`) give the requests and the
//! engine scripts; the gateway report gives the checks and the decoded
//! engine messages; the reference report (vLLM's own frontend run on the
//! same scenarios, docs/runner/gateway.md "The reference run") gives what
//! vLLM's frontend sent.

use std::fmt::Write as _;

use serde_json::Value as Json;

use crate::add_diff::{diff_request, FieldDiff};
use crate::load::Inputs;
use crate::markdown::{block, cell, code, shorten};
use crate::model::{CheckRow, GatewayReport, ScenarioFile, ScenarioRequest, ScenarioRow};
use crate::repro::{self, Repro};

/// The model the suite's gateway runs serve (a checkout's tiny model;
/// `gpu-runner gateway --model` names another).
pub const SERVED_MODEL: &str = "golden/tiny";

/// One gateway's finding on one scenario.
#[derive(Debug, Clone)]
pub struct ScenarioFinding<'a> {
    pub gateway: &'a GatewayReport,
    pub row: &'a ScenarioRow,
    pub scenario: Option<&'a ScenarioFile>,
    /// vLLM's frontend's run, when the gateway is not that run itself.
    pub reference: Option<&'a GatewayReport>,
    pub repro: Repro,
}

impl<'a> ScenarioFinding<'a> {
    pub fn new(inputs: &'a Inputs, gateway: &'a GatewayReport, row: &'a ScenarioRow) -> ScenarioFinding<'a> {
        ScenarioFinding {
            gateway,
            row,
            scenario: inputs.scenarios.get(&row.scenario),
            reference: inputs.reference_for(&gateway.gateway),
            repro: repro::scenario(&inputs.named, &gateway.gateway, &row.scenario),
        }
    }

    /// The checks that failed.
    pub fn failed_checks(&self) -> Vec<&'a CheckRow> {
        self.row.checks.iter().filter(|c| !c.ok).collect()
    }

    /// For an expected failure, the reason its expectations file gives
    /// (the report's detail up to the failed checks' summary).
    pub fn known_reason(&self) -> Option<&'a str> {
        let d = self.row.detail.as_deref()?;
        if self.row.outcome != crate::model::Outcome::ExpectedFailure {
            return None;
        }
        Some(gateway_scoring::scoreboard::known_reason(d))
    }

    /// A one-line title: the gateway, the scenario and the first failing
    /// check.
    pub fn title(&self) -> String {
        let first = self.failed_checks().first().map(|c| format!(": {} ({})", c.check, shorten(&c.detail, 80)));
        format!("{} fails `{}`{}", self.gateway.gateway, self.row.scenario, first.unwrap_or_default())
    }

    fn reference_row(&self) -> Option<&'a ScenarioRow> {
        self.reference.and_then(|r| r.row(&self.row.scenario))
    }

    /// The ADD/ABORT differences per request id, against vLLM's frontend.
    pub fn add_diffs(&self) -> Vec<(String, Vec<FieldDiff>)> {
        let Some(reference) = self.reference_row() else { return Vec::new() };
        self.row
            .requests
            .iter()
            .filter_map(|g| {
                let v = reference.requests.iter().find(|v| v.id == g.id)?;
                Some((g.id.clone(), diff_request(v, g)))
            })
            .filter(|(_, d)| !d.is_empty())
            .collect()
    }

    /// The finding as Markdown, ready to paste into an issue.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let g = &self.gateway.gateway;
        let _ = writeln!(s, "# {}\n", self.title());
        let _ = writeln!(s, "- **Gateway:** {g} (verdict: {})", self.row.outcome.label());
        if !self.gateway.engine_side.is_empty() {
            let _ = writeln!(s, "- **Engine side:** {}", self.gateway.engine_side);
        }
        let _ = writeln!(s, "- **Scenario:** {} ({})", code(&self.row.scenario), first_sentence(&self.row.doc));
        s.push('\n');
        if first_sentence(&self.row.doc).len() < self.row.doc.len() {
            let _ = writeln!(s, "## What the scenario checks\n\n{}\n", self.row.doc);
        }
        if let Some(r) = self.scenario.map(|s| s.reference.as_str()).filter(|r| !r.is_empty()) {
            let _ = writeln!(s, "Where the expected behaviour comes from: {r}\n");
        }
        if let Some(reason) = self.known_reason() {
            let _ = writeln!(s, "## The finding (as its expectations file states it)\n\n{reason}\n");
        }
        let failed = self.failed_checks();
        s.push_str("## What the gateway did, against what vLLM's frontend does\n\n");
        if failed.is_empty() {
            let _ = writeln!(s, "{}\n", self.row.detail.as_deref().unwrap_or("No check failed."));
        } else {
            s.push_str("| request | check | the gateway | expected from |\n| --- | --- | --- | --- |\n");
            for c in &failed {
                let from = if c.reference.is_empty() { "the scenario file" } else { c.reference.as_str() };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} |",
                    code(&c.request),
                    code(&c.check),
                    cell(&shorten(&c.detail, 600)),
                    cell(&shorten(from, 400))
                );
            }
            s.push('\n');
        }
        self.requests_markdown(&mut s);
        let diffs = self.add_diffs();
        if let (Some(reference), false) = (self.reference, diffs.is_empty()) {
            let _ = writeln!(
                s,
                "## Engine messages: the gateway's against vLLM's frontend ({})\n\nThe ADDs (EngineCoreRequest) and ABORTs each sent the engine for the same request and engine script, decoded; request ids and arrival times left out. The failed checks above are the findings: a difference listed here and not there is one this scenario does not judge (docs/runner/gateway.md lists what each check compares).\n",
                reference.gateway
            );
            for (id, d) in &diffs {
                let _ = writeln!(
                    s,
                    "Request {}:\n\n| field | vLLM's frontend | {} |\n| --- | --- | --- |",
                    code(id),
                    cell(g)
                );
                for f in d {
                    let _ = writeln!(s, "| {} | {} | {} |", code(&f.path), value_cell(&f.vllm), value_cell(&f.gateway));
                }
                s.push('\n');
            }
        }
        let _ = writeln!(
            s,
            "## Reproduce\n\nFrom a checkout of this suite; without the expectations file the finding is reported as a failure (exit status 1), with the checks above:\n\n{}",
            block("sh", &self.repro.script())
        );
        s
    }

    fn requests_markdown(&self, s: &mut String) {
        let Some(file) = self.scenario else { return };
        s.push_str("## The requests\n\n");
        if let Some(e) = &file.engine_at_start {
            let _ = writeln!(s, "The engine at the gateway's start:\n\n{}", block("json", &pretty(e)));
        }
        for r in &file.requests {
            let _ = writeln!(s, "### Request {}\n", code(&r.id));
            if let Some(d) = &r.doc {
                let _ = writeln!(s, "{d}\n");
            }
            if let Some(c) = curl(r) {
                let _ = writeln!(
                    s,
                    "The HTTP request (the gateway serving `{SERVED_MODEL}` on port 8000):\n\n{}",
                    block("sh", &c)
                );
            }
            if let Some(a) = &r.action {
                let _ = writeln!(s, "The step: {}\n", code(&compact(a)));
            }
            match (&r.engine, &r.from_golden) {
                (Some(e), _) => {
                    let _ = writeln!(s, "The engine's script:\n\n{}", block("json", &pretty(e)));
                }
                (None, Some(g)) => {
                    let _ = writeln!(s, "The engine plays the outputs of the golden case {}.\n", code(&compact(g)));
                }
                (None, None) => {}
            }
            if let Some(v) = &r.vllm {
                let _ =
                    writeln!(s, "vLLM's frontend puts in the ADD's sampling params:\n\n{}", block("json", &pretty(v)));
            }
            if let Some(rr) = self.reference_row().and_then(|row| row.requests.iter().find(|x| x.id == r.id)) {
                let _ = writeln!(
                    s,
                    "vLLM's frontend ({}) on this request: HTTP {}, {} ADD, {} ABORT.\n",
                    self.reference.map_or("", |r| r.gateway.as_str()),
                    rr.status.map_or_else(|| "none".to_string(), |x| x.to_string()),
                    rr.sent.len(),
                    rr.aborts.len()
                );
            }
            if let Some(gr) = self.row.requests.iter().find(|x| x.id == r.id) {
                let _ = writeln!(
                    s,
                    "The gateway on this request: HTTP {}, {} ADD, {} ABORT{}.\n",
                    gr.status.map_or_else(|| "none".to_string(), |x| x.to_string()),
                    gr.sent.len(),
                    gr.aborts.len(),
                    gr.error.as_deref().map(|e| format!("; error: {}", shorten(e, 300))).unwrap_or_default()
                );
            }
        }
    }
}

/// The first sentence of a scenario's doc.
pub fn first_sentence(doc: &str) -> &str {
    match doc.find(". ") {
        Some(i) => &doc[..=i],
        None => doc,
    }
}

fn compact(v: &Json) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn pretty(v: &Json) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

fn value_cell(v: &Option<Json>) -> String {
    match v {
        Some(v) => code(&shorten(&compact(v), 200)),
        None => "none".into(),
    }
}

/// `s` in single quotes for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A `curl` command for a JSON body sent to `path` of a gateway on port
/// 8000, the served model named.
pub fn curl_json(path: &str, body: &Json) -> String {
    let mut body = body.clone();
    if let Json::Object(m) = &mut body {
        if !m.contains_key("model") {
            let mut with = serde_json::Map::new();
            with.insert("model".into(), Json::from(SERVED_MODEL));
            with.extend(std::mem::take(m));
            *m = with;
        }
    }
    let stream = body.get("stream") == Some(&Json::Bool(true));
    format!(
        "curl -sS{} http://127.0.0.1:8000{path} -H 'Content-Type: application/json' \\\n  -d {}",
        if stream { "N" } else { "" },
        shell_quote(&compact(&body))
    )
}

/// The `curl` command of a scenario request that sends one.
pub fn curl(r: &ScenarioRequest) -> Option<String> {
    let body = r.body.as_ref()?;
    let path = match r.endpoint.as_deref() {
        Some("chat") => "/v1/chat/completions",
        Some("completions") | None => "/v1/completions",
        Some(other) if other.starts_with('/') => other,
        Some(other) => return Some(format!("# endpoint {other}\n{}", curl_json("/v1/completions", body))),
    };
    Some(curl_json(path, body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_curl_command_names_the_model_first_and_survives_a_quote_in_the_prompt() {
        let c = curl_json("/v1/completions", &json!({"prompt": "it's", "max_tokens": 2}));
        assert!(c.starts_with("curl -sS http://127.0.0.1:8000/v1/completions"), "{c}");
        assert!(c.contains(r#"-d '{"model":"golden/tiny","prompt":"it'\''s","max_tokens":2}'"#), "{c}");
    }

    #[test]
    fn a_streamed_request_is_curled_unbuffered() {
        assert!(curl_json("/v1/completions", &json!({"stream": true})).starts_with("curl -sSN "));
    }

    #[test]
    fn the_first_sentence_of_a_doc_ends_at_its_first_full_stop() {
        assert_eq!(first_sentence("One thing. Then more."), "One thing.");
        assert_eq!(first_sentence("No stop"), "No stop");
    }
}
