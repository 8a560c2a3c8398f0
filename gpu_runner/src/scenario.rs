//! Scenarios as data (`golden/replay/*.json`, format in docs/runner.md
//! "Scenarios"): gateway-level requests, translated by
//! `engine_protocol::translate` (max_tokens from the room left, EOS ids,
//! stop strings, `n` fan-out, structured-output backend), sent over the
//! transport, with the gateway's stop-string detection
//! (`translate::RequestStream`) run on the outputs, then checked.
//!
//! Requests may also be sent *raw*, around the gateway's validation: the
//! translated request edited field by field and encoded without
//! validation (`engine_protocol::internal::encode_payload_unvalidated`), or
//! input frames given as hex. They show what the engine itself does with
//! input a gateway must never send (docs/runner.md "What the engine does
//! with bad input").
//!
//! A scenario's verdict is pass, fail (with every failed check), drift
//! (passed, but the decoder saw fields the schema does not know) or skip
//! (it needs something this engine does not have).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

use engine_protocol::internal::encode_payload_unvalidated;
use engine_protocol::translate::{
    self, EngineInfo, EngineRow, EngineStep, GatewayTokenizer, GenerateRequest, LogprobShaper,
    RequestStream as StopStream, TranslateOptions,
};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::Numbers;
use engine_protocol::{MessageKind, StructValue, Value};
use serde_json::{json, Value as Json};

use crate::handshake::EngineFacts;
use crate::transport::{DeathCause, Gateway, RequestEvent, RequestStream, TransportError};

/// A request sent around the gateway's validation (both dialects).
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    /// The translated request with these fields replaced (dotted paths
    /// into the dialect's request struct: vLLM's `EngineCoreRequest`, e.g.
    /// `sampling_params.structured_outputs._backend`, or TokenSpeed's
    /// `TokenizedGenerateReqInput`), encoded without validation.
    Edit(Vec<(String, Json)>),
    /// Input frames (`[type byte, payload, aux...]`), sent as they are.
    Frames(Vec<Vec<u8>>),
}

/// What a dialect adds to the scenario model both dialects share (the
/// header, the request specs, `after` levels, raw requests, the check
/// vocabulary's validation).
pub trait Dialect: Sized {
    /// Request-spec fields only this dialect has.
    type Request: Clone + std::fmt::Debug;
    /// Scenario fields only this dialect has.
    type Scenario: Clone + std::fmt::Debug;
    /// The checks a scenario of this dialect may list.
    const CHECKS: &'static [&'static str];
    /// Why a scenario with no requests (and nothing else to do) is refused.
    const EMPTY: &'static str;
    /// This dialect's fields of request `r`; `at` names it in errors.
    fn request(r: &Json, at: &str) -> Result<Self::Request, String>;
    /// This dialect's fields of the scenario object `o` named `name`.
    fn scenario(o: &serde_json::Map<String, Json>, name: &str) -> Result<Self::Scenario, String>;
    /// Whether the scenario has work besides its requests.
    fn other_work(_: &Self::Scenario) -> bool {
        false
    }
    /// This dialect's validation of check `c` (of kind `kind`) at load.
    fn check(_kind: &str, _c: &Json, _at: &str) -> Result<(), String> {
        Ok(())
    }
}

/// One request of a scenario.
#[derive(Debug, Clone)]
pub struct RequestSpecOf<D: Dialect> {
    pub id: String,
    /// The gateway-level request (vLLM `SamplingParams` names plus
    /// `prompt_token_ids`, or `prompt` text).
    pub request: Json,
    /// Sent once the request of this id (all its copies) is done.
    pub after: Option<String>,
    /// ABORT after this many output tokens.
    pub abort_after_tokens: Option<usize>,
    /// After the gateway aborts the request, watch this long for outputs
    /// that still arrive for it.
    pub grace: Duration,
    /// Give up waiting after this long (the engine fell silent).
    pub wait: Option<Duration>,
    pub raw: Option<Raw>,
    /// The dialect's own fields.
    pub dialect: D::Request,
}

/// A scenario: the header both dialects share, its requests, and the
/// dialect's own fields.
#[derive(Debug, Clone)]
pub struct ScenarioOf<D: Dialect> {
    pub name: String,
    pub doc: String,
    /// Engines this scenario runs on (`mock`, `vllm-cpu`, `vllm`,
    /// `tokenspeed`, `attach`); empty = all.
    pub engines: Vec<String>,
    /// Runs on an engine started for it alone (after every other scenario).
    pub fresh_engine: bool,
    pub requests: Vec<RequestSpecOf<D>>,
    pub checks: Vec<Json>,
    /// `timeout_s` (default 60 s).
    pub timeout: Duration,
    /// The dialect's own fields.
    pub dialect: D::Scenario,
}

/// The vLLM dialect.
#[derive(Debug, Clone)]
pub struct Vllm;

/// vLLM's own request-spec fields.
#[derive(Debug, Clone)]
pub struct VllmRequest {
    /// Copies sent at once (`<id>-<i>`), for concurrency.
    pub repeat: usize,
    /// Copy `i` gets token `10 + i` appended to its prompt, so that every
    /// copy has its own tokens.
    pub vary_prompt: bool,
    /// Copies one after another instead of at once.
    pub sequential: bool,
}

/// vLLM's own scenario fields.
#[derive(Debug, Clone, Default)]
pub struct VllmScenario {
    pub utilities: Vec<UtilitySpec>,
}

pub type Scenario = ScenarioOf<Vllm>;
pub type RequestSpec = RequestSpecOf<Vllm>;

/// A utility call of a scenario.
#[derive(Debug, Clone)]
pub struct UtilitySpec {
    pub id: String,
    pub method: String,
    pub args: Vec<Json>,
}

impl Dialect for Vllm {
    type Request = VllmRequest;
    type Scenario = VllmScenario;
    const CHECKS: &'static [&'static str] = CHECKS;
    const EMPTY: &'static str = "no requests and no utilities";

    fn request(r: &Json, _at: &str) -> Result<VllmRequest, String> {
        Ok(VllmRequest {
            repeat: r.get("repeat").and_then(Json::as_u64).unwrap_or(1).clamp(1, 1024) as usize,
            vary_prompt: r.get("vary_prompt").and_then(Json::as_bool).unwrap_or(false),
            sequential: r.get("sequential").and_then(Json::as_bool).unwrap_or(false),
        })
    }

    fn scenario(o: &serde_json::Map<String, Json>, name: &str) -> Result<VllmScenario, String> {
        let mut utilities = Vec::new();
        for (i, u) in o.get("utilities").and_then(Json::as_array).map_or(&[][..], |a| a.as_slice()).iter().enumerate() {
            let id = u.get("id").and_then(Json::as_str).ok_or_else(|| format!("{name}: utilities[{i}].id missing"))?;
            let method = u
                .get("method")
                .and_then(Json::as_str)
                .ok_or_else(|| format!("{name}: utilities[{i}].method missing"))?;
            let args = u.get("args").and_then(Json::as_array).cloned().unwrap_or_default();
            utilities.push(UtilitySpec { id: id.into(), method: method.into(), args });
        }
        Ok(VllmScenario { utilities })
    }

    fn other_work(s: &VllmScenario) -> bool {
        !s.utilities.is_empty()
    }

    fn check(kind: &str, c: &Json, at: &str) -> Result<(), String> {
        if kind == "satisfies_constraint" {
            if let Some(re) = c.get("language_regex").and_then(Json::as_str) {
                full_match_regex(re).map_err(|e| format!("{at}.language_regex: {e}"))?;
            }
        }
        Ok(())
    }
}

fn millis(v: Option<&Json>) -> Option<Duration> {
    v.and_then(Json::as_f64).filter(|x| x.is_finite() && *x >= 0.0).map(|x| Duration::from_secs_f64(x / 1000.0))
}

fn hex_frame(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok())).collect()
}

impl<D: Dialect> ScenarioOf<D> {
    /// Parses a scenario file's text; `name_hint` (the file stem) names
    /// it when it has no `scenario`.
    pub fn from_json(name_hint: &str, text: &str) -> Result<ScenarioOf<D>, String> {
        let v: Json = serde_json::from_str(text).map_err(|e| format!("{name_hint}: {e}"))?;
        let o = v.as_object().ok_or_else(|| format!("{name_hint}: expected a JSON object"))?;
        let name = o.get("scenario").and_then(Json::as_str).unwrap_or(name_hint).to_string();
        let strs = |k: &str| -> Vec<String> {
            o.get(k)
                .and_then(Json::as_array)
                .map_or(Vec::new(), |a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        };
        let mut requests: Vec<RequestSpecOf<D>> = Vec::new();
        for (i, r) in o.get("requests").and_then(Json::as_array).map_or(&[][..], |a| a.as_slice()).iter().enumerate() {
            let at = format!("{name}: requests[{i}]");
            let id = r.get("id").and_then(Json::as_str).ok_or_else(|| format!("{at}.id missing"))?;
            let raw = match r.get("raw") {
                None => None,
                Some(raw) => Some(parse_raw(raw).map_err(|e| format!("{at}.raw: {e}"))?),
            };
            let request = match (r.get("request"), &raw) {
                (Some(q), _) if q.is_object() => q.clone(),
                (Some(_), _) => return Err(format!("{at}.request must be an object")),
                (None, Some(Raw::Frames(_))) => json!({}),
                (None, _) => return Err(format!("{at}.request missing")),
            };
            if requests.iter().any(|q| q.id == id) {
                return Err(format!("{at}: duplicate id {id:?}"));
            }
            requests.push(RequestSpecOf {
                id: id.to_string(),
                request,
                after: r.get("after").and_then(Json::as_str).map(str::to_string),
                abort_after_tokens: r.get("abort_after_tokens").and_then(Json::as_u64).map(|n| n as usize),
                grace: millis(r.get("grace_ms")).unwrap_or(Duration::ZERO),
                wait: millis(r.get("wait_ms")),
                raw,
                dialect: D::request(r, &at)?,
            });
        }
        for r in &requests {
            if let Some(a) = &r.after {
                if !requests.iter().any(|q| &q.id == a) {
                    return Err(format!("{name}: request {} is after {a:?}, which is no request", r.id));
                }
            }
        }
        levels(&requests).map_err(|e| format!("{name}: {e}"))?;
        let dialect = D::scenario(o, &name)?;
        let checks = o.get("checks").and_then(Json::as_array).cloned().unwrap_or_default();
        for (i, c) in checks.iter().enumerate() {
            let at = format!("{name}: checks[{i}]");
            let kind = c.get("check").and_then(Json::as_str).ok_or_else(|| format!("{at}.check missing"))?;
            if !D::CHECKS.contains(&kind) {
                return Err(format!("{at}: unknown check {kind:?}"));
            }
            D::check(kind, c, &at)?;
        }
        if requests.is_empty() && !D::other_work(&dialect) {
            return Err(format!("{name}: {}", D::EMPTY));
        }
        let timeout = Duration::from_secs(o.get("timeout_s").and_then(Json::as_u64).unwrap_or(60));
        Ok(ScenarioOf {
            name,
            doc: o.get("doc").and_then(Json::as_str).unwrap_or("").to_string(),
            engines: strs("engines"),
            fresh_engine: o.get("fresh_engine").and_then(Json::as_bool).unwrap_or(false),
            requests,
            checks,
            timeout,
            dialect,
        })
    }

    pub fn runs_on(&self, engine: &str) -> bool {
        self.engines.is_empty() || self.engines.iter().any(|e| e == engine)
    }
}

fn parse_raw(raw: &Json) -> Result<Raw, String> {
    if let Some(frames) = raw.get("frames") {
        let frames = frames.as_array().ok_or("`frames` must be a list of hex strings")?;
        let frames: Option<Vec<Vec<u8>>> = frames.iter().map(|f| f.as_str().and_then(hex_frame)).collect();
        let frames = frames.ok_or("`frames` must be a list of hex strings")?;
        if frames.is_empty() {
            return Err("`frames` is empty".into());
        }
        return Ok(Raw::Frames(frames));
    }
    if let Some(set) = raw.get("set") {
        let set = set.as_object().ok_or("`set` must map field paths to values")?;
        return Ok(Raw::Edit(set.iter().map(|(k, v)| (k.clone(), v.clone())).collect()));
    }
    Err("expected `frames` or `set`".into())
}

/// Groups requests by `after`: level 0 has none, level n+1 waits for a
/// request of level n. An `after` cycle is an error.
pub fn levels<D: Dialect>(requests: &[RequestSpecOf<D>]) -> Result<Vec<Vec<usize>>, String> {
    let mut level: Vec<Option<usize>> = vec![None; requests.len()];
    for _ in 0..=requests.len() {
        let mut changed = false;
        for (i, r) in requests.iter().enumerate() {
            if level[i].is_some() {
                continue;
            }
            let l = match &r.after {
                None => Some(0),
                Some(a) => requests.iter().position(|q| &q.id == a).and_then(|j| level[j]).map(|l| l + 1),
            };
            if l.is_some() {
                level[i] = l;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    if let Some(i) = level.iter().position(Option::is_none) {
        return Err(format!("request {} waits for itself (an `after` cycle)", requests[i].id));
    }
    let n = level.iter().flatten().max().map_or(0, |m| m + 1);
    let mut out = vec![Vec::new(); n];
    for (i, l) in level.iter().enumerate() {
        if let Some(l) = l {
            out[*l].push(i);
        }
    }
    Ok(out)
}

/// The checks a scenario may list.
pub const CHECKS: &[&str] = &[
    "finish_reason",
    "stop_reason",
    "num_tokens",
    "max_tokens_honoured",
    "sent_max_tokens",
    "same_tokens",
    "same_tokens_pairwise",
    "different_tokens",
    "tokens",
    "no_token_in_first",
    "text",
    "text_contains",
    "text_not_contains",
    "logprobs_columns",
    "sample_logprobs",
    "prompt_logprobs",
    "prompt_logprobs_present",
    "satisfies_constraint",
    "num_children",
    "child_seeds",
    "distinct_child_ids",
    "refused",
    "failed",
    "aborted",
    "silent_after_abort",
    "engine_outcome",
    "utility_result",
    "utility_failure",
    "all_finished",
];

/// Loads every `*.json` under `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> Result<Vec<Scenario>, String> {
    load_dir_of(dir)
}

/// Loads every `*.json` under `dir` as a scenario of dialect `D`, sorted by
/// file name.
pub fn load_dir_of<D: Dialect>(dir: &Path) -> Result<Vec<ScenarioOf<D>>, String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            ScenarioOf::from_json(&stem, &text)
        })
        .collect()
}

/// How an engine request ended, as the gateway saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Outcome {
    /// Not sent (or not yet ended).
    #[default]
    None,
    /// Finished by the engine (stop, length) or by the gateway's stop
    /// detection.
    Finished,
    /// The engine finished it with `FinishReason.ERROR`.
    ErrorOutput,
    /// Aborted by the gateway (`abort_after_tokens`).
    Aborted,
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

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::None => "none",
            Outcome::Finished => "finished",
            Outcome::ErrorOutput => "error_output",
            Outcome::Aborted => "aborted",
            Outcome::DeathSentinel => "death_sentinel",
            Outcome::InputDropped => "input_dropped",
            Outcome::OutputDropped => "output_dropped",
            Outcome::Restarted => "restarted",
            Outcome::Silence => "silence",
            Outcome::Failed => "failed",
        }
    }

    fn of_error(e: &TransportError) -> Outcome {
        match e {
            TransportError::EngineDead { cause, .. } => match cause {
                DeathCause::Sentinel => Outcome::DeathSentinel,
                DeathCause::InputDisconnected => Outcome::InputDropped,
                DeathCause::OutputDisconnected => Outcome::OutputDropped,
                DeathCause::Restarted => Outcome::Restarted,
            },
            TransportError::Silence { .. } | TransportError::Deadline { .. } => Outcome::Silence,
            _ => Outcome::Failed,
        }
    }
}

/// What the client of one engine request saw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChildResult {
    pub engine_request_id: String,
    /// The `seed` sent to the engine.
    pub sent_seed: Option<i64>,
    /// Every token the engine sent.
    pub engine_tokens: Vec<i64>,
    /// After the gateway's stop detection.
    pub client_tokens: Vec<i64>,
    pub text: String,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
    pub outcome: Outcome,
    pub aborted: bool,
    /// The gateway sent an ABORT for it (stop string found, or
    /// `abort_after_tokens`).
    pub abort_sent: bool,
    /// Outputs that arrived after the ABORT: how long after it, over the
    /// request's grace period (`None`: not watched).
    pub late_outputs: Option<Vec<Duration>>,
    /// Columns of `new_logprobs` per output step.
    pub logprob_columns: Vec<i64>,
    pub prompt_logprobs_seen: bool,
    /// Every output of the request, as decoded.
    pub outputs: Vec<StructValue>,
}

/// What one request spec produced.
#[derive(Debug, Clone, Default)]
pub struct RequestResult {
    /// The id in the scenario (without the `-<i>` of repeats).
    pub spec_id: String,
    /// Translation refused: `(class, message)`.
    pub refused: Option<(String, String)>,
    /// `max_tokens` sent to the engine.
    pub sent_max_tokens: Option<i64>,
    pub prompt: Vec<i64>,
    pub prompt_len: usize,
    /// The request as the scenario gave it (after `vary_prompt`).
    pub request: Json,
    pub children: Vec<ChildResult>,
}

/// Everything a scenario run produced.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// The engine's `max_model_len` (for `"room"`).
    pub max_model_len: i64,
    pub requests: BTreeMap<String, RequestResult>,
    /// Each utility call's result, or why it has none.
    pub utilities: BTreeMap<String, Result<Value, TransportError>>,
    pub drift: Vec<String>,
}

/// What the runner knows about the engine and the model.
pub struct Context<'a> {
    pub gateway: &'a Gateway,
    pub engine: u16,
    pub facts: &'a EngineFacts,
    pub tokenizer: &'a GatewayTokenizer,
    pub options: TranslateOptions,
}

/// The request ids a scenario's requests get: `<scenario>.<id>`.
pub fn request_id(scenario: &str, id: &str) -> String {
    format!("{scenario}.{id}")
}

/// Runs the requests of `s` (level by level of `after`, each level at
/// once), then its utilities.
pub async fn run(ctx: &Context<'_>, s: &Scenario) -> RunResult {
    let info = EngineInfo { max_model_len: ctx.facts.max_model_len, release: ctx.gateway.release() };
    let mut out = RunResult { max_model_len: ctx.facts.max_model_len, ..Default::default() };
    // Checked when the scenario was loaded.
    let levels = levels(&s.requests).unwrap_or_default();
    for level in levels {
        let specs = level.iter().map(|&i| run_spec(ctx, &info, s, &s.requests[i]));
        for results in futures_util::future::join_all(specs).await {
            out.requests.extend(results);
        }
    }
    for u in &s.dialect.utilities {
        let args = u.args.iter().map(json_to_value).collect();
        let r = ctx.gateway.utility(ctx.engine, &u.method, args).await;
        out.utilities.insert(u.id.clone(), r);
    }
    out.drift = ctx.gateway.stats().await.drift.into_iter().collect();
    out
}

/// All copies of one spec.
async fn run_spec(
    ctx: &Context<'_>,
    info: &EngineInfo,
    s: &Scenario,
    spec: &RequestSpec,
) -> Vec<(String, RequestResult)> {
    let copies: Vec<(String, Json)> = (0..spec.dialect.repeat)
        .map(|i| {
            let id = if spec.dialect.repeat == 1 { spec.id.clone() } else { format!("{}-{i}", spec.id) };
            let mut body = spec.request.clone();
            if let Some(o) = body.as_object_mut() {
                o.insert("request_id".into(), json!(request_id(&s.name, &id)));
                if let (Some(Json::String(text)), false) =
                    (o.get("prompt").cloned(), o.contains_key("prompt_token_ids"))
                {
                    let ids = ctx.tokenizer.encode(&text);
                    o.insert("prompt_token_ids".into(), json!(ids));
                }
                if spec.dialect.vary_prompt {
                    if let Some(Json::Array(p)) = o.get_mut("prompt_token_ids") {
                        p.push(json!(10 + i));
                    }
                }
            }
            (id, body)
        })
        .collect();
    let one = |(id, body): (String, Json)| async move {
        let mut r = match &spec.raw {
            None => run_request(ctx, info, &body, spec).await,
            Some(raw) => run_raw(ctx, info, &body, spec, raw).await,
        };
        r.spec_id = spec.id.clone();
        r.request = body;
        (id, r)
    };
    if spec.dialect.sequential {
        let mut out = Vec::new();
        for c in copies {
            out.push(one(c).await);
        }
        out
    } else {
        futures_util::future::join_all(copies.into_iter().map(one)).await
    }
}

fn refused(e: &translate::TranslateError) -> Option<(String, String)> {
    Some((e.class.as_str().to_string(), e.to_string()))
}

async fn run_request(ctx: &Context<'_>, info: &EngineInfo, body: &Json, spec: &RequestSpec) -> RequestResult {
    let mut res = RequestResult::default();
    let req = match GenerateRequest::from_json(body) {
        Ok(r) => r,
        Err(e) => {
            res.refused = refused(&e);
            return res;
        }
    };
    res.prompt = req.prompt_token_ids.iter().map(|&t| i64::from(t)).collect();
    let mut opts = ctx.options.clone();
    opts.arrival_time = now_secs();
    let t = match translate::translate(&req, info, ctx.tokenizer, &opts) {
        Ok(t) => t,
        Err(e) => {
            res.refused = refused(&e);
            return res;
        }
    };
    res.sent_max_tokens = Some(t.max_tokens);
    res.prompt_len = t.prompt_len;
    let children = t.requests.iter().map(|er| async {
        let mut c = ChildResult {
            engine_request_id: er.request_id.clone(),
            sent_seed: er.sampling_params().int_field("seed"),
            ..Default::default()
        };
        match ctx.gateway.add(ctx.engine, &er.request).await {
            Ok(stream) => {
                let detector = StopStream::new(ctx.tokenizer, &req.prompt_token_ids, t.stop.clone());
                collect(ctx, stream, Some(detector), spec, &mut c).await;
            }
            Err(e) => fail(&mut c, &e),
        }
        c
    });
    res.children = futures_util::future::join_all(children).await;
    res
}

/// A request sent around the gateway's validation.
async fn run_raw(ctx: &Context<'_>, info: &EngineInfo, body: &Json, spec: &RequestSpec, raw: &Raw) -> RequestResult {
    let mut res = RequestResult::default();
    let id = body.get("request_id").and_then(Json::as_str).unwrap_or_default().to_string();
    let frames = match raw {
        Raw::Frames(f) => f.clone(),
        Raw::Edit(edits) => {
            let req = match GenerateRequest::from_json(body) {
                Ok(r) => r,
                Err(e) => {
                    res.refused = refused(&e);
                    return res;
                }
            };
            let mut opts = ctx.options.clone();
            opts.arrival_time = now_secs();
            let t = match translate::translate(&req, info, ctx.tokenizer, &opts) {
                Ok(t) => t,
                Err(e) => {
                    res.refused = refused(&e);
                    return res;
                }
            };
            res.sent_max_tokens = Some(t.max_tokens);
            let Some(er) = t.requests.first() else {
                res.refused = Some(("raw".into(), "translation produced no engine request".into()));
                return res;
            };
            let mut v = er.request.clone();
            for (path, new) in edits {
                if let Err(e) = set_path(&mut v, path, new) {
                    res.refused = Some(("raw".into(), format!("cannot set {path}: {e}")));
                    return res;
                }
            }
            if let Value::Struct(s) = &v {
                res.prompt = int_list(s.get("prompt_token_ids"));
                res.prompt_len = res.prompt.len();
            }
            let kind = MessageKind::EngineCoreRequest;
            match encode_payload_unvalidated(kind.name(), kind.payload_type(ctx.gateway.release()), &v) {
                Ok(mut f) => {
                    if let Some(t) = kind.request_type() {
                        f.insert(0, vec![t.byte()]);
                    }
                    f
                }
                Err(e) => {
                    res.refused = Some(("raw".into(), format!("cannot encode: {e}")));
                    return res;
                }
            }
        }
    };
    let mut c = ChildResult { engine_request_id: id.clone(), ..Default::default() };
    match ctx.gateway.add_frames(ctx.engine, &id, frames).await {
        Ok(stream) => collect(ctx, stream, None, spec, &mut c).await,
        Err(e) => fail(&mut c, &e),
    }
    res.children = vec![c];
    res
}

fn fail(c: &mut ChildResult, e: &TransportError) {
    c.error = Some(e.to_string());
    c.outcome = Outcome::of_error(e);
}

/// Reads a request's outputs until it ends, runs them through the
/// gateway's stop detection (when given), and watches for late outputs
/// after an abort.
async fn collect(
    ctx: &Context<'_>,
    mut stream: RequestStream,
    mut detector: Option<StopStream>,
    spec: &RequestSpec,
    c: &mut ChildResult,
) {
    let until = spec.wait.map(|w| tokio::time::Instant::now() + w);
    let id = std::slice::from_ref(&c.engine_request_id).to_vec();
    loop {
        let next = match until {
            Some(u) => match tokio::time::timeout_at(u, stream.next()).await {
                Ok(ev) => ev,
                Err(_) => {
                    c.error = Some(format!("no answer within {:.1}s", spec.wait.unwrap_or_default().as_secs_f64()));
                    c.outcome = Outcome::Silence;
                    ctx.gateway.forget(&id);
                    break;
                }
            },
            None => stream.next().await,
        };
        let Some(ev) = next else {
            c.error.get_or_insert_with(|| TransportError::Closed.to_string());
            c.outcome = Outcome::Failed;
            break;
        };
        match ev {
            RequestEvent::Failed(e) => {
                fail(c, &e);
                break;
            }
            RequestEvent::Aborted => {
                c.aborted = true;
                if c.finish_reason.is_none() {
                    c.finish_reason = Some(FinishReason::Abort);
                    c.outcome = Outcome::Aborted;
                }
                break;
            }
            RequestEvent::Output(step) => {
                c.engine_tokens.extend(&step.new_token_ids);
                if let Some(lp) = step.output.struct_field("new_logprobs") {
                    if let Some(Value::Tensor(t)) = lp.get("logprobs") {
                        c.logprob_columns.push(resolved_shape(t).and_then(|s| s.last().copied()).unwrap_or(0));
                    }
                }
                if !step.output.is_nil("new_prompt_logprobs_tensors") {
                    c.prompt_logprobs_seen = true;
                }
                c.outputs.push(step.output.value().clone());
                if step.finish_reason == Some(FinishReason::Error) {
                    c.error = Some("engine finished the request with ERROR".into());
                    c.finish_reason = Some(FinishReason::Error);
                    c.outcome = Outcome::ErrorOutput;
                    break;
                }
                if c.finish_reason.is_none() {
                    match detector.as_mut() {
                        Some(d) => {
                            let es = EngineStep {
                                new_token_ids: step
                                    .new_token_ids
                                    .iter()
                                    .filter_map(|t| u32::try_from(*t).ok())
                                    .collect(),
                                finish_reason: step.finish_reason,
                                stop_reason: step.stop_reason.clone(),
                            };
                            if let Some(o) = d.step(ctx.tokenizer, &es) {
                                c.client_tokens.extend(o.token_ids.iter().map(|t| i64::from(*t)));
                                c.text.push_str(&o.text);
                                if o.finish_reason.is_some() {
                                    c.finish_reason = o.finish_reason;
                                    c.stop_reason = o.stop_reason;
                                    c.outcome = Outcome::Finished;
                                }
                                if o.abort_engine {
                                    // A stop string found by the gateway: the
                                    // engine still runs the request.
                                    c.abort_sent = true;
                                    let _ = ctx.gateway.abort(ctx.engine, &id).await;
                                }
                            }
                        }
                        None => {
                            c.client_tokens.extend(&step.new_token_ids);
                            if step.finish_reason.is_some() {
                                c.finish_reason = step.finish_reason;
                                c.stop_reason = step.stop_reason.clone();
                                c.outcome = Outcome::Finished;
                            }
                        }
                    }
                }
                if step.finish_reason.is_some() {
                    break;
                }
                if let Some(n) = spec.abort_after_tokens {
                    if c.engine_tokens.len() >= n && c.finish_reason.is_none() {
                        c.abort_sent = true;
                        let _ = ctx.gateway.abort(ctx.engine, &id).await;
                    }
                }
            }
        }
    }
    if c.abort_sent && !spec.grace.is_zero() {
        tokio::time::sleep(spec.grace).await;
        c.late_outputs = ctx.gateway.late_outputs(&c.engine_request_id).await;
    }
}

/// Sets the field at a dotted path of a struct value (structs along the
/// way must exist). `{"$repeat": [token, count]}` is a list of `count`
/// copies of `token`.
pub fn set_path(v: &mut Value, path: &str, new: &Json) -> Result<(), String> {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        let Value::Struct(s) = cur else {
            return Err(format!("{} is not a struct", parts[..i].join(".")));
        };
        let Some(f) = s.get_mut(p) else { return Err(format!("no field {p:?}")) };
        cur = f;
    }
    *cur = match new.get("$repeat").and_then(Json::as_array).map(Vec::as_slice) {
        Some([tok, count]) => {
            let (Some(tok), Some(count)) = (tok.as_i64(), count.as_u64()) else {
                return Err("$repeat needs [token, count]".into());
            };
            Value::IntArray(vec![tok; count.min(1 << 20) as usize])
        }
        _ => match (new, &*cur) {
            // Token lists stay token lists.
            (Json::Array(xs), Value::IntArray(_)) if xs.iter().all(Json::is_i64) => {
                Value::IntArray(xs.iter().filter_map(Json::as_i64).collect())
            }
            _ => json_to_value(new),
        },
    };
    Ok(())
}

fn int_list(v: Option<&Value>) -> Vec<i64> {
    match v {
        Some(Value::IntArray(xs)) => xs.clone(),
        Some(Value::Array(xs)) => {
            xs.iter().filter_map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect()
        }
        _ => Vec::new(),
    }
}

fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// A JSON argument as a wire value (`Value::from_json`).
pub fn json_to_value(j: &Json) -> Value {
    Value::from_json(j)
}

/// A wire value as JSON (utility results, `sent` fields): the canonical
/// view's rendering of an untyped value (`engine_protocol::view::any_view`,
/// docs/case-format.md §6), so non-finite floats, bytes, non-string map
/// keys, structs and tensors read the same here as in the goldens.
pub fn value_to_json(v: &Value) -> Json {
    engine_protocol::view::any_view(v)
}

fn finish_name(f: Option<FinishReason>) -> Json {
    f.map_or(Json::Null, |f| json!(f.as_str()))
}

fn stop_json(s: &Option<StopReason>) -> Json {
    match s {
        None => Json::Null,
        Some(StopReason::TokenId(i)) => json!(i),
        Some(StopReason::Text(t)) => json!(t),
    }
}

/// Evaluates the checks for `engine` (a check with `"engines": [...]`
/// applies only to those); returns the failures (empty = pass).
pub fn evaluate(s: &Scenario, r: &RunResult, engine: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, c) in s.checks.iter().enumerate() {
        if let Some(only) = c.get("engines").and_then(Json::as_array) {
            if !only.iter().any(|e| e.as_str() == Some(engine)) {
                continue;
            }
        }
        if let Err(e) = check_one(c, r) {
            let kind = c.get("check").and_then(Json::as_str).unwrap_or("?");
            failures.push(format!("checks[{i}] {kind}: {e}"));
        }
    }
    // A request that failed or was refused is a failure unless a check
    // expects it.
    let tolerated: Vec<&str> = s
        .checks
        .iter()
        .filter(|c| {
            matches!(c.get("check").and_then(Json::as_str), Some("refused" | "failed" | "aborted" | "engine_outcome"))
        })
        .filter_map(|c| c.get("request").and_then(Json::as_str))
        .collect();
    for (id, rr) in &r.requests {
        if tolerated.contains(&id.as_str()) || tolerated.contains(&rr.spec_id.as_str()) {
            continue;
        }
        if let Some((class, m)) = &rr.refused {
            failures.push(format!("request {id} refused by the gateway ({class}): {m}"));
        }
        for ch in &rr.children {
            if let Some(e) = &ch.error {
                failures.push(format!("request {id} ({}) failed: {e}", ch.engine_request_id));
            }
        }
    }
    failures
}

fn child<'a>(c: &Json, r: &'a RunResult) -> Result<&'a ChildResult, String> {
    let id = c.get("request").and_then(Json::as_str).ok_or("no `request`")?;
    let rr = r.requests.get(id).ok_or_else(|| format!("no request {id}"))?;
    let i = c.get("child").and_then(Json::as_u64).unwrap_or(0) as usize;
    if let Some((class, m)) = &rr.refused {
        return Err(format!("request {id} was refused ({class}): {m}"));
    }
    rr.children.get(i).ok_or_else(|| format!("request {id} has no child {i}"))
}

fn request<'a>(c: &Json, r: &'a RunResult) -> Result<(&'a str, &'a RequestResult), String> {
    let id = c.get("request").and_then(Json::as_str).ok_or("no `request`")?;
    r.requests.get_key_value(id).map(|(k, v)| (k.as_str(), v)).ok_or_else(|| format!("no request {id}"))
}

/// Every result of a request id or of all copies of a spec id, in copy
/// order.
fn copies<'a>(r: &'a RunResult, id: &str) -> Vec<&'a RequestResult> {
    if let Some(rr) = r.requests.get(id) {
        return vec![rr];
    }
    let mut v: Vec<(usize, &RequestResult)> = r
        .requests
        .iter()
        .filter(|(_, v)| v.spec_id == id)
        .map(|(k, v)| (k.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap_or(0), v))
        .collect();
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, v)| v).collect()
}

fn is(c: &Json) -> Json {
    c.get("is").cloned().unwrap_or(Json::Null)
}

fn int_arg(c: &Json, k: &str) -> Result<i64, String> {
    c.get(k).and_then(Json::as_i64).ok_or_else(|| format!("`{k}` must be an integer"))
}

fn check_one(c: &Json, r: &RunResult) -> Result<(), String> {
    let kind = c.get("check").and_then(Json::as_str).unwrap_or("");
    let eq = |what: &str, got: Json, want: Json| {
        if got == want {
            Ok(())
        } else {
            Err(format!("{what} is {got}, expected {want}"))
        }
    };
    let room = |rr: &RequestResult| json!(r.max_model_len - rr.prompt_len as i64);
    match kind {
        "finish_reason" => eq("finish_reason", finish_name(child(c, r)?.finish_reason), is(c)),
        "stop_reason" => eq("stop_reason", stop_json(&child(c, r)?.stop_reason), is(c)),
        "num_tokens" => {
            let (_, rr) = request(c, r)?;
            let want = if is(c) == json!("room") { room(rr) } else { is(c) };
            eq("client token count", json!(child(c, r)?.client_tokens.len()), want)
        }
        "tokens" => eq("client tokens", json!(child(c, r)?.client_tokens), is(c)),
        "max_tokens_honoured" => {
            let (_, rr) = request(c, r)?;
            let max = rr.sent_max_tokens.ok_or("no max_tokens sent")?;
            let exact = c.get("exact").and_then(Json::as_bool).unwrap_or(false);
            for ch in &rr.children {
                let n = ch.engine_tokens.len() as i64;
                if n > max || (exact && n != max) {
                    return Err(format!("{} got {n} tokens, max_tokens {max}", ch.engine_request_id));
                }
            }
            Ok(())
        }
        "sent_max_tokens" => {
            let (_, rr) = request(c, r)?;
            let sent = rr.sent_max_tokens.ok_or("no max_tokens sent")?;
            let want = if is(c) == json!("room") { room(rr) } else { is(c) };
            eq("max_tokens sent", json!(sent), want)
        }
        "same_tokens" => {
            let ids: Vec<&str> = c
                .get("requests")
                .and_then(Json::as_array)
                .ok_or("no `requests`")?
                .iter()
                .filter_map(Json::as_str)
                .collect();
            let mut first: Option<(&str, &Vec<i64>)> = None;
            for id in ids {
                // A spec id names all its repeats.
                let matching = copies(r, id);
                if matching.is_empty() {
                    return Err(format!("no request {id}"));
                }
                for ch in matching.iter().flat_map(|rr| &rr.children) {
                    match first {
                        None => first = Some((id, &ch.engine_tokens)),
                        Some((fid, toks)) if toks != &ch.engine_tokens => {
                            return Err(format!("{id} gave {:?}, {fid} gave {:?}", ch.engine_tokens, toks));
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        }
        "same_tokens_pairwise" | "different_tokens" => {
            let ids: Vec<&str> = c
                .get("requests")
                .and_then(Json::as_array)
                .ok_or("no `requests`")?
                .iter()
                .filter_map(Json::as_str)
                .collect();
            let [a, b] = ids.as_slice() else { return Err("`requests` must name two requests".into()) };
            let (ca, cb) = (copies(r, a), copies(r, b));
            if ca.is_empty() || ca.len() != cb.len() {
                return Err(format!("{a} has {} copies, {b} has {}", ca.len(), cb.len()));
            }
            for (i, (x, y)) in ca.iter().zip(&cb).enumerate() {
                let tx: Vec<&Vec<i64>> = x.children.iter().map(|c| &c.engine_tokens).collect();
                let ty: Vec<&Vec<i64>> = y.children.iter().map(|c| &c.engine_tokens).collect();
                if tx.iter().chain(&ty).any(|t| t.is_empty()) {
                    return Err(format!("copy {i}: a request has no tokens"));
                }
                let same = tx == ty;
                if kind == "same_tokens_pairwise" && !same {
                    return Err(format!("copy {i}: {a} gave {tx:?}, {b} gave {ty:?}"));
                }
                if kind == "different_tokens" && same {
                    return Err(format!("copy {i}: {a} and {b} both gave {tx:?}"));
                }
            }
            Ok(())
        }
        "no_token_in_first" => {
            let ch = child(c, r)?;
            let n = int_arg(c, "n")?.max(0) as usize;
            let banned: Vec<i64> = c
                .get("tokens")
                .and_then(Json::as_array)
                .ok_or("no `tokens`")?
                .iter()
                .filter_map(Json::as_i64)
                .collect();
            if ch.engine_tokens.len() < n {
                return Err(format!("only {} tokens", ch.engine_tokens.len()));
            }
            match ch.engine_tokens[..n].iter().position(|t| banned.contains(t)) {
                None => Ok(()),
                Some(i) => Err(format!("token {} at position {i} of {:?}", ch.engine_tokens[i], ch.engine_tokens)),
            }
        }
        "text" => eq("text", json!(child(c, r)?.text), is(c)),
        "text_contains" | "text_not_contains" => {
            let ch = child(c, r)?;
            let s = c.get("text").and_then(Json::as_str).ok_or("no `text`")?;
            let has = ch.text.contains(s);
            if has == (kind == "text_contains") {
                Ok(())
            } else {
                Err(format!("text {:?} {} {s:?}", ch.text, if has { "contains" } else { "lacks" }))
            }
        }
        "logprobs_columns" => {
            let ch = child(c, r)?;
            let want = is(c).as_i64().ok_or("`is` must be an integer")?;
            if ch.logprob_columns.is_empty() {
                return Err("no logprobs in any output".into());
            }
            match ch.logprob_columns.iter().find(|&&n| n != want) {
                None => Ok(()),
                Some(n) => Err(format!("an output has {n} logprob columns, expected {want}")),
            }
        }
        "sample_logprobs" => check_sample_logprobs(child(c, r)?, int_arg(c, "k")?),
        "prompt_logprobs" => {
            let (_, rr) = request(c, r)?;
            check_prompt_logprobs(child(c, r)?, &rr.prompt, int_arg(c, "k")?)
        }
        "prompt_logprobs_present" => {
            if child(c, r)?.prompt_logprobs_seen {
                Ok(())
            } else {
                Err("no prompt logprobs in any output".into())
            }
        }
        "satisfies_constraint" => {
            let (_, rr) = request(c, r)?;
            let so = rr.request.get("structured_outputs").ok_or("the request has no structured_outputs")?;
            satisfies(so, &child(c, r)?.text, c.get("language_regex").and_then(Json::as_str))
        }
        "num_children" => eq("children", json!(request(c, r)?.1.children.len()), is(c)),
        "child_seeds" => {
            let seeds: Vec<Option<i64>> = request(c, r)?.1.children.iter().map(|c| c.sent_seed).collect();
            eq("child seeds", json!(seeds), is(c))
        }
        "distinct_child_ids" => {
            let (id, rr) = request(c, r)?;
            let ids: BTreeSet<&str> = rr.children.iter().map(|c| c.engine_request_id.as_str()).collect();
            if rr.children.len() < 2 || ids.len() != rr.children.len() {
                return Err(format!("request {id}: engine request ids {ids:?} for {} children", rr.children.len()));
            }
            Ok(())
        }
        "refused" => {
            let (id, rr) = request(c, r)?;
            match (&rr.refused, c.get("class").and_then(Json::as_str)) {
                (None, _) => Err(format!("request {id} was not refused")),
                (Some((got, m)), Some(want)) if got != want => Err(format!("refused as {got} ({m}), expected {want}")),
                _ => Ok(()),
            }
        }
        "failed" => {
            let ch = child(c, r)?;
            let want = c.get("contains").and_then(Json::as_str).unwrap_or("");
            match &ch.error {
                Some(e) if e.contains(want) => Ok(()),
                Some(e) => Err(format!("failed with {e:?}, expected it to mention {want:?}")),
                None => Err("did not fail".into()),
            }
        }
        "aborted" => {
            let ch = child(c, r)?;
            if ch.aborted {
                Ok(())
            } else {
                Err(format!("not aborted (finish {:?})", ch.finish_reason))
            }
        }
        "silent_after_abort" => {
            let ch = child(c, r)?;
            let settle = Duration::from_millis(int_arg(c, "settle_ms")?.max(0) as u64);
            if !ch.abort_sent {
                return Err("the gateway sent no ABORT".into());
            }
            let late = ch.late_outputs.as_ref().ok_or("late outputs not watched (the request needs grace_ms)")?;
            match late.iter().find(|d| **d > settle) {
                None => Ok(()),
                Some(d) => Err(format!(
                    "an output arrived {:.0} ms after the ABORT ({} late outputs)",
                    d.as_secs_f64() * 1000.0,
                    late.len()
                )),
            }
        }
        "engine_outcome" => {
            let ch = child(c, r)?;
            let want = is(c);
            if json!(ch.outcome.as_str()) == want {
                Ok(())
            } else {
                Err(format!(
                    "outcome is {}, expected {want} ({})",
                    ch.outcome.as_str(),
                    ch.error.as_deref().unwrap_or("")
                ))
            }
        }
        "utility_result" => {
            let id = c.get("call").and_then(Json::as_str).ok_or("no `call`")?;
            match r.utilities.get(id) {
                Some(Ok(v)) => eq("result", value_to_json(v), is(c)),
                Some(Err(e)) => Err(format!("call failed: {e}")),
                None => Err(format!("no utility call {id}")),
            }
        }
        "utility_failure" => {
            let id = c.get("call").and_then(Json::as_str).ok_or("no `call`")?;
            let want = c.get("contains").and_then(Json::as_str).unwrap_or("");
            match r.utilities.get(id) {
                // The engine answered the call with a failure; `contains`
                // is checked against the engine's own message. A timeout or
                // a dead engine is not the engine refusing the call.
                Some(Err(TransportError::Utility { message, .. })) if message.contains(want) => Ok(()),
                Some(Err(e)) => Err(format!("failed with {:?}, expected it to mention {want:?}", e.to_string())),
                Some(Ok(v)) => Err(format!("succeeded with {}", value_to_json(v))),
                None => Err(format!("no utility call {id}")),
            }
        }
        "all_finished" => {
            for (id, rr) in &r.requests {
                for ch in &rr.children {
                    if ch.finish_reason.is_none() || ch.error.is_some() {
                        return Err(format!("{id} ({}) did not finish: {:?}", ch.engine_request_id, ch.error));
                    }
                }
            }
            Ok(())
        }
        other => Err(format!("unknown check {other:?}")),
    }
}

/// The shape of `t` with an inferred dimension (`-1`, as vLLM accepts it)
/// resolved from its data, as vLLM's decoder resolves it.
fn resolved_shape(t: &engine_protocol::Tensor) -> Option<Vec<i64>> {
    let size = t.parsed_dtype()?.elem.size();
    let dims = engine_protocol::internal::resolve_shape(&t.shape, t.data.len() / size)?;
    dims.into_iter().map(|d| i64::try_from(d).ok()).collect()
}

/// A `[rows, cols]` tensor as rows of numbers.
fn matrix(t: &Value, what: &str) -> Result<(Vec<i64>, Numbers), String> {
    let Value::Tensor(t) = t else { return Err(format!("{what} is not a tensor")) };
    let n = t.numbers().ok_or_else(|| format!("{what}: dtype {} does not read", t.dtype))?;
    let shape = resolved_shape(t).ok_or_else(|| format!("{what}: shape {:?} does not fit its data", t.shape))?;
    Ok((shape, n))
}

fn ints_of(n: Numbers, what: &str) -> Result<Vec<i64>, String> {
    match n {
        Numbers::Ints(v) => Ok(v),
        _ => Err(format!("{what} are not integers")),
    }
}

fn floats_of(n: Numbers, what: &str) -> Result<Vec<f64>, String> {
    match n {
        Numbers::Floats(v) => Ok(v),
        _ => Err(format!("{what} are not floats")),
    }
}

/// Rows of a `LogprobsLists` / `LogprobsTensors` struct: `(ids, logprobs,
/// ranks)` field names differ between the two.
fn engine_rows(s: &StructValue, ranks_field: &str) -> Result<Vec<EngineRow>, String> {
    let get = |k: &str| s.get(k).ok_or_else(|| format!("no {k}"));
    let (ids_shape, ids) = matrix(get("logprob_token_ids")?, "logprob_token_ids")?;
    let (lp_shape, lps) = matrix(get("logprobs")?, "logprobs")?;
    let (rank_shape, ranks) = matrix(get(ranks_field)?, ranks_field)?;
    let (ids, lps, ranks) = (ints_of(ids, "token ids")?, floats_of(lps, "logprobs")?, ints_of(ranks, "ranks")?);
    let [rows, cols] = ids_shape.as_slice() else { return Err(format!("token ids of shape {ids_shape:?}")) };
    if lp_shape != ids_shape || rank_shape != [*rows] {
        return Err(format!("shapes disagree: ids {ids_shape:?}, logprobs {lp_shape:?}, ranks {rank_shape:?}"));
    }
    let (Ok(rows), Ok(cols)) = (usize::try_from(*rows), usize::try_from(*cols)) else {
        return Err(format!("token ids of shape {ids_shape:?}"));
    };
    if cols == 0 || ids.len() != rows * cols || lps.len() != rows * cols || ranks.len() != rows {
        return Err(format!(
            "{} ids, {} logprobs and {} ranks for shape {ids_shape:?}",
            ids.len(),
            lps.len(),
            ranks.len()
        ));
    }
    Ok((0..rows)
        .map(|i| EngineRow {
            token_ids: ids[i * cols..(i + 1) * cols].iter().map(|&t| u32::try_from(t).unwrap_or(u32::MAX)).collect(),
            logprobs: lps[i * cols..(i + 1) * cols].to_vec(),
            rank: ranks[i],
        })
        .collect())
}

/// One engine row shaped to the client's `k`: vLLM keeps the sampled
/// token and the first `k` top columns, the top columns ranked `1..=k`,
/// the sampled token with its own rank, one entry per token (the default
/// container), so the ranks seen are `{1..=k} ∪ {rank}`.
fn check_shaped(pos: usize, row: &EngineRow, entries: &[translate::LogprobEntry], k: i64) -> Result<(), String> {
    let top = (row.token_ids.len() as i64 - 1).min(k).max(0);
    let mut want: BTreeSet<i64> = (1..=top).collect();
    want.insert(row.rank);
    let got: BTreeSet<i64> = entries.iter().map(|e| e.rank).collect();
    if got != want || entries.len() != want.len() {
        return Err(format!("position {pos}: shaped ranks {got:?} ({} entries), expected {want:?}", entries.len()));
    }
    let sampled = row.token_ids.first().copied().unwrap_or(u32::MAX);
    match entries.iter().find(|e| e.token_id == sampled) {
        Some(e) if e.rank == row.rank => Ok(()),
        Some(e) => Err(format!(
            "position {pos}: the sampled token {sampled} has rank {} after shaping, engine said {}",
            e.rank, row.rank
        )),
        None => Err(format!("position {pos}: the sampled token {sampled} is not among the shaped entries")),
    }
}

/// Sample logprobs: one row per generated token, `K + 1` columns (at
/// least the client's `k + 1`: the batch's largest k decides), the
/// sampled token first with a rank >= 1, the top columns in descending
/// order; shaped to `k` by `translate::LogprobShaper`.
fn check_sample_logprobs(ch: &ChildResult, k: i64) -> Result<(), String> {
    let mut rows = Vec::new();
    for (i, o) in ch.outputs.iter().enumerate() {
        let Some(l) = o.struct_field("new_logprobs") else { continue };
        let sampled = int_list(o.get("new_token_ids"));
        let step = engine_rows(l, "sampled_token_ranks").map_err(|e| format!("output {i}: {e}"))?;
        if step.len() != sampled.len() {
            return Err(format!("output {i}: {} logprob rows for {} tokens", step.len(), sampled.len()));
        }
        for (row, tok) in step.iter().zip(&sampled) {
            let cols = row.token_ids.len() as i64;
            if cols < k + 1 {
                return Err(format!("output {i}: {cols} columns, the client asked for k = {k}"));
            }
            if i64::from(row.token_ids[0]) != *tok {
                return Err(format!("output {i}: first column {} is not the sampled token {tok}", row.token_ids[0]));
            }
            if row.rank < 1 {
                return Err(format!("output {i}: sampled-token rank {}", row.rank));
            }
            if row.logprobs[1..].windows(2).any(|w| w[0] < w[1]) {
                return Err(format!("output {i}: top logprobs not in descending order: {:?}", row.logprobs));
            }
            if row.rank == 1 && row.logprobs.get(1).is_some_and(|top| row.logprobs[0] < *top) {
                return Err(format!("output {i}: rank 1 but logprob below the top one: {:?}", row.logprobs));
            }
        }
        rows.extend(step);
    }
    if rows.len() != ch.engine_tokens.len() {
        return Err(format!("{} logprob rows for {} tokens", rows.len(), ch.engine_tokens.len()));
    }
    let mut shaper = LogprobShaper::new(Some(k), None, false);
    shaper.add_sample_rows(None, &rows);
    let sample = shaper.sample.unwrap_or_default();
    if sample.len() != rows.len() {
        return Err(format!("{} shaped positions for {} rows", sample.len(), rows.len()));
    }
    for (pos, (row, entries)) in rows.iter().zip(&sample).enumerate() {
        check_shaped(pos, row, entries, k)?;
    }
    Ok(())
}

/// Prompt logprobs: `P - 1` rows of `k + 1` columns, in the first output
/// only, row `i` scoring prompt token `i + 1` (first column) with a rank
/// of at least 1; shaped by `translate::LogprobShaper` to `P` positions,
/// the first `None`.
fn check_prompt_logprobs(ch: &ChildResult, prompt: &[i64], k: i64) -> Result<(), String> {
    let carrying: Vec<usize> = ch
        .outputs
        .iter()
        .enumerate()
        .filter(|(_, o)| !o.is_nil("new_prompt_logprobs_tensors"))
        .map(|(i, _)| i)
        .collect();
    if carrying != [0] {
        return Err(format!("prompt logprobs in outputs {carrying:?}, expected the first only"));
    }
    let t = ch.outputs[0].struct_field("new_prompt_logprobs_tensors").ok_or("prompt logprobs are not a struct")?;
    let rows = engine_rows(t, "selected_token_ranks")?;
    if rows.len() + 1 != prompt.len() {
        return Err(format!("{} rows for a prompt of {}", rows.len(), prompt.len()));
    }
    for (i, row) in rows.iter().enumerate() {
        if row.token_ids.len() as i64 != k + 1 {
            return Err(format!("row {i}: {} columns, expected {}", row.token_ids.len(), k + 1));
        }
        if i64::from(row.token_ids[0]) != prompt[i + 1] {
            return Err(format!("row {i}: first column {} is not prompt token {}", row.token_ids[0], prompt[i + 1]));
        }
        if row.rank < 1 {
            return Err(format!("row {i}: rank {}", row.rank));
        }
    }
    let mut shaper = LogprobShaper::new(None, Some(k), false);
    shaper.add_prompt_rows(None, &rows);
    let shaped = shaper.prompt.unwrap_or_default();
    if shaped.len() != prompt.len() || shaped.first().is_some_and(Option::is_some) {
        return Err(format!(
            "{} shaped prompt positions (first {:?}), expected {} with the first None",
            shaped.len(),
            shaped.first(),
            prompt.len()
        ));
    }
    for (pos, (row, entries)) in rows.iter().zip(&shaped[1..]).enumerate() {
        check_shaped(pos + 1, row, entries.as_deref().unwrap_or_default(), k)?;
    }
    Ok(())
}

fn full_match_regex(re: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| e.to_string())
}

/// Whether `text` is in the language of the request's constraint: JSON
/// that parses and fits the schema (the keywords `type`, `properties`,
/// `required`, `additionalProperties`, `enum`), a full match of the
/// regex, one of the choices, or (a grammar) a full match of
/// `language_regex`, the grammar's language written as a regex in the
/// check.
fn satisfies(so: &Json, text: &str, language_regex: Option<&str>) -> Result<(), String> {
    if let Some(schema) = so.get("json") {
        let schema = match schema {
            Json::String(s) => serde_json::from_str(s).map_err(|e| format!("schema: {e}"))?,
            s => s.clone(),
        };
        let v: Json = serde_json::from_str(text).map_err(|e| format!("text {text:?} is not JSON: {e}"))?;
        return fits_schema(&v, &schema, "$").map_err(|e| format!("text {text:?}: {e}"));
    }
    if let Some(re) = so.get("regex").and_then(Json::as_str) {
        return if full_match_regex(re)?.is_match(text) {
            Ok(())
        } else {
            Err(format!("{text:?} does not match {re:?}"))
        };
    }
    if let Some(choices) = so.get("choice").and_then(Json::as_array) {
        return if choices.iter().any(|c| c.as_str() == Some(text)) {
            Ok(())
        } else {
            Err(format!("{text:?} is none of {choices:?}"))
        };
    }
    if so.get("grammar").is_some() {
        let re = language_regex.ok_or("a grammar check needs `language_regex`")?;
        return if full_match_regex(re)?.is_match(text) {
            Ok(())
        } else {
            Err(format!("{text:?} is not in the grammar's language {re:?}"))
        };
    }
    Err("no json, regex, choice or grammar constraint in the request".into())
}

fn fits_schema(v: &Json, schema: &Json, at: &str) -> Result<(), String> {
    let s = schema.as_object().ok_or_else(|| format!("{at}: schema is not an object"))?;
    for k in s.keys() {
        if !["type", "properties", "required", "additionalProperties", "enum"].contains(&k.as_str()) {
            return Err(format!("{at}: schema keyword {k:?} is not checked here"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Json::as_array) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let Some(t) = s.get("type").and_then(Json::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "null" => v.is_null(),
            other => return Err(format!("{at}: type {other:?} is not checked here")),
        };
        if !ok {
            return Err(format!("{at}: {v} is not of type {t}"));
        }
    }
    let props = s.get("properties").and_then(Json::as_object);
    if let Some(o) = v.as_object() {
        for req in s.get("required").and_then(Json::as_array).map_or(&[][..], Vec::as_slice) {
            let key = req.as_str().unwrap_or_default();
            if !o.contains_key(key) {
                return Err(format!("{at}: required key {key:?} missing"));
            }
        }
        let closed = s.get("additionalProperties") == Some(&Json::Bool(false));
        let known: HashMap<&str, &Json> =
            props.map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect()).unwrap_or_default();
        for (k, x) in o {
            match known.get(k.as_str()) {
                Some(sub) => fits_schema(x, sub, &format!("{at}.{k}"))?,
                None if closed => return Err(format!("{at}: key {k:?} not allowed")),
                None => {}
            }
        }
    }
    Ok(())
}

/// What the client saw, per request (written by `--record` as
/// `<scenario>/results.json`).
pub fn record_json(s: &Scenario, r: &RunResult) -> Json {
    let requests: serde_json::Map<String, Json> = r
        .requests
        .iter()
        .map(|(id, rr)| {
            let children: Vec<Json> = rr
                .children
                .iter()
                .map(|c| {
                    json!({
                        "engine_request_id": c.engine_request_id,
                        "sent_seed": c.sent_seed,
                        "engine_tokens": c.engine_tokens,
                        "client_tokens": c.client_tokens,
                        "text": c.text,
                        "finish_reason": finish_name(c.finish_reason),
                        "stop_reason": stop_json(&c.stop_reason),
                        "outcome": c.outcome.as_str(),
                        "error": c.error,
                        "aborted": c.aborted,
                        "abort_sent": c.abort_sent,
                        "late_outputs_ms": c.late_outputs.as_ref().map(|l| l.iter().map(|d| d.as_secs_f64() * 1000.0).collect::<Vec<_>>()),
                        "logprob_columns": c.logprob_columns,
                        "outputs": c.outputs.len(),
                    })
                })
                .collect();
            (
                id.clone(),
                json!({"refused": rr.refused, "sent_max_tokens": rr.sent_max_tokens, "prompt_len": rr.prompt_len, "children": children}),
            )
        })
        .collect();
    let utilities: serde_json::Map<String, Json> = r
        .utilities
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                match v {
                    Ok(v) => json!({"result": value_to_json(v)}),
                    Err(e) => json!({"error": e.to_string()}),
                },
            )
        })
        .collect();
    json!({"scenario": s.name, "requests": requests, "utilities": utilities, "drift": r.drift})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_with_unknown_checks_or_no_requests_are_rejected() {
        let e = Scenario::from_json("x", r#"{"requests":[{"id":"a","request":{}}],"checks":[{"check":"vibes"}]}"#)
            .unwrap_err();
        assert!(e.contains("unknown check \"vibes\""), "{e}");
        assert!(Scenario::from_json("x", r#"{"checks":[]}"#).unwrap_err().contains("no requests"));
        assert!(Scenario::from_json("x", r#"{"requests":[{"id":"a"}]}"#).unwrap_err().contains("request missing"));
        assert!(Scenario::from_json("x", "nonsense").is_err());
    }

    #[test]
    fn requests_run_in_levels_of_after_and_cycles_are_refused() {
        let s = Scenario::from_json(
            "t",
            r#"{"requests":[{"id":"c","after":"b","request":{}},{"id":"a","request":{}},{"id":"b","after":"a","request":{}}]}"#,
        )
        .unwrap();
        assert_eq!(levels(&s.requests).unwrap(), vec![vec![1], vec![2], vec![0]]);
        let e = Scenario::from_json(
            "t",
            r#"{"requests":[{"id":"a","after":"b","request":{}},{"id":"b","after":"a","request":{}}]}"#,
        )
        .unwrap_err();
        assert!(e.contains("cycle"), "{e}");
        let e = Scenario::from_json("t", r#"{"requests":[{"id":"a","after":"zz","request":{}}]}"#).unwrap_err();
        assert!(e.contains("no request"), "{e}");
    }

    #[test]
    fn raw_requests_take_hex_frames_or_field_edits() {
        let s = Scenario::from_json(
            "t",
            r#"{"requests":[{"id":"m","raw":{"frames":["00","c1"]}},
                            {"id":"e","request":{},"raw":{"set":{"prompt_token_ids":{"$repeat":[5,3]}}}}]}"#,
        )
        .unwrap();
        assert_eq!(s.requests[0].raw, Some(Raw::Frames(vec![vec![0], vec![0xc1]])));
        assert!(matches!(&s.requests[1].raw, Some(Raw::Edit(e)) if e.len() == 1));
        for bad in [r#"{"frames":["0g"]}"#, r#"{"frames":[]}"#, r#"{"set":3}"#, r#"{}"#] {
            let text = format!(r#"{{"requests":[{{"id":"m","request":{{}},"raw":{bad}}}]}}"#);
            assert!(Scenario::from_json("t", &text).is_err(), "{bad}");
        }
    }

    #[test]
    fn setting_a_path_edits_the_engine_request_and_names_what_is_missing() {
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        let sp = engine_protocol::typed::sampling_params(release);
        let mut v = engine_protocol::typed::engine_core_request(release, "r", vec![1, 2], sp, 1.0);
        set_path(&mut v, "prompt_token_ids", &json!({"$repeat": [5, 4]})).unwrap();
        set_path(&mut v, "sampling_params.max_tokens", &json!(3)).unwrap();
        let Value::Struct(s) = &v else { panic!() };
        assert_eq!(s.get("prompt_token_ids"), Some(&Value::IntArray(vec![5; 4])));
        assert_eq!(s.struct_field("sampling_params").and_then(|p| p.int_field("max_tokens")), Some(3));
        assert!(set_path(&mut v, "sampling_params.nope", &json!(1)).unwrap_err().contains("nope"));
        assert!(set_path(&mut v, "request_id.x", &json!(1)).unwrap_err().contains("not a struct"));
    }

    #[test]
    fn same_tokens_check_compares_every_child() {
        let s = Scenario::from_json(
            "t",
            r#"{"requests":[{"id":"a","request":{}},{"id":"b","request":{}}],
                "checks":[{"check":"same_tokens","requests":["a","b"]}]}"#,
        )
        .unwrap();
        let mut r = RunResult::default();
        let child = |t: Vec<i64>| ChildResult {
            engine_tokens: t,
            finish_reason: Some(FinishReason::Length),
            ..Default::default()
        };
        r.requests.insert("a".into(), RequestResult { children: vec![child(vec![1, 2])], ..Default::default() });
        r.requests.insert("b".into(), RequestResult { children: vec![child(vec![1, 2])], ..Default::default() });
        assert!(evaluate(&s, &r, "mock").is_empty());
        r.requests.get_mut("b").unwrap().children[0].engine_tokens = vec![1, 3];
        let f = evaluate(&s, &r, "mock");
        assert_eq!(f.len(), 1);
        assert!(f[0].contains("same_tokens"), "{f:?}");
    }

    #[test]
    fn constraint_checks_accept_the_language_and_nothing_else() {
        let schema = json!({"json": {"type": "object", "properties": {"ok": {"type": "boolean"},
            "color": {"enum": ["red", "blue"]}}, "required": ["ok", "color"], "additionalProperties": false}});
        assert!(satisfies(&schema, r#"{"ok":true,"color":"red"}"#, None).is_ok());
        for bad in [
            r#"{"ok":1,"color":"red"}"#,
            r#"{"ok":true}"#,
            r#"{"ok":true,"color":"green"}"#,
            r#"{"ok":true,"color":"red","x":1}"#,
            "{",
        ] {
            assert!(satisfies(&schema, bad, None).is_err(), "{bad}");
        }
        let re = json!({"regex": "[a-c]{3}-[0-9]{2}"});
        assert!(satisfies(&re, "abc-12", None).is_ok());
        assert!(satisfies(&re, "abc-123", None).is_err());
        let choice = json!({"choice": ["red", "green"]});
        assert!(satisfies(&choice, "green", None).is_ok() && satisfies(&choice, "gree", None).is_err());
        let grammar = json!({"grammar": "root ::= \"x\" (\"a\" | \"b\")"});
        assert!(satisfies(&grammar, "xa", Some("x(a|b)")).is_ok());
        assert!(satisfies(&grammar, "xab", Some("x(a|b)")).is_err());
        assert!(satisfies(&grammar, "xa", None).unwrap_err().contains("language_regex"));
    }

    fn lists(release: &'static engine_protocol::ReleaseSchema, ids: &[i32], lps: &[f32], rank: i64) -> Value {
        let schema = release
            .engine_core_output
            .fields
            .iter()
            .find(|f| f.name == "new_logprobs")
            .and_then(|f| f.ty.as_struct())
            .unwrap();
        let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
            Value::Tensor(Box::new(engine_protocol::Tensor { dtype: dtype.into(), shape, data }))
        };
        let mut l = StructValue::with_defaults(schema);
        l.set(
            "logprob_token_ids",
            t("<i4", vec![1, ids.len() as i64], ids.iter().flat_map(|x| x.to_le_bytes()).collect()),
        )
        .set("logprobs", t("<f4", vec![1, lps.len() as i64], lps.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .set("sampled_token_ranks", t("<i8", vec![1], rank.to_le_bytes().to_vec()));
        Value::Struct(l)
    }

    #[test]
    fn sample_logprobs_check_reads_rows_ranks_and_shaping() {
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        let out = |tok: i64, l: Value| {
            let mut o = StructValue::with_defaults(release.engine_core_output);
            o.set("new_token_ids", Value::IntArray(vec![tok])).set("new_logprobs", l);
            o
        };
        // Greedy: the sampled token is also the top one (rank 1).
        let good = ChildResult {
            engine_tokens: vec![7, 9],
            outputs: vec![
                out(7, lists(release, &[7, 7, 3, 4], &[-0.5, -0.5, -1.0, -2.0], 1)),
                out(9, lists(release, &[9, 1, 9, 4], &[-1.0, -0.7, -1.0, -2.0], 2)),
            ],
            ..Default::default()
        };
        check_sample_logprobs(&good, 3).unwrap();
        check_sample_logprobs(&good, 1).unwrap();
        let mut wrong_first = good.clone();
        wrong_first.outputs[0] = out(7, lists(release, &[3, 7, 3, 4], &[-0.5, -0.5, -1.0, -2.0], 1));
        assert!(check_sample_logprobs(&wrong_first, 3).unwrap_err().contains("not the sampled token"));
        let mut too_few = good.clone();
        too_few.engine_tokens.push(1);
        assert!(check_sample_logprobs(&too_few, 3).unwrap_err().contains("rows for 3 tokens"));
        assert!(check_sample_logprobs(&good, 4).unwrap_err().contains("columns"));
        // Tensors whose data does not fit their shape are an error, not a panic.
        let mut short = good.clone();
        let mut l = lists(release, &[7, 7], &[-0.5, -0.5], 1);
        if let Value::Struct(s) = &mut l {
            if let Some(Value::Tensor(t)) = s.get_mut("logprob_token_ids") {
                t.shape = vec![1, 4];
            }
        }
        short.outputs[0] = out(7, l);
        assert!(check_sample_logprobs(&short, 1).is_err());
        let mut empty = good.clone();
        empty.outputs[0] = out(7, lists(release, &[], &[], 1));
        assert!(check_sample_logprobs(&empty, -1).is_err());
    }

    #[test]
    fn a_utility_failure_is_the_engine_refusing_the_call_not_a_timeout_naming_it() {
        let check = json!({"check": "utility_failure", "call": "u", "contains": "no_such_method"});
        let with = |e: TransportError| {
            let mut r = RunResult::default();
            r.utilities.insert("u".into(), Err(e));
            check_one(&check, &r)
        };
        let refused = TransportError::Utility {
            method: "no_such_method".into(),
            message: "AttributeError: no attribute 'no_such_method'".into(),
        };
        assert_eq!(with(refused), Ok(()));
        let other = TransportError::Utility { method: "no_such_method".into(), message: "ValueError".into() };
        assert!(with(other).unwrap_err().contains("expected it to mention"));
        // The message names the method, but the engine never answered.
        let timeout =
            TransportError::UtilityTimeout { method: "no_such_method".into(), waited: Duration::from_secs(5) };
        let e = with(timeout).unwrap_err();
        assert!(e.contains("no reply within 5.0s"), "{e}");
    }

    #[test]
    fn wire_values_render_as_the_canonical_view() {
        let v = Value::Map(vec![
            (Value::Int(7), Value::Float(f64::NAN)),
            (Value::Str("b".into()), Value::Bytes(vec![0, 255])),
            (Value::Str("inf".into()), Value::Array(vec![Value::Float(f64::NEG_INFINITY), Value::UInt(u64::MAX)])),
        ]);
        assert_eq!(value_to_json(&v), json!({"7": "NaN", "b": {"$bytes": "00ff"}, "inf": ["-Infinity", u64::MAX]}));
    }
}
