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
//! scenario's vocabulary where it applies; the checks are listed in
//! docs/runner.md.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use engine_protocol::translate::tokenspeed::{translate, TokenSpeedEngineInfo, TokenSpeedOptions};
use engine_protocol::translate::{EngineStep, GatewayTokenizer, GenerateRequest, RequestStream, StopParams};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{encode_message, MessageKind, Value};
use serde_json::Value as Json;
use tokio::time::Instant;

use crate::dialect::tokenspeed::release;
use crate::transport::handshake::EngineFacts;
use crate::scenario::{levels, load_dir_of, set_path, value_to_json, Dialect, Raw, RequestSpecOf, ScenarioOf};
use engine_protocol::typed::tokenspeed::{BatchRow, Finish};

use crate::dialect::Tokenspeed as Wire;
use crate::transport::{DeathCause, Gateway, RequestEvent, TransportError};

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

/// The checks a TokenSpeed scenario may list (docs/runner.md).
pub const TS_CHECKS: &[&str] = &[
    "finish_reason",
    "stop_reason",
    "tokens",
    "engine_tokens",
    "text",
    "text_contains",
    "text_not_contains",
    "num_tokens",
    "outcome",
    "refused",
    "sent",
    "terminal_abort_row",
    "silence",
    "silent_after_abort",
    "same_tokens",
    "different_tokens",
    "no_token_in_first",
    "rows",
    "row_completions",
    "counts",
    "logprobs",
];

impl Dialect for Tokenspeed {
    type Request = TsRequestFields;
    type Scenario = TsScenarioFields;
    const CHECKS: &'static [&'static str] = TS_CHECKS;
    const EMPTY: &'static str = "no requests";

    fn request(r: &Json, at: &str) -> Result<TsRequestFields, String> {
        let stream = match r.get("stream") {
            None => false,
            Some(b) => b.as_bool().ok_or_else(|| format!("{at}.stream: expected a bool, got {b}"))?,
        };
        Ok(TsRequestFields { stream })
    }

    fn scenario(o: &serde_json::Map<String, Json>, _name: &str) -> Result<TsScenarioFields, String> {
        Ok(TsScenarioFields { mock: o.get("mock").cloned() })
    }
}

/// Every `*.json` scenario in `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<TsScenario>, String> {
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
    pub rows: Vec<BatchRow>,
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
    pub gateway: &'a Gateway<Wire>,
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
    let engine = ctx.facts.index;
    let mut rx = match ctx.gateway.add_frames(engine, &rid, frames).await {
        Ok(rx) => rx,
        Err(e) => {
            res.error = Some(e.to_string());
            res.outcome = TsOutcome::Failed;
            return res;
        }
    };
    let wait = spec.wait.unwrap_or(ctx.silence);
    // When the gateway sent an ABORT: the stream ends there (no row comes
    // for a client abort); rows still queued are late, and the gateway
    // times those that come after it.
    let mut abort_at: Option<Instant> = None;
    loop {
        let ev = match tokio::time::timeout(wait, rx.next()).await {
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
            None | Some(RequestEvent::Aborted) => break,
            Some(RequestEvent::Failed(e)) => {
                if abort_at.is_none() {
                    res.outcome = match &e {
                        TransportError::EngineDead { cause: DeathCause::Sentinel, .. } => TsOutcome::DeathSentinel,
                        _ => TsOutcome::Failed,
                    };
                    res.error = Some(match e {
                        TransportError::EngineDead { cause, .. } => cause.to_string(),
                        other => other.to_string(),
                    });
                }
                break;
            }
            Some(RequestEvent::Output(r)) => r,
        };
        if let Some(at) = abort_at {
            res.late_rows_ms.push(Instant::now().saturating_duration_since(at).as_millis());
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
                    if let Err(e) = ctx.gateway.abort(engine, std::slice::from_ref(&rid)).await {
                        res.error = Some(e.to_string());
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
                    if let Err(e) = ctx.gateway.abort(engine, std::slice::from_ref(&rid)).await {
                        res.error = Some(e.to_string());
                    }
                }
            }
        }
        if terminal && abort_at.is_none() {
            break;
        }
    }
    if abort_at.is_some() {
        // Watch the grace period for rows that still come.
        tokio::time::sleep(spec.grace).await;
        let late = ctx.gateway.late_outputs(&rid).await.unwrap_or_default();
        res.late_rows_ms.extend(late.iter().map(Duration::as_millis));
    }
    ctx.gateway.forget(std::slice::from_ref(&rid));
    res
}

/// Check failures of a scenario's run (empty: all pass).
pub fn evaluate(s: &TsScenario, r: &TsRun, engine: &str) -> Vec<String> {
    let mut failures = Vec::new();
    let mut named: Vec<String> = Vec::new();
    for (i, c) in s.checks.iter().enumerate() {
        let what = c.get("check").and_then(Json::as_str).unwrap_or("?");
        if let Some(engines) = c.get("engines").and_then(Json::as_array) {
            if !engines.iter().any(|e| e.as_str() == Some(engine)) {
                continue;
            }
        }
        if matches!(what, "outcome" | "refused" | "terminal_abort_row" | "silence") {
            if let Some(id) = c.get("request").and_then(Json::as_str) {
                named.push(id.to_string());
            }
        }
        if let Err(e) = check_one(c, r) {
            let req = c.get("request").and_then(Json::as_str).unwrap_or("");
            failures.push(format!("check {i} {what} {req}: {e}"));
        }
    }
    // A request that did not finish fails the scenario unless a check
    // names how it ended.
    for (id, res) in &r.requests {
        let ok = matches!(res.outcome, TsOutcome::Finished | TsOutcome::Aborted);
        if !ok && !named.contains(id) {
            failures.push(format!(
                "request {id} ended {} ({}) and no check expects that",
                res.outcome.as_str(),
                res.error.clone().or_else(|| res.refused.as_ref().map(|r| r.1.clone())).unwrap_or_default()
            ));
        }
    }
    failures
}

fn expect_eq(got: Json, want: &Json) -> Result<(), String> {
    if &got == want {
        Ok(())
    } else {
        Err(format!("got {got}, expected {want}"))
    }
}

fn get<'a>(c: &Json, r: &'a TsRun) -> Result<&'a TsResult, String> {
    let id = c.get("request").and_then(Json::as_str).ok_or("no `request`")?;
    r.requests.get(id).ok_or_else(|| format!("no request {id}"))
}

fn check_one(c: &Json, r: &TsRun) -> Result<(), String> {
    let is = c.get("is").cloned().unwrap_or(Json::Null);
    let what = c.get("check").and_then(Json::as_str).ok_or("no `check`")?;
    match what {
        "finish_reason" => expect_eq(get(c, r)?.finish.clone().map_or(Json::Null, Json::String), &is),
        "stop_reason" => {
            let got = match &get(c, r)?.stop_reason {
                None => Json::Null,
                Some(StopReason::Text(s)) => Json::String(s.clone()),
                Some(StopReason::TokenId(t)) => Json::from(*t),
            };
            expect_eq(got, &is)
        }
        "tokens" => expect_eq(Json::from(get(c, r)?.client_tokens.clone()), &is),
        "engine_tokens" => expect_eq(Json::from(get(c, r)?.engine_tokens.clone()), &is),
        "text" => expect_eq(Json::String(get(c, r)?.text.clone()), &is),
        "text_contains" | "text_not_contains" => {
            let t = &get(c, r)?.text;
            let needle = c.get("text").and_then(Json::as_str).ok_or("no `text`")?;
            if t.contains(needle) == (what == "text_contains") {
                Ok(())
            } else {
                Err(format!("text {t:?} vs {needle:?}"))
            }
        }
        "num_tokens" => {
            let res = get(c, r)?;
            let want = match is.as_str() {
                // The engine's own clamp: max_req_len - prompt_len - 1.
                Some("room") => r.max_model_len - res.prompt_len as i64 - 1,
                _ => is.as_i64().ok_or("`is` is not an integer or \"room\"")?,
            };
            expect_eq(Json::from(res.client_tokens.len()), &Json::from(want))
        }
        "outcome" => expect_eq(Json::String(get(c, r)?.outcome.as_str().into()), &is),
        "refused" => {
            let res = get(c, r)?;
            match (&res.refused, c.get("class").and_then(Json::as_str)) {
                (None, _) => Err(format!("not refused (outcome {})", res.outcome.as_str())),
                (Some((class, _)), Some(want)) if class != want => Err(format!("refused as {class}, not {want}")),
                _ => Ok(()),
            }
        }
        "sent" => {
            let res = get(c, r)?;
            let path = c.get("path").and_then(Json::as_str).ok_or("no `path`")?;
            let mut cur = res.sent.as_ref().ok_or("nothing was encoded for it")?;
            for p in path.split('.') {
                let Value::Struct(s) = cur else { return Err(format!("{path}: not a struct on the way")) };
                cur = s.get(p).ok_or_else(|| format!("no field {p}"))?;
            }
            expect_eq(value_to_json(cur), &is)
        }
        "terminal_abort_row" => {
            let res = get(c, r)?;
            match res.rows.as_slice() {
                [row] if row.finish == Finish::Abort && row.output_ids.is_empty() && row.completion_tokens == 0 => {
                    Ok(())
                }
                rows => Err(format!(
                    "expected one row (abort, no ids, completion 0), got {:?}",
                    rows.iter()
                        .map(|x| (x.finish.as_str(), x.output_ids.len(), x.completion_tokens))
                        .collect::<Vec<_>>()
                )),
            }
        }
        "silence" => {
            let res = get(c, r)?;
            if res.outcome == TsOutcome::Silence && res.rows.is_empty() {
                Ok(())
            } else {
                Err(format!("{} rows, outcome {}", res.rows.len(), res.outcome.as_str()))
            }
        }
        "silent_after_abort" => {
            let res = get(c, r)?;
            let settle = c.get("settle_ms").and_then(Json::as_u64).unwrap_or(100) as u128;
            if !res.abort_sent {
                return Err("no ABORT was sent".into());
            }
            match res.late_rows_ms.iter().find(|&&ms| ms > settle) {
                Some(ms) => Err(format!("a row came {ms} ms after the ABORT")),
                None => Ok(()),
            }
        }
        "same_tokens" | "different_tokens" => {
            let ids: Vec<&str> = c
                .get("requests")
                .and_then(Json::as_array)
                .ok_or("no `requests`")?
                .iter()
                .filter_map(Json::as_str)
                .collect();
            let toks: Vec<&Vec<i64>> = ids
                .iter()
                .map(|id| r.requests.get(*id).map(|x| &x.engine_tokens).ok_or_else(|| format!("no request {id}")))
                .collect::<Result<_, _>>()?;
            let same = toks.windows(2).all(|w| w[0] == w[1]);
            let distinct = toks.windows(2).all(|w| w[0] != w[1]);
            if (what == "same_tokens" && same) || (what == "different_tokens" && distinct) {
                Ok(())
            } else {
                Err(format!("{toks:?}"))
            }
        }
        "no_token_in_first" => {
            let res = get(c, r)?;
            let n = c.get("n").and_then(Json::as_u64).ok_or("no `n`")? as usize;
            let banned: Vec<i64> = c
                .get("tokens")
                .and_then(Json::as_array)
                .ok_or("no `tokens`")?
                .iter()
                .filter_map(Json::as_i64)
                .collect();
            match res.engine_tokens.iter().take(n).find(|t| banned.contains(t)) {
                Some(t) => Err(format!("token {t} among the first {n}: {:?}", res.engine_tokens)),
                None => Ok(()),
            }
        }
        "rows" => expect_eq(Json::from(get(c, r)?.rows.len()), &is),
        "row_completions" => {
            expect_eq(Json::from(get(c, r)?.rows.iter().map(|x| x.completion_tokens).collect::<Vec<_>>()), &is)
        }
        "counts" => {
            // Cumulative counts: completion = ids so far; prompt = the prompt.
            let res = get(c, r)?;
            let mut total = 0i64;
            for (i, row) in res.rows.iter().enumerate() {
                total += row.output_ids.len() as i64;
                if row.completion_tokens != total {
                    return Err(format!("row {i}: completion_tokens {} after {total} ids", row.completion_tokens));
                }
                if row.prompt_tokens != res.prompt_len as i64 {
                    return Err(format!(
                        "row {i}: prompt_tokens {} for a {}-token prompt",
                        row.prompt_tokens, res.prompt_len
                    ));
                }
            }
            if res.rows.is_empty() {
                return Err("no rows".into());
            }
            Ok(())
        }
        "logprobs" => {
            // One finite, non-positive f64 per new id, over the same ids.
            let res = get(c, r)?;
            let want = is.as_bool().unwrap_or(true);
            for (i, row) in res.rows.iter().enumerate() {
                if !want {
                    if !row.logprob_vals.is_empty() || !row.logprob_ids.is_empty() {
                        return Err(format!("row {i} carries logprobs"));
                    }
                    continue;
                }
                if row.logprob_ids != row.output_ids || row.logprob_vals.len() != row.output_ids.len() {
                    return Err(format!(
                        "row {i}: {} values over {:?} for ids {:?}",
                        row.logprob_vals.len(),
                        row.logprob_ids,
                        row.output_ids
                    ));
                }
                if let Some(x) = row.logprob_vals.iter().find(|x| !x.is_finite() || **x > 0.0) {
                    return Err(format!("row {i}: logprob {x}"));
                }
            }
            Ok(())
        }
        other => Err(format!("unknown check {other:?}")),
    }
}
