//! The `gpu-runner` binary end to end against the mock engine: the
//! committed scenarios pass, reports and records are written, shards and
//! the deadline apply, the mock runs as its own process, and features not
//! built yet say so with a non-zero exit. Every child process runs under a
//! timeout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gpu-runner")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the binary, killing it after `limit`.
fn run(args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + limit;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("gpu-runner {args:?} ran past {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn committed_scenarios_pass_against_the_mock_engine_with_reports() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let junit = dir.path().join("r.xml");
    let record = dir.path().join("rec");
    let out = run(
        &[
            "run",
            "--engine",
            "mock",
            "--report-json",
            json.to_str().unwrap(),
            "--report-junit",
            junit.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(j["engine"], "mock");
    assert_eq!(j["totals"]["failed"], 0);
    assert!(std::fs::read_to_string(&junit).unwrap().starts_with("<?xml"));
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record.join("greedy_determinism").join("results.json")).unwrap())
            .unwrap();
    assert_eq!(rec["requests"]["a"]["children"][0]["engine_tokens"].as_array().unwrap().len(), 8);
}

/// The recorded frame sets of one scenario directory, by message type.
fn recorded(dir: &Path) -> Vec<serde_json::Value> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().chars().next().unwrap().is_ascii_digit())
        .collect();
    files.sort();
    files.iter().map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()).collect()
}

#[test]
fn record_mode_writes_every_frame_set_in_the_golden_case_shape_without_a_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let scen = dir.path().join("scen");
    std::fs::create_dir(&scen).unwrap();
    for name in ["greedy_determinism", "utility_calls", "bad_prompt_too_long"] {
        std::fs::copy(repo().join(format!("golden/replay/{name}.json")), scen.join(format!("{name}.json"))).unwrap();
    }
    let record = dir.path().join("rec");
    let out = run(
        &["run", "--engine", "mock", "--scenarios", scen.to_str().unwrap(), "--record", record.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let handshake = recorded(&record.join("handshake"));
    let messages: Vec<&str> = handshake.iter().map(|c| c["message"].as_str().unwrap()).collect();
    for m in ["HandshakeHello", "HandshakeInit", "EngineCoreReadyResponse", "HandshakeReady"] {
        assert!(messages.contains(&m), "{messages:?}");
    }
    let greedy = recorded(&record.join("greedy_determinism"));
    let adds = greedy.iter().filter(|c| c["message"] == "EngineCoreRequest").count();
    let outputs = greedy.iter().filter(|c| c["message"] == "EngineCoreOutputs").count();
    assert_eq!(adds, 2);
    assert!(outputs >= 8, "{outputs} output batches");
    for c in handshake.iter().chain(&greedy) {
        for k in ["case", "dialect", "version", "kind", "doc", "provenance", "message", "frames", "volatile"] {
            assert!(c.get(k).is_some(), "{k} missing in {c}");
        }
        for k in ["expect", "value", "encode"] {
            assert!(c.get(k).is_none(), "{k} must come from vLLM's decoder, not the recorder: {c}");
        }
        assert_eq!(c["provenance"]["source"], "live-engine");
        assert_eq!(c["provenance"]["launcher"], "mock");
        assert_eq!(c["kind"], "message");
    }
    let add = greedy.iter().find(|c| c["message"] == "EngineCoreRequest").unwrap();
    assert_eq!(add["frames"][0], "00");
    assert_eq!(add["provenance"]["direction"], "gateway->engine");
    assert_eq!(add["volatile"], serde_json::json!(["EngineCoreRequest.arrival_time"]));
    let utility = recorded(&record.join("utility_calls"));
    assert!(utility.iter().any(|c| c["message"] == "UtilityRequest"));
    // The fresh engine's handshake and its death sentinel go with its scenario.
    let dead = recorded(&record.join("bad_prompt_too_long"));
    assert!(dead.iter().any(|c| c["message"] == "HandshakeHello"));
    assert!(dead.iter().any(|c| c["frames"] == serde_json::json!(["454e47494e455f434f52455f44454144"])));
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["engine"], "mock");
}

#[test]
fn a_shard_runs_only_its_share_of_the_scenarios() {
    let out = run(&["run", "--engine", "mock", "--shard", "2/4"], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let lines = stdout.lines().filter(|l| l.starts_with("pass") || l.starts_with("skip")).count();
    let total = std::fs::read_dir(repo().join("golden/replay"))
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json")))
        .count();
    assert!(lines < total && lines >= total / 4, "{lines} of {total}: {stdout}");
}

#[test]
fn a_failing_scenario_fails_the_run_unless_it_is_expected() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wrong.json"),
        r#"{"requests":[{"id":"r","request":{"prompt_token_ids":[1,2,3],"temperature":0.0,"max_tokens":2}}],
            "checks":[{"check":"num_tokens","request":"r","is":3}]}"#,
    )
    .unwrap();
    let scen = dir.path().to_str().unwrap();
    let out = run(&["run", "--engine", "mock", "--scenarios", scen], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("fail") && stdout.contains("client token count is 2, expected 3"), "{stdout}");
    let exp = dir.path().join("expected.txt");
    std::fs::write(&exp, "wrong the mock gives two tokens\n").unwrap();
    let out = run(
        &["run", "--engine", "mock", "--scenarios", scen, "--expectations", exp.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("0 passed, 0 failed, 1 expected failures"), "{stdout}");
}

#[test]
fn a_deadline_of_zero_skips_every_scenario() {
    let out = run(&["run", "--engine", "mock", "--deadline", "0"], Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("0 passed, 0 failed") && stdout.contains("--deadline reached"), "{stdout}");
}

/// A shard without `structured_outputs`, whose text checks an attached
/// engine (which may be a real one) runs and the mock, which applies no
/// constraint, fails.
#[test]
fn the_mock_engine_process_serves_an_attached_runner() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("tcp://127.0.0.1:{port}");
    let mut mock = Command::new(bin())
        .args(["mock-engine", "--handshake", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = run(
        &["run", "--engine", "attach", "--handshake", &addr, "--startup-timeout", "20", "--shard", "3/4"],
        Duration::from_secs(60),
    );
    let _ = mock.kill();
    let _ = mock.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[test]
fn an_engine_that_never_says_hello_fails_the_run_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.json");
    std::fs::write(&script, r#"{"fault": {"kind": "no_hello"}}"#).unwrap();
    // A listed scenario is not excused: it never ran.
    let expectations = dir.path().join("x.txt");
    std::fs::write(&expectations, "greedy_determinism a known finding\n").unwrap();
    let json = dir.path().join("r.json");
    let out = run(
        &[
            "run",
            "--engine",
            "mock",
            "--mock-script",
            script.to_str().unwrap(),
            "--startup-timeout",
            "1",
            "--expectations",
            expectations.to_str().unwrap(),
            "--report-json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no engine said HELLO"), "{stderr}");
    let report = std::fs::read_to_string(&json).expect("a report is written although the engine never came up");
    assert!(report.contains("the engine did not come up"), "{report}");
    let failed = failed_cases(&json);
    let greedy = failed.iter().find(|(n, _)| n == "greedy_determinism").expect("greedy_determinism fails");
    assert!(greedy.1.contains("listed as an expected failure, \"a known finding\", but it never ran"), "{greedy:?}");
}

/// The failed scenarios of a JSON report, with their details.
fn failed_cases(report: &Path) -> Vec<(String, String)> {
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    r["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["outcome"] == "fail")
        .map(|s| (s["scenario"].as_str().unwrap().to_string(), s["detail"].as_str().unwrap_or("").to_string()))
        .collect()
}

#[test]
fn attach_with_nothing_attaching_ends_within_the_deadline_with_a_report_and_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let junit = dir.path().join("r.xml");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t0 = Instant::now();
    let out = run(
        &[
            "run",
            "--engine",
            "attach",
            "--handshake",
            &format!("tcp://127.0.0.1:{port}"),
            "--deadline",
            "3",
            "--report-json",
            json.to_str().unwrap(),
            "--report-junit",
            junit.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?} with --deadline 3", t0.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no engine said HELLO"), "{stderr}");
    let failed = failed_cases(&json);
    assert!(!failed.is_empty(), "every scenario needing the engine fails");
    assert!(failed.iter().all(|(_, d)| d.contains("did not come up")), "{failed:?}");
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<failure"));
}

#[test]
fn an_engine_killed_mid_run_fails_the_run_with_a_report_naming_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let script = dir.path().join("slow.json");
    // One step every 200 ms: the 32-request scenario alone takes seconds.
    std::fs::write(&script, r#"{"fault": {"kind": "slow", "delay_ms": 200}}"#).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("tcp://127.0.0.1:{port}");
    let mut mock = Command::new(bin())
        .args(["mock-engine", "--handshake", &addr, "--script", script.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut runner = Command::new(bin())
        .args(["run", "--engine", "attach", "--handshake", &addr, "--startup-timeout", "20", "--deadline", "60"])
        .args(["--report-json", json.to_str().unwrap()])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let it get going, then kill the engine outright.
    std::thread::sleep(Duration::from_secs(4));
    mock.kill().unwrap();
    mock.wait().unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = runner.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = runner.kill();
            panic!("the runner did not end within 60 s of the engine's death");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = runner.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let failed = failed_cases(&json);
    assert!(!failed.is_empty());
    assert!(
        failed.iter().any(|(_, d)| d.contains("dead") || d.contains("dropped") || d.contains("exited")),
        "no failure names the engine's death: {failed:?}"
    );
}

#[test]
fn vllm_without_a_model_is_refused() {
    let out = run(&["run", "--engine", "vllm"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--engine vllm needs --model"));
}

#[test]
fn the_data_parallel_scenarios_pass_on_two_mock_ranks_and_say_why_they_do_not_apply_to_one() {
    let out = run(&["run", "--engine", "mock", "--data-parallel-size", "2"], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
    assert!(stderr.contains("engine 1 up"), "{stderr}");

    let dp = repo().join("golden/replay/dp");
    let out = run(&["run", "--engine", "mock", "--scenarios", dp.to_str().unwrap()], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("needs 2 engines behind the gateway (run with --data-parallel-size 2)"), "{stdout}");
    assert!(!stdout.contains("pass "), "{stdout}");
}

#[test]
fn a_differential_that_cannot_be_drawn_or_names_no_swept_field_is_refused_before_anything_starts() {
    let out = run(&["differential", "--field", "top_k", "--combinations", "3"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only 0 can be drawn"), "{out:?}");
    let out = run(&["differential", "--field", "no_such_field"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--field no_such_field: no probe sets it"), "{out:?}");
    let out = run(&["differential", "--reference", "smg"], Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected one of vLLM's frontends"), "{out:?}");
}

#[test]
fn the_committed_scoreboard_is_what_the_committed_reports_give() {
    // Read as it is written: the markdown is larger than a pipe's buffer,
    // which `run` only drains once the child has exited.
    let out = Command::new(bin())
        .args(["scoreboard", "--reports-dir", "golden/gateway/reports"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let committed = std::fs::read_to_string(repo().join("docs/reports/scoreboard.md")).unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout) == committed,
        "docs/reports/scoreboard.md is stale: gpu-runner scoreboard --reports-dir golden/gateway/reports > docs/reports/scoreboard.md \
         (gpu_runner/python/scoreboard.sh)"
    );
}
