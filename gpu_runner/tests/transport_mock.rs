//! The gateway transport against the mock engine, hermetically: tcp on
//! 127.0.0.1 with an ephemeral port for the handshake, ipc under a temp
//! directory for input and output. Every test runs under a deadline.

use std::time::Duration;

use engine_protocol::internal::{
    engine_core_request_value as engine_core_request, sampling_params_value as sampling_params,
};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::Value;
use gpu_runner::dialect::Vllm;
use gpu_runner::mock::tokens::generated_token;
use gpu_runner::mock::vllm_script::{Fault, Script};
use gpu_runner::mock::Engine as MockEngine;
use gpu_runner::transport::{
    ClientConfig, DeathCause, EngineClient, EngineState, RequestEvent, TapSocket, Tapped, TransportError,
};

mod support;
use support::{release, within, FINISH, READY};

struct Rig {
    gw: EngineClient,
    dir: tempfile::TempDir,
}

async fn rig(silence: Duration) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ClientConfig::new(release(), dir.path());
    cfg.silence = silence;
    cfg.utility_timeout = Duration::from_secs(5);
    let gw = EngineClient::bind(cfg).await.unwrap();
    Rig { gw, dir }
}

fn mock(rig: &Rig, script: Script) -> MockEngine<Vllm> {
    MockEngine::spawn(rig.gw.handshake_endpoint(), script)
}

fn request(id: &str, prompt: Vec<i64>, edit: impl FnOnce(&mut engine_protocol::StructValue)) -> Value {
    let mut sp = sampling_params(release());
    sp.set("temperature", Value::Float(0.0)).set("max_tokens", Value::Int(8)).set("output_kind", Value::Int(1));
    edit(&mut sp);
    engine_core_request(release(), id, prompt, sp, 1_700_000_000.25)
}

fn expected_tokens(prompt: &[i64], n: usize) -> Vec<i64> {
    (0..n).map(|i| generated_token(prompt, i, 512)).collect()
}

const PROMPT: [i64; 6] = [1, 345, 305, 463, 406, 4];

#[tokio::test]
async fn handshake_completes_and_a_greedy_request_streams_to_length() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let m = mock(&r, Script::new(release()));
        let facts = r.gw.wait_ready(1, READY).await.unwrap();
        assert_eq!((facts[0].index, facts[0].max_model_len, facts[0].vllm_version.as_str()), (0, 512, "0.32.0"));
        let s = r.gw.add(0, &request("r1", PROMPT.to_vec(), |_| {})).await.unwrap();
        let f = s.finish(FINISH).await.unwrap();
        assert_eq!(f.finish_reason, FinishReason::Length);
        assert_eq!(f.stop_reason, None);
        assert_eq!(f.token_ids, expected_tokens(&PROMPT, 8));
        assert_eq!(f.steps.len(), 8, "one output per step (DELTA)");
        assert_eq!(m.log().adds, vec!["r1"]);
        m.stop().await.unwrap();
        r.gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn ready_before_registration_is_accepted() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.ready_first = true;
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let f = r.gw.add(0, &request("r1", vec![1, 2, 3], |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        assert_eq!(f.token_ids.len(), 8);
    })
    .await;
}

#[tokio::test]
async fn the_same_greedy_request_twice_gives_identical_tokens() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        let a = r.gw.add(0, &request("a", PROMPT.to_vec(), |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        let b = r.gw.add(0, &request("b", PROMPT.to_vec(), |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        assert_eq!(a.token_ids, b.token_ids);
    })
    .await;
}

#[tokio::test]
async fn eos_token_stops_the_request_with_a_nil_stop_reason() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.tokens.insert("r".into(), vec![10, 11, 2, 12, 13]);
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let req = request("r", PROMPT.to_vec(), |sp| {
            sp.set("_eos_token_id", Value::Int(2));
        });
        let f = r.gw.add(0, &req).await.unwrap().finish(FINISH).await.unwrap();
        assert_eq!((f.finish_reason, f.stop_reason, f.token_ids), (FinishReason::Stop, None, vec![10, 11, 2]));
    })
    .await;
}

#[tokio::test]
async fn stop_token_id_stops_the_request_with_the_token_as_stop_reason() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.tokens.insert("r".into(), vec![10, 99, 12]);
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let req = request("r", PROMPT.to_vec(), |sp| {
            sp.set("stop_token_ids", Value::IntArray(vec![99]));
        });
        let f = r.gw.add(0, &req).await.unwrap().finish(FINISH).await.unwrap();
        assert_eq!(f.finish_reason, FinishReason::Stop);
        assert_eq!(f.stop_reason, Some(StopReason::TokenId(99)));
        assert_eq!(f.token_ids, vec![10, 99]);
    })
    .await;
}

#[tokio::test]
async fn abort_finishes_the_request_locally_and_reaches_the_engine() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.step_delay = Duration::from_millis(20);
        let m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let mut s =
            r.gw.add(
                0,
                &request("long", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(400));
                }),
            )
            .await
            .unwrap();
        assert!(matches!(s.next().await, Some(RequestEvent::Output(_))));
        r.gw.abort(0, &["long".to_string()]).await.unwrap();
        // Outputs already queued may come first; then the local abort.
        loop {
            match s.next().await {
                Some(RequestEvent::Output(step)) => assert!(step.finish_reason.is_none()),
                Some(RequestEvent::Aborted) => break,
                other => panic!("expected a local abort, got {other:?}"),
            }
        }
        assert_eq!(s.next().await, None, "nothing after the abort");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(m.log().aborts, vec!["long"]);
    })
    .await;
}

#[tokio::test]
async fn utility_call_returns_the_engines_result() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        let v = r.gw.utility(0, "get_supported_tasks", vec![]).await.unwrap();
        assert_eq!(v, Value::Array(vec![Value::Str("generate".into())]));
    })
    .await;
}

#[tokio::test]
async fn unknown_utility_method_is_a_failure_naming_the_method() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        let e = r.gw.utility(0, "no_such_method", vec![]).await.unwrap_err();
        assert!(matches!(&e, TransportError::Utility { method, .. } if method == "no_such_method"), "{e}");
        assert!(e.to_string().contains("'EngineCoreProc' object has no attribute 'no_such_method'"), "{e}");
    })
    .await;
}

#[tokio::test]
async fn thirty_two_concurrent_requests_are_demultiplexed_to_their_streams() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        let mut streams = Vec::new();
        for i in 0..32i64 {
            let prompt = vec![1, 100 + i, 200 + i];
            let s =
                r.gw.add(
                    0,
                    &request(&format!("c{i}"), prompt.clone(), |sp| {
                        sp.set("max_tokens", Value::Int(16));
                    }),
                )
                .await
                .unwrap();
            streams.push((prompt, s));
        }
        for (prompt, s) in streams {
            let f = s.finish(FINISH).await.unwrap();
            assert_eq!(f.token_ids, expected_tokens(&prompt, 16), "{}", f.request_id);
            assert_eq!(f.finish_reason, FinishReason::Length);
        }
        let st = r.gw.stats().await;
        assert_eq!((st.orphan_outputs, st.malformed_batches), (0, 0));
        assert!(st.batches < 32 * 16, "outputs of concurrent requests share batches ({} batches)", st.batches);
    })
    .await;
}

#[tokio::test]
async fn two_engines_are_addressed_by_identity_and_fail_independently() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut s0 = Script::new(release());
        s0.step_delay = Duration::from_millis(5);
        let mut s1 = Script::new(release());
        s1.engine_index = 1;
        s1.fault = Some(Fault::Crash { after_steps: 3 });
        let m0 = mock(&r, s0);
        let m1 = mock(&r, s1);
        let facts = r.gw.wait_ready(2, READY).await.unwrap();
        let mut idx: Vec<u16> = facts.iter().map(|f| f.index).collect();
        idx.sort();
        assert_eq!(idx, vec![0, 1]);
        let a =
            r.gw.add(
                0,
                &request("on0", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(40));
                }),
            )
            .await
            .unwrap();
        let b =
            r.gw.add(
                1,
                &request("on1", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(40));
                }),
            )
            .await
            .unwrap();
        let eb = b.finish(FINISH).await.unwrap_err();
        assert!(matches!(eb, TransportError::EngineDead { engine: 1, .. }), "{eb}");
        let fa = a.finish(FINISH).await.unwrap();
        assert_eq!(fa.token_ids.len(), 40);
        assert_eq!(m0.log().adds, vec!["on0"]);
        assert_eq!(m1.log().adds, vec!["on1"]);
    })
    .await;
}

#[tokio::test]
async fn engine_death_sentinel_fails_inflight_requests() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.fault = Some(Fault::DeathSentinel { after_steps: 2 });
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let s =
            r.gw.add(
                0,
                &request("r", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(100));
                }),
            )
            .await
            .unwrap();
        let e = s.finish(FINISH).await.unwrap_err();
        assert_eq!(e, TransportError::EngineDead { engine: 0, cause: DeathCause::Sentinel });
        assert_eq!(e.to_string(), "engine 0 is dead: engine sent ENGINE_CORE_DEAD");
        // Later requests are refused with the same cause.
        let again = r.gw.add(0, &request("r2", PROMPT.to_vec(), |_| {})).await.unwrap_err();
        assert!(matches!(again, TransportError::EngineDead { engine: 0, .. }), "{again}");
        assert!(matches!(r.gw.engines()[0].state, EngineState::Dead(DeathCause::Sentinel)));
    })
    .await;
}

#[tokio::test]
async fn engine_crash_mid_stream_fails_inflight_requests_as_a_dropped_connection() {
    within(async {
        let r = rig(Duration::from_secs(60)).await;
        let mut script = Script::new(release());
        script.fault = Some(Fault::Crash { after_steps: 3 });
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let mut s =
            r.gw.add(
                0,
                &request("r", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(100));
                }),
            )
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        let mut tokens = 0;
        let err = loop {
            match s.next().await {
                Some(RequestEvent::Output(st)) => tokens += st.new_token_ids.len(),
                Some(RequestEvent::Failed(e)) => break e,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(tokens, 3, "the outputs sent before the crash arrive first");
        assert!(
            matches!(
                err,
                TransportError::EngineDead {
                    engine: 0,
                    cause: DeathCause::OutputDisconnected | DeathCause::InputDisconnected
                }
            ),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "seen through the monitor, not the silence deadline");
    })
    .await;
}

#[tokio::test]
async fn slow_outputs_past_the_silence_deadline_fail_the_request() {
    within(async {
        let r = rig(Duration::from_millis(300)).await;
        let script = Script::from_json(r#"{"fault": {"kind": "slow", "delay_ms": 2000}}"#).unwrap();
        let m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let s = r.gw.add(0, &request("slow", PROMPT.to_vec(), |_| {})).await.unwrap();
        let e = s.finish(FINISH).await.unwrap_err();
        assert!(matches!(&e, TransportError::Silence { request_id, engine: 0, .. } if request_id == "slow"), "{e}");
        assert!(e.to_string().contains("silence deadline"), "{e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(m.log().aborts, vec!["slow"], "a silent request is aborted on the engine");
    })
    .await;
}

#[tokio::test]
async fn stalled_engine_fails_requests_at_the_silence_deadline() {
    within(async {
        let r = rig(Duration::from_millis(400)).await;
        let mut script = Script::new(release());
        script.fault = Some(Fault::Stall { after_steps: 2 });
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let mut s =
            r.gw.add(
                0,
                &request("r", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(50));
                }),
            )
            .await
            .unwrap();
        let mut outputs = 0;
        loop {
            match s.next().await {
                Some(RequestEvent::Output(_)) => outputs += 1,
                Some(RequestEvent::Failed(TransportError::Silence { .. })) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(outputs, 2);
    })
    .await;
}

#[tokio::test]
async fn malformed_batch_fails_inflight_requests_with_the_decode_error() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.fault = Some(Fault::MalformedBatch { after_steps: 2 });
        let m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let s =
            r.gw.add(
                0,
                &request("r", PROMPT.to_vec(), |sp| {
                    sp.set("max_tokens", Value::Int(50));
                }),
            )
            .await
            .unwrap();
        let e = s.finish(FINISH).await.unwrap_err();
        assert!(matches!(&e, TransportError::MalformedBatch { engine: 0, .. }), "{e}");
        assert!(e.to_string().starts_with("engine 0 sent a malformed output batch: "), "{e}");
        assert_eq!(r.gw.stats().await.malformed_batches, 1);
        // The engine stays usable; the failed request was aborted there.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(m.log().aborts, vec!["r"]);
        let f = r.gw.add(0, &request("after", PROMPT.to_vec(), |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        assert_eq!(f.token_ids.len(), 8);
    })
    .await;
}

#[tokio::test]
async fn engine_that_never_says_hello_times_out_the_handshake_with_a_clear_error() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.fault = Some(Fault::NoHello);
        let _m = mock(&r, script);
        let e = r.gw.wait_ready(1, Duration::from_millis(500)).await.unwrap_err();
        let TransportError::HandshakeTimeout { detail, .. } = &e else { panic!("{e}") };
        assert!(detail.starts_with("no engine said HELLO on tcp://127.0.0.1:"), "{detail}");
        let e = r.gw.add(0, &request("r", PROMPT.to_vec(), |_| {})).await.unwrap_err();
        assert_eq!(e, TransportError::UnknownEngine(0));
    })
    .await;
}

#[tokio::test]
async fn prompt_longer_than_max_model_len_kills_the_engine_as_vllm_does() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.max_model_len = 16;
        let _m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let s = r.gw.add(0, &request("long", vec![5; 17], |_| {})).await.unwrap();
        let e = s.finish(FINISH).await.unwrap_err();
        assert_eq!(e, TransportError::EngineDead { engine: 0, cause: DeathCause::Sentinel });
    })
    .await;
}

#[tokio::test]
async fn logprobs_arrive_inline_and_in_aux_frames() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        for (k, cols) in [(3i64, 4i64), (-1, 513)] {
            let req = request(&format!("lp{k}"), PROMPT.to_vec(), |sp| {
                sp.set("logprobs", Value::Int(k)).set("max_tokens", Value::Int(2));
            });
            let f = r.gw.add(0, &req).await.unwrap().finish(FINISH).await.unwrap();
            for step in &f.steps {
                let lp = step.output.struct_field("new_logprobs").expect("logprobs requested");
                let Some(Value::Tensor(ids)) = lp.get("logprob_token_ids") else { panic!("no ids tensor") };
                assert_eq!(ids.shape, vec![1, cols]);
                assert_eq!(i32::from_le_bytes(ids.data[..4].try_into().unwrap()) as i64, step.new_token_ids[0]);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn stale_ipc_socket_files_are_removed_before_binding() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        // A crashed gateway leaves its socket file behind.
        let stale = std::os::unix::net::UnixListener::bind(dir.path().join("in.sock")).unwrap();
        drop(stale);
        assert!(dir.path().join("in.sock").exists());
        let gw = EngineClient::bind(ClientConfig::new(release(), dir.path())).await.unwrap();
        gw.shutdown().await;
        assert!(!dir.path().join("in.sock").exists(), "shutdown removes the socket files");
    })
    .await;
}

#[tokio::test]
async fn a_regular_file_in_place_of_a_socket_is_not_deleted() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("in.sock"), b"precious").unwrap();
        let e = EngineClient::bind(ClientConfig::new(release(), dir.path())).await.err().expect("bind must fail");
        assert!(e.to_string().contains("exists and is not a socket"), "{e}");
        assert_eq!(std::fs::read(dir.path().join("in.sock")).unwrap(), b"precious");
    })
    .await;
}

#[tokio::test]
async fn shutdown_removes_the_output_socket_files_too() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        assert!(r.dir.path().join("out-0.sock").exists());
        m.stop().await.unwrap();
        r.gw.shutdown().await;
        assert!(!r.dir.path().join("out-0.sock").exists());
        assert!(!r.dir.path().join("in.sock").exists());
    })
    .await;
}

#[tokio::test]
async fn duplicate_request_ids_are_refused() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let _m = mock(&r, Script::from_json(r#"{"step_delay_ms": 50}"#).unwrap());
        r.gw.wait_ready(1, READY).await.unwrap();
        let _s = r.gw.add(0, &request("dup", PROMPT.to_vec(), |_| {})).await.unwrap();
        let e = r.gw.add(0, &request("dup", PROMPT.to_vec(), |_| {})).await.unwrap_err();
        assert_eq!(e, TransportError::DuplicateRequest("dup".into()));
    })
    .await;
}

#[tokio::test]
async fn the_tap_sees_every_frame_set_of_the_handshake_and_of_a_request() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Tapped>();
        let mut cfg = ClientConfig::new(release(), dir.path());
        cfg.tap = Some(tx);
        let gw = EngineClient::bind(cfg).await.unwrap();
        let _m = MockEngine::<Vllm>::spawn(gw.handshake_endpoint(), Script::new(release()));
        gw.wait_ready(1, READY).await.unwrap();
        let f = gw.add(0, &request("r", PROMPT.to_vec(), |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        let mut seen = Vec::new();
        while let Ok(t) = rx.try_recv() {
            seen.push((t.socket, t.from_engine, t.frames.len(), t.frames[0].first().copied()));
        }
        let count = |socket, from_engine| seen.iter().filter(|s| s.0 == socket && s.1 == from_engine).count();
        // HELLO and READY in, INIT out; the registration in; the ADD out
        // (type byte 00, then the payload); one batch per step in.
        assert_eq!(count(TapSocket::Handshake, true), 2, "{seen:?}");
        assert_eq!(count(TapSocket::Handshake, false), 1, "{seen:?}");
        assert_eq!(count(TapSocket::Input, true), 1, "{seen:?}");
        assert!(seen.contains(&(TapSocket::Input, false, 2, Some(0))), "{seen:?}");
        assert_eq!(count(TapSocket::Output, true), f.steps.len());
    })
    .await;
}

#[tokio::test]
async fn input_the_engine_cannot_decode_closes_its_input_and_the_gateway_reports_it_dead() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let m = mock(&r, Script::new(release()));
        r.gw.wait_ready(1, READY).await.unwrap();
        let mut s = r.gw.add_frames(0, "garbage", vec![vec![0x00], vec![0xc1]]).await.unwrap();
        match s.next().await {
            Some(RequestEvent::Failed(TransportError::EngineDead { cause: DeathCause::InputDisconnected, .. })) => {}
            other => panic!("expected the input connection to drop, got {other:?}"),
        }
        assert_eq!(m.log().decode_failures.len(), 1);
        let e = r.gw.add(0, &request("next", PROMPT.to_vec(), |_| {})).await.unwrap_err();
        assert!(e.to_string().contains("input connection dropped"), "{e}");
    })
    .await;
}

#[tokio::test]
async fn outputs_after_an_abort_are_timed_and_a_forgotten_request_is_not_aborted_on_the_engine() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let m = mock(&r, Script::from_json(r#"{"step_delay_ms": 20}"#).unwrap());
        r.gw.wait_ready(1, READY).await.unwrap();
        let long = |id: &str| {
            request(id, PROMPT.to_vec(), |sp| {
                sp.set("max_tokens", Value::Int(400));
            })
        };
        let mut a = r.gw.add(0, &long("a")).await.unwrap();
        assert!(matches!(a.next().await, Some(RequestEvent::Output(_))));
        r.gw.abort(0, &["a".to_string()]).await.unwrap();
        let mut f = r.gw.add(0, &long("f")).await.unwrap();
        assert!(matches!(f.next().await, Some(RequestEvent::Output(_))));
        r.gw.forget(&["f".to_string()]);
        loop {
            match f.next().await {
                Some(RequestEvent::Output(_)) => {}
                Some(RequestEvent::Aborted) => break,
                other => panic!("expected a local finish, got {other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        // The mock stopped `a` at once; it still runs `f`, whose outputs
        // are dropped, and was never told about it.
        let late = r.gw.late_outputs("a").await.expect("an ABORT was sent for a");
        assert!(late.len() <= 1, "{late:?}");
        assert_eq!(r.gw.late_outputs("f").await, None);
        assert_eq!(m.log().aborts, vec!["a"]);
        assert!(r.gw.stats().await.orphan_outputs >= 1);
    })
    .await;
}

#[test]
fn mock_scripts_with_unknown_faults_or_bad_types_are_rejected() {
    assert!(Script::from_json(r#"{"fault": {"kind": "meteor"}}"#)
        .unwrap_err()
        .to_string()
        .contains("unknown fault kind"));
    assert!(Script::from_json(r#"{"max_model_len": "big"}"#).unwrap_err().to_string().contains("max_model_len"));
    assert!(Script::from_json(r#"{"version": "9.9.9"}"#).unwrap_err().to_string().contains("no schema"));
    assert!(Script::from_json("[").is_err());
}

#[tokio::test]
async fn a_batch_naming_another_engine_than_its_connection_is_counted_and_reported() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut script = Script::new(release());
        script.batch_engine_index = Some(3);
        let m = mock(&r, script);
        r.gw.wait_ready(1, READY).await.unwrap();
        let s = r.gw.add(0, &request("r1", PROMPT.to_vec(), |_| {})).await.unwrap();
        // The outputs still reach the request: its id decides where they go.
        assert_eq!(s.finish(FINISH).await.unwrap().token_ids.len(), 8);
        let stats = r.gw.stats().await;
        assert_eq!(stats.engine_index_mismatches, 8, "{stats:?}");
        assert!(stats.protocol_errors[0].contains("engine 0: a batch on its output connection says engine_index 3"));
        assert!(stats.dp_control.is_empty());
        m.stop().await.unwrap();
        r.gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_request_to_idle_lockstep_ranks_wakes_the_others_with_start_dp_wave_once() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let ranks: Vec<_> = (0..2u16)
            .map(|i| {
                let mut s = Script::new(release());
                s.engine_index = i;
                s.data_parallel_size = 2;
                mock(&r, s)
            })
            .collect();
        r.gw.wait_ready(2, READY).await.unwrap();
        let a = r.gw.add(1, &request("a", PROMPT.to_vec(), |_| {})).await.unwrap();
        let b = r.gw.add(1, &request("b", PROMPT.to_vec(), |_| {})).await.unwrap();
        a.finish(FINISH).await.unwrap();
        b.finish(FINISH).await.unwrap();
        // Rank 0 got START_DP_WAVE [0, 1] (wave 0, rank 1 excluded), once:
        // the second request went into the running wave.
        let waves: Vec<Vec<Vec<u8>>> =
            ranks[0].log().inputs.into_iter().map(|i| i.frames).filter(|f| f[0] == [2]).collect();
        assert_eq!(waves, vec![vec![vec![2], vec![0x92, 0x00, 0x01]]]);
        assert!(ranks[1].log().inputs.iter().all(|i| i.frames[0] != [2]), "the rank with the request is not woken");
        assert_eq!(r.gw.stats().await.start_waves_sent, vec![(0, 0, Some(1))]);
        for m in ranks {
            m.stop().await.unwrap();
        }
        r.gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn independent_ranks_get_no_wave_messages() {
    within(async {
        let r = rig(Duration::from_secs(10)).await;
        let mut s1 = Script::new(release());
        s1.engine_index = 1;
        let m0 = mock(&r, Script::new(release()));
        let m1 = mock(&r, s1);
        r.gw.wait_ready(2, READY).await.unwrap();
        r.gw.add(1, &request("a", PROMPT.to_vec(), |_| {})).await.unwrap().finish(FINISH).await.unwrap();
        assert!(m0.log().inputs.iter().all(|i| i.frames[0] != [2]));
        assert!(r.gw.stats().await.start_waves_sent.is_empty());
        m0.stop().await.unwrap();
        m1.stop().await.unwrap();
        r.gw.shutdown().await;
    })
    .await;
}
