//! What every fuzz target checks, beyond "no crash".
//!
//! One entry point per target ([`run`] dispatches by name), each decoding
//! its input and classifying the outcome as every tool of the suite does
//! ([`outcome_of`]), then checking oracles that do not restate the
//! implementation:
//!
//! - **a second reading** (through [`Probe::payload`], in the fuzz crate):
//!   `rmpv`'s generic MessagePack reader agrees on well-formedness;
//! - **the engine's verdict** (the seed tests): a seed cut from a golden
//!   case gets the verdict the engine's own code gave that case (vLLM's or
//!   TokenSpeed's)
//!   ([`agrees_with_verdict`]);
//! - **fixed point**: an accepted message re-encodes, decodes again to the
//!   same value (floats by bits, so NaN equals NaN; `list[int]` compares
//!   by elements whether kept unboxed or not; hence the same canonical
//!   view), with no drift, and encoding that value gives the same bytes again;
//! - **invariants of accepted values**: every tensor holds exactly
//!   itemsize times the product of its shape in bytes, with a dtype its
//!   kind accepts; the value nests no deeper than `Limits::max_depth` (plus
//!   [`DEFAULT_TREE_DEPTH`] for defaults the decoder filled in);
//! - the frame layer (target `frames`): see [`frames`]; its expectations
//!   come from the wire facts (docs/wire-protocol.md), written here as
//!   literals, not from `engine_protocol::frames`;
//! - the TokenSpeed targets (`tokenspeed_*`): the same checks on the
//!   messages of both TokenSpeed versions (0.1.1 and the 08-03 wire,
//!   `git-57b49061`), plus their frame rules (docs/tokenspeed-wire.md §2)
//!   and the prefix rule between them (§12), see [`tokenspeed_frame_rules`].
//!
//! What needs more than `std` and `engine-protocol` (the generic-decoder
//! comparison with `rmpv`, the allocation bound) plugs in through
//! [`Probe`]: the fuzz crate (`fuzz/`) runs these oracles with both;
//! `protocol/tests/fuzz_seed_corpus.rs` runs them with [`NoProbe`].

use std::borrow::Cow;

use engine_protocol::encode_payload;
use engine_protocol::schema::{tokenspeed, vllm, Dialect, Ty, VLLM_RELEASES};
use engine_protocol::{decode_message, encode_message, Error, Limits, MessageKind, Outcome, ReleaseSchema, Value};
use engine_protocol::{decode_payload, Decoded};

use crate::hex::frames_shown;
use crate::split::split;

mod frame_layer;
mod hot;
mod invariants;
mod tokenspeed_targets;
pub use frame_layer::{agrees_with_verdict, frames, wire_has_aux_frames, wire_type_byte};
pub use hot::{hot_outputs, hot_request, same_hot_fields};
use invariants::fixed_point;
pub use invariants::{check_accepted, same_value};
pub use tokenspeed_targets::{
    tokenspeed_abort, tokenspeed_frame_rules, tokenspeed_handshake, tokenspeed_outputs, tokenspeed_ready_response,
    tokenspeed_request, tokenspeed_sampling_params,
};

/// What an oracle found: where the fast decoder and the schema-driven
/// value differ, or how a decoder and the engine's verdict disagree.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The first path where the fast decoder's fields and the value differ.
    #[error("{path}")]
    HotFieldDiffers { path: String },
    /// The two have another number of outputs.
    #[error("outputs: {hot} vs {value}")]
    OutputCount { hot: usize, value: usize },
    /// An output's raw bytes do not decode as a whole value.
    #[error("{path}: {error}")]
    WholeOutput { path: String, error: Box<engine_protocol::Error> },
    /// The decoder's outcome is not the engine's verdict.
    #[error("{version} {kind}: the engine said {verdict}, the decoder {outcome}")]
    Disagrees { version: &'static str, kind: &'static str, verdict: crate::outcome::EngineVerdict, outcome: String },
}

pub(crate) fn differs(path: impl Into<String>) -> OracleError {
    OracleError::HotFieldDiffers { path: path.into() }
}

/// The fuzz targets, as named in `fuzz/Cargo.toml` and `fuzz/corpus/`.
pub const TARGETS: &[&str] = &[
    "engine_core_request",
    "sampling_params",
    "structured_outputs_params",
    "engine_core_outputs",
    "utility_output",
    "handshake",
    "ready_response",
    "frames",
    "roundtrip",
    "hot_outputs",
    "hot_request",
    "tokenspeed_request",
    "tokenspeed_sampling_params",
    "tokenspeed_abort",
    "tokenspeed_outputs",
    "tokenspeed_handshake",
    "tokenspeed_ready_response",
];

/// Targets whose input is split into frames by `split::split`; the others
/// take their input as one payload frame (`roundtrip` as generator input).
pub const MULTI_FRAME_TARGETS: &[&str] = &[
    "engine_core_request",
    "engine_core_outputs",
    "utility_output",
    "frames",
    "hot_outputs",
    "hot_request",
    "tokenspeed_request",
    "tokenspeed_abort",
    "tokenspeed_outputs",
];

/// How much deeper than the wire a decoded value may nest: defaults the
/// decoder fills in (`SchedulerStats.prefix_cache_stats` is a fresh
/// `PrefixCacheStats` holding a dict) are containers the wire never had.
pub const DEFAULT_TREE_DEPTH: usize = 2;

static SAMPLING_PARAMS: Ty = Ty::Struct(&vllm::SAMPLING_PARAMS);
static STRUCTURED_OUTPUTS_PARAMS: Ty = Ty::Struct(&vllm::STRUCTURED_OUTPUTS_PARAMS);
static TOKENSPEED_SAMPLING_PARAMS: Ty = Ty::Struct(&tokenspeed::SAMPLING_PARAMS);

/// Hooks for checks that need more than this file may depend on.
pub trait Probe {
    /// Runs one decode of `input` (every frame the decoder is given).
    fn decode<R>(&mut self, input: &[&[u8]], f: impl FnOnce() -> R) -> R {
        let _ = input;
        f()
    }

    /// Sees a payload frame and the typed decoder's outcome for it.
    fn payload(&mut self, payload: &[u8], outcome: &Outcome) {
        let _ = (payload, outcome);
    }
}

/// No extra checks.
pub struct NoProbe;

impl Probe for NoProbe {}

/// Runs target `name` on `data`; false when there is no such target.
/// `roundtrip` needs the generator and is run by its own target.
pub fn run<P: Probe>(name: &str, data: &[u8], p: &mut P) -> bool {
    match name {
        "engine_core_request" => engine_core_request(data, p),
        "sampling_params" => sampling_params(data, p),
        "structured_outputs_params" => structured_outputs_params(data, p),
        "engine_core_outputs" => engine_core_outputs(data, p),
        "utility_output" => utility_output(data, p),
        "handshake" => handshake(data, p),
        "ready_response" => ready_response(data, p),
        "frames" => frames(data, p),
        "hot_outputs" => hot_outputs(data, p),
        "hot_request" => hot_request(data, p),
        "tokenspeed_request" => tokenspeed_request(data, p),
        "tokenspeed_sampling_params" => tokenspeed_sampling_params(data, p),
        "tokenspeed_abort" => tokenspeed_abort(data, p),
        "tokenspeed_outputs" => tokenspeed_outputs(data, p),
        "tokenspeed_handshake" => tokenspeed_handshake(data, p),
        "tokenspeed_ready_response" => tokenspeed_ready_response(data, p),
        _ => return false,
    }
    true
}

fn refs<'a>(frames: &'a [Cow<'a, [u8]>]) -> Vec<&'a [u8]> {
    frames.iter().map(|f| &**f).collect()
}

/// `[type byte, payload, aux...]` as one fuzz input: an `ADD`.
pub fn engine_core_request<P: Probe>(data: &[u8], p: &mut P) {
    let frames = split(data);
    each_release(p, MessageKind::EngineCoreRequest, &refs(&frames));
}

/// `[payload, aux...]`.
pub fn engine_core_outputs<P: Probe>(data: &[u8], p: &mut P) {
    let frames = split(data);
    each_release(p, MessageKind::EngineCoreOutputs, &refs(&frames));
}

/// `[payload, aux...]`.
pub fn utility_output<P: Probe>(data: &[u8], p: &mut P) {
    let frames = split(data);
    each_release(p, MessageKind::UtilityOutput, &refs(&frames));
}

/// One payload, read as HELLO/READY (`HandshakeStatus`) and as INIT.
pub fn handshake<P: Probe>(data: &[u8], p: &mut P) {
    each_release(p, MessageKind::HandshakeHello, &[data]);
    each_release(p, MessageKind::HandshakeInit, &[data]);
}

/// One payload.
pub fn ready_response<P: Probe>(data: &[u8], p: &mut P) {
    each_release(p, MessageKind::EngineCoreReadyResponse, &[data]);
}

/// One payload decoded as a bare `SamplingParams`.
pub fn sampling_params<P: Probe>(data: &[u8], p: &mut P) {
    payload(p, "SamplingParams", &SAMPLING_PARAMS, &[data]);
}

/// One payload decoded as a bare `StructuredOutputsParams`.
pub fn structured_outputs_params<P: Probe>(data: &[u8], p: &mut P) {
    payload(p, "StructuredOutputsParams", &STRUCTURED_OUTPUTS_PARAMS, &[data]);
}

/// Decodes with every release whose payload type for `kind` differs from
/// the ones already tried.
fn each_release<P: Probe>(p: &mut P, kind: MessageKind, frames: &[&[u8]]) {
    let mut seen: Vec<&'static Ty> = Vec::new();
    for &release in VLLM_RELEASES {
        let ty = kind.payload_type(release);
        if seen.iter().any(|t| std::ptr::eq(*t, ty)) {
            continue;
        }
        seen.push(ty);
        message(p, release, kind, frames);
    }
}

/// The payload frame of a message, if the frame layer lets it through to
/// the payload decoder. TokenSpeed reads INIT from the last frame
/// (docs/tokenspeed-wire.md 2.5).
fn payload_frame<'a>(release: &ReleaseSchema, kind: MessageKind, frames: &[&'a [u8]]) -> Option<&'a [u8]> {
    if release.dialect == Dialect::TokenSpeed && kind == MessageKind::HandshakeInit {
        frames.last().copied()
    } else if wire_type_byte(kind).is_some() {
        frames.get(1).copied()
    } else {
        frames.first().copied()
    }
}

/// The outcome of a payload decode, classified as
/// [`engine_protocol::classify`] classifies a message decode.
pub fn outcome_of(r: &Result<Decoded, Error>) -> Outcome {
    match r {
        Ok(d) => Outcome::Accept { drift: d.drift.clone() },
        Err(e) => Outcome::Reject(e.class),
    }
}

/// Decodes one message and runs every check on it; returns the outcome and,
/// when accepted, the value.
pub fn message<P: Probe>(
    p: &mut P,
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
) -> (Outcome, Option<Value>) {
    let limits = Limits::default();
    let r = p.decode(frames, || decode_message(release, kind, frames, &limits));
    let outcome = outcome_of(&r);
    if let Some(payload) = payload_frame(release, kind, frames) {
        p.payload(payload, &outcome);
    }
    let Ok(d) = r else { return (outcome, None) };
    check_accepted(&d.value, &limits);
    let context = || format!("{} {} from frames {}", release.version, kind.name(), hex_frames(frames));
    let enc = encode_message(release, kind, &d.value)
        .unwrap_or_else(|e| panic!("decoded value does not re-encode: {e}\n{}", context()));
    let enc_refs: Vec<&[u8]> = enc.iter().map(Vec::as_slice).collect();
    let d2 = decode_message(release, kind, &enc_refs, &limits).unwrap_or_else(|e| {
        panic!("re-encoded value is rejected: {e}\n{}\nre-encoded {}", context(), hex_frames(&enc_refs))
    });
    fixed_point(&d.value, &d2, &context);
    let enc2 = encode_message(release, kind, &d2.value).expect("second encode");
    assert!(
        enc2 == enc,
        "encoding is not a fixed point\n{}\nfirst {}\nthen {}",
        context(),
        hex_frames(&enc_refs),
        hex_vecs(&enc2)
    );
    (outcome, Some(d.value))
}

/// Decodes one payload as `ty` (no frame layer) with the same checks.
pub fn payload<P: Probe>(p: &mut P, root: &'static str, ty: &'static Ty, frames: &[&[u8]]) -> Outcome {
    let limits = Limits::default();
    let r = p.decode(frames, || decode_payload(root, ty, frames, &limits));
    let outcome = outcome_of(&r);
    p.payload(frames[0], &outcome);
    let Ok(d) = r else { return outcome };
    check_accepted(&d.value, &limits);
    let context = || format!("{root} from frames {}", hex_frames(frames));
    let enc = encode_payload(root, ty, &d.value)
        .unwrap_or_else(|e| panic!("decoded value does not re-encode: {e}\n{}", context()));
    let enc_refs: Vec<&[u8]> = enc.iter().map(Vec::as_slice).collect();
    let d2 = decode_payload(root, ty, &enc_refs, &limits).unwrap_or_else(|e| {
        panic!("re-encoded value is rejected: {e}\n{}\nre-encoded {}", context(), hex_frames(&enc_refs))
    });
    fixed_point(&d.value, &d2, &context);
    let enc2 = encode_payload(root, ty, &d2.value).expect("second encode");
    assert!(enc2 == enc, "encoding is not a fixed point\n{}", context());
    outcome
}

fn hex_frames(frames: &[&[u8]]) -> String {
    frames_shown(frames, 2048)
}

fn hex_vecs(frames: &[Vec<u8>]) -> String {
    frames_shown(frames, 2048)
}
