//! [`WireType`] for the Rust types of the table types: `bool`, `i64`,
//! `i128` (any MessagePack integer, -2^63 ..= 2^64-1; outside that range
//! fails to encode as `type`), `f64` (float64 on the wire; an integer a
//! float field arrived holding is taken as a float), `String`, `Any` as
//! [`Value`], tensors, `Bytes`, `Option` (nil), lists and dicts (a `Vec`
//! of entries in wire order). Byte rules: docs/wire-protocol.md §5.

use bytes::Bytes;

use super::{raw_at, type_error, unwrap_optional, At, Enc, EncodeResult, Rel, WireType};
use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::{Default as FieldDefault, Ty};
use crate::value::{Tensor, Value};

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
