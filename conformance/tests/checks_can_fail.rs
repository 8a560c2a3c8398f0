//! Each check of `conformance verify` can fail: a golden case with a
//! deliberately wrong expectation (or a corpus with a deliberate fault) is
//! reported as a failure, never as a pass. One test per check; each starts
//! from a committed golden that passes, so the failure is the mutation's.

use std::path::PathBuf;

use conformance::check::{check, Verdict};
use conformance::corpus::{self, Case};
use conformance::skips::{self, ExpectedSkips};
use engine_testkit::corpus::{golden_dir, read_json};
use serde_json::{json, Value as Json};

fn golden(rel: &str) -> PathBuf {
    golden_dir().join("vllm").join(rel)
}

fn read(rel: &str) -> (PathBuf, Json) {
    let path = golden(rel);
    let json = read_json(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (path, json)
}

/// The case at `rel` after `mutate`, parsed as if it lay at its own path
/// (so it finds the tiny tokenizer as the original does).
fn mutated(rel: &str, mutate: impl FnOnce(&mut Json)) -> Case {
    let (path, mut json) = read(rel);
    mutate(&mut json);
    corpus::parse_case(&path, &json).unwrap()
}

fn original(rel: &str) -> Case {
    mutated(rel, |_| {})
}

fn fails(case: &Case) -> String {
    match check(case) {
        Verdict::Fail(why) => why,
        other => panic!("{}: expected a failure, got {other:?}", case.id),
    }
}

// ---- check 1: translation refusals are compared by class and parameter

#[test]
fn a_refusal_about_another_parameter_fails_the_case() {
    let rel = "0.33.0/translation/temperature_negative.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    let case = mutated(rel, |j| {
        j["expected"]["error"]["message"] = json!("top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)");
    });
    let why = fails(&case);
    assert!(why.contains("invalid_value(top_p)") && why.contains("invalid_value(temperature)"), "{why}");
}

#[test]
fn a_refusal_of_another_class_fails_the_case() {
    let rel = "0.33.0/translation/prompt_too_long.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    let case = mutated(rel, |j| {
        j["expected"]["error"]["message"] = json!("Token id 512 is out of vocabulary");
    });
    assert!(fails(&case).contains("too_long(prompt_token_ids)"));
}

#[test]
fn a_refusal_for_nesting_is_about_the_json_document_the_request_constrains_by() {
    // vLLM's message names no parameter: the request's constraint is the one.
    let rel = "0.34.0/translation/so_structural_tag_nesting_over_limit.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    assert_eq!(check(&original("0.34.0/translation/so_json_nesting_over_limit.json")), Verdict::Pass);
    let case = mutated("0.34.0/translation/so_regex_nul.json", |j| {
        j["expected"]["error"]["message"] =
            json!("The JSON schema is nested too deeply: objects and arrays may nest at most 64 levels");
    });
    assert!(fails(&case).contains("outside the classified vocabulary"), "a regex is no JSON document");
}

#[test]
fn a_vllm_message_outside_the_vocabulary_fails_the_case() {
    let case = mutated("0.33.0/translation/temperature_negative.json", |j| {
        j["expected"]["error"]["message"] = json!("Something nobody classified happened.");
    });
    assert!(fails(&case).contains("outside the classified vocabulary"));
}

#[test]
fn a_case_whose_request_does_not_parse_fails_even_when_an_error_is_expected() {
    let rel = "0.33.0/translation/temperature_negative.json";
    let case = mutated(rel, |j| j["input"]["request"]["temperature"] = json!("hot"));
    assert!(fails(&case).contains("does not parse"), "{}", fails(&case));
}

#[test]
fn a_case_without_its_tokenizer_fails_even_when_an_error_is_expected() {
    let case = mutated("0.33.0/translation/temperature_negative.json", |j| {
        j["input"]["tokenizer"] = json!("no-such-tokenizer");
    });
    assert!(fails(&case).contains("no-such-tokenizer"));
}

// ---- check 2: no `drift` key means no drift

#[test]
fn drift_the_case_does_not_list_fails_the_case() {
    let rel = "0.33.0/mutant/sp_unknown_key.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    let case = mutated(rel, |j| {
        j.as_object_mut().unwrap().remove("drift");
    });
    let why = fails(&case);
    assert!(why.contains("lists no drift") && why.contains("future_knob"), "{why}");
}

#[test]
fn drift_other_than_listed_fails_the_case() {
    let case = mutated("0.33.0/mutant/sp_unknown_key.json", |j| {
        j["drift"] = json!(["EngineCoreRequest.sampling_params.another_knob"]);
    });
    assert!(fails(&case).contains("drift differs"));
}

// ---- check 3: skips can be denied, and the expected-skips list cannot go stale

fn temp_corpus(name: &str, cases: &[(&str, Json)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("conformance-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, json) in cases {
        std::fs::write(dir.join(file), serde_json::to_string_pretty(json).unwrap()).unwrap();
    }
    dir
}

#[test]
fn a_version_typo_is_a_skip_and_a_failure_when_skips_are_denied() {
    let (_, mut typo) = read("0.33.0/request/add_default.json");
    typo["version"] = json!("0.33");
    let dir = temp_corpus("typo", &[("typo.json", typo)]);
    let mut results = conformance::verify_dir(&dir).unwrap();
    assert!(matches!(&results[0].verdict, Verdict::Skip(w) if w.contains("0.33")), "{:?}", results[0].verdict);
    skips::apply(&mut results, true, &ExpectedSkips::default());
    assert!(matches!(&results[0].verdict, Verdict::Fail(w) if w.contains("--deny-skips")));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unknown_kind_is_a_skip_and_a_failure_when_skips_are_denied() {
    let (_, mut case) = read("0.33.0/translation/temperature_negative.json");
    case["kind"] = json!("translaton");
    let dir = temp_corpus("kind", &[("kind.json", case)]);
    let mut results = conformance::verify_dir(&dir).unwrap();
    assert!(matches!(&results[0].verdict, Verdict::Skip(w) if w.contains("translaton")));
    skips::apply(&mut results, true, &ExpectedSkips::default());
    assert!(matches!(results[0].verdict, Verdict::Fail(_)));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tokenspeed_translation_case_of_the_08_03_wire_is_a_skip_naming_the_version_translated_for() {
    let mut first = engine_testkit::corpus::json_files(&golden_dir().join("tokenspeed/0.1.1/translation")).unwrap();
    first.sort();
    let mut case = read_json(&first[0]).unwrap();
    case["version"] = json!("git-57b49061");
    let dir = temp_corpus("ts-translation-08-03", &[("case.json", case)]);
    let results = conformance::verify_dir(&dir).unwrap();
    assert!(
        matches!(&results[0].verdict, Verdict::Skip(w) if w.contains("targets tokenspeed 0.1.1, not git-57b49061")),
        "{:?}",
        results[0].verdict
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_listed_skip_is_allowed_and_a_stale_entry_fails() {
    let (_, mut typo) = read("0.33.0/request/add_default.json");
    typo["version"] = json!("0.33");
    let (_, good) = read("0.33.0/request/add_default.json");
    let dir = temp_corpus("listed", &[("typo.json", typo), ("good.json", good)]);
    let list = ExpectedSkips::parse(
        "vllm/0.33/request/add_default written for a release we lack\n\
         vllm/0.33.0/request/add_default listed but checked\n",
    )
    .unwrap();
    let mut results = conformance::verify_dir(&dir).unwrap();
    skips::apply(&mut results, true, &list);
    let failed: Vec<_> = results.iter().filter(|r| matches!(r.verdict, Verdict::Fail(_))).collect();
    assert_eq!(failed.len(), 1, "{results:?}");
    assert!(matches!(&failed[0].verdict, Verdict::Fail(w) if w.contains("stale expected skip")));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- check 4: the engine-bound SamplingParams, not the request echo

#[test]
fn a_wrong_stop_on_the_wire_fails_the_case() {
    let rel = "0.33.0/translation/stop_strings.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    let case = mutated(rel, |j| {
        j["expected"]["requests"][0]["sampling_params"]["stop"] = json!([]);
    });
    assert!(fails(&case).contains("sampling_params.stop"));
}

#[test]
fn a_wrong_field_of_the_engine_bound_request_fails_the_case() {
    let rel = "0.33.0/translation/sampling_all.json";
    assert_eq!(check(&original(rel)), Verdict::Pass);
    for (field, wrong) in [
        ("bad_words", json!(null)),
        ("output_kind", json!(0)),
        ("watermarking", json!(null)),
        ("max_tokens", json!(16)),
    ] {
        let case = mutated(rel, |j| {
            j["expected"]["requests"][0]["engine_request"]["sampling_params"][field] = wrong.clone();
        });
        let why = fails(&case);
        assert!(why.contains(&format!("engine_request.sampling_params.{field}")), "{field}: {why}");
    }
}

#[test]
fn volatile_fields_are_the_only_ones_not_compared() {
    let rel = "0.33.0/translation/sampling_all.json";
    let case = mutated(rel, |j| j["expected"]["requests"][0]["engine_request"]["arrival_time"] = json!(12.5));
    assert_eq!(check(&case), Verdict::Pass, "arrival_time is listed as volatile");
    let case = mutated(rel, |j| {
        j["expected"]["volatile"] = json!(["request_id", "external_req_id"]);
        j["expected"]["requests"][0]["engine_request"]["arrival_time"] = json!(12.5);
    });
    assert!(fails(&case).contains("engine_request.arrival_time"));
}
