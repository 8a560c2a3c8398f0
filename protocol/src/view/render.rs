//! Value → view: renders a decoded value as its canonical JSON view
//! (docs/case-format.md §6.1-§6.10): structs as objects of every schema
//! field in declaration order (defaults filled), enums as their integers,
//! tensors as `{dtype, shape, data}` with the flat C-order numbers,
//! non-finite floats as `"NaN"`/`"Infinity"`/`"-Infinity"`, bin as
//! `{"$bytes": hex}`, other ext as `{"$ext": T, "hex"}`, sets sorted,
//! non-string map keys as decimal strings. `Any` values and
//! `NestedTensors` are walked with an explicit stack.

use serde_json::{Map, Number, Value as Json};

use crate::schema::{Layout, Ty};
use crate::value::{Numbers, StructValue, Tensor, Value};

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
