//! The JSON form of the gateway request (the `translation` goldens, a
//! gateway's HTTP layer): [`GenerateRequest::from_json`](super::GenerateRequest::from_json),
//! absent and null keys alike `None`, anything else of the wrong type an
//! error naming the key and the type expected.

use super::{ConstraintFields, GenerateRequest, TranslateError, TranslateErrorClass};

/// Optional key `k` of `v` read by `read` (absent and null are `None`);
/// anything `read` refuses is an error naming `k` and the expected `what`.
fn opt<T>(
    v: &serde_json::Value,
    k: &str,
    what: &str,
    read: impl Fn(&serde_json::Value) -> Option<T>,
) -> Result<Option<T>, TranslateError> {
    match v.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => read(x).map(Some).ok_or_else(|| TranslateError::malformed(k, format!("expected {what}, got {x}"))),
    }
}

fn opt_i64(v: &serde_json::Value, k: &str) -> Result<Option<i64>, TranslateError> {
    opt(v, k, "an integer", serde_json::Value::as_i64)
}

fn opt_f64(v: &serde_json::Value, k: &str) -> Result<Option<f64>, TranslateError> {
    opt(v, k, "a number", serde_json::Value::as_f64)
}

fn opt_bool(v: &serde_json::Value, k: &str) -> Result<Option<bool>, TranslateError> {
    opt(v, k, "a bool", serde_json::Value::as_bool)
}

fn int_list(v: &serde_json::Value, k: &str) -> Result<Option<Vec<i64>>, TranslateError> {
    match v.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Array(xs)) => xs
            .iter()
            .map(|x| x.as_i64().ok_or_else(|| TranslateError::malformed(k, format!("expected integers, got {x}"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(x) => Err(TranslateError::malformed(k, format!("expected a list of integers, got {x}"))),
    }
}

fn str_list(v: &serde_json::Value, k: &str) -> Result<Option<Vec<String>>, TranslateError> {
    match v.get(k) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(vec![s.clone()])),
        Some(serde_json::Value::Array(xs)) => xs
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| TranslateError::malformed(k, format!("expected strings, got {x}")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(x) => Err(TranslateError::malformed(k, format!("expected a string or a list of strings, got {x}"))),
    }
}

impl GenerateRequest {
    /// From the JSON object of the `translation` goldens (vLLM's
    /// `SamplingParams` field names plus `prompt_token_ids`).
    pub fn from_json(v: &serde_json::Value) -> Result<Self, TranslateError> {
        let prompt = int_list(v, "prompt_token_ids")?.unwrap_or_default();
        let prompt_token_ids = prompt
            .iter()
            .map(|&t| {
                u32::try_from(t).map_err(|_| TranslateError {
                    class: TranslateErrorClass::InvalidValue,
                    field: "prompt_token_ids".into(),
                    message: format!("token id {t} is out of vocabulary"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let structured_outputs = match v.get("structured_outputs") {
            None | Some(serde_json::Value::Null) => None,
            Some(so) => Some(ConstraintFields {
                json: so.get("json").filter(|x| !x.is_null()).cloned(),
                regex: so.get("regex").and_then(|x| x.as_str()).map(str::to_string),
                choice: str_list(so, "choice")?,
                grammar: so.get("grammar").and_then(|x| x.as_str()).map(str::to_string),
                json_object: opt_bool(so, "json_object")?,
                structural_tag: so.get("structural_tag").and_then(|x| x.as_str()).map(str::to_string),
            }),
        };
        let logit_bias = match v.get("logit_bias") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::Object(m)) => Some(
                m.iter()
                    .map(|(k, b)| {
                        let k = k.parse::<i64>().map_err(|_| {
                            TranslateError::malformed("logit_bias", format!("key {k} is not a token id"))
                        })?;
                        let b = b.as_f64().ok_or_else(|| {
                            TranslateError::malformed("logit_bias", format!("bias {b} is not a number"))
                        })?;
                        Ok((k, b))
                    })
                    .collect::<Result<Vec<_>, TranslateError>>()?,
            ),
            Some(x) => return Err(TranslateError::malformed("logit_bias", format!("expected an object, got {x}"))),
        };
        Ok(GenerateRequest {
            request_id: v.get("request_id").and_then(|x| x.as_str()).unwrap_or("t").to_string(),
            prompt_token_ids,
            max_tokens: opt_i64(v, "max_tokens")?,
            temperature: opt_f64(v, "temperature")?,
            top_p: opt_f64(v, "top_p")?,
            top_k: opt_i64(v, "top_k")?,
            min_p: opt_f64(v, "min_p")?,
            presence_penalty: opt_f64(v, "presence_penalty")?,
            frequency_penalty: opt_f64(v, "frequency_penalty")?,
            repetition_penalty: opt_f64(v, "repetition_penalty")?,
            seed: opt_i64(v, "seed")?,
            n: opt_i64(v, "n")?,
            stop: str_list(v, "stop")?.unwrap_or_default(),
            stop_token_ids: int_list(v, "stop_token_ids")?.unwrap_or_default(),
            ignore_eos: opt_bool(v, "ignore_eos")?.unwrap_or(false),
            min_tokens: opt_i64(v, "min_tokens")?,
            logprobs: opt_i64(v, "logprobs")?,
            prompt_logprobs: opt_i64(v, "prompt_logprobs")?,
            include_stop_str_in_output: opt_bool(v, "include_stop_str_in_output")?.unwrap_or(false),
            skip_special_tokens: opt_bool(v, "skip_special_tokens")?,
            spaces_between_special_tokens: opt_bool(v, "spaces_between_special_tokens")?,
            logit_bias,
            allowed_token_ids: int_list(v, "allowed_token_ids")?,
            structured_outputs,
            data_parallel_rank: opt_i64(v, "data_parallel_rank")?,
        })
    }
}
