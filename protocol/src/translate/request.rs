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
#![warn(missing_docs)]

use std::collections::{BTreeSet, HashMap};

use super::generation::GenerationDefaults;
use super::stop::{StopParams, StopSemantics};
use super::tokenizer::GatewayTokenizer;
use crate::schema::ReleaseSchema;
use crate::typed::{
    Constraint, EngineCoreRequest, IntList, JsonSchema, RequestOutputKind, SamplingParams, StopIds, StopStrings,
    StructuredOutputsParams, TokenIds, WIRE_INT_MAX, WIRE_INT_MIN,
};
use crate::validate::{self, ConstraintCount};
use crate::value::{StructValue, Value};

/// The structured-output constraint fields of a request, as received (any
/// combination; [`translate`] enforces exactly one).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConstraintFields {
    /// A JSON schema: a JSON object, or text.
    pub json: Option<serde_json::Value>,
    /// A regular expression.
    pub regex: Option<String>,
    /// One of these strings.
    pub choice: Option<Vec<String>>,
    /// A grammar (EBNF / Lark).
    pub grammar: Option<String>,
    /// Any JSON object (`false` is treated per [`JsonObjectFalse`]).
    pub json_object: Option<bool>,
    /// A structural tag (JSON text).
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
/// Field names and meanings are vLLM's `SamplingParams`' (an absent option
/// is vLLM's default).
pub struct GenerateRequest {
    /// The client's request id (children of `n > 1` derive theirs from it).
    pub request_id: String,
    /// The prompt, as token ids.
    pub prompt_token_ids: Vec<u32>,
    /// Output tokens at most; absent = the room left in the context.
    pub max_tokens: Option<i64>,
    /// Sampling temperature (0 = greedy).
    pub temperature: Option<f64>,
    /// Nucleus sampling mass.
    pub top_p: Option<f64>,
    /// Top-k sampling (0 or -1 = off).
    pub top_k: Option<i64>,
    /// Minimum probability relative to the top token.
    pub min_p: Option<f64>,
    /// Presence penalty.
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    pub frequency_penalty: Option<f64>,
    /// Repetition penalty.
    pub repetition_penalty: Option<f64>,
    /// Sampling seed (-1 = none).
    pub seed: Option<i64>,
    /// Completions to generate (fanned out as `n` engine requests).
    pub n: Option<i64>,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Stop token ids.
    pub stop_token_ids: Vec<i64>,
    /// Keep generating past EOS.
    pub ignore_eos: bool,
    /// Output tokens at least (stops and EOS ignored before).
    pub min_tokens: Option<i64>,
    /// Top logprobs per output token (-1 = whole vocabulary).
    pub logprobs: Option<i64>,
    /// Top logprobs per prompt token (-1 = whole vocabulary).
    pub prompt_logprobs: Option<i64>,
    /// Keep the matched stop string in the output.
    pub include_stop_str_in_output: bool,
    /// `None` = true (vLLM's default).
    pub skip_special_tokens: Option<bool>,
    /// `None` = true (vLLM's default).
    pub spaces_between_special_tokens: Option<bool>,
    /// `(token id, bias)` in request order.
    pub logit_bias: Option<Vec<(i64, f64)>>,
    /// Restrict sampling to these token ids.
    pub allowed_token_ids: Option<Vec<i64>>,
    /// Structured-output constraint fields, as received.
    pub structured_outputs: Option<ConstraintFields>,
    /// The data-parallel rank the request is pinned to
    /// (`EngineCoreRequest.data_parallel_rank`; vLLM's frontend takes it
    /// from the `X-data-parallel-rank` header). The gateway routes the
    /// request to the engine of that identity; the engine itself does not
    /// read it.
    pub data_parallel_rank: Option<i64>,
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
#[non_exhaustive]
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
    /// How `json_object: false` is treated.
    pub json_object_false: JsonObjectFalse,
    /// The request id of child `i` of an `n > 1` request.
    pub child_id: fn(&str, usize) -> String,
    /// Which frontend's stop-string semantics the detector follows.
    pub stop_semantics: StopSemantics,
    /// `arrival_time` written on every engine request.
    pub arrival_time: f64,
    /// Take the options a request leaves out from the model's generation
    /// config ([`GenerationDefaults`]), as vLLM's server does with
    /// `--generation-config auto` (its default); `false` is
    /// `--generation-config vllm` (vLLM's neutral defaults).
    pub generation_config_defaults: bool,
    /// The engines behind the gateway (the data-parallel size): a
    /// `data_parallel_rank` at or past it is refused, as vLLM's input
    /// processor refuses it. `None`: only a negative rank is refused.
    pub data_parallel_size: Option<u32>,
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
            generation_config_defaults: true,
            data_parallel_size: None,
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
#[non_exhaustive]
pub struct TranslateError {
    /// The kind of refusal.
    pub class: TranslateErrorClass,
    /// The request field(s) at fault, comma-separated.
    pub field: String,
    /// What was wrong.
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

/// One engine request of a translation: the typed request and its value
/// form for the release (what `encode_message` and the canonical view take).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineRequest {
    /// The engine request id (a child id for `n > 1`).
    pub request_id: String,
    /// The request as the typed API's structs.
    pub typed: EngineCoreRequest,
    /// The same request as a value of the release (a `Value::Struct`),
    /// derived from `typed` when translated. One fact only the value holds:
    /// a fan-out seed past `i64::MAX` (`seed + i`; Python ints do not wrap)
    /// is a `Value::UInt` here while `typed` holds no seed.
    pub request: Value,
    /// Index among the `n` children.
    pub index: usize,
}

impl EngineRequest {
    /// The request's `SamplingParams` (value form).
    pub fn sampling_params(&self) -> &StructValue {
        match &self.request {
            Value::Struct(s) => s.struct_field("sampling_params").expect("sampling_params is set"),
            _ => unreachable!("EngineRequest holds a struct"),
        }
    }

    /// The frames to send (`[request-type byte, payload, aux...]`) for
    /// `release`, with the decoder's rules checked.
    pub fn encode(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, crate::Error> {
        crate::encode_message(release, crate::MessageKind::EngineCoreRequest, &self.request)
    }
}

/// A translated request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Translated {
    /// One engine request per child (`n` of them).
    pub requests: Vec<EngineRequest>,
    /// What the gateway's stop detector needs for every child.
    pub stop: StopParams,
    /// Stop strings sent to the engine as token ids (id -> string).
    pub stop_string_token_ids: HashMap<u32, String>,
    /// Stop strings left to the gateway's detector only.
    pub detector_only_stops: Vec<String>,
    /// Reported, not fatal (e.g. max_tokens over the room).
    pub warnings: Vec<String>,
    /// The prompt length.
    pub prompt_len: usize,
    /// The `max_tokens` sent (the room left in the context when the
    /// request had none).
    pub max_tokens: i64,
}

/// vLLM's frontend raises a positive temperature below this to it.
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

/// Step: `StructuredOutputsParams`' construction-time rule, exactly one
/// constraint field set (`json_object: false` counts as set), as
/// [`validate::exactly_one_constraint`] states it for the decoder.
pub fn check_constraint_shape(c: &ConstraintFields) -> Result<(), TranslateError> {
    match validate::exactly_one_constraint(&c.set_fields()) {
        Ok(_) => Ok(()),
        Err(ConstraintCount::Many(set)) => err_class(
            TranslateErrorClass::Conflict,
            &so_fields(&set),
            format!("exactly one structured-output constraint is allowed, got {}", set.join(", ")),
        ),
        Err(_) => {
            err("structured_outputs", "a structured-output constraint is required when structured_outputs is given")
        }
    }
}

/// Step: the structured-output backend's checks on the one constraint
/// (after [`check_constraint_shape`]) and the constraint the engine
/// receives (`None` for `json_object: false` under
/// [`JsonObjectFalse::NoConstraint`]).
pub fn check_constraints(
    c: &ConstraintFields,
    opts: &TranslateOptions,
) -> Result<Option<StructuredOutputsParams>, TranslateError> {
    check_constraint_shape(c)?;
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
    if let Some(j) = &c.json {
        match j {
            serde_json::Value::String(s) if s.trim().is_empty() => {
                return err("structured_outputs.json", "json cannot be an empty string");
            }
            serde_json::Value::String(_) | serde_json::Value::Object(_) => {}
            other => {
                return Err(TranslateError::malformed(
                    "structured_outputs.json",
                    format!("expected a JSON schema as text or an object, got {other}"),
                ))
            }
        }
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
        // Text or an object: checked above.
        Constraint::Json(JsonSchema::from_json(j).ok_or_else(|| {
            TranslateError::malformed("structured_outputs.json", "expected a JSON schema as text or an object")
        })?)
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
        unreachable!("check_constraint_shape: one field is set")
    };
    // vLLM's xgrammar validation rewrites a choice list into an EBNF
    // grammar, which is what the engine then receives.
    let constraint = match constraint {
        Constraint::Choice(c) if opts.structured_outputs_backend.starts_with("xgrammar") => {
            Constraint::Grammar(choice_as_grammar(&c))
        }
        other => other,
    };
    Ok(Some(StructuredOutputsParams::new(constraint, opts.structured_outputs_backend.clone())))
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
    if 0.0 < temperature && temperature < MAX_TEMP {
        temperature = MAX_TEMP;
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
fn request_value(rel: &'static ReleaseSchema, r: &EngineCoreRequest) -> Result<Value, TranslateError> {
    r.to_value(rel).map_err(|e| TranslateError {
        class: TranslateErrorClass::InvalidValue,
        field: e.path.rsplit('.').next().unwrap_or_default().to_string(),
        message: e.detail,
    })
}

/// Step: the rules of [`validate::SAMPLING_PARAMS_RULES`] (vLLM's
/// `__post_init__` / `_verify_args`, the table the decoder judges by) on
/// the draft, by the decoder's own interpreter
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
    let rules: Vec<validate::Rule> = validate::SAMPLING_PARAMS_RULES
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
/// model's default (`default_max_tokens`, [`GenerationDefaults::max_tokens`]).
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

/// The stop facts of a translation ([`eos_and_stops`]).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Stops {
    /// `stop_token_ids` as sent.
    pub stop_token_ids: Vec<i64>,
    /// `_all_stop_token_ids`, ascending.
    pub all_stop_token_ids: BTreeSet<i64>,
    /// `_eos_token_id` as sent (nil with `ignore_eos`).
    pub eos_token_id: Option<i64>,
    /// Stop strings sent as token ids too (id -> string).
    pub stop_string_token_ids: HashMap<u32, String>,
    /// Stop strings left to the gateway's detector only.
    pub detector_only: Vec<String>,
}

/// Step: EOS and stops (`update_from_generation_config`): the tokenizer's
/// EOS and the generation config's extra EOS ids join the stop token ids,
/// and stop strings that are exactly one visible token are sent as ids too
/// when [`TranslateOptions::single_token_stops_to_ids`] allows.
pub fn eos_and_stops(req: &GenerateRequest, tok: &GatewayTokenizer, opts: &TranslateOptions) -> Stops {
    let StopIds { mut stop_token_ids, all_stop_token_ids: mut all_stop, eos_token_id } =
        tok.eos(req.ignore_eos).stop_ids(&req.stop_token_ids);
    let skip_special = req.skip_special_tokens.unwrap_or(true);
    let min_tokens = req.min_tokens.unwrap_or(0);
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
    Stops { stop_token_ids, all_stop_token_ids: all_stop, eos_token_id, stop_string_token_ids, detector_only }
}

/// Step: the `SamplingParams` every child shares, from the checked draft,
/// the resolved `max_tokens`, the stops and the constraint (vLLM's
/// `__post_init__` derivations and its input processor's resolutions
/// included; the seed is set per child by [`fan_out`]).
pub fn build_sampling_params(
    req: &GenerateRequest,
    draft: &SamplingParams,
    max_tokens: i64,
    stops: &Stops,
    structured: Option<&StructuredOutputsParams>,
) -> Result<SamplingParams, TranslateError> {
    let greedy = draft.temperature < validate::SAMPLING_EPS;
    let structured_outputs = structured.cloned();
    // Stop strings that are not part of the output hold back as many
    // characters as the longest one minus one (`__post_init__`).
    let output_text_buffer_length = match req.stop.iter().map(|s| s.chars().count()).max() {
        Some(longest) if longest > 1 && !req.include_stop_str_in_output => longest as i64 - 1,
        _ => 0,
    };
    Ok(SamplingParams {
        n: 1,
        // Greedy sampling resets the sampling filters (`__post_init__`).
        top_p: if greedy { 1.0 } else { draft.top_p },
        top_k: if greedy { 0 } else { draft.top_k },
        min_p: if greedy { 0.0 } else { draft.min_p },
        seed: None,
        max_tokens: Some(i128::from(max_tokens)),
        // vLLM's input processor sends the stop strings on the wire too
        // (the engine does not read them; the frontend's detector does).
        stop: Some(StopStrings::Many(req.stop.clone())),
        stop_token_ids: Some(IntList::from(stops.stop_token_ids.clone())),
        ignore_eos: req.ignore_eos,
        skip_reading_prefix_cache: Some(req.prompt_logprobs.is_some()),
        skip_special_tokens: req.skip_special_tokens.unwrap_or(true),
        include_stop_str_in_output: req.include_stop_str_in_output,
        output_kind: RequestOutputKind::Delta,
        // The input processor resolves the unset watermarking option to
        // false before the request goes out (translation goldens).
        watermarking: Some(false),
        // `__post_init__`: `bad_words` None becomes [].
        bad_words: Some(Vec::new()),
        output_text_buffer_length: i128::from(output_text_buffer_length),
        eos_token_id: stops.eos_token_id.map(i128::from),
        all_stop_token_ids: stops.all_stop_token_ids.iter().copied().collect(),
        structured_outputs,
        logit_bias: req
            .logit_bias
            .as_ref()
            .filter(|lb| !lb.is_empty())
            .map(|lb| lb.iter().map(|&(k, b)| (i128::from(k), b)).collect()),
        allowed_token_ids: req.allowed_token_ids.clone().map(IntList::from),
        ..draft.clone()
    })
}

/// Step: one `EngineCoreRequest` per child: `n == 1` sends the request as
/// is (its seed as given); `n > 1` sends `n` children with ids from
/// [`TranslateOptions::child_id`] and seeds `seed + i` (vLLM's
/// `ParentRequest`).
pub fn fan_out(
    req: &GenerateRequest,
    sp: SamplingParams,
    rel: &'static ReleaseSchema,
    opts: &TranslateOptions,
) -> Result<Vec<EngineRequest>, TranslateError> {
    let n = req.n.unwrap_or(1);
    let seed = req.seed.filter(|&s| s != -1);
    // The int32 array vLLM's frontend packs (0.34.0 on; a list to older
    // releases): its bytes shared by every child.
    let prompt = TokenIds::from_u32(&req.prompt_token_ids);
    let child = |request_id: String, seed: Option<i128>, index: usize| -> Result<EngineRequest, TranslateError> {
        let typed = EngineCoreRequest {
            request_id: request_id.clone(),
            prompt_token_ids: Some(prompt.clone()),
            sampling_params: Some(SamplingParams { seed, ..sp.clone() }),
            arrival_time: opts.arrival_time,
            data_parallel_rank: req.data_parallel_rank.map(i128::from),
            ..EngineCoreRequest::default()
        };
        let request = request_value(rel, &typed)?;
        Ok(EngineRequest { request_id, typed, request, index })
    };
    if n == 1 {
        return Ok(vec![child(req.request_id.clone(), seed.map(i128::from), 0)?]);
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let mut requests = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let rid = (opts.child_id)(&req.request_id, i);
        let Some(s) = seed else {
            requests.push(child(rid, None, i)?);
            continue;
        };
        // Python ints do not wrap: seed + i up to u64 on the wire.
        let v = i128::from(s) + i as i128;
        if (WIRE_INT_MIN..=WIRE_INT_MAX).contains(&v) {
            requests.push(child(rid, Some(v), i)?);
        } else {
            return err("seed", format!("seed {s} + {i} does not fit the wire's 64-bit integers"));
        }
    }
    Ok(requests)
}

/// Translates a request. Errors name the offending field; nothing is sent
/// for a request that fails.
///
/// The steps, in vLLM's order (each public, for gateways that need one
/// alone): [`sampling_draft`]; `n` ([`check_sampling_rules`] on `n`);
/// [`check_constraint_shape`]; the rest of the rule table
/// ([`check_sampling_rules`]); [`eos_and_stops`]' deduplicated stop ids
/// and [`check_vocabulary`]; [`check_constraints`]; [`check_prompt`];
/// [`resolve_max_tokens`]; [`eos_and_stops`]; [`build_sampling_params`];
/// [`fan_out`].
pub fn translate(
    req: &GenerateRequest,
    engine: &EngineInfo,
    tok: &GatewayTokenizer,
    opts: &TranslateOptions,
) -> Result<Translated, TranslateError> {
    let rel = engine.release;
    let vocab = tok.vocab_size() as i64;
    let defaults =
        if opts.generation_config_defaults { tok.generation_defaults } else { GenerationDefaults::default() };
    let with_defaults;
    let req = if defaults.is_empty() {
        req
    } else {
        with_defaults = defaults.apply(req, rel);
        &with_defaults
    };
    let draft = sampling_draft(req);
    // `n` is checked before the constraint is built, as vLLM's server does.
    check_sampling_rules(&draft, rel, Some("n"))?;
    if let Some(c) = &req.structured_outputs {
        check_constraint_shape(c)?;
    }
    check_sampling_rules(&draft, rel, None)?;
    let mut requested_stop_ids: Vec<i64> = Vec::new();
    for &t in &req.stop_token_ids {
        if !requested_stop_ids.contains(&t) {
            requested_stop_ids.push(t);
        }
    }
    check_vocabulary(req, &requested_stop_ids, vocab, opts)?;
    let structured = match &req.structured_outputs {
        Some(c) => check_constraints(c, opts)?,
        None => None,
    };
    let prompt_len = check_prompt(req, engine.max_model_len, vocab)?;
    check_data_parallel_rank(req, opts)?;
    let mut warnings = Vec::new();
    let max_tokens =
        resolve_max_tokens(req, engine.max_model_len, prompt_len, defaults.max_tokens, opts, &mut warnings)?;
    let stops = eos_and_stops(req, tok, opts);
    let sp = build_sampling_params(req, &draft, max_tokens, &stops, structured.as_ref())?;
    let requests = fan_out(req, sp, rel, opts)?;
    let stop = StopParams {
        stop: req.stop.clone(),
        include_stop_str_in_output: req.include_stop_str_in_output,
        min_tokens: usize::try_from(req.min_tokens.unwrap_or(0)).unwrap_or(0),
        skip_special_tokens: req.skip_special_tokens.unwrap_or(true),
        spaces_between_special_tokens: req.spaces_between_special_tokens.unwrap_or(true),
        stop_string_token_ids: stops.stop_string_token_ids.clone(),
        semantics: opts.stop_semantics,
    };
    Ok(Translated {
        requests,
        stop,
        stop_string_token_ids: stops.stop_string_token_ids,
        detector_only_stops: stops.detector_only,
        warnings,
        prompt_len,
        max_tokens,
    })
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
            data_parallel_rank: opt_i64(v, "data_parallel_rank")?,
        })
    }
}
