//! The gateway transport against engines that misbehave on purpose: a fake
//! engine written here does the handshake as vLLM's does (HELLO, INIT,
//! registration, READY; docs/runner/transport.md "Transport") and then floods outputs
//! for request ids the gateway never sent, or keeps sending after its
//! `ENGINE_CORE_DEAD`; the mock engine answers with a huge or malformed
//! registration. Each ends in a typed error naming the engine and the limit,
//! within a deadline, with what the transport holds bounded
//! (docs/limits.md "Limits on the suite's peers").

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use engine_protocol::typed::{EngineCoreOutput, EngineCoreOutputs};
use engine_protocol::{engine_identity, ReleaseSchema, ENGINE_CORE_DEAD};
use gpu_runner::dialect::Vllm;
use gpu_runner::mock::retarget;
use gpu_runner::mock::vllm_script::Script;
use gpu_runner::mock::Engine as MockEngine;
use gpu_runner::transport::guard::GuardedSocket;
use gpu_runner::transport::handshake::{self, Announce, HandshakeError, MAX_HANDSHAKE_FRAME_BYTES};
use gpu_runner::transport::{
    ClientConfig, DeathCause, EngineClient, EngineState, TransportError, INBOUND_QUEUE, MAX_MESSAGES_AFTER_DEATH,
    ORPHAN_IDS_REMEMBERED,
};
use zeromq::util::PeerIdentity;
use zeromq::{DealerSocket, PushSocket, Socket, SocketOptions, SocketRecv, SocketSend, ZmqMessage};

const TEST_DEADLINE: Duration = Duration::from_secs(60);
const READY: Duration = Duration::from_secs(10);

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

async fn within<F: Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_DEADLINE, f).await.expect("test ran past its deadline");
}

fn message(frames: Vec<Vec<u8>>) -> ZmqMessage {
    ZmqMessage::try_from(frames.into_iter().map(Bytes::from).collect::<Vec<_>>()).unwrap()
}

fn dealer() -> DealerSocket {
    let mut opts = SocketOptions::default();
    opts.peer_identity(PeerIdentity::try_from(engine_identity(0).to_vec()).unwrap());
    DealerSocket::with_options(opts)
}

/// A fake engine 0 that has registered: its output PUSH, and the sockets
/// that must stay open for the gateway to see it alive.
struct Registered {
    output: PushSocket,
    _input: DealerSocket,
    _hs: DealerSocket,
}

async fn register(handshake_endpoint: &str) -> Registered {
    let r = release();
    let mut hs = dealer();
    hs.connect(handshake_endpoint).await.unwrap();
    hs.send(message(vec![handshake::encode_status(r, "HELLO", false, true)])).await.unwrap();
    let init = hs.recv().await.unwrap().into_vec();
    let addrs = handshake::decode_init(r, &init[0]).unwrap();
    let mut input = dealer();
    input.connect(&addrs.inputs[0]).await.unwrap();
    let mut output = PushSocket::new();
    output.connect(&addrs.outputs[0]).await.unwrap();
    let announce = Announce {
        index: 0,
        max_model_len: 256,
        vllm_version: r.version.to_string(),
        max_num_seqs: 64,
        data_parallel_size: 1,
    };
    input.send(message(vec![retarget::registration(r, &announce).unwrap()])).await.unwrap();
    hs.send(message(vec![handshake::encode_status(r, "READY", false, true)])).await.unwrap();
    Registered { output, _input: input, _hs: hs }
}

/// One output batch of `n` one-token outputs for ids `first..first+n` that
/// the gateway never sent.
fn unknown_outputs(first: usize, n: usize) -> Vec<Vec<u8>> {
    let outputs = (first..first + n)
        .map(|i| EngineCoreOutput {
            request_id: format!("never-sent-{i}"),
            new_token_ids: vec![7].into(),
            ..EngineCoreOutput::default()
        })
        .collect();
    let batch = EngineCoreOutputs { outputs, timestamp: 1.0, ..EngineCoreOutputs::default() };
    retarget::encode_outputs(&batch, release()).unwrap()
}

fn resident_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}

async fn bind(dir: &tempfile::TempDir, flood_limit: u64) -> EngineClient {
    let mut cfg = ClientConfig::new(release(), dir.path());
    cfg.orphan_flood_limit = flood_limit;
    EngineClient::bind(cfg).await.unwrap()
}

async fn wait_dead(gw: &EngineClient) -> DeathCause {
    loop {
        if let EngineState::Dead(c) = &gw.engines()[0].state {
            return c.clone();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_engine_flooding_outputs_for_unknown_ids_is_ended_with_a_typed_error_and_bounded_memory() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let gw = bind(&dir, 50_000).await;
        let mut engine = register(gw.handshake_endpoint()).await;
        gw.wait_ready(1, READY).await.unwrap();
        let before = resident_kib();
        // 200 000 outputs for distinct ids never sent, 500 a batch: four
        // times the flood limit.
        let flood = tokio::spawn(async move {
            for b in 0..400 {
                if engine.output.send(message(unknown_outputs(b * 500, 500))).await.is_err() {
                    break;
                }
            }
            engine
        });
        let cause = tokio::time::timeout(Duration::from_secs(30), wait_dead(&gw)).await.expect("ended in time");
        assert_eq!(cause, DeathCause::OrphanFlood { limit: 50_000 });
        assert_eq!(cause.to_string(), "engine sent more than 50000 outputs for request ids the gateway does not know");
        let _engine = flood.await.unwrap();
        let stats = gw.stats().await;
        assert!(stats.orphan_ids_remembered <= ORPHAN_IDS_REMEMBERED, "{}", stats.orphan_ids_remembered);
        let grown = resident_kib().saturating_sub(before);
        eprintln!(
            "flood: {} orphan outputs counted, {} ids remembered, {} dropped after death, resident memory +{grown} KiB",
            stats.orphan_outputs, stats.orphan_ids_remembered, stats.dropped_after_death
        );
        assert!(grown < 64 * 1024, "the flood grew resident memory by {grown} KiB");
        // A request to the flooding engine is refused with the cause.
        let refused = gw.add_frames(0, "r", vec![vec![0x90]]).await.unwrap_err();
        assert!(matches!(refused, TransportError::EngineDead { engine: 0, cause: DeathCause::OrphanFlood { .. } }));
        gw.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn outputs_after_the_death_sentinel_are_dropped_undecoded_and_bounded() {
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let gw = bind(&dir, u64::MAX).await;
        let mut engine = register(gw.handshake_endpoint()).await;
        gw.wait_ready(1, READY).await.unwrap();
        engine.output.send(message(vec![ENGINE_CORE_DEAD.to_vec()])).await.unwrap();
        assert_eq!(wait_dead(&gw).await, DeathCause::Sentinel);
        // Far more than the gateway reads from a dead engine; the sends may
        // stop once it closes the engine's output socket.
        let flood = tokio::spawn(async move {
            for b in 0..(2 * MAX_MESSAGES_AFTER_DEATH as usize) {
                let sent =
                    tokio::time::timeout(Duration::from_secs(2), engine.output.send(message(unknown_outputs(b, 1))));
                if !matches!(sent.await, Ok(Ok(()))) {
                    break;
                }
            }
        });
        let _ = flood.await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stats = gw.stats().await;
        assert!(stats.dropped_after_death >= 1, "nothing after the sentinel reached the gateway");
        // The socket is closed at the limit; what its loop had already
        // queued for the gateway (at most INBOUND_QUEUE) is dropped too.
        let bound = MAX_MESSAGES_AFTER_DEATH + INBOUND_QUEUE as u64;
        assert!(stats.dropped_after_death <= bound, "{} past {bound}", stats.dropped_after_death);
        assert_eq!(stats.orphan_outputs, 0, "outputs after the death were decoded");
        assert_eq!(stats.orphan_ids_remembered, 0);
        assert!(matches!(gw.engines()[0].state, EngineState::Dead(DeathCause::Sentinel)), "the first cause stays");
        gw.shutdown().await;
    })
    .await;
}

async fn start_with_registration(registration: Vec<u8>) -> TransportError {
    let dir = tempfile::tempdir().unwrap();
    let gw = bind(&dir, u64::MAX).await;
    let mut script = Script::new(release());
    script.registration = Some(registration);
    let _m: MockEngine<Vllm> = MockEngine::spawn(gw.handshake_endpoint(), script);
    let e = gw.wait_ready(1, READY).await.unwrap_err();
    gw.shutdown().await;
    e
}

fn bad_registration(e: TransportError) -> HandshakeError {
    match e {
        TransportError::EngineDead { engine: 0, cause: DeathCause::BadRegistration(h) } => h,
        other => panic!("expected a bad registration of engine 0, got {other}"),
    }
}

#[tokio::test]
async fn a_registration_past_the_handshake_frame_limit_ends_start_up_naming_the_limit() {
    within(async {
        // The input socket's guard refuses the frame by its header, at the
        // handshake frame limit, before the decoder (which would refuse it
        // with `HandshakeError::TooLarge`) sees it (docs/limits.md).
        let huge = vec![0xc0; MAX_HANDSHAKE_FRAME_BYTES + 1];
        let e = start_with_registration(huge).await;
        let limit = MAX_HANDSHAKE_FRAME_BYTES as u64;
        let cause = DeathCause::FrameTooLarge { socket: GuardedSocket::Input, declared: limit + 1, limit };
        assert_eq!(e, TransportError::EngineDead { engine: 0, cause });
    })
    .await;
}

#[tokio::test]
async fn malformed_registrations_end_start_up_with_the_decoder_error() {
    within(async {
        // Not MessagePack; a map where the struct's array goes; an array
        // declaring four billion fields in five bytes; a string declaring
        // four gigabytes.
        for bytes in [
            b"not msgpack".to_vec(),
            vec![0x81, 0xa1, b'x', 0x01],
            vec![0xdd, 0xff, 0xff, 0xff, 0xff],
            vec![0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
        ] {
            let h = bad_registration(start_with_registration(bytes.clone()).await);
            assert!(matches!(h, HandshakeError::Undecodable { .. }), "{bytes:02x?}: {h}");
        }
    })
    .await;
}
