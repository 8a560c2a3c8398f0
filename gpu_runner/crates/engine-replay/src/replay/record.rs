//! `--record`'s `<scenario>/results.json`: what the client saw per request
//! of a vLLM replay scenario (docs/runner/replay.md "Record mode": tokens, text,
//! outcome, late outputs).

use engine_protocol::typed::{FinishReason, StopReason};
use serde_json::{json, Value as Json};

use super::run::{value_to_json, RunResult};
use scenario_checks::scenario::Scenario;

fn finish_name(f: Option<FinishReason>) -> Json {
    f.map_or(Json::Null, |f| json!(f.as_str()))
}

fn stop_json(s: &Option<StopReason>) -> Json {
    scenario_checks::check::replay::stop_json(s)
}

/// What the client saw, per request (written by `--record` as
/// `<scenario>/results.json`).
pub fn record_json(s: &Scenario, r: &RunResult) -> Json {
    let requests: serde_json::Map<String, Json> = r
        .requests
        .iter()
        .map(|(id, rr)| {
            let children: Vec<Json> = rr
                .children
                .iter()
                .map(|c| {
                    json!({
                        "engine_request_id": c.engine_request_id,
                        "sent_seed": c.sent_seed,
                        "engine_tokens": c.engine_tokens,
                        "client_tokens": c.client_tokens,
                        "text": c.text,
                        "finish_reason": finish_name(c.finish_reason),
                        "stop_reason": stop_json(&c.stop_reason),
                        "outcome": c.outcome.as_str(),
                        "error": c.error,
                        "aborted": c.aborted,
                        "abort_sent": c.abort_sent,
                        "late_outputs_ms": c.late_outputs.as_ref().map(|l| l.iter().map(|d| d.as_secs_f64() * 1000.0).collect::<Vec<_>>()),
                        "logprob_columns": c.logprob_columns,
                        "outputs": c.outputs.len(),
                    })
                })
                .collect();
            (
                id.clone(),
                json!({"refused": rr.refused, "sent_max_tokens": rr.sent_max_tokens, "prompt_len": rr.prompt_len, "children": children}),
            )
        })
        .collect();
    let utilities: serde_json::Map<String, Json> = r
        .utilities
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                match v {
                    Ok(v) => json!({"result": value_to_json(v)}),
                    Err(e) => json!({"error": e.to_string()}),
                },
            )
        })
        .collect();
    json!({"scenario": s.name, "requests": requests, "utilities": utilities, "drift": r.drift})
}
