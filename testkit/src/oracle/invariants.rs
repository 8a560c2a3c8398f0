//! What an accepted message must satisfy: re-encoding it is a fixed point
//! (the same value, compared with floats by bits and `list[int]` by
//! elements, no drift, the same bytes again), every tensor holds exactly
//! itemsize times the product of its shape in bytes with a dtype its kind
//! accepts, and the value nests no deeper than the limits allow (plus
//! [`DEFAULT_TREE_DEPTH`](super::DEFAULT_TREE_DEPTH) for filled-in defaults).

use engine_protocol::schema::Layout;
use engine_protocol::{numpy_dtype, torch_dtype, Decoded, Limits, Value};

use super::DEFAULT_TREE_DEPTH;

pub(super) fn fixed_point(first: &Value, again: &Decoded, context: &dyn Fn() -> String) {
    assert!(again.drift.is_empty(), "re-encoded value drifts at {:?}\n{}", again.drift, context());
    // Bit-exact, so the canonical views agree too (a view is a function of
    // the value; `roundtrip` compares views explicitly).
    if let Some(at) = same_value(first, &again.value) {
        panic!("decode(encode(decode(x))) differs from decode(x) at {at}\n{}", context());
    }
}

/// Where two values differ, or `None`. Floats compare by bits; a
/// `list[int]` kept unboxed equals the same integers boxed.
pub fn same_value(a: &Value, b: &Value) -> Option<String> {
    let mut path = String::new();
    if same_at(a, b, &mut path) {
        None
    } else {
        Some(if path.is_empty() { "the root".to_string() } else { path })
    }
}

fn same_at(a: &Value, b: &Value, path: &mut String) -> bool {
    fn ints(v: &Value) -> Option<Vec<i64>> {
        match v {
            Value::IntArray(xs) => Some(xs.clone()),
            Value::Array(xs) => xs.iter().map(|x| if let Value::Int(i) = x { Some(*i) } else { None }).collect(),
            _ => None,
        }
    }
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::IntArray(_), Value::Array(_)) | (Value::Array(_), Value::IntArray(_)) => {
            ints(a).is_some() && ints(a) == ints(b)
        }
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len()
                && xs.iter().zip(ys).enumerate().all(|(i, (x, y))| {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let same = same_at(x, y, path);
                    if same {
                        path.truncate(len);
                    }
                    same
                })
        }
        (Value::Map(xs), Value::Map(ys)) => same_entries(xs, ys, path),
        (Value::Struct(x), Value::Struct(y)) if x.schema.layout == Layout::OpenMap => {
            std::ptr::eq(x.schema, y.schema) && same_entries(x.open_entries(), y.open_entries(), path)
        }
        (Value::Struct(x), Value::Struct(y)) => {
            std::ptr::eq(x.schema, y.schema)
                && x.schema.fields.iter().zip(x.fields().zip(y.fields())).all(|(f, (vx, vy))| {
                    let len = path.len();
                    path.push('.');
                    path.push_str(f.name);
                    let same = same_at(vx, vy, path);
                    if same {
                        path.truncate(len);
                    }
                    same
                })
        }
        (a, b) => a == b,
    }
}

fn same_entries(xs: &[(Value, Value)], ys: &[(Value, Value)], path: &mut String) -> bool {
    xs.len() == ys.len()
        && xs.iter().zip(ys).enumerate().all(|(i, ((kx, vx), (ky, vy)))| {
            let len = path.len();
            path.push_str(&format!("{{{i}}}"));
            let same = same_at(kx, ky, path) && same_at(vx, vy, path);
            if same {
                path.truncate(len);
            }
            same
        })
}

/// Invariants of an accepted value: tensors are consistent, nesting is
/// within the limit.
pub fn check_accepted(v: &Value, limits: &Limits) {
    let depth = check_tree(v);
    assert!(
        depth <= limits.max_depth + DEFAULT_TREE_DEPTH,
        "accepted value nests {depth} levels, over the limit of {} (+{DEFAULT_TREE_DEPTH})",
        limits.max_depth
    );
}

/// Checks every tensor below `v`; returns the nesting depth of `v`
/// (containers, structs and tensors count one level, as in the decoder).
pub(super) fn check_tree(v: &Value) -> usize {
    match v {
        Value::Array(xs) => 1 + xs.iter().map(check_tree).max().unwrap_or(0),
        Value::IntArray(_) => 1,
        Value::Map(m) => 1 + m.iter().map(|(k, x)| check_tree(k).max(check_tree(x))).max().unwrap_or(0),
        // An open map's entries are one `Value::Map` field: one level, as
        // on the wire.
        Value::Struct(s) if s.schema.layout == Layout::OpenMap => {
            1 + s.open_entries().iter().map(|(k, x)| check_tree(k).max(check_tree(x))).max().unwrap_or(0)
        }
        Value::Struct(s) => 1 + s.fields().map(check_tree).max().unwrap_or(0),
        Value::Tensor(t) => {
            let dt = numpy_dtype(&t.dtype)
                .or_else(|| torch_dtype(&t.dtype))
                .unwrap_or_else(|| panic!("accepted tensor has unknown dtype {:?}", t.dtype));
            // The shape may hold one dimension to infer (numpy and torch
            // resolve it from the buffer size, as vLLM's decoder does).
            let size = dt.elem.size();
            assert!(
                t.data.len() % size == 0
                    && engine_protocol::internal::resolve_shape(&t.shape, t.data.len() / size).is_some(),
                "accepted tensor {} {:?} holds {} bytes",
                t.dtype,
                t.shape,
                t.data.len()
            );
            1
        }
        _ => 0,
    }
}
