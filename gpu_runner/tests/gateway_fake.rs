//! `gpu-runner gateway` against a fake gateway, hermetically: the fake is
//! this crate's own transport (the gateway side of the wire) behind a
//! minimal `/v1/completions` served by a std TCP listener, translating with
//! `engine_protocol::translate` (vLLM parity). The runner attaches to it,
//! its mock engine dials the fake's handshake address, and the scenario
//! checks must come out as the fake behaves: right where it copies vLLM,
//! a finding where it is told to misbehave.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use engine_protocol::translate::{translate, EngineInfo, GatewayTokenizer, GenerateRequest, TranslateOptions};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::{ReleaseSchema, Value};
use gpu_runner::gateway::{self, GatewayLaunch, GatewayTarget};
use gpu_runner::http;
use gpu_runner::report::Expectations;
use gpu_runner::transport::{ClientConfig, EngineClient};
use serde_json::{json, Value as Json};
use tokio::sync::mpsc;

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tokenizer() -> GatewayTokenizer {
    gpu_runner::cli::tokenizer_from(&repo().join("golden/tiny")).unwrap()
}

type Job = (String, Vec<u8>, std_mpsc::Sender<(u16, String)>);

/// Serves HTTP/1.1 on a std thread; every request goes to `jobs`.
fn http_server(jobs: mpsc::UnboundedSender<Job>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            let (head_end, len) = loop {
                let n = s.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break (None, 0);
                }
                raw.extend_from_slice(&buf[..n]);
                if let Some(e) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&raw[..e]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
                        .unwrap_or(0usize);
                    while raw.len() < e + 4 + len {
                        let n = s.read(&mut buf).unwrap_or(0);
                        if n == 0 {
                            break;
                        }
                        raw.extend_from_slice(&buf[..n]);
                    }
                    break (Some(e), len);
                }
            };
            let Some(e) = head_end else { continue };
            let head = String::from_utf8_lossy(&raw[..e]).into_owned();
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            let body = raw[e + 4..(e + 4 + len).min(raw.len())].to_vec();
            let (tx, rx) = std_mpsc::channel();
            if jobs.send((path, body, tx)).is_err() {
                break;
            }
            let (status, text) = rx.recv_timeout(Duration::from_secs(20)).unwrap_or((500, "{}".into()));
            // Chunked, to exercise the client's de-chunking.
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{text}\r\n0\r\n\r\n",
                text.len()
            );
        }
    });
    addr
}

/// How the fake misbehaves.
#[derive(Clone, Copy, Default)]
struct Faults {
    /// Sends max_tokens 16 when the client gave none (msgspec's default).
    default_16: bool,
    /// Drops `top_k` from the request (planted for the differential).
    ignore_top_k: bool,
    /// Answers 400 to any request with `min_p` (planted).
    refuse_min_p: bool,
    /// Drops `seed` when `top_k` is set too (a planted interaction).
    drop_seed_with_top_k: bool,
}

/// The fake's `/v1/completions`: translate as vLLM does, run the request,
/// decode the tokens, no stop-string handling (so no abort).
async fn serve(
    gw: &EngineClient,
    tok: &GatewayTokenizer,
    max_model_len: i64,
    faults: Faults,
    body: &[u8],
) -> (u16, String) {
    let Ok(b) = serde_json::from_slice::<Json>(body) else { return (400, "{}".into()) };
    let prompt = tok.encode(b.get("prompt").and_then(Json::as_str).unwrap_or(""));
    let mut v = b.clone();
    let o = v.as_object_mut().unwrap();
    o.remove("prompt");
    o.remove("model");
    if faults.ignore_top_k {
        o.remove("top_k");
    }
    if faults.drop_seed_with_top_k && o.contains_key("top_k") {
        o.remove("seed");
    }
    if faults.refuse_min_p && o.contains_key("min_p") {
        return (400, "{}".into());
    }
    if faults.default_16 && !o.contains_key("max_tokens") {
        o.insert("max_tokens".into(), json!(16));
    }
    o.insert("prompt_token_ids".into(), json!(prompt));
    let Ok(g) = GenerateRequest::from_json(&v) else { return (400, "{}".into()) };
    let info = EngineInfo { max_model_len, release: release() };
    let Ok(t) = translate(&g, &info, tok, &TranslateOptions::vllm_parity()) else { return (400, "{}".into()) };
    let mut choices = Vec::new();
    let mut completion = 0;
    for (i, r) in t.requests.iter().enumerate() {
        let Ok(stream) = gw.add(0, &r.request).await else { return (500, "{}".into()) };
        let Ok(f) = stream.finish(Duration::from_secs(10)).await else { return (500, "{}".into()) };
        completion += f.token_ids.len();
        let ids: Vec<u32> = f.token_ids.iter().map(|&t| t as u32).collect();
        let stop_reason = match f.stop_reason {
            Some(StopReason::TokenId(t)) => json!(t),
            Some(StopReason::Text(s)) => json!(s),
            None => Json::Null,
        };
        choices.push(json!({"index": i, "text": tok.decode(&ids, true),
            "finish_reason": match f.finish_reason { FinishReason::Stop => "stop", FinishReason::Length => "length", _ => "abort" },
            "stop_reason": stop_reason}));
    }
    let usage = json!({"prompt_tokens": prompt.len(), "completion_tokens": completion});
    (200, json!({"object": "text_completion", "choices": choices, "usage": usage}).to_string())
}

struct Fake {
    http: String,
    handshake: String,
    _dir: tempfile::TempDir,
}

async fn fake(faults: Faults) -> Fake {
    let dir = tempfile::tempdir().unwrap();
    let gw = EngineClient::bind(ClientConfig::new(release(), dir.path())).await.unwrap();
    let handshake = gw.handshake_endpoint().to_string();
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    let http = http_server(tx);
    tokio::spawn(async move {
        let tok = tokenizer();
        let mut up: Option<i64> = None;
        while let Some((path, body, reply)) = rx.recv().await {
            if up.is_none() {
                if let Ok(f) = gw.wait_ready(1, Duration::from_millis(50)).await {
                    up = Some(f[0].max_model_len);
                }
            }
            let r = match (path.as_str(), up) {
                ("/readiness", Some(_)) => (200, "{}".to_string()),
                ("/readiness", None) => (503, "{}".to_string()),
                ("/v1/completions", Some(m)) => serve(&gw, &tok, m, faults, &body).await,
                _ => (404, "{}".to_string()),
            };
            let _ = reply.send(r);
        }
    });
    Fake { http, handshake, _dir: dir }
}

fn target(f: &Fake) -> GatewayTarget {
    GatewayTarget {
        launch: GatewayLaunch::Attach,
        http: Some(f.http.clone()),
        handshake: Some(f.handshake.clone()),
        model: repo().join("golden/tiny"),
        model_name: "tiny".into(),
        ready_path: "/readiness".into(),
        startup_timeout: Duration::from_secs(10),
        registration: gateway::registration_from_case(&repo().join(gateway::READY_RESPONSE_CASE)).unwrap(),
        release: release(),
    }
}

fn scenario(v: Json) -> gateway::GwScenario {
    gateway::parse_scenario(&v, &repo().join("golden"), &tokenizer()).unwrap()
}

async fn run(f: &Fake, s: Vec<gateway::GwScenario>, exp: &Expectations) -> Vec<gateway::GwResult> {
    let work = tempfile::tempdir().unwrap();
    tokio::time::timeout(Duration::from_secs(60), gateway::run_all(&target(f), &s, &tokenizer(), exp, work.path()))
        .await
        .expect("the run ended within its deadline")
        .unwrap()
}

fn failed_checks(r: &gateway::GwResult) -> Vec<String> {
    r.run.as_ref().unwrap().checks.iter().filter(|c| !c.ok).map(|c| format!("{}: {}", c.check, c.detail)).collect()
}

#[tokio::test]
async fn a_gateway_that_translates_as_vllm_passes_the_send_side_and_finish_checks() {
    let f = fake(Faults::default()).await;
    let s = vec![
        scenario(json!({"scenario": "eos", "requests": [{"from_golden": "vllm/0.32.0/stop/eos_hidden",
            "checks": [{"check": "status", "is": 200}, {"check": "sent", "field": "max_tokens"},
                       {"check": "sent", "field": "_eos_token_id"}, {"check": "sent_stop_token_ids"},
                       {"check": "sent", "field": "_all_stop_token_ids", "as_set": true}, {"check": "prompt_tokens"}]}]})),
        scenario(json!({"scenario": "room", "requests": [{"body": {"prompt": "Hello world", "ignore_eos": true},
            "vllm": {"ignore_eos": true},
            "checks": [{"check": "sent", "field": "max_tokens"}, {"check": "sent", "field": "ignore_eos"},
                       {"check": "finish_reason", "is": "length"}, {"check": "completion_tokens", "is": "room"}]}]})),
        scenario(
            json!({"scenario": "n3", "requests": [{"body": {"prompt": "Hello", "max_tokens": 3, "n": 3, "seed": 7},
            "vllm": {"max_tokens": 3, "n": 3, "seed": 7},
            "checks": [{"check": "num_adds", "is": 3}, {"check": "sent_seeds"}]}]}),
        ),
    ];
    let rs = run(&f, s, &Expectations::default()).await;
    for r in &rs {
        assert_eq!(r.result.verdict.label(), "pass", "{}: {:?}", r.result.scenario, failed_checks(r));
        assert!(r.run.as_ref().unwrap().checks.iter().any(|c| c.check == "wire_valid" && c.ok));
    }
    // What the client saw and what was sent are in the report.
    let report: Json = serde_json::from_str(&gateway::report_json("fake", "mock", &rs)).unwrap();
    assert_eq!(report["totals"]["passed"], 3);
    assert_eq!(report["results"][0]["requests"][0]["sent"][0]["sampling_params"]["_eos_token_id"], 2);
}

#[tokio::test]
async fn findings_name_what_differs_from_vllm_and_expectations_hold_them() {
    let f = fake(Faults { default_16: true, ..Faults::default() }).await;
    let s = vec![
        scenario(json!({"scenario": "room", "requests": [{"body": {"prompt": "Hello world"},
            "checks": [{"check": "sent", "field": "max_tokens"}]}]})),
        // No stop-string handling in the fake: text not cut, no abort.
        scenario(
            json!({"scenario": "stop", "requests": [{"from_golden": "vllm/0.32.0/stop/multi_token_stop", "grace_ms": 200}]}),
        ),
    ];
    let rs = run(&f, s.clone(), &Expectations::default()).await;
    let room = failed_checks(&rs[0]);
    assert_eq!(room.len(), 1, "{room:?}");
    assert!(room[0].contains("sent max_tokens: sent 16, vLLM sends 510"), "{room:?}");
    let stop = failed_checks(&rs[1]).join("\n");
    for what in [
        "text: got",
        "finish_reason: got \"length\", vLLM: \"stop\"",
        "engine_aborted: no ABORT",
        "vLLM aborts after 11",
    ] {
        assert!(stop.contains(what), "{what} in {stop}");
    }
    // Listed failures become expected failures; the scoreboard shows them.
    // A fresh fake: the first run's engine registered with this one, and a
    // gateway takes one engine registration per engine index.
    let exp = Expectations::parse("room sends msgspec's default 16\nstop no stop strings\n").unwrap();
    let rs = run(&fake(Faults { default_16: true, ..Faults::default() }).await, s, &exp).await;
    assert!(rs.iter().all(|r| r.result.verdict.label() == "expected failure"));
    let report: Json = serde_json::from_str(&gateway::report_json("fake-1", "mock", &rs)).unwrap();
    let md = gpu_runner::scoreboard::markdown(&[("fake.json".into(), report)]);
    assert!(md.contains("| fake-1 | 2 | 0 | 0 | 2 | 0 | `fake.json` |"), "{md}");
    assert!(md.contains("`sent max_tokens`: sent 16, vLLM sends 510"), "{md}");
}

#[test]
fn the_http_client_reads_a_chunked_json_answer_and_reports_a_dead_port() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
    let addr = http_server(tx);
    std::thread::spawn(move || {
        while let Some((path, body, reply)) = rx.blocking_recv() {
            let _ = reply.send((201, json!({"path": path, "len": body.len()}).to_string()));
        }
    });
    let r = http::post_json(&addr, "/x", &json!({"a": "é"}), Duration::from_secs(5)).unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(r.json().unwrap(), json!({"path": "/x", "len": 10}));
    let r = http::get(&addr, "/y", Duration::from_secs(5)).unwrap();
    assert_eq!(r.json().unwrap()["path"], "/y");
    drop(rt);
    let dead = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let e = http::get(&dead, "/", Duration::from_secs(2)).unwrap_err();
    assert!(matches!(e, http::HttpError::Connect { .. }), "{e:?}");
    assert!(!e.is_timeout());
    assert!(e.to_string().starts_with(&format!("connect {dead}: ")), "{e}");
    let _ = Value::Nil;
}

/// The FNV derivation against the wheel's own Python, when the venv of
/// gpu_runner/python/setup-smg.sh is there (skipped otherwise).
#[test]
fn handshake_port_agrees_with_the_smg_wheel_when_installed() {
    let py = gpu_runner::gateway::smg::default_venv().join("bin/python");
    if !py.exists() {
        eprintln!("skipped: no smg venv at {}", py.display());
        return;
    }
    let urls =
        ["ipc:///tmp/smg-zmq/engine-31000", "ipc:///tmp/gpu-runner-77/gw/engine-1", "/no/scheme", "ipc:///tmp/ü/e"];
    let code = format!(
        "from smg.serve import _zmq_handshake_port as p\nfor u in {:?}: print(p(u))",
        urls.iter().map(|u| u.to_string()).collect::<Vec<_>>()
    );
    let out = std::process::Command::new(py).arg("-c").arg(code).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ports: Vec<u16> = String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect();
    let ours: Vec<u16> = urls.iter().map(|u| gpu_runner::gateway::smg::handshake_port(u)).collect();
    assert_eq!(ours, ports);
}

#[tokio::test]
async fn the_differential_finds_each_planted_difference_at_its_field_and_nothing_else() {
    use gpu_runner::gateway::differential::{self, ProbeVerdict};
    use gpu_runner::gateway::request_space::RequestSpace;
    let space = RequestSpace::load(&repo().join("golden/generate/schema/openai-requests-vllm-0.32.0.json")).unwrap();
    let (mut probes, _) = differential::sweep(&space, &[gateway::Endpoint::Completions], &[false]);
    let fields = ["top_k", "min_p", "temperature", "seed", "ignore_eos", "echo"];
    probes.retain(|p| p.field.as_deref().is_none_or(|f| fields.contains(&f)));
    let reference = fake(Faults::default()).await;
    let test = fake(Faults { ignore_top_k: true, refuse_min_p: true, ..Faults::default() }).await;
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = gateway::start(&target(&reference), dirs.0.path(), &[]).await.unwrap();
    let b = gateway::start(&target(&test), dirs.1.path(), &[]).await.unwrap();
    let results = tokio::time::timeout(
        Duration::from_secs(120),
        differential::run(&a, &b, &probes, "tiny", Duration::from_millis(10)),
    )
    .await
    .expect("the differential ended within its deadline");
    let m = differential::matrix(&results);
    let cell = |f: &str| m[f][&("/v1/completions".to_string(), false)].name();
    assert_eq!(cell("min_p"), "refused");
    assert_eq!(cell("top_k"), "differs");
    for f in ["temperature", "seed", "ignore_eos", "echo", "(base request)"] {
        assert_eq!(cell(f), "same", "{f}");
    }
    // The top_k finding names the sent field, both sides' values.
    let found = results
        .iter()
        .find_map(|r| match (&r.verdict, r.probe.value.as_i64()) {
            (ProbeVerdict::Differs(d), Some(4)) if r.probe.field.as_deref() == Some("top_k") => Some(d.clone()),
            _ => None,
        })
        .expect("top_k 4 differs");
    assert!(found.iter().any(|d| d.path == "sent[0].sampling_params.top_k" && d.reference == json!(4)), "{found:?}");
    let report = differential::report_json("reference", "planted", &results, &[]);
    assert!(report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| ["top_k", "min_p"].contains(&f["field"].as_str().unwrap())));
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_planted_interaction_of_two_fields_is_found_in_a_combination_and_shrunk_to_those_two() {
    use gpu_runner::gateway::combinations;
    use gpu_runner::gateway::request_space::RequestSpace;
    let space = RequestSpace::load(&repo().join("golden/generate/schema/openai-requests-vllm-0.32.0.json")).unwrap();
    // Fields every value of which both fakes serve (a request both refuse
    // differs in nothing).
    let only: Vec<String> = ["seed", "top_k", "echo", "ignore_eos"].map(String::from).to_vec();
    let combos = combinations::draw(&space, &[gateway::Endpoint::Completions], &[false], &only, 16, 4, 3);
    let reference = fake(Faults::default()).await;
    let test = fake(Faults { drop_seed_with_top_k: true, ..Faults::default() }).await;
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = gateway::start(&target(&reference), dirs.0.path(), &[]).await.unwrap();
    let b = gateway::start(&target(&test), dirs.1.path(), &[]).await.unwrap();
    let results = tokio::time::timeout(
        Duration::from_secs(120),
        combinations::run(&a, &b, &combos, &[], "tiny", Duration::from_millis(10)),
    )
    .await
    .expect("the combinations ended within their deadline");
    let mut found = 0;
    for r in &results {
        let c = &r.combination;
        // top_k set (any value) and a seed that is sent (vLLM sends none
        // for null and -1).
        let seed_sent = c.set.iter().any(|(n, v)| n == "seed" && !v.is_null() && *v != json!(-1));
        let planted = c.set.iter().any(|(n, _)| n == "top_k") && seed_sent;
        match &r.minimal {
            Some((min, diffs)) => {
                found += 1;
                assert!(planted, "only the planted interaction differs: {}", c.describe());
                let mut names: Vec<&str> = min.set.iter().map(|(k, _)| k.as_str()).collect();
                names.sort();
                assert_eq!(names, ["seed", "top_k"], "shrunk from {}", c.describe());
                assert!(diffs.iter().any(|d| d.path == "sent[0].sampling_params.seed"), "{diffs:?}");
            }
            None => assert!(!planted, "missed: {}", c.describe()),
        }
    }
    assert!(found > 0, "the seed draws at least one combination with both fields: {:?}", combos);
    a.stop().await;
    b.stop().await;
}

/// The lifecycle steps against the fake: a gateway up before its engine,
/// the engine registering, the engine vanishing mid-request (no sentinel)
/// and coming back. The fake keeps saying ready after its engine
/// vanished: the readiness check there is the one that fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_steps_probe_a_late_engine_and_find_readiness_kept_after_the_engine_vanished() {
    let f = fake(Faults::default()).await;
    let t = target(&f);
    let work = tempfile::tempdir().unwrap();
    let mut sess = gateway::start_with(&t, work.path(), &[], false).await.unwrap();
    let ask = |id: &str, then: Option<&str>, checks: Json| {
        let mut r = json!({"id": id, "body": {"prompt": "x y z", "max_tokens": 4, "temperature": 0},
            "vllm": {"max_tokens": 4, "temperature": 0}, "timeout_s": 15, "checks": checks});
        if let Some(then) = then {
            r["engine"] = json!({"steps": [{"new_token_ids": [363]}], "then": then, "step_delay_ms": 50});
        }
        r
    };
    let s = scenario(json!({"scenario": "lc", "fresh_gateway": true, "engine_at_start": false, "requests": [
        {"id": "before", "probe": "ready", "checks": [{"check": "healthy", "is": false}]},
        {"id": "registers", "action": "register_engine", "timeout_s": 10, "checks": [{"check": "within_s", "s": 10}]},
        {"id": "serving", "probe": "ready", "until": "healthy", "wait_s": 10, "checks": [{"check": "healthy", "is": true}]},
        ask("served", None, json!([{"check": "status", "is": 200}])),
        ask("vanishes", Some("vanish"), json!([{"check": "fails_within", "s": 12}])),
        {"id": "after", "probe": "ready", "checks": [{"check": "healthy", "is": false}]},
        {"id": "returns", "action": "register_engine", "timeout_s": 10},
    ]}));
    let tok = tokenizer();
    let facts = gpu_runner::transport::handshake::decode_registration(release(), 0, &t.registration).unwrap();
    let ctx = gateway::CheckCtx { tokenizer: &tok, facts: &facts, release: release() };
    let run = tokio::time::timeout(Duration::from_secs(60), gateway::run_scenario(&mut sess, &s, "tiny", &ctx))
        .await
        .expect("the scenario ended within its deadline");
    sess.stop().await;
    let failed: Vec<(&str, &str)> =
        run.checks.iter().filter(|c| !c.ok).map(|c| (c.request.as_str(), c.check.as_str())).collect();
    assert_eq!(failed, [("after", "healthy")], "{:#?}", run.checks);
    // Each step is in the report, probes with what they got.
    let before = run.requests.iter().find(|q| q["id"] == "before").unwrap();
    assert_eq!((before["probe"].as_str(), before["status"].as_u64()), (Some("/readiness"), Some(503)));
    let registers = run.requests.iter().find(|q| q["id"] == "registers").unwrap();
    assert_eq!((registers["action"].as_str(), registers["ok"].as_bool()), (Some("register_engine"), Some(true)));
}

/// The mock playing an older release (`--engine-release`): its
/// registration built from that release's table, its outputs re-targeted.
/// A gateway of 0.32.0's table reads a 0.29.0 engine (whose registration
/// and outputs only append to 0.32.0's), and refuses a 0.22.0 one (its
/// registration has no `block_size`); the sweep's judging says so.
#[tokio::test]
async fn the_mock_plays_an_older_release_and_the_sweep_judges_it() {
    let eos = scenario(json!({"scenario": "eos_finish", "requests": [{"from_golden": "vllm/0.32.0/stop/eos_hidden",
        "checks": [{"check": "status", "is": 200}, {"check": "sent", "field": "max_tokens"}, {"check": "prompt_tokens"}]}]}));
    let own = release();
    let case = repo().join(gateway::READY_RESPONSE_CASE);
    let shown = |p: &std::path::Path| p.display().to_string();
    let mut rows = Vec::new();
    let mut baseline = Vec::new();
    for v in ["0.32.0", "0.29.0", "0.22.0"] {
        let rel = engine_protocol::release(engine_protocol::Dialect::Vllm, v).unwrap();
        let f = fake(Faults::default()).await;
        let reg = gateway::releases::registration_for(rel, own, &case, &repo(), shown).unwrap();
        let t = GatewayTarget {
            registration: reg.bytes,
            release: rel,
            startup_timeout: Duration::from_secs(3),
            ..target(&f)
        };
        let work = tempfile::tempdir().unwrap();
        let rs = tokio::time::timeout(
            Duration::from_secs(60),
            gateway::run_all(&t, std::slice::from_ref(&eos), &tokenizer(), &Expectations::default(), work.path()),
        )
        .await
        .unwrap()
        .unwrap();
        if v == "0.32.0" {
            baseline = rs.clone();
        }
        rows.push(gateway::releases::summarize(v, "0.32.0", &rs, &baseline, ""));
    }
    assert_eq!((rows[0].outcome(), rows[0].passed, rows[0].total), ("talks".to_string(), 2, 2), "{:?}", rows[0]);
    assert_eq!(rows[1].outcome(), "talks", "{:?}", rows[1]);
    assert!(!rows[2].connected, "{:?}", rows[2]);
    let why = rows[2].reason.as_deref().unwrap();
    assert!(why.starts_with("not ready after the registration: the gateway did not come up"), "{why}");
}
