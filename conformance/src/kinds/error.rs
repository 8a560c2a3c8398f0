//! [`KindError`]: why a case of a gateway kind fails, typed. Its `Display`
//! is the failure detail the reports print (`Verdict::Fail`).

use std::path::PathBuf;

use engine_protocol::translate::{GenerationDefaults, TranslateError};
use engine_testkit::hex::HexError;
use engine_testkit::model::ModelDirError;

/// Why a gateway-kind case fails: either the case itself is unusable (a
/// key of its `input` or `expected` missing or of the wrong shape, its
/// tokenizer not found), or our translation layer disagrees with what the
/// engine's own frontend did. Each variant names the key or path.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// A key of the case is missing or of the wrong type; the path says
    /// which (`input.max_model_len`, `steps[2].logprobs.token_ids`).
    #[error("{path}")]
    Missing { path: String },
    /// A key of the case breaks a rule of its shape (`must be a bool`).
    #[error("{path} {rule}")]
    Invalid { path: String, rule: &'static str },
    /// An element of a list that is not what the list holds.
    #[error("{path}: {value} is not {what}")]
    NotA { path: String, value: serde_json::Value, what: &'static str },
    /// A value of the wrong JSON type where a bool was expected.
    #[error("{path}: expected a bool, got {got}")]
    NotABool { path: String, got: serde_json::Value },
    /// An expectation at `path` that is not an array.
    #[error("{path}: expected an array")]
    ExpectedArray { path: String },
    /// Logprob rows whose three columns differ in length.
    #[error("{path}: ragged rows")]
    RaggedRows { path: String },
    /// A `finish_reason` or `stop_reason` that is not one.
    #[error("bad {field} {value}")]
    BadReason { field: &'static str, value: serde_json::Value },
    /// `input.tokenizer` names a path, not a directory name.
    #[error("tokenizer name `{name}` must be a plain directory name")]
    TokenizerName { name: String },
    /// No directory of that name with a `tokenizer.json` beside the case.
    #[error("no `{name}/tokenizer.json` beside {} or its ancestors", case_file.display())]
    TokenizerNotFound { name: String, case_file: PathBuf },
    /// The tokenizer directory does not load.
    #[error(transparent)]
    Tokenizer(Box<ModelDirError>),
    /// The tokenizer cache's lock was poisoned by a panic elsewhere.
    #[error("poisoned lock: another task failed inside")]
    TokenizerCache,
    /// The case's release has no schema table in this build.
    #[error("no schema table")]
    NoSchemaTable,
    /// `input.request` is not a gateway request.
    #[error("input.request does not parse: {0}")]
    Request(#[source] Box<TranslateError>),
    /// `expected.payload` is not hex.
    #[error("expected.payload: {0}")]
    PayloadHex(#[source] HexError),
    /// The model directory's generation config reads otherwise than the
    /// engine's server derived it.
    #[error("the model directory's generation config reads as {ours:?}; vLLM's server derived {theirs:?}")]
    GenerationDefaults { ours: Box<GenerationDefaults>, theirs: Box<GenerationDefaults> },
    /// The engine's refusal message matches no classification rule.
    #[error("{engine}'s error is outside the classified vocabulary: {}", unclassified(.kind.as_deref(), .message))]
    Unclassified { engine: &'static str, kind: Option<String>, message: String },
    /// Both refused, with other classes or parameters.
    #[error("{engine} refused with {theirs} ({message:?}); we refused with {ours} ({error})")]
    RefusedDifferently {
        engine: &'static str,
        theirs: String,
        message: String,
        ours: String,
        error: Box<TranslateError>,
    },
    /// The engine refused, we translated.
    #[error("expected an error ({want}), translation succeeded")]
    ExpectedRefusal { want: serde_json::Value },
    /// The engine translated, we refused.
    #[error("expected a translation, got error: {0}")]
    Refused(#[source] Box<TranslateError>),
    /// Our translated request does not encode.
    #[error("our request does not encode: {0}")]
    OurEncode(#[source] Box<engine_protocol::Error>),
    /// The engine's payload does not decode with our table.
    #[error("{engine}'s payload does not decode: {error}")]
    TheirDecode { engine: &'static str, error: Box<engine_protocol::Error> },
    /// The payloads decode the same but their bytes differ, and no set
    /// (written in hash order by Python) explains it.
    #[error("the payload decodes the same but its bytes differ, and no set explains it")]
    BytesDiffer,
    /// A value at `path` differs from the expected one (both rendered).
    #[error("{path}: expected {want}, got {got}")]
    Differs { path: String, want: String, got: String },
    /// Two views differ at `path` (what [`engine_protocol::view::diff`]
    /// says).
    #[error("{path}: {what}")]
    ViewDiffers { path: String, what: String },
    /// TokenSpeed's payload and ours decode to views that differ at `path`.
    #[error("payload differs at TokenizedGenerateReqInput{path}: {what}")]
    PayloadDiffers { path: String, what: String },
    /// A list of the expectation and ours differ in length.
    #[error("{path}: expected {want} {unit}, got {got}{extra}")]
    Count { path: String, want: usize, unit: &'static str, got: usize, extra: String },
    /// vLLM built another number of engine requests (n > 1 fans out).
    #[error("expected {want} engine requests, got {got}")]
    RequestCount { want: usize, got: usize },
    /// `expected.outputs` does not have one entry per step.
    #[error("expected.outputs has {outputs} entries for {steps} steps")]
    OutputsPerStep { outputs: usize, steps: usize },
    /// One side has a field of the engine request the other lacks.
    #[error("requests[{index}]: {}", field_side(.ours_only, .field))]
    Field { index: usize, field: String, ours_only: bool },
    /// Our engine request is not a struct (or its view not an object).
    #[error("{0}")]
    OurShape(&'static str),
}

fn unclassified(kind: Option<&str>, message: &str) -> String {
    match kind {
        Some(kind) => format!("{kind}: {message:?}"),
        None => format!("{message:?}"),
    }
}

fn field_side(ours_only: &bool, field: &str) -> String {
    if *ours_only {
        format!("vLLM's request has no field {field}, ours does")
    } else {
        format!("we have no field {field}")
    }
}

impl KindError {
    /// A missing or mistyped key at `path`.
    pub fn missing(path: impl Into<String>) -> Self {
        KindError::Missing { path: path.into() }
    }

    /// A key at `path` breaking `rule`.
    pub fn invalid(path: impl Into<String>, rule: &'static str) -> Self {
        KindError::Invalid { path: path.into(), rule }
    }

    /// The value at `path` is `got` where `want` was expected.
    pub fn differs(path: impl Into<String>, want: impl ToString, got: impl ToString) -> Self {
        KindError::Differs { path: path.into(), want: want.to_string(), got: got.to_string() }
    }
}
