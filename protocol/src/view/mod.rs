//! The canonical view of docs/case-format.md §6: a JSON rendering of a
//! decoded message, and back.
//!
//! Rules (docs/case-format.md §6.1-§6.10): structs are objects of
//! every schema field in declaration order (defaults filled); enums are
//! their integer values; tensors are `{dtype, shape, data}` with data the
//! flat C-order numbers; non-finite floats are `"NaN"`, `"Infinity"`,
//! `"-Infinity"`; bin is `{"$bytes": hex}`, other ext `{"$ext": T, "hex"}`;
//! sets are sorted arrays; non-string map keys are decimal strings; `Any`
//! fields are plain JSON of their MessagePack value; a tensor's shape is
//! kept as sent (a dimension to infer stays `-1`). Floats compare by value
//! ([`diff`]).
//!
//! The parts: `render` (value → view), `rebuild` (view → value), `json`
//! (reading case files), `compare` (comparing views).
//!
//! `Any` values, `NestedTensors` and the comparison are walked with explicit
//! stacks, not recursion, so views as deep as the decoder's depth limit
//! (docs/limits.md) cost heap, not call stack; [`parse_json`] reads case
//! files that deep (serde_json alone stops at 128 levels).
#![warn(missing_docs)]

mod compare;
mod json;
mod rebuild;
mod render;

pub use compare::diff;
pub use json::{parse_json, JsonError, JsonErrorKind, MAX_JSON_DEPTH};
pub use rebuild::{float_of, from_view, from_view_in};
pub use render::{any_view, struct_view, to_view};
