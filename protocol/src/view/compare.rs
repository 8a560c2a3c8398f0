//! Comparing views: the first difference between two, numbers compared by
//! value as IEEE doubles (integers exactly), `"NaN"` equal to itself,
//! object key order ignored; walked with an explicit stack.

use serde_json::{Map, Number, Value as Json};

/// The first difference between two views, as `(path, description)`, or
/// `None` when equal. Numbers compare by value as IEEE doubles (integers
/// exactly); `"NaN"` equals `"NaN"`; object key order is ignored.
pub fn diff(expected: &Json, actual: &Json) -> Option<(String, String)> {
    // Iterative (an explicit stack of the objects and arrays being
    // compared), so that views as deep as the decoder admits cost heap, not
    // call stack; differences are reported in document order.
    enum Open<'a> {
        Object(serde_json::map::Iter<'a>, &'a Map<String, Json>, &'a Map<String, Json>, usize),
        Array(std::iter::Enumerate<std::iter::Zip<std::slice::Iter<'a, Json>, std::slice::Iter<'a, Json>>>, usize),
    }
    let mut path = String::new();
    let mut open: Vec<Open> = Vec::new();
    let mut pair = Some((expected, actual));
    loop {
        if let Some((e, a)) = pair.take() {
            match (e, a) {
                (Json::Number(x), Json::Number(y)) => {
                    if !same_number(x, y) {
                        return Some((path, format!("expected {x}, got {y}")));
                    }
                }
                (Json::Object(x), Json::Object(y)) => open.push(Open::Object(x.iter(), x, y, path.len())),
                (Json::Array(x), Json::Array(y)) => {
                    if x.len() != y.len() {
                        return Some((path, format!("expected {} elements, got {}", x.len(), y.len())));
                    }
                    open.push(Open::Array(x.iter().zip(y.iter()).enumerate(), path.len()));
                }
                (x, y) if x == y => {}
                (x, y) => return Some((path, format!("expected {x}, got {y}"))),
            }
        }
        match open.last_mut()? {
            Open::Object(keys, x, y, len) => {
                path.truncate(*len);
                match keys.next() {
                    Some((k, ev)) => {
                        path.push('.');
                        path.push_str(k);
                        match y.get(k) {
                            Some(av) => pair = Some((ev, av)),
                            None => return Some((path, format!("missing (expected {ev})"))),
                        }
                    }
                    None => {
                        if let Some(k) = y.keys().find(|k| !x.contains_key(*k)) {
                            return Some((format!("{path}.{k}"), format!("unexpected key (value {})", y[k])));
                        }
                        open.pop();
                    }
                }
            }
            Open::Array(items, len) => {
                path.truncate(*len);
                match items.next() {
                    Some((i, (ev, av))) => {
                        path.push_str(&format!("[{i}]"));
                        pair = Some((ev, av));
                    }
                    None => {
                        open.pop();
                    }
                }
            }
        }
    }
}

/// Numbers compare by value as IEEE doubles, integers exactly.
fn same_number(x: &Number, y: &Number) -> bool {
    match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
        (Some(p), Some(q), _, _) if !x.is_f64() && !y.is_f64() => p == q,
        (_, _, Some(p), Some(q)) if !x.is_f64() && !y.is_f64() => p == q,
        _ => x.as_f64() == y.as_f64(),
    }
}
