//! `gpu-runner faults`: a real gateway under wire faults (docs/runner/fault-wire.md
//! "The fault-injecting wire"). For each fault kind a fresh gateway starts
//! with the mock engine behind the fault wire (the mock dials the wire's
//! handshake address, the wire dials the gateway's); once the gateway is
//! ready the schedule is armed, one request is sent (the one the fault
//! hits) and then another (is the next request served?), each with a short
//! deadline; what the gateway answered, whether it hung, and whether its
//! process is still alive are recorded in a JSON report.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::differential::named_target;
use super::{repo_path, CliError, WorkDir};
use gateway_scoring::fault::{Applied, Direction, FaultWire, FrameKind, Schedule, Side, WireConfig, WireFault};
use gateway_scoring::gateway::{self, GatewayLaunch, GatewayTarget, Session};

#[derive(clap::Args, Debug, Clone)]
pub struct FaultsArgs {
    /// The gateway: `smg` or one of vLLM's frontends by name
    /// (`vllm-0.33.0`, `vllm-rs-0.33.0`, `vllm-0.32.0`).
    #[arg(long, default_value = "smg")]
    pub gateway: String,
    /// Run only these fault cases (names as in the report), comma-separated.
    #[arg(long)]
    pub only: Option<String>,
    /// Seconds each request may take before it counts as hung.
    #[arg(long, default_value_t = 6.0)]
    pub deadline: f64,
    /// Seconds the gateway may take to start.
    #[arg(long, default_value_t = 120)]
    pub startup_timeout: u64,
    /// Model directory the gateway loads (default golden/tiny).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// The SMG venv (default ~/.cache/engine-conformance/venvs/smg-1.13.0).
    #[arg(long)]
    pub smg_venv: Option<PathBuf>,
    /// The gateway's name in the report (default: `smg-<version>` or the
    /// frontend's name).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(long)]
    pub report_json: Option<PathBuf>,
    /// A committed report (`golden/gateway/reports/faults-<gateway>.json`):
    /// a case run here whose outcome ([`outcome`]) differs from it fails
    /// the run (exit status 1).
    #[arg(long)]
    pub expect: Option<PathBuf>,
}

/// One fault case: a name and the schedule armed once the gateway is ready.
pub struct FaultCase {
    pub name: &'static str,
    pub schedule: Schedule,
}

/// The cases every gateway is run under: each fault kind, on the first
/// request's outputs (the wire counts output batches from the arming, so
/// batch 0 is the first request's first).
pub fn cases() -> Vec<FaultCase> {
    let out = |nth, fault| Schedule::single(Direction::ToGateway, FrameKind::Outputs, Some(nth), fault);
    vec![
        FaultCase { name: "none", schedule: Schedule::none() },
        FaultCase { name: "delay-output", schedule: out(0, WireFault::Delay { ms: 1500 }) },
        FaultCase {
            name: "drop-add",
            schedule: Schedule::single(Direction::ToEngine, FrameKind::Add, Some(0), WireFault::Drop),
        },
        FaultCase { name: "drop-output", schedule: out(1, WireFault::Drop) },
        FaultCase { name: "duplicate-output", schedule: out(1, WireFault::Duplicate) },
        FaultCase { name: "reorder-output", schedule: out(0, WireFault::Reorder { hold_ms: 1000 }) },
        FaultCase { name: "truncate-output", schedule: out(0, WireFault::Truncate { frame: 0, keep: 5 }) },
        FaultCase {
            name: "corrupt-output",
            schedule: out(0, WireFault::Corrupt { frame: 0, bytes: 1, offset: Some(0) }),
        },
        FaultCase { name: "cut-gateway-side", schedule: out(1, WireFault::Cut { side: Side::Gateway }) },
    ]
}

/// Tokens each request asks for (with `ignore_eos`).
pub const MAX_TOKENS: u64 = 4;

/// What one request got.
#[derive(Debug, Clone, Serialize)]
pub struct FaultAnswer {
    /// HTTP status; `None` when none came.
    pub status: Option<u16>,
    /// The body's start, or what went wrong (a hang names the deadline).
    pub body: String,
    pub ms: u64,
    /// No answer within the deadline.
    pub hung: bool,
    /// `usage.completion_tokens` of a JSON answer (4 asked).
    pub completion_tokens: Option<u64>,
    /// `choices[0].finish_reason` of a JSON answer.
    pub finish_reason: Option<String>,
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct CaseOutcome {
    pub case: String,
    pub schedule: Schedule,
    pub applied: Vec<Applied>,
    /// The request the fault hits.
    pub affected: Option<FaultAnswer>,
    /// The request after it.
    pub next: Option<FaultAnswer>,
    /// The gateway's process after both.
    pub gateway_alive: bool,
    /// The case could not run (the gateway did not start), in words.
    pub error: Option<String>,
    /// The wire's own notes (connections passed on, problems).
    pub wire_events: Vec<String>,
}

/// The report `faults-<gateway>.json`.
#[derive(Debug, Clone, Serialize)]
pub struct FaultsReport {
    pub gateway: String,
    pub deadline_s: f64,
    pub cases: Vec<CaseOutcome>,
}

fn alive(pid: Option<u32>) -> bool {
    let Some(pid) = pid else { return true };
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name; Z is a zombie.
        Ok(s) => s.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

async fn ask(s: &Session, model: &str, id: &str, deadline: Duration) -> FaultAnswer {
    let body = serde_json::json!({
        "model": model, "prompt": format!("fault case {id}"), "max_tokens": MAX_TOKENS,
        "temperature": 0.0, "ignore_eos": true, "stream": false,
    });
    let http = s.http.clone();
    let t0 = Instant::now();
    let r = tokio::task::spawn_blocking(move || {
        gateway_scoring::http::post_json(&http, "/v1/completions", &body, deadline)
    })
    .await;
    let ms = t0.elapsed().as_millis() as u64;
    let short = |t: String| t.chars().take(240).collect::<String>();
    match r {
        Ok(Ok(resp)) => {
            let j = resp.json().ok();
            let completion_tokens = j.as_ref().and_then(|j| j["usage"]["completion_tokens"].as_u64());
            let finish_reason = j.as_ref().and_then(|j| j["choices"][0]["finish_reason"].as_str().map(String::from));
            let status = Some(resp.status);
            FaultAnswer { status, body: short(resp.text()), ms, hung: false, completion_tokens, finish_reason }
        }
        Ok(Err(e)) => {
            let hung = t0.elapsed() + Duration::from_millis(200) >= deadline;
            let body =
                if hung { format!("no answer within {:.1}s ({e})", deadline.as_secs_f64()) } else { e.to_string() };
            FaultAnswer { status: None, body: short(body), ms, hung, completion_tokens: None, finish_reason: None }
        }
        Err(e) => FaultAnswer {
            status: None,
            body: format!("request task failed: {e}"),
            ms,
            hung: false,
            completion_tokens: None,
            finish_reason: None,
        },
    }
}

/// A fresh gateway with the mock engine registered through a fault wire
/// that holds `schedule`, not armed yet (the gateway's start-up messages
/// pass untouched): the mock dials the wire's handshake, the wire dials
/// the gateway's. Shared by the fault cases and the planted-bug campaign.
pub(crate) async fn behind_wire(
    target: &GatewayTarget,
    dir: &Path,
    schedule: Schedule,
) -> Result<(Session, FaultWire), String> {
    let mut s = match gateway::start_with(target, dir, &[], false).await {
        Ok(s) => s,
        Err(e) => return Err(format!("the gateway did not start: {e}")),
    };
    let wire = match FaultWire::start(WireConfig {
        gateway_handshake: s.handshake.clone(),
        ipc_dir: dir.join("wire"),
        release: target.release,
        schedule,
        armed: false,
    })
    .await
    {
        Ok(w) => w,
        Err(e) => {
            s.stop().await;
            return Err(e.to_string());
        }
    };
    // The mock dials the wire, not the gateway.
    s.handshake = wire.handshake_endpoint().to_string();
    let limit = target.startup_timeout;
    let up = match s.register_tuned(|_| {}, limit).await {
        Ok(_) => s.wait_ready(limit).await.map_err(|e| e.to_string()),
        Err(e) => Err(format!("the mock engine did not register: {e}")),
    };
    if let Err(e) = up {
        s.stop().await;
        return Err(e);
    }
    Ok((s, wire))
}

/// One case: a fresh gateway, the wire, the mock; arm; two requests.
async fn run_case(target: &GatewayTarget, dir: &Path, case: &FaultCase, deadline: Duration) -> CaseOutcome {
    let mut out = CaseOutcome {
        case: case.name.to_string(),
        schedule: case.schedule.clone(),
        applied: Vec::new(),
        affected: None,
        next: None,
        gateway_alive: false,
        error: None,
        wire_events: Vec::new(),
    };
    let (s, wire) = match behind_wire(target, dir, case.schedule.clone()).await {
        Ok(x) => x,
        Err(e) => {
            out.error = Some(e);
            return out;
        }
    };
    wire.arm();
    out.affected = Some(ask(&s, &target.model_name, "affected", deadline).await);
    // Let a delayed or set-aside message through before the next request.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    out.next = Some(ask(&s, &target.model_name, "next", deadline).await);
    out.gateway_alive = alive(s.pid());
    let log = wire.stop().await;
    out.applied = log.applied;
    out.wire_events = log.events.into_iter().chain(log.problems).collect();
    s.stop().await;
    out
}

pub async fn faults(a: FaultsArgs) -> Result<i32, CliError> {
    let model = a.model.clone().unwrap_or_else(|| repo_path("golden/tiny"));
    let model = model.canonicalize().map_err(|source| CliError::Io { path: model.clone(), source })?;
    let target = named_target(&a.gateway, &model, &a.smg_venv, Duration::from_secs(a.startup_timeout))?;
    let only: Option<Vec<&str>> = a.only.as_deref().map(|o| o.split(',').map(str::trim).collect());
    let deadline = Duration::from_secs_f64(a.deadline);
    let work = WorkDir::new()?;
    let name = match &a.name {
        Some(n) => n.clone(),
        None => match &target.launch {
            GatewayLaunch::Smg { venv } => {
                format!("smg-{}", gateway::smg::version(venv).unwrap_or_else(|_| "unknown".into()))
            }
            _ => a.gateway.clone(),
        },
    };
    let mut report = FaultsReport { gateway: name, deadline_s: a.deadline, cases: Vec::new() };
    let t0 = Instant::now();
    for (i, case) in cases().iter().enumerate() {
        if only.as_ref().is_some_and(|o| !o.contains(&case.name)) {
            continue;
        }
        let dir = work.0.join(format!("case-{i}"));
        let o = run_case(&target, &dir, case, deadline).await;
        eprintln!(
            "{:<18} affected: {:<40} next: {:<30} alive: {}",
            o.case,
            o.affected.as_ref().map_or_else(|| o.error.clone().unwrap_or_default(), answer_word),
            o.next.as_ref().map_or(String::new(), answer_word),
            o.gateway_alive
        );
        report.cases.push(o);
    }
    eprintln!("{} cases in {:.1}s", report.cases.len(), t0.elapsed().as_secs_f64());
    let text = serde_json::to_string_pretty(&report).map_err(|e| CliError::Usage(e.to_string()))? + "\n";
    let text = super::checkout_relative(&text, &super::repo_root());
    match &a.report_json {
        Some(p) => std::fs::write(p, text).map_err(CliError::io(p))?,
        None => print!("{text}"),
    }
    let Some(p) = &a.expect else { return Ok(0) };
    let v = super::read_json(p)?;
    let changed = changed_outcomes(&report, &v);
    for c in &changed {
        eprintln!("changed against {}: {c}", p.display());
    }
    Ok(if changed.is_empty() { 0 } else { 1 })
}

/// A case's outcome in words: the first request's answer, the next's, and
/// whether the gateway died (timings and bodies left out).
pub fn outcome(affected: &serde_json::Value, next: &serde_json::Value, alive: bool) -> String {
    let word = |a: &serde_json::Value| match serde_json::from_value::<AnswerWords>(a.clone()) {
        Ok(w) => answer_word(&FaultAnswer {
            status: w.status,
            body: String::new(),
            ms: 0,
            hung: w.hung,
            completion_tokens: w.completion_tokens,
            finish_reason: None,
        }),
        Err(_) => "not sent".into(),
    };
    format!("{} -> {}{}", word(affected), word(next), if alive { "" } else { "; gateway died" })
}

#[derive(serde::Deserialize)]
struct AnswerWords {
    status: Option<u16>,
    #[serde(default)]
    hung: bool,
    completion_tokens: Option<u64>,
}

/// The cases of `report` whose outcome differs from the same case in
/// `committed` (a case the committed report lacks counts as changed).
pub fn changed_outcomes(report: &FaultsReport, committed: &serde_json::Value) -> Vec<String> {
    let null = serde_json::Value::Null;
    let cases = committed.get("cases").and_then(serde_json::Value::as_array).cloned().unwrap_or_default();
    let mut out = Vec::new();
    for c in &report.cases {
        let now = serde_json::to_value(c).unwrap_or_default();
        let was = cases.iter().find(|x| x.get("case").and_then(serde_json::Value::as_str) == Some(&c.case));
        let words = |x: &serde_json::Value| {
            let alive = x.get("gateway_alive").and_then(serde_json::Value::as_bool).unwrap_or(false);
            outcome(x.get("affected").unwrap_or(&null), x.get("next").unwrap_or(&null), alive)
        };
        match was {
            None => out.push(format!("{}: not in the committed report", c.case)),
            Some(w) if words(w) != words(&now) => {
                out.push(format!("{}: was {}, now {}", c.case, words(w), words(&now)))
            }
            Some(_) => {}
        }
    }
    out
}

/// An answer in a few words (the scoreboard's wording).
pub fn answer_word(a: &FaultAnswer) -> String {
    match (a.status, a.hung) {
        (Some(200), _) => match a.completion_tokens {
            Some(n) if n == MAX_TOKENS => "200".into(),
            Some(n) => format!("200, {n}/{MAX_TOKENS} tokens"),
            None => "200, no usage".into(),
        },
        (Some(s), _) => format!("{s}"),
        (None, true) => "hung".into(),
        (None, false) => "no HTTP answer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: Option<u16>, hung: bool, tokens: Option<u64>) -> FaultAnswer {
        FaultAnswer { status, body: String::new(), ms: 1, hung, completion_tokens: tokens, finish_reason: None }
    }

    fn report(affected: FaultAnswer) -> FaultsReport {
        FaultsReport {
            gateway: "g".into(),
            deadline_s: 6.0,
            cases: vec![CaseOutcome {
                case: "drop-add".into(),
                schedule: cases().remove(2).schedule,
                applied: vec![],
                affected: Some(affected),
                next: Some(answer(Some(200), false, Some(4))),
                gateway_alive: true,
                error: None,
                wire_events: vec![],
            }],
        }
    }

    #[test]
    fn an_outcome_unchanged_against_the_committed_report_passes_and_a_changed_one_is_named() {
        let committed = serde_json::to_value(report(answer(None, true, None))).unwrap();
        assert!(changed_outcomes(&report(answer(None, true, None)), &committed).is_empty());
        let c = changed_outcomes(&report(answer(Some(500), false, None)), &committed);
        assert_eq!(c, vec!["drop-add: was hung -> 200, now 500 -> 200".to_string()]);
        let short = changed_outcomes(&report(answer(Some(200), false, Some(3))), &committed);
        assert!(short[0].ends_with("now 200, 3/4 tokens -> 200"), "{short:?}");
        assert_eq!(changed_outcomes(&report(answer(None, true, None)), &serde_json::json!({})).len(), 1);
    }

    #[test]
    fn every_fault_kind_has_a_case() {
        let names: Vec<&str> = cases().iter().flat_map(|c| c.schedule.faults.iter().map(|f| f.fault.name())).collect();
        for kind in ["delay", "drop", "duplicate", "reorder", "truncate", "corrupt", "cut"] {
            assert!(names.contains(&kind), "{kind} missing from {names:?}");
        }
    }
}
