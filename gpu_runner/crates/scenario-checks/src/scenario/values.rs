//! Wire values and the JSON of scenario files: a raw request's `set` edits
//! (a dotted path into the request struct, `{"$repeat": [token, count]}`
//! for a long token list), JSON arguments as wire values, and wire values
//! rendered as the goldens render them (docs/runner/scenarios.md "Raw
//! requests", docs/case-format.md §6).

use engine_protocol::Value;
use serde_json::Value as Json;

/// Sets the field at a dotted path of a struct value (structs along the
/// way must exist). `{"$repeat": [token, count]}` is a list of `count`
/// copies of `token`.
pub fn set_path(v: &mut Value, path: &str, new: &Json) -> Result<(), SetPathError> {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, p) in parts.iter().enumerate() {
        let Value::Struct(s) = cur else {
            return Err(SetPathError::NotAStruct(parts[..i].join(".")));
        };
        let Some(f) = s.get_mut(p) else { return Err(SetPathError::NoField((*p).to_string())) };
        cur = f;
    }
    *cur = match new.get("$repeat").and_then(Json::as_array).map(Vec::as_slice) {
        Some([tok, count]) => {
            let (Some(tok), Some(count)) = (tok.as_i64(), count.as_u64()) else {
                return Err(SetPathError::BadRepeat);
            };
            Value::IntArray(vec![tok; count.min(1 << 20) as usize])
        }
        _ => match (new, &*cur) {
            // Token lists stay token lists.
            (Json::Array(xs), Value::IntArray(_)) if xs.iter().all(Json::is_i64) => {
                Value::IntArray(xs.iter().filter_map(Json::as_i64).collect())
            }
            _ => json_to_value(new),
        },
    };
    Ok(())
}

/// Why [`set_path`] could not set a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetPathError {
    /// A value along the path is not a struct (its path).
    #[error("{0} is not a struct")]
    NotAStruct(String),
    /// The struct has no such field.
    #[error("no field {0:?}")]
    NoField(String),
    /// `$repeat` without `[token, count]`.
    #[error("$repeat needs [token, count]")]
    BadRepeat,
}

/// A JSON argument as a wire value (`Value::from_json`).
pub fn json_to_value(j: &Json) -> Value {
    Value::from_json(j)
}

/// A wire value as JSON (utility results, `sent` fields): the canonical
/// view's rendering of an untyped value (`engine_protocol::view::any_view`,
/// docs/case-format.md §6), so non-finite floats, bytes, non-string map
/// keys, structs and tensors read the same here as in the goldens.
pub fn value_to_json(v: &Value) -> Json {
    engine_protocol::view::any_view(v)
}
