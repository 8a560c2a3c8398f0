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

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value as Json};

/// One struct of a dump.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeDef {
    pub name: String,
    pub encoding: Encoding,
    /// Fields equal to their defaults are left out when written.
    pub omit_defaults: bool,
    pub fields: Vec<FieldDef>,
}

/// How a struct goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    ArrayLike,
    NamedTuple,
    MapStruct,
    Dataclass,
}

impl Encoding {
    fn parse(s: &str) -> Option<Encoding> {
        Some(match s {
            "array_like struct" => Encoding::ArrayLike,
            "namedtuple" => Encoding::NamedTuple,
            "map struct" => Encoding::MapStruct,
            "dataclass" => Encoding::Dataclass,
            _ => return None,
        })
    }

    fn positional(self) -> bool {
        matches!(self, Encoding::ArrayLike | Encoding::NamedTuple)
    }

    fn as_str(self) -> &'static str {
        match self {
            Encoding::ArrayLike => "array_like struct",
            Encoding::NamedTuple => "namedtuple",
            Encoding::MapStruct => "map struct",
            Encoding::Dataclass => "dataclass",
        }
    }
}

/// One field of a struct.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDef {
    pub name: String,
    pub ty: String,
    /// `None`: required.
    pub default: Option<Json>,
}

/// An enum of a dump: its members' names and values.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumDef {
    pub name: String,
    pub members: Vec<(String, Json)>,
}

/// A release's dump.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    pub release: String,
    pub types: Vec<TypeDef>,
    pub enums: Vec<EnumDef>,
    /// `(name, byte as hex)`.
    pub request_types: Vec<(String, String)>,
}

/// Why a dump could not be read.
#[derive(Debug)]
pub struct DumpError {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for DumpError {}

/// The dump of `dialect` (`vllm`, `tokenspeed`) `version` under `dir`.
pub fn dump_path(dir: &Path, dialect: &str, version: &str) -> PathBuf {
    dir.join(format!("{dialect}-{version}.json"))
}

/// The releases of `dialect` that have a dump under `dir`, in version order.
pub fn releases(dir: &Path, dialect: &str) -> Vec<String> {
    let prefix = format!("{dialect}-");
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&prefix)?.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    out.sort_by_key(|v| version_key(v));
    out
}

/// A version's numeric parts for ordering (`0.9.2` before `0.10.0`);
/// non-numeric parts (a git revision) sort last, by text.
pub fn version_key(v: &str) -> (Vec<u64>, String) {
    let nums: Option<Vec<u64>> = v.split('.').map(|p| p.parse().ok()).collect();
    match nums {
        Some(n) => (n, String::new()),
        None => (vec![u64::MAX], v.to_string()),
    }
}

/// Reads a dump.
pub fn load(path: &Path) -> Result<Schema, DumpError> {
    let err = |message: String| DumpError { path: path.to_path_buf(), message };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let j: Json = serde_json::from_str(&text).map_err(|e| err(format!("not JSON: {e}")))?;
    let release = ["vllm", "tokenspeed"]
        .iter()
        .find_map(|k| j.get(*k).and_then(Json::as_str))
        .ok_or_else(|| err("no `vllm` or `tokenspeed` version".into()))?
        .to_string();
    let mut types = Vec::new();
    for (i, t) in
        j.get("types").and_then(Json::as_array).ok_or_else(|| err("no `types` list".into()))?.iter().enumerate()
    {
        let at = |k: &str| format!("types[{i}].{k}");
        let name = t.get("name").and_then(Json::as_str).ok_or_else(|| err(at("name")))?;
        let enc = t.get("encoding").and_then(Json::as_str).ok_or_else(|| err(at("encoding")))?;
        let encoding =
            Encoding::parse(enc).ok_or_else(|| err(format!("{}: unknown encoding {enc:?}", at("encoding"))))?;
        let mut fields = Vec::new();
        for (k, f) in t.get("fields").and_then(Json::as_array).ok_or_else(|| err(at("fields")))?.iter().enumerate() {
            let fat = |x: &str| format!("types[{i}].fields[{k}].{x}");
            let fname =
                f.get("wire_name").or_else(|| f.get("name")).and_then(Json::as_str).ok_or_else(|| err(fat("name")))?;
            let ty = f.get("type").and_then(Json::as_str).ok_or_else(|| err(fat("type")))?;
            let default = match f.get("default") {
                Some(Json::String(s)) if s == "required" => None,
                Some(d) => Some(d.clone()),
                None => return Err(err(fat("default"))),
            };
            fields.push(FieldDef { name: fname.into(), ty: ty.into(), default });
        }
        let omit_defaults = t.get("omit_defaults").and_then(Json::as_bool).unwrap_or(false);
        types.push(TypeDef { name: name.into(), encoding, omit_defaults, fields });
    }
    let mut enums = Vec::new();
    for e in j.get("enums").and_then(Json::as_array).map_or(&[][..], Vec::as_slice) {
        let name = e.get("name").and_then(Json::as_str).ok_or_else(|| err("enums[].name".into()))?;
        let members = e
            .get("members")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|m| Some((m.get("name")?.as_str()?.to_string(), m.get("value")?.clone())))
            .collect();
        enums.push(EnumDef { name: name.into(), members });
    }
    let request_types = j
        .get("request_types")
        .and_then(Json::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|r| Some((r.get("name")?.as_str()?.to_string(), r.get("byte")?.as_str()?.to_string())))
        .collect();
    Ok(Schema { release, types, enums, request_types })
}

/// How a reader fares with the other release's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Decodes, meaning kept.
    Compatible,
    /// Decodes; what the reader does not know is ignored (and reported as
    /// drift by this suite's decoder).
    Drift,
    /// Refused, or decoded with another meaning.
    Breaking,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Compatible => "compatible",
            Verdict::Drift => "drift",
            Verdict::Breaking => "breaking",
        }
    }

    /// The verdict named `s`.
    pub fn parse(s: &str) -> Option<Verdict> {
        [Verdict::Compatible, Verdict::Drift, Verdict::Breaking].into_iter().find(|v| v.as_str() == s)
    }
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
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

impl Rule {
    /// Every rule.
    pub const ALL: [Rule; 17] = [
        Rule::TrailingElementIgnored,
        Rule::NamedTupleRefusesExtra,
        Rule::AbsentTakesDefault,
        Rule::AbsentRequiredRefused,
        Rule::PositionShifted,
        Rule::PositionalNameNotOnWire,
        Rule::UnknownKeyIgnored,
        Rule::RenamedKeyDropsValue,
        Rule::OmittedTakesReadersDefault,
        Rule::DefaultWrittenInFull,
        Rule::TypeAcceptsOthers,
        Rule::TypeRefusesOthers,
        Rule::EncodingChanged,
        Rule::ReachedOnlyThroughFields,
        Rule::UnknownValueRefused,
        Rule::KnownValues,
        Rule::UnknownRequestTypeKillsInput,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Rule::TrailingElementIgnored => "an extra trailing element is ignored",
            Rule::NamedTupleRefusesExtra => "a named tuple refuses extra elements",
            Rule::AbsentTakesDefault => "an absent field takes its default",
            Rule::AbsentRequiredRefused => "an absent required field is refused (missing-field)",
            Rule::PositionShifted => "a positional insertion or removal shifts every later field",
            Rule::PositionalNameNotOnWire => "positional: the name is not on the wire",
            Rule::UnknownKeyIgnored => "an unknown key is ignored",
            Rule::RenamedKeyDropsValue => {
                "a renamed key: the reader ignores it and misses its own (its default, or missing-field)"
            }
            Rule::OmittedTakesReadersDefault => {
                "a writer omits a field equal to its default and the reader fills in its own"
            }
            Rule::DefaultWrittenInFull => "the struct is written in full: defaults are not read",
            Rule::TypeAcceptsOthers => "the reader's type accepts every value of the writer's",
            Rule::TypeRefusesOthers => "the reader's type refuses values of the writer's",
            Rule::EncodingChanged => "array and map do not read each other",
            Rule::ReachedOnlyThroughFields => "reached only through the fields that name it",
            Rule::UnknownValueRefused => "a value outside the reader's enum is refused",
            Rule::KnownValues => "every value the writer sends is known to the reader",
            Rule::UnknownRequestTypeKillsInput => "an unknown request type kills the engine's input thread",
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
    pub a_reads_b: (Verdict, Rule),
    /// A peer of release B reading release A's bytes.
    pub b_reads_a: (Verdict, Rule),
}

/// The changes from `a` to `b`, struct by struct in `b`'s order (removed
/// structs after), then enums, then request types.
pub fn diff(a: &Schema, b: &Schema) -> Vec<Change> {
    let mut out = Vec::new();
    for tb in &b.types {
        match a.types.iter().find(|t| t.name == tb.name) {
            None => out.push(Change {
                path: tb.name.clone(),
                kind: ChangeKind::StructAdded,
                a_reads_b: (Verdict::Compatible, Rule::ReachedOnlyThroughFields),
                b_reads_a: (Verdict::Compatible, Rule::ReachedOnlyThroughFields),
            }),
            Some(ta) => diff_struct(ta, tb, &mut out),
        }
    }
    for ta in a.types.iter().filter(|t| !b.types.iter().any(|x| x.name == t.name)) {
        out.push(Change {
            path: ta.name.clone(),
            kind: ChangeKind::StructRemoved,
            a_reads_b: (Verdict::Compatible, Rule::ReachedOnlyThroughFields),
            b_reads_a: (Verdict::Compatible, Rule::ReachedOnlyThroughFields),
        });
    }
    diff_enums(a, b, &mut out);
    diff_request_types(a, b, &mut out);
    out
}

/// A reader's verdict on a field its writer does not have (`default`: the
/// reader's default).
fn absent(default: &Option<Json>) -> (Verdict, Rule) {
    match default {
        Some(_) => (Verdict::Compatible, Rule::AbsentTakesDefault),
        None => (Verdict::Breaking, Rule::AbsentRequiredRefused),
    }
}

/// A reader's verdict on a field only its writer has.
fn extra(enc: Encoding) -> (Verdict, Rule) {
    match enc {
        Encoding::ArrayLike => (Verdict::Drift, Rule::TrailingElementIgnored),
        Encoding::NamedTuple => (Verdict::Breaking, Rule::NamedTupleRefusesExtra),
        Encoding::MapStruct | Encoding::Dataclass => (Verdict::Drift, Rule::UnknownKeyIgnored),
    }
}

fn diff_struct(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    if ta.encoding.positional() != tb.encoding.positional() {
        out.push(Change {
            path: tb.name.clone(),
            kind: ChangeKind::EncodingChanged { a: ta.encoding, b: tb.encoding },
            a_reads_b: (Verdict::Breaking, Rule::EncodingChanged),
            b_reads_a: (Verdict::Breaking, Rule::EncodingChanged),
        });
        return;
    }
    if tb.encoding.positional() {
        diff_positional_fields(ta, tb, out);
    } else {
        diff_keyed_fields(ta, tb, out);
    }
}

/// `<struct>.<field>`, the path of a field change (named as in `tb`).
fn field_path(tb: &TypeDef, field: &str) -> String {
    format!("{}.{field}", tb.name)
}

/// A field both releases have (`ta.fields[i]`, `tb.fields[j]`): its type
/// and its default.
fn diff_common_field(ta: &TypeDef, tb: &TypeDef, (i, j): (usize, usize), out: &mut Vec<Change>) {
    let (fa, fb) = (&ta.fields[i], &tb.fields[j]);
    if fa.ty != fb.ty {
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::FieldRetyped { a: fa.ty.clone(), b: fb.ty.clone() },
            a_reads_b: retyped(&fa.ty, &fb.ty),
            b_reads_a: retyped(&fb.ty, &fa.ty),
        });
    }
    if fa.default != fb.default {
        // The writer omits a field equal to its own default; a struct
        // written in full carries every value.
        let read = |writer: &TypeDef| {
            if writer.omit_defaults {
                (Verdict::Breaking, Rule::OmittedTakesReadersDefault)
            } else {
                (Verdict::Compatible, Rule::DefaultWrittenInFull)
            }
        };
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::DefaultChanged { a: fa.default.clone(), b: fb.default.clone() },
            a_reads_b: read(tb),
            b_reads_a: read(ta),
        });
    }
}

/// The fields of two positional structs (array-like, named tuples): by
/// place, so a rename is invisible and an insertion shifts what follows.
fn diff_positional_fields(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    let shifted = (Verdict::Breaking, Rule::PositionShifted);
    let n = ta.fields.len().min(tb.fields.len());
    let a_has = |name: &str| ta.fields.iter().any(|f| f.name == name);
    let b_has = |name: &str| tb.fields.iter().any(|f| f.name == name);
    // Fields that keep their name but change their place: an insertion
    // or a removal before them (or a reorder).
    let moved: Vec<(usize, usize)> = ta
        .fields
        .iter()
        .enumerate()
        .filter_map(|(i, fa)| tb.fields.iter().position(|fb| fb.name == fa.name).map(|j| (i, j)))
        .filter(|(i, j)| i != j)
        .collect();
    let renamed_at = |i: usize| i < n && !a_has(&tb.fields[i].name) && !b_has(&ta.fields[i].name);
    for i in 0..n {
        let (fa, fb) = (&ta.fields[i], &tb.fields[i]);
        if fa.name == fb.name {
            diff_common_field(ta, tb, (i, i), out);
        } else if renamed_at(i) {
            let v = if fa.ty == fb.ty {
                (Verdict::Compatible, Rule::PositionalNameNotOnWire)
            } else {
                (Verdict::Breaking, Rule::TypeRefusesOthers)
            };
            out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldRenamed { index: i, a: fa.name.clone(), b: fb.name.clone() },
                a_reads_b: v,
                b_reads_a: v,
            });
        }
    }
    for &(i, j) in &moved {
        out.push(Change {
            path: field_path(tb, &tb.fields[j].name),
            kind: ChangeKind::FieldMoved { a: i, b: j },
            a_reads_b: shifted,
            b_reads_a: shifted,
        });
        diff_common_field(ta, tb, (i, j), out);
    }
    for (j, fb) in tb.fields.iter().enumerate() {
        if a_has(&fb.name) || renamed_at(j) {
            continue;
        }
        let appended = j >= ta.fields.len() && moved.is_empty();
        out.push(Change {
            path: field_path(tb, &fb.name),
            kind: ChangeKind::FieldAdded { index: j, appended, default: fb.default.clone() },
            a_reads_b: if appended { extra(tb.encoding) } else { shifted },
            b_reads_a: if appended { absent(&fb.default) } else { shifted },
        });
    }
    for (i, fa) in ta.fields.iter().enumerate() {
        if b_has(&fa.name) || renamed_at(i) {
            continue;
        }
        let trailing = i >= tb.fields.len() && moved.is_empty();
        out.push(Change {
            path: field_path(tb, &fa.name),
            kind: ChangeKind::FieldRemoved { index: i, trailing, default: fa.default.clone() },
            a_reads_b: if trailing { absent(&fa.default) } else { shifted },
            b_reads_a: if trailing { extra(ta.encoding) } else { shifted },
        });
    }
}

/// The fields of two keyed structs (maps, dataclasses): by name, a key
/// gone and one added at the same place with the same type a rename.
fn diff_keyed_fields(ta: &TypeDef, tb: &TypeDef, out: &mut Vec<Change>) {
    let added: Vec<usize> =
        (0..tb.fields.len()).filter(|&j| !ta.fields.iter().any(|f| f.name == tb.fields[j].name)).collect();
    let removed: Vec<usize> =
        (0..ta.fields.len()).filter(|&i| !tb.fields.iter().any(|f| f.name == ta.fields[i].name)).collect();
    for (j, fb) in tb.fields.iter().enumerate() {
        if let Some(i) = ta.fields.iter().position(|f| f.name == fb.name) {
            diff_common_field(ta, tb, (i, j), out);
        }
    }
    for &j in &added {
        let fb = &tb.fields[j];
        // A key gone at the same place with the same type: a rename.
        let renamed = removed.iter().copied().find(|&i| i == j && ta.fields[i].ty == fb.ty);
        match renamed {
            Some(i) => out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldRenamed { index: j, a: ta.fields[i].name.clone(), b: fb.name.clone() },
                a_reads_b: (Verdict::Breaking, Rule::RenamedKeyDropsValue),
                b_reads_a: (Verdict::Breaking, Rule::RenamedKeyDropsValue),
            }),
            None => out.push(Change {
                path: field_path(tb, &fb.name),
                kind: ChangeKind::FieldAdded {
                    index: j,
                    appended: j + 1 == tb.fields.len(),
                    default: fb.default.clone(),
                },
                a_reads_b: extra(tb.encoding),
                b_reads_a: absent(&fb.default),
            }),
        }
    }
    for &i in &removed {
        let fa = &ta.fields[i];
        if added.iter().any(|&j| j == i && tb.fields[j].ty == fa.ty) {
            continue;
        }
        out.push(Change {
            path: field_path(tb, &fa.name),
            kind: ChangeKind::FieldRemoved {
                index: i,
                trailing: i + 1 == ta.fields.len(),
                default: fa.default.clone(),
            },
            a_reads_b: absent(&fa.default),
            b_reads_a: extra(ta.encoding),
        });
    }
}

/// The members of a type string's top-level union (`int | None`).
fn members(ty: &str) -> Vec<String> {
    let (mut out, mut depth, mut cur) = (Vec::new(), 0i32, String::new());
    for c in ty.chars() {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            '|' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur.trim().to_string());
    out
}

/// A reader of type `reader` meeting values of type `writer`.
fn retyped(reader: &str, writer: &str) -> (Verdict, Rule) {
    let (r, w) = (members(reader), members(writer));
    if w.iter().all(|m| r.contains(m)) {
        (Verdict::Compatible, Rule::TypeAcceptsOthers)
    } else {
        (Verdict::Breaking, Rule::TypeRefusesOthers)
    }
}

fn diff_enums(a: &Schema, b: &Schema, out: &mut Vec<Change>) {
    for eb in &b.enums {
        let Some(ea) = a.enums.iter().find(|e| e.name == eb.name) else { continue };
        let has = |e: &EnumDef, v: &Json| e.members.iter().any(|(_, x)| x == v);
        for (_, v) in eb.members.iter().filter(|(_, v)| !has(ea, v)) {
            out.push(Change {
                path: format!("enum {}", eb.name),
                kind: ChangeKind::EnumMemberAdded { value: v.clone() },
                a_reads_b: (Verdict::Breaking, Rule::UnknownValueRefused),
                b_reads_a: (Verdict::Compatible, Rule::KnownValues),
            });
        }
        for (_, v) in ea.members.iter().filter(|(_, v)| !has(eb, v)) {
            out.push(Change {
                path: format!("enum {}", eb.name),
                kind: ChangeKind::EnumMemberRemoved { value: v.clone() },
                a_reads_b: (Verdict::Compatible, Rule::KnownValues),
                b_reads_a: (Verdict::Breaking, Rule::UnknownValueRefused),
            });
        }
    }
}

fn diff_request_types(a: &Schema, b: &Schema, out: &mut Vec<Change>) {
    let has = |s: &Schema, byte: &str| s.request_types.iter().any(|(_, x)| x == byte);
    for (_, byte) in b.request_types.iter().filter(|(_, x)| !has(a, x)) {
        out.push(Change {
            path: "request types".into(),
            kind: ChangeKind::RequestTypeAdded { byte: byte.clone() },
            a_reads_b: (Verdict::Breaking, Rule::UnknownRequestTypeKillsInput),
            b_reads_a: (Verdict::Compatible, Rule::KnownValues),
        });
    }
    for (_, byte) in a.request_types.iter().filter(|(_, x)| !has(b, x)) {
        out.push(Change {
            path: "request types".into(),
            kind: ChangeKind::RequestTypeRemoved { byte: byte.clone() },
            a_reads_b: (Verdict::Compatible, Rule::KnownValues),
            b_reads_a: (Verdict::Breaking, Rule::UnknownRequestTypeKillsInput),
        });
    }
}

/// The changes as text, one per line.
pub fn text(a: &str, b: &str, changes: &[Change]) -> String {
    let mut s = format!("{} changes from {a} to {b}\n", changes.len());
    for c in changes {
        s.push_str(&format!(
            "{}: {} {} | {a} reads {b}: {} ({}) | {b} reads {a}: {} ({})\n",
            c.path,
            c.kind.name(),
            c.kind.detail(),
            c.a_reads_b.0.as_str(),
            c.a_reads_b.1.describe(),
            c.b_reads_a.0.as_str(),
            c.b_reads_a.1.describe()
        ));
    }
    s
}

/// The changes as JSON.
pub fn to_json(a: &str, b: &str, changes: &[Change]) -> Json {
    let side = |(v, r): (Verdict, Rule)| json!({"verdict": v.as_str(), "rule": r.describe()});
    json!({
        "a": a,
        "b": b,
        "changes": changes.iter().map(|c| json!({
            "path": c.path,
            "change": c.kind.name(),
            "detail": c.kind.detail(),
            "a_reads_b": side(c.a_reads_b),
            "b_reads_a": side(c.b_reads_a),
        })).collect::<Vec<_>>(),
    })
}

/// The changes as a Markdown table.
pub fn markdown(a: &str, b: &str, changes: &[Change]) -> String {
    let mut s = format!("| where | change | {a} reads {b} | {b} reads {a} |\n| --- | --- | --- | --- |\n");
    for c in changes {
        s.push_str(&format!(
            "| `{}` | {}: {} | {} ({}) | {} ({}) |\n",
            c.path,
            c.kind.name(),
            c.kind.detail().replace('|', "\\|"),
            c.a_reads_b.0.as_str(),
            c.a_reads_b.1.describe(),
            c.b_reads_a.0.as_str(),
            c.b_reads_a.1.describe()
        ));
    }
    s
}

/// The worst verdict of the changes, either direction.
pub fn worst(changes: &[Change]) -> Option<Verdict> {
    changes.iter().map(|c| c.a_reads_b.0.max(c.b_reads_a.0)).max()
}

#[cfg(test)]
mod tests {
    //! The rules no pair of committed dumps shows yet, on made-up
    //! schemas (tests/schema_diff.rs shows the others on real pairs).
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
        assert_eq!(c.a_reads_b, (Verdict::Breaking, Rule::NamedTupleRefusesExtra));
        assert_eq!(c.b_reads_a, (Verdict::Breaking, Rule::AbsentRequiredRefused));
    }

    #[test]
    fn a_positional_rename_is_compatible_unless_the_type_changed_too() {
        let a = one(Encoding::ArrayLike, false, vec![field("x", "int", None)]);
        let b = one(Encoding::ArrayLike, false, vec![field("y", "int", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (Verdict::Compatible, Rule::PositionalNameNotOnWire));
        let b = one(Encoding::ArrayLike, false, vec![field("y", "str", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (Verdict::Breaking, Rule::TypeRefusesOthers));
    }

    #[test]
    fn an_array_that_became_a_map_is_breaking() {
        let a = one(Encoding::ArrayLike, false, vec![field("x", "int", None)]);
        let b = one(Encoding::MapStruct, false, vec![field("x", "int", None)]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (Verdict::Breaking, Rule::EncodingChanged));
    }

    #[test]
    fn a_changed_default_of_a_struct_written_in_full_is_compatible() {
        let a = one(Encoding::Dataclass, false, vec![field("x", "int", Some(json!(1)))]);
        let b = one(Encoding::Dataclass, false, vec![field("x", "int", Some(json!(2)))]);
        let c = &diff(&a, &b)[0];
        assert_eq!(
            (c.a_reads_b, c.b_reads_a),
            ((Verdict::Compatible, Rule::DefaultWrittenInFull), (Verdict::Compatible, Rule::DefaultWrittenInFull))
        );
        // ... and breaking when the writer omits defaults.
        let a = one(Encoding::MapStruct, true, vec![field("x", "int", Some(json!(1)))]);
        let b = one(Encoding::MapStruct, true, vec![field("x", "int", Some(json!(2)))]);
        assert_eq!(diff(&a, &b)[0].a_reads_b, (Verdict::Breaking, Rule::OmittedTakesReadersDefault));
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
        assert_eq!(cs[0].a_reads_b, (Verdict::Breaking, Rule::UnknownValueRefused));
        assert_eq!(cs[0].b_reads_a, (Verdict::Compatible, Rule::KnownValues));
        assert_eq!(cs[1].a_reads_b, (Verdict::Breaking, Rule::UnknownRequestTypeKillsInput));
        let back = diff(&b, &a);
        assert_eq!(back[0].b_reads_a, (Verdict::Breaking, Rule::UnknownValueRefused));
        assert!(matches!(back[1].kind, ChangeKind::RequestTypeRemoved { .. }));
    }

    #[test]
    fn union_members_split_at_the_top_level_only() {
        assert_eq!(members("dict[str, int | None] | None"), ["dict[str, int | None]", "None"]);
        assert_eq!(retyped("int | None", "int"), (Verdict::Compatible, Rule::TypeAcceptsOthers));
        assert_eq!(retyped("int", "int | None"), (Verdict::Breaking, Rule::TypeRefusesOthers));
    }

    #[test]
    fn versions_sort_by_their_numbers() {
        let mut v = vec!["0.10.0", "0.9.2", "git-57b49061", "0.22.1"];
        v.sort_by_key(|x| version_key(x));
        assert_eq!(v, ["0.9.2", "0.10.0", "0.22.1", "git-57b49061"]);
    }
}
