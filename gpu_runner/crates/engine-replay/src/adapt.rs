//! Adapters from the results the runs produce to the one observation model
//! the checks read ([`RunObservation`]): a replay run's
//! [`RunResult<D>`](crate::replay::run::RunResult) for every dialect, and
//! the client's side of a gateway's HTTP response ([`client_side`]). The
//! only place the checks meet the runs' result types; when those change,
//! only this module follows.
//!
//! Facts relied on (docs/runner/scenarios.md "Scenarios",
//! docs/runner/tokenspeed.md "TokenSpeed scenarios"):
//! a request's "room" is `max_model_len − prompt` less what the engine
//! holds back ([`Observe::ROOM_HELD_BACK`]: vLLM nothing, TokenSpeed 0.1.1
//! one token); what a dialect keeps of each output goes where the checks
//! read it ([`Observe::observe_outputs`]: vLLM's decoded
//! `EngineCoreOutput`s, TokenSpeed's rows).

use engine_protocol::typed::StopReason;
use serde_json::Value as Json;

use crate::replay::run::{value_to_json, ChildResult, Replay, RequestOutcome, RequestResult, RunResult};
use engine_client::transport::TransportError;
use scenario_checks::check::{
    failure_class, Failure, Observation, Refusal, RequestObservation, RunObservation, UtilityObservation,
};

/// What the observation model needs of a dialect beyond the shared result
/// types (implemented next to each dialect's [`Replay`], in
/// `engine_client::dialect`).
pub trait Observe: Replay {
    /// Tokens of `max_model_len` the engine holds back from a request's
    /// room (`"room"` is `max_model_len − prompt − ROOM_HELD_BACK`).
    const ROOM_HELD_BACK: i64;

    /// Puts what the run kept of a request's outputs where the checks read
    /// them.
    fn observe_outputs(kept: &[Self::Kept], into: &mut Observation);
}

/// The client's side of an HTTP response (gateway under test): the first
/// choice's text, `finish_reason`, and `stop_reason` (or SMG's
/// `matched_stop`) as the body gives them, so the checks replay shares
/// with the gateway judge them alike.
pub fn client_side(text: Option<&str>, finish: &Json, stop: &Json) -> Observation {
    let finish = match finish {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    let stop_reason = match stop {
        Json::Null => None,
        Json::String(s) => Some(StopReason::Text(s.clone())),
        Json::Number(n) if n.as_i64().is_some() => n.as_i64().map(|t| StopReason::TokenId(t.into())),
        Json::Number(n) if n.as_u64().is_some() => n.as_u64().map(|t| StopReason::TokenId(t.into())),
        other => Some(StopReason::Text(other.to_string())),
    };
    Observation { text: text.unwrap_or_default().to_string(), finish, stop_reason, ..Observation::default() }
}

impl<D: Observe> From<&ChildResult<D>> for Observation {
    fn from(c: &ChildResult<D>) -> Observation {
        let mut o = Observation {
            engine_request_id: c.engine_request_id.clone(),
            engine: c.engine,
            engine_indices: c.engine_indices.clone(),
            sent_seed: c.sent_seed,
            engine_tokens: c.engine_tokens.clone(),
            client_tokens: c.client_tokens.clone(),
            text: c.text.clone(),
            finish: c.finish_reason.map(|f| f.as_str().to_string()),
            stop_reason: c.stop_reason.clone(),
            ended: c.outcome,
            failure: c.error.clone().and_then(|message| Some(Failure { class: failure_class(c.outcome)?, message })),
            error: c.error.clone(),
            // Ended by the gateway's abort: the local abort's event, or
            // `abort_after_tokens` where the ABORT ends the request's
            // output (TokenSpeed).
            aborted: c.aborted || c.outcome == RequestOutcome::Aborted,
            abort_sent: c.abort_sent,
            late_ms: c.late_outputs.as_ref().map(|l| l.iter().map(|d| d.as_secs_f64() * 1000.0).collect()),
            logprob_columns: c.logprob_columns.clone(),
            prompt_logprobs_seen: c.prompt_logprobs_seen,
            sent: c.sent.clone(),
            ..Observation::default()
        };
        D::observe_outputs(&c.outputs, &mut o);
        o
    }
}

/// A request's results as the checks read them; `max_model_len` is the
/// engine's.
pub fn request_observation<D: Observe>(r: &RequestResult<D>, max_model_len: i64) -> RequestObservation {
    RequestObservation {
        spec_id: r.spec_id.clone(),
        refused: r.refused.as_ref().map(|(class, message)| Refusal { class: class.clone(), message: message.clone() }),
        sent_max_tokens: r.sent_max_tokens,
        prompt: r.prompt.clone(),
        prompt_len: r.prompt_len,
        room: max_model_len - r.prompt_len as i64 - D::ROOM_HELD_BACK,
        request: r.request.clone(),
        children: r.children.iter().map(Observation::from).collect(),
    }
}

impl<D: Observe> From<&RunResult<D>> for RunObservation {
    fn from(r: &RunResult<D>) -> RunObservation {
        RunObservation {
            requests: r
                .requests
                .iter()
                .map(|(id, rr)| (id.clone(), request_observation(rr, r.max_model_len)))
                .collect(),
            utilities: r
                .utilities
                .iter()
                .map(|(id, u)| {
                    let o = match u {
                        Ok(v) => UtilityObservation::Returned(value_to_json(v)),
                        Err(e @ TransportError::Utility { message, .. }) => {
                            UtilityObservation::Refused { message: message.clone(), shown: e.to_string() }
                        }
                        Err(e) => UtilityObservation::NoAnswer(e.to_string()),
                    };
                    (id.clone(), o)
                })
                .collect(),
            dp_control: r.dp_control.clone(),
            engine_index_mismatches: r.engine_index_mismatches,
        }
    }
}
