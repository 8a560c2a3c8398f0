//! What a replay run observed, in one model for both dialects: the input
//! of every replay check ([`super::replay`]). Built from the runs' own
//! result types by `engine_replay::adapt`.
//!
//! One [`Observation`] per engine request (a vLLM `n` fan-out has one per
//! child; a TokenSpeed request has one): the client's and the engine's
//! tokens, the text after the gateway's stop detection, the finish and
//! stop reason, how it ended, what was sent, logprobs, the late outputs
//! after an ABORT (docs/runner/scenarios.md "Scenarios",
//! docs/runner/tokenspeed.md "TokenSpeed scenarios").

use std::collections::BTreeMap;

use engine_protocol::typed::tokenspeed::BatchRow;
use engine_protocol::typed::StopReason;
use engine_protocol::{StructValue, Value};
use serde_json::Value as Json;

use super::spec::FailureClass;

/// The failure class of an outcome that is a failure (`failed`'s
/// `class`).
pub fn failure_class(o: RequestOutcome) -> Option<FailureClass> {
    Some(match o {
        RequestOutcome::ErrorOutput => FailureClass::ErrorOutput,
        RequestOutcome::DeathSentinel => FailureClass::DeathSentinel,
        RequestOutcome::InputDropped => FailureClass::InputDropped,
        RequestOutcome::OutputDropped => FailureClass::OutputDropped,
        RequestOutcome::Restarted => FailureClass::Restarted,
        RequestOutcome::Silence => FailureClass::Silence,
        RequestOutcome::Failed => FailureClass::Failed,
        _ => return None,
    })
}

/// A request's failure: its class and the message the report shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: FailureClass,
    pub message: String,
}

/// What one engine request showed the client and the engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    pub engine_request_id: String,
    /// The engine (data-parallel rank) it was sent to.
    pub engine: u16,
    /// The `engine_index` values its outputs' batches carried, each once
    /// (vLLM).
    pub engine_indices: Vec<i64>,
    /// The `seed` sent.
    pub sent_seed: Option<i64>,
    /// Every token the engine sent.
    pub engine_tokens: Vec<i64>,
    /// The tokens after the gateway's stop detection.
    pub client_tokens: Vec<i64>,
    pub text: String,
    /// The client's finish reason (`stop`, `length`, `abort`, `error`).
    pub finish: Option<String>,
    pub stop_reason: Option<StopReason>,
    /// How it ended (the run's own outcome, shared by both dialects).
    pub ended: RequestOutcome,
    /// Why it failed (a failure outcome), or `None`.
    pub failure: Option<Failure>,
    /// The request's error message, failure or not (reports).
    pub error: Option<String>,
    /// Ended by a local abort.
    pub aborted: bool,
    /// The gateway sent an ABORT for it.
    pub abort_sent: bool,
    /// Outputs (rows) after the ABORT, ms after it; `None`: not watched.
    pub late_ms: Option<Vec<f64>>,
    /// Columns of `new_logprobs` per output (vLLM).
    pub logprob_columns: Vec<i64>,
    pub prompt_logprobs_seen: bool,
    /// Every output as decoded (vLLM).
    pub outputs: Vec<StructValue>,
    /// Every row (TokenSpeed).
    pub rows: Vec<BatchRow>,
    /// The request sent (TokenSpeed; not for raw frames).
    pub sent: Option<Value>,
}

/// A refusal by the gateway's translation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub class: String,
    pub message: String,
}

/// What one request of a scenario (one spec copy) produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestObservation {
    /// The id in the scenario (without a repeat's `-<i>`).
    pub spec_id: String,
    pub refused: Option<Refusal>,
    /// `max_tokens` sent.
    pub sent_max_tokens: Option<i64>,
    pub prompt: Vec<i64>,
    pub prompt_len: usize,
    /// The tokens left in the context as the dialect counts them
    /// (`"room"`): vLLM `max_model_len − prompt`, TokenSpeed one less.
    pub room: i64,
    /// The request as the scenario gave it.
    pub request: Json,
    /// One per engine request.
    pub children: Vec<Observation>,
}

/// A utility call's result.
#[derive(Debug, Clone, PartialEq)]
pub enum UtilityObservation {
    /// It returned this (as JSON, the canonical view).
    Returned(Json),
    /// The engine refused it with `message`; `shown` is the error as the
    /// report words it.
    Refused { message: String, shown: String },
    /// It got no answer from the engine (timeout, dead engine); why.
    NoAnswer(String),
}

/// Everything a replay scenario's run observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunObservation {
    pub requests: BTreeMap<String, RequestObservation>,
    pub utilities: BTreeMap<String, UtilityObservation>,
    /// The data-parallel wave messages engines sent, in order, each with
    /// the engine whose connection carried it (vLLM).
    pub dp_control: Vec<(u16, engine_client::dialect::DpControl)>,
    /// Batches whose `engine_index` was not their connection's engine.
    pub engine_index_mismatches: u64,
}

/// How an engine request ended, as the gateway saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestOutcome {
    /// Not sent (or not yet ended).
    #[default]
    None,
    /// Finished by the engine (stop, length) or by the gateway's stop
    /// detection.
    Finished,
    /// The engine finished it with `FinishReason.ERROR`.
    ErrorOutput,
    /// The engine ended it with an abort (TokenSpeed's terminal `"abort"`
    /// row: a request its receive path refused).
    AbortRow,
    /// Aborted by the gateway (`abort_after_tokens`).
    Aborted,
    /// The translation refused it; nothing was sent.
    Refused,
    /// The engine pushed `ENGINE_CORE_DEAD`.
    DeathSentinel,
    /// The engine's input connection dropped (its input thread is gone).
    InputDropped,
    /// The engine's output connection dropped.
    OutputDropped,
    /// The engine said HELLO again.
    Restarted,
    /// Nothing came back within the request's `wait_ms` or the silence
    /// deadline.
    Silence,
    /// Any other transport failure.
    Failed,
}

impl RequestOutcome {
    /// The name scenario files and reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestOutcome::None => "none",
            RequestOutcome::Finished => "finished",
            RequestOutcome::ErrorOutput => "error_output",
            RequestOutcome::AbortRow => "abort_row",
            RequestOutcome::Aborted => "aborted",
            RequestOutcome::Refused => "refused",
            RequestOutcome::DeathSentinel => "death_sentinel",
            RequestOutcome::InputDropped => "input_dropped",
            RequestOutcome::OutputDropped => "output_dropped",
            RequestOutcome::Restarted => "restarted",
            RequestOutcome::Silence => "silence",
            RequestOutcome::Failed => "failed",
        }
    }

    /// The outcome a transport failure gives a request.
    pub fn of_error(e: &engine_client::transport::TransportError) -> RequestOutcome {
        match e {
            engine_client::transport::TransportError::EngineDead { cause, .. } => match cause {
                engine_client::transport::DeathCause::Sentinel => RequestOutcome::DeathSentinel,
                engine_client::transport::DeathCause::InputDisconnected => RequestOutcome::InputDropped,
                engine_client::transport::DeathCause::OutputDisconnected => RequestOutcome::OutputDropped,
                engine_client::transport::DeathCause::Restarted => RequestOutcome::Restarted,
                _ => RequestOutcome::Failed,
            },
            engine_client::transport::TransportError::Silence { .. }
            | engine_client::transport::TransportError::Deadline { .. } => RequestOutcome::Silence,
            _ => RequestOutcome::Failed,
        }
    }
}
