//! Golden corpora (docs/case-format.md): walking a corpus directory and
//! parsing its cases, once for the whole suite.
//!
//! - A case file is any `*.json` file below the corpus directory with a
//!   top-level `"case"` key (§2.1); other JSON files (schema dumps) are not
//!   cases and are passed over. [`json_files`] is the one walk.
//! - A file that is not JSON, or a case missing a contract key, is a
//!   [`CorpusLoadError`] naming the file (§9.1): reported as a failure, never
//!   skipped.
//! - A `message` case (§4) has hex frames, the engine's verdict (`expect`),
//!   the canonical view (`value`, required when accepted), the encode mode
//!   and optionally the drift paths (§7). Other kinds carry `input` and
//!   `expected` objects, checked by whoever implements the kind; which
//!   kinds those are is the caller's to say (`other_kinds` of [`load`]).
//!   A message type or kind this build does not know is
//!   [`Body::Unsupported`], with the reason (§9.4).
//!
//! Case files are read with `engine_protocol::view::parse_json`, which reads
//! views as deep as the decoder's depth limit.

use std::path::{Path, PathBuf};

use engine_protocol::{Dialect, MessageKind, ReleaseSchema};
use serde_json::Value as Json;

use crate::outcome::EngineVerdict;

/// What the engine's own decoder said of a message case: its `expect` (§4).
pub type Expect = EngineVerdict;

/// `encode` of a message case (§4): whether the encoder must reproduce the
/// frames byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeMode {
    Exact,
    Equivalent,
}

/// The kind-specific part of a case.
#[derive(Debug, Clone)]
pub enum Body {
    Message {
        message: MessageKind,
        frames: Vec<Vec<u8>>,
        expect: Expect,
        value: Option<Json>,
        encode: EncodeMode,
        /// Optional project key: drift paths the decoder must report.
        drift: Option<Vec<String>>,
    },
    /// `stop_detection`, `logprob_shaping`, `translation` and future kinds:
    /// `input` and `expected` objects checked by their own modules.
    Other { input: Json, expected: Json },
    /// A case this build cannot even parse the body of (a message type or
    /// kind it does not know): reported as skipped with the reason, and a
    /// failure under `--deny-skips`.
    Unsupported(String),
}

/// One golden case.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub file: PathBuf,
    pub dialect: String,
    pub version: String,
    pub kind: String,
    pub doc: String,
    pub provenance: Json,
    pub body: Body,
}

impl Case {
    /// The case as reports name it: `<dialect>/<version>/<case id>` (§2.4).
    pub fn report_id(&self) -> String {
        format!("{}/{}/{}", self.dialect, self.version, self.id)
    }

    /// The report group: `<dialect>/<version>/<first segment of the id>`.
    pub fn group(&self) -> String {
        let g = self.id.split('/').next().unwrap_or("");
        format!("{}/{}/{}", self.dialect, self.version, g)
    }

    /// The schema table of the case's dialect and version, if this build
    /// has one (a dialect this build does not know has none).
    pub fn release(&self) -> Option<&'static ReleaseSchema> {
        let dialect: Dialect = self.dialect.parse().ok()?;
        engine_protocol::release(dialect, &self.version).ok()
    }

    /// The message type, frames and engine verdict of a `message` case.
    pub fn message(&self) -> Option<(MessageKind, &[Vec<u8>], &Expect)> {
        match &self.body {
            Body::Message { message, frames, expect, .. } => Some((*message, frames, expect)),
            _ => None,
        }
    }
}

/// A file that could not be read as a case.
#[derive(Debug)]
pub struct CorpusLoadError {
    pub file: PathBuf,
    /// What is wrong with it ([`CorpusError::Read`], [`CorpusError::Json`]
    /// or [`CorpusError::Case`]).
    pub error: CorpusError,
}

/// Why a corpus, or one file of it, could not be loaded. Each variant names
/// the directory or file, or (for [`CorpusError::Case`]) the key.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A directory of the walk could not be listed.
    #[error("{}: {source}", dir.display())]
    ReadDir { dir: PathBuf, source: std::io::Error },
    /// A file could not be read.
    #[error("cannot read: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    /// A file is not JSON (as case files are read, deep views allowed).
    #[error("not valid JSON: {source}")]
    Json { file: PathBuf, source: engine_protocol::view::JsonError },
    /// A case object with a wrong or missing key.
    #[error(transparent)]
    Case(#[from] CaseError),
    /// Files that did not load ([`message_cases`]): one line per file.
    #[error("{}", load_lines(.0))]
    Load(Vec<CorpusLoadError>),
}

fn load_lines(errors: &[CorpusLoadError]) -> String {
    let lines: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.file.display(), e.error)).collect();
    lines.join("\n")
}

/// Why a case object is not a case: which key is wrong, in which case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaseError {
    /// The case id itself (`case`) is missing or not a string.
    #[error(transparent)]
    Id(CaseKeyError),
    /// Another key of case `id`.
    #[error("case {id}: {error}")]
    Key {
        id: String,
        #[source]
        error: CaseKeyError,
    },
}

/// A wrong or missing contract key of a case object (docs/case-format.md).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CaseKeyError {
    #[error("missing key `{key}`")]
    Missing { key: &'static str },
    #[error("key `{key}` must be a string, got {got}")]
    NotString { key: &'static str, got: Json },
    #[error("`provenance.source` must be a string")]
    ProvenanceSource,
    /// `frames` is missing or not a list of hex strings.
    #[error(transparent)]
    Frames(#[from] crate::hex::FramesError),
    /// `expect` is missing or not a verdict.
    #[error(transparent)]
    Expect(#[from] crate::outcome::ExpectError),
    #[error("accepted case without `value`")]
    AcceptedWithoutValue,
    /// `encode` is neither `"exact"` nor `"equivalent"` (or the latter is
    /// missing on an accepted case).
    #[error("`encode` must be \"exact\" or \"equivalent\", got {got:?}")]
    Encode { got: Option<String> },
    #[error("`drift` entries must be strings")]
    DriftEntry,
    #[error("`drift` must be an array of paths")]
    DriftNotArray,
}

/// Every `*.json` file below `dir` (or `dir` itself when it is a file), in
/// path order. An unreadable directory is an error naming it.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, CorpusError> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CorpusError> {
        let read_dir = |source| CorpusError::ReadDir { dir: dir.to_path_buf(), source };
        for entry in std::fs::read_dir(dir).map_err(read_dir)? {
            let path = entry.map_err(read_dir)?.path();
            if path.is_dir() {
                walk(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    if dir.is_file() {
        files.push(dir.to_path_buf());
    } else {
        walk(dir, &mut files)?;
    }
    files.sort();
    Ok(files)
}

/// Reads one JSON file as a case file is read (deep views allowed).
pub fn read_json(file: &Path) -> Result<Json, CorpusError> {
    let text =
        std::fs::read_to_string(file).map_err(|source| CorpusError::Read { file: file.to_path_buf(), source })?;
    engine_protocol::view::parse_json(&text).map_err(|source| CorpusError::Json { file: file.to_path_buf(), source })
}

/// The cases and load errors under `dir`, in path order. `other_kinds` are
/// the non-message kinds the caller checks; a case of any other kind is
/// [`Body::Unsupported`].
pub fn load(dir: &Path, other_kinds: &[&str]) -> Result<(Vec<Case>, Vec<CorpusLoadError>), CorpusError> {
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for file in json_files(dir)? {
        let json = match read_json(&file) {
            Ok(j) => j,
            Err(error) => {
                errors.push(CorpusLoadError { file, error });
                continue;
            }
        };
        if json.get("case").is_none() {
            continue; // not a case file (e.g. a schema dump): outside the contract
        }
        match parse_case(&file, &json, other_kinds) {
            Ok(c) => cases.push(c),
            Err(error) => errors.push(CorpusLoadError { file, error: error.into() }),
        }
    }
    Ok((cases, errors))
}

/// The `message` cases under `dir` whose dialect and version have a schema
/// table, in path order; a load error is an error (naming every file).
pub fn message_cases(dir: &Path) -> Result<Vec<Case>, CorpusError> {
    let (cases, errors) = load(dir, &[])?;
    if !errors.is_empty() {
        return Err(CorpusError::Load(errors));
    }
    Ok(cases.into_iter().filter(|c| c.message().is_some() && c.release().is_some()).collect())
}

fn string(json: &Json, key: &'static str) -> Result<String, CaseKeyError> {
    match json.get(key) {
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(CaseKeyError::NotString { key, got: other.clone() }),
        None => Err(CaseKeyError::Missing { key }),
    }
}

/// Parses one case object; errors say which key is wrong.
pub fn parse_case(file: &Path, json: &Json, other_kinds: &[&str]) -> Result<Case, CaseError> {
    let id = string(json, "case").map_err(CaseError::Id)?;
    let with_id = |error: CaseKeyError| CaseError::Key { id: id.clone(), error };
    let dialect = string(json, "dialect").map_err(with_id)?;
    let version = string(json, "version").map_err(with_id)?;
    let kind = string(json, "kind").map_err(with_id)?;
    let doc = json.get("doc").and_then(Json::as_str).unwrap_or("").to_string();
    let provenance =
        json.get("provenance").cloned().ok_or(CaseKeyError::Missing { key: "provenance" }).map_err(with_id)?;
    if provenance.get("source").and_then(Json::as_str).is_none() {
        return Err(with_id(CaseKeyError::ProvenanceSource));
    }
    let body = if kind == "message" {
        message_body(json).map_err(with_id)?
    } else if other_kinds.contains(&kind.as_str()) {
        let input = json.get("input").cloned().ok_or(CaseKeyError::Missing { key: "input" }).map_err(with_id)?;
        let expected =
            json.get("expected").cloned().ok_or(CaseKeyError::Missing { key: "expected" }).map_err(with_id)?;
        Body::Other { input, expected }
    } else {
        Body::Unsupported(format!("kind `{kind}` is not implemented by this build"))
    };
    Ok(Case { id, file: file.to_path_buf(), dialect, version, kind, doc, provenance, body })
}

/// The body of a `message` case (§4): [`Body::Unsupported`] for a message
/// type this build does not know.
fn message_body(json: &Json) -> Result<Body, CaseKeyError> {
    let name = string(json, "message")?;
    let Some(message) = MessageKind::parse(&name) else {
        return Ok(Body::Unsupported(format!("message type `{name}` is not implemented by this build")));
    };
    let frames = crate::hex::decode_frames(json.get("frames").unwrap_or(&Json::Null))?;
    let expect = EngineVerdict::from_json(json.get("expect").unwrap_or(&Json::Null))?;
    let value = json.get("value").cloned();
    if expect == Expect::Accept && value.is_none() {
        return Err(CaseKeyError::AcceptedWithoutValue);
    }
    let encode = match json.get("encode").and_then(Json::as_str) {
        Some("exact") => EncodeMode::Exact,
        Some("equivalent") | None if expect != Expect::Accept => EncodeMode::Equivalent,
        Some("equivalent") => EncodeMode::Equivalent,
        other => return Err(CaseKeyError::Encode { got: other.map(str::to_string) }),
    };
    let drift = match json.get("drift") {
        None => None,
        Some(Json::Array(xs)) => Some(
            xs.iter()
                .map(|x| x.as_str().map(str::to_string).ok_or(CaseKeyError::DriftEntry))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(CaseKeyError::DriftNotArray),
    };
    Ok(Body::Message { message, frames, expect, value, encode, drift })
}

/// This repository's `golden/` directory (the committed corpus).
pub fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden")
}

/// The JSON of a committed golden case,
/// `golden/<dialect>/<version>/<id>.json`; panics (a test helper) naming
/// the file when it cannot be read.
#[track_caller]
pub fn golden_json(dialect: &str, version: &str, id: &str) -> Json {
    let path = golden_dir().join(dialect).join(version).join(format!("{id}.json"));
    read_json(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The frames of a committed golden message case; panics naming the file.
#[track_caller]
pub fn golden_frames(dialect: &str, version: &str, id: &str) -> Vec<Vec<u8>> {
    let json = golden_json(dialect, version, id);
    let frames = json.get("frames").unwrap_or(&Json::Null);
    crate::hex::decode_frames(frames).unwrap_or_else(|e| panic!("golden {dialect}/{version}/{id}: {e}"))
}
