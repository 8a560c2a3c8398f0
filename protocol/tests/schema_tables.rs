//! The schema tables agree with vLLM's own classes: field names, order,
//! defaults and wire encodings of every struct, compared with the dumps that
//! `golden/generate/generate.py --schema-dump` took from the installed vLLM
//! packages (`golden/generate/schema/vllm-<version>.json`).

use engine_protocol::schema::{python_type, release, Default, Layout};
use engine_protocol::Dialect;
use serde_json::Value as Json;

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
    use engine_protocol::schema::Rules;
    use engine_protocol::validate::{Check, LORA_REQUEST_RULES, SAMPLING_PARAMS_RULES};
    let mut tagged = 0;
    for rel in engine_protocol::schema::VLLM_RELEASES {
        for s in rel.structs() {
            let rules = match s.validate {
                Some(Rules::SamplingParams) => SAMPLING_PARAMS_RULES,
                Some(Rules::LoraRequest) => LORA_REQUEST_RULES,
                _ => continue,
            };
            tagged += 1;
            for r in rules {
                let other = match r.check {
                    Check::NotAbove(o) | Check::NeedsTrue(o) | Check::OneWhenBelow { other: o, .. } => Some(o),
                    _ => None,
                };
                for name in std::iter::once(r.field).chain(other) {
                    assert!(s.index_of(name).is_some(), "{} {}: rule on {name}, no such field", rel.version, s.name);
                }
            }
        }
    }
    // SamplingParams and LoRARequest in each of the two vLLM releases.
    assert_eq!(tagged, 4);
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
