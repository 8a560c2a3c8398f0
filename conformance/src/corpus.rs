//! Loading golden cases (docs/case-format.md §9.1): every `*.json` file
//! below a directory that has a `"case"` key. A file that is not JSON, or a
//! case missing a contract key, is a load error naming the file, reported as
//! a failure, never skipped.

use std::path::{Path, PathBuf};

use engine_protocol::{MessageKind, RejectClass};
use serde_json::Value as Json;

/// What the engine's own decoder said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Accept,
    Reject(RejectClass),
}

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

/// A file that could not be read as a case.
#[derive(Debug, Clone)]
pub struct LoadError {
    pub file: PathBuf,
    pub message: String,
}

/// The cases and load errors under `dir`, in path order.
pub fn load(dir: &Path) -> Result<(Vec<Case>, Vec<LoadError>), String> {
    let mut files = Vec::new();
    collect_json(dir, &mut files).map_err(|e| format!("{}: {e}", dir.display()))?;
    files.sort();
    let mut cases = Vec::new();
    let mut errors = Vec::new();
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                errors.push(LoadError { file, message: format!("cannot read: {e}") });
                continue;
            }
        };
        let json: Json = match engine_protocol::view::parse_json(&text) {
            Ok(j) => j,
            Err(e) => {
                errors.push(LoadError { file, message: format!("not valid JSON: {e}") });
                continue;
            }
        };
        if json.get("case").is_none() {
            continue; // not a case file (e.g. a schema dump): outside the contract
        }
        match parse_case(&file, &json) {
            Ok(c) => cases.push(c),
            Err(message) => errors.push(LoadError { file, message }),
        }
    }
    Ok((cases, errors))
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_json(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}

fn string(json: &Json, key: &str) -> Result<String, String> {
    match json.get(key) {
        Some(Json::String(s)) => Ok(s.clone()),
        Some(other) => Err(format!("key `{key}` must be a string, got {other}")),
        None => Err(format!("missing key `{key}`")),
    }
}

/// Parses one case object; errors say which key is wrong.
pub fn parse_case(file: &Path, json: &Json) -> Result<Case, String> {
    let id = string(json, "case")?;
    let with_id = |e: String| format!("case {id}: {e}");
    let dialect = string(json, "dialect").map_err(with_id)?;
    let version = string(json, "version").map_err(with_id)?;
    let kind = string(json, "kind").map_err(with_id)?;
    let doc = json.get("doc").and_then(Json::as_str).unwrap_or("").to_string();
    let provenance = json.get("provenance").cloned().ok_or_else(|| with_id("missing key `provenance`".into()))?;
    if provenance.get("source").and_then(Json::as_str).is_none() {
        return Err(with_id("`provenance.source` must be a string".into()));
    }
    let body = if kind == "message" {
        let name = string(json, "message").map_err(with_id)?;
        let Some(message) = MessageKind::parse(&name) else {
            let body = Body::Unsupported(format!("message type `{name}` is not implemented by this build"));
            return Ok(Case { id, file: file.to_path_buf(), dialect, version, kind, doc, provenance, body });
        };
        let frames = match json.get("frames") {
            Some(Json::Array(xs)) => xs
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    let s = x.as_str().ok_or_else(|| format!("frames[{i}] is not a string"))?;
                    hex::decode(s).map_err(|e| format!("frames[{i}] is not hex: {e}"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(with_id)?,
            _ => return Err(with_id("`frames` must be an array of hex strings".into())),
        };
        let expect = match json.get("expect") {
            Some(Json::String(s)) if s == "accept" => Expect::Accept,
            Some(Json::Object(m)) => {
                let class = m
                    .get("reject")
                    .and_then(Json::as_str)
                    .ok_or_else(|| with_id("`expect` object needs `reject`".into()))?;
                Expect::Reject(
                    RejectClass::parse(class).ok_or_else(|| with_id(format!("unknown reject class `{class}`")))?,
                )
            }
            _ => return Err(with_id("`expect` must be \"accept\" or {\"reject\": CLASS}".into())),
        };
        let value = json.get("value").cloned();
        if expect == Expect::Accept && value.is_none() {
            return Err(with_id("accepted case without `value`".into()));
        }
        let encode = match json.get("encode").and_then(Json::as_str) {
            Some("exact") => EncodeMode::Exact,
            Some("equivalent") | None if expect != Expect::Accept => EncodeMode::Equivalent,
            Some("equivalent") => EncodeMode::Equivalent,
            other => return Err(with_id(format!("`encode` must be \"exact\" or \"equivalent\", got {other:?}"))),
        };
        let drift = match json.get("drift") {
            None => None,
            Some(Json::Array(xs)) => Some(
                xs.iter()
                    .map(|x| {
                        x.as_str().map(str::to_string).ok_or_else(|| with_id("`drift` entries must be strings".into()))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => return Err(with_id("`drift` must be an array of paths".into())),
        };
        Body::Message { message, frames, expect, value, encode, drift }
    } else if crate::kinds::KNOWN.contains(&kind.as_str()) {
        let input = json.get("input").cloned().ok_or_else(|| with_id("missing key `input`".into()))?;
        let expected = json.get("expected").cloned().ok_or_else(|| with_id("missing key `expected`".into()))?;
        Body::Other { input, expected }
    } else {
        Body::Unsupported(format!("kind `{kind}` is not implemented by this build"))
    };
    Ok(Case { id, file: file.to_path_buf(), dialect, version, kind, doc, provenance, body })
}
