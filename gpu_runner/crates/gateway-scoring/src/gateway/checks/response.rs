//! The checks of what the client got: the HTTP status and error body,
//! the first choice's finish and stop reasons and text, the usage counts,
//! a value at a path of the body, the event stream's `[DONE]`, and how
//! long the answer (or the failure) took; and the finding of no response
//! at all where no check judges it.

use serde_json::{json, Value as Json};

use super::super::observe::NoResponse;
use super::super::scenario::Endpoint;
use super::{choice0, json_at, json_close, shared, short, CheckResult, RequestChecks};
use engine_protocol::Value;
use engine_replay::adapt::client_side;
use scenario_checks::check::{CheckFailure, CheckSpec, Count, ScenarioCheck};

fn client_text(ep: Endpoint, body: &Json) -> Option<String> {
    let c = choice0(body)?;
    match ep {
        Endpoint::Completions => c.get("text").and_then(Json::as_str).map(str::to_string),
        Endpoint::Chat => c.get("message").and_then(|m| m.get("content")).and_then(Json::as_str).map(str::to_string),
    }
}

impl RequestChecks<'_> {
    /// No response is the finding unless a check judges it: a failure
    /// expected in time, a gateway that is allowed to be gone, a client
    /// that hung up on purpose.
    pub(super) fn no_response(&self) -> Option<CheckResult> {
        let judges_failure = self
            .req
            .checks
            .iter()
            .any(|c| matches!(c.check, ScenarioCheck::FailsWithin { .. } | ScenarioCheck::ServesOrExits {}));
        let hung_up = self.obs.error.as_ref().is_some_and(NoResponse::client_hung_up);
        match (&self.obs.error, judges_failure || hung_up) {
            (Some(e), false) => Some(self.result("response", false, format!("no HTTP response: {e}"), "")),
            _ => None,
        }
    }

    pub(super) fn status(&self, c: &CheckSpec, is: u16) -> CheckResult {
        let status = self.obs.status;
        let ok = status == Some(is);
        self.result(c.name(), ok, format!("HTTP {status:?}, expected {is}"), c.reference()).differs(
            "HTTP status",
            json!(status),
            json!(is),
        )
    }

    pub(super) fn finish_reason(&self, c: &CheckSpec, is: Option<&str>) -> CheckResult {
        let is = json!(is);
        let got = choice0(&self.body).and_then(|c| c.get("finish_reason")).cloned().unwrap_or(Json::Null);
        let (ok, failure) = shared(&c.check, &client_side(None, &got, &Json::Null));
        self.result(c.name(), ok, format!("got {got}, vLLM: {is}"), c.reference()).shared_failure(failure)
    }

    pub(super) fn text(&self, c: &CheckSpec, is: &str) -> CheckResult {
        let got = client_text(self.req.endpoint, &self.body);
        let (ok, failure) = match got.as_deref() {
            Some(t) => shared(&c.check, &client_side(Some(t), &Json::Null, &Json::Null)),
            None => (false, Some(CheckFailure::Missing("no text in the response"))),
        };
        let is = json!(is);
        let got = got.map_or("none".into(), |t| Json::String(t).to_string());
        self.result(c.name(), ok, format!("got {got}, vLLM: {is}"), c.reference()).shared_failure(failure)
    }

    pub(super) fn stop_reason(&self, c: &CheckSpec, is: Json) -> CheckResult {
        // vLLM's OpenAI server answers `stop_reason`; SMG names it `matched_stop`.
        let c0 = choice0(&self.body);
        let (key, got) = match c0.and_then(|c| c.get("stop_reason")) {
            Some(v) => ("stop_reason", v.clone()),
            None => ("matched_stop", c0.and_then(|c| c.get("matched_stop")).cloned().unwrap_or(Json::Null)),
        };
        let (ok, failure) = shared(&c.check, &client_side(None, &Json::Null, &got));
        self.result(c.name(), ok, format!("{key} {got}, vLLM stop_reason {is}"), c.reference()).shared_failure(failure)
    }

    pub(super) fn prompt_tokens(&self, c: &CheckSpec) -> CheckResult {
        let reference = c.reference();
        let got = self.body.get("usage").and_then(|u| u.get("prompt_tokens")).and_then(Json::as_i64);
        let want = self
            .first_add()
            .map(|a| a.get("prompt_token_ids").and_then(Value::token_ids).map_or(0, |x| x.len() as i64));
        self.result(
            c.name(),
            got.is_some() && got == want,
            format!("usage.prompt_tokens {got:?}, the prompt the gateway sent has {want:?} tokens"),
            if reference.is_empty() { "vLLM's OpenAI server: len(prompt_token_ids)" } else { reference },
        )
        .differs("usage.prompt_tokens", json!(got), json!(want))
    }

    pub(super) fn completion_tokens(&self, c: &CheckSpec, is: &Count) -> CheckResult {
        let got = self.body.get("usage").and_then(|u| u.get("completion_tokens")).and_then(Json::as_i64);
        let want = match (is, self.first_add()) {
            (Count::Room(_), Some(a)) => {
                let p = a.get("prompt_token_ids").and_then(Value::token_ids).map_or(0, |x| x.len()) as i64;
                Some(self.ctx.facts.max_model_len - p)
            }
            (Count::N(n), _) => i64::try_from(*n).ok(),
            (Count::Room(_), None) => None,
        };
        self.result(
            c.name(),
            got.is_some() && got == want,
            format!("usage.completion_tokens {got:?}, expected {want:?}"),
            c.reference(),
        )
        .differs("usage.completion_tokens", json!(got), json!(want))
    }

    pub(super) fn error_response(&self, c: &CheckSpec, status: Option<u64>) -> CheckResult {
        let obs = self.obs;
        let e = self.body.get("error").filter(|e| e.is_object());
        let msg = e.and_then(|e| e.get("message")).and_then(Json::as_str);
        let status_ok = match (obs.status, status) {
            (Some(got), Some(want)) => u64::from(got) == want,
            (Some(got), None) => got >= 400,
            (None, _) => false,
        };
        let ok = status_ok && msg.is_some();
        let d = match (obs.status, &obs.error) {
            (None, Some(err)) => format!("no HTTP response: {err}"),
            _ => format!(
                "HTTP {:?} with {}, expected {} and an `error` object with a message",
                obs.status,
                e.map_or_else(
                    || format!("no `error` object (body {})", short(&self.body)),
                    |e| format!("error {}", short(e))
                ),
                status.map_or("an error status".to_string(), |s| format!("HTTP {s}")),
            ),
        };
        self.result(c.name(), ok, d, c.reference())
    }

    pub(super) fn within_s(&self, c: &CheckSpec, limit: f64) -> CheckResult {
        let seconds = self.obs.seconds;
        let ok = !self.client_gave_up && seconds <= limit;
        let how = if self.client_gave_up { "the client gave up waiting" } else { "answered" };
        self.result(c.name(), ok, format!("{how} after {seconds:.2}s, expected within {limit}s"), c.reference())
    }

    /// No success: an HTTP error status, or a connection refused or
    /// closed; a 2xx is a fake success, waiting out the client's timeout a
    /// hang.
    pub(super) fn fails_within(&self, c: &CheckSpec, limit: f64) -> CheckResult {
        let obs = self.obs;
        let failed = match (obs.status, &obs.error) {
            (Some(st), _) => {
                st >= 400 || obs.body.as_ref().is_some_and(|b| b.get("error").is_some_and(|e| !e.is_null()))
            }
            (None, Some(_)) => !self.client_gave_up,
            (None, None) => false,
        };
        let ok = failed && obs.seconds <= limit;
        let what = match (obs.status, &obs.error) {
            (Some(st), _) => format!("HTTP {st} {}", short(&self.body)),
            (None, Some(e)) => format!("no response: {e}"),
            (None, None) => "nothing".into(),
        };
        self.result(
            c.name(),
            ok,
            format!("{what} after {:.2}s, expected a failure within {limit}s", obs.seconds),
            c.reference(),
        )
    }

    pub(super) fn json(&self, c: &CheckSpec, path: &str, is: &Json) -> CheckResult {
        let got = json_at(&self.body, path).cloned().unwrap_or(Json::Null);
        let ok = json_close(&got, is);
        let detail = format!("got {}, vLLM: {}", short(&got), short(is));
        self.result(&format!("json {path}"), ok, detail, c.reference()).differs("the body's value", got, is.clone())
    }

    pub(super) fn sse_done(&self, c: &CheckSpec) -> CheckResult {
        let d = self.body.get("_sse");
        let done = d.and_then(|d| d.get("done")).and_then(Json::as_u64);
        let last = d.and_then(|d| d.get("done_last")).and_then(Json::as_bool) == Some(true);
        let ok = self.obs.sse.is_some() && done == Some(1) && last;
        let detail = match &self.obs.sse {
            None => "not an event stream (content-type is not text/event-stream)".to_string(),
            Some(x) => format!(
                "{} events, [DONE] {} time(s){}",
                x.len(),
                done.unwrap_or(0),
                if last { ", last" } else { ", not last" }
            ),
        };
        self.result(c.name(), ok, detail, c.reference())
    }
}
