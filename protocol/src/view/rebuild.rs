//! View → value: rebuilds a decoded value from its canonical view, typed by
//! the schema (the inverse of `render`; docs/case-format.md §6). Errors
//! name the path into the view. TokenSpeed's torch-typed tensors also take
//! numpy dtype spellings.

use serde_json::{Map, Number, Value as Json};

use crate::error::{Error, RejectClass};
use crate::schema::{Layout, StructSchema, Ty};
use crate::value::{default_for, f64_to_f16, numpy_dtype, torch_dtype, Elem, StructValue, Tensor, Value};

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

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}
