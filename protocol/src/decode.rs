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
use crate::schema::{Layout, StructSchema, TensorKind, Ty};
use crate::value::{default_for, numpy_dtype, torch_dtype, StructValue, Tensor, Value};

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

#[derive(Debug, Clone)]
enum Seg {
    Field(&'static str),
    Index(usize),
    Key(String),
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
    let mut d =
        Decoder { r: Reader::new(payload), frames, path: Vec::new(), drift: Vec::new(), depth: 0, limits, root };
    let value = d.value(ty)?;
    if !d.r.is_empty() {
        let at = d.r.position();
        return Err(Error::new(
            RejectClass::Malformed,
            root,
            format!("trailing bytes after the message (byte {at} of {})", payload.len()),
        ));
    }
    Ok(Decoded { value, drift: d.drift })
}

struct Decoder<'a, 'l> {
    r: Reader<'a>,
    frames: &'a [&'a [u8]],
    path: Vec<Seg>,
    drift: Vec<String>,
    depth: usize,
    limits: &'l Limits,
    root: &'static str,
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

impl<'a> Decoder<'a, '_> {
    fn path_string(&self) -> String {
        let mut s = String::from(self.root);
        for seg in &self.path {
            match seg {
                Seg::Field(n) => {
                    s.push('.');
                    s.push_str(n);
                }
                Seg::Index(i) => {
                    s.push('[');
                    s.push_str(&i.to_string());
                    s.push(']');
                }
                Seg::Key(k) => {
                    s.push('.');
                    s.push_str(k);
                }
            }
        }
        s
    }

    fn err(&self, class: RejectClass, detail: impl Into<String>) -> Error {
        Error::new(class, self.path_string(), detail)
    }

    fn read_err(&self, e: ReadError) -> Error {
        match e {
            ReadError::Truncated => self.err(RejectClass::Malformed, "input truncated"),
            ReadError::ReservedMarker => self.err(RejectClass::Malformed, "reserved byte 0xc1 is not MessagePack"),
        }
    }

    #[inline]
    fn token(&mut self) -> Result<Token<'a>, Error> {
        self.r.token().map_err(|e| self.read_err(e))
    }

    fn peek(&self) -> Result<Token<'a>, Error> {
        self.r.clone().token().map_err(|e| self.read_err(e))
    }

    fn type_err(&self, want: &Ty, got: &Token) -> Error {
        self.err(RejectClass::Type, format!("expected {}, got {}", kind_name(want), got.type_name()))
    }

    /// Checks a declared element count against the remaining input.
    #[inline]
    fn check_len(&self, n: u32, bytes_per_element: usize) -> Result<usize, Error> {
        let n = n as usize;
        if n.saturating_mul(bytes_per_element) > self.r.remaining() {
            return Err(self.err(
                RejectClass::Malformed,
                format!("declared length {n} exceeds the {} bytes that remain", self.r.remaining()),
            ));
        }
        Ok(n)
    }

    #[inline]
    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(self.err(RejectClass::Limits, format!("nesting deeper than {} levels", self.limits.max_depth)));
        }
        Ok(())
    }

    fn utf8(&self, b: &[u8]) -> Result<String, Error> {
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(self.err(RejectClass::Malformed, "invalid UTF-8 in str")),
        }
    }

    fn value(&mut self, ty: &'static Ty) -> Result<Value, Error> {
        match ty {
            Ty::Any => self.any(),
            Ty::Bool => match self.token()? {
                Token::Bool(b) => Ok(Value::Bool(b)),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::Int => match self.token()? {
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::IntEnum(e) => match self.token()? {
                Token::Int(v) if e.contains(v) => Ok(Value::Int(v)),
                Token::Int(v) => Err(self.err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                Token::UInt(v) => Err(self.err(RejectClass::Enum, format!("invalid enum value {v} for {}", e.name))),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::Float => match self.token()? {
                Token::F64(v) => Ok(Value::Float(v)),
                Token::F32(v) => Ok(Value::Float(v as f64)),
                Token::Int(v) => Ok(Value::Int(v)),
                Token::UInt(v) => Ok(Value::UInt(v)),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::Str => match self.token()? {
                Token::Str(b) => Ok(Value::Str(self.utf8(b)?)),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::StrLiteral(allowed) => match self.token()? {
                Token::Str(b) => {
                    let s = self.utf8(b)?;
                    if allowed.contains(&s.as_str()) {
                        Ok(Value::Str(s))
                    } else {
                        Err(self.err(
                            RejectClass::Enum,
                            format!("invalid enum value {s:?} (allowed: {})", allowed.join(", ")),
                        ))
                    }
                }
                t => Err(self.type_err(ty, &t)),
            },
            Ty::Bytes => match self.token()? {
                Token::Bin(b) => Ok(Value::Bytes(b.to_vec())),
                t => Err(self.type_err(ty, &t)),
            },
            Ty::Optional(inner) => {
                if self.r.peek_byte() == Some(0xc0) {
                    self.r.token().map_err(|e| self.read_err(e))?;
                    Ok(Value::Nil)
                } else {
                    self.value(inner)
                }
            }
            Ty::List(inner) | Ty::Set(inner) => {
                let t = self.token()?;
                let Token::Array(n) = t else { return Err(self.type_err(ty, &t)) };
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
                let Token::Map(n) = t else { return Err(self.type_err(ty, &t)) };
                let n = self.check_len(n, 2)?;
                self.enter()?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let key = self.value(k)?;
                    let seg = match &key {
                        Value::Str(s) => Seg::Key(s.clone()),
                        Value::Int(i) => Seg::Key(i.to_string()),
                        _ => Seg::Key("?".into()),
                    };
                    self.path.push(seg);
                    let val = self.value(v)?;
                    self.path.pop();
                    entries.push((key, val));
                }
                self.depth -= 1;
                Ok(Value::Map(entries))
            }
            Ty::Union(members) => {
                let t = self.peek()?;
                match members.iter().find(|m| token_fits(m, &t)) {
                    Some(m) => self.value(m),
                    None => Err(self.type_err(ty, &t)),
                }
            }
            Ty::Struct(s) => Ok(Value::Struct(Box::new(self.struct_value(s)?))),
            Ty::Tensor(kind) => Ok(Value::Tensor(Box::new(self.tensor(*kind)?))),
            Ty::NestedTensors => self.nested_tensors(),
            Ty::UtilityResult => {
                let t = self.token()?;
                match t {
                    Token::Array(2) => {
                        self.enter()?;
                        self.path.push(Seg::Index(0));
                        let ti = self.any()?;
                        if ti != Value::Nil {
                            // Custom result types travel pickled; vLLM only
                            // accepts them with VLLM_ALLOW_INSECURE_SERIALIZATION.
                            return Err(self.err(
                                RejectClass::Validation,
                                "a non-nil type_info needs VLLM_ALLOW_INSECURE_SERIALIZATION, which gateways never enable",
                            ));
                        }
                        self.path.pop();
                        self.path.push(Seg::Index(1));
                        let v = self.any()?;
                        self.path.pop();
                        self.depth -= 1;
                        Ok(Value::Array(vec![ti, v]))
                    }
                    Token::Array(n) => Err(self.err(
                        RejectClass::Validation,
                        format!("expected UtilityResult [type_info, value], got array of {n}"),
                    )),
                    t => Err(self.type_err(ty, &t)),
                }
            }
        }
    }

    /// vLLM's rule: numbers stay numbers; a 3-array whose first element is
    /// a string is a torch tensor; any other array is a list of nested
    /// tensors.
    fn nested_tensors(&mut self) -> Result<Value, Error> {
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
            t => Err(self.type_err(&Ty::NestedTensors, &t)),
        }
    }

    fn int_array(&mut self, n: usize) -> Result<Value, Error> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            match self.token()? {
                Token::Int(v) => out.push(v),
                Token::UInt(v) => {
                    // Does not fit i64: fall back to a boxed list.
                    let mut vals: Vec<Value> = out.into_iter().map(Value::Int).collect();
                    vals.push(Value::UInt(v));
                    for j in i + 1..n {
                        self.path.push(Seg::Index(j));
                        vals.push(self.value(&Ty::Int)?);
                        self.path.pop();
                    }
                    return Ok(Value::Array(vals));
                }
                t => {
                    self.path.push(Seg::Index(i));
                    let e = self.type_err(&Ty::Int, &t);
                    self.path.pop();
                    return Err(e);
                }
            }
        }
        Ok(Value::IntArray(out))
    }

    fn list(&mut self, inner: &'static Ty, n: usize) -> Result<Value, Error> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            self.path.push(Seg::Index(i));
            out.push(self.value(inner)?);
            self.path.pop();
        }
        Ok(Value::Array(out))
    }

    fn any(&mut self) -> Result<Value, Error> {
        Ok(match self.token()? {
            Token::Nil => Value::Nil,
            Token::Bool(b) => Value::Bool(b),
            Token::Int(v) => Value::Int(v),
            Token::UInt(v) => Value::UInt(v),
            Token::F32(v) => Value::Float(v as f64),
            Token::F64(v) => Value::Float(v),
            Token::Str(b) => Value::Str(self.utf8(b)?),
            Token::Bin(b) => Value::Bytes(b.to_vec()),
            Token::Ext(t, b) => self.ext(t, b)?,
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
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = self.any()?;
                    let seg = match &k {
                        Value::Str(s) => Seg::Key(s.clone()),
                        other => Seg::Key(format!("{other:?}")),
                    };
                    self.path.push(seg);
                    let v = self.any()?;
                    self.path.pop();
                    entries.push((k, v));
                }
                self.depth -= 1;
                Value::Map(entries)
            }
        })
    }

    /// Ext types: vLLM's decoder knows 3 (raw view); 1 and 2 (pickle) need
    /// `VLLM_ALLOW_INSECURE_SERIALIZATION`, which a gateway never enables.
    fn ext(&self, t: i8, b: &[u8]) -> Result<Value, Error> {
        if t == 3 {
            Ok(Value::Ext(t, b.to_vec()))
        } else {
            Err(self.err(RejectClass::Type, format!("unsupported ext type {t} (only ext 3, raw buffers, is decoded)")))
        }
    }

    fn struct_value(&mut self, s: &'static StructSchema) -> Result<StructValue, Error> {
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
                return Err(self.err(RejectClass::Type, format!("expected {want} ({}), got {}", s.name, t.type_name())));
            }
        };
        self.depth -= 1;
        if let Some(validate) = s.validate {
            if let Err(violation) = validate(&v) {
                let mut path = self.path_string();
                if !violation.field.is_empty() {
                    path.push('.');
                    path.push_str(&violation.field);
                }
                return Err(Error::new(RejectClass::Validation, path, violation.message));
            }
        }
        Ok(v)
    }

    fn positional(&mut self, s: &'static StructSchema, n: u32) -> Result<StructValue, Error> {
        let n = self.check_len(n, 1)?;
        let required = s.required();
        let nf = s.fields.len();
        if n < required {
            return Err(self.err(
                RejectClass::MissingField,
                format!("expected array of at least length {required} ({}), got {n}", s.name),
            ));
        }
        if matches!(s.layout, Layout::NamedTuple | Layout::Tuple) && n > nf {
            return Err(
                self.err(RejectClass::Type, format!("expected array of at most length {nf} ({}), got {n}", s.name))
            );
        }
        let mut fields = Vec::with_capacity(nf);
        for (i, field) in s.fields.iter().enumerate() {
            if i < n {
                self.path.push(Seg::Field(field.name));
                fields.push(self.value(field.ty)?);
                self.path.pop();
            } else {
                fields.push(default_for(field));
            }
        }
        for i in nf..n {
            self.path.push(Seg::Index(i));
            let p = self.path_string();
            self.path.pop();
            self.r.skip_value().map_err(|e| self.read_err(e))?;
            self.drift.push(p);
        }
        Ok(StructValue { schema: s, fields, extra: Vec::new() })
    }

    fn keyed(&mut self, s: &'static StructSchema, n: u32) -> Result<StructValue, Error> {
        let n = self.check_len(n, 2)?;
        let mut fields: Vec<Option<Value>> = (0..s.fields.len()).map(|_| None).collect();
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => b,
                t => {
                    return Err(
                        self.err(RejectClass::Type, format!("expected str key ({}), got {}", s.name, t.type_name()))
                    )
                }
            };
            match s.fields.iter().position(|f| f.name.as_bytes() == key) {
                Some(i) => {
                    let field = &s.fields[i];
                    self.path.push(Seg::Field(field.name));
                    fields[i] = Some(self.value(field.ty)?);
                    self.path.pop();
                }
                None => {
                    let name = self.utf8(key)?;
                    self.path.push(Seg::Key(name));
                    let p = self.path_string();
                    self.path.pop();
                    self.r.skip_value().map_err(|e| self.read_err(e))?;
                    self.drift.push(p);
                }
            }
        }
        let mut out = Vec::with_capacity(s.fields.len());
        for (slot, field) in fields.into_iter().zip(s.fields) {
            match slot {
                Some(v) => out.push(v),
                None if field.default == crate::schema::Default::Required => {
                    return Err(self.err(
                        RejectClass::MissingField,
                        format!("object missing required field `{}` ({})", field.name, s.name),
                    ))
                }
                None => out.push(default_for(field)),
            }
        }
        Ok(StructValue { schema: s, fields: out, extra: Vec::new() })
    }

    /// A plain dict with known keys: every entry kept in wire order; known
    /// keys type-checked; required keys must be present.
    fn open_map(&mut self, s: &'static StructSchema, n: u32) -> Result<StructValue, Error> {
        let n = self.check_len(n, 2)?;
        let mut extra = Vec::with_capacity(n);
        for _ in 0..n {
            let key = match self.token()? {
                Token::Str(b) => self.utf8(b)?,
                t => return Err(self.err(RejectClass::Type, format!("expected str key, got {}", t.type_name()))),
            };
            let ty = s.fields.iter().find(|f| f.name == key).map_or(&Ty::Any, |f| f.ty);
            self.path.push(Seg::Key(key.clone()));
            let v = self.value(ty)?;
            self.path.pop();
            extra.push((key, v));
        }
        for field in s.fields.iter().filter(|f| f.default == crate::schema::Default::Required) {
            if !extra.iter().any(|(k, _)| k == field.name) {
                return Err(
                    self.err(RejectClass::MissingField, format!("object missing required key `{}`", field.name))
                );
            }
        }
        let mut v = StructValue::with_defaults(s);
        v.extra = extra;
        Ok(v)
    }

    fn tensor(&mut self, kind: TensorKind) -> Result<Tensor, Error> {
        let t = self.token()?;
        let Token::Array(n) = t else {
            return Err(
                self.err(RejectClass::Type, format!("expected tensor [dtype, shape, data], got {}", t.type_name()))
            );
        };
        if n != 3 {
            // vLLM's decode hook unpacks three names: a ValueError there.
            return Err(
                self.err(RejectClass::Validation, format!("expected tensor [dtype, shape, data], got array of {n}"))
            );
        }
        self.enter()?;
        self.path.push(Seg::Index(0));
        let dtype = match self.token()? {
            Token::Str(b) => self.utf8(b)?,
            t => return Err(self.type_err(&Ty::Str, &t)),
        };
        let parsed = match kind {
            TensorKind::Numpy => numpy_dtype(&dtype),
            TensorKind::Torch => torch_dtype(&dtype),
        };
        let Some(parsed) = parsed else {
            let which = if kind == TensorKind::Numpy { "numpy" } else { "torch" };
            // numpy / torch reject the name inside vLLM's decode hook.
            return Err(self.err(RejectClass::Validation, format!("unknown {which} dtype {dtype:?}")));
        };
        self.path.pop();
        self.path.push(Seg::Index(1));
        let t = self.token()?;
        let Token::Array(dims) = t else { return Err(self.type_err(&Ty::List(&Ty::Int), &t)) };
        let dims = self.check_len(dims, 1)?;
        let mut shape = Vec::with_capacity(dims);
        for i in 0..dims {
            match self.token()? {
                Token::Int(d) if d >= 0 => shape.push(d),
                Token::Int(d) => {
                    self.path.push(Seg::Index(i));
                    let e = self.err(RejectClass::Frames, format!("negative dimension {d}"));
                    return Err(e);
                }
                t => {
                    self.path.push(Seg::Index(i));
                    let e = self.type_err(&Ty::Int, &t);
                    return Err(e);
                }
            }
        }
        self.path.pop();
        self.path.push(Seg::Index(2));
        let data: &[u8] = match self.token()? {
            Token::Ext(3, b) => b,
            Token::Bin(b) => b,
            Token::Int(i) => {
                if i < 0 || i as usize >= self.frames.len() {
                    return Err(self.err(
                        RejectClass::Frames,
                        format!("aux frame index {i} out of range ({} frames)", self.frames.len()),
                    ));
                }
                self.frames[i as usize]
            }
            Token::Ext(t, _) => {
                return Err(self.err(RejectClass::Type, format!("tensor data has ext type {t}, expected 3")))
            }
            t => {
                return Err(self.err(
                    RejectClass::Type,
                    format!("expected tensor data (ext 3 or frame index), got {}", t.type_name()),
                ))
            }
        };
        let count = Tensor::element_count(&shape);
        let want = count.and_then(|c| c.checked_mul(parsed.elem.size()));
        if want != Some(data.len()) {
            let shown = want.map_or_else(|| "an overflowing size".to_string(), |w| format!("{w} bytes"));
            return Err(self.err(
                RejectClass::Frames,
                format!("buffer of {} bytes does not match dtype {dtype} and shape {shape:?} ({shown})", data.len()),
            ));
        }
        self.path.pop();
        self.depth -= 1;
        Ok(Tensor { dtype, shape, data: data.to_vec() })
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
