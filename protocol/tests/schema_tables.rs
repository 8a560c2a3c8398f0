//! The schema tables agree with vLLM's own classes: field names, order,
//! defaults and wire encodings of every struct, compared with the dumps that
//! `golden/generate/generate.py --schema-dump` took from the installed vLLM
//! packages (`golden/generate/schema/vllm-<version>.json`).

use engine_protocol::schema::{python_type, release, vllm, Default, EnumSchema, Layout, StructSchema, TensorKind, Ty};
use engine_protocol::Dialect;
use serde_json::Value as Json;
use std::collections::HashMap;

/// Types whose Python annotation names a custom-encoded class that the
/// tables model by its wire shape instead, and the shape they use.
const WIRE_SHAPE_STAND_INS: &[(&str, &str, &str)] = &[
    // vLLM's encoder hook writes MultiModalKwargsItem as a free-form map.
    ("MultiModalFeatureSpec", "MultiModalKwargsItem | None", "dict[str, MultiModalFieldElem] | None"),
    // A tuple of floats is an array on the wire.
    ("KVCacheEvictionEvent", "tuple[float, ...]", "list[float]"),
    // A string-valued Enum is decoded by value.
    (
        "PrefixCacheStats",
        "dict[enum CacheHitSource, int]",
        "dict[Literal['device', 'host', 'p2p', 'disk', 'external_unspecified'], int]",
    ),
    // Literal without None, defaulting to None in vLLM.
    ("KVEventsConfig", "Literal['null', 'zmq']", "Literal['null', 'zmq'] | None"),
    // `dict[any, any]` for a JSON schema object: string keys on the wire.
    ("StructuredOutputsParams", "str | dict[any, any] | None", "str | dict[str, any] | None"),
];

fn dump(version: &str) -> Json {
    let path = format!("{}/../golden/generate/schema/vllm-{version}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).expect("schema dump is JSON")
}

fn default_matches(ours: &Default, theirs: &Json) -> bool {
    match (ours, theirs) {
        (Default::Required, Json::String(s)) => s == "required",
        (Default::Nil, Json::Null) => true,
        (Default::Bool(a), Json::Bool(b)) => a == b,
        (Default::Int(a), Json::Number(n)) => n.as_i64() == Some(*a),
        (Default::Float(a), Json::Number(n)) => n.as_f64() == Some(*a),
        (Default::Str(a), Json::String(b)) => a == b,
        (Default::EmptyList, Json::String(s)) => s == "factory:list",
        (Default::EmptySet, Json::String(s)) => s == "factory:set",
        (Default::EmptyDict, Json::String(s)) => s == "factory:dict",
        (Default::NewStruct, Json::String(s)) => {
            s.starts_with("factory:") && !s.ends_with(":list") && !s.ends_with(":dict")
        }
        _ => false,
    }
}

fn layout_matches(layout: Layout, t: &Json) -> bool {
    let enc = t["encoding"].as_str().unwrap_or("");
    let omit = t["omit_defaults"].as_bool().unwrap_or(false);
    match layout {
        Layout::Positional => enc == "array_like struct",
        Layout::NamedTuple => enc == "namedtuple",
        Layout::SparseMap => enc == "map struct" && omit,
        Layout::FullMap => enc == "dataclass" || (enc == "map struct" && !omit),
        Layout::OpenMap | Layout::Tuple => false,
    }
}

fn check_release(version: &str) {
    let rel = release(Dialect::Vllm, version).expect("table exists");
    let dump = dump(version);
    assert_eq!(dump["vllm"].as_str(), Some(version), "dump is of vLLM {version}");
    let types = dump["types"].as_array().expect("types");
    let mut problems = Vec::new();
    let mut compared = 0;
    for s in rel.structs() {
        if matches!(s.name, "UtilityRequest" | "StartDpWave" | "HandshakeStatus" | "MultiModalFieldElem") {
            // Plain lists and dicts in vLLM (the last one written by vLLM's
            // encoder hook): no class to compare with.
            continue;
        }
        let Some(t) = types.iter().find(|t| t["name"] == s.name) else {
            problems.push(format!("{}: no such class in the vLLM {version} dump", s.name));
            continue;
        };
        compared += 1;
        assert!(s.fields.len() <= 64, "{}: the decoder tracks presence of at most 64 fields", s.name);
        if !layout_matches(s.layout, t) {
            problems.push(format!("{}: layout {:?} but vLLM encodes it as {}", s.name, s.layout, t["encoding"]));
        }
        let fields = t["fields"].as_array().expect("fields");
        let ours: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
        let theirs: Vec<&str> = fields.iter().map(|f| f["name"].as_str().unwrap_or("?")).collect();
        if ours != theirs {
            problems.push(format!("{}: fields {ours:?}, vLLM has {theirs:?}", s.name));
            continue;
        }
        for (f, tf) in s.fields.iter().zip(fields) {
            if !default_matches(&f.default, &tf["default"]) {
                problems.push(format!("{}.{}: default {:?}, vLLM has {}", s.name, f.name, f.default, tf["default"]));
            }
            let ours = python_type(f.ty);
            let theirs = tf["type"].as_str().unwrap_or("?");
            let stand_in =
                WIRE_SHAPE_STAND_INS.iter().any(|(n, py, wire)| *n == s.name && *py == theirs && *wire == ours);
            if ours != theirs && !stand_in {
                problems.push(format!("{}.{}: type {ours}, vLLM has {theirs}", s.name, f.name));
            }
        }
    }
    assert!(compared >= 25, "only {compared} structs compared");
    assert!(problems.is_empty(), "schema table for vLLM {version} disagrees with vLLM:\n{}", problems.join("\n"));
}

#[test]
fn schema_table_0_32_matches_vllm_classes() {
    check_release("0.32.0");
}

#[test]
fn schema_table_0_33_matches_vllm_classes() {
    check_release("0.33.0");
}

/// Every field a rule table names (and every field a relation reads) is a
/// field of each struct the tables tag with those rules, in every release.
#[test]
fn every_rule_names_fields_of_the_structs_it_is_tagged_on() {
    use engine_protocol::validate::{rules_for, Check};
    let mut tagged = 0;
    let mut absent = Vec::new();
    for rel in engine_protocol::schema::VLLM_TABLES {
        for s in rel.structs() {
            let Some(rules) = s.validate.and_then(rules_for) else { continue };
            tagged += 1;
            for r in rules {
                let other = match r.check {
                    Check::NotAbove(o) | Check::NeedsTrue(o) | Check::OneWhenBelow { other: o, .. } => Some(o),
                    _ => None,
                };
                for name in std::iter::once(r.field).chain(other) {
                    if s.index_of(name).is_none() {
                        absent.push(format!("{} {}.{name}", rel.version, s.name));
                    }
                }
            }
        }
    }
    // SamplingParams and LoRARequest in each vLLM release.
    assert_eq!(tagged, 2 * engine_protocol::schema::VLLM_TABLES.len());
    // A rule on a field a release does not have yet does not apply to it:
    // only `stream_interval` (0.27 on) is such a field.
    let want: Vec<String> = ["0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.1", "0.26.0"]
        .iter()
        .map(|v| format!("{v} SamplingParams.stream_interval"))
        .collect();
    assert_eq!(absent, want);
}

/// A table entry is data only (the codec's caches live outside the
/// tables), so its `Debug` text is the same before and after a decode.
#[test]
fn regression_debug_text_of_a_table_does_not_depend_on_the_defaults_cache() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let before = format!("{:?}", rel.sampling_params);
    let _ = rel.sampling_params.default_values();
    assert_eq!(format!("{:?}", rel.sampling_params), before);
    assert!(!before.contains("OnceLock"), "{before}");
}

// ===== the tables generated from their dumps =====
//
// The releases 0.32.0 and 0.33.0 are written by hand; every other vLLM
// schema dump (the older releases, and 0.34.0 on) becomes a table in
// `src/schema/vllm/from_dumps.rs`, written by `generated_from_dumps()` below: each
// struct of a dump that equals a table struct already written (by hand or
// for an older release) is that struct, every other is a new static named
// by the first release that has it. A new release is a new dump and
// `ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test schema_tables`.

const FROM_DUMPS_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/schema/vllm/from_dumps.rs");

/// The releases whose tables are written by hand, and their statics.
const HAND_WRITTEN_RELEASES: &[(&str, &str)] = &[("0.32.0", "V0_32_0"), ("0.33.0", "V0_33_0")];

macro_rules! named {
    ($($n:ident),* $(,)?) => { &[$((stringify!($n), &vllm::$n)),*] };
}

/// Every struct static of the hand-written tables, by name.
static HAND_WRITTEN_STRUCTS: &[(&str, &StructSchema)] = named!(
    PLACEHOLDER_RANGE,
    MULTI_MODAL_FIELD_ELEM,
    MULTI_MODAL_FEATURE_SPEC,
    LATE_INTERACTION_PARAMS,
    LATE_CHUNKING_PARAMS,
    POOLING_PARAMS_0_32,
    POOLING_PARAMS_0_33,
    KV_HINT_ACTION,
    KV_HINTS_ENVELOPE,
    STRUCTURED_OUTPUTS_PARAMS,
    REPETITION_DETECTION_PARAMS,
    SAMPLING_PARAMS,
    LORA_REQUEST,
    ENGINE_CORE_REQUEST_0_32,
    ENGINE_CORE_REQUEST_0_33,
    UTILITY_REQUEST,
    START_DP_WAVE,
    LOGPROBS_LISTS,
    LOGPROBS_TENSORS,
    ENGINE_CORE_EVENT,
    PREFILL_STATS,
    REQUEST_ERROR,
    SAMPLING_MASK_LISTS,
    REQUEST_SPEC_DECODE_METRICS,
    SCHEDULER_ITERATION_DETAILS,
    PREFIX_CACHE_STATS,
    KV_CACHE_EVICTION_EVENT,
    SPEC_DECODING_STATS,
    CUDA_GRAPH_STAT,
    DEBUG_PERF_STATS,
    PERF_STATS,
    SCHEDULER_STATS,
    KV_EVENTS_CONFIG,
    ENGINE_CORE_OUTPUT_0_32,
    ENGINE_CORE_OUTPUT_0_33,
    UTILITY_OUTPUT,
    ENGINE_CORE_OUTPUTS_0_32,
    ENGINE_CORE_OUTPUTS_0_33,
    HANDSHAKE_STATUS,
    ENGINE_ZMQ_ADDRESSES,
    HANDSHAKE_INIT,
    READY_RESPONSE_0_32,
    READY_RESPONSE_0_33,
);

/// Every enum of the hand-written tables, by name.
static HAND_WRITTEN_ENUMS: &[(&str, &EnumSchema)] = named!(FINISH_REASON, REQUEST_OUTPUT_KIND, ENGINE_CORE_EVENT_TYPE);

/// The first release of each `SamplingParams` rule set: what its own
/// decoder refuses, as its mutant and intrange goldens show (the tables tag
/// each release's struct with the set in force).
const SAMPLING_PARAMS_RULES_FROM: &[(&str, &str)] = &[
    ("0.22.0", "Some(Rules::SamplingParams0_22)"),
    ("0.23.0", "Some(Rules::SamplingParams0_23)"),
    ("0.24.0", "Some(Rules::SamplingParams)"),
];

fn version_key(v: &str) -> Vec<u32> {
    v.split('.').map(|p| p.parse::<u32>().unwrap_or(0)).collect()
}

/// The decoder rules a struct carries in a release, by class name (as the
/// hand-written tables tag them).
fn rules_in(class: &str, version: &str) -> &'static str {
    if class == "SamplingParams" {
        let from = SAMPLING_PARAMS_RULES_FROM.iter().rev().find(|(v, _)| version_key(v) <= version_key(version));
        return from.map_or("Some(Rules::SamplingParams)", |(_, r)| r);
    }
    rules_of(class)
}

/// The decoder rules a struct carries, by class name, in the hand-written
/// tables (0.32.0, 0.33.0).
fn rules_of(class: &str) -> &'static str {
    match class {
        "SamplingParams" => "Some(Rules::SamplingParams)",
        "StructuredOutputsParams" => "Some(Rules::StructuredOutputsParams)",
        "LoRARequest" => "Some(Rules::LoraRequest)",
        "RepetitionDetectionParams" => "Some(Rules::RepetitionDetectionParams)",
        _ => "None",
    }
}

/// Every vLLM release with a schema dump, oldest first.
fn dumped_versions() -> Vec<String> {
    let dir = format!("{}/../golden/generate/schema", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| Some(n.strip_prefix("vllm-")?.strip_suffix(".json")?.to_string()))
        .collect();
    out.sort_by_key(|v| version_key(v));
    out
}

/// A field type, parsed from a dump's rendering or converted from a table.
#[derive(Debug)]
enum T {
    /// A leaf whose Rust expression is fixed (`Ty::Int`).
    Leaf(&'static str),
    Opt(Box<T>),
    Union(Vec<T>),
    List(Box<T>),
    Set(Box<T>),
    Dict(Box<T>, Box<T>),
    Lit(Vec<String>),
    /// An enum: its class (dump) or its static's path (table).
    Enum(String),
    /// A struct: its class (dump) or its static's path (table).
    Struct(String),
}

/// Splits `s` at top-level occurrences of `sep` (outside brackets and quotes).
fn split_top<'a>(s: &'a str, sep: &str) -> Vec<&'a str> {
    let (mut out, mut depth, mut quoted, mut start) = (Vec::new(), 0i32, false, 0);
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\'' => quoted = !quoted,
            b'[' if !quoted => depth += 1,
            b']' if !quoted => depth -= 1,
            _ if !quoted && depth == 0 && s[i..].starts_with(sep) => {
                out.push(&s[start..i]);
                i += sep.len();
                start = i;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&s[start..]);
    out
}

/// Parses a dump's type rendering (after the wire-shape stand-ins).
fn parse_type(s: &str) -> T {
    let parts = split_top(s, " | ");
    let rest: Vec<&str> = parts.iter().copied().filter(|p| *p != "None").collect();
    let inner = match rest.as_slice() {
        [one] => parse_atom(one),
        many => T::Union(many.iter().map(|p| parse_atom(p)).collect()),
    };
    if rest.len() < parts.len() {
        T::Opt(Box::new(inner))
    } else {
        inner
    }
}

fn parse_atom(s: &str) -> T {
    let inner = |prefix: &str| s.strip_prefix(prefix).and_then(|r| r.strip_suffix(']'));
    if let Some(x) = inner("list[") {
        return T::List(Box::new(parse_type(x)));
    }
    if let Some(x) = inner("set[") {
        return T::Set(Box::new(parse_type(x)));
    }
    if let Some(x) = inner("dict[") {
        let kv = split_top(x, ", ");
        assert_eq!(kv.len(), 2, "dict type {s}");
        return T::Dict(Box::new(parse_type(kv[0])), Box::new(parse_type(kv[1])));
    }
    if let Some(x) = inner("Literal[") {
        return T::Lit(split_top(x, ", ").iter().map(|m| m.trim_matches('\'').to_string()).collect());
    }
    if let Some(x) = s.strip_prefix("enum ") {
        return T::Enum(x.to_string());
    }
    T::Leaf(match s {
        "any" => "Ty::Any",
        "bool" => "Ty::Bool",
        "int" => "Ty::Int",
        "float" => "Ty::Float",
        "str" => "Ty::Str",
        "bytes" => "Ty::Bytes",
        "numpy.ndarray" => "Ty::Tensor(TensorKind::Numpy)",
        "torch.Tensor" => "Ty::Tensor(TensorKind::Torch)",
        "UtilityResult" => "Ty::UtilityResult",
        "NestedTensors" => "Ty::NestedTensors",
        class => {
            assert!(class.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "unparsed type `{class}`");
            return T::Struct(class.to_string());
        }
    })
}

fn hand_written_struct(s: &StructSchema) -> String {
    let (name, _) = HAND_WRITTEN_STRUCTS
        .iter()
        .find(|(_, x)| std::ptr::eq(*x, s))
        .unwrap_or_else(|| panic!("struct {} of a hand-written table is not in HAND_WRITTEN_STRUCTS", s.name));
    format!("super::{name}")
}

/// A table type as a [`T`] whose structs and enums are their statics' paths.
fn from_table(ty: &Ty) -> T {
    let b = |t: &Ty| Box::new(from_table(t));
    match ty {
        Ty::Any => T::Leaf("Ty::Any"),
        Ty::Bool => T::Leaf("Ty::Bool"),
        Ty::Int => T::Leaf("Ty::Int"),
        Ty::Float => T::Leaf("Ty::Float"),
        Ty::Str => T::Leaf("Ty::Str"),
        Ty::Bytes => T::Leaf("Ty::Bytes"),
        Ty::Tensor(TensorKind::Numpy) => T::Leaf("Ty::Tensor(TensorKind::Numpy)"),
        Ty::Tensor(TensorKind::Torch) => T::Leaf("Ty::Tensor(TensorKind::Torch)"),
        Ty::UtilityResult => T::Leaf("Ty::UtilityResult"),
        Ty::NestedTensors => T::Leaf("Ty::NestedTensors"),
        Ty::IntEnum(e) => {
            let (name, _) = HAND_WRITTEN_ENUMS.iter().find(|(_, x)| std::ptr::eq(*x, *e)).expect("a named enum");
            T::Enum(format!("super::{name}"))
        }
        Ty::StrLiteral(xs) => T::Lit(xs.iter().map(|x| x.to_string()).collect()),
        Ty::Optional(t) => T::Opt(b(t)),
        Ty::List(t) => T::List(b(t)),
        Ty::Set(t) => T::Set(b(t)),
        Ty::Dict(k, v) => T::Dict(b(k), b(v)),
        Ty::Union(ms) => T::Union(ms.iter().map(from_table).collect()),
        Ty::Struct(s) => T::Struct(hand_written_struct(s)),
    }
}

/// The Rust expression of a type; structs and enums through `resolve`.
fn render(t: &T, resolve: &mut dyn FnMut(&T) -> String) -> String {
    match t {
        T::Leaf(x) => x.to_string(),
        T::Opt(x) => format!("Ty::Optional(&{})", render(x, resolve)),
        T::Union(xs) => {
            format!("Ty::Union(&[{}])", xs.iter().map(|x| render(x, resolve)).collect::<Vec<_>>().join(", "))
        }
        T::List(x) => format!("Ty::List(&{})", render(x, resolve)),
        T::Set(x) => format!("Ty::Set(&{})", render(x, resolve)),
        T::Dict(k, v) => format!("Ty::Dict(&{}, &{})", render(k, resolve), render(v, resolve)),
        T::Lit(xs) => {
            format!("Ty::StrLiteral(&[{}])", xs.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(", "))
        }
        T::Enum(_) => format!("Ty::IntEnum(&{})", resolve(t)),
        T::Struct(_) => format!("Ty::Struct(&{})", resolve(t)),
    }
}

fn default_code(d: &Default) -> String {
    match d {
        Default::Required => "D::Required".into(),
        Default::Nil => "D::Nil".into(),
        Default::Bool(b) => format!("D::Bool({b})"),
        Default::Int(i) => format!("D::Int({i})"),
        Default::Float(x) => format!("D::Float({x:?})"),
        Default::Str(s) => format!("D::Str({s:?})"),
        Default::EmptyList => "D::EmptyList".into(),
        Default::EmptySet => "D::EmptySet".into(),
        Default::EmptyDict => "D::EmptyDict".into(),
        Default::NewStruct => "D::NewStruct".into(),
    }
}

/// A dump's default as the Rust expression of its [`Default`]; `float`
/// decides between an int and a float default.
fn dump_default_code(d: &Json, float: bool) -> String {
    match d {
        Json::String(s) if s == "required" => "D::Required".into(),
        Json::String(s) if s == "factory:list" => "D::EmptyList".into(),
        Json::String(s) if s == "factory:set" => "D::EmptySet".into(),
        Json::String(s) if s == "factory:dict" => "D::EmptyDict".into(),
        Json::String(s) if s.starts_with("factory:") => "D::NewStruct".into(),
        Json::String(s) => format!("D::Str({s:?})"),
        Json::Null => "D::Nil".into(),
        Json::Bool(b) => format!("D::Bool({b})"),
        Json::Number(n) if float => format!("D::Float({:?})", n.as_f64().expect("a number")),
        Json::Number(n) => format!("D::Int({})", n.as_i64().unwrap_or_else(|| panic!("int default {n}"))),
        other => panic!("default {other} has no table form"),
    }
}

fn layout_code(l: Layout) -> &'static str {
    match l {
        Layout::Positional => "Layout::Positional",
        Layout::NamedTuple => "Layout::NamedTuple",
        Layout::Tuple => "Layout::Tuple",
        Layout::SparseMap => "Layout::SparseMap",
        Layout::FullMap => "Layout::FullMap",
        Layout::OpenMap => "Layout::OpenMap",
    }
}

fn dump_layout_code(t: &Json) -> &'static str {
    match (t["encoding"].as_str(), t["omit_defaults"].as_bool().unwrap_or(false)) {
        (Some("array_like struct"), _) => "Layout::Positional",
        (Some("namedtuple"), _) => "Layout::NamedTuple",
        (Some("map struct"), true) => "Layout::SparseMap",
        (Some("map struct"), false) | (Some("dataclass"), _) => "Layout::FullMap",
        (other, _) => panic!("{}: encoding {other:?} has no layout", t["name"]),
    }
}

/// The Rust expression of a struct: the key two structs are equal by.
fn struct_code(name: &str, layout: &str, fields: &[(String, String, String)], rules: &str) -> String {
    let mut o = format!("StructSchema {{\n    name: {name:?},\n    layout: {layout},\n    fields: &[\n");
    for (n, ty, d) in fields {
        o.push_str(&format!("        f({n:?}, &{ty}, {d}),\n"));
    }
    o.push_str(&format!("    ],\n    validate: {rules},\n    tag: None,\n}}"));
    o
}

fn table_struct_code(s: &StructSchema) -> String {
    let fields: Vec<(String, String, String)> = s
        .fields
        .iter()
        .map(|f| (f.name.to_string(), render(&from_table(f.ty), &mut |t| leaf_path(t)), default_code(&f.default)))
        .collect();
    struct_code(s.name, layout_code(s.layout), &fields, rules_of_table(s))
}

fn leaf_path(t: &T) -> String {
    match t {
        T::Enum(p) | T::Struct(p) => p.clone(),
        _ => unreachable!(),
    }
}

fn rules_of_table(s: &StructSchema) -> &'static str {
    let r = rules_of(s.name);
    assert_eq!(r == "None", s.validate.is_none(), "{}: rules tagged by class name", s.name);
    r
}

fn screaming(class: &str) -> String {
    let mut o = String::new();
    let cs: Vec<char> = class.replace("LoRA", "Lora").chars().collect();
    for (i, c) in cs.iter().enumerate() {
        let boundary = i > 0
            && c.is_ascii_uppercase()
            && (cs[i - 1].is_ascii_lowercase() || cs.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
        if boundary {
            o.push('_');
        }
        o.push(c.to_ascii_uppercase());
    }
    o
}

fn version_ident(v: &str) -> String {
    if v.starts_with(|c: char| c.is_ascii_digit()) {
        format!("V{}", v.replace('.', "_"))
    } else {
        v.to_ascii_uppercase().replace(['-', '.'], "_")
    }
}

/// The generator's state over every dump.
struct FromDumps {
    /// A struct's code, to its static's path.
    known: HashMap<String, String>,
    /// Statics written for older releases: name, code, class, releases.
    emitted: Vec<(String, String, String, Vec<String>)>,
    /// Enum class and values, to its static's path.
    enums: HashMap<(String, Vec<i64>), String>,
}

/// One release being resolved: its dump's types by class, and the
/// statics resolved so far.
struct Rel<'a> {
    version: &'a str,
    types: HashMap<&'a str, &'a Json>,
    enums: HashMap<&'a str, Vec<i64>>,
    memo: HashMap<String, String>,
}

impl FromDumps {
    fn new() -> FromDumps {
        let mut known = HashMap::new();
        for (_, s) in HAND_WRITTEN_STRUCTS {
            known.insert(table_struct_code(s), hand_written_struct(s));
        }
        let enums = HAND_WRITTEN_ENUMS
            .iter()
            .map(|(n, e)| ((e.name.to_string(), e.values.iter().map(|(v, _)| *v).collect()), format!("super::{n}")))
            .collect();
        FromDumps { known, emitted: Vec::new(), enums }
    }

    fn resolve(&mut self, rel: &mut Rel, t: &T) -> String {
        match t {
            T::Enum(class) => {
                let values =
                    rel.enums.get(class.as_str()).unwrap_or_else(|| panic!("vLLM {}: no enum {class}", rel.version));
                self.enums.get(&(class.clone(), values.clone())).cloned().unwrap_or_else(|| {
                    panic!("vLLM {}: enum {class} = {values:?} is none of the tables' enums: add it", rel.version)
                })
            }
            T::Struct(class) if class == "MultiModalFieldElem" => "super::MULTI_MODAL_FIELD_ELEM".into(),
            T::Struct(class) => self.resolve_struct(rel, class),
            _ => unreachable!(),
        }
    }

    fn resolve_struct(&mut self, rel: &mut Rel, class: &str) -> String {
        if let Some(p) = rel.memo.get(class) {
            return p.clone();
        }
        let t = *rel.types.get(class).unwrap_or_else(|| panic!("vLLM {}: no class {class} in its dump", rel.version));
        let mut fields = Vec::new();
        for tf in t["fields"].as_array().expect("fields") {
            let name = tf["name"].as_str().expect("field name");
            let py = tf["type"].as_str().expect("field type");
            let py = WIRE_SHAPE_STAND_INS.iter().find(|(n, p, _)| *n == class && *p == py).map_or(py, |(_, _, w)| w);
            let parsed = parse_type(py);
            let float = matches!(&parsed, T::Leaf("Ty::Float"))
                || matches!(&parsed, T::Opt(x) if matches!(**x, T::Leaf("Ty::Float")));
            let ty = render(&parsed, &mut |leaf| self.resolve(rel, leaf));
            fields.push((name.to_string(), ty, dump_default_code(&tf["default"], float)));
        }
        let code = struct_code(class, dump_layout_code(t), &fields, rules_in(class, rel.version));
        let path = match self.known.get(&code) {
            Some(p) => p.clone(),
            None => {
                let name = format!("{}_{}", screaming(class), rel.version.replace('.', "_"));
                self.known.insert(code.clone(), name.clone());
                self.emitted.push((name.clone(), code, class.to_string(), Vec::new()));
                name
            }
        };
        if let Some(e) = self.emitted.iter_mut().find(|e| e.0 == path) {
            if !e.3.iter().any(|v| v == rel.version) {
                e.3.push(rel.version.to_string());
            }
        }
        rel.memo.insert(class.to_string(), path.clone());
        path
    }
}

/// `src/schema/vllm/from_dumps.rs` as the dumps give it.
fn generated_from_dumps() -> String {
    let mut h = FromDumps::new();
    let mut releases = Vec::new();
    let dumps: Vec<(String, Json)> = dumped_versions().into_iter().map(|v| (v.clone(), dump(&v))).collect();
    for (version, d) in &dumps {
        let mut rel = Rel {
            version,
            types: d["types"]
                .as_array()
                .expect("types")
                .iter()
                .map(|t| (t["name"].as_str().expect("name"), t))
                .collect(),
            enums: d["enums"]
                .as_array()
                .expect("enums")
                .iter()
                // String-valued enums are decoded by value (stand-ins).
                .filter_map(|e| {
                    let values = e["members"].as_array().expect("members").iter().map(|m| m["value"].as_i64());
                    Some((e["name"].as_str().expect("name"), values.collect::<Option<Vec<i64>>>()?))
                })
                .collect(),
            memo: HashMap::new(),
        };
        let request_types: Vec<&str> = d["request_types"]
            .as_array()
            .expect("request_types")
            .iter()
            .map(|r| r["byte"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(request_types, ["00", "01", "02", "03", "04", "05"], "vLLM {version}: request types");
        let roots: Vec<String> = [
            "EngineCoreRequest",
            "EngineCoreOutputs",
            "UtilityOutput",
            "EngineCoreReadyResponse",
            "EngineHandshakeMetadata",
            "SamplingParams",
            "StructuredOutputsParams",
            "EngineCoreOutput",
        ]
        .iter()
        .map(|c| h.resolve_struct(&mut rel, c))
        .collect();
        let hand = HAND_WRITTEN_RELEASES.iter().find(|(v, _)| v == version);
        match hand {
            Some((_, ident)) => {
                let new: Vec<&str> = h.emitted.iter().filter(|e| e.3.contains(version)).map(|e| e.0.as_str()).collect();
                assert!(
                    new.is_empty(),
                    "vLLM {version} has a hand-written table, yet its dump gives new structs {new:?}"
                );
                releases.push((version.clone(), format!("super::{ident}"), None));
            }
            None => releases.push((version.clone(), version_ident(version), Some(roots))),
        }
    }
    let versions = |vs: &[String]| vs.join(", ");
    let mut o = String::from(
        "//! vLLM EngineCore schema tables of every release without a hand-written\n\
         //! table (0.32.0 and 0.33.0 are written by hand in `super`): generated by\n\
         //! `protocol/tests/schema_tables.rs` from vLLM's own classes as dumped in\n\
         //! `golden/generate/schema/vllm-<version>.json` (`golden/generate/dump-schema.sh`).\n\
         //! Do not edit: `ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test\n\
         //! schema_tables` rewrites it from the dumps.\n\
         //!\n\
         //! A struct equal to one of the hand-written tables (`super`) is that\n\
         //! struct; every other is a static named by the first release that has it.\n\n\
         use super::super::common::f;\n\
         use super::super::Default as D;\n\
         use super::super::{Dialect, Layout, ReleaseSchema, Rules, StructSchema, TensorKind, Ty};\n",
    );
    for (name, code, class, vs) in &h.emitted {
        o.push_str(&format!("\n/// `{class}` of vLLM {}.\npub static {name}: StructSchema = {code};\n", versions(vs)));
    }
    let fixed = [
        ("utility_request", "super::ROOT_UTILITY_REQUEST"),
        ("start_dp_wave", "super::ROOT_START_DP_WAVE"),
        ("handshake_status", "super::ROOT_HANDSHAKE_STATUS"),
    ];
    for (version, ident, roots) in &releases {
        let Some(r) = roots else { continue };
        o.push_str(&format!(
            "\n/// vLLM {version}, from `golden/generate/schema/vllm-{version}.json`.\n\
             pub static {ident}: ReleaseSchema = ReleaseSchema {{\n    dialect: Dialect::Vllm,\n    version: {version:?},\n\
             \x20   engine_core_request: &Ty::Struct(&{}),\n    engine_core_outputs: &Ty::Struct(&{}),\n\
             \x20   utility_output: &Ty::Struct(&{}),\n    ready_response: &Ty::Struct(&{}),\n\
             \x20   handshake_init: &Ty::Struct(&{}),\n    sampling_params: &{},\n\
             \x20   structured_outputs_params: &{},\n    engine_core_output: &{},\n",
            r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
        ));
        for (field, path) in fixed {
            o.push_str(&format!("    {field}: &{path},\n"));
        }
        o.push_str("};\n");
    }
    let tokenspeed: Vec<String> = engine_protocol::schema::TOKENSPEED_RELEASES
        .iter()
        .map(|r| format!("&super::super::tokenspeed::{}", version_ident(r.version)))
        .collect();
    let vllm: Vec<String> = releases.iter().map(|(_, ident, _)| format!("&{ident}")).collect();
    o.push_str(&format!(
        "\n/// Every vLLM release with a table, oldest first.\npub(crate) static TABLES: [&ReleaseSchema; {}] = [{}];\n",
        vllm.len(),
        vllm.join(", ")
    ));
    o.push_str(&format!(
        "\n/// Every release of every dialect with a table: vLLM's, then TokenSpeed's.\n\
         pub(crate) static EVERY_RELEASE: [&ReleaseSchema; {}] = [{}];\n",
        vllm.len() + tokenspeed.len(),
        vllm.iter().chain(&tokenspeed).cloned().collect::<Vec<_>>().join(", ")
    ));
    o
}

#[test]
fn every_release_without_a_hand_written_table_is_generated_from_its_schema_dump() {
    engine_testkit::bless::check_or_bless(
        std::path::Path::new(FROM_DUMPS_PATH),
        &generated_from_dumps(),
        "ENGINE_PROTOCOL_BLESS=1 cargo test -p engine-protocol --test schema_tables",
    );
}

/// Every release with a schema dump has a table, and it agrees with the dump.
#[test]
fn every_dumped_release_has_a_table_that_matches_vllm_classes() {
    let versions = dumped_versions();
    assert!(versions.len() >= 12, "{versions:?}");
    for v in &versions {
        check_release(v);
    }
    let tables: Vec<&str> = Dialect::Vllm.releases().iter().map(|r| r.version).collect();
    assert_eq!(tables, versions, "a table for every dump, oldest first");
}

#[test]
fn type_renderings_parse_back_into_the_same_rendering() {
    for s in
        ["int | str | None", "dict[str, int | str | list[int]]", "Literal['a', 'b&c'] | None", "list[list[int]] | None"]
    {
        let t = parse_type(s);
        let rendered = render(&t, &mut |_| unreachable!());
        assert!(rendered.starts_with("Ty::"), "{s}: {rendered}");
    }
    assert!(
        matches!(parse_type("str | dict[str, any] | None"), T::Opt(u) if matches!(*u, T::Union(ref m) if m.len() == 2))
    );
    assert_eq!(screaming("EngineCoreReadyResponse"), "ENGINE_CORE_READY_RESPONSE");
    assert_eq!(screaming("LoRARequest"), "LORA_REQUEST");
    assert_eq!(screaming("CUDAGraphStat"), "CUDA_GRAPH_STAT");
}
