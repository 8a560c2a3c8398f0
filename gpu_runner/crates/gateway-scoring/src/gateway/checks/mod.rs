//! The gateway-under-test checks: the shared vocabulary ([`ScenarioCheck`], kind
//! [`scenario_checks::check::ScenarioKind::Gateway`]) evaluated against what one
//! request showed on both sides ([`Observed`]). Expected values come from
//! vLLM's frontend: `engine_protocol::translate` with
//! `TranslateOptions::vllm_parity()` for what is sent (checked against the
//! `translation` goldens), the goldens named by `from_golden` and the
//! reference run for what the client gets (docs/runner/gateway.md "Gateway
//! scenarios", "Engine faults"). Every result carries a detail, passed or
//! not, as the report shows it.
//!
//! One function per check, on `RequestChecks` (what every check of one
//! request reads), by family:
//! - `response`: what the client got (status, text, usage, timing,
//!   errors, the event stream);
//! - `wire`: what the gateway sent the engine (the ADDs' sampling
//!   params, ABORTs, the engine's own ends);
//! - `logprobs`: the client's logprobs against vLLM's rendering.

mod logprobs;
mod response;
mod wire;

use engine_protocol::{StructValue, Value};
use serde_json::Value as Json;

use super::observe::{NoResponse, Observed};
use super::scenario::GwRequest;
use engine_client::transport::handshake::EngineFacts;
use engine_protocol::translate::GatewayTokenizer;
use engine_protocol::ReleaseSchema;
use scenario_checks::check::{CheckFailure, CheckSpec, LogprobsSpec, ScenarioCheck, SentSpec};

// The gateway tests judge these on goldens directly.
#[cfg(test)]
pub(crate) use logprobs::{check_logprob_tokens, check_logprobs};
#[cfg(test)]
pub(crate) use wire::check_structured;

/// One check's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub request: String,
    pub check: String,
    pub ok: bool,
    /// What the report shows, passed or not.
    pub detail: String,
    /// Where the expected value comes from.
    pub reference: String,
    /// What differed, typed (`None` when it passed): the expected and
    /// observed values for the checks that compare one value, the finding
    /// in words for the others.
    pub failure: Option<CheckFailure>,
}

impl CheckResult {
    /// A check's result whose failure is the detail in words.
    pub(crate) fn judged(request: &str, check: &str, ok: bool, detail: String, reference: &str) -> CheckResult {
        let failure = (!ok).then(|| CheckFailure::Finding(detail.clone()));
        CheckResult {
            request: request.to_string(),
            check: check.to_string(),
            ok,
            detail,
            reference: reference.to_string(),
            failure,
        }
    }

    /// A failed comparison: `what` was `got`, `expected` was expected.
    fn differs(mut self, what: &'static str, got: Json, expected: Json) -> CheckResult {
        if !self.ok {
            self.failure = Some(CheckFailure::Differs { what, got: Box::new(got), expected: Box::new(expected) });
        }
        self
    }

    /// A failed check shared with replay: its own typed failure.
    fn shared_failure(mut self, f: Option<CheckFailure>) -> CheckResult {
        if let (false, Some(f)) = (self.ok, f) {
            self.failure = Some(f);
        }
        self
    }
}

/// Facts the checks need.
pub struct CheckCtx<'a> {
    pub tokenizer: &'a GatewayTokenizer,
    pub facts: &'a EngineFacts,
    pub release: &'static ReleaseSchema,
}

fn choice0(body: &Json) -> Option<&Json> {
    body.get("choices").and_then(Json::as_array).and_then(|c| c.first())
}

/// Numbers equal as f64, everything else structurally.
pub fn json_eq(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The value at a dotted path (`choices.0.prompt_logprobs`; numbers
/// index arrays).
pub fn json_at<'a>(v: &'a Json, path: &str) -> Option<&'a Json> {
    path.split('.').filter(|p| !p.is_empty()).try_fold(v, |v, p| match v {
        Json::Array(xs) => p.parse::<usize>().ok().and_then(|i| xs.get(i)),
        Json::Object(m) => m.get(p),
        _ => None,
    })
}

/// [`json_eq`] with numbers equal within a relative 1e-6 (logprobs are
/// float32 on the wire; vLLM prints them as float64).
pub fn json_close(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => close(x, y),
            _ => false,
        },
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_close(a, b)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_close(v, w)))
        }
        _ => a == b,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a == b) || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        s.chars().take(200).collect::<String>() + "…"
    } else {
        s
    }
}

/// What every check of one request reads: the request, what it showed,
/// the facts, and what follows from them once.
struct RequestChecks<'a> {
    req: &'a GwRequest,
    obs: &'a Observed,
    ctx: &'a CheckCtx<'a>,
    /// The client's body (`null` when none).
    body: Json,
    /// What vLLM's frontend sends for the first ADD's prompt (`None`: no
    /// ADD).
    expected_sp: Option<Result<Vec<StructValue>, String>>,
    /// The client stopped waiting (its timeout).
    client_gave_up: bool,
}

impl<'a> RequestChecks<'a> {
    fn new(req: &'a GwRequest, obs: &'a Observed, ctx: &'a CheckCtx<'a>) -> Self {
        let expected_sp = obs.adds.first().map(|(_, a)| {
            // A list up to 0.33.0, an int32 array from 0.34.0.
            let prompt: Vec<i64> = a.get("prompt_token_ids").and_then(Value::token_ids).unwrap_or_default();
            wire::vllm_expected(req, &prompt, ctx)
        });
        RequestChecks {
            req,
            obs,
            ctx,
            body: obs.body.clone().unwrap_or(Json::Null),
            expected_sp,
            client_gave_up: obs.error.as_ref().is_some_and(NoResponse::client_gave_up),
        }
    }

    /// The first ADD the engine read.
    fn first_add(&self) -> Option<&'a StructValue> {
        self.obs.adds.first().map(|(_, a)| a)
    }

    /// A result of this request.
    fn result(&self, check: &str, ok: bool, detail: String, reference: &str) -> CheckResult {
        CheckResult::judged(&self.req.id, check, ok, detail, reference)
    }

    /// One check of the request's list.
    fn check(&self, c: &CheckSpec) -> CheckResult {
        match &c.check {
            ScenarioCheck::Status { is } => self.status(c, *is),
            ScenarioCheck::FinishReason { is } => self.finish_reason(c, is.as_deref()),
            ScenarioCheck::Text { is } => self.text(c, is),
            ScenarioCheck::StopReason { is } => self.stop_reason(c, is.as_ref().map_or(Json::Null, |s| s.to_json())),
            ScenarioCheck::PromptTokens {} => self.prompt_tokens(c),
            ScenarioCheck::CompletionTokens { is } => self.completion_tokens(c, is),
            ScenarioCheck::Logprobs(LogprobsSpec::Rendered { k, sample }) => self.logprobs(c, sample, *k),
            ScenarioCheck::LogprobTokens { k, sample } => self.logprob_tokens(c, sample, *k),
            ScenarioCheck::Sent(SentSpec::Field { field, is, as_set }) => {
                self.sent_field(c, field, is.as_ref(), *as_set)
            }
            ScenarioCheck::SentStopTokenIds {} => self.sent_stop_token_ids(c),
            ScenarioCheck::SentStructuredOutputs {} => self.sent_structured_outputs(c),
            ScenarioCheck::SentSeeds {} => self.sent_seeds(c),
            ScenarioCheck::ErrorResponse { status } => self.error_response(c, *status),
            ScenarioCheck::WithinS { s } => self.within_s(c, *s),
            ScenarioCheck::FailsWithin { s } => self.fails_within(c, *s),
            ScenarioCheck::Json { path, is } => self.json(c, path, is),
            ScenarioCheck::SseDone {} => self.sse_done(c),
            ScenarioCheck::NumAdds { is } => self.num_adds(c, *is),
            ScenarioCheck::EngineAborted { tokens } => self.engine_aborted(c, *tokens),
            ScenarioCheck::EngineFinished {} | ScenarioCheck::ServesOrExits {} => self.lifecycle(c),
            // Replay checks never reach a gateway scenario: refused at load.
            _ => {
                let name = c.name();
                self.result(name, false, format!("{name} is not a gateway check"), "")
            }
        }
    }
}

/// A check of the client's side that replay has too, decided by the
/// shared implementation ([`scenario_checks::check::replay::check_observation`]):
/// whether it passed, and its failure.
fn shared(check: &ScenarioCheck, obs: &scenario_checks::check::Observation) -> (bool, Option<CheckFailure>) {
    match scenario_checks::check::replay::check_observation(check, obs) {
        Some(Ok(())) => (true, None),
        Some(Err(f)) => (false, Some(f)),
        None => (false, None),
    }
}

/// Evaluates the checks of one request.
pub fn check_request(req: &GwRequest, obs: &Observed, ctx: &CheckCtx<'_>) -> Vec<CheckResult> {
    let r = RequestChecks::new(req, obs, ctx);
    // Always: every message the gateway sent is one vLLM's engine accepts.
    let mut out = vec![r.wire_valid()];
    out.extend(r.no_response());
    out.extend(req.checks.iter().map(|c| r.check(c)));
    out
}
