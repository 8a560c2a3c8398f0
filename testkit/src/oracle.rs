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
use engine_protocol::hot::{decode_output_value, decode_outputs, Outputs as HotOutputs, StopRef};
use engine_protocol::schema::{tokenspeed, vllm, Dialect, Layout, Ty, VLLM_RELEASES};
use engine_protocol::{
    decode_message, encode_message, Error, Limits, MessageKind, Outcome, RejectClass, ReleaseSchema, Value,
};
use engine_protocol::{decode_payload, Decoded};
use engine_protocol::{numpy_dtype, torch_dtype};

use crate::hex::frames_shown;
use crate::outcome::EngineVerdict;
use crate::split::split;

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

/// `[payload, aux...]` through the fast output decoder
/// (`engine_protocol::hot::decode_outputs`) and through `decode_message`,
/// with both vLLM tables, under the default limits and tight ones (depth 6, 3
/// frames, 64 KiB frames): the same verdict (the same error, class, path and
/// text, on reject; the same drift on accept) and, on accept, the same
/// fields ([`same_hot_fields`]). The fast decode gets the allocation bound.
pub fn hot_outputs<P: Probe>(data: &[u8], p: &mut P) {
    let frames = split(data);
    let frames = refs(&frames);
    let tight = [
        Limits::default(),
        Limits { max_depth: 6, ..Limits::default() },
        Limits { max_frames: 3, ..Limits::default() },
        Limits { max_frame_bytes: 64 << 10, ..Limits::default() },
    ];
    // The vLLM tables (the fast decoder reads vLLM's `EngineCoreOutputs`).
    for &release in VLLM_RELEASES.iter() {
        for limits in &tight {
            let full = decode_message(release, MessageKind::EngineCoreOutputs, &frames, limits);
            let fast = p.decode(&frames, || decode_outputs(release, &frames, limits));
            match (full, fast) {
                (Ok(d), Ok(h)) => {
                    assert_eq!(d.drift, h.drift, "drift differs ({} {limits:?})", release.version);
                    if let Err(e) = same_hot_fields(release, &frames, limits, &d.value, &h) {
                        panic!("fast decoder differs at {e} ({} {limits:?})", release.version);
                    }
                }
                (Err(a), Err(b)) => assert_eq!(a, b, "errors differ ({} {limits:?})", release.version),
                (Ok(_), Err(b)) => panic!("fast decoder rejects an accepted batch: {b} ({})", release.version),
                (Err(a), Ok(_)) => panic!("fast decoder accepts a rejected batch: {a} ({})", release.version),
            }
        }
    }
}

/// `[type byte, payload, aux...]` through the direct request decoder
/// (`engine_protocol::internal::decode_request_direct`, behind
/// `typed::decode_typed::<EngineCoreRequest>`) and through the reference
/// typed path (`typed::decode_typed_via_value`: `decode_message`, then the
/// conversion), with both vLLM tables, under the default limits and tight
/// ones (depth 3, 2 frames, 256-byte frames):
/// - the reference path has `decode_message`'s verdict and drift, save for
///   an accepted value the typed struct cannot hold (an integer above
///   `i64::MAX`, refused as `type`);
/// - whenever the direct path reads a message itself, the reference path
///   accepts it without drift and builds the same struct (NaN equal to
///   itself); everything the direct path hands over is the reference
///   path's answer by construction.
///
/// The direct decode gets the allocation bound.
pub fn hot_request<P: Probe>(data: &[u8], p: &mut P) {
    use engine_protocol::internal::decode_request_direct;
    use engine_protocol::typed::{decode_typed_via_value, EngineCoreRequest};
    fn same(a: &EngineCoreRequest, b: &EngineCoreRequest) -> bool {
        a == b || format!("{a:?}") == format!("{b:?}")
    }
    let frames = split(data);
    let frames = refs(&frames);
    let limits = [
        Limits::default(),
        Limits { max_depth: 3, ..Limits::default() },
        Limits { max_frames: 2, ..Limits::default() },
        Limits { max_frame_bytes: 256, ..Limits::default() },
    ];
    for &release in VLLM_RELEASES.iter() {
        for limits in &limits {
            let v = release.version;
            let reference = decode_typed_via_value::<EngineCoreRequest>(release, &frames, limits);
            let message = decode_message(release, MessageKind::EngineCoreRequest, &frames, limits);
            match (&reference, &message) {
                (Ok((_, a)), Ok(d)) => assert_eq!(a, &d.drift, "drift differs ({v} {limits:?})"),
                (Err(a), Err(b)) => assert_eq!(a, b, "errors differ ({v} {limits:?})"),
                (Err(a), Ok(_)) => panic!("the conversion refuses an accepted request: {a} ({v} {limits:?})"),
                (Ok(_), Err(b)) => panic!("the reference accepts a rejected request: {b} ({v} {limits:?})"),
            }
            if let Some(d) = p.decode(&frames, || decode_request_direct(release, &frames, limits)) {
                match &reference {
                    Ok((r, drift)) => {
                        assert!(drift.is_empty(), "the direct path read a request with drift ({v} {limits:?})");
                        assert!(same(&d, r), "structs differ ({v} {limits:?}):\n{d:?}\n{r:?}");
                    }
                    Err(e) => panic!("the direct path accepts what the reference rejects: {e} ({v} {limits:?})"),
                }
            }
        }
    }
}

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
    Disagrees { version: &'static str, kind: &'static str, verdict: EngineVerdict, outcome: String },
}

fn differs(path: impl Into<String>) -> OracleError {
    OracleError::HotFieldDiffers { path: path.into() }
}

/// The fields the fast decoder exposes against the schema-driven value:
/// `Err` names the first difference.
pub fn same_hot_fields(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    v: &Value,
    h: &HotOutputs<'_>,
) -> Result<(), OracleError> {
    static NIL: Value = Value::Nil;
    let Value::Struct(s) = v else { return Err(differs("the root")) };
    // By reference: values may nest as deep as the limit admits, and a
    // clone or a drop of one recurses.
    fn field<'v>(st: &'v engine_protocol::StructValue, name: &str) -> &'v Value {
        match st.schema.index_of(name) {
            Some(i) => st.field(i),
            None => &NIL,
        }
    }
    let check = |what: &str, a: &Value, b: &Value| match same_value(a, b) {
        None => Ok(()),
        Some(at) => Err(differs(format!("{what}{at}"))),
    };
    check(
        "engine_index",
        engine_protocol::internal::batch_rare_field(h, 0).unwrap_or(&Value::Int(h.engine_index)),
        field(s, "engine_index"),
    )?;
    let want_ts = match *field(s, "timestamp") {
        Value::Float(f) => f,
        Value::Int(i) => i as f64,
        Value::UInt(u) => u as f64,
        _ => f64::NAN,
    };
    if want_ts.to_bits() != h.timestamp.to_bits() {
        return Err(differs("timestamp"));
    }
    let opt = |x: Option<i64>| x.map_or(Value::Nil, Value::Int);
    check(
        "wave_complete",
        engine_protocol::internal::batch_rare_field(h, 6).unwrap_or(&opt(h.wave_complete)),
        field(s, "wave_complete"),
    )?;
    check(
        "start_wave",
        engine_protocol::internal::batch_rare_field(h, 7).unwrap_or(&opt(h.start_wave)),
        field(s, "start_wave"),
    )?;
    let wv = h.weight_version.map_or(Value::Nil, |w| Value::Str(w.to_string()));
    check("weight_version", &wv, field(s, "weight_version"))?;
    for (i, name) in [(2, "scheduler_stats"), (4, "utility_output"), (5, "finished_requests")] {
        check(name, engine_protocol::internal::batch_rare_field(h, i).unwrap_or(&NIL), field(s, name))?;
    }
    let Value::Array(outs) = field(s, "outputs") else { return Err(differs("outputs")) };
    if outs.len() != h.outputs.len() {
        return Err(OracleError::OutputCount { hot: h.outputs.len(), value: outs.len() });
    }
    for (k, (o, hv)) in outs.iter().zip(&h.outputs).enumerate() {
        let Value::Struct(o) = o else { return Err(differs(format!("outputs[{k}]"))) };
        let at = |f: &str| format!("outputs[{k}].{f}");
        check(&at("request_id"), &Value::Str(hv.request_id.to_string()), field(o, "request_id"))?;
        let tokens = Value::IntArray(hv.new_token_ids.to_vec());
        check(
            &at("new_token_ids"),
            engine_protocol::internal::output_rare_field(hv, 1).unwrap_or(&tokens),
            field(o, "new_token_ids"),
        )?;
        let fr = hv.finish_reason.map_or(Value::Nil, |r| Value::Int(r.wire()));
        check(&at("finish_reason"), &fr, field(o, "finish_reason"))?;
        let sr = match hv.stop_reason {
            None => Value::Nil,
            Some(StopRef::TokenId(t)) => Value::Int(t),
            Some(StopRef::Text(t)) => Value::Str(t.to_string()),
        };
        check(
            &at("stop_reason"),
            engine_protocol::internal::output_rare_field(hv, 6).unwrap_or(&sr),
            field(o, "stop_reason"),
        )?;
        let nans = Value::Int(hv.num_nans_in_logits);
        check(
            &at("num_nans_in_logits"),
            engine_protocol::internal::output_rare_field(hv, 13).unwrap_or(&nans),
            field(o, "num_nans_in_logits"),
        )?;
        match (&hv.new_logprobs, field(o, "new_logprobs")) {
            (None, want) => {
                check(&at("new_logprobs"), engine_protocol::internal::output_rare_field(hv, 2).unwrap_or(&NIL), want)?
            }
            (Some(l), Value::Struct(lv)) => {
                for (i, t) in [l.logprob_token_ids, l.logprobs, l.sampled_token_ranks].iter().enumerate() {
                    let Value::Tensor(w) = lv.field(i) else { return Err(differs(at("new_logprobs"))) };
                    if t.dtype != w.dtype || t.shape.to_vec() != w.shape || t.data != w.data.as_slice() {
                        return Err(differs(at(&format!("new_logprobs[{i}]"))));
                    }
                }
                let cu = l.cu_num_generated_tokens.map_or(Value::Nil, |r| Value::IntArray(r.to_vec()));
                check(&at("new_logprobs[3]"), &cu, lv.field(3))?;
            }
            (Some(_), _) => return Err(differs(at("new_logprobs"))),
        }
        for (i, f) in o.schema.fields.iter().enumerate() {
            if [0, 1, 2, 5, 6, 13].contains(&i) {
                continue;
            }
            check(&at(f.name), engine_protocol::internal::output_rare_field(hv, i).unwrap_or(&NIL), o.field(i))?;
        }
        let whole = decode_output_value(release, frames, hv.raw.clone(), limits)
            .map_err(|e| OracleError::WholeOutput { path: at("raw"), error: Box::new(e) })?;
        for (i, f) in o.schema.fields.iter().enumerate() {
            check(&at(&format!("{} (whole)", f.name)), whole.field(i), o.field(i))?;
        }
    }
    Ok(())
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

fn fixed_point(first: &Value, again: &Decoded, context: &dyn Fn() -> String) {
    assert!(again.drift.is_empty(), "re-encoded value drifts at {:?}\n{}", again.drift, context());
    // Bit-exact, so the canonical views agree too (a view is a function of
    // the value; `roundtrip` compares views explicitly).
    if let Some(at) = same_value(first, &again.value) {
        panic!("decode(encode(decode(x))) differs from decode(x) at {at}\n{}", context());
    }
}

/// Where two values differ, or `None`. Floats compare by bits; a
/// `list[int]` kept unboxed equals the same integers boxed.
pub fn same_value(a: &Value, b: &Value) -> Option<String> {
    let mut path = String::new();
    if same_at(a, b, &mut path) {
        None
    } else {
        Some(if path.is_empty() { "the root".to_string() } else { path })
    }
}

fn same_at(a: &Value, b: &Value, path: &mut String) -> bool {
    fn ints(v: &Value) -> Option<Vec<i64>> {
        match v {
            Value::IntArray(xs) => Some(xs.clone()),
            Value::Array(xs) => xs.iter().map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect(),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::IntArray(_), Value::Array(_)) | (Value::Array(_), Value::IntArray(_)) => {
            ints(a).is_some() && ints(a) == ints(b)
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len()
                && xs.iter().zip(ys).enumerate().all(|(i, (x, y))| {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let same = same_at(x, y, path);
                    if same {
                        path.truncate(len);
                    }
                    same
                })
        }
        (Value::Map(xs), Value::Map(ys)) => same_entries(xs, ys, path),
        (Value::Struct(x), Value::Struct(y)) if x.schema.layout == Layout::OpenMap => {
            std::ptr::eq(x.schema, y.schema) && same_entries(x.open_entries(), y.open_entries(), path)
        }
        (Value::Struct(x), Value::Struct(y)) => {
            std::ptr::eq(x.schema, y.schema)
                && x.schema.fields.iter().zip(x.fields().zip(y.fields())).all(|(f, (vx, vy))| {
                    let len = path.len();
                    path.push('.');
                    path.push_str(f.name);
                    let same = same_at(vx, vy, path);
                    if same {
                        path.truncate(len);
                    }
                    same
                })
        }
        (a, b) => a == b,
    }
}

fn same_entries(xs: &[(Value, Value)], ys: &[(Value, Value)], path: &mut String) -> bool {
    xs.len() == ys.len()
        && xs.iter().zip(ys).enumerate().all(|(i, ((kx, vx), (ky, vy)))| {
            let len = path.len();
            path.push_str(&format!("{{{i}}}"));
            let same = same_at(kx, ky, path) && same_at(vx, vy, path);
            if same {
                path.truncate(len);
            }
            same
        })
}

/// Invariants of an accepted value: tensors are consistent, nesting is
/// within the limit.
pub fn check_accepted(v: &Value, limits: &Limits) {
    let depth = check_tree(v);
    assert!(
        depth <= limits.max_depth + DEFAULT_TREE_DEPTH,
        "accepted value nests {depth} levels, over the limit of {} (+{DEFAULT_TREE_DEPTH})",
        limits.max_depth
    );
}

/// Checks every tensor below `v`; returns the nesting depth of `v`
/// (containers, structs and tensors count one level, as in the decoder).
fn check_tree(v: &Value) -> usize {
    match v {
        Value::Array(xs) => 1 + xs.iter().map(check_tree).max().unwrap_or(0),
        Value::IntArray(_) => 1,
        Value::Map(m) => 1 + m.iter().map(|(k, x)| check_tree(k).max(check_tree(x))).max().unwrap_or(0),
        // An open map's entries are one `Value::Map` field: one level, as
        // on the wire.
        Value::Struct(s) if s.schema.layout == Layout::OpenMap => {
            1 + s.open_entries().iter().map(|(k, x)| check_tree(k).max(check_tree(x))).max().unwrap_or(0)
        }
        Value::Struct(s) => 1 + s.fields().map(check_tree).max().unwrap_or(0),
        Value::Tensor(t) => {
            let dt = numpy_dtype(&t.dtype)
                .or_else(|| torch_dtype(&t.dtype))
                .unwrap_or_else(|| panic!("accepted tensor has unknown dtype {:?}", t.dtype));
            // The shape may hold one dimension to infer (numpy and torch
            // resolve it from the buffer size, as vLLM's decoder does).
            let size = dt.elem.size();
            assert!(
                t.data.len() % size == 0
                    && engine_protocol::internal::resolve_shape(&t.shape, t.data.len() / size).is_some(),
                "accepted tensor {} {:?} holds {} bytes",
                t.dtype,
                t.shape,
                t.data.len()
            );
            1
        }
        _ => 0,
    }
}

/// The request-type byte that precedes `kind` on the engine's input
/// socket (docs/wire-protocol.md: `00` ADD, `01` ABORT, `02`
/// START_DP_WAVE, `03` UTILITY), `None` for the kinds of other sockets.
/// Written from the wire facts, not taken from `engine_protocol::frames`.
pub fn wire_type_byte(kind: MessageKind) -> Option<u8> {
    match kind {
        MessageKind::EngineCoreRequest => Some(0x00),
        MessageKind::AbortRequest => Some(0x01),
        MessageKind::StartDpWave => Some(0x02),
        MessageKind::UtilityRequest => Some(0x03),
        _ => None,
    }
}

/// Whether `kind`'s payload may reference aux frames (docs/wire-protocol.md:
/// tensors of requests, outputs and utility results travel in aux frames).
pub fn wire_has_aux_frames(kind: MessageKind) -> bool {
    matches!(kind, MessageKind::EngineCoreRequest | MessageKind::EngineCoreOutputs | MessageKind::UtilityOutput)
}

/// The independent oracle of the seed tests: `frames` (a golden case's,
/// through the target's input convention) decoded as the fuzz targets
/// decode them must get `verdict`, the one the engine's own decoder gave
/// the case (vLLM's for vLLM goldens; TokenSpeed's receive path, run with
/// the engine configuration `decode_message` assumes,
/// `EngineConfig::CONFORMANCE`, for TokenSpeed goldens). An error says how
/// they differ.
pub fn agrees_with_verdict(
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
    verdict: &EngineVerdict,
) -> Result<(), OracleError> {
    let (outcome, _) = message(&mut NoProbe, release, kind, frames);
    if verdict.agrees_with(&outcome) {
        Ok(())
    } else {
        Err(OracleError::Disagrees {
            version: release.version,
            kind: kind.name(),
            verdict: verdict.clone(),
            outcome: outcome.label(),
        })
    }
}

/// The frame layer: any frames, read as every message kind of every
/// release. Checks, besides those of [`message`], the frame rules of
/// docs/wire-protocol.md (expectations written here, not read from the
/// implementation):
///
/// - a kind of the input socket is rejected with class `frames` unless the
///   first frame is exactly its one request-type byte ([`wire_type_byte`]);
///   so at most one kind gets past that check;
/// - no payload frame, or more than one frame for a kind without aux
///   frames, is class `frames`;
/// - an accepted message with aux frames stays accepted, with the same
///   value, when one more (unreferenced) frame is appended;
/// - tighter limits never accept what the default limits reject, nor
///   decode it differently (limits only ever turn accepts into rejects),
///   and an accepted value nests within the tighter depth.
pub fn frames<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    let frames = refs(&owned);
    let tight = Limits { max_depth: 6, max_frames: 3, max_frame_bytes: 1 << 16 };
    for &release in VLLM_RELEASES {
        let mut past_type_check = 0;
        for kind in MessageKind::ALL {
            let (outcome, value) = message(p, release, kind, &frames);
            let data_frames = match wire_type_byte(kind) {
                Some(t) => {
                    if frames.first() != Some(&&[t][..]) {
                        assert_eq!(
                            outcome,
                            Outcome::Reject(RejectClass::Frames),
                            "{} without its type byte",
                            kind.name()
                        );
                        continue;
                    }
                    past_type_check += 1;
                    &frames[1..]
                }
                None => &frames[..],
            };
            if data_frames.is_empty() || (!wire_has_aux_frames(kind) && data_frames.len() != 1) {
                assert_eq!(
                    outcome,
                    Outcome::Reject(RejectClass::Frames),
                    "{}: {} data frames",
                    kind.name(),
                    data_frames.len()
                );
            }
            let tight_r = decode_message(release, kind, &frames, &tight);
            if let Ok(t) = &tight_r {
                let Some(v) = &value else {
                    panic!("{}: accepted under tighter limits, rejected ({outcome:?}) under the defaults", kind.name());
                };
                if let Some(at) = same_value(v, &t.value) {
                    panic!("{}: tighter limits decode differently at {at}", kind.name());
                }
                let depth = check_tree(&t.value);
                assert!(
                    depth <= tight.max_depth + DEFAULT_TREE_DEPTH,
                    "{}: nests {depth} under max_depth {}",
                    kind.name(),
                    tight.max_depth
                );
            }
            if let (Some(v), true) = (&value, wire_has_aux_frames(kind)) {
                let mut more = frames.clone();
                more.push(&b"unreferenced"[..]);
                if more.len() <= Limits::default().max_frames {
                    let (o, v2) = message(p, release, kind, &more);
                    let Some(v2) = v2 else { panic!("{}: an extra unreferenced frame makes it {o:?}", kind.name()) };
                    if let Some(at) = same_value(v, &v2) {
                        panic!("{}: an extra unreferenced frame changes the value at {at}", kind.name());
                    }
                }
            }
        }
        assert!(past_type_check <= 1, "the type byte matched {past_type_check} kinds");
    }
}

/// TokenSpeed 0.1.1, the newest TokenSpeed table.
fn ts() -> &'static ReleaseSchema {
    &tokenspeed::V0_1_1
}

/// Every TokenSpeed table, oldest first: the TokenSpeed targets run each
/// input through all of them.
static TOKENSPEED_RELEASES: [&ReleaseSchema; 2] = [&tokenspeed::GIT_57B49061, &tokenspeed::V0_1_1];

/// `[type byte, payload, aux...]` as one fuzz input: a TokenSpeed ADD
/// (`TokenizedGenerateReqInput`, its `SamplingParams`, multimodal tensors in
/// aux frames), decoded and judged by the receive path as `decode_message`
/// does, with the checks of [`message`] and the frame rules of
/// [`tokenspeed_frame_rules`]. The same frames, asked for as a message
/// TokenSpeed does not have (utility, wave), are class `frames`.
pub fn tokenspeed_request<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    let frames = refs(&owned);
    tokenspeed_frame_rules(p, MessageKind::EngineCoreRequest, &frames);
    for kind in [MessageKind::UtilityRequest, MessageKind::StartDpWave, MessageKind::UtilityOutput] {
        let r = decode_message(ts(), kind, &frames, &Limits::default());
        assert_eq!(outcome_of(&r), Outcome::Reject(RejectClass::Frames), "tokenspeed has no {}", kind.name());
    }
}

/// One payload decoded as a bare TokenSpeed `SamplingParams` (untagged,
/// positional, every field defaulted).
pub fn tokenspeed_sampling_params<P: Probe>(data: &[u8], p: &mut P) {
    payload(p, "SamplingParams", &TOKENSPEED_SAMPLING_PARAMS, &[data]);
}

/// `[type byte, payload, aux...]`: a TokenSpeed ABORT (a list of request
/// ids), with the checks of [`message`] and [`tokenspeed_frame_rules`].
pub fn tokenspeed_abort<P: Probe>(data: &[u8], p: &mut P) {
    let owned = split(data);
    tokenspeed_frame_rules(p, MessageKind::AbortRequest, &refs(&owned));
}

/// `[payload, aux...]`: a TokenSpeed output batch (`BatchTokenIDOutSlim`),
/// with the checks of [`message`] and [`tokenspeed_frame_rules`], and the
/// direct batch decoder against the typed API (both versions, the default
/// limits and tight ones: depth 3, 1 frame, 256-byte frames):
/// - whenever the direct path (`internal::decode_batch_direct`)
///   reads a batch itself, the typed API (`typed::tokenspeed::decode_typed`)
///   accepts it without drift and builds the same struct (NaN equal to
///   itself);
/// - `decode_batch`, the direct path with its hand-over, has the typed
///   API's result: the same struct and drift, or the same error.
///
/// The direct decode gets the allocation bound.
pub fn tokenspeed_outputs<P: Probe>(data: &[u8], p: &mut P) {
    use engine_protocol::hot::tokenspeed::decode_batch;
    use engine_protocol::internal::decode_batch_direct;
    use engine_protocol::typed::tokenspeed::{decode_typed, BatchTokenIDOutSlim};
    let owned = split(data);
    let frames = refs(&owned);
    tokenspeed_frame_rules(p, MessageKind::EngineCoreOutputs, &frames);
    let limits = [
        Limits::default(),
        Limits { max_depth: 3, ..Limits::default() },
        Limits { max_frames: 1, ..Limits::default() },
        Limits { max_frame_bytes: 256, ..Limits::default() },
    ];
    for release in TOKENSPEED_RELEASES {
        for limits in &limits {
            let v = release.version;
            let reference = decode_typed::<BatchTokenIDOutSlim>(release, &frames, limits);
            // Outcome, drift or error: the struct itself is compared below
            // only where the direct path built it (a drifting struct may
            // nest too deep for Debug).
            let brief = |r: &Result<(BatchTokenIDOutSlim, Vec<String>), engine_protocol::Error>| match r {
                Ok((_, drift)) => Ok(drift.clone()),
                Err(e) => Err(e.clone()),
            };
            let combined = decode_batch(release, &frames, limits);
            assert_eq!(brief(&combined), brief(&reference), "({v} {limits:?})");
            if let Some(d) = p.decode(&frames, || decode_batch_direct(release, &frames, limits)) {
                match &reference {
                    Ok((r, drift)) => {
                        assert!(drift.is_empty(), "the direct path read a batch with drift ({v} {limits:?})");
                        assert!(r.unknown.is_empty());
                        assert_eq!(format!("{d:?}"), format!("{r:?}"), "structs differ ({v} {limits:?})");
                        let c = combined.as_ref().map(|c| format!("{:?}", c.0)).unwrap_or_default();
                        assert_eq!(c, format!("{d:?}"), "decode_batch is not the direct path ({v} {limits:?})");
                    }
                    Err(e) => panic!("the direct path accepts what the typed API rejects: {e} ({v} {limits:?})"),
                }
            }
        }
    }
}

/// One payload, read as TokenSpeed's HELLO/READY and INIT, with the checks
/// of [`message`] and [`tokenspeed_frame_rules`] (INIT is also read after
/// an earlier frame, HELLO and READY as two frames).
pub fn tokenspeed_handshake<P: Probe>(data: &[u8], p: &mut P) {
    tokenspeed_frame_rules(p, MessageKind::HandshakeHello, &[data]);
    tokenspeed_frame_rules(p, MessageKind::HandshakeInit, &[data]);
}

/// One payload: TokenSpeed's ready response (a map struct).
pub fn tokenspeed_ready_response<P: Probe>(data: &[u8], p: &mut P) {
    tokenspeed_frame_rules(p, MessageKind::EngineCoreReadyResponse, &[data]);
}

/// Decodes `frames` as TokenSpeed's `kind` with the checks of [`message`],
/// then the frame rules of docs/tokenspeed-wire.md §2 (expectations written
/// here from the document, not read from `engine_protocol::message`):
///
/// - ADD and ABORT: fewer than two frames, or a first frame that is not
///   exactly one byte `00` or `01`, is class `frames` (2.1); the payload is
///   read as the type byte says (2.2), so with the other kind's byte a
///   message is never accepted: when the frames are accepted as the kind
///   the byte names, they are `frames` as this kind, and a decode error
///   (any class but `validation`, which the receive path also gives) is the
///   same for both kinds;
/// - an output batch's aux frames are ignored (2.4): it decodes as its
///   payload frame alone does; no frame at all is `frames`;
/// - INIT is read from the last frame (2.5): an earlier frame changes
///   nothing; HELLO, READY and the ready response are one frame each, so
///   two frames are `frames`;
/// - an accepted ABORT or output batch stays accepted, with the same value,
///   when an unreferenced frame is appended (2.3, 2.4; not an ADD, whose
///   negative aux-frame indices count from the last frame, 6.2);
/// - tighter limits never accept what the default limits reject, nor decode
///   it differently, and an accepted value nests within the tighter depth.
///
/// Each TokenSpeed version is checked on its own; then, because fields are
/// only ever appended (docs/tokenspeed-wire.md §12), an ADD, ABORT or output
/// batch the newest version accepts is accepted by the older one too, with
/// the same value in every field the older one has (the newer fields are
/// extra trailing elements to it, and its receive path gates less), except
/// the greedy request 0.1.1's seed pin rescues
/// (`rescued_by_greedy_seed_pin`, found by this check's first campaign).
pub fn tokenspeed_frame_rules<P: Probe>(p: &mut P, kind: MessageKind, frames: &[&[u8]]) {
    let [old, new] = TOKENSPEED_RELEASES;
    let older = frame_rules_in(p, old, kind, frames);
    let newer = frame_rules_in(p, new, kind, frames);
    let appended_only =
        matches!(kind, MessageKind::EngineCoreRequest | MessageKind::AbortRequest | MessageKind::EngineCoreOutputs);
    if let (true, Some(v_new)) = (appended_only, &newer) {
        let name = kind.name_in(new);
        let Some(v_old) = &older else {
            if kind == MessageKind::EngineCoreRequest && rescued_by_greedy_seed_pin(frames) {
                return;
            }
            panic!("{name}: {} accepts it, {} does not", new.version, old.version);
        };
        match (v_old, v_new) {
            (Value::Struct(a), Value::Struct(b)) => {
                for (f, x) in a.schema.fields.iter().zip(a.fields()) {
                    if let Some(at) = same_value(x, b.get(f.name).unwrap_or(&Value::Nil)) {
                        panic!("{name}.{}: {} and {} decode it differently at {at}", f.name, old.version, new.version);
                    }
                }
            }
            (a, b) => {
                if let Some(at) = same_value(a, b) {
                    panic!("{name}: {} and {} decode it differently at {at}", old.version, new.version);
                }
            }
        }
    }
}

/// The one ADD 0.1.1 runs and 08-03 drops (docs/tokenspeed-wire.md §12.3):
/// a greedy request (`top_k` 1 after `__post_init__`) with no seed and a
/// rid that is not a string. 0.1.1 pins greedy to seed 0, so there is no
/// seed to derive from the rid; 08-03 does not pin, and deriving the seed
/// from a nil or list rid fails. Read from the 08-03 decode of the payload.
fn rescued_by_greedy_seed_pin(frames: &[&[u8]]) -> bool {
    use engine_protocol::validate::tokenspeed::post_init;
    let Some(payload) = frames.get(1..) else { return false };
    let old = &tokenspeed::GIT_57B49061;
    let Ok(d) = engine_protocol::decode_payload(
        "TokenizedGenerateReqInput",
        old.engine_core_request,
        payload,
        &Limits::default(),
    ) else {
        return false;
    };
    let Value::Struct(req) = &d.value else { return false };
    let Some(sp) = req.struct_field("sampling_params") else { return false };
    let mut sp = sp.clone();
    post_init(&mut sp, &tokenspeed::RECEIVE_GIT_57B49061);
    let greedy = sp.int_field("top_k") == Some(1);
    greedy && sp.is_nil("seed") && !matches!(req.get("rid"), Some(Value::Str(_)))
}

/// [`tokenspeed_frame_rules`] for one TokenSpeed version; the decoded value
/// when it accepts.
fn frame_rules_in<P: Probe>(
    p: &mut P,
    release: &'static ReleaseSchema,
    kind: MessageKind,
    frames: &[&[u8]],
) -> Option<Value> {
    let (outcome, value) = message(p, release, kind, frames);
    let name = kind.name_in(release);
    let frames_reject = Outcome::Reject(RejectClass::Frames);
    let input_socket = matches!(kind, MessageKind::EngineCoreRequest | MessageKind::AbortRequest);
    if input_socket {
        let own = if kind == MessageKind::EngineCoreRequest { 0x00 } else { 0x01 };
        let sent = match frames.first() {
            Some(&&[b]) if b == 0x00 || b == 0x01 => Some(b),
            _ => None,
        };
        if frames.len() < 2 || sent.is_none() {
            assert_eq!(outcome, frames_reject, "{name}: {} frames, type frame {:02x?}", frames.len(), frames.first());
        } else if sent != Some(own) {
            assert!(!matches!(outcome, Outcome::Accept { .. }), "{name} accepted under the other type byte");
            let other = if kind == MessageKind::EngineCoreRequest {
                MessageKind::AbortRequest
            } else {
                MessageKind::EngineCoreRequest
            };
            let as_sent = outcome_of(&decode_message(release, other, frames, &Limits::default()));
            match as_sent {
                Outcome::Accept { .. } => {
                    assert_eq!(outcome, frames_reject, "{name} under the type byte of an accepted {}", other.name())
                }
                Outcome::Reject(RejectClass::Validation) => {}
                Outcome::Reject(c) => {
                    assert_eq!(outcome, Outcome::Reject(c), "{name} and {} differ on one payload", other.name())
                }
            }
        }
    }
    match kind {
        MessageKind::EngineCoreOutputs => {
            if frames.is_empty() {
                assert_eq!(outcome, frames_reject, "{name} without frames");
            } else if frames.len() <= Limits::default().max_frames && frames.len() > 1 {
                let (alone, v1) = message(p, release, kind, &frames[..1]);
                assert_eq!(alone, outcome, "{name}: aux frames change the outcome");
                if let (Some(a), Some(b)) = (&value, &v1) {
                    if let Some(at) = same_value(a, b) {
                        panic!("{name}: aux frames change the value at {at}");
                    }
                }
            }
        }
        MessageKind::HandshakeInit => {
            if let Some(last) = frames.last() {
                let (o2, v2) = message(p, release, kind, &[&b"\x80"[..], last]);
                assert_eq!(o2, outcome, "{name}: an earlier frame changes the outcome");
                if let (Some(a), Some(b)) = (&value, &v2) {
                    if let Some(at) = same_value(a, b) {
                        panic!("{name}: an earlier frame changes the value at {at}");
                    }
                }
            }
        }
        MessageKind::HandshakeHello | MessageKind::HandshakeReady | MessageKind::EngineCoreReadyResponse => {
            if frames.len() != 1 {
                assert_eq!(outcome, frames_reject, "{name}: {} frames", frames.len());
            } else {
                let r = decode_message(release, kind, &[frames[0], frames[0]], &Limits::default());
                assert_eq!(outcome_of(&r), frames_reject, "{name} as two frames");
            }
        }
        _ => {}
    }
    // Not for ADD: a negative aux-frame index counts from the last frame
    // (6.2), so no frame can be added without moving some tensor.
    if let (Some(v), true) = (&value, matches!(kind, MessageKind::AbortRequest | MessageKind::EngineCoreOutputs)) {
        let mut more = frames.to_vec();
        more.push(&b"unreferenced"[..]);
        if more.len() <= Limits::default().max_frames {
            let (o, v2) = message(p, release, kind, &more);
            let Some(v2) = v2 else { panic!("{name}: an extra unreferenced frame makes it {o:?}") };
            if let Some(at) = same_value(v, &v2) {
                panic!("{name}: an extra unreferenced frame changes the value at {at}");
            }
        }
    }
    let tight = Limits { max_depth: 6, max_frames: 3, max_frame_bytes: 1 << 16 };
    if let Ok(t) = decode_message(release, kind, frames, &tight) {
        let Some(v) = &value else {
            panic!("{name}: accepted under tighter limits, rejected ({outcome:?}) under the defaults");
        };
        if let Some(at) = same_value(v, &t.value) {
            panic!("{name}: tighter limits decode differently at {at}");
        }
        let depth = check_tree(&t.value);
        assert!(depth <= tight.max_depth + DEFAULT_TREE_DEPTH, "{name}: nests {depth} under max_depth 6");
    }
    value
}

fn hex_frames(frames: &[&[u8]]) -> String {
    frames_shown(frames, 2048)
}

fn hex_vecs(frames: &[Vec<u8>]) -> String {
    frames_shown(frames, 2048)
}
