//! How deep JSON nests, as vLLM measures it for a structured-output
//! constraint (`_exceeds_json_nesting` / `check_json_nesting`,
//! vllm/sampling_params.py 0.32.0 to 0.34.0: a chain of more than `limit`
//! objects and arrays, lists counting as objects do), for a JSON text and
//! for a parsed value, neither recursively.

/// The byte offset of the first `{` or `[` of `text` that opens a
/// container deeper than `limit`, brackets inside strings not counting;
/// `None` when the text nests `limit` levels deep at most. Read without
/// parsing: vLLM's `json.loads` takes texts far deeper than serde_json's
/// recursion limit (128), and the depth is all that is asked. A text that
/// is not JSON is measured all the same (a closing bracket too many is not
/// a negative depth).
pub fn json_text_past_depth(text: &str, limit: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (at, b) in text.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(at);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// Whether containers (objects, arrays) nest deeper than `limit` in `v`:
/// a chain of `limit + 1` of them, walked level by level, `limit` levels at
/// most, as vLLM walks it. A string inside `v` is not parsed.
pub fn json_value_nests_deeper_than(v: &serde_json::Value, limit: usize) -> bool {
    let container = |c: &&serde_json::Value| c.is_object() || c.is_array();
    let mut level: Vec<&serde_json::Value> = vec![v];
    for _ in 0..limit {
        level = level
            .into_iter()
            .flat_map(|node| -> Box<dyn Iterator<Item = &serde_json::Value> + '_> {
                match node {
                    serde_json::Value::Object(m) => Box::new(m.values()),
                    serde_json::Value::Array(xs) => Box::new(xs.iter()),
                    _ => Box::new(std::iter::empty()),
                }
            })
            .filter(container)
            .collect();
        if level.is_empty() {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{json_text_past_depth, json_value_nests_deeper_than};
    use serde_json::json;

    /// The deepest nesting of a text: the least limit it does not pass.
    fn text_nesting(text: &str) -> usize {
        (0..).find(|&limit| json_text_past_depth(text, limit).is_none()).unwrap()
    }

    #[test]
    fn a_texts_nesting_counts_its_containers_and_not_the_brackets_inside_its_strings() {
        assert_eq!(text_nesting(r#"{"a": [1, {"b": "[[[{"}], "c": {}}"#), 3);
        assert_eq!(text_nesting(r#"{"a": "x\"[[[", "b": "\\", "c": [[]]}"#), 3);
        assert_eq!(text_nesting(r#""[[[""#), 0);
        assert_eq!(text_nesting(""), 0);
        assert_eq!(text_nesting("]]]["), 1, "a closing bracket too many is not a negative depth");
    }

    #[test]
    fn a_text_past_its_limit_is_refused_at_the_bracket_that_passes_it() {
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(json_text_past_depth(&deep, 64), Some(64));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(json_text_past_depth(&ok, 64), None);
    }

    #[test]
    fn a_value_nests_deeper_than_a_limit_when_a_chain_of_more_containers_runs_through_it() {
        let v = json!({"a": [{"b": 1}], "c": 2});
        assert!(json_value_nests_deeper_than(&v, 2));
        assert!(!json_value_nests_deeper_than(&v, 3));
        assert!(json_value_nests_deeper_than(&json!([[[]]]), 2));
        assert!(!json_value_nests_deeper_than(&json!([[[]]]), 3));
        assert!(!json_value_nests_deeper_than(&json!("[[[[]]]]"), 1), "text inside a value is not parsed");
    }
}
