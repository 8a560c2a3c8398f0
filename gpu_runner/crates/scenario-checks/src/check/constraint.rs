//! The `satisfies_constraint` check: is the client text in the language
//! of the request's structured-output constraint (docs/runner/scenarios.md
//! "Scenarios"): JSON fitting a schema (the keywords `type`, `properties`,
//! `required`, `additionalProperties`, `enum`), a full regex match, one of
//! the choices, or for a grammar a full match of the check's
//! `language_regex`.

use std::collections::HashMap;

use serde_json::Value as Json;

use super::error::CheckFailure;

/// `re` anchored at both ends.
pub fn full_match_regex(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{re})$"))
}

/// Whether `text` is in the language of the request's constraint: JSON
/// that parses and fits the schema (the keywords `type`, `properties`,
/// `required`, `additionalProperties`, `enum`), a full match of the
/// regex, one of the choices, or (a grammar) a full match of
/// `language_regex`, the grammar's language written as a regex in the
/// check.
pub fn satisfies(so: &Json, text: &str, language_regex: Option<&str>) -> Result<(), CheckFailure> {
    in_language(so, text, language_regex).map_err(CheckFailure::Constraint)
}

fn in_language(so: &Json, text: &str, language_regex: Option<&str>) -> Result<(), String> {
    if let Some(schema) = so.get("json") {
        let schema = match schema {
            Json::String(s) => serde_json::from_str(s).map_err(|e| format!("schema: {e}"))?,
            s => s.clone(),
        };
        let v: Json = serde_json::from_str(text).map_err(|e| format!("text {text:?} is not JSON: {e}"))?;
        return fits_schema(&v, &schema, "$").map_err(|e| format!("text {text:?}: {e}"));
    }
    if let Some(re) = so.get("regex").and_then(Json::as_str) {
        return if full_match_regex(re).map_err(|e| e.to_string())?.is_match(text) {
            Ok(())
        } else {
            Err(format!("{text:?} does not match {re:?}"))
        };
    }
    if let Some(choices) = so.get("choice").and_then(Json::as_array) {
        return if choices.iter().any(|c| c.as_str() == Some(text)) {
            Ok(())
        } else {
            Err(format!("{text:?} is none of {choices:?}"))
        };
    }
    if so.get("grammar").is_some() {
        let re = language_regex.ok_or("a grammar check needs `language_regex`")?;
        return if full_match_regex(re).map_err(|e| e.to_string())?.is_match(text) {
            Ok(())
        } else {
            Err(format!("{text:?} is not in the grammar's language {re:?}"))
        };
    }
    Err("no json, regex, choice or grammar constraint in the request".into())
}

fn fits_schema(v: &Json, schema: &Json, at: &str) -> Result<(), String> {
    let s = schema.as_object().ok_or_else(|| format!("{at}: schema is not an object"))?;
    for k in s.keys() {
        if !["type", "properties", "required", "additionalProperties", "enum"].contains(&k.as_str()) {
            return Err(format!("{at}: schema keyword {k:?} is not checked here"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Json::as_array) {
        if !e.contains(v) {
            return Err(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let Some(t) = s.get("type").and_then(Json::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "null" => v.is_null(),
            other => return Err(format!("{at}: type {other:?} is not checked here")),
        };
        if !ok {
            return Err(format!("{at}: {v} is not of type {t}"));
        }
    }
    let props = s.get("properties").and_then(Json::as_object);
    if let Some(o) = v.as_object() {
        for req in s.get("required").and_then(Json::as_array).map_or(&[][..], Vec::as_slice) {
            let key = req.as_str().unwrap_or_default();
            if !o.contains_key(key) {
                return Err(format!("{at}: required key {key:?} missing"));
            }
        }
        let closed = s.get("additionalProperties") == Some(&Json::Bool(false));
        let known: HashMap<&str, &Json> =
            props.map(|p| p.iter().map(|(k, v)| (k.as_str(), v)).collect()).unwrap_or_default();
        for (k, x) in o {
            match known.get(k.as_str()) {
                Some(sub) => fits_schema(x, sub, &format!("{at}.{k}"))?,
                None if closed => return Err(format!("{at}: key {k:?} not allowed")),
                None => {}
            }
        }
    }
    Ok(())
}
