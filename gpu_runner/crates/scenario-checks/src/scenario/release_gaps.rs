//! What a scenario needs of a release's table, and why it does not apply
//! to a release that lacks it, decided from the table alone (a field is
//! there or not, the typed API covers the table or not; never from version
//! strings): a `built: true` request needs the typed API
//! (`EngineCoreRequest::builder`, `encode_checked`); a request field, a
//! `raw.set` path or a check needs a field the table may not have. Each is
//! a [`ReleaseGap`]; the run reports the scenario as `skip` with it (the
//! suite's one outcome classification), never as a failure.

use engine_protocol::schema::{StructSchema, Ty};
use engine_protocol::ReleaseSchema;
use serde_json::Value as Json;

use super::{Raw, Scenario};
use crate::release::{typed_table, typed_versions};
use engine_client::dialect::vllm::has_typed_api;

/// Why a scenario does not apply to a run's release, decided from its
/// table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseGap {
    /// A request made with the typed API (`built: true`:
    /// `EngineCoreRequest::builder` and `encode_checked`), which does not
    /// cover the release.
    TypedApi { release: &'static str, typed: Vec<&'static str> },
    /// A field (`Struct.field`) a request sets or a check reads, which the
    /// release's table does not have.
    Field { release: &'static str, field: String, needed_by: String },
}

impl std::fmt::Display for ReleaseGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReleaseGap::TypedApi { release, typed } => write!(
                f,
                "not applicable to this release: needs the typed API ({}), and this run's table is vllm {release}",
                typed.join(", ")
            ),
            ReleaseGap::Field { release, field, needed_by } => write!(
                f,
                "not applicable to this release: {needed_by} needs {field}, which the vllm {release} table does not have"
            ),
        }
    }
}

/// The struct named `name` among the structs `release` reaches.
fn struct_named(release: &ReleaseSchema, name: &str) -> Option<&'static StructSchema> {
    release.structs().into_iter().find(|s| s.name == name)
}

/// Whether `release` has field `field` of struct `strukt`.
pub fn has_field(release: &ReleaseSchema, strukt: &str, field: &str) -> bool {
    struct_named(release, strukt).is_some_and(|s| s.index_of(field).is_some())
}

/// The struct a field type leads to (through `Optional`, lists, sets,
/// dicts and unions).
fn struct_in(ty: &'static Ty) -> Option<&'static StructSchema> {
    match ty {
        Ty::Struct(s) => Some(s),
        Ty::Optional(t) | Ty::List(t) | Ty::Set(t) | Ty::Dict(_, t) => struct_in(t),
        Ty::Union(ts) => ts.iter().find_map(struct_in),
        _ => None,
    }
}

/// The `Struct.field` names along a dotted path from `root`, as far as the
/// path goes through structs; `Err(i)` when segment `i` is no field there.
fn path_fields(root: &'static StructSchema, path: &str) -> Result<Vec<String>, usize> {
    let mut at = Some(root);
    let mut out = Vec::new();
    for (i, seg) in path.split('.').enumerate() {
        let Some(s) = at else { break };
        let Some(j) = s.index_of(seg) else { return Err(i) };
        out.push(format!("{}.{seg}", s.name));
        at = struct_in(s.fields[j].ty);
    }
    Ok(out)
}

/// The fields a gateway-level request's keys name: a `SamplingParams`
/// or `EngineCoreRequest` field of `typed` (the translation's table), and
/// in a `structured_outputs` object its `StructuredOutputsParams` fields.
fn request_fields(typed: &ReleaseSchema, request: &Json) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let Some(o) = request.as_object() else { return out };
    let req = typed.engine_core_request.as_struct();
    for (k, v) in o {
        if typed.sampling_params.index_of(k).is_some() {
            out.push((typed.sampling_params.name, k.clone()));
            if k == "structured_outputs" {
                let so = typed.structured_outputs_params;
                for inner in v.as_object().into_iter().flat_map(|m| m.keys()) {
                    if so.index_of(inner).is_some() {
                        out.push((so.name, inner.clone()));
                    }
                }
            }
        } else if let Some(r) = req.filter(|r| r.index_of(k).is_some()) {
            out.push((r.name, k.clone()));
        }
    }
    out
}

/// Why `s` does not apply to `release` (empty: it does), from the table.
pub fn gaps(s: &Scenario, release: &'static ReleaseSchema) -> Vec<ReleaseGap> {
    let mut out: Vec<ReleaseGap> = Vec::new();
    let mut add = |g: ReleaseGap| {
        if !out.contains(&g) {
            out.push(g);
        }
    };
    let typed = typed_table(release);
    let field_gap = |strukt: &str, field: &str, needed_by: String| {
        (!has_field(release, strukt, field)).then(|| ReleaseGap::Field {
            release: release.version,
            field: format!("{strukt}.{field}"),
            needed_by,
        })
    };
    for r in &s.requests {
        if r.dialect.built && !has_typed_api(release) {
            add(ReleaseGap::TypedApi { release: release.version, typed: typed_versions() });
        }
        for (strukt, field) in request_fields(typed, &r.request) {
            if let Some(g) = field_gap(strukt, &field, format!("request {}", r.id)) {
                add(g);
            }
        }
        if let (Some(Raw::Edit(edits)), Some(root)) = (&r.raw, typed.engine_core_request.as_struct()) {
            for (path, _) in edits {
                // Only a path that is a field of the translation's table
                // and not of the release's is a gap; any other path is the
                // scenario's own (its edit fails as it would anyway).
                for sf in path_fields(root, path).unwrap_or_default() {
                    let (strukt, field) = sf.split_once('.').unwrap_or_default();
                    if let Some(g) = field_gap(strukt, field, format!("request {} (raw.set {path})", r.id)) {
                        add(g);
                        break;
                    }
                }
            }
        }
    }
    for (i, c) in s.checks.iter().enumerate() {
        for sf in c.check.wire_fields() {
            let (strukt, field) = sf.split_once('.').unwrap_or_default();
            if let Some(g) = field_gap(strukt, field, format!("checks[{i}] {}", c.check.name())) {
                add(g);
            }
        }
    }
    out
}
