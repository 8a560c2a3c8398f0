//! The runtime the generated typed messages are written against: one trait
//! ([`WireType`]) giving every Rust type that stands for a table type its
//! three directions (from a decoded [`Value`], to a [`Value`] of a chosen
//! release, straight to MessagePack bytes), and the byte writer.
//!
//! Byte rules are those of the schema-driven encoder (docs/wire-protocol.md
//! §5): integers in their smallest form, floats as float64, strings as
//! `str`, a tensor inline as ext 3 under 256 bytes (or 0-d) and otherwise in
//! a new aux frame whose index (from 1) replaces its data (§5.11).
//!
//! Not part of the public API: the generated code calls it.
#![allow(missing_docs)]

use bytes::Bytes;

use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::{Default as FieldDefault, ReleaseSchema, StructSchema, Ty, VLLM_RELEASES};
use crate::value::{StructValue, Tensor, Value};

/// A release as the generated code sees it: its table and its position in
/// [`VLLM_RELEASES`] (as a bit, so that "the releases that have this field" is
/// one mask test).
#[derive(Debug, Clone, Copy)]
pub struct Rel {
    pub schema: &'static ReleaseSchema,
    pub bit: u32,
}

impl Rel {
    /// The position of `schema` in [`VLLM_RELEASES`]; an error for a table that
    /// is not one of them.
    pub fn of(schema: &'static ReleaseSchema) -> Result<Rel, Error> {
        VLLM_RELEASES
            .iter()
            .position(|r| std::ptr::eq(*r, schema) || (r.dialect == schema.dialect && r.version == schema.version))
            .map(|i| Rel { schema, bit: 1 << i })
            .ok_or_else(|| {
                Error::new(
                    RejectClass::Validation,
                    "",
                    format!("no typed API for {} {}", schema.dialect, schema.version),
                )
            })
    }

    /// This release's entry of a per-release table (in [`VLLM_RELEASES`] order).
    #[inline(always)]
    pub fn pick(self, per_release: &[usize]) -> usize {
        per_release[self.bit.trailing_zeros() as usize]
    }

    /// Whether this release is one of `mask`.
    #[inline(always)]
    pub fn is(self, mask: u32) -> bool {
        self.bit & mask != 0
    }

    /// Its position in [`VLLM_RELEASES`].
    #[inline(always)]
    pub fn index(self) -> usize {
        self.bit.trailing_zeros() as usize
    }
}

/// The byte writer of the direct encoder: the payload, its aux frames,
/// and the size from which an array goes to an aux frame. An aux frame
/// the encoder made (a tensor's data) is a `Vec` in `aux`; one it shares
/// with the caller (an array held as [`Bytes`], written without a copy) is
/// in `shared`, with an empty placeholder at its place in `aux`, so that
/// the common case keeps the plain vectors.
#[derive(Debug)]
pub struct Enc {
    pub out: Vec<u8>,
    pub aux: Vec<Vec<u8>>,
    /// `(index in aux, bytes)` of the shared aux frames.
    pub shared: Vec<(usize, Bytes)>,
    /// vLLM's `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`: an array of fewer bytes
    /// is written inline.
    pub zero_copy_threshold: usize,
}

impl Default for Enc {
    fn default() -> Self {
        Enc::new(Vec::new())
    }
}

impl Enc {
    /// A writer appending to `out`, with vLLM's default threshold.
    pub fn new(out: Vec<u8>) -> Enc {
        Enc { out, aux: Vec::new(), shared: Vec::new(), zero_copy_threshold: crate::encode::ZERO_COPY_THRESHOLD }
    }

    /// Appends a shared aux frame; returns its index as the payload names
    /// it (from 1).
    pub fn push_shared(&mut self, b: Bytes) -> usize {
        self.shared.push((self.aux.len(), b));
        self.aux.push(Vec::new());
        self.aux.len()
    }

    /// The aux frames as owned vectors (a shared one copied).
    pub fn aux_owned(&mut self) -> Vec<Vec<u8>> {
        let mut aux = std::mem::take(&mut self.aux);
        for (i, b) in self.shared.drain(..) {
            aux[i] = b.to_vec();
        }
        aux
    }

    /// The aux frames as shared buffers (a made one moved, a shared one
    /// as it is).
    pub fn aux_shared(&mut self) -> Vec<Bytes> {
        let mut aux: Vec<Bytes> = std::mem::take(&mut self.aux).into_iter().map(Bytes::from).collect();
        for (i, b) in self.shared.drain(..) {
            aux[i] = b;
        }
        aux
    }

    #[inline(always)]
    pub fn raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// A map header as msgspec sizes a struct's: `map16` whatever the count
    /// when the struct has more than 15 fields.
    #[inline]
    pub fn struct_map(&mut self, fields: usize, n: usize) {
        if fields > 15 {
            write::map16_len(&mut self.out, n as u16);
        } else {
            write::map_len(&mut self.out, n as u32);
        }
    }

    /// [`Enc::struct_map`] with a count of 0, for a sparse struct whose
    /// count is known only once its fields are written: the header's size
    /// depends on `fields` alone. Returns where it starts, for
    /// [`Enc::patch_struct_map`].
    #[inline]
    pub fn struct_map_placeholder(&mut self, fields: usize) -> usize {
        let at = self.out.len();
        self.struct_map(fields, 0);
        at
    }

    /// Makes the header [`Enc::struct_map_placeholder`] wrote at `at` the
    /// header [`Enc::struct_map`] writes for `fields` and `n`: the count is
    /// patched in place, except in the rare case of a struct of at most 15
    /// fields with unknown keys taking the count past 15, whose header
    /// grows (the body moves).
    #[inline]
    pub fn patch_struct_map(&mut self, at: usize, fields: usize, n: usize) {
        if fields > 15 {
            self.out[at + 1..at + 3].copy_from_slice(&(n as u16).to_be_bytes());
        } else if n < 16 {
            self.out[at] = 0x80 | n as u8;
        } else {
            let mut header = Vec::with_capacity(5);
            write::map_len(&mut header, n as u32);
            self.out.splice(at..at + 1, header);
        }
    }

    pub fn tensor(&mut self, t: &Tensor) {
        crate::encode::write_tensor(&mut self.out, &mut self.aux, t, self.zero_copy_threshold);
    }

    /// An `Any` value, with the Value encoder's rules.
    pub fn any(&mut self, v: &Value) -> Result<(), Error> {
        static ANY: Ty = Ty::Any;
        crate::encode::encode_into("", &ANY, v, &mut self.out, &mut self.aux)
    }
}

/// What the direct encoder returns: the error boxed, so that the result is
/// one word and each field's `?` one test.
pub type EncodeResult = Result<(), Box<Error>>;

/// Prefixes error paths while unwinding: nothing is spent on paths when
/// conversion succeeds.
pub trait At {
    fn at(self, seg: &str) -> Self;
    fn at_index(self, i: usize) -> Self;
}

#[cold]
#[inline(never)]
fn prefix(mut e: Error, seg: &str) -> Error {
    e.path.insert_str(0, seg);
    e
}

#[cold]
#[inline(never)]
fn prefix_index(mut e: Error, i: usize) -> Error {
    e.path.insert_str(0, &format!("[{i}]"));
    e
}

impl<T> At for Result<T, Error> {
    #[inline(always)]
    fn at(self, seg: &str) -> Self {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(prefix(e, seg)),
        }
    }

    #[inline(always)]
    fn at_index(self, i: usize) -> Self {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(prefix_index(e, i)),
        }
    }
}

impl<T> At for Result<T, Box<Error>> {
    #[inline(always)]
    fn at(self, seg: &str) -> Self {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(Box::new(prefix(*e, seg))),
        }
    }

    #[inline(always)]
    fn at_index(self, i: usize) -> Self {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(Box::new(prefix_index(*e, i))),
        }
    }
}

/// The MessagePack kind of a value, for error details.
#[inline]
pub fn kind(v: &Value) -> &'static str {
    v.kind_name()
}

pub fn type_error(want: &str, got: &Value) -> Error {
    Error::new(RejectClass::Type, "", format!("expected {want}, got {}", kind(got)))
}

/// A field set on a value bound for a release whose table lacks it.
pub fn not_in_release(rel: Rel, field: &str) -> Error {
    Error::new(
        RejectClass::Validation,
        format!(".{field}"),
        format!("field `{field}` is set but vLLM {} has no such field", rel.schema.version),
    )
}

/// The struct schema `ty` names, checked against the generated struct.
pub fn struct_schema(ty: &'static Ty, name: &str) -> Result<&'static StructSchema, Error> {
    match ty.as_struct() {
        Some(s) if s.name == name => Ok(s),
        Some(s) => Err(Error::new(RejectClass::Type, "", format!("expected struct {name}, the table has {}", s.name))),
        None => Err(Error::new(RejectClass::Type, "", format!("expected struct {name}, the table has no struct here"))),
    }
}

/// The decoded struct `v` holds, checked by name.
pub fn struct_value<'a>(v: &'a Value, name: &str) -> Result<&'a StructValue, Error> {
    match v {
        Value::Struct(s) if s.schema.name == name => Ok(s),
        Value::Struct(s) => {
            Err(Error::new(RejectClass::Type, "", format!("expected struct {name}, got {}", s.schema.name)))
        }
        other => Err(type_error(name, other)),
    }
}

/// The next field of a decoded struct, checked by name against the
/// generated struct's.
#[inline(always)]
pub fn next_field<'a>(
    it: &mut impl Iterator<Item = (&'static crate::schema::Field, &'a Value)>,
    name: &str,
) -> Result<&'a Value, Error> {
    match it.next() {
        // Names are compared by length on the hot path: the generated
        // structs and the tables cannot drift apart (the `typed_generated`
        // test regenerates and compares), and fields of one struct that
        // share a length and a position in both would need both to drift.
        Some((f, v)) if f.name.len() == name.len() => {
            debug_assert_eq!(f.name, name);
            Ok(v)
        }
        Some((f, _)) => Err(field_mismatch(f.name, name)),
        None => Err(Error::new(RejectClass::Type, "", format!("the table has no field `{name}`"))),
    }
}

#[cold]
#[inline(never)]
fn field_mismatch(table: &str, name: &str) -> Error {
    Error::new(RejectClass::Type, "", format!("the table has field `{table}` where the typed struct has `{name}`"))
}

/// Element `i` of a raw (schema-less) array, to find unknown fields in.
#[inline]
pub fn raw_at(raw: Option<&Value>, i: usize) -> Option<&Value> {
    match raw? {
        Value::Array(xs) => xs.get(i),
        _ => None,
    }
}

/// The value of key `k` of a raw map.
pub fn raw_key<'a>(raw: Option<&'a Value>, k: &str) -> Option<&'a Value> {
    match raw? {
        Value::Map(m) => m.iter().find(|(key, _)| matches!(key, Value::Str(s) if s == k)).map(|(_, v)| v),
        _ => None,
    }
}

/// The trailing elements of a raw array past the `n` the table knows.
pub fn raw_extra_elements(raw: Option<&Value>, n: usize) -> Vec<Value> {
    match raw {
        Some(Value::Array(xs)) if xs.len() > n => xs[n..].to_vec(),
        _ => Vec::new(),
    }
}

/// The entries of a raw map whose keys the table does not know.
pub fn raw_extra_keys(raw: Option<&Value>, known: &StructSchema) -> Vec<(String, Value)> {
    match raw {
        Some(Value::Map(m)) => m
            .iter()
            .filter_map(|(k, v)| match k {
                Value::Str(s) if known.index_of(s).is_none() => Some((s.clone(), v.clone())),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Writes unknown map entries (already counted in the header).
pub fn encode_extra_keys(extra: &[(String, Value)], e: &mut Enc) -> EncodeResult {
    for (k, v) in extra {
        write::str(&mut e.out, k);
        e.any(v).at(&format!(".{k}"))?;
    }
    Ok(())
}

/// Checks a `Literal[...]` string against the values the table allows.
pub fn check_literal(s: Option<&str>, allowed: &[&str]) -> Result<(), Error> {
    match s {
        Some(s) if !allowed.contains(&s) => {
            Err(Error::new(RejectClass::Enum, "", format!("invalid enum value {s:?} (one of {allowed:?})")))
        }
        _ => Ok(()),
    }
}

/// A Rust type standing for a table type.
pub trait WireType: Sized {
    /// From a decoded value. `raw` is the same value decoded without a
    /// schema, when the decoder reported drift: nested structs find their
    /// unknown fields in it.
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error>;
    /// To a value of `ty` (the field's type in `rel`'s table).
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error>;
    /// Straight to bytes.
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult;
    /// Straight to bytes as a field of type `ty` in `rel`'s table: for the
    /// fields a release retypes (the prompt's token ids: `list[int]` up to
    /// 0.33.0, an ndarray from 0.34.0), whose Rust type writes either form.
    #[inline]
    fn encode_as(&self, _ty: &'static Ty, rel: Rel, e: &mut Enc) -> EncodeResult {
        self.encode(rel, e)
    }
    /// Whether this equals default `d` (what an omit-defaults map omits),
    /// with the Value encoder's rule (`value::is_default`).
    fn is_default(&self, _d: &FieldDefault) -> bool {
        false
    }
    /// A list of these as a value (`list[int]` is held unboxed).
    fn list_to_value(xs: &[Self], inner: &'static Ty, rel: Rel) -> Result<Value, Error> {
        xs.iter()
            .enumerate()
            .map(|(i, x)| x.to_value(inner, rel).at_index(i))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }
    /// A list of these from the decoder's unboxed integer list
    /// (`Value::IntArray`); `None` converts element by element. `i64`
    /// overrides it: token id runs are copied in one go.
    fn from_int_slice(_xs: &[i64]) -> Option<Vec<Self>> {
        None
    }
    /// A list of these (`list[int]` overrides it: token ids are written
    /// with one reservation).
    fn encode_slice(xs: &[Self], rel: Rel, e: &mut Enc) -> EncodeResult {
        write::array_len(&mut e.out, xs.len() as u32);
        for (i, x) in xs.iter().enumerate() {
            x.encode(rel, e).at_index(i)?;
        }
        Ok(())
    }
}

impl WireType for bool {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Bool(b) => Ok(*b),
            other => Err(type_error("bool", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Bool(*self))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        write::bool(&mut e.out, *self);
        Ok(())
    }
    #[inline]
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::Bool(b) if b == self)
    }
}

impl WireType for i64 {
    #[inline]
    fn from_int_slice(xs: &[i64]) -> Option<Vec<Self>> {
        Some(xs.to_vec())
    }
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Int(i) => Ok(*i),
            Value::UInt(u) => Err(Error::new(RejectClass::Type, "", format!("integer {u} is out of range for i64"))),
            other => Err(type_error("int", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Int(*self))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        write::int(&mut e.out, *self);
        Ok(())
    }
    #[inline]
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::Int(i) if i == self)
    }
    fn encode_slice(xs: &[Self], _: Rel, e: &mut Enc) -> EncodeResult {
        write::int_array(&mut e.out, xs);
        Ok(())
    }
    fn list_to_value(xs: &[Self], _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::IntArray(xs.to_vec()))
    }
}

/// An `int` field: any integer MessagePack carries, -2^63 ..= 2^64-1, as
/// msgspec takes for a Python `int` (docs/wire-protocol.md §5.6, §6.4). An
/// `i128` outside that range has no wire form: encoding it fails (`type`).
impl WireType for i128 {
    #[inline]
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Int(i) => Ok(i128::from(*i)),
            Value::UInt(u) => Ok(i128::from(*u)),
            other => Err(type_error("int", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        if let Ok(i) = i64::try_from(*self) {
            Ok(Value::Int(i))
        } else if let Ok(u) = u64::try_from(*self) {
            Ok(Value::UInt(u))
        } else {
            Err(wire_range_error(*self))
        }
    }
    /// Inlined into the struct encoders with only the `i64` range on the
    /// way (every count and id an engine sends), as an `i64` field's
    /// writer was; the `uint 64` forms and the range error are out of line.
    #[inline(always)]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        let v = *self;
        if v as i64 as i128 == v {
            write::int(&mut e.out, v as i64);
            Ok(())
        } else {
            encode_beyond_i64(v, e)
        }
    }
    #[inline]
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::Int(i) if i128::from(*i) == *self)
    }
}

/// An `int` above `i64::MAX` (a `uint 64` form) or outside the wire.
#[cold]
#[inline(never)]
fn encode_beyond_i64(v: i128, e: &mut Enc) -> EncodeResult {
    match u64::try_from(v) {
        Ok(u) => {
            write::uint(&mut e.out, u);
            Ok(())
        }
        Err(_) => Err(Box::new(wire_range_error(v))),
    }
}

#[cold]
#[inline(never)]
fn wire_range_error(v: i128) -> Error {
    Error::new(RejectClass::Type, "", format!("integer {v} does not fit the wire (-2^63 ..= 2^64-1)"))
}

impl WireType for f64 {
    /// A float field holding an integer (msgspec writes the Python int it
    /// was given) reads as that number; re-encoded, it is a float64.
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Float(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            Value::UInt(u) => Ok(*u as f64),
            other => Err(type_error("float", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Float(*self))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        write::float(&mut e.out, *self);
        Ok(())
    }
    #[inline]
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::Float(a) if a.to_bits() == self.to_bits() || (a == self && *a != 0.0))
    }
}

impl WireType for String {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Str(s) => Ok(s.clone()),
            other => Err(type_error("str", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Str(self.clone()))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        write::str(&mut e.out, self);
        Ok(())
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::Str(s) if s == self)
    }
}

/// `Any` (and the table types kept dynamic: multimodal `NestedTensors`).
impl WireType for Value {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        Ok(v.clone())
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(self.clone())
    }
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        Ok(e.any(self)?)
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        crate::value::is_default(self, d)
    }
}

impl WireType for Tensor {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Tensor(t) => Ok((**t).clone()),
            other => Err(type_error("tensor", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Tensor(Box::new(self.clone())))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        e.tensor(self);
        Ok(())
    }
}

/// `bytes` (a `bin` on the wire), shared.
impl WireType for Bytes {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        match v {
            Value::Bytes(b) => Ok(Bytes::copy_from_slice(b)),
            other => Err(type_error("bytes", other)),
        }
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(Value::Bytes(self.to_vec()))
    }
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        write::bin(&mut e.out, self);
        Ok(())
    }
}

/// A tensor with no elements and no dtype (the placeholder of a required
/// tensor field in `Default` impls).
pub fn empty_tensor() -> Tensor {
    Tensor { dtype: String::new(), shape: Vec::new(), data: Vec::new() }
}

/// A required key absent from an open map.
pub fn missing(name: &str) -> Error {
    Error::new(RejectClass::MissingField, format!(".{name}"), format!("required field `{name}` is absent"))
}

/// A per-release field count that the table in hand does not have.
pub fn count_mismatch(s: &StructSchema, want: usize) -> Error {
    Error::new(
        RejectClass::Type,
        "",
        format!("{} has {} fields in this table, the typed struct expects {want}", s.name, s.fields.len()),
    )
}

pub fn unwrap_optional(ty: &'static Ty) -> &'static Ty {
    match ty {
        Ty::Optional(t) => t,
        t => t,
    }
}

impl<T: WireType> WireType for Option<T> {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Nil => Ok(None),
            v => T::from_value(v, raw, rel).map(Some),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        match self {
            None => Ok(Value::Nil),
            Some(x) => x.to_value(unwrap_optional(ty), rel),
        }
    }
    #[inline]
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {
        match self {
            None => {
                write::nil(&mut e.out);
                Ok(())
            }
            Some(x) => x.encode(rel, e),
        }
    }
    #[inline]
    fn encode_as(&self, ty: &'static Ty, rel: Rel, e: &mut Enc) -> EncodeResult {
        match self {
            None => {
                write::nil(&mut e.out);
                Ok(())
            }
            Some(x) => x.encode_as(unwrap_optional(ty), rel, e),
        }
    }
    #[inline]
    fn is_default(&self, d: &FieldDefault) -> bool {
        match self {
            None => matches!(d, FieldDefault::Nil),
            Some(x) => x.is_default(d),
        }
    }
}

/// `list[...]` and `set[...]` (a set keeps the order it was read in).
impl<T: WireType> WireType for Vec<T> {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Array(xs) => {
                xs.iter().enumerate().map(|(i, x)| T::from_value(x, raw_at(raw, i), rel).at_index(i)).collect()
            }
            Value::IntArray(xs) => match T::from_int_slice(xs) {
                Some(v) => Ok(v),
                None => {
                    xs.iter().enumerate().map(|(i, x)| T::from_value(&Value::Int(*x), None, rel).at_index(i)).collect()
                }
            },
            other => Err(type_error("array", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        let inner = match ty {
            Ty::List(t) | Ty::Set(t) => t,
            _ => &Ty::Any,
        };
        T::list_to_value(self, inner, rel)
    }
    #[inline]
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {
        T::encode_slice(self, rel, e)
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::EmptyList | FieldDefault::EmptySet) && self.is_empty()
    }
}

/// A `dict[K, V]`: its entries in wire order.
impl<K: WireType, V: WireType> WireType for Vec<(K, V)> {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        match v {
            Value::Map(m) => m
                .iter()
                .enumerate()
                .map(|(i, (k, x))| {
                    let raw_x = match raw {
                        Some(Value::Map(rm)) => rm.get(i).map(|(_, rv)| rv),
                        _ => None,
                    };
                    let key = K::from_value(k, None, rel).at_index(i)?;
                    let seg = match k {
                        Value::Str(s) => format!(".{s}"),
                        _ => format!("[{i}]"),
                    };
                    Ok((key, V::from_value(x, raw_x, rel).at(&seg)?))
                })
                .collect(),
            other => Err(type_error("object", other)),
        }
    }
    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        let (kt, vt): (&'static Ty, &'static Ty) = match ty {
            Ty::Dict(k, v) => (k, v),
            _ => (&Ty::Any, &Ty::Any),
        };
        self.iter()
            .enumerate()
            .map(|(i, (k, v))| Ok((k.to_value(kt, rel).at_index(i)?, v.to_value(vt, rel).at_index(i)?)))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Map)
    }
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {
        write::map_len(&mut e.out, self.len() as u32);
        for (i, (k, v)) in self.iter().enumerate() {
            k.encode(rel, e).at_index(i)?;
            v.encode(rel, e).at_index(i)?;
        }
        Ok(())
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::EmptyDict) && self.is_empty()
    }
}

/// An integer enum of typed.rs, by its wire value.
pub trait IntEnum: Sized + Copy {
    const NAME: &'static str;
    fn from_wire(v: i64) -> Option<Self>;
    fn wire(self) -> i64;
}

macro_rules! int_enum_wire {
    ($t:ty) => {
        impl $crate::typed::wire::WireType for $t {
            fn from_value(v: &$crate::value::Value, _: Option<&$crate::value::Value>, _: $crate::typed::wire::Rel) -> Result<Self, $crate::error::Error> {
                match v {
                    $crate::value::Value::Int(i) => <$t as $crate::typed::wire::IntEnum>::from_wire(*i).ok_or_else(|| {
                        $crate::error::Error::new(
                            $crate::error::RejectClass::Enum,
                            "",
                            format!("invalid enum value {i} for {}", <$t as $crate::typed::wire::IntEnum>::NAME),
                        )
                    }),
                    other => Err($crate::typed::wire::type_error("int", other)),
                }
            }
            fn to_value(&self, _: &'static $crate::schema::Ty, _: $crate::typed::wire::Rel) -> Result<$crate::value::Value, $crate::error::Error> {
                Ok($crate::value::Value::Int($crate::typed::wire::IntEnum::wire(*self)))
            }
            #[inline]
            fn encode(&self, _: $crate::typed::wire::Rel, e: &mut $crate::typed::wire::Enc) -> $crate::typed::wire::EncodeResult {
                $crate::msgpack::write::int(&mut e.out, $crate::typed::wire::IntEnum::wire(*self));
                Ok(())
            }
            fn is_default(&self, d: &$crate::schema::Default) -> bool {
                matches!(d, $crate::schema::Default::Int(i) if *i == $crate::typed::wire::IntEnum::wire(*self))
            }
        }
    };
}
pub(crate) use int_enum_wire;

#[cfg(test)]
mod tests {
    use super::Enc;

    #[test]
    fn a_patched_struct_map_header_is_the_header_struct_map_writes() {
        // Both header forms, and a small struct whose unknown keys take the
        // count past 15 (its header grows from a fixmap to a map16).
        for fields in [0, 1, 5, 15, 16, 43] {
            for n in [0, 1, 15, 16, 17, 300, 65535] {
                let mut direct = Enc::new(vec![0x42]);
                direct.struct_map(fields, n);
                direct.out.extend_from_slice(b"body");
                let mut patched = Enc::new(vec![0x42]);
                let at = patched.struct_map_placeholder(fields);
                patched.out.extend_from_slice(b"body");
                patched.patch_struct_map(at, fields, n);
                assert_eq!(patched.out, direct.out, "{fields} fields, count {n}");
            }
        }
    }
}
