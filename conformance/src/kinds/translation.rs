//! `translation`: a gateway request through `translate` (vLLM-parity
//! options), compared with vLLM's `InputProcessor.process_inputs` (+
//! `ParentRequest` for n > 1) on the fields the engine reads, plus the
//! frontend fields the gateway's detector uses (`stop`,
//! `include_stop_str_in_output`, `skip_special_tokens`). Token-id sets
//! (`stop_token_ids`, `_all_stop_token_ids`) compare as sorted sets;
//! request ids and timestamps are not compared.

use engine_protocol::release;
use engine_protocol::translate::{translate, EngineInfo, GenerateRequest, TranslateOptions, Translated};
use engine_protocol::value::{StructValue, Value};
use serde_json::{json, Value as Json};

use super::{num, same_f64, tokenizer_for};
use crate::corpus::Case;

pub fn to_json(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!(i),
        Value::UInt(u) => json!(u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(Json::Number).unwrap_or_else(|| json!(f.to_string())),
        Value::Str(s) => json!(s),
        Value::Array(xs) => Json::Array(xs.iter().map(to_json).collect()),
        Value::IntArray(xs) => json!(xs),
        Value::Map(kv) => Json::Object(
            kv.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::Str(s) => s.clone(),
                        other => to_json(other).to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Value::Struct(s) => Json::Object(
            s.schema.fields.iter().zip(s.fields()).map(|(f, v)| (f.name.to_string(), to_json(v))).collect(),
        ),
        other => json!(format!("{other:?}")),
    }
}

fn sorted_ids(v: Option<&Value>) -> Json {
    let mut xs: Vec<Json> = match v.map(to_json) {
        Some(Json::Array(xs)) => xs,
        _ => Vec::new(),
    };
    xs.sort_by_key(|x| x.as_i64());
    Json::Array(xs)
}

/// The compared fields of one engine request, in `expected`'s shape.
pub fn engine_fields(t: &Translated, sp: &StructValue) -> Json {
    let g = |k: &str| sp.get(k).map(to_json).unwrap_or(Json::Null);
    let so = match sp.get("structured_outputs") {
        Some(Value::Struct(s)) => {
            let f = |k: &str| s.get(k).map(to_json).unwrap_or(Json::Null);
            json!({"json": f("json"), "regex": f("regex"), "choice": f("choice"), "grammar": f("grammar"),
                   "json_object": f("json_object"), "structural_tag": f("structural_tag"), "_backend": f("_backend")})
        }
        _ => Json::Null,
    };
    let logit_bias = match sp.get("logit_bias") {
        Some(Value::Map(kv)) => Json::Object(kv.iter().map(|(k, v)| (to_json(k).to_string(), to_json(v))).collect()),
        _ => Json::Null,
    };
    json!({
        "n": g("n"),
        "presence_penalty": g("presence_penalty"),
        "frequency_penalty": g("frequency_penalty"),
        "repetition_penalty": g("repetition_penalty"),
        "temperature": g("temperature"),
        "top_p": g("top_p"),
        "top_k": g("top_k"),
        "min_p": g("min_p"),
        "seed": g("seed"),
        "stop": t.stop.stop,
        "stop_token_ids": sorted_ids(sp.get("stop_token_ids")),
        "ignore_eos": g("ignore_eos"),
        "max_tokens": g("max_tokens"),
        "min_tokens": g("min_tokens"),
        "logprobs": g("logprobs"),
        "prompt_logprobs": g("prompt_logprobs"),
        "include_stop_str_in_output": t.stop.include_stop_str_in_output,
        "skip_special_tokens": t.stop.skip_special_tokens,
        "_eos_token_id": g("_eos_token_id"),
        "_all_stop_token_ids": sorted_ids(sp.get("_all_stop_token_ids")),
        "logit_bias": logit_bias,
        "allowed_token_ids": g("allowed_token_ids"),
        "skip_reading_prefix_cache": g("skip_reading_prefix_cache"),
        "structured_outputs": so,
    })
}

/// Compares JSON with floats by value.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(_), Json::Number(_)) => match (a.as_i64(), b.as_i64(), a.as_u64(), b.as_u64()) {
            (Some(x), Some(y), _, _) => x == y,
            (_, _, Some(x), Some(y)) => x == y,
            _ => num(a).zip(num(b)).is_some_and(|(x, y)| same_f64(x, y)),
        },
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The options a case runs under: vLLM parity, with the case's server
/// settings.
pub fn options_for(input: &Json) -> TranslateOptions {
    let mut o = TranslateOptions::vllm_parity();
    if let Some(m) = input.get("max_logprobs").and_then(Json::as_i64) {
        o.max_logprobs = m;
    }
    if let Some(b) = input.get("structured_outputs_backend").and_then(Json::as_str) {
        o.structured_outputs_backend = b.to_string();
    }
    o
}

pub fn run(case: &Case, input: &Json, opts: &TranslateOptions) -> Result<Result<Translated, String>, String> {
    let tok = tokenizer_for(case, input)?;
    let rel = release(&case.dialect, &case.version).ok_or("no schema table")?;
    let max_model_len = input.get("max_model_len").and_then(Json::as_i64).ok_or("input.max_model_len")?;
    let engine = EngineInfo { max_model_len, release: rel };
    let req = input.get("request").ok_or("input.request")?;
    Ok(GenerateRequest::from_json(req).and_then(|r| translate(&r, &engine, &tok, opts)).map_err(|e| e.to_string()))
}

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), String> {
    let got = run(case, input, &options_for(input))?;
    match (expected.get("error"), got) {
        (Some(_), Err(_)) => Ok(()),
        (Some(e), Ok(_)) => Err(format!("expected an error ({e}), translation succeeded")),
        (None, Err(e)) => Err(format!("expected a translation, got error: {e}")),
        (None, Ok(t)) => {
            let want = expected.get("requests").and_then(Json::as_array).ok_or("expected.requests")?;
            if want.len() != t.requests.len() {
                return Err(format!("expected {} engine requests, got {}", want.len(), t.requests.len()));
            }
            for (i, (w, r)) in want.iter().zip(&t.requests).enumerate() {
                let Value::Struct(s) = &r.request else { return Err("request is not a struct".into()) };
                let prompt = s.get("prompt_token_ids").map(to_json).unwrap_or(Json::Null);
                if !same(w.get("prompt_token_ids").unwrap_or(&Json::Null), &prompt) {
                    return Err(format!(
                        "requests[{i}].prompt_token_ids: expected {}, got {prompt}",
                        w["prompt_token_ids"]
                    ));
                }
                let got = engine_fields(&t, r.sampling_params());
                let wsp = w.get("sampling_params").and_then(Json::as_object).ok_or("sampling_params")?;
                for (k, wv) in wsp {
                    let gv = got.get(k).unwrap_or(&Json::Null);
                    if !same(wv, gv) {
                        return Err(format!("requests[{i}].sampling_params.{k}: expected {wv}, got {gv}"));
                    }
                }
            }
            Ok(())
        }
    }
}
