//! The canonical view of docs/case-format.md §6: a JSON rendering of a
//! decoded message, and back.
//!
//! Rules (docs/case-format.md §6.1-§6.10): structs are objects of
//! every schema field in declaration order (defaults filled); enums are
//! their integer values; tensors are `{dtype, shape, data}` with data the
//! flat C-order numbers; non-finite floats are `"NaN"`, `"Infinity"`,
//! `"-Infinity"`; bin is `{"$bytes": hex}`, other ext `{"$ext": T, "hex"}`;
//! sets are sorted arrays; non-string map keys are decimal strings; `Any`
//! fields are plain JSON of their MessagePack value; a tensor's shape is
//! kept as sent (a dimension to infer stays `-1`). Floats compare by value
//! ([`diff`]).
//!
//! `Any` values, `NestedTensors` and the comparison are walked with explicit
//! stacks, not recursion, so views as deep as the decoder's depth limit
//! (docs/limits.md) cost heap, not call stack; [`parse_json`] reads case
//! files that deep (serde_json alone stops at 128 levels).
#![warn(missing_docs)]

use serde_json::{Map, Number, Value as Json};

use crate::error::{Error, RejectClass};
use crate::schema::{Layout, StructSchema, Ty};
use crate::value::{default_for, f64_to_f16, numpy_dtype, torch_dtype, Elem, Numbers, StructValue, Tensor, Value};

// ===== value -> view =====

/// Renders `value` (of type `ty`) as its canonical view.
pub fn to_view(ty: &'static Ty, value: &Value) -> Json {
    match (ty, value) {
        (_, Value::Nil) => Json::Null,
        (Ty::Optional(inner), v) => to_view(inner, v),
        (Ty::Set(inner), Value::Array(xs)) => {
            let mut items: Vec<Json> = xs.iter().map(|x| to_view(inner, x)).collect();
            items.sort_by(json_order);
            Json::Array(items)
        }
        (Ty::Set(_), Value::IntArray(xs)) => {
            let mut xs = xs.clone();
            xs.sort_unstable();
            Json::Array(xs.into_iter().map(Json::from).collect())
        }
        (Ty::List(inner), Value::Array(xs)) => Json::Array(xs.iter().map(|x| to_view(inner, x)).collect()),
        (Ty::Dict(_, vt), Value::Map(entries)) => {
            let mut m = Map::with_capacity(entries.len());
            for (k, v) in entries {
                m.insert(key_string(k), to_view(vt, v));
            }
            Json::Object(m)
        }
        (Ty::Union(members), v) => match members.iter().find(|m| fits(m, v)) {
            Some(m) => to_view(m, v),
            None => any_view(v),
        },
        (Ty::Struct(_), Value::Struct(sv)) => struct_view(sv),
        (Ty::UtilityResult, Value::Array(xs)) => Json::Array(xs.iter().map(any_view).collect()),
        // Nested lists of tensors and numbers: `any_view` renders tensors
        // by the tensor rule (and is iterative).
        (Ty::NestedTensors, v @ Value::Array(_)) => any_view(v),
        (_, v) => any_view(v),
    }
}

fn fits(ty: &Ty, v: &Value) -> bool {
    matches!(
        (ty, v),
        (Ty::Any, _)
            | (Ty::Str | Ty::StrLiteral(_), Value::Str(_))
            | (Ty::Int | Ty::IntEnum(_), Value::Int(_) | Value::UInt(_))
            | (Ty::Float, Value::Float(_))
            | (Ty::Bool, Value::Bool(_))
            | (Ty::List(_) | Ty::Set(_), Value::Array(_) | Value::IntArray(_))
            | (Ty::Dict(..), Value::Map(_))
    )
}

/// The view of a struct value.
pub fn struct_view(sv: &StructValue) -> Json {
    let s = sv.schema;
    if s.layout == Layout::OpenMap {
        let entries = sv.open_entries();
        let mut m = Map::with_capacity(entries.len());
        for (k, v) in entries {
            let k = key_string(k);
            let ty = s.fields.iter().find(|f| f.name == k).map_or(&Ty::Any, |f| f.ty);
            m.insert(k.clone(), to_view(ty, v));
        }
        return Json::Object(m);
    }
    if s.layout == Layout::Tuple {
        return Json::Array(s.fields.iter().zip(sv.fields()).map(|(f, v)| to_view(f.ty, v)).collect());
    }
    let mut m = Map::with_capacity(s.fields.len());
    for (f, v) in s.fields.iter().zip(sv.fields()) {
        m.insert(f.name.to_string(), to_view(f.ty, v));
    }
    Json::Object(m)
}

fn float_view(f: f64) -> Json {
    if f.is_nan() {
        Json::String("NaN".into())
    } else if f.is_infinite() {
        Json::String(if f > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        Number::from_f64(f).map_or(Json::Null, Json::Number)
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

fn key_string(k: &Value) -> String {
    match k {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Nil => "None".into(),
        Value::Float(f) => format!("{f:?}"),
        other => any_view(other).to_string(),
    }
}

fn tensor_view(t: &Tensor) -> Json {
    let data = match t.numbers() {
        Some(Numbers::Ints(xs)) => xs.into_iter().map(Json::from).collect(),
        Some(Numbers::UInts(xs)) => xs.into_iter().map(Json::from).collect(),
        Some(Numbers::Floats(xs)) => xs.into_iter().map(float_view).collect(),
        Some(Numbers::Bools(xs)) => xs.into_iter().map(Json::Bool).collect(),
        None => Vec::new(),
    };
    let mut m = Map::with_capacity(3);
    m.insert("dtype".into(), Json::String(t.dtype.clone()));
    m.insert("shape".into(), Json::Array(t.shape.iter().map(|&d| Json::from(d)).collect()));
    m.insert("data".into(), Json::Array(data));
    Json::Object(m)
}

/// Plain JSON of a MessagePack value (rules 4-8). Iterative (an explicit
/// stack of open arrays and maps), so that a value as deep as the decoder
/// admits costs heap, not call stack.
pub fn any_view(v: &Value) -> Json {
    enum Open<'a> {
        Array(std::slice::Iter<'a, Value>, Vec<Json>),
        Map(std::slice::Iter<'a, (Value, Value)>, Map<String, Json>, String),
    }
    let mut open: Vec<Open> = Vec::new();
    let mut next = v;
    loop {
        let mut done = match next {
            Value::Array(xs) => {
                open.push(Open::Array(xs.iter(), Vec::with_capacity(xs.len())));
                None
            }
            Value::Map(entries) => {
                open.push(Open::Map(entries.iter(), Map::with_capacity(entries.len()), String::new()));
                None
            }
            leaf => Some(leaf_view(leaf)),
        };
        // Hand a finished value to the innermost open container, then move
        // to the next element to render (closing finished containers).
        loop {
            if let Some(j) = done.take() {
                match open.last_mut() {
                    None => return j,
                    Some(Open::Array(_, out)) => out.push(j),
                    Some(Open::Map(_, out, key)) => {
                        out.insert(std::mem::take(key), j);
                    }
                }
            }
            match open.last_mut() {
                None => unreachable!("an open container is left while rendering"),
                Some(Open::Array(items, _)) => {
                    if let Some(x) = items.next() {
                        next = x;
                        break;
                    }
                }
                Some(Open::Map(entries, _, key)) => {
                    if let Some((k, x)) = entries.next() {
                        *key = key_string(k);
                        next = x;
                        break;
                    }
                }
            }
            done = Some(match open.pop() {
                Some(Open::Array(_, out)) => Json::Array(out),
                Some(Open::Map(_, out, _)) => Json::Object(out),
                None => unreachable!("checked above"),
            });
        }
    }
}

/// The view of a value that is not an array or a map.
fn leaf_view(v: &Value) -> Json {
    match v {
        Value::Nil => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => float_view(*f),
        Value::Str(s) => Json::String(s.clone()),
        Value::Bytes(b) => {
            let mut m = Map::new();
            m.insert("$bytes".into(), Json::String(hex(b)));
            Json::Object(m)
        }
        Value::Ext(t, b) => {
            let mut m = Map::new();
            m.insert("$ext".into(), Json::from(*t));
            m.insert("hex".into(), Json::String(hex(b)));
            Json::Object(m)
        }
        Value::IntArray(xs) => Json::Array(xs.iter().map(|&x| Json::from(x)).collect()),
        Value::Struct(sv) => struct_view(sv),
        Value::Tensor(t) => tensor_view(t),
        // Containers are rendered by `any_view`.
        Value::Array(_) | Value::Map(_) => any_view(v),
    }
}

fn json_order(a: &Json, b: &Json) -> std::cmp::Ordering {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
        }
        (Json::String(x), Json::String(y)) => x.chars().cmp(y.chars()),
        _ => a.to_string().cmp(&b.to_string()),
    }
}

// ===== view -> value =====

struct FromView {
    path: Vec<String>,
    /// TokenSpeed: torch-typed tensors also take numpy dtype spellings.
    tokenspeed: bool,
}

impl FromView {
    fn err(&self, detail: impl Into<String>) -> Error {
        Error::new(RejectClass::Type, self.path.concat(), detail)
    }

    fn value(&mut self, ty: &'static Ty, j: &Json) -> Result<Value, Error> {
        match (ty, j) {
            (Ty::Any, j) => Ok(self.any(j)),
            (Ty::Optional(_), Json::Null) => Ok(Value::Nil),
            (Ty::Optional(inner), j) => self.value(inner, j),
            (Ty::Bool, Json::Bool(b)) => Ok(Value::Bool(*b)),
            (Ty::Int | Ty::IntEnum(_), Json::Number(n)) => {
                int_of(n).ok_or_else(|| self.err(format!("expected int, got {n}")))
            }
            (Ty::Float, Json::Number(n)) => Ok(match int_of(n) {
                Some(v) if !n.is_f64() => v,
                _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            }),
            (Ty::Float, Json::String(s)) => match s.as_str() {
                "NaN" => Ok(Value::Float(f64::NAN)),
                "Infinity" => Ok(Value::Float(f64::INFINITY)),
                "-Infinity" => Ok(Value::Float(f64::NEG_INFINITY)),
                _ => Err(self.err(format!("expected float, got string {s:?}"))),
            },
            (Ty::Str | Ty::StrLiteral(_), Json::String(s)) => Ok(Value::Str(s.clone())),
            (Ty::Bytes, Json::Object(m)) => match m.get("$bytes").and_then(Json::as_str).and_then(unhex) {
                Some(b) => Ok(Value::Bytes(b)),
                None => Err(self.err("expected {\"$bytes\": hex}")),
            },
            (Ty::List(inner) | Ty::Set(inner), Json::Array(xs)) => {
                if matches!(inner, Ty::Int) {
                    if let Some(ints) = xs.iter().map(Json::as_i64).collect::<Option<Vec<i64>>>() {
                        return Ok(Value::IntArray(ints));
                    }
                }
                let mut out = Vec::with_capacity(xs.len());
                for (i, x) in xs.iter().enumerate() {
                    self.path.push(format!("[{i}]"));
                    out.push(self.value(inner, x)?);
                    self.path.pop();
                }
                Ok(Value::Array(out))
            }
            (Ty::Dict(kt, vt), Json::Object(m)) => {
                let mut out = Vec::with_capacity(m.len());
                for (k, v) in m {
                    let key = match kt {
                        Ty::Int => match k.parse::<i64>() {
                            Ok(i) => Value::Int(i),
                            Err(_) => match k.parse::<u64>() {
                                Ok(u) => Value::UInt(u),
                                Err(_) => return Err(self.err(format!("expected an integer key, got {k:?}"))),
                            },
                        },
                        _ => Value::Str(k.clone()),
                    };
                    self.path.push(format!(".{k}"));
                    out.push((key, self.value(vt, v)?));
                    self.path.pop();
                }
                Ok(Value::Map(out))
            }
            (Ty::Union(members), j) => {
                let m = members
                    .iter()
                    .find(|m| json_fits(m, j))
                    .ok_or_else(|| self.err(format!("no union member fits {j}")))?;
                self.value(m, j)
            }
            (Ty::Struct(s), Json::Object(m)) => Ok(Value::Struct(self.struct_value(s, m)?)),
            (Ty::Struct(s), Json::Array(xs)) if s.layout == Layout::Tuple => {
                if xs.len() != s.fields.len() {
                    return Err(self.err(format!(
                        "{} is a {}-element array, view has {}",
                        s.name,
                        s.fields.len(),
                        xs.len()
                    )));
                }
                let mut fields = Vec::with_capacity(xs.len());
                for (f, x) in s.fields.iter().zip(xs) {
                    self.path.push(format!(".{}", f.name));
                    fields.push(self.value(f.ty, x)?);
                    self.path.pop();
                }
                Ok(Value::Struct(StructValue::new(s, fields)))
            }
            (Ty::Tensor(kind), Json::Object(m)) => {
                let t = self.tensor(*kind, m)?;
                Ok(Value::Tensor(Box::new(t)))
            }
            (Ty::UtilityResult, Json::Array(xs)) if xs.len() == 2 => {
                Ok(Value::Array(xs.iter().map(|x| self.any(x)).collect()))
            }
            (Ty::NestedTensors, j @ (Json::Object(_) | Json::Array(_) | Json::Number(_) | Json::Bool(_))) => {
                self.tree(j, true)
            }
            (ty, j) => Err(self.err(format!("view {j} does not fit {}", short_ty(ty)))),
        }
    }

    fn struct_value(&mut self, s: &'static StructSchema, m: &Map<String, Json>) -> Result<StructValue, Error> {
        if s.layout == Layout::OpenMap {
            let mut v = StructValue::with_defaults(s);
            for (k, x) in m {
                let ty = s.fields.iter().find(|f| f.name == k).map_or(&Ty::Any, |f| f.ty);
                self.path.push(format!(".{k}"));
                let x = self.value(ty, x)?;
                v.open_entries_mut().push((Value::Str(k.clone()), x));
                self.path.pop();
            }
            return Ok(v);
        }
        if let Some(unknown) = m.keys().find(|k| s.index_of(k).is_none()) {
            return Err(self.err(format!("{} has no field {unknown:?}", s.name)));
        }
        let mut fields = Vec::with_capacity(s.fields.len());
        for f in s.fields {
            self.path.push(format!(".{}", f.name));
            let v = match m.get(f.name) {
                Some(x) => self.value(f.ty, x)?,
                None => default_for(f),
            };
            self.path.pop();
            fields.push(v);
        }
        Ok(StructValue::new(s, fields))
    }

    fn tensor(&self, kind: crate::schema::TensorKind, m: &Map<String, Json>) -> Result<Tensor, Error> {
        let dtype =
            m.get("dtype").and_then(Json::as_str).ok_or_else(|| self.err("tensor view needs a dtype string"))?;
        let parsed = match kind {
            crate::schema::TensorKind::Numpy => numpy_dtype(dtype),
            crate::schema::TensorKind::Torch if self.tokenspeed => torch_dtype(dtype).or_else(|| numpy_dtype(dtype)),
            crate::schema::TensorKind::Torch => torch_dtype(dtype),
        }
        .ok_or_else(|| self.err(format!("unknown dtype {dtype:?}")))?;
        let shape: Vec<i64> = m
            .get("shape")
            .and_then(Json::as_array)
            .and_then(|a| a.iter().map(Json::as_i64).collect())
            .ok_or_else(|| self.err("tensor view needs an integer shape"))?;
        let data = m.get("data").and_then(Json::as_array).ok_or_else(|| self.err("tensor view needs a data array"))?;
        let mut bytes = Vec::with_capacity(data.len() * parsed.elem.size());
        for x in data {
            let mut b = element_bytes(parsed.elem, x)
                .ok_or_else(|| self.err(format!("tensor element {x} is not a {dtype}")))?;
            if parsed.big_endian {
                b.reverse();
            }
            bytes.extend_from_slice(&b);
        }
        Ok(Tensor { dtype: dtype.to_string(), shape, data: bytes })
    }

    fn any(&self, j: &Json) -> Value {
        // Infallible: every JSON value is some `Any` value.
        self.tree(j, false).unwrap_or(Value::Nil)
    }

    /// A JSON tree as an `Any` value (`tensors` false: objects are maps,
    /// `{"$bytes"}` bin and `{"$ext", "hex"}` ext), or as `NestedTensors`
    /// (`tensors` true: objects are torch tensors, arrays lists, numbers
    /// numbers). Iterative, like [`any_view`].
    fn tree(&self, j: &Json, tensors: bool) -> Result<Value, Error> {
        enum Open<'a> {
            Array(std::slice::Iter<'a, Json>, Vec<Value>),
            Map(serde_json::map::Iter<'a>, Vec<(Value, Value)>, Option<Value>),
        }
        let mut open: Vec<Open> = Vec::new();
        let mut next = j;
        loop {
            let mut done = match next {
                Json::Array(xs) => {
                    open.push(Open::Array(xs.iter(), Vec::with_capacity(xs.len())));
                    None
                }
                Json::Object(m) if tensors => {
                    Some(Value::Tensor(Box::new(self.tensor(crate::schema::TensorKind::Torch, m)?)))
                }
                Json::Object(m) => match special_object(m) {
                    Some(v) => Some(v),
                    None => {
                        open.push(Open::Map(m.iter(), Vec::with_capacity(m.len()), None));
                        None
                    }
                },
                Json::String(_) | Json::Null if tensors => {
                    return Err(self.err(format!("view {next} does not fit NestedTensors")));
                }
                // A scalar (arrays and objects are opened above).
                leaf => Some(Value::from_json(leaf)),
            };
            loop {
                if let Some(v) = done.take() {
                    match open.last_mut() {
                        None => return Ok(v),
                        Some(Open::Array(_, out)) => out.push(v),
                        Some(Open::Map(_, out, key)) => out.push((key.take().unwrap_or(Value::Nil), v)),
                    }
                }
                match open.last_mut() {
                    None => unreachable!("an open container is left while building"),
                    Some(Open::Array(items, _)) => {
                        if let Some(x) = items.next() {
                            next = x;
                            break;
                        }
                    }
                    Some(Open::Map(entries, _, key)) => {
                        if let Some((k, x)) = entries.next() {
                            *key = Some(Value::Str(k.clone()));
                            next = x;
                            break;
                        }
                    }
                }
                done = Some(match open.pop() {
                    Some(Open::Array(_, out)) => Value::Array(out),
                    Some(Open::Map(_, out, _)) => Value::Map(out),
                    None => unreachable!("checked above"),
                });
            }
        }
    }
}

/// `{"$bytes": hex}` and `{"$ext": T, "hex": hex}` (rule 5).
fn special_object(m: &Map<String, Json>) -> Option<Value> {
    if m.len() == 1 {
        if let Some(b) = m.get("$bytes").and_then(Json::as_str).and_then(unhex) {
            return Some(Value::Bytes(b));
        }
    }
    if m.len() == 2 {
        if let (Some(t), Some(b)) =
            (m.get("$ext").and_then(Json::as_i64), m.get("hex").and_then(Json::as_str).and_then(unhex))
        {
            return Some(Value::Ext(t as i8, b));
        }
    }
    None
}

fn short_ty(ty: &Ty) -> String {
    let s = format!("{ty:?}");
    s.chars().take(60).collect()
}

fn int_of(n: &Number) -> Option<Value> {
    if let Some(i) = n.as_i64() {
        Some(Value::Int(i))
    } else {
        n.as_u64().map(Value::UInt)
    }
}

fn json_fits(ty: &Ty, j: &Json) -> bool {
    match (ty, j) {
        (Ty::Any, _) => true,
        (Ty::Str | Ty::StrLiteral(_), Json::String(_)) => true,
        (Ty::Int | Ty::IntEnum(_), Json::Number(n)) => !n.is_f64(),
        (Ty::Float, Json::Number(_)) => true,
        (Ty::Bool, Json::Bool(_)) => true,
        (Ty::List(_) | Ty::Set(_), Json::Array(_)) => true,
        (Ty::Dict(..), Json::Object(_)) => true,
        _ => false,
    }
}

/// A float of the view: a JSON number, or `"NaN"`, `"Infinity"`,
/// `"-Infinity"` (docs/case-format.md §6.4).
pub fn float_of(x: &Json) -> Option<f64> {
    match x {
        Json::Number(n) => n.as_f64(),
        Json::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// Little-endian bytes of one tensor element.
fn element_bytes(elem: Elem, x: &Json) -> Option<Vec<u8>> {
    let i = || x.as_i64();
    Some(match elem {
        Elem::Bool => vec![x.as_bool().map(u8::from).or_else(|| i().map(|v| (v != 0) as u8))?],
        Elem::I8 => (i8::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::U8 => (u8::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::I16 => (i16::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::U16 => (u16::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::I32 => (i32::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::U32 => (u32::try_from(i()?).ok()?).to_le_bytes().to_vec(),
        Elem::I64 => i()?.to_le_bytes().to_vec(),
        Elem::U64 => x.as_u64()?.to_le_bytes().to_vec(),
        Elem::F16 => f64_to_f16(float_of(x)?).to_le_bytes().to_vec(),
        Elem::BF16 => (((float_of(x)? as f32).to_bits() >> 16) as u16).to_le_bytes().to_vec(),
        Elem::F32 => (float_of(x)? as f32).to_le_bytes().to_vec(),
        Elem::F64 => float_of(x)?.to_le_bytes().to_vec(),
    })
}

/// Builds a value of type `ty` from its canonical view. `root` names the
/// message in error paths.
pub fn from_view(root: &str, ty: &'static Ty, view: &Json) -> Result<Value, Error> {
    FromView { path: vec![root.to_string()], tokenspeed: false }.value(ty, view)
}

/// [`from_view`] for a message of `release`: with TokenSpeed's tensor rule
/// (a torch-typed tensor may carry a numpy dtype spelling, as the engine's
/// decoder accepts; docs/tokenspeed-wire.md §6).
pub fn from_view_in(
    release: &crate::schema::ReleaseSchema,
    root: &str,
    ty: &'static Ty,
    view: &Json,
) -> Result<Value, Error> {
    FromView { path: vec![root.to_string()], tokenspeed: release.is_tokenspeed() }.value(ty, view)
}

// ===== reading case files =====

/// The deepest JSON document [`parse_json`] reads: the decoder's default
/// depth limit plus room for the case file around a message's view.
pub const MAX_JSON_DEPTH: usize = crate::decode::VLLM_ENGINE_MAX_DEPTH + 64;

/// What kind of failure a [`JsonError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// Not JSON (or trailing characters after the document).
    Syntax,
    /// Nested deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
}

/// Why [`parse_json`] refused a document: the kind and a description
/// naming the line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonError {
    /// The kind of failure.
    pub kind: JsonErrorKind,
    /// What was wrong, and where (`... at line 3`).
    pub detail: String,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for JsonError {}

/// For callers that report errors as text.
impl From<JsonError> for String {
    fn from(e: JsonError) -> String {
        e.detail
    }
}

/// Parses a JSON document (a case file) nesting up to [`MAX_JSON_DEPTH`]
/// levels. serde_json alone stops at 128 levels, fewer than a message the
/// engine accepts can nest, and recurses once per level; here arrays and
/// objects are assembled with an explicit stack (heap, not call stack) and
/// each scalar is read by serde_json itself, so scalars, strings and
/// numbers mean exactly what they mean to `serde_json::from_str`. A deeper
/// document is an error, never a stack overflow.
pub fn parse_json(text: &str) -> Result<Json, JsonError> {
    let syn = |detail: String| JsonError { kind: JsonErrorKind::Syntax, detail };
    enum Open {
        Array(Vec<Json>),
        Object(Map<String, Json>, Option<String>),
    }
    let b = text.as_bytes();
    let mut i = 0usize;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    let at = |i: usize| {
        let line = 1 + b[..i.min(b.len())].iter().filter(|&&c| c == b'\n').count();
        format!("line {line}")
    };
    let mut open: Vec<Open> = Vec::new();
    loop {
        skip_ws(&mut i);
        // An object key (and its colon) comes before each member value.
        if let Some(Open::Object(_, key @ None)) = open.last_mut() {
            if b.get(i) != Some(&b'"') {
                return Err(syn(format!("expected a string key at {}", at(i))));
            }
            let end = string_end(b, i).ok_or_else(|| syn(format!("unterminated string at {}", at(i))))?;
            let k: String = serde_json::from_str(&text[i..end]).map_err(|e| syn(format!("{e} at {}", at(i))))?;
            *key = Some(k);
            i = end;
            skip_ws(&mut i);
            if b.get(i) != Some(&b':') {
                return Err(syn(format!("expected `:` at {}", at(i))));
            }
            i += 1;
            skip_ws(&mut i);
        }
        let mut done = match b.get(i) {
            None => return Err(syn("EOF while parsing a value".into())),
            Some(b'[') | Some(b'{') => {
                if open.len() >= MAX_JSON_DEPTH {
                    return Err(JsonError {
                        kind: JsonErrorKind::TooDeep,
                        detail: format!("JSON nests deeper than {MAX_JSON_DEPTH} levels at {}", at(i)),
                    });
                }
                let is_array = b[i] == b'[';
                i += 1;
                skip_ws(&mut i);
                let close = if is_array { b']' } else { b'}' };
                if b.get(i) == Some(&close) {
                    i += 1;
                    Some(if is_array { Json::Array(Vec::new()) } else { Json::Object(Map::new()) })
                } else {
                    open.push(if is_array { Open::Array(Vec::new()) } else { Open::Object(Map::new(), None) });
                    continue;
                }
            }
            Some(b'"') => {
                let end = string_end(b, i).ok_or_else(|| syn(format!("unterminated string at {}", at(i))))?;
                let v: Json = serde_json::from_str(&text[i..end]).map_err(|e| syn(format!("{e} at {}", at(i))))?;
                i = end;
                Some(v)
            }
            Some(_) => {
                let start = i;
                while i < b.len() && !matches!(b[i], b',' | b']' | b'}' | b':' | b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                let v: Json =
                    serde_json::from_str(&text[start..i]).map_err(|e| syn(format!("{e} at {}", at(start))))?;
                if v.is_array() || v.is_object() || v.is_string() {
                    return Err(syn(format!("expected a value at {}", at(start))));
                }
                Some(v)
            }
        };
        // Hand the value to the innermost open container; close the
        // containers that end here.
        loop {
            let Some(v) = done.take() else { break };
            match open.last_mut() {
                None => {
                    skip_ws(&mut i);
                    if i != b.len() {
                        return Err(syn(format!("trailing characters at {}", at(i))));
                    }
                    return Ok(v);
                }
                Some(Open::Array(xs)) => xs.push(v),
                Some(Open::Object(m, key)) => {
                    m.insert(key.take().unwrap_or_default(), v);
                }
            }
            skip_ws(&mut i);
            let close = match open.last() {
                Some(Open::Array(_)) => b']',
                _ => b'}',
            };
            match b.get(i) {
                Some(b',') => i += 1,
                Some(&c) if c == close => {
                    i += 1;
                    done = Some(match open.pop() {
                        Some(Open::Array(xs)) => Json::Array(xs),
                        Some(Open::Object(m, _)) => Json::Object(m),
                        None => unreachable!("an open container was just used"),
                    });
                }
                _ => return Err(syn(format!("expected `,` or `{}` at {}", close as char, at(i)))),
            }
        }
    }
}

/// The index just past the JSON string starting at `start` (a `"`).
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

// ===== comparison =====

/// The first difference between two views, as `(path, description)`, or
/// `None` when equal. Numbers compare by value as IEEE doubles (integers
/// exactly); `"NaN"` equals `"NaN"`; object key order is ignored.
pub fn diff(expected: &Json, actual: &Json) -> Option<(String, String)> {
    // Iterative (an explicit stack of the objects and arrays being
    // compared), so that views as deep as the decoder admits cost heap, not
    // call stack; differences are reported in document order.
    enum Open<'a> {
        Object(serde_json::map::Iter<'a>, &'a Map<String, Json>, &'a Map<String, Json>, usize),
        Array(std::iter::Enumerate<std::iter::Zip<std::slice::Iter<'a, Json>, std::slice::Iter<'a, Json>>>, usize),
    }
    let mut path = String::new();
    let mut open: Vec<Open> = Vec::new();
    let mut pair = Some((expected, actual));
    loop {
        if let Some((e, a)) = pair.take() {
            match (e, a) {
                (Json::Number(x), Json::Number(y)) => {
                    if !same_number(x, y) {
                        return Some((path, format!("expected {x}, got {y}")));
                    }
                }
                (Json::Object(x), Json::Object(y)) => open.push(Open::Object(x.iter(), x, y, path.len())),
                (Json::Array(x), Json::Array(y)) => {
                    if x.len() != y.len() {
                        return Some((path, format!("expected {} elements, got {}", x.len(), y.len())));
                    }
                    open.push(Open::Array(x.iter().zip(y.iter()).enumerate(), path.len()));
                }
                (x, y) if x == y => {}
                (x, y) => return Some((path, format!("expected {x}, got {y}"))),
            }
        }
        match open.last_mut()? {
            Open::Object(keys, x, y, len) => {
                path.truncate(*len);
                match keys.next() {
                    Some((k, ev)) => {
                        path.push('.');
                        path.push_str(k);
                        match y.get(k) {
                            Some(av) => pair = Some((ev, av)),
                            None => return Some((path, format!("missing (expected {ev})"))),
                        }
                    }
                    None => {
                        if let Some(k) = y.keys().find(|k| !x.contains_key(*k)) {
                            return Some((format!("{path}.{k}"), format!("unexpected key (value {})", y[k])));
                        }
                        open.pop();
                    }
                }
            }
            Open::Array(items, len) => {
                path.truncate(*len);
                match items.next() {
                    Some((i, (ev, av))) => {
                        path.push_str(&format!("[{i}]"));
                        pair = Some((ev, av));
                    }
                    None => {
                        open.pop();
                    }
                }
            }
        }
    }
}

/// Numbers compare by value as IEEE doubles, integers exactly.
fn same_number(x: &Number, y: &Number) -> bool {
    match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
        (Some(p), Some(q), _, _) if !x.is_f64() && !y.is_f64() => p == q,
        (_, _, Some(p), Some(q)) if !x.is_f64() && !y.is_f64() => p == q,
        _ => x.as_f64() == y.as_f64(),
    }
}
