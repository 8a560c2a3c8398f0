//! Reading a release's schema dump
//! (`golden/generate/schema/<dialect>-<version>.json`, written by
//! `golden/generate/generate.py --schema-dump` from the installed classes):
//! its structs with their encoding (`array_like struct`, `namedtuple`,
//! `map struct`, `dataclass`), fields, types and defaults, its enums and
//! its request-type bytes; and finding the dumps of a dialect, ordered by
//! version number.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

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
    pub(super) fn parse(s: &str) -> Option<Encoding> {
        Some(match s {
            "array_like struct" => Encoding::ArrayLike,
            "namedtuple" => Encoding::NamedTuple,
            "map struct" => Encoding::MapStruct,
            "dataclass" => Encoding::Dataclass,
            _ => return None,
        })
    }

    pub(super) fn positional(self) -> bool {
        matches!(self, Encoding::ArrayLike | Encoding::NamedTuple)
    }

    pub(super) fn as_str(self) -> &'static str {
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
