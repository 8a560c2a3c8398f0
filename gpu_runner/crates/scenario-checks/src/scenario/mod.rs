//! The replay scenario model both dialects share (docs/runner/scenarios.md
//! "Scenarios" and docs/runner/tokenspeed.md "TokenSpeed scenarios"; format
//! unchanged): the header
//! (`scenario`, `doc`, `engines`, `fresh_engine`, `timeout_s`), request
//! specs (`id`, `request`, `after`, `abort_after_tokens`, `grace_ms`,
//! `wait_ms`, `raw`), `after` levels (a cycle is a load error), and the
//! checks, read into the typed vocabulary of [`crate::check`] for the
//! dialect's [`ScenarioKind`]. A [`DialectFields`] adds its own request and
//! scenario fields (vLLM: `repeat`, `vary_prompt`, `sequential`,
//! `utilities`; TokenSpeed: `stream`, `mock`).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::check::{parse_list, CheckSpec, RunObservation, ScenarioFailure, ScenarioKind};
use crate::load::{LoadError, ScenarioError, ScenarioFile};
use crate::model_facts::{resolve, ModelFacts};

pub mod release_gaps;
pub mod tokenspeed;
pub mod values;

pub use values::set_path;

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
/// header, the request specs, `after` levels, raw requests); its checks
/// are the shared vocabulary's for its [`ScenarioKind`].
pub trait DialectFields: Sized {
    /// Request-spec fields only this dialect has.
    type Request: Clone + std::fmt::Debug;
    /// Scenario fields only this dialect has.
    type Scenario: Clone + std::fmt::Debug;
    /// Which checks a scenario of this dialect may list.
    const KIND: ScenarioKind;
    /// Why a scenario with no requests (and nothing else to do) is refused.
    const EMPTY: &'static str;
    /// This dialect's fields of request `r`; `at` names it in errors.
    fn request(r: &Json, at: &str) -> Result<Self::Request, ScenarioError>;
    /// This dialect's fields of the scenario object `o` named `name`.
    fn scenario(o: &serde_json::Map<String, Json>, name: &str) -> Result<Self::Scenario, ScenarioError>;
    /// Whether the scenario has work besides its requests.
    fn other_work(_: &Self::Scenario) -> bool {
        false
    }
    /// Whether a request spec is an action that sends no request
    /// (vLLM's `kill_engine`), so that it needs no `request`.
    fn is_action(_: &Self::Request) -> bool {
        false
    }
}

/// One request of a scenario.
#[derive(Debug, Clone)]
pub struct RequestSpecOf<D: DialectFields> {
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
pub struct ScenarioOf<D: DialectFields> {
    pub name: String,
    pub doc: String,
    /// Engines this scenario runs on (`mock`, `vllm-cpu`, `vllm`,
    /// `tokenspeed`, `attach`); empty = all.
    pub engines: Vec<String>,
    /// Runs on an engine started for it alone (after every other scenario).
    pub fresh_engine: bool,
    pub requests: Vec<RequestSpecOf<D>>,
    /// Read and validated at load.
    pub checks: Vec<CheckSpec>,
    /// `timeout_s` (default 60 s).
    pub timeout: Duration,
    /// `data_parallel_size`: the engines (data-parallel ranks) the
    /// scenario needs behind the gateway (default 1); a run with fewer
    /// says it does not apply.
    pub data_parallel_size: u16,
    /// `model_kind`: the kind of model the scenario is about (`None`:
    /// any); a run on another kind says it does not apply.
    pub model_kind: Option<ModelKind>,
    /// The dialect's own fields.
    pub dialect: D::Scenario,
    /// Why the scenario does not apply to the served model (directives it
    /// cannot satisfy, [`crate::model_facts`]); empty when it does.
    pub not_applicable: Vec<String>,
    /// Why the scenario does not apply to the run's release (what it
    /// needs that the release's table lacks, [`release_gaps::gaps`]);
    /// empty when it does.
    pub release_gaps: Vec<release_gaps::ReleaseGap>,
    /// Checks left out on the served model, with why (pinned to other
    /// models, or asking what the engine cannot give).
    pub left_out: Vec<String>,
}

/// A model as data parallelism sees it (vLLM 0.32.0
/// `vllm/v1/engine/core.py` `run_engine_core`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// No experts: each data-parallel rank is an independent engine.
    Dense,
    /// A mixture of experts: the ranks run in lockstep waves.
    Moe,
}

impl ModelKind {
    /// The kind of a model with `experts` experts
    /// ([`crate::model_facts::experts_in_config`]).
    pub fn of(experts: u64) -> ModelKind {
        if experts > 0 {
            ModelKind::Moe
        } else {
            ModelKind::Dense
        }
    }

    /// `dense` or `moe`, as scenario files name it.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Dense => "dense",
            ModelKind::Moe => "moe",
        }
    }
}

pub use engine_client::dialect::Vllm;

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
    /// `engine`: the rank raw frames go to (a translated request goes to
    /// its `data_parallel_rank`, else to the first engine).
    pub engine: Option<u16>,
    /// `kill_engine`: instead of a request, kill the engine of this rank
    /// outright and wait (up to `wait_ms`, default 10 s) until the gateway
    /// sees it gone.
    pub kill_engine: Option<u16>,
    /// `sleep_ms`: instead of a request, wait this long (to let engines
    /// settle, e.g. a data-parallel wave end).
    pub sleep: Option<Duration>,
    /// `built`: the request is made by `EngineCoreRequest::builder` (the
    /// typed API a gateway adopts, with the served model's EOS facts and
    /// the engine's `max_model_len`) instead of the translation layer, and
    /// sent with `encode_checked`: what engine-protocol's crate-root example
    /// promises, that a built request is one the engine serves.
    pub built: bool,
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

impl DialectFields for Vllm {
    type Request = VllmRequest;
    type Scenario = VllmScenario;
    const KIND: ScenarioKind = ScenarioKind::Vllm;
    const EMPTY: &'static str = "no requests and no utilities";

    fn request(r: &Json, at: &str) -> Result<VllmRequest, ScenarioError> {
        let rank = |k: &str| -> Result<Option<u16>, ScenarioError> {
            match r.get(k) {
                None => Ok(None),
                Some(v) => match v.as_u64().and_then(|n| u16::try_from(n).ok()) {
                    Some(n) => Ok(Some(n)),
                    None => Err(format!("{at}.{k}: expected an engine rank (0 to 65535), got {v}").into()),
                },
            }
        };
        let kill_engine = rank("kill_engine")?;
        let sleep = match r.get("sleep_ms") {
            None => None,
            Some(v) => Some(millis(Some(v)).ok_or_else(|| format!("{at}.sleep_ms: expected milliseconds, got {v}"))?),
        };
        let action = match (kill_engine, sleep) {
            (Some(_), Some(_)) => return Err(format!("{at}: kill_engine and sleep_ms are two specs").into()),
            (Some(_), None) => Some("kill_engine"),
            (None, Some(_)) => Some("sleep_ms"),
            (None, None) => None,
        };
        if let (Some(a), true) = (action, r.get("request").is_some() || r.get("raw").is_some()) {
            return Err(format!("{at}: {a} sends no request; drop `request` and `raw`").into());
        }
        let built = match r.get("built") {
            None => false,
            Some(Json::Bool(b)) => *b,
            Some(v) => return Err(format!("{at}.built: expected true or false, got {v}").into()),
        };
        if built && (r.get("raw").is_some() || action.is_some()) {
            return Err(
                format!("{at}: a built request is sent as built; drop `raw`, `kill_engine` and `sleep_ms`").into()
            );
        }
        Ok(VllmRequest {
            repeat: r.get("repeat").and_then(Json::as_u64).unwrap_or(1).clamp(1, 1024) as usize,
            vary_prompt: r.get("vary_prompt").and_then(Json::as_bool).unwrap_or(false),
            sequential: r.get("sequential").and_then(Json::as_bool).unwrap_or(false),
            engine: rank("engine")?,
            kill_engine,
            sleep,
            built,
        })
    }

    fn scenario(o: &serde_json::Map<String, Json>, name: &str) -> Result<VllmScenario, ScenarioError> {
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

    fn is_action(r: &VllmRequest) -> bool {
        r.kill_engine.is_some() || r.sleep.is_some()
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

impl<D: DialectFields> ScenarioOf<D> {
    /// Parses a scenario file's text for no model in particular (a
    /// directive makes it not apply); `name_hint` (the file stem) names it
    /// when it has no `scenario`.
    pub fn from_json(name_hint: &str, text: &str) -> Result<ScenarioOf<D>, ScenarioError> {
        ScenarioOf::from_json_on(name_hint, text, &ModelFacts::default())
    }

    /// Parses a scenario file's text for the model whose facts are
    /// `facts`: its directives become that model's ids and its checks
    /// pinned to other models are left out ([`crate::model_facts`]).
    pub fn from_json_on(name_hint: &str, text: &str, facts: &ModelFacts) -> Result<ScenarioOf<D>, ScenarioError> {
        let mut v: Json =
            serde_json::from_str(text).map_err(|source| ScenarioError::Json { name: name_hint.to_string(), source })?;
        let hint_name = v.get("scenario").and_then(Json::as_str).unwrap_or(name_hint).to_string();
        let resolution = resolve(&mut v, facts).map_err(|e| format!("{hint_name}: {e}"))?;
        let o = v.as_object().ok_or_else(|| format!("{name_hint}: expected a JSON object"))?;
        let name = o.get("scenario").and_then(Json::as_str).unwrap_or(name_hint).to_string();
        let strs = |k: &str| -> Vec<String> {
            o.get(k)
                .and_then(Json::as_array)
                .map_or(Vec::new(), |a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        };
        let mut requests: Vec<RequestSpecOf<D>> = Vec::new();
        // The ids so far, looked up in constant time: a file of up to
        // `untrusted::MAX_INPUT_FILE_BYTES` holds some 400 000 requests.
        let mut ids: HashSet<String> = HashSet::new();
        for (i, r) in o.get("requests").and_then(Json::as_array).map_or(&[][..], |a| a.as_slice()).iter().enumerate() {
            let at = format!("{name}: requests[{i}]");
            let id = r.get("id").and_then(Json::as_str).ok_or_else(|| format!("{at}.id missing"))?;
            let raw = match r.get("raw") {
                None => None,
                Some(raw) => Some(parse_raw(raw).map_err(|e| format!("{at}.raw: {e}"))?),
            };
            let dialect = D::request(r, &at)?;
            let request = match (r.get("request"), &raw) {
                (Some(q), _) if q.is_object() => q.clone(),
                (Some(_), _) => return Err(format!("{at}.request must be an object").into()),
                (None, Some(Raw::Frames(_))) => json!({}),
                (None, None) if D::is_action(&dialect) => json!({}),
                (None, _) => return Err(format!("{at}.request missing").into()),
            };
            if !ids.insert(id.to_string()) {
                return Err(format!("{at}: duplicate id {id:?}").into());
            }
            requests.push(RequestSpecOf {
                id: id.to_string(),
                request,
                after: r.get("after").and_then(Json::as_str).map(str::to_string),
                abort_after_tokens: r.get("abort_after_tokens").and_then(Json::as_u64).map(|n| n as usize),
                grace: millis(r.get("grace_ms")).unwrap_or(Duration::ZERO),
                wait: millis(r.get("wait_ms")),
                raw,
                dialect,
            });
        }
        for r in &requests {
            if let Some(a) = &r.after {
                if !ids.contains(a) {
                    return Err(format!("{name}: request {} is after {a:?}, which is no request", r.id).into());
                }
            }
        }
        levels(&requests).map_err(|e| format!("{name}: {e}"))?;
        let dialect = D::scenario(o, &name)?;
        let checks = parse_list(D::KIND, o.get("checks"))
            .map_err(|(i, error)| ScenarioError::Check { at: format!("{name}: checks[{i}]"), error })?;
        if requests.is_empty() && !D::other_work(&dialect) {
            return Err(format!("{name}: {}", D::EMPTY).into());
        }
        let timeout = Duration::from_secs(o.get("timeout_s").and_then(Json::as_u64).unwrap_or(60));
        let data_parallel_size = match o.get("data_parallel_size") {
            None => 1,
            Some(v) => v.as_u64().and_then(|n| u16::try_from(n).ok()).filter(|&n| n >= 1).ok_or_else(|| {
                format!("{name}: data_parallel_size: expected a number of engines from 1 to 65535, got {v}")
            })?,
        };
        let model_kind = match o.get("model_kind") {
            None => None,
            Some(v) => Some(match v.as_str() {
                Some("dense") => ModelKind::Dense,
                Some("moe") => ModelKind::Moe,
                _ => return Err(format!("{name}: model_kind: expected \"dense\" or \"moe\", got {v}").into()),
            }),
        };
        Ok(ScenarioOf {
            name,
            doc: o.get("doc").and_then(Json::as_str).unwrap_or("").to_string(),
            engines: strs("engines"),
            fresh_engine: o.get("fresh_engine").and_then(Json::as_bool).unwrap_or(false),
            requests,
            checks,
            timeout,
            data_parallel_size,
            model_kind,
            dialect,
            not_applicable: resolution.unmet,
            release_gaps: Vec::new(),
            left_out: resolution.left_out,
        })
    }

    /// The scenario's failures on `engine` (empty: pass): its checks, one
    /// implementation for both dialects ([`crate::check::replay::evaluate`]),
    /// on what the run observed.
    pub fn judge(&self, run: &RunObservation, engine: &str) -> Vec<ScenarioFailure> {
        crate::check::replay::evaluate(D::KIND, &self.checks, run, engine)
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

/// An `after` cycle: the request that waits for itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request {0} waits for itself (an `after` cycle)")]
pub struct AfterCycle(pub String);

/// Groups requests by `after`: level 0 has none, level n+1 waits for a
/// request of level n (the first of that id). An `after` cycle, or an
/// `after` naming no request, is an error naming the first request
/// without a level. Linear in the number of requests (each is given its
/// level once, walking up its `after` chain to one that has one), so that
/// a long chain in an untrusted file costs no more than reading it.
pub fn levels<D: DialectFields>(requests: &[RequestSpecOf<D>]) -> Result<Vec<Vec<usize>>, AfterCycle> {
    let n = requests.len();
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, r) in requests.iter().enumerate() {
        index.entry(r.id.as_str()).or_insert(i);
    }
    let mut level: Vec<Option<usize>> = vec![None; n];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..n {
        if level[start].is_some() {
            continue;
        }
        // The chain of requests without a level from `start` up, and the
        // level of its last one; `None` when the chain never reaches a
        // request with a level (a cycle: longer than there are requests).
        path.clear();
        let mut i = start;
        let top = loop {
            if path.len() > n {
                break None;
            }
            path.push(i);
            let Some(a) = requests[i].after.as_deref() else { break Some(0) };
            let Some(&j) = index.get(a) else { break None };
            match level[j] {
                Some(l) => break Some(l + 1),
                None => i = j,
            }
        };
        let Some(mut l) = top else { return Err(AfterCycle(requests[start].id.clone())) };
        for &p in path.iter().rev() {
            level[p] = Some(l);
            l += 1;
        }
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

impl<D: DialectFields> ScenarioFile<ModelFacts> for ScenarioOf<D> {
    fn parse(stem: &str, text: &str, facts: &ModelFacts) -> Result<ScenarioOf<D>, ScenarioError> {
        ScenarioOf::from_json_on(stem, text, facts)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Loads every `*.json` under `dir` as a vLLM scenario for the model of
/// `facts`, sorted by file name.
pub fn load_dir(dir: &Path, facts: &ModelFacts) -> Result<Vec<Scenario>, LoadError> {
    load_dir_of(dir, facts)
}

/// Loads every `*.json` under `dir` as a scenario of dialect `D` for the
/// model of `facts`, sorted by file name.
pub fn load_dir_of<D: DialectFields>(dir: &Path, facts: &ModelFacts) -> Result<Vec<ScenarioOf<D>>, LoadError> {
    crate::load::load_dir(dir, facts)
}
