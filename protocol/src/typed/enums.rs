//! The enums with names and the unions the generated structs use, with
//! their wire forms (docs/wire-protocol.md §7.2, §7.4, §8.4):
//! `FinishReason` is 0 STOP, 1 LENGTH, 2 ABORT, 3 ERROR, 4 REPETITION;
//! `RequestOutputKind` 0 CUMULATIVE, 1 DELTA, 2 FINAL_ONLY; `stop_reason`
//! nil, a token id (stop token) or a string (set by a frontend, or
//! `repetition_detected`); `stop` a string or a list of strings; a JSON
//! schema a string or an object; a parallel-config value an int, a string
//! or a list of ints; `UtilityResult` the `[type_info, value]` pair.

use super::wire::{self, type_error, Enc, IntEnum, Rel, WireType};
use super::IntList;
use crate::error::Error;
use crate::schema::Ty;
use crate::value::Value;

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
