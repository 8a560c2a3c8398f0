//! `logprob_shaping`: engine logprob rows (sampled + batch top-K) through
//! the gateway's shaper, compared with vLLM's `LogprobsProcessor`.

use engine_protocol::translate::{EngineRow, LogprobEntry, LogprobShaper};
use serde_json::Value as Json;

use super::{ids, num, same_f64, tokenizer_for, KindError};
use engine_testkit::corpus::Case;

fn rows(v: &Json, what: &str) -> Result<Vec<EngineRow>, KindError> {
    let column = |k: &str| v.get(k).and_then(Json::as_array).ok_or_else(|| KindError::missing(format!("{what}.{k}")));
    let (tids, lps, ranks) = (column("token_ids")?, column("logprobs")?, column("ranks")?);
    if tids.len() != lps.len() || tids.len() != ranks.len() {
        return Err(KindError::RaggedRows { path: what.to_string() });
    }
    (0..tids.len())
        .map(|r| {
            let path = format!("{what}.logprobs[{r}]");
            Ok(EngineRow {
                token_ids: ids(&tids[r], &format!("{what}.token_ids[{r}]"))?,
                logprobs: lps[r]
                    .as_array()
                    .ok_or_else(|| KindError::missing(path.clone()))?
                    .iter()
                    .map(|x| {
                        num(x).ok_or_else(|| KindError::NotA { path: path.clone(), value: x.clone(), what: "a number" })
                    })
                    .collect::<Result<_, _>>()?,
                rank: ranks[r].as_i64().ok_or_else(|| KindError::missing(format!("{what}.ranks[{r}]")))?,
            })
        })
        .collect()
}

fn opt_i64(v: Option<&Json>) -> Option<i64> {
    v.and_then(Json::as_i64)
}

fn cmp_entries(path: &str, want: &Json, got: &[LogprobEntry]) -> Result<(), KindError> {
    let w = want.as_array().ok_or_else(|| KindError::ExpectedArray { path: path.to_string() })?;
    if w.len() != got.len() {
        return Err(KindError::Count {
            path: path.to_string(),
            want: w.len(),
            unit: "entries",
            got: got.len(),
            extra: format!(" ({got:?})"),
        });
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
            return Err(KindError::differs(format!("{path}[{j}]"), w, format!("{g:?}")));
        }
    }
    Ok(())
}

/// The number of positions of one side (`sample` or `prompt`).
fn positions(path: &str, want: usize, got: usize) -> Result<(), KindError> {
    if want == got {
        return Ok(());
    }
    Err(KindError::Count { path: path.to_string(), want, unit: "positions", got, extra: String::new() })
}

/// Feeds the case's steps to a shaper built from its options.
fn shaped(case: &Case, input: &Json) -> Result<LogprobShaper, KindError> {
    let tok = tokenizer_for(case, input)?;
    let k = opt_i64(input.get("num_logprobs"));
    let pk = opt_i64(input.get("num_prompt_logprobs"));
    let flat = input.get("flat_logprobs").and_then(Json::as_bool).unwrap_or(false);
    // SamplingParams.detokenize: true when absent.
    let detokenize = match input.get("detokenize") {
        None | Some(Json::Null) => true,
        Some(Json::Bool(b)) => *b,
        Some(other) => return Err(KindError::NotABool { path: "input.detokenize".into(), got: other.clone() }),
    };
    let mut sh = LogprobShaper::new(k, pk, flat).with_detokenize(detokenize);
    let steps = input.get("steps").and_then(Json::as_array).ok_or_else(|| KindError::missing("input.steps"))?;
    for (i, st) in steps.iter().enumerate() {
        if let Some(l) = st.get("logprobs").filter(|x| !x.is_null()) {
            sh.add_sample_rows(Some(&tok), &rows(l, &format!("steps[{i}].logprobs"))?);
        }
        if let Some(l) = st.get("prompt_logprobs").filter(|x| !x.is_null()) {
            sh.add_prompt_rows(Some(&tok), &rows(l, &format!("steps[{i}].prompt_logprobs"))?);
        }
    }
    Ok(sh)
}

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), KindError> {
    let sh = shaped(case, input)?;
    match (expected.get("sample"), &sh.sample) {
        (Some(Json::Null) | None, None) => {}
        (Some(Json::Array(w)), Some(g)) => {
            positions("sample", w.len(), g.len())?;
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                cmp_entries(&format!("sample[{i}]"), w, g)?;
            }
        }
        (w, g) => return Err(KindError::differs("sample", format!("{w:?}"), format!("{g:?}"))),
    }
    match (expected.get("prompt"), &sh.prompt) {
        (Some(Json::Null) | None, None) => {}
        (Some(Json::Array(w)), Some(g)) => {
            positions("prompt", w.len(), g.len())?;
            for (i, (w, g)) in w.iter().zip(g).enumerate() {
                match (w, g) {
                    (Json::Null, None) => {}
                    (w, Some(g)) => cmp_entries(&format!("prompt[{i}]"), w, g)?,
                    (w, None) => return Err(KindError::differs(format!("prompt[{i}]"), w, "null")),
                }
            }
        }
        (w, g) => return Err(KindError::differs("prompt", format!("{w:?}"), format!("{g:?}"))),
    }
    let want_c = expected.get("cumulative_logprob").and_then(num);
    let ok = match (want_c, sh.cumulative_logprob) {
        (None, None) => true,
        (Some(a), Some(b)) => same_f64(a, b),
        _ => false,
    };
    if !ok {
        return Err(KindError::differs(
            "cumulative_logprob",
            format!("{want_c:?}"),
            format!("{:?}", sh.cumulative_logprob),
        ));
    }
    Ok(())
}
