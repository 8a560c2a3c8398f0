//! vLLM's engine-core dialect: ADD and ABORT as `EngineCoreRequest` and a
//! list of ids, UTILITY calls, and `EngineCoreOutputs` batches read by the
//! fast decoder into [`Step`]s.
//!
//! Wire facts relied on (docs/runner.md "Transport", docs/wire-protocol.md;
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
//! ([`OutputValue`]).

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use engine_protocol::hot::{decode_output_value, decode_outputs};
use engine_protocol::typed::{FinishReason, StopReason};
use engine_protocol::RequestType;
use engine_protocol::{encode_message, Limits, MessageKind, ReleaseSchema, StructValue, Value};

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
    batch: Arc<BatchFrames>,
    raw: Range<usize>,
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
            let b = &self.batch;
            let slices: Vec<&[u8]> = b.frames.iter().map(|f| f.as_ref()).collect();
            decode_output_value(b.release, &slices, self.raw.clone(), &b.limits)
                .unwrap_or_else(|_| StructValue::with_defaults(b.release.engine_core_output))
        })
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
                output: OutputValue { batch: Arc::clone(&shared), raw: out.raw.clone(), value: OnceLock::new() },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_dp_wave_is_the_request_type_and_a_two_array_of_wave_and_excluded_engine() {
        let rel = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
        assert_eq!(Vllm::encode_start_wave(rel, 1, Some(0)).unwrap(), vec![vec![2], vec![0x92, 0x01, 0x00]]);
        assert_eq!(Vllm::encode_start_wave(rel, 3, None).unwrap(), vec![vec![2], vec![0x92, 0x03, 0xc0]]);
    }
}
