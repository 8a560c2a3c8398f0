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
//!
//! The steps by what they do: `checks` (the sampling draft and the checks
//! before anything is built), `constraints` (the structured-output
//! constraint), `build` (stops, sampling parameters, the children sent),
//! `json` (the JSON form of the request); the types and [`translate`],
//! which runs the steps in order, here.
#![warn(missing_docs)]

use std::collections::HashMap;

use super::generation::GenerationDefaults;
use super::stop::{StopParams, StopSemantics};
use super::tokenizer::GatewayTokenizer;
use crate::schema::ReleaseSchema;
use crate::typed::EngineCoreRequest;
use crate::value::{StructValue, Value};

mod build;
mod checks;
mod constraints;
mod json;
pub use build::{build_sampling_params, eos_and_stops, fan_out, Stops};
pub use checks::{
    check_data_parallel_rank, check_prompt, check_sampling_rules, check_vocabulary, resolve_max_tokens, sampling_draft,
};
pub use constraints::{check_constraint_shape, check_constraints, choice_as_grammar};

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
