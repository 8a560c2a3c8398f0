//! Request translation: rules as unit tests, insta snapshots of translated
//! requests (tests/snapshots/) for review of behaviour changes, and
//! property tests (max_tokens default, fan-out seeds, constraint
//! exactly-one). vLLM parity on the goldens is checked by
//! `conformance verify` (kind `translation`).

mod common;

use engine_protocol::Dialect;
use std::sync::OnceLock;

use engine_protocol::translate::GatewayTokenizer;
use engine_protocol::translate::{
    translate, ConstraintFields, EngineInfo, GenerateRequest, JsonObjectFalse, TranslateErrorClass, TranslateOptions,
    Translated,
};
use engine_protocol::view::to_view;
use engine_protocol::{encode_message, release, MessageKind};
use engine_protocol::{StructValue, Value};
use proptest::prelude::*;
use serde_json::{json, Value as Json};

fn tok() -> &'static GatewayTokenizer {
    static T: OnceLock<GatewayTokenizer> = OnceLock::new();
    T.get_or_init(|| common::tiny_tokenizer().expect("golden/tiny loads"))
}

fn engine(mml: i64) -> EngineInfo {
    EngineInfo { max_model_len: mml, release: release(Dialect::Vllm, "0.33.0").unwrap() }
}

fn req(prompt_len: usize) -> GenerateRequest {
    GenerateRequest { request_id: "r".into(), prompt_token_ids: vec![10; prompt_len], ..Default::default() }
}

fn go(r: &GenerateRequest) -> Translated {
    translate(r, &engine(64), tok(), &TranslateOptions::default()).expect("translates")
}

/// The sampling-params fields that differ from the release defaults.
fn sparse(sp: &StructValue) -> Json {
    let d = StructValue::with_defaults(sp.schema);
    let mut m = serde_json::Map::new();
    for (i, f) in sp.schema.fields.iter().enumerate() {
        if sp.field(i) != d.field(i) {
            m.insert(f.name.to_string(), to_view(f.ty, sp.field(i)));
        }
    }
    Json::Object(m)
}

/// A readable summary of a translation for snapshots.
fn summary(t: &Translated) -> Json {
    let mut ids: Vec<(&u32, &String)> = t.stop_string_token_ids.iter().collect();
    ids.sort();
    json!({
        "requests": t.requests.iter().map(|r| {
            let Value::Struct(s) = &r.request else { unreachable!() };
            json!({
                "request_id": r.request_id,
                "prompt_token_ids": to_view(s.schema.fields[s.schema.index_of("prompt_token_ids").unwrap()].ty, s.get("prompt_token_ids").unwrap()),
                "sampling_params (non-default)": sparse(r.sampling_params()),
            })
        }).collect::<Vec<_>>(),
        "detector": {
            "stop": t.stop.stop,
            "include_stop_str_in_output": t.stop.include_stop_str_in_output,
            "min_tokens": t.stop.min_tokens,
            "skip_special_tokens": t.stop.skip_special_tokens,
            "stop_string_token_ids": ids.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "detector_only_stops": t.detector_only_stops,
        },
        "warnings": t.warnings,
        "max_tokens": t.max_tokens,
    })
}

fn snap(name: &str, r: &GenerateRequest) {
    let t = go(r);
    // every translated request encodes
    for e in &t.requests {
        encode_message(engine(64).release, MessageKind::EngineCoreRequest, &e.request).expect("encodes");
    }
    insta::assert_json_snapshot!(name, summary(&t));
}

#[test]
fn snapshot_defaults() {
    snap("defaults", &GenerateRequest { prompt_token_ids: tok().encode("Hello world."), ..req(0) });
}

#[test]
fn snapshot_sampling_and_stops() {
    snap(
        "sampling_and_stops",
        &GenerateRequest {
            prompt_token_ids: tok().encode("Hello world."),
            max_tokens: Some(10),
            temperature: Some(0.7),
            top_p: Some(0.9),
            top_k: Some(40),
            seed: Some(42),
            stop: vec![".".into(), "Hello world".into(), "<|eot|>".into(), "中".into()],
            stop_token_ids: vec![7, 7, 9],
            logprobs: Some(5),
            prompt_logprobs: Some(0),
            logit_bias: Some(vec![(5, 1.5), (7, -100.0)]),
            ..req(0)
        },
    );
}

#[test]
fn snapshot_fan_out_and_constraint() {
    snap(
        "fan_out_and_constraint",
        &GenerateRequest {
            n: Some(3),
            seed: Some(i64::MAX - 1),
            temperature: Some(0.8),
            max_tokens: Some(500),
            ignore_eos: true,
            structured_outputs: Some(ConstraintFields {
                choice: Some(vec!["yes".into(), "no".into()]),
                ..Default::default()
            }),
            ..req(3)
        },
    );
}

#[test]
fn snapshot_min_tokens_keeps_stops_in_the_detector() {
    snap(
        "min_tokens_stops",
        &GenerateRequest { stop: vec![".".into()], min_tokens: Some(2), max_tokens: Some(8), ..req(3) },
    );
}

#[test]
fn max_tokens_default_is_the_room_never_16() {
    let t = go(&req(48));
    assert_eq!(t.max_tokens, 16, "room is exactly 16 here");
    let t = go(&req(3));
    assert_eq!(t.requests[0].sampling_params().int_field("max_tokens"), Some(61));
}

#[test]
fn prompt_without_room_is_an_error() {
    for n in [64, 70] {
        let e = translate(&req(n), &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
        assert_eq!((e.field.as_str(), e.class), ("prompt_token_ids", TranslateErrorClass::TooLong));
    }
    let e = translate(&req(0), &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
    assert_eq!(e.field, "prompt_token_ids");
}

#[test]
fn an_error_reads_as_its_field_its_message_and_its_class() {
    let r = GenerateRequest { temperature: Some(-1.0), ..req(3) };
    let e = translate(&r, &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
    assert_eq!(e.field, "temperature");
    assert_eq!(e.to_string(), format!("temperature: {} (invalid_value)", e.message));
}

#[test]
fn the_arrival_time_the_gateway_sets_is_on_every_child_typed_and_on_the_wire() {
    let opts = TranslateOptions { arrival_time: 1_700_000_000.25, ..Default::default() };
    let r = GenerateRequest { n: Some(2), ..req(3) };
    let t = translate(&r, &engine(64), tok(), &opts).unwrap();
    for child in &t.requests {
        assert_eq!(child.typed.arrival_time, 1_700_000_000.25);
        let Value::Struct(s) = &child.request else { panic!("a struct") };
        assert_eq!(s.float_field("arrival_time"), Some(1_700_000_000.25));
    }
}

#[test]
fn max_tokens_over_room_is_reported_or_rejected() {
    let r = GenerateRequest { max_tokens: Some(100), ..req(3) };
    let t = go(&r);
    assert_eq!(t.max_tokens, 100);
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
    let strict = TranslateOptions { reject_max_tokens_over_room: true, ..Default::default() };
    let e = translate(&r, &engine(64), tok(), &strict).unwrap_err();
    assert_eq!((e.field.as_str(), e.class), ("max_tokens", TranslateErrorClass::TooLong));
    // The whole room is not over it.
    let r = GenerateRequest { max_tokens: Some(61), ..req(3) };
    assert_eq!(go(&r).warnings, Vec::<String>::new());
    assert_eq!(translate(&r, &engine(64), tok(), &strict).unwrap().max_tokens, 61);
}

#[test]
fn eos_ids_follow_vllms_frontend_and_ignore_eos() {
    let sp = |t: &Translated| t.requests[0].sampling_params().clone();
    let t = go(&GenerateRequest { stop_token_ids: vec![9], ..req(3) });
    let s = sp(&t);
    assert_eq!(s.int_field("_eos_token_id"), Some(2));
    assert_eq!(s.get("stop_token_ids"), Some(&Value::IntArray(vec![4, 9])));
    let t = go(&GenerateRequest { stop_token_ids: vec![9], ignore_eos: true, ..req(3) });
    let s = sp(&t);
    assert!(s.is_nil("_eos_token_id"));
    assert_eq!(s.get("stop_token_ids"), Some(&Value::IntArray(vec![9])));
    let all = to_view(
        s.schema.fields[s.schema.index_of("_all_stop_token_ids").unwrap()].ty,
        s.get("_all_stop_token_ids").unwrap(),
    );
    assert_eq!(all, json!([2, 4, 9]));
}

#[test]
fn json_object_false_is_no_constraint_by_default_and_an_error_for_parity() {
    let r = GenerateRequest {
        structured_outputs: Some(ConstraintFields { json_object: Some(false), ..Default::default() }),
        ..req(3)
    };
    let t = go(&r);
    assert!(t.requests[0].sampling_params().is_nil("structured_outputs"));
    let parity = TranslateOptions { json_object_false: JsonObjectFalse::Reject, ..Default::default() };
    assert_eq!(translate(&r, &engine(64), tok(), &parity).unwrap_err().field, "structured_outputs.json_object");
}

#[test]
fn backend_is_always_set() {
    let r = GenerateRequest {
        structured_outputs: Some(ConstraintFields { regex: Some("[a-z]+".into()), ..Default::default() }),
        ..req(3)
    };
    let opts = TranslateOptions { structured_outputs_backend: "guidance".into(), ..Default::default() };
    let t = translate(&r, &engine(64), tok(), &opts).unwrap();
    let so = t.requests[0].sampling_params().struct_field("structured_outputs").unwrap();
    assert_eq!(so.str_field("_backend"), Some("guidance"));
    assert_eq!(so.str_field("regex"), Some("[a-z]+"));
}

#[test]
fn fan_out_seed_does_not_overflow() {
    let t = go(&GenerateRequest { n: Some(2), seed: Some(i64::MAX), temperature: Some(1.0), ..req(3) });
    let seeds: Vec<Value> = t.requests.iter().map(|r| r.sampling_params().get("seed").unwrap().clone()).collect();
    assert_eq!(seeds, [Value::Int(i64::MAX), Value::UInt(1u64 << 63)]);
    assert_eq!(t.requests.iter().map(|r| r.request_id.as_str()).collect::<Vec<_>>(), ["r-0", "r-1"]);
}

fn constraint_strategy() -> impl Strategy<Value = ConstraintFields> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(a, b, c, d, e, f)| ConstraintFields {
            json: a.then(|| json!({"type": "object"})),
            regex: b.then(|| "[0-9]+".to_string()),
            choice: c.then(|| vec!["x".to_string()]),
            grammar: d.then(|| "root ::= \"a\"".to_string()),
            json_object: e.then_some(true),
            structural_tag: f.then(|| "{\"type\": \"structural_tag\"}".to_string()),
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct("proptest-regressions/translate_request.txt"))), ..ProptestConfig::default() })]

    #[test]
    fn unset_max_tokens_is_the_room(prompt_len in 1usize..64, mml in 64i64..4096) {
        let t = translate(&req(prompt_len), &engine(mml), tok(), &TranslateOptions::default()).unwrap();
        prop_assert_eq!(t.max_tokens, mml - prompt_len as i64);
        prop_assert_eq!(t.requests[0].sampling_params().int_field("max_tokens"), Some(mml - prompt_len as i64));
    }

    #[test]
    fn fan_out_gives_n_requests_with_seed_plus_i(n in 1i64..8, seed in prop::option::of(any::<i64>().prop_filter("-1 means none", |s| *s != -1))) {
        let t = translate(&GenerateRequest { n: Some(n), seed, temperature: Some(0.5), ..req(3) }, &engine(64), tok(), &TranslateOptions::default()).unwrap();
        prop_assert_eq!(t.requests.len() as i64, n);
        let mut ids = std::collections::HashSet::new();
        for (i, r) in t.requests.iter().enumerate() {
            prop_assert!(ids.insert(r.request_id.clone()));
            let sp = r.sampling_params();
            prop_assert_eq!(sp.int_field("n"), Some(1));
            let got = match sp.get("seed").unwrap() { Value::Int(v) => Some(i128::from(*v)), Value::UInt(v) => Some(i128::from(*v)), _ => None };
            let want = seed.map(|s| if n == 1 { i128::from(s) } else { i128::from(s) + i as i128 });
            prop_assert_eq!(got, want);
        }
    }

    /// Any combination of constraint fields other than exactly one is
    /// rejected before anything is sent, naming the fields; exactly one
    /// always passes.
    #[test]
    fn constraint_exactly_one(c in constraint_strategy()) {
        let set = c.set_fields();
        let r = GenerateRequest { structured_outputs: Some(c), ..req(3) };
        match translate(&r, &engine(64), tok(), &TranslateOptions::default()) {
            Ok(t) => {
                prop_assert_eq!(set.len(), 1);
                let so = t.requests[0].sampling_params().struct_field("structured_outputs").unwrap();
                prop_assert!(so.str_field("_backend").is_some());
            }
            Err(e) => {
                prop_assert_ne!(set.len(), 1);
                let class = if set.len() > 1 { TranslateErrorClass::Conflict } else { TranslateErrorClass::InvalidValue };
                prop_assert_eq!(e.class, class);
                for f in &set {
                    prop_assert!(e.field.contains(f) && e.message.contains(f), "{:?} does not name {}", e, f);
                }
            }
        }
    }
}

// ===== one home per rule: the decoder and the translator judge alike

/// A value that breaks a single-field rule, from the rule's own bounds.
fn breaking(check: &engine_protocol::validate::Check) -> Option<Json> {
    use engine_protocol::validate::Check;
    Some(match *check {
        Check::IntAtLeast(min) => json!(min - 1),
        Check::Range { lo, lo_open, .. } => json!(if lo_open { lo } else { lo - 1.0 }),
        Check::NoEmptyString => json!([""]),
        _ => return None,
    })
}

#[test]
fn every_sampling_rule_a_gateway_can_break_is_refused_by_translation_and_decoder_alike() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let mut judged = 0;
    for rule in engine_protocol::validate::SAMPLING_PARAMS_RULES {
        // The sampling options a gateway request carries.
        const GATEWAY: [&str; 13] = [
            "n",
            "presence_penalty",
            "frequency_penalty",
            "repetition_penalty",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "max_tokens",
            "min_tokens",
            "logprobs",
            "prompt_logprobs",
            "stop",
        ];
        let Some(bad) = breaking(&rule.check) else { continue };
        if !GATEWAY.contains(&rule.field) {
            continue;
        }
        let body = json!({"prompt_token_ids": [1, 2], rule.field: bad.clone()});
        let request = GenerateRequest::from_json(&body).expect("a well-formed request");
        judged += 1;
        // The gateway refuses it, naming the rule's field.
        let Err(e) = translate(&request, &engine(64), tok(), &TranslateOptions::default()) else {
            panic!("{} = {bad} was translated", rule.field)
        };
        assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::InvalidValue, rule.field), "{e}");
        // The decoder's rules (the same table) reject it on the wire.
        let mut sp = engine_protocol::internal::sampling_params_value(rel);
        sp.set(rule.field, Value::from_json(&bad));
        let v = engine_protocol::validate::sampling_params(&sp).expect_err(rule.field);
        assert_eq!(v.fields, [rule.field]);
        let req = engine_protocol::internal::engine_core_request_value(rel, "r", vec![1, 2], sp, 0.0);
        let err = encode_message(rel, MessageKind::EngineCoreRequest, &req).expect_err("encode validates");
        assert_eq!(err.class, engine_protocol::RejectClass::Validation);
    }
    assert_eq!(judged, 13, "one single-field rule per gateway option");
}

#[test]
fn relation_rules_are_refused_by_translation_and_decoder_alike() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let cases = [(json!({"n": 2, "temperature": 0.0}), "n"), (json!({"min_tokens": 5, "max_tokens": 2}), "min_tokens")];
    for (fields, field) in cases {
        let mut body = fields.clone();
        body["prompt_token_ids"] = json!([1, 2]);
        let e =
            translate(&GenerateRequest::from_json(&body).unwrap(), &engine(64), tok(), &TranslateOptions::default())
                .expect_err("refused");
        assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::InvalidValue, field), "{e}");
        let mut sp = engine_protocol::internal::sampling_params_value(rel);
        for (k, v) in fields.as_object().unwrap() {
            sp.set(k, Value::from_json(v));
        }
        assert_eq!(engine_protocol::validate::sampling_params(&sp).unwrap_err().fields, [field]);
    }
}

#[test]
fn translation_builds_the_typed_request_its_value_form_mirrors() {
    let rel = release(Dialect::Vllm, "0.33.0").unwrap();
    let r = GenerateRequest {
        n: Some(2),
        seed: Some(7),
        temperature: Some(0.5),
        stop: vec!["\n\n".into(), "x".into()],
        logprobs: Some(2),
        logit_bias: Some(vec![(3, 1.5)]),
        structured_outputs: Some(ConstraintFields { choice: Some(vec!["a".into(), "b".into()]), ..Default::default() }),
        ..req(3)
    };
    let t = go(&r);
    assert_eq!(t.requests.len(), 2);
    for (i, er) in t.requests.iter().enumerate() {
        let sp = er.typed.sampling_params.as_ref().expect("sampling params");
        assert_eq!(sp.seed, Some(7 + i as i128));
        assert_eq!(sp.max_tokens, Some(i128::from(t.max_tokens)));
        // The value form is the typed request, field for field.
        let back = engine_protocol::typed::EngineCoreRequest::from_value(rel, &er.request).expect("typed reads it");
        assert_eq!(back, er.typed);
        // And both encode to the same bytes.
        assert_eq!(er.typed.encode(rel).unwrap(), er.encode(rel).unwrap());
    }
}

#[test]
fn only_n_is_judged_before_the_constraint_so_two_constraints_are_refused_before_a_negative_temperature() {
    // vLLM's server builds the constraint (exactly one) before
    // `SamplingParams` judges its other fields.
    let c = ConstraintFields { regex: Some("a".into()), grammar: Some("b".into()), ..Default::default() };
    let r = GenerateRequest { temperature: Some(-1.0), structured_outputs: Some(c), ..req(3) };
    let e = translate(&r, &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
    assert_eq!(e.class, TranslateErrorClass::Conflict, "{e}");
    // Without the constraint, the temperature is what is refused.
    let e =
        translate(&GenerateRequest { structured_outputs: None, ..r }, &engine(64), tok(), &TranslateOptions::default())
            .unwrap_err();
    assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::InvalidValue, "temperature"));
}

#[test]
fn a_rule_on_a_field_the_engines_release_lacks_is_not_run_as_the_engine_never_sees_the_field() {
    use engine_protocol::translate::request::{check_sampling_rules, sampling_draft};
    // `stream_interval` came with 0.27.0; its rule (at least 1) is judged
    // where the release has the field, and only there.
    let draft = engine_protocol::typed::SamplingParams { stream_interval: Some(0), ..sampling_draft(&req(3)) };
    let e = check_sampling_rules(&draft, release(Dialect::Vllm, "0.34.0").unwrap(), None).unwrap_err();
    assert_eq!(e.field, "stream_interval", "{e}");
    assert_eq!(check_sampling_rules(&draft, release(Dialect::Vllm, "0.26.0").unwrap(), None), Ok(()));
}

#[test]
fn the_sampling_rules_a_translation_judges_by_are_the_engines_releases() {
    use engine_protocol::translate::request::{check_sampling_rules, sampling_draft};
    // vLLM 0.23.0 only asks a non-negative temperature (its own decoder's
    // `mutant/sp_temperature_*` goldens); later releases ask [0, 2]. The
    // translation judges by the table the release's decoder uses, so a
    // release with rules of its own needs no code here.
    let draft = sampling_draft(&GenerateRequest { temperature: Some(3.0), ..req(3) });
    assert_eq!(check_sampling_rules(&draft, release(Dialect::Vllm, "0.23.0").unwrap(), None), Ok(()));
    let e = check_sampling_rules(&draft, release(Dialect::Vllm, "0.34.0").unwrap(), None).unwrap_err();
    assert_eq!(e.field, "temperature", "{e}");
}

#[test]
fn a_structured_json_constraint_that_is_neither_text_nor_object_is_malformed() {
    let c = ConstraintFields { json: Some(json!(5)), ..Default::default() };
    let e = translate(
        &GenerateRequest { structured_outputs: Some(c), ..req(3) },
        &engine(64),
        tok(),
        &TranslateOptions::default(),
    )
    .unwrap_err();
    assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::Malformed, "structured_outputs.json"));
}

#[test]
fn n_is_checked_alone_before_the_constraint_so_two_constraints_are_refused_before_greedy_n() {
    // vLLM's server checks `n` before it builds the constraint, and the
    // relation "n must be 1 under greedy sampling" only with the rest.
    let c = ConstraintFields { regex: Some("a".into()), grammar: Some("b".into()), ..Default::default() };
    let r = GenerateRequest { n: Some(2), temperature: Some(0.0), structured_outputs: Some(c), ..req(3) };
    let e = translate(&r, &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
    assert_eq!(e.class, TranslateErrorClass::Conflict, "two constraints, before greedy n: {e}");
}

/// The instruct-shaped model (golden/instruct/), whose generation config
/// sets temperature 0.7, top_p 0.8, top_k 20 and repetition_penalty 1.05.
fn instruct_tok() -> GatewayTokenizer {
    let m = engine_testkit::model::ModelDir::read(&engine_testkit::corpus::golden_dir().join("instruct"))
        .expect("golden/instruct");
    GatewayTokenizer::from_files(&engine_protocol::translate::tokenizer::ModelFiles {
        tokenizer_json: &m.tokenizer_json,
        tokenizer_config_json: m.tokenizer_config_json.as_deref(),
        generation_config_json: m.generation_config_json.as_deref(),
    })
    .expect("golden/instruct loads")
}

#[test]
fn a_models_generation_config_fills_the_options_a_request_leaves_out_unless_turned_off() {
    let tok = instruct_tok();
    let r = GenerateRequest { top_k: Some(5), ..req(3) };
    let sampled = |opts: &TranslateOptions| {
        let t = translate(&r, &engine(64), &tok, opts).expect("translates");
        let sp = t.requests[0].sampling_params().clone();
        let f = |k: &str| match sp.get(k) {
            Some(Value::Float(x)) => *x,
            Some(Value::Int(i)) => *i as f64,
            other => panic!("{k}: {other:?}"),
        };
        (f("temperature"), f("top_p"), f("top_k"), f("repetition_penalty"))
    };
    assert_eq!(sampled(&TranslateOptions::default()), (0.7, 0.8, 5.0, 1.05), "the request's top_k wins");
    let neutral = TranslateOptions { generation_config_defaults: false, ..Default::default() };
    assert_eq!(sampled(&neutral), (1.0, 1.0, 5.0, 1.0));
}

#[test]
fn a_generation_config_max_new_tokens_is_capped_by_the_room_left() {
    let mut tok = instruct_tok();
    for (default, want) in [(Some(10), 10), (Some(100), 61), (None, 61)] {
        tok.generation_defaults.max_tokens = default;
        let t = translate(&req(3), &engine(64), &tok, &TranslateOptions::default()).expect("translates");
        assert_eq!(t.max_tokens, want, "default {default:?}");
    }
    let explicit = GenerateRequest { max_tokens: Some(7), ..req(3) };
    tok.generation_defaults.max_tokens = Some(5);
    assert_eq!(translate(&explicit, &engine(64), &tok, &TranslateOptions::default()).unwrap().max_tokens, 7);
}

#[test]
fn a_data_parallel_rank_is_sent_on_every_child_and_refused_outside_the_engines() {
    let r = GenerateRequest { data_parallel_rank: Some(1), n: Some(2), max_tokens: Some(4), ..req(3) };
    let opts = TranslateOptions { data_parallel_size: Some(2), ..Default::default() };
    let t = translate(&r, &engine(64), tok(), &opts).expect("rank 1 of 2 translates");
    assert!(t.requests.iter().all(|c| c.typed.data_parallel_rank == Some(1)), "{:?}", t.requests);

    let past = TranslateOptions { data_parallel_size: Some(1), ..Default::default() };
    let e = translate(&r, &engine(64), tok(), &past).unwrap_err();
    assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::InvalidValue, "data_parallel_rank"));
    assert!(e.message.contains("out of range [0, 1)"), "{e}");

    let negative = GenerateRequest { data_parallel_rank: Some(-1), ..r.clone() };
    let e = translate(&negative, &engine(64), tok(), &TranslateOptions::default()).unwrap_err();
    assert_eq!(e.field, "data_parallel_rank", "{e}");
    // No size known: any rank from 0 up goes out.
    for rank in [0, 7] {
        let t = translate(
            &GenerateRequest { data_parallel_rank: Some(rank), ..r.clone() },
            &engine(64),
            tok(),
            &TranslateOptions::default(),
        );
        assert!(t.is_ok(), "rank {rank}: {t:?}");
    }
    // The first engine of one.
    let t = translate(&GenerateRequest { data_parallel_rank: Some(0), ..r }, &engine(64), tok(), &past);
    assert!(t.is_ok(), "{t:?}");
}

#[test]
fn a_request_without_a_rank_sends_none() {
    let t = go(&GenerateRequest { max_tokens: Some(2), ..req(3) });
    assert_eq!(t.requests[0].typed.data_parallel_rank, None);
}
