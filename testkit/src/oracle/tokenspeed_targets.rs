//! The TokenSpeed targets (`tokenspeed_*`): the checks of the vLLM targets
//! on the messages of both TokenSpeed versions (0.1.1 and the 08-03 wire,
//! `git-57b49061`), plus their frame rules (docs/tokenspeed-wire.md §2) and
//! the prefix rule between them (§12).

use engine_protocol::schema::tokenspeed;
use engine_protocol::{decode_message, Limits, MessageKind, Outcome, RejectClass, ReleaseSchema, Value};

use super::invariants::check_tree;
use super::{message, outcome_of, payload, refs, same_value, Probe, DEFAULT_TREE_DEPTH, TOKENSPEED_SAMPLING_PARAMS};
use crate::split::split;

/// TokenSpeed 0.1.1, the newest TokenSpeed table.
fn ts() -> &'static ReleaseSchema {
    &tokenspeed::V0_1_1
}

/// Every TokenSpeed table, oldest first: the TokenSpeed targets run each
/// input through all of them.
static TOKENSPEED_RELEASES: [&ReleaseSchema; 2] = [&tokenspeed::GIT_57B49061, &tokenspeed::V0_1_1];

/// `[type byte, payload, aux...]` as one fuzz input: a TokenSpeed ADD
/// (`TokenizedGenerateReqInput`, its `SamplingParams`, multimodal tensors in
/// aux frames), decoded and judged by the receive path as `decode_message`
/// does, with the checks of [`message`] and the frame rules of
/// [`tokenspeed_frame_rules`]. The same frames, asked for as a message
/// TokenSpeed does not have (utility, wave), are class `frames`.
pub fn tokenspeed_request<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    let frames = refs(&owned);
    tokenspeed_frame_rules(p, MessageKind::EngineCoreRequest, &frames);
    for kind in [MessageKind::UtilityRequest, MessageKind::StartDpWave, MessageKind::UtilityOutput] {
        let r = decode_message(ts(), kind, &frames, &Limits::default());
        assert_eq!(outcome_of(&r), Outcome::Reject(RejectClass::Frames), "tokenspeed has no {}", kind.name());
    }
}

/// One payload decoded as a bare TokenSpeed `SamplingParams` (untagged,
/// positional, every field defaulted).
pub fn tokenspeed_sampling_params<P: Probe>(data: &[u8], p: &mut P) {
    payload(p, "SamplingParams", &TOKENSPEED_SAMPLING_PARAMS, &[data]);
}

/// `[type byte, payload, aux...]`: a TokenSpeed ABORT (a list of request
/// ids), with the checks of [`message`] and [`tokenspeed_frame_rules`].
pub fn tokenspeed_abort<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    tokenspeed_frame_rules(p, MessageKind::AbortRequest, &refs(&owned));
}

/// `[payload, aux...]`: a TokenSpeed output batch (`BatchTokenIDOutSlim`),
/// with the checks of [`message`] and [`tokenspeed_frame_rules`], and the
/// direct batch decoder against the typed API (both versions, the default
/// limits and tight ones: depth 3, 1 frame, 256-byte frames):
/// - whenever the direct path (`internal::decode_batch_direct`)
///   reads a batch itself, the typed API (`typed::tokenspeed::decode_typed`)
///   accepts it without drift and builds the same struct (NaN equal to
///   itself);
/// - `decode_batch`, the direct path with its hand-over, has the typed
///   API's result: the same struct and drift, or the same error.
///
/// The direct decode gets the allocation bound.
pub fn tokenspeed_outputs<P: Probe>(data: &[u8], p: &mut P) {
    use engine_protocol::hot::tokenspeed::decode_batch;
    use engine_protocol::internal::decode_batch_direct;
    use engine_protocol::typed::tokenspeed::{decode_typed, BatchTokenIDOutSlim};
    let owned = split(data);
    let frames = refs(&owned);
    tokenspeed_frame_rules(p, MessageKind::EngineCoreOutputs, &frames);
    let limits = [
        Limits::default(),
        Limits { max_depth: 3, ..Limits::default() },
        Limits { max_frames: 1, ..Limits::default() },
        Limits { max_frame_bytes: 256, ..Limits::default() },
    ];
    for release in TOKENSPEED_RELEASES {
        for limits in &limits {
            let v = release.version;
            let reference = decode_typed::<BatchTokenIDOutSlim>(release, &frames, limits);
            // Outcome, drift or error: the struct itself is compared below
            // only where the direct path built it (a drifting struct may
            // nest too deep for Debug).
            let brief = |r: &Result<(BatchTokenIDOutSlim, Vec<String>), engine_protocol::Error>| match r {
                Ok((_, drift)) => Ok(drift.clone()),
                Err(e) => Err(e.clone()),
            };
            let combined = decode_batch(release, &frames, limits);
            assert_eq!(brief(&combined), brief(&reference), "({v} {limits:?})");
            if let Some(d) = p.decode(&frames, || decode_batch_direct(release, &frames, limits)) {
                match &reference {
                    Ok((r, drift)) => {
                        assert!(drift.is_empty(), "the direct path read a batch with drift ({v} {limits:?})");
                        assert!(r.unknown.is_empty());
                        assert_eq!(format!("{d:?}"), format!("{r:?}"), "structs differ ({v} {limits:?})");
                        let c = combined.as_ref().map(|c| format!("{:?}", c.0)).unwrap_or_default();
                        assert_eq!(c, format!("{d:?}"), "decode_batch is not the direct path ({v} {limits:?})");
                    }
                    Err(e) => panic!("the direct path accepts what the typed API rejects: {e} ({v} {limits:?})"),
                }
            }
        }
    }
}

/// One payload, read as TokenSpeed's HELLO/READY and INIT, with the checks
/// of [`message`] and [`tokenspeed_frame_rules`] (INIT is also read after
/// an earlier frame, HELLO and READY as two frames).
pub fn tokenspeed_handshake<P: Probe>(data: &[u8], p: &mut P) {
    tokenspeed_frame_rules(p, MessageKind::HandshakeHello, &[data]);
    tokenspeed_frame_rules(p, MessageKind::HandshakeInit, &[data]);
}

/// One payload: TokenSpeed's ready response (a map struct).
pub fn tokenspeed_ready_response<P: Probe>(data: &[u8], p: &mut P) {
    tokenspeed_frame_rules(p, MessageKind::EngineCoreReadyResponse, &[data]);
}

/// Decodes `frames` as TokenSpeed's `kind` with the checks of [`message`],
/// then the frame rules of docs/tokenspeed-wire.md §2 (expectations written
/// here from the document, not read from `engine_protocol::message`):
///
/// - ADD and ABORT: fewer than two frames, or a first frame that is not
///   exactly one byte `00` or `01`, is class `frames` (2.1); the payload is
///   read as the type byte says (2.2), so with the other kind's byte a
///   message is never accepted: when the frames are accepted as the kind
///   the byte names, they are `frames` as this kind, and a decode error
///   (any class but `validation`, which the receive path also gives) is the
///   same for both kinds;
/// - an output batch's aux frames are ignored (2.4): it decodes as its
///   payload frame alone does; no frame at all is `frames`;
/// - INIT is read from the last frame (2.5): an earlier frame changes
///   nothing; HELLO, READY and the ready response are one frame each, so
///   two frames are `frames`;
/// - an accepted ABORT or output batch stays accepted, with the same value,
///   when an unreferenced frame is appended (2.3, 2.4; not an ADD, whose
///   negative aux-frame indices count from the last frame, 6.2);
/// - tighter limits never accept what the default limits reject, nor decode
///   it differently, and an accepted value nests within the tighter depth.
///
/// Each TokenSpeed version is checked on its own; then, because fields are
/// only ever appended (docs/tokenspeed-wire.md §12), an ADD, ABORT or output
/// batch the newest version accepts is accepted by the older one too, with
/// the same value in every field the older one has (the newer fields are
/// extra trailing elements to it, and its receive path gates less), except
/// the greedy request 0.1.1's seed pin rescues
/// (`rescued_by_greedy_seed_pin`, found by this check's first campaign).
pub fn tokenspeed_frame_rules<P: Probe>(p: &mut P, kind: MessageKind, frames: &[&[u8]]) {
    let [old, new] = TOKENSPEED_RELEASES;
    let older = frame_rules_in(p, old, kind, frames);
    let newer = frame_rules_in(p, new, kind, frames);
    let appended_only =
        matches!(kind, MessageKind::EngineCoreRequest | MessageKind::AbortRequest | MessageKind::EngineCoreOutputs);
    if let (true, Some(v_new)) = (appended_only, &newer) {
        let name = kind.name_in(new);
        let Some(v_old) = &older else {
            if kind == MessageKind::EngineCoreRequest && rescued_by_greedy_seed_pin(frames) {
                return;
            }
            panic!("{name}: {} accepts it, {} does not", new.version, old.version);
        };
        match (v_old, v_new) {
            (Value::Struct(a), Value::Struct(b)) => {
                for (f, x) in a.schema.fields.iter().zip(a.fields()) {
                    if let Some(at) = same_value(x, b.get(f.name).unwrap_or(&Value::Nil)) {
                        panic!("{name}.{}: {} and {} decode it differently at {at}", f.name, old.version, new.version);
                    }
                }
            }
            (a, b) => {
                if let Some(at) = same_value(a, b) {
                    panic!("{name}: {} and {} decode it differently at {at}", old.version, new.version);
                }
            }
        }
    }
}

/// The one ADD 0.1.1 runs and 08-03 drops (docs/tokenspeed-wire.md §12.3):
/// a greedy request (`top_k` 1 after `__post_init__`) with no seed and a
/// rid that is not a string. 0.1.1 pins greedy to seed 0, so there is no
/// seed to derive from the rid; 08-03 does not pin, and deriving the seed
/// from a nil or list rid fails. Read from the 08-03 decode of the payload.
fn rescued_by_greedy_seed_pin(frames: &[&[u8]]) -> bool {
    use engine_protocol::validate::tokenspeed::post_init;
    let Some(payload) = frames.get(1..) else { return false };
    let old = &tokenspeed::GIT_57B49061;
    let Ok(d) = engine_protocol::decode_payload(
        "TokenizedGenerateReqInput",
        old.engine_core_request,
        payload,
        &Limits::default(),
    ) else {
        return false;
    };
    let Value::Struct(req) = &d.value else { return false };
    let Some(sp) = req.struct_field("sampling_params") else { return false };
    let mut sp = sp.clone();
    post_init(&mut sp, &tokenspeed::RECEIVE_GIT_57B49061);
    let greedy = sp.int_field("top_k") == Some(1);
    greedy && sp.is_nil("seed") && !matches!(req.get("rid"), Some(Value::Str(_)))
}

/// [`tokenspeed_frame_rules`] for one TokenSpeed version; the decoded value
/// when it accepts.
fn frame_rules_in<P: Probe>(
    p: &mut P,
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
) -> Option<Value> {
    let (outcome, value) = message(p, release, kind, frames);
    let name = kind.name_in(release);
    let frames_reject = Outcome::Reject(RejectClass::Frames);
    let input_socket = matches!(kind, MessageKind::EngineCoreRequest | MessageKind::AbortRequest);
    if input_socket {
        let own = if kind == MessageKind::EngineCoreRequest { 0x00 } else { 0x01 };
        let sent = match frames.first() {
            Some(&&[b]) if b == 0x00 || b == 0x01 => Some(b),
            _ => None,
        };
        if frames.len() < 2 || sent.is_none() {
            assert_eq!(outcome, frames_reject, "{name}: {} frames, type frame {:02x?}", frames.len(), frames.first());
        } else if sent != Some(own) {
            assert!(!matches!(outcome, Outcome::Accept { .. }), "{name} accepted under the other type byte");
            let other = if kind == MessageKind::EngineCoreRequest {
                MessageKind::AbortRequest
            } else {
                MessageKind::EngineCoreRequest
            };
            let as_sent = outcome_of(&decode_message(release, other, frames, &Limits::default()));
            match as_sent {
                Outcome::Accept { .. } => {
                    assert_eq!(outcome, frames_reject, "{name} under the type byte of an accepted {}", other.name())
                }
                Outcome::Reject(RejectClass::Validation) => {}
                Outcome::Reject(c) => {
                    assert_eq!(outcome, Outcome::Reject(c), "{name} and {} differ on one payload", other.name())
                }
            }
        }
    }
    match kind {
        MessageKind::EngineCoreOutputs => {
            if frames.is_empty() {
                assert_eq!(outcome, frames_reject, "{name} without frames");
            } else if frames.len() <= Limits::default().max_frames && frames.len() > 1 {
                let (alone, v1) = message(p, release, kind, &frames[..1]);
                assert_eq!(alone, outcome, "{name}: aux frames change the outcome");
                if let (Some(a), Some(b)) = (&value, &v1) {
                    if let Some(at) = same_value(a, b) {
                        panic!("{name}: aux frames change the value at {at}");
                    }
                }
            }
        }
        MessageKind::HandshakeInit => {
            if let Some(last) = frames.last() {
                let (o2, v2) = message(p, release, kind, &[&b"\x80"[..], last]);
                assert_eq!(o2, outcome, "{name}: an earlier frame changes the outcome");
                if let (Some(a), Some(b)) = (&value, &v2) {
                    if let Some(at) = same_value(a, b) {
                        panic!("{name}: an earlier frame changes the value at {at}");
                    }
                }
            }
        }
        MessageKind::HandshakeHello | MessageKind::HandshakeReady | MessageKind::EngineCoreReadyResponse => {
            if frames.len() != 1 {
                assert_eq!(outcome, frames_reject, "{name}: {} frames", frames.len());
            } else {
                let r = decode_message(release, kind, &[frames[0], frames[0]], &Limits::default());
                assert_eq!(outcome_of(&r), frames_reject, "{name} as two frames");
            }
        }
        _ => {}
    }
    // Not for ADD: a negative aux-frame index counts from the last frame
    // (6.2), so no frame can be added without moving some tensor.
    if let (Some(v), true) = (&value, matches!(kind, MessageKind::AbortRequest | MessageKind::EngineCoreOutputs)) {
        let mut more = frames.to_vec();
        more.push(&b"unreferenced"[..]);
        if more.len() <= Limits::default().max_frames {
            let (o, v2) = message(p, release, kind, &more);
            let Some(v2) = v2 else { panic!("{name}: an extra unreferenced frame makes it {o:?}") };
            if let Some(at) = same_value(v, &v2) {
                panic!("{name}: an extra unreferenced frame changes the value at {at}");
            }
        }
    }
    let tight = Limits { max_depth: 6, max_frames: 3, max_frame_bytes: 1 << 16 };
    if let Ok(t) = decode_message(release, kind, frames, &tight) {
        let Some(v) = &value else {
            panic!("{name}: accepted under tighter limits, rejected ({outcome:?}) under the defaults");
        };
        if let Some(at) = same_value(v, &t.value) {
            panic!("{name}: tighter limits decode differently at {at}");
        }
        let depth = check_tree(&t.value);
        assert!(depth <= tight.max_depth + DEFAULT_TREE_DEPTH, "{name}: nests {depth} under max_depth 6");
    }
    value
}
