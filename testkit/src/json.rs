//! JSON and wire values, both ways: `engine_protocol`'s own conversions,
//! re-exported so that tests and tools have one place to look and never a
//! second converter.
//!
//! - [`to_value`] is `engine_protocol::Value::from_json`: schema-free;
//!   integers stay integers (`UInt` above `i64::MAX`), other numbers are
//!   floats, objects are maps with string keys in JSON order.
//! - [`to_json`] is `engine_protocol::view::any_view`: the canonical view's
//!   rules for a value of no schema (docs/case-format.md §6: non-finite
//!   floats as `"NaN"`, `"Infinity"`, `"-Infinity"`; `bin` as
//!   `{"$bytes": hex}`; other ext as `{"$ext": T, "hex": hex}`; non-string
//!   map keys as strings).

use engine_protocol::Value;
use serde_json::Value as Json;

/// A JSON value as a wire value (`Value::from_json`).
pub fn to_value(j: &Json) -> Value {
    Value::from_json(j)
}

/// A wire value as JSON (`view::any_view`).
pub fn to_json(v: &Value) -> Json {
    engine_protocol::view::any_view(v)
}
