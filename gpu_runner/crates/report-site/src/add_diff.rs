//! The decoded ADD/ABORT diff of a finding: what the gateway sent the
//! engine for a request against what vLLM's frontend sent for the same
//! request and engine script (the reference report's run), field by field.
//!
//! Both sides' ADDs are `EngineCoreRequest`s as the runner decodes them
//! (the report's `sent`); the fields that name a request rather than
//! describe it (`request_id`, `arrival_time`, `external_req_id`) are not
//! compared, and a field only one side's release has is not a difference
//! (docs/wire-protocol.md, the drift between releases).

use serde_json::Value as Json;

use crate::model::RequestRow;

/// Fields of an ADD that differ on every run.
const VOLATILE: &[&str] = &["request_id", "arrival_time", "external_req_id"];

/// One difference: where, vLLM's value and the gateway's (`None`: no such
/// message on that side).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDiff {
    pub path: String,
    pub vllm: Option<Json>,
    pub gateway: Option<Json>,
}

/// The differences between the reference's and the gateway's engine
/// messages for one request: the number of ADDs and ABORTs, then each ADD
/// in order.
pub fn diff_request(vllm: &RequestRow, gateway: &RequestRow) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    let count = |n: usize| Some(Json::from(n));
    if vllm.sent.len() != gateway.sent.len() {
        out.push(FieldDiff {
            path: "ADDs sent".into(),
            vllm: count(vllm.sent.len()),
            gateway: count(gateway.sent.len()),
        });
    }
    if vllm.aborts.len() != gateway.aborts.len() {
        out.push(FieldDiff {
            path: "ABORTs sent".into(),
            vllm: count(vllm.aborts.len()),
            gateway: count(gateway.aborts.len()),
        });
    }
    for (i, (v, g)) in vllm.sent.iter().zip(&gateway.sent).enumerate() {
        let root =
            if vllm.sent.len() == 1 && gateway.sent.len() == 1 { "ADD".to_string() } else { format!("ADD[{i}]") };
        walk(&root, v, g, &mut out);
    }
    out
}

/// The elements of an array as the decoder writes it (`{"dtype", "shape",
/// "data"}`; vLLM 0.34.0 sends the prompt as an int32 array), for a side
/// whose release sends a plain list there.
fn array_data(v: &Json) -> Option<&Json> {
    v.get("dtype").and(v.get("data"))
}

fn walk(path: &str, v: &Json, g: &Json, out: &mut Vec<FieldDiff>) {
    // One side's release sends an array where the other's sends a list
    // (0.34.0's prompt against 0.32.0's): the elements are compared.
    match (v, g, array_data(v), array_data(g)) {
        (Json::Array(_), _, None, Some(d)) => return walk(path, v, d, out),
        (_, Json::Array(_), Some(d), None) => return walk(path, d, g, out),
        _ => {}
    }
    match (v, g) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, x) in a {
                if VOLATILE.contains(&k.as_str()) {
                    continue;
                }
                if let Some(y) = b.get(k) {
                    walk(&format!("{path}.{k}"), x, y, out);
                }
            }
        }
        _ if same(v, g) => {}
        _ => out.push(FieldDiff { path: path.to_string(), vllm: Some(v.clone()), gateway: Some(g.clone()) }),
    }
}

/// Equal values, numbers compared as numbers (`1` and `1.0` are the same
/// float on the wire).
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(sent: Json, aborts: usize) -> RequestRow {
        serde_json::from_value(json!({"id": "r", "sent": sent, "aborts": vec![json!("x"); aborts]})).unwrap()
    }

    #[test]
    fn a_sampling_param_the_gateway_sets_otherwise_is_named_with_both_values() {
        let v = row(json!([{"request_id": "a", "sampling_params": {"max_tokens": 16, "top_k": 0}}]), 0);
        let g = row(json!([{"request_id": "b", "sampling_params": {"max_tokens": 510, "top_k": 0.0}}]), 0);
        assert_eq!(
            diff_request(&v, &g),
            vec![FieldDiff {
                path: "ADD.sampling_params.max_tokens".into(),
                vllm: Some(json!(16)),
                gateway: Some(json!(510))
            }]
        );
    }

    #[test]
    fn a_missing_abort_and_a_repeated_add_are_counted() {
        let v = row(json!([{"prompt_token_ids": [1]}]), 1);
        let g = row(json!([{"prompt_token_ids": [1]}, {"prompt_token_ids": [1]}]), 0);
        let d = diff_request(&v, &g);
        assert_eq!(d[0].path, "ADDs sent");
        assert_eq!((d[0].vllm.clone(), d[0].gateway.clone()), (Some(json!(1)), Some(json!(2))));
        assert_eq!(d[1].path, "ABORTs sent");
        assert_eq!(d.len(), 2, "the first ADDs are the same: {d:?}");
    }

    #[test]
    fn a_prompt_sent_as_an_array_by_one_release_and_a_list_by_the_other_compares_its_ids() {
        let list = row(json!([{"prompt_token_ids": [1, 2]}]), 0);
        let same = row(json!([{"prompt_token_ids": {"dtype": "<i4", "shape": [2], "data": [1, 2]}}]), 0);
        assert!(diff_request(&list, &same).is_empty());
        let other = row(json!([{"prompt_token_ids": {"dtype": "<i4", "shape": [2], "data": [1, 3]}}]), 0);
        assert_eq!(diff_request(&list, &other)[0].path, "ADD.prompt_token_ids");
        // Both arrays: the dtype is compared too (vLLM's Rust frontend sends
        // uint32 where the Python one sends int32).
        let unsigned = row(json!([{"prompt_token_ids": {"dtype": "=u4", "shape": [2], "data": [1, 2]}}]), 0);
        assert_eq!(diff_request(&same, &unsigned)[0].path, "ADD.prompt_token_ids.dtype");
    }

    #[test]
    fn request_ids_arrival_times_and_fields_of_one_release_only_are_not_differences() {
        let v = row(json!([{"request_id": "a", "arrival_time": 1.0, "sampling_params": {"n": 1}}]), 0);
        let g =
            row(json!([{"request_id": "b", "arrival_time": 2.0, "kv_hints": null, "sampling_params": {"n": 1}}]), 0);
        assert!(diff_request(&v, &g).is_empty());
    }
}
