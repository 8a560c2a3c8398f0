//! Every replay check passes on a right observation and fails on a wrong
//! one;
//! the vocabulary matches the enum and docs/runner/scenarios.md lists it; every
//! committed scenario loads.

use std::path::PathBuf;

use engine_protocol::typed::tokenspeed::{BatchRow, Finish};
use engine_protocol::typed::StopReason;
use engine_protocol::{ReleaseSchema, StructValue, Value};
use serde_json::{json, Value as Json};

use super::observation::Failure;
use super::*;
use crate::check::RequestOutcome;

fn release() -> &'static ReleaseSchema {
    engine_protocol::release(engine_protocol::Dialect::Vllm, "0.32.0").unwrap()
}

fn tensor(dtype: &str, shape: Vec<i64>, data: Vec<u8>) -> Value {
    Value::Tensor(Box::new(engine_protocol::Tensor { dtype: dtype.into(), shape, data }))
}

/// A `LogprobsLists` / `LogprobsTensors` value of `rows` (ids, logprobs)
/// and ranks.
fn logprob_struct(field: &str, ranks_field: &str, rows: &[(&[i32], &[f32])], ranks: &[i64]) -> Value {
    let schema =
        release().engine_core_output.fields.iter().find(|f| f.name == field).and_then(|f| f.ty.as_struct()).unwrap();
    let cols = rows.first().map_or(0, |r| r.0.len()) as i64;
    let n = rows.len() as i64;
    let mut l = StructValue::with_defaults(schema);
    l.set(
        "logprob_token_ids",
        tensor("<i4", vec![n, cols], rows.iter().flat_map(|r| r.0.iter().flat_map(|x| x.to_le_bytes())).collect()),
    )
    .set(
        "logprobs",
        tensor("<f4", vec![n, cols], rows.iter().flat_map(|r| r.1.iter().flat_map(|x| x.to_le_bytes())).collect()),
    )
    .set(ranks_field, tensor("<i8", vec![n], ranks.iter().flat_map(|x| x.to_le_bytes()).collect()));
    Value::Struct(l)
}

fn output(tokens: &[i64]) -> StructValue {
    let mut o = StructValue::with_defaults(release().engine_core_output);
    o.set("new_token_ids", Value::IntArray(tokens.to_vec()));
    o
}

fn row(ids: &[i64], completion: i64, finish: Finish) -> BatchRow {
    BatchRow {
        rid: "s.a".into(),
        output_ids: ids.into(),
        finish,
        prompt_tokens: 3,
        completion_tokens: completion.into(),
        logprob_ids: ids.into(),
        logprob_vals: ids.iter().map(|_| -0.5).collect(),
        ..BatchRow::default()
    }
}

fn finished(id: &str, tokens: &[i64]) -> Observation {
    Observation {
        engine_request_id: format!("s.{id}"),
        engine_tokens: tokens.to_vec(),
        client_tokens: tokens.to_vec(),
        finish: Some("length".into()),
        ended: RequestOutcome::Finished,
        ..Observation::default()
    }
}

fn req(id: &str, children: Vec<Observation>) -> RequestObservation {
    RequestObservation {
        spec_id: id.into(),
        sent_max_tokens: Some(4),
        prompt: vec![1, 5, 6],
        prompt_len: 3,
        room: 509,
        children,
        ..RequestObservation::default()
    }
}

/// A run on which every check of [`cases`] passes.
fn right() -> RunObservation {
    let mut r = RunObservation::default();
    let mut sent = engine_protocol::internal::engine_core_request_value(
        release(),
        "s.a",
        vec![1, 5, 6],
        engine_protocol::internal::sampling_params_value(release()),
        1.0,
    );
    crate::scenario::set_path(&mut sent, "sampling_params.max_tokens", &json!(4)).unwrap();
    let a = Observation {
        sent_seed: Some(7),
        text: "abc".into(),
        stop_reason: Some(StopReason::TokenId(77)),
        abort_sent: true,
        late_ms: Some(vec![20.0]),
        logprob_columns: vec![4, 4],
        prompt_logprobs_seen: true,
        rows: vec![row(&[5, 6], 2, Finish::Running), row(&[7, 8], 4, Finish::Length)],
        sent: Some(sent),
        ..finished("a", &[5, 6, 7, 8])
    };
    let mut a_req = req("a", vec![a]);
    a_req.request = json!({"structured_outputs": {"regex": "[a-c]{3}"}});
    r.requests.insert("a".into(), a_req);
    r.requests.insert("b".into(), req("b", vec![finished("b", &[5, 6, 7, 8])]));
    // Served by data-parallel rank 1: sent there, its batches said so.
    let on1 = Observation { engine: 1, engine_indices: vec![1], ..finished("on1", &[5, 6]) };
    r.requests.insert("on1".into(), req("on1", vec![on1]));
    let mut c = req("c", vec![finished("c", &[9, 9])]);
    c.room = 2;
    r.requests.insert("c".into(), c);
    let seeded = |i: i64| Observation { sent_seed: Some(7 + i), ..finished(&format!("n-{i}"), &[5, 6, 7]) };
    r.requests.insert("n".into(), req("n", vec![seeded(0), seeded(1)]));
    let mut refused = req("ref", vec![]);
    refused.refused = Some(Refusal { class: "invalid_value".into(), message: "temperature -1".into() });
    r.requests.insert("ref".into(), refused);
    let dead = Observation {
        engine_request_id: "s.dead".into(),
        ended: RequestOutcome::DeathSentinel,
        failure: Some(Failure { class: FailureClass::DeathSentinel, message: "engine 0 is dead".into() }),
        error: Some("engine 0 is dead".into()),
        ..Observation::default()
    };
    r.requests.insert("dead".into(), req("dead", vec![dead]));
    let ab = Observation {
        aborted: true,
        finish: Some("abort".into()),
        ended: RequestOutcome::Aborted,
        ..finished("ab", &[5])
    };
    r.requests.insert("ab".into(), req("ab", vec![ab]));
    let abort_row = Observation {
        ended: RequestOutcome::AbortRow,
        finish: Some("abort".into()),
        rows: vec![BatchRow { finish: Finish::Abort, ..BatchRow::default() }],
        ..Observation::default()
    };
    r.requests.insert("arow".into(), req("arow", vec![abort_row]));
    let quiet = Observation { ended: RequestOutcome::Silence, error: Some("no row".into()), ..Observation::default() };
    r.requests.insert("quiet".into(), req("quiet", vec![quiet]));
    let mut first = output(&[7]);
    first.set(
        "new_logprobs",
        logprob_struct("new_logprobs", "sampled_token_ranks", &[(&[7, 7, 3, 4], &[-0.5, -0.5, -1.0, -2.0])], &[1]),
    );
    first.set(
        "new_prompt_logprobs_tensors",
        logprob_struct(
            "new_prompt_logprobs_tensors",
            "selected_token_ranks",
            &[(&[5, 5], &[-0.5, -0.5]), (&[6, 2], &[-1.0, -0.7])],
            &[1, 2],
        ),
    );
    let mut second = output(&[9]);
    second.set(
        "new_logprobs",
        logprob_struct("new_logprobs", "sampled_token_ranks", &[(&[9, 1, 9, 4], &[-1.0, -0.7, -1.0, -2.0])], &[2]),
    );
    let lp = Observation { outputs: vec![first, second], ..finished("lp", &[7, 9]) };
    r.requests.insert("lp".into(), req("lp", vec![lp]));
    r.utilities.insert("u".into(), UtilityObservation::Returned(json!(["generate"])));
    r.utilities.insert(
        "f".into(),
        UtilityObservation::Refused {
            message: "no attribute 'x'".into(),
            shown: "utility x failed: no attribute 'x'".into(),
        },
    );
    r
}

fn child_mut<'a>(r: &'a mut RunObservation, id: &str) -> &'a mut Observation {
    &mut r.requests.get_mut(id).unwrap().children[0]
}

type Breaker = fn(&mut RunObservation);

/// Every replay check: the kind it is read for, the entry, and what breaks
/// it.
fn cases() -> Vec<(ScenarioKind, Json, Breaker)> {
    use ScenarioKind::{Tokenspeed as T, Vllm as V};
    vec![
        (V, json!({"check": "finish_reason", "request": "a", "is": "length"}), |r| {
            child_mut(r, "a").finish = Some("stop".into())
        }),
        (V, json!({"check": "stop_reason", "request": "a", "is": 77}), |r| child_mut(r, "a").stop_reason = None),
        (V, json!({"check": "text", "request": "a", "is": "abc"}), |r| child_mut(r, "a").text = "abd".into()),
        (V, json!({"check": "text_contains", "request": "a", "text": "bc"}), |r| child_mut(r, "a").text = "ab".into()),
        (V, json!({"check": "text_not_contains", "request": "a", "text": "x"}), |r| {
            child_mut(r, "a").text = "xa".into()
        }),
        (V, json!({"check": "tokens", "request": "a", "is": [5, 6, 7, 8]}), |r| {
            child_mut(r, "a").client_tokens.pop().map(drop).unwrap_or(())
        }),
        (T, json!({"check": "engine_tokens", "request": "a", "is": [5, 6, 7, 8]}), |r| {
            child_mut(r, "a").engine_tokens = vec![1]
        }),
        (V, json!({"check": "num_tokens", "request": "a", "is": 4}), |r| child_mut(r, "a").client_tokens.push(1)),
        (V, json!({"check": "num_tokens", "request": "c", "is": "room"}), |r| child_mut(r, "c").client_tokens.push(1)),
        (V, json!({"check": "same_tokens", "requests": ["a", "b"]}), |r| child_mut(r, "b").engine_tokens = vec![1]),
        (V, json!({"check": "same_tokens_pairwise", "requests": ["a", "b"]}), |r| {
            child_mut(r, "b").engine_tokens = vec![1]
        }),
        (V, json!({"check": "different_tokens", "requests": ["a", "c"]}), |r| {
            child_mut(r, "c").engine_tokens = vec![5, 6, 7, 8]
        }),
        (T, json!({"check": "different_tokens", "requests": ["a", "c", "b"]}), |r| {
            child_mut(r, "c").engine_tokens = vec![5, 6, 7, 8]
        }),
        (V, json!({"check": "no_token_in_first", "request": "a", "n": 2, "tokens": [7]}), |r| {
            child_mut(r, "a").engine_tokens[1] = 7
        }),
        (V, json!({"check": "refused", "request": "ref", "class": "invalid_value"}), |r| {
            r.requests.get_mut("ref").unwrap().refused.as_mut().unwrap().class = "too_long".into()
        }),
        (T, json!({"check": "refused", "request": "ref"}), |r| r.requests.get_mut("ref").unwrap().refused = None),
        (V, json!({"check": "silent_after_abort", "request": "a", "settle_ms": 100}), |r| {
            child_mut(r, "a").late_ms = Some(vec![20.0, 150.0])
        }),
        (T, json!({"check": "silent_after_abort", "request": "a"}), |r| child_mut(r, "a").abort_sent = false),
        (V, json!({"check": "engine_outcome", "request": "dead", "is": "death_sentinel"}), |r| {
            child_mut(r, "dead").ended = RequestOutcome::InputDropped
        }),
        (T, json!({"check": "outcome", "request": "arow", "is": "abort_row"}), |r| {
            child_mut(r, "arow").ended = RequestOutcome::Finished
        }),
        (T, json!({"check": "sent", "request": "a", "path": "sampling_params.max_tokens", "is": 4}), |r| {
            child_mut(r, "a").sent = None
        }),
        (T, json!({"check": "logprobs", "request": "a", "is": true}), |r| {
            child_mut(r, "a").rows[1].logprob_vals[0] = 0.5
        }),
        (T, json!({"check": "logprobs", "request": "c", "is": false}), |r| {
            child_mut(r, "c").rows = vec![row(&[9], 1, Finish::Length)]
        }),
        (V, json!({"check": "max_tokens_honoured", "request": "a", "exact": true}), |r| {
            child_mut(r, "a").engine_tokens.pop().map(drop).unwrap_or(())
        }),
        (V, json!({"check": "sent_max_tokens", "request": "a", "is": 4}), |r| {
            r.requests.get_mut("a").unwrap().sent_max_tokens = Some(5)
        }),
        (V, json!({"check": "logprobs_columns", "request": "a", "is": 4}), |r| {
            child_mut(r, "a").logprob_columns.push(2)
        }),
        (V, json!({"check": "sample_logprobs", "request": "lp", "k": 3}), |r| child_mut(r, "lp").engine_tokens.push(1)),
        (V, json!({"check": "prompt_logprobs", "request": "lp", "k": 1}), |r| {
            r.requests.get_mut("lp").unwrap().prompt[2] = 8
        }),
        (V, json!({"check": "prompt_logprobs_present", "request": "a"}), |r| {
            child_mut(r, "a").prompt_logprobs_seen = false
        }),
        (V, json!({"check": "satisfies_constraint", "request": "a"}), |r| child_mut(r, "a").text = "abcd".into()),
        (V, json!({"check": "num_children", "request": "n", "is": 2}), |r| {
            r.requests.get_mut("n").unwrap().children.pop().map(drop).unwrap_or(())
        }),
        (V, json!({"check": "child_seeds", "request": "n", "is": [7, 8]}), |r| child_mut(r, "n").sent_seed = None),
        (V, json!({"check": "distinct_child_ids", "request": "n"}), |r| {
            r.requests.get_mut("n").unwrap().children[1].engine_request_id = "s.n-0".into()
        }),
        (V, json!({"check": "failed", "request": "dead", "class": "death_sentinel"}), |r| {
            child_mut(r, "dead").failure.as_mut().unwrap().class = FailureClass::OutputDropped
        }),
        (V, json!({"check": "failed", "request": "dead"}), |r| child_mut(r, "dead").failure = None),
        (V, json!({"check": "aborted", "request": "ab"}), |r| child_mut(r, "ab").aborted = false),
        (V, json!({"check": "utility_result", "call": "u", "is": ["generate"]}), |r| {
            r.utilities.insert("u".into(), UtilityObservation::Returned(json!([])));
        }),
        (V, json!({"check": "utility_failure", "call": "f", "contains": "no attribute"}), |r| {
            r.utilities.insert("f".into(), UtilityObservation::NoAnswer("no reply within 5.0s: no attribute".into()));
        }),
        (V, json!({"check": "all_finished"}), |r| {
            r.requests.retain(|_, v| v.children.iter().all(|c| c.finish.is_some() && c.error.is_none()));
            child_mut(r, "a").finish = None;
        }),
        (V, json!({"check": "served_by", "request": "on1", "engine": 1}), |r| child_mut(r, "on1").engine = 0),
        (V, json!({"check": "served_by", "request": "on1", "engine": 1}), |r| {
            child_mut(r, "on1").engine_indices = vec![1, 0]
        }),
        (V, json!({"check": "served_by", "request": "on1", "engine": 1}), |r| r.engine_index_mismatches = 1),
        (V, json!({"check": "dp_control", "is": []}), |r| {
            r.dp_control.push((0, engine_client::dialect::DpControl::WaveComplete(0)))
        }),
        (T, json!({"check": "terminal_abort_row", "request": "arow"}), |r| {
            child_mut(r, "arow").rows[0].completion_tokens = 1
        }),
        (T, json!({"check": "silence", "request": "quiet"}), |r| child_mut(r, "quiet").rows.push(BatchRow::default())),
        (T, json!({"check": "rows", "request": "a", "is": 2}), |r| child_mut(r, "a").rows.truncate(1)),
        (T, json!({"check": "row_completions", "request": "a", "is": [2, 4]}), |r| {
            child_mut(r, "a").rows[0].completion_tokens = 1
        }),
        (T, json!({"check": "counts", "request": "a"}), |r| child_mut(r, "a").rows[1].prompt_tokens = 4),
    ]
}

#[test]
fn every_replay_check_passes_on_a_right_observation_and_fails_on_a_wrong_one() {
    let mut all_finished_run = right();
    all_finished_run.requests.retain(|_, v| v.children.iter().all(|c| c.finish.is_some() && c.error.is_none()));
    for (kind, entry, breaker) in cases() {
        let spec = CheckSpec::parse(kind, &entry).unwrap_or_else(|e| panic!("{entry}: {e}"));
        let good = if spec.name() == "all_finished" { all_finished_run.clone() } else { right() };
        assert_eq!(replay::check(&spec, &good), Ok(()), "{entry} on the right run");
        let mut bad = good.clone();
        breaker(&mut bad);
        let e = replay::check(&spec, &bad).expect_err(&format!("{entry} on the broken run"));
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn wave_messages_read_as_their_engine_name_and_wave() {
    let spec = CheckSpec::parse(
        ScenarioKind::Vllm,
        &json!({"check": "dp_control", "is": [{"engine": 1, "start_wave": 2}, {"engine": 0, "wave_complete": 2}]}),
    )
    .unwrap();
    let mut r = right();
    r.dp_control = vec![
        (1, engine_client::dialect::DpControl::StartWave(2)),
        (0, engine_client::dialect::DpControl::WaveComplete(2)),
    ];
    assert_eq!(replay::check(&spec, &r), Ok(()));
    r.dp_control.reverse();
    assert_eq!(replay::check(&spec, &r), Ok(()), "ranks send at about the same time: any order");
    r.dp_control.pop();
    assert!(replay::check(&spec, &r).is_err(), "a message missing");
}

#[test]
fn every_replay_check_of_the_vocabulary_has_a_case() {
    let cases = cases();
    let covered: Vec<&str> = cases.iter().map(|(_, e, _)| e["check"].as_str().unwrap_or("")).collect();
    for e in VOCABULARY.iter().filter(|e| e.kinds != [ScenarioKind::Gateway]) {
        assert!(covered.contains(&e.name), "no pass/fail case for {}", e.name);
    }
}

#[test]
fn a_failed_check_compares_the_failure_class_not_the_message() {
    let spec =
        CheckSpec::parse(ScenarioKind::Vllm, &json!({"check": "failed", "request": "dead", "class": "death_sentinel"}))
            .unwrap();
    let mut r = right();
    // The message names something else entirely; the class decides.
    child_mut(&mut r, "dead").failure.as_mut().unwrap().message = "output connection dropped".into();
    assert_eq!(replay::check(&spec, &r), Ok(()));
    // An earlier file's `contains` is read into the class at load.
    let old = CheckSpec::parse(
        ScenarioKind::Vllm,
        &json!({"check": "failed", "request": "dead", "contains": "engine sent ENGINE_CORE_DEAD"}),
    )
    .unwrap();
    assert!(matches!(old.check, ScenarioCheck::Failed { class: Some(FailureClass::DeathSentinel), .. }));
    let e = CheckSpec::parse(ScenarioKind::Vllm, &json!({"check": "failed", "request": "x", "contains": "weird"}))
        .unwrap_err();
    assert!(matches!(e, CheckError::Invalid { check: "failed", .. }), "{e}");
}

#[test]
fn check_entries_are_refused_when_unknown_incomplete_mistyped_or_of_another_kind() {
    let parse = |kind, v: Json| CheckSpec::parse(kind, &v).unwrap_err();
    assert_eq!(parse(ScenarioKind::Vllm, json!({"check": "vibes"})), CheckError::Unknown { name: "vibes".into() });
    assert!(matches!(parse(ScenarioKind::Vllm, json!({"request": "a"})), CheckError::NoName));
    let e = parse(ScenarioKind::Vllm, json!({"check": "no_token_in_first", "request": "a", "tokens": [1]}));
    assert!(e.to_string().contains("missing field `n`"), "{e}");
    let e = parse(ScenarioKind::Vllm, json!({"check": "num_tokens", "request": "a", "is": "lots"}));
    assert!(matches!(&e, CheckError::Field { check, .. } if check == "num_tokens"), "{e}");
    let e = parse(ScenarioKind::Gateway, json!({"check": "status", "is": "200"}));
    assert!(e.to_string().contains("status"), "{e}");
    assert_eq!(
        parse(ScenarioKind::Gateway, json!({"check": "all_finished"})),
        CheckError::NotForKind { check: "all_finished", kind: ScenarioKind::Gateway }
    );
    assert_eq!(
        parse(ScenarioKind::Vllm, json!({"check": "sent", "field": "max_tokens"})),
        CheckError::NotForKind { check: "sent", kind: ScenarioKind::Vllm }
    );
    // The same name in another form: TokenSpeed's `sent` reads a path.
    assert_eq!(
        parse(ScenarioKind::Tokenspeed, json!({"check": "sent", "field": "max_tokens"})),
        CheckError::NotForKind { check: "sent", kind: ScenarioKind::Tokenspeed }
    );
    assert_eq!(
        parse(ScenarioKind::Vllm, json!({"check": "silent_after_abort", "request": "a"})),
        CheckError::MissingField { check: "silent_after_abort", field: "settle_ms" }
    );
    assert!(matches!(
        parse(ScenarioKind::Vllm, json!({"check": "different_tokens", "requests": ["a", "b", "c"]})),
        CheckError::Invalid { check: "different_tokens", .. }
    ));
    assert!(matches!(
        parse(ScenarioKind::Vllm, json!({"check": "engine_outcome", "request": "a", "is": "abort_row"})),
        CheckError::Invalid { .. }
    ));
    assert!(matches!(
        parse(ScenarioKind::Vllm, json!({"check": "satisfies_constraint", "request": "a", "language_regex": "("})),
        CheckError::Invalid { check: "satisfies_constraint", .. }
    ));
    // Keys a check does not know are notes, as they always were.
    let ok =
        CheckSpec::parse(ScenarioKind::Vllm, &json!({"check": "tokens", "request": "a", "is": [1], "oracle": "x"}));
    assert!(ok.is_ok());
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

#[test]
fn the_vocabulary_is_the_enum_and_every_name_parses_as_its_own_check() {
    for e in VOCABULARY {
        assert!(!e.kinds.is_empty(), "{}", e.name);
        match serde_json::from_value::<ScenarioCheck>(json!({"check": e.name})) {
            Ok(c) => assert_eq!(c.name(), e.name),
            // Only missing fields, never an unknown variant.
            Err(err) => assert!(
                err.to_string().contains("missing field") || err.to_string().contains("did not match"),
                "{}: {err}",
                e.name
            ),
        }
    }
    let mut names: Vec<&str> = VOCABULARY.iter().map(|e| e.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), VOCABULARY.len(), "a name twice");
}

#[test]
fn docs_runner_md_lists_every_check_in_the_generated_table() {
    let doc = std::fs::read_to_string(repo().join("docs/runner/scenarios.md")).unwrap();
    let table = vocabulary_markdown();
    assert!(
        doc.contains(&table),
        "docs/runner/scenarios.md \"Check vocabulary\" is not the generated table; put this there:\n{table}"
    );
    for e in VOCABULARY {
        assert!(doc.contains(&format!("| `{}` |", e.name)), "docs/runner/scenarios.md does not list {}", e.name);
    }
}
