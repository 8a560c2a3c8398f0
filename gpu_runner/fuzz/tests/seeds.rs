//! The committed seeds on stable: each through its target's checks, the
//! corpus as `write-seeds` writes it, and the checks catching what they
//! check.

use std::path::{Path, PathBuf};

use gpu_runner_fuzz::{fuzz, scenario_file, seeds, testee_frames, TARGETS};

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(here().join("corpus").join(target))
        .unwrap_or_else(|e| panic!("corpus/{target}: {e}"))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The stack the checks run on: a fuzz target runs on the main thread
/// (8 MiB); a test thread has 2 MiB, which serde_json's recursive drop,
/// clone and comparison of the hostile seeds' 1000-level values outgrow in
/// a debug build.
const STACK: usize = 8 << 20;

#[test]
fn every_seed_passes_its_targets_checks() {
    for target in TARGETS {
        let files = corpus_files(target);
        assert!(!files.is_empty(), "corpus/{target} is empty");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            let ran = std::thread::Builder::new().stack_size(STACK).spawn(move || fuzz(target, &data)).unwrap().join();
            assert!(matches!(ran, Ok(true)), "{target}: {} fails its checks", f.display());
        }
    }
}

#[test]
fn the_committed_corpus_and_dictionary_are_what_write_seeds_writes() {
    let golden = here().join("../../golden");
    let corpus = seeds::from_golden(&golden).unwrap();
    let diffs = seeds::write(&here().join("corpus"), &corpus, true).unwrap();
    assert!(diffs.is_empty(), "stale corpus (run write-seeds): {diffs:?}");
    let dict = std::fs::read_to_string(here().join("gpu-runner.dict")).unwrap();
    assert_eq!(dict, seeds::dictionary(&golden).unwrap(), "stale gpu-runner.dict (run write-seeds)");
}

#[test]
fn each_target_has_hostile_seeds_and_seeds_from_committed_files() {
    for target in TARGETS {
        let names: Vec<String> =
            corpus_files(target).iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(names.iter().any(|n| n.starts_with("hostile-")), "{target}: no hostile seed");
        assert!(names.iter().filter(|n| !n.starts_with("hostile-")).count() >= 10, "{target}: few committed seeds");
    }
}

#[test]
fn a_committed_scenario_is_accepted_by_its_own_loader() {
    // The seeds reach past the parsers' first refusal: the committed files
    // load (through the same `parse_file` as the target).
    let file = here().join("../../golden/replay/abort.json");
    let text = std::fs::read_to_string(&file).unwrap();
    let s: gpu_runner::scenario::Scenario =
        gpu_runner::load::parse_file(Path::new("abort.json"), &text, &gpu_runner::model_facts::ModelFacts::default())
            .unwrap();
    assert_eq!(s.name, "abort");
}

#[test]
fn names_that_are_not_one_plain_component_fail_the_targets_name_check() {
    for bad in ["", ".", "..", "../x", "a/b", "a\\b", "bell\u{7}", &"n".repeat(129)] {
        assert!(!scenario_file::plain_component(bad), "{bad:?}");
    }
    assert!(scenario_file::plain_component("stop_strings-2"));
}

#[test]
fn a_declared_length_past_the_answer_limit_is_refused_having_read_four_bytes() {
    let mut data = (conformance::testee::MAX_ANSWER as u32 + 1).to_le_bytes().to_vec();
    data.extend_from_slice(b"{}");
    let reads = testee_frames::read_answers(&data, conformance::testee::MAX_ANSWER, 1, true);
    assert_eq!(
        reads,
        [testee_frames::Read1::TooLong(conformance::testee::MAX_ANSWER + 1, conformance::testee::MAX_ANSWER)]
    );
}

#[test]
fn a_stream_read_a_byte_at_a_time_with_interruptions_reads_as_in_one_piece() {
    let mut data = conformance::testee::framed(br#"{"skipped":"x"}"#);
    data.extend(conformance::testee::framed(br#"{"error":"y"}"#));
    data.extend_from_slice(&[9, 0]);
    let whole = testee_frames::read_answers(&data, conformance::testee::MAX_ANSWER, usize::MAX, false);
    assert_eq!(whole.len(), 3);
    assert_eq!(whole[2], testee_frames::Read1::Truncated { read: 2, wanted: 4 });
    assert_eq!(testee_frames::read_answers(&data, conformance::testee::MAX_ANSWER, 1, true), whole);
}
