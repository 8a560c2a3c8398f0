//! vLLM's engine-core dialect: ADD and ABORT as `EngineCoreRequest` and a
//! list of ids, UTILITY calls, and `EngineCoreOutputs` batches read by the
//! fast decoder into [`Step`]s.
//!
//! Wire facts relied on (docs/runner/transport.md "Transport", docs/wire-protocol.md;
//! vLLM 0.32.0 `vllm/v1/engine/__init__.py`, `vllm/v1/engine/core.py`):
//!
//! - input frames are `[type byte, payload, aux...]`: `00` ADD
//!   (`EngineCoreRequest`), `01` ABORT (an array of request ids), `03`
//!   UTILITY (`[client_index, call_id, method_name, args]`);
//! - an output batch is `[EngineCoreOutputs, aux...]` (tensors of 256 B or
//!   more in aux frames); each `EngineCoreOutput` names its `request_id`,
//!   carries the new token ids (DELTA), and ends the request when its
//!   `finish_reason` is set;
//! - a UTILITY reply is a batch whose `utility_output` is `[call_id,
//!   failure_message, [type_info, result]]`; call ids are u64 (vLLM's client
//!   draws them above 2^63);
//! - a batch that does not decode may hold outputs of every request in
//!   flight on the engine, so they all fail.
//!
//! Batches are decoded with `engine_protocol::hot::decode_outputs` (the
//! verdict, errors and drift of `decode_message`, with request ids, token
//! ids and finish and stop reasons borrowed from the frames); each step's
//! whole output is decoded from the shared frames only when read
//! ([`OutputValue`]). The fast decoder reads the tables of the typed API's
//! releases (0.32, 0.33: nine batch fields); a batch of an older table
//! (eight: no `weight_version`) is decoded by the schema-driven decoder,
//! `decode_message`, whose verdicts, errors and drift the fast one shares,
//! and its steps read from the value.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use engine_protocol::hot::{decode_output_value, decode_outputs};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::RequestType;
use engine_protocol::{decode_message, encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};

use super::{BatchInfo, Demux, DpControl, EngineWire, UtilityReply, WireError};

/// vLLM's engine-core protocol (any release of `engine_protocol`'s vLLM
/// tables).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Vllm;

/// One `EngineCoreOutput` for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The `engine_index` of the batch it came in.
    pub engine_index: i64,
    pub new_token_ids: Vec<i64>,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    /// The whole decoded output (logprobs, kv params, ...), decoded when
    /// first read.
    pub output: OutputValue,
}

/// One whole `EngineCoreOutput` as the schema-driven decoder decodes it
/// (dereferences to its `StructValue`). The output loop reads only what it
/// needs with `engine_protocol::hot`; the rest is decoded on first access
/// from the batch's frames, which the steps of a batch share (one reference
/// count each, no copy). The batch was validated as a whole, so that decode
/// cannot fail.
#[derive(Clone)]
pub struct OutputValue {
    /// The batch's frames and the output's place in them; `None` when the
    /// value was decoded with the batch (a table the fast decoder does not
    /// read).
    batch: Option<(Arc<BatchFrames>, Range<usize>)>,
    value: OnceLock<StructValue>,
}

/// An output batch's frames and how it was decoded, shared by its steps.
struct BatchFrames {
    frames: Vec<Bytes>,
    release: &'static ReleaseSchema,
    limits: Limits,
}

impl OutputValue {
    /// The decoded output.
    pub fn value(&self) -> &StructValue {
        self.value.get_or_init(|| {
            let Some((b, raw)) = &self.batch else { unreachable!("an output decoded with its batch holds its value") };
            let slices: Vec<&[u8]> = b.frames.iter().map(|f| f.as_ref()).collect();
            decode_output_value(b.release, &slices, raw.clone(), &b.limits)
                .unwrap_or_else(|_| StructValue::with_defaults(b.release.engine_core_output))
        })
    }

    /// An output already decoded (with its batch).
    fn decoded(value: StructValue) -> OutputValue {
        OutputValue { batch: None, value: OnceLock::from(value) }
    }
}

impl Deref for OutputValue {
    type Target = StructValue;
    fn deref(&self) -> &StructValue {
        self.value()
    }
}

impl PartialEq for OutputValue {
    fn eq(&self, other: &Self) -> bool {
        self.value() == other.value()
    }
}

impl fmt::Debug for OutputValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl EngineWire for Vllm {
    type Request = Value;
    type Step = Step;
    const NAME: &'static str = "vllm";
    const UTILITIES: bool = true;
    const BAD_BATCH_FAILS_REQUESTS: bool = true;
    const REQUEST_NAME: &'static str = "EngineCoreRequest";

    fn request_id(req: &Value) -> Option<&str> {
        match req {
            Value::Struct(s) => s.str_field("request_id"),
            _ => None,
        }
    }

    fn encode_add(release: &'static ReleaseSchema, req: &Value) -> Result<Vec<Vec<u8>>, WireError> {
        encode_message(release, MessageKind::EngineCoreRequest, req)
            .map_err(|source| WireError::Encode { what: "EngineCoreRequest", source })
    }

    fn encode_abort(release: &'static ReleaseSchema, ids: &[String]) -> Result<Vec<Vec<u8>>, WireError> {
        let v = Value::Array(ids.iter().cloned().map(Value::Str).collect());
        encode_message(release, MessageKind::AbortRequest, &v)
            .map_err(|source| WireError::Encode { what: "AbortRequest", source })
    }

    fn encode_start_wave(
        release: &'static ReleaseSchema,
        wave: i64,
        exclude: Option<u16>,
    ) -> Result<Vec<Vec<u8>>, WireError> {
        let Some(schema) = release.start_dp_wave.as_struct() else {
            return Err(WireError::Unsupported { dialect: "vllm", what: "StartDpWave table" });
        };
        let mut s = StructValue::with_defaults(schema);
        s.set("wave", Value::Int(wave))
            .set("exclude_engine_index", exclude.map_or(Value::Nil, |e| Value::Int(i64::from(e))));
        encode_message(release, MessageKind::StartDpWave, &Value::Struct(s))
            .map_err(|source| WireError::Encode { what: "StartDpWave", source })
    }

    fn encode_utility(
        release: &'static ReleaseSchema,
        call_id: u64,
        method: &str,
        args: Vec<Value>,
    ) -> Result<Vec<Vec<u8>>, WireError> {
        let Some(schema) = release.utility_request.as_struct() else {
            return Err(WireError::Unsupported { dialect: "vllm", what: "UtilityRequest table" });
        };
        let mut s = StructValue::with_defaults(schema);
        let id = i64::try_from(call_id).map(Value::Int).unwrap_or(Value::UInt(call_id));
        s.set("client_index", Value::Int(0))
            .set("call_id", id)
            .set("method_name", Value::Str(method.into()))
            .set("args", Value::Array(args));
        let frames = encode_message(release, MessageKind::UtilityRequest, &Value::Struct(s))
            .map_err(|source| WireError::Encode { what: "UtilityRequest", source })?;
        debug_assert_eq!(frames[0], [RequestType::Utility.byte()]);
        Ok(frames)
    }

    fn decode_batch(
        release: &'static ReleaseSchema,
        frames: Vec<Bytes>,
        limits: &Limits,
        demux: &mut impl Demux<Step>,
    ) -> Result<BatchInfo, WireError> {
        if !fast_decoder_reads(release) {
            return decode_batch_value(release, &frames, limits, demux);
        }
        // Shared by the batch's steps (their `output`, decoded on demand).
        let shared = Arc::new(BatchFrames { frames, release, limits: *limits });
        // The fast decoder: same verdict, errors and drift as
        // `decode_message`, fields borrowed from the frames.
        let batch = decode_outputs(release, &shared.frames, limits).map_err(WireError::Decode)?;
        let utility = batch.utility_output().map_err(WireError::Decode)?.map(|u| UtilityReply {
            call_id: u64::try_from(u.call_id).ok(),
            raw_call_id: i64::try_from(u.call_id).map_or_else(|_| Value::UInt(u.call_id as u64), Value::Int),
            failure: u.failure_message,
            result: u.result.map_or(Value::Nil, |r| r.value),
        });
        let engine_index = batch.engine_index;
        for out in &batch.outputs {
            demux.offer(out.request_id, out.finish_reason.is_some(), || Step {
                engine_index,
                new_token_ids: out.new_token_ids.to_vec(),
                finish_reason: out.finish_reason,
                stop_reason: out.stop_reason_owned(),
                output: OutputValue { batch: Some((Arc::clone(&shared), out.raw.clone())), value: OnceLock::new() },
            });
        }
        let dp_control = match (batch.wave_complete, batch.start_wave) {
            (Some(w), _) => Some(DpControl::WaveComplete(w)),
            (None, Some(w)) => Some(DpControl::StartWave(w)),
            (None, None) => None,
        };
        Ok(BatchInfo { drift: batch.drift, utility, engine_index: Some(engine_index), dp_control })
    }

    fn step_tokens(step: &Step) -> &[i64] {
        &step.new_token_ids
    }
}

/// Whether `hot::decode_outputs` reads `release`'s batch table (it reads
/// the typed API's tables; for another it answers with an error even for
/// a batch `decode_message` accepts). Found once per table: an empty batch
/// of the table, encoded, read back.
fn fast_decoder_reads(release: &'static ReleaseSchema) -> bool {
    // The typed API's tables, without a lock on the hot path.
    if has_typed_api(release) {
        return true;
    }
    static KNOWN: std::sync::Mutex<Vec<(usize, bool)>> = std::sync::Mutex::new(Vec::new());
    let key = std::ptr::from_ref(release) as usize;
    let mut known = KNOWN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, reads)) = known.iter().find(|(k, _)| *k == key) {
        return *reads;
    }
    let reads = release.engine_core_outputs.as_struct().is_some_and(|schema| {
        let mut b = StructValue::with_defaults(schema);
        b.set("outputs", Value::Array(Vec::new()));
        encode_message(release, MessageKind::EngineCoreOutputs, &Value::Struct(b))
            .is_ok_and(|frames| decode_outputs(release, &frames, &Limits::default()).is_ok())
    });
    known.push((key, reads));
    reads
}

/// [`Vllm::decode_batch`] by the schema-driven decoder (`decode_message`):
/// the same verdict, error and drift as the fast decoder, each output's
/// value decoded with the batch.
fn decode_batch_value(
    release: &'static ReleaseSchema,
    frames: &[Bytes],
    limits: &Limits,
    demux: &mut impl Demux<Step>,
) -> Result<BatchInfo, WireError> {
    let slices: Vec<&[u8]> = frames.iter().map(|f| f.as_ref()).collect();
    let d = decode_message(release, MessageKind::EngineCoreOutputs, &slices, limits).map_err(WireError::Decode)?;
    let Value::Struct(batch) = d.value else {
        return Err(WireError::Decode(engine_protocol::Error::new(
            engine_protocol::RejectClass::Type,
            "EngineCoreOutputs",
            "not a struct",
        )));
    };
    let engine_index = batch.int_field("engine_index").unwrap_or(0);
    let utility = batch.struct_field("utility_output").map(|u| {
        let raw_call_id = u.get("call_id").cloned().unwrap_or(Value::Nil);
        let call_id = match &raw_call_id {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::UInt(u) => Some(*u),
            _ => None,
        };
        let result = match u.get("result") {
            Some(Value::Array(xs)) if xs.len() == 2 => xs[1].clone(),
            _ => Value::Nil,
        };
        UtilityReply { call_id, raw_call_id, failure: u.str_field("failure_message").map(str::to_string), result }
    });
    if let Some(Value::Array(outputs)) = batch.get("outputs") {
        for out in outputs {
            let Value::Struct(o) = out else { continue };
            let finish_reason = o.int_field("finish_reason").and_then(FinishReason::from_wire);
            demux.offer(o.str_field("request_id").unwrap_or(""), finish_reason.is_some(), || Step {
                engine_index,
                new_token_ids: o.get("new_token_ids").and_then(Value::token_ids).unwrap_or_default(),
                finish_reason,
                stop_reason: match o.get("stop_reason") {
                    Some(Value::Int(t)) => Some(StopReason::TokenId(i128::from(*t))),
                    Some(Value::UInt(t)) => Some(StopReason::TokenId(i128::from(*t))),
                    Some(Value::Str(t)) => Some(StopReason::Text(t.clone())),
                    _ => None,
                },
                output: OutputValue::decoded(o.clone()),
            });
        }
    }
    let dp_control = match (batch.int_field("wave_complete"), batch.int_field("start_wave")) {
        (Some(w), _) => Some(DpControl::WaveComplete(w)),
        (None, Some(w)) => Some(DpControl::StartWave(w)),
        (None, None) => None,
    };
    Ok(BatchInfo { drift: d.drift, utility, engine_index: Some(engine_index), dp_control })
}

/// Whether engine-protocol's typed API covers `release` (one of
/// `engine_protocol::schema::VLLM_RELEASES`): its typed structs, fast
/// decoders and `EngineCodec` read and write that table; an older table is
/// spoken through `Value`s.
pub fn has_typed_api(release: &'static ReleaseSchema) -> bool {
    engine_protocol::schema::VLLM_RELEASES.iter().any(|r| std::ptr::eq(*r, release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_decoder_reads_the_typed_tables_and_the_value_decoder_the_older_ones() {
        for r in engine_protocol::schema::VLLM_TABLES {
            assert_eq!(fast_decoder_reads(r), has_typed_api(r), "{}", r.version);
        }
        // An older batch: eight fields, the output's thirteen (0.22), read
        // into steps from the value, with the utility reply.
        let old = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.22.0").unwrap();
        let schema = old.engine_core_outputs.as_struct().unwrap();
        let mut o = StructValue::with_defaults(old.engine_core_output);
        o.set("request_id", Value::Str("s.r".into()))
            .set("new_token_ids", Value::IntArray(vec![7, 8]))
            .set("finish_reason", Value::Int(0))
            .set("stop_reason", Value::Int(8));
        let mut b = StructValue::with_defaults(schema);
        b.set("engine_index", Value::Int(1)).set("outputs", Value::Array(vec![Value::Struct(o)]));
        let frames = encode_message(old, MessageKind::EngineCoreOutputs, &Value::Struct(b)).unwrap();
        struct Take(Vec<(String, bool, Step)>);
        impl Demux<Step> for Take {
            fn offer(&mut self, id: &str, terminal: bool, build: impl FnOnce() -> Step) {
                self.0.push((id.to_string(), terminal, build()));
            }
        }
        let mut got = Take(Vec::new());
        let frames: Vec<Bytes> = frames.into_iter().map(Bytes::from).collect();
        let info = Vllm::decode_batch(old, frames, &Limits::default(), &mut got).unwrap();
        assert_eq!((info.engine_index, info.drift.len()), (Some(1), 0));
        let (id, terminal, step) = &got.0[0];
        assert_eq!((id.as_str(), *terminal, step.new_token_ids.as_slice()), ("s.r", true, &[7, 8][..]));
        assert_eq!(step.finish_reason, Some(FinishReason::Stop));
        assert_eq!(step.stop_reason, Some(StopReason::TokenId(8)));
        assert!(std::ptr::eq(step.output.value().schema, old.engine_core_output));
        // A batch that is not one is the decoder's error, as on the fast path.
        let e = Vllm::decode_batch(old, vec![Bytes::from_static(b"\xc1")], &Limits::default(), &mut got).unwrap_err();
        assert!(matches!(e, WireError::Decode(_)), "{e}");
    }

    #[test]
    fn start_dp_wave_is_the_request_type_and_a_two_array_of_wave_and_excluded_engine() {
        let rel = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        assert_eq!(Vllm::encode_start_wave(rel, 1, Some(0)).unwrap(), vec![vec![2], vec![0x92, 0x01, 0x00]]);
        assert_eq!(Vllm::encode_start_wave(rel, 3, None).unwrap(), vec![vec![2], vec![0x92, 0x03, 0xc0]]);
    }
}
