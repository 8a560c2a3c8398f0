//! Steps that check a request before anything is built, in vLLM's frontend
//! order: the sampling draft as `SamplingParams`' constructor receives it
//! (a positive temperature below 1e-2 raised to it), its `__post_init__`
//! and `_verify_args` rules, the vocabulary (ids outside `0..vocab`), the
//! prompt (not empty, inside the vocabulary, leaving room in
//! `max_model_len` for one output token), the data-parallel rank, and
//! `max_tokens` (the room left in the context when absent).

use super::{err, err_class, GenerateRequest, TranslateError, TranslateErrorClass, TranslateOptions};
use crate::schema::ReleaseSchema;
use crate::typed::{EngineCoreRequest, SamplingParams, StopStrings};
use crate::validate;
use crate::value::Value;

/// vLLM's frontend raises a positive temperature below this to it.
const MAX_TEMP: f64 = 1e-2;
fn in_vocab(ids: &[i64], vocab: i64) -> Vec<i64> {
    ids.iter().copied().filter(|&t| t < 0 || t >= vocab).collect()
}

/// `v`, or `d` when equal to it (`-0.0` for a default `0.0` stays the
/// default, as an omit-defaults map compares).
fn or_default(v: f64, d: f64) -> f64 {
    if v == d {
        d
    } else {
        v
    }
}

/// Step: the request's sampling options as vLLM's `SamplingParams`
/// constructor receives them (a positive temperature below 1e-2 raised to
/// it; `max_tokens` as given, nil when absent), before any rule runs.
pub fn sampling_draft(req: &GenerateRequest) -> SamplingParams {
    let mut temperature = req.temperature.unwrap_or(1.0);
    if temperature > 0.0 {
        temperature = temperature.max(MAX_TEMP);
    }
    SamplingParams {
        n: req.n.map_or(1, i128::from),
        presence_penalty: or_default(req.presence_penalty.unwrap_or(0.0), 0.0),
        frequency_penalty: or_default(req.frequency_penalty.unwrap_or(0.0), 0.0),
        repetition_penalty: or_default(req.repetition_penalty.unwrap_or(1.0), 1.0),
        temperature: or_default(temperature, 1.0),
        top_p: or_default(req.top_p.unwrap_or(1.0), 1.0),
        top_k: req.top_k.map_or(0, i128::from),
        min_p: or_default(req.min_p.unwrap_or(0.0), 0.0),
        max_tokens: req.max_tokens.map(i128::from),
        min_tokens: req.min_tokens.map_or(0, i128::from),
        logprobs: req.logprobs.map(i128::from),
        prompt_logprobs: req.prompt_logprobs.map(i128::from),
        stop: Some(StopStrings::Many(req.stop.clone())),
        ..SamplingParams::default()
    }
}

/// The typed request as a value of `rel`.
pub(super) fn request_value(rel: &'static ReleaseSchema, r: &EngineCoreRequest) -> Result<Value, TranslateError> {
    r.to_value(rel).map_err(|e| TranslateError {
        class: TranslateErrorClass::InvalidValue,
        field: e.path.rsplit('.').next().unwrap_or_default().to_string(),
        message: e.detail,
    })
}

/// Step: the sampling rules of `rel` (vLLM's `__post_init__` /
/// `_verify_args` of that release, the table its decoder judges by:
/// [`validate::rules_for`] of its `SamplingParams` table, so 0.22 and 0.23
/// keep their looser rules) on the draft, by the decoder's own interpreter
/// ([`validate::first_violation`], on the typed struct); `only` limits
/// them to one field's own rules (no relations). A rule on a field `rel`'s
/// table lacks is not run, as on the engine.
pub fn check_sampling_rules(
    draft: &SamplingParams,
    rel: &'static ReleaseSchema,
    only: Option<&str>,
) -> Result<(), TranslateError> {
    let table = rel.sampling_params;
    let known = |name: &str| table.index_of(name).is_some();
    let release_rules = table.validate.and_then(validate::rules_for).unwrap_or_default();
    let rules: Vec<validate::Rule> = release_rules
        .iter()
        .copied()
        .filter(|r| only.is_none_or(|f| r.field == f && !r.check.is_relation()))
        .filter(|r| known(r.field) && r.check.other().is_none_or(known))
        .collect();
    validate::first_violation(draft, &rules).or_else(|v| err(&v.path(), format!("{} {}", v.path(), v.message)))
}

/// Step: `SamplingParams.verify` and the input processor's vocabulary
/// checks: logprob counts against `max_logprobs`, `logit_bias` keys, stop
/// token ids and allowed token ids inside the vocabulary.
pub fn check_vocabulary(
    req: &GenerateRequest,
    stop_token_ids: &[i64],
    vocab: i64,
    opts: &TranslateOptions,
) -> Result<(), TranslateError> {
    let max_logprobs = if opts.max_logprobs == -1 { vocab } else { opts.max_logprobs };
    for (name, v) in [("logprobs", req.logprobs), ("prompt_logprobs", req.prompt_logprobs)] {
        if let Some(x) = v.filter(|&x| x != 0) {
            let x = if x == -1 { vocab } else { x };
            if x > max_logprobs {
                return err(
                    name,
                    format!("requested {name} of {x}, which is greater than max allowed: {max_logprobs}"),
                );
            }
        }
    }
    if let Some(lb) = &req.logit_bias {
        let keys: Vec<i64> = lb.iter().map(|(k, _)| *k).collect();
        let bad = in_vocab(&keys, vocab);
        if !bad.is_empty() {
            return err(
                "logit_bias",
                format!("token_id(s) {bad:?} in logit_bias are out of vocabulary (size {vocab})"),
            );
        }
    }
    let bad = in_vocab(stop_token_ids, vocab);
    if !bad.is_empty() {
        return err(
            "stop_token_ids",
            format!("token_id(s) {bad:?} in stop_token_ids are out of vocabulary (size {vocab})"),
        );
    }
    if let Some(a) = &req.allowed_token_ids {
        if a.is_empty() {
            return err("allowed_token_ids", "allowed_token_ids is empty");
        }
        let bad = in_vocab(a, vocab);
        if !bad.is_empty() {
            return err("allowed_token_ids", format!("allowed_token_ids {bad:?} are out of vocabulary (size {vocab})"));
        }
    }
    Ok(())
}

/// Step: the prompt is non-empty, inside the vocabulary and leaves room for
/// one output token; returns its length.
pub fn check_prompt(req: &GenerateRequest, max_model_len: i64, vocab: i64) -> Result<usize, TranslateError> {
    let prompt_len = req.prompt_token_ids.len();
    if prompt_len == 0 {
        return err("prompt_token_ids", "the prompt cannot be empty");
    }
    if prompt_len as i64 >= max_model_len {
        return err_class(
            TranslateErrorClass::TooLong,
            "prompt_token_ids",
            format!(
                "the prompt (length {prompt_len}) leaves no room in max_model_len {max_model_len} for at least one output token"
            ),
        );
    }
    if let Some(bad) = req.prompt_token_ids.iter().find(|&&t| i64::from(t) >= vocab) {
        return err("prompt_token_ids", format!("token id {bad} is out of vocabulary"));
    }
    Ok(prompt_len)
}

/// Step: a `data_parallel_rank` names an engine: not negative, and below
/// [`TranslateOptions::data_parallel_size`] when the gateway knows it
/// (vLLM 0.32.0 `vllm/v1/engine/input_processor.py` refuses a rank outside
/// `[0, data_parallel_size)` with this message).
pub fn check_data_parallel_rank(req: &GenerateRequest, opts: &TranslateOptions) -> Result<(), TranslateError> {
    let Some(r) = req.data_parallel_rank else { return Ok(()) };
    let size = opts.data_parallel_size.map(i64::from);
    if r < 0 || size.is_some_and(|n| r >= n) {
        let range = size.map_or_else(|| "[0, ...)".to_string(), |n| format!("[0, {n})"));
        return err("data_parallel_rank", format!("data_parallel_rank {r} is out of range {range}."));
    }
    Ok(())
}

/// Step: the `max_tokens` to send: the request's, or, when it has none,
/// the room left in the context (`max_model_len - prompt_len`) capping the
/// model's default (`default_max_tokens`, [`GenerationDefaults::max_tokens`](super::super::GenerationDefaults::max_tokens)).
/// An explicit value over the room is refused or reported as a warning
/// ([`TranslateOptions::reject_max_tokens_over_room`]).
pub fn resolve_max_tokens(
    req: &GenerateRequest,
    max_model_len: i64,
    prompt_len: usize,
    default_max_tokens: Option<i64>,
    opts: &TranslateOptions,
    warnings: &mut Vec<String>,
) -> Result<i64, TranslateError> {
    let room = max_model_len - prompt_len as i64;
    let min_tokens = req.min_tokens.unwrap_or(0);
    match req.max_tokens {
        Some(m) => {
            if m > room {
                let msg = format!(
                    "max_tokens {m} exceeds the room left in the context ({room} = {max_model_len} - {prompt_len})"
                );
                if opts.reject_max_tokens_over_room {
                    return err_class(TranslateErrorClass::TooLong, "max_tokens", msg);
                }
                warnings.push(msg);
            }
            Ok(m)
        }
        None => {
            let max_tokens = default_max_tokens.map_or(room, |d| d.min(room));
            if min_tokens > max_tokens {
                return err("min_tokens", format!("min_tokens must be <= max_tokens={max_tokens}, got {min_tokens}"));
            }
            Ok(max_tokens)
        }
    }
}
