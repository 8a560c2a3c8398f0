//! The check vocabulary's typed errors: [`CheckError`] (a check entry of
//! a scenario file that cannot be read, refused at load) and
//! [`CheckFailure`] (what differed when a check ran, kept typed to the
//! report, which renders it with `Display`).

use serde_json::Value as Json;

use super::spec::ScenarioKind;

/// Why a check entry of a scenario file was refused at load.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The entry is not a JSON object.
    #[error("a check must be a JSON object")]
    NotAnObject,
    /// `checks` is not a list.
    #[error("`checks` must be a list")]
    NotAList,
    /// The entry has no `check` string.
    #[error("check missing")]
    NoName,
    /// No check of this name exists.
    #[error("unknown check {name:?}")]
    Unknown { name: String },
    /// A field is missing or of the wrong type (serde's words name it).
    #[error("check {check:?}: {message}")]
    Field { check: String, message: String },
    /// A required field is missing.
    #[error("check {check:?}: missing field `{field}`")]
    MissingField { check: &'static str, field: &'static str },
    /// The scenario's kind does not take this check (or this form of it).
    #[error("check {check:?} is not one a {kind} scenario takes")]
    NotForKind { check: &'static str, kind: ScenarioKind },
    /// A field's value is not one the check can use.
    #[error("check {check:?}: {why}")]
    Invalid { check: &'static str, why: String },
}

impl CheckError {
    /// The check's name, when the entry had one.
    pub fn check_name(&self) -> Option<&str> {
        match self {
            CheckError::Unknown { name } => Some(name),
            CheckError::Field { check, .. } => Some(check),
            CheckError::MissingField { check, .. }
            | CheckError::NotForKind { check, .. }
            | CheckError::Invalid { check, .. } => Some(check),
            CheckError::NotAnObject | CheckError::NotAList | CheckError::NoName => None,
        }
    }
}

/// What differed when a check ran: the expected and observed values, or
/// what was missing. `Display` is the report's detail.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckFailure {
    /// A value differs from the expected one.
    #[error("{what} is {got}, expected {expected}")]
    Differs { what: &'static str, got: Box<Json>, expected: Box<Json> },
    /// The check names no request.
    #[error("no `request`")]
    NoRequestNamed,
    /// The named request does not exist.
    #[error("no request {0}")]
    NoRequest(String),
    /// The request was refused, so it has nothing to check.
    #[error("request {id} was refused ({class}): {message}")]
    WasRefused { id: String, class: String, message: String },
    /// The request has no such child.
    #[error("request {id} has no child {child}")]
    NoChild { id: String, child: usize },
    /// The request was expected to be refused and was not.
    #[error("request {id} was not refused")]
    NotRefused { id: String, ended: &'static str },
    /// Refused with another class.
    #[error("refused as {got} ({message}), expected {expected}")]
    RefusedAs { got: String, expected: String, message: String },
    /// The text has (or lacks) a piece it should not.
    #[error("text {text:?} {} {piece:?}", if *has { "contains" } else { "lacks" })]
    TextPiece { text: String, piece: String, has: bool },
    /// Engine tokens that should be equal differ.
    #[error("{a} gave {got_a}, {b} gave {got_b}")]
    TokensDiffer { a: String, got_a: String, b: String, got_b: String },
    /// Engine tokens that should differ are equal.
    #[error("{a} and {b} both gave {tokens}")]
    TokensSame { a: String, b: String, tokens: String },
    /// Two request ids have different numbers of copies.
    #[error("{a} has {na} copies, {b} has {nb}")]
    Copies { a: String, na: usize, b: String, nb: usize },
    /// A request that should have tokens has none.
    #[error("copy {copy}: a request has no tokens")]
    NoTokens { copy: usize },
    /// A forbidden token among the first ones.
    #[error("token {token} at position {at} of {tokens:?}")]
    ForbiddenToken { token: i64, at: usize, tokens: Vec<i64> },
    /// Fewer tokens than the check looks at.
    #[error("only {0} tokens")]
    TooFewTokens(usize),
    /// More (or, exactly, other) engine tokens than `max_tokens`.
    #[error("{id} got {got} tokens, max_tokens {max}")]
    OverMaxTokens { id: String, got: i64, max: i64 },
    /// Nothing of this was sent or seen.
    #[error("{0}")]
    Missing(&'static str),
    /// The request did not fail.
    #[error("did not fail")]
    DidNotFail,
    /// It failed, of another class.
    #[error("failed as {got} ({message}), expected {expected}")]
    FailedAs { got: &'static str, expected: &'static str, message: String },
    /// The request was not aborted.
    #[error("not aborted (finish {})", finish_debug(finish))]
    NotAborted { finish: Option<String> },
    /// An output or row came this long after the ABORT.
    #[error("an output arrived {ms:.0} ms after the ABORT ({late} late outputs)")]
    LateOutput { ms: f64, late: usize },
    /// The request ended otherwise.
    #[error("outcome is {got}, expected {} ({error})", Json::String(expected.clone()))]
    OutcomeIs { got: &'static str, expected: String, error: String },
    /// A utility call failed, succeeded or is missing against the
    /// expectation.
    #[error("{0}")]
    Utility(String),
    /// A request did not finish.
    #[error("{id} ({engine_id}) did not finish: {error:?}")]
    NotFinished { id: String, engine_id: String, error: Option<String> },
    /// The `n` fan-out's ids are not distinct.
    #[error("request {id}: engine request ids {ids:?} for {children} children")]
    ChildIds { id: String, ids: std::collections::BTreeSet<String>, children: usize },
    /// Logprob rows, columns, ranks or shaping differ from what the check
    /// expects.
    #[error("{0}")]
    Logprobs(String),
    /// The text is not in the constraint's language.
    #[error("{0}")]
    Constraint(String),
    /// TokenSpeed rows differ from what the check expects.
    #[error("{0}")]
    Rows(String),
    /// The value at a path of what was sent cannot be read.
    #[error("{0}")]
    Sent(String),
    /// A gateway-under-test finding that is not one value against another
    /// (logprob rendering, stop ids, an abort, timing), in the report's
    /// words.
    #[error("{0}")]
    Finding(String),
}

/// A finish reason as the runner has always shown an optional one
/// (`Some(Length)`, `None`).
fn finish_debug(f: &Option<String>) -> String {
    match f {
        None => "None".into(),
        Some(s) => {
            let mut c = s.chars();
            let head: String = c.next().map(|h| h.to_uppercase().collect()).unwrap_or_default();
            format!("Some({head}{})", c.as_str())
        }
    }
}

impl CheckFailure {
    /// The failure as TokenSpeed replay reports have always worded it
    /// (`got X, expected Y`), where that differs from [`Display`].
    ///
    /// [`Display`]: std::fmt::Display
    pub fn tokenspeed_words(&self) -> String {
        match self {
            CheckFailure::Differs { got, expected, .. } => format!("got {got}, expected {expected}"),
            CheckFailure::OutcomeIs { got, expected, .. } => {
                format!("got {}, expected {}", Json::String(got.to_string()), Json::String(expected.clone()))
            }
            CheckFailure::NotRefused { ended, .. } => format!("not refused (outcome {ended})"),
            CheckFailure::TextPiece { text, piece, .. } => format!("text {text:?} vs {piece:?}"),
            CheckFailure::Missing("the gateway sent no ABORT") => "no ABORT was sent".into(),
            other => other.to_string(),
        }
    }
}
