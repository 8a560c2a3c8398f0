//! The gateway-under-test checks: the shared vocabulary ([`Check`], kind
//! [`scenario_checks::check::ScenarioKind::Gateway`]) evaluated against what one
//! request showed on both sides ([`Observed`]). Expected values come from
//! vLLM's frontend: `engine_protocol::translate` with
//! `TranslateOptions::vllm_parity()` for what is sent (checked against the
//! `translation` goldens), the goldens named by `from_golden` and the
//! reference run for what the client gets (docs/runner/gateway.md "Gateway
//! scenarios", "Engine faults"). Every result carries a detail, passed or
//! not, as the report shows it.

use std::collections::BTreeMap;

use engine_protocol::translate::{translate, EngineInfo, GatewayTokenizer, GenerateRequest, TranslateOptions};
use engine_protocol::view::any_view;
use engine_protocol::{ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

use super::observe::{NoResponse, Observed};
use super::scenario::{set_if_absent, Endpoint, GwRequest};
use engine_client::transport::handshake::EngineFacts;
use engine_replay::adapt::client_side;
use scenario_checks::check::{Check, CheckFailure, Count, LogprobsSpec, SentSpec};

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

/// The results of one request's checks, as they are pushed.
struct Results<'r> {
    request: &'r str,
    out: Vec<CheckResult>,
}

impl Results<'_> {
    fn push(&mut self, check: &str, ok: bool, detail: String, reference: &str) -> &mut CheckResult {
        let failure = (!ok).then(|| CheckFailure::Finding(detail.clone()));
        self.out.push(CheckResult {
            request: self.request.to_string(),
            check: check.to_string(),
            ok,
            detail,
            reference: reference.to_string(),
            failure,
        });
        self.out.last_mut().expect("just pushed")
    }
}

impl CheckResult {
    /// A check's result whose failure is the detail in words.
    pub(crate) fn judged(request: &str, check: &str, ok: bool, detail: String, reference: &str) -> CheckResult {
        let mut r = Results { request, out: Vec::new() };
        r.push(check, ok, detail, reference);
        r.out.pop().expect("just pushed")
    }

    /// A failed comparison: `what` was `got`, `expected` was expected.
    fn differs(&mut self, what: &'static str, got: Json, expected: Json) {
        if !self.ok {
            self.failure = Some(CheckFailure::Differs { what, got: Box::new(got), expected: Box::new(expected) });
        }
    }

    /// A failed check shared with replay: its own typed failure.
    fn shared_failure(&mut self, f: Option<CheckFailure>) {
        if let (false, Some(f)) = (self.ok, f) {
            self.failure = Some(f);
        }
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

fn client_text(ep: Endpoint, body: &Json) -> Option<String> {
    let c = choice0(body)?;
    match ep {
        Endpoint::Completions => c.get("text").and_then(Json::as_str).map(str::to_string),
        Endpoint::Chat => c.get("message").and_then(|m| m.get("content")).and_then(Json::as_str).map(str::to_string),
    }
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

/// What vLLM's frontend sends for the request: `translate` with the
/// options checked against the `translation` goldens, on the prompt the
/// gateway sent. For an engine release without the typed API (the mock
/// playing 0.22.0 ... 0.31.0) the translation is 0.32.0's, compared by
/// field name.
fn vllm_expected(req: &GwRequest, prompt: &[i64], ctx: &CheckCtx<'_>) -> Result<Vec<StructValue>, String> {
    let mut v = req.vllm.clone();
    set_if_absent(&mut v, "prompt_token_ids", json!(prompt));
    let g = GenerateRequest::from_json(&v).map_err(|e| format!("the scenario's `vllm` request: {}", e.message))?;
    let release = if engine_client::dialect::vllm::has_typed_api(ctx.release) {
        ctx.release
    } else {
        mock_engine::retarget::SOURCE
    };
    let info = EngineInfo { max_model_len: ctx.facts.max_model_len, release };
    let t = translate(&g, &info, ctx.tokenizer, &TranslateOptions::vllm_parity())
        .map_err(|e| format!("vLLM's frontend refuses this request: {} ({})", e.message, e.field))?;
    Ok(t.requests.iter().map(|r| r.sampling_params().clone()).collect())
}

fn sp_field(add: &StructValue, field: &str) -> Json {
    match add.struct_field("sampling_params").and_then(|sp| sp.get(field)) {
        Some(v) => any_view(v),
        None => Json::Null,
    }
}

fn sorted_ints(v: &Json) -> Vec<i64> {
    let mut xs: Vec<i64> = v.as_array().map(|a| a.iter().filter_map(Json::as_i64).collect()).unwrap_or_default();
    xs.sort_unstable();
    xs.dedup();
    xs
}

/// A check of the client's side that replay has too, decided by the
/// shared implementation ([`scenario_checks::check::replay::check_observation`]):
/// whether it passed, and its failure.
fn shared(check: &Check, obs: &scenario_checks::check::Observation) -> (bool, Option<CheckFailure>) {
    match scenario_checks::check::replay::check_observation(check, obs) {
        Some(Ok(())) => (true, None),
        Some(Err(f)) => (false, Some(f)),
        None => (false, None),
    }
}

/// Evaluates the checks of one request.
pub fn check_request(req: &GwRequest, obs: &Observed, ctx: &CheckCtx<'_>) -> Vec<CheckResult> {
    let mut res = Results { request: &req.id, out: Vec::new() };
    // Always: every message the gateway sent is one vLLM's engine accepts.
    res.push(
        "wire_valid",
        obs.invalid.is_empty(),
        if obs.invalid.is_empty() {
            format!("{} ADD, {} ABORT decoded and validated", obs.adds.len(), obs.aborts.len())
        } else {
            format!("the engine would refuse: {}", obs.invalid.join("; "))
        },
        &format!("engine_protocol decoder (vLLM {} schema and decode-time validation)", ctx.release.version),
    );
    // No response is the finding unless a check judges it: a failure
    // expected in time, a gateway that is allowed to be gone, a client
    // that hung up on purpose.
    let judges_failure =
        req.checks.iter().any(|c| matches!(c.check, Check::FailsWithin { .. } | Check::ServesOrExits {}));
    let hung_up = obs.error.as_ref().is_some_and(NoResponse::client_hung_up);
    if let (Some(e), false) = (&obs.error, judges_failure || hung_up) {
        res.push("response", false, format!("no HTTP response: {e}"), "");
    }
    let client_gave_up = obs.error.as_ref().is_some_and(NoResponse::client_gave_up);
    let body = obs.body.clone().unwrap_or(Json::Null);
    let expected_sp = obs.adds.first().map(|(_, a)| {
        // A list up to 0.33.0, an int32 array from 0.34.0.
        let prompt: Vec<i64> = a.get("prompt_token_ids").and_then(Value::token_ids).unwrap_or_default();
        vllm_expected(req, &prompt, ctx)
    });
    let first_add = obs.adds.first().map(|(_, a)| a);
    let no_add = || "the gateway sent no ADD".to_string();
    for c in &req.checks {
        let name = c.name();
        let reference = c.reference();
        match &c.check {
            Check::Status { is } => {
                let ok = obs.status == Some(*is);
                res.push(name, ok, format!("HTTP {:?}, expected {is}", obs.status), reference).differs(
                    "HTTP status",
                    json!(obs.status),
                    json!(is),
                );
            }
            Check::FinishReason { is } => {
                let is = json!(is);
                let got = choice0(&body).and_then(|c| c.get("finish_reason")).cloned().unwrap_or(Json::Null);
                let (ok, failure) = shared(&c.check, &client_side(None, &got, &Json::Null));
                res.push(name, ok, format!("got {got}, vLLM: {is}"), reference).shared_failure(failure);
            }
            Check::Text { is } => {
                let got = client_text(req.endpoint, &body);
                let (ok, failure) = match got.as_deref() {
                    Some(t) => shared(&c.check, &client_side(Some(t), &Json::Null, &Json::Null)),
                    None => (false, Some(CheckFailure::Missing("no text in the response"))),
                };
                let is = json!(is);
                res.push(
                    name,
                    ok,
                    format!("got {}, vLLM: {is}", got.map_or("none".into(), |t| Json::String(t).to_string())),
                    reference,
                )
                .shared_failure(failure);
            }
            Check::StopReason { is } => {
                let is = is.as_ref().map_or(Json::Null, |s| s.to_json());
                // vLLM's OpenAI server answers `stop_reason`; SMG names it `matched_stop`.
                let c0 = choice0(&body);
                let (key, got) = match c0.and_then(|c| c.get("stop_reason")) {
                    Some(v) => ("stop_reason", v.clone()),
                    None => ("matched_stop", c0.and_then(|c| c.get("matched_stop")).cloned().unwrap_or(Json::Null)),
                };
                let (ok, failure) = shared(&c.check, &client_side(None, &Json::Null, &got));
                res.push(name, ok, format!("{key} {got}, vLLM stop_reason {is}"), reference).shared_failure(failure);
            }
            Check::PromptTokens {} => {
                let got = body.get("usage").and_then(|u| u.get("prompt_tokens")).and_then(Json::as_i64);
                let want = first_add
                    .map(|a| a.get("prompt_token_ids").and_then(Value::token_ids).map_or(0, |x| x.len() as i64));
                res.push(
                    name,
                    got.is_some() && got == want,
                    format!("usage.prompt_tokens {got:?}, the prompt the gateway sent has {want:?} tokens"),
                    if reference.is_empty() { "vLLM's OpenAI server: len(prompt_token_ids)" } else { reference },
                )
                .differs("usage.prompt_tokens", json!(got), json!(want));
            }
            Check::CompletionTokens { is } => {
                let got = body.get("usage").and_then(|u| u.get("completion_tokens")).and_then(Json::as_i64);
                let want = match (is, first_add) {
                    (Count::Room(_), Some(a)) => {
                        let p = a.get("prompt_token_ids").and_then(Value::token_ids).map_or(0, |x| x.len()) as i64;
                        Some(ctx.facts.max_model_len - p)
                    }
                    (Count::N(n), _) => i64::try_from(*n).ok(),
                    (Count::Room(_), None) => None,
                };
                res.push(
                    name,
                    got.is_some() && got == want,
                    format!("usage.completion_tokens {got:?}, expected {want:?}"),
                    reference,
                )
                .differs("usage.completion_tokens", json!(got), json!(want));
            }
            Check::Logprobs(LogprobsSpec::Rendered { k, sample }) => {
                let (ok, detail) = check_logprobs(req.endpoint, &body, sample, *k);
                res.push(name, ok, detail, reference);
            }
            Check::LogprobTokens { k, sample } => {
                let (ok, detail) = check_logprob_tokens(&body, sample, *k);
                res.push(name, ok, detail, reference);
            }
            Check::Sent(SentSpec::Field { field, is, as_set }) => {
                let label = format!("sent {field}");
                let Some(add) = first_add else {
                    res.push(&label, false, no_add(), "");
                    continue;
                };
                let got = sp_field(add, field);
                let (want, refn) = if let Some(x) = is {
                    (Ok(x.clone()), reference.to_string())
                } else {
                    (
                        match &expected_sp {
                            Some(Ok(e)) => Ok(e.first().and_then(|s| s.get(field)).map(any_view).unwrap_or(Json::Null)),
                            Some(Err(e)) => Err(e.clone()),
                            None => Err(no_add()),
                        },
                        "vLLM's frontend (engine_protocol::translate, vllm_parity; checked against the translation goldens)"
                            .to_string(),
                    )
                };
                match want {
                    Err(e) => {
                        res.push(&label, false, e, &refn);
                    }
                    Ok(w) => {
                        let ok = if *as_set { sorted_ints(&got) == sorted_ints(&w) } else { json_eq(&got, &w) };
                        let detail = format!("sent {}, vLLM sends {}", short(&got), short(&w));
                        res.push(&label, ok, detail, &refn).differs("the ADD's sampling_params field", got, w);
                    }
                }
            }
            Check::SentStopTokenIds {} => {
                let Some(add) = first_add else {
                    res.push(name, false, no_add(), "");
                    continue;
                };
                let got = sorted_ints(&sp_field(add, "stop_token_ids"));
                let want = match &expected_sp {
                    Some(Ok(e)) => sorted_ints(
                        &e.first().and_then(|s| s.get("stop_token_ids")).map(any_view).unwrap_or(Json::Null),
                    ),
                    _ => Vec::new(),
                };
                let eos = sp_field(add, "_eos_token_id").as_i64();
                let stops: Vec<String> = req
                    .vllm
                    .get("stop")
                    .and_then(Json::as_array)
                    .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                    .unwrap_or_default();
                let single: BTreeMap<i64, String> = stops
                    .iter()
                    .filter_map(|s| match ctx.tokenizer.encode(s).as_slice() {
                        [t] => Some((i64::from(*t), s.clone())),
                        _ => None,
                    })
                    .collect();
                let missing: Vec<i64> = want.iter().filter(|t| !got.contains(t)).copied().collect();
                let mut notes = Vec::new();
                let mut bad = Vec::new();
                for t in got.iter().filter(|t| !want.contains(t)) {
                    if Some(*t) == eos {
                        notes.push(format!("{t} (the EOS, also `_eos_token_id`)"));
                    } else if let Some(s) = single.get(t) {
                        notes.push(format!("{t} (single-token stop string {s:?})"));
                    } else {
                        bad.push(*t);
                    }
                }
                let ok = missing.is_empty() && bad.is_empty();
                let mut d = format!("sent {got:?}, vLLM sends {want:?}");
                if !missing.is_empty() {
                    d.push_str(&format!("; missing {missing:?}"));
                }
                if !bad.is_empty() {
                    d.push_str(&format!("; unexplained extra {bad:?}"));
                }
                if !notes.is_empty() {
                    d.push_str(&format!("; extra, same effect at the engine: {}", notes.join(", ")));
                }
                res.push(name, ok, d, "vLLM's frontend (translate, vllm_parity)");
            }
            Check::SentStructuredOutputs {} => {
                let Some(add) = first_add else {
                    res.push(name, false, no_add(), "");
                    continue;
                };
                let got = sp_field(add, "structured_outputs");
                let want = match &expected_sp {
                    Some(Ok(e)) => {
                        e.first().and_then(|s| s.get("structured_outputs")).map(any_view).unwrap_or(Json::Null)
                    }
                    _ => Json::Null,
                };
                let (ok, d) = check_structured(&got, &want);
                res.push(
                    name,
                    ok,
                    d,
                    "vLLM's frontend (translate, vllm_parity); vLLM's decoder for one constraint + `_backend`",
                );
            }
            Check::SentSeeds {} => {
                let mut got: Vec<Json> = obs.adds.iter().map(|(_, a)| sp_field(a, "seed")).collect();
                let mut want: Vec<Json> = match &expected_sp {
                    Some(Ok(e)) => e.iter().map(|s| s.get("seed").map(any_view).unwrap_or(Json::Null)).collect(),
                    _ => Vec::new(),
                };
                got.sort_by_key(|x| x.to_string());
                want.sort_by_key(|x| x.to_string());
                let ok = !want.is_empty() && json_eq(&Json::Array(got.clone()), &Json::Array(want.clone()));
                res.push(
                    name,
                    ok,
                    format!(
                        "{} ADDs with seeds {}, vLLM sends {}",
                        got.len(),
                        short(&Json::Array(got)),
                        short(&Json::Array(want))
                    ),
                    "vLLM's frontend (translate, vllm_parity)",
                );
            }
            Check::ErrorResponse { status } => {
                let e = body.get("error").filter(|e| e.is_object());
                let msg = e.and_then(|e| e.get("message")).and_then(Json::as_str);
                let status_ok = match (obs.status, status) {
                    (Some(got), Some(want)) => u64::from(got) == *want,
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
                            || format!("no `error` object (body {})", short(&body)),
                            |e| format!("error {}", short(e))
                        ),
                        status.map_or("an error status".to_string(), |s| format!("HTTP {s}")),
                    ),
                };
                res.push(name, ok, d, reference);
            }
            Check::WithinS { s: limit } => {
                let limit = *limit;
                let ok = !client_gave_up && obs.seconds <= limit;
                let how = if client_gave_up { "the client gave up waiting" } else { "answered" };
                res.push(name, ok, format!("{how} after {:.2}s, expected within {limit}s", obs.seconds), reference);
            }
            Check::FailsWithin { s: limit } => {
                // No success: an HTTP error status, or a connection refused
                // or closed; a 2xx is a fake success, waiting out the
                // client's timeout a hang.
                let limit = *limit;
                let failed = match (obs.status, &obs.error) {
                    (Some(st), _) => {
                        st >= 400 || obs.body.as_ref().is_some_and(|b| b.get("error").is_some_and(|e| !e.is_null()))
                    }
                    (None, Some(_)) => !client_gave_up,
                    (None, None) => false,
                };
                let ok = failed && obs.seconds <= limit;
                let what = match (obs.status, &obs.error) {
                    (Some(st), _) => format!("HTTP {st} {}", short(&body)),
                    (None, Some(e)) => format!("no response: {e}"),
                    (None, None) => "nothing".into(),
                };
                res.push(
                    name,
                    ok,
                    format!("{what} after {:.2}s, expected a failure within {limit}s", obs.seconds),
                    reference,
                );
            }
            Check::Json { path, is } => {
                let got = json_at(&body, path).cloned().unwrap_or(Json::Null);
                let ok = json_close(&got, is);
                let detail = format!("got {}, vLLM: {}", short(&got), short(is));
                res.push(&format!("json {path}"), ok, detail, reference).differs("the body's value", got, is.clone());
            }
            Check::SseDone {} => {
                let d = body.get("_sse");
                let done = d.and_then(|d| d.get("done")).and_then(Json::as_u64);
                let last = d.and_then(|d| d.get("done_last")).and_then(Json::as_bool) == Some(true);
                let ok = obs.sse.is_some() && done == Some(1) && last;
                let detail = match &obs.sse {
                    None => "not an event stream (content-type is not text/event-stream)".to_string(),
                    Some(x) => format!(
                        "{} events, [DONE] {} time(s){}",
                        x.len(),
                        done.unwrap_or(0),
                        if last { ", last" } else { ", not last" }
                    ),
                };
                res.push(name, ok, detail, reference);
            }
            Check::NumAdds { is } => {
                let ok = *is == obs.adds.len() as u64;
                res.push(name, ok, format!("{} ADDs, expected {is}", obs.adds.len()), reference).differs(
                    "ADDs",
                    json!(obs.adds.len()),
                    json!(is),
                );
            }
            Check::EngineAborted { tokens } => {
                // vLLM's frontend aborts the engine request when it stops it
                // locally; a gateway that sent the stop to the engine (a
                // stop token id) may instead see the engine stop by itself
                // at the same token.
                let stop_at = tokens.map(|t| t as usize);
                let mut bad = Vec::new();
                let mut how = Vec::new();
                // Request ids are the gateway's (random): name ADDs by order.
                let multi = obs.adds.len() > 1;
                for (k, (id, _)) in obs.adds.iter().enumerate() {
                    let which = if multi { format!("engine request {k}") } else { "the engine request".to_string() };
                    if let Some((_, t)) = obs.aborts.iter().find(|(a, _)| a == id) {
                        how.push(format!("ABORT for {which} ({t:+.3}s from the response)"));
                    } else if let Some((_, n)) =
                        obs.engine_finished.iter().find(|(f, n)| f == id && stop_at.is_none_or(|s| *n <= s))
                    {
                        how.push(format!("the engine stopped {which} itself after {n} tokens"));
                    } else {
                        let ran = obs.engine_finished.iter().find(|(f, _)| f == id).map(|(_, n)| *n);
                        bad.push(match ran {
                            Some(n) => format!(
                                "no ABORT for {which}: the engine ran on to {n} tokens{}",
                                stop_at.map_or(String::new(), |s| format!(" (vLLM aborts after {s})"))
                            ),
                            None => format!("no ABORT for {which} within {}ms of the response", req.grace.as_millis()),
                        });
                    }
                }
                let ok = !obs.adds.is_empty() && bad.is_empty();
                let d = if obs.adds.is_empty() {
                    no_add()
                } else if ok {
                    how.join("; ")
                } else {
                    bad.join("; ")
                };
                res.push(
                    name,
                    ok,
                    d,
                    if reference.is_empty() {
                        "vLLM's frontend aborts the engine request on a local stop"
                    } else {
                        reference
                    },
                );
            }
            Check::EngineFinished {} | Check::ServesOrExits {} => {
                let (ok, d) = super::steps::check_lifecycle_request(&c.check, obs);
                res.push(name, ok, d, reference);
            }
            // Replay checks never reach a gateway scenario: refused at load.
            _ => {
                res.push(name, false, format!("{name} is not a gateway check"), "");
            }
        }
    }
    res.out
}

/// Exactly one constraint, a `_backend`, and the constraint vLLM sends.
pub(crate) fn check_structured(got: &Json, want: &Json) -> (bool, String) {
    const KINDS: [&str; 6] = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];
    let Some(o) = got.as_object() else {
        return (false, format!("no structured_outputs sent (vLLM sends {})", short(want)));
    };
    let set: Vec<&str> = KINDS.iter().copied().filter(|k| o.get(*k).is_some_and(|v| !v.is_null())).collect();
    let backend = o.get("_backend").cloned().unwrap_or(Json::Null);
    let mut problems = Vec::new();
    if set.len() != 1 {
        problems.push(format!("{} constraint fields set ({set:?}); vLLM's engine needs exactly one", set.len()));
    }
    if backend.as_str().is_none_or(str::is_empty) {
        problems.push(
            "no `_backend` (a fresh vLLM engine fails the request: Unsupported structured output backend: None)".into(),
        );
    }
    let w = want.as_object();
    for k in KINDS {
        let g = o.get(k).cloned().unwrap_or(Json::Null);
        let e = w.and_then(|w| w.get(k)).cloned().unwrap_or(Json::Null);
        let same = json_eq(&g, &e)
            || match (&g, &e) {
                // A schema sent as its text or as the parsed value is the same schema.
                (Json::String(s), x) | (x, Json::String(s)) if k == "json" => {
                    serde_json::from_str::<Json>(s).is_ok_and(|p| json_eq(&p, x))
                }
                _ => false,
            };
        if !same {
            problems.push(format!("{k}: sent {}, vLLM sends {}", short(&g), short(&e)));
        }
    }
    let d = format!("constraint {set:?}, _backend {backend}");
    if problems.is_empty() {
        (true, d)
    } else {
        (false, format!("{d}: {}", problems.join("; ")))
    }
}

/// Chat: the token text of each entry (sampled and top), as vLLM's
/// frontend names them (`decoded_token`).
pub(crate) fn check_logprob_tokens(body: &Json, sample: &Json, k: i64) -> (bool, String) {
    let Some(positions) = sample.as_array() else { return (false, "the golden has no sample logprobs".into()) };
    let content = choice0(body)
        .and_then(|c| c.get("logprobs"))
        .and_then(|l| l.get("content"))
        .and_then(Json::as_array)
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    for (i, pos) in positions.iter().enumerate() {
        let entries = pos.as_array().cloned().unwrap_or_default();
        let c = content.get(i);
        let tok = |x: Option<&Json>| x.and_then(|t| t.get("token")).and_then(Json::as_str).map(str::to_string);
        let show = |t: &Option<String>| t.as_ref().map_or("none".to_string(), |t| Json::String(t.clone()).to_string());
        if let Some(e) = entries.first() {
            let got = tok(c);
            if got.as_deref() != Some(entry_token(e).as_str()) {
                problems.push(format!("position {i}: token {}, vLLM {:?}", show(&got), entry_token(e)));
            }
        }
        let tops: Vec<Option<String>> = c
            .and_then(|c| c.get("top_logprobs"))
            .and_then(Json::as_array)
            .map(|a| a.iter().map(|t| tok(Some(t))).collect())
            .unwrap_or_default();
        for (j, e) in entries.iter().enumerate().filter(|(j, _)| k == -1 || (*j as i64) < k) {
            let got = tops.get(j).cloned().flatten();
            if got.as_deref() != Some(entry_token(e).as_str()) {
                problems.push(format!("position {i} top {j}: {}, vLLM {:?}", show(&got), entry_token(e)));
            }
        }
    }
    if problems.is_empty() {
        (true, format!("{} positions named as vLLM's frontend names them", positions.len()))
    } else {
        let n = problems.len();
        problems.truncate(4);
        (false, format!("{} ({n} differences)", problems.join("; ")))
    }
}

fn entry_token(e: &Json) -> String {
    e.get("decoded_token").and_then(Json::as_str).unwrap_or("").to_string()
}

fn entry_lp(e: &Json) -> f64 {
    let v = e.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NAN);
    v.max(-9999.0)
}

/// vLLM's OpenAI rendering of the frontend's per-position logprob dicts
/// (the golden's `sample`): completions (`_create_completion_logprobs`:
/// the sampled token's logprob, `top_logprobs` the dict items with index
/// `<= k`, keyed by decoded token) or chat (`_create_chat_logprobs`: the
/// first `k` items).
pub(crate) fn check_logprobs(ep: Endpoint, body: &Json, sample: &Json, k: i64) -> (bool, String) {
    let Some(positions) = sample.as_array() else { return (false, "the golden has no sample logprobs".into()) };
    let Some(lp) = choice0(body).and_then(|c| c.get("logprobs")).filter(|l| !l.is_null()) else {
        return (false, "the response has no logprobs".into());
    };
    let mut problems = Vec::new();
    match ep {
        Endpoint::Completions => {
            let toks = lp.get("token_logprobs").and_then(Json::as_array).cloned().unwrap_or_default();
            let tops = lp.get("top_logprobs").and_then(Json::as_array).cloned().unwrap_or_default();
            if toks.len() != positions.len() {
                problems.push(format!("{} token_logprobs, vLLM gives {}", toks.len(), positions.len()));
            }
            if tops.len() != positions.len() {
                problems.push(format!("{} top_logprobs entries, vLLM gives {}", tops.len(), positions.len()));
            }
            for (i, pos) in positions.iter().enumerate() {
                let entries = pos.as_array().cloned().unwrap_or_default();
                let Some(sampled) = entries.first() else { continue };
                if let Some(t) = toks.get(i).and_then(Json::as_f64) {
                    if !close(t, entry_lp(sampled)) {
                        problems.push(format!("position {i}: token_logprob {t}, vLLM {}", entry_lp(sampled)));
                    }
                }
                let mut want: BTreeMap<String, f64> = BTreeMap::new();
                for (j, e) in entries.iter().enumerate() {
                    if k == -1 || k >= j as i64 {
                        want.insert(entry_token(e), entry_lp(e));
                    }
                }
                let got: BTreeMap<String, f64> = tops
                    .get(i)
                    .and_then(Json::as_object)
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN))).collect())
                    .unwrap_or_default();
                let same =
                    got.len() == want.len() && got.iter().all(|(k, v)| want.get(k).is_some_and(|w| close(*v, *w)));
                if !same {
                    problems.push(format!(
                        "position {i}: top_logprobs {}, vLLM {}",
                        short(&json!(got)),
                        short(&json!(want))
                    ));
                }
            }
        }
        Endpoint::Chat => {
            let content = lp.get("content").and_then(Json::as_array).cloned().unwrap_or_default();
            if content.len() != positions.len() {
                problems.push(format!("{} content entries, vLLM gives {}", content.len(), positions.len()));
            }
            for (i, pos) in positions.iter().enumerate() {
                let entries = pos.as_array().cloned().unwrap_or_default();
                let want: Vec<(String, f64)> = entries
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| k == -1 || (*j as i64) < k)
                    .map(|(_, e)| (entry_token(e), entry_lp(e)))
                    .collect();
                let got: Vec<(String, f64)> = content
                    .get(i)
                    .and_then(|c| c.get("top_logprobs"))
                    .and_then(Json::as_array)
                    .map(|a| {
                        a.iter()
                            .map(|t| {
                                (
                                    t.get("token").and_then(Json::as_str).unwrap_or("").to_string(),
                                    t.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NAN),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                // Shaping: how many entries, which logprobs, in which order
                // (the token text is `logprob_tokens`).
                let same = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| close(a.1, b.1));
                let sampled_lp = content.get(i).and_then(|c| c.get("logprob")).and_then(Json::as_f64);
                if let (Some(g), Some(e)) = (sampled_lp, entries.first()) {
                    if !close(g, entry_lp(e)) {
                        problems.push(format!("position {i}: logprob {g}, vLLM {}", entry_lp(e)));
                    }
                }
                if !same {
                    let g: Vec<f64> = got.iter().map(|x| x.1).collect();
                    let w: Vec<f64> = want.iter().map(|x| x.1).collect();
                    problems.push(format!("position {i}: top_logprobs values {g:?}, vLLM {w:?}"));
                }
            }
        }
    }
    if problems.is_empty() {
        (true, format!("{} positions shaped as vLLM's frontend shapes them (k = {k})", positions.len()))
    } else {
        let n = problems.len();
        problems.truncate(3);
        (false, format!("{} ({n} differences)", problems.join("; ")))
    }
}
