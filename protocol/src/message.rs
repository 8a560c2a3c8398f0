//! Whole messages: which schema type a message kind decodes as, and which
//! frames carry it.
//!
//! Frame layouts (docs/case-format.md §4.1-§4.2, docs/wire-protocol.md §3.1): input-socket
//! messages (`EngineCoreRequest`, `AbortRequest`, `UtilityRequest`,
//! `StartDpWave`) are `[type byte, payload, aux...]`; engine outputs are
//! `[payload, aux...]`; handshake messages and the ready response are one
//! payload frame.
//!
//! TokenSpeed (docs/tokenspeed-wire.md §2, §5) shares the message roles but
//! not all names or frame rules:
//! - the ADD payload is `TokenizedGenerateReqInput` and the output batch
//!   `BatchTokenIDOutSlim` ([`MessageKind::name_in`]; [`MessageKind::parse`]
//!   takes either dialect's name); HELLO, INIT, READY, the ready response and
//!   ABORT keep their names;
//! - the engine needs at least two frames on its input socket, knows only
//!   the type bytes `00` and `01`, and decodes the payload as the type byte
//!   says (an ABORT byte before a request payload is judged as an ABORT);
//!   ADD and ABORT may both carry aux frames;
//! - INIT is read from the last frame received;
//! - a decoded ADD goes through the engine's receive path
//!   (`crate::validate::tokenspeed`), which needs an
//!   [`EngineConfig`]: [`decode_message`] uses its default, the engine the
//!   goldens were judged by; [`decode_message_with`] takes another.
#![warn(missing_docs)]

use crate::decode::{decode_payload, decode_payload_in, Decoded, Limits};
use crate::encode::encode_payload;
use crate::error::{Error, RejectClass};
use crate::frames::RequestType;
use crate::schema::tokenspeed::receive_rules;
use crate::schema::{ReleaseSchema, Ty};
use crate::validate::tokenspeed::{receive, EngineConfig};
use crate::value::{StructValue, Value};

/// The message kinds of the golden format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageKind {
    /// ADD: `[0x00, EngineCoreRequest, aux...]` on the input socket.
    EngineCoreRequest,
    /// ABORT: `[0x01, list of request ids]`.
    AbortRequest,
    /// UTILITY: `[0x03, (client_idx, call_id, method, args)]`.
    UtilityRequest,
    /// START_DP_WAVE: `[0x02, (wave, exclude_engine_index)]`.
    StartDpWave,
    /// An output batch on the output socket (`[payload, aux...]`).
    EngineCoreOutputs,
    /// A utility call's answer (inside an output batch).
    UtilityOutput,
    /// The engine's ready response after the handshake.
    EngineCoreReadyResponse,
    /// The handshake's HELLO dict.
    HandshakeHello,
    /// The handshake's INIT message (`EngineHandshakeMetadata`).
    HandshakeInit,
    /// The handshake's READY dict.
    HandshakeReady,
}

static ABORT_IDS: Ty = Ty::List(&Ty::Str);

impl MessageKind {
    /// Every kind.
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

    /// The kind's name in the golden format.
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

    /// The message's name in `release`'s dialect: TokenSpeed calls the ADD
    /// payload `TokenizedGenerateReqInput` and the output batch
    /// `BatchTokenIDOutSlim`; the other names are shared. Paths of errors and
    /// drift start with it.
    pub fn name_in(self, release: &ReleaseSchema) -> &'static str {
        match (release.is_tokenspeed(), self) {
            (true, MessageKind::EngineCoreRequest) => "TokenizedGenerateReqInput",
            (true, MessageKind::EngineCoreOutputs) => "BatchTokenIDOutSlim",
            _ => self.name(),
        }
    }

    /// Whether `release`'s dialect has this message (TokenSpeed has no
    /// utility or wave messages).
    pub fn in_release(self, release: &ReleaseSchema) -> bool {
        !release.is_tokenspeed()
            || !matches!(self, MessageKind::UtilityRequest | MessageKind::StartDpWave | MessageKind::UtilityOutput)
    }

    /// The kind named `s`, in any dialect's naming (see [`Self::name_in`]).
    pub fn parse(s: &str) -> Option<MessageKind> {
        match s {
            "TokenizedGenerateReqInput" => Some(MessageKind::EngineCoreRequest),
            "BatchTokenIDOutSlim" => Some(MessageKind::EngineCoreOutputs),
            _ => MessageKind::ALL.into_iter().find(|k| k.name() == s),
        }
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

/// Decodes the frames of one message of `kind`. A TokenSpeed ADD is judged
/// with the default [`EngineConfig`].
pub fn decode_message(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Decoded, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        if release.is_tokenspeed() {
            return decode_tokenspeed(release, kind, frames, limits, &EngineConfig::default());
        }
        decode_vllm(release, kind, frames, limits)
    })
}

/// [`decode_message`] with the engine facts TokenSpeed's receive path needs
/// (vLLM messages do not use them).
pub fn decode_message_with(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
    engine: &EngineConfig,
) -> Result<Decoded, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        if release.is_tokenspeed() {
            return decode_tokenspeed(release, kind, frames, limits, engine);
        }
        decode_vllm(release, kind, frames, limits)
    })
}

fn decode_tokenspeed(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
    limits: &Limits,
    engine: &EngineConfig,
) -> Result<Decoded, Error> {
    let root = kind.name_in(release);
    if !kind.in_release(release) {
        return Err(Error::new(
            RejectClass::Frames,
            root,
            format!("{} {} has no {root}", release.dialect, release.version),
        ));
    }
    match kind {
        MessageKind::EngineCoreRequest | MessageKind::AbortRequest => {
            let [first, data @ ..] = frames else {
                return Err(Error::new(RejectClass::Frames, root, "no frames (expected request type and payload)"));
            };
            if data.is_empty() {
                return Err(Error::new(
                    RejectClass::Frames,
                    root,
                    "the engine needs at least 2 frames (type, payload)",
                ));
            }
            let sent = match *first {
                [0] => MessageKind::EngineCoreRequest,
                [1] => MessageKind::AbortRequest,
                [b] => {
                    return Err(Error::new(
                        RejectClass::Frames,
                        "request_type",
                        format!("unknown request type byte 0x{b:02x} (TokenSpeed knows 00 ADD and 01 ABORT)"),
                    ))
                }
                other => {
                    return Err(Error::new(
                        RejectClass::Frames,
                        "request_type",
                        format!("request-type frame must be 1 byte, got {}", other.len()),
                    ))
                }
            };
            // The engine decodes what the type byte says.
            let sent_root = sent.name_in(release);
            let d = decode_payload_in(sent_root, sent.payload_type(release), data, limits, true)?;
            if sent != kind {
                return Err(Error::new(
                    RejectClass::Frames,
                    "request_type",
                    format!("the request type byte carries {sent_root}, not {root}"),
                ));
            }
            if sent == MessageKind::EngineCoreRequest {
                if let Value::Struct(req) = &d.value {
                    let rules = receive_rules(release).ok_or_else(|| {
                        Error::new(
                            RejectClass::Frames,
                            root,
                            format!("{} {} has no receive rules", release.dialect, release.version),
                        )
                    })?;
                    let fin = receive(req, rules, engine)
                        .map_err(|v| Error::new(RejectClass::Validation, format!("{root}.{}", v.path()), v.message))?;
                    if let Some(why) = fin.validation_error {
                        return Err(Error::new(
                            RejectClass::Validation,
                            root,
                            format!("the engine aborts the request: {why}"),
                        ));
                    }
                }
            }
            Ok(d)
        }
        MessageKind::EngineCoreOutputs => {
            if frames.is_empty() {
                return Err(Error::new(RejectClass::Frames, root, "no payload frame"));
            }
            decode_payload_in(root, kind.payload_type(release), frames, limits, true)
        }
        MessageKind::HandshakeInit => {
            // The engine keeps the last frame it received as INIT.
            let Some(last) = frames.last() else {
                return Err(Error::new(RejectClass::Frames, root, "no payload frame"));
            };
            decode_payload_in(root, kind.payload_type(release), &[last], limits, true)
        }
        _ => {
            if frames.len() != 1 {
                return Err(Error::new(
                    RejectClass::Frames,
                    root,
                    format!("{root} is one payload frame, got {}", frames.len()),
                ));
            }
            decode_payload_in(root, kind.payload_type(release), frames, limits, true)
        }
    }
}

fn decode_vllm(
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
    let root = kind.name_in(release);
    if !kind.in_release(release) {
        return Err(Error::new(
            RejectClass::Frames,
            root,
            format!("{} {} has no {root}", release.dialect, release.version),
        ));
    }
    let mut frames = encode_payload(root, kind.payload_type(release), value)?;
    if let Some(t) = kind.request_type() {
        frames.insert(0, vec![t.byte()]);
    }
    Ok(frames)
}

/// A new `SamplingParams` value of `release` holding every default, for
/// building messages as values (tests and fuzzers; a gateway builds
/// [`crate::typed::SamplingParams`]).
pub fn sampling_params_value(release: &'static ReleaseSchema) -> StructValue {
    StructValue::with_defaults(release.sampling_params)
}

/// A new `EngineCoreRequest` value of `release` with the nine required
/// fields set (no multimodal features, no pooling, no LoRA, no salt, no DP
/// rank), for building messages as values (tests and fuzzers; a gateway
/// builds [`crate::typed::EngineCoreRequest`]).
pub fn engine_core_request_value(
    release: &'static ReleaseSchema,
    request_id: impl Into<String>,
    prompt_token_ids: Vec<i64>,
    sampling_params: StructValue,
    arrival_time: f64,
) -> Value {
    let schema = release.engine_core_request.as_struct().expect("request root is a struct");
    let mut r = StructValue::with_defaults(schema);
    r.set("request_id", Value::Str(request_id.into()));
    let prompt_ty = schema.index_of("prompt_token_ids").map_or(&Ty::Any, |i| schema.fields[i].ty);
    r.set("prompt_token_ids", crate::value::token_ids_value(prompt_ty, prompt_token_ids));
    r.set("sampling_params", Value::Struct(sampling_params));
    r.set("arrival_time", Value::Float(arrival_time));
    Value::Struct(r)
}
