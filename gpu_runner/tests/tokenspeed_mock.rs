//! The TokenSpeed dialect end to end over real ZeroMQ sockets: the runner's
//! TokenSpeed gateway against the TokenSpeed mock engine (hermetic), the
//! replay scenarios of golden/replay/tokenspeed, and the CLI
//! (docs/runner/tokenspeed.md "TokenSpeed").

use std::path::{Path, PathBuf};
use std::time::Duration;

use engine_protocol::translate::GatewayTokenizer;
use engine_protocol::typed::tokenspeed::{
    BatchRow, BatchTokenIDOutSlim, Finish, LoadTail, Rid, TokenizedGenerateReqInput,
};
use gpu_runner::dialect::tokenspeed::release;
use gpu_runner::dialect::Tokenspeed;
use gpu_runner::mock::tokenspeed::{Fault, Script};
use gpu_runner::mock::Engine as Mock;
use gpu_runner::report::{Expectations, Verdict};
use gpu_runner::tokenspeed::{require_gpu, run_all, RunOptions};
use gpu_runner::transport::{
    ClientConfig, DeathCause, EngineClient, EngineState, RequestEvent, RequestEvents, TransportError,
};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tokenizer() -> GatewayTokenizer {
    gpu_runner::cli::tokenizer_from(&repo().join("golden/tiny")).unwrap()
}

async fn up(script: Script) -> (tempfile::TempDir, EngineClient<Tokenspeed>, Mock<Tokenspeed>) {
    let dir = tempfile::tempdir().unwrap();
    let gw = EngineClient::bind(ClientConfig::tokenspeed("tcp://127.0.0.1:0", dir.path())).await.unwrap();
    let mock = Mock::spawn(gw.handshake_endpoint(), script);
    (dir, gw, mock)
}

/// A minimal ADD: tag, rid, nil, nil, ids, sampling params (max, ignore_eos).
fn add(rid: &str, ids: &[i64], max_new: i64, stream: bool) -> Vec<Vec<u8>> {
    let mut r = TokenizedGenerateReqInput {
        rid: Some(Rid::One(rid.into())),
        input_ids: Some(ids.into()),
        stream,
        ..Default::default()
    };
    r.sampling_params.max_new_tokens = Some(max_new.into());
    r.sampling_params.ignore_eos = true;
    r.encode(release()).unwrap()
}

async fn rows(rx: &mut RequestEvents<Tokenspeed>, wait: Duration) -> Vec<BatchRow> {
    let mut out = Vec::new();
    while let Ok(Some(RequestEvent::Output(r))) = tokio::time::timeout(wait, rx.next()).await {
        let done = r.finish.is_terminal();
        out.push(r);
        if done {
            break;
        }
    }
    out
}

#[tokio::test]
async fn the_mock_registers_as_tokenspeed_0_1_1_with_prefix_granularity() {
    let (_d, gw, mock) = up(Script::default()).await;
    let facts = gw.wait_ready(1, Duration::from_secs(10)).await.unwrap().swap_remove(0);
    assert_eq!(facts.vllm_version, "tokenspeed-0.1.1");
    assert_eq!(facts.max_model_len, 512);
    assert_eq!(facts.ready_response.int_field("prefix_granularity"), Some(16));
    assert!(facts.drift.is_empty(), "{:?}", facts.drift);
    gw.shutdown().await;
    mock.stop().await.unwrap();
}

#[tokio::test]
async fn rows_are_deltas_with_cumulative_counts_and_a_length_finish() {
    let (_d, gw, mock) = up(Script::default()).await;
    gw.wait_ready(1, Duration::from_secs(10)).await.unwrap();
    let mut rx = gw.add_frames(0, "r1", add("r1", &[1, 2, 3], 4, true)).await.unwrap();
    let got = rows(&mut rx, Duration::from_secs(5)).await;
    let completions: Vec<i128> = got.iter().map(|r| r.completion_tokens).collect();
    assert_eq!(completions, [1, 2, 3, 4]);
    assert!(got.iter().all(|r| r.output_ids.len() == 1 && r.prompt_tokens == 3));
    let finishes: Vec<&str> = got.iter().map(|r| r.finish.as_str()).collect();
    assert_eq!(finishes, ["", "", "", "length"]);
    gw.shutdown().await;
    mock.stop().await.unwrap();
}

#[tokio::test]
async fn an_abort_sent_before_its_add_kills_the_request_silently() {
    let (_d, gw, mock) = up(Script::default()).await;
    gw.wait_ready(1, Duration::from_secs(10)).await.unwrap();
    gw.abort(0, &["early".to_string()]).await.unwrap();
    let mut rx = gw.add_frames(0, "early", add("early", &[1, 2, 3], 4, true)).await.unwrap();
    let got = rows(&mut rx, Duration::from_millis(400)).await;
    assert!(got.is_empty(), "rows for an aborted rid: {got:?}");
    assert!(mock.log().aborted.contains(&"early".to_string()));
    gw.shutdown().await;
    mock.stop().await.unwrap();
}

#[tokio::test]
async fn a_request_asking_for_logprobs_of_an_engine_without_them_gets_one_abort_row() {
    let script = Script { enable_output_logprobs: false, ..Script::default() };
    let (_d, gw, mock) = up(script).await;
    gw.wait_ready(1, Duration::from_secs(10)).await.unwrap();
    let mut r = TokenizedGenerateReqInput {
        rid: Some(Rid::One("lp".into())),
        input_ids: Some(vec![1, 2, 3].into()),
        return_logprob: true,
        stream: true,
        ..Default::default()
    };
    r.sampling_params.max_new_tokens = Some(4);
    let frames = r.encode(release()).unwrap();
    let mut rx = gw.add_frames(0, "lp", frames).await.unwrap();
    let got = rows(&mut rx, Duration::from_secs(5)).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].finish.as_str(), got[0].output_ids.len(), got[0].completion_tokens), ("abort", 0, 0));
    assert_eq!(mock.log().refused.len(), 1);
    gw.shutdown().await;
    mock.stop().await.unwrap();
}

#[tokio::test]
async fn a_crashed_engine_fails_the_request_in_flight_and_refuses_the_next() {
    let script = Script { fault: Some(Fault::Crash { after_steps: 2 }), ..Script::default() };
    let (_d, gw, mock) = up(script).await;
    gw.wait_ready(1, Duration::from_secs(10)).await.unwrap();
    let mut rx = gw.add_frames(0, "c", add("c", &[1, 2, 3], 50, true)).await.unwrap();
    let mut dead = None;
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(5), rx.next()).await {
        if let RequestEvent::Failed(TransportError::EngineDead { cause, .. }) = ev {
            dead = Some(cause);
            break;
        }
    }
    // Every socket drops at once: whichever connection the gateway sees go
    // first names the death.
    assert!(matches!(dead, Some(DeathCause::OutputDisconnected | DeathCause::InputDisconnected)), "{dead:?}");
    let err = gw.add_frames(0, "d", add("d", &[1], 2, true)).await.unwrap_err();
    assert!(matches!(err, TransportError::EngineDead { engine: 0, .. }), "{err}");
    gw.shutdown().await;
    let _ = mock.join(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_stalled_engine_sends_nothing_more_but_stays_connected() {
    let script = Script { fault: Some(Fault::Stall { after_steps: 2 }), ..Script::default() };
    let (_d, gw, mock) = up(script).await;
    gw.wait_ready(1, Duration::from_secs(10)).await.unwrap();
    let mut rx = gw.add_frames(0, "s", add("s", &[1, 2, 3], 50, true)).await.unwrap();
    let got = rows(&mut rx, Duration::from_millis(500)).await;
    assert_eq!(got.iter().map(|r| r.completion_tokens).collect::<Vec<_>>(), [1, 2]);
    assert!(matches!(gw.engines()[0].state, EngineState::Up(_)));
    gw.shutdown().await;
    mock.stop().await.unwrap();
}

#[test]
fn a_ragged_batch_is_refused_whole() {
    let row = |rid: &str| BatchRow { rid: rid.into(), output_ids: vec![5].into(), ..BatchRow::default() };
    let mut b = BatchTokenIDOutSlim::from_rows(&[row("a"), row("b")], 0, LoadTail::default());
    b.output_ids.pop();
    let err = b.rows().unwrap_err();
    assert_eq!(err.to_string(), "BatchTokenIDOutSlim.output_ids: 1 entries for 2 rids");
    assert_eq!(Finish::from_wire(""), Finish::Running);
}

#[test]
fn the_tokenspeed_engine_fails_clearly_without_a_gpu() {
    let has_gpu = Path::new("/dev/nvidia0").exists();
    match require_gpu() {
        Ok(()) => assert!(has_gpu || std::process::Command::new("nvidia-smi").arg("-L").output().is_ok()),
        Err(e) => {
            assert!(!has_gpu);
            assert!(e.to_string().contains("needs an NVIDIA GPU"), "{e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tokenspeed_scenario_passes_against_the_mock() {
    let work = tempfile::tempdir().unwrap();
    let opts = RunOptions {
        engine: "mock".into(),
        scenarios: repo().join("golden/replay/tokenspeed"),
        model: repo().join("golden/tiny"),
        handshake: None,
        startup_timeout: Duration::from_secs(20),
        silence: Duration::from_secs(10),
        max_model_len: 512,
        mock_script: None,
        ts_bin: None,
        extra_args: Vec::new(),
        expectations: Expectations::default(),
        work_dir: work.path().into(),
        deadline_at: None,
        shard: None,
        record: None,
    };
    let (results, main_error) = run_all(&opts, &tokenizer()).await.unwrap();
    assert!(!main_error);
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !matches!(r.verdict, Verdict::Pass))
        .map(|r| format!("{}: {:?}", r.scenario, r.verdict))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(results.len() >= 17, "only {} scenarios", results.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_rows_after_an_abort_fail_silent_after_abort() {
    // An engine that ignores ABORT keeps sending rows: the abort scenario
    // must see them and fail, not pass because the gateway stopped listening.
    let work = tempfile::tempdir().unwrap();
    let scenarios = work.path().join("s");
    std::fs::create_dir(&scenarios).unwrap();
    std::fs::copy(repo().join("golden/replay/tokenspeed/ts_abort.json"), scenarios.join("ts_abort.json")).unwrap();
    let opts = RunOptions {
        engine: "mock".into(),
        scenarios,
        model: repo().join("golden/tiny"),
        handshake: None,
        startup_timeout: Duration::from_secs(20),
        silence: Duration::from_secs(10),
        max_model_len: 512,
        mock_script: Some(Script { ignore_aborts: true, step_delay: Duration::from_millis(5), ..Script::default() }),
        ts_bin: None,
        extra_args: Vec::new(),
        expectations: Expectations::default(),
        work_dir: work.path().join("w"),
        deadline_at: None,
        shard: None,
        record: None,
    };
    let (results, _) = run_all(&opts, &tokenizer()).await.unwrap();
    let Verdict::Fail(why) = &results[0].verdict else { panic!("{:?}", results[0].verdict) };
    assert!(why.contains("silent_after_abort") && why.contains("after the ABORT"), "{why}");
}

#[test]
fn the_cli_runs_the_tokenspeed_scenarios_against_the_mock_with_a_report_and_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("ts.json");
    let rec = dir.path().join("rec");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .current_dir(repo())
        .args(["run", "--engine", "mock", "--dialect", "tokenspeed", "--report-json"])
        .arg(&report)
        .arg("--record")
        .arg(&rec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(j["engine"], "tokenspeed-mock", "{j}");
    assert!(stdout.contains("ts_abort"), "{stdout}");

    // The recording: every frame set, in TokenSpeed's names, each one the
    // bytes that travelled (they decode as the message their file names).
    let run: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(rec.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        (run["engine"].as_str(), run["engine_version"].as_str()),
        (Some("tokenspeed-mock"), Some("0.1.1")),
        "{run}"
    );
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut files = 0;
    for entry in walk(&rec) {
        let name = entry.file_name().unwrap().to_string_lossy().into_owned();
        if name == "run.json" || name == "results.json" {
            continue;
        }
        let case: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&entry).unwrap()).unwrap();
        assert_eq!((case["dialect"].as_str(), case["version"].as_str()), (Some("tokenspeed"), Some("0.1.1")), "{name}");
        assert!(case.get("expect").is_none(), "{name}: a verdict is TokenSpeed's to give");
        let message = case["message"].as_str().unwrap().to_string();
        let kind = engine_protocol::MessageKind::parse(&message).unwrap_or_else(|| panic!("{name}: {message}"));
        let frames = engine_testkit::hex::decode_frames(&case["frames"]).unwrap();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        // What the mock engine sent is valid (the gateway's side may be a
        // scenario's deliberately bad request).
        let from_engine = case["provenance"]["direction"] == "engine->gateway";
        if from_engine && !engine_protocol::is_engine_dead(&refs) {
            engine_protocol::decode_message(release(), kind, &refs, &engine_protocol::Limits::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        *seen.entry(message).or_default() += 1;
        files += 1;
    }
    assert_eq!(run["frame_sets"].as_u64(), Some(files as u64));
    for m in [
        "HandshakeHello",
        "HandshakeInit",
        "HandshakeReady",
        "EngineCoreReadyResponse",
        "TokenizedGenerateReqInput",
        "AbortRequest",
        "BatchTokenIDOutSlim",
    ] {
        assert!(seen.get(m).is_some_and(|&n| n > 0), "no {m} recorded: {seen:?}");
    }
    // ADDs go under the scenario their rid names.
    assert!(walk(&rec.join("ts_abort"))
        .iter()
        .any(|p| p.to_string_lossy().ends_with("-TokenizedGenerateReqInput.json")));
}

/// Every file under `dir`, depth first.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn the_cli_refuses_the_tokenspeed_engine_on_a_machine_without_a_gpu() {
    if require_gpu().is_ok() {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .current_dir(repo())
        .args(["run", "--engine", "tokenspeed", "--model", "golden/tiny", "--startup-timeout", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs an NVIDIA GPU"), "{err}");
}

#[test]
fn a_tokenspeed_scenario_shares_the_vllm_scenario_header_and_refuses_bad_files_at_load() {
    use gpu_runner::scenario::tokenspeed::Scenario as TokenspeedScenario;
    use gpu_runner::scenario::Raw;
    let s = TokenspeedScenario::from_json(
        "hint",
        r#"{"requests": [{"id": "a", "request": {"prompt_token_ids": [1]}, "stream": true},
                         {"id": "b", "after": "a", "raw": {"frames": ["00"]}}],
            "mock": {"max_model_len": 64}, "timeout_s": 5,
            "checks": [{"check": "rows", "request": "a", "is": 1}]}"#,
    )
    .unwrap();
    assert_eq!(s.name, "hint");
    assert!(s.requests[0].dialect.stream);
    assert_eq!(s.requests[1].raw, Some(Raw::Frames(vec![vec![0]])));
    assert_eq!(s.dialect.mock, Some(serde_json::json!({"max_model_len": 64})));
    assert_eq!(s.timeout, Duration::from_secs(5));

    let err = |text: &str| TokenspeedScenario::from_json("bad", text).unwrap_err().to_string();
    assert!(err(r#"{"requests": [{"id": "a", "request": {}}], "checks": [{"check": "utility"}]}"#)
        .contains("unknown check \"utility\""));
    assert!(err(r#"{"requests": [{"id": "a", "request": {}, "after": "a"}]}"#).contains("cycle"));
    assert!(err(r#"{"requests": [{"id": "a", "request": {}, "stream": "yes"}]}"#).contains("requests[0].stream"));
    assert!(err(r#"{"requests": []}"#).contains("no requests"));
}

#[test]
fn a_tokenspeed_deadline_of_zero_skips_every_scenario() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .current_dir(repo())
        .args(["run", "--engine", "mock", "--dialect", "tokenspeed", "--deadline", "0"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("0 passed, 0 failed") && stdout.contains("--deadline reached"), "{stdout}");
}

/// The deadline also cuts the wait for an engine: attaching with nothing
/// to attach ends when the deadline does, not at the startup timeout, and
/// the scenarios that needed the engine fail.
#[test]
fn tokenspeed_attach_with_nothing_attaching_ends_within_the_deadline() {
    let t0 = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .current_dir(repo())
        .args(["run", "--engine", "attach", "--dialect", "tokenspeed", "--handshake", "tcp://127.0.0.1:0"])
        .args(["--startup-timeout", "120", "--deadline", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(t0.elapsed() < std::time::Duration::from_secs(20), "took {:?} with --deadline 3", t0.elapsed());
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("did not come up"), "{stdout}");
}

/// `--shard i/n` splits the TokenSpeed scenarios as it splits vLLM's: the
/// shards are disjoint and together run every scenario.
#[test]
fn tokenspeed_shards_split_the_scenarios_between_them() {
    let mut seen: Vec<String> = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
            .current_dir(repo())
            .args(["run", "--engine", "mock", "--dialect", "tokenspeed", "--shard", shard])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let names: Vec<String> = stdout
            .lines()
            .filter(|l| l.starts_with("pass") || l.starts_with("skip"))
            .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
            .collect();
        assert!(!names.is_empty(), "shard {shard} ran nothing: {stdout}");
        assert!(names.iter().all(|n| !seen.contains(n)), "shard {shard} repeats a scenario: {stdout}");
        seen.extend(names);
    }
    let total = std::fs::read_dir(repo().join("golden/replay/tokenspeed"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(seen.len(), total, "{seen:?}");
}
