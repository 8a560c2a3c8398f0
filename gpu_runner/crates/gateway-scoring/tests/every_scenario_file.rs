//! Every scenario file kind of the suite (vLLM and TokenSpeed replay
//! scenarios, gateway scenarios, end-to-end scenarios) loads through one
//! loader: the committed files all load, and an unknown or incomplete check
//! is refused at load naming the file and the check.

use std::path::{Path, PathBuf};

use scenario_checks::check::{CheckError, ScenarioKind};
use scenario_checks::load::LoadError;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn load_error<S: scenario_checks::load::ScenarioFile<scenario_checks::model_facts::ModelFacts>>(
    dir: &Path,
) -> LoadError {
    match scenario_checks::load::load_dir::<S, _>(dir, &scenario_checks::model_facts::ModelFacts::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e,
    }
}

#[test]
fn an_unknown_check_in_a_scenario_file_is_refused_at_load_naming_the_file_and_the_check() {
    for (sub, text) in [
        ("vllm", r#"{"requests": [{"id": "a", "request": {}}], "checks": [{"check": "vibes", "request": "a"}]}"#),
        ("ts", r#"{"requests": [{"id": "a", "request": {}}], "checks": [{"check": "vibes", "request": "a"}]}"#),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "0_fine.json", r#"{"requests": [{"id": "a", "request": {}}]}"#);
        write(dir.path(), "bad_one.json", text);
        let e = if sub == "vllm" {
            load_error::<scenario_checks::scenario::Scenario>(dir.path())
        } else {
            load_error::<scenario_checks::scenario::tokenspeed::Scenario>(dir.path())
        };
        assert_eq!(e.file(), Some(dir.path().join("bad_one.json").as_path()));
        assert_eq!(e.check_error(), Some(&CheckError::Unknown { name: "vibes".into() }));
        let words = e.to_string();
        assert!(words.contains("bad_one.json") && words.contains("checks[0]") && words.contains("vibes"), "{words}");
    }
    // Gateway scenarios too.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "g.json",
        r#"{"scenario": "g", "requests": [{"body": {"prompt": "a"}, "checks": [{"check": "vibes"}]}]}"#,
    );
    let tok = engine_testkit::model::tokenizer(&repo().join("golden/tiny")).unwrap();
    let e = gateway_scoring::gateway::load_dir(dir.path(), &repo().join("golden"), &tok).unwrap_err();
    assert_eq!(e.file(), Some(dir.path().join("g.json").as_path()));
    assert_eq!(e.check_error(), Some(&CheckError::Unknown { name: "vibes".into() }));
    assert!(e.to_string().contains("requests[0]: checks[0]"), "{e}");
}

#[test]
fn every_committed_scenario_loads() {
    let replay = scenario_checks::scenario::load_dir(
        &repo().join("golden/replay"),
        &scenario_checks::model_facts::ModelFacts::default(),
    )
    .unwrap();
    assert!(replay.len() >= 21, "{}", replay.len());
    let ts = scenario_checks::scenario::tokenspeed::load_dir(&repo().join("golden/replay/tokenspeed")).unwrap();
    assert!(ts.len() >= 17, "{}", ts.len());
    let tok = engine_testkit::model::tokenizer(&repo().join("golden/tiny")).unwrap();
    let gw = gateway_scoring::gateway::load_dir(&repo().join("golden/gateway"), &repo().join("golden"), &tok).unwrap();
    assert!(gw.len() >= 14, "{}", gw.len());
    let e2e = gateway_scoring::gateway::e2e::load_dir(&repo().join("golden/gateway/e2e")).unwrap();
    assert!(e2e.len() >= 5, "{}", e2e.len());
}

#[test]
fn a_check_with_a_missing_field_is_refused_at_load_naming_the_file_and_the_check() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "min.json",
        r#"{"requests": [{"id": "a", "request": {}}], "checks": [{"check": "no_token_in_first", "request": "a", "n": 4}]}"#,
    );
    let e = load_error::<scenario_checks::scenario::Scenario>(dir.path());
    assert_eq!(e.file(), Some(dir.path().join("min.json").as_path()));
    assert_eq!(e.check_error().and_then(CheckError::check_name), Some("no_token_in_first"));
    let words = e.to_string();
    assert!(words.contains("min.json") && words.contains("missing field `tokens`"), "{words}");
    // A gateway check that TokenSpeed does not take is refused there.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "k.json",
        r#"{"requests": [{"id": "a", "request": {}}], "checks": [{"check": "status", "is": 200}]}"#,
    );
    let e = load_error::<scenario_checks::scenario::tokenspeed::Scenario>(dir.path());
    assert_eq!(e.check_error(), Some(&CheckError::NotForKind { check: "status", kind: ScenarioKind::Tokenspeed }));
}
