//! Whole messages: which schema type a message kind decodes as, and which
//! frames carry it.
//!
//! Frame layouts (docs/case-format.md §4.1-§4.2, docs/wire-protocol.md §3.1): input-socket
//! messages (`EngineCoreRequest`, `AbortRequest`, `UtilityRequest`,
//! `StartDpWave`) are `[type byte, payload, aux...]`; engine outputs are
//! `[payload, aux...]`; handshake messages and the ready response are one
//! payload frame.

use crate::decode::{decode_payload, Decoded, Limits};
use crate::encode::encode_payload;
use crate::error::{Error, RejectClass};
use crate::frames::RequestType;
use crate::schema::{ReleaseSchema, Ty};
use crate::value::Value;

/// The message kinds of the golden format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    EngineCoreRequest,
    AbortRequest,
    UtilityRequest,
    StartDpWave,
    EngineCoreOutputs,
    UtilityOutput,
    EngineCoreReadyResponse,
    HandshakeHello,
    HandshakeInit,
    HandshakeReady,
}

static ABORT_IDS: Ty = Ty::List(&Ty::Str);

impl MessageKind {
    pub const ALL: [MessageKind; 10] = [
        MessageKind::EngineCoreRequest,
        MessageKind::AbortRequest,
        MessageKind::UtilityRequest,
        MessageKind::StartDpWave,
        MessageKind::EngineCoreOutputs,
        MessageKind::UtilityOutput,
        MessageKind::EngineCoreReadyResponse,
        MessageKind::HandshakeHello,
        MessageKind::HandshakeInit,
        MessageKind::HandshakeReady,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MessageKind::EngineCoreRequest => "EngineCoreRequest",
            MessageKind::AbortRequest => "AbortRequest",
            MessageKind::UtilityRequest => "UtilityRequest",
            MessageKind::StartDpWave => "StartDpWave",
            MessageKind::EngineCoreOutputs => "EngineCoreOutputs",
            MessageKind::UtilityOutput => "UtilityOutput",
            MessageKind::EngineCoreReadyResponse => "EngineCoreReadyResponse",
            MessageKind::HandshakeHello => "HandshakeHello",
            MessageKind::HandshakeInit => "HandshakeInit",
            MessageKind::HandshakeReady => "HandshakeReady",
        }
    }

    pub fn parse(s: &str) -> Option<MessageKind> {
        MessageKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The request-type byte of input-socket messages.
    pub fn request_type(self) -> Option<RequestType> {
        match self {
            MessageKind::EngineCoreRequest => Some(RequestType::Add),
            MessageKind::AbortRequest => Some(RequestType::Abort),
            MessageKind::StartDpWave => Some(RequestType::StartDpWave),
            MessageKind::UtilityRequest => Some(RequestType::Utility),
            _ => None,
        }
    }

    /// Whether the payload may reference aux frames.
    pub fn has_aux_frames(self) -> bool {
        matches!(self, MessageKind::EngineCoreRequest | MessageKind::EngineCoreOutputs | MessageKind::UtilityOutput)
    }

    /// The schema type the payload decodes as in `release`.
    pub fn payload_type(self, release: &'static ReleaseSchema) -> &'static Ty {
        match self {
            MessageKind::EngineCoreRequest => release.engine_core_request,
            MessageKind::AbortRequest => &ABORT_IDS,
            MessageKind::UtilityRequest => release.utility_request,
            MessageKind::StartDpWave => release.start_dp_wave,
            MessageKind::EngineCoreOutputs => release.engine_core_outputs,
            MessageKind::UtilityOutput => release.utility_output,
            MessageKind::EngineCoreReadyResponse => release.ready_response,
            MessageKind::HandshakeHello | MessageKind::HandshakeReady => release.handshake_status,
            MessageKind::HandshakeInit => release.handshake_init,
        }
    }
}

/// Decodes the frames of one message of `kind`.
pub fn decode_message(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
    limits: &Limits,
) -> Result<Decoded, Error> {
    let root = kind.name();
    let data_frames = match kind.request_type() {
        Some(want) => {
            let Some((first, rest)) = frames.split_first() else {
                return Err(Error::new(RejectClass::Frames, root, "no frames (expected request type and payload)"));
            };
            let got = RequestType::from_frame(first)?;
            if got != want {
                return Err(Error::new(
                    RejectClass::Frames,
                    "request_type",
                    format!("request type {} does not carry {root} (expected {})", got.name(), want.name()),
                ));
            }
            rest
        }
        None => frames,
    };
    if data_frames.is_empty() {
        return Err(Error::new(RejectClass::Frames, root, "no payload frame"));
    }
    if !kind.has_aux_frames() && data_frames.len() != 1 {
        return Err(Error::new(
            RejectClass::Frames,
            root,
            format!("{root} is one payload frame, got {}", data_frames.len()),
        ));
    }
    decode_payload(root, kind.payload_type(release), data_frames, limits)
}

/// Encodes `value` as a message of `kind`: the frames as on the wire
/// (request-type byte first for input-socket messages).
pub fn encode_message(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    value: &Value,
) -> Result<Vec<Vec<u8>>, Error> {
    let mut frames = encode_payload(kind.name(), kind.payload_type(release), value)?;
    if let Some(t) = kind.request_type() {
        frames.insert(0, vec![t.byte()]);
    }
    Ok(frames)
}
