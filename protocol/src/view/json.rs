//! Reading case files: a JSON parser that reads documents as deep as the
//! decoder's depth limit (docs/limits.md) plus the case file around them
//! ([`MAX_JSON_DEPTH`]), where serde_json alone stops at 128 levels.

use serde_json::{Map, Value as Json};

/// The deepest JSON document [`parse_json`] reads: the decoder's default
/// depth limit plus room for the case file around a message's view.
pub const MAX_JSON_DEPTH: usize = crate::decode::VLLM_ENGINE_MAX_DEPTH + 64;

/// What kind of failure a [`JsonError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JsonErrorKind {
    /// Not JSON (or trailing characters after the document).
    Syntax,
    /// Nested deeper than [`MAX_JSON_DEPTH`].
    TooDeep,
}

/// Why [`parse_json`] refused a document: the kind and a description
/// naming the line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonError {
    /// The kind of failure.
    pub kind: JsonErrorKind,
    /// What was wrong, and where (`... at line 3`).
    pub detail: String,
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for JsonError {}

/// For callers that report errors as text.
impl From<JsonError> for String {
    fn from(e: JsonError) -> String {
        e.detail
    }
}

/// Parses a JSON document (a case file) nesting up to [`MAX_JSON_DEPTH`]
/// levels. serde_json alone stops at 128 levels, fewer than a message the
/// engine accepts can nest, and recurses once per level; here arrays and
/// objects are assembled with an explicit stack (heap, not call stack) and
/// each scalar is read by serde_json itself, so scalars, strings and
/// numbers mean exactly what they mean to `serde_json::from_str`. A deeper
/// document is an error, never a stack overflow.
pub fn parse_json(text: &str) -> Result<Json, JsonError> {
    let syn = |detail: String| JsonError { kind: JsonErrorKind::Syntax, detail };
    enum Open {
        Array(Vec<Json>),
        Object(Map<String, Json>, Option<String>),
    }
    let b = text.as_bytes();
    let mut i = 0usize;
    let skip_ws = |i: &mut usize| {
        while *i < b.len() && matches!(b[*i], b' ' | b'\t' | b'\n' | b'\r') {
            *i += 1;
        }
    };
    let at = |i: usize| {
        let line = 1 + b[..i.min(b.len())].iter().filter(|&&c| c == b'\n').count();
        format!("line {line}")
    };
    let mut open: Vec<Open> = Vec::new();
    loop {
        skip_ws(&mut i);
        // An object key (and its colon) comes before each member value.
        if let Some(Open::Object(_, key @ None)) = open.last_mut() {
            if b.get(i) != Some(&b'"') {
                return Err(syn(format!("expected a string key at {}", at(i))));
            }
            let end = string_end(b, i).ok_or_else(|| syn(format!("unterminated string at {}", at(i))))?;
            let k: String = serde_json::from_str(&text[i..end]).map_err(|e| syn(format!("{e} at {}", at(i))))?;
            *key = Some(k);
            i = end;
            skip_ws(&mut i);
            if b.get(i) != Some(&b':') {
                return Err(syn(format!("expected `:` at {}", at(i))));
            }
            i += 1;
            skip_ws(&mut i);
        }
        let mut done = match b.get(i) {
            None => return Err(syn("EOF while parsing a value".into())),
            Some(b'[') | Some(b'{') => {
                if open.len() >= MAX_JSON_DEPTH {
                    return Err(JsonError {
                        kind: JsonErrorKind::TooDeep,
                        detail: format!("JSON nests deeper than {MAX_JSON_DEPTH} levels at {}", at(i)),
                    });
                }
                let is_array = b[i] == b'[';
                i += 1;
                skip_ws(&mut i);
                let close = if is_array { b']' } else { b'}' };
                if b.get(i) == Some(&close) {
                    i += 1;
                    Some(if is_array { Json::Array(Vec::new()) } else { Json::Object(Map::new()) })
                } else {
                    open.push(if is_array { Open::Array(Vec::new()) } else { Open::Object(Map::new(), None) });
                    continue;
                }
            }
            Some(b'"') => {
                let end = string_end(b, i).ok_or_else(|| syn(format!("unterminated string at {}", at(i))))?;
                let v: Json = serde_json::from_str(&text[i..end]).map_err(|e| syn(format!("{e} at {}", at(i))))?;
                i = end;
                Some(v)
            }
            Some(_) => {
                let start = i;
                while i < b.len() && !matches!(b[i], b',' | b']' | b'}' | b':' | b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                let v: Json =
                    serde_json::from_str(&text[start..i]).map_err(|e| syn(format!("{e} at {}", at(start))))?;
                if v.is_array() || v.is_object() || v.is_string() {
                    return Err(syn(format!("expected a value at {}", at(start))));
                }
                Some(v)
            }
        };
        // Hand the value to the innermost open container; close the
        // containers that end here.
        loop {
            let Some(v) = done.take() else { break };
            match open.last_mut() {
                None => {
                    skip_ws(&mut i);
                    if i != b.len() {
                        return Err(syn(format!("trailing characters at {}", at(i))));
                    }
                    return Ok(v);
                }
                Some(Open::Array(xs)) => xs.push(v),
                Some(Open::Object(m, key)) => {
                    m.insert(key.take().unwrap_or_default(), v);
                }
            }
            skip_ws(&mut i);
            let close = match open.last() {
                Some(Open::Array(_)) => b']',
                _ => b'}',
            };
            match b.get(i) {
                Some(b',') => i += 1,
                Some(&c) if c == close => {
                    i += 1;
                    done = Some(match open.pop() {
                        Some(Open::Array(xs)) => Json::Array(xs),
                        Some(Open::Object(m, _)) => Json::Object(m),
                        None => unreachable!("an open container was just used"),
                    });
                }
                _ => return Err(syn(format!("expected `,` or `{}` at {}", close as char, at(i)))),
            }
        }
    }
}

/// The index just past the JSON string starting at `start` (a `"`).
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}
