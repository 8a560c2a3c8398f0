//! Errors and the one outcome classification shared by `conformance verify`,
//! the fuzz targets and the live runner.
//!
//! Reject classes are those of docs/case-format.md §5: `malformed`,
//! `type`, `missing-field`, `enum`, `validation`, `limits`, `frames`.
#![warn(missing_docs)]

use std::fmt;

/// Why a message was rejected, in the golden format's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RejectClass {
    /// Not MessagePack, truncated, trailing bytes, invalid UTF-8.
    Malformed,
    /// A field holds the wrong MessagePack type.
    Type,
    /// A field without default is absent.
    MissingField,
    /// A value outside its enum.
    Enum,
    /// Well-typed but violates a rule vLLM's decoder runs.
    Validation,
    /// Beyond a documented decoder limit (depth, size, count).
    Limits,
    /// Wrong frame count, unknown request-type byte, aux index out of range,
    /// buffer size not matching dtype and shape.
    Frames,
}

impl RejectClass {
    /// Every class, in the order of docs/case-format.md §5.
    pub const ALL: [RejectClass; 7] = [
        RejectClass::Malformed,
        RejectClass::Type,
        RejectClass::MissingField,
        RejectClass::Enum,
        RejectClass::Validation,
        RejectClass::Limits,
        RejectClass::Frames,
    ];

    /// The class's name in the golden format (`missing-field`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            RejectClass::Malformed => "malformed",
            RejectClass::Type => "type",
            RejectClass::MissingField => "missing-field",
            RejectClass::Enum => "enum",
            RejectClass::Validation => "validation",
            RejectClass::Limits => "limits",
            RejectClass::Frames => "frames",
        }
    }

    /// The class named `s` in the golden format, if any.
    pub fn parse(s: &str) -> Option<RejectClass> {
        RejectClass::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for RejectClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decode or encode failure: its class, the path of the offending value
/// (`EngineCoreRequest.sampling_params.temperature`) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Error {
    /// The reject class (docs/case-format.md §5).
    pub class: RejectClass,
    /// Where: the struct path of the offending value, rooted at the message
    /// (`EngineCoreRequest.sampling_params.temperature`); empty for the
    /// message as a whole or its frames.
    pub path: String,
    /// What was wrong, in words.
    pub detail: String,
    /// Set when the error is no decoder's verdict but what the engine
    /// would fail at run time (class `validation`, from
    /// `EngineCoreRequest::encode_checked`): the typed reason.
    pub serving: Option<ServingProblem>,
}

impl Error {
    /// An error of `class` at `path`.
    pub fn new(class: RejectClass, path: impl Into<String>, detail: impl Into<String>) -> Self {
        Error { class, path: path.into(), detail: detail.into(), serving: None }
    }

    /// The error of a request the engine's decoder accepts and the engine
    /// fails at run time: class `validation` at the problem's path.
    pub fn unservable(problem: ServingProblem) -> Self {
        let path = problem.path();
        let detail = problem.to_string();
        let detail = detail.strip_prefix(path).and_then(|d| d.strip_prefix(": ")).unwrap_or(&detail).to_string();
        Error { class: RejectClass::Validation, path: path.into(), detail, serving: Some(problem) }
    }
}

impl Error {
    /// The same error with `prefix` prefixed to its path.
    pub fn under(mut self, prefix: &str) -> Self {
        self.path.insert_str(0, prefix);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{} ({})", self.detail, self.class)
        } else {
            write!(f, "{}: {} ({})", self.path, self.detail, self.class)
        }
    }
}

impl std::error::Error for Error {}

/// One reason the engine would not serve a request as meant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServingProblem {
    /// `request_id` is empty: the outputs could not be told apart.
    EmptyRequestId,
    /// Neither `prompt_token_ids` nor `prompt_embeds`.
    NoPrompt,
    /// Neither `sampling_params` nor `pooling_params`.
    NoParams,
    /// `sampling_params.max_tokens` is nil: the engine asserts on it.
    NoMaxTokens,
    /// `sampling_params.structured_outputs` without `_backend`: the engine
    /// finishes the request with ERROR.
    ConstraintWithoutBackend,
    /// More prompt tokens than the engine's `max_model_len`: the engine
    /// process dies.
    PromptTooLong {
        /// The prompt's token count.
        prompt: usize,
        /// The engine's `max_model_len`.
        max_model_len: i64,
    },
    /// No `_eos_token_id` (and no `ignore_eos`): the engine never stops on
    /// EOS. Served; a warning.
    NoEosTokenId,
    /// A prompt array (vLLM 0.34.0 on) whose dtype is not a 4-byte
    /// integer: the engine's `TokenBuffer` asserts one, and the request
    /// finishes with ERROR.
    PromptNotInt32 {
        /// The dtype as sent.
        dtype: String,
    },
    /// A big-endian prompt array (`>i4`, `>u4`): the engine copies its
    /// bytes as they are, so it serves other token ids than were sent.
    PromptBigEndian {
        /// The dtype as sent.
        dtype: String,
    },
}

impl ServingProblem {
    /// Whether the engine fails the request (or dies) rather than serving
    /// it differently from what was meant.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, ServingProblem::NoEosTokenId)
    }

    /// The request field at fault, as a path.
    pub fn path(&self) -> &'static str {
        match self {
            ServingProblem::EmptyRequestId => "EngineCoreRequest.request_id",
            ServingProblem::NoPrompt
            | ServingProblem::PromptTooLong { .. }
            | ServingProblem::PromptNotInt32 { .. }
            | ServingProblem::PromptBigEndian { .. } => "EngineCoreRequest.prompt_token_ids",
            ServingProblem::NoParams => "EngineCoreRequest.sampling_params",
            ServingProblem::NoMaxTokens => "EngineCoreRequest.sampling_params.max_tokens",
            ServingProblem::ConstraintWithoutBackend => "EngineCoreRequest.sampling_params.structured_outputs._backend",
            ServingProblem::NoEosTokenId => "EngineCoreRequest.sampling_params._eos_token_id",
        }
    }
}

impl fmt::Display for ServingProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            ServingProblem::EmptyRequestId => "empty: the engine's outputs name requests by it".to_string(),
            ServingProblem::NoPrompt => "no prompt (neither token ids nor embeddings)".to_string(),
            ServingProblem::NoParams => "neither sampling_params nor pooling_params".to_string(),
            ServingProblem::NoMaxTokens => "nil: the engine asserts that max_tokens is set".to_string(),
            ServingProblem::ConstraintWithoutBackend => {
                "nil with a constraint: the engine finishes the request with ERROR \
                 (Unsupported structured output backend: None)"
                    .to_string()
            }
            ServingProblem::PromptTooLong { prompt, max_model_len } => format!(
                "{prompt} tokens, more than the engine's max_model_len {max_model_len}: the engine does not \
                 check, its model runner fails and the engine dies"
            ),
            ServingProblem::NoEosTokenId => {
                "nil and ignore_eos false: the engine never stops on EOS (served; a warning)".to_string()
            }
            ServingProblem::PromptNotInt32 { dtype } => format!(
                "an array of dtype {dtype}: the engine copies the prompt into an int32 buffer, asserting a \
                 4-byte integer dtype, and finishes the request with ERROR"
            ),
            ServingProblem::PromptBigEndian { dtype } => format!(
                "an array of dtype {dtype}: the engine copies its bytes as they are and reads them \
                 little-endian, other token ids than were sent"
            ),
        };
        write!(f, "{}: {why}", self.path())
    }
}

/// A rule violation found by a validator; the decoder turns it into an
/// `Error` of class `validation` at the struct's path plus
/// [`Violation::path`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The fields at fault, relative to the struct: one for a rule on a
    /// field, several for a rule on their combination (two structured-output
    /// constraints set), none for a rule on the struct as a whole.
    pub fields: Vec<&'static str>,
    /// What the rule requires, and the value found.
    pub message: String,
}

impl Violation {
    /// A violation of the rule on `field` (`""`: on the struct as a whole).
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        let fields = if field.is_empty() { Vec::new() } else { vec![field] };
        Violation { fields, message: message.into() }
    }

    /// A violation of a rule on the combination of `fields`.
    pub fn on_fields(fields: Vec<&'static str>, message: impl Into<String>) -> Self {
        Violation { fields, message: message.into() }
    }

    /// The fields as an error path names them after the struct's: joined by
    /// commas (`json,regex`), empty for the struct as a whole.
    pub fn path(&self) -> String {
        self.fields.join(",")
    }
}

/// The outcome of running a message through a decoder: accepted (with the
/// drift it showed: extra trailing elements and unknown keys, by path) or
/// rejected with a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted; `drift` holds the paths of extra elements and unknown keys.
    Accept {
        /// Drift paths, in wire order (empty when the schema matched).
        drift: Vec<String>,
    },
    /// Rejected with this class.
    Reject(RejectClass),
}

impl Outcome {
    /// True when accepted with drift: the bytes come from an engine newer
    /// than the schema they were read with.
    pub fn is_drift(&self) -> bool {
        matches!(self, Outcome::Accept { drift } if !drift.is_empty())
    }

    /// `accept`, `accept (drift: ...)` or `reject <class>`, as reports
    /// print an outcome.
    pub fn label(&self) -> String {
        match self {
            Outcome::Accept { drift } if drift.is_empty() => "accept".into(),
            Outcome::Accept { drift } => format!("accept (drift: {})", drift.join(", ")),
            Outcome::Reject(c) => format!("reject {c}"),
        }
    }
}
