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
//! - a second dialect, TokenSpeed 0.1.1 (tables in [`schema::tokenspeed`],
//!   receive path in [`validate::tokenspeed`]; docs/tokenspeed-wire.md),
//!   through the same [`decode_message`] / [`encode_message`];
//! - [`typed`]: typed access for gateways: one Rust struct per wire struct,
//!   generated from the tables, converting to and from values and encoding
//!   straight to bytes; finish reasons, structured-output constraints,
//!   output batches.
//!
//! # Example
//!
//! Build a request with the typed API, encode it for vLLM 0.33.0, and
//! decode it back:
//!
//! ```
//! use engine_protocol::typed::{decode_typed, EngineCoreRequest, SamplingParams, StopStrings};
//! use engine_protocol::{release, Limits};
//!
//! let v033 = release("vllm", "0.33.0").expect("a table for 0.33.0");
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
//! // [request-type byte (ADD), payload]: a 22-element array.
//! let frames = request.encode(v033)?;
//! assert_eq!(frames[0], [0x00]);
//! assert_eq!(&frames[1][..3], &[0xdc, 0x00, 0x16]);
//!
//! let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
//! let (decoded, drift) = decode_typed::<EngineCoreRequest>(v033, &refs, &Limits::default())?;
//! assert!(drift.is_empty());
//! assert_eq!(decoded, request);
//! # Ok::<(), engine_protocol::Error>(())
//! ```
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
pub mod hot;
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
pub use hot::decode_outputs;
pub use message::decode_message_with;
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
