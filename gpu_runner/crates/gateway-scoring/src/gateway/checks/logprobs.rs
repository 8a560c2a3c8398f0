//! The logprob checks: the client's logprobs shaped as vLLM's OpenAI
//! server renders the golden's per-position dicts (`logprobs`), and, for
//! chat, each entry's token text as vLLM's frontend names it
//! (`logprob_tokens`).

use std::collections::BTreeMap;

use serde_json::{json, Value as Json};

use super::super::scenario::Endpoint;
use super::{choice0, close, short, CheckResult, RequestChecks};
use scenario_checks::check::CheckSpec;

impl RequestChecks<'_> {
    pub(super) fn logprobs(&self, c: &CheckSpec, sample: &Json, k: i64) -> CheckResult {
        let (ok, detail) = check_logprobs(self.req.endpoint, &self.body, sample, k);
        self.result(c.name(), ok, detail, c.reference())
    }

    pub(super) fn logprob_tokens(&self, c: &CheckSpec, sample: &Json, k: i64) -> CheckResult {
        let (ok, detail) = check_logprob_tokens(&self.body, sample, k);
        self.result(c.name(), ok, detail, c.reference())
    }
}

/// Chat: the token text of each entry (sampled and top), as vLLM's
/// frontend names them (`decoded_token`).
pub(crate) fn check_logprob_tokens(body: &Json, sample: &Json, k: i64) -> (bool, String) {
    let Some(positions) = sample.as_array() else { return (false, "the golden has no sample logprobs".into()) };
    let content = choice0(body)
        .and_then(|c| c.get("logprobs"))
        .and_then(|l| l.get("content"))
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    for (i, pos) in positions.iter().enumerate() {
        let entries = pos.as_array().cloned().unwrap_or_default();
        let c = content.get(i);
        let tok = |x: Option<&Json>| x.and_then(|t| t.get("token")).and_then(Json::as_str).map(str::to_string);
        let show = |t: &Option<String>| t.as_ref().map_or("none".to_string(), |t| Json::String(t.clone()).to_string());
        if let Some(e) = entries.first() {
            let got = tok(c);
            if got.as_deref() != Some(entry_token(e).as_str()) {
                problems.push(format!("position {i}: token {}, vLLM {:?}", show(&got), entry_token(e)));
            }
        }
        let tops: Vec<Option<String>> = c
            .and_then(|c| c.get("top_logprobs"))
            .and_then(Json::as_array)
            .map(|a| a.iter().map(|t| tok(Some(t))).collect())
            .unwrap_or_default();
        for (j, e) in entries.iter().enumerate().filter(|(j, _)| k == -1 || (*j as i64) < k) {
            let got = tops.get(j).cloned().flatten();
            if got.as_deref() != Some(entry_token(e).as_str()) {
                problems.push(format!("position {i} top {j}: {}, vLLM {:?}", show(&got), entry_token(e)));
            }
        }
    }
    if problems.is_empty() {
        (true, format!("{} positions named as vLLM's frontend names them", positions.len()))
    } else {
        let n = problems.len();
        problems.truncate(4);
        (false, format!("{} ({n} differences)", problems.join("; ")))
    }
}

fn entry_token(e: &Json) -> String {
    e.get("decoded_token").and_then(Json::as_str).unwrap_or("").to_string()
}

fn entry_lp(e: &Json) -> f64 {
    let v = e.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NAN);
    v.max(-9999.0)
}

/// vLLM's OpenAI rendering of the frontend's per-position logprob dicts
/// (the golden's `sample`): completions (`_create_completion_logprobs`:
/// the sampled token's logprob, `top_logprobs` the dict items with index
/// `<= k`, keyed by decoded token) or chat (`_create_chat_logprobs`: the
/// first `k` items).
pub(crate) fn check_logprobs(ep: Endpoint, body: &Json, sample: &Json, k: i64) -> (bool, String) {
    let Some(positions) = sample.as_array() else { return (false, "the golden has no sample logprobs".into()) };
    let Some(lp) = choice0(body).and_then(|c| c.get("logprobs")).filter(|l| !l.is_null()) else {
        return (false, "the response has no logprobs".into());
    };
    let mut problems = match ep {
        Endpoint::Completions => completion_logprob_problems(lp, positions, k),
        Endpoint::Chat => chat_logprob_problems(lp, positions, k),
    };
    if problems.is_empty() {
        (true, format!("{} positions shaped as vLLM's frontend shapes them (k = {k})", positions.len()))
    } else {
        let n = problems.len();
        problems.truncate(3);
        (false, format!("{} ({n} differences)", problems.join("; ")))
    }
}

/// Completions (`_create_completion_logprobs`): where the response's
/// `logprobs` differ from vLLM's rendering of `positions`.
fn completion_logprob_problems(lp: &Json, positions: &[Json], k: i64) -> Vec<String> {
    let mut problems = Vec::new();
    let toks = lp.get("token_logprobs").and_then(Json::as_array).cloned().unwrap_or_default();
    let tops = lp.get("top_logprobs").and_then(Json::as_array).cloned().unwrap_or_default();
    if toks.len() != positions.len() {
        problems.push(format!("{} token_logprobs, vLLM gives {}", toks.len(), positions.len()));
    }
    if tops.len() != positions.len() {
        problems.push(format!("{} top_logprobs entries, vLLM gives {}", tops.len(), positions.len()));
    }
    for (i, pos) in positions.iter().enumerate() {
        let entries = pos.as_array().cloned().unwrap_or_default();
        let Some(sampled) = entries.first() else { continue };
        if let Some(t) = toks.get(i).and_then(Json::as_f64) {
            if !close(t, entry_lp(sampled)) {
                problems.push(format!("position {i}: token_logprob {t}, vLLM {}", entry_lp(sampled)));
            }
        }
        let mut want: BTreeMap<String, f64> = BTreeMap::new();
        for (j, e) in entries.iter().enumerate() {
            if k == -1 || k >= j as i64 {
                want.insert(entry_token(e), entry_lp(e));
            }
        }
        let got: BTreeMap<String, f64> = tops
            .get(i)
            .and_then(Json::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN))).collect())
            .unwrap_or_default();
        let same = got.len() == want.len() && got.iter().all(|(k, v)| want.get(k).is_some_and(|w| close(*v, *w)));
        if !same {
            problems.push(format!("position {i}: top_logprobs {}, vLLM {}", short(&json!(got)), short(&json!(want))));
        }
    }
    problems
}

/// Chat (`_create_chat_logprobs`): where the response's
/// `logprobs.content` differs from vLLM's rendering of `positions`.
fn chat_logprob_problems(lp: &Json, positions: &[Json], k: i64) -> Vec<String> {
    let mut problems = Vec::new();
    let content = lp.get("content").and_then(Json::as_array).cloned().unwrap_or_default();
    if content.len() != positions.len() {
        problems.push(format!("{} content entries, vLLM gives {}", content.len(), positions.len()));
    }
    for (i, pos) in positions.iter().enumerate() {
        let entries = pos.as_array().cloned().unwrap_or_default();
        let want: Vec<(String, f64)> = entries
            .iter()
            .enumerate()
            .filter(|(j, _)| k == -1 || (*j as i64) < k)
            .map(|(_, e)| (entry_token(e), entry_lp(e)))
            .collect();
        let got: Vec<(String, f64)> = content
            .get(i)
            .and_then(|c| c.get("top_logprobs"))
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .map(|t| {
                        (
                            t.get("token").and_then(Json::as_str).unwrap_or("").to_string(),
                            t.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NAN),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Shaping: how many entries, which logprobs, in which order
        // (the token text is `logprob_tokens`).
        let same = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| close(a.1, b.1));
        let sampled_lp = content.get(i).and_then(|c| c.get("logprob")).and_then(Json::as_f64);
        if let (Some(g), Some(e)) = (sampled_lp, entries.first()) {
            if !close(g, entry_lp(e)) {
                problems.push(format!("position {i}: logprob {g}, vLLM {}", entry_lp(e)));
            }
        }
        if !same {
            let g: Vec<f64> = got.iter().map(|x| x.1).collect();
            let w: Vec<f64> = want.iter().map(|x| x.1).collect();
            problems.push(format!("position {i}: top_logprobs values {g:?}, vLLM {w:?}"));
        }
    }
    problems
}
