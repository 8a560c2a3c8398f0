//! [`IntList`]: the typed form of a `list[int]` (and `set[int]`) field.
//!
//! Wire facts (docs/wire-protocol.md §5.6, §6.4): msgspec decodes a Python `int`
//! from any MessagePack integer, -2^63 ..= 2^64-1 (the signed forms and the
//! unsigned ones up to `uint 64`), so a `list[int]` such as
//! `prompt_token_ids` may hold any of them; msgspec encodes each element in
//! its smallest form. Engines and tokenizers only ever produce ids that fit
//! `i64`, so the list is held as `i64`s (the decoders copy token-id runs in
//! one go, the encoder writes them in one pass) unless an element is above
//! `i64::MAX`; then it is held as `i128`s.

use std::fmt;

use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::{Default as FieldDefault, Ty};
use crate::value::Value;

use super::wire::{type_error, At, Enc, EncodeResult, Rel, WireType};

/// The smallest integer MessagePack carries (and msgspec accepts for `int`).
pub const WIRE_INT_MIN: i128 = i64::MIN as i128;
/// The largest integer MessagePack carries (`uint 64`).
pub const WIRE_INT_MAX: i128 = u64::MAX as i128;

/// A list of wire integers, each in -2^63 ..= 2^64-1 (module docs).
///
/// Equality is by value: a list built from `i64`s equals the same numbers
/// built from `i128`s.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IntList(Repr);

/// The representation: `Wide` only when an element is above `i64::MAX`
/// (every constructor keeps that, so that equal lists compare equal).
/// Boxed, the wide form leaves the list the size of a `Vec` (the enum's tag
/// sits in the `Vec`'s capacity niche).
#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Narrow(Vec<i64>),
    #[expect(clippy::box_collection, reason = "boxed on purpose: the size of the list, above")]
    Wide(Box<Vec<i128>>),
}

impl Default for IntList {
    fn default() -> Self {
        IntList::new()
    }
}

impl fmt::Debug for IntList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// An integer outside -2^63 ..= 2^64-1, which no MessagePack integer holds.
fn out_of_range(v: i128) -> Error {
    Error::new(RejectClass::Type, "", format!("integer {v} does not fit the wire (-2^63 ..= 2^64-1)"))
}

/// Whether `v` is an integer the wire carries.
#[inline]
pub fn fits_wire(v: i128) -> bool {
    (WIRE_INT_MIN..=WIRE_INT_MAX).contains(&v)
}

impl IntList {
    /// An empty list.
    pub const fn new() -> Self {
        IntList(Repr::Narrow(Vec::new()))
    }

    /// Token ids as tokenizers give them (`u32`).
    ///
    /// ```
    /// use engine_protocol::typed::IntList;
    ///
    /// assert_eq!(IntList::from_token_ids(&[1_u32, 15043]), [1, 15043]);
    /// ```
    pub fn from_token_ids(ids: &[u32]) -> Self {
        IntList(Repr::Narrow(ids.iter().map(|&x| i64::from(x)).collect()))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Narrow(xs) => xs.len(),
            Repr::Wide(xs) => xs.len(),
        }
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as `i64`s, when every one fits (always, for what an
    /// engine or a tokenizer produces); `None` when one is above
    /// `i64::MAX`.
    #[inline]
    pub fn as_i64(&self) -> Option<&[i64]> {
        match &self.0 {
            Repr::Narrow(xs) => Some(xs),
            Repr::Wide(_) => None,
        }
    }

    /// The list as `i64`s, or itself back when an element is above
    /// `i64::MAX`.
    pub fn into_i64(self) -> Result<Vec<i64>, IntList> {
        match self.0 {
            Repr::Narrow(xs) => Ok(xs),
            wide => Err(IntList(wide)),
        }
    }

    /// Element `i`.
    pub fn get(&self, i: usize) -> Option<i128> {
        match &self.0 {
            Repr::Narrow(xs) => xs.get(i).map(|&x| i128::from(x)),
            Repr::Wide(xs) => xs.get(i).copied(),
        }
    }

    /// The elements, in order.
    pub fn iter(&self) -> Iter<'_> {
        match &self.0 {
            Repr::Narrow(xs) => Iter::Narrow(xs.iter()),
            Repr::Wide(xs) => Iter::Wide(xs.iter()),
        }
    }

    /// The elements as `i128`s.
    pub fn to_vec(&self) -> Vec<i128> {
        self.iter().collect()
    }

    /// Appends an element that fits `i64`.
    pub fn push(&mut self, v: i64) {
        match &mut self.0 {
            Repr::Narrow(xs) => xs.push(v),
            Repr::Wide(xs) => xs.push(i128::from(v)),
        }
    }

    /// Removes the last element.
    pub fn pop(&mut self) -> Option<i128> {
        let last = match &mut self.0 {
            Repr::Narrow(xs) => xs.pop().map(i128::from),
            Repr::Wide(xs) => xs.pop(),
        };
        if let Repr::Wide(xs) = &self.0 {
            if xs.iter().all(|&x| x <= i128::from(i64::MAX)) {
                self.0 = Repr::Narrow(xs.iter().map(|&x| x as i64).collect());
            }
        }
        last
    }

    /// Appends any wire integer; an error (`type`) outside -2^63 ..= 2^64-1.
    pub fn push_wide(&mut self, v: i128) -> Result<(), Error> {
        if let Ok(x) = i64::try_from(v) {
            self.push(x);
            return Ok(());
        }
        if !fits_wire(v) {
            return Err(out_of_range(v));
        }
        if let Repr::Narrow(xs) = &self.0 {
            self.0 = Repr::Wide(Box::new(xs.iter().map(|&x| i128::from(x)).collect()));
        }
        if let Repr::Wide(xs) = &mut self.0 {
            xs.push(v);
        }
        Ok(())
    }

    /// The list a decoded `list[int]` value holds (`IntArray`, or an
    /// array of `Int` / `UInt`); an error (`type`) for anything else.
    pub fn from_plain_value(v: &Value) -> Result<IntList, Error> {
        match v {
            Value::IntArray(xs) => Ok(IntList(Repr::Narrow(xs.clone()))),
            Value::Array(xs) => {
                let mut out = IntList(Repr::Narrow(Vec::with_capacity(xs.len())));
                for (i, x) in xs.iter().enumerate() {
                    let x = match x {
                        Value::Int(i) => i128::from(*i),
                        Value::UInt(u) => i128::from(*u),
                        other => return Err(type_error("int", other)).at_index(i),
                    };
                    out.push_wide(x).at_index(i)?;
                }
                Ok(out)
            }
            other => Err(type_error("array", other)),
        }
    }

    /// The list `decode_message` holds for these elements: `IntArray` when
    /// every one fits `i64`, else an array of `Int` / `UInt`.
    pub fn to_plain_value(&self) -> Value {
        match &self.0 {
            Repr::Narrow(xs) => Value::IntArray(xs.clone()),
            Repr::Wide(xs) => Value::Array(xs.iter().map(|&x| wire_value(x)).collect()),
        }
    }
}

/// A wire integer as the value tree holds it: `Int` when it fits `i64`,
/// else `UInt`. The caller has checked the range.
fn wire_value(x: i128) -> Value {
    match i64::try_from(x) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::UInt(x as u64),
    }
}

/// The iterator of [`IntList::iter`].
#[derive(Debug, Clone)]
pub enum Iter<'a> {
    #[doc(hidden)]
    Narrow(std::slice::Iter<'a, i64>),
    #[doc(hidden)]
    Wide(std::slice::Iter<'a, i128>),
}

impl Iterator for Iter<'_> {
    type Item = i128;

    #[inline]
    fn next(&mut self) -> Option<i128> {
        match self {
            Iter::Narrow(it) => it.next().map(|&x| i128::from(x)),
            Iter::Wide(it) => it.next().copied(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Narrow(it) => it.size_hint(),
            Iter::Wide(it) => it.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a IntList {
    type Item = i128;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl From<Vec<i64>> for IntList {
    fn from(xs: Vec<i64>) -> Self {
        IntList(Repr::Narrow(xs))
    }
}

impl From<&[i64]> for IntList {
    fn from(xs: &[i64]) -> Self {
        IntList(Repr::Narrow(xs.to_vec()))
    }
}

impl<const N: usize> From<[i64; N]> for IntList {
    fn from(xs: [i64; N]) -> Self {
        IntList(Repr::Narrow(xs.to_vec()))
    }
}

impl FromIterator<i64> for IntList {
    fn from_iter<I: IntoIterator<Item = i64>>(it: I) -> Self {
        IntList(Repr::Narrow(it.into_iter().collect()))
    }
}

impl TryFrom<Vec<i128>> for IntList {
    type Error = Error;

    /// Any wire integers; an error (`type`) for one outside
    /// -2^63 ..= 2^64-1.
    fn try_from(xs: Vec<i128>) -> Result<Self, Error> {
        if let Some(&bad) = xs.iter().find(|&&x| !fits_wire(x)) {
            return Err(out_of_range(bad));
        }
        if xs.iter().all(|&x| x <= i128::from(i64::MAX)) {
            Ok(IntList(Repr::Narrow(xs.into_iter().map(|x| x as i64).collect())))
        } else {
            Ok(IntList(Repr::Wide(Box::new(xs))))
        }
    }
}

impl PartialEq<[i64]> for IntList {
    fn eq(&self, other: &[i64]) -> bool {
        self.as_i64() == Some(other)
    }
}

impl PartialEq<Vec<i64>> for IntList {
    fn eq(&self, other: &Vec<i64>) -> bool {
        self.as_i64() == Some(other.as_slice())
    }
}

impl<const N: usize> PartialEq<[i64; N]> for IntList {
    fn eq(&self, other: &[i64; N]) -> bool {
        self.as_i64() == Some(other.as_slice())
    }
}

impl WireType for IntList {
    fn from_value(v: &Value, _: Option<&Value>, _: Rel) -> Result<Self, Error> {
        IntList::from_plain_value(v)
    }
    fn to_value(&self, _: &'static Ty, _: Rel) -> Result<Value, Error> {
        Ok(self.to_plain_value())
    }
    /// Inlined into the struct encoders: a token-id list is one call to
    /// the array writer, as a `Vec<i64>` field's was; the wide form, which
    /// no engine produces, is out of line.
    #[inline]
    fn encode(&self, _: Rel, e: &mut Enc) -> EncodeResult {
        match &self.0 {
            Repr::Narrow(xs) => write::int_array(&mut e.out, xs),
            Repr::Wide(xs) => encode_wide(xs, e),
        }
        Ok(())
    }
    fn is_default(&self, d: &FieldDefault) -> bool {
        matches!(d, FieldDefault::EmptyList | FieldDefault::EmptySet) && self.is_empty()
    }
}

/// The wide form's elements, each in its smallest form.
#[cold]
#[inline(never)]
fn encode_wide(xs: &[i128], e: &mut Enc) {
    write::array_len(&mut e.out, xs.len() as u32);
    for &x in xs {
        write_wire_int(&mut e.out, x);
    }
}

/// Writes a wire integer in its smallest form (the caller has checked the
/// range).
#[inline]
pub(crate) fn write_wire_int(out: &mut Vec<u8>, x: i128) {
    match i64::try_from(x) {
        Ok(i) => write::int(out, i),
        Err(_) => write::uint(out, x as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_numbers_that_fit_i64_is_held_narrow_however_it_was_built() {
        let wide = IntList::try_from(vec![1i128, -1, i64::MAX as i128]).unwrap();
        assert_eq!(wide, IntList::from(vec![1, -1, i64::MAX]));
        assert_eq!(wide.as_i64(), Some(&[1, -1, i64::MAX][..]));
    }

    #[test]
    fn an_element_above_i64_max_makes_the_list_wide_and_keeps_every_value() {
        let mut l = IntList::from(vec![7, -3]);
        l.push_wide(WIRE_INT_MAX).unwrap();
        l.push(i64::MIN);
        assert_eq!(l.as_i64(), None);
        assert_eq!(l.to_vec(), vec![7, -3, WIRE_INT_MAX, i64::MIN as i128]);
        assert_eq!(l.len(), 4);
        assert_eq!(l.get(2), Some(WIRE_INT_MAX));
        assert_eq!(l.pop(), Some(i64::MIN as i128));
        assert_eq!(l.pop(), Some(WIRE_INT_MAX));
        assert_eq!(l, IntList::from(vec![7, -3]), "narrow again once the wide element is gone");
    }

    #[test]
    fn a_list_is_the_size_of_a_vec() {
        assert_eq!(std::mem::size_of::<IntList>(), std::mem::size_of::<Vec<i64>>());
        assert_eq!(std::mem::size_of::<Option<IntList>>(), std::mem::size_of::<Vec<i64>>());
    }

    #[test]
    fn integers_past_the_wire_range_are_refused() {
        assert!(IntList::try_from(vec![WIRE_INT_MAX + 1]).is_err());
        assert!(IntList::try_from(vec![WIRE_INT_MIN - 1]).is_err());
        assert!(IntList::new().push_wide(WIRE_INT_MAX + 1).is_err());
    }
}
