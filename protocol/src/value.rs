//! Decoded values: a MessagePack value tree in which structs are typed by
//! their schema (every field present, in declaration order, defaults filled)
//! and tensors keep their dtype, shape and raw bytes.
#![warn(missing_docs)]

use crate::registry::PerStruct;
use crate::schema::{Default, StructSchema, Ty};

/// A decoded MessagePack value; structs typed by their schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `nil` (Python `None`).
    Nil,
    /// A bool.
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// A non-negative integer above `i64::MAX` (uint64 call ids).
    UInt(u64),
    /// A float (float32 on the wire is widened).
    Float(f64),
    /// A string.
    Str(String),
    /// A bin.
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A `list[int]` (token ids): kept unboxed for speed.
    IntArray(Vec<i64>),
    /// Key-value pairs in wire order.
    Map(Vec<(Value, Value)>),
    /// An ext: its type and data.
    Ext(i8, Vec<u8>),
    /// A struct of a schema table.
    Struct(StructValue),
    /// A tensor or ndarray.
    Tensor(Box<Tensor>),
}

impl Value {
    /// The token ids a prompt or token field holds, whichever form a
    /// release sends them in: a list of ints (`IntArray`, or an array of
    /// `Int`s), or an integer ndarray (vLLM 0.34.0's prompt, read as sent:
    /// any integer dtype and byte order, flattened). `None` for anything
    /// else, or an id that does not fit `i64`.
    pub fn token_ids(&self) -> Option<Vec<i64>> {
        match self {
            Value::IntArray(xs) => Some(xs.clone()),
            Value::Array(xs) => xs.iter().map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect(),
            Value::Tensor(t) => match t.numbers()? {
                Numbers::Ints(xs) => Some(xs),
                Numbers::UInts(xs) => xs.into_iter().map(|x| i64::try_from(x).ok()).collect(),
                _ => None,
            },
            _ => None,
        }
    }

    /// The MessagePack kind of this value as error details name it
    /// (`null`, `int`, `array`, `object`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Nil => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Array(_) | Value::IntArray(_) => "array",
            Value::Map(_) => "object",
            Value::Ext(..) => "ext",
            Value::Struct(_) => "struct",
            Value::Tensor(_) => "tensor",
        }
    }
}

impl Value {
    /// A JSON value as a MessagePack value, schema-free: the one JSON to
    /// value conversion of this crate (request JSON, `Any` fields from
    /// JSON). Integers stay integers (`UInt` above `i64::MAX`), other
    /// numbers are floats, objects are maps with string keys in JSON order.
    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as Json;
        match j {
            Json::Null => Value::Nil,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Value::Int(i),
                (None, Some(u)) => Value::UInt(u),
                _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Json::String(s) => Value::Str(s.clone()),
            Json::Array(xs) => Value::Array(xs.iter().map(Value::from_json).collect()),
            Json::Object(m) => {
                Value::Map(m.iter().map(|(k, v)| (Value::Str(k.clone()), Value::from_json(v))).collect())
            }
        }
    }
}

/// A struct value of `schema`, stored sparsely: only the fields set away from
/// their defaults (plus any set explicitly) are held, as `(field index,
/// value)` in ascending index order; every other field reads as its default
/// ([`StructValue::field`]). Decoded structs are mostly defaults (an output
/// step carries 2-4 of 19 fields), so this keeps decoding to one small
/// allocation per struct. For an open map (the HELLO/READY dicts) the one
/// entry is a `Value::Map` of every key in wire order
/// ([`StructValue::open_entries`]).
///
/// 24 bytes, held inline in `Value`.
#[derive(Debug, Clone)]
pub struct StructValue {
    /// The struct's table entry.
    pub schema: &'static StructSchema,
    entries: Box<[(u16, Value)]>,
}

impl PartialEq for StructValue {
    /// Field by field, defaults included: a default held explicitly equals
    /// one that is absent.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.schema, other.schema) && self.fields().eq(other.fields())
    }
}

impl StructValue {
    /// A struct holding every default; required fields read as nil until set.
    pub fn with_defaults(schema: &'static StructSchema) -> Self {
        if schema.layout == crate::schema::Layout::OpenMap {
            return StructValue { schema, entries: Box::new([(0, Value::Map(Vec::new()))]) };
        }
        StructValue { schema, entries: Box::new([]) }
    }

    /// A struct from all its fields in schema order (defaults dropped).
    pub fn new(schema: &'static StructSchema, fields: Vec<Value>) -> Self {
        if schema.layout == crate::schema::Layout::OpenMap {
            return StructValue { schema, entries: fields.into_iter().take(1).map(|v| (0, v)).collect() };
        }
        let entries = fields
            .into_iter()
            .zip(schema.fields)
            .enumerate()
            .filter(|(_, (v, f))| f.default == Default::Required || !is_default(v, &f.default))
            .map(|(i, (v, _))| (i as u16, v))
            .collect();
        StructValue { schema, entries }
    }

    /// A struct from `(field index, value)` pairs in ascending index order.
    pub(crate) fn from_entries(schema: &'static StructSchema, entries: Box<[(u16, Value)]>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        StructValue { schema, entries }
    }

    /// The fields held explicitly, as `(field index, value)`.
    pub fn entries(&self) -> &[(u16, Value)] {
        &self.entries
    }

    /// Field `i` (its default when not held).
    pub fn field(&self, i: usize) -> &Value {
        match self.entries.binary_search_by_key(&(i as u16), |(k, _)| *k) {
            Ok(at) => &self.entries[at].1,
            Err(_) => &self.schema.default_values()[i],
        }
    }

    /// Every field in schema order, defaults included.
    pub fn fields(&self) -> Fields<'_> {
        Fields { s: self, defaults: self.schema.default_values(), i: 0, next: 0 }
    }

    /// Field `i`, to change (held explicitly from now on).
    pub fn field_mut(&mut self, i: usize) -> &mut Value {
        let at = match self.entries.binary_search_by_key(&(i as u16), |(k, _)| *k) {
            Ok(at) => at,
            Err(at) => {
                let mut v = std::mem::take(&mut self.entries).into_vec();
                v.insert(at, (i as u16, default_for(&self.schema.fields[i])));
                self.entries = v.into_boxed_slice();
                at
            }
        };
        &mut self.entries[at].1
    }

    /// The entries of an open map (empty for other layouts).
    pub fn open_entries(&self) -> &[(Value, Value)] {
        match self.entries.first() {
            Some((_, Value::Map(m))) if self.schema.layout == crate::schema::Layout::OpenMap => m,
            _ => &[],
        }
    }

    /// The entries of an open map, to add to; panics on other layouts.
    pub fn open_entries_mut(&mut self) -> &mut Vec<(Value, Value)> {
        assert_eq!(self.schema.layout, crate::schema::Layout::OpenMap, "{} is not an open map", self.schema.name);
        match &mut self.entries[0].1 {
            Value::Map(m) => m,
            _ => unreachable!("open maps hold one Value::Map"),
        }
    }

    /// Field `name` (its default when not held; for an open map, the key's
    /// value), `None` when there is no such field or key.
    pub fn get(&self, name: &str) -> Option<&Value> {
        if self.schema.layout == crate::schema::Layout::OpenMap {
            return self.open_entries().iter().find(|(k, _)| matches!(k, Value::Str(s) if s == name)).map(|(_, v)| v);
        }
        self.schema.index_of(name).map(|i| self.field(i))
    }

    /// Field `name`, to change (held explicitly from now on).
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Value> {
        let i = self.schema.index_of(name)?;
        Some(self.field_mut(i))
    }

    /// Sets a field by name; panics on a name the schema lacks (a programming
    /// error in the caller, never reachable from wire input).
    pub fn set(&mut self, name: &str, v: Value) -> &mut Self {
        let i = self.schema.index_of(name).unwrap_or_else(|| panic!("{} has no field {name}", self.schema.name));
        *self.field_mut(i) = v;
        self
    }

    /// Field `name` when it holds a string.
    pub fn str_field(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Field `name` when it holds an `i64`.
    pub fn int_field(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(Value::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// Field `name` when it holds a number (an integer widened).
    pub fn float_field(&self, name: &str) -> Option<f64> {
        match self.get(name) {
            Some(Value::Float(v)) => Some(*v),
            Some(Value::Int(v)) => Some(*v as f64),
            _ => None,
        }
    }

    /// Field `name` when it holds a struct.
    pub fn struct_field(&self, name: &str) -> Option<&StructValue> {
        match self.get(name) {
            Some(Value::Struct(s)) => Some(s),
            _ => None,
        }
    }

    /// Whether field `name` is nil or absent.
    pub fn is_nil(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Value::Nil) | None)
    }
}

/// Every field of a struct value in schema order, defaults included.
pub struct Fields<'a> {
    s: &'a StructValue,
    /// The struct's defaults, looked up once.
    defaults: &'static [Value],
    i: usize,
    next: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a Value;

    #[inline]
    fn next(&mut self) -> Option<&'a Value> {
        let n = self.s.schema.fields.len();
        if self.i >= n {
            return None;
        }
        let i = self.i;
        self.i += 1;
        match self.s.entries.get(self.next) {
            Some((k, v)) if *k as usize == i => {
                self.next += 1;
                Some(v)
            }
            _ => Some(&self.defaults[i]),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.s.schema.fields.len() - self.i;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Fields<'_> {}

// The default values of a struct, computed once per struct and kept out of
// the (pure data) tables, in a cache keyed by the struct's identity.
impl StructSchema {
    /// The default value of every field, in order (nil for required ones).
    #[inline]
    pub fn default_values(&self) -> &'static [Value] {
        static DEFAULTS: PerStruct<Box<[Value]>> = PerStruct::new();
        DEFAULTS.get(self, || self.fields.iter().map(default_for).collect())
    }
}

/// The default value of a field (nil for required fields).
pub fn default_for(field: &crate::schema::Field) -> Value {
    if field.default == Default::NewStruct {
        if let Some(s) = field.ty.as_struct() {
            return Value::Struct(StructValue::with_defaults(s));
        }
    }
    default_value(&field.default)
}

/// The value a default stands for.
pub fn default_value(d: &Default) -> Value {
    match *d {
        Default::NewStruct => Value::Nil,
        Default::Required | Default::Nil => Value::Nil,
        Default::Bool(b) => Value::Bool(b),
        Default::Int(i) => Value::Int(i),
        Default::Float(f) => Value::Float(f),
        Default::Str(s) => Value::Str(s.to_owned()),
        Default::EmptyList | Default::EmptySet => Value::Array(Vec::new()),
        Default::EmptyDict => Value::Map(Vec::new()),
    }
}

/// True when `v` equals default `d` (what msgspec's `omit_defaults` omits for
/// values built from defaults; collections compare by emptiness).
pub fn is_default(v: &Value, d: &Default) -> bool {
    match (d, v) {
        (Default::Required, _) => false,
        (Default::Nil, Value::Nil) => true,
        (Default::Bool(a), Value::Bool(b)) => a == b,
        (Default::Int(a), Value::Int(b)) => a == b,
        (Default::Float(a), Value::Float(b)) => a.to_bits() == b.to_bits() || (a == b && *a != 0.0),
        (Default::Str(a), Value::Str(b)) => a == b,
        (Default::EmptyList | Default::EmptySet, Value::Array(a)) => a.is_empty(),
        (Default::EmptyList | Default::EmptySet, Value::IntArray(a)) => a.is_empty(),
        (Default::EmptyDict, Value::Map(m)) => m.is_empty(),
        _ => false,
    }
}

/// The value of a prompt's token ids for a field of type `ty`: a list of
/// ints, or for an ndarray field (vLLM 0.34.0 on, docs/wire-protocol.md
/// §6.9) the one-dimensional array vLLM's frontend sends, `<i4`
/// (little-endian; `<i8` should an id not fit int32, which no frontend
/// sends).
pub fn token_ids_value(ty: &Ty, ids: Vec<i64>) -> Value {
    let ty = match ty {
        Ty::Optional(t) => t,
        t => t,
    };
    if !matches!(ty, Ty::Tensor(_)) {
        return Value::IntArray(ids);
    }
    let shape = vec![ids.len() as i64];
    let (dtype, data) = if ids.iter().all(|&x| i32::try_from(x).is_ok()) {
        ("<i4", ids.iter().flat_map(|&x| (x as i32).to_le_bytes()).collect())
    } else {
        ("<i8", ids.iter().flat_map(|&x| x.to_le_bytes()).collect())
    };
    Value::Tensor(Box::new(Tensor { dtype: dtype.into(), shape, data }))
}

/// An element type of a tensor, from its dtype string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Elem {
    /// bool (one byte).
    Bool,
    /// int8.
    I8,
    /// uint8.
    U8,
    /// int16.
    I16,
    /// uint16.
    U16,
    /// int32.
    I32,
    /// uint32.
    U32,
    /// int64.
    I64,
    /// uint64.
    U64,
    /// float16.
    F16,
    /// bfloat16.
    BF16,
    /// float32.
    F32,
    /// float64.
    F64,
}

impl Elem {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Elem::Bool | Elem::I8 | Elem::U8 => 1,
            Elem::I16 | Elem::U16 | Elem::F16 | Elem::BF16 => 2,
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 => 8,
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Elem::F16 | Elem::BF16 | Elem::F32 | Elem::F64)
    }
}

/// A parsed dtype string: element type and whether the bytes are big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DType {
    /// The element type.
    pub elem: Elem,
    /// Whether the bytes are big-endian.
    pub big_endian: bool,
}

/// Parses a torch dtype name (`int32`, `float32`, `bfloat16`, `bool`, ...).
pub fn torch_dtype(s: &str) -> Option<DType> {
    let elem = match s {
        "bool" => Elem::Bool,
        "int8" => Elem::I8,
        "uint8" => Elem::U8,
        "int16" | "short" => Elem::I16,
        "uint16" => Elem::U16,
        "int32" | "int" => Elem::I32,
        "uint32" => Elem::U32,
        "int64" | "long" => Elem::I64,
        "uint64" => Elem::U64,
        "float16" | "half" => Elem::F16,
        "bfloat16" => Elem::BF16,
        "float32" | "float" => Elem::F32,
        "float64" | "double" => Elem::F64,
        _ => return None,
    };
    Some(DType { elem, big_endian: false })
}

/// Parses a numpy dtype string: `<i4`, `>f8`, `|u1`, `|b1`, `=i8`, or a plain
/// name numpy also accepts (`int32`, `float32`).
pub fn numpy_dtype(s: &str) -> Option<DType> {
    let b = s.as_bytes();
    if b.len() == 3 && matches!(b[0], b'<' | b'>' | b'|' | b'=') {
        let big_endian = b[0] == b'>';
        let elem = match (b[1], b[2]) {
            (b'b', b'1') => Elem::Bool,
            (b'i', b'1') => Elem::I8,
            (b'u', b'1') => Elem::U8,
            (b'i', b'2') => Elem::I16,
            (b'u', b'2') => Elem::U16,
            (b'i', b'4') => Elem::I32,
            (b'u', b'4') => Elem::U32,
            (b'i', b'8') => Elem::I64,
            (b'u', b'8') => Elem::U64,
            (b'f', b'2') => Elem::F16,
            (b'f', b'4') => Elem::F32,
            (b'f', b'8') => Elem::F64,
            _ => return None,
        };
        return Some(DType { elem, big_endian });
    }
    match s {
        "bfloat16" | "short" | "long" | "half" | "double" | "float" | "int" => None,
        _ => torch_dtype(s),
    }
}

/// A tensor or ndarray: `[dtype, shape, data]` on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The dtype string exactly as sent.
    pub dtype: String,
    /// The dimensions.
    pub shape: Vec<i64>,
    /// Raw C-order element bytes, in the byte order the dtype names.
    pub data: Vec<u8>,
}

/// Numbers of a tensor, read by dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum Numbers {
    /// Integers of every type but uint64.
    Ints(Vec<i64>),
    /// uint64 elements.
    UInts(Vec<u64>),
    /// Floats (half and bfloat16 widened).
    Floats(Vec<f64>),
    /// Bools.
    Bools(Vec<bool>),
}

impl Tensor {
    /// The dtype, parsed with the rules of either kind (numpy's first).
    pub fn parsed_dtype(&self) -> Option<DType> {
        numpy_dtype(&self.dtype).or_else(|| torch_dtype(&self.dtype))
    }

    /// Element count from the shape, or `None` on a negative dimension or
    /// overflow.
    pub fn element_count(shape: &[i64]) -> Option<usize> {
        shape.iter().try_fold(1usize, |acc, &d| if d < 0 { None } else { acc.checked_mul(usize::try_from(d).ok()?) })
    }

    /// The elements as numbers, or `None` when the dtype is unknown or the
    /// byte count does not match.
    pub fn numbers(&self) -> Option<Numbers> {
        let dt = self.parsed_dtype()?;
        let size = dt.elem.size();
        if !self.data.len().is_multiple_of(size) {
            return None;
        }
        let chunks = self.data.chunks_exact(size);
        fn arr<const N: usize>(c: &[u8], be: bool) -> [u8; N] {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            if be {
                a.reverse();
            }
            a
        }
        let be = dt.big_endian;
        Some(match dt.elem {
            Elem::Bool => Numbers::Bools(self.data.iter().map(|&b| b != 0).collect()),
            Elem::I8 => Numbers::Ints(self.data.iter().map(|&b| b as i8 as i64).collect()),
            Elem::U8 => Numbers::Ints(self.data.iter().map(|&b| b as i64).collect()),
            Elem::I16 => Numbers::Ints(chunks.map(|c| i16::from_le_bytes(arr(c, be)) as i64).collect()),
            Elem::U16 => Numbers::Ints(chunks.map(|c| u16::from_le_bytes(arr(c, be)) as i64).collect()),
            Elem::I32 => Numbers::Ints(chunks.map(|c| i32::from_le_bytes(arr(c, be)) as i64).collect()),
            Elem::U32 => Numbers::Ints(chunks.map(|c| u32::from_le_bytes(arr(c, be)) as i64).collect()),
            Elem::I64 => Numbers::Ints(chunks.map(|c| i64::from_le_bytes(arr(c, be))).collect()),
            Elem::U64 => Numbers::UInts(chunks.map(|c| u64::from_le_bytes(arr(c, be))).collect()),
            Elem::F16 => Numbers::Floats(chunks.map(|c| f16_to_f64(u16::from_le_bytes(arr(c, be)))).collect()),
            Elem::BF16 => Numbers::Floats(
                chunks.map(|c| f32::from_bits((u16::from_le_bytes(arr(c, be)) as u32) << 16) as f64).collect(),
            ),
            Elem::F32 => Numbers::Floats(chunks.map(|c| f32::from_le_bytes(arr(c, be)) as f64).collect()),
            Elem::F64 => Numbers::Floats(chunks.map(|c| f64::from_le_bytes(arr(c, be))).collect()),
        })
    }
}

/// IEEE half precision to double (exact).
pub fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f64;
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

/// Double to IEEE half, exact for values that came from a half.
pub fn f64_to_f16(v: f64) -> u16 {
    if v.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if v.is_sign_negative() { 0x8000 } else { 0 };
    let a = v.abs();
    if a.is_infinite() || a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f64.powi(-14) {
        return sign | (a / 2f64.powi(-24)).round() as u16;
    }
    let e = a.log2().floor() as i32;
    let frac = ((a / 2f64.powi(e) - 1.0) * 1024.0).round() as u16;
    if frac == 1024 {
        return sign | (((e + 16) as u16) << 10);
    }
    sign | (((e + 15) as u16) << 10) | frac
}
