//! `engine-protocol`: a reference implementation of the wire protocol that
//! LLM gateways speak to headless inference engines: vLLM EngineCore
//! (ZeroMQ multipart frames carrying msgspec-encoded MessagePack,
//! docs/wire-protocol.md) and TokenSpeed 0.1.1 (docs/tokenspeed-wire.md).
//!
//! Pure: no I/O, no sockets, no files. The codec's modules are private;
//! what a gateway uses is re-exported here, with a few namespaces. Layers,
//! bottom up (no module uses one above it: `tests/architecture.rs` draws
//! the graph from the sources):
//!
//! - [`schema`]: one table per engine release of each [`Dialect`] (field
//!   order, types, defaults, the TokenSpeed tag, and which decoder rules
//!   apply, as a data tag): versions are data, and the tables import
//!   nothing of this crate; [`release`] picks one;
//! - the values ([`Value`], [`StructValue`], [`Tensor`]) and the codec
//!   written once against the tables ([`decode_payload`],
//!   [`encode_payload`]), byte-identical to vLLM's encoder and as tolerant
//!   as its decoder, with drift reported and documented [`Limits`]; what
//!   they compute from a table (defaults, their wire bytes, resolved rule
//!   indexes) is cached per struct outside the tables;
//! - [`validate`]: the rules the engines' decoders run (`__post_init__`),
//!   as data ([`validate::SAMPLING_PARAMS_RULES`],
//!   [`validate::tokenspeed::VERIFY_RULES`]) read by one interpreter
//!   ([`validate::first_violation`]) over values and typed structs alike
//!   ([`validate::RuleFields`]), shared by the decoder, the typed request
//!   path, the translation layer and the fuzzing generator; TokenSpeed's
//!   receive path in [`validate::tokenspeed`];
//! - request-type bytes, identities and the death sentinel
//!   ([`RequestType`], [`engine_identity`], [`is_engine_dead`]) and which
//!   frames carry which message ([`MessageKind`], [`decode_message`],
//!   [`encode_message`]);
//! - [`typed`]: one Rust struct per wire struct, generated from the tables,
//!   converting to and from values and encoding straight to bytes;
//! - [`hot`]: the fast borrowing decoders of the per-token path
//!   ([`decode_outputs`], [`decode_request`],
//!   [`hot::tokenspeed::decode_batch`]), with the verdicts of
//!   [`decode_message`] (and the direct decoder behind
//!   [`typed::decode_typed`] for requests);
//! - [`translate`] (feature `translate`, opt-in): the gateway layer:
//!   request translation, logprob shaping, stop-string detection,
//!   finish reasons (docs/translation.md);
//! - [`view`]: the canonical JSON view of docs/case-format.md §6.
//!
//! # A gateway's codec path
//!
//! Pick the table of the engine's release, build a request the engine
//! serves, encode it, and read the engine's answers back ([`guide`] walks
//! through every step, sending, aborting and errors included):
//!
//! ```
//! use engine_protocol::typed::{decode_typed, EngineCoreRequest, Eos};
//! use engine_protocol::{release, Dialect, Limits};
//!
//! // 1. The table of the engine's release (from its registration).
//! let v033 = release(Dialect::Vllm, "0.33.0").expect("a table for 0.33.0");
//! // 2. Build: the id, the prompt, max_tokens and the model's EOS facts
//! //    are required (the engine needs them and its decoder does not check).
//! let request = EngineCoreRequest::builder("req-1", vec![1_i64, 15043, 29892], 64, Eos::token(2))
//!     .temperature(0.7)
//!     .stop(["\n\n"])
//!     .arrival_time(1_700_000_000.5)
//!     .build()?;
//! assert_eq!(request.serving_problems(Some(512)), []);
//! // 3. Encode for that release: [request-type byte (ADD), payload].
//! let frames = request.encode_checked(v033)?;
//! assert_eq!(frames[0], [0x00]);
//! assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x16]); // a 22-element array
//!
//! // 4. Decode back, as the engine would (drift: fields this table lacks).
//! let (decoded, drift) = decode_typed::<EngineCoreRequest>(v033, &frames, &Limits::default())?;
//! assert!(drift.is_empty());
//! assert_eq!(decoded, request);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
//!
//! The same construction, with the served model's prompt and EOS facts, is
//! sent to a live vLLM engine by the repository's replay scenario
//! `golden/replay/built_requests.json`, which checks that it is served.
//!
//! The typed encoder (`encode`) checks types, enum values and release
//! fields; `encode_checked` also runs the rules the engine's decoder runs
//! (`__post_init__`: ranges, relations) and refuses what the engine fails
//! at run time; so does [`translate::translate`] (feature `translate`).
//! Nothing the engine would refuse is sent: an engine that meets such a
//! payload stops reading input (docs/wire-protocol.md §10.1).
//!
//! On the output socket, [`decode_outputs`] reads an `EngineCoreOutputs`
//! batch without copying token ids (the per-token path), with the same
//! verdict as the schema-driven [`decode_message`], its rare fields by name
//! and typed, and the owned typed batch on request; [`typed::decode_typed`]
//! gives owned structs directly. Every decoder takes its frames as any
//! `&[impl AsRef<[u8]>]`.
//!
//! # Errors
//!
//! Every failure is a typed error naming where it happened, never a panic:
//! - [`Error`] (decode and encode): a [`RejectClass`] (the golden format's
//!   `malformed`, `type`, `missing-field`, `enum`, `validation`, `limits`,
//!   `frames`), the path of the offending value
//!   (`EngineCoreRequest.sampling_params.temperature`), a detail, and for
//!   a request the engine would fail at run time the [`ServingProblem`];
//!   [`classify`] turns a decode into an [`Outcome`];
//! - [`Violation`]: a decoder rule's verdict on one struct (its fields and
//!   message), which the codec turns into a `validation` error;
//! - [`UnknownRelease`] / [`UnknownDialect`]: no table for a dialect and
//!   version, a dialect name this crate does not know;
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
//! `#[non_exhaustive]`: [`Dialect`], [`RejectClass`], [`MessageKind`], the
//! wire enums ([`typed::FinishReason`], which gained `Repetition` in 0.33,
//! [`typed::EngineCoreEventType`], [`typed::RequestOutputKind`],
//! [`typed::Constraint`], [`typed::tokenspeed::Modality`]), the error
//! enums, [`schema::Rules`], [`validate::Check`]. The schema's type
//! language ([`schema::Ty`], [`schema::Layout`], [`schema::Default`],
//! [`schema::TensorKind`]) and the wire's request types ([`RequestType`])
//! stay exhaustive: a codec must handle every one. TokenSpeed's
//! [`typed::tokenspeed::Finish`] has `Other` for any string the engine
//! sends.
//!
//! One module is hidden from these docs, `internal` (`#[doc(hidden)]`):
//! what this repository's fuzzers, tests and benches need below the API
//! (structure-aware generation with feature `arbitrary`, the MessagePack
//! reader and writer, the encoder without the validations, the direct
//! decoders without their hand-over), with no stability promise.
//!
//! # Provenance
//! Wire facts come from the engines' own classes and encoders (goldens under
//! `golden/`) and from docs/wire-protocol.md and docs/tokenspeed-wire.md;
//! no engine source is copied.

// The house, bottom up (protocol/tests/architecture.rs checks that no
// module uses one above it): msgpack, error; schema (pure data); registry
// (per-struct caches); value; frames, validate; decode, encode; message;
// view, typed; hot; translate; arbitrary.
#[cfg(feature = "arbitrary")]
mod arbitrary;
mod decode;
mod encode;
mod engine;
mod error;
mod frames;
pub mod guide;
pub mod hot;
mod message;
mod msgpack;
mod registry;
pub mod schema;
pub mod translate;
pub mod typed;
pub mod validate;
mod value;
pub mod view;

/// The shared-buffer type of this crate's API (`bytes::Bytes`: frames
/// from [`typed::EngineCoreRequest::encode_shared`], an array's bytes in
/// [`typed::TokenArray`]), so that a user's buffers are of the same version.
pub use bytes;
pub use decode::{decode_payload, Decoded, Limits, VLLM_ENGINE_MAX_DEPTH};
pub use encode::{encode_into, encode_payload, ZERO_COPY_THRESHOLD};
pub use engine::{EngineCodec, Registration, ReleaseMatch};
pub use error::{Error, Outcome, RejectClass, ServingProblem, Violation};
pub use frames::{engine_identity, engine_index, is_engine_dead, RequestType, ENGINE_CORE_DEAD};
pub use hot::{decode_outputs, decode_request};
pub use message::{decode_message, decode_message_with, encode_message, MessageKind};
pub use schema::{
    release, Dialect, ReleaseSchema, UnknownDialect, UnknownRelease, TOKENSPEED_0_1_1, TOKENSPEED_GIT_57B49061,
    VLLM_0_32_0, VLLM_0_33_0, VLLM_0_34_0,
};
/// The JSON library of this crate's API ([`typed::JsonSchema::from_json`],
/// the translation layer's requests, [`view`]), so that a user's values
/// are of the same version.
pub use serde_json;
pub use value::{numpy_dtype, torch_dtype, DType, Elem, Fields, Numbers, StructValue, Tensor, Value};

/// For this repository's fuzzers, tests and benches only: the pieces they
/// need below the API (the MessagePack reader and writer, the decoder's
/// work counter and shape resolution, the encoder without the validations,
/// the direct decoders without their hand-over, structure-aware generation
/// with feature `arbitrary`). No stability promise.
#[doc(hidden)]
pub mod internal {
    /// Structure-aware generation of messages from the schema tables
    /// (feature `arbitrary`; the fuzz targets and property tests).
    #[cfg(feature = "arbitrary")]
    pub mod arbitrary {
        pub use crate::arbitrary::*;
    }

    /// The MessagePack reader and writer under the codec.
    pub mod msgpack {
        pub use crate::msgpack::*;
    }

    pub use crate::decode::{resolve_shape, work};
    pub use crate::encode::encode_payload_unvalidated;
    pub use crate::hot::request::decode_request_direct;
    pub use crate::hot::tokenspeed_direct::decode_batch_direct;
    pub use crate::message::{engine_core_request_value, sampling_params_value};

    /// A rare batch field of the fast path by table position, as the
    /// schema-driven decoder decoded it (the oracles compare the two
    /// decoders field by field).
    pub fn batch_rare_field<'v>(o: &'v crate::hot::Outputs<'_>, position: usize) -> Option<&'v crate::Value> {
        o.other.iter().find(|(i, _)| *i == position).map(|(_, v)| v)
    }

    /// A rare output field of the fast path by table position (as
    /// [`batch_rare_field`]).
    pub fn output_rare_field<'v>(o: &'v crate::hot::Output<'_>, position: usize) -> Option<&'v crate::Value> {
        o.other.iter().find(|(i, _)| *i == position).map(|(_, v)| v)
    }
}

/// Runs one message through the decoder and classifies the result: the one
/// outcome classification shared by verify, fuzz and the live runner.
pub fn classify(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Outcome {
    crate::frames::with_frame_refs(frames, |frames| match decode_message(release, kind, frames, limits) {
        Ok(d) => Outcome::Accept { drift: d.drift },
        Err(e) => Outcome::Reject(e.class),
    })
}
