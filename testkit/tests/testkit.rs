//! `engine-testkit` itself: the corpus loader on a small fixture corpus
//! (tests/fixtures/corpus), hex errors, the outcome classification's labels,
//! totals and JUnit elements, JSON and values, the builders and the
//! pseudo-random source.

use std::path::{Path, PathBuf};

use engine_protocol::typed::FinishReason;
use engine_protocol::{MessageKind, Outcome, RejectClass, Value};
use engine_testkit::build::{add_frames, decode, vllm, OutputBatch, OutputBuilder, Request};
use engine_testkit::corpus::{self, Body, CaseError, CaseKeyError, CorpusError, EncodeMode, Expect};
use engine_testkit::hex::{self, FramesError, HexError};
use engine_testkit::outcome::{xml_escape, EngineVerdict, ExpectError, JunitElement, Totals, Verdict};
use engine_testkit::{json, rng, split};
use serde_json::json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus")
}

#[test]
fn a_fixture_message_case_parses_with_its_frames_verdict_value_and_encode_mode() {
    let (cases, _) = corpus::load(&fixtures(), &[]).unwrap();
    let c = cases.iter().find(|c| c.id == "abort/two_ids").expect("abort/two_ids loads");
    assert_eq!((c.dialect.as_str(), c.version.as_str(), c.kind.as_str()), ("vllm", "0.33.0", "message"));
    assert_eq!(c.report_id(), "vllm/0.33.0/abort/two_ids");
    assert_eq!(c.group(), "vllm/0.33.0/abort");
    assert_eq!(c.provenance["source"], "vllm-encoder");
    let Body::Message { message, frames, expect, value, encode, drift } = &c.body else { panic!("{:?}", c.body) };
    assert_eq!(*message, MessageKind::AbortRequest);
    assert_eq!(frames, &vec![vec![0x01], hex::unhex("92 a8 7265712d73746f70 a8 7265712d6a736f6e")]);
    assert_eq!(*expect, Expect::Accept);
    assert_eq!(value.as_ref(), Some(&json!(["req-stop", "req-json"])));
    assert_eq!(*encode, EncodeMode::Exact);
    assert_eq!(*drift, None);
    assert!(c.release().is_some());
}

#[test]
fn a_rejected_case_carries_its_class_and_defaults_to_an_equivalent_encode() {
    let (cases, _) = corpus::load(&fixtures(), &[]).unwrap();
    let c = cases.iter().find(|c| c.id == "mutant/abort_truncated").unwrap();
    let (_, _, expect) = c.message().unwrap();
    assert_eq!(*expect, EngineVerdict::Reject(RejectClass::Malformed));
    assert!(matches!(c.body, Body::Message { encode: EncodeMode::Equivalent, value: None, .. }));
}

#[test]
fn load_errors_name_the_file_and_what_is_wrong_and_non_cases_are_passed_over() {
    let (cases, errors) = corpus::load(&fixtures(), &[]).unwrap();
    let mut ids: Vec<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["abort/two_ids", "mutant/abort_truncated", "stop/no_stop"], "schema/dump.json is no case");
    let mut errs: Vec<(String, &corpus::CorpusError)> =
        errors.iter().map(|e| (e.file.file_name().unwrap().to_string_lossy().into_owned(), &e.error)).collect();
    errs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(errs[0].0, "bad_hex.json");
    let CorpusError::Case(CaseError::Key { id, error: CaseKeyError::Frames(frames) }) = errs[0].1 else {
        panic!("{:?}", errs[0].1)
    };
    assert_eq!(id, "broken/bad_hex");
    assert_eq!(*frames, FramesError::NotHex { index: 1, error: HexError::BadDigit { at: 1, found: 'z' } });
    // The report text of a load error: the case, the key and the offset.
    let shown = errs[0].1.to_string();
    assert!(shown.contains("case broken/bad_hex: frames[1] is not hex"), "{shown}");
    assert!(shown.contains("'z' at offset 1"), "{shown}");
    assert_eq!(errs[1].0, "not_json.json");
    assert!(matches!(errs[1].1, CorpusError::Json { .. }), "{:?}", errs[1].1);
    assert!(errs[1].1.to_string().starts_with("not valid JSON"), "{}", errs[1].1);
}

#[test]
fn a_kind_the_caller_checks_carries_input_and_expected_and_any_other_is_unsupported() {
    let (cases, _) = corpus::load(&fixtures(), &["stop_detection"]).unwrap();
    let c = cases.iter().find(|c| c.id == "stop/no_stop").unwrap();
    let Body::Other { input, expected } = &c.body else { panic!("{:?}", c.body) };
    assert_eq!(input["steps"], json!([]));
    assert_eq!(expected, &json!({"steps": []}));
    let (cases, _) = corpus::load(&fixtures(), &[]).unwrap();
    let c = cases.iter().find(|c| c.id == "stop/no_stop").unwrap();
    assert!(matches!(&c.body, Body::Unsupported(why) if why.contains("stop_detection")), "{:?}", c.body);
}

#[test]
fn a_missing_contract_key_is_an_error_naming_the_key() {
    let ok = json!({"case": "x/y", "dialect": "vllm", "version": "0.33.0", "kind": "message",
        "provenance": {"source": "t"}, "message": "AbortRequest", "frames": ["01", "90"], "expect": "accept"});
    let e = corpus::parse_case(Path::new("x.json"), &ok, &[]).unwrap_err();
    assert_eq!(e, CaseError::Key { id: "x/y".into(), error: CaseKeyError::AcceptedWithoutValue });
    assert_eq!(e.to_string(), "case x/y: accepted case without `value`");
    let mut no_source = ok.clone();
    no_source["provenance"] = json!({});
    let e = corpus::parse_case(Path::new("x.json"), &no_source, &[]).unwrap_err();
    assert!(matches!(e, CaseError::Key { error: CaseKeyError::ProvenanceSource, .. }), "{e}");
    let mut bad_class = ok;
    bad_class["expect"] = json!({"reject": "nonsense"});
    let e = corpus::parse_case(Path::new("x.json"), &bad_class, &[]).unwrap_err();
    let want = ExpectError::UnknownRejectClass { class: "nonsense".into() };
    assert!(matches!(&e, CaseError::Key { error: CaseKeyError::Expect(got), .. } if *got == want), "{e}");
    let mut no_id = no_source;
    no_id.as_object_mut().unwrap().remove("case");
    let e = corpus::parse_case(Path::new("x.json"), &no_id, &[]).unwrap_err();
    assert_eq!(e, CaseError::Id(CaseKeyError::Missing { key: "case" }));
}

#[test]
fn the_walk_lists_json_files_in_path_order_and_a_missing_directory_is_an_error() {
    let files = corpus::json_files(&fixtures()).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.strip_prefix(fixtures()).unwrap().display().to_string()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".md")));
    let e = corpus::json_files(&fixtures().join("nowhere")).unwrap_err();
    assert!(matches!(&e, CorpusError::ReadDir { dir, .. } if dir.ends_with("nowhere")), "{e}");
}

#[test]
fn the_committed_golden_corpus_loads_through_the_testkit() {
    let n = engine_testkit::on_large_stack(|| corpus::message_cases(&corpus::golden_dir()).unwrap().len());
    assert!(n > 600, "{n} message cases");
    let frames = corpus::golden_frames("vllm", "0.33.0", "abort/two_ids");
    assert_eq!(frames[0], [0x01]);
}

#[test]
fn hex_errors_say_where_and_what() {
    assert_eq!(hex::decode("0a1F").unwrap(), [0x0a, 0x1f]);
    assert_eq!(hex::decode("0g"), Err(HexError::BadDigit { at: 1, found: 'g' }));
    assert_eq!(hex::decode("abc"), Err(HexError::OddLength { digits: 3 }));
    assert_eq!(hex::decode("ab cd"), Err(HexError::BadDigit { at: 2, found: ' ' }), "strict: no spaces");
    assert_eq!(hex::decode_spaced("ab cd\n ef").unwrap(), [0xab, 0xcd, 0xef]);
    assert_eq!(hex::decode_spaced("ab x").unwrap_err().to_string(), "'x' at offset 3 is not a hex digit");
    assert_eq!(hex::decode_spaced("a bc d").unwrap(), [0xab, 0xcd], "a space inside a byte is ignored");
    let e = hex::decode_frames(&json!(["01", 7])).unwrap_err();
    assert_eq!(e, FramesError::NotString { index: 1 });
    assert_eq!(e.to_string(), "frames[1] is not a string");
    assert_eq!(hex::decode_frames(&json!("01")).unwrap_err(), FramesError::NotArray);
    assert_eq!(FramesError::NotArray.to_string(), "`frames` must be an array of hex strings");
    assert_eq!(hex::frames_shown(&[vec![1u8, 2, 3], vec![]], 2), "[0102...(3 bytes), ]");
}

#[test]
#[should_panic(expected = "test hex: odd number of hex digits (3)")]
fn a_bad_hex_literal_panics_with_the_error() {
    hex::unhex("abc");
}

#[test]
fn each_outcome_has_one_label_one_junit_element_and_one_total() {
    let all = [
        Verdict::Pass,
        Verdict::Fail("f".into()),
        Verdict::ExpectedFailure("e".into()),
        Verdict::Drift(vec!["a.b".into(), "c".into()]),
        Verdict::Skip("s".into()),
    ];
    let labels: Vec<&str> = all.iter().map(Verdict::label).collect();
    assert_eq!(labels, Verdict::LABELS);
    let junit: Vec<Option<&str>> = all.iter().map(|v| v.junit().name()).collect();
    assert_eq!(junit, [None, Some("failure"), Some("skipped"), Some("system-out"), Some("skipped")]);
    assert_eq!(Verdict::Pass.junit(), JunitElement::None);
    assert_eq!(all[3].detail().as_deref(), Some("a.b, c"));
    assert_eq!(all[1].to_string(), "fail: f");
    assert_eq!(all.iter().filter(|v| v.is_failure()).count(), 1);
    let t = Totals::of(&all);
    assert_eq!((t.passed, t.failed, t.expected_failures, t.drift, t.skipped, t.total()), (1, 1, 1, 1, 1, 5));
    assert_eq!(t.summary_line(), "1 passed, 1 failed, 1 expected failures, 1 drift, 1 skipped");
    assert_eq!(Totals::of(&all[..2]).summary_line(), "1 passed, 1 failed");
    assert_eq!(t.to_json(), json!({"passed": 1, "failed": 1, "expected_failures": 1, "drift": 1, "skipped": 1}));
}

#[test]
fn a_run_is_drift_only_when_its_checks_pass_and_expectations_cannot_rot() {
    assert_eq!(Verdict::from_run(&[], vec![]), Verdict::Pass);
    assert_eq!(Verdict::from_run(&[], vec!["x".into()]), Verdict::Drift(vec!["x".into()]));
    assert_eq!(Verdict::from_run(&["a".into(), "b".into()], vec!["x".into()]), Verdict::Fail("a; b".into()));
    assert_eq!(Verdict::Fail("boom".into()).expected_to_fail("bug"), Verdict::ExpectedFailure("bug (boom)".into()));
    assert!(Verdict::Pass.expected_to_fail("bug").is_failure());
    assert!(Verdict::Drift(vec![]).expected_to_fail("bug").is_failure());
    assert_eq!(Verdict::Skip("s".into()).expected_to_fail("bug"), Verdict::Skip("s".into()));
}

#[test]
fn xml_escaping_covers_markup_and_control_characters() {
    assert_eq!(xml_escape("a<&>\"'b"), "a&lt;&amp;&gt;&quot;&apos;b");
    assert_eq!(xml_escape("x\u{1}y\tz\n"), "x y\tz\n");
}

#[test]
fn the_engine_verdict_reads_and_writes_expect_and_agrees_with_decoder_outcomes() {
    let reject = EngineVerdict::from_json(&json!({"reject": "type"})).unwrap();
    assert_eq!(reject, EngineVerdict::Reject(RejectClass::Type));
    assert_eq!(reject.to_json(), json!({"reject": "type"}));
    assert_eq!(EngineVerdict::from_json(&json!("accept")).unwrap().to_json(), json!("accept"));
    assert!(EngineVerdict::from_json(&json!("reject")).is_err());
    assert_eq!((EngineVerdict::Accept.label(), reject.label()), ("accept", "type"));
    assert!(EngineVerdict::Accept.agrees_with(&Outcome::Accept { drift: vec!["x".into()] }));
    assert!(reject.agrees_with(&Outcome::Reject(RejectClass::Type)));
    assert!(!reject.agrees_with(&Outcome::Reject(RejectClass::Frames)));
    assert!(!reject.agrees_with(&Outcome::Accept { drift: vec![] }));
    assert_eq!(reject.wrong(), EngineVerdict::Accept);
    assert_eq!(EngineVerdict::Accept.wrong(), reject);
    assert_eq!(reject.to_string(), "reject type");
}

#[test]
fn json_and_values_convert_both_ways_in_the_view_conventions() {
    let j = json!({"a": [1, -2, 18446744073709551615u64, 1.5, "x"], "b": null, "c": {"d": true}});
    let v = json::to_value(&j);
    let Value::Map(m) = &v else { panic!("{v:?}") };
    assert_eq!(m[0].0, Value::Str("a".into()));
    let Value::Array(a) = &m[0].1 else { panic!("{:?}", m[0].1) };
    assert_eq!(a[..4], [Value::Int(1), Value::Int(-2), Value::UInt(u64::MAX), Value::Float(1.5)]);
    assert_eq!(m[1].1, Value::Nil);
    assert_eq!(json::to_json(&v), j, "plain JSON comes back unchanged");
    assert_eq!(json::to_json(&Value::Float(f64::INFINITY)), json!("Infinity"));
    assert_eq!(json::to_json(&Value::Bytes(vec![0, 0xff])), json!({"$bytes": "00ff"}));
}

#[test]
fn built_requests_and_batches_encode_and_decode_as_built() {
    let rel = vllm("0.33.0");
    let req = Request::new(rel).id("req-1").prompt(vec![5, 6, 7]).sampling("max_tokens", Value::Int(4)).arrival(2.5);
    let frames = req.frames().unwrap();
    assert_eq!(frames[0], [0x00]);
    assert_eq!(add_frames(&frames[1]), frames);
    let d = decode(rel, MessageKind::EngineCoreRequest, &frames).unwrap();
    let Value::Struct(r) = &d.value else { panic!() };
    assert_eq!(r.str_field("request_id"), Some("req-1"));
    assert_eq!(r.get("prompt_token_ids"), Some(&Value::IntArray(vec![5, 6, 7])));
    assert_eq!(r.struct_field("sampling_params").and_then(|s| s.int_field("max_tokens")), Some(4));
    let bad = Request::new(rel).sampling("temperature", Value::Float(-1.0)).frames().unwrap_err();
    assert_eq!(bad.class, RejectClass::Validation);

    let batch = OutputBatch::new(rel)
        .output(OutputBuilder::new(rel, "a", vec![1, 2]))
        .output(OutputBuilder::new(rel, "b", vec![]).finish(FinishReason::Length))
        .field("engine_index", Value::Int(3));
    let d = decode(rel, MessageKind::EngineCoreOutputs, &batch.frames().unwrap()).unwrap();
    let typed = engine_protocol::typed::EngineCoreOutputs::from_value(rel, &d.value).unwrap();
    assert_eq!(typed.engine_index, 3);
    let outs: Vec<_> = typed.outputs.into_iter().map(|o| (o.request_id, o.finish_reason)).collect();
    assert_eq!(outs, [("a".to_string(), None), ("b".to_string(), Some(FinishReason::Length))]);
}

#[test]
fn the_pseudo_random_source_is_the_generators_and_deterministic() {
    for seed in [0, 1, 7, u64::MAX] {
        assert_eq!(
            rng::pseudo_random_bytes(seed, 300),
            engine_protocol::internal::arbitrary::pseudo_random_bytes(seed, 300)
        );
    }
    let mut a = rng::XorShift::new(42);
    let mut b = rng::XorShift::new(42);
    let xs: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
    assert_eq!(xs, (0..100).map(|_| b.next_u64()).collect::<Vec<_>>());
    assert_ne!(rng::pseudo_random_bytes(1, 64), rng::pseudo_random_bytes(2, 64));
    let ids = rng::XorShift::new(3).token_ids(1000, 10);
    assert!(ids.iter().all(|&t| (0..10).contains(&t)) && ids.contains(&9));
    assert_eq!(rng::XorShift::new(3).below(0), 0);
}

#[test]
fn joined_frames_split_back() {
    let frames = vec![vec![0u8], vec![0x91, 0x01], vec![]];
    let data = split::join(&frames).unwrap();
    let back: Vec<Vec<u8>> = split::split(&data).into_iter().map(|f| f.into_owned()).collect();
    assert_eq!(back, frames);
}
