//! The soak (docs/soak.md): a short one passes with every request
//! accounted for; an engine that drops or duplicates a finish fails it; the
//! lean mock keeps no per-request records.

use std::time::Duration;

use gpu_runner::mock::vllm_script::Script;
use gpu_runner::mock::Engine;
use gpu_runner::soak::{self, SoakFailure, SoakOptions};
use gpu_runner::transport::{ClientConfig, EngineClient};

fn options(seconds: u64) -> SoakOptions {
    let mut o = SoakOptions::new(env!("CARGO_BIN_EXE_gpu-runner"), Duration::from_secs(seconds));
    o.concurrency = 8;
    o.max_tokens = 16;
    o.sample_every = Duration::from_millis(500);
    o.silence = Duration::from_secs(2);
    o
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

#[test]
fn a_short_soak_passes_with_every_request_accounted_for() {
    let r = runtime().block_on(soak::run(&options(3))).expect("the soak runs");
    assert!(r.passed, "{}", soak::summary(&r));
    assert!(r.requests_finished > 100, "{}", soak::summary(&r));
    assert_eq!(r.requests_accounted, r.requests_sent);
    assert_eq!(r.outputs, r.requests_finished * 16);
    assert_eq!(r.orphan_outputs, 0);
    assert!(r.end.runner.rss_kib > 0 && r.end.engine.rss_kib > 0 && r.end.engine.fds > 0);
    assert_ne!(r.runner_pid, r.engine_pid);
}

#[test]
fn a_dropped_finish_fails_the_soak_as_a_lost_request() {
    let mut o = options(2);
    o.engine_fault = Some(serde_json::json!({"kind": "drop_finish", "nth": 5}));
    let r = runtime().block_on(soak::run(&o)).expect("the soak runs");
    assert!(!r.passed);
    let lost: Vec<_> = r.failures.iter().filter(|f| matches!(f, SoakFailure::Lost { .. })).collect();
    assert_eq!(lost.len(), 1, "{}", soak::summary(&r));
    assert_eq!(r.requests_accounted + 1, r.requests_sent, "{}", soak::summary(&r));
}

#[test]
fn a_duplicated_finish_fails_the_soak() {
    let mut o = options(2);
    o.engine_fault = Some(serde_json::json!({"kind": "duplicate_finish", "nth": 5}));
    let r = runtime().block_on(soak::run(&o)).expect("the soak runs");
    assert!(!r.passed);
    assert!(r.failures.contains(&SoakFailure::Duplicated { count: 1 }), "{}", soak::summary(&r));
    assert_eq!(r.requests_accounted, r.requests_sent, "every request still finished once for the gateway");
}

#[test]
fn the_lean_mock_keeps_counters_not_records_after_ten_thousand_requests() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("a temp dir");
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").expect("0.32.0");
        let gw = EngineClient::bind(ClientConfig::new(release, dir.path())).await.expect("bind");
        let mut script =
            Script::from_json(r#"{"lean": true, "step_delay_ms": 0, "max_num_seqs": 256}"#).expect("script");
        assert!(script.lean);
        script.max_model_len = 64;
        let engine: Engine<gpu_runner::dialect::Vllm> = Engine::spawn(gw.handshake_endpoint(), script);
        gw.wait_ready(1, Duration::from_secs(10)).await.expect("ready");
        let mut sp = engine_protocol::internal::sampling_params_value(release);
        sp.set("max_tokens", engine_protocol::Value::Int(2))
            .set("ignore_eos", engine_protocol::Value::Bool(true))
            .set("temperature", engine_protocol::Value::Float(0.0));
        let n = 10_000;
        for chunk in 0..n / 100 {
            let mut streams = Vec::new();
            for i in 0..100 {
                let id = format!("lean-{chunk}-{i}");
                let req =
                    engine_protocol::internal::engine_core_request_value(release, id, vec![1, 2, 3], sp.clone(), 1.0);
                streams.push(gw.add(0, &req).await.expect("add"));
            }
            for s in streams {
                s.finish(Duration::from_secs(10)).await.expect("finishes");
            }
        }
        let log = engine.log();
        assert_eq!((log.counts.adds, log.counts.finished, log.counts.outputs), (n, n, 2 * n));
        assert!(log.counts.bytes_in > 0 && log.counts.bytes_out > 0);
        assert!(log.inputs.is_empty() && log.adds.is_empty() && log.finished.is_empty(), "no per-request records");
        assert_eq!(log.inputs.capacity() + log.adds.capacity() + log.finished.capacity(), 0);
        gw.shutdown().await;
        engine.stop().await.expect("stops");
    });
}

#[test]
fn the_full_mock_still_records_every_input_and_finish() {
    runtime().block_on(async {
        let dir = tempfile::tempdir().expect("a temp dir");
        let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").expect("0.32.0");
        let gw = EngineClient::bind(ClientConfig::new(release, dir.path())).await.expect("bind");
        let script = Script::from_json(r#"{"step_delay_ms": 0}"#).expect("script");
        assert!(!script.lean);
        let engine: Engine<gpu_runner::dialect::Vllm> = Engine::spawn(gw.handshake_endpoint(), script);
        gw.wait_ready(1, Duration::from_secs(10)).await.expect("ready");
        let mut sp = engine_protocol::internal::sampling_params_value(release);
        sp.set("max_tokens", engine_protocol::Value::Int(3)).set("ignore_eos", engine_protocol::Value::Bool(true));
        for i in 0..5 {
            let req = engine_protocol::internal::engine_core_request_value(
                release,
                format!("full-{i}"),
                vec![1, 2],
                sp.clone(),
                1.0,
            );
            gw.add(0, &req).await.expect("add").finish(Duration::from_secs(10)).await.expect("finishes");
        }
        let log = engine.log();
        assert_eq!((log.inputs.len(), log.adds.len(), log.finished.len()), (5, 5, 5));
        assert_eq!(log.counts.adds, 5);
        gw.shutdown().await;
        engine.stop().await.expect("stops");
    });
}
