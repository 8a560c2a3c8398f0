//! The frame layer (target `frames`), judged from the wire facts
//! (docs/wire-protocol.md), written here as literals, not taken from
//! `engine_protocol::frames`: the request-type byte of each kind on the
//! engine's input socket (`00` ADD, `01` ABORT, `02` START_DP_WAVE, `03`
//! UTILITY), which kinds carry aux frames, and a seed's agreement with the
//! verdict the engine's own code gave its golden case.

use engine_protocol::schema::VLLM_RELEASES;
use engine_protocol::{decode_message, Limits, MessageKind, Outcome, RejectClass, ReleaseSchema};

use super::invariants::check_tree;
use super::OracleError;
use super::{message, refs, same_value, NoProbe, Probe, DEFAULT_TREE_DEPTH};
use crate::outcome::EngineVerdict;
use crate::split::split;

/// The request-type byte that precedes `kind` on the engine's input
/// socket (docs/wire-protocol.md: `00` ADD, `01` ABORT, `02`
/// START_DP_WAVE, `03` UTILITY), `None` for the kinds of other sockets.
/// Written from the wire facts, not taken from `engine_protocol::frames`.
pub fn wire_type_byte(kind: MessageKind) -> Option<u8> {
    match kind {
        MessageKind::EngineCoreRequest => Some(0x00),
        MessageKind::AbortRequest => Some(0x01),
        MessageKind::StartDpWave => Some(0x02),
        MessageKind::UtilityRequest => Some(0x03),
        _ => None,
    }
}

/// Whether `kind`'s payload may reference aux frames (docs/wire-protocol.md:
/// tensors of requests, outputs and utility results travel in aux frames).
pub fn wire_has_aux_frames(kind: MessageKind) -> bool {
    matches!(kind, MessageKind::EngineCoreRequest | MessageKind::EngineCoreOutputs | MessageKind::UtilityOutput)
}

/// The independent oracle of the seed tests: `frames` (a golden case's,
/// through the target's input convention) decoded as the fuzz targets
/// decode them must get `verdict`, the one the engine's own decoder gave
/// the case (vLLM's for vLLM goldens; TokenSpeed's receive path, run with
/// the engine configuration `decode_message` assumes,
/// `EngineConfig::CONFORMANCE`, for TokenSpeed goldens). An error says how
/// they differ.
pub fn agrees_with_verdict(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
    verdict: &EngineVerdict,
) -> Result<(), OracleError> {
    let (outcome, _) = message(&mut NoProbe, release, kind, frames);
    if verdict.agrees_with(&outcome) {
        Ok(())
    } else {
        Err(OracleError::Disagrees {
            version: release.version,
            kind: kind.name(),
            verdict: verdict.clone(),
            outcome: outcome.label(),
        })
    }
}

/// The frame layer: any frames, read as every message kind of every
/// release. Checks, besides those of [`message`], the frame rules of
/// docs/wire-protocol.md (expectations written here, not read from the
/// implementation):
///
/// - a kind of the input socket is rejected with class `frames` unless the
///   first frame is exactly its one request-type byte ([`wire_type_byte`]);
///   so at most one kind gets past that check;
/// - no payload frame, or more than one frame for a kind without aux
///   frames, is class `frames`;
/// - an accepted message with aux frames stays accepted, with the same
///   value, when one more (unreferenced) frame is appended;
/// - tighter limits never accept what the default limits reject, nor
///   decode it differently (limits only ever turn accepts into rejects),
///   and an accepted value nests within the tighter depth.
pub fn frames<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    let frames = refs(&owned);
    let tight = Limits { max_depth: 6, max_frames: 3, max_frame_bytes: 1 << 16 };
    for &release in VLLM_RELEASES {
        let mut past_type_check = 0;
        for kind in MessageKind::ALL {
            let (outcome, value) = message(p, release, kind, &frames);
            let data_frames = match wire_type_byte(kind) {
                Some(t) => {
                    if frames.first() != Some(&&[t][..]) {
                        assert_eq!(
                            outcome,
                            Outcome::Reject(RejectClass::Frames),
                            "{} without its type byte",
                            kind.name()
                        );
                        continue;
                    }
                    past_type_check += 1;
                    &frames[1..]
                }
                None => &frames[..],
            };
            if data_frames.is_empty() || (!wire_has_aux_frames(kind) && data_frames.len() != 1) {
                assert_eq!(
                    outcome,
                    Outcome::Reject(RejectClass::Frames),
                    "{}: {} data frames",
                    kind.name(),
                    data_frames.len()
                );
            }
            let tight_r = decode_message(release, kind, &frames, &tight);
            if let Ok(t) = &tight_r {
                let Some(v) = &value else {
                    panic!("{}: accepted under tighter limits, rejected ({outcome:?}) under the defaults", kind.name());
                };
                if let Some(at) = same_value(v, &t.value) {
                    panic!("{}: tighter limits decode differently at {at}", kind.name());
                }
                let depth = check_tree(&t.value);
                assert!(
                    depth <= tight.max_depth + DEFAULT_TREE_DEPTH,
                    "{}: nests {depth} under max_depth {}",
                    kind.name(),
                    tight.max_depth
                );
            }
            if let (Some(v), true) = (&value, wire_has_aux_frames(kind)) {
                let mut more = frames.clone();
                more.push(&b"unreferenced"[..]);
                if more.len() <= Limits::default().max_frames {
                    let (o, v2) = message(p, release, kind, &more);
                    let Some(v2) = v2 else { panic!("{}: an extra unreferenced frame makes it {o:?}", kind.name()) };
                    if let Some(at) = same_value(v, &v2) {
                        panic!("{}: an extra unreferenced frame changes the value at {at}", kind.name());
                    }
                }
            }
        }
        assert!(past_type_check <= 1, "the type byte matched {past_type_check} kinds");
    }
}
