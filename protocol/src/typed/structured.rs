//! `StructuredOutputsParams`, the one structured-output representation of
//! the typed API: its constraint is an enum, so a struct holds exactly one.
//!
//! Wire facts (docs/wire-protocol.md §7.2, §10): a dataclass, written as a
//! map of every field in declaration order (11 in 0.32.0 and 0.33.0:
//! `json`, `regex`, `choice`, `grammar`, `json_object`,
//! `disable_any_whitespace`, `disable_additional_properties`,
//! `whitespace_pattern`, `structural_tag`, `_backend`, `_backend_was_auto`);
//! its `__post_init__` refuses none or more than one of the six constraint
//! fields (`json_object: false` counts as set). A 0.33 engine fails a
//! request whose `_backend` is unset (its frontend always sets it), and
//! serves one backend per engine (docs/wire-protocol.md §10.1).
//!
//! Not generated from the tables, unlike its neighbours: a table struct
//! allows any combination of the constraint fields, this type only the
//! ones the engine decodes. It is written against the tables all the same:
//! the keys it writes and reads are the release table's, by name, and a
//! table field it has no place for is an error (test
//! `structured_outputs_roundtrip_through_the_typed_enum_in_every_release`).

use super::wire::{
    encode_extra_keys, raw_extra_keys, raw_key, struct_schema, struct_value, type_error, At, Enc, EncodeResult, Rel,
    WireType,
};
use super::JsonSchema;
use crate::error::{Error, RejectClass};
use crate::msgpack::write;
use crate::schema::Ty;
use crate::validate::CONSTRAINT_FIELDS;
use crate::value::{StructValue, Value};

/// The one structured-output constraint of a request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Constraint {
    /// `json`: a JSON schema, as text or as an object (a map on the wire).
    Json(JsonSchema),
    /// `regex`: a regular expression.
    Regex(String),
    /// `choice`: one of these strings.
    Choice(Vec<String>),
    /// `grammar`: an EBNF (or Lark) grammar.
    Grammar(String),
    /// `json_object`; `false` still counts as the one constraint on the wire
    /// (vLLM then fails the request at preprocessing).
    JsonObject(bool),
    /// `structural_tag`: a structural tag, as JSON text.
    StructuralTag(String),
}

impl Constraint {
    /// The wire field that carries this constraint.
    pub fn field(&self) -> &'static str {
        match self {
            Constraint::Json(_) => "json",
            Constraint::Regex(_) => "regex",
            Constraint::Choice(_) => "choice",
            Constraint::Grammar(_) => "grammar",
            Constraint::JsonObject(_) => "json_object",
            Constraint::StructuralTag(_) => "structural_tag",
        }
    }
}

/// `StructuredOutputsParams`: exactly one [`Constraint`], the options that
/// go with it, and the backend the engine compiles it with.
///
/// ```
/// use engine_protocol::typed::{Constraint, StructuredOutputsParams};
///
/// let so = StructuredOutputsParams::new(Constraint::Regex("[0-9]+".into()), "xgrammar");
/// assert_eq!(so.constraint.field(), "regex");
/// assert_eq!(so.backend.as_deref(), Some("xgrammar"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredOutputsParams {
    /// The one constraint.
    pub constraint: Constraint,
    /// `disable_any_whitespace: bool`, default `false`.
    pub disable_any_whitespace: bool,
    /// `disable_additional_properties: bool`, default `false`.
    pub disable_additional_properties: bool,
    /// `whitespace_pattern: str | None`, default `None`.
    pub whitespace_pattern: Option<String>,
    /// `_backend: str | None`: the backend that compiles the constraint
    /// (`xgrammar`, `guidance`, `outlines`, `lm-format-enforcer`). Set by
    /// the frontend; a 0.33 engine fails a request without it
    /// ([`super::ServingProblem::ConstraintWithoutBackend`]).
    pub backend: Option<String>,
    /// `_backend_was_auto: bool`, default `false`.
    pub backend_was_auto: bool,
    /// Keys this crate's tables do not know (a newer release's fields),
    /// in wire order; written back after the known ones.
    pub unknown: Vec<(String, Value)>,
}

impl StructuredOutputsParams {
    /// `constraint`, compiled by `backend`, every other field at its
    /// default. The backend is required here because the engine requires
    /// it; [`StructuredOutputsParams::without_backend`] builds what an
    /// older frontend sent.
    pub fn new(constraint: Constraint, backend: impl Into<String>) -> Self {
        StructuredOutputsParams { backend: Some(backend.into()), ..Self::without_backend(constraint) }
    }

    /// `constraint` with no `_backend`: what 0.32 engines accept and 0.33
    /// engines fail at run time.
    pub fn without_backend(constraint: Constraint) -> Self {
        StructuredOutputsParams {
            constraint,
            disable_any_whitespace: false,
            disable_additional_properties: false,
            whitespace_pattern: None,
            backend: None,
            backend_was_auto: false,
            unknown: Vec::new(),
        }
    }

    /// Field `name` of the table as a value of its type `ty`; `None` for a
    /// name this type has no place for.
    fn field_value(&self, name: &str, ty: &'static Ty, rel: Rel) -> Option<Result<Value, Error>> {
        let c = &self.constraint;
        let constraint = |field: &str| -> Result<Value, Error> {
            if c.field() != field {
                return Ok(Value::Nil);
            }
            match c {
                Constraint::Json(j) => j.to_value(ty, rel),
                Constraint::Regex(s) | Constraint::Grammar(s) | Constraint::StructuralTag(s) => {
                    Ok(Value::Str(s.clone()))
                }
                Constraint::Choice(xs) => xs.to_value(ty, rel),
                Constraint::JsonObject(b) => Ok(Value::Bool(*b)),
            }
        };
        Some(match name {
            "json" | "regex" | "choice" | "grammar" | "json_object" | "structural_tag" => constraint(name),
            "disable_any_whitespace" => Ok(Value::Bool(self.disable_any_whitespace)),
            "disable_additional_properties" => Ok(Value::Bool(self.disable_additional_properties)),
            "whitespace_pattern" => self.whitespace_pattern.to_value(ty, rel),
            "_backend" => self.backend.to_value(ty, rel),
            "_backend_was_auto" => Ok(Value::Bool(self.backend_was_auto)),
            _ => return None,
        })
    }
}

fn no_place_for(name: &str) -> Error {
    Error::new(
        RejectClass::Validation,
        format!(".{name}"),
        "a field of the release table that the typed StructuredOutputsParams has no place for",
    )
}

/// A named field of a decoded struct as `T` (nil where the struct lacks it).
fn read<T: WireType>(sv: &StructValue, raw: Option<&Value>, name: &str, rel: Rel) -> Result<T, Error> {
    T::from_value(sv.get(name).unwrap_or(&Value::Nil), raw_key(raw, name), rel).at(&format!(".{name}"))
}

impl WireType for StructuredOutputsParams {
    fn from_value(v: &Value, raw: Option<&Value>, rel: Rel) -> Result<Self, Error> {
        let sv = struct_value(v, "StructuredOutputsParams")?;
        // `__post_init__`'s rule, which `decode_message` also runs: the
        // only shapes this type can hold.
        crate::validate::structured_outputs_params(sv).map_err(|violation| {
            let path = violation.path();
            let path = if path.is_empty() { String::new() } else { format!(".{path}") };
            Error::new(RejectClass::Validation, path, violation.message)
        })?;
        let set = CONSTRAINT_FIELDS.iter().copied().find(|f| !sv.is_nil(f)).unwrap_or("");
        let constraint = match set {
            "json" => Constraint::Json(read(sv, raw, "json", rel)?),
            "regex" => Constraint::Regex(read(sv, raw, "regex", rel)?),
            "choice" => Constraint::Choice(read(sv, raw, "choice", rel)?),
            "grammar" => Constraint::Grammar(read(sv, raw, "grammar", rel)?),
            "json_object" => Constraint::JsonObject(read(sv, raw, "json_object", rel)?),
            "structural_tag" => Constraint::StructuralTag(read(sv, raw, "structural_tag", rel)?),
            other => return Err(type_error("a structured-output constraint", &Value::Str(other.into()))),
        };
        let out = StructuredOutputsParams {
            constraint,
            disable_any_whitespace: read(sv, raw, "disable_any_whitespace", rel)?,
            disable_additional_properties: read(sv, raw, "disable_additional_properties", rel)?,
            whitespace_pattern: read(sv, raw, "whitespace_pattern", rel)?,
            backend: read(sv, raw, "_backend", rel)?,
            backend_was_auto: read(sv, raw, "_backend_was_auto", rel)?,
            unknown: raw_extra_keys(raw, sv.schema),
        };
        // The one name mapping (`field_value`) says which table fields
        // this type has a place for.
        if let Some(f) = sv.schema.fields.iter().find(|f| out.field_value(f.name, f.ty, rel).is_none()) {
            return Err(no_place_for(f.name));
        }
        Ok(out)
    }

    fn to_value(&self, ty: &'static Ty, rel: Rel) -> Result<Value, Error> {
        let s = struct_schema(ty, "StructuredOutputsParams")?;
        let fields = s
            .fields
            .iter()
            .map(|f| self.field_value(f.name, f.ty, rel).unwrap_or_else(|| Err(no_place_for(f.name))))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Value::Struct(StructValue::new(s, fields)))
    }

    /// Each field as `field_value` gives it, written as the value encoder
    /// writes it (a rare struct: the bytes are those of the value path,
    /// which the round-trip test holds in every release).
    fn encode(&self, rel: Rel, e: &mut Enc) -> EncodeResult {
        let s = rel.schema.structured_outputs_params;
        let n = s.fields.len();
        e.struct_map(n, n + self.unknown.len());
        for f in s.fields {
            let at = format!(".{}", f.name);
            let v = self.field_value(f.name, f.ty, rel).unwrap_or_else(|| Err(no_place_for(f.name))).at(&at)?;
            write::str(&mut e.out, f.name);
            e.any(&v).at(&at)?;
        }
        encode_extra_keys(&self.unknown, e)
    }
}
