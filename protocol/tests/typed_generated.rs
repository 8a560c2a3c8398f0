//! The generator of `src/typed/generated.rs`: reads the schema tables
//! (`engine_protocol::schema::VLLM_RELEASES`) and writes one Rust struct per wire
//! struct, with its conversions to and from `Value` and its direct encoder.
//!
//! It lives in a test so that it never ships. The test regenerates the file
//! in memory and fails when the committed one differs;
//! `ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test typed_generated`
//! rewrites it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use engine_protocol::internal::msgpack::write;
use engine_protocol::schema::{
    python_type, tokenspeed, Default as D, Layout, ReleaseSchema, StructSchema, Ty, VLLM_RELEASES,
};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/typed/generated.rs");
const TOKENSPEED_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/typed/tokenspeed_generated.rs");

/// The releases of one dialect the typed API is generated for.
type Rels = &'static [&'static ReleaseSchema];

static TOKENSPEED_RELEASES: Rels = &[&tokenspeed::GIT_57B49061, &tokenspeed::V0_1_1];

#[test]
fn typed_api_is_generated_from_the_schema_tables() {
    check_or_bless(PATH, &generate());
}

#[test]
fn tokenspeed_typed_api_is_generated_from_the_tokenspeed_tables() {
    check_or_bless(TOKENSPEED_PATH, &generate_tokenspeed());
}

fn check_or_bless(path: &str, want: &str) {
    engine_testkit::bless::check_or_bless(
        std::path::Path::new(path),
        want,
        "ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test typed_generated",
    );
}

/// One field of a generated struct: the union over releases.
struct UField {
    name: &'static str,
    ty: &'static Ty,
    default: D,
    /// Bit i: `VLLM_RELEASES[i]` has this field.
    mask: u32,
    /// Its position in each release's struct (0 where absent).
    pos: Vec<usize>,
    /// Its type in each release's struct (`None` where absent).
    tys: Vec<Option<&'static Ty>>,
}

impl UField {
    /// A field some release retypes from `list[int]` to an ndarray (the
    /// prompt's token ids in 0.34.0): held as `TokenIds`, which writes
    /// either form, each release's type picked at encode time.
    fn retyped(&self) -> bool {
        let mut tys = self.tys.iter().flatten();
        let first = tys.next().map(|t| python_type(t));
        tys.any(|t| Some(python_type(t)) != first)
    }
}

/// Whether a type is one of the two forms token ids take.
fn is_token_ids(ty: &Ty) -> bool {
    matches!(strip_ref(ty), Ty::List(Ty::Int) | Ty::Tensor(engine_protocol::schema::TensorKind::Numpy))
}

fn strip_ref(ty: &Ty) -> &Ty {
    match ty {
        Ty::Optional(t) => t,
        t => t,
    }
}

struct UStruct {
    name: &'static str,
    /// The Rust name (the table name unless that is no identifier).
    rust: String,
    /// The msgspec tag written as element 0 (tagged `array_like` structs).
    tag: Option<&'static str>,
    /// The releases this struct is generated over.
    rels: Rels,
    layout: Layout,
    fields: Vec<UField>,
    /// Field count per release (0 where absent).
    counts: Vec<usize>,
    /// The mask of releases that have this struct.
    mask: u32,
}

fn all_mask(rels: Rels) -> u32 {
    (1u32 << rels.len()) - 1
}

fn versions(rels: Rels, mask: u32) -> String {
    rels.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, r)| r.version).collect::<Vec<_>>().join(", ")
}

fn collect(rels: Rels) -> Vec<UStruct> {
    let mut out: Vec<UStruct> = Vec::new();
    for (ri, rel) in rels.iter().enumerate() {
        for s in rel.structs() {
            if s.name == tokenspeed::NOT_IN_DIALECT.name {
                continue;
            }
            let at = match out.iter().position(|u| u.name == s.name) {
                Some(at) => at,
                None => {
                    out.push(UStruct {
                        name: s.name,
                        rust: rust_name(s.name),
                        tag: s.tag(),
                        rels,
                        layout: s.layout,
                        fields: Vec::new(),
                        counts: vec![0; rels.len()],
                        mask: 0,
                    });
                    out.len() - 1
                }
            };
            let u = &mut out[at];
            if u.mask & (1 << ri) != 0 {
                continue;
            }
            assert_eq!(u.layout, s.layout, "{} changes layout between releases", s.name);
            assert_eq!(u.tag, s.tag(), "{} changes its tag between releases", s.name);
            u.mask |= 1 << ri;
            u.counts[ri] = s.fields.len();
            if matches!(s.layout, Layout::FullMap | Layout::SparseMap | Layout::OpenMap) {
                merge_by_name(u, s, ri);
            } else {
                merge(u, s, ri);
            }
        }
    }
    out
}

/// Adds a release's fields; each release's fields must be a prefix of the
/// union (releases so far only append fields), which keeps positional
/// indices equal across releases.
fn merge(u: &mut UStruct, s: &'static StructSchema, ri: usize) {
    for (i, f) in s.fields.iter().enumerate() {
        match u.fields.get_mut(i) {
            Some(uf) => {
                assert_eq!(uf.name, f.name, "{}: field {i} renamed between releases", s.name);
                let token_ids = is_token_ids(uf.ty) && is_token_ids(f.ty) && is_optional(uf.ty) == is_optional(f.ty);
                assert!(
                    rust_ty(uf.ty) == rust_ty(f.ty) || token_ids,
                    "{}.{}: Rust type changes between releases ({} to {}): give the pair a Rust type that writes both",
                    s.name,
                    f.name,
                    python_type(uf.ty),
                    python_type(f.ty)
                );
                assert_eq!(uf.default, f.default, "{}.{}: default changes between releases", s.name, f.name);
                uf.mask |= 1 << ri;
                uf.pos[ri] = i;
                uf.tys[ri] = Some(f.ty);
            }
            None => u.fields.push(new_field(f, u.rels.len(), ri, i)),
        }
    }
}

fn new_field(f: &'static engine_protocol::schema::Field, n: usize, ri: usize, i: usize) -> UField {
    let mut pos = vec![0; n];
    pos[ri] = i;
    let mut tys = vec![None; n];
    tys[ri] = Some(f.ty);
    UField { name: f.name, ty: f.ty, default: f.default, mask: 1 << ri, pos, tys }
}

/// Adds a release's fields to a map struct, matched by name: the keys are
/// written in each release's own order, so a field one release has where
/// another has a different one (TokenSpeed's ready response: `block_size`
/// became `prefix_granularity` in its place) is a field of its own, placed
/// after the release's previous field. Each release's fields stay in its
/// order within the union.
fn merge_by_name(u: &mut UStruct, s: &'static StructSchema, ri: usize) {
    let mut after: Option<usize> = None;
    for (i, f) in s.fields.iter().enumerate() {
        let at = match u.fields.iter().position(|uf| uf.name == f.name) {
            Some(at) => {
                let uf = &mut u.fields[at];
                assert_eq!(rust_ty(uf.ty), rust_ty(f.ty), "{}.{}: Rust type changes between releases", s.name, f.name);
                assert_eq!(uf.default, f.default, "{}.{}: default changes between releases", s.name, f.name);
                assert!(after.is_none_or(|a| a < at), "{}.{}: key order changes between releases", s.name, f.name);
                uf.mask |= 1 << ri;
                uf.pos[ri] = i;
                uf.tys[ri] = Some(f.ty);
                at
            }
            None => {
                let at = after.map_or(0, |a| a + 1);
                u.fields.insert(at, new_field(f, u.rels.len(), ri, i));
                at
            }
        };
        after = Some(at);
    }
}

fn camel(s: &str) -> String {
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
fn rust_name(name: &str) -> String {
    match name {
        "tuple[int, int]" => "IntPair".into(),
        n if n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => n.into(),
        other => panic!("no Rust name for the struct {other:?}: add one to rust_name"),
    }
}

fn rust_ty(ty: &Ty) -> String {
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
fn is_call_id(f: &UField) -> bool {
    f.name == "call_id" && matches!(f.ty, Ty::Int)
}

/// TokenSpeed's `rid: str | list[str] | None` (one request id, or one per
/// request of a batch): the union of `stop`, under a name that says what it
/// holds (`typed::tokenspeed::Rid`).
fn is_rid_union(f: &UField) -> bool {
    f.name == "rid" && python_type(f.ty) == "str | list[str] | None"
}

fn is_optional(ty: &Ty) -> bool {
    matches!(ty, Ty::Optional(_))
}

fn strip(ty: &'static Ty) -> &'static Ty {
    match ty {
        Ty::Optional(t) => t,
        t => t,
    }
}

impl UStruct {
    fn partial(&self, f: &UField) -> bool {
        f.mask != self.mask
    }

    /// Held as `Option<T>` though the table type is not optional: `None`
    /// stands for the default (or for absence from the release or map).
    fn wrapped(&self, f: &UField) -> bool {
        !is_optional(f.ty)
            && (self.partial(f) || f.default == D::Nil || (self.layout == Layout::OpenMap && f.default != D::Required))
    }

    /// The bytes an absent field is written as, when the field is held as
    /// an `Option` in every release (`nil`, or the default for a wrapped
    /// field); `None` for a field that is always set or per-release.
    fn none_bytes(&self, f: &UField) -> Option<Vec<u8>> {
        if self.partial(f) || is_rid_union(f) {
            None
        } else if is_optional(f.ty) {
            Some(vec![0xc0])
        } else if self.wrapped(f) {
            Some(default_bytes(&f.default))
        } else {
            None
        }
    }

    fn field_ty(&self, f: &UField) -> String {
        if is_rid_union(f) {
            return "Option<Rid>".into();
        }
        if f.retyped() {
            return if is_optional(f.ty) { "Option<TokenIds>".into() } else { "TokenIds".into() };
        }
        if self.wrapped(f) {
            format!("Option<{}>", rust_ty(f.ty))
        } else {
            rust_ty(f.ty)
        }
    }

    /// 1 for a tagged struct (its tag is wire element 0), else 0.
    fn tag_len(&self) -> usize {
        usize::from(self.tag.is_some())
    }

    fn is_map(&self) -> bool {
        matches!(self.layout, Layout::SparseMap | Layout::FullMap | Layout::OpenMap)
    }

    fn has_unknown(&self) -> bool {
        matches!(self.layout, Layout::Positional | Layout::SparseMap | Layout::FullMap | Layout::OpenMap)
    }
}

fn ident(name: &str) -> String {
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

fn zero(ty: &Ty) -> String {
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

fn default_expr(u: &UStruct, f: &UField) -> String {
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

fn default_lit(d: &D) -> String {
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
fn default_bytes(d: &D) -> Vec<u8> {
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

fn bytes_lit(b: &[u8]) -> String {
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

fn key_lit(name: &str) -> String {
    let mut out = Vec::new();
    write::str(&mut out, name);
    bytes_lit(&out)
}

fn counts_lit(u: &UStruct) -> String {
    format!("&{:?}", u.counts)
}

/// The Rust expression of a retyped field's type (leaf types, lists and
/// options: what token ids are typed as).
fn ty_code(ty: &Ty) -> String {
    match ty {
        Ty::Int => "Ty::Int".into(),
        Ty::Optional(t) => format!("Ty::Optional(&{})", ty_code(t)),
        Ty::List(t) => format!("Ty::List(&{})", ty_code(t)),
        Ty::Tensor(engine_protocol::schema::TensorKind::Numpy) => "Ty::Tensor(TensorKind::Numpy)".into(),
        other => panic!("no code for the retyped type {}", python_type(other)),
    }
}

/// The static holding a retyped field's type per release.
fn tys_static(u: &UStruct, f: &UField) -> String {
    let mut o = String::new();
    for (i, c) in u.rust.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            o.push('_');
        }
        o.push(c.to_ascii_uppercase());
    }
    format!("{o}_{}_TYS", f.name.trim_start_matches('_').to_uppercase())
}

fn doc_type(u: &UStruct, f: &UField) -> String {
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

fn layout_doc(l: Layout) -> &'static str {
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

pub fn generate() -> String {
    let structs = collect(VLLM_RELEASES);
    let mut o = String::new();
    o.push_str(
        "// @generated by protocol/tests/typed_generated.rs from the schema tables\n\
         // (src/schema/vllm.rs); do not edit. Regenerate with\n\
         // ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test typed_generated\n\
         //! Typed wire structs, one per struct of the schema tables, with the\n\
         //! union of their fields over the releases ",
    );
    o.push_str(&versions(VLLM_RELEASES, all_mask(VLLM_RELEASES)));
    o.push_str(
        ".\n\
         //!\n\
         //! Each converts from a decoded [`Value`], to a [`Value`] of a chosen\n\
         //! release, and encodes straight to MessagePack bytes (docs/wire-protocol.md §5).\n\
         \n\
         #![allow(clippy::all)]\n\
         \n\
         use super::wire::*;\n\
         use super::*;\n\
         use crate::error::Error;\n\
         use crate::msgpack::write;\n\
         use crate::schema::{Default as D, TensorKind, Ty};\n\
         use crate::value::{StructValue, Tensor, Value};\n\
         use bytes::Bytes;\n",
    );
    gen_structs(&mut o, &structs);
    o
}

/// `src/typed/tokenspeed_generated.rs`: the TokenSpeed structs, from
/// `src/schema/tokenspeed.rs`, over TokenSpeed's releases.
pub fn generate_tokenspeed() -> String {
    let structs = collect(TOKENSPEED_RELEASES);
    let mut o = String::new();
    o.push_str(
        "// @generated by protocol/tests/typed_generated.rs from the schema tables\n\
         // (src/schema/tokenspeed.rs); do not edit. Regenerate with\n\
         // ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test typed_generated\n\
         //! Typed TokenSpeed wire structs, one per struct of the TokenSpeed\n\
         //! tables, with the union of their fields over the releases ",
    );
    o.push_str(&versions(TOKENSPEED_RELEASES, all_mask(TOKENSPEED_RELEASES)));
    o.push_str(
        ".\n\
         //!\n\
         //! Each converts from a decoded [`Value`], to a [`Value`], and encodes\n\
         //! straight to MessagePack bytes (docs/tokenspeed-wire.md §3, §8): a\n\
         //! tagged struct writes its tag (the class name) as element 0.\n\
         \n\
         #![allow(clippy::all, unused_imports)]\n\
         \n\
         use super::*;\n\
         use crate::error::Error;\n\
         use crate::msgpack::write;\n\
         use crate::schema::{Default as D, Ty};\n\
         use crate::typed::wire::*;\n\
         use crate::typed::{IntList, StopStrings};\n\
         use crate::value::{StructValue, Tensor, Value};\n",
    );
    gen_structs(&mut o, &structs);
    o
}

/// Table structs whose typed form is written by hand, against the same
/// tables (by field name), because the engine decodes fewer shapes than
/// the table allows: `StructuredOutputsParams` holds exactly one
/// constraint (`src/typed/structured.rs`).
const HAND_WRITTEN: &[&str] = &["StructuredOutputsParams"];

fn gen_structs(o: &mut String, structs: &[UStruct]) {
    let mut seen = BTreeSet::new();
    for u in structs {
        assert!(seen.insert(u.name), "two structs named {}", u.name);
        if HAND_WRITTEN.contains(&u.name) {
            continue;
        }
        let mut idents = BTreeSet::new();
        for f in &u.fields {
            assert!(idents.insert(ident(f.name)), "{}: two fields map to {}", u.name, ident(f.name));
        }
        gen_struct(o, u);
    }
}

fn gen_struct(o: &mut String, u: &UStruct) {
    let n = u.rust.as_str();
    let _ = writeln!(o, "\n/// `{}`: {}.", u.name, layout_doc(u.layout));
    if let Some(tag) = u.tag {
        let _ = writeln!(o, "///\n/// Tagged: element 0 of the array is the tag `{tag:?}`, the fields follow.");
    }
    if u.mask != all_mask(u.rels) {
        let _ = writeln!(o, "///\n/// Releases: {}.", versions(u.rels, u.mask));
    }
    let _ = writeln!(o, "#[derive(Debug, Clone, PartialEq)]\npub struct {n} {{");
    for f in &u.fields {
        let _ = writeln!(o, "    /// {}", doc_type(u, f));
        let _ = writeln!(o, "    pub {}: {},", ident(f.name), u.field_ty(f));
    }
    if u.has_unknown() {
        if u.is_map() {
            let _ = writeln!(
                o,
                "    /// Keys this crate's tables do not know (a newer release's fields),\n    \
                 /// in wire order; written back after the known ones."
            );
            let _ = writeln!(o, "    pub unknown: Vec<(String, Value)>,");
        } else {
            let _ = writeln!(
                o,
                "    /// Trailing elements this crate's tables do not know (a newer\n    \
                 /// release's fields); written back after the known ones."
            );
            let _ = writeln!(o, "    pub unknown: Vec<Value>,");
        }
    }
    o.push_str("}\n");

    // Default
    let _ = writeln!(o, "\nimpl Default for {n} {{\n    fn default() -> Self {{\n        {n} {{");
    for f in &u.fields {
        let _ = writeln!(o, "            {}: {},", ident(f.name), default_expr(u, f));
    }
    if u.has_unknown() {
        o.push_str("            unknown: Vec::new(),\n");
    }
    o.push_str("        }\n    }\n}\n");

    for f in u.fields.iter().filter(|f| f.retyped()) {
        let tys: Vec<String> =
            f.tys.iter().map(|t| t.map_or("&Ty::Any".to_string(), |t| format!("&{}", ty_code(t)))).collect();
        let _ = writeln!(
            o,
            "\n/// `{}.{}`'s type in each release, for `encode_as`.\nstatic {}: [&Ty; {}] = [{}];",
            u.name,
            f.name,
            tys_static(u, f),
            tys.len(),
            tys.join(", ")
        );
    }
    let _ = writeln!(o, "\nimpl WireType for {n} {{");
    if u.layout == Layout::OpenMap {
        gen_open_map(o, u);
    } else {
        gen_from_value(o, u);
        gen_to_value(o, u);
        gen_encode(o, u);
    }
    o.push_str("}\n");
}

fn gen_from_value(o: &mut String, u: &UStruct) {
    let n = u.name;
    let _ = writeln!(o, "    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {{");
    let _ = writeln!(o, "        let sv = struct_value(v, {n:?})?;");
    let _ = writeln!(o, "        if sv.schema.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(sv.schema, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut it = sv.schema.fields.iter().zip(sv.fields());\n");
    let _ = writeln!(o, "        Ok({} {{", u.rust);
    for (i, f) in u.fields.iter().enumerate() {
        let raw = if u.is_map() {
            format!("raw_key(raw, {:?})", f.name)
        } else {
            format!("raw_at(raw, {})", i + u.tag_len())
        };
        let mut get = format!(
            "WireType::from_value(next_field(&mut it, {:?})?, {raw}, rel).at({:?})?",
            f.name,
            format!(".{}", f.name)
        );
        if u.wrapped(f) {
            get = format!("Some({get})");
        }
        if u.partial(f) {
            let _ = writeln!(o, "            {}: if rel.is({:#b}) {{ {get} }} else {{ None }},", ident(f.name), f.mask);
        } else {
            let _ = writeln!(o, "            {}: {get},", ident(f.name));
        }
    }
    if u.has_unknown() {
        if u.is_map() {
            o.push_str("            unknown: raw_extra_keys(raw, sv.schema),\n");
        } else {
            if u.tag.is_some() {
                o.push_str("            unknown: raw_extra_elements(raw, sv.schema.fields.len() + 1),\n");
            } else {
                o.push_str("            unknown: raw_extra_elements(raw, sv.schema.fields.len()),\n");
            }
        }
    }
    o.push_str("        })\n    }\n");
}

fn set_check(u: &UStruct, f: &UField) -> String {
    let id = ident(f.name);
    if u.wrapped(f) {
        format!("matches!(&self.{id}, Some(x) if !x.is_default(&{}))", default_lit(&f.default))
    } else {
        format!("!self.{id}.is_default(&{})", default_lit(&f.default))
    }
}

fn gen_to_value(o: &mut String, u: &UStruct) {
    let n = u.name;
    let _ = writeln!(o, "    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {{");
    let _ = writeln!(o, "        let s = struct_schema(ty, {n:?})?;");
    let _ = writeln!(o, "        if s.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(s, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut f: Vec<Value> = Vec::with_capacity(s.fields.len());\n");
    for (i, f) in u.fields.iter().enumerate() {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        let i = table_index(u, f, i);
        let conv = if u.wrapped(f) {
            format!(
                "match &self.{id} {{ Some(x) => WireType::to_value(x, s.fields[{i}].ty, rel).at({seg:?})?, None => crate::value::default_for(&s.fields[{i}]) }}"
            )
        } else {
            format!("WireType::to_value(&self.{id}, s.fields[{i}].ty, rel).at({seg:?})?")
        };
        per_release(o, u, f, &format!("f.push({conv});"));
    }
    o.push_str("        Ok(Value::Struct(StructValue::new(s, f)))\n    }\n");
}

/// The field's index in the release's table: `i` (its place in the union)
/// where every release that has it agrees, else picked per release.
fn table_index(u: &UStruct, f: &UField, i: usize) -> String {
    let mine = |ri: usize| f.mask & (1 << ri) != 0;
    if (0..u.rels.len()).all(|ri| !mine(ri) || f.pos[ri] == i) {
        i.to_string()
    } else {
        format!("rel.pick(&{:?})", f.pos)
    }
}

fn literal_check(u: &UStruct, f: &UField) -> Option<String> {
    let Ty::StrLiteral(xs) = strip(f.ty) else { return None };
    let id = ident(f.name);
    let arg =
        if is_optional(f.ty) || u.wrapped(f) { format!("self.{id}.as_deref()") } else { format!("Some(&self.{id})") };
    Some(format!("check_literal({arg}, &{xs:?}).at({:?})?;", format!(".{}", f.name)))
}

fn gen_encode(o: &mut String, u: &UStruct) {
    let _ = writeln!(o, "    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {{");
    let _ = writeln!(o, "        let n = rel.pick({});", counts_lit(u));
    for f in &u.fields {
        if let Some(c) = literal_check(u, f) {
            let _ = writeln!(o, "        {c}");
        }
    }
    match u.layout {
        Layout::Positional if u.tag.is_some() => {
            o.push_str("        write::array_len(&mut e.out, (1 + n + self.unknown.len()) as u32);\n");
            let mut tag = Vec::new();
            write::str(&mut tag, u.tag.unwrap_or_default());
            let _ = writeln!(o, "        e.raw({});", bytes_lit(&tag));
        }
        Layout::Positional => o.push_str("        write::array_len(&mut e.out, (n + self.unknown.len()) as u32);\n"),
        Layout::NamedTuple | Layout::Tuple => o.push_str("        write::array_len(&mut e.out, n as u32);\n"),
        Layout::FullMap => o.push_str("        e.struct_map(n, n + self.unknown.len());\n"),
        // One pass: the header's size depends on the field count only
        // (`Enc::struct_map`), so it is written with a count of 0 and
        // patched once the set fields are written.
        Layout::SparseMap => {
            o.push_str(
                "        let header = e.struct_map_placeholder(n);\n        let mut count = self.unknown.len();\n",
            );
        }
        Layout::OpenMap => unreachable!(),
    }
    // Positional structs: a run of two or more absent-able fields (held as
    // `Option`, in every release) is written in one go when all are absent
    // (the common case: an output's optional fields are mostly unset),
    // instead of one test and one byte push per field.
    let mut i = 0;
    while i < u.fields.len() {
        let run = if u.is_map() { 0 } else { u.fields[i..].iter().take_while(|f| u.none_bytes(f).is_some()).count() };
        // The optional fields releases appended at the end (each release
        // has a prefix of them): when all are absent, the release's count
        // of nils in one go.
        let tail = &u.fields[i..];
        let appended_tail = !u.is_map()
            && tail.len() >= 2
            && tail.iter().any(|f| u.partial(f))
            && tail.iter().all(|f| is_optional(f.ty) && f.default == D::Nil && !f.retyped())
            && (0..u.rels.len()).all(|ri| {
                let has: Vec<bool> = tail.iter().map(|f| f.mask & (1 << ri) != 0).collect();
                has.windows(2).all(|w| w[0] || !w[1])
            });
        if appended_tail {
            let counts: Vec<usize> =
                (0..u.rels.len()).map(|ri| tail.iter().filter(|f| f.mask & (1 << ri) != 0).count()).collect();
            let test: Vec<String> = tail.iter().map(|f| format!("self.{}.is_none()", ident(f.name))).collect();
            let _ = writeln!(o, "        if {} {{", test.join("\n            && "));
            // Every release's nils written, the ones past this release's
            // count dropped: two stores, no length-dependent copy.
            let _ = writeln!(o, "            e.raw({});", bytes_lit(&vec![0xc0; tail.len()]));
            let drop: Vec<usize> = counts.iter().map(|c| tail.len() - c).collect();
            if drop.iter().any(|&d| d > 0) {
                let _ = writeln!(o, "            e.out.truncate(e.out.len() - rel.pick(&{drop:?}));");
            }
            gen_encode_fields_otherwise(o, u, tail);
            break;
        }
        if run >= 2 {
            let fields = &u.fields[i..i + run];
            let none: Vec<u8> = fields.iter().flat_map(|f| u.none_bytes(f).unwrap_or_default()).collect();
            let test: Vec<String> = fields.iter().map(|f| format!("self.{}.is_none()", ident(f.name))).collect();
            let _ = writeln!(o, "        if {} {{", test.join("\n            && "));
            let _ = writeln!(o, "            e.raw({});", bytes_lit(&none));
            gen_encode_fields_otherwise(o, u, fields);
            i += run;
        } else {
            gen_encode_field(o, u, &u.fields[i]);
            i += 1;
        }
    }
    match u.layout {
        Layout::Positional => o.push_str("        for x in &self.unknown {\n            e.any(x)?;\n        }\n"),
        Layout::FullMap => o.push_str("        encode_extra_keys(&self.unknown, e)?;\n"),
        Layout::SparseMap => {
            o.push_str("        encode_extra_keys(&self.unknown, e)?;\n        e.patch_struct_map(header, n, count);\n")
        }
        _ => {}
    }
    o.push_str("        Ok(())\n    }\n");
}

/// The `else` branch of a run written in one go when all its fields are
/// absent: each field's own encoder, one level deeper.
fn gen_encode_fields_otherwise(o: &mut String, u: &UStruct, fields: &[UField]) {
    o.push_str("        } else {\n");
    for f in fields {
        let mut one = String::new();
        gen_encode_field(&mut one, u, f);
        o.push_str(&one.replace("\n        ", "\n            ").replacen("        ", "            ", 1));
    }
    o.push_str("        }\n");
}

/// One field of a direct encoder.
fn gen_encode_field(o: &mut String, u: &UStruct, f: &UField) {
    let id = ident(f.name);
    let seg = format!(".{}", f.name);
    let key = if u.is_map() { format!("e.raw({}); ", key_lit(f.name)) } else { String::new() };
    let write_value = if f.retyped() {
        assert!(!u.wrapped(f), "{}.{}: a retyped field held as a default-able Option", u.name, f.name);
        format!("WireType::encode_as(&self.{id}, {}[rel.index()], rel, e).at({seg:?})?", tys_static(u, f))
    } else if u.wrapped(f) {
        format!(
            "match &self.{id} {{ Some(x) => WireType::encode(x, rel, e).at({seg:?})?, None => e.raw({}) }}",
            bytes_lit(&default_bytes(&f.default))
        )
    } else {
        format!("WireType::encode(&self.{id}, rel, e).at({seg:?})?")
    };
    let body = if u.layout == Layout::SparseMap {
        format!("if {} {{ {key}{write_value}; count += 1; }}", set_check(u, f))
    } else {
        format!("{key}{write_value};")
    };
    per_release(o, u, f, &body);
}

/// Writes `body` (one statement on field `f`), only for the releases that
/// have the field when some lack it: for the others a set field is an
/// error.
fn per_release(o: &mut String, u: &UStruct, f: &UField, body: &str) {
    if u.partial(f) {
        let _ = writeln!(
            o,
            "        if rel.is({:#b}) {{\n            {body}\n        }} else if {} {{\n            return Err(not_in_release(rel, {:?}).into());\n        }}",
            f.mask,
            set_check(u, f),
            f.name
        );
    } else {
        let _ = writeln!(o, "        {body}");
    }
}

fn gen_open_map(o: &mut String, u: &UStruct) {
    let n = u.name;
    for f in &u.fields {
        assert!(!u.partial(f), "{n}.{}: open maps with per-release fields are not generated yet", f.name);
    }
    // from_value
    let _ = writeln!(o, "    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {{");
    let _ = writeln!(o, "        let sv = struct_value(v, {n:?})?;");
    for f in &u.fields {
        let _ = writeln!(
            o,
            "        let mut {}: Option<{}> = None;",
            ident(f.name).trim_start_matches("r#"),
            u.field_ty(f)
        );
    }
    o.push_str("        let mut unknown = Vec::new();\n");
    o.push_str("        for (k, x) in sv.open_entries() {\n");
    o.push_str("            let Value::Str(k) = k else { return Err(type_error(\"a str key\", k)) };\n");
    o.push_str("            match k.as_str() {\n");
    for f in &u.fields {
        let var = ident(f.name).trim_start_matches("r#").to_string();
        let mut get =
            format!("WireType::from_value(x, raw_key(raw, {:?}), rel).at({:?})?", f.name, format!(".{}", f.name));
        if u.wrapped(f) {
            get = format!("Some({get})");
        }
        let _ = writeln!(o, "                {:?} => {var} = Some({get}),", f.name);
    }
    o.push_str("                _ => unknown.push((k.clone(), x.clone())),\n            }\n        }\n");
    let _ = writeln!(o, "        Ok({} {{", u.rust);
    for f in &u.fields {
        let var = ident(f.name).trim_start_matches("r#").to_string();
        if f.default == D::Required {
            let _ = writeln!(o, "            {}: {var}.ok_or_else(|| missing({:?}))?,", ident(f.name), f.name);
        } else {
            let _ = writeln!(o, "            {}: {var}.unwrap_or_default(),", ident(f.name));
        }
    }
    o.push_str("            unknown,\n        })\n    }\n");
    // to_value
    let _ = writeln!(o, "    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {{");
    let _ = writeln!(o, "        let s = struct_schema(ty, {n:?})?;");
    let _ = writeln!(o, "        if s.fields.len() != rel.pick({}) {{", counts_lit(u));
    let _ = writeln!(o, "            return Err(count_mismatch(s, rel.pick({})));\n        }}", counts_lit(u));
    o.push_str("        let mut sv = StructValue::with_defaults(s);\n        let m = sv.open_entries_mut();\n");
    for (i, f) in u.fields.iter().enumerate() {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        if u.wrapped(f) {
            let _ = writeln!(
                o,
                "        if let Some(x) = &self.{id} {{\n            m.push((Value::Str({:?}.into()), WireType::to_value(x, unwrap_optional(s.fields[{i}].ty), rel).at({seg:?})?));\n        }}",
                f.name
            );
        } else {
            let _ = writeln!(
                o,
                "        m.push((Value::Str({:?}.into()), WireType::to_value(&self.{id}, s.fields[{i}].ty, rel).at({seg:?})?));",
                f.name
            );
        }
    }
    o.push_str(
        "        for (k, x) in &self.unknown {\n            m.push((Value::Str(k.clone()), x.clone()));\n        }\n",
    );
    o.push_str("        Ok(Value::Struct(sv))\n    }\n");
    // encode
    o.push_str("    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {\n");
    o.push_str("        let mut count = self.unknown.len();\n");
    for f in &u.fields {
        if u.wrapped(f) {
            let _ = writeln!(o, "        count += self.{}.is_some() as usize;", ident(f.name));
        } else {
            o.push_str("        count += 1;\n");
        }
    }
    o.push_str("        write::map_len(&mut e.out, count as u32);\n");
    for f in &u.fields {
        let id = ident(f.name);
        let seg = format!(".{}", f.name);
        if u.wrapped(f) {
            let _ = writeln!(
                o,
                "        if let Some(x) = &self.{id} {{\n            e.raw({});\n            WireType::encode(x, rel, e).at({seg:?})?;\n        }}",
                key_lit(f.name)
            );
        } else {
            let _ = writeln!(
                o,
                "        e.raw({});\n        WireType::encode(&self.{id}, rel, e).at({seg:?})?;",
                key_lit(f.name)
            );
        }
    }
    o.push_str("        encode_extra_keys(&self.unknown, e)?;\n        Ok(())\n    }\n");
}
