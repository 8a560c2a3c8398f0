//! TokenSpeed request translation: the gateway rules as unit tests, and the
//! round trip through the engine's own receive path. Parity with TokenSpeed
//! 0.1.1's own request handler on the goldens
//! (`golden/tokenspeed/0.1.1/translation/`) is checked by `conformance
//! verify` (kind `tokenspeed_translation`); the gateway-only rules (string
//! stops, `n`, the prompt vocabulary, `choice`, `json_object`, exclusive
//! `structural_tag`) are tested here because TokenSpeed's handler does not
//! define them.

mod common;

use engine_protocol::Dialect;
use std::sync::OnceLock;

use engine_protocol::translate::tokenspeed::{
    encode_request, translate, TokenSpeedEngineInfo, TokenSpeedOptions, TokenSpeedTranslated,
};
use engine_protocol::translate::{
    ConstraintFields, GatewayTokenizer, GenerateRequest, StopSemantics, TranslateErrorClass,
};
use engine_protocol::validate::tokenspeed::{self as ts, EngineConfig, GREEDY_BELOW, TOP_K_ALL, TOP_K_KERNEL_LIMIT};
use engine_protocol::{decode_message_with, release, Limits, MessageKind};
use engine_protocol::{StructValue, Value};

fn tok() -> &'static GatewayTokenizer {
    static T: OnceLock<GatewayTokenizer> = OnceLock::new();
    T.get_or_init(|| common::tiny_tokenizer().expect("golden/tiny loads"))
}

fn info() -> TokenSpeedEngineInfo {
    TokenSpeedEngineInfo { max_model_len: 64, vocab_size: Some(512), enable_output_logprobs: true }
}

fn req() -> GenerateRequest {
    GenerateRequest { request_id: "r1".into(), prompt_token_ids: vec![320, 313, 18], ..Default::default() }
}

fn ok(r: &GenerateRequest) -> TokenSpeedTranslated {
    translate(r, &info(), tok(), &TokenSpeedOptions::default()).expect("translates")
}

fn sp(t: &TokenSpeedTranslated) -> &StructValue {
    t.sampling_params().expect("sampling_params")
}

fn refused(r: &GenerateRequest, opts: &TokenSpeedOptions) -> (TranslateErrorClass, String) {
    let e = translate(r, &info(), tok(), opts).expect_err("refused");
    (e.class, e.field)
}

#[test]
fn a_default_request_gets_the_room_left_and_the_normalised_defaults() {
    let t = ok(&req());
    assert_eq!(t.max_new_tokens, 61);
    assert_eq!(t.prompt_len, 3);
    let s = sp(&t);
    assert_eq!(s.get("max_new_tokens"), Some(&Value::Int(61)));
    assert_eq!(s.get("top_k"), Some(&Value::Int(TOP_K_ALL)));
    assert_eq!(s.get("is_normalized"), Some(&Value::Bool(true)));
    assert_eq!(s.get("stop_strs"), Some(&Value::Array(vec![])));
    assert_eq!(s.get("seed"), Some(&Value::Int(219_023_793)), "crc32 of rid r1");
    let Value::Struct(r) = &t.request else { panic!("a struct") };
    assert_eq!(r.get("logprob_start_len"), Some(&Value::Int(2)), "the last prompt token");
    assert_eq!(r.get("return_logprob"), Some(&Value::Bool(false)));
    assert_eq!(r.get("stream"), Some(&Value::Bool(true)));
    assert!(t.warnings.is_empty());
}

#[test]
fn greedy_requests_pin_the_seed_to_zero_even_with_a_client_seed() {
    for (temperature, seed) in [(0.0, None), (GREEDY_BELOW / 2.0, Some(7)), (-0.5, Some(7))] {
        let t = ok(&GenerateRequest { temperature: Some(temperature), seed, ..req() });
        let s = sp(&t);
        assert_eq!(s.get("temperature"), Some(&Value::Float(1.0)), "{temperature}");
        assert_eq!(s.get("top_k"), Some(&Value::Int(1)));
        assert_eq!(s.get("seed"), Some(&Value::Int(0)));
    }
    let t = ok(&GenerateRequest { top_k: Some(1), seed: Some(9), temperature: Some(0.8), ..req() });
    assert_eq!(sp(&t).get("seed"), Some(&Value::Int(0)));
    let t = ok(&GenerateRequest { seed: Some(9), temperature: Some(0.8), ..req() });
    assert_eq!(sp(&t).get("seed"), Some(&Value::Int(9)));
}

#[test]
fn temperature_travels_as_the_clients_f64() {
    let t = ok(&GenerateRequest { temperature: Some(0.7), top_p: Some(0.9), ..req() });
    assert_eq!(sp(&t).get("temperature"), Some(&Value::Float(0.7)));
    assert_eq!(sp(&t).get("top_p"), Some(&Value::Float(0.9)));
}

#[test]
fn the_engine_finalises_our_payload_to_exactly_what_we_sent() {
    let cases = [
        req(),
        GenerateRequest { temperature: Some(0.0), ..req() },
        GenerateRequest { logprobs: Some(0), stop_token_ids: vec![9, 3, 3], ..req() },
        GenerateRequest { logit_bias: Some(vec![(5, 1.5)]), min_tokens: Some(2), max_tokens: Some(4), ..req() },
    ];
    let rel = release(Dialect::TokenSpeed, "0.1.1").unwrap();
    let engine = EngineConfig { vocab_size: Some(512), enable_output_logprobs: true };
    for r in cases {
        let t = ok(&r);
        let bytes = encode_request(&t).expect("encodes");
        let d = decode_message_with(
            rel,
            MessageKind::EngineCoreRequest,
            &[&[0u8][..], &bytes[..]],
            &Limits::default(),
            &engine,
        )
        .expect("decodes");
        let Value::Struct(got) = &d.value else { panic!("a struct") };
        let fin = ts::receive(got, &engine_protocol::schema::tokenspeed::RECEIVE_0_1_1, &engine).expect("not dropped");
        assert_eq!(fin.validation_error, None, "{r:?}");
        assert_eq!(&fin.sampling_params, sp(&t), "the receive path changed nothing: {r:?}");
    }
}

#[test]
fn the_whole_struct_is_encoded_with_the_tag_first() {
    let bytes = encode_request(&ok(&req())).unwrap();
    // array16 of 25: the tag and the 24 fields.
    assert_eq!(&bytes[..3], &[0xdc, 0x00, 0x19]);
    assert_eq!(&bytes[3..4], &[0xb9]);
    assert_eq!(&bytes[4..29], b"TokenizedGenerateReqInput");
}

#[test]
fn string_stops_go_to_the_gateway_and_not_to_the_engine() {
    let r = GenerateRequest { stop: vec!["END".into(), "\n".into()], include_stop_str_in_output: true, ..req() };
    let t = ok(&r);
    assert_eq!(sp(&t).get("stop"), Some(&Value::Nil));
    assert_eq!(sp(&t).get("stop_strs"), Some(&Value::Array(vec![])));
    assert_eq!(sp(&t).get("stop_str_max_len"), Some(&Value::Int(0)));
    assert_eq!(t.stop.stop, vec!["END".to_string(), "\n".to_string()]);
    assert!(t.stop.include_stop_str_in_output);
}

#[test]
fn parity_sends_stop_strings_with_their_length_in_characters() {
    let r = GenerateRequest { stop: vec!["é!".into(), "END".into()], ..req() };
    let t = translate(&r, &info(), tok(), &TokenSpeedOptions::tokenspeed_parity()).unwrap();
    let list = Value::Array(vec![Value::Str("é!".into()), Value::Str("END".into())]);
    assert_eq!(sp(&t).get("stop"), Some(&list));
    assert_eq!(sp(&t).get("stop_strs"), Some(&list));
    assert_eq!(sp(&t).get("stop_str_max_len"), Some(&Value::Int(3)));
}

#[test]
fn eos_is_not_added_and_stop_token_ids_pass_through_as_a_set() {
    assert!(tok().eos_token_id.is_some(), "the tiny model has an EOS");
    assert_eq!(sp(&ok(&req())).get("stop_token_ids"), Some(&Value::Nil));
    let t = ok(&GenerateRequest { stop_token_ids: vec![9, 3, 3], ..req() });
    assert_eq!(sp(&t).get("stop_token_ids"), Some(&Value::IntArray(vec![3, 9])));
}

#[test]
fn n_other_than_one_is_refused_before_anything_is_sent() {
    let d = TokenSpeedOptions::default();
    assert_eq!(refused(&GenerateRequest { n: Some(2), ..req() }, &d), (TranslateErrorClass::Unsupported, "n".into()));
    assert_eq!(refused(&GenerateRequest { n: Some(0), ..req() }, &d), (TranslateErrorClass::InvalidValue, "n".into()));
    assert_eq!(sp(&ok(&GenerateRequest { n: Some(1), ..req() })).get("n"), Some(&Value::Int(1)));
}

#[test]
fn only_the_sampled_tokens_logprob_is_carried() {
    let d = TokenSpeedOptions::default();
    let t = ok(&GenerateRequest { logprobs: Some(0), ..req() });
    let Value::Struct(r) = &t.request else { panic!() };
    assert_eq!(r.get("return_logprob"), Some(&Value::Bool(true)));
    assert_eq!(sp(&t).get("logprobs"), Some(&Value::Int(0)));
    for k in [1, 5, -1] {
        let r = GenerateRequest { logprobs: Some(k), ..req() };
        assert_eq!(refused(&r, &d), (TranslateErrorClass::Unsupported, "logprobs".into()), "logprobs {k}");
    }
    for k in [0, 5] {
        let r = GenerateRequest { prompt_logprobs: Some(k), ..req() };
        assert_eq!(refused(&r, &d), (TranslateErrorClass::Unsupported, "prompt_logprobs".into()));
    }
    let smg = TokenSpeedOptions { logprobs_one_as_sampled: true, ..Default::default() };
    let t = translate(&GenerateRequest { logprobs: Some(1), ..req() }, &info(), tok(), &smg).unwrap();
    assert_eq!(sp(&t).get("logprobs"), Some(&Value::Int(0)));
}

#[test]
fn logprobs_are_refused_when_the_engine_has_them_disabled() {
    let off = TokenSpeedEngineInfo { enable_output_logprobs: false, ..info() };
    let e = translate(&GenerateRequest { logprobs: Some(0), ..req() }, &off, tok(), &Default::default()).unwrap_err();
    assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::Unsupported, "logprobs"));
    assert!(translate(&req(), &off, tok(), &Default::default()).is_ok());
}

#[test]
fn the_engine_config_of_an_engine_is_its_vocabulary_and_logprob_switch() {
    let info = TokenSpeedEngineInfo { max_model_len: 64, vocab_size: Some(100), enable_output_logprobs: false };
    assert_eq!(info.engine_config(), EngineConfig { vocab_size: Some(100), enable_output_logprobs: false });
}

#[test]
fn a_data_parallel_rank_option_is_sent_as_the_requests_rank_and_none_by_default() {
    let opts = TokenSpeedOptions { data_parallel_rank: Some(1), ..Default::default() };
    let t = translate(&req(), &info(), tok(), &opts).expect("translates");
    assert_eq!(t.typed.data_parallel_rank, Some(1));
    let Value::Struct(r) = &t.request else { panic!("a struct") };
    assert_eq!(r.get("data_parallel_rank"), Some(&Value::Int(1)));
    assert_eq!(ok(&req()).typed.data_parallel_rank, None);
}

#[test]
fn the_stop_detector_gets_the_requests_parameters_with_vllms_defaults_and_the_chosen_semantics() {
    let t = ok(&req());
    assert!(t.stop.skip_special_tokens && t.stop.spaces_between_special_tokens, "both default to true");
    assert_eq!((t.stop.min_tokens, t.stop.semantics), (0, StopSemantics::Vllm));
    let r = GenerateRequest {
        min_tokens: Some(3),
        skip_special_tokens: Some(false),
        spaces_between_special_tokens: Some(false),
        ..req()
    };
    let opts = TokenSpeedOptions { stop_semantics: StopSemantics::Smg, ..Default::default() };
    let t = translate(&r, &info(), tok(), &opts).expect("translates");
    assert!(!t.stop.skip_special_tokens && !t.stop.spaces_between_special_tokens);
    assert_eq!((t.stop.min_tokens, t.stop.semantics), (3, StopSemantics::Smg));
}

#[test]
fn prompt_logprobs_from_an_engine_without_output_logprobs_are_refused_for_the_engine_first() {
    let off = TokenSpeedEngineInfo { enable_output_logprobs: false, ..info() };
    let r = GenerateRequest { prompt_logprobs: Some(1), ..req() };
    let e = translate(&r, &off, tok(), &Default::default()).unwrap_err();
    assert_eq!((e.class, e.field.as_str()), (TranslateErrorClass::Unsupported, "prompt_logprobs"));
    assert!(e.message.contains("--enable-output-logprobs"), "the engine's switch is the reason: {e}");
}

#[test]
fn two_constraints_are_a_conflict_under_parity_options_too() {
    let c = ConstraintFields { regex: Some("a".into()), grammar: Some("b".into()), ..Default::default() };
    let (class, field) = refused(&so(c), &TokenSpeedOptions::tokenspeed_parity());
    assert_eq!(class, TranslateErrorClass::Conflict, "{field}");
}

#[test]
fn top_k_at_the_kernel_limit_is_refused_but_the_sentinel_passes() {
    let d = TokenSpeedOptions::default();
    let k = |v| GenerateRequest { top_k: Some(v), ..req() };
    assert_eq!(sp(&ok(&k(TOP_K_KERNEL_LIMIT - 1))).get("top_k"), Some(&Value::Int(TOP_K_KERNEL_LIMIT - 1)));
    assert_eq!(refused(&k(TOP_K_KERNEL_LIMIT), &d), (TranslateErrorClass::InvalidValue, "top_k".into()));
    assert_eq!(refused(&k(0), &d), (TranslateErrorClass::InvalidValue, "top_k".into()));
    assert_eq!(sp(&ok(&k(TOP_K_ALL))).get("top_k"), Some(&Value::Int(TOP_K_ALL)));
    assert_eq!(sp(&ok(&k(-1))).get("top_k"), Some(&Value::Int(TOP_K_ALL)));
}

#[test]
fn verify_failures_name_the_gateway_field() {
    let d = TokenSpeedOptions::default();
    let inv = |r: GenerateRequest| refused(&r, &d);
    let iv = TranslateErrorClass::InvalidValue;
    assert_eq!(inv(GenerateRequest { min_tokens: Some(5), max_tokens: Some(4), ..req() }), (iv, "min_tokens".into()));
    assert_eq!(inv(GenerateRequest { max_tokens: Some(-1), ..req() }), (iv, "max_tokens".into()));
    assert_eq!(inv(GenerateRequest { top_p: Some(0.0), ..req() }), (iv, "top_p".into()));
    assert_eq!(inv(GenerateRequest { repetition_penalty: Some(2.5), ..req() }), (iv, "repetition_penalty".into()));
    assert_eq!(inv(GenerateRequest { logit_bias: Some(vec![(512, 1.0)]), ..req() }), (iv, "logit_bias".into()));
}

fn so(c: ConstraintFields) -> GenerateRequest {
    GenerateRequest { structured_outputs: Some(c), ..req() }
}

#[test]
fn constraints_map_to_tokenspeeds_fields_and_at_most_one_is_sent() {
    let d = TokenSpeedOptions::default();
    let t = ok(&so(ConstraintFields { grammar: Some("root ::= \"a\"".into()), ..Default::default() }));
    assert_eq!(sp(&t).get("ebnf"), Some(&Value::Str("root ::= \"a\"".into())));
    let obj = serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let t = ok(&so(ConstraintFields { json: Some(obj), ..Default::default() }));
    let want = r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#;
    assert_eq!(sp(&t).get("json_schema"), Some(&Value::Str(want.into())));
    let two = so(ConstraintFields { json: Some("{}".into()), regex: Some("a".into()), ..Default::default() });
    let (class, field) = refused(&two, &d);
    assert_eq!(class, TranslateErrorClass::Conflict);
    assert_eq!(field, "structured_outputs.json,structured_outputs.regex");
}

#[test]
fn choice_and_json_object_are_refused_as_unsupported() {
    let d = TokenSpeedOptions::default();
    let c = so(ConstraintFields { choice: Some(vec!["a".into()]), ..Default::default() });
    assert_eq!(refused(&c, &d), (TranslateErrorClass::Unsupported, "structured_outputs.choice".into()));
    let j = so(ConstraintFields { json_object: Some(true), ..Default::default() });
    assert_eq!(refused(&j, &d), (TranslateErrorClass::Unsupported, "structured_outputs.json_object".into()));
    let off = ok(&so(ConstraintFields { json_object: Some(false), ..Default::default() }));
    assert_eq!(sp(&off).get("json_schema"), Some(&Value::Nil));
}

#[test]
fn structural_tag_counts_as_a_second_constraint_unless_under_parity() {
    let r = so(ConstraintFields { regex: Some("a".into()), structural_tag: Some("{}".into()), ..Default::default() });
    assert_eq!(refused(&r, &TokenSpeedOptions::default()).0, TranslateErrorClass::Conflict);
    let t = translate(&r, &info(), tok(), &TokenSpeedOptions::tokenspeed_parity()).expect("TokenSpeed accepts it");
    assert_eq!(sp(&t).get("structural_tag"), Some(&Value::Str("{}".into())));
}

#[test]
fn allowed_token_ids_are_refused_as_unsupported() {
    let r = GenerateRequest { allowed_token_ids: Some(vec![5]), ..req() };
    assert_eq!(refused(&r, &Default::default()), (TranslateErrorClass::Unsupported, "allowed_token_ids".into()));
}

#[test]
fn an_empty_prompt_or_one_past_the_vocabulary_is_refused() {
    let d = TokenSpeedOptions::default();
    let empty = GenerateRequest { prompt_token_ids: vec![], ..req() };
    assert_eq!(refused(&empty, &d), (TranslateErrorClass::InvalidValue, "prompt_token_ids".into()));
    let oov = GenerateRequest { prompt_token_ids: vec![1, 512], ..req() };
    assert_eq!(refused(&oov, &d), (TranslateErrorClass::InvalidValue, "prompt_token_ids".into()));
    assert!(translate(&oov, &info(), tok(), &TokenSpeedOptions::tokenspeed_parity()).is_ok());
}

#[test]
fn a_prompt_must_leave_the_reserved_room() {
    let d = TokenSpeedOptions::default();
    let fits = GenerateRequest { prompt_token_ids: (5..68).collect(), ..req() };
    assert_eq!(ok(&fits).max_new_tokens, 1);
    let long = GenerateRequest { prompt_token_ids: (5..69).collect(), ..req() };
    assert_eq!(refused(&long, &d), (TranslateErrorClass::TooLong, "prompt_token_ids".into()));
    let spec = TokenSpeedOptions { input_reserve: 4, ..Default::default() };
    let e = translate(&GenerateRequest { prompt_token_ids: (5..66).collect(), ..req() }, &info(), tok(), &spec);
    assert_eq!(e.unwrap_err().class, TranslateErrorClass::TooLong);
}

#[test]
fn max_tokens_past_the_context_is_cut_with_a_warning_or_refused_by_option() {
    let t = ok(&GenerateRequest { max_tokens: Some(500), ..req() });
    assert_eq!(t.max_new_tokens, 61);
    assert_eq!(t.warnings.len(), 1);
    let t = ok(&GenerateRequest { max_tokens: Some(61), ..req() });
    assert_eq!((t.max_new_tokens, t.warnings.len()), (61, 0));
    // One that fits is sent as asked: 30 with a prompt of 3 (their product
    // would reach past the context, their sum does not).
    let t = ok(&GenerateRequest { max_tokens: Some(30), ..req() });
    assert_eq!((t.max_new_tokens, t.warnings.len()), (30, 0));
    let strict = TokenSpeedOptions { reject_max_tokens_over_room: true, ..Default::default() };
    let r = GenerateRequest { max_tokens: Some(62), ..req() };
    assert_eq!(refused(&r, &strict), (TranslateErrorClass::TooLong, "max_tokens".into()));
}

#[test]
fn extreme_values_are_refused_or_sent_without_panicking() {
    let d = TokenSpeedOptions::default();
    let t = ok(&GenerateRequest { max_tokens: Some(i64::MAX), seed: Some(i64::MIN), ..req() });
    assert_eq!(t.max_new_tokens, 61);
    assert_eq!(refused(&GenerateRequest { max_tokens: Some(i64::MIN), ..req() }, &d).1, "max_tokens");
    let tiny = TokenSpeedEngineInfo { max_model_len: i64::MIN, ..info() };
    assert_eq!(translate(&req(), &tiny, tok(), &d).unwrap_err().class, TranslateErrorClass::TooLong);
    let nan = ok(&GenerateRequest { temperature: Some(f64::NAN), ..req() });
    assert!(matches!(sp(&nan).get("temperature"), Some(Value::Float(f)) if f.is_nan()), "the engine lets NaN pass");
}

#[test]
fn a_repeated_logit_bias_key_keeps_its_first_place_and_last_value() {
    let t = ok(&GenerateRequest { logit_bias: Some(vec![(7, 1.0), (5, 2.0), (7, -3.0)]), ..req() });
    let want =
        Value::Map(vec![(Value::Str("7".into()), Value::Float(-3.0)), (Value::Str("5".into()), Value::Float(2.0))]);
    assert_eq!(sp(&t).get("logit_bias"), Some(&want));
}

#[test]
fn regression_a_large_logit_bias_is_merged_by_key_not_by_scanning() {
    // 200k entries over 512 keys: merged into one entry per key.
    let bias: Vec<(i64, f64)> = (0..200_000).map(|i| (i % 512, i as f64)).collect();
    let t = ok(&GenerateRequest { logit_bias: Some(bias), ..req() });
    let Some(Value::Map(m)) = sp(&t).get("logit_bias") else { panic!("a map") };
    assert_eq!(m.len(), 512);
    assert_eq!(m[0], (Value::Str("0".into()), Value::Float(199_680.0)));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn opt<T: std::fmt::Debug + Clone + 'static>(s: impl Strategy<Value = T> + 'static) -> BoxedStrategy<Option<T>> {
        prop_oneof![Just(None), s.prop_map(Some)].boxed()
    }

    /// Mostly in-vocabulary prompts of 1 to 70 tokens, sometimes empty or
    /// with an id past the vocabulary.
    fn prompt() -> impl Strategy<Value = Vec<u32>> {
        prop_oneof![
            8 => prop::collection::vec(0u32..512, 1..70),
            1 => Just(Vec::new()),
            1 => prop::collection::vec(0u32..600, 1..8),
        ]
    }

    fn request() -> impl Strategy<Value = GenerateRequest> {
        let floats = || prop_oneof![Just(0.0), Just(1.0), Just(-0.5), Just(2.5), Just(1e-7), -3.0f64..3.0];
        (
            (prompt(), opt(-5i64..100), opt(floats()), opt(prop_oneof![Just(0.0), 0.01f64..1.2])),
            (
                opt(prop_oneof![Just(-1i64), Just(0), Just(1), Just(127), Just(128), Just(1 << 30), 2i64..200]),
                opt(floats()),
            ),
            (opt(floats()), opt(floats()), opt(0.0f64..2.5), opt(any::<i64>()), opt(-1i64..2), opt(-2i64..8)),
            (prop::collection::vec(0i64..600, 0..4), opt(prop::collection::vec((-2i64..530, floats()), 0..3))),
        )
            .prop_map(
                |(
                    (prompt, max_tokens, temperature, top_p),
                    (top_k, min_p),
                    (pp, fp, rp, seed, logprobs, mt),
                    (ids, bias),
                )| {
                    GenerateRequest {
                        request_id: "p".into(),
                        prompt_token_ids: prompt,
                        max_tokens,
                        temperature,
                        top_p,
                        top_k,
                        min_p,
                        presence_penalty: pp,
                        frequency_penalty: fp,
                        repetition_penalty: rp,
                        seed,
                        logprobs,
                        min_tokens: mt,
                        stop_token_ids: ids,
                        logit_bias: bias,
                        ..Default::default()
                    }
                },
            )
    }

    #[test]
    fn the_property_sees_requests_of_both_outcomes() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = request();
        let accepted = (0..400)
            .filter(|_| {
                let r = strategy.new_tree(&mut runner).unwrap().current();
                translate(&r, &info(), tok(), &TokenSpeedOptions::default()).is_ok()
            })
            .count();
        assert!((40..=360).contains(&accepted), "{accepted} of 400 accepted");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

        /// Whatever is not refused, the engine admits, and its receive path
        /// leaves the sampling parameters exactly as sent.
        #[test]
        fn every_translated_request_is_admitted_by_the_engine_unchanged(r in request(), logprobs_on in any::<bool>()) {
            let info = TokenSpeedEngineInfo { enable_output_logprobs: logprobs_on, ..info() };
            let Ok(t) = translate(&r, &info, tok(), &TokenSpeedOptions::default()) else { return Ok(()) };
            prop_assert!(t.max_new_tokens >= 0);
            prop_assert!(t.max_new_tokens + t.prompt_len as i64 <= info.max_model_len);
            let bytes = encode_request(&t).expect("encodes");
            let rel = release(Dialect::TokenSpeed, "0.1.1").unwrap();
            let engine = info.engine_config();
            let d = decode_message_with(rel, MessageKind::EngineCoreRequest, &[&[0u8][..], &bytes[..]], &Limits::default(), &engine)
                .expect("decodes");
            let Value::Struct(got) = &d.value else { panic!("a struct") };
            let fin = ts::receive(got, &engine_protocol::schema::tokenspeed::RECEIVE_0_1_1, &engine).expect("not dropped");
            prop_assert_eq!(fin.validation_error, None);
            prop_assert_eq!(&fin.sampling_params, sp(&t));
        }

        /// The typed request that is sent and the value request beside it
        /// are the same request: the same bytes from both encoders.
        #[test]
        fn the_typed_request_and_the_value_request_encode_to_the_same_bytes(r in request(), parity in any::<bool>()) {
            let opts = if parity { TokenSpeedOptions::tokenspeed_parity() } else { TokenSpeedOptions::default() };
            let Ok(t) = translate(&r, &info(), tok(), &opts) else { return Ok(()) };
            let rel = release(Dialect::TokenSpeed, "0.1.1").unwrap();
            let by_value = engine_protocol::encode_message(rel, MessageKind::EngineCoreRequest, &t.request).expect("encodes");
            prop_assert_eq!(t.typed.encode(rel).expect("encodes"), by_value.clone());
            prop_assert_eq!(encode_request(&t).expect("encodes"), by_value[1].clone());
        }
    }
}
