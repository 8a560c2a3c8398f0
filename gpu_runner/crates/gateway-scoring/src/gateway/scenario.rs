//! Gateway scenarios as data (`golden/gateway/*.json`, format in
//! docs/runner/gateway.md "Gateway scenarios"; unchanged): the requests (OpenAI
//! body, the same request as vLLM `SamplingParams`, the engine's script),
//! `from_golden` filling a request and its checks from a `stop_detection`
//! or `logprob_shaping` golden of `golden/vllm/0.32.0/`, and the checks,
//! read into the shared vocabulary ([`scenario_checks::check`], kind
//! [`ScenarioKind::Gateway`]) when the file loads. Besides requests, a
//! scenario's steps may be probes of the health and readiness routes and
//! actions on the gateway or its engine (lifecycle scenarios; docs/runner/gateway.md
//! "Gateway lifecycle").

use std::path::{Path, PathBuf};
use std::time::Duration;

use engine_protocol::translate::GatewayTokenizer;
use serde_json::{json, Value as Json};

use crate::http::ClientBehavior;
use mock_engine::vllm_script::EngineScript;
use scenario_checks::check::{parse_list, CheckSpec, ScenarioKind};
use scenario_checks::load::{LoadError, ScenarioError, ScenarioFile};

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
    /// Read and validated at load (the file's and those `from_golden`
    /// adds).
    pub checks: Vec<CheckSpec>,
    /// How the client reads the response (`client`: a slow reader, one
    /// that hangs up mid-stream); default as fast as it can.
    pub client: ClientBehavior,
}

/// The route a probe asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRoute {
    /// `GET /health`.
    Health,
    /// The gateway's readiness route (`--ready-path`; SMG `/readiness`,
    /// vLLM's frontends `/health`).
    Ready,
    /// `GET /v1/models`.
    Models,
}

impl ProbeRoute {
    /// The path asked, given the gateway's readiness route.
    pub fn path(self, ready_path: &str) -> String {
        match self {
            ProbeRoute::Health => "/health".into(),
            ProbeRoute::Ready => ready_path.into(),
            ProbeRoute::Models => "/v1/models".into(),
        }
    }

    fn from_name(s: &str) -> Option<ProbeRoute> {
        Some(match s {
            "health" => ProbeRoute::Health,
            "ready" => ProbeRoute::Ready,
            "models" => ProbeRoute::Models,
            _ => return None,
        })
    }
}

/// A `GET` of a health or readiness route between requests.
#[derive(Debug, Clone)]
pub struct GwProbe {
    pub id: String,
    pub route: ProbeRoute,
    pub timeout: Duration,
    /// Ask again (every 100 ms, up to `wait`) until the answer is healthy
    /// (`Some(true)`, `"until": "healthy"`) or not (`Some(false)`); the
    /// observation is the last answer and the time to it.
    pub until: Option<bool>,
    pub wait: Duration,
    /// `healthy`, `within_s`.
    pub checks: Vec<CheckSpec>,
}

/// Something done to the gateway or its engine between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// A fresh mock engine dials the gateway's handshake address and
    /// registers (the recorded registration again): the engine is back.
    RegisterEngine,
    /// SIGTERM to the gateway's process group, as a supervisor stops it.
    StopGateway,
}

impl ActionKind {
    /// Every action, as files name them.
    const ALL: [ActionKind; 2] = [ActionKind::RegisterEngine, ActionKind::StopGateway];

    /// Its name in scenario files and reports.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::RegisterEngine => "register_engine",
            ActionKind::StopGateway => "stop_gateway",
        }
    }

    /// The checks it takes, and its default `timeout_s`.
    fn checks_and_timeout(self) -> (&'static [&'static str], u64) {
        match self {
            ActionKind::RegisterEngine => (&["within_s"], 30),
            ActionKind::StopGateway => (&["exits_within", "no_socket_files"], 30),
        }
    }
}

/// A step that acts instead of asking.
#[derive(Debug, Clone)]
pub struct GwAction {
    pub id: String,
    pub kind: ActionKind,
    /// How long it may take (register: until INIT; stop: until every
    /// process is gone, then SIGKILL).
    pub timeout: Duration,
    /// `register_engine`: `within_s`; `stop_gateway`: `exits_within`,
    /// `no_socket_files`.
    pub checks: Vec<CheckSpec>,
}

/// One step of a scenario, run in order.
#[derive(Debug, Clone)]
pub enum GwStep {
    Request(Box<GwRequest>),
    Probe(GwProbe),
    Action(GwAction),
}

impl GwStep {
    pub fn id(&self) -> &str {
        match self {
            GwStep::Request(r) => &r.id,
            GwStep::Probe(p) => &p.id,
            GwStep::Action(a) => &a.id,
        }
    }
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
    /// The engine registers when the gateway is up (default); `false`:
    /// only at a `register_engine` step (probes see a gateway without an
    /// engine first). Needs `fresh_gateway`.
    pub engine_at_start: bool,
    /// Requests, probes and actions, in order (the file's `requests`).
    pub steps: Vec<GwStep>,
}

impl GwScenario {
    /// Its HTTP requests, in order.
    pub fn requests(&self) -> impl Iterator<Item = &GwRequest> {
        self.steps.iter().filter_map(|s| match s {
            GwStep::Request(r) => Some(r.as_ref()),
            _ => None,
        })
    }
}

fn golden_root(scenario_dir: &Path) -> PathBuf {
    // golden/gateway/<file> -> golden/
    scenario_dir.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("golden"))
}

/// What loading a gateway scenario needs: the golden tree `from_golden`
/// names cases in, and the tokenizer that decodes their prompts.
#[derive(Clone, Copy)]
pub struct GatewayLoad<'a> {
    pub golden: &'a Path,
    pub tokenizer: &'a GatewayTokenizer,
}

impl ScenarioFile<GatewayLoad<'_>> for GwScenario {
    const UNIQUE_NAMES: bool = true;

    fn parse(stem: &str, text: &str, ctx: &GatewayLoad<'_>) -> Result<GwScenario, ScenarioError> {
        let v: Json =
            serde_json::from_str(text).map_err(|source| ScenarioError::Json { name: stem.to_string(), source })?;
        parse_scenario(&v, ctx.golden, ctx.tokenizer)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Loads every `*.json` of `dir`, in name order. `golden` is the golden
/// tree `from_golden` names cases in (`vllm/0.32.0/stop/eos_hidden`).
pub fn load_dir(dir: &Path, golden: &Path, tok: &GatewayTokenizer) -> Result<Vec<GwScenario>, LoadError> {
    scenario_checks::load::load_dir(dir, &GatewayLoad { golden, tokenizer: tok })
}

/// The default golden tree for a scenario directory.
pub fn default_golden(dir: &Path) -> PathBuf {
    golden_root(dir)
}

/// One gateway scenario from its JSON.
pub fn parse_scenario(v: &Json, golden: &Path, tok: &GatewayTokenizer) -> Result<GwScenario, ScenarioError> {
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
    let engine_at_start = v.get("engine_at_start").and_then(Json::as_bool).unwrap_or(true);
    if !engine_at_start && !fresh_gateway {
        return Err("`engine_at_start: false` needs `fresh_gateway: true` (the shared gateway has its engine)".into());
    }
    let reqs = v.get("requests").and_then(Json::as_array).ok_or("`requests` (a list) is required")?;
    let mut steps = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let in_step = |e: ScenarioError| match e {
            ScenarioError::Invalid(m) => ScenarioError::Invalid(format!("requests[{i}]: {m}")),
            other => other,
        };
        let step = if r.get("probe").is_some() {
            GwStep::Probe(parse_probe(r, i).map_err(in_step)?)
        } else if r.get("action").is_some() {
            GwStep::Action(parse_action(r, i).map_err(in_step)?)
        } else {
            GwStep::Request(Box::new(parse_request(r, i, golden, tok).map_err(in_step)?))
        };
        steps.push(step);
    }
    if steps.is_empty() {
        return Err("`requests` is empty".into());
    }
    let needs_fresh = steps.iter().any(|s| matches!(s, GwStep::Action(_)));
    if needs_fresh && !fresh_gateway {
        return Err("an `action` step needs `fresh_gateway: true` (it changes the gateway or its engine)".into());
    }
    if !engine_at_start && !steps.iter().any(|s| matches!(s, GwStep::Action(a) if a.kind == ActionKind::RegisterEngine))
    {
        return Err("`engine_at_start: false` needs a `register_engine` step".into());
    }
    Ok(GwScenario { name, doc, fresh_gateway, smg_args, engine_at_start, steps })
}

/// Which checks a step other than a request takes (typed, at load).
fn step_checks(r: &Json, i: usize, allowed: &[&str], what: &str) -> Result<Vec<CheckSpec>, ScenarioError> {
    let checks = parse_list(ScenarioKind::Gateway, r.get("checks"))
        .map_err(|(j, error)| ScenarioError::Check { at: format!("requests[{i}]: checks[{j}]"), error })?;
    if let Some(c) = checks.iter().find(|c| !allowed.contains(&c.name())) {
        return Err(format!("{what} takes the checks {}, not {}", allowed.join(", "), c.name()).into());
    }
    Ok(checks)
}

fn parse_probe(r: &Json, i: usize) -> Result<GwProbe, ScenarioError> {
    let id = r.get("id").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| format!("r{i}"));
    let name = r.get("probe").and_then(Json::as_str).unwrap_or("");
    let route = ProbeRoute::from_name(name).ok_or_else(|| format!("unknown probe {name:?} (health, ready, models)"))?;
    let timeout = Duration::from_secs(r.get("timeout_s").and_then(Json::as_u64).unwrap_or(5));
    let until = match r.get("until").and_then(Json::as_str) {
        None => None,
        Some("healthy") => Some(true),
        Some("unhealthy") => Some(false),
        Some(o) => return Err(format!("`until` {o:?}: expected healthy or unhealthy").into()),
    };
    let wait = Duration::from_secs(r.get("wait_s").and_then(Json::as_u64).unwrap_or(0));
    if until.is_some() != r.get("wait_s").is_some() {
        return Err("`until` and `wait_s` go together".into());
    }
    let checks = step_checks(r, i, &["healthy", "within_s"], "a probe")?;
    Ok(GwProbe { id, route, timeout, until, wait, checks })
}

fn parse_action(r: &Json, i: usize) -> Result<GwAction, ScenarioError> {
    let id = r.get("id").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| format!("r{i}"));
    let name = r.get("action").and_then(Json::as_str).unwrap_or("");
    let kind = ActionKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
        let known: Vec<&str> = ActionKind::ALL.iter().map(|k| k.name()).collect();
        format!("unknown action {name:?} ({})", known.join(", "))
    })?;
    let (allowed, default_s) = kind.checks_and_timeout();
    let timeout = Duration::from_secs(r.get("timeout_s").and_then(Json::as_u64).unwrap_or(default_s));
    let checks = step_checks(r, i, allowed, "this action")?;
    Ok(GwAction { id, kind, timeout, checks })
}

/// A request's `client`: `{"read_delay_ms", "read_size", "recv_buffer",
/// "close_after_events"}`.
fn parse_client(v: Option<&Json>) -> Result<ClientBehavior, ScenarioError> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(ClientBehavior::default()) };
    let o = v.as_object().ok_or("`client` must be an object")?;
    const KEYS: [&str; 4] = ["read_delay_ms", "read_size", "recv_buffer", "close_after_events"];
    if let Some(k) = o.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!("`client`: unknown field {k:?} ({})", KEYS.join(", ")).into());
    }
    let n = |k: &str| -> Result<Option<u64>, ScenarioError> {
        match o.get(k) {
            None | Some(Json::Null) => Ok(None),
            Some(x) => x.as_u64().map(Some).ok_or_else(|| format!("`client.{k}` must be a count").into()),
        }
    };
    Ok(ClientBehavior {
        read_delay: n("read_delay_ms")?.map(Duration::from_millis),
        read_size: n("read_size")?.map(|x| x as usize),
        recv_buffer: n("recv_buffer")?.map(|x| x as usize),
        close_after_events: n("close_after_events")?.map(|x| x as usize),
        ..ClientBehavior::default()
    })
}

fn parse_request(r: &Json, i: usize, golden: &Path, tok: &GatewayTokenizer) -> Result<GwRequest, ScenarioError> {
    let id = r.get("id").and_then(Json::as_str).map(str::to_string).unwrap_or_else(|| format!("r{i}"));
    let endpoint = match r.get("endpoint").and_then(Json::as_str).unwrap_or("completions") {
        "completions" => Endpoint::Completions,
        "chat" => Endpoint::Chat,
        other => return Err(format!("unknown endpoint {other:?} (completions, chat)").into()),
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
    let mut checks: Vec<Json> = match r.get("checks") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(a)) => a.clone(),
        Some(_) => return Err("`checks` must be a list".into()),
    };
    let mut golden_name = None;
    if let Some(g) = r.get("from_golden").and_then(Json::as_str) {
        let case = read_golden(golden, g).map_err(|e| match e {
            ScenarioError::Refused { at, error } => {
                ScenarioError::Refused { at: format!("requests[{i}]: {at}"), error }
            }
            other => other,
        })?;
        let g_engine = from_golden(&case, endpoint, &mut body, &mut vllm, &mut checks, tok, r.get("finish_last"))?;
        if engine.is_none() {
            engine = Some(g_engine);
        }
        golden_name = Some(g.to_string());
    }
    if let (Some(e), Some(ms)) = (engine.as_mut(), r.get("step_delay_ms").and_then(Json::as_u64)) {
        e.step_delay = Some(Duration::from_millis(ms));
    }
    let checks = parse_list(ScenarioKind::Gateway, Some(&Json::Array(checks)))
        .map_err(|(j, error)| ScenarioError::Check { at: format!("requests[{i}]: checks[{j}]"), error })?;
    const STEP_ONLY: [&str; 3] = ["healthy", "exits_within", "no_socket_files"];
    if let Some(c) = checks.iter().find(|c| STEP_ONLY.contains(&c.name())) {
        return Err(format!("{} is a check of a probe or an action, not of a request", c.name()).into());
    }
    let client = parse_client(r.get("client"))?;
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
        client,
    })
}

/// The golden case `name` (`vllm/0.32.0/stop/eos_hidden`) of the tree
/// `golden`, for `from_golden`. The scenario file is untrusted
/// (docs/limits.md "Files the suite reads"), so `name` must be a relative
/// path of plain components (each an [`process_sandbox::untrusted::path_component`]:
/// no `..`, no empty part, so no absolute path) and the case file is read
/// with the limits of every file from elsewhere (size, then nesting).
fn read_golden(golden: &Path, name: &str) -> Result<Json, ScenarioError> {
    use process_sandbox::untrusted::{
        check_json_depth, path_component, read_text, MAX_INPUT_FILE_BYTES, MAX_JSON_DEPTH,
    };
    let refused = |error| ScenarioError::Refused { at: format!("from_golden {name:?}"), error };
    let mut path = golden.to_path_buf();
    let mut parts = name.split('/').peekable();
    while let Some(part) = parts.next() {
        let part = path_component(part).map_err(refused)?;
        if parts.peek().is_some() {
            path.push(part);
        } else {
            path.push(format!("{part}.json"));
        }
    }
    let text = match read_text(&path, MAX_INPUT_FILE_BYTES) {
        Ok(t) => t,
        Err(process_sandbox::untrusted::Refused::Io { source, .. }) => {
            return Err(format!("from_golden {}: {source}", path.display()).into())
        }
        Err(e) => return Err(refused(e)),
    };
    check_json_depth(&text, MAX_JSON_DEPTH).map_err(refused)?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()).into())
}

pub(crate) fn set_if_absent(o: &mut Json, k: &str, v: Json) {
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
) -> Result<EngineScript, ScenarioError> {
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
    let mut fill =
        GoldenFill { endpoint, body, vllm, checks, reference: format!("vLLM's frontend, golden {case_name}") };
    match kind {
        "stop_detection" => fill.stop_detection(input, expected)?,
        "logprob_shaping" if input.get("num_logprobs").is_none_or(Json::is_null) => {
            fill.prompt_logprobs(input, expected, &script)?;
            finish_last_step(&mut script, finish_last);
        }
        "logprob_shaping" => {
            fill.sample_logprobs(input, expected, &script)?;
            // The engine's last step finishes the request (the golden's
            // steps carry no finish).
            finish_last_step(&mut script, finish_last);
        }
        other => {
            return Err(ScenarioError::Invalid(format!(
                "from_golden: kind {other:?} is not used here (stop_detection, logprob_shaping)"
            )))
        }
    }
    script.then = mock_engine::vllm_script::Then::Generate;
    Ok(script)
}

/// The engine's last step finishes the request as `finish_last` says
/// (`"stop"`, else length).
fn finish_last_step(script: &mut EngineScript, finish_last: Option<&Json>) {
    let fin = finish_last.and_then(Json::as_str).unwrap_or("length");
    if let Some(last) = script.steps.last_mut() {
        last.finish_reason = Some(if fin == "stop" { 0 } else { 1 });
    }
}

/// What a golden fills in of one request: its OpenAI body, vLLM's
/// parameters, its checks (`reference` naming the golden).
struct GoldenFill<'a> {
    endpoint: Endpoint,
    body: &'a mut Json,
    vllm: &'a mut Json,
    checks: &'a mut Vec<Json>,
    reference: String,
}

impl GoldenFill<'_> {
    /// `stop_detection`: the golden's parameters (those not at vLLM's
    /// default) and checks of the text, the finish and stop reasons, the
    /// completion tokens, and the engine abort vLLM sends.
    fn stop_detection(&mut self, input: &Json, expected: &Json) -> Result<(), ScenarioError> {
        let (body, vllm, reference) = (&mut *self.body, &mut *self.vllm, &self.reference);
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
        let checks = &mut *self.checks;
        checks.push(json!({"check": "text", "is": text, "reference": reference}));
        checks.push(json!({"check": "finish_reason", "is": last.get("finish_reason"), "reference": reference}));
        checks.push(json!({"check": "stop_reason", "is": last.get("stop_reason"), "reference": reference}));
        let n_tokens: usize =
            outs.iter().map(|o| o.get("token_ids").and_then(Json::as_array).map_or(0, Vec::len)).sum();
        checks.push(json!({"check": "completion_tokens", "is": n_tokens, "reference": format!("{reference}: the tokens of its CompletionOutput")}));
        if outs.iter().any(|o| o.get("abort_engine") == Some(&Json::Bool(true))) {
            checks.push(json!({"check": "engine_aborted", "tokens": n_tokens, "reference": reference}));
        }
        Ok(())
    }

    /// `logprob_shaping`, prompt logprobs only (vLLM's completions extra
    /// parameter `prompt_logprobs`): the OpenAI server renders the
    /// frontend's per-position dicts as `choices[0].prompt_logprobs`.
    fn prompt_logprobs(&mut self, input: &Json, expected: &Json, script: &EngineScript) -> Result<(), ScenarioError> {
        let k = input
            .get("num_prompt_logprobs")
            .and_then(Json::as_i64)
            .ok_or("golden has neither num_logprobs nor num_prompt_logprobs")?;
        if self.endpoint != Endpoint::Completions {
            return Err("prompt logprobs: vLLM takes `prompt_logprobs` on completions".into());
        }
        let n_tokens: usize = script.steps.iter().map(|s| s.new_token_ids.len()).sum();
        for o in [&mut *self.body, &mut *self.vllm] {
            set_if_absent(o, "max_tokens", json!(n_tokens));
            set_if_absent(o, "temperature", json!(0.0));
            set_if_absent(o, "prompt_logprobs", json!(k));
        }
        let rendered = rendered_prompt_logprobs(expected)?;
        let reference = &self.reference;
        self.checks.push(json!({"check": "json", "path": "choices.0.prompt_logprobs", "is": rendered,
            "reference": format!("{reference}, rendered as vLLM's OpenAI server renders CompletionResponseChoice.prompt_logprobs")}));
        self.checks.push(json!({"check": "sent", "field": "prompt_logprobs"}));
        Ok(())
    }

    /// `logprob_shaping` of the sampled tokens: the request asks `k`
    /// logprobs as the endpoint spells it; checks of their rendering (and
    /// on chat their token text) and of what is sent.
    fn sample_logprobs(&mut self, input: &Json, expected: &Json, script: &EngineScript) -> Result<(), ScenarioError> {
        let (body, vllm, reference) = (&mut *self.body, &mut *self.vllm, &self.reference);
        let k = input.get("num_logprobs").and_then(Json::as_i64).ok_or("golden has no num_logprobs")?;
        let n_tokens: usize = script.steps.iter().map(|s| s.new_token_ids.len()).sum();
        set_if_absent(body, "max_tokens", json!(n_tokens));
        set_if_absent(body, "temperature", json!(0.0));
        set_if_absent(vllm, "max_tokens", json!(n_tokens));
        set_if_absent(vllm, "temperature", json!(0.0));
        match self.endpoint {
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
        self.checks.push(json!({"check": "logprobs", "k": k, "sample": sample.clone(), "reference": reference}));
        if self.endpoint == Endpoint::Chat {
            self.checks.push(json!({"check": "logprob_tokens", "k": k, "sample": sample, "reference": reference}));
        }
        self.checks.push(json!({"check": "sent", "field": "logprobs"}));
        Ok(())
    }
}

/// The golden's `expected.prompt` as vLLM's OpenAI server renders it:
/// `null` for the first position, each entry keyed by its token id
/// (`{logprob, rank, decoded_token}`, -inf clamped to -9999).
fn rendered_prompt_logprobs(expected: &Json) -> Result<Vec<Json>, ScenarioError> {
    Ok(expected
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
        .collect())
}
