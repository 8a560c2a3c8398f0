//! Adapters from the runs' own result types to the one observation model
//! the checks read ([`RunObservation`]): vLLM replay's `RunResult`,
//! TokenSpeed replay's `TsRun`, and the client's side of a gateway's HTTP
//! response ([`client_side`]). The only place the checks meet the result
//! types of the runs; when those change, only this module follows.
//!
//! Facts relied on (docs/runner.md "Scenarios", "TokenSpeed scenarios"):
//! a vLLM request's "room" is `max_model_len − prompt`, a TokenSpeed
//! request's one less (the engine's own clamp); a TokenSpeed request is
//! one engine request; late TokenSpeed rows are always watched after an
//! ABORT.

use engine_protocol::typed::{FinishReason, StopReason};
use serde_json::Value as Json;

use super::observation::{
    Ended, Failure, Observation, Refusal, RequestObservation, RunObservation, UtilityObservation,
};
use crate::scenario::{ChildResult, Outcome, RequestResult, RunResult};
use crate::tokenspeed::scenario::{TsOutcome, TsResult, TsRun};
use crate::transport::TransportError;

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
        Json::Number(n) if n.as_i64().is_some() => n.as_i64().map(StopReason::TokenId),
        other => Some(StopReason::Text(other.to_string())),
    };
    Observation { text: text.unwrap_or_default().to_string(), finish, stop_reason, ..Observation::default() }
}

impl From<Outcome> for Ended {
    fn from(o: Outcome) -> Ended {
        match o {
            Outcome::None => Ended::None,
            Outcome::Finished => Ended::Finished,
            Outcome::ErrorOutput => Ended::ErrorOutput,
            Outcome::Aborted => Ended::Aborted,
            Outcome::DeathSentinel => Ended::DeathSentinel,
            Outcome::InputDropped => Ended::InputDropped,
            Outcome::OutputDropped => Ended::OutputDropped,
            Outcome::Restarted => Ended::Restarted,
            Outcome::Silence => Ended::Silence,
            Outcome::Failed => Ended::Failed,
        }
    }
}

impl From<TsOutcome> for Ended {
    fn from(o: TsOutcome) -> Ended {
        match o {
            TsOutcome::None => Ended::None,
            TsOutcome::Finished => Ended::Finished,
            TsOutcome::AbortRow => Ended::AbortRow,
            TsOutcome::Aborted => Ended::Aborted,
            TsOutcome::Refused => Ended::Refused,
            TsOutcome::Silence => Ended::Silence,
            TsOutcome::DeathSentinel => Ended::DeathSentinel,
            TsOutcome::Failed => Ended::Failed,
        }
    }
}

fn failure(ended: Ended, error: &Option<String>) -> Option<Failure> {
    let message = error.clone()?;
    Some(Failure { class: ended.failure_class()?, message })
}

fn finish_name(f: FinishReason) -> String {
    f.as_str().to_string()
}

impl From<&ChildResult> for Observation {
    fn from(c: &ChildResult) -> Observation {
        let ended = Ended::from(c.outcome);
        Observation {
            engine_request_id: c.engine_request_id.clone(),
            sent_seed: c.sent_seed,
            engine_tokens: c.engine_tokens.clone(),
            client_tokens: c.client_tokens.clone(),
            text: c.text.clone(),
            finish: c.finish_reason.map(finish_name),
            stop_reason: c.stop_reason.clone(),
            ended,
            failure: failure(ended, &c.error),
            error: c.error.clone(),
            aborted: c.aborted,
            abort_sent: c.abort_sent,
            late_ms: c.late_outputs.as_ref().map(|l| l.iter().map(|d| d.as_secs_f64() * 1000.0).collect()),
            logprob_columns: c.logprob_columns.clone(),
            prompt_logprobs_seen: c.prompt_logprobs_seen,
            outputs: c.outputs.clone(),
            rows: Vec::new(),
            sent: None,
        }
    }
}

impl RequestObservation {
    /// A vLLM request's results; `max_model_len` is the engine's.
    pub fn from_vllm(r: &RequestResult, max_model_len: i64) -> RequestObservation {
        RequestObservation {
            spec_id: r.spec_id.clone(),
            refused: r
                .refused
                .as_ref()
                .map(|(class, message)| Refusal { class: class.clone(), message: message.clone() }),
            sent_max_tokens: r.sent_max_tokens,
            prompt: r.prompt.clone(),
            prompt_len: r.prompt_len,
            room: max_model_len - r.prompt_len as i64,
            request: r.request.clone(),
            children: r.children.iter().map(Observation::from).collect(),
        }
    }

    /// A TokenSpeed request's results (one engine request).
    pub fn from_tokenspeed(id: &str, r: &TsResult, max_model_len: i64) -> RequestObservation {
        let ended = Ended::from(r.outcome);
        let child = Observation {
            engine_request_id: r.rid.clone(),
            engine_tokens: r.engine_tokens.clone(),
            client_tokens: r.client_tokens.clone(),
            text: r.text.clone(),
            finish: r.finish.clone(),
            stop_reason: r.stop_reason.clone(),
            ended,
            failure: failure(ended, &r.error),
            error: r.error.clone(),
            aborted: r.outcome == TsOutcome::Aborted,
            abort_sent: r.abort_sent,
            late_ms: Some(r.late_rows_ms.iter().map(|ms| *ms as f64).collect()),
            rows: r.rows.iter().map(|x| x.row.clone()).collect(),
            sent: r.sent.clone(),
            ..Observation::default()
        };
        RequestObservation {
            spec_id: id.to_string(),
            refused: r
                .refused
                .as_ref()
                .map(|(class, message)| Refusal { class: class.clone(), message: message.clone() }),
            sent_max_tokens: None,
            prompt: Vec::new(),
            prompt_len: r.prompt_len,
            room: max_model_len - r.prompt_len as i64 - 1,
            request: serde_json::Value::Null,
            children: vec![child],
        }
    }
}

impl From<&RunResult> for RunObservation {
    fn from(r: &RunResult) -> RunObservation {
        RunObservation {
            requests: r
                .requests
                .iter()
                .map(|(id, rr)| (id.clone(), RequestObservation::from_vllm(rr, r.max_model_len)))
                .collect(),
            utilities: r
                .utilities
                .iter()
                .map(|(id, u)| {
                    let o = match u {
                        Ok(v) => UtilityObservation::Returned(crate::scenario::value_to_json(v)),
                        Err(e @ TransportError::Utility { message, .. }) => {
                            UtilityObservation::Refused { message: message.clone(), shown: e.to_string() }
                        }
                        Err(e) => UtilityObservation::NoAnswer(e.to_string()),
                    };
                    (id.clone(), o)
                })
                .collect(),
        }
    }
}

impl From<&TsRun> for RunObservation {
    fn from(r: &TsRun) -> RunObservation {
        RunObservation {
            requests: r
                .requests
                .iter()
                .map(|(id, res)| (id.clone(), RequestObservation::from_tokenspeed(id, res, r.max_model_len)))
                .collect(),
            utilities: Default::default(),
        }
    }
}
