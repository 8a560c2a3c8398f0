//! Where the results of a message case come from: the [`Codec`] interface
//! that the checks of [`crate::check`] are written against, and its
//! in-process implementation over `engine-protocol` ([`InProcess`]).
//!
//! A codec answers two questions about one message (docs/case-format.md
//! §9.2): what a list of wire frames decodes to (the canonical view of
//! docs/case-format.md §6 and the drift of §7.1, or a reject class of §5.1),
//! and what frames a canonical view encodes to (or a reject class). The
//! other implementation is an outside program speaking the testee protocol
//! of docs/testee.md ([`crate::testee::Testee`]); both are judged by the
//! same checks, so a result means the same whichever codec produced it.
//!
//! [`InProcess`] answers with the typed API (`engine_protocol::typed`) for
//! every message kind it covers (vLLM's: ADD, UTILITY, START_DP_WAVE,
//! outputs, utility outputs, the ready response, HELLO, INIT, READY; not
//! ABORT, nor any TokenSpeed message): the verdict of a decode is
//! `decode_typed`'s (for an ADD the direct decoder
//! `engine_protocol::hot::decode_request`), the view and drift those of
//! `decode_message`'s value (the canonical view is built from the value
//! tree); an encode checks the value as `encode_message` does (vLLM's
//! `__post_init__` rules, docs/wire-protocol.md §10) and answers with the
//! frames the typed struct's direct encoder writes, so `encode: exact`
//! goldens compare vLLM's bytes with the typed encoder's.

use engine_protocol::typed::{
    decode_typed, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest, EngineHandshakeMetadata,
    HandshakeStatus, Message, StartDpWave, UtilityOutput, UtilityRequest,
};
use engine_protocol::view::{from_view_in, to_view};
use engine_protocol::Dialect;
use engine_protocol::{
    decode_message, encode_message, release, Error, Limits, MessageKind, RejectClass, ReleaseSchema, Value,
};
use serde_json::Value as Json;

/// The message a request is about.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The case id as reports print it (`vllm/0.33.0/request/add_default`),
    /// for messages.
    pub case: &'a str,
    pub dialect: &'a str,
    pub version: &'a str,
    pub message: MessageKind,
}

impl Target<'_> {
    /// The schema table of the case's dialect and version, if this build
    /// has one (a dialect name it does not know has none).
    pub fn release(&self) -> Option<&'static ReleaseSchema> {
        let dialect: Dialect = self.dialect.parse().ok()?;
        release(dialect, self.version).ok()
    }

    /// The message's name in the case's dialect (`TokenizedGenerateReqInput`
    /// for a TokenSpeed ADD; docs/tokenspeed-wire.md §2.6).
    pub fn message_name(&self) -> &'static str {
        self.release().map_or(self.message.name(), |r| self.message.name_in(r))
    }
}

/// A codec's answer to "decode these frames".
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeAnswer {
    /// Accepted: the canonical view and the drift paths.
    Accept { view: Json, drift: Vec<String> },
    /// Refused, with the class and (possibly empty) detail.
    Reject { class: RejectClass, detail: String },
}

/// A codec's answer to "encode this view".
#[derive(Debug, Clone, PartialEq)]
pub enum EncodeAnswer {
    Frames(Vec<Vec<u8>>),
    Reject { class: RejectClass, detail: String },
}

/// Why a codec gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAnswer {
    /// The codec does not implement the request: the case is skipped with
    /// this reason, unless one of its checks fails.
    Skipped(String),
    /// The codec failed (an outside testee crashed, hung, answered garbage
    /// or reported an error): the case fails with this message.
    Failed(String),
}

/// A codec under test: decode and encode of single messages.
pub trait Codec {
    fn decode(&mut self, target: &Target, frames: &[Vec<u8>]) -> Result<DecodeAnswer, NoAnswer>;
    fn encode(&mut self, target: &Target, view: &Json) -> Result<EncodeAnswer, NoAnswer>;
}

/// The reference implementation, in process, with the decoder's default
/// limits (docs/limits.md).
#[derive(Debug, Clone, Default)]
pub struct InProcess {
    pub limits: Limits,
}

/// An error's detail for a rejection: `<path>: <detail>`.
pub fn reject_detail(e: &Error) -> String {
    if e.path.is_empty() {
        e.detail.clone()
    } else {
        format!("{}: {}", e.path, e.detail)
    }
}

fn no_table(target: &Target) -> NoAnswer {
    NoAnswer::Skipped(format!("no schema table for {} {}", target.dialect, target.version))
}

/// What the typed API does with one message kind: decode frames (the
/// verdict only), encode a value through the typed struct.
struct TypedOps {
    decode: TypedDecode,
    encode: TypedEncode,
}

/// Decodes frames into the typed struct; the verdict only.
type TypedDecode = fn(&'static ReleaseSchema, &[&[u8]], &Limits) -> Result<(), Error>;
/// Encodes a value through the typed struct.
type TypedEncode = fn(&'static ReleaseSchema, &Value) -> Result<Vec<Vec<u8>>, Error>;

fn typed_decode<M: Message>(rel: &'static ReleaseSchema, frames: &[&[u8]], limits: &Limits) -> Result<(), Error> {
    decode_typed::<M>(rel, frames, limits).map(|_| ())
}

/// The typed struct of `kind` in `rel`, if the typed API covers both
/// (the vLLM releases; HELLO and READY share `HandshakeStatus`).
fn typed_ops(rel: &'static ReleaseSchema, kind: MessageKind) -> Option<TypedOps> {
    macro_rules! ops {
        ($t:ty) => {
            TypedOps { decode: typed_decode::<$t>, encode: |rel, value| <$t>::from_value(rel, value)?.encode(rel) }
        };
    }
    if !engine_protocol::schema::VLLM_RELEASES.iter().any(|r| std::ptr::eq(*r, rel)) {
        return None;
    }
    Some(match kind {
        MessageKind::EngineCoreRequest => ops!(EngineCoreRequest),
        MessageKind::EngineCoreOutputs => ops!(EngineCoreOutputs),
        MessageKind::UtilityOutput => ops!(UtilityOutput),
        MessageKind::UtilityRequest => ops!(UtilityRequest),
        MessageKind::StartDpWave => ops!(StartDpWave),
        MessageKind::EngineCoreReadyResponse => ops!(EngineCoreReadyResponse),
        MessageKind::HandshakeHello | MessageKind::HandshakeReady => ops!(HandshakeStatus),
        MessageKind::HandshakeInit => ops!(EngineHandshakeMetadata),
        MessageKind::AbortRequest => return None,
        _ => return None,
    })
}

fn reject(e: &Error) -> DecodeAnswer {
    DecodeAnswer::Reject { class: e.class, detail: reject_detail(e) }
}

impl Codec for InProcess {
    fn decode(&mut self, target: &Target, frames: &[Vec<u8>]) -> Result<DecodeAnswer, NoAnswer> {
        let rel = target.release().ok_or_else(|| no_table(target))?;
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        if let Some(ops) = typed_ops(rel, target.message) {
            // The typed verdict first (for an ADD, the direct decoder's).
            if let Err(e) = (ops.decode)(rel, &refs, &self.limits) {
                return Ok(reject(&e));
            }
        }
        Ok(match decode_message(rel, target.message, &refs, &self.limits) {
            Ok(d) => DecodeAnswer::Accept { view: to_view(target.message.payload_type(rel), &d.value), drift: d.drift },
            Err(e) => reject(&e),
        })
    }

    fn encode(&mut self, target: &Target, view: &Json) -> Result<EncodeAnswer, NoAnswer> {
        let rel = target.release().ok_or_else(|| no_table(target))?;
        let kind = target.message;
        let encoded = from_view_in(rel, kind.name_in(rel), kind.payload_type(rel), view).and_then(|value| {
            // `encode_message` checks the value (vLLM's rules); the typed
            // struct's direct encoder writes the answer.
            let frames = encode_message(rel, kind, &value)?;
            match typed_ops(rel, kind) {
                Some(ops) => (ops.encode)(rel, &value),
                None => Ok(frames),
            }
        });
        Ok(match encoded {
            Ok(frames) => EncodeAnswer::Frames(frames),
            Err(e) => EncodeAnswer::Reject { class: e.class, detail: reject_detail(&e) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ADD whose `data_parallel_rank` is 2^64-1: `decode_message`
    /// accepts it (a Python int), the typed struct (`i64`) cannot hold it,
    /// and the in-process codec answers with the typed verdict.
    #[test]
    fn the_in_process_codec_accepts_an_int_field_above_i64_max_as_vllm_does() {
        // msgspec takes 2^64-1 for `data_parallel_rank: int | None`
        // (golden intrange/data_parallel_rank_u64_max); the typed decode
        // the codec answers with holds it too.
        let rel = release(Dialect::Vllm, "0.33.0").expect("table");
        let mut v = engine_protocol::internal::engine_core_request_value(
            rel,
            "r",
            vec![1, 2],
            engine_protocol::internal::sampling_params_value(rel),
            1.5,
        );
        let Value::Struct(s) = &mut v else { unreachable!() };
        s.set("data_parallel_rank", Value::UInt(u64::MAX));
        let frames = encode_message(rel, MessageKind::EngineCoreRequest, &v).expect("encodes");
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert!(decode_message(rel, MessageKind::EngineCoreRequest, &refs, &Limits::default()).is_ok());
        let target = Target { case: "t", dialect: "vllm", version: "0.33.0", message: MessageKind::EngineCoreRequest };
        match InProcess::default().decode(&target, &frames) {
            Ok(DecodeAnswer::Accept { view, drift }) => {
                assert!(drift.is_empty());
                assert_eq!(view["data_parallel_rank"], Json::from(u64::MAX));
            }
            other => panic!("{other:?}"),
        }
    }
}
