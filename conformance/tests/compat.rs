//! The cross-release matrix (`conformance compat`): docs/reports/compatibility.md
//! is what the corpora give, and each way a message can read on another
//! release is shown by a real pair of releases' own bytes.

use std::path::{Path, PathBuf};

use conformance::compat::{self, Reading};
use conformance::corpus::{self, Case};
use engine_protocol::RejectClass;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn case(version: &str, id: &str) -> Case {
    let file = root().join(format!("golden/vllm/{version}/{id}.json"));
    let json = engine_testkit::corpus::read_json(&file).expect("case file");
    corpus::parse_case(&file, &json).expect("a case")
}

#[test]
fn docs_compatibility_md_is_generated_from_the_corpora() {
    let corpus = root().join("golden/vllm");
    let want =
        engine_testkit::on_large_stack(move || compat::build(&corpus).map(|m| m.markdown())).expect("the matrix");
    engine_testkit::bless::check_or_bless(
        &root().join("docs/reports/compatibility.md"),
        &want,
        "cargo run -p conformance -- compat --output docs/reports/compatibility.md",
    );
}

#[test]
fn a_newer_gateway_reads_an_older_engines_outputs_as_written() {
    let c = case("0.32.0", "output/finish_stop");
    assert_eq!(compat::read(&c, "0.33.0").unwrap(), Reading::Same);
}

#[test]
fn an_older_gateway_passes_over_the_field_a_newer_engine_appended_and_says_so() {
    // 0.33 appended `error` (position 18) to EngineCoreOutput.
    let c = case("0.33.0", "output/error_validation");
    match compat::read(&c, "0.32.0").unwrap() {
        Reading::Drift(paths) => assert!(paths.iter().any(|p| p.ends_with("[18]")), "{paths:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(compat::read(&c, "0.33.0").unwrap(), Reading::Same);
}

#[test]
fn a_changed_default_is_a_misread_when_the_writer_omitted_the_field() {
    // 0.31 omits `watermarking` when it is its default (true); 0.32's
    // default is None, so a 0.32 engine reads None for every such request.
    let c = case("0.31.0", "request/add_default");
    assert_eq!(
        compat::read(&c, "0.32.0").unwrap(),
        Reading::Misread("EngineCoreRequest.sampling_params.watermarking".into())
    );
    assert_eq!(compat::read(&c, "0.31.0").unwrap(), Reading::Same);
}

#[test]
fn a_positional_removal_makes_the_older_engine_refuse_a_newer_gateways_lora_request() {
    // 0.32 removed `tensorizer_config_dict` (5th of LoRARequest's 7): a
    // 0.31 engine reads 0.32's `load_inplace` bool where it expects a dict.
    let c = case("0.32.0", "request/lora_full");
    match compat::read(&c, "0.31.0").unwrap() {
        Reading::Refused(RejectClass::Type, detail) => assert!(detail.contains("tensorizer_config_dict"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(compat::read(&c, "0.32.0").unwrap(), Reading::Same);
}

#[test]
fn a_0_34_engine_refuses_the_list_prompt_of_every_0_33_gateway_and_0_33_refuses_0_34s_array() {
    // 0.34.0 retyped the prompt to an int32 ndarray (docs/wire-protocol.md
    // §6.9): its decoder unpacks `[dtype, shape, data]` from a list, reads
    // a three-id list's last id as an aux index and refuses other lengths.
    let three = case("0.33.0", "request/all_request_fields");
    match compat::read(&three, "0.34.0").unwrap() {
        Reading::Refused(RejectClass::Frames, detail) => assert!(detail.contains("aux frame index 3"), "{detail}"),
        other => panic!("{other:?}"),
    }
    let six = case("0.33.0", "request/add_frontend_like");
    match compat::read(&six, "0.34.0").unwrap() {
        Reading::Refused(RejectClass::Type, detail) => assert!(detail.contains("got array of 6"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // The other way round: a 0.33 engine finds a str (the dtype) where its
    // list holds ints.
    let array = case("0.34.0", "request/add_frontend_like");
    match compat::read(&array, "0.33.0").unwrap() {
        Reading::Refused(RejectClass::Type, detail) => assert!(detail.contains("expected int, got str"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // What both releases share still reads: a 0.34 engine's outputs, with
    // `watermarking` passed over by a 0.33 gateway.
    let out = case("0.34.0", "output/watermarking_true");
    match compat::read(&out, "0.33.0").unwrap() {
        Reading::Drift(paths) => assert!(paths.iter().any(|p| p.ends_with("[19]")), "{paths:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_release_directory_without_a_table_is_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("compat-no-table-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("0.9.0")).unwrap();
    let e = compat::build(&dir).unwrap_err();
    std::fs::remove_dir_all(&dir).ok();
    assert!(matches!(&e, compat::CompatError::NoTable { version, .. } if version == "0.9.0"), "{e}");
    let shown = e.to_string();
    assert!(shown.contains("0.9.0") && shown.contains("no schema table"), "{shown}");
}

#[test]
fn a_positional_insertion_makes_an_older_gateway_refuse_a_newer_engines_outputs() {
    // 0.26 inserted `ec_transfer_params` at 9 of EngineCoreOutput: a 0.25
    // gateway reads every later field one place off, and the last one
    // (`num_nans_in_logits`, an int) receives `routed_experts`' nil.
    let c = case("0.26.0", "output/finish_stop");
    match compat::read(&c, "0.25.1").unwrap() {
        Reading::Refused(RejectClass::Type, detail) => assert!(detail.contains("num_nans_in_logits"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(compat::read(&c, "0.26.0").unwrap(), Reading::Same);
}
