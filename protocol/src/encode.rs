//! The schema-driven encoder, byte-identical to vLLM's `MsgpackEncoder`
//! (msgspec 0.23) for values built the way vLLM builds them.
//!
//! Rules (docs/wire-protocol.md §5; tensors §5.11):
//! - positional structs and named tuples: every field, in order; a tagged
//!   struct (TokenSpeed's, docs/tokenspeed-wire.md §3) writes its tag first;
//! - omit-defaults maps (`SamplingParams`): only fields whose value differs
//!   from the default, in declaration order;
//! - dataclass maps: every field;
//! - struct maps of more than 15 fields get a `map16` header whatever the
//!   entry count;
//! - integers in their smallest form, floats as float64, `str` and `bin`
//!   kept apart;
//! - a tensor goes inline as ext 3 when its byte count is under the
//!   zero-copy threshold (256, `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`) or it is
//!   0-d, otherwise into a new aux frame whose index (from 1, in encounter
//!   order) replaces the data.
#![warn(missing_docs)]

use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::registry::PerStruct;
use crate::schema::{Layout, StructSchema, Ty};
use crate::value::{is_default, StructValue, Tensor, Value};

/// vLLM's default `VLLM_MSGPACK_ZERO_COPY_THRESHOLD`.
pub const ZERO_COPY_THRESHOLD: usize = 256;

/// Encodes `value` as `ty`, returning the payload followed by aux frames.
///
/// The validations vLLM's decoder runs (`crate::validate`) run here too: a
/// value vLLM would reject (two structured-output constraints, temperature
/// out of range, ...) is an error of class `validation`, never bytes.
pub fn encode_payload(root: &'static str, ty: &'static Ty, value: &Value) -> Result<Vec<Vec<u8>>, Error> {
    encode_with(root, ty, value, true)
}

/// Like [`encode_payload`] but without the validations: for producing the
/// invalid messages that tests and fuzzers feed to decoders. Never for
/// sending to an engine.
pub fn encode_payload_unvalidated(root: &'static str, ty: &'static Ty, value: &Value) -> Result<Vec<Vec<u8>>, Error> {
    encode_with(root, ty, value, false)
}

fn encode_with(root: &'static str, ty: &'static Ty, value: &Value, validate: bool) -> Result<Vec<Vec<u8>>, Error> {
    let mut e = Encoder::new(Vec::with_capacity(256), Vec::new(), validate);
    e.value(ty, value).map_err(|err| err.under(root))?;
    let mut frames = Vec::with_capacity(1 + e.aux.len());
    frames.push(e.out);
    frames.extend(e.aux);
    Ok(frames)
}

/// Encodes into an existing buffer (the payload only); aux frames are
/// appended to `aux`. For hot paths that reuse buffers.
pub fn encode_into(
    root: &'static str,
    ty: &'static Ty,
    value: &Value,
    out: &mut Vec<u8>,
    aux: &mut Vec<Vec<u8>>,
) -> Result<(), Error> {
    let mut e = Encoder::new(std::mem::take(out), std::mem::take(aux), true);
    let r = e.value(ty, value).map_err(|err| err.under(root));
    *out = e.out;
    *aux = e.aux;
    r
}

/// The encoding of `value` as `ty` when it needs no aux frame (used for
/// defaults); `None` if it cannot be encoded that way.
pub(crate) fn encode_plain(ty: &'static Ty, value: &Value) -> Option<Vec<u8>> {
    let mut e = Encoder::new(Vec::new(), Vec::new(), false);
    e.value(ty, value).ok()?;
    e.aux.is_empty().then_some(e.out)
}

/// A struct's defaults as wire bytes (for positional encoding, where a
/// run of default fields is one copy), computed once per struct and kept
/// out of the tables (`crate::registry`).
struct WireDefaults {
    /// The encoding of every field's default, concatenated; field `i` is
    /// `wire[offsets[i]..offsets[i + 1]]`.
    wire: Box<[u8]>,
    /// Where each field's default starts in `wire` (one more than fields).
    offsets: Box<[u32]>,
    /// `not_encodable[i]`: how many of fields `0..i` have no default
    /// encoding (required fields that cannot be nil), to check a run in O(1).
    not_encodable: Box<[u32]>,
}

impl WireDefaults {
    #[inline]
    fn of(s: &'static StructSchema) -> &'static WireDefaults {
        static CACHE: PerStruct<WireDefaults> = PerStruct::new();
        CACHE.get(s, || WireDefaults::compute(s))
    }

    fn compute(s: &'static StructSchema) -> WireDefaults {
        let mut wire = Vec::new();
        let mut offsets = vec![0u32];
        let mut not_encodable = vec![0u32];
        for (f, v) in s.fields.iter().zip(s.default_values()) {
            let missing = not_encodable[not_encodable.len() - 1];
            match encode_plain(f.ty, v) {
                Some(b) => {
                    wire.extend_from_slice(&b);
                    not_encodable.push(missing);
                }
                None => not_encodable.push(missing + 1),
            }
            offsets.push(wire.len() as u32);
        }
        WireDefaults {
            wire: wire.into_boxed_slice(),
            offsets: offsets.into_boxed_slice(),
            not_encodable: not_encodable.into_boxed_slice(),
        }
    }

    /// The wire bytes of the defaults of fields `a..b`, if all have one.
    #[inline]
    fn wire_run(&self, a: usize, b: usize) -> Option<&[u8]> {
        if self.not_encodable[b] != self.not_encodable[a] {
            return None;
        }
        Some(&self.wire[self.offsets[a] as usize..self.offsets[b] as usize])
    }
}

/// A few structs' wire defaults, the most recently added first (see
/// [`Encoder::recent_defaults`]).
#[derive(Default)]
struct RecentDefaults([Option<(&'static StructSchema, &'static WireDefaults)>; 4]);

impl RecentDefaults {
    #[inline]
    fn of(&mut self, s: &'static StructSchema) -> &'static WireDefaults {
        for i in 0..self.0.len() {
            match self.0[i] {
                Some((seen, d)) if std::ptr::eq(seen, s) => return d,
                Some(_) => {}
                None => break,
            }
        }
        let d = WireDefaults::of(s);
        self.0.rotate_right(1);
        self.0[0] = Some((s, d));
        d
    }
}

struct Encoder {
    out: Vec<u8>,
    aux: Vec<Vec<u8>>,
    /// Run the schema's validators on every struct written.
    validate: bool,
    /// The structs whose defaults were looked up last, with their
    /// defaults: a batch repeats a few structs (each output of an
    /// `EngineCoreOutputs` and its logprobs), so most lookups are a pointer
    /// compare or two instead of the registry's hash probe.
    recent_defaults: RecentDefaults,
}

/// Builds error paths while unwinding, so encoding pays nothing for them
/// on success.
trait Within {
    fn at(self, seg: impl FnOnce() -> String) -> Self;
}

impl<T> Within for Result<T, Error> {
    #[inline]
    fn at(self, seg: impl FnOnce() -> String) -> Self {
        self.map_err(|mut e| {
            e.path.insert_str(0, &seg());
            e
        })
    }
}

impl Encoder {
    fn new(out: Vec<u8>, aux: Vec<Vec<u8>>, validate: bool) -> Encoder {
        Encoder { out, aux, validate, recent_defaults: RecentDefaults::default() }
    }

    fn err(&self, detail: String) -> Error {
        Error::new(RejectClass::Type, String::new(), detail)
    }

    fn mismatch(&self, want: &str, got: &Value) -> Error {
        self.err(format!("cannot encode {} as {want}", got.kind_name()))
    }

    fn value(&mut self, ty: &'static Ty, v: &Value) -> Result<(), Error> {
        match (ty, v) {
            (Ty::Any, v) => self.any(v),
            (Ty::Optional(_), Value::Nil) => {
                write::nil(&mut self.out);
                Ok(())
            }
            (Ty::Optional(inner), v) => self.value(inner, v),
            (Ty::Bool, Value::Bool(b)) => {
                write::bool(&mut self.out, *b);
                Ok(())
            }
            (Ty::Int | Ty::IntEnum(_), Value::Int(i)) => {
                if let Ty::IntEnum(e) = ty {
                    if !e.contains(*i) {
                        return Err(Error::new(
                            RejectClass::Enum,
                            String::new(),
                            format!("invalid enum value {i} for {}", e.name),
                        ));
                    }
                }
                write::int(&mut self.out, *i);
                Ok(())
            }
            (Ty::Int | Ty::Float, Value::UInt(u)) => {
                write::uint(&mut self.out, *u);
                Ok(())
            }
            // An integer in a float field stays an integer on the wire, as
            // msgspec writes the Python int it was given.
            (Ty::Float, Value::Int(i)) => {
                write::int(&mut self.out, *i);
                Ok(())
            }
            (Ty::Float, Value::Float(f)) => {
                write::float(&mut self.out, *f);
                Ok(())
            }
            (Ty::Str, Value::Str(s)) => {
                write::str(&mut self.out, s);
                Ok(())
            }
            (Ty::StrLiteral(allowed), Value::Str(s)) => {
                if !allowed.contains(&s.as_str()) {
                    return Err(Error::new(RejectClass::Enum, String::new(), format!("invalid enum value {s:?}")));
                }
                write::str(&mut self.out, s);
                Ok(())
            }
            (Ty::Bytes, Value::Bytes(b)) => {
                write::bin(&mut self.out, b);
                Ok(())
            }
            (Ty::List(inner) | Ty::Set(inner), Value::IntArray(xs)) => {
                if !matches!(inner, Ty::Int | Ty::Any | Ty::Float) {
                    return Err(self.mismatch("a list of non-integers", v));
                }
                write::int_array(&mut self.out, xs);
                Ok(())
            }
            (Ty::List(inner) | Ty::Set(inner), Value::Array(xs)) => {
                write::array_len(&mut self.out, xs.len() as u32);
                for (i, x) in xs.iter().enumerate() {
                    self.value(inner, x).at(|| format!("[{i}]"))?;
                }
                Ok(())
            }
            (Ty::Dict(k, val), Value::Map(entries)) => {
                write::map_len(&mut self.out, entries.len() as u32);
                for (key, x) in entries {
                    self.value(k, key)?;
                    self.value(val, x).at(|| match key {
                        Value::Str(s) => format!(".{s}"),
                        other => format!("[{other:?}]"),
                    })?;
                }
                Ok(())
            }
            (Ty::Union(members), v) => {
                let m = members.iter().find(|m| value_fits(m, v)).ok_or_else(|| self.mismatch("this union", v))?;
                self.value(m, v)
            }
            (Ty::Struct(s), Value::Struct(sv)) => {
                if !std::ptr::eq(*s, sv.schema) && s.name != sv.schema.name {
                    return Err(self.err(format!("expected struct {}, got {}", s.name, sv.schema.name)));
                }
                self.struct_value(s, sv)
            }
            (Ty::Tensor(_), Value::Tensor(t)) => {
                self.tensor(t);
                Ok(())
            }
            (Ty::NestedTensors, Value::Array(xs)) => {
                write::array_len(&mut self.out, xs.len() as u32);
                for (i, x) in xs.iter().enumerate() {
                    self.value(&Ty::NestedTensors, x).at(|| format!("[{i}]"))?;
                }
                Ok(())
            }
            (Ty::NestedTensors, Value::Tensor(t)) => {
                self.tensor(t);
                Ok(())
            }
            (Ty::NestedTensors, v @ (Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Bool(_))) => self.any(v),
            (Ty::UtilityResult, Value::Array(xs)) if xs.len() == 2 => {
                write::array_len(&mut self.out, 2);
                self.any(&xs[0])?;
                self.any(&xs[1])
            }
            (ty, v) => Err(self.mismatch(&format!("{ty:?}").chars().take(40).collect::<String>(), v)),
        }
    }

    /// Writes an `Any` value. Iterative (a stack of the values still to
    /// write), so nesting as deep as the decoder admits costs heap, not
    /// call stack.
    fn any(&mut self, v: &Value) -> Result<(), Error> {
        let mut todo: Vec<&Value> = vec![v];
        while let Some(v) = todo.pop() {
            match v {
                Value::Nil => write::nil(&mut self.out),
                Value::Bool(b) => write::bool(&mut self.out, *b),
                Value::Int(i) => write::int(&mut self.out, *i),
                Value::UInt(u) => write::uint(&mut self.out, *u),
                Value::Float(f) => write::float(&mut self.out, *f),
                Value::Str(s) => write::str(&mut self.out, s),
                Value::Bytes(b) => write::bin(&mut self.out, b),
                Value::Ext(t, b) => write::ext(&mut self.out, *t, b),
                Value::IntArray(xs) => write::int_array(&mut self.out, xs),
                Value::Array(xs) => {
                    write::array_len(&mut self.out, xs.len() as u32);
                    todo.extend(xs.iter().rev());
                }
                Value::Map(entries) => {
                    write::map_len(&mut self.out, entries.len() as u32);
                    for (k, x) in entries.iter().rev() {
                        todo.push(x);
                        todo.push(k);
                    }
                }
                Value::Struct(sv) => self.struct_value(sv.schema, sv)?,
                Value::Tensor(t) => self.tensor(t),
            }
        }
        Ok(())
    }

    fn struct_value(&mut self, s: &'static StructSchema, v: &StructValue) -> Result<(), Error> {
        if self.validate {
            if let Err(violation) = crate::validate::check(s, v) {
                let path = if violation.fields.is_empty() { String::new() } else { format!(".{}", violation.path()) };
                return Err(Error::new(RejectClass::Validation, path, violation.message));
            }
        }
        if !std::ptr::eq(v.schema, s) && v.schema.fields.len() != s.fields.len() {
            return Err(self.err(format!(
                "{} has {} fields, value has {}",
                s.name,
                s.fields.len(),
                v.schema.fields.len()
            )));
        }
        match s.layout {
            Layout::Positional | Layout::NamedTuple | Layout::Tuple => {
                match s.tag() {
                    // A tagged struct (TokenSpeed): the class name first.
                    Some(tag) => {
                        write::array_len(&mut self.out, s.fields.len() as u32 + 1);
                        write::str(&mut self.out, tag);
                    }
                    None => write::array_len(&mut self.out, s.fields.len() as u32),
                }
                // Fields not held are defaults: each run of them is one copy
                // of their precomputed bytes.
                // Looked up when a field is first found not held, once per
                // struct.
                let mut defaults = None;
                let mut next = 0;
                for (i, x) in v.entries() {
                    let i = *i as usize;
                    self.default_run(s, &mut defaults, next, i)?;
                    let field = &s.fields[i];
                    if matches!(x, Value::Nil) && matches!(field.ty, Ty::Optional(_) | Ty::Any) {
                        write::nil(&mut self.out);
                    } else {
                        self.field(field.name, field.ty, x)?;
                    }
                    next = i + 1;
                }
                self.default_run(s, &mut defaults, next, s.fields.len())?;
            }
            Layout::SparseMap => {
                let n = v.entries().iter().filter(|(i, x)| !is_default(x, &s.fields[*i as usize].default)).count();
                self.map_header(s, n);
                for (i, x) in v.entries() {
                    let field = &s.fields[*i as usize];
                    if !is_default(x, &field.default) {
                        write::str(&mut self.out, field.name);
                        self.field(field.name, field.ty, x)?;
                    }
                }
            }
            Layout::FullMap => {
                self.map_header(s, s.fields.len());
                for (field, x) in s.fields.iter().zip(v.fields()) {
                    write::str(&mut self.out, field.name);
                    self.field(field.name, field.ty, x)?;
                }
            }
            Layout::OpenMap => {
                let entries = v.open_entries();
                write::map_len(&mut self.out, entries.len() as u32);
                for (k, x) in entries {
                    let Value::Str(k) = k else { return Err(self.err(format!("open map key {k:?} is not a str"))) };
                    write::str(&mut self.out, k);
                    let ty = s.fields.iter().find(|f| f.name == k).map_or(&Ty::Any, |f| f.ty);
                    self.value(ty, x).at(|| format!(".{k}"))?;
                }
            }
        }
        Ok(())
    }

    /// Writes the defaults of fields `a..b` (an error names the first
    /// required field among them).
    #[inline(always)]
    fn default_run(
        &mut self,
        s: &'static StructSchema,
        defaults: &mut Option<&'static WireDefaults>,
        a: usize,
        b: usize,
    ) -> Result<(), Error> {
        if a >= b {
            return Ok(());
        }
        self.write_defaults(s, defaults, a, b)
    }

    /// [`Encoder::default_run`] for a run that is not empty.
    fn write_defaults(
        &mut self,
        s: &'static StructSchema,
        defaults: &mut Option<&'static WireDefaults>,
        a: usize,
        b: usize,
    ) -> Result<(), Error> {
        let d = *defaults.get_or_insert_with(|| self.recent_defaults.of(s));
        match d.wire_run(a, b) {
            Some(bytes) => {
                // Most runs are a few nils: pushed, not copied with memcpy.
                if bytes.len() <= 8 {
                    self.out.reserve(bytes.len());
                    for &x in bytes {
                        self.out.push(x);
                    }
                } else {
                    self.out.extend_from_slice(bytes);
                }
                Ok(())
            }
            None => {
                let f = (a..b)
                    .map(|i| &s.fields[i])
                    .find(|f| encode_plain(f.ty, &Value::Nil).is_none())
                    .unwrap_or(&s.fields[a]);
                Err(Error::new(
                    RejectClass::MissingField,
                    format!(".{}", f.name),
                    format!("required field `{}` is not set", f.name),
                ))
            }
        }
    }

    fn field(&mut self, name: &'static str, ty: &'static Ty, v: &Value) -> Result<(), Error> {
        self.value(ty, v).at(|| format!(".{name}"))
    }

    fn map_header(&mut self, s: &StructSchema, n: usize) {
        if s.uses_map16() {
            write::map16_len(&mut self.out, n as u16);
        } else {
            write::map_len(&mut self.out, n as u32);
        }
    }

    fn tensor(&mut self, t: &Tensor) {
        write_tensor(&mut self.out, &mut self.aux, t, ZERO_COPY_THRESHOLD);
    }
}

/// A tensor as vLLM writes it: `[dtype, shape, data]`, the data inline
/// (ext 3) under the zero-copy threshold or for a scalar, otherwise the
/// 1-based index of a new aux frame (docs/wire-protocol.md §6). Shared by
/// the value encoder and the typed encoder.
pub(crate) fn write_tensor(out: &mut Vec<u8>, aux: &mut Vec<Vec<u8>>, t: &Tensor, threshold: usize) {
    write::array_len(out, 3);
    write::str(out, &t.dtype);
    write::array_len(out, t.shape.len() as u32);
    for &d in &t.shape {
        write::int(out, d);
    }
    if t.data.len() < threshold || t.shape.is_empty() {
        write::ext(out, 3, &t.data);
    } else {
        aux.push(t.data.clone());
        write::int(out, aux.len() as i64);
    }
}

/// Whether a value can be encoded as a union member (by MessagePack kind).
fn value_fits(ty: &Ty, v: &Value) -> bool {
    match (ty, v) {
        (Ty::Any, _) => true,
        (Ty::Optional(inner), v) => matches!(v, Value::Nil) || value_fits(inner, v),
        (Ty::Bool, Value::Bool(_)) => true,
        (Ty::Int | Ty::IntEnum(_), Value::Int(_) | Value::UInt(_)) => true,
        (Ty::Float, Value::Float(_)) => true,
        (Ty::Str | Ty::StrLiteral(_), Value::Str(_)) => true,
        (Ty::Bytes, Value::Bytes(_)) => true,
        (Ty::List(_) | Ty::Set(_), Value::Array(_) | Value::IntArray(_)) => true,
        (Ty::Dict(..), Value::Map(_)) => true,
        (Ty::Struct(_), Value::Struct(_)) => true,
        (Ty::Tensor(_), Value::Tensor(_)) => true,
        (Ty::Union(ms), v) => ms.iter().any(|m| value_fits(m, v)),
        _ => false,
    }
}
