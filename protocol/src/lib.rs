//! `engine-protocol`: a reference implementation of the wire protocol that
//! LLM gateways speak to headless vLLM EngineCore processes (ZeroMQ
//! multipart frames carrying msgspec-encoded MessagePack).
//!
//! Pure: no I/O, no sockets, no files. Layers, bottom up:
//!
//! - [`msgpack`]: tokens and msgspec's byte forms;
//! - [`schema`]: one table per engine release (field order, types,
//!   defaults): versions are data;
//! - [`decode`] / [`encode`]: the codec, written once against the tables,
//!   byte-identical to vLLM's encoder and as tolerant as its decoder, with
//!   drift reported and documented [`decode::Limits`];
//! - [`validate`]: the rules vLLM's decoder runs (`__post_init__`);
//! - [`frames`] / [`message`]: request-type bytes, identities, the death
//!   sentinel, and which frames carry which message;
//! - [`view`]: the canonical JSON view of docs/case-format.md §6;
//! - [`typed`]: typed access for gateways (finish reasons, structured-output
//!   constraints, output batches).
//!
//! # Provenance
//! Wire facts come from vLLM's own classes and encoder (goldens under
//! `golden/vllm/`) and from docs/wire-protocol.md;
//! no vLLM source is copied.

#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod decode;
pub mod encode;
pub mod error;
pub mod frames;
pub mod message;
pub mod msgpack;
pub mod schema;
pub mod translate;
pub mod typed;
pub mod validate;
pub mod value;
pub mod view;

pub use decode::{Decoded, Limits};
pub use error::{Error, Outcome, RejectClass};
pub use message::{decode_message, encode_message, MessageKind};
pub use schema::{release, ReleaseSchema};
pub use value::{StructValue, Tensor, Value};

/// Runs one message through the decoder and classifies the result: the one
/// outcome classification shared by verify, fuzz and the live runner.
pub fn classify(release: &'static ReleaseSchema, kind: MessageKind, frames: &[&[u8]], limits: &Limits) -> Outcome {
    match decode_message(release, kind, frames, limits) {
        Ok(d) => Outcome::Accept { drift: d.drift },
        Err(e) => Outcome::Reject(e.class),
    }
}
