//! `stop_detection`: a token stream, split into engine outputs, through the
//! gateway's detokenizer + stop detector + finish synthesis, compared
//! output by output with vLLM's `OutputProcessor` (DELTA).

use engine_protocol::translate::{EngineStep, RequestStream, StepOutput, StopParams, StopSemantics};
use engine_protocol::typed::{FinishReason, StopReason};
use serde_json::Value as Json;

use super::{ids, tokenizer_for, KindError};
use engine_testkit::corpus::Case;

fn flag(p: &Json, k: &str, default: bool) -> Result<bool, KindError> {
    match p.get(k) {
        None => Ok(default),
        Some(v) => v.as_bool().ok_or_else(|| KindError::invalid(format!("params.{k}"), "must be a bool")),
    }
}

pub fn params_of(p: &Json) -> Result<StopParams, KindError> {
    let stop = p
        .get("stop")
        .and_then(Json::as_array)
        .map(|xs| {
            xs.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| KindError::invalid("params.stop", "entries must be strings"))
                })
                .collect()
        })
        .transpose()?
        .unwrap_or_default();
    Ok(StopParams {
        stop,
        include_stop_str_in_output: flag(p, "include_stop_str_in_output", false)?,
        min_tokens: p.get("min_tokens").and_then(Json::as_u64).unwrap_or(0) as usize,
        skip_special_tokens: flag(p, "skip_special_tokens", true)?,
        spaces_between_special_tokens: flag(p, "spaces_between_special_tokens", true)?,
        stop_string_token_ids: Default::default(),
        semantics: StopSemantics::Vllm,
    })
}

fn bad(field: &'static str, value: &Json) -> KindError {
    KindError::BadReason { field, value: value.clone() }
}

fn finish_of(v: &Json) -> Result<Option<FinishReason>, KindError> {
    match v {
        Json::Null => Ok(None),
        Json::Number(n) => {
            n.as_i64().and_then(FinishReason::from_wire).map(Some).ok_or_else(|| bad("finish_reason", v))
        }
        other => Err(bad("finish_reason", other)),
    }
}

fn stop_reason_of(v: &Json) -> Result<Option<StopReason>, KindError> {
    match v {
        Json::Null => Ok(None),
        Json::Number(n) => {
            let id = n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
            id.map(|i| Some(StopReason::TokenId(i))).ok_or_else(|| bad("stop_reason", v))
        }
        Json::String(s) => Ok(Some(StopReason::Text(s.clone()))),
        other => Err(bad("stop_reason", other)),
    }
}

pub fn steps_of(input: &Json) -> Result<Vec<EngineStep>, KindError> {
    input
        .get("steps")
        .and_then(Json::as_array)
        .ok_or_else(|| KindError::invalid("input.steps", "must be an array"))?
        .iter()
        .enumerate()
        .map(|(i, s)| {
            Ok(EngineStep {
                new_token_ids: ids(
                    s.get("new_token_ids").unwrap_or(&Json::Null),
                    &format!("steps[{i}].new_token_ids"),
                )?,
                finish_reason: finish_of(s.get("finish_reason").unwrap_or(&Json::Null))?,
                stop_reason: stop_reason_of(s.get("stop_reason").unwrap_or(&Json::Null))?,
            })
        })
        .collect()
}

/// A wire integer (-2^63 ..= 2^64-1) as a JSON number.
fn int_json(i: i128) -> Json {
    match (i64::try_from(i), u64::try_from(i)) {
        (Ok(x), _) => Json::from(x),
        (_, Ok(x)) => Json::from(x),
        _ => Json::from(i.to_string()),
    }
}

/// The JSON form of one client output (as in `expected.outputs`).
pub fn render(o: &Option<StepOutput>) -> Json {
    match o {
        None => Json::Null,
        Some(o) => serde_json::json!({
            "text": o.text,
            "token_ids": o.token_ids,
            "finish_reason": o.finish_reason.map(|f| f.as_str()),
            "stop_reason": match &o.stop_reason {
                None => Json::Null,
                Some(StopReason::TokenId(i)) => int_json(*i),
                Some(StopReason::Text(s)) => Json::from(s.clone()),
            },
            "abort_engine": o.abort_engine,
        }),
    }
}

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), KindError> {
    let tok = tokenizer_for(case, input)?;
    let prompt = ids(input.get("prompt_token_ids").unwrap_or(&Json::Null), "input.prompt_token_ids")?;
    let params = params_of(input.get("params").ok_or_else(|| KindError::invalid("input.params", "missing"))?)?;
    let steps = steps_of(input)?;
    let want = expected
        .get("outputs")
        .and_then(Json::as_array)
        .ok_or_else(|| KindError::invalid("expected.outputs", "must be an array"))?;
    if want.len() != steps.len() {
        return Err(KindError::OutputsPerStep { outputs: want.len(), steps: steps.len() });
    }
    let mut rs = RequestStream::new(&tok, &prompt, params);
    for (i, (step, want)) in steps.iter().zip(want).enumerate() {
        let got = render(&rs.step(&tok, step));
        if &got != want {
            return Err(KindError::differs(format!("outputs[{i}]"), want, got));
        }
    }
    Ok(())
}
