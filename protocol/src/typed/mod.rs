//! Typed access for gateways: the wire structs as Rust structs, generated
//! from the schema tables ([`generated`]), with conversions to and from the
//! dynamic [`Value`](crate::Value) tree and a direct encoder; enums with names; the
//! structured-output constraint as a Rust enum (so exactly one constraint is
//! representable); and read-only views of output batches over decoded values.
//!
//! Wire facts (docs/wire-protocol.md §7.2, §7.4, §8.4): `FinishReason` is 0 STOP,
//! 1 LENGTH, 2 ABORT, 3 ERROR, 4 REPETITION; `stop_reason` is nil, a token id
//! (stop token) or a string (set by a frontend, or `repetition_detected`);
//! `RequestOutputKind` is 0 CUMULATIVE, 1 DELTA, 2 FINAL_ONLY;
//! `StructuredOutputsParams` holds exactly one of `json`, `regex`, `choice`,
//! `grammar`, `json_object`, `structural_tag` (`json_object: false` counts).
//!
//! # The generated structs
//!
//! One struct per wire struct of the tables ([`EngineCoreRequest`],
//! [`SamplingParams`], [`EngineCoreOutputs`], [`EngineCoreOutput`],
//! [`LogprobsLists`], [`LogprobsTensors`], [`UtilityOutput`],
//! [`HandshakeStatus`], [`EngineHandshakeMetadata`],
//! [`EngineCoreReadyResponse`], [`UtilityRequest`], [`StartDpWave`], and
//! every struct they nest), holding the
//! union of the fields of the supported releases. A field only some releases
//! have says so in its docs and is an `Option` whose `None` is the default;
//! encoding for a release that lacks it fails (`validation`) when it is set
//! away from its default, rather than dropping it. The differences between
//! 0.32.0 and 0.33.0 (docs/wire-protocol.md §11.1): `EngineCoreOutput.error`,
//! `PoolingParams.late_chunking_params` and three ready-response keys, all
//! since 0.33.0.
//!
//! Rust types follow the table types: `int` is `i128`, since msgspec takes
//! any MessagePack integer for a Python `int`, -2^63 ..= 2^64-1
//! (docs/wire-protocol.md §5.6, §6.4; call ids use the whole range in
//! practice, §7.11), and an `i128` outside that range fails to encode
//! (`type`); `list[int]` and `set[int]` are [`IntList`] (held as `i64`s
//! unless an element is above `i64::MAX`, so token-id runs are copied and
//! written in one go); `float` `f64`, `str` and `Literal[...]` `String`
//! (checked on encode), `X | None` `Option`, other `list` and `set` `Vec`
//! (a set in wire order), `dict` a `Vec` of entries in wire order, integer
//! enums the enums below, tensors [`Tensor`](crate::Tensor), `Any` (and multimodal nested
//! tensors) [`Value`](crate::Value), and the unions [`StopReason`], [`StopStrings`],
//! [`JsonSchema`], [`ParallelValue`].
//!
//! Layouts (docs/wire-protocol.md §5.1, §4.4, §7, §8): `EngineCoreRequest`,
//! `EngineCoreOutputs`, `EngineCoreOutput`, `LoRARequest`, `PoolingParams`
//! and `UtilityOutput` are positional arrays of every field; `LogprobsLists`
//! and `LogprobsTensors` are named tuples; `SamplingParams` is a map of the
//! fields that differ from their defaults (`map16` header: 43 fields);
//! dataclasses (`StructuredOutputsParams`, `SchedulerStats`, the ready
//! response) are maps of every field; HELLO and READY are plain dicts.
//!
//! Each struct keeps what its tables do not know (`unknown`): trailing
//! elements of a positional struct, unknown keys of a map, which the decoder
//! reports as drift (docs/wire-protocol.md §6.1, §6.3). [`decode_typed`] fills them
//! in and the direct encoder writes them back after the known fields;
//! `to_value` cannot carry them (the value tree has no place for them) and
//! leaves them out.
//!
//! The direct encoder (`encode`) writes the struct straight to bytes, with
//! the rules of [`crate::encode_payload`] (docs/wire-protocol.md §5, tensors §5.11),
//! byte-identical to vLLM's encoder; it checks types, enum values and
//! release fields but not the rules vLLM's decoder runs (`__post_init__`,
//! [`crate::validate`]). [`EngineCoreRequest::encode_checked`] runs those
//! too (on the struct for plain sampling parameters, through the value
//! tree otherwise), as `encode_message(release, kind,
//! &x.to_value(release)?)` does for every message.
//!
//! The decoder ([`decode_typed`]) has the verdicts of [`decode_message`](crate::decode_message):
//! for `EngineCoreRequest` it is the direct decoder
//! [`crate::hot::decode_request`] (bytes straight into the struct, no value
//! tree for the common fields, the rare ones through the schema-driven
//! decoder on their own bytes; anything it does not read itself, drift
//! included, handed to the reference path), for the other messages
//! [`decode_typed_via_value`] (`decode_message`, then the conversion). The
//! typed API accepts exactly what `decode_message` accepts: every field
//! holds every value the wire carries for its type (the `int_range` tests
//! hold the paths to it at each integer boundary).
//!
//! `Float` fields are `f64`: a float field that arrived holding an integer
//! (msgspec writes the Python int it was given) re-encodes as a float64.
#![warn(missing_docs)]

#[rustfmt::skip]
pub mod generated;
pub(crate) mod wire;
// TokenSpeed's wire messages as typed structs (docs/tokenspeed-wire.md);
// documented by its own `//!` (an outer doc here would resolve its links
// in this module).
mod sampling_rules;
pub mod tokenspeed;

pub use generated::*;
pub(crate) use sampling_rules::plainly_valid;

mod int_list;
pub use int_list::{IntList, Iter as IntListIter, WIRE_INT_MAX, WIRE_INT_MIN};
mod serving;
pub use serving::ServingProblem;
mod structured;
pub use structured::{Constraint, StructuredOutputsParams};
mod builder;
pub use builder::{Eos, RequestBuilder, StopIds};
mod token_ids;
pub use token_ids::{ArrayIds, Ids as TokenIdsIter, TokenArray, TokenIds, INT32_DTYPE, UINT32_DTYPE};
mod enums;
pub use enums::{
    EngineCoreEventType, FinishReason, JsonSchema, ParallelValue, RequestOutputKind, StopReason, StopStrings,
    UtilityResult,
};
mod messages;
pub(crate) use messages::abort_ids;
pub use messages::{decode_abort, decode_typed, decode_typed_via_value, encode_abort, DecodeFrames, Message};

/// What the typed encoder takes from the sender's environment, as vLLM's
/// encoder does: the size from which an array goes to an aux frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncodeOptions {
    /// vLLM's `VLLM_MSGPACK_ZERO_COPY_THRESHOLD` (default 256): an array or
    /// tensor of fewer bytes is written inline (ext 3), a larger one to an
    /// aux frame of the message.
    pub zero_copy_threshold: usize,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions { zero_copy_threshold: crate::encode::ZERO_COPY_THRESHOLD }
    }
}

impl EncodeOptions {
    /// With another zero-copy threshold (an engine started with
    /// `VLLM_MSGPACK_ZERO_COPY_THRESHOLD` set: vLLM's frontends read the
    /// same variable).
    pub fn with_zero_copy_threshold(mut self, bytes: usize) -> Self {
        self.zero_copy_threshold = bytes;
        self
    }
}
