//! Structs in each of their wire layouts (msgspec 0.23 as vLLM uses it;
//! docs/wire-protocol.md §6): positional arrays (missing trailing fields
//! defaulted, extra trailing elements reported as drift), named tuples
//! (no extra elements), tagged positional structs (TokenSpeed: the tag,
//! element 0, checked first; drift numbered by wire position), maps
//! (absent keys defaulted, unknown keys reported as drift) and open maps.

use super::{err, read_err, type_err, utf8, Decoder, Seg, R};
use crate::error::{Error, RejectClass};
use crate::msgpack::Token;
use crate::schema::Default as FieldDefault;
use crate::schema::{Layout, StructSchema, Ty};
use crate::value::{is_default, StructValue, Value};

impl<'a> Decoder<'a, '_> {
    pub(super) fn struct_value(&mut self, s: &'static StructSchema) -> R<StructValue> {
        let t = self.token()?;
        self.enter()?;
        let v = match (s.layout, t) {
            (Layout::Positional | Layout::NamedTuple | Layout::Tuple, Token::Array(n)) => self.positional(s, n)?,
            (Layout::SparseMap | Layout::FullMap, Token::Map(n)) => self.keyed(s, n)?,
            (Layout::OpenMap, Token::Map(n)) => self.open_map(s, n)?,
            (_, t) => {
                let want = if matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple) {
                    "array"
                } else {
                    "object"
                };
                return Err(err(RejectClass::Type, format!("expected {want} ({}), got {}", s.name, t.type_name())));
            }
        };
        self.depth -= 1;
        if s.validate.is_some() {
            if let Err(violation) = crate::validate::check(s, &v) {
                let path = if violation.fields.is_empty() { String::new() } else { format!(".{}", violation.path()) };
                return Err(Box::new(Error::new(RejectClass::Validation, path, violation.message)));
            }
        }
        Ok(v)
    }

    fn positional(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 1)?;
        if let Some(tag) = s.tag() {
            return self.tagged(s, tag, n);
        }
        self.positional_fields(s, n, 0)
    }

    /// A tagged positional struct (TokenSpeed): element 0 must be the tag
    /// string (another string is `enum`, another kind `type`), the fields
    /// follow; drift is numbered by wire position, the tag counting as 0
    /// (docs/tokenspeed-wire.md §3).
    fn tagged(&mut self, s: &'static StructSchema, tag: &'static str, n: usize) -> R<StructValue> {
        if n == 0 {
            let min = s.min_len() + 1;
            return Err(err(
                RejectClass::MissingField,
                format!("expected array of at least length {min} ({}, tag first), got 0", s.name),
            ));
        }
        self.at(Seg::Index(0), |d| match d.token()? {
            Token::Str(b) if b == tag.as_bytes() => Ok(()),
            Token::Str(b) => {
                Err(err(RejectClass::Enum, format!("invalid tag {:?} (expected {tag:?})", String::from_utf8_lossy(b))))
            }
            t => Err(type_err(&Ty::Str, &t)),
        })?;
        self.positional_fields(s, n - 1, 1)
    }

    /// The `n` field elements of a positional struct; `offset` elements
    /// (a tag) precede them on the wire.
    fn positional_fields(&mut self, s: &'static StructSchema, n: usize, offset: usize) -> R<StructValue> {
        let nf = s.fields.len();
        if n < nf && n < s.min_len() {
            let required = s.min_len() + offset;
            let got = n + offset;
            return Err(err(
                RejectClass::MissingField,
                format!("expected array of at least length {required} ({}), got {got}", s.name),
            ));
        }
        if matches!(s.layout, Layout::NamedTuple | Layout::Tuple) && n > nf {
            return Err(err(RejectClass::Type, format!("expected array of at most length {nf} ({}), got {n}", s.name)));
        }
        let base = self.scratch.len();
        for (i, field) in s.fields.iter().enumerate().take(n) {
            // Fast path: most fields of an output are nil, and held only
            // when nil is not their default.
            if matches!(field.ty, Ty::Optional(_)) && self.r.peek_byte() == Some(0xc0) {
                self.r.bump();
                if field.default != FieldDefault::Nil {
                    self.scratch.push((i as u16, Value::Nil));
                }
                continue;
            }
            let v = self.at(Seg::Field(field.name), |d| d.value(field.ty))?;
            if field.default == FieldDefault::Required || !is_default(&v, &field.default) {
                self.scratch.push((i as u16, v));
            }
        }
        for i in nf..n {
            self.r.skip_value().map_err(read_err)?;
            self.drift.push(Seg::Index(i + offset).render());
        }
        let entries = self.scratch.split_off(base).into_boxed_slice();
        Ok(StructValue::from_entries(s, entries))
    }

    fn keyed(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 2)?;
        let base = self.scratch.len();
        let mut sorted = true;
        // Which fields the wire carried (the tables have at most 64 fields
        // per struct; `schema_tables` checks it).
        let mut present: u64 = 0;
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => b,
                t => {
                    return Err(err(RejectClass::Type, format!("expected str key ({}), got {}", s.name, t.type_name())))
                }
            };
            match s.fields.iter().position(|f| f.name.as_bytes() == key) {
                Some(i) => {
                    let field = &s.fields[i];
                    let v = self.at(Seg::Field(field.name), |d| d.value(field.ty))?;
                    if self.scratch.len() > base && self.scratch[self.scratch.len() - 1].0 >= i as u16 {
                        sorted = false;
                    }
                    self.scratch.push((i as u16, v));
                    present |= 1u64 << (i & 63);
                }
                None => {
                    let name = utf8(key)?;
                    self.r.skip_value().map_err(read_err)?;
                    self.drift.push(Seg::Key(&name).render());
                }
            }
        }
        for (i, field) in s.fields.iter().enumerate() {
            if field.default == FieldDefault::Required && present & (1u64 << (i & 63)) == 0 {
                return Err(err(
                    RejectClass::MissingField,
                    format!("object missing required field `{}` ({})", field.name, s.name),
                ));
            }
        }
        let mut entries = self.scratch.split_off(base);
        if !sorted {
            // Keys out of declaration order, or repeated: the last one wins.
            entries.reverse();
            entries.sort_by_key(|(k, _)| *k);
            entries.dedup_by_key(|(k, _)| *k);
        }
        Ok(StructValue::from_entries(s, entries.into_boxed_slice()))
    }

    /// A plain dict with known keys: every entry kept in wire order; known
    /// keys type-checked; required keys must be present.
    fn open_map(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 2)?;
        let mut extra = Vec::with_capacity(self.prealloc(n));
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => utf8(b)?,
                t => return Err(err(RejectClass::Type, format!("expected str key, got {}", t.type_name()))),
            };
            let ty = s.fields.iter().find(|f| f.name == key).map_or(&Ty::Any, |f| f.ty);
            let v = self.at(Seg::Key(&key), |d| d.value(ty))?;
            extra.push((Value::Str(key), v));
        }
        for field in s.fields.iter().filter(|f| f.default == FieldDefault::Required) {
            if !extra.iter().any(|(k, _)| matches!(k, Value::Str(s) if s == field.name)) {
                return Err(err(RejectClass::MissingField, format!("object missing required key `{}`", field.name)));
            }
        }
        Ok(StructValue::new(s, vec![Value::Map(extra)]))
    }
}
