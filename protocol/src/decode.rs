//! The schema-driven decoder: msgspec's tolerance, none of its silence.
//!
//! Behaviour (msgspec 0.23 as vLLM uses it; wire reference §4 rules 6-12,
//! corrections 6-9):
//! - positional structs need at least their required prefix, fill missing
//!   trailing defaults, and accept extra trailing elements, each reported as
//!   drift (`EngineCoreRequest[22]`);
//! - named tuples (`LogprobsLists`) reject extra elements;
//! - map structs fill absent keys with defaults, reject absent required keys,
//!   and accept unknown keys, each reported as drift
//!   (`EngineCoreRequest.sampling_params.future_knob`);
//! - a `float` field accepts float64, float32 (widened exactly) and integers
//!   (kept as integers so that re-encoding is byte-exact); `int` rejects
//!   floats and bools; `bool` rejects 0/1; `str` rejects `bin` and invalid
//!   UTF-8;
//! - the validations vLLM's `__post_init__` runs on decode are applied
//!   (`crate::validate`);
//! - tensors are `[dtype, shape, data]`, data an ext-3 body or the index of a
//!   frame (index 0 is the payload frame itself, as in vLLM), and the byte
//!   count must equal itemsize times the shape's product.
//!
//! # Limits
//!
//! Documented in [`Limits`]. Every declared array, map, string and binary
//! length is checked against the bytes that remain before anything is
//! allocated (each element takes at least one byte), nesting is bounded by
//! `max_depth`, and frame counts and sizes are bounded, so memory use is a
//! small multiple of the input size and no input can exhaust the stack.

use crate::error::{Error, RejectClass};
use crate::msgpack::{ReadError, Reader, Token};
use crate::schema::Default as FieldDefault;
use crate::schema::{Layout, StructSchema, TensorKind, Ty};
use crate::value::{is_default, numpy_dtype, torch_dtype, StructValue, Tensor, Value};

/// Decoder limits. The defaults suit an EngineCore gateway.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Maximum nesting of arrays and maps (schema structs count as one
    /// level). Default 64: vLLM's deepest schema path is 6 levels; the
    /// rest is headroom for `Any`-typed fields such as `extra_args`.
    pub max_depth: usize,
    /// Maximum number of frames in one message (payload and aux frames).
    /// Default 4096.
    pub max_frames: usize,
    /// Maximum size of one frame. Default 1 GiB (vLLM's own socket buffers
    /// go to 512 MiB; a larger frame is not something an engine sends).
    pub max_frame_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_depth: 64, max_frames: 4096, max_frame_bytes: 1 << 30 }
    }
}

/// A decoded message: its value and the drift seen (extra trailing elements
/// and unknown keys, by path), in wire order.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub value: Value,
    pub drift: Vec<String>,
}

/// Decodes one payload against `ty`. `frames` are the buffers aux indices
/// refer to (`frames[0]` is the payload itself). `root` names the message in
/// paths.
pub fn decode_payload(
    root: &'static str,
    ty: &'static Ty,
    frames: &[&[u8]],
    limits: &Limits,
) -> Result<Decoded, Error> {
    let Some(&payload) = frames.first() else {
        return Err(Error::new(RejectClass::Frames, root, "no payload frame"));
    };
    if frames.len() > limits.max_frames {
        return Err(Error::new(
            RejectClass::Limits,
            root,
            format!("{} frames exceed the limit of {}", frames.len(), limits.max_frames),
        ));
    }
    if let Some(big) = frames.iter().position(|f| f.len() > limits.max_frame_bytes) {
        return Err(Error::new(
            RejectClass::Limits,
            root,
            format!("frame {big} is {} bytes, over the limit of {}", frames[big].len(), limits.max_frame_bytes),
        ));
    }
    let input_bytes: usize = frames.iter().map(|f| f.len()).sum();
    let mut d = Decoder {
        r: Reader::new(payload),
        frames,
        drift: Vec::new(),
        depth: 0,
        limits,
        scratch: Vec::new(),
        prealloc_budget: payload.len(),
        tensor_budget: input_bytes,
    };
    let value = d.value(ty).map_err(|e| (*e).under(root))?;
    if !d.r.is_empty() {
        let at = d.r.position();
        return Err(Error::new(
            RejectClass::Malformed,
            root,
            format!("trailing bytes after the message (byte {at} of {})", payload.len()),
        ));
    }
    let mut drift = d.drift;
    for p in &mut drift {
        p.insert_str(0, root);
    }
    Ok(Decoded { value, drift })
}

/// Internal result: errors boxed so results stay small on the hot path;
/// paths are built while unwinding (nothing is spent on them on success).
type R<T> = Result<T, Box<Error>>;

struct Decoder<'a, 'l> {
    r: Reader<'a>,
    frames: &'a [&'a [u8]],
    /// Drift paths, relative to the innermost level being decoded until
    /// that level returns and prefixes its segment.
    drift: Vec<String>,
    depth: usize,
    limits: &'l Limits,
    /// Struct entries being decoded, as a stack shared by nested structs
    /// (each struct takes its tail when done): one exact allocation per
    /// struct instead of a growing vector each.
    scratch: Vec<(u16, Value)>,
    /// Elements that may still be preallocated for declared lengths, over
    /// the whole message. Starts at the payload size: every element takes
    /// at least one byte, so a well-formed message never runs out, while
    /// nested headers that each declare "everything that remains" cannot
    /// preallocate more than once over (beyond it, vectors grow as they
    /// fill).
    prealloc_budget: usize,
    /// Tensor bytes that may still be copied: the size of all frames. An
    /// engine references each aux frame once; a message that references the
    /// same buffer again and again would otherwise copy it each time.
    tensor_budget: usize,
}

/// One step of a path.
#[derive(Clone, Copy)]
enum Seg<'k> {
    Field(&'static str),
    Index(usize),
    Key(&'k str),
}

impl Seg<'_> {
    fn render(self) -> String {
        match self {
            Seg::Field(n) | Seg::Key(n) => format!(".{n}"),
            Seg::Index(i) => format!("[{i}]"),
        }
    }
}

fn kind_name(ty: &Ty) -> String {
    match ty {
        Ty::Any => "any".into(),
        Ty::Bool => "bool".into(),
        Ty::Int | Ty::IntEnum(_) => "int".into(),
        Ty::Float => "float".into(),
        Ty::Str | Ty::StrLiteral(_) => "str".into(),
        Ty::Bytes => "bytes".into(),
        Ty::Optional(t) => format!("{} | null", kind_name(t)),
        Ty::List(_) | Ty::Set(_) | Ty::Tensor(_) | Ty::UtilityResult => "array".into(),
        Ty::NestedTensors => "array | int | float".into(),
        Ty::Dict(..) => "object".into(),
        Ty::Union(ms) => ms.iter().map(kind_name).collect::<Vec<_>>().join(" | "),
        Ty::Struct(s) => match s.layout {
            Layout::Positional | Layout::NamedTuple | Layout::Tuple => "array".into(),
            _ => "object".into(),
        },
    }
}

/// Whether a token of this kind can start a value of `ty` (for unions).
fn token_fits(ty: &Ty, t: &Token) -> bool {
    match (ty, t) {
        (Ty::Any, _) => true,
        (Ty::Bool, Token::Bool(_)) => true,
        (Ty::Int | Ty::IntEnum(_), Token::Int(_) | Token::UInt(_)) => true,
        (Ty::Float, Token::F32(_) | Token::F64(_)) => true,
        (Ty::Str | Ty::StrLiteral(_), Token::Str(_)) => true,
        (Ty::Bytes, Token::Bin(_)) => true,
        (Ty::Optional(inner), t) => matches!(t, Token::Nil) || token_fits(inner, t),
        (Ty::List(_) | Ty::Set(_) | Ty::Tensor(_) | Ty::UtilityResult, Token::Array(_)) => true,
        (Ty::NestedTensors, Token::Array(_) | Token::Int(_) | Token::UInt(_) | Token::F32(_) | Token::F64(_)) => true,
        (Ty::Dict(..), Token::Map(_)) => true,
        (Ty::Union(ms), t) => ms.iter().any(|m| token_fits(m, t)),
        (Ty::Struct(s), Token::Array(_)) => matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple),
        (Ty::Struct(s), Token::Map(_)) => !matches!(s.layout, Layout::Positional | Layout::NamedTuple | Layout::Tuple),
        _ => false,
    }
}

trait Under {
    fn under(self, prefix: &str) -> Self;
}

impl Under for Box<Error> {
    fn under(mut self, prefix: &str) -> Self {
        self.path.insert_str(0, prefix);
        self
    }
}

fn err(class: RejectClass, detail: impl Into<String>) -> Box<Error> {
    Box::new(Error::new(class, String::new(), detail))
}

fn type_err(want: &Ty, got: &Token) -> Box<Error> {
    err(RejectClass::Type, format!("expected {}, got {}", kind_name(want), got.type_name()))
}

fn read_err(e: ReadError) -> Box<Error> {
    match e {
        ReadError::Truncated => err(RejectClass::Malformed, "input truncated"),
        ReadError::ReservedMarker => err(RejectClass::Malformed, "reserved byte 0xc1 is not MessagePack"),
    }
}

#[inline]
fn utf8(b: &[u8]) -> R<String> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8. (Request ids and most keys are
        // short ASCII strings, for which the general check costs more than
        // the copy.)
        return Ok(unsafe { String::from_utf8_unchecked(b.to_vec()) });
    }
    match std::str::from_utf8(b) {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => Err(err(RejectClass::Malformed, "invalid UTF-8 in str")),
    }
}

impl<'a> Decoder<'a, '_> {
    /// Runs `f` one level down at `seg`: prefixes `seg` to the path of an
    /// error it returns and of the drift it records.
    #[inline]
    fn at<T>(&mut self, seg: Seg<'_>, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let mark = self.drift.len();
        let r = f(self);
        if self.drift.len() > mark {
            let s = seg.render();
            for d in &mut self.drift[mark..] {
                d.insert_str(0, &s);
            }
        }
        r.map_err(|mut e| {
            e.path.insert_str(0, &seg.render());
            e
        })
    }

    #[inline]
    fn token(&mut self) -> R<Token<'a>> {
        self.r.token().map_err(read_err)
    }

    fn peek(&self) -> R<Token<'a>> {
        self.r.clone().token().map_err(read_err)
    }

    /// Checks a declared element count against the remaining input.
    #[inline]
    fn check_len(&self, n: u32, bytes_per_element: usize) -> R<usize> {
        let n = n as usize;
        if n.saturating_mul(bytes_per_element) > self.r.remaining() {
            return Err(err(
                RejectClass::Malformed,
                format!("declared length {n} exceeds the {} bytes that remain", self.r.remaining()),
            ));
        }
        Ok(n)
    }

    /// How many of `n` declared elements to preallocate (see
    /// `prealloc_budget`).
    #[inline]
    fn prealloc(&mut self, n: usize) -> usize {
        let c = n.min(self.prealloc_budget);
        self.prealloc_budget -= c;
        c
    }

    #[inline]
    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(err(RejectClass::Limits, format!("nesting deeper than {} levels", self.limits.max_depth)));
        }
        Ok(())
    }

    fn value(&mut self, ty: &'static Ty) -> R<Value> {
        match ty {
            Ty::Any => self.any(),
            Ty::Bool => match self.token()? {
                Token::Bool(b) => Ok(Value::Bool(b)),
                t => Err(type_err(ty, &t)),
            },
            Ty::Int => match self.token()? {
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(type_err(ty, &t)),
            },
            Ty::IntEnum(e) => match self.token()? {
                Token::Int(v) if e.contains(v) => Ok(Value::Int(v)),
                Token::Int(v) => Err(err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                Token::UInt(v) => Err(err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                t => Err(type_err(ty, &t)),
            },
            Ty::Float => match self.token()? {
                Token::F64(v) => Ok(Value::Float(v)),
                Token::F32(v) => Ok(Value::Float(v as f64)),
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(type_err(ty, &t)),
            },
            Ty::Str => match self.token()? {
                Token::Str(b) => Ok(Value::Str(utf8(b)?)),
                t => Err(type_err(ty, &t)),
            },
            Ty::StrLiteral(allowed) => match self.token()? {
                Token::Str(b) => {
                    let s = utf8(b)?;
                    if allowed.contains(&s.as_str()) {
                        Ok(Value::Str(s))
                    } else {
                        Err(err(
                            RejectClass::Enum,
                            format!("invalid enum value {s:?} (allowed: {})", allowed.join(", ")),
                        ))
                    }
                }
                t => Err(type_err(ty, &t)),
            },
            Ty::Bytes => match self.token()? {
                Token::Bin(b) => Ok(Value::Bytes(b.to_vec())),
                t => Err(type_err(ty, &t)),
            },
            Ty::Optional(inner) => {
                if self.r.peek_byte() == Some(0xc0) {
                    self.token()?;
                    Ok(Value::Nil)
                } else {
                    self.value(inner)
                }
            }
            Ty::List(inner) | Ty::Set(inner) => {
                let t = self.token()?;
                let Token::Array(n) = t else { return Err(type_err(ty, &t)) };
                let n = self.check_len(n, 1)?;
                self.enter()?;
                let mut v = if matches!(inner, Ty::Int) { self.int_array(n)? } else { self.list(inner, n)? };
                self.depth -= 1;
                if matches!(ty, Ty::Set(_)) {
                    dedup_set(&mut v);
                }
                Ok(v)
            }
            Ty::Dict(k, v) => {
                let t = self.token()?;
                let Token::Map(n) = t else { return Err(type_err(ty, &t)) };
                let n = self.check_len(n, 2)?;
                self.enter()?;
                let mut entries = Vec::with_capacity(self.prealloc(n));
                for _ in 0..n {
                    let key = self.value(k)?;
                    let label = match &key {
                        Value::Str(s) => s.clone(),
                        Value::Int(i) => i.to_string(),
                        _ => "?".into(),
                    };
                    let val = self.at(Seg::Key(&label), |d| d.value(v))?;
                    entries.push((key, val));
                }
                self.depth -= 1;
                Ok(Value::Map(entries))
            }
            Ty::Union(members) => {
                let t = self.peek()?;
                match members.iter().find(|m| token_fits(m, &t)) {
                    Some(m) => self.value(m),
                    None => Err(type_err(ty, &t)),
                }
            }
            Ty::Struct(s) => Ok(Value::Struct(self.struct_value(s)?)),
            Ty::Tensor(kind) => Ok(Value::Tensor(Box::new(self.tensor(*kind)?))),
            Ty::NestedTensors => self.nested_tensors(),
            Ty::UtilityResult => match self.token()? {
                Token::Array(2) => {
                    self.enter()?;
                    let ti = self.at(Seg::Index(0), |d| d.any())?;
                    if ti != Value::Nil {
                        // Custom result types travel pickled; vLLM only
                        // accepts them with VLLM_ALLOW_INSECURE_SERIALIZATION.
                        return Err(err(
                            RejectClass::Validation,
                            "a non-nil type_info needs VLLM_ALLOW_INSECURE_SERIALIZATION, which gateways never enable",
                        ));
                    }
                    let v = self.at(Seg::Index(1), |d| d.any())?;
                    self.depth -= 1;
                    Ok(Value::Array(vec![ti, v]))
                }
                Token::Array(n) => Err(err(
                    RejectClass::Validation,
                    format!("expected UtilityResult [type_info, value], got array of {n}"),
                )),
                t => Err(type_err(ty, &t)),
            },
        }
    }

    /// vLLM's rule: numbers stay numbers; a 3-array whose first element is
    /// a string is a torch tensor; any other array is a list of nested
    /// tensors.
    fn nested_tensors(&mut self) -> R<Value> {
        match self.peek()? {
            Token::Int(_) | Token::UInt(_) | Token::F32(_) | Token::F64(_) | Token::Bool(_) => self.any(),
            Token::Array(n) => {
                let mut look = self.r.clone();
                let _ = look.token();
                if n == 3 && matches!(look.token(), Ok(Token::Str(_))) {
                    return Ok(Value::Tensor(Box::new(self.tensor(TensorKind::Torch)?)));
                }
                self.token()?;
                let n = self.check_len(n, 1)?;
                self.enter()?;
                let v = self.list(&Ty::NestedTensors, n)?;
                self.depth -= 1;
                Ok(v)
            }
            t => Err(type_err(&Ty::NestedTensors, &t)),
        }
    }

    fn int_array(&mut self, n: usize) -> R<Value> {
        let mut out = Vec::with_capacity(self.prealloc(n));
        for i in 0..n {
            if let Some(v) = self.r.small_int() {
                out.push(v);
                continue;
            }
            match self.token()? {
                Token::Int(v) => out.push(v),
                Token::UInt(v) => {
                    // Does not fit i64: fall back to a boxed list.
                    let mut vals: Vec<Value> = out.into_iter().map(Value::Int).collect();
                    vals.push(Value::UInt(v));
                    for j in i + 1..n {
                        vals.push(self.at(Seg::Index(j), |d| d.value(&Ty::Int))?);
                    }
                    return Ok(Value::Array(vals));
                }
                t => return Err(type_err(&Ty::Int, &t).under(&Seg::Index(i).render())),
            }
        }
        Ok(Value::IntArray(out))
    }

    fn list(&mut self, inner: &'static Ty, n: usize) -> R<Value> {
        let mut out = Vec::with_capacity(self.prealloc(n));
        for i in 0..n {
            out.push(self.at(Seg::Index(i), |d| d.value(inner))?);
        }
        Ok(Value::Array(out))
    }

    fn any(&mut self) -> R<Value> {
        Ok(match self.token()? {
            Token::Nil => Value::Nil,
            Token::Bool(b) => Value::Bool(b),
            Token::Int(v) => Value::Int(v),
            Token::UInt(v) => Value::UInt(v),
            Token::F32(v) => Value::Float(v as f64),
            Token::F64(v) => Value::Float(v),
            Token::Str(b) => Value::Str(utf8(b)?),
            Token::Bin(b) => Value::Bytes(b.to_vec()),
            Token::Ext(t, b) => ext(t, b)?,
            Token::Array(n) => {
                let n = self.check_len(n, 1)?;
                self.enter()?;
                let v = self.list(&Ty::Any, n)?;
                self.depth -= 1;
                v
            }
            Token::Map(n) => {
                let n = self.check_len(n, 2)?;
                self.enter()?;
                let mut entries = Vec::with_capacity(self.prealloc(n));
                for _ in 0..n {
                    let k = self.any()?;
                    let label = match &k {
                        Value::Str(s) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    let v = self.at(Seg::Key(&label), |d| d.any())?;
                    entries.push((k, v));
                }
                self.depth -= 1;
                Value::Map(entries)
            }
        })
    }

    fn struct_value(&mut self, s: &'static StructSchema) -> R<StructValue> {
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
        if let Some(validate) = s.validate {
            if let Err(violation) = validate(&v) {
                let path = if violation.field.is_empty() { String::new() } else { format!(".{}", violation.field) };
                return Err(Box::new(Error::new(RejectClass::Validation, path, violation.message)));
            }
        }
        Ok(v)
    }

    fn positional(&mut self, s: &'static StructSchema, n: u32) -> R<StructValue> {
        let n = self.check_len(n, 1)?;
        let nf = s.fields.len();
        if n < nf && n < s.required() {
            let required = s.required();
            return Err(err(
                RejectClass::MissingField,
                format!("expected array of at least length {required} ({}), got {n}", s.name),
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
            self.drift.push(Seg::Index(i).render());
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

    fn tensor(&mut self, kind: TensorKind) -> R<Tensor> {
        let t = self.token()?;
        let Token::Array(n) = t else {
            return Err(err(RejectClass::Type, format!("expected tensor [dtype, shape, data], got {}", t.type_name())));
        };
        if n != 3 {
            // vLLM's decode hook unpacks three names: a ValueError there.
            return Err(err(
                RejectClass::Validation,
                format!("expected tensor [dtype, shape, data], got array of {n}"),
            ));
        }
        self.enter()?;
        let (dtype, parsed) = self.at(Seg::Index(0), |d| {
            let dtype = match d.token()? {
                Token::Str(b) => utf8(b)?,
                t => return Err(type_err(&Ty::Str, &t)),
            };
            let parsed = match kind {
                TensorKind::Numpy => numpy_dtype(&dtype),
                TensorKind::Torch => torch_dtype(&dtype),
            };
            match parsed {
                Some(p) => Ok((dtype, p)),
                None => {
                    // numpy / torch reject the name inside vLLM's decode hook.
                    let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
                    Err(err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")))
                }
            }
        })?;
        let shape = self.at(Seg::Index(1), |d| {
            let t = d.token()?;
            let Token::Array(dims) = t else { return Err(type_err(&Ty::List(&Ty::Int), &t)) };
            let dims = d.check_len(dims, 1)?;
            let mut shape = Vec::with_capacity(d.prealloc(dims));
            for i in 0..dims {
                match d.token()? {
                    Token::Int(x) if x >= 0 => shape.push(x),
                    Token::Int(x) => {
                        return Err(
                            err(RejectClass::Frames, format!("negative dimension {x}")).under(&Seg::Index(i).render())
                        )
                    }
                    t => return Err(type_err(&Ty::Int, &t).under(&Seg::Index(i).render())),
                }
            }
            Ok(shape)
        })?;
        let frames = self.frames;
        let data: &[u8] = self.at(Seg::Index(2), |d| match d.token()? {
            Token::Ext(3, b) => Ok(b),
            Token::Bin(b) => Ok(b),
            Token::Int(i) => {
                if i < 0 || i as usize >= frames.len() {
                    return Err(err(
                        RejectClass::Frames,
                        format!("aux frame index {i} out of range ({} frames)", frames.len()),
                    ));
                }
                Ok(frames[i as usize])
            }
            Token::Ext(t, _) => Err(err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3"))),
            t => Err(err(
                RejectClass::Type,
                format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
            )),
        })?;
        let count = Tensor::element_count(&shape);
        let want = count.and_then(|c| c.checked_mul(parsed.elem.size()));
        if want != Some(data.len()) {
            let shown = want.map_or_else(|| "an overflowing size".to_string(), |w| format!("{w} bytes"));
            return Err(err(
                RejectClass::Frames,
                format!("buffer of {} bytes does not match dtype {dtype} and shape {shape:?} ({shown})", data.len()),
            )
            .under("[2]"));
        }
        if data.len() > self.tensor_budget {
            return Err(err(
                RejectClass::Limits,
                format!(
                    "tensor data of {} bytes exceeds what the frames hold ({} bytes left): buffers referenced more than once",
                    data.len(),
                    self.tensor_budget
                ),
            )
            .under("[2]"));
        }
        self.tensor_budget -= data.len();
        self.depth -= 1;
        Ok(Tensor { dtype, shape, data: data.to_vec() })
    }
}

/// Ext types: vLLM's decoder knows 3 (raw view); 1 and 2 (pickle) need
/// `VLLM_ALLOW_INSECURE_SERIALIZATION`, which a gateway never enables.
fn ext(t: i8, b: &[u8]) -> R<Value> {
    if t == 3 {
        Ok(Value::Ext(t, b.to_vec()))
    } else {
        Err(err(RejectClass::Type, format!("unsupported ext type {t} (only ext 3, raw buffers, is decoded)")))
    }
}

/// Python set semantics on decode: duplicates collapse (first occurrence
/// kept, wire order otherwise preserved).
fn dedup_set(v: &mut Value) {
    match v {
        Value::IntArray(xs) if xs.len() > 1 => {
            let mut seen = std::collections::HashSet::with_capacity(xs.len());
            xs.retain(|x| seen.insert(*x));
        }
        Value::Array(xs) if xs.len() > 1 && xs.iter().all(|x| matches!(x, Value::Str(_))) => {
            // set[str]: hashed, linear in the element count.
            let keep: Vec<bool> = {
                let mut seen = std::collections::HashSet::with_capacity(xs.len());
                xs.iter().map(|x| if let Value::Str(s) = x { seen.insert(s.as_str()) } else { true }).collect()
            };
            let mut keep = keep.into_iter();
            xs.retain(|_| keep.next().unwrap_or(true));
        }
        Value::Array(xs) if xs.len() > 1 => {
            let mut kept: Vec<Value> = Vec::with_capacity(xs.len());
            for x in xs.drain(..) {
                if !kept.contains(&x) {
                    kept.push(x);
                }
            }
            *xs = kept;
        }
        _ => {}
    }
}
