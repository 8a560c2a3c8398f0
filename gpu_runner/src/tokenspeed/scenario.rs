//! TokenSpeed replay scenarios: gateway-level requests translated to
//! `TokenizedGenerateReqInput`, sent over [`super::gateway::TsGateway`], the
//! rows accumulated per rid and run through the gateway's stop-string
//! detection, then checked (docs/runner.md "TokenSpeed scenarios").
//!
//! Wire facts the checks rely on (docs/tokenspeed-wire.md §5, §7;
//! TokenSpeed 0.1.1 `generation_output_processor.py`):
//!
//! - `output_ids` are deltas, `prompt_tokens` / `completion_tokens` are
//!   cumulative and repeated on every row; the finish string is `""` until
//!   the terminal row, then `stop`, `length` or `abort`, and it carries no
//!   matched token or string;
//! - a request the receive path refuses gets exactly one row: `"abort"`,
//!   no ids, completion 0; an ADD that does not decode gets nothing;
//! - a client ABORT gets no row;
//! - with `return_logprob`, each row carries one f64 logprob and one id per
//!   new id (the sampled token only).
//!
//! Scenario files (`golden/replay/tokenspeed/*.json`) use the vLLM
//! scenario's model ([`crate::replay::model`]) and the shared check
//! vocabulary ([`crate::check`]) for [`ScenarioKind::Tokenspeed`]; the
//! checks are listed in docs/runner.md "Check vocabulary".

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use engine_protocol::translate::tokenspeed::{translate, TokenSpeedEngineInfo, TokenSpeedOptions};
use engine_protocol::translate::{EngineStep, GatewayTokenizer, GenerateRequest, RequestStream, StopParams};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{encode_message, MessageKind, Value};
use serde_json::Value as Json;
use tokio::time::Instant;

use super::gateway::{TsDeath, TsEvent, TsGateway, TsRow};
use super::mock::release;
use crate::check::ScenarioKind;
use crate::handshake::EngineFacts;
use crate::load::{LoadError, ScenarioError};
use crate::scenario::{levels, load_dir_of, set_path, Dialect, Raw, RequestSpecOf, ScenarioOf};
use engine_protocol::typed::tokenspeed::Finish;

/// The TokenSpeed dialect of the shared scenario model
/// ([`crate::scenario::ScenarioOf`]): the header, request specs, `after`
/// levels and raw requests are the vLLM scenario's; `raw.set` paths point
/// into the `TokenizedGenerateReqInput`.
#[derive(Debug, Clone)]
pub struct Tokenspeed;

/// TokenSpeed's own request-spec fields.
#[derive(Debug, Clone)]
pub struct TsRequestFields {
    /// `TokenizedGenerateReqInput.stream`.
    pub stream: bool,
}

/// TokenSpeed's own scenario fields.
#[derive(Debug, Clone, Default)]
pub struct TsScenarioFields {
    /// The mock's script for a fresh mock engine (docs/runner.md).
    pub mock: Option<Json>,
}

/// A TokenSpeed scenario.
pub type TsScenario = ScenarioOf<Tokenspeed>;
/// One request of a TokenSpeed scenario.
pub type TsRequestSpec = RequestSpecOf<Tokenspeed>;

impl Dialect for Tokenspeed {
    type Request = TsRequestFields;
    type Scenario = TsScenarioFields;
    const KIND: ScenarioKind = ScenarioKind::Tokenspeed;
    const EMPTY: &'static str = "no requests";

    fn request(r: &Json, at: &str) -> Result<TsRequestFields, ScenarioError> {
        let stream = match r.get("stream") {
            None => false,
            Some(b) => b.as_bool().ok_or_else(|| format!("{at}.stream: expected a bool, got {b}"))?,
        };
        Ok(TsRequestFields { stream })
    }

    fn scenario(o: &serde_json::Map<String, Json>, _name: &str) -> Result<TsScenarioFields, ScenarioError> {
        Ok(TsScenarioFields { mock: o.get("mock").cloned() })
    }
}

/// Every `*.json` scenario in `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<TsScenario>, LoadError> {
    load_dir_of::<Tokenspeed>(dir)
}

/// How a request ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TsOutcome {
    #[default]
    None,
    /// A terminal `stop` / `length` row, or the gateway's stop string.
    Finished,
    /// A terminal `"abort"` row from the engine.
    AbortRow,
    /// Aborted by the gateway (`abort_after_tokens`).
    Aborted,
    /// The translation refused it; nothing was sent.
    Refused,
    /// No row within the wait.
    Silence,
    /// The engine pushed `ENGINE_CORE_DEAD`.
    DeathSentinel,
    /// The engine died otherwise, or the send failed.
    Failed,
}

impl TsOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            TsOutcome::None => "none",
            TsOutcome::Finished => "finished",
            TsOutcome::AbortRow => "abort_row",
            TsOutcome::Aborted => "aborted",
            TsOutcome::Refused => "refused",
            TsOutcome::Silence => "silence",
            TsOutcome::DeathSentinel => "death_sentinel",
            TsOutcome::Failed => "failed",
        }
    }
}

/// What one request produced.
#[derive(Debug, Clone, Default)]
pub struct TsResult {
    pub rid: String,
    /// `(class, message)` when the translation refused it.
    pub refused: Option<(String, String)>,
    /// The `TokenizedGenerateReqInput` sent (not for raw frames).
    pub sent: Option<Value>,
    pub prompt_len: usize,
    pub rows: Vec<TsRow>,
    /// Every id the engine sent.
    pub engine_tokens: Vec<i64>,
    /// After the gateway's stop detection.
    pub client_tokens: Vec<i64>,
    pub text: String,
    /// The client's finish: `stop`, `length`, `abort`.
    pub finish: Option<String>,
    pub stop_reason: Option<StopReason>,
    pub outcome: TsOutcome,
    pub error: Option<String>,
    /// The gateway sent an ABORT (stop string, `abort_after_tokens`).
    pub abort_sent: bool,
    /// Rows that came more than `settle` after the ABORT was sent (ms after it).
    pub late_rows_ms: Vec<u128>,
    /// Translation warnings.
    pub warnings: Vec<String>,
}

/// What the scenario needs to know about the engine.
pub struct TsContext<'a> {
    pub gateway: &'a TsGateway,
    pub facts: &'a EngineFacts,
    pub tokenizer: &'a GatewayTokenizer,
    /// The engine runs with `--enable-output-logprobs`.
    pub enable_output_logprobs: bool,
    /// A request with no row for this long fails (silence).
    pub silence: Duration,
}

/// A scenario's results.
#[derive(Debug, Clone, Default)]
pub struct TsRun {
    pub max_model_len: i64,
    pub requests: BTreeMap<String, TsResult>,
    pub drift: Vec<String>,
}

/// The rid of request `id` of scenario `s`.
pub fn rid(scenario: &str, id: &str) -> String {
    format!("{scenario}.{id}")
}

/// Runs a scenario's requests: those without `after` at once, each other
/// one when the request it follows is done.
pub async fn run(ctx: &TsContext<'_>, s: &TsScenario) -> TsRun {
    let mut out = TsRun { max_model_len: ctx.facts.max_model_len, ..TsRun::default() };
    // The levels were checked when the scenario loaded.
    for level in levels(&s.requests).unwrap_or_default() {
        let futs = level.iter().map(|&i| run_request(ctx, s, &s.requests[i]));
        let results = futures_util::future::join_all(futs).await;
        for (i, r) in level.iter().zip(results) {
            out.requests.insert(s.requests[*i].id.clone(), r);
        }
    }
    out.drift = ctx.gateway.stats().await.drift.into_iter().collect();
    out
}

/// What the translation gives the runner.
struct Built {
    request: Value,
    stop: StopParams,
    prompt: Vec<u32>,
    warnings: Vec<String>,
}

fn translate_request(ctx: &TsContext<'_>, rid: &str, body: &Json, stream: bool) -> Result<Built, (String, String)> {
    let mut req = GenerateRequest::from_json(body).map_err(|e| (e.class.as_str().to_string(), e.to_string()))?;
    req.request_id = rid.to_string();
    if req.prompt_token_ids.is_empty() {
        if let Some(text) = body.get("prompt").and_then(Json::as_str) {
            req.prompt_token_ids = ctx.tokenizer.encode(text);
        }
    }
    let info = TokenSpeedEngineInfo {
        max_model_len: ctx.facts.max_model_len,
        vocab_size: u32::try_from(ctx.tokenizer.vocab_size()).ok(),
        enable_output_logprobs: ctx.enable_output_logprobs,
    };
    let opts = TokenSpeedOptions { stream, ..TokenSpeedOptions::default() };
    let t = translate(&req, &info, ctx.tokenizer, &opts).map_err(|e| (e.class.as_str().to_string(), e.to_string()))?;
    let request = t.request;
    Ok(Built { request, stop: t.stop, prompt: req.prompt_token_ids.clone(), warnings: t.warnings })
}

fn finish_reason(f: &Finish) -> FinishReason {
    match f {
        Finish::Length => FinishReason::Length,
        Finish::Abort => FinishReason::Abort,
        // Any other terminal string ends the request as a stop (as SMG
        // treats unknown finish strings).
        Finish::Stop | Finish::Running | Finish::Other(_) => FinishReason::Stop,
    }
}

fn finish_name(f: FinishReason) -> String {
    match f {
        FinishReason::Stop => "stop".into(),
        FinishReason::Length => "length".into(),
        FinishReason::Abort => "abort".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

async fn run_request(ctx: &TsContext<'_>, s: &TsScenario, spec: &TsRequestSpec) -> TsResult {
    let rid = rid(&s.name, &spec.id);
    let mut res = TsResult { rid: rid.clone(), ..TsResult::default() };
    let (frames, mut stream) = match &spec.raw {
        Some(Raw::Frames(f)) => (f.clone(), None),
        raw => {
            let built = match translate_request(ctx, &rid, &spec.request, spec.dialect.stream) {
                Ok(b) => b,
                Err(r) => {
                    res.refused = Some(r);
                    res.outcome = TsOutcome::Refused;
                    return res;
                }
            };
            let mut v = built.request;
            if let Some(Raw::Edit(sets)) = raw {
                for (path, new) in sets {
                    if let Err(e) = set_path(&mut v, path, new) {
                        res.error = Some(format!("raw set {path}: {e}"));
                        res.outcome = TsOutcome::Failed;
                        return res;
                    }
                }
            }
            res.prompt_len = built.prompt.len();
            res.warnings = built.warnings;
            let frames = match encode_message(release(), MessageKind::EngineCoreRequest, &v) {
                Ok(f) => f,
                Err(e) => {
                    res.error = Some(format!("encode: {e}"));
                    res.outcome = TsOutcome::Failed;
                    return res;
                }
            };
            res.sent = Some(v);
            (frames, Some(RequestStream::new(ctx.tokenizer, &built.prompt, built.stop)))
        }
    };
    let mut rx = match ctx.gateway.add_frames(&rid, frames).await {
        Ok(rx) => rx,
        Err(e) => {
            res.error = Some(e);
            res.outcome = TsOutcome::Failed;
            return res;
        }
    };
    let wait = spec.wait.unwrap_or(ctx.silence);
    let mut abort_at: Option<Instant> = None;
    loop {
        // After an ABORT: watch for late rows over the grace period.
        let deadline = match abort_at {
            Some(at) => at + spec.grace,
            None => Instant::now() + wait,
        };
        let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(ev) => ev,
            Err(_) => {
                if abort_at.is_none() {
                    res.outcome = TsOutcome::Silence;
                    res.error = Some(format!("no row for {} ms", wait.as_millis()));
                }
                break;
            }
        };
        let row = match ev {
            None => break,
            Some(TsEvent::Dead(cause)) => {
                if abort_at.is_none() {
                    res.outcome = if cause == TsDeath::Sentinel { TsOutcome::DeathSentinel } else { TsOutcome::Failed };
                    res.error = Some(cause.to_string());
                }
                break;
            }
            Some(TsEvent::Row(r)) => r,
        };
        if let Some(at) = abort_at {
            let after = row.at.unwrap_or_else(Instant::now).saturating_duration_since(at);
            res.late_rows_ms.push(after.as_millis());
            res.rows.push(row);
            continue;
        }
        res.engine_tokens.extend(&row.output_ids);
        let terminal = row.finish.is_terminal();
        let fin = terminal.then(|| finish_reason(&row.finish));
        if let Some(st) = stream.as_mut() {
            let step = EngineStep {
                new_token_ids: row.output_ids.iter().map(|&t| u32::try_from(t).unwrap_or(u32::MAX)).collect(),
                finish_reason: fin,
                stop_reason: None,
            };
            if let Some(out) = st.step(ctx.tokenizer, &step) {
                res.client_tokens.extend(out.token_ids.iter().map(|&t| i64::from(t)));
                res.text.push_str(&out.text);
                if let Some(f) = out.finish_reason {
                    res.finish = Some(finish_name(f));
                    res.stop_reason = out.stop_reason.clone();
                    res.outcome = if f == FinishReason::Abort { TsOutcome::AbortRow } else { TsOutcome::Finished };
                }
                if out.abort_engine {
                    // A stop string the gateway found: the engine still runs it.
                    res.abort_sent = true;
                    abort_at = Some(Instant::now());
                    if let Err(e) = ctx.gateway.abort(std::slice::from_ref(&rid)).await {
                        res.error = Some(e);
                    }
                }
            }
        } else {
            res.client_tokens.extend(&row.output_ids);
            if let Some(f) = fin {
                res.finish = Some(finish_name(f));
                res.outcome = if f == FinishReason::Abort { TsOutcome::AbortRow } else { TsOutcome::Finished };
            }
        }
        res.rows.push(row);
        if abort_at.is_none() {
            if let Some(n) = spec.abort_after_tokens {
                if res.engine_tokens.len() >= n && !terminal {
                    res.abort_sent = true;
                    res.outcome = TsOutcome::Aborted;
                    res.finish = Some("abort".into());
                    abort_at = Some(Instant::now());
                    if let Err(e) = ctx.gateway.abort(std::slice::from_ref(&rid)).await {
                        res.error = Some(e);
                    }
                }
            }
        }
        if terminal && abort_at.is_none() {
            break;
        }
    }
    ctx.gateway.forget(&rid);
    res
}
