//! Builders of vLLM messages for tests: an ADD ([`Request`]), an output
//! batch ([`OutputBatch`] of [`OutputBuilder`]s), and the frame lists around them.
//!
//! Values are built from the schema tables of `engine_protocol` (every
//! field holds its default until set, as `msgspec` constructs the struct)
//! and encoded with `engine_protocol::encode_message`, so the frames are
//! the layout of docs/wire-protocol.md: `[00, payload, aux...]` for an ADD,
//! `[payload, aux...]` for an output batch. A field name the schema lacks
//! panics (a mistake in the test, never wire input).

use engine_protocol::typed::FinishReason;
use engine_protocol::{
    decode_message, encode_message, release, Decoded, Dialect, Error, Limits, MessageKind, ReleaseSchema, StructValue,
    Value,
};

/// The vLLM table of `version` (`0.32.0`, `0.33.0`); panics without one.
#[track_caller]
pub fn vllm(version: &str) -> &'static ReleaseSchema {
    release(Dialect::Vllm, version).unwrap_or_else(|e| panic!("{e}"))
}

/// The TokenSpeed 0.1.1 table.
pub fn tokenspeed() -> &'static ReleaseSchema {
    release(Dialect::TokenSpeed, "0.1.1").expect("a table for TokenSpeed 0.1.1")
}

/// Borrowed frames, as the decoders take them.
pub fn refs<F: AsRef<[u8]>>(frames: &[F]) -> Vec<&[u8]> {
    frames.iter().map(AsRef::as_ref).collect()
}

/// The frames of an ADD carrying `payload`: `[00, payload]`.
pub fn add_frames(payload: &[u8]) -> Vec<Vec<u8>> {
    vec![vec![0x00], payload.to_vec()]
}

/// Decodes `frames` as `kind` of `rel` under the default limits.
pub fn decode<F: AsRef<[u8]>>(rel: &'static ReleaseSchema, kind: MessageKind, frames: &[F]) -> Result<Decoded, Error> {
    decode_message(rel, kind, &refs(frames), &Limits::default())
}

/// An `EngineCoreRequest` (the ADD payload) under construction: request id
/// `r`, prompt `[1]`, default `SamplingParams`, arrival time 0.5 until set.
#[derive(Debug, Clone)]
pub struct Request {
    release: &'static ReleaseSchema,
    request: StructValue,
    sampling: StructValue,
}

impl Request {
    /// A request of `release` (a vLLM table).
    pub fn new(release: &'static ReleaseSchema) -> Request {
        let schema = release.engine_core_request.as_struct().expect("the request root is a struct");
        let mut r = Request {
            release,
            request: StructValue::with_defaults(schema),
            sampling: StructValue::with_defaults(release.sampling_params),
        };
        r.request.set("request_id", Value::Str("r".into()));
        r.request.set("arrival_time", Value::Float(0.5));
        r.prompt(vec![1])
    }

    /// Sets the request id.
    pub fn id(mut self, id: impl Into<String>) -> Request {
        self.request.set("request_id", Value::Str(id.into()));
        self
    }

    /// Sets the prompt token ids, as the release's table types them: a
    /// list up to 0.33.0, an int32 ndarray (`<i4`) from 0.34.0.
    pub fn prompt(mut self, ids: impl Into<Vec<i64>>) -> Request {
        let ids = engine_protocol::typed::TokenIds::from(ids.into());
        let v = ids.value_in(self.release).expect("the prompt fits the release's prompt type");
        self.request.set("prompt_token_ids", v);
        self
    }

    /// Sets the arrival time.
    pub fn arrival(mut self, t: f64) -> Request {
        self.request.set("arrival_time", Value::Float(t));
        self
    }

    /// Sets a field of the request itself.
    #[track_caller]
    pub fn field(mut self, name: &str, v: Value) -> Request {
        self.request.set(name, v);
        self
    }

    /// Sets a field of its `SamplingParams`.
    #[track_caller]
    pub fn sampling(mut self, name: &str, v: Value) -> Request {
        self.sampling.set(name, v);
        self
    }

    /// The request as a value.
    pub fn value(&self) -> Value {
        let mut r = self.request.clone();
        r.set("sampling_params", Value::Struct(self.sampling.clone()));
        Value::Struct(r)
    }

    /// The ADD frames (`[00, payload, aux...]`); the encoder's validation
    /// error when the value breaks a vLLM rule.
    pub fn frames(&self) -> Result<Vec<Vec<u8>>, Error> {
        encode_message(self.release, MessageKind::EngineCoreRequest, &self.value())
    }
}

/// One `EngineCoreOutput` under construction: a request id and its new
/// tokens, every other field at its default until set.
#[derive(Debug, Clone)]
pub struct OutputBuilder(StructValue);

impl OutputBuilder {
    /// An output of `release` for `request_id` carrying `new_token_ids`.
    pub fn new(release: &'static ReleaseSchema, request_id: &str, new_token_ids: impl Into<Vec<i64>>) -> OutputBuilder {
        let mut o = StructValue::with_defaults(release.engine_core_output);
        o.set("request_id", Value::Str(request_id.into()));
        o.set("new_token_ids", Value::IntArray(new_token_ids.into()));
        OutputBuilder(o)
    }

    /// Ends the request with `reason`.
    pub fn finish(mut self, reason: FinishReason) -> OutputBuilder {
        self.0.set("finish_reason", Value::Int(reason.wire()));
        self
    }

    /// Sets any field.
    #[track_caller]
    pub fn field(mut self, name: &str, v: Value) -> OutputBuilder {
        self.0.set(name, v);
        self
    }

    /// The output as a struct value.
    pub fn into_struct(self) -> StructValue {
        self.0
    }
}

/// An `EngineCoreOutputs` batch under construction: engine 0, timestamp
/// 1.0, no outputs until added.
#[derive(Debug, Clone)]
pub struct OutputBatch {
    release: &'static ReleaseSchema,
    batch: StructValue,
    outputs: Vec<Value>,
}

impl OutputBatch {
    /// An empty batch of `release` (a vLLM table).
    pub fn new(release: &'static ReleaseSchema) -> OutputBatch {
        let schema = release.engine_core_outputs.as_struct().expect("the outputs root is a struct");
        let mut batch = StructValue::with_defaults(schema);
        batch.set("timestamp", Value::Float(1.0));
        OutputBatch { release, batch, outputs: Vec::new() }
    }

    /// Adds an output.
    pub fn output(mut self, o: OutputBuilder) -> OutputBatch {
        self.outputs.push(Value::Struct(o.0));
        self
    }

    /// Sets a field of the batch (`engine_index`, `finished_requests`, ...).
    #[track_caller]
    pub fn field(mut self, name: &str, v: Value) -> OutputBatch {
        self.batch.set(name, v);
        self
    }

    /// The batch as a value.
    pub fn value(&self) -> Value {
        let mut b = self.batch.clone();
        b.set("outputs", Value::Array(self.outputs.clone()));
        Value::Struct(b)
    }

    /// The frames (`[payload, aux...]`).
    pub fn frames(&self) -> Result<Vec<Vec<u8>>, Error> {
        encode_message(self.release, MessageKind::EngineCoreOutputs, &self.value())
    }
}
