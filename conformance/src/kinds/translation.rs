//! `translation`: a gateway request through `translate` (vLLM-parity
//! options), compared with what vLLM's `InputProcessor.process_inputs` (+
//! `ParentRequest` for n > 1) built for the same request.
//!
//! - Accepted requests: when the case records `engine_request` (the
//!   canonical view of the whole `EngineCoreRequest` vLLM would send), every
//!   field of ours is compared with it, field by field, except the
//!   run-specific ones the case lists under `expected.volatile`; the
//!   `sampling_params` subset of older cases is compared as well, read from
//!   what goes on the wire (not from the gateway's own stop settings).
//! - Refused requests: vLLM's message is classified into the vocabulary of
//!   [`TranslateErrorClass`] plus the parameter(s) it names
//!   ([`classify_vllm_error`]); ours must have the same class and the same
//!   parameters. A message the classifier does not know fails the case, so
//!   a new kind of refusal cannot pass unexamined.
//! - A case whose own input is unusable (no tokenizer, a request JSON that
//!   does not parse) fails, whatever it expects.
//!
//! docs/case-format.md describes the `input` and `expected` shapes.

use engine_protocol::translate::{
    translate, EngineInfo, GenerateRequest, GenerationDefaults, TranslateError, TranslateErrorClass, TranslateOptions,
    Translated,
};
use engine_protocol::view::{any_view, diff, to_view};
use engine_protocol::MessageKind;
use engine_protocol::{StructValue, Value};
use serde_json::{json, Value as Json};

use super::{num, same_f64, tokenizer_for, KindError};
use engine_testkit::corpus::Case;

/// A wire value as JSON: the canonical view of an untyped value
/// ([`any_view`], docs/case-format.md §6), the rendering vLLM's side of the
/// goldens uses (non-finite floats as `"NaN"`/`"Infinity"`, bytes as
/// `{"$bytes": hex}`, non-string map keys as decimal strings).
fn to_json(v: &Value) -> Json {
    any_view(v)
}

fn sorted_ids(v: Option<&Value>) -> Json {
    let mut xs: Vec<Json> = match v.map(to_json) {
        Some(Json::Array(xs)) => xs,
        _ => Vec::new(),
    };
    xs.sort_by_key(|x| x.as_i64());
    Json::Array(xs)
}

/// The compared fields of one engine request, in `expected`'s shape, all
/// read from the `SamplingParams` that goes on the wire.
pub fn engine_fields(sp: &StructValue) -> Json {
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
        Some(v @ Value::Map(_)) => to_json(v),
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
        "stop": g("stop"),
        "stop_token_ids": sorted_ids(sp.get("stop_token_ids")),
        "ignore_eos": g("ignore_eos"),
        "max_tokens": g("max_tokens"),
        "min_tokens": g("min_tokens"),
        "logprobs": g("logprobs"),
        "prompt_logprobs": g("prompt_logprobs"),
        "include_stop_str_in_output": g("include_stop_str_in_output"),
        "skip_special_tokens": g("skip_special_tokens"),
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

/// Runs the case's request through `translate`. The outer error is a
/// problem with the case itself (tokenizer, input keys, a request that does
/// not parse): a failure whatever the case expects.
pub fn run(
    case: &Case,
    input: &Json,
    opts: &TranslateOptions,
) -> Result<Result<Translated, TranslateError>, KindError> {
    let tok = tokenizer_for(case, input)?;
    if let Some(derived) = input.get("generation_defaults") {
        // What vLLM's server derived from the model's generation config
        // (`get_diff_sampling_param`, `max_new_tokens` named `max_tokens`):
        // our reading of the same file must agree.
        let mut as_file = derived.clone();
        if let Some(m) = as_file.as_object_mut() {
            if let Some(v) = m.remove("max_tokens") {
                m.insert("max_new_tokens".into(), v);
            }
        }
        let want = GenerationDefaults::from_json(&as_file);
        if want != tok.generation_defaults {
            return Err(KindError::GenerationDefaults {
                ours: Box::new(tok.generation_defaults),
                theirs: Box::new(want),
            });
        }
    }
    let rel = case.release().ok_or(KindError::NoSchemaTable)?;
    let max_model_len =
        input.get("max_model_len").and_then(Json::as_i64).ok_or_else(|| KindError::missing("input.max_model_len"))?;
    let engine = EngineInfo { max_model_len, release: rel };
    let req = input.get("request").ok_or_else(|| KindError::missing("input.request"))?;
    let req = GenerateRequest::from_json(req).map_err(|e| KindError::Request(Box::new(e)))?;
    Ok(translate(&req, &engine, &tok, opts))
}

/// vLLM's refusal, classified: the class and the parameters it names.
pub type ErrorKey = (TranslateErrorClass, Vec<String>);

/// Classifies one of vLLM's frontend error messages (the `translation`
/// goldens record them verbatim) into the vocabulary our errors use.
/// `None` for a message no rule knows.
///
/// This reads text because the text is all vLLM's side leaves: its
/// frontend raises `ValueError`s whose only structure is the message. Our
/// side of the comparison is typed ([`error_key`] reads
/// [`TranslateError::class`] and its parameters, never its message).
///
/// `request` is the request refused (the case's `input.request`): one
/// message names no parameter, vLLM's "The JSON schema is nested too
/// deeply" (`check_json_nesting`, vllm/sampling_params.py 0.32.0 to
/// 0.34.0), which it raises for `structured_outputs.json` and
/// `structured_outputs.structural_tag` alike, after refusing a request
/// with more than one constraint: it is about whichever of the two the
/// request sets.
pub fn classify_vllm_error(message: &str, request: &Json) -> Option<ErrorKey> {
    use TranslateErrorClass::*;
    let one = |class, p: &str| Some((class, vec![p.to_string()]));
    let m = message.trim();
    if m.starts_with("The JSON schema is nested too deeply") {
        let so = request.get("structured_outputs")?;
        let set = |k: &str| so.get(k).is_some_and(|v| !v.is_null());
        let field = ["json", "structural_tag"].into_iter().find(|k| set(k))?;
        return one(InvalidValue, &format!("structured_outputs.{field}"));
    }
    if m.contains("maximum context length") || m.contains("longer than the maximum model length") {
        // "your prompt contains N input tokens ... even without any output
        // tokens" and "The decoder prompt (length N) plus ..." are about the
        // prompt; "you requested N output tokens" about max_tokens.
        let about_output = m.contains("you requested") || m.contains("output tokens and your prompt");
        return one(TooLong, if about_output { "max_tokens" } else { "prompt_token_ids" });
    }
    if let Some(rest) = m.split("multiple are specified:").nth(1) {
        // A Python dict repr: {'json': None, 'regex': 'a', ...}; the set
        // fields are the ones whose value is not None.
        let mut params = Vec::new();
        for field in ["json", "regex", "choice", "grammar", "json_object", "structural_tag"] {
            let key = format!("'{field}': ");
            if let Some(at) = rest.find(&key) {
                if !rest[at + key.len()..].starts_with("None") {
                    params.push(format!("structured_outputs.{field}"));
                }
            }
        }
        return (!params.is_empty()).then_some((Conflict, params));
    }
    if m.contains("none are specified") {
        return one(InvalidValue, "structured_outputs");
    }
    if let Some(at) = m.find("(parameter=") {
        let p: String = m[at + "(parameter=".len()..].chars().take_while(|c| *c != ',' && *c != ')').collect();
        return one(InvalidValue, p.trim());
    }
    if let Some(rest) = m.strip_prefix("structured_outputs.") {
        let field: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        return one(InvalidValue, &format!("structured_outputs.{field}"));
    }
    if m.starts_with("Choice '") {
        return one(InvalidValue, "structured_outputs.choice");
    }
    if m.starts_with("The decoder prompt cannot be empty") || (m.starts_with("Token id ") && m.contains("out of vocab"))
    {
        return one(InvalidValue, "prompt_token_ids");
    }
    if m.contains("not supported") {
        let p: String = m.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        return (!p.is_empty()).then(|| (Unsupported, vec![p]));
    }
    // "<param> must ..." / "<param> cannot ...".
    let mut words = m.split_whitespace();
    let (p, verb) = (words.next()?, words.next()?);
    let is_param = p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if is_param && (verb == "must" || verb == "cannot") {
        return one(InvalidValue, p);
    }
    None
}

/// Our error in the same words.
pub fn error_key(e: &TranslateError) -> ErrorKey {
    (e.class, e.params().into_iter().map(str::to_string).collect())
}

/// The same class naming the same parameters, in any order.
pub fn same_key(a: &ErrorKey, b: &ErrorKey) -> bool {
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    a.0 == b.0 && sorted(&a.1) == sorted(&b.1)
}

/// The engine's refusal (`want`, classified from its `message`) and ours,
/// `e`: the same class naming the same parameters, or why not.
pub fn refused_alike(engine: &'static str, want: &ErrorKey, message: &str, e: TranslateError) -> Result<(), KindError> {
    let ours = error_key(&e);
    if same_key(want, &ours) {
        return Ok(());
    }
    Err(KindError::RefusedDifferently {
        engine,
        theirs: show_key(want),
        message: message.to_string(),
        ours: show_key(&ours),
        error: Box::new(e),
    })
}

/// `class(param, ...)`, as failure details print an error key.
pub fn show_key(k: &ErrorKey) -> String {
    format!("{}({})", k.0, k.1.join(", "))
}

pub fn check(case: &Case, input: &Json, expected: &Json) -> Result<(), KindError> {
    match (expected.get("error"), run(case, input, &options_for(input))?) {
        (Some(want), Err(e)) => same_refusal(want, input.get("request").unwrap_or(&Json::Null), e),
        (Some(e), Ok(_)) => Err(KindError::ExpectedRefusal { want: e.clone() }),
        (None, Err(e)) => Err(KindError::Refused(Box::new(e))),
        (None, Ok(t)) => same_requests(case, expected, &t),
    }
}

/// vLLM's refusal `want` (`expected.error`) and ours, `e`: the same class
/// naming the same parameters.
fn same_refusal(want: &Json, request: &Json, e: TranslateError) -> Result<(), KindError> {
    let message =
        want.get("message").and_then(Json::as_str).ok_or_else(|| KindError::missing("expected.error.message"))?;
    let want = classify_vllm_error(message, request).ok_or_else(|| KindError::Unclassified {
        engine: "vLLM",
        kind: None,
        message: message.to_string(),
    })?;
    refused_alike("vLLM", &want, message, e)
}

/// `expected.volatile`: the fields of `engine_request` not compared.
fn volatile_fields(expected: &Json) -> Result<Vec<&str>, KindError> {
    match expected.get("volatile") {
        None => Ok(Vec::new()),
        Some(Json::Array(xs)) => xs
            .iter()
            .map(|x| x.as_str().ok_or_else(|| KindError::invalid("expected.volatile", "holds strings")))
            .collect(),
        Some(_) => Err(KindError::invalid("expected.volatile", "must be an array of field names")),
    }
}

/// Our engine requests against vLLM's (`expected.requests`), one by one.
fn same_requests(case: &Case, expected: &Json, t: &Translated) -> Result<(), KindError> {
    let rel = case.release().ok_or(KindError::NoSchemaTable)?;
    let ty = MessageKind::EngineCoreRequest.payload_type(rel);
    let volatile = volatile_fields(expected)?;
    let want =
        expected.get("requests").and_then(Json::as_array).ok_or_else(|| KindError::missing("expected.requests"))?;
    if want.len() != t.requests.len() {
        return Err(KindError::RequestCount { want: want.len(), got: t.requests.len() });
    }
    for (i, (w, r)) in want.iter().zip(&t.requests).enumerate() {
        let Value::Struct(s) = &r.request else { return Err(KindError::OurShape("request is not a struct")) };
        // `requests[i].prompt_token_ids` is the ids vLLM's input
        // processor built (a list in every release); the form they
        // travel in (0.34.0 on: an int32 array) is checked with the
        // whole `engine_request` below.
        let prompt = match s.get("prompt_token_ids") {
            Some(v @ Value::Tensor(_)) => v.token_ids().map_or_else(|| to_json(v), Json::from),
            Some(v) => to_json(v),
            None => Json::Null,
        };
        if !same(w.get("prompt_token_ids").unwrap_or(&Json::Null), &prompt) {
            return Err(KindError::differs(format!("requests[{i}].prompt_token_ids"), &w["prompt_token_ids"], prompt));
        }
        if let Some(full) = w.get("engine_request") {
            same_engine_request(i, full, &to_view(ty, &r.request), &volatile)?;
        }
        let got = engine_fields(r.sampling_params());
        let wsp =
            w.get("sampling_params").and_then(Json::as_object).ok_or_else(|| KindError::missing("sampling_params"))?;
        for (k, wv) in wsp {
            let gv = got.get(k).unwrap_or(&Json::Null);
            if !same(wv, gv) {
                return Err(KindError::differs(format!("requests[{i}].sampling_params.{k}"), wv, gv));
            }
        }
    }
    Ok(())
}

/// `requests[i].engine_request` (vLLM's whole request, as a view) against
/// the view of ours, field by field except the `volatile` ones.
fn same_engine_request(i: usize, full: &Json, ours: &Json, volatile: &[&str]) -> Result<(), KindError> {
    let full = full.as_object().ok_or_else(|| KindError::invalid("engine_request", "must be an object"))?;
    let ours = ours.as_object().ok_or(KindError::OurShape("our request view is not an object"))?;
    for (k, wv) in full {
        if volatile.contains(&k.as_str()) {
            continue;
        }
        let gv = ours.get(k).ok_or_else(|| KindError::Field { index: i, field: k.clone(), ours_only: false })?;
        if let Some((path, what)) = diff(wv, gv) {
            return Err(KindError::ViewDiffers { path: format!("requests[{i}].engine_request.{k}{path}"), what });
        }
    }
    if let Some(k) = ours.keys().find(|k| !full.contains_key(*k)) {
        return Err(KindError::Field { index: i, field: k.clone(), ours_only: true });
    }
    Ok(())
}
