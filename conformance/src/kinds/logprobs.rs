//! `logprob_shaping`: engine logprob rows (sampled + batch top-K) through
//! the gateway's shaper, compared with vLLM's `LogprobsProcessor`.

use engine_protocol::translate::{EngineRow, LogprobEntry, LogprobShaper};
use serde_json::Value as Json;

use super::{ids, num, same_f64, tokenizer_for};
use engine_testkit::corpus::Case;

fn rows(v: &Json, what: &str) -> Result<Vec<EngineRow>, String> {
    let tids = v.get("token_ids").and_then(Json::as_array).ok_or(format!("{what}.token_ids"))?;
    let lps = v.get("logprobs").and_then(Json::as_array).ok_or(format!("{what}.logprobs"))?;
    let ranks = v.get("ranks").and_then(Json::as_array).ok_or(format!("{what}.ranks"))?;
    if tids.len() != lps.len() || tids.len() != ranks.len() {
        return Err(format!("{what}: ragged rows"));
    }
    (0..tids.len())
        .map(|r| {
            Ok(EngineRow {
                token_ids: ids(&tids[r], &format!("{what}.token_ids[{r}]"))?,
                logprobs: lps[r]
                    .as_array()
                    .ok_or(format!("{what}.logprobs[{r}]"))?
                    .iter()
                    .map(|x| num(x).ok_or(format!("{what}.logprobs[{r}]: {x} is not a number")))
                    .collect::<Result<_, _>>()?,
                rank: ranks[r].as_i64().ok_or(format!("{what}.ranks[{r}]"))?,
            })
        })
        .collect()
}

fn opt_i64(v: Option<&Json>) -> Option<i64> {
    v.and_then(Json::as_i64)
}

fn cmp_entries(path: &str, want: &Json, got: &[LogprobEntry]) -> Result<(), String> {
    let w = want.as_array().ok_or(format!("{path}: expected an array"))?;
    if w.len() != got.len() {
        return Err(format!("{path}: expected {} entries, got {} ({got:?})", w.len(), got.len()));
    }
    for (j, (w, g)) in w.iter().zip(got).enumerate() {
        let ok = w.get("token_id").and_then(Json::as_u64) == Some(u64::from(g.token_id))
            && w.get("logprob").and_then(num).is_some_and(|x| same_f64(x, g.logprob))
            && w.get("rank").and_then(Json::as_i64) == Some(g.rank)
            && match (w.get("decoded_token"), &g.decoded_token) {
                // `null` when the request does not detokenize.
                (Some(Json::Null), None) => true,
                (Some(Json::String(a)), Some(b)) => a == b,
                _ => false,
            };
        if !ok {
            return Err(format!("{path}[{j}]: expected {w}, got {g:?}"));
        }
    }
    Ok(())
}

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), String> {
    let tok = tokenizer_for(case, input)?;
    let k = opt_i64(input.get("num_logprobs"));
    let pk = opt_i64(input.get("num_prompt_logprobs"));
    let flat = input.get("flat_logprobs").and_then(Json::as_bool).unwrap_or(false);
    // SamplingParams.detokenize: true when absent.
    let detokenize = match input.get("detokenize") {
        None | Some(Json::Null) => true,
        Some(Json::Bool(b)) => *b,
        Some(other) => return Err(format!("input.detokenize: expected a bool, got {other}")),
    };
    let mut sh = LogprobShaper::new(k, pk, flat).with_detokenize(detokenize);
    for (i, st) in input.get("steps").and_then(Json::as_array).ok_or("input.steps")?.iter().enumerate() {
        if let Some(l) = st.get("logprobs").filter(|x| !x.is_null()) {
            sh.add_sample_rows(Some(&tok), &rows(l, &format!("steps[{i}].logprobs"))?);
        }
        if let Some(l) = st.get("prompt_logprobs").filter(|x| !x.is_null()) {
            sh.add_prompt_rows(Some(&tok), &rows(l, &format!("steps[{i}].prompt_logprobs"))?);
        }
    }
    match (expected.get("sample"), &sh.sample) {
        (Some(Json::Null) | None, None) => {}
        (Some(Json::Array(w)), Some(g)) => {
            if w.len() != g.len() {
                return Err(format!("sample: expected {} positions, got {}", w.len(), g.len()));
            }
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                cmp_entries(&format!("sample[{i}]"), w, g)?;
            }
        }
        (w, g) => return Err(format!("sample: expected {w:?}, got {g:?}")),
    }
    match (expected.get("prompt"), &sh.prompt) {
        (Some(Json::Null) | None, None) => {}
        (Some(Json::Array(w)), Some(g)) => {
            if w.len() != g.len() {
                return Err(format!("prompt: expected {} positions, got {}", w.len(), g.len()));
            }
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                match (w, g) {
                    (Json::Null, None) => {}
                    (w, Some(g)) => cmp_entries(&format!("prompt[{i}]"), w, g)?,
                    (w, None) => return Err(format!("prompt[{i}]: expected {w}, got null")),
                }
            }
        }
        (w, g) => return Err(format!("prompt: expected {w:?}, got {g:?}")),
    }
    let want_c = expected.get("cumulative_logprob").and_then(num);
    let ok = match (want_c, sh.cumulative_logprob) {
        (None, None) => true,
        (Some(a), Some(b)) => same_f64(a, b),
        _ => false,
    };
    if !ok {
        return Err(format!("cumulative_logprob: expected {want_c:?}, got {:?}", sh.cumulative_logprob));
    }
    Ok(())
}
