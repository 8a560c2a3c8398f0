//! Typed access for gateways: the wire structs as Rust structs, generated
//! from the schema tables ([`generated`]), with conversions to and from the
//! dynamic [`Value`] tree and a direct encoder; enums with names; the
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
//! enums the enums below, tensors [`Tensor`], `Any` (and multimodal nested
//! tensors) [`Value`], and the unions [`StopReason`], [`StopStrings`],
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
//! The decoder ([`decode_typed`]) has the verdicts of [`decode_message`]:
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

use crate::decode::{decode_payload, Limits};
use crate::message::{decode_message, MessageKind};
use crate::schema::Ty;
use wire::{type_error, At, Enc, IntEnum, Rel, WireType};

use crate::error::Error;
use crate::schema::ReleaseSchema;
use crate::value::{Tensor, Value};

/// Why a request finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// 0: a stop string or stop token, or EOS.
    Stop = 0,
    /// 1: `max_tokens` or the model length.
    Length = 1,
    /// 2: aborted.
    Abort = 2,
    /// 3: failed in the engine.
    Error = 3,
    /// 4: repetition detected.
    Repetition = 4,
}

impl FinishReason {
    /// From its wire integer.
    pub fn from_wire(v: i64) -> Option<FinishReason> {
        Some(match v {
            0 => FinishReason::Stop,
            1 => FinishReason::Length,
            2 => FinishReason::Abort,
            3 => FinishReason::Error,
            4 => FinishReason::Repetition,
            _ => return None,
        })
    }

    /// Its wire integer.
    pub fn wire(self) -> i64 {
        self as i64
    }

    /// The user-facing string (`stop`, `length`, `abort`, `error`,
    /// `repetition`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
            FinishReason::Repetition => "repetition",
        }
    }
}

/// `RequestOutputKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestOutputKind {
    /// 0: every output so far.
    Cumulative = 0,
    /// 1: only what is new.
    Delta = 1,
    /// 2: only the final output.
    FinalOnly = 2,
}

impl RequestOutputKind {
    /// From its wire integer.
    pub fn from_wire(v: i64) -> Option<RequestOutputKind> {
        Some(match v {
            0 => RequestOutputKind::Cumulative,
            1 => RequestOutputKind::Delta,
            2 => RequestOutputKind::FinalOnly,
            _ => return None,
        })
    }
}

/// `EngineCoreOutput.stop_reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A stop token id (an `int`: -2^63 ..= 2^64-1 on the wire).
    TokenId(i128),
    /// A string.
    Text(String),
}

// ===== typed enums and unions the generated structs use =====

/// `EngineCoreEventType` (IntEnum): 1 QUEUED, 2 SCHEDULED, 3 PREEMPTED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineCoreEventType {
    /// 1: queued.
    Queued = 1,
    /// 2: scheduled.
    Scheduled = 2,
    /// 3: preempted.
    Preempted = 3,
}

impl IntEnum for FinishReason {
    const NAME: &'static str = "FinishReason";
    fn from_wire(v: i64) -> Option<Self> {
        FinishReason::from_wire(v)
    }
    fn wire(self) -> i64 {
        self as i64
    }
}

impl IntEnum for RequestOutputKind {
    const NAME: &'static str = "RequestOutputKind";
    fn from_wire(v: i64) -> Option<Self> {
        RequestOutputKind::from_wire(v)
    }
    fn wire(self) -> i64 {
        self as i64
    }
}

impl IntEnum for EngineCoreEventType {
    const NAME: &'static str = "EngineCoreEventType";
    fn from_wire(v: i64) -> Option<Self> {
        Some(match v {
            1 => EngineCoreEventType::Queued,
            2 => EngineCoreEventType::Scheduled,
            3 => EngineCoreEventType::Preempted,
            _ => return None,
        })
    }
    fn wire(self) -> i64 {
        self as i64
    }
}

wire::int_enum_wire!(FinishReason);
wire::int_enum_wire!(RequestOutputKind);
wire::int_enum_wire!(EngineCoreEventType);

/// `SamplingParams.stop`: `str | list[str]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopStrings {
    /// One stop string.
    One(String),
    /// A list of them (possibly empty: vLLM's `__post_init__` turns nil
    /// into `[]`).
    Many(Vec<String>),
}

/// `StructuredOutputsParams.json`: a JSON schema as text or as an object.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonSchema {
    /// The schema as a JSON string.
    Text(String),
    /// The schema as a map, entries in wire order.
    Object(Vec<(String, Value)>),
}

impl JsonSchema {
    /// A schema given as JSON (an API request's `json_schema`): a string is
    /// the schema as text, an object the schema as a map (keys in the
    /// object's order); anything else is no schema (`None`).
    ///
    /// ```
    /// use engine_protocol::serde_json::json;
    /// use engine_protocol::typed::JsonSchema;
    ///
    /// let schema = JsonSchema::from_json(&json!({"type": "object"})).expect("an object");
    /// assert!(matches!(schema, JsonSchema::Object(ref entries) if entries[0].0 == "type"));
    /// assert_eq!(JsonSchema::from_json(&json!(3)), None);
    /// ```
    pub fn from_json(j: &serde_json::Value) -> Option<JsonSchema> {
        match j {
            serde_json::Value::String(s) => Some(JsonSchema::Text(s.clone())),
            serde_json::Value::Object(m) => {
                Some(JsonSchema::Object(m.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()))
            }
            _ => None,
        }
    }
}

/// A value of `EngineHandshakeMetadata.parallel_config`: `int | str |
/// list[int]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParallelValue {
    /// An integer (-2^63 ..= 2^64-1).
    Int(i128),
    /// A string.
    Str(String),
    /// A list of integers.
    Ints(IntList),
}

/// vLLM's `UtilityResult`: `[type_info | nil, value]` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct UtilityResult {
    /// How the engine typed the result (nil for plain values).
    pub type_info: Value,
    /// The result.
    pub value: Value,
}

impl Default for UtilityResult {
    fn default() -> Self {
        UtilityResult { type_info: Value::Nil, value: Value::Nil }
    }
}

fn members(ty: &'static Ty) -> &'static [Ty] {
    match ty {
        Ty::Union(ms) => ms,
        Ty::Optional(t) => members(t),
        _ => &[],
    }
}

impl WireType for StopReason {
    fn from_value(v: &Value, _: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Int(_) | Value::UInt(_) => Ok(StopReason::TokenId(i128::from_value(v, None, rel)?)),
            Value::Str(s) => Ok(StopReason::Text(s.clone())),
            other => Err(type_error("int | str", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        match self {
            StopReason::TokenId(i) => i.to_value(ty, rel),
            StopReason::Text(s) => Ok(Value::Str(s.clone())),
        }
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> wire::EncodeResult {
        match self {
            StopReason::TokenId(i) => i.encode(rel, e),
            StopReason::Text(s) => s.encode(rel, e),
        }
    }
}

impl WireType for StopStrings {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Str(s) => Ok(StopStrings::One(s.clone())),
            Value::Array(_) => Ok(StopStrings::Many(WireType::from_value(v, raw, rel)?)),
            other => Err(type_error("str | list[str]", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        match self {
            StopStrings::One(s) => Ok(Value::Str(s.clone())),
            StopStrings::Many(xs) => xs.to_value(members(ty).get(1).unwrap_or(&Ty::Any), rel),
        }
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> wire::EncodeResult {
        match self {
            StopStrings::One(s) => s.encode(rel, e),
            StopStrings::Many(xs) => xs.encode(rel, e),
        }
    }
}

impl WireType for JsonSchema {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Str(s) => Ok(JsonSchema::Text(s.clone())),
            Value::Map(_) => Ok(JsonSchema::Object(WireType::from_value(v, raw, rel)?)),
            other => Err(type_error("str | dict", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        match self {
            JsonSchema::Text(s) => Ok(Value::Str(s.clone())),
            JsonSchema::Object(m) => m.to_value(members(ty).get(1).unwrap_or(&Ty::Any), rel),
        }
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> wire::EncodeResult {
        match self {
            JsonSchema::Text(s) => s.encode(rel, e),
            JsonSchema::Object(m) => m.encode(rel, e),
        }
    }
}

impl WireType for ParallelValue {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Int(_) | Value::UInt(_) => Ok(ParallelValue::Int(i128::from_value(v, raw, rel)?)),
            Value::Str(s) => Ok(ParallelValue::Str(s.clone())),
            Value::Array(_) | Value::IntArray(_) => Ok(ParallelValue::Ints(WireType::from_value(v, raw, rel)?)),
            other => Err(type_error("int | str | list[int]", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        match self {
            ParallelValue::Int(i) => i.to_value(ty, rel),
            ParallelValue::Str(s) => Ok(Value::Str(s.clone())),
            ParallelValue::Ints(xs) => Ok(xs.to_plain_value()),
        }
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> wire::EncodeResult {
        match self {
            ParallelValue::Int(i) => i.encode(rel, e),
            ParallelValue::Str(s) => s.encode(rel, e),
            ParallelValue::Ints(xs) => xs.encode(rel, e),
        }
    }
}

impl WireType for UtilityResult {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Array(xs) if xs.len() == 2 => Ok(UtilityResult { type_info: xs[0].clone(), value: xs[1].clone() }),
            other => Err(type_error("[type_info, value]", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Array(vec![self.type_info.clone(), self.value.clone()]))
    }
    fn encode(&self, _: Rel, e: &mut Enc) -> wire::EncodeResult {
        crate::msgpack::write::array_len(&mut e.out, 2);
        e.any(&self.type_info)?;
        Ok(e.any(&self.value)?)
    }
}

// ===== whole messages =====

/// How [`decode_typed`] reads the frames of a message: implemented for
/// every [`Message`] by the decoding layer above these structs
/// (`crate::hot`): the direct decoder [`crate::hot::decode_request`] for
/// `EngineCoreRequest` (same verdicts, struct and drift as the reference
/// path), [`decode_typed_via_value`] for every other message.
pub trait DecodeFrames: Sized {
    /// Decodes the frames of one message as this struct.
    fn decode_frames(
        release: &'static ReleaseSchema,
        frames: &[&[u8]],
        limits: &Limits,
    ) -> Result<(Self, Vec<String>), Error>;
}

/// A generated struct that is a whole message.
pub trait Message: WireType + DecodeFrames {
    /// The message kind it is sent as (`HandshakeStatus` is HELLO and
    /// READY alike; its kind here is HELLO).
    const KIND: MessageKind;
    /// The root of error paths.
    const NAME: &'static str;
}

macro_rules! message {
    ($t:ident, $kind:ident) => {
        impl Message for $t {
            const KIND: MessageKind = MessageKind::$kind;
            const NAME: &'static str = stringify!($t);
        }

        impl $t {
            /// From a decoded value of `release` (as [`crate::decode_message`]
            /// returns it); errors name the path of the field. A value holds
            /// no unknown fields, so `unknown` stays empty: [`decode_typed`]
            /// keeps them.
            pub fn from_value(release: &'static ReleaseSchema, v: &Value) -> Result<Self, Error> {
                let rel = Rel::of(release)?;
                <Self as WireType>::from_value(v, None, rel).map_err(|e| e.under(Self::NAME))
            }

            /// To a value of `release`, for [`crate::encode_message`]. Fails
            /// when a field `release` lacks is set; unknown fields are left out.
            pub fn to_value(&self, release: &'static ReleaseSchema) -> Result<Value, Error> {
                let rel = Rel::of(release)?;
                <Self as WireType>::to_value(self, MessageKind::$kind.payload_type(release), rel)
                    .map_err(|e| e.under(Self::NAME))
            }

            /// The frames of this message for `release`, written straight
            /// from the struct (request-type byte first for input-socket
            /// messages, aux frames after the payload), as owned vectors
            /// (an aux frame's bytes copied: [`Self::encode_shared`]
            /// shares them).
            pub fn encode(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(Vec::with_capacity(<Self as WireSize>::wire_size(self, rel)));
                <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME))?;
                let mut frames = Vec::with_capacity(2 + e.aux.len());
                if let Some(t) = MessageKind::$kind.request_type() {
                    frames.push(vec![t.byte()]);
                }
                let aux = if e.shared.is_empty() { std::mem::take(&mut e.aux) } else { e.aux_owned() };
                frames.push(e.out);
                frames.extend(aux);
                Ok(frames)
            }

            /// The frames of this message for `release` as shared buffers,
            /// in one call: request-type byte, payload, then every aux
            /// frame, an array held as [`bytes::Bytes`] (a 0.34.0 prompt,
            /// [`TokenIds`]) shared with the struct, not copied. `options`
            /// sets what vLLM's encoder reads from its environment (the
            /// zero-copy threshold).
            pub fn encode_shared(
                &self,
                release: &'static ReleaseSchema,
                options: &EncodeOptions,
            ) -> Result<Vec<bytes::Bytes>, Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(Vec::with_capacity(<Self as WireSize>::wire_size(self, rel)));
                e.zero_copy_threshold = options.zero_copy_threshold;
                <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME))?;
                let mut frames = Vec::with_capacity(2 + e.aux.len());
                if let Some(t) = MessageKind::$kind.request_type() {
                    frames.push(bytes::Bytes::from_static(t.frame()));
                }
                let aux = e.aux_shared();
                frames.push(bytes::Bytes::from(e.out));
                frames.extend(aux);
                Ok(frames)
            }

            /// Writes the payload into `out` (appending) and its aux frames
            /// into `aux`, for callers that reuse buffers. On error `out`
            /// may hold a partial payload.
            pub fn encode_into(
                &self,
                release: &'static ReleaseSchema,
                out: &mut Vec<u8>,
                aux: &mut Vec<Vec<u8>>,
            ) -> Result<(), Error> {
                let rel = Rel::of(release)?;
                let mut e = Enc::new(std::mem::take(out));
                e.aux = std::mem::take(aux);
                let r = <Self as WireType>::encode(self, rel, &mut e).map_err(|e| (*e).under(Self::NAME));
                *aux = e.aux_owned();
                *out = e.out;
                r
            }
        }
    };
}

/// A capacity guess for a message's payload, so that the direct encoder
/// writes without growing its buffer in the common case (token ids take at
/// most 5 bytes in practice, tensors their data plus a small header).
trait WireSize {
    fn wire_size(&self, _rel: Rel) -> usize {
        256
    }
}

impl WireSize for EngineCoreRequest {
    /// A prompt's ids take at most 5 bytes each in a list; an array takes
    /// its bytes inline below the threshold and a few bytes for its aux
    /// frame's index above it (0.34.0 on).
    fn wire_size(&self, rel: Rel) -> usize {
        let prompt = self.prompt_token_ids.as_ref().map_or(0, |t| {
            let in_array = rel
                .schema
                .engine_core_request
                .as_struct()
                .and_then(|s| s.fields.get(1))
                .is_some_and(|f| matches!(wire::unwrap_optional(f.ty), Ty::Tensor(_)));
            match (in_array, t.array()) {
                (false, _) => t.len() * 5,
                (true, Some(a)) if a.bytes().len() >= crate::encode::ZERO_COPY_THRESHOLD => 24,
                (true, _) => t.len() * 5 + 24,
            }
        });
        256 + self.request_id.len() + prompt
    }
}

impl WireSize for EngineCoreOutputs {
    fn wire_size(&self, _rel: Rel) -> usize {
        let tensor =
            |t: &Tensor| if t.data.len() < crate::encode::ZERO_COPY_THRESHOLD { t.data.len() + 32 } else { 40 };
        64 + self
            .outputs
            .iter()
            .map(|o| {
                40 + o.request_id.len()
                    + o.new_token_ids.len() * 5
                    + o.new_logprobs.as_ref().map_or(0, |l| {
                        tensor(&l.logprob_token_ids) + tensor(&l.logprobs) + tensor(&l.sampled_token_ranks) + 8
                    })
            })
            .sum::<usize>()
    }
}

impl WireSize for UtilityOutput {}
impl WireSize for EngineCoreReadyResponse {}
impl WireSize for HandshakeStatus {}
impl WireSize for EngineHandshakeMetadata {}
impl WireSize for UtilityRequest {}
impl WireSize for StartDpWave {}

message!(EngineCoreRequest, EngineCoreRequest);
message!(EngineCoreOutputs, EngineCoreOutputs);
message!(UtilityOutput, UtilityOutput);
message!(EngineCoreReadyResponse, EngineCoreReadyResponse);
message!(HandshakeStatus, HandshakeHello);
message!(EngineHandshakeMetadata, HandshakeInit);
message!(UtilityRequest, UtilityRequest);
message!(StartDpWave, StartDpWave);

impl EngineCoreRequest {
    /// [`EngineCoreRequest::encode`] after vLLM's `__post_init__` rules
    /// (the ones its decoder runs: `SamplingParams`,
    /// `StructuredOutputsParams`, `LoRARequest`,
    /// `RepetitionDetectionParams`; docs/wire-protocol.md §10) and after
    /// what the engine fails at run time although its decoder accepts it
    /// (no request id, no prompt, no `max_tokens`, a constraint without
    /// `_backend`: [`EngineCoreRequest::serving_problems`]' fatal ones but
    /// the prompt's length, which needs the engine's `max_model_len`). A
    /// request the engine would refuse or fail is an error of class
    /// `validation` naming the field, never bytes; [`Error::serving`] is
    /// set for the run-time ones. A request served otherwise than meant (no
    /// `_eos_token_id`) is written: `serving_problems` warns of it.
    ///
    /// Sampling parameters whose every rule plainly holds (the common
    /// request) are checked on the struct; anything else (a nested struct
    /// with rules of its own, a value at or past a rule's edge) through the
    /// value tree and [`encode_message`](crate::encode_message)'s checks,
    /// whose error is returned.
    ///
    /// ```
    /// use engine_protocol::typed::{Constraint, EngineCoreRequest, SamplingParams, ServingProblem, StructuredOutputsParams};
    /// use engine_protocol::{RejectClass, VLLM_0_33_0};
    ///
    /// let mut request = EngineCoreRequest {
    ///     request_id: "r1".into(),
    ///     prompt_token_ids: Some(vec![1, 2].into()),
    ///     sampling_params: Some(SamplingParams { max_tokens: None, ..SamplingParams::default() }),
    ///     ..EngineCoreRequest::default()
    /// };
    /// let e = request.encode_checked(VLLM_0_33_0).unwrap_err();
    /// assert_eq!((e.class, e.path.as_str()), (RejectClass::Validation, "EngineCoreRequest.sampling_params.max_tokens"));
    /// assert_eq!(e.serving, Some(ServingProblem::NoMaxTokens));
    ///
    /// let sp = request.sampling_params.as_mut().unwrap();
    /// sp.max_tokens = Some(8);
    /// sp.structured_outputs = Some(StructuredOutputsParams::without_backend(Constraint::Regex("a+".into())));
    /// let e = request.encode_checked(VLLM_0_33_0).unwrap_err();
    /// assert_eq!(e.serving, Some(ServingProblem::ConstraintWithoutBackend));
    ///
    /// // No EOS id: written (served, never stopping on EOS), and warned of.
    /// request.sampling_params.as_mut().unwrap().structured_outputs = None;
    /// assert!(request.encode_checked(VLLM_0_33_0).is_ok());
    /// assert_eq!(request.serving_problems(None), [ServingProblem::NoEosTokenId]);
    /// ```
    pub fn encode_checked(&self, release: &'static ReleaseSchema) -> Result<Vec<Vec<u8>>, Error> {
        self.check_sendable(release)?;
        self.encode(release)
    }

    /// [`EngineCoreRequest::encode_checked`] with the frames as shared
    /// buffers ([`EngineCoreRequest::encode_shared`]): one call gives the
    /// whole multi-frame ADD, a long 0.34.0 prompt's array as its aux frame
    /// without a copy.
    pub fn encode_checked_shared(
        &self,
        release: &'static ReleaseSchema,
        options: &EncodeOptions,
    ) -> Result<Vec<bytes::Bytes>, Error> {
        self.check_sendable(release)?;
        self.encode_shared(release, options)
    }

    /// What [`EngineCoreRequest::encode_checked`] refuses.
    fn check_sendable(&self, release: &'static ReleaseSchema) -> Result<(), Error> {
        let plain = self.lora_request.is_none()
            && self.sampling_params.as_ref().is_none_or(|sp| {
                sp.structured_outputs.is_none() && sp.repetition_detection.is_none() && plainly_valid(sp)
            });
        if !plain {
            crate::message::encode_message(release, MessageKind::EngineCoreRequest, &self.to_value(release)?)?;
        }
        if let Some(problem) = self.first_fatal_problem(None) {
            return Err(Error::unservable(problem));
        }
        Ok(())
    }
}

/// The frames of an ABORT of the engine requests `request_ids`:
/// `[0x01, array of the ids]`, the same in every release of both dialects
/// (docs/wire-protocol.md §7; the engine answers nothing for an id it does
/// not know).
///
/// ```
/// use engine_protocol::typed::{decode_abort, encode_abort};
/// use engine_protocol::{release, Dialect, Limits};
///
/// let frames = encode_abort(&["req-1", "req-2"]);
/// assert_eq!(frames, [vec![0x01], vec![0x92, 0xa5, b'r', b'e', b'q', b'-', b'1', 0xa5, b'r', b'e', b'q', b'-', b'2']]);
/// let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
/// let v033 = release(Dialect::Vllm, "0.33.0")?;
/// assert_eq!(decode_abort(v033, &refs, &Limits::default())?, ["req-1", "req-2"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_abort<S: AsRef<str>>(request_ids: &[S]) -> Vec<Vec<u8>> {
    use crate::msgpack::write;
    let mut out = Vec::with_capacity(8 + request_ids.iter().map(|r| r.as_ref().len() + 5).sum::<usize>());
    write::array_len(&mut out, request_ids.len() as u32);
    for r in request_ids {
        write::str(&mut out, r.as_ref());
    }
    let t = MessageKind::AbortRequest.request_type().map_or(1, |t| t.byte());
    vec![vec![t], out]
}

/// The ids of an ABORT of either dialect (`rel` is the dialect's view of
/// `release`; errors rooted at `root`).
pub(crate) fn abort_ids(
    release: &'static ReleaseSchema,
    frames: &[&[u8]],
    limits: &Limits,
    rel: Rel,
    root: &str,
) -> Result<Vec<String>, Error> {
    let d = decode_message(release, MessageKind::AbortRequest, frames, limits)?;
    Vec::<String>::from_value(&d.value, None, rel).map_err(|e| e.under(root))
}

/// The request ids of a vLLM ABORT, with [`decode_message`]'s verdict (a
/// type byte other than ABORT, a payload that is no list of strings: a
/// typed error naming the path).
pub fn decode_abort(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<Vec<String>, Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        abort_ids(release, frames, limits, Rel::of(release)?, "AbortRequest")
    })
}

/// Decodes one message as `M`, with the verdict and drift of
/// [`decode_message`] and the struct of [`decode_typed_via_value`].
/// Unknown fields reported as drift are kept in the structs' `unknown`.
///
/// `EngineCoreRequest` is read by the direct decoder
/// [`crate::hot::decode_request`]: straight from the bytes to the struct,
/// no value tree for the common fields, the verdict, struct and drift of
/// [`decode_typed_via_value`] (held to it by the `hot_request` tests and
/// fuzz target); every other message by [`decode_typed_via_value`].
pub fn decode_typed<M: Message>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| <M as DecodeFrames>::decode_frames(release, frames, limits))
}

/// The reference typed decode: [`decode_message`] (same verdicts, same
/// drift), then the conversion of its value to `M`. Unknown fields
/// reported as drift are kept in the structs' `unknown` (read from a
/// second, schema-less decode of the payload, done only when there is
/// drift), unless one of them holds what a [`Value`] cannot (a `str` of
/// invalid UTF-8, an ext type other than 3: the engine skips unknown
/// fields unread): then none is kept, and the drift is still reported. A
/// message `decode_message` accepts converts: the structs hold every value
/// the wire carries.
pub fn decode_typed_via_value<M: Message>(
    release: &'static ReleaseSchema,
    frames: &[impl AsRef<[u8]>],
    limits: &Limits,
) -> Result<(M, Vec<String>), Error> {
    crate::frames::with_frame_refs(frames, |frames| {
        let rel = Rel::of(release)?;
        let d = decode_message(release, M::KIND, frames, limits)?;
        let raw = if d.drift.is_empty() {
            None
        } else {
            static ANY: Ty = Ty::Any;
            let data = if M::KIND.request_type().is_some() { &frames[1..] } else { frames };
            // The schema-less decode counts one level more than the schema
            // decoder at a tensor (its shape array, which the schema decoder
            // reads as part of the tensor's level): on bytes `decode_message`
            // accepted under `limits`, it gets that level, so that finding the
            // unknown fields never refuses an accepted message.
            let raw_limits = Limits { max_depth: limits.max_depth.saturating_add(1), ..*limits };
            // An unknown field the value tree cannot hold (a string of invalid
            // UTF-8, an ext type other than 3: bytes the schema decoder, like
            // msgspec, skips unread) leaves the unknown fields out; the drift
            // is still reported.
            decode_payload(M::NAME, &ANY, data, &raw_limits).ok().map(|d| d.value)
        };
        let m = M::from_value(&d.value, raw.as_ref(), rel).at(M::NAME)?;
        Ok((m, d.drift))
    })
}
