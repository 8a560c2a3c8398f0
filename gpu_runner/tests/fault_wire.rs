//! Our gateway-side transport (as `gpu-runner run` uses it) talking to the
//! mock engine through the fault-injecting wire, one test per fault kind:
//! the affected request ends with a typed error naming what the fault did
//! (or, for harmless faults, is served), nothing hangs (every test runs
//! under a deadline), and the next request is served while the connection
//! still exists.

use std::time::Duration;

use engine_protocol::internal::{
    engine_core_request_value as engine_core_request, sampling_params_value as sampling_params,
};
use engine_protocol::typed::FinishReason;
use engine_protocol::Value;
use gpu_runner::dialect::Vllm;
use gpu_runner::fault::{Direction, FaultWire, FrameKind, Schedule, Side, WireConfig, WireFault};
use gpu_runner::mock::tokens::generated_token;
use gpu_runner::mock::vllm_script::Script;
use gpu_runner::mock::Engine as MockEngine;
use gpu_runner::transport::{ClientConfig, DeathCause, EngineClient, TransportError};

mod support;
use support::{release, within, FINISH, READY};

const SILENCE: Duration = Duration::from_millis(800);

struct Rig {
    gw: EngineClient,
    wire: FaultWire,
    mock: MockEngine<Vllm>,
    _dir: tempfile::TempDir,
}

/// Gateway ↔ wire (with `schedule`) ↔ mock engine, the engine up.
async fn rig(schedule: Schedule) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = ClientConfig::new(release(), dir.path().join("gw"));
    cfg.silence = SILENCE;
    cfg.utility_timeout = Duration::from_secs(2);
    let gw = EngineClient::bind(cfg).await.unwrap();
    let wire = FaultWire::start(WireConfig {
        gateway_handshake: gw.handshake_endpoint().to_string(),
        ipc_dir: dir.path().join("wire"),
        release: release(),
        schedule,
        armed: true,
    })
    .await
    .unwrap();
    let mock = MockEngine::spawn(wire.handshake_endpoint(), Script::new(release()));
    gw.wait_ready(1, READY).await.unwrap();
    Rig { gw, wire, mock, _dir: dir }
}

fn request(id: &str, max_tokens: i64) -> Value {
    let mut sp = sampling_params(release());
    sp.set("temperature", Value::Float(0.0))
        .set("max_tokens", Value::Int(max_tokens))
        .set("output_kind", Value::Int(1));
    engine_core_request(release(), id, PROMPT.to_vec(), sp, 1_700_000_000.25)
}

const PROMPT: [i64; 6] = [1, 345, 305, 463, 406, 4];

fn expected_tokens(n: usize) -> Vec<i64> {
    (0..n).map(|i| generated_token(&PROMPT, i, 512)).collect()
}

/// Runs request `id` to its end.
async fn run(gw: &EngineClient, id: &str, max_tokens: i64) -> Result<gpu_runner::transport::Finished, TransportError> {
    gw.add(0, &request(id, max_tokens)).await?.finish(FINISH).await
}

/// The next request is served in full.
async fn next_is_served(gw: &EngineClient) {
    let f = run(gw, "next", 3).await.expect("the next request is served");
    assert_eq!((f.finish_reason, f.token_ids), (FinishReason::Length, expected_tokens(3)));
}

fn outputs(nth: u64, fault: WireFault) -> Schedule {
    Schedule::single(Direction::ToGateway, FrameKind::Outputs, Some(nth), fault)
}

#[tokio::test]
async fn a_wire_without_faults_forwards_every_message_untouched() {
    within(async {
        let r = rig(Schedule::none()).await;
        let f = run(&r.gw, "r1", 4).await.unwrap();
        assert_eq!(f.token_ids, expected_tokens(4));
        let log = r.wire.log();
        assert!(log.applied.is_empty());
        assert_eq!(log.inits_rewritten, 1);
        assert!(log.forwarded_to_engine >= 1 && log.forwarded_to_gateway >= 4, "{log:?}");
        assert!(log.problems.is_empty(), "{:?}", log.problems);
    })
    .await;
}

#[tokio::test]
async fn a_delayed_output_batch_arrives_late_and_the_request_still_finishes() {
    within(async {
        let r = rig(outputs(0, WireFault::Delay { ms: 400 })).await;
        let t0 = std::time::Instant::now();
        let f = run(&r.gw, "slow", 3).await.unwrap();
        assert!(t0.elapsed() >= Duration::from_millis(400), "{:?}", t0.elapsed());
        assert_eq!(f.token_ids, expected_tokens(3), "a delay keeps the order");
        let applied = r.wire.log().applied;
        assert_eq!(applied.len(), 1);
        assert_eq!((applied[0].entry, applied[0].direction, applied[0].index), (0, Direction::ToGateway, 0));
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_delay_past_the_silence_deadline_ends_the_request_with_a_silence_error_naming_it() {
    within(async {
        let r = rig(outputs(0, WireFault::Delay { ms: 2000 })).await;
        match run(&r.gw, "late", 3).await {
            Err(TransportError::Silence { request_id, engine: 0, .. }) => assert_eq!(request_id, "late"),
            other => panic!("expected a silence error, got {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        next_is_served(&r.gw).await;
        assert!(r.gw.stats().await.orphan_outputs >= 1, "the late outputs are counted, not taken");
    })
    .await;
}

#[tokio::test]
async fn a_dropped_add_ends_the_request_with_a_silence_error_naming_it() {
    within(async {
        let r = rig(Schedule::single(Direction::ToEngine, FrameKind::Add, Some(0), WireFault::Drop)).await;
        match run(&r.gw, "lost", 3).await {
            Err(TransportError::Silence { request_id, .. }) => assert_eq!(request_id, "lost"),
            other => panic!("expected a silence error, got {other:?}"),
        }
        assert_eq!(r.wire.log().applied[0].kind, FrameKind::Add);
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_dropped_finishing_batch_ends_the_request_with_a_silence_error_naming_it() {
    within(async {
        // Two tokens, one batch each (DELTA): the second carries the finish.
        let r = rig(outputs(1, WireFault::Drop)).await;
        match run(&r.gw, "unfinished", 2).await {
            Err(TransportError::Silence { request_id, .. }) => assert_eq!(request_id, "unfinished"),
            other => panic!("expected a silence error, got {other:?}"),
        }
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_duplicated_finishing_batch_finishes_once_and_the_copy_is_counted_as_an_orphan() {
    within(async {
        let r = rig(outputs(1, WireFault::Duplicate)).await;
        let f = run(&r.gw, "twice", 2).await.unwrap();
        assert_eq!(f.token_ids, expected_tokens(2));
        next_is_served(&r.gw).await;
        assert_eq!(r.gw.stats().await.orphan_outputs, 1);
    })
    .await;
}

#[tokio::test]
async fn a_duplicated_add_runs_twice_in_the_engine_and_the_request_takes_both_copies_tokens() {
    within(async {
        // The two runs carry one request id: the transport cannot tell them
        // apart, so the request holds more tokens than max_tokens (the
        // checkers' token and length checks see it).
        let r = rig(Schedule::single(Direction::ToEngine, FrameKind::Add, Some(0), WireFault::Duplicate)).await;
        let f = run(&r.gw, "dup", 2).await.unwrap();
        assert!(f.token_ids.len() > 2, "{:?}", f.token_ids);
        assert!(f.token_ids.iter().all(|t| expected_tokens(2).contains(t)), "{:?}", f.token_ids);
        assert_eq!(r.mock.log().adds, vec!["dup", "dup"]);
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_reordered_finishing_batch_ends_the_request_short_and_the_late_batch_is_an_orphan() {
    within(async {
        // Batch 0 (token 0) is set aside; batch 1 (token 1 and the finish)
        // passes it: the transport cannot tell, the request finishes with
        // token 1 alone (a checker comparing tokens sees it) and batch 0
        // arrives for a finished request.
        let r = rig(outputs(0, WireFault::Reorder { hold_ms: 1000 })).await;
        let f = run(&r.gw, "swapped", 2).await.unwrap();
        assert_eq!(f.token_ids, expected_tokens(2)[1..].to_vec());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(r.gw.stats().await.orphan_outputs, 1);
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_reordered_add_is_passed_by_the_next_and_both_are_served() {
    within(async {
        let r =
            rig(Schedule::single(Direction::ToEngine, FrameKind::Add, Some(0), WireFault::Reorder { hold_ms: 5000 }))
                .await;
        let a = r.gw.add(0, &request("first", 2)).await.unwrap();
        let b = r.gw.add(0, &request("second", 2)).await.unwrap();
        let (a, b) = (a.finish(FINISH).await.unwrap(), b.finish(FINISH).await.unwrap());
        assert_eq!((a.token_ids.len(), b.token_ids.len()), (2, 2));
        assert_eq!(r.mock.log().adds, vec!["second", "first"]);
    })
    .await;
}

#[tokio::test]
async fn a_truncated_output_batch_fails_the_request_with_a_malformed_batch_error() {
    within(async {
        let r = rig(outputs(0, WireFault::Truncate { frame: 0, keep: 5 })).await;
        match run(&r.gw, "cut-short", 3).await {
            Err(TransportError::MalformedBatch { engine: 0, detail }) => assert!(!detail.is_empty()),
            other => panic!("expected a malformed batch, got {other:?}"),
        }
        assert_eq!(r.gw.stats().await.malformed_batches, 1);
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_corrupted_output_batch_fails_the_request_with_a_malformed_batch_error() {
    within(async {
        // Flipping the first byte turns the batch's array header (0x9N)
        // into a negative fixint: the batch cannot decode.
        let r = rig(outputs(0, WireFault::Corrupt { frame: 0, bytes: 1, offset: Some(0) })).await;
        match run(&r.gw, "garbled", 3).await {
            Err(TransportError::MalformedBatch { engine: 0, .. }) => {}
            other => panic!("expected a malformed batch, got {other:?}"),
        }
        let applied = r.wire.log().applied;
        assert!(applied[0].detail.contains("1 bytes of frame 0"), "{}", applied[0].detail);
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_truncated_add_makes_the_engine_drop_its_input_and_the_request_fails_with_engine_dead() {
    within(async {
        // vLLM's input thread ends on an ADD it cannot decode, closing its
        // input socket (the mock does the same); the wire passes the drop on.
        let r = rig(Schedule::single(
            Direction::ToEngine,
            FrameKind::Add,
            Some(0),
            WireFault::Truncate { frame: 1, keep: 4 },
        ))
        .await;
        match run(&r.gw, "mangled", 3).await {
            Err(TransportError::EngineDead { engine: 0, cause: DeathCause::InputDisconnected }) => {}
            other => panic!("expected engine dead (input dropped), got {other:?}"),
        }
        assert_eq!(r.mock.log().decode_failures.len(), 1);
        assert_eq!(r.wire.log().events.len(), 1, "{:?}", r.wire.log());
        match run(&r.gw, "after", 2).await {
            Err(TransportError::EngineDead { engine: 0, .. }) => {}
            other => panic!("the connection is gone: expected engine dead, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_cut_to_the_gateway_fails_the_request_and_the_next_with_engine_dead() {
    within(async {
        let r = rig(outputs(1, WireFault::Cut { side: Side::Gateway })).await;
        match run(&r.gw, "severed", 4).await {
            Err(TransportError::EngineDead { engine: 0, cause }) => {
                assert!(matches!(cause, DeathCause::InputDisconnected | DeathCause::OutputDisconnected), "{cause:?}")
            }
            other => panic!("expected engine dead, got {other:?}"),
        }
        match run(&r.gw, "after", 2).await {
            Err(TransportError::EngineDead { engine: 0, .. }) => {}
            other => panic!("the connection is gone: expected engine dead, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_cut_to_the_engine_leaves_the_gateway_a_silence_error_naming_the_request() {
    within(async {
        let r = rig(outputs(1, WireFault::Cut { side: Side::Engine })).await;
        match run(&r.gw, "stranded", 4).await {
            Err(TransportError::Silence { request_id, .. }) => assert_eq!(request_id, "stranded"),
            other => panic!("expected a silence error, got {other:?}"),
        }
        assert!(r.wire.log().lost_after_cut <= 1);
    })
    .await;
}

#[tokio::test]
async fn a_rewritten_add_reaches_the_engine_with_the_planted_value_and_the_gateway_sees_its_effect() {
    use gpu_runner::fault::{Replacement, Rewrite};
    within(async {
        let rw = Rewrite { path: "sampling_params.max_tokens".into(), to: Replacement::Other };
        let r = rig(Schedule::single(Direction::ToEngine, FrameKind::Add, Some(0), WireFault::Rewrite(rw))).await;
        // max_tokens 4 arrives as 5: the engine generates one token more.
        let f = run(&r.gw, "r1", 4).await.unwrap();
        assert_eq!(f.token_ids, expected_tokens(5));
        let log = r.wire.log();
        assert_eq!(log.rewritten, 1);
        assert_eq!(log.applied[0].detail, "sampling_params.max_tokens: 1 set to other");
        next_is_served(&r.gw).await;
    })
    .await;
}

#[tokio::test]
async fn a_wire_rearmed_rewrites_from_the_next_message_and_keeps_the_outputs_as_the_engine_sent_them() {
    use gpu_runner::fault::{Replacement, Rewrite};
    within(async {
        let r = rig(Schedule::none()).await;
        r.wire.keep_outputs(true);
        let rw = Rewrite { path: "outputs.*.finish_reason".into(), to: Replacement::Other };
        r.wire.rearm(Schedule::single(Direction::ToGateway, FrameKind::Outputs, None, WireFault::Rewrite(rw)));
        // Every output gets a finish reason: the request ends at its first token.
        let f = run(&r.gw, "r1", 4).await.unwrap();
        assert_eq!(f.token_ids, expected_tokens(1));
        assert_ne!(f.finish_reason, FinishReason::Length);
        let kept = r.wire.take_outputs();
        assert!(!kept.is_empty() && r.wire.take_outputs().is_empty(), "taken once");
        // As the engine sent it: no finish reason on the first output.
        let d = engine_protocol::decode_message(
            release(),
            engine_protocol::MessageKind::EngineCoreOutputs,
            &kept[0],
            &engine_protocol::Limits::default(),
        )
        .unwrap();
        let view = engine_protocol::view::any_view(&d.value);
        assert_eq!(view["outputs"][0]["finish_reason"], serde_json::Value::Null, "{view}");
        r.wire.rearm(Schedule::none());
        next_is_served(&r.gw).await;
    })
    .await;
}
