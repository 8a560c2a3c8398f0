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

use engine_protocol::view::{from_view_in, to_view};
use engine_protocol::{decode_message, encode_message, release, Error, Limits, MessageKind, RejectClass};
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
    /// The message's name in the case's dialect (`TokenizedGenerateReqInput`
    /// for a TokenSpeed ADD; docs/tokenspeed-wire.md §2.6).
    pub fn message_name(&self) -> &'static str {
        release(self.dialect, self.version).map_or(self.message.name(), |r| self.message.name_in(r))
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

impl Codec for InProcess {
    fn decode(&mut self, target: &Target, frames: &[Vec<u8>]) -> Result<DecodeAnswer, NoAnswer> {
        let rel = release(target.dialect, target.version).ok_or_else(|| no_table(target))?;
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        Ok(match decode_message(rel, target.message, &refs, &self.limits) {
            Ok(d) => DecodeAnswer::Accept { view: to_view(target.message.payload_type(rel), &d.value), drift: d.drift },
            Err(e) => DecodeAnswer::Reject { class: e.class, detail: reject_detail(&e) },
        })
    }

    fn encode(&mut self, target: &Target, view: &Json) -> Result<EncodeAnswer, NoAnswer> {
        let rel = release(target.dialect, target.version).ok_or_else(|| no_table(target))?;
        let kind = target.message;
        let encoded = from_view_in(rel, kind.name_in(rel), kind.payload_type(rel), view)
            .and_then(|value| encode_message(rel, kind, &value));
        Ok(match encoded {
            Ok(frames) => EncodeAnswer::Frames(frames),
            Err(e) => EncodeAnswer::Reject { class: e.class, detail: reject_detail(&e) },
        })
    }
}
