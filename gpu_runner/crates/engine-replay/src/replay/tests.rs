//! vLLM replay scenarios end to end without an engine: loading, the
//! checks on made-up run results, raw requests and `--record`'s results.

use std::time::Duration;

use engine_protocol::typed::FinishReason;
use engine_protocol::{StructValue, Value};
use serde_json::json;

use super::run::*;
use engine_client::transport::TransportError;
use scenario_checks::check::{replay as checks, RunObservation, ScenarioKind};
use scenario_checks::scenario::*;

#[test]
fn scenarios_with_unknown_checks_or_no_requests_are_rejected() {
    let e = Scenario::from_json("x", r#"{"requests":[{"id":"a","request":{}}],"checks":[{"check":"vibes"}]}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown check \"vibes\""), "{e}");
    assert!(Scenario::from_json("x", r#"{"checks":[]}"#).unwrap_err().to_string().contains("no requests"));
    assert!(Scenario::from_json("x", r#"{"requests":[{"id":"a"}]}"#)
        .unwrap_err()
        .to_string()
        .contains("request missing"));
    assert!(Scenario::from_json("x", "nonsense").is_err());
}

#[test]
fn a_data_parallel_scenario_names_its_engines_and_a_kill_sends_no_request() {
    let s = Scenario::from_json(
        "dp",
        r#"{"data_parallel_size":2,"requests":[{"id":"w","engine":1,"raw":{"frames":["02","9201c0"]}},{"id":"k","kill_engine":1}]}"#,
    )
    .unwrap();
    assert_eq!(s.data_parallel_size, 2);
    assert_eq!((s.requests[0].dialect.engine, s.requests[1].dialect.kill_engine), (Some(1), Some(1)));
    let e =
        Scenario::from_json("dp", r#"{"requests":[{"id":"k","kill_engine":1,"request":{}}]}"#).unwrap_err().to_string();
    assert!(e.contains("kill_engine sends no request"), "{e}");
    for bad in [r#""data_parallel_size":0"#, r#""data_parallel_size":"two""#] {
        let e = Scenario::from_json("dp", &format!(r#"{{{bad},"requests":[{{"id":"a","request":{{}}}}]}}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("dp: data_parallel_size"), "{e}");
    }
    let e = Scenario::from_json("dp", r#"{"requests":[{"id":"k","kill_engine":-1}]}"#).unwrap_err().to_string();
    assert!(e.contains("requests[0].kill_engine: expected an engine rank"), "{e}");
}

#[test]
fn a_long_after_chain_listed_backwards_loads_in_time_linear_in_its_length() {
    // Found writing the `scenario_file` fuzz target (gpu_runner/fuzz,
    // its `hostile-after-chain` seed): the levels took one pass over
    // every request per level, with a search for each `after`, and the
    // duplicate-id check a search per request: 2000 requests took 1.5 s
    // in a release build, a file within the 16 MiB limit (some 400 000
    // requests) months.
    let n = 50_000;
    let chain: Vec<String> =
        (0..n).map(|i| format!(r#"{{"id":"r{i}","after":"r{}","request":{{}}}}"#, i + 1)).collect();
    let text = format!(r#"{{"requests":[{},{{"id":"r{n}","request":{{}}}}]}}"#, chain.join(","));
    let start = std::time::Instant::now();
    let s = Scenario::from_json("chain", &text).unwrap();
    let levels = levels(&s.requests).unwrap();
    assert!(start.elapsed() < std::time::Duration::from_secs(30), "{:?}", start.elapsed());
    assert_eq!(levels.len(), n + 1);
    assert_eq!((levels[0].as_slice(), levels[n].as_slice()), (&[n][..], &[0][..]));
}

#[test]
fn an_after_naming_no_request_has_no_level() {
    let s = Scenario::from_json("t", r#"{"requests":[{"id":"a","request":{}}]}"#).unwrap();
    let mut requests = s.requests.clone();
    requests[0].after = Some("nobody".into());
    assert_eq!(levels(&requests).unwrap_err().0, "a");
}

#[test]
fn requests_run_in_levels_of_after_and_cycles_are_refused() {
    let s = Scenario::from_json(
        "t",
        r#"{"requests":[{"id":"c","after":"b","request":{}},{"id":"a","request":{}},{"id":"b","after":"a","request":{}}]}"#,
    )
    .unwrap();
    assert_eq!(levels(&s.requests).unwrap(), vec![vec![1], vec![2], vec![0]]);
    let e = Scenario::from_json(
        "t",
        r#"{"requests":[{"id":"a","after":"b","request":{}},{"id":"b","after":"a","request":{}}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cycle"), "{e}");
    let e = Scenario::from_json("t", r#"{"requests":[{"id":"a","after":"zz","request":{}}]}"#).unwrap_err().to_string();
    assert!(e.contains("no request"), "{e}");
}

#[test]
fn raw_requests_take_hex_frames_or_field_edits() {
    let s = Scenario::from_json(
        "t",
        r#"{"requests":[{"id":"m","raw":{"frames":["00","c1"]}},
                        {"id":"e","request":{},"raw":{"set":{"prompt_token_ids":{"$repeat":[5,3]}}}}]}"#,
    )
    .unwrap();
    assert_eq!(s.requests[0].raw, Some(Raw::Frames(vec![vec![0], vec![0xc1]])));
    assert!(matches!(&s.requests[1].raw, Some(Raw::Edit(e)) if e.len() == 1));
    for bad in [r#"{"frames":["0g"]}"#, r#"{"frames":[]}"#, r#"{"set":3}"#, r#"{}"#] {
        let text = format!(r#"{{"requests":[{{"id":"m","request":{{}},"raw":{bad}}}]}}"#);
        assert!(Scenario::from_json("t", &text).is_err(), "{bad}");
    }
}

#[test]
fn a_built_request_is_a_flag_and_not_a_raw_one() {
    let s = Scenario::from_json("t", r#"{"requests":[{"id":"b","built":true,"request":{"max_tokens":2}}]}"#).unwrap();
    assert!(s.requests[0].dialect.built);
    for bad in [r#""built":"yes""#, r#""built":true,"raw":{"frames":["00"]}"#, r#""built":true,"sleep_ms":5"#] {
        let text = format!(r#"{{"requests":[{{"id":"b",{bad},"request":{{}}}}]}}"#);
        assert!(Scenario::from_json("t", &text).is_err(), "{bad}");
    }
}

#[test]
fn setting_a_path_edits_the_engine_request_and_names_what_is_missing() {
    let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
    let sp = engine_protocol::internal::sampling_params_value(release);
    let mut v = engine_protocol::internal::engine_core_request_value(release, "r", vec![1, 2], sp, 1.0);
    set_path(&mut v, "prompt_token_ids", &json!({"$repeat": [5, 4]})).unwrap();
    set_path(&mut v, "sampling_params.max_tokens", &json!(3)).unwrap();
    let Value::Struct(s) = &v else { panic!() };
    assert_eq!(s.get("prompt_token_ids"), Some(&Value::IntArray(vec![5; 4])));
    assert_eq!(s.struct_field("sampling_params").and_then(|p| p.int_field("max_tokens")), Some(3));
    assert!(set_path(&mut v, "sampling_params.nope", &json!(1)).unwrap_err().to_string().contains("nope"));
    assert!(set_path(&mut v, "request_id.x", &json!(1)).unwrap_err().to_string().contains("not a struct"));
}

#[test]
fn same_tokens_check_compares_every_child() {
    let s = Scenario::from_json(
        "t",
        r#"{"requests":[{"id":"a","request":{}},{"id":"b","request":{}}],
            "checks":[{"check":"same_tokens","requests":["a","b"]}]}"#,
    )
    .unwrap();
    let mut r: RunResult = RunResult::default();
    let child =
        |t: Vec<i64>| ChildResult { engine_tokens: t, finish_reason: Some(FinishReason::Length), ..Default::default() };
    r.requests.insert("a".into(), RequestResult { children: vec![child(vec![1, 2])], ..Default::default() });
    r.requests.insert("b".into(), RequestResult { children: vec![child(vec![1, 2])], ..Default::default() });
    assert!(s.judge(&RunObservation::from(&r), "mock").is_empty());
    r.requests.get_mut("b").unwrap().children[0].engine_tokens = vec![1, 3];
    let f = s.judge(&RunObservation::from(&r), "mock");
    assert_eq!(f.len(), 1);
    assert!(f[0].to_string().contains("same_tokens"), "{f:?}");
}

#[test]
fn constraint_checks_accept_the_language_and_nothing_else() {
    use scenario_checks::check::constraint::satisfies;
    let schema = json!({"json": {"type": "object", "properties": {"ok": {"type": "boolean"},
        "color": {"enum": ["red", "blue"]}}, "required": ["ok", "color"], "additionalProperties": false}});
    assert!(satisfies(&schema, r#"{"ok":true,"color":"red"}"#, None).is_ok());
    for bad in [
        r#"{"ok":1,"color":"red"}"#,
        r#"{"ok":true}"#,
        r#"{"ok":true,"color":"green"}"#,
        r#"{"ok":true,"color":"red","x":1}"#,
        "{",
    ] {
        assert!(satisfies(&schema, bad, None).is_err(), "{bad}");
    }
    let re = json!({"regex": "[a-c]{3}-[0-9]{2}"});
    assert!(satisfies(&re, "abc-12", None).is_ok());
    assert!(satisfies(&re, "abc-123", None).is_err());
    let choice = json!({"choice": ["red", "green"]});
    assert!(satisfies(&choice, "green", None).is_ok() && satisfies(&choice, "gree", None).is_err());
    let grammar = json!({"grammar": "root ::= \"x\" (\"a\" | \"b\")"});
    assert!(satisfies(&grammar, "xa", Some("x(a|b)")).is_ok());
    assert!(satisfies(&grammar, "xab", Some("x(a|b)")).is_err());
    assert!(satisfies(&grammar, "xa", None).unwrap_err().to_string().contains("language_regex"));
}

fn lists(release: &'static engine_protocol::ReleaseSchema, ids: &[i32], lps: &[f32], rank: i64) -> Value {
    let schema = release
        .engine_core_output
        .fields
        .iter()
        .find(|f| f.name == "new_logprobs")
        .and_then(|f| f.ty.as_struct())
        .unwrap();
    let t = |dtype: &str, shape: Vec<i64>, data: Vec<u8>| {
        Value::Tensor(Box::new(engine_protocol::Tensor { dtype: dtype.into(), shape, data }))
    };
    let mut l = StructValue::with_defaults(schema);
    l.set("logprob_token_ids", t("<i4", vec![1, ids.len() as i64], ids.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .set("logprobs", t("<f4", vec![1, lps.len() as i64], lps.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .set("sampled_token_ranks", t("<i8", vec![1], rank.to_le_bytes().to_vec()));
    Value::Struct(l)
}

#[test]
fn sample_logprobs_check_reads_rows_ranks_and_shaping() {
    let check_sample_logprobs = |c: &ChildResult, k: i64| {
        scenario_checks::check::logprobs::check_sample(&scenario_checks::check::Observation::from(c), k)
    };
    let release = engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap();
    let out = |tok: i64, l: Value| {
        let mut o = StructValue::with_defaults(release.engine_core_output);
        o.set("new_token_ids", Value::IntArray(vec![tok])).set("new_logprobs", l);
        o
    };
    // Greedy: the sampled token is also the top one (rank 1).
    let good = ChildResult {
        engine_tokens: vec![7, 9],
        outputs: vec![
            out(7, lists(release, &[7, 7, 3, 4], &[-0.5, -0.5, -1.0, -2.0], 1)),
            out(9, lists(release, &[9, 1, 9, 4], &[-1.0, -0.7, -1.0, -2.0], 2)),
        ],
        ..Default::default()
    };
    check_sample_logprobs(&good, 3).unwrap();
    check_sample_logprobs(&good, 1).unwrap();
    let mut wrong_first = good.clone();
    wrong_first.outputs[0] = out(7, lists(release, &[3, 7, 3, 4], &[-0.5, -0.5, -1.0, -2.0], 1));
    assert!(check_sample_logprobs(&wrong_first, 3).unwrap_err().to_string().contains("not the sampled token"));
    let mut too_few = good.clone();
    too_few.engine_tokens.push(1);
    assert!(check_sample_logprobs(&too_few, 3).unwrap_err().to_string().contains("rows for 3 tokens"));
    assert!(check_sample_logprobs(&good, 4).unwrap_err().to_string().contains("columns"));
    // Tensors whose data does not fit their shape are an error, not a panic.
    let mut short = good.clone();
    let mut l = lists(release, &[7, 7], &[-0.5, -0.5], 1);
    if let Value::Struct(s) = &mut l {
        if let Some(Value::Tensor(t)) = s.get_mut("logprob_token_ids") {
            t.shape = vec![1, 4];
        }
    }
    short.outputs[0] = out(7, l);
    assert!(check_sample_logprobs(&short, 1).is_err());
    let mut empty = good.clone();
    empty.outputs[0] = out(7, lists(release, &[], &[], 1));
    assert!(check_sample_logprobs(&empty, -1).is_err());
}

#[test]
fn a_utility_failure_is_the_engine_refusing_the_call_not_a_timeout_naming_it() {
    let check = scenario_checks::check::CheckSpec::parse(
        ScenarioKind::Vllm,
        &json!({"check": "utility_failure", "call": "u", "contains": "no_such_method"}),
    )
    .unwrap();
    let with = |e: TransportError| {
        let mut r: RunResult = RunResult::default();
        r.utilities.insert("u".into(), Err(e));
        checks::check(&check, &RunObservation::from(&r)).map_err(|f| f.to_string())
    };
    let refused = TransportError::Utility {
        method: "no_such_method".into(),
        message: "AttributeError: no attribute 'no_such_method'".into(),
    };
    assert_eq!(with(refused), Ok(()));
    let other = TransportError::Utility { method: "no_such_method".into(), message: "ValueError".into() };
    assert!(with(other).unwrap_err().contains("expected it to mention"));
    // The message names the method, but the engine never answered.
    let timeout = TransportError::UtilityTimeout { method: "no_such_method".into(), waited: Duration::from_secs(5) };
    let e = with(timeout).unwrap_err();
    assert!(e.contains("no reply within 5.0s"), "{e}");
}

#[test]
fn wire_values_render_as_the_canonical_view() {
    let v = Value::Map(vec![
        (Value::Int(7), Value::Float(f64::NAN)),
        (Value::Str("b".into()), Value::Bytes(vec![0, 255])),
        (Value::Str("inf".into()), Value::Array(vec![Value::Float(f64::NEG_INFINITY), Value::UInt(u64::MAX)])),
    ]);
    assert_eq!(value_to_json(&v), json!({"7": "NaN", "b": {"$bytes": "00ff"}, "inf": ["-Infinity", u64::MAX]}));
}
