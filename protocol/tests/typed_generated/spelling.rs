//! How table things are spelled in the generated Rust: struct, field and
//! type names (`int` is `i128`, `list[int]` `IntList`, `X | None`
//! `Option`, ...), defaults as expressions and as the MessagePack bytes an
//! omitted default would have been, literals for keys, per-release counts
//! and type tables, and the doc lines naming a field's type per release.

use std::fmt::Write as _;

use engine_protocol::internal::msgpack::write;
use engine_protocol::schema::{python_type, Default as D, Layout, Ty};

use crate::model::{versions, UField, UStruct};

pub(crate) fn camel(s: &str) -> String {
    s.split('_')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let lower = p.to_lowercase();
            let mut c = lower.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

/// The Rust name of a table struct: its name, or for a fixed tuple a name
/// that says what it holds.
pub(crate) fn rust_name(name: &str) -> String {
    match name {
        "tuple[int, int]" => "IntPair".into(),
        n if n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => n.into(),
        other => panic!("no Rust name for the struct {other:?}: add one to rust_name"),
    }
}

pub(crate) fn rust_ty(ty: &Ty) -> String {
    match ty {
        Ty::Any | Ty::NestedTensors => "Value".into(),
        Ty::Bool => "bool".into(),
        // msgspec takes any integer MessagePack carries for `int`
        // (-2^63 ..= 2^64-1): neither `i64` nor `u64` holds them all.
        Ty::Int => "i128".into(),
        Ty::Float => "f64".into(),
        Ty::Str | Ty::StrLiteral(_) => "String".into(),
        // Shared, as arrays are: `bytes::Bytes`.
        Ty::Bytes => "Bytes".into(),
        Ty::IntEnum(e) => match e.name {
            "FinishReason" | "RequestOutputKind" | "EngineCoreEventType" | "Modality" => e.name.into(),
            other => panic!("no typed enum for {other}: add one to typed/mod.rs"),
        },
        Ty::Optional(t) => format!("Option<{}>", rust_ty(t)),
        // Token ids: held as `i64`s unless one is above `i64::MAX`.
        Ty::List(Ty::Int) | Ty::Set(Ty::Int) => "IntList".into(),
        Ty::List(t) | Ty::Set(t) => format!("Vec<{}>", rust_ty(t)),
        Ty::Dict(k, v) => format!("Vec<({}, {})>", rust_ty(k), rust_ty(v)),
        Ty::Union(_) => match python_type(ty).as_str() {
            "int | str" => "StopReason".into(),
            "str | list[str]" => "StopStrings".into(),
            "str | dict[str, any]" => "JsonSchema".into(),
            "int | str | list[int]" => "ParallelValue".into(),
            other => panic!("no typed form for the union {other}: add one to typed/mod.rs"),
        },
        Ty::Struct(s) => rust_name(s.name),
        Ty::Tensor(_) => "Tensor".into(),
        Ty::UtilityResult => "UtilityResult".into(),
    }
}

/// Call ids use the whole integer range in practice: vLLM's client draws
/// them as unsigned 64-bit values (often at or above 2^63) and -1, -2 are
/// reserved for unsolicited engine messages (docs/wire-protocol.md §7.11).
/// Their docs say so; their type is every `int`'s.
pub(crate) fn is_call_id(f: &UField) -> bool {
    f.name == "call_id" && matches!(f.ty, Ty::Int)
}

/// TokenSpeed's `rid: str | list[str] | None` (one request id, or one per
/// request of a batch): the union of `stop`, under a name that says what it
/// holds (`typed::tokenspeed::Rid`).
pub(crate) fn is_rid_union(f: &UField) -> bool {
    f.name == "rid" && python_type(f.ty) == "str | list[str] | None"
}

pub(crate) fn is_optional(ty: &Ty) -> bool {
    matches!(ty, Ty::Optional(_))
}

pub(crate) fn strip(ty: &'static Ty) -> &'static Ty {
    match ty {
        Ty::Optional(t) => t,
        t => t,
    }
}

pub(crate) fn ident(name: &str) -> String {
    let n = name.trim_start_matches('_');
    if n.starts_with(|c: char| c.is_ascii_digit()) {
        // A tuple element: `v0`, `v1`.
        format!("v{n}")
    } else if n == "type" {
        "r#type".into()
    } else {
        n.into()
    }
}

pub(crate) fn zero(ty: &Ty) -> String {
    match ty {
        Ty::Any | Ty::NestedTensors => "Value::Nil".into(),
        Ty::Bool => "false".into(),
        Ty::Int => "0".into(),
        Ty::Float => "0.0".into(),
        Ty::Str | Ty::StrLiteral(_) => "String::new()".into(),
        Ty::IntEnum(e) => format!("{}::{}", e.name, camel(e.values[0].1)),
        Ty::Optional(_) => "None".into(),
        Ty::List(Ty::Int) | Ty::Set(Ty::Int) => "IntList::new()".into(),
        Ty::List(_) | Ty::Set(_) | Ty::Dict(..) => "Vec::new()".into(),
        Ty::Struct(s) => format!("{}::default()", rust_name(s.name)),
        Ty::Tensor(_) => "empty_tensor()".into(),
        Ty::UtilityResult => "UtilityResult::default()".into(),
        Ty::Bytes => "Bytes::new()".into(),
        other => panic!("no zero value for {}", python_type(other)),
    }
}

pub(crate) fn default_expr(u: &UStruct, f: &UField) -> String {
    if u.partial(f) && u.wrapped(f) {
        return "None".into();
    }
    let inner = strip(f.ty);
    let v = match f.default {
        D::Required => return zero(f.ty),
        D::Nil => return "None".into(),
        D::Bool(b) => b.to_string(),
        D::Int(i) => match inner {
            Ty::IntEnum(e) => {
                let (_, n) = e.values.iter().find(|(x, _)| *x == i).expect("enum default in enum");
                format!("{}::{}", e.name, camel(n))
            }
            _ => i.to_string(),
        },
        D::Float(x) => format!("{x:?}"),
        D::Str(s) => format!("{s:?}.to_owned()"),
        D::EmptyList | D::EmptySet if matches!(inner, Ty::List(Ty::Int) | Ty::Set(Ty::Int)) => "IntList::new()".into(),
        D::EmptyList | D::EmptySet | D::EmptyDict => "Vec::new()".into(),
        D::NewStruct => format!("{}::default()", rust_ty(inner)),
    };
    if is_optional(f.ty) || u.wrapped(f) {
        format!("Some({v})")
    } else {
        v
    }
}

pub(crate) fn default_lit(d: &D) -> String {
    match d {
        D::Required => "D::Required".into(),
        D::Nil => "D::Nil".into(),
        D::Bool(b) => format!("D::Bool({b})"),
        D::Int(i) => format!("D::Int({i})"),
        D::Float(x) => format!("D::Float({x:?})"),
        D::Str(s) => format!("D::Str({s:?})"),
        D::EmptyList => "D::EmptyList".into(),
        D::EmptySet => "D::EmptySet".into(),
        D::EmptyDict => "D::EmptyDict".into(),
        D::NewStruct => "D::NewStruct".into(),
    }
}

/// The wire bytes of a default, for a wrapped field left at `None`.
pub(crate) fn default_bytes(d: &D) -> Vec<u8> {
    let mut out = Vec::new();
    match d {
        D::Nil => write::nil(&mut out),
        D::Bool(b) => write::bool(&mut out, *b),
        D::Int(i) => write::int(&mut out, *i),
        D::Float(x) => write::float(&mut out, *x),
        D::Str(s) => write::str(&mut out, s),
        D::EmptyList | D::EmptySet => write::array_len(&mut out, 0),
        D::EmptyDict => write::map_len(&mut out, 0),
        D::Required | D::NewStruct => panic!("no default bytes for {d:?}"),
    }
    out
}

pub(crate) fn bytes_lit(b: &[u8]) -> String {
    let mut s = String::from("b\"");
    for x in b {
        if x.is_ascii_alphanumeric() || *x == b'_' {
            s.push(*x as char);
        } else {
            let _ = write!(s, "\\x{x:02x}");
        }
    }
    s.push('"');
    s
}

pub(crate) fn key_lit(name: &str) -> String {
    let mut out = Vec::new();
    write::str(&mut out, name);
    bytes_lit(&out)
}

pub(crate) fn counts_lit(u: &UStruct) -> String {
    format!("&{:?}", u.counts)
}

/// The Rust expression of a retyped field's type (leaf types, lists and
/// options: what token ids are typed as).
pub(crate) fn ty_code(ty: &Ty) -> String {
    match ty {
        Ty::Int => "Ty::Int".into(),
        Ty::Optional(t) => format!("Ty::Optional(&{})", ty_code(t)),
        Ty::List(t) => format!("Ty::List(&{})", ty_code(t)),
        Ty::Tensor(engine_protocol::schema::TensorKind::Numpy) => "Ty::Tensor(TensorKind::Numpy)".into(),
        other => panic!("no code for the retyped type {}", python_type(other)),
    }
}

/// The static holding a retyped field's type per release.
pub(crate) fn tys_static(u: &UStruct, f: &UField) -> String {
    let mut o = String::new();
    for (i, c) in u.rust.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            o.push('_');
        }
        o.push(c.to_ascii_uppercase());
    }
    format!("{o}_{}_TYS", f.name.trim_start_matches('_').to_uppercase())
}

pub(crate) fn doc_type(u: &UStruct, f: &UField) -> String {
    let mut d = if f.retyped() {
        // Each type once, with the releases that have it.
        let mut per: Vec<(String, Vec<&str>)> = Vec::new();
        for (ri, t) in f.tys.iter().enumerate() {
            let Some(t) = t else { continue };
            let py = python_type(t);
            match per.iter_mut().find(|(p, _)| *p == py) {
                Some((_, vs)) => vs.push(u.rels[ri].version),
                None => per.push((py, vec![u.rels[ri].version])),
            }
        }
        let per: Vec<String> = per.iter().map(|(py, vs)| format!("`{py}` ({})", vs.join(", "))).collect();
        format!("`{}`: {}", f.name, per.join(", "))
    } else {
        format!("`{}: {}`", f.name, python_type(f.ty))
    };
    match f.default {
        D::Required => d.push_str(", required"),
        D::NewStruct => d.push_str(", default a fresh instance"),
        other => {
            let _ = write!(d, ", default `{}`", default_lit(&other).trim_start_matches("D::"));
        }
    }
    d.push('.');
    if is_call_id(f) {
        d.push_str(" Any of -2^63 ..= 2^64-1: vLLM draws call ids as unsigned 64-bit values and reserves -1 and -2 (docs/wire-protocol.md §7.11).");
    }
    if u.partial(f) {
        let has = |i: usize| f.mask & (1 << i) != 0;
        let last = u.rels.len() - 1;
        let range = if has(last) {
            let since = (0..u.rels.len()).find(|&i| has(i)).map_or("?", |i| u.rels[i].version);
            format!("Since {since}")
        } else {
            let until = (0..u.rels.len()).rev().find(|&i| has(i)).map_or("?", |i| u.rels[i].version);
            if has(0) {
                format!("Until {until}")
            } else {
                format!("Only in {}", versions(u.rels, f.mask))
            }
        };
        let _ = write!(d, " {range} (releases: {}).", versions(u.rels, f.mask));
    }
    if matches!(strip(f.ty), Ty::Set(_)) {
        d.push_str(" A set on the Python side: an array on the wire, kept in wire order.");
    }
    if matches!(strip(f.ty), Ty::Dict(..)) {
        d.push_str(" A dict: its entries in wire order.");
    }
    if let Ty::StrLiteral(xs) = strip(f.ty) {
        let _ = write!(d, " One of {xs:?}.");
    }
    if u.wrapped(f) {
        d.push_str(" `None`: the default (or absent).");
    }
    d
}

pub(crate) fn layout_doc(l: Layout) -> &'static str {
    match l {
        Layout::Positional => {
            "an array of every field in order (msgspec `array_like`); unknown trailing elements are kept in `unknown`"
        }
        Layout::NamedTuple => "a NamedTuple: an array of every field in order",
        Layout::Tuple => "a plain list of exactly these elements",
        Layout::SparseMap => {
            "a map of the fields that differ from their defaults (`omit_defaults`), in declaration order"
        }
        Layout::FullMap => "a map of every field, in declaration order",
        Layout::OpenMap => "a plain dict; known keys are written in declaration order, then unknown ones",
    }
}
