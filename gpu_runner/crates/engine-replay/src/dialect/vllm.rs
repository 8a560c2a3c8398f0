//! vLLM in a replay run ([`crate::replay::run::Replay`]): a gateway-level
//! request translated by `engine_protocol::translate` (`n` fanned out,
//! `max_tokens` from the room left), `repeat` copies, raw requests sent
//! around the gateway's validation, and the scenario's utility calls
//! after its requests.
//!
//! Facts relied on (docs/runner/scenarios.md "Scenarios"; vLLM 0.32.0
//! `vllm/v1/engine/__init__.py`): the engine request is an
//! `EngineCoreRequest` whose `sampling_params.seed` is what a child was
//! sent; an output carries `new_logprobs` (its columns: the sampled token
//! and the top k) and, in the first output only, `new_prompt_logprobs_tensors`;
//! an output with `FinishReason.ERROR` ends the request; a client ABORT
//! produces no output, so an aborted request ends at the gateway.

use engine_protocol::internal::encode_payload_unvalidated;
use engine_protocol::translate::{self, EngineInfo, GenerateRequest, RequestStream as StopStream};
use engine_protocol::typed::{EngineCoreRequest, IntList};
use engine_protocol::{MessageKind, Value};
use serde_json::{json, Value as Json};

use crate::adapt::Observe;
use crate::replay::run::{
    collect, fail, json_to_value, now_secs, request_id, set_path, ChildResult, Context, Replay, RequestResult,
    RunResult, StepView, Wait,
};
use engine_client::dialect::vllm::{Step, Vllm};
use engine_client::transport::{EngineState, TransportError};
use engine_protocol::StructValue;
use scenario_checks::check::Observation;
use scenario_checks::check::RequestOutcome;
use scenario_checks::scenario::{Raw, RequestSpec, Scenario};
use std::time::Duration;

impl Replay for Vllm {
    type Spec = scenario_checks::scenario::Vllm;
    type Options = translate::TranslateOptions;
    type Kept = StructValue;
    const ABORT_ENDS_OUTPUT: bool = false;

    async fn run_spec(ctx: &Context<'_, Vllm>, s: &Scenario, spec: &RequestSpec) -> Vec<(String, RequestResult)> {
        if let Some(rank) = spec.dialect.kill_engine {
            return vec![(spec.id.clone(), kill_engine(ctx, spec, rank).await)];
        }
        if let Some(d) = spec.dialect.sleep {
            tokio::time::sleep(d).await;
            let r = RequestResult { request: json!({ "sleep_ms": d.as_millis() as u64 }), ..Default::default() };
            return vec![(spec.id.clone(), r)];
        }
        // The translation layer works with the typed API's tables; for an
        // older release its requests are carried into that release's
        // table (`translate_now`).
        let release = scenario_checks::release::typed_table(ctx.gateway.release());
        let info = EngineInfo { max_model_len: ctx.facts.max_model_len, release };
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
        let info = &info;
        let one = |(id, body): (String, Json)| async move {
            let mut r = match &spec.raw {
                None if spec.dialect.built => run_built(ctx, info, &body, spec).await,
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

    async fn after_requests(ctx: &Context<'_, Vllm>, s: &Scenario, out: &mut RunResult) {
        for u in &s.dialect.utilities {
            let args = u.args.iter().map(json_to_value).collect();
            let r = ctx.gateway.utility(ctx.engine, &u.method, args).await;
            out.utilities.insert(u.id.clone(), r);
        }
    }

    fn view(step: &Step) -> StepView<'_> {
        StepView { tokens: &step.new_token_ids, finish: step.finish_reason, stop: step.stop_reason.clone() }
    }

    fn keep(c: &mut ChildResult, step: Step) -> StructValue {
        if !c.engine_indices.contains(&step.engine_index) {
            c.engine_indices.push(step.engine_index);
        }
        if let Some(lp) = step.output.struct_field("new_logprobs") {
            if let Some(Value::Tensor(t)) = lp.get("logprobs") {
                c.logprob_columns.push(resolved_shape(t).and_then(|s| s.last().copied()).unwrap_or(0));
            }
        }
        if !step.output.is_nil("new_prompt_logprobs_tensors") {
            c.prompt_logprobs_seen = true;
        }
        step.output.value().clone()
    }

    fn wait(_ctx: &Context<'_, Vllm>, spec: &RequestSpec) -> Wait {
        Wait::Whole(spec.wait)
    }
}

/// vLLM's results as the checks read them: the engine holds nothing back
/// of a request's room (`max_model_len − prompt`), and the checks read the
/// decoded `EngineCoreOutput`s.
impl Observe for Vllm {
    const ROOM_HELD_BACK: i64 = 0;

    fn observe_outputs(kept: &[StructValue], into: &mut Observation) {
        into.outputs = kept.to_vec();
    }
}

/// The shape of `t` with an inferred dimension (`-1`, as vLLM accepts it)
/// resolved from its data, as vLLM's decoder resolves it.
fn resolved_shape(t: &engine_protocol::Tensor) -> Option<Vec<i64>> {
    let size = t.parsed_dtype()?.elem.size();
    let dims = engine_protocol::internal::resolve_shape(&t.shape, t.data.len() / size)?;
    dims.into_iter().map(|d| i64::try_from(d).ok()).collect()
}

/// The gateway's translation of `req`, arriving now (both the checked and
/// the raw path send what it gives). Translated with `info.release` (a
/// table of the typed API); when the engine speaks another (an older
/// release), each engine request is carried into the engine's table by
/// field name: the fields that table lacks are not sent, as that
/// release's own frontend would not send them (a scenario that sets one
/// does not run there: `scenario_checks::scenario::release_gaps::gaps`).
fn translate_now(
    ctx: &Context<'_, Vllm>,
    info: &EngineInfo,
    req: &GenerateRequest,
) -> Result<translate::Translated, translate::TranslateError> {
    let mut opts = ctx.options.clone();
    opts.arrival_time = now_secs();
    let mut t = translate::translate(req, info, ctx.tokenizer, &opts)?;
    let engine = ctx.gateway.release();
    if !std::ptr::eq(engine, info.release) {
        for er in &mut t.requests {
            er.request = scenario_checks::release::project(&er.request, engine.engine_core_request);
        }
    }
    Ok(t)
}

/// A refusal as a result records it: its class and text.
type Refusal = (String, String);

/// A refusal of the translation layer.
fn refused(e: &translate::TranslateError) -> Refusal {
    (e.class.as_str().to_string(), e.to_string())
}

/// `req` made by `EngineCoreRequest::builder` with the served model's EOS
/// facts (its tokenizer and `generation_config.json`) and the engine's
/// `max_model_len`: the sampling fields the builder names, a constraint
/// through the translation layer's checks; the request and the frames
/// `encode_checked` writes for it. A request the builder or
/// `encode_checked` refuses is `refused` (class `builder`). No stop-string
/// detection: the engine sees ids only.
fn build_request(
    ctx: &Context<'_, Vllm>,
    info: &EngineInfo,
    req: &GenerateRequest,
) -> Result<(EngineCoreRequest, Vec<Vec<u8>>), Refusal> {
    let eos = ctx.tokenizer.eos(req.ignore_eos);
    let max_tokens = req.max_tokens.and_then(|m| u32::try_from(m).ok()).ok_or_else(|| {
        ("builder".to_string(), "a built request needs max_tokens (0 to 2^32-1): the engine requires it".to_string())
    })?;
    let prompt = IntList::from_token_ids(&req.prompt_token_ids);
    let mut b = EngineCoreRequest::builder(&req.request_id, prompt, max_tokens, eos)
        .max_model_len(info.max_model_len)
        .arrival_time(now_secs())
        .stop(req.stop.iter().cloned())
        .stop_token_ids(req.stop_token_ids.iter().copied());
    if let Some(t) = req.temperature {
        b = b.temperature(t);
    }
    if let Some(p) = req.top_p {
        b = b.top_p(p);
    }
    if let Some(k) = req.top_k {
        b = b.top_k(k);
    }
    if let Some(seed) = req.seed {
        b = b.seed(seed);
    }
    if let Some(c) = &req.structured_outputs {
        let so = translate::request::check_constraints(c, &ctx.options).map_err(|e| refused(&e))?;
        if let Some(so) = so {
            b = b.constraint(so.constraint, so.backend.unwrap_or_default());
        }
    }
    let request = b.build().map_err(built_refused)?;
    let frames = request.encode_checked(ctx.gateway.release()).map_err(built_refused)?;
    Ok((request, frames))
}

/// A refusal of the builder or of `encode_checked`.
fn built_refused(e: engine_protocol::Error) -> Refusal {
    ("builder".to_string(), e.to_string())
}

/// The gateway-level request of `body` and a result holding its prompt;
/// no request and the refusal in the result when it is not one.
fn parsed(body: &Json) -> (RequestResult, Option<GenerateRequest>) {
    let mut res = RequestResult::default();
    match GenerateRequest::from_json(body) {
        Ok(req) => {
            res.prompt = req.prompt_token_ids.iter().map(|&t| i64::from(t)).collect();
            (res, Some(req))
        }
        Err(e) => {
            res.refused = Some(refused(&e));
            (res, None)
        }
    }
}

async fn run_built(ctx: &Context<'_, Vllm>, info: &EngineInfo, body: &Json, spec: &RequestSpec) -> RequestResult {
    let (mut res, req) = parsed(body);
    let Some(req) = req else { return res };
    res.prompt_len = req.prompt_token_ids.len();
    let (request, frames) = match build_request(ctx, info, &req) {
        Ok(built) => built,
        Err(why) => {
            res.refused = Some(why);
            return res;
        }
    };
    res.sent_max_tokens = req.max_tokens;
    let mut c = ChildResult {
        engine_request_id: request.request_id.clone(),
        engine: spec.dialect.engine.unwrap_or(ctx.engine),
        sent_seed: request.sampling_params.as_ref().and_then(|sp| sp.seed).and_then(|s| i64::try_from(s).ok()),
        ..Default::default()
    };
    // The bytes `encode_checked` wrote are the ones sent.
    match ctx.gateway.add_frames(c.engine, &request.request_id, frames).await {
        Ok(stream) => collect(ctx, stream, None, spec, &mut c).await,
        Err(e) => fail(&mut c, &e, false),
    }
    res.children = vec![c];
    res
}

async fn run_request(ctx: &Context<'_, Vllm>, info: &EngineInfo, body: &Json, spec: &RequestSpec) -> RequestResult {
    let (mut res, req) = parsed(body);
    let Some(req) = req else { return res };
    let t = match translate_now(ctx, info, &req) {
        Ok(t) => t,
        Err(e) => {
            res.refused = Some(refused(&e));
            return res;
        }
    };
    res.sent_max_tokens = Some(t.max_tokens);
    res.prompt_len = t.prompt_len;
    let children = t.requests.iter().map(|er| async {
        // Routed by the rank the request is pinned to, as vLLM's client
        // routes by `data_parallel_rank`.
        let engine = er.typed.data_parallel_rank.and_then(|r| u16::try_from(r).ok()).unwrap_or(ctx.engine);
        let mut c = ChildResult {
            engine_request_id: er.request_id.clone(),
            engine,
            sent_seed: er.sampling_params().int_field("seed"),
            ..Default::default()
        };
        match ctx.gateway.add(engine, &er.request).await {
            Ok(stream) => {
                let detector = StopStream::new(ctx.tokenizer, &req.prompt_token_ids, t.stop.clone());
                collect(ctx, stream, Some(detector), spec, &mut c).await;
            }
            Err(e) => fail(&mut c, &e, false),
        }
        c
    });
    res.children = futures_util::future::join_all(children).await;
    res
}

/// The prompt ids of an (edited) EngineCoreRequest value, however its
/// release types the prompt: a list of ints, or from vLLM 0.34.0 on the
/// int32 array the engine client packs (docs/wire-protocol.md §6.9).
fn sent_prompt(request: &Value) -> Vec<i64> {
    let Value::Struct(s) = request else { return Vec::new() };
    s.get("prompt_token_ids").and_then(Value::token_ids).unwrap_or_default()
}

/// A request sent around the gateway's validation.
async fn run_raw(
    ctx: &Context<'_, Vllm>,
    info: &EngineInfo,
    body: &Json,
    spec: &RequestSpec,
    raw: &Raw,
) -> RequestResult {
    let mut res = RequestResult::default();
    let id = body.get("request_id").and_then(Json::as_str).unwrap_or_default().to_string();
    let frames = match raw {
        Raw::Frames(f) => f.clone(),
        Raw::Edit(edits) => {
            let req = match GenerateRequest::from_json(body) {
                Ok(r) => r,
                Err(e) => {
                    res.refused = Some(refused(&e));
                    return res;
                }
            };
            let t = match translate_now(ctx, info, &req) {
                Ok(t) => t,
                Err(e) => {
                    res.refused = Some(refused(&e));
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
            res.prompt = sent_prompt(&v);
            res.prompt_len = res.prompt.len();
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
    let engine = spec.dialect.engine.unwrap_or(ctx.engine);
    let mut c = ChildResult { engine_request_id: id.clone(), engine, ..Default::default() };
    match ctx.gateway.add_frames(engine, &id, frames).await {
        Ok(stream) => collect(ctx, stream, None, spec, &mut c).await,
        Err(e) => fail(&mut c, &e, false),
    }
    res.children = vec![c];
    res
}

/// `kill_engine`: kills the engine of `rank` outright and waits until the
/// gateway sees it gone; the spec's one child ends with the outcome the
/// gateway gave the death (`input_dropped`, `output_dropped`, ...).
async fn kill_engine(ctx: &Context<'_, Vllm>, spec: &RequestSpec, rank: u16) -> RequestResult {
    let mut res = RequestResult { request: json!({ "kill_engine": rank }), ..Default::default() };
    let mut c = ChildResult { engine: rank, ..Default::default() };
    let killed = match ctx.kill {
        None => Err(crate::replay::run::KillError::Unsupported),
        Some(kill) => kill(rank),
    };
    match killed {
        Err(e) => {
            c.error = Some(e.to_string());
            c.outcome = RequestOutcome::Failed;
        }
        Ok(()) => {
            let wait = spec.wait.unwrap_or(Duration::from_secs(10));
            let until = tokio::time::Instant::now() + wait;
            loop {
                let state = ctx.gateway.engines().into_iter().find(|e| e.index == rank).map(|e| e.state);
                if let Some(EngineState::Dead(cause)) = state {
                    let e = TransportError::EngineDead { engine: rank, cause };
                    fail(&mut c, &e, true);
                    break;
                }
                if tokio::time::Instant::now() >= until {
                    c.error = Some(format!("engine {rank} still up {:.1}s after it was killed", wait.as_secs_f64()));
                    c.outcome = RequestOutcome::Silence;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    res.children = vec![c];
    res
}

#[cfg(test)]
mod tests {
    use engine_protocol::internal::{engine_core_request_value, sampling_params_value};
    use engine_protocol::{schema, Dialect, Value};

    use super::sent_prompt;

    /// An EngineCoreRequest of `release` with `ids` as its prompt, typed
    /// as that release types it.
    fn request_of(release: &str, ids: Vec<i64>) -> Value {
        let r = schema::release(Dialect::Vllm, release).unwrap();
        engine_core_request_value(r, "r", ids, sampling_params_value(r), 0.0)
    }

    #[test]
    fn a_raw_request_reads_its_prompt_as_a_list_before_0_34_and_as_an_int32_array_from_it() {
        for release in ["0.33.0", "0.34.0"] {
            let request = request_of(release, vec![5, 6, 7]);
            assert_eq!(sent_prompt(&request), vec![5, 6, 7], "{release}");
        }
        let Value::Struct(s) = request_of("0.34.0", vec![5]) else { unreachable!() };
        assert!(matches!(s.get("prompt_token_ids"), Some(Value::Tensor(_))), "0.34.0 types the prompt as an array");
    }
}
