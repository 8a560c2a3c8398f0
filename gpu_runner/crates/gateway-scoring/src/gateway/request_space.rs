//! The request space of vLLM's OpenAI server, read from its own
//! definitions: the fields of `CompletionRequest` and
//! `ChatCompletionRequest` as `golden/generate/frontend/dump_request_models.py`
//! dumps them from an installed release (name, alias, the JSON shapes its
//! type allows, default, bounds) into
//! `golden/generate/schema/openai-requests-vllm-<version>.json`.
//!
//! Every field is a row; the values a sweep sends for it come from its
//! shapes and bounds ([`FieldRow::values`]): booleans both ways, integers
//! at 0, 1, a typical value and each bound's edges, floats at 0, 0.5, 1, 2
//! and the bounds, literals each, lists of one item, maps of one entry.
//! Objects (pydantic classes) take their values from a small table keyed
//! by class name ([`OBJECT_VALUES`]); a field whose shapes give no value is
//! not dropped: [`RequestModel::rows`] names it with why
//! ([`Row::NoValues`]), so a report can list it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Value as Json};

/// One request model of one release.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestModel {
    /// `CompletionRequest` or `ChatCompletionRequest`.
    pub name: String,
    /// The module vLLM defines it in.
    pub module: String,
    /// `/v1/completions` or `/v1/chat/completions`.
    pub endpoint: String,
    /// pydantic's `extra` setting (`allow`: unknown fields are kept).
    #[serde(default)]
    pub extra: Option<String>,
    pub fields: Vec<FieldRow>,
}

/// One field of a request model.
#[derive(Debug, Clone, Deserialize)]
pub struct FieldRow {
    pub name: String,
    /// The JSON name when it differs from the Python one.
    #[serde(default)]
    pub alias: Option<String>,
    /// The type as Python writes it (for reports).
    #[serde(rename = "type")]
    pub type_text: String,
    /// The shapes its type allows.
    pub kinds: Vec<Shape>,
    /// `"required"`, `{"value": V}` or `{"factory": V | "varies"}`.
    pub default: Json,
    /// Field-level bounds (`ge`, `gt`, `le`, `lt`, `min_length`,
    /// `max_length`).
    #[serde(default)]
    pub bounds: Bounds,
    #[serde(default)]
    pub doc: Option<String>,
}

/// Numeric and length bounds.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Bounds {
    #[serde(default)]
    pub ge: Option<f64>,
    #[serde(default)]
    pub gt: Option<f64>,
    #[serde(default)]
    pub le: Option<f64>,
    #[serde(default)]
    pub lt: Option<f64>,
    #[serde(default)]
    pub min_length: Option<u64>,
    #[serde(default)]
    pub max_length: Option<u64>,
}

/// One JSON shape a field's type allows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Shape {
    Int {
        #[serde(default)]
        bounds: Bounds,
    },
    Float {
        #[serde(default)]
        bounds: Bounds,
    },
    Bool {},
    Str {
        #[serde(default)]
        bounds: Bounds,
    },
    Bytes {},
    Null {},
    Literal {
        values: Vec<Json>,
    },
    List {
        items: Vec<Shape>,
        #[serde(default)]
        bounds: Bounds,
    },
    Map {
        values: Vec<Shape>,
    },
    Object {
        class: String,
    },
    Any {},
}

/// A whole dump: one release's request models.
#[derive(Debug, Clone, Deserialize)]
pub struct RequestSpace {
    pub vllm: String,
    pub models: Vec<RequestModel>,
}

/// Why a request-space file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpaceError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: {source}")]
    Json { path: String, source: serde_json::Error },
}

impl RequestSpace {
    /// Reads a dump; a file that is not one is an error naming it.
    pub fn load(path: &Path) -> Result<RequestSpace, SpaceError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| SpaceError::Io { path: p.clone(), source })?;
        serde_json::from_str(&text).map_err(|source| SpaceError::Json { path: p, source })
    }

    /// The model served at `endpoint`.
    pub fn model(&self, endpoint: &str) -> Option<&RequestModel> {
        self.models.iter().find(|m| m.endpoint == endpoint)
    }
}

/// Values for objects, by class name: what a sweep sends for a field whose
/// type is a pydantic class of vLLM's server (vLLM 0.32.0
/// `vllm/entrypoints/openai/*/protocol.py`, `vllm/sampling_params.py`).
pub const OBJECT_VALUES: &[(&str, &str)] = &[
    ("StreamOptions", r#"[{"include_usage": true}, {"include_usage": true, "continuous_usage_stats": true}]"#),
    ("ResponseFormat", r#"[{"type": "json_object"}, {"type": "text"}]"#),
    ("StructuredOutputsParams", r#"[{"regex": "[a-c]{3}"}, {"choice": ["cat", "dog"]}]"#),
];

/// A field's place in a sweep.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// The values the sweep sends.
    Values(Vec<Json>),
    /// None could be made from its shapes: why.
    NoValues(String),
}

impl FieldRow {
    /// The JSON name a request uses.
    pub fn json_name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.name)
    }

    /// The values a sweep sends for this field, from its shapes and
    /// bounds; an empty list when none can be made ([`Row::NoValues`]).
    pub fn values(&self) -> Vec<Json> {
        let mut out: Vec<Json> = Vec::new();
        for k in &self.kinds {
            for v in kind_values(k, &self.bounds) {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// Why no value can be made, when none can.
    pub fn row(&self) -> Row {
        let v = self.values();
        if !v.is_empty() {
            return Row::Values(v);
        }
        let classes: Vec<&str> = self
            .kinds
            .iter()
            .filter_map(|k| if let Shape::Object { class } = k { Some(class.as_str()) } else { None })
            .collect();
        Row::NoValues(if classes.is_empty() {
            format!("no value can be made for its type {}", self.type_text)
        } else {
            format!("an object ({}) with no entry in the value table", classes.join(", "))
        })
    }
}

impl RequestModel {
    /// Every field with its values or why it has none, by JSON name.
    pub fn rows(&self) -> BTreeMap<String, Row> {
        self.fields.iter().map(|f| (f.json_name().to_string(), f.row())).collect()
    }
}

fn merged(a: &Bounds, b: &Bounds) -> Bounds {
    Bounds {
        ge: a.ge.or(b.ge),
        gt: a.gt.or(b.gt),
        le: a.le.or(b.le),
        lt: a.lt.or(b.lt),
        min_length: a.min_length.or(b.min_length),
        max_length: a.max_length.or(b.max_length),
    }
}

/// Integers a sweep tries: 0, 1, 4 and each bound's edges (the bound and
/// one past it), inside `i64`.
fn ints(b: &Bounds) -> Vec<Json> {
    let mut v: Vec<i64> = vec![0, 1, 4];
    let edge = |x: f64| (x.is_finite() && x.abs() < 9.0e18).then_some(x as i64);
    if let Some(ge) = b.ge.and_then(edge) {
        v.extend([ge, ge - 1]);
    }
    if let Some(gt) = b.gt.and_then(edge) {
        v.extend([gt + 1, gt]);
    }
    if let Some(le) = b.le.and_then(edge) {
        v.extend([le, le + 1]);
    }
    if let Some(lt) = b.lt.and_then(edge) {
        v.extend([lt - 1, lt]);
    }
    if b.ge.is_none() && b.gt.is_none() {
        v.push(-1);
    }
    let mut out: Vec<Json> = Vec::new();
    for x in v {
        if !out.contains(&json!(x)) {
            out.push(json!(x));
        }
    }
    out
}

fn floats(b: &Bounds) -> Vec<Json> {
    let mut v = vec![0.0, 0.5, 1.0, 2.0, -1.0];
    v.extend([b.ge, b.gt, b.le, b.lt].into_iter().flatten().filter(|x| x.is_finite()));
    let mut out: Vec<Json> = Vec::new();
    for x in v {
        if !out.contains(&json!(x)) {
            out.push(json!(x));
        }
    }
    out
}

fn kind_values(k: &Shape, field: &Bounds) -> Vec<Json> {
    match k {
        Shape::Int { bounds } => ints(&merged(bounds, field)),
        Shape::Float { bounds } => floats(&merged(bounds, field)),
        Shape::Bool {} => vec![json!(true), json!(false)],
        Shape::Str { bounds } => {
            let b = merged(bounds, field);
            let mut v = vec![json!("x")];
            if b.min_length.unwrap_or(0) == 0 {
                v.push(json!(""));
            }
            v
        }
        Shape::Null {} => vec![Json::Null],
        Shape::Literal { values } => values.clone(),
        Shape::List { items, bounds } => {
            let mut v: Vec<Json> = items
                .iter()
                .flat_map(|i| kind_values(i, &Bounds::default()).into_iter().take(1))
                .map(|x| json!([x]))
                .collect();
            if merged(bounds, field).min_length.unwrap_or(0) == 0 {
                v.push(json!([]));
            }
            v
        }
        Shape::Map { values } => {
            let mut v: Vec<Json> = values
                .iter()
                .flat_map(|i| kind_values(i, &Bounds::default()).into_iter().take(1))
                .map(|x| json!({"5": x}))
                .collect();
            v.push(json!({}));
            v
        }
        Shape::Object { class } => OBJECT_VALUES
            .iter()
            .find(|(c, _)| c == class)
            .and_then(|(_, v)| serde_json::from_str::<Vec<Json>>(v).ok())
            .unwrap_or_default(),
        Shape::Bytes {} | Shape::Any {} => Vec::new(),
    }
}

/// The committed dump of vLLM `version` (tests).
#[cfg(test)]
pub(crate) fn committed(version: &str) -> RequestSpace {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
    RequestSpace::load(&root.join(format!("golden/generate/schema/openai-requests-vllm-{version}.json"))).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(v: &str) -> RequestSpace {
        committed(v)
    }

    #[test]
    fn both_endpoints_of_vllm_0_32_0_load_with_every_field_a_row() {
        let s = space("0.32.0");
        for ep in ["/v1/completions", "/v1/chat/completions"] {
            let m = s.model(ep).unwrap_or_else(|| panic!("no model for {ep}"));
            let rows = m.rows();
            assert_eq!(rows.len(), m.fields.len(), "{ep}: one row per field");
            let with_values = rows.values().filter(|r| matches!(r, Row::Values(_))).count();
            assert!(
                with_values * 10 >= rows.len() * 8,
                "{ep}: only {with_values} of {} fields have values",
                rows.len()
            );
        }
    }

    #[test]
    fn values_come_from_the_type_and_its_bounds() {
        let s = space("0.32.0");
        let m = s.model("/v1/completions").unwrap();
        let row = |n: &str| m.fields.iter().find(|f| f.name == n).unwrap().values();
        // A bounded int: the bound and one past it.
        let tpt = row("truncate_prompt_tokens");
        assert!(tpt.contains(&json!(-1)) && tpt.contains(&json!(-2)), "{tpt:?}");
        // Optional: null is one of the values; booleans both ways.
        assert!(row("temperature").contains(&Json::Null));
        assert_eq!(row("ignore_eos"), vec![json!(true), json!(false)]);
        // A literal: each of its values.
        assert!(row("truncation_side").contains(&json!("left")));
        // An object with an entry in the table.
        assert!(row("stream_options").contains(&json!({"include_usage": true})));
        // A string with a minimum length never gets the empty string.
        assert!(!row("cache_salt").contains(&json!("")), "{:?}", row("cache_salt"));
    }

    #[test]
    fn a_field_with_no_makeable_value_says_why() {
        let f = FieldRow {
            name: "mystery".into(),
            alias: None,
            type_text: "Widget".into(),
            kinds: vec![Shape::Object { class: "Widget".into() }],
            default: json!("required"),
            bounds: Bounds::default(),
            doc: None,
        };
        assert_eq!(f.row(), Row::NoValues("an object (Widget) with no entry in the value table".into()));
    }

    #[test]
    fn a_file_that_is_no_dump_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.json");
        std::fs::write(&p, r#"{"vllm": "0.32.0", "models": [{"name": "X"}]}"#).unwrap();
        let e = RequestSpace::load(&p).unwrap_err().to_string();
        assert!(e.contains("x.json") && e.contains("missing field"), "{e}");
    }
}
