//! `conformance verify --testee` (docs/testee.md): the reference
//! implementation served as a testee (`conformance testee`) earns every
//! message case of the committed corpus the verdict in-process `verify`
//! gives it; a testee broken on purpose (the hidden `--fault` of
//! `conformance testee`) fails exactly the cases its fault touches; and a
//! testee that crashes, hangs or answers garbage costs the case it was
//! serving, never the run.
//!
//! Each test runs the `conformance` binary itself, as a user would, with a
//! JSON report; one testee process serves a whole run. The corpus is read in
//! the tests on a thread with a large stack: a case's view nests as deep as
//! the decoder admits (docs/limits.md), and cloning or dropping such a JSON
//! value recurses once per level.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use conformance::check::report_id;
use conformance::corpus::{self, Body, EncodeMode, Expect};
use conformance::testee::GATEWAY_SKIP;
use engine_testkit::corpus::{golden_dir, read_json};
use engine_testkit::on_large_stack;
use serde_json::{json, Value as Json};

const BIN: &str = env!("CARGO_BIN_EXE_conformance");

fn golden(rel: &str) -> PathBuf {
    golden_dir().join("vllm").join(rel)
}

/// The reference testee, with a fault when given one.
fn testee(fault: Option<&str>) -> String {
    match fault {
        None => format!("'{BIN}' testee"),
        Some(f) => format!("'{BIN}' testee --fault {f}"),
    }
}

/// One case of a JSON report: status and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    status: String,
    detail: Option<String>,
}

struct Run {
    code: i32,
    cases: BTreeMap<String, Outcome>,
    stderr: String,
    elapsed: Duration,
}

/// `conformance verify --corpus CORPUS --testee TESTEE --format json EXTRA...`.
fn verify(corpus: &Path, testee: &str, extra: &[&str]) -> Run {
    let started = Instant::now();
    let out = Command::new(BIN)
        .arg("verify")
        .arg("--corpus")
        .arg(corpus)
        .args(["--testee", testee, "--format", "json"])
        .args(extra)
        .output()
        .expect("the conformance binary runs");
    let elapsed = started.elapsed();
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut cases = BTreeMap::new();
    if code != 2 {
        let report: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        for c in report["cases"].as_array().expect("cases") {
            let outcome = Outcome {
                status: c["status"].as_str().unwrap().to_string(),
                detail: c["detail"].as_str().map(str::to_string),
            };
            cases.insert(c["case"].as_str().unwrap().to_string(), outcome);
        }
    }
    Run { code, cases, stderr, elapsed }
}

/// In-process verdicts, as the JSON report writes them.
fn in_process(corpus: &Path) -> BTreeMap<String, Outcome> {
    let corpus = corpus.to_path_buf();
    on_large_stack(move || {
        conformance::verify_dir(&corpus)
            .expect("the corpus loads")
            .into_iter()
            .map(|r| {
                let outcome = Outcome { status: r.verdict.label().into(), detail: r.verdict.detail() };
                (r.id, outcome)
            })
            .collect()
    })
}

/// What the tests need to know of a case.
#[derive(Debug, Clone)]
struct Summary {
    id: String,
    kind: String,
    /// `Some(true)` for an accepted message case, `Some(false)` for a
    /// rejected one, `None` for the gateway kinds.
    accepted: Option<bool>,
    exact: bool,
    lists_drift: bool,
}

impl Summary {
    /// The requests the reference testee serves for the case: one for a
    /// rejected message, three for an accepted one (decode, encode, decode
    /// again), none for the gateway kinds.
    fn requests(&self) -> usize {
        match self.accepted {
            Some(true) => 3,
            Some(false) => 1,
            None => 0,
        }
    }
}

/// Every case under `corpus`, in run order.
fn cases(corpus: &Path) -> Vec<Summary> {
    let corpus = corpus.to_path_buf();
    on_large_stack(move || {
        let (cases, errors) = corpus::load(&corpus).unwrap();
        assert!(errors.is_empty());
        cases
            .iter()
            .map(|c| {
                let (accepted, exact, lists_drift) = match &c.body {
                    Body::Message { expect, encode, drift, .. } => (
                        Some(*expect == Expect::Accept),
                        *encode == EncodeMode::Exact,
                        drift.as_ref().is_some_and(|d| !d.is_empty()),
                    ),
                    _ => (None, false, false),
                };
                Summary { id: report_id(c), kind: c.kind.clone(), accepted, exact, lists_drift }
            })
            .collect()
    })
}

fn ids(cases: &[Summary], keep: impl Fn(&Summary) -> bool) -> BTreeSet<String> {
    cases.iter().filter(|c| keep(c)).map(|c| c.id.clone()).collect()
}

/// The cases a testee that fails on request `n + 1` of each process fails:
/// the runner restarts it for the next case, whose requests a fresh process
/// counts from one.
fn cases_failed_every(n: usize, cases: &[Summary]) -> BTreeSet<String> {
    let mut served = 0;
    let mut failed = BTreeSet::new();
    for case in cases.iter().filter(|c| c.requests() > 0) {
        if served + case.requests() > n {
            failed.insert(case.id.clone());
            served = 0;
        } else {
            served += case.requests();
        }
    }
    failed
}

fn failed(run: &Run) -> BTreeSet<String> {
    run.cases.iter().filter(|(_, o)| o.status == "fail").map(|(id, _)| id.clone()).collect()
}

fn detail<'a>(run: &'a Run, id: &str) -> &'a str {
    run.cases[id].detail.as_deref().unwrap_or("")
}

/// A corpus directory of its own under the temp directory.
fn temp_corpus(name: &str, cases: &[(&str, Json)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("conformance-testee-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, json) in cases {
        std::fs::write(dir.join(file), serde_json::to_string_pretty(json).unwrap()).unwrap();
    }
    dir
}

fn read(rel: &str) -> Json {
    read_json(&golden(rel)).unwrap()
}

// ---- the reference implementation as a testee

#[test]
fn the_reference_testee_earns_every_message_case_the_verdict_of_in_process_verify() {
    let corpus = golden("");
    let expected = in_process(&corpus);
    let run = verify(&corpus, &testee(None), &[]);
    eprintln!("verify --testee over golden/vllm: {:.2} s ({})", run.elapsed.as_secs_f64(), run.stderr.trim());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.cases.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "the same cases");
    let kinds: BTreeMap<String, String> = cases(&corpus).into_iter().map(|c| (c.id, c.kind)).collect();
    let mut messages = 0;
    for (id, got) in &run.cases {
        if kinds[id] == "message" {
            messages += 1;
            assert_eq!(got, &expected[id], "{id}");
        } else {
            assert_eq!(got, &Outcome { status: "skip".into(), detail: Some(GATEWAY_SKIP.into()) }, "{id}");
        }
    }
    assert!(messages >= 800, "{messages} message cases");
    assert!(run.stderr.contains(", 0 restarts"), "{}", run.stderr);
}

#[test]
fn the_gateway_kinds_skipped_under_a_testee_fail_when_skips_are_denied() {
    let run = verify(&golden("0.33.0/logprobs"), &testee(None), &["--deny-skips"]);
    assert_eq!(run.code, 1);
    assert!(!run.cases.is_empty());
    for (id, o) in &run.cases {
        assert_eq!(o.status, "fail", "{id}");
        assert!(detail(&run, id).contains(GATEWAY_SKIP) && detail(&run, id).contains("--deny-skips"), "{id}");
    }
}

// ---- each check catches its wrong answer

#[test]
fn a_testee_that_flips_accept_and_reject_fails_every_message_case() {
    let run = verify(&golden("0.33.0/mutant"), &testee(Some("flip-accept")), &[]);
    assert_eq!(run.code, 1);
    assert_eq!(failed(&run).len(), run.cases.len(), "every case fails");
    for id in run.cases.keys() {
        let d = detail(&run, id);
        assert!(d.starts_with("expected accept, got reject validation") || d.contains(", got accept"), "{id}: {d}");
    }
}

#[test]
fn a_testee_that_rejects_with_another_class_fails_exactly_the_rejected_cases() {
    let rejected = ids(&cases(&golden("0.33.0/mutant")), |c| c.accepted == Some(false));
    assert!(rejected.len() > 100);
    let run = verify(&golden("0.33.0/mutant"), &testee(Some("wrong-class")), &[]);
    assert_eq!(failed(&run), rejected);
    for id in &rejected {
        assert!(detail(&run, id).contains("got reject") && detail(&run, id).contains("wrong-class"), "{id}");
    }
}

#[test]
fn a_testee_whose_views_differ_fails_exactly_the_accepted_cases_at_the_view() {
    let accepted = ids(&cases(&golden("0.33.0/mutant")), |c| c.accepted == Some(true));
    let run = verify(&golden("0.33.0/mutant"), &testee(Some("wrong-view")), &[]);
    assert_eq!(failed(&run), accepted);
    for id in &accepted {
        assert!(detail(&run, id).starts_with("decoded view differs"), "{id}: {}", detail(&run, id));
    }
}

#[test]
fn a_testee_that_reports_no_drift_fails_exactly_the_cases_that_list_drift() {
    let with_drift = ids(&cases(&golden("0.33.0")), |c| c.lists_drift);
    assert!(!with_drift.is_empty());
    let run = verify(&golden("0.33.0"), &testee(Some("drop-drift")), &[]);
    assert_eq!(failed(&run), with_drift);
    for id in &with_drift {
        assert!(detail(&run, id).starts_with("drift differs"), "{id}: {}", detail(&run, id));
    }
}

#[test]
fn a_testee_whose_encoder_flips_a_byte_fails_every_exact_case_and_no_rejected_one() {
    let corpus = golden("0.33.0/request");
    let run = verify(&corpus, &testee(Some("corrupt-encode")), &[]);
    let mut exact = 0;
    for c in cases(&corpus) {
        let id = &c.id;
        match (c.accepted, c.exact) {
            (Some(false), _) => assert_eq!(run.cases[id].status, "pass", "{id}"),
            (Some(true), true) => {
                exact += 1;
                assert!(detail(&run, id).starts_with("encode not exact"), "{id}: {}", detail(&run, id));
            }
            (Some(true), false) => assert_eq!(run.cases[id].status, "fail", "{id}: decode(encode(value)) differs"),
            (None, _) => {}
        }
    }
    assert!(exact > 50, "{exact} exact cases");
}

#[test]
fn a_decoder_only_testee_passes_rejected_cases_and_skips_accepted_ones_with_its_reason() {
    let run = verify(&golden("0.33.0/mutant"), &testee(Some("skip-encode")), &[]);
    assert_eq!(run.code, 0, "skips are not failures unless denied");
    let skipped =
        Outcome { status: "skip".into(), detail: Some("skipped by the testee: this testee only decodes".into()) };
    for c in cases(&golden("0.33.0/mutant")) {
        let o = &run.cases[&c.id];
        match c.accepted {
            Some(false) => assert_eq!(o.status, "pass", "{}", c.id),
            _ => assert_eq!(o, &skipped, "{}", c.id),
        }
    }
}

#[test]
fn a_case_outside_the_testees_declaration_is_skipped_with_the_testees_reason() {
    let mut newer = read("0.33.0/request/add_default.json");
    newer["version"] = json!("0.99.0");
    let dir =
        temp_corpus("declaration", &[("newer.json", newer), ("known.json", read("0.33.0/request/add_default.json"))]);
    let run = verify(&dir, &testee(None), &[]);
    assert_eq!(run.cases["vllm/0.33.0/request/add_default"].status, "pass");
    let skipped = &run.cases["vllm/0.99.0/request/add_default"];
    assert_eq!(skipped.status, "skip");
    let why = skipped.detail.as_deref().unwrap();
    assert!(
        why.contains("does not support vllm 0.99.0 EngineCoreRequest") && why.contains("schema tables for"),
        "{why}"
    );
    let list = dir.join("expected-skips.txt");
    std::fs::write(&list, "vllm/0.99.0/request/add_default no release 0.99.0 in the testee\n").unwrap();
    let denied = verify(&dir, &testee(None), &["--deny-skips", "--expected-skips", list.to_str().unwrap()]);
    assert_eq!(denied.code, 0, "a listed skip is allowed: {:?}", denied.cases);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- crashes, hangs and garbage cost one case each, never the run

#[test]
fn a_testee_that_crashes_fails_exactly_the_cases_it_crashed_on_and_the_run_goes_on() {
    let corpus = golden("0.33.0/mutant");
    let all = cases(&corpus);
    let expected = cases_failed_every(10, &all);
    assert!(expected.len() > 10, "the fault fires many times");
    let run = verify(&corpus, &testee(Some("crash-after=10")), &[]);
    assert_eq!(run.cases.len(), all.len(), "every case is reported");
    assert_eq!(failed(&run), expected);
    for id in &expected {
        let d = detail(&run, id);
        assert!(d.starts_with("the testee crashed on ") && d.contains(id) && d.contains("exit status: 3"), "{d}");
    }
    assert!(run.stderr.contains(&format!(", {} restarts", expected.len())), "{}", run.stderr);
}

#[test]
fn a_testee_that_hangs_times_out_on_that_case_and_the_run_goes_on() {
    let corpus = golden("0.33.0/abort");
    let expected = cases_failed_every(4, &cases(&corpus));
    assert_eq!(expected.len(), 2);
    let run = verify(&corpus, &testee(Some("hang-after=4")), &["--testee-timeout", "0.5"]);
    assert_eq!(failed(&run), expected);
    assert_eq!(run.cases.len(), 4);
    for id in &expected {
        assert!(detail(&run, id).starts_with("the testee timed out on ") && detail(&run, id).contains("after 0.5 s"));
    }
    assert!(run.elapsed < Duration::from_secs(5), "two timeouts of 0.5 s took {:?}", run.elapsed);
}

#[test]
fn a_testee_that_answers_garbage_fails_that_case_and_is_restarted() {
    let corpus = golden("0.33.0/mutant");
    let expected = cases_failed_every(25, &cases(&corpus));
    let run = verify(&corpus, &testee(Some("garbage-after=25")), &[]);
    assert_eq!(failed(&run), expected);
    for id in &expected {
        let d = detail(&run, id);
        assert!(d.starts_with("the testee answered garbage to ") && d.contains("not JSON"), "{d}");
    }
    let passed = run.cases.values().filter(|o| o.status == "pass").count();
    assert_eq!(passed + expected.len(), run.cases.len());
}

#[test]
fn a_testee_that_does_not_speak_the_protocol_stops_the_run_with_status_2() {
    // `cat` answers the handshake with the handshake request itself.
    let run = verify(&golden("0.33.0/abort"), "cat", &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("the testee answered garbage to hello"), "{}", run.stderr);
    let run = verify(&golden("0.33.0/abort"), "true", &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("the testee crashed on hello"), "{}", run.stderr);
}

#[test]
fn a_testee_command_that_cannot_run_stops_the_run_with_status_2() {
    let run = verify(&golden("0.33.0/abort"), "/nonexistent/testee --flag", &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("cannot run the testee `/nonexistent/testee --flag`"), "{}", run.stderr);
}

#[test]
fn a_testee_run_reports_as_junit_like_any_run() {
    let out = Command::new(BIN)
        .args(["verify", "--format", "junit", "--testee", &testee(Some("flip-accept")), "--corpus"])
        .arg(golden("0.33.0/abort"))
        .output()
        .unwrap();
    let xml = String::from_utf8(out.stdout).unwrap();
    assert!(xml.contains("<testsuite name=\"vllm/0.33.0/abort\" tests=\"4\" failures=\"4\""), "{xml}");
    assert!(xml.contains("failure message=\"expected accept, got reject validation"), "{xml}");
}

#[test]
fn a_testee_that_declares_a_huge_answer_and_floods_is_refused_by_its_length_and_restarted() {
    // The flood declares 1 GiB and writes without end: the runner refuses
    // the length before reading (docs/limits.md "Peers"), kills the
    // testee, and goes on with a fresh one.
    let corpus = golden("0.33.0/mutant");
    let expected = cases_failed_every(25, &cases(&corpus));
    let run = verify(&corpus, &testee(Some("flood-after=25")), &[]);
    assert_eq!(failed(&run), expected);
    for id in &expected {
        let d = detail(&run, id);
        assert!(d.starts_with("the testee answered garbage to ") && d.contains("(more than 67108864)"), "{d}");
    }
    assert!(run.elapsed < Duration::from_secs(60), "{:?}", run.elapsed);
}
