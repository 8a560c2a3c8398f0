//! Typed access for gateways: enums with names, the structured-output
//! constraint as a Rust enum (so exactly one constraint is representable),
//! and read-only views of output batches over decoded values.
//!
//! Wire facts (docs/wire-protocol.md §7.2, §7.4, §8.4): `FinishReason` is 0 STOP,
//! 1 LENGTH, 2 ABORT, 3 ERROR, 4 REPETITION; `stop_reason` is nil, a token id
//! (stop token) or a string (set by a frontend, or `repetition_detected`);
//! `RequestOutputKind` is 0 CUMULATIVE, 1 DELTA, 2 FINAL_ONLY;
//! `StructuredOutputsParams` holds exactly one of `json`, `regex`, `choice`,
//! `grammar`, `json_object`, `structural_tag` (`json_object: false` counts).

use crate::error::{Error, RejectClass};
use crate::schema::ReleaseSchema;
use crate::value::{StructValue, Tensor, Value};

/// Why a request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    Stop = 0,
    Length = 1,
    Abort = 2,
    Error = 3,
    Repetition = 4,
}

impl FinishReason {
    pub fn from_wire(v: i64) -> Option<FinishReason> {
        Some(match v {
            0 => FinishReason::Stop,
            1 => FinishReason::Length,
            2 => FinishReason::Abort,
            3 => FinishReason::Error,
            4 => FinishReason::Repetition,
            _ => return None,
        })
    }

    pub fn wire(self) -> i64 {
        self as i64
    }

    /// The user-facing string (`stop`, `length`, `abort`, `error`,
    /// `repetition`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Repetition => "repetition",
        }
    }
}

/// `RequestOutputKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestOutputKind {
    Cumulative = 0,
    Delta = 1,
    FinalOnly = 2,
}

impl RequestOutputKind {
    pub fn from_wire(v: i64) -> Option<RequestOutputKind> {
        Some(match v {
            0 => RequestOutputKind::Cumulative,
            1 => RequestOutputKind::Delta,
            2 => RequestOutputKind::FinalOnly,
            _ => return None,
        })
    }
}

/// `EngineCoreOutput.stop_reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    TokenId(i64),
    Text(String),
}

/// The one structured-output constraint of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A JSON schema, as text or as a JSON object (a map on the wire).
    Json(Value),
    Regex(String),
    Choice(Vec<String>),
    Grammar(String),
    /// `json_object`; `false` still counts as the one constraint on the wire
    /// (vLLM then fails the request at preprocessing).
    JsonObject(bool),
    StructuralTag(String),
}

impl Constraint {
    /// The wire field that carries this constraint.
    pub fn field(&self) -> &'static str {
        match self {
            Constraint::Json(_) => "json",
            Constraint::Regex(_) => "regex",
            Constraint::Choice(_) => "choice",
            Constraint::Grammar(_) => "grammar",
            Constraint::JsonObject(_) => "json_object",
            Constraint::StructuralTag(_) => "structural_tag",
        }
    }
}

/// `StructuredOutputsParams` with its constraint as an enum.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredOutputs {
    pub constraint: Constraint,
    pub disable_any_whitespace: bool,
    pub disable_additional_properties: bool,
    pub whitespace_pattern: Option<String>,
    /// `_backend`: vLLM 0.33 engines require it (and one backend per engine).
    pub backend: Option<String>,
    pub backend_was_auto: bool,
}

fn bad(path: &str, detail: impl Into<String>) -> Error {
    Error::new(RejectClass::Type, format!("StructuredOutputsParams.{path}"), detail)
}

fn opt_string(v: Option<&Value>, path: &str) -> Result<Option<String>, Error> {
    match v {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Str(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(path, format!("expected str, got {other:?}"))),
    }
}

fn flag(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(true)))
}

impl StructuredOutputs {
    pub fn new(constraint: Constraint) -> Self {
        StructuredOutputs {
            constraint,
            disable_any_whitespace: false,
            disable_additional_properties: false,
            whitespace_pattern: None,
            backend: None,
            backend_was_auto: false,
        }
    }

    pub fn with_backend(mut self, backend: impl Into<String>) -> Self {
        self.backend = Some(backend.into());
        self
    }

    /// From a decoded `StructuredOutputsParams`; fails unless exactly one
    /// constraint is set (as vLLM's `__post_init__`).
    pub fn from_struct(v: &StructValue) -> Result<Self, Error> {
        crate::validate::structured_outputs_params(v).map_err(|violation| {
            Error::new(
                RejectClass::Validation,
                format!("StructuredOutputsParams.{}", violation.field).trim_end_matches('.').to_string(),
                violation.message,
            )
        })?;
        let constraint = if !v.is_nil("json") {
            Constraint::Json(v.get("json").cloned().unwrap_or(Value::Nil))
        } else if let Some(s) = opt_string(v.get("regex"), "regex")? {
            Constraint::Regex(s)
        } else if let Some(Value::Array(xs)) = v.get("choice") {
            let choices = xs
                .iter()
                .map(|x| match x {
                    Value::Str(s) => Ok(s.clone()),
                    other => Err(bad("choice", format!("expected str, got {other:?}"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Constraint::Choice(choices)
        } else if let Some(s) = opt_string(v.get("grammar"), "grammar")? {
            Constraint::Grammar(s)
        } else if let Some(Value::Bool(b)) = v.get("json_object") {
            Constraint::JsonObject(*b)
        } else if let Some(s) = opt_string(v.get("structural_tag"), "structural_tag")? {
            Constraint::StructuralTag(s)
        } else {
            return Err(bad("", "constraint of an unexpected type"));
        };
        Ok(StructuredOutputs {
            constraint,
            disable_any_whitespace: flag(v.get("disable_any_whitespace")),
            disable_additional_properties: flag(v.get("disable_additional_properties")),
            whitespace_pattern: opt_string(v.get("whitespace_pattern"), "whitespace_pattern")?,
            backend: opt_string(v.get("_backend"), "_backend")?,
            backend_was_auto: flag(v.get("_backend_was_auto")),
        })
    }

    /// The wire struct for `release` (all 11 fields, as vLLM sends them).
    pub fn to_struct(&self, release: &'static ReleaseSchema) -> StructValue {
        let mut s = StructValue::with_defaults(release.structured_outputs_params);
        let v = match &self.constraint {
            Constraint::Json(j) => j.clone(),
            Constraint::Regex(r) => Value::Str(r.clone()),
            Constraint::Choice(c) => Value::Array(c.iter().cloned().map(Value::Str).collect()),
            Constraint::Grammar(g) => Value::Str(g.clone()),
            Constraint::JsonObject(b) => Value::Bool(*b),
            Constraint::StructuralTag(t) => Value::Str(t.clone()),
        };
        s.set(self.constraint.field(), v);
        s.set("disable_any_whitespace", Value::Bool(self.disable_any_whitespace));
        s.set("disable_additional_properties", Value::Bool(self.disable_additional_properties));
        s.set("whitespace_pattern", self.whitespace_pattern.clone().map_or(Value::Nil, Value::Str));
        s.set("_backend", self.backend.clone().map_or(Value::Nil, Value::Str));
        s.set("_backend_was_auto", Value::Bool(self.backend_was_auto));
        s
    }
}

/// A new `SamplingParams` of `release` holding every default. Note that
/// vLLM's `max_tokens` default (16) is never what a gateway wants: set it.
pub fn sampling_params(release: &'static ReleaseSchema) -> StructValue {
    StructValue::with_defaults(release.sampling_params)
}

/// A new `EngineCoreRequest` of `release` with the nine required fields
/// set (no multimodal features, no pooling, no LoRA, no salt, no DP rank).
pub fn engine_core_request(
    release: &'static ReleaseSchema,
    request_id: impl Into<String>,
    prompt_token_ids: Vec<i64>,
    sampling_params: StructValue,
    arrival_time: f64,
) -> Value {
    let schema = release.engine_core_request.as_struct().expect("request root is a struct");
    let mut r = StructValue::with_defaults(schema);
    r.set("request_id", Value::Str(request_id.into()));
    r.set("prompt_token_ids", Value::IntArray(prompt_token_ids));
    r.set("sampling_params", Value::Struct(sampling_params));
    r.set("arrival_time", Value::Float(arrival_time));
    Value::Struct(r)
}

// ===== read-only views of decoded outputs =====

/// A decoded `EngineCoreOutputs`.
#[derive(Debug, Clone, Copy)]
pub struct OutputsView<'a>(&'a StructValue);

impl<'a> OutputsView<'a> {
    /// Views a decoded `EngineCoreOutputs` value.
    pub fn new(v: &'a Value) -> Option<Self> {
        match v {
            Value::Struct(s) if s.schema.name == "EngineCoreOutputs" => Some(OutputsView(s)),
            _ => None,
        }
    }

    pub fn engine_index(&self) -> i64 {
        self.0.int_field("engine_index").unwrap_or(0)
    }

    pub fn timestamp(&self) -> f64 {
        self.0.float_field("timestamp").unwrap_or(0.0)
    }

    pub fn outputs(&self) -> impl Iterator<Item = OutputView<'a>> + 'a {
        let items: &'a [Value] = match self.0.get("outputs") {
            Some(Value::Array(xs)) => xs,
            _ => &[],
        };
        items.iter().filter_map(|v| match v {
            Value::Struct(s) => Some(OutputView(s)),
            _ => None,
        })
    }

    /// `utility_output` as `(call_id, failure_message, result value)`.
    pub fn utility_output(&self) -> Option<(&'a Value, Option<&'a str>, Option<&'a Value>)> {
        let u = self.0.struct_field("utility_output")?;
        let call_id = u.get("call_id")?;
        let failure = u.str_field("failure_message");
        let result = match u.get("result") {
            Some(Value::Array(xs)) if xs.len() == 2 => Some(&xs[1]),
            _ => None,
        };
        Some((call_id, failure, result))
    }

    pub fn finished_requests(&self) -> Vec<&'a str> {
        match self.0.get("finished_requests") {
            Some(Value::Array(xs)) => {
                xs.iter().filter_map(|x| if let Value::Str(s) = x { Some(s.as_str()) } else { None }).collect()
            }
            _ => Vec::new(),
        }
    }

    pub fn weight_version(&self) -> Option<&'a str> {
        self.0.str_field("weight_version")
    }

    pub fn wave_complete(&self) -> Option<i64> {
        self.0.int_field("wave_complete")
    }

    pub fn start_wave(&self) -> Option<i64> {
        self.0.int_field("start_wave")
    }

    pub fn has_scheduler_stats(&self) -> bool {
        !self.0.is_nil("scheduler_stats")
    }
}

/// One decoded `EngineCoreOutput`.
#[derive(Debug, Clone, Copy)]
pub struct OutputView<'a>(&'a StructValue);

impl<'a> OutputView<'a> {
    pub fn request_id(&self) -> &'a str {
        self.0.str_field("request_id").unwrap_or("")
    }

    pub fn new_token_ids(&self) -> Vec<i64> {
        match self.0.get("new_token_ids") {
            Some(Value::IntArray(xs)) => xs.clone(),
            Some(Value::Array(xs)) => {
                xs.iter().filter_map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect()
            }
            _ => Vec::new(),
        }
    }

    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.0.int_field("finish_reason").and_then(FinishReason::from_wire)
    }

    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.0.get("stop_reason") {
            Some(Value::Int(i)) => Some(StopReason::TokenId(*i)),
            Some(Value::Str(s)) => Some(StopReason::Text(s.clone())),
            _ => None,
        }
    }

    /// `new_logprobs` as `(token ids [rows, K+1], logprobs [rows, K+1],
    /// sampled-token ranks [rows])`.
    pub fn new_logprobs(&self) -> Option<(&'a Tensor, &'a Tensor, &'a Tensor)> {
        let l = self.0.struct_field("new_logprobs")?;
        let t = |name| match l.get(name) {
            Some(Value::Tensor(t)) => Some(&**t),
            _ => None,
        };
        Some((t("logprob_token_ids")?, t("logprobs")?, t("sampled_token_ranks")?))
    }

    /// The 0.33 `error` field as `(code, message, retryable)`.
    pub fn error(&self) -> Option<(&'a str, &'a str, bool)> {
        let e = self.0.struct_field("error")?;
        Some((e.str_field("code")?, e.str_field("message")?, matches!(e.get("retryable"), Some(Value::Bool(true)))))
    }

    /// The underlying struct, for fields without an accessor.
    pub fn raw(&self) -> &'a StructValue {
        self.0
    }
}
