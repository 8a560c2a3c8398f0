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
//! The parts: [`Enc`] in `enc`, the impls for the Rust types of the table
//! types in `impls`; the trait, the path and error helpers here.
//!
//! Not part of the public API: the generated code calls it.
#![allow(missing_docs, reason = "not part of the public API: the generated code calls it")]

use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::{Default as FieldDefault, ReleaseSchema, StructSchema, Ty, VLLM_RELEASES};
use crate::value::{StructValue, Tensor, Value};

mod enc;
mod impls;
pub use enc::Enc;

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
