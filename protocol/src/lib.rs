//! `engine-protocol`: a reference implementation of the wire protocol that
//! LLM gateways speak to headless inference engines: vLLM EngineCore
//! (ZeroMQ multipart frames carrying msgspec-encoded MessagePack,
//! docs/wire-protocol.md) and TokenSpeed 0.1.1 (docs/tokenspeed-wire.md).
//!
//! Pure: no I/O, no sockets, no files. Layers, bottom up:
//!
//! - [`schema`]: one table per engine release (field order, types,
//!   defaults, and which decoder rules apply, as a data tag): versions are
//!   data, and the tables call no code;
//! - [`decode`] / [`encode`] (with [`value`]): the codec, written once
//!   against the tables, byte-identical to vLLM's encoder and as tolerant as
//!   its decoder, with drift reported and documented [`Limits`];
//! - [`validate`]: the rules the engines' decoders run (`__post_init__`),
//!   the range rules as data ([`validate::SAMPLING_PARAMS_RULES`]) shared
//!   by the decoder, the translation layer and the fuzzing generator;
//!   TokenSpeed's receive path in [`validate::tokenspeed`];
//! - [`frames`] / [`message`]: request-type bytes, identities, the death
//!   sentinel, and which frames carry which message;
//! - [`typed`]: one Rust struct per wire struct, generated from the tables,
//!   converting to and from values and encoding straight to bytes;
//! - [`hot`]: the fast borrowing decoders of the per-token path
//!   ([`decode_outputs`], [`decode_request`]), with the verdicts of
//!   [`decode_message`];
//! - [`translate`] (feature `translate`, on by default): the gateway layer:
//!   request translation, logprob shaping, stop-string detection,
//!   finish reasons (docs/translation.md);
//! - [`view`]: the canonical JSON view of docs/case-format.md §6.
//!
//! # A gateway's codec path
//!
//! Pick the table of the engine's release, build the request with the typed
//! API, encode it, and read the engine's answers back:
//!
//! ```
//! use engine_protocol::typed::{decode_typed, EngineCoreRequest, SamplingParams, StopStrings};
//! use engine_protocol::{release, Dialect, Limits};
//!
//! // 1. The table of the engine's release (from its handshake).
//! let v033 = release(Dialect::Vllm, "0.33.0").expect("a table for 0.33.0");
//! // 2. Build.
//! let request = EngineCoreRequest {
//!     request_id: "req-1".into(),
//!     prompt_token_ids: Some(vec![1, 15043, 29892]),
//!     sampling_params: Some(SamplingParams {
//!         // vLLM's default max_tokens (16) is never what a gateway wants.
//!         max_tokens: Some(64),
//!         temperature: 0.7,
//!         stop: Some(StopStrings::Many(vec!["\n\n".into()])),
//!         ..SamplingParams::default()
//!     }),
//!     arrival_time: 1_700_000_000.5,
//!     ..EngineCoreRequest::default()
//! };
//! // 3. Encode for that release: [request-type byte (ADD), payload].
//! let frames = request.encode(v033)?;
//! assert_eq!(frames[0], [0x00]);
//! assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x16]); // a 22-element array
//!
//! // 4. Decode back, as the engine would (drift: fields this table lacks).
//! let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
//! let (decoded, drift) = decode_typed::<EngineCoreRequest>(v033, &refs, &Limits::default())?;
//! assert!(drift.is_empty());
//! assert_eq!(decoded, request);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! The typed encoder checks types, enum values and release fields; the
//! rules the engine's decoder runs (`__post_init__`: ranges, exactly one
//! structured-output constraint) are checked by
//! [`encode_message`]`(release, kind, &request.to_value(release)?)` and by
//! [`translate::translate`], which refuses what the engine would refuse
//! before anything is sent: an engine that meets such a payload stops
//! reading input (docs/wire-protocol.md §10.1).
//!
//! On the output socket, [`decode_outputs`] reads an `EngineCoreOutputs`
//! batch without copying token ids (the per-token path), with the same
//! verdict as the schema-driven [`decode_message`]; [`typed::decode_typed`]
//! gives owned structs.
//!
//! # Errors
//!
//! Every failure is a typed error naming where it happened, never a panic:
//! - [`Error`] (decode and encode): a [`RejectClass`] (the golden format's
//!   `malformed`, `type`, `missing-field`, `enum`, `validation`, `limits`,
//!   `frames`), the path of the offending value
//!   (`EngineCoreRequest.sampling_params.temperature`) and a detail;
//!   [`classify`] turns a decode into an [`Outcome`];
//! - [`error::Violation`]: a decoder rule's verdict on one struct (its
//!   field and message), which the codec turns into a `validation` error;
//! - `translate::TranslateError`: a refusal of the translation layer,
//!   with a `TranslateErrorClass` and the request field(s) at fault;
//!   `translate::tokenizer::TokenizerError` and
//!   `translate::tokenizer::DecodeStreamError` for the tokenizer;
//! - [`view::JsonError`]: a case file that is not JSON or nests too deeply.
//!
//! # Limits
//!
//! Bad input costs bounded stack and memory: [`Limits`] bounds nesting
//! depth (default 995, exactly what vLLM's engine decodes), frame count and
//! frame size; the defaults refuse nothing the engine decodes, and no input
//! can exhaust the stack or make memory grow faster than the input. A
//! message beyond a limit is rejected with class `limits` at the path where
//! it was crossed (docs/limits.md).
//!
//! # API boundary
//!
//! Enums that grow with new releases or new failure kinds are
//! `#[non_exhaustive]`: [`RejectClass`], [`MessageKind`], the error enums,
//! [`schema::Rules`], [`validate::Check`]. The schema's type language
//! ([`schema::Ty`], [`schema::Layout`], [`schema::Default`],
//! [`schema::TensorKind`]) and the wire's request types
//! ([`frames::RequestType`]) stay exhaustive: a codec must handle every one.
//!
//! Hidden from these docs (`#[doc(hidden)]`), for the fuzzers, tests and
//! benches of this repository only, with no stability promise: the
//! `arbitrary` module (feature `arbitrary`, structure-aware generation),
//! `typed::wire` (the generated code's traits), the defaults cache of the
//! tables (`schema::DefaultValues`, `value::Defaults`,
//! `StructSchema::defaults`), and the direct-path probes of [`hot`].
//!
//! # Provenance
//! Wire facts come from the engines' own classes and encoders (goldens under
//! `golden/`) and from docs/wire-protocol.md and docs/tokenspeed-wire.md;
//! no engine source is copied.

#[cfg(feature = "arbitrary")]
#[doc(hidden)]
pub mod arbitrary;
pub mod decode;
pub mod encode;
pub mod error;
pub mod frames;
pub mod hot;
pub mod message;
pub mod msgpack;
mod registry;
pub mod schema;
pub mod translate;
pub mod typed;
pub mod validate;
pub mod value;
pub mod view;

pub use decode::{Decoded, Limits};
pub use error::{Error, Outcome, RejectClass};
pub use hot::{decode_outputs, decode_request};
pub use message::decode_message_with;
pub use message::{decode_message, encode_message, MessageKind};
pub use schema::{release, Dialect, ReleaseSchema, UnknownDialect, UnknownRelease};
pub use value::{StructValue, Tensor, Value};

/// Runs one message through the decoder and classifies the result: the one
/// outcome classification shared by verify, fuzz and the live runner.
pub fn classify(release: &'static ReleaseSchema, kind: MessageKind, frames: &[&[u8]], limits: &Limits) -> Outcome {
    match decode_message(release, kind, frames, limits) {
        Ok(d) => Outcome::Accept { drift: d.drift },
        Err(e) => Outcome::Reject(e.class),
    }
}
