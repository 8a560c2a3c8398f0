//! Scenarios as data (`golden/replay/*.json`, format in docs/runner.md
//! "Scenarios"): gateway-level requests, translated by
//! `engine_protocol::translate` (max_tokens from the room left, EOS ids,
//! stop strings, `n` fan-out, structured-output backend), sent over the
//! transport, with the gateway's stop-string detection
//! (`translate::RequestStream`) run on the outputs, then checked.
//!
//! Requests may also be sent *raw*, around the gateway's validation: the
//! translated request edited field by field and encoded without
//! validation (`engine_protocol::encode::encode_payload_unvalidated`), or
//! input frames given as hex. They show what the engine itself does with
//! input a gateway must never send (docs/runner.md "What the engine does
//! with bad input").
//!
//! A scenario's verdict is pass, fail (with every failed check), drift
//! (passed, but the decoder saw fields the schema does not know) or skip
//! (it needs something this engine does not have).
//!
//! The scenario model and its loading are [`crate::replay::model`]
//! (re-exported here); the checks are the shared vocabulary of
//! [`crate::check`], run on this module's results through
//! [`crate::check::adapt`].

use std::collections::BTreeMap;
use std::time::Duration;

use engine_protocol::encode::encode_payload_unvalidated;
use engine_protocol::translate::{
    self, EngineInfo, EngineStep, GatewayTokenizer, GenerateRequest, RequestStream as StopStream, TranslateOptions,
};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{MessageKind, StructValue, Value};
use serde_json::{json, Value as Json};

use crate::check::logprobs::resolved_shape;
use crate::handshake::EngineFacts;
use crate::transport::{DeathCause, Gateway, RequestEvent, RequestStream, TransportError};

pub use crate::replay::model::*;
pub use crate::replay::record::record_json;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{replay as checks, RunObservation, ScenarioKind};

    #[test]
    fn scenarios_with_unknown_checks_or_no_requests_are_rejected() {
        let e = Scenario::from_json("x", r#"{"requests":[{"id":"a","request":{}}],"checks":[{"check":"vibes"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown check \"vibes\""), "{e}");
        assert!(Scenario::from_json("x", r#"{"checks":[]}"#).unwrap_err().to_string().contains("no requests"));
        assert!(Scenario::from_json("x", r#"{"requests":[{"id":"a"}]}"#)
            .unwrap_err()
            .to_string()
            .contains("request missing"));
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
        .unwrap_err()
        .to_string();
        assert!(e.contains("cycle"), "{e}");
        let e =
            Scenario::from_json("t", r#"{"requests":[{"id":"a","after":"zz","request":{}}]}"#).unwrap_err().to_string();
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
        let release = engine_protocol::release("vllm", "0.32.0").unwrap();
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
        assert!(s.judge(&RunObservation::from(&r), "mock").is_empty());
        r.requests.get_mut("b").unwrap().children[0].engine_tokens = vec![1, 3];
        let f = s.judge(&RunObservation::from(&r), "mock");
        assert_eq!(f.len(), 1);
        assert!(f[0].to_string().contains("same_tokens"), "{f:?}");
    }

    #[test]
    fn constraint_checks_accept_the_language_and_nothing_else() {
        use crate::check::constraint::satisfies;
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
        assert!(satisfies(&grammar, "xa", None).unwrap_err().to_string().contains("language_regex"));
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
        let check_sample_logprobs =
            |c: &ChildResult, k: i64| crate::check::logprobs::check_sample(&crate::check::Observation::from(c), k);
        let release = engine_protocol::release("vllm", "0.32.0").unwrap();
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
        assert!(check_sample_logprobs(&wrong_first, 3).unwrap_err().to_string().contains("not the sampled token"));
        let mut too_few = good.clone();
        too_few.engine_tokens.push(1);
        assert!(check_sample_logprobs(&too_few, 3).unwrap_err().to_string().contains("rows for 3 tokens"));
        assert!(check_sample_logprobs(&good, 4).unwrap_err().to_string().contains("columns"));
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
        let check = crate::check::CheckSpec::parse(
            ScenarioKind::Vllm,
            &json!({"check": "utility_failure", "call": "u", "contains": "no_such_method"}),
        )
        .unwrap();
        let with = |e: TransportError| {
            let mut r = RunResult::default();
            r.utilities.insert("u".into(), Err(e));
            checks::check(&check, &RunObservation::from(&r)).map_err(|f| f.to_string())
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
