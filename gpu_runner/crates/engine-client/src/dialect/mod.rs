//! The dialects the runner speaks, and the only place one is named: the
//! [`EngineWire`] trait (in the style of tokio-util's `Encoder` /
//! `Decoder`: the gateway's actor owns the sockets, the dialect turns typed
//! requests into input frames and output frames into typed steps) and its
//! two implementations, [`Vllm`] (vLLM's engine-core protocol) and
//! [`Tokenspeed`] (TokenSpeed 0.1.1's msgpack dialect).
//!
//! Wire facts shared by both dialects (docs/runner/transport.md "Transport"
//! and docs/runner/tokenspeed.md "TokenSpeed"; docs/wire-protocol.md;
//! docs/tokenspeed-wire.md §2, §7):
//!
//! - the topology and the handshake are the same: a ROUTER on tcp for
//!   HELLO / INIT / READY, a ROUTER for input on which the engine's first
//!   message is its registration, one PULL per engine for output; HELLO,
//!   INIT, READY and the registration are read with the release's tables
//!   (`crate::transport::handshake`);
//! - input is `[identity, type byte, payload, aux...]`: `00` ADD, `01`
//!   ABORT (a plain array of request ids in both), and in vLLM `03`
//!   UTILITY;
//! - output is `[batch, aux...]` or the one frame `ENGINE_CORE_DEAD`; a
//!   batch carries outputs for several requests, demultiplexed by request
//!   id; a client ABORT produces no output in either dialect.
//!
//! What differs is the batch (vLLM's `EngineCoreOutputs` with
//! `EngineCoreOutput`s, TokenSpeed's columnar `BatchTokenIDOutSlim` with one
//! row per rid), whether UTILITY calls exist, and what a batch that does
//! not decode does to the requests in flight.

use std::fmt;

use bytes::Bytes;
use engine_protocol::is_engine_dead;
use engine_protocol::{Limits, ReleaseSchema, Value};

pub mod tokenspeed;
pub mod vllm;

pub use tokenspeed::Tokenspeed;
pub use vllm::Vllm;

/// Why the dialect could not encode or decode a message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The message does not encode with the release's tables.
    #[error("cannot encode {what}: {source}")]
    Encode { what: &'static str, source: engine_protocol::Error },
    /// An output batch that does not decode (the decoder's error names the
    /// path).
    #[error("{0}")]
    Decode(engine_protocol::Error),
    /// An engine-bound request without a string request id.
    #[error("{0} without a string request id")]
    NoRequestId(&'static str),
    /// The dialect has no such message (TokenSpeed has no UTILITY).
    #[error("the {dialect} dialect has no {what}")]
    Unsupported { dialect: &'static str, what: &'static str },
}

/// A UTILITY reply found in an output batch (vLLM only):
/// `utility_output = [call_id, failure_message, [type_info, result]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilityReply {
    /// The call id, when it is an unsigned 64-bit integer.
    pub call_id: Option<u64>,
    /// The call id as it came, for errors.
    pub raw_call_id: Value,
    /// The engine's failure message, when the call failed.
    pub failure: Option<String>,
    /// The result value (nil when none).
    pub result: Value,
}

/// What a batch carries besides its outputs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchInfo {
    /// Paths the decoder reported as drift (an engine newer than its
    /// table).
    pub drift: Vec<String>,
    /// A UTILITY reply, if the batch holds one.
    pub utility: Option<UtilityReply>,
    /// The producing engine's index as the batch states it (vLLM
    /// `EngineCoreOutputs.engine_index`); `None` where the dialect has none.
    pub engine_index: Option<i64>,
    /// A data-parallel control message, if the batch is one (vLLM).
    pub dp_control: Option<DpControl>,
}

/// vLLM's data-parallel wave messages, engine to client
/// (`EngineCoreOutputs.wave_complete` / `.start_wave`; docs/wire-protocol.md
/// "Outputs"). Only a `DPEngineCoreProc` (data parallel on an MoE model)
/// sends them; a dense model's ranks are independent engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DpControl {
    /// The engines went idle: wave `n` is over.
    WaveComplete(i64),
    /// A request arrived for wave `n` while the engines were idle.
    StartWave(i64),
}

impl DpControl {
    /// `wave_complete` or `start_wave`.
    pub fn name(self) -> &'static str {
        match self {
            DpControl::WaveComplete(_) => "wave_complete",
            DpControl::StartWave(_) => "start_wave",
        }
    }

    /// The wave number it carries.
    pub fn wave(self) -> i64 {
        match self {
            DpControl::WaveComplete(w) | DpControl::StartWave(w) => w,
        }
    }
}

/// Where a decoded batch's outputs go: the gateway's demultiplexer. Each
/// output is offered with its request id; the step is built only when
/// someone waits for it (no work for an orphan).
pub trait Demux<S> {
    /// One output for request `id`; `terminal` when it finishes the
    /// request.
    fn offer(&mut self, id: &str, terminal: bool, build: impl FnOnce() -> S);
}

/// One engine dialect on the wire: the encoder of the gateway's input and
/// the decoder of the engine's output. Implemented by marker types; the
/// release (a runtime choice for vLLM: 0.32.0 or 0.33.0) is passed in.
pub trait EngineWire: Send + Sync + Sized + 'static {
    /// The engine-bound request the gateway's translation produces
    /// (`EngineCoreRequest` / `TokenizedGenerateReqInput`, as a wire value
    /// of the release: `raw.set` scenarios edit it by path).
    type Request: Send + Sync;
    /// One output for one request, as a request's stream yields it.
    type Step: Clone + fmt::Debug + PartialEq + Send + 'static;
    /// The dialect's name, as recorded files and reports spell it.
    const NAME: &'static str;
    /// Whether the engine takes UTILITY calls (`03`).
    const UTILITIES: bool;
    /// Whether a batch that does not decode fails every request in flight
    /// on the engine (vLLM: its outputs may be in it) or is counted and
    /// dropped (TokenSpeed: docs/runner/tokenspeed.md "Gateway side").
    const BAD_BATCH_FAILS_REQUESTS: bool;
    /// The name of the engine-bound request message, for errors.
    const REQUEST_NAME: &'static str;

    /// The request id of an engine-bound request.
    fn request_id(req: &Self::Request) -> Option<&str>;

    /// The input frames of an ADD: `[00, payload, aux...]`.
    fn encode_add(release: &'static ReleaseSchema, req: &Self::Request) -> Result<Vec<Vec<u8>>, WireError>;

    /// The input frames of an ABORT for `ids`: `[01, array of ids]`.
    fn encode_abort(release: &'static ReleaseSchema, ids: &[String]) -> Result<Vec<Vec<u8>>, WireError>;

    /// The input frames of a START_DP_WAVE (vLLM only): `[02, [wave,
    /// exclude_engine_index or nil]]`.
    fn encode_start_wave(
        release: &'static ReleaseSchema,
        wave: i64,
        exclude: Option<u16>,
    ) -> Result<Vec<Vec<u8>>, WireError> {
        let _ = (release, wave, exclude);
        Err(WireError::Unsupported { dialect: Self::NAME, what: "START_DP_WAVE" })
    }

    /// The input frames of a UTILITY call (vLLM only).
    fn encode_utility(
        release: &'static ReleaseSchema,
        call_id: u64,
        method: &str,
        args: Vec<Value>,
    ) -> Result<Vec<Vec<u8>>, WireError> {
        let _ = (release, call_id, method, args);
        Err(WireError::Unsupported { dialect: Self::NAME, what: "UTILITY call" })
    }

    /// Decodes one output batch (`[payload, aux...]`, not the sentinel)
    /// and offers each output to `demux`, in batch order.
    fn decode_batch(
        release: &'static ReleaseSchema,
        frames: Vec<Bytes>,
        limits: &Limits,
        demux: &mut impl Demux<Self::Step>,
    ) -> Result<BatchInfo, WireError>;

    /// Whether an output frame set is the death sentinel
    /// (`ENGINE_CORE_DEAD`, the same bytes in both dialects).
    fn is_death_sentinel(frames: &[Bytes]) -> bool {
        match frames {
            [only] => is_engine_dead(&[only.as_ref()]),
            _ => false,
        }
    }

    /// The token ids a step carries (delta), for stop detection and
    /// results.
    fn step_tokens(step: &Self::Step) -> &[i64];
}
