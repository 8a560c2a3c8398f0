//! One replay run for every dialect: a scenario's requests sent level by
//! level of `after` (each level at once), each request's outputs read
//! until it ends, run through the gateway's stop-string detection
//! (`engine_protocol::translate::RequestStream`), with aborts and late
//! outputs watched; the results the checks read ([`RunResult`]).
//!
//! Facts relied on (docs/runner/scenarios.md "Scenarios" and
//! docs/runner/tokenspeed.md "TokenSpeed scenarios";
//! docs/tokenspeed-wire.md §5, §7): request ids are `<scenario>.<id>`; a
//! client ABORT produces no output in either dialect, so an aborted
//! request ends at the gateway and what still comes for it is late; a
//! stop string is the gateway's to find, and finding one aborts the engine
//! request. What a dialect does differently (the translation, `n` fan-out
//! and utilities in vLLM, one row per output and an own silence wait in
//! TokenSpeed) is its [`Replay`] implementation (`engine_client::dialect`).

use std::collections::BTreeMap;
use std::time::Duration;

use engine_protocol::translate::{EngineStep, GatewayTokenizer, RequestStream as StopStream};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::Value;
use serde_json::Value as Json;
use tokio::time::Instant;

use engine_client::dialect::{EngineWire, Vllm};
use engine_client::transport::handshake::EngineFacts;
use engine_client::transport::{EngineClient, RequestEvent, RequestEvents, TransportError};
use scenario_checks::scenario::{levels, RequestSpecOf, ScenarioOf};

pub use scenario_checks::check::RequestOutcome;
pub use scenario_checks::scenario::values::{json_to_value, set_path, value_to_json, SetPathError};

/// What the client of one engine request saw.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildResult<D: Replay = Vllm> {
    pub engine_request_id: String,
    /// The engine (data-parallel rank) it was sent to.
    pub engine: u16,
    /// The `engine_index` values its outputs' batches carried (vLLM), each
    /// once, in the order first seen.
    pub engine_indices: Vec<i64>,
    /// The `seed` sent to the engine.
    pub sent_seed: Option<i64>,
    /// The engine request sent (TokenSpeed; not for raw frames).
    pub sent: Option<Value>,
    /// Every token the engine sent.
    pub engine_tokens: Vec<i64>,
    /// After the gateway's stop detection.
    pub client_tokens: Vec<i64>,
    pub text: String,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    pub error: Option<String>,
    pub outcome: RequestOutcome,
    /// The stream ended with the gateway's local abort.
    pub aborted: bool,
    /// The gateway sent an ABORT for it (stop string found, or
    /// `abort_after_tokens`).
    pub abort_sent: bool,
    /// Outputs that arrived after the ABORT: how long after it, over the
    /// request's grace period (`None`: not watched).
    pub late_outputs: Option<Vec<Duration>>,
    /// Columns of `new_logprobs` per output step (vLLM).
    pub logprob_columns: Vec<i64>,
    /// Some output carried prompt logprobs (vLLM).
    pub prompt_logprobs_seen: bool,
    /// Every output of the request, as the dialect keeps it (vLLM: the
    /// decoded `EngineCoreOutput`; TokenSpeed: the row, late rows
    /// included).
    pub outputs: Vec<D::Kept>,
}

impl<D: Replay> Default for ChildResult<D> {
    fn default() -> Self {
        ChildResult {
            engine_request_id: String::new(),
            engine: 0,
            engine_indices: Vec::new(),
            sent_seed: None,
            sent: None,
            engine_tokens: Vec::new(),
            client_tokens: Vec::new(),
            text: String::new(),
            finish_reason: None,
            stop_reason: None,
            error: None,
            outcome: RequestOutcome::None,
            aborted: false,
            abort_sent: false,
            late_outputs: None,
            logprob_columns: Vec::new(),
            prompt_logprobs_seen: false,
            outputs: Vec::new(),
        }
    }
}

/// What one request spec produced.
#[derive(Debug, Clone, Default)]
pub struct RequestResult<D: Replay = Vllm> {
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
    /// Translation warnings.
    pub warnings: Vec<String>,
    /// One per engine request (vLLM `n` fans out; TokenSpeed: always one,
    /// a refused request's included).
    pub children: Vec<ChildResult<D>>,
}

/// Everything a scenario run produced.
#[derive(Debug, Clone, Default)]
pub struct RunResult<D: Replay = Vllm> {
    /// The engine's `max_model_len` (for `"room"`).
    pub max_model_len: i64,
    pub requests: BTreeMap<String, RequestResult<D>>,
    /// Each utility call's result, or why it has none (vLLM).
    pub utilities: BTreeMap<String, Result<Value, TransportError>>,
    pub drift: Vec<String>,
    /// The data-parallel wave messages engines sent during the scenario.
    pub dp_control: Vec<(u16, engine_client::dialect::DpControl)>,
    /// Batches whose `engine_index` was not their engine's, during the
    /// scenario.
    pub engine_index_mismatches: u64,
}

/// What the runner knows about the engine and the model.
pub struct Context<'a, D: Replay = Vllm> {
    pub gateway: &'a EngineClient<D>,
    /// The engine a request goes to unless it names a data-parallel rank.
    pub engine: u16,
    /// Kills the engine of a rank outright (`kill_engine`); `None` where
    /// the run cannot (an attached engine, `vllm serve` ranks).
    pub kill: Option<&'a KillEngine<'a>>,
    pub facts: &'a EngineFacts,
    pub tokenizer: &'a GatewayTokenizer,
    /// The dialect's translation options.
    pub options: D::Options,
    /// How long a request waits for an output when the dialect's run
    /// waits itself ([`Wait::PerOutput`]).
    pub silence: Duration,
}

/// Kills the engine of a data-parallel rank (SIGKILL to its process
/// group; a mock's task aborted): its sockets close as a crashed engine's
/// do. `Err`: why it cannot.
pub type KillEngine<'a> = dyn Fn(u16) -> Result<(), KillError> + Sync + 'a;

/// Why a run cannot kill one engine (`kill_engine`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KillError {
    /// The run has no way to kill one engine.
    #[error("this run cannot kill one engine (an attached engine, or ranks started by one `vllm serve`)")]
    Unsupported,
    /// The ranks were started by one `vllm serve --headless`.
    #[error("the ranks were started by one `vllm serve --headless`, which cannot lose one: kill_engine needs --launch inproc")]
    OneProcess,
    /// The engine is attached, not started by this run.
    #[error("an attached engine is not this run's to kill")]
    Attached,
    /// No engine has that rank.
    #[error("no engine of rank {rank}")]
    NoRank { rank: u16 },
    /// The engine's slot lock is poisoned.
    #[error("engine lock poisoned")]
    Poisoned,
    /// The engine of that rank was killed before.
    #[error("engine {rank} was already killed")]
    AlreadyKilled { rank: u16 },
}

/// How long a request waits for its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The whole request, when bounded (`wait_ms`); otherwise the
    /// gateway's silence deadline decides.
    Whole(Option<Duration>),
    /// Each output (`wait_ms`, else the run's silence).
    PerOutput(Duration),
}

/// A step as the run reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView<'a> {
    pub tokens: &'a [i64],
    /// Set on the request's last output.
    pub finish: Option<FinishReason>,
    pub stop: Option<StopReason>,
}

/// What a dialect does in a replay run (implemented in `engine_client::dialect`).
#[expect(
    async_fn_in_trait,
    reason = "implemented and called only inside the workspace, where the futures need no Send bound"
)]
pub trait Replay: EngineWire<Request = Value> + Default + Clone + std::fmt::Debug + PartialEq {
    /// The scenario model's dialect (`scenario_checks::scenario::DialectFields`).
    type Spec: scenario_checks::scenario::DialectFields;
    /// The translation's options.
    type Options: Clone;
    /// What a result keeps of each output.
    type Kept: Clone + std::fmt::Debug + PartialEq;
    /// After the gateway's ABORT, outputs still queued for the request are
    /// late (TokenSpeed) rather than the request's own (vLLM); the run
    /// also forgets every request it ends.
    const ABORT_ENDS_OUTPUT: bool;

    /// Sends every copy of `spec` and collects what came back.
    async fn run_spec(
        ctx: &Context<'_, Self>,
        s: &ScenarioOf<Self::Spec>,
        spec: &RequestSpecOf<Self::Spec>,
    ) -> Vec<(String, RequestResult<Self>)>;

    /// Work after the requests (vLLM's utility calls).
    async fn after_requests(_ctx: &Context<'_, Self>, _s: &ScenarioOf<Self::Spec>, _out: &mut RunResult<Self>) {}

    /// The step's tokens, finish and stop reason.
    fn view(step: &Self::Step) -> StepView<'_>;

    /// What a result keeps of a step; notes what only this dialect reads.
    fn keep(child: &mut ChildResult<Self>, step: Self::Step) -> Self::Kept;

    /// How long a request waits.
    fn wait(ctx: &Context<'_, Self>, spec: &RequestSpecOf<Self::Spec>) -> Wait;

    /// The outcome a failed request gets (`added`: the ADD went out).
    fn outcome_of(e: &TransportError, _added: bool) -> RequestOutcome {
        RequestOutcome::of_error(e)
    }

    /// The error text a failed request keeps.
    fn error_text(e: &TransportError) -> String {
        e.to_string()
    }

    /// The outcome of a request the client sees finish with `client`
    /// (`engine`: the finish the engine's step carried, if any).
    fn finished(_client: FinishReason, _engine: Option<FinishReason>) -> RequestOutcome {
        RequestOutcome::Finished
    }
}

/// The request ids a scenario's requests get: `<scenario>.<id>`.
pub fn request_id(scenario: &str, id: &str) -> String {
    format!("{scenario}.{id}")
}

/// Runs the requests of `s` (level by level of `after`, each level at
/// once), then the dialect's other work (utilities).
pub async fn run<D: Replay>(ctx: &Context<'_, D>, s: &ScenarioOf<D::Spec>) -> RunResult<D> {
    let mut out = RunResult { max_model_len: ctx.facts.max_model_len, ..Default::default() };
    let before = ctx.gateway.stats().await;
    // Checked when the scenario was loaded.
    let levels = levels(&s.requests).unwrap_or_default();
    for level in levels {
        let specs = level.iter().map(|&i| D::run_spec(ctx, s, &s.requests[i]));
        for results in futures_util::future::join_all(specs).await {
            out.requests.extend(results);
        }
    }
    D::after_requests(ctx, s, &mut out).await;
    let after = ctx.gateway.stats().await;
    out.drift = after.drift.into_iter().collect();
    out.dp_control = after.dp_control.get(before.dp_control.len()..).unwrap_or_default().to_vec();
    out.engine_index_mismatches = after.engine_index_mismatches - before.engine_index_mismatches;
    out
}

/// Marks a child failed by a transport error.
pub fn fail<D: Replay>(c: &mut ChildResult<D>, e: &TransportError, added: bool) {
    c.error = Some(D::error_text(e));
    c.outcome = D::outcome_of(e, added);
}

/// Reads a request's outputs until it ends, runs them through the
/// gateway's stop detection (when given), sends the ABORTs the scenario
/// asks for, and watches for late outputs after an abort.
pub async fn collect<D: Replay>(
    ctx: &Context<'_, D>,
    mut stream: RequestEvents<D>,
    mut detector: Option<StopStream>,
    spec: &RequestSpecOf<D::Spec>,
    c: &mut ChildResult<D>,
) {
    let wait = D::wait(ctx, spec);
    let until = match wait {
        Wait::Whole(w) => w.map(|w| Instant::now() + w),
        Wait::PerOutput(_) => None,
    };
    let id = std::slice::from_ref(&c.engine_request_id).to_vec();
    let mut abort_at: Option<Instant> = None;
    let mut late = Vec::new();
    loop {
        let deadline = match wait {
            Wait::PerOutput(w) => Some(Instant::now() + w),
            Wait::Whole(_) => until,
        };
        let next = match deadline {
            Some(u) => match tokio::time::timeout_at(u, stream.next()).await {
                Ok(ev) => ev,
                Err(_) => {
                    if abort_at.is_none() {
                        silent(ctx, c, wait, &id);
                    }
                    break;
                }
            },
            None => stream.next().await,
        };
        let Some(ev) = next else {
            if !D::ABORT_ENDS_OUTPUT {
                c.error.get_or_insert_with(|| TransportError::Closed.to_string());
                c.outcome = RequestOutcome::Failed;
            }
            break;
        };
        let Some(step) = output_of(c, ev, abort_at.is_some()) else { break };
        if let Some(at) = abort_at {
            // Queued before the ABORT took effect: late.
            late.push(Instant::now().saturating_duration_since(at));
            let kept = D::keep(c, step);
            c.outputs.push(kept);
            continue;
        }
        let view = D::view(&step);
        let finish = view.finish;
        c.engine_tokens.extend_from_slice(view.tokens);
        if finish == Some(FinishReason::Error) {
            c.error = Some("engine finished the request with ERROR".into());
            c.finish_reason = Some(FinishReason::Error);
            c.outcome = RequestOutcome::ErrorOutput;
            let kept = D::keep(c, step);
            c.outputs.push(kept);
            break;
        }
        let abort = c.finish_reason.is_none() && client_step(ctx, detector.as_mut(), c, &view);
        let kept = D::keep(c, step);
        c.outputs.push(kept);
        if abort {
            c.abort_sent = true;
            abort_at = D::ABORT_ENDS_OUTPUT.then(Instant::now);
            send_abort(ctx, c, &id).await;
        }
        if finish.is_some() && abort_at.is_none() {
            break;
        }
        if let (Some(n), None) = (spec.abort_after_tokens, abort_at) {
            if c.engine_tokens.len() >= n && c.finish_reason.is_none() && finish.is_none() {
                abort_at = abort_after_tokens(ctx, c, &id).await;
            }
        }
    }
    if c.abort_sent && (D::ABORT_ENDS_OUTPUT || !spec.grace.is_zero()) {
        watch_late(ctx, spec, c, late).await;
    }
    if D::ABORT_ENDS_OUTPUT {
        ctx.gateway.forget(&id);
    }
}

/// The request got no output in time (not after an abort): silence.
fn silent<D: Replay>(ctx: &Context<'_, D>, c: &mut ChildResult<D>, wait: Wait, id: &[String]) {
    c.error = Some(match wait {
        Wait::PerOutput(w) => format!("no row for {} ms", w.as_millis()),
        Wait::Whole(w) => format!("no answer within {:.1}s", w.unwrap_or_default().as_secs_f64()),
    });
    c.outcome = RequestOutcome::Silence;
    if !D::ABORT_ENDS_OUTPUT {
        ctx.gateway.forget(id);
    }
}

/// The output an event carries; `None` when the event ends the request
/// (a failure, noted unless `aborted` already; the gateway's local
/// abort).
fn output_of<D: Replay>(c: &mut ChildResult<D>, ev: RequestEvent<D>, aborted: bool) -> Option<D::Step> {
    match ev {
        RequestEvent::Failed(e) => {
            if !aborted {
                fail(c, &e, true);
            }
            None
        }
        RequestEvent::Aborted => {
            c.aborted = true;
            if c.finish_reason.is_none() {
                c.finish_reason = Some(FinishReason::Abort);
                c.outcome = RequestOutcome::Aborted;
            }
            None
        }
        RequestEvent::Output(step) => Some(step),
    }
}

/// What the client sees of one step: through the gateway's stop
/// detection when given, else as the engine sent it. Whether the gateway
/// aborts the engine request (a stop string found: the engine still runs
/// it).
fn client_step<D: Replay>(
    ctx: &Context<'_, D>,
    detector: Option<&mut StopStream>,
    c: &mut ChildResult<D>,
    view: &StepView<'_>,
) -> bool {
    let finish = view.finish;
    let Some(d) = detector else {
        c.client_tokens.extend_from_slice(view.tokens);
        if let Some(f) = finish {
            c.finish_reason = Some(f);
            c.stop_reason = view.stop.clone();
            c.outcome = D::finished(f, finish);
        }
        return false;
    };
    let es = EngineStep {
        new_token_ids: view.tokens.iter().map(|t| u32::try_from(*t).unwrap_or(u32::MAX)).collect(),
        finish_reason: finish,
        stop_reason: view.stop.clone(),
    };
    let Some(o) = d.step(ctx.tokenizer, &es) else { return false };
    c.client_tokens.extend(o.token_ids.iter().map(|t| i64::from(*t)));
    c.text.push_str(&o.text);
    if let Some(f) = o.finish_reason {
        c.finish_reason = Some(f);
        c.stop_reason = o.stop_reason;
        c.outcome = D::finished(f, finish);
    }
    o.abort_engine
}

/// Sends the gateway's ABORT for the request (its failure kept where the
/// ABORT ends the output).
async fn send_abort<D: Replay>(ctx: &Context<'_, D>, c: &mut ChildResult<D>, id: &[String]) {
    if let Err(e) = ctx.gateway.abort(c.engine, id).await {
        if D::ABORT_ENDS_OUTPUT {
            c.error = Some(e.to_string());
        }
    }
}

/// The scenario's `abort_after_tokens` reached: the ABORT sent (and, where
/// it ends the output, the request aborted). When the abort took effect.
async fn abort_after_tokens<D: Replay>(ctx: &Context<'_, D>, c: &mut ChildResult<D>, id: &[String]) -> Option<Instant> {
    c.abort_sent = true;
    let mut abort_at = None;
    if D::ABORT_ENDS_OUTPUT {
        c.outcome = RequestOutcome::Aborted;
        c.finish_reason = Some(FinishReason::Abort);
        abort_at = Some(Instant::now());
    }
    send_abort(ctx, c, id).await;
    abort_at
}

/// Watches the grace period for outputs that still come after an abort
/// (`late`: those the run read itself).
async fn watch_late<D: Replay>(
    ctx: &Context<'_, D>,
    spec: &RequestSpecOf<D::Spec>,
    c: &mut ChildResult<D>,
    mut late: Vec<Duration>,
) {
    tokio::time::sleep(spec.grace).await;
    let mut watched = ctx.gateway.late_outputs(&c.engine_request_id).await;
    if D::ABORT_ENDS_OUTPUT {
        late.extend(watched.take().unwrap_or_default());
        watched = Some(late);
    }
    c.late_outputs = watched;
}

/// Seconds since the epoch (a request's `arrival_time`).
pub fn now_secs() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}
