//! Fast decoders for the two messages on a gateway's hot path, straight
//! from the frames to typed fields, no [`Value`](crate::Value) tree for what every
//! message carries:
//!
//! - [`decode_outputs`]: a borrowing decoder of `EngineCoreOutputs` for a
//!   gateway's output loop (below);
//! - [`decode_request`]: a direct decoder of `EngineCoreRequest` into the
//!   typed struct (for an engine, a mock engine or a recorder reading ADDs;
//!   `typed::decode_typed::<EngineCoreRequest>` runs it), with the verdicts
//!   of `decode_message` plus the typed conversion (module `request`);
//!   [`decode_request_shared`] the same on frames held as `bytes::Bytes`,
//!   a 0.34.0 prompt array then a view of its received frame (zero copy);
//! - [`tokenspeed::decode_batch`]: TokenSpeed's output batch straight into
//!   the typed `BatchTokenIDOutSlim`, with the result of the typed
//!   TokenSpeed API's `decode_typed`.
//!
//! [`decode_outputs`] gives the verdict [`decode_message`](crate::decode_message) gives on the same
//! frames and limits (accept or reject, the same reject class and error, the
//! same drift paths), and on accept the same field values, in another form:
//!
//! - `request_id` as a `&str` into the payload frame, `new_token_ids` as an
//!   [`IntRun`] (the msgpack integers, validated, iterated on demand),
//!   `finish_reason` as [`FinishReason`](crate::typed::FinishReason), `stop_reason` as a borrowed
//!   [`StopRef`], `num_nans_in_logits` as an `i64`;
//! - `new_logprobs` as three [`TensorRef`]s: dtype, shape and the bytes,
//!   borrowed from the payload (ext 3 or `bin`) or from the aux frame the
//!   index names;
//! - the batch's `engine_index`, `timestamp`, `wave_complete`, `start_wave`,
//!   `weight_version` as plain values;
//! - every other field that is not nil (`kv_transfer_params`,
//!   `trace_headers`, `events`, `prefill_stats`, the 0.33 `error`,
//!   `scheduler_stats`, `utility_output`, `finished_requests`, ...) through
//!   the schema-driven decoder on its own bytes, read by name and typed
//!   ([`Output::error`], [`Outputs::utility_output`], ...; module `owned`),
//!   and every field of the batch as the owned typed struct
//!   ([`Outputs::to_owned`]). So is an integer field holding a value above
//!   `i64::MAX` (legal on the wire, never sent by an engine): the borrowed
//!   field then keeps its default, `to_owned` has the value.
//!
//! How the verdict stays the same: the fields read here get the checks the
//! schema-driven decoder applies to them (types, UTF-8, the
//! `FinishReason` values, struct lengths, tensor dtype, shape and buffer
//! rules, aux indices, the tensor byte budget, the nesting limit counted the
//! same way, trailing bytes; docs/wire-protocol.md §6-§8, docs/limits.md),
//! and the other fields go through that decoder itself. Whatever this reader
//! does not accept is handed, whole, to [`decode_message`](crate::decode_message), whose error is
//! returned: error classes, paths and texts are its own. A message that
//! reports drift (an engine newer than the table: extra trailing elements,
//! unknown keys) is also decoded by [`decode_message`](crate::decode_message) for its drift paths,
//! in wire order; drift is rare, and that keeps one definition of it.
//!
//! The parts: `refs` (the borrowed forms), `outputs` (the borrowing
//! decoder, with the wire facts it relies on), `owned` (rare fields and
//! owned structs), `request` (the direct `EngineCoreRequest` decoder),
//! `tokenspeed` (TokenSpeed's batch).

mod owned;
pub(crate) mod request;
// The TokenSpeed batch decoder, whose public face is [`tokenspeed`] (its
// direct path alone is `crate::internal`'s).
#[path = "tokenspeed.rs"]
pub(crate) mod tokenspeed_direct;

/// TokenSpeed's output batch (`BatchTokenIDOutSlim`) read straight into the
/// typed struct, with the verdict, struct and drift of
/// `typed::tokenspeed::decode_typed` (docs/tokenspeed-wire.md §7).
pub mod tokenspeed {
    pub use super::tokenspeed_direct::decode_batch;
}

pub use request::{decode_request, decode_request_shared};

mod outputs;
mod refs;
pub use outputs::{decode_output_value, decode_outputs};
pub use refs::{IntIter, IntRun, LogprobsRef, Output, Outputs, StopRef, TensorRef};

/// How `typed::decode_typed` reads each message: the direct decoder for
/// `EngineCoreRequest`, the reference path (`decode_typed_via_value`) for
/// the others (the structs sit below this module; it picks their decoder).
mod typed_decoders {
    use crate::decode::Limits;
    use crate::error::Error;
    use crate::schema::ReleaseSchema;
    use crate::typed::{
        decode_typed_via_value, DecodeFrames, EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest,
        EngineHandshakeMetadata, HandshakeStatus, StartDpWave, UtilityOutput, UtilityRequest,
    };

    impl DecodeFrames for EngineCoreRequest {
        fn decode_frames(
            release: &'static ReleaseSchema,
            frames: &[&[u8]],
            limits: &Limits,
        ) -> Result<(Self, Vec<String>), Error> {
            super::request::decode_request_refs(release, frames, limits)
        }
    }

    macro_rules! via_value {
        ($($t:ident),*) => {$(
            impl DecodeFrames for $t {
                fn decode_frames(
                    release: &'static ReleaseSchema,
                    frames: &[&[u8]],
                    limits: &Limits,
                ) -> Result<(Self, Vec<String>), Error> {
                    decode_typed_via_value::<Self>(release, frames, limits)
                }
            }
        )*};
    }
    via_value!(
        EngineCoreOutputs,
        UtilityOutput,
        EngineCoreReadyResponse,
        HandshakeStatus,
        EngineHandshakeMetadata,
        UtilityRequest,
        StartDpWave
    );
}
