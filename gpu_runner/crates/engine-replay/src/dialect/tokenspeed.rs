//! TokenSpeed in a replay run ([`crate::replay::run::Replay`]): a
//! gateway-level request translated by
//! `engine_protocol::translate::tokenspeed` to one
//! `TokenizedGenerateReqInput` (raw `set` paths point into it), its rows
//! read until the terminal one, and a wait per row of its own.
//!
//! Facts relied on (docs/tokenspeed-wire.md §5, §7; docs/runner/tokenspeed.md
//! "TokenSpeed scenarios"; TokenSpeed 0.1.1
//! `generation_output_processor.py`): `output_ids` are deltas, the counts
//! cumulative; the finish string is `""` until the terminal row, then
//! `stop`, `length` or `abort` (any other string reads as `stop`), and it
//! carries no matched token or string; a request the receive path refuses
//! gets exactly one `"abort"` row; an ADD that does not decode gets
//! nothing; a client ABORT gets no row; the engine has no silence deadline
//! of its own, so the run waits per row.

use engine_protocol::translate::tokenspeed::{translate, TokenSpeedEngineInfo, TokenSpeedOptions};
use engine_protocol::translate::{GenerateRequest, RequestStream as StopStream, StopParams};
use engine_protocol::typed::tokenspeed::{BatchRow, Finish};
use engine_protocol::typed::FinishReason;
use engine_protocol::{encode_message, MessageKind, Value};
use serde_json::Value as Json;

use crate::adapt::Observe;
use crate::replay::run::{
    collect, fail, request_id, set_path, ChildResult, Context, Replay, RequestOutcome, RequestResult, StepView, Wait,
};
use engine_client::dialect::tokenspeed::{release, Tokenspeed};
use engine_client::transport::{DeathCause, TransportError};
use scenario_checks::check::Observation;
use scenario_checks::scenario::{Raw, RequestSpecOf, ScenarioOf};

/// The TokenSpeed run's translation options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayOptions {
    /// The engine runs with `--enable-output-logprobs`.
    pub enable_output_logprobs: bool,
}

type Spec = scenario_checks::scenario::tokenspeed::Tokenspeed;

impl Replay for Tokenspeed {
    type Spec = Spec;
    type Options = ReplayOptions;
    type Kept = BatchRow;
    const ABORT_ENDS_OUTPUT: bool = true;

    async fn run_spec(
        ctx: &Context<'_, Tokenspeed>,
        s: &ScenarioOf<Spec>,
        spec: &RequestSpecOf<Spec>,
    ) -> Vec<(String, RequestResult<Tokenspeed>)> {
        let rid = request_id(&s.name, &spec.id);
        let mut rr = RequestResult { spec_id: spec.id.clone(), request: spec.request.clone(), ..Default::default() };
        let mut c = ChildResult { engine_request_id: rid.clone(), ..Default::default() };
        if let Some((frames, detector)) = build(ctx, &rid, spec, &mut rr, &mut c) {
            match ctx.gateway.add_frames(ctx.engine, &rid, frames).await {
                Ok(stream) => collect(ctx, stream, detector, spec, &mut c).await,
                Err(e) => fail(&mut c, &e, false),
            }
        }
        rr.children.push(c);
        vec![(spec.id.clone(), rr)]
    }

    fn view(row: &BatchRow) -> StepView<'_> {
        StepView {
            tokens: engine_client::dialect::tokenspeed::row_tokens(row),
            finish: finish_reason(&row.finish),
            stop: None,
        }
    }

    fn keep(_c: &mut ChildResult<Tokenspeed>, row: BatchRow) -> BatchRow {
        row
    }

    fn wait(ctx: &Context<'_, Tokenspeed>, spec: &RequestSpecOf<Spec>) -> Wait {
        Wait::PerOutput(spec.wait.unwrap_or(ctx.silence))
    }

    fn outcome_of(e: &TransportError, added: bool) -> RequestOutcome {
        match e {
            TransportError::EngineDead { cause: DeathCause::Sentinel, .. } if added => RequestOutcome::DeathSentinel,
            _ => RequestOutcome::Failed,
        }
    }

    fn error_text(e: &TransportError) -> String {
        match e {
            TransportError::EngineDead { cause, .. } => cause.to_string(),
            other => other.to_string(),
        }
    }

    fn finished(client: FinishReason, _engine: Option<FinishReason>) -> RequestOutcome {
        if client == FinishReason::Abort {
            RequestOutcome::AbortRow
        } else {
            RequestOutcome::Finished
        }
    }
}

/// TokenSpeed's results as the checks read them: TokenSpeed 0.1.1 clamps a
/// request to `max_req_len − prompt − 1` (`_apply_generation_budget`), so
/// one token of the room is held back; the checks read the rows, late
/// ones included.
impl Observe for Tokenspeed {
    const ROOM_HELD_BACK: i64 = 1;

    fn observe_outputs(kept: &[BatchRow], into: &mut Observation) {
        into.rows = kept.to_vec();
    }
}

/// The frames to send and the stop detector, or `None` when the request
/// ended before it was sent (refused, a raw edit that does not apply, an
/// encode failure; noted in `rr` and `c`).
fn build(
    ctx: &Context<'_, Tokenspeed>,
    rid: &str,
    spec: &RequestSpecOf<Spec>,
    rr: &mut RequestResult<Tokenspeed>,
    c: &mut ChildResult<Tokenspeed>,
) -> Option<(Vec<Vec<u8>>, Option<StopStream>)> {
    if let Some(Raw::Frames(f)) = &spec.raw {
        return Some((f.clone(), None));
    }
    let built = match translate_request(ctx, rid, &spec.request, spec.dialect.stream) {
        Ok(b) => b,
        Err(r) => {
            rr.refused = Some(r);
            c.outcome = RequestOutcome::Refused;
            return None;
        }
    };
    let mut v = built.request;
    if let Some(Raw::Edit(sets)) = &spec.raw {
        for (path, new) in sets {
            if let Err(e) = set_path(&mut v, path, new) {
                c.error = Some(format!("raw set {path}: {e}"));
                c.outcome = RequestOutcome::Failed;
                return None;
            }
        }
    }
    rr.prompt = built.prompt.iter().map(|&t| i64::from(t)).collect();
    rr.prompt_len = built.prompt.len();
    rr.warnings = built.warnings;
    let frames = match encode_message(release(), MessageKind::EngineCoreRequest, &v) {
        Ok(f) => f,
        Err(e) => {
            c.error = Some(format!("encode: {e}"));
            c.outcome = RequestOutcome::Failed;
            return None;
        }
    };
    c.sent = Some(v);
    Some((frames, Some(StopStream::new(ctx.tokenizer, &built.prompt, built.stop))))
}

/// What the translation gives the runner.
struct Built {
    request: Value,
    stop: StopParams,
    prompt: Vec<u32>,
    warnings: Vec<String>,
}

fn translate_request(
    ctx: &Context<'_, Tokenspeed>,
    rid: &str,
    body: &Json,
    stream: bool,
) -> Result<Built, (String, String)> {
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
        enable_output_logprobs: ctx.options.enable_output_logprobs,
    };
    let opts = TokenSpeedOptions { stream, ..TokenSpeedOptions::default() };
    let t = translate(&req, &info, ctx.tokenizer, &opts).map_err(|e| (e.class.as_str().to_string(), e.to_string()))?;
    Ok(Built { request: t.request, stop: t.stop, prompt: req.prompt_token_ids.clone(), warnings: t.warnings })
}

/// A terminal row's finish as the client sees it; `None` while running.
fn finish_reason(f: &Finish) -> Option<FinishReason> {
    match f {
        Finish::Running => None,
        Finish::Length => Some(FinishReason::Length),
        Finish::Abort => Some(FinishReason::Abort),
        // Any other terminal string ends the request as a stop (as SMG
        // treats unknown finish strings).
        Finish::Stop | Finish::Other(_) => Some(FinishReason::Stop),
    }
}
