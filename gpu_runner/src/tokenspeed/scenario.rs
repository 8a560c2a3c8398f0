//! TokenSpeed replay scenarios: the scenario model's TokenSpeed fields and
//! the checks of a run's results (the run itself is
//! `crate::replay::run`, TokenSpeed's part of it
//! `crate::dialect::tokenspeed_replay`; docs/runner.md "TokenSpeed
//! scenarios").
//!
//! Wire facts the checks rely on (docs/tokenspeed-wire.md §5, §7;
//! TokenSpeed 0.1.1 `generation_output_processor.py`):
//!
//! - `output_ids` are deltas, `prompt_tokens` / `completion_tokens` are
//!   cumulative and repeated on every row; the finish string is `""` until
//!   the terminal row, then `stop`, `length` or `abort`, and it carries no
//!   matched token or string;
//! - a request the receive path refuses gets exactly one row: `"abort"`,
//!   no ids, completion 0; an ADD that does not decode gets nothing;
//! - a client ABORT gets no row;
//! - with `return_logprob`, each row carries one f64 logprob and one id per
//!   new id (the sampled token only).
//!
//! Scenario files (`golden/replay/tokenspeed/*.json`) use the vLLM
//! scenario's vocabulary where it applies; the checks are listed in
//! docs/runner.md.

use std::path::Path;

use engine_protocol::typed::tokenspeed::Finish;
use engine_protocol::typed::StopReason;
use engine_protocol::Value;
use serde_json::Value as Json;

use crate::dialect::Tokenspeed as Wire;
use crate::replay::run::{ChildResult, Outcome, RequestResult, RunResult};
use crate::scenario::{load_dir_of, value_to_json, Dialect, RequestSpecOf, ScenarioOf};

/// The TokenSpeed dialect of the shared scenario model
/// ([`crate::scenario::ScenarioOf`]): the header, request specs, `after`
/// levels and raw requests are the vLLM scenario's; `raw.set` paths point
/// into the `TokenizedGenerateReqInput`.
#[derive(Debug, Clone)]
pub struct Tokenspeed;

/// TokenSpeed's own request-spec fields.
#[derive(Debug, Clone)]
pub struct TsRequestFields {
    /// `TokenizedGenerateReqInput.stream`.
    pub stream: bool,
}

/// TokenSpeed's own scenario fields.
#[derive(Debug, Clone, Default)]
pub struct TsScenarioFields {
    /// The mock's script for a fresh mock engine (docs/runner.md).
    pub mock: Option<Json>,
}

/// A TokenSpeed scenario.
pub type TsScenario = ScenarioOf<Tokenspeed>;
/// One request of a TokenSpeed scenario.
pub type TsRequestSpec = RequestSpecOf<Tokenspeed>;

/// The checks a TokenSpeed scenario may list (docs/runner.md).
pub const TS_CHECKS: &[&str] = &[
    "finish_reason",
    "stop_reason",
    "tokens",
    "engine_tokens",
    "text",
    "text_contains",
    "text_not_contains",
    "num_tokens",
    "outcome",
    "refused",
    "sent",
    "terminal_abort_row",
    "silence",
    "silent_after_abort",
    "same_tokens",
    "different_tokens",
    "no_token_in_first",
    "rows",
    "row_completions",
    "counts",
    "logprobs",
];

impl Dialect for Tokenspeed {
    type Request = TsRequestFields;
    type Scenario = TsScenarioFields;
    const CHECKS: &'static [&'static str] = TS_CHECKS;
    const EMPTY: &'static str = "no requests";

    fn request(r: &Json, at: &str) -> Result<TsRequestFields, String> {
        let stream = match r.get("stream") {
            None => false,
            Some(b) => b.as_bool().ok_or_else(|| format!("{at}.stream: expected a bool, got {b}"))?,
        };
        Ok(TsRequestFields { stream })
    }

    fn scenario(o: &serde_json::Map<String, Json>, _name: &str) -> Result<TsScenarioFields, String> {
        Ok(TsScenarioFields { mock: o.get("mock").cloned() })
    }
}

/// Every `*.json` scenario in `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<TsScenario>, String> {
    load_dir_of::<Tokenspeed>(dir)
}

/// A TokenSpeed scenario's results ([`crate::replay::run::RunResult`]:
/// one child per request).
pub type Run = RunResult<Wire>;

/// Check failures of a scenario's run (empty: all pass).
pub fn evaluate(s: &TsScenario, r: &Run, engine: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for (i, c) in s.checks.iter().enumerate() {
        let what = c.get("check").and_then(Json::as_str).unwrap_or("?");
        if let Some(engines) = c.get("engines").and_then(Json::as_array) {
            if !engines.iter().any(|e| e.as_str() == Some(engine)) {
                continue;
            }
        }
        if matches!(what, "outcome" | "refused" | "terminal_abort_row" | "silence") {
            if let Some(id) = c.get("request").and_then(Json::as_str) {
                named.push(id.to_string());
            }
        }
        if let Err(e) = check_one(c, r) {
            let req = c.get("request").and_then(Json::as_str).unwrap_or("");
            failures.push(format!("check {i} {what} {req}: {e}"));
        }
    }
    // A request that did not finish fails the scenario unless a check
    // names how it ended.
    for (id, rr) in &r.requests {
        let Some(res) = rr.children.first() else { continue };
        let ok = matches!(res.outcome, Outcome::Finished | Outcome::Aborted);
        if !ok && !named.contains(id) {
            failures.push(format!(
                "request {id} ended {} ({}) and no check expects that",
                res.outcome.as_str(),
                res.error.clone().or_else(|| rr.refused.as_ref().map(|r| r.1.clone())).unwrap_or_default()
            ));
        }
    }
    failures
}

fn expect_eq(got: Json, want: &Json) -> Result<(), String> {
    if &got == want {
        Ok(())
    } else {
        Err(format!("got {got}, expected {want}"))
    }
}

/// The request a check names, and its one engine request.
fn get_both<'a>(c: &Json, r: &'a Run) -> Result<(&'a RequestResult<Wire>, &'a ChildResult<Wire>), String> {
    let id = c.get("request").and_then(Json::as_str).ok_or("no `request`")?;
    let rr = r.requests.get(id).ok_or_else(|| format!("no request {id}"))?;
    let ch = rr.children.first().ok_or_else(|| format!("request {id} has no engine request"))?;
    Ok((rr, ch))
}

/// The engine request of the request a check names.
fn get<'a>(c: &Json, r: &'a Run) -> Result<&'a ChildResult<Wire>, String> {
    get_both(c, r).map(|(_, ch)| ch)
}

fn check_one(c: &Json, r: &Run) -> Result<(), String> {
    let is = c.get("is").cloned().unwrap_or(Json::Null);
    let what = c.get("check").and_then(Json::as_str).ok_or("no `check`")?;
    match what {
        "finish_reason" => {
            expect_eq(get(c, r)?.finish_reason.map_or(Json::Null, |f| Json::String(f.as_str().into())), &is)
        }
        "stop_reason" => {
            let got = match &get(c, r)?.stop_reason {
                None => Json::Null,
                Some(StopReason::Text(s)) => Json::String(s.clone()),
                Some(StopReason::TokenId(t)) => Json::from(*t),
            };
            expect_eq(got, &is)
        }
        "tokens" => expect_eq(Json::from(get(c, r)?.client_tokens.clone()), &is),
        "engine_tokens" => expect_eq(Json::from(get(c, r)?.engine_tokens.clone()), &is),
        "text" => expect_eq(Json::String(get(c, r)?.text.clone()), &is),
        "text_contains" | "text_not_contains" => {
            let t = &get(c, r)?.text;
            let needle = c.get("text").and_then(Json::as_str).ok_or("no `text`")?;
            if t.contains(needle) == (what == "text_contains") {
                Ok(())
            } else {
                Err(format!("text {t:?} vs {needle:?}"))
            }
        }
        "num_tokens" => {
            let (rr, res) = get_both(c, r)?;
            let want = match is.as_str() {
                // The engine's own clamp: max_req_len - prompt_len - 1.
                Some("room") => r.max_model_len - rr.prompt_len as i64 - 1,
                _ => is.as_i64().ok_or("`is` is not an integer or \"room\"")?,
            };
            expect_eq(Json::from(res.client_tokens.len()), &Json::from(want))
        }
        "outcome" => expect_eq(Json::String(get(c, r)?.outcome.as_str().into()), &is),
        "refused" => {
            let (rr, res) = get_both(c, r)?;
            match (&rr.refused, c.get("class").and_then(Json::as_str)) {
                (None, _) => Err(format!("not refused (outcome {})", res.outcome.as_str())),
                (Some((class, _)), Some(want)) if class != want => Err(format!("refused as {class}, not {want}")),
                _ => Ok(()),
            }
        }
        "sent" => {
            let res = get(c, r)?;
            let path = c.get("path").and_then(Json::as_str).ok_or("no `path`")?;
            let mut cur = res.sent.as_ref().ok_or("nothing was encoded for it")?;
            for p in path.split('.') {
                let Value::Struct(s) = cur else { return Err(format!("{path}: not a struct on the way")) };
                cur = s.get(p).ok_or_else(|| format!("no field {p}"))?;
            }
            expect_eq(value_to_json(cur), &is)
        }
        "terminal_abort_row" => {
            let res = get(c, r)?;
            match res.outputs.as_slice() {
                [row] if row.finish == Finish::Abort && row.output_ids.is_empty() && row.completion_tokens == 0 => {
                    Ok(())
                }
                rows => Err(format!(
                    "expected one row (abort, no ids, completion 0), got {:?}",
                    rows.iter()
                        .map(|x| (x.finish.as_str(), x.output_ids.len(), x.completion_tokens))
                        .collect::<Vec<_>>()
                )),
            }
        }
        "silence" => {
            let res = get(c, r)?;
            if res.outcome == Outcome::Silence && res.outputs.is_empty() {
                Ok(())
            } else {
                Err(format!("{} rows, outcome {}", res.outputs.len(), res.outcome.as_str()))
            }
        }
        "silent_after_abort" => {
            let res = get(c, r)?;
            let settle = c.get("settle_ms").and_then(Json::as_u64).unwrap_or(100) as u128;
            if !res.abort_sent {
                return Err("no ABORT was sent".into());
            }
            let late_ms = res.late_outputs.iter().flatten().map(|d| d.as_millis());
            match late_ms.into_iter().find(|&ms| ms > settle) {
                Some(ms) => Err(format!("a row came {ms} ms after the ABORT")),
                None => Ok(()),
            }
        }
        "same_tokens" | "different_tokens" => {
            let ids: Vec<&str> = c
                .get("requests")
                .and_then(Json::as_array)
                .ok_or("no `requests`")?
                .iter()
                .filter_map(Json::as_str)
                .collect();
            let toks: Vec<&Vec<i64>> = ids
                .iter()
                .map(|id| {
                    r.requests
                        .get(*id)
                        .and_then(|x| x.children.first())
                        .map(|x| &x.engine_tokens)
                        .ok_or_else(|| format!("no request {id}"))
                })
                .collect::<Result<_, _>>()?;
            let same = toks.windows(2).all(|w| w[0] == w[1]);
            let distinct = toks.windows(2).all(|w| w[0] != w[1]);
            if (what == "same_tokens" && same) || (what == "different_tokens" && distinct) {
                Ok(())
            } else {
                Err(format!("{toks:?}"))
            }
        }
        "no_token_in_first" => {
            let res = get(c, r)?;
            let n = c.get("n").and_then(Json::as_u64).ok_or("no `n`")? as usize;
            let banned: Vec<i64> = c
                .get("tokens")
                .and_then(Json::as_array)
                .ok_or("no `tokens`")?
                .iter()
                .filter_map(Json::as_i64)
                .collect();
            match res.engine_tokens.iter().take(n).find(|t| banned.contains(t)) {
                Some(t) => Err(format!("token {t} among the first {n}: {:?}", res.engine_tokens)),
                None => Ok(()),
            }
        }
        "rows" => expect_eq(Json::from(get(c, r)?.outputs.len()), &is),
        "row_completions" => {
            expect_eq(Json::from(get(c, r)?.outputs.iter().map(|x| x.completion_tokens).collect::<Vec<_>>()), &is)
        }
        "counts" => {
            // Cumulative counts: completion = ids so far; prompt = the prompt.
            let (rr, res) = get_both(c, r)?;
            let mut total = 0i64;
            for (i, row) in res.outputs.iter().enumerate() {
                total += row.output_ids.len() as i64;
                if row.completion_tokens != total {
                    return Err(format!("row {i}: completion_tokens {} after {total} ids", row.completion_tokens));
                }
                if row.prompt_tokens != rr.prompt_len as i64 {
                    return Err(format!(
                        "row {i}: prompt_tokens {} for a {}-token prompt",
                        row.prompt_tokens, rr.prompt_len
                    ));
                }
            }
            if res.outputs.is_empty() {
                return Err("no rows".into());
            }
            Ok(())
        }
        "logprobs" => {
            // One finite, non-positive f64 per new id, over the same ids.
            let res = get(c, r)?;
            let want = is.as_bool().unwrap_or(true);
            for (i, row) in res.outputs.iter().enumerate() {
                if !want {
                    if !row.logprob_vals.is_empty() || !row.logprob_ids.is_empty() {
                        return Err(format!("row {i} carries logprobs"));
                    }
                    continue;
                }
                if row.logprob_ids != row.output_ids || row.logprob_vals.len() != row.output_ids.len() {
                    return Err(format!(
                        "row {i}: {} values over {:?} for ids {:?}",
                        row.logprob_vals.len(),
                        row.logprob_ids,
                        row.output_ids
                    ));
                }
                if let Some(x) = row.logprob_vals.iter().find(|x| !x.is_finite() || **x > 0.0) {
                    return Err(format!("row {i}: logprob {x}"));
                }
            }
            Ok(())
        }
        other => Err(format!("unknown check {other:?}")),
    }
}
