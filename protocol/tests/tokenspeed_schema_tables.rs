//! The TokenSpeed tables agree with TokenSpeed's own classes: field names,
//! order, types, defaults, encodings and msgspec tags of every struct,
//! compared with the dumps that
//! `golden/generate/tokenspeed/generate_tokenspeed.py --schema-dump` took
//! from the installed 0.1.1 wheel (`golden/generate/schema/tokenspeed-0.1.1.json`)
//! and from TokenSpeed's tree at commit 57b49061
//! (`golden/generate/schema/tokenspeed-git-57b49061.json`).

use engine_protocol::schema::{python_type, release, Default, Layout, VLLM_RELEASES};
use engine_protocol::Dialect;
use serde_json::Value as Json;

/// Types whose Python annotation the tables model by their wire shape.
const WIRE_SHAPE_STAND_INS: &[(&str, &str, &str)] = &[
    // A variable-length tuple of ints is an array on the wire.
    ("ShmTensorHandle", "tuple[int, ...]", "list[int]"),
];

/// The TokenSpeed versions with a table, oldest first (as `ALL_RELEASES`
/// lists them), each with its dump.
const VERSIONS: &[&str] = &["git-57b49061", "0.1.1"];

fn dump() -> Json {
    dump_of("0.1.1")
}

fn dump_of(version: &str) -> Json {
    let path = engine_testkit::corpus::golden_dir().join(format!("generate/schema/tokenspeed-{version}.json"));
    engine_testkit::corpus::read_json(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
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
        (Default::EmptyDict, Json::String(s)) => s == "factory:dict",
        _ => false,
    }
}

fn layout_matches(layout: Layout, t: &Json) -> bool {
    let enc = t["encoding"].as_str().unwrap_or("");
    let omit = t["omit_defaults"].as_bool().unwrap_or(true);
    match layout {
        Layout::Positional => enc == "array_like struct",
        Layout::FullMap => enc == "map struct" && !omit,
        _ => false,
    }
}

#[test]
fn tokenspeed_table_matches_tokenspeed_classes() {
    for version in VERSIONS {
        table_matches_classes(version);
    }
}

#[test]
fn every_tokenspeed_release_has_a_dump_to_check_it_against() {
    let ours: Vec<&str> =
        engine_protocol::schema::ALL_RELEASES.iter().filter(|r| r.is_tokenspeed()).map(|r| r.version).collect();
    assert_eq!(ours, VERSIONS, "a TokenSpeed table without a dump (or a dump without a table)");
}

fn table_matches_classes(version: &str) {
    let rel = release(Dialect::TokenSpeed, version).expect("a table for this TokenSpeed version");
    let dump = dump_of(version);
    assert_eq!(dump["tokenspeed"].as_str(), Some(version), "the dump is of TokenSpeed {version}");
    let types = dump["types"].as_array().expect("types");
    let mut problems = Vec::new();
    let mut compared = Vec::new();
    for s in rel.structs() {
        if s.name == "NotInTokenSpeed" || s.layout == Layout::Tuple {
            // The placeholder for roles TokenSpeed lacks, and `tuple[int, int]`
            // (not a class).
            continue;
        }
        let Some(t) = types.iter().find(|t| t["name"] == s.name) else {
            problems.push(format!("{}: no such class in the TokenSpeed dump", s.name));
            continue;
        };
        compared.push(s.name);
        assert!(s.fields.len() <= 64, "{}: the decoder tracks presence of at most 64 fields", s.name);
        if !layout_matches(s.layout, t) {
            problems.push(format!("{}: layout {:?} but TokenSpeed encodes it as {}", s.name, s.layout, t["encoding"]));
        }
        if s.tag() != t["tag"].as_str() {
            problems.push(format!("{}: tag {:?}, TokenSpeed has {}", s.name, s.tag(), t["tag"]));
        }
        let required = s.fields.iter().filter(|f| f.default == Default::Required).count();
        if Some(required as u64) != t["num_required"].as_u64() {
            problems.push(format!("{}: {required} required fields, TokenSpeed has {}", s.name, t["num_required"]));
        }
        let fields = t["fields"].as_array().expect("fields");
        let ours: Vec<&str> = s.fields.iter().map(|f| f.name).collect();
        let theirs: Vec<&str> = fields.iter().map(|f| f["wire_name"].as_str().unwrap_or("?")).collect();
        if ours != theirs {
            problems.push(format!("{}: fields {ours:?}, TokenSpeed has {theirs:?}", s.name));
            continue;
        }
        for (f, tf) in s.fields.iter().zip(fields) {
            if !default_matches(&f.default, &tf["default"]) {
                problems
                    .push(format!("{}.{}: default {:?}, TokenSpeed has {}", s.name, f.name, f.default, tf["default"]));
            }
            let ours = python_type(f.ty);
            let theirs = tf["type"].as_str().unwrap_or("?");
            let stand_in =
                WIRE_SHAPE_STAND_INS.iter().any(|(n, py, wire)| *n == s.name && *py == theirs && *wire == ours);
            if ours != theirs && !stand_in {
                problems.push(format!("{}.{}: type {ours}, TokenSpeed has {theirs}", s.name, f.name));
            }
        }
    }
    let all: Vec<&str> = types.iter().filter_map(|t| t["name"].as_str()).collect();
    for name in &all {
        if !compared.contains(name) {
            problems.push(format!("{name}: in the TokenSpeed dump but not reachable from the table"));
        }
    }
    assert!(problems.is_empty(), "the TokenSpeed {version} table disagrees with TokenSpeed:\n{}", problems.join("\n"));
}

#[test]
fn tokenspeed_modality_enum_matches_tokenspeed() {
    let dump = dump();
    let modality = dump["enums"].as_array().expect("enums").iter().find(|e| e["name"] == "Modality").expect("Modality");
    let theirs: Vec<(i64, &str)> = modality["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| (m["value"].as_i64().expect("int value"), m["name"].as_str().expect("name")))
        .collect();
    assert_eq!(engine_protocol::schema::tokenspeed::MODALITY.values, theirs.as_slice());
}

#[test]
fn tokenspeed_request_types_are_add_and_abort_only() {
    let dump = dump();
    let bytes: Vec<&str> =
        dump["request_types"].as_array().expect("request_types").iter().filter_map(|t| t["byte"].as_str()).collect();
    assert_eq!(bytes, ["00", "01"]);
}

#[test]
fn vllm_tables_need_exactly_their_leading_required_fields() {
    // The positional decoder requires `min_len()` elements (up to the last
    // required field); for vLLM's tables, whose required fields all come
    // first, that is the same as `required()`, so vLLM decoding is unchanged.
    for rel in VLLM_RELEASES {
        for s in rel.structs() {
            assert_eq!(s.min_len(), s.required(), "vLLM {} {}", rel.version, s.name);
            assert_eq!(s.tag(), None, "vLLM {} {} is untagged", rel.version, s.name);
        }
    }
}
