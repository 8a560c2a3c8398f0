//! The replay checks: one implementation of each, for vLLM and TokenSpeed
//! scenarios alike, evaluated against a [`RunObservation`]
//! (docs/runner/scenarios.md "Scenarios" and docs/runner/tokenspeed.md
//! "TokenSpeed scenarios" list what each passes on), and a scenario's
//! verdict rules ([`evaluate`]).
//!
//! Facts relied on: a request id names one request and a spec id all its
//! copies (`<id>-<i>`); `"room"` is the dialect's own count of the tokens
//! left (vLLM `max_model_len − prompt`; TokenSpeed 0.1.1 one less, its
//! `_apply_generation_budget`); a TokenSpeed row's counts are cumulative
//! and its ids deltas (docs/tokenspeed-wire.md §5).

use std::collections::BTreeSet;

use engine_protocol::typed::tokenspeed::Finish;
use engine_protocol::typed::StopReason;
use engine_protocol::Value;
use serde_json::{json, Value as Json};

use super::error::CheckFailure;
use super::observation::{Observation, RequestObservation, RunObservation, UtilityObservation};
use super::spec::{CheckSpec, Count, LogprobsSpec, ScenarioCheck, ScenarioKind, SentSpec};
use super::{constraint, logprobs};
use crate::check::RequestOutcome;

/// Why a replay scenario failed: a check, or a request that ended in a way
/// no check expects. `Display` is the report's wording.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioFailure {
    /// Check `index` failed.
    #[error("{}", render_check(*kind, *index, name, request.as_deref(), failure))]
    Check { kind: ScenarioKind, index: usize, name: &'static str, request: Option<String>, failure: CheckFailure },
    /// A vLLM request the gateway refused, and no check expects it.
    #[error("request {id} refused by the gateway ({class}): {message}")]
    Refused { id: String, class: String, message: String },
    /// A vLLM request that failed, and no check expects it.
    #[error("request {id} ({engine_id}) failed: {message}")]
    Failed { id: String, engine_id: String, message: String },
    /// A TokenSpeed request that did not finish, and no check names how it
    /// ended.
    #[error("request {id} ended {ended} ({why}) and no check expects that")]
    Unexpected { id: String, ended: &'static str, why: String },
}

fn render_check(kind: ScenarioKind, i: usize, name: &str, request: Option<&str>, f: &CheckFailure) -> String {
    match kind {
        ScenarioKind::Tokenspeed => format!("check {i} {name} {}: {}", request.unwrap_or(""), f.tokenspeed_words()),
        _ => format!("checks[{i}] {name}: {f}"),
    }
}

/// A replay scenario's failures on `engine` (empty: pass). A check with
/// `engines` applies only on those. A request that failed or was refused
/// (vLLM), or did not finish (TokenSpeed), is a failure unless a check
/// names how it ended.
pub fn evaluate(kind: ScenarioKind, checks: &[CheckSpec], r: &RunObservation, engine: &str) -> Vec<ScenarioFailure> {
    let mut failures = Vec::new();
    for (index, c) in checks.iter().enumerate().filter(|(_, c)| c.applies_on(engine)) {
        if let Err(failure) = check(c, r) {
            failures.push(ScenarioFailure::Check { kind, index, name: c.name(), request: c.request.clone(), failure });
        }
    }
    // Which requests a check expects to end otherwise than finished. For
    // vLLM every check's `engines` was not consulted here, as before.
    let expects_ending = |c: &CheckSpec| match kind {
        ScenarioKind::Tokenspeed => matches!(
            c.check,
            ScenarioCheck::Outcome { .. }
                | ScenarioCheck::Refused { .. }
                | ScenarioCheck::TerminalAbortRow {}
                | ScenarioCheck::Silence {}
        ),
        _ => matches!(
            c.check,
            ScenarioCheck::Refused { .. }
                | ScenarioCheck::Failed { .. }
                | ScenarioCheck::Aborted {}
                | ScenarioCheck::EngineOutcome { .. }
        ),
    };
    let named: Vec<&str> = checks
        .iter()
        .filter(|c| expects_ending(c) && (kind != ScenarioKind::Tokenspeed || c.applies_on(engine)))
        .filter_map(|c| c.request.as_deref())
        .collect();
    for (id, rr) in &r.requests {
        if kind == ScenarioKind::Tokenspeed {
            let Some(ch) = rr.children.first() else { continue };
            if !matches!(ch.ended, RequestOutcome::Finished | RequestOutcome::Aborted) && !named.contains(&id.as_str())
            {
                let why =
                    ch.error.clone().or_else(|| rr.refused.as_ref().map(|r| r.message.clone())).unwrap_or_default();
                failures.push(ScenarioFailure::Unexpected { id: id.clone(), ended: ch.ended.as_str(), why });
            }
            continue;
        }
        if named.contains(&id.as_str()) || named.contains(&rr.spec_id.as_str()) {
            continue;
        }
        if let Some(rf) = &rr.refused {
            failures.push(ScenarioFailure::Refused {
                id: id.clone(),
                class: rf.class.clone(),
                message: rf.message.clone(),
            });
        }
        for ch in &rr.children {
            if let Some(e) = &ch.error {
                failures.push(ScenarioFailure::Failed {
                    id: id.clone(),
                    engine_id: ch.engine_request_id.clone(),
                    message: e.clone(),
                });
            }
        }
    }
    failures
}

fn request<'a>(c: &CheckSpec, r: &'a RunObservation) -> Result<(&'a str, &'a RequestObservation), CheckFailure> {
    let id = c.request.as_deref().ok_or(CheckFailure::NoRequestNamed)?;
    r.requests.get_key_value(id).map(|(k, v)| (k.as_str(), v)).ok_or_else(|| CheckFailure::NoRequest(id.into()))
}

/// The engine request a check names (`request`, `child`).
fn child<'a>(c: &CheckSpec, r: &'a RunObservation) -> Result<&'a Observation, CheckFailure> {
    let (id, rr) = request(c, r)?;
    if let Some(ch) = rr.children.get(c.child) {
        return Ok(ch);
    }
    match &rr.refused {
        Some(rf) => {
            Err(CheckFailure::WasRefused { id: id.into(), class: rf.class.clone(), message: rf.message.clone() })
        }
        None => Err(CheckFailure::NoChild { id: id.into(), child: c.child }),
    }
}

/// Every result of a request id, or of all copies of a spec id, in copy
/// order.
fn copies<'a>(r: &'a RunObservation, id: &str) -> Vec<&'a RequestObservation> {
    if let Some(rr) = r.requests.get(id) {
        return vec![rr];
    }
    let mut v: Vec<(usize, &RequestObservation)> = r
        .requests
        .iter()
        .filter(|(_, v)| v.spec_id == id)
        .map(|(k, v)| (k.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap_or(0), v))
        .collect();
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, v)| v).collect()
}

fn eq(what: &'static str, got: Json, expected: Json) -> Result<(), CheckFailure> {
    if got == expected {
        Ok(())
    } else {
        Err(CheckFailure::Differs { what, got: Box::new(got), expected: Box::new(expected) })
    }
}

fn count(want: &Count, room: i64) -> Json {
    match want {
        Count::N(n) => json!(n),
        Count::Room(_) => json!(room),
    }
}

/// A stop reason as JSON (a token id, a string, or null).
pub fn stop_json(s: &Option<StopReason>) -> Json {
    match s {
        None => Json::Null,
        Some(StopReason::TokenId(i)) => json!(i),
        Some(StopReason::Text(t)) => json!(t),
    }
}

/// Runs one replay check.
pub fn check(c: &CheckSpec, r: &RunObservation) -> Result<(), CheckFailure> {
    if is_on_one(&c.check) {
        let ch = child(c, r)?;
        return on_one(&c.check, ch);
    }
    match &c.check {
        ScenarioCheck::NumTokens { is } => {
            let (_, rr) = request(c, r)?;
            eq("client token count", json!(child(c, r)?.client_tokens.len()), count(is, rr.room))
        }
        ScenarioCheck::MaxTokensHonoured { exact } => {
            let (_, rr) = request(c, r)?;
            let max = rr.sent_max_tokens.ok_or(CheckFailure::Missing("no max_tokens sent"))?;
            for ch in &rr.children {
                let n = ch.engine_tokens.len() as i64;
                if n > max || (*exact && n != max) {
                    return Err(CheckFailure::OverMaxTokens { id: ch.engine_request_id.clone(), got: n, max });
                }
            }
            Ok(())
        }
        ScenarioCheck::SentMaxTokens { is } => {
            let (_, rr) = request(c, r)?;
            let sent = rr.sent_max_tokens.ok_or(CheckFailure::Missing("no max_tokens sent"))?;
            eq("max_tokens sent", json!(sent), count(is, rr.room))
        }
        ScenarioCheck::SameTokens { requests } => same_tokens(r, requests),
        ScenarioCheck::SameTokensPairwise { requests } => pairwise(r, requests, true),
        ScenarioCheck::DifferentTokens { requests } => pairwise(r, requests, false),
        ScenarioCheck::PromptLogprobs { k } => {
            let (_, rr) = request(c, r)?;
            logprobs::check_prompt(child(c, r)?, &rr.prompt, *k)
        }
        ScenarioCheck::SatisfiesConstraint { language_regex } => {
            let (_, rr) = request(c, r)?;
            let so = rr
                .request
                .get("structured_outputs")
                .ok_or(CheckFailure::Missing("the request has no structured_outputs"))?;
            constraint::satisfies(so, &child(c, r)?.text, language_regex.as_deref())
        }
        ScenarioCheck::NumChildren { is } => eq("children", json!(request(c, r)?.1.children.len()), json!(is)),
        ScenarioCheck::ChildSeeds { is } => {
            let seeds: Vec<Option<i64>> = request(c, r)?.1.children.iter().map(|c| c.sent_seed).collect();
            eq("child seeds", json!(seeds), json!(is))
        }
        ScenarioCheck::DistinctChildIds {} => {
            let (id, rr) = request(c, r)?;
            let ids: BTreeSet<&str> = rr.children.iter().map(|c| c.engine_request_id.as_str()).collect();
            if rr.children.len() < 2 || ids.len() != rr.children.len() {
                return Err(CheckFailure::ChildIds {
                    id: id.into(),
                    ids: ids.into_iter().map(str::to_string).collect(),
                    children: rr.children.len(),
                });
            }
            Ok(())
        }
        ScenarioCheck::Refused { class } => {
            let (id, rr) = request(c, r)?;
            match (&rr.refused, class) {
                (None, _) => Err(CheckFailure::NotRefused {
                    id: id.into(),
                    ended: rr.children.first().map_or("none", |c| c.ended.as_str()),
                }),
                (Some(rf), Some(want)) if &rf.class != want => Err(CheckFailure::RefusedAs {
                    got: rf.class.clone(),
                    expected: want.clone(),
                    message: rf.message.clone(),
                }),
                _ => Ok(()),
            }
        }
        ScenarioCheck::UtilityResult { call, is } => match r.utilities.get(call) {
            Some(UtilityObservation::Returned(v)) => eq("result", v.clone(), is.clone()),
            Some(UtilityObservation::Refused { shown, .. }) | Some(UtilityObservation::NoAnswer(shown)) => {
                Err(CheckFailure::Utility(format!("call failed: {shown}")))
            }
            None => Err(CheckFailure::Utility(format!("no utility call {call}"))),
        },
        ScenarioCheck::UtilityFailure { call, contains } => match r.utilities.get(call) {
            // The engine's own reply text is what this check is about; a
            // timeout or a dead engine is not the engine refusing the call.
            Some(UtilityObservation::Refused { message, .. }) if message.contains(contains.as_str()) => Ok(()),
            Some(UtilityObservation::Refused { shown, .. }) | Some(UtilityObservation::NoAnswer(shown)) => {
                Err(CheckFailure::Utility(format!("failed with {shown:?}, expected it to mention {contains:?}")))
            }
            Some(UtilityObservation::Returned(v)) => Err(CheckFailure::Utility(format!("succeeded with {v}"))),
            None => Err(CheckFailure::Utility(format!("no utility call {call}"))),
        },
        ScenarioCheck::ServedBy { engine } => {
            let id = c.request.as_deref().ok_or(CheckFailure::NoRequestNamed)?;
            let children: Vec<&Observation> = copies(r, id).into_iter().flat_map(|rr| &rr.children).collect();
            if children.is_empty() {
                return Err(CheckFailure::NoRequest(id.into()));
            }
            let seen: Vec<Json> =
                children.iter().map(|ch| json!({"sent_to": ch.engine, "engine_index": ch.engine_indices})).collect();
            let want: Vec<Json> =
                children.iter().map(|_| json!({"sent_to": engine, "engine_index": [engine]})).collect();
            eq("engines", json!(seen), json!(want))?;
            eq("batches naming another engine than their connection's", json!(r.engine_index_mismatches), json!(0))
        }
        ScenarioCheck::DpControl { is } => {
            // Ranks send their copies at about the same time: compared in
            // any order across engines.
            let mut seen: Vec<Json> =
                r.dp_control.iter().map(|(e, m)| json!({"engine": e, m.name(): m.wave()})).collect();
            let mut want = is.clone();
            let key = |j: &Json| j.to_string();
            seen.sort_by_key(key);
            want.sort_by_key(key);
            eq("data-parallel wave messages", json!(seen), json!(want))
        }
        ScenarioCheck::AllFinished {} => {
            for (id, rr) in &r.requests {
                for ch in &rr.children {
                    if ch.finish.is_none() || ch.error.is_some() {
                        return Err(CheckFailure::NotFinished {
                            id: id.clone(),
                            engine_id: ch.engine_request_id.clone(),
                            error: ch.error.clone(),
                        });
                    }
                }
            }
            Ok(())
        }
        ScenarioCheck::Counts {} => {
            let (_, rr) = request(c, r)?;
            counts(child(c, r)?, rr.prompt_len)
        }
        // Gateway checks never reach a replay scenario (refused at load).
        _ => Err(CheckFailure::Missing("not a replay check")),
    }
}

/// Whether the check reads one engine request's observation alone.
fn is_on_one(c: &ScenarioCheck) -> bool {
    matches!(
        c,
        ScenarioCheck::FinishReason { .. }
            | ScenarioCheck::StopReason { .. }
            | ScenarioCheck::Text { .. }
            | ScenarioCheck::Tokens { .. }
            | ScenarioCheck::EngineTokens { .. }
            | ScenarioCheck::TextContains { .. }
            | ScenarioCheck::TextNotContains { .. }
            | ScenarioCheck::NoTokenInFirst { .. }
            | ScenarioCheck::LogprobsColumns { .. }
            | ScenarioCheck::SampleLogprobs { .. }
            | ScenarioCheck::PromptLogprobsPresent {}
            | ScenarioCheck::Failed { .. }
            | ScenarioCheck::Aborted {}
            | ScenarioCheck::SilentAfterAbort { .. }
            | ScenarioCheck::EngineOutcome { .. }
            | ScenarioCheck::Outcome { .. }
            | ScenarioCheck::Sent(SentSpec::Path { .. })
            | ScenarioCheck::TerminalAbortRow {}
            | ScenarioCheck::Silence {}
            | ScenarioCheck::Rows { .. }
            | ScenarioCheck::RowCompletions { .. }
            | ScenarioCheck::Logprobs(LogprobsSpec::Rows { .. })
    )
}

/// The checks of one engine request's observation, shared by every
/// scenario kind that has them (the gateway under test judges the client
/// side of its HTTP response with the same ones); `None` for a check that
/// needs more than one observation.
pub fn check_observation(check: &ScenarioCheck, ch: &Observation) -> Option<Result<(), CheckFailure>> {
    is_on_one(check).then(|| on_one(check, ch))
}

fn on_one(check: &ScenarioCheck, ch: &Observation) -> Result<(), CheckFailure> {
    match check {
        ScenarioCheck::FinishReason { is } => eq("finish_reason", json!(ch.finish), json!(is)),
        ScenarioCheck::StopReason { is } => {
            eq("stop_reason", stop_json(&ch.stop_reason), is.as_ref().map_or(Json::Null, |s| s.to_json()))
        }
        ScenarioCheck::Text { is } => eq("text", json!(ch.text), json!(is)),
        ScenarioCheck::Tokens { is } => eq("client tokens", json!(ch.client_tokens), json!(is)),
        ScenarioCheck::EngineTokens { is } => eq("engine tokens", json!(ch.engine_tokens), json!(is)),
        ScenarioCheck::TextContains { text } | ScenarioCheck::TextNotContains { text } => {
            let has = ch.text.contains(text.as_str());
            if has == matches!(check, ScenarioCheck::TextContains { .. }) {
                Ok(())
            } else {
                Err(CheckFailure::TextPiece { text: ch.text.clone(), piece: text.clone(), has })
            }
        }
        ScenarioCheck::NoTokenInFirst { n, tokens } => {
            let n = *n as usize;
            if ch.engine_tokens.len() < n {
                return Err(CheckFailure::TooFewTokens(ch.engine_tokens.len()));
            }
            match ch.engine_tokens[..n].iter().position(|t| tokens.contains(t)) {
                None => Ok(()),
                Some(at) => Err(CheckFailure::ForbiddenToken {
                    token: ch.engine_tokens[at],
                    at,
                    tokens: ch.engine_tokens.clone(),
                }),
            }
        }
        ScenarioCheck::LogprobsColumns { is } => {
            if ch.logprob_columns.is_empty() {
                return Err(CheckFailure::Missing("no logprobs in any output"));
            }
            match ch.logprob_columns.iter().find(|&&n| n != *is) {
                None => Ok(()),
                Some(n) => Err(CheckFailure::Logprobs(format!("an output has {n} logprob columns, expected {is}"))),
            }
        }
        ScenarioCheck::SampleLogprobs { k } => logprobs::check_sample(ch, *k),
        ScenarioCheck::PromptLogprobsPresent {} => {
            if ch.prompt_logprobs_seen {
                Ok(())
            } else {
                Err(CheckFailure::Missing("no prompt logprobs in any output"))
            }
        }
        ScenarioCheck::Failed { class, .. } => match (&ch.failure, class) {
            (None, _) => Err(CheckFailure::DidNotFail),
            (Some(f), Some(want)) if f.class != *want => Err(CheckFailure::FailedAs {
                got: f.class.as_str(),
                expected: want.as_str(),
                message: f.message.clone(),
            }),
            _ => Ok(()),
        },
        ScenarioCheck::Aborted {} => {
            if ch.aborted {
                Ok(())
            } else {
                Err(CheckFailure::NotAborted { finish: ch.finish.clone() })
            }
        }
        ScenarioCheck::SilentAfterAbort { settle_ms } => {
            let settle = settle_ms.unwrap_or(100) as f64;
            if !ch.abort_sent {
                return Err(CheckFailure::Missing("the gateway sent no ABORT"));
            }
            let late = ch
                .late_ms
                .as_ref()
                .ok_or(CheckFailure::Missing("late outputs not watched (the request needs grace_ms)"))?;
            match late.iter().find(|ms| **ms > settle) {
                None => Ok(()),
                Some(ms) => Err(CheckFailure::LateOutput { ms: *ms, late: late.len() }),
            }
        }
        ScenarioCheck::EngineOutcome { is } | ScenarioCheck::Outcome { is } => {
            if ch.ended.as_str() == is {
                Ok(())
            } else {
                Err(CheckFailure::OutcomeIs {
                    got: ch.ended.as_str(),
                    expected: is.clone(),
                    error: ch.error.clone().unwrap_or_default(),
                })
            }
        }
        ScenarioCheck::Sent(SentSpec::Path { path, is }) => {
            let mut cur = ch.sent.as_ref().ok_or(CheckFailure::Missing("nothing was encoded for it"))?;
            for p in path.split('.') {
                let Value::Struct(s) = cur else {
                    return Err(CheckFailure::Sent(format!("{path}: not a struct on the way")));
                };
                cur = s.get(p).ok_or_else(|| CheckFailure::Sent(format!("no field {p}")))?;
            }
            eq("sent value", engine_protocol::view::any_view(cur), is.clone())
        }
        ScenarioCheck::TerminalAbortRow {} => match ch.rows.as_slice() {
            [row] if row.finish == Finish::Abort && row.output_ids.is_empty() && row.completion_tokens == 0 => Ok(()),
            rows => Err(CheckFailure::Rows(format!(
                "expected one row (abort, no ids, completion 0), got {:?}",
                rows.iter().map(|x| (x.finish.as_str(), x.output_ids.len(), x.completion_tokens)).collect::<Vec<_>>()
            ))),
        },
        ScenarioCheck::Silence {} => {
            if ch.ended == RequestOutcome::Silence && ch.rows.is_empty() {
                Ok(())
            } else {
                Err(CheckFailure::Rows(format!("{} rows, outcome {}", ch.rows.len(), ch.ended.as_str())))
            }
        }
        ScenarioCheck::Rows { is } => eq("rows", json!(ch.rows.len()), json!(is)),
        ScenarioCheck::RowCompletions { is } => {
            eq("row completions", json!(ch.rows.iter().map(|x| x.completion_tokens).collect::<Vec<_>>()), json!(is))
        }
        ScenarioCheck::Logprobs(LogprobsSpec::Rows { is }) => row_logprobs(ch, *is),
        _ => Err(CheckFailure::Missing("not a check of one request")),
    }
}

fn ids_of(r: &RunObservation, id: &str) -> Result<Vec<Vec<i64>>, CheckFailure> {
    let matching = copies(r, id);
    if matching.is_empty() {
        return Err(CheckFailure::NoRequest(id.into()));
    }
    Ok(matching.iter().flat_map(|rr| rr.children.iter().map(|c| c.engine_tokens.clone())).collect())
}

/// Every copy of every named request got the same engine tokens.
fn same_tokens(r: &RunObservation, ids: &[String]) -> Result<(), CheckFailure> {
    let mut first: Option<(&str, Vec<i64>)> = None;
    for id in ids {
        for toks in ids_of(r, id)? {
            match &first {
                None => first = Some((id, toks)),
                Some((fid, f)) if f != &toks => {
                    return Err(CheckFailure::TokensDiffer {
                        a: id.clone(),
                        got_a: format!("{toks:?}"),
                        b: fid.to_string(),
                        got_b: format!("{f:?}"),
                    })
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Copy by copy, each named request's tokens against the next one's: the
/// same (`same`) or different.
fn pairwise(r: &RunObservation, ids: &[String], same: bool) -> Result<(), CheckFailure> {
    for w in ids.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (ca, cb) = (copies(r, a), copies(r, b));
        if ca.is_empty() || ca.len() != cb.len() {
            return Err(CheckFailure::Copies { a: a.clone(), na: ca.len(), b: b.clone(), nb: cb.len() });
        }
        for (copy, (x, y)) in ca.iter().zip(&cb).enumerate() {
            let tx: Vec<&Vec<i64>> = x.children.iter().map(|c| &c.engine_tokens).collect();
            let ty: Vec<&Vec<i64>> = y.children.iter().map(|c| &c.engine_tokens).collect();
            if tx.iter().chain(&ty).any(|t| t.is_empty()) {
                return Err(CheckFailure::NoTokens { copy });
            }
            if same && tx != ty {
                return Err(CheckFailure::TokensDiffer {
                    a: format!("copy {copy}: {a}"),
                    got_a: format!("{tx:?}"),
                    b: b.clone(),
                    got_b: format!("{ty:?}"),
                });
            }
            if !same && tx == ty {
                return Err(CheckFailure::TokensSame {
                    a: format!("copy {copy}: {a}"),
                    b: b.clone(),
                    tokens: format!("{tx:?}"),
                });
            }
        }
    }
    Ok(())
}

/// Cumulative counts on every row: completion = ids so far, prompt = the
/// prompt's length.
fn counts(ch: &Observation, prompt_len: usize) -> Result<(), CheckFailure> {
    let mut total = 0i128;
    for (i, row) in ch.rows.iter().enumerate() {
        total += row.output_ids.len() as i128;
        if row.completion_tokens != total {
            return Err(CheckFailure::Rows(format!(
                "row {i}: completion_tokens {} after {total} ids",
                row.completion_tokens
            )));
        }
        if row.prompt_tokens != prompt_len as i128 {
            return Err(CheckFailure::Rows(format!(
                "row {i}: prompt_tokens {} for a {prompt_len}-token prompt",
                row.prompt_tokens
            )));
        }
    }
    if ch.rows.is_empty() {
        return Err(CheckFailure::Rows("no rows".into()));
    }
    Ok(())
}

/// One finite, non-positive logprob per new id over the same ids (`want`),
/// or none.
fn row_logprobs(ch: &Observation, want: bool) -> Result<(), CheckFailure> {
    for (i, row) in ch.rows.iter().enumerate() {
        if !want {
            if !row.logprob_vals.is_empty() || !row.logprob_ids.is_empty() {
                return Err(CheckFailure::Rows(format!("row {i} carries logprobs")));
            }
            continue;
        }
        if row.logprob_ids != row.output_ids || row.logprob_vals.len() != row.output_ids.len() {
            return Err(CheckFailure::Rows(format!(
                "row {i}: {} values over {:?} for ids {:?}",
                row.logprob_vals.len(),
                row.logprob_ids,
                row.output_ids
            )));
        }
        if let Some(x) = row.logprob_vals.iter().find(|x| !x.is_finite() || **x > 0.0) {
            return Err(CheckFailure::Rows(format!("row {i}: logprob {x}")));
        }
    }
    Ok(())
}
