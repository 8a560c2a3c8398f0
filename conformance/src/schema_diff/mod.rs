//! `conformance schema-diff A B`: every wire change between two releases of
//! a dialect, read from the releases' own schema dumps
//! (`golden/generate/schema/<dialect>-<version>.json`, written by
//! `golden/generate/generate.py --schema-dump` from the installed classes),
//! each classified for both directions: a peer built for A reading B's
//! bytes, and a peer built for B reading A's. A gateway of one release and
//! an engine of another meet in both directions (the engine reads the
//! gateway's requests, the gateway reads the engine's outputs).
//!
//! Rules, from how msgspec decodes (docs/wire-protocol.md §6) and encodes
//! (§5) the four encodings the dumps name:
//!
//! - `array_like struct`: positional. Extra trailing elements are ignored
//!   (drift), missing trailing ones take their defaults, a missing
//!   required one is `missing-field`; a field inserted or removed anywhere
//!   but the end shifts every later field (breaking both ways).
//! - `namedtuple`: positional, but extra elements are refused (`type`).
//! - `map struct` and `dataclass`: keyed. Unknown keys are ignored (drift),
//!   absent keys take their defaults, an absent required key is
//!   `missing-field`; order is free. A renamed key drops the value.
//! - A changed default changes the meaning for every writer that omits the
//!   field (`omit_defaults` structs omit a field equal to its default, and
//!   the reader fills in its own); structs written in full are not
//!   affected.
//! - A retyped field: compatible toward the reader whose type accepts every
//!   value of the other's (a union that gained a member), breaking
//!   otherwise.
//! - Enum members and request-type bytes: a value the reader does not know
//!   is refused (`enum`; an unknown request type kills the engine's input
//!   thread, §10.1), so an added one is breaking toward the older reader.
//!
//! The parts: `dump` (reading the dumps), `compare` (the changes and their
//! verdicts), `report` (text, JSON, Markdown); the verdicts, rules and
//! change kinds here.

use serde_json::Value as Json;

mod compare;
mod dump;
mod report;
pub use compare::diff;
pub use dump::{dump_path, load, releases, version_key, DumpError, Encoding, EnumDef, FieldDef, Schema, TypeDef};
pub use report::{markdown, text, to_json, worst};

/// How a reader fares with the other release's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DriftVerdict {
    /// Decodes, meaning kept.
    Compatible,
    /// Decodes; what the reader does not know is ignored (and reported as
    /// drift by this suite's decoder).
    Drift,
    /// Refused, or decoded with another meaning.
    Breaking,
}

impl DriftVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftVerdict::Compatible => "compatible",
            DriftVerdict::Drift => "drift",
            DriftVerdict::Breaking => "breaking",
        }
    }

    /// The verdict named `s`.
    pub fn parse(s: &str) -> Option<DriftVerdict> {
        [DriftVerdict::Compatible, DriftVerdict::Drift, DriftVerdict::Breaking].into_iter().find(|v| v.as_str() == s)
    }
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriftRule {
    TrailingElementIgnored,
    NamedTupleRefusesExtra,
    AbsentTakesDefault,
    AbsentRequiredRefused,
    PositionShifted,
    PositionalNameNotOnWire,
    UnknownKeyIgnored,
    RenamedKeyDropsValue,
    OmittedTakesReadersDefault,
    DefaultWrittenInFull,
    TypeAcceptsOthers,
    TypeRefusesOthers,
    EncodingChanged,
    ReachedOnlyThroughFields,
    UnknownValueRefused,
    KnownValues,
    UnknownRequestTypeKillsInput,
}

impl DriftRule {
    /// Every rule.
    pub const ALL: [DriftRule; 17] = [
        DriftRule::TrailingElementIgnored,
        DriftRule::NamedTupleRefusesExtra,
        DriftRule::AbsentTakesDefault,
        DriftRule::AbsentRequiredRefused,
        DriftRule::PositionShifted,
        DriftRule::PositionalNameNotOnWire,
        DriftRule::UnknownKeyIgnored,
        DriftRule::RenamedKeyDropsValue,
        DriftRule::OmittedTakesReadersDefault,
        DriftRule::DefaultWrittenInFull,
        DriftRule::TypeAcceptsOthers,
        DriftRule::TypeRefusesOthers,
        DriftRule::EncodingChanged,
        DriftRule::ReachedOnlyThroughFields,
        DriftRule::UnknownValueRefused,
        DriftRule::KnownValues,
        DriftRule::UnknownRequestTypeKillsInput,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            DriftRule::TrailingElementIgnored => "an extra trailing element is ignored",
            DriftRule::NamedTupleRefusesExtra => "a named tuple refuses extra elements",
            DriftRule::AbsentTakesDefault => "an absent field takes its default",
            DriftRule::AbsentRequiredRefused => "an absent required field is refused (missing-field)",
            DriftRule::PositionShifted => "a positional insertion or removal shifts every later field",
            DriftRule::PositionalNameNotOnWire => "positional: the name is not on the wire",
            DriftRule::UnknownKeyIgnored => "an unknown key is ignored",
            DriftRule::RenamedKeyDropsValue => {
                "a renamed key: the reader ignores it and misses its own (its default, or missing-field)"
            }
            DriftRule::OmittedTakesReadersDefault => {
                "a writer omits a field equal to its default and the reader fills in its own"
            }
            DriftRule::DefaultWrittenInFull => "the struct is written in full: defaults are not read",
            DriftRule::TypeAcceptsOthers => "the reader's type accepts every value of the writer's",
            DriftRule::TypeRefusesOthers => "the reader's type refuses values of the writer's",
            DriftRule::EncodingChanged => "array and map do not read each other",
            DriftRule::ReachedOnlyThroughFields => "reached only through the fields that name it",
            DriftRule::UnknownValueRefused => "a value outside the reader's enum is refused",
            DriftRule::KnownValues => "every value the writer sends is known to the reader",
            DriftRule::UnknownRequestTypeKillsInput => "an unknown request type kills the engine's input thread",
        }
    }
}

/// What changed.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeKind {
    StructAdded,
    StructRemoved,
    EncodingChanged { a: Encoding, b: Encoding },
    FieldAdded { index: usize, appended: bool, default: Option<Json> },
    FieldRemoved { index: usize, trailing: bool, default: Option<Json> },
    FieldMoved { a: usize, b: usize },
    FieldRenamed { index: usize, a: String, b: String },
    FieldRetyped { a: String, b: String },
    DefaultChanged { a: Option<Json>, b: Option<Json> },
    EnumMemberAdded { value: Json },
    EnumMemberRemoved { value: Json },
    RequestTypeAdded { byte: String },
    RequestTypeRemoved { byte: String },
}

fn default_text(d: &Option<Json>) -> String {
    d.as_ref().map_or_else(|| "required".to_string(), |v| v.to_string())
}

impl ChangeKind {
    /// The kind's name in reports.
    pub fn name(&self) -> &'static str {
        match self {
            ChangeKind::StructAdded => "struct_added",
            ChangeKind::StructRemoved => "struct_removed",
            ChangeKind::EncodingChanged { .. } => "encoding_changed",
            ChangeKind::FieldAdded { .. } => "field_added",
            ChangeKind::FieldRemoved { .. } => "field_removed",
            ChangeKind::FieldMoved { .. } => "field_moved",
            ChangeKind::FieldRenamed { .. } => "field_renamed",
            ChangeKind::FieldRetyped { .. } => "field_retyped",
            ChangeKind::DefaultChanged { .. } => "default_changed",
            ChangeKind::EnumMemberAdded { .. } => "enum_member_added",
            ChangeKind::EnumMemberRemoved { .. } => "enum_member_removed",
            ChangeKind::RequestTypeAdded { .. } => "request_type_added",
            ChangeKind::RequestTypeRemoved { .. } => "request_type_removed",
        }
    }

    /// The change in words.
    pub fn detail(&self) -> String {
        match self {
            ChangeKind::StructAdded => "new struct".into(),
            ChangeKind::StructRemoved => "struct gone".into(),
            ChangeKind::EncodingChanged { a, b } => format!("{} -> {}", a.as_str(), b.as_str()),
            ChangeKind::FieldAdded { index, appended, default } => format!(
                "added at {index}{} (default {})",
                if *appended { ", appended" } else { "" },
                default_text(default)
            ),
            ChangeKind::FieldRemoved { index, trailing, default } => format!(
                "removed from {index}{} (default {})",
                if *trailing { ", trailing" } else { "" },
                default_text(default)
            ),
            ChangeKind::FieldMoved { a, b } => format!("moved from {a} to {b}"),
            ChangeKind::FieldRenamed { index, a, b } => format!("at {index}: {a} -> {b}"),
            ChangeKind::FieldRetyped { a, b } => format!("{a} -> {b}"),
            ChangeKind::DefaultChanged { a, b } => format!("default {} -> {}", default_text(a), default_text(b)),
            ChangeKind::EnumMemberAdded { value } => format!("member {value} added"),
            ChangeKind::EnumMemberRemoved { value } => format!("member {value} removed"),
            ChangeKind::RequestTypeAdded { byte } => format!("request type 0x{byte} added"),
            ChangeKind::RequestTypeRemoved { byte } => format!("request type 0x{byte} removed"),
        }
    }
}

/// One change, classified for both readers.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// `Struct` or `Struct.field` (`enum Name`, `request types`).
    pub path: String,
    pub kind: ChangeKind,
    /// A peer of release A reading release B's bytes.
    pub a_reads_b: (DriftVerdict, DriftRule),
    /// A peer of release B reading release A's bytes.
    pub b_reads_a: (DriftVerdict, DriftRule),
}

#[cfg(test)]
mod tests {
    //! The rules no pair of committed dumps shows yet, on made-up
    //! schemas (tests/schema_diff.rs shows the others on real pairs).
    use serde_json::json;

    use super::compare::{members, retyped};
    use super::*;

    fn field(name: &str, ty: &str, default: Option<Json>) -> FieldDef {
        FieldDef { name: name.into(), ty: ty.into(), default }
    }

    fn schema(types: Vec<TypeDef>) -> Schema {
        Schema { release: "x".into(), types, enums: Vec::new(), request_types: Vec::new() }
    }

    fn one(encoding: Encoding, omit_defaults: bool, fields: Vec<FieldDef>) -> Schema {
        schema(vec![TypeDef { name: "T".into(), encoding, omit_defaults, fields }])
    }

    #[test]
    fn a_named_tuple_refuses_what_it_gained_and_a_required_field_its_reader_lacks() {
        let a = one(Encoding::NamedTuple, false, vec![field("x", "int", None)]);
        let b = one(Encoding::NamedTuple, false, vec![field("x", "int", None), field("y", "int", None)]);
        let c = &diff(&a, &b)[0];
        assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::NamedTupleRefusesExtra));
        assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::AbsentRequiredRefused));
    }

    #[test]
    fn a_positional_rename_is_compatible_unless_the_type_changed_too() {
        let a = one(Encoding::ArrayLike, false, vec![field("x", "int", None)]);
        let b = one(Encoding::ArrayLike, false, vec![field("y", "int", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (DriftVerdict::Compatible, DriftRule::PositionalNameNotOnWire));
        let b = one(Encoding::ArrayLike, false, vec![field("y", "str", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers));
    }

    #[test]
    fn an_array_that_became_a_map_is_breaking() {
        let a = one(Encoding::ArrayLike, false, vec![field("x", "int", None)]);
        let b = one(Encoding::MapStruct, false, vec![field("x", "int", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (DriftVerdict::Breaking, DriftRule::EncodingChanged));
    }

    #[test]
    fn a_changed_default_of_a_struct_written_in_full_is_compatible() {
        let a = one(Encoding::Dataclass, false, vec![field("x", "int", Some(json!(1)))]);
        let b = one(Encoding::Dataclass, false, vec![field("x", "int", Some(json!(2)))]);
        let c = &diff(&a, &b)[0];
        assert_eq!(
            (c.a_reads_b, c.b_reads_a),
            (
                (DriftVerdict::Compatible, DriftRule::DefaultWrittenInFull),
                (DriftVerdict::Compatible, DriftRule::DefaultWrittenInFull)
            )
        );
        // ... and breaking when the writer omits defaults.
        let a = one(Encoding::MapStruct, true, vec![field("x", "int", Some(json!(1)))]);
        let b = one(Encoding::MapStruct, true, vec![field("x", "int", Some(json!(2)))]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (DriftVerdict::Breaking, DriftRule::OmittedTakesReadersDefault));
    }

    #[test]
    fn an_enum_member_or_a_request_type_added_breaks_the_older_reader_only() {
        let mut a = schema(Vec::new());
        let mut b = schema(Vec::new());
        a.enums.push(EnumDef { name: "E".into(), members: vec![("A".into(), json!(0))] });
        b.enums.push(EnumDef { name: "E".into(), members: vec![("A".into(), json!(0)), ("B".into(), json!(1))] });
        a.request_types.push(("ADD".into(), "00".into()));
        b.request_types.extend([("ADD".into(), "00".into()), ("NEW".into(), "06".into())]);
        let cs = diff(&a, &b);
        assert_eq!(cs[0].a_reads_b, (DriftVerdict::Breaking, DriftRule::UnknownValueRefused));
        assert_eq!(cs[0].b_reads_a, (DriftVerdict::Compatible, DriftRule::KnownValues));
        assert_eq!(cs[1].a_reads_b, (DriftVerdict::Breaking, DriftRule::UnknownRequestTypeKillsInput));
        let back = diff(&b, &a);
        assert_eq!(back[0].b_reads_a, (DriftVerdict::Breaking, DriftRule::UnknownValueRefused));
        assert!(matches!(back[1].kind, ChangeKind::RequestTypeRemoved { .. }));
    }

    #[test]
    fn union_members_split_at_the_top_level_only() {
        assert_eq!(members("dict[str, int | None] | None"), ["dict[str, int | None]", "None"]);
        assert_eq!(retyped("int | None", "int"), (DriftVerdict::Compatible, DriftRule::TypeAcceptsOthers));
        assert_eq!(retyped("int", "int | None"), (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers));
    }

    #[test]
    fn versions_sort_by_their_numbers() {
        let mut v = vec!["0.10.0", "0.9.2", "git-57b49061", "0.22.1"];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(v, ["0.9.2", "0.10.0", "0.22.1", "git-57b49061"]);
    }
}
