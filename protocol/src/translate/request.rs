//! Request translation: a gateway-level [`GenerateRequest`] (token-id
//! prompt plus the OpenAI completion/chat sampling options a gateway
//! accepts), what the engine said at handshake ([`EngineInfo`]) and the
//! tokenizer, into the `EngineCoreRequest`s to send ([`translate`]).
//!
//! The reference is vLLM's own frontend (`SamplingParams.__post_init__` and
//! `_verify_args`, `SamplingParams.verify`, `InputProcessor.process_inputs`,
//! `update_from_generation_config`, `ParentRequest` for `n > 1`), checked
//! by the `translation` goldens. Where a gateway must differ (the engine
//! never sees text it cannot check), [`TranslateOptions`] says how; see
//! docs/translation.md.

use std::collections::{BTreeSet, HashMap};

use super::stop::{StopParams, StopSemantics};
use super::tokenizer::GatewayTokenizer;
use crate::schema::ReleaseSchema;
use crate::typed::{engine_core_request, sampling_params, Constraint, StructuredOutputs};
use crate::value::{StructValue, Value};

/// The structured-output constraint fields of a request, as received (any
/// combination; [`translate`] enforces exactly one).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConstraintFields {
    /// A JSON schema: a JSON object, or text.
    pub json: Option<serde_json::Value>,
    pub regex: Option<String>,
    pub choice: Option<Vec<String>>,
    pub grammar: Option<String>,
    pub json_object: Option<bool>,
    pub structural_tag: Option<String>,
}

impl ConstraintFields {
    /// The names of the fields that are set, in vLLM's field order.
    pub fn set_fields(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.json.is_some() {
            v.push("json");
        }
        if self.regex.is_some() {
            v.push("regex");
        }
        if self.choice.is_some() {
            v.push("choice");
        }
        if self.grammar.is_some() {
            v.push("grammar");
        }
        if self.json_object.is_some() {
            v.push("json_object");
        }
        if self.structural_tag.is_some() {
            v.push("structural_tag");
        }
        v
    }
}

/// A gateway-level generate request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GenerateRequest {
    pub request_id: String,
    pub prompt_token_ids: Vec<u32>,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub seed: Option<i64>,
    pub n: Option<i64>,
    pub stop: Vec<String>,
    pub stop_token_ids: Vec<i64>,
    pub ignore_eos: bool,
    pub min_tokens: Option<i64>,
    pub logprobs: Option<i64>,
    pub prompt_logprobs: Option<i64>,
    pub include_stop_str_in_output: bool,
    /// `None` = true (vLLM's default).
    pub skip_special_tokens: Option<bool>,
    pub spaces_between_special_tokens: Option<bool>,
    /// `(token id, bias)` in request order.
    pub logit_bias: Option<Vec<(i64, f64)>>,
    pub allowed_token_ids: Option<Vec<i64>>,
    pub structured_outputs: Option<ConstraintFields>,
}

/// What the engine said at handshake.
#[derive(Debug, Clone)]
pub struct EngineInfo {
    /// `EngineCoreReadyResponse.max_model_len`.
    pub max_model_len: i64,
    /// The release whose schema applies (`vllm_version`).
    pub release: &'static ReleaseSchema,
}

/// How `json_object: false` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonObjectFalse {
    /// No constraint (OpenAI `response_format` semantics; SMG). Default.
    NoConstraint,
    /// An error, as vLLM's frontend raises.
    Reject,
}

/// Gateway policy knobs. [`TranslateOptions::default`] is the gateway
/// defaults of docs/translation.md ("Request translation"); [`TranslateOptions::vllm_parity`] is what vLLM's
/// own input processing does (the `translation` goldens).
#[derive(Debug, Clone)]
pub struct TranslateOptions {
    /// The server's structured-output backend, set as `_backend` on every
    /// constrained request (one backend per engine: 0.33 engines latch
    /// their first backend and fail requests naming another).
    pub structured_outputs_backend: String,
    /// vLLM's `max_logprobs` (default 20; -1 = vocabulary size).
    pub max_logprobs: i64,
    /// Send stop strings that are exactly one visible token as stop token
    /// ids too (the detector still checks them as text).
    pub single_token_stops_to_ids: bool,
    /// An explicit `max_tokens` above `max_model_len - prompt_len`: `true`
    /// rejects it (vLLM's OpenAI server does), `false` sends it and reports
    /// a warning (vLLM's input processor passes it through).
    pub reject_max_tokens_over_room: bool,
    pub json_object_false: JsonObjectFalse,
    /// The request id of child `i` of an `n > 1` request.
    pub child_id: fn(&str, usize) -> String,
    pub stop_semantics: StopSemantics,
    pub arrival_time: f64,
}

fn smg_child_id(rid: &str, i: usize) -> String {
    format!("{rid}-{i}")
}

fn vllm_child_id(rid: &str, i: usize) -> String {
    format!("{i}_{rid}")
}

impl Default for TranslateOptions {
    fn default() -> Self {
        TranslateOptions {
            structured_outputs_backend: "xgrammar".into(),
            max_logprobs: 20,
            single_token_stops_to_ids: true,
            reject_max_tokens_over_room: false,
            json_object_false: JsonObjectFalse::NoConstraint,
            child_id: smg_child_id,
            stop_semantics: StopSemantics::Vllm,
            arrival_time: 0.0,
        }
    }
}

impl TranslateOptions {
    /// Exactly vLLM's input processing (no single-token stop ids,
    /// json_object=false rejected, vLLM's child ids).
    pub fn vllm_parity() -> Self {
        TranslateOptions {
            single_token_stops_to_ids: false,
            json_object_false: JsonObjectFalse::Reject,
            child_id: vllm_child_id,
            ..Default::default()
        }
    }
}

/// The kind of a translation error, in a vocabulary small enough to
/// compare with what vLLM's frontend raises for the same request (the
/// `translation` goldens record vLLM's message; the conformance checker
/// classifies it into the same words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TranslateErrorClass {
    /// A parameter's value is out of range, out of vocabulary, empty or
    /// otherwise refused.
    InvalidValue,
    /// Parameters that are each valid but cannot be combined (two
    /// structured-output constraints).
    Conflict,
    /// The prompt, or prompt plus output, does not fit `max_model_len`.
    TooLong,
    /// The engine or this gateway does not support the parameter.
    Unsupported,
    /// The request itself is not well formed (a field of the wrong JSON
    /// type): refused before any rule of the engine is applied.
    Malformed,
}

impl TranslateErrorClass {
    /// The class's name in reports: `invalid_value`, `conflict`,
    /// `too_long`, `unsupported`, `malformed`.
    pub fn as_str(self) -> &'static str {
        match self {
            TranslateErrorClass::InvalidValue => "invalid_value",
            TranslateErrorClass::Conflict => "conflict",
            TranslateErrorClass::TooLong => "too_long",
            TranslateErrorClass::Unsupported => "unsupported",
            TranslateErrorClass::Malformed => "malformed",
        }
    }
}

impl std::fmt::Display for TranslateErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request was not translated: the class, the offending request
/// field(s) (`field`, comma-separated when several; structured-output
/// fields as `structured_outputs.<name>`) and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslateError {
    pub class: TranslateErrorClass,
    pub field: String,
    pub message: String,
}

impl TranslateError {
    /// The parameters the error is about.
    pub fn params(&self) -> Vec<&str> {
        self.field.split(',').filter(|p| !p.is_empty()).collect()
    }

    fn malformed(field: &str, message: impl Into<String>) -> Self {
        TranslateError { class: TranslateErrorClass::Malformed, field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for TranslateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} ({})", self.field, self.message, self.class)
    }
}

impl std::error::Error for TranslateError {}

fn err<T>(field: &str, message: impl Into<String>) -> Result<T, TranslateError> {
    Err(TranslateError { class: TranslateErrorClass::InvalidValue, field: field.into(), message: message.into() })
}

fn err_class<T>(class: TranslateErrorClass, field: &str, message: impl Into<String>) -> Result<T, TranslateError> {
    Err(TranslateError { class, field: field.into(), message: message.into() })
}

/// `structured_outputs.<name>` for each name, comma-separated.
fn so_fields(names: &[&str]) -> String {
    names.iter().map(|n| format!("structured_outputs.{n}")).collect::<Vec<_>>().join(",")
}

/// One engine request of a translation.
#[derive(Debug, Clone)]
pub struct EngineRequest {
    pub request_id: String,
    /// `EngineCoreRequest` of the release (a `Value::Struct`).
    pub request: Value,
    /// Index among the `n` children.
    pub index: usize,
}

impl EngineRequest {
    pub fn sampling_params(&self) -> &StructValue {
        match &self.request {
            Value::Struct(s) => s.struct_field("sampling_params").expect("sampling_params is set"),
            _ => unreachable!("EngineRequest holds a struct"),
        }
    }
}

/// A translated request.
#[derive(Debug, Clone)]
pub struct Translated {
    pub requests: Vec<EngineRequest>,
    /// What the gateway's stop detector needs for every child.
    pub stop: StopParams,
    /// Stop strings sent to the engine as token ids (id -> string).
    pub stop_string_token_ids: HashMap<u32, String>,
    /// Stop strings left to the gateway's detector only.
    pub detector_only_stops: Vec<String>,
    /// Reported, not fatal (e.g. max_tokens over the room).
    pub warnings: Vec<String>,
    /// The prompt length and the room left in the context.
    pub prompt_len: usize,
    pub max_tokens: i64,
}

const SAMPLING_EPS: f64 = 1e-5;
const MAX_TEMP: f64 = 1e-2;
const MAX_JSON_NESTING: usize = 64;
const STRUCTURAL_TAG_WRAPPER_NESTING: usize = 16;

fn json_depth(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => 1 + m.values().map(json_depth).max().unwrap_or(0),
        serde_json::Value::Array(xs) => 1 + xs.iter().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

fn nesting_too_deep(spec: &serde_json::Value, limit: usize) -> bool {
    let v = match spec {
        serde_json::Value::String(s) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(v) => v,
            Err(_) => return false,
        },
        other => other.clone(),
    };
    // vLLM: too deep when containers exist at level limit + 1
    json_depth(&v) > limit
}

fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                Value::UInt(u)
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(xs) => Value::Array(xs.iter().map(json_to_value).collect()),
        serde_json::Value::Object(m) => {
            Value::Map(m.iter().map(|(k, v)| (Value::Str(k.clone()), json_to_value(v))).collect())
        }
    }
}

fn validate_constraint(
    c: &ConstraintFields,
    opts: &TranslateOptions,
) -> Result<Option<StructuredOutputs>, TranslateError> {
    let set = c.set_fields();
    if set.len() > 1 {
        return err_class(
            TranslateErrorClass::Conflict,
            &so_fields(&set),
            format!("exactly one structured-output constraint is allowed, got {}", set.join(", ")),
        );
    }
    if set.is_empty() {
        return err(
            "structured_outputs",
            "a structured-output constraint is required when structured_outputs is given",
        );
    }
    if let Some(choice) = &c.choice {
        if choice.is_empty() {
            return err("structured_outputs.choice", "choice cannot be an empty list");
        }
    }
    if let Some(g) = &c.grammar {
        if g.trim().is_empty() {
            return err("structured_outputs.grammar", "grammar cannot be an empty string");
        }
    }
    if let Some(serde_json::Value::String(s)) = &c.json {
        if s.trim().is_empty() {
            return err("structured_outputs.json", "json cannot be an empty string");
        }
    }
    if let Some(j) = &c.json {
        if nesting_too_deep(j, MAX_JSON_NESTING) {
            return err("structured_outputs.json", "the JSON schema is nested too deeply");
        }
    }
    if let Some(t) = &c.structural_tag {
        if nesting_too_deep(&serde_json::Value::String(t.clone()), MAX_JSON_NESTING + STRUCTURAL_TAG_WRAPPER_NESTING) {
            return err("structured_outputs.structural_tag", "the structural tag is nested too deeply");
        }
    }
    if c.json_object == Some(false) {
        return match opts.json_object_false {
            JsonObjectFalse::NoConstraint => Ok(None),
            JsonObjectFalse::Reject => err(
                "structured_outputs.json_object",
                "json_object must be true if set; omit structured_outputs to disable structured outputs",
            ),
        };
    }
    if let Some(r) = &c.regex {
        if r.contains('\0') {
            return err("structured_outputs.regex", "regex must not contain a NUL character");
        }
    }
    if let Some(t) = &c.structural_tag {
        if t.trim().is_empty() {
            return err("structured_outputs.structural_tag", "structural_tag cannot be an empty string");
        }
    }
    let constraint = if let Some(j) = &c.json {
        Constraint::Json(json_to_value(j))
    } else if let Some(r) = &c.regex {
        Constraint::Regex(r.clone())
    } else if let Some(ch) = &c.choice {
        Constraint::Choice(ch.clone())
    } else if let Some(g) = &c.grammar {
        Constraint::Grammar(g.clone())
    } else if let Some(b) = c.json_object {
        Constraint::JsonObject(b)
    } else if let Some(t) = &c.structural_tag {
        Constraint::StructuralTag(t.clone())
    } else {
        unreachable!("one field is set")
    };
    // vLLM's xgrammar validation rewrites a choice list into an EBNF
    // grammar, which is what the engine then receives.
    let constraint = match constraint {
        Constraint::Choice(c) if opts.structured_outputs_backend.starts_with("xgrammar") => {
            Constraint::Grammar(choice_as_grammar(&c))
        }
        other => other,
    };
    Ok(Some(StructuredOutputs::new(constraint).with_backend(opts.structured_outputs_backend.clone())))
}

/// `root ::= "a" | "b"` with EBNF string escapes (`\\`, `\"`, `\n`,
/// `\r`, `\t`, other C0 controls and DEL as `\uXXXX`).
pub fn choice_as_grammar(choices: &[String]) -> String {
    let esc = |s: &str| {
        let mut o = String::with_capacity(s.len());
        for ch in s.chars() {
            match ch {
                '\\' => o.push_str("\\\\"),
                '"' => o.push_str("\\\""),
                '\n' => o.push_str("\\n"),
                '\r' => o.push_str("\\r"),
                '\t' => o.push_str("\\t"),
                c if (c as u32) < 0x20 || c as u32 == 0x7f => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o
    };
    let alts: Vec<String> = choices.iter().map(|c| format!("\"{}\"", esc(c))).collect();
    format!("root ::= {}", alts.join(" | "))
}

fn in_vocab(ids: &[i64], vocab: i64) -> Vec<i64> {
    ids.iter().copied().filter(|&t| t < 0 || t >= vocab).collect()
}

/// Translates a request. Errors name the offending field; nothing is sent
/// for a request that fails.
pub fn translate(
    req: &GenerateRequest,
    engine: &EngineInfo,
    tok: &GatewayTokenizer,
    opts: &TranslateOptions,
) -> Result<Translated, TranslateError> {
    let vocab = tok.vocab_size() as i64;
    // --- SamplingParams construction (__post_init__ / _verify_args)
    let n = req.n.unwrap_or(1);
    if n < 1 {
        return err("n", format!("n must be at least 1, got {n}"));
    }
    let presence = req.presence_penalty.unwrap_or(0.0);
    let frequency = req.frequency_penalty.unwrap_or(0.0);
    let repetition = req.repetition_penalty.unwrap_or(1.0);
    let mut temperature = req.temperature.unwrap_or(1.0);
    let mut top_p = req.top_p.unwrap_or(1.0);
    let mut top_k = req.top_k.unwrap_or(0);
    let mut min_p = req.min_p.unwrap_or(0.0);
    let min_tokens = req.min_tokens.unwrap_or(0);
    if 0.0 < temperature && temperature < MAX_TEMP {
        temperature = MAX_TEMP;
    }
    let seed = req.seed.filter(|&s| s != -1);
    // constraint construction comes first in vLLM (StructuredOutputsParams)
    let structured = match &req.structured_outputs {
        Some(c) => validate_constraint_shape(c)?,
        None => None,
    };
    if !(-2.0..=2.0).contains(&presence) {
        return err("presence_penalty", format!("presence_penalty must be in [-2, 2], got {presence}"));
    }
    if !(-2.0..=2.0).contains(&frequency) {
        return err("frequency_penalty", format!("frequency_penalty must be in [-2, 2], got {frequency}"));
    }
    if !repetition.is_finite() || repetition <= 0.0 {
        return err("repetition_penalty", format!("repetition_penalty must be finite and > 0, got {repetition}"));
    }
    if !temperature.is_finite() || !(0.0..=2.0).contains(&temperature) {
        return err("temperature", format!("temperature must be in [0, 2], got {temperature}"));
    }
    if !(top_p > 0.0 && top_p <= 1.0) {
        return err("top_p", format!("top_p must be in (0, 1], got {top_p}"));
    }
    if top_k < -1 {
        return err("top_k", format!("top_k must be 0 (disable), -1 or at least 1, got {top_k}"));
    }
    if !(0.0..=1.0).contains(&min_p) {
        return err("min_p", format!("min_p must be in [0, 1], got {min_p}"));
    }
    if let Some(m) = req.max_tokens {
        if m < 1 {
            return err("max_tokens", format!("max_tokens must be at least 1, got {m}"));
        }
    }
    if min_tokens < 0 {
        return err("min_tokens", format!("min_tokens must be >= 0, got {min_tokens}"));
    }
    if let Some(m) = req.max_tokens {
        if min_tokens > m {
            return err("min_tokens", format!("min_tokens must be <= max_tokens={m}, got {min_tokens}"));
        }
    }
    for (name, v) in [("logprobs", req.logprobs), ("prompt_logprobs", req.prompt_logprobs)] {
        if let Some(x) = v {
            if x < -1 {
                return err(name, format!("{name} must be non-negative or -1, got {x}"));
            }
        }
    }
    if req.stop.iter().any(String::is_empty) {
        return err("stop", "stop cannot contain an empty string");
    }
    if temperature < SAMPLING_EPS {
        top_p = 1.0;
        top_k = 0;
        min_p = 0.0;
        if n > 1 {
            return err("n", format!("n must be 1 when using greedy sampling, got {n}"));
        }
    }
    let mut stop_token_ids: Vec<i64> = Vec::new();
    for &t in &req.stop_token_ids {
        if !stop_token_ids.contains(&t) {
            stop_token_ids.push(t);
        }
    }
    // --- verify(): logprobs, logit_bias, stop ids, allowed ids, constraint
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
    let bad = in_vocab(&stop_token_ids, vocab);
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
    let structured = match (&req.structured_outputs, structured) {
        (Some(c), Some(())) => validate_constraint(c, opts)?,
        _ => None,
    };
    // --- prompt
    let prompt_len = req.prompt_token_ids.len();
    let mml = engine.max_model_len;
    if prompt_len == 0 {
        return err("prompt_token_ids", "the prompt cannot be empty");
    }
    if prompt_len as i64 >= mml {
        return err_class(
            TranslateErrorClass::TooLong,
            "prompt_token_ids",
            format!(
                "the prompt (length {prompt_len}) leaves no room in max_model_len {mml} for at least one output token"
            ),
        );
    }
    if let Some(bad) = req.prompt_token_ids.iter().find(|&&t| i64::from(t) >= vocab) {
        return err("prompt_token_ids", format!("token id {bad} is out of vocabulary"));
    }
    let room = mml - prompt_len as i64;
    let mut warnings = Vec::new();
    let max_tokens = match req.max_tokens {
        Some(m) => {
            if m > room {
                let msg =
                    format!("max_tokens {m} exceeds the room left in the context ({room} = {mml} - {prompt_len})");
                if opts.reject_max_tokens_over_room {
                    return err_class(TranslateErrorClass::TooLong, "max_tokens", msg);
                }
                warnings.push(msg);
            }
            m
        }
        None => {
            if min_tokens > room {
                return err("min_tokens", format!("min_tokens must be <= max_tokens={room}, got {min_tokens}"));
            }
            room
        }
    };
    // --- EOS (update_from_generation_config)
    let eos = tok.eos_token_id.map(i64::from);
    let mut all_stop: BTreeSet<i64> = stop_token_ids.iter().copied().collect();
    if let Some(e) = eos {
        all_stop.insert(e);
    }
    let mut extra: BTreeSet<i64> = tok.generation_eos_token_ids.iter().map(|&x| i64::from(x)).collect();
    if let Some(e) = eos {
        extra.remove(&e);
    }
    if !extra.is_empty() {
        all_stop.extend(extra.iter().copied());
        if !req.ignore_eos {
            // vLLM: list(set(extra) | set(stop_token_ids)); order is not
            // meaningful to the engine (membership only): ascending here.
            let mut s: BTreeSet<i64> = extra.clone();
            s.extend(stop_token_ids.iter().copied());
            stop_token_ids = s.into_iter().collect();
        }
    }
    // --- single-token stop strings
    let skip_special = req.skip_special_tokens.unwrap_or(true);
    let mut stop_string_token_ids = HashMap::new();
    let mut detector_only = Vec::new();
    for s in &req.stop {
        let ids = tok.encode(s);
        let visible = ids.len() == 1 && tok.decode(&ids, skip_special) == *s;
        if opts.single_token_stops_to_ids && min_tokens == 0 && visible {
            stop_string_token_ids.insert(ids[0], s.clone());
            let id = i64::from(ids[0]);
            if !stop_token_ids.contains(&id) {
                stop_token_ids.push(id);
            }
            all_stop.insert(id);
        } else {
            detector_only.push(s.clone());
        }
    }
    // --- build the wire struct
    let rel = engine.release;
    let mut sp = sampling_params(rel);
    let set_f = |sp: &mut StructValue, k: &str, v: f64, d: f64| {
        if v != d {
            sp.set(k, Value::Float(v));
        }
    };
    set_f(&mut sp, "presence_penalty", presence, 0.0);
    set_f(&mut sp, "frequency_penalty", frequency, 0.0);
    set_f(&mut sp, "repetition_penalty", repetition, 1.0);
    set_f(&mut sp, "temperature", temperature, 1.0);
    set_f(&mut sp, "top_p", top_p, 1.0);
    set_f(&mut sp, "min_p", min_p, 0.0);
    if top_k != 0 {
        sp.set("top_k", Value::Int(top_k));
    }
    sp.set("max_tokens", Value::Int(max_tokens));
    if min_tokens != 0 {
        sp.set("min_tokens", Value::Int(min_tokens));
    }
    // vLLM's input processor sends the stop strings on the wire too (the
    // engine does not read them; the frontend's detector does).
    sp.set("stop", Value::Array(req.stop.iter().cloned().map(Value::Str).collect()));
    sp.set("stop_token_ids", Value::IntArray(stop_token_ids.clone()));
    if req.ignore_eos {
        sp.set("ignore_eos", Value::Bool(true));
    }
    if let Some(l) = req.logprobs {
        sp.set("logprobs", Value::Int(l));
    }
    if let Some(l) = req.prompt_logprobs {
        sp.set("prompt_logprobs", Value::Int(l));
    }
    sp.set("skip_reading_prefix_cache", Value::Bool(req.prompt_logprobs.is_some()));
    if !skip_special {
        sp.set("skip_special_tokens", Value::Bool(false));
    }
    if req.include_stop_str_in_output {
        sp.set("include_stop_str_in_output", Value::Bool(true));
    }
    sp.set("output_kind", Value::Int(1));
    // vLLM's input processor resolves the unset watermarking option to
    // false before the request goes out (translation goldens).
    sp.set("watermarking", Value::Bool(false));
    // SamplingParams.__post_init__: `bad_words` None becomes [], and stop
    // strings that are not part of the output hold back as many characters
    // as the longest one minus one.
    sp.set("bad_words", Value::Array(Vec::new()));
    if !req.include_stop_str_in_output {
        if let Some(longest) = req.stop.iter().map(|s| s.chars().count()).max() {
            if longest > 1 {
                sp.set("output_text_buffer_length", Value::Int(longest as i64 - 1));
            }
        }
    }
    if !req.ignore_eos {
        if let Some(e) = eos {
            sp.set("_eos_token_id", Value::Int(e));
        }
    }
    sp.set("_all_stop_token_ids", Value::Array(all_stop.iter().map(|&x| Value::Int(x)).collect()));
    if let Some(so) = &structured {
        sp.set("structured_outputs", Value::Struct(so.to_struct(rel)));
    }
    if let Some(lb) = &req.logit_bias {
        if !lb.is_empty() {
            sp.set("logit_bias", Value::Map(lb.iter().map(|(k, v)| (Value::Int(*k), Value::Float(*v))).collect()));
        }
    }
    if let Some(a) = &req.allowed_token_ids {
        sp.set("allowed_token_ids", Value::IntArray(a.clone()));
    }
    if req.logprobs.is_some() || req.prompt_logprobs.is_some() {
        // nothing else: flat_logprobs stays the frontend's own choice
    }
    let prompt: Vec<i64> = req.prompt_token_ids.iter().map(|&t| i64::from(t)).collect();
    let n_us = usize::try_from(n).unwrap_or(usize::MAX);
    let mut requests = Vec::with_capacity(n_us.min(1024));
    if n == 1 {
        if let Some(s) = seed {
            sp.set("seed", Value::Int(s));
        }
        requests.push(EngineRequest {
            request_id: req.request_id.clone(),
            request: engine_core_request(rel, req.request_id.clone(), prompt, sp, opts.arrival_time),
            index: 0,
        });
    } else {
        for i in 0..n_us {
            let mut child = sp.clone();
            if let Some(s) = seed {
                // Python ints do not wrap: seed + i up to u64 on the wire.
                let v = i128::from(s) + i as i128;
                let v = if let Ok(x) = i64::try_from(v) {
                    Value::Int(x)
                } else if let Ok(x) = u64::try_from(v) {
                    Value::UInt(x)
                } else {
                    return err("seed", format!("seed {s} + {i} does not fit the wire's 64-bit integers"));
                };
                child.set("seed", v);
            }
            let rid = (opts.child_id)(&req.request_id, i);
            requests.push(EngineRequest {
                request_id: rid.clone(),
                request: engine_core_request(rel, rid, prompt.clone(), child, opts.arrival_time),
                index: i,
            });
        }
    }
    let stop = StopParams {
        stop: req.stop.clone(),
        include_stop_str_in_output: req.include_stop_str_in_output,
        min_tokens: usize::try_from(min_tokens).unwrap_or(0),
        skip_special_tokens: skip_special,
        spaces_between_special_tokens: req.spaces_between_special_tokens.unwrap_or(true),
        stop_string_token_ids: stop_string_token_ids.clone(),
        semantics: opts.stop_semantics,
    };
    Ok(Translated {
        requests,
        stop,
        stop_string_token_ids,
        detector_only_stops: detector_only,
        warnings,
        prompt_len,
        max_tokens,
    })
}

/// The construction-time check of `StructuredOutputsParams`: exactly one
/// field set (`json_object: false` counts as set).
fn validate_constraint_shape(c: &ConstraintFields) -> Result<Option<()>, TranslateError> {
    let set = c.set_fields();
    match set.len() {
        1 => Ok(Some(())),
        0 => err("structured_outputs", "a structured-output constraint is required when structured_outputs is given"),
        _ => err_class(
            TranslateErrorClass::Conflict,
            &so_fields(&set),
            format!("exactly one structured-output constraint is allowed, got {}", set.join(", ")),
        ),
    }
}

// ===== JSON form of the gateway request (goldens, gateways' HTTP layer)

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
        })
    }
}
