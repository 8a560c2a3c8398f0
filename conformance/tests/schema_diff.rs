//! `conformance schema-diff` on real pairs of releases: the schema dumps
//! under `golden/generate/schema/`, written from each release's own classes.
//! Each classification is shown on a change a real release pair made.

use std::path::PathBuf;

use conformance::schema_diff::{diff, dump_path, load, releases, worst, Change, ChangeKind, DriftRule, DriftVerdict};

fn schemas() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../golden/generate/schema")
}

fn changes(dialect: &str, a: &str, b: &str) -> Vec<Change> {
    let sa = load(&dump_path(&schemas(), dialect, a)).expect("dump a");
    let sb = load(&dump_path(&schemas(), dialect, b)).expect("dump b");
    diff(&sa, &sb)
}

fn at<'c>(cs: &'c [Change], path: &str) -> &'c Change {
    cs.iter().find(|c| c.path == path).unwrap_or_else(|| panic!("no change at {path}: {cs:#?}"))
}

#[test]
fn a_positional_field_appended_with_a_default_is_drift_one_way_and_compatible_the_other() {
    // vLLM 0.33.0 appended EngineCoreOutput.error (docs/wire-protocol.md §11.1).
    let cs = changes("vllm", "0.32.0", "0.33.0");
    let c = at(&cs, "EngineCoreOutput.error");
    assert!(matches!(c.kind, ChangeKind::FieldAdded { index: 18, appended: true, .. }), "{c:?}");
    assert_eq!(c.a_reads_b, (DriftVerdict::Drift, DriftRule::TrailingElementIgnored));
    assert_eq!(c.b_reads_a, (DriftVerdict::Compatible, DriftRule::AbsentTakesDefault));
}

#[test]
fn a_key_added_to_a_dataclass_is_drift_one_way_and_compatible_the_other() {
    let cs = changes("vllm", "0.32.0", "0.33.0");
    let c = at(&cs, "EngineCoreReadyResponse.coord_store_port");
    assert_eq!(c.a_reads_b, (DriftVerdict::Drift, DriftRule::UnknownKeyIgnored));
    assert_eq!(c.b_reads_a, (DriftVerdict::Compatible, DriftRule::AbsentTakesDefault));
    // 0.32.0 to 0.33.0 breaks nobody: its worst is drift.
    assert_eq!(worst(&cs), Some(DriftVerdict::Drift));
}

#[test]
fn the_prompt_retyped_from_a_list_to_an_int32_array_breaks_both_ways() {
    // vLLM 0.34.0 sends the prompt's token ids as an ndarray, and its
    // decoder unpacks `[dtype, shape, data]` from whatever arrives: a 0.33
    // gateway's list is refused, a 0.34 frontend's array is no list[int]
    // to a 0.33 engine (docs/wire-protocol.md §6.9, §11.1).
    let cs = changes("vllm", "0.33.0", "0.34.0");
    let c = at(&cs, "EngineCoreRequest.prompt_token_ids");
    assert!(
        matches!(&c.kind, ChangeKind::FieldRetyped { a, b } if a == "list[int] | None" && b == "numpy.ndarray | None"),
        "{c:?}"
    );
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers));
    assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers));
    assert_eq!(worst(&cs), Some(DriftVerdict::Breaking));
    // Everything else 0.34.0 changed is appended: drift one way, compatible
    // the other.
    for path in [
        "EngineCoreRequest.block_hashes",
        "EngineCoreOutput.watermarking",
        "EngineCoreReadyResponse.prefix_hash_config",
    ] {
        let c = at(&cs, path);
        assert_eq!((c.a_reads_b.0, c.b_reads_a.0), (DriftVerdict::Drift, DriftVerdict::Compatible), "{path}");
    }
}

#[test]
fn the_same_release_has_no_change() {
    for r in releases(&schemas(), "vllm") {
        assert_eq!(changes("vllm", &r, &r), [], "{r}");
    }
}

#[test]
fn trailing_positional_fields_removed_are_compatible_toward_the_older_reader() {
    // TokenSpeed's git revision lacks the five trailing counters of 0.1.1's
    // output batch.
    let cs = changes("tokenspeed", "0.1.1", "git-57b49061");
    let c = at(&cs, "BatchTokenIDOutSlim.num_running");
    assert!(matches!(c.kind, ChangeKind::FieldRemoved { trailing: true, .. }), "{c:?}");
    assert_eq!(c.a_reads_b, (DriftVerdict::Compatible, DriftRule::AbsentTakesDefault));
    assert_eq!(c.b_reads_a, (DriftVerdict::Drift, DriftRule::TrailingElementIgnored));
}

#[test]
fn a_renamed_key_is_breaking_both_ways() {
    // The ready response's `prefix_granularity` and `block_size`, the same
    // slot under two names in TokenSpeed's two releases.
    let cs = changes("tokenspeed", "0.1.1", "git-57b49061");
    let c = at(&cs, "WireEngineCoreReadyResponse.block_size");
    assert!(matches!(&c.kind, ChangeKind::FieldRenamed { a, b, .. } if a == "prefix_granularity" && b == "block_size"));
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::RenamedKeyDropsValue));
    assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::RenamedKeyDropsValue));
    assert_eq!(worst(&cs), Some(DriftVerdict::Breaking));
}

#[test]
fn the_diff_is_symmetric_its_directions_swapped() {
    for (d, a, b) in [
        ("vllm", "0.31.0", "0.32.0"),
        ("vllm", "0.32.0", "0.33.0"),
        ("vllm", "0.33.0", "0.34.0"),
        ("tokenspeed", "0.1.1", "git-57b49061"),
    ] {
        let ab = changes(d, a, b);
        let ba = changes(d, b, a);
        assert_eq!(ab.len(), ba.len(), "{a} {b}");
        for c in &ab {
            // A rename is named by the new name: swapped, by the old one.
            let path = match &c.kind {
                ChangeKind::FieldRenamed { a, .. } => format!("{}.{a}", c.path.split('.').next().unwrap_or("")),
                _ => c.path.clone(),
            };
            let back = ba.iter().find(|x| x.path == path && same_kind(&x.kind, &c.kind));
            let back = back.unwrap_or_else(|| panic!("{} has no counterpart", c.path));
            assert_eq!((back.a_reads_b, back.b_reads_a), (c.b_reads_a, c.a_reads_b), "{}", c.path);
        }
    }
}

#[test]
fn a_field_appended_to_a_named_tuple_is_refused_by_the_older_reader() {
    // vLLM 0.29.0 appended LogprobsTensors.cu_num_generated_tokens_tensor.
    let cs = changes("vllm", "0.28.0", "0.29.0");
    let c = at(&cs, "LogprobsTensors.cu_num_generated_tokens_tensor");
    assert!(matches!(c.kind, ChangeKind::FieldAdded { appended: true, .. }), "{c:?}");
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::NamedTupleRefusesExtra));
    assert_eq!(c.b_reads_a, (DriftVerdict::Compatible, DriftRule::AbsentTakesDefault));
}

#[test]
fn a_required_key_added_is_refused_by_the_newer_reader_of_older_bytes() {
    // vLLM 0.29.0's ready response requires `supports_lora`: a 0.29.0
    // frontend refuses a 0.28.0 engine's registration.
    let cs = changes("vllm", "0.28.0", "0.29.0");
    let c = at(&cs, "EngineCoreReadyResponse.supports_lora");
    assert_eq!(c.a_reads_b, (DriftVerdict::Drift, DriftRule::UnknownKeyIgnored));
    assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::AbsentRequiredRefused));
}

#[test]
fn a_default_changed_in_a_struct_written_in_full_is_compatible() {
    // vLLM 0.30.0 gave SamplingMaskLists.offsets a default; named tuples
    // are written in full, so no reader ever fills it in.
    let cs = changes("vllm", "0.29.0", "0.30.0");
    let c = cs
        .iter()
        .find(|c| c.path == "SamplingMaskLists.offsets" && matches!(c.kind, ChangeKind::DefaultChanged { .. }))
        .expect("default changed");
    assert_eq!(c.kind, ChangeKind::DefaultChanged { a: None, b: Some(serde_json::Value::Null) });
    assert_eq!(c.a_reads_b, (DriftVerdict::Compatible, DriftRule::DefaultWrittenInFull));
}

#[test]
fn every_committed_dump_loads_and_names_its_release() {
    let found = releases(&schemas(), "vllm");
    assert!(found.len() >= 2, "{found:?}");
    for r in found {
        let s = load(&dump_path(&schemas(), "vllm", &r)).unwrap();
        assert_eq!(s.release, r);
        assert!(s.types.iter().any(|t| t.name == "EngineCoreRequest"), "{r}");
    }
}

#[test]
fn a_union_that_gained_a_member_is_compatible_toward_the_wider_reader_only() {
    // vLLM 0.32.0 made SamplingParams.watermarking `bool | None`.
    let cs = changes("vllm", "0.31.0", "0.32.0");
    let c = cs
        .iter()
        .find(|c| c.path == "SamplingParams.watermarking" && matches!(c.kind, ChangeKind::FieldRetyped { .. }))
        .expect("retyped");
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::TypeRefusesOthers));
    assert_eq!(c.b_reads_a, (DriftVerdict::Compatible, DriftRule::TypeAcceptsOthers));
    // A type replaced by another: breaking both ways.
    let c = cs
        .iter()
        .find(|c| {
            c.path == "SamplingParams.prompt_logprob_token_ids" && matches!(c.kind, ChangeKind::FieldRetyped { .. })
        })
        .expect("retyped");
    assert_eq!((c.a_reads_b.0, c.b_reads_a.0), (DriftVerdict::Breaking, DriftVerdict::Breaking));
}

#[test]
fn a_changed_default_of_an_omit_defaults_struct_is_breaking_both_ways() {
    // The same change: the default went from true to None. SamplingParams
    // omits defaults, so a writer leaves out its default and the reader
    // fills in another.
    let cs = changes("vllm", "0.31.0", "0.32.0");
    let c = cs
        .iter()
        .find(|c| c.path == "SamplingParams.watermarking" && matches!(c.kind, ChangeKind::DefaultChanged { .. }))
        .expect("default changed");
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::OmittedTakesReadersDefault));
    assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::OmittedTakesReadersDefault));
}

#[test]
fn a_positional_field_removed_before_others_shifts_them_breaking_both_ways() {
    // vLLM 0.32.0 dropped LoRARequest.tensorizer_config_dict from the
    // middle of the positional struct: the two fields after it moved.
    let cs = changes("vllm", "0.31.0", "0.32.0");
    let c = at(&cs, "LoRARequest.tensorizer_config_dict");
    assert!(matches!(c.kind, ChangeKind::FieldRemoved { index: 4, trailing: false, .. }), "{c:?}");
    assert_eq!(c.a_reads_b, (DriftVerdict::Breaking, DriftRule::PositionShifted));
    let c = at(&cs, "LoRARequest.load_inplace");
    assert_eq!(c.kind, ChangeKind::FieldMoved { a: 5, b: 4 });
    assert_eq!(c.b_reads_a, (DriftVerdict::Breaking, DriftRule::PositionShifted));
}

/// The same change seen from the other side (an addition is a removal).
fn same_kind(back: &ChangeKind, there: &ChangeKind) -> bool {
    use ChangeKind::*;
    matches!(
        (back, there),
        (FieldAdded { .. }, FieldRemoved { .. })
            | (FieldRemoved { .. }, FieldAdded { .. })
            | (StructAdded, StructRemoved)
            | (StructRemoved, StructAdded)
            | (EnumMemberAdded { .. }, EnumMemberRemoved { .. })
            | (EnumMemberRemoved { .. }, EnumMemberAdded { .. })
            | (RequestTypeAdded { .. }, RequestTypeRemoved { .. })
            | (RequestTypeRemoved { .. }, RequestTypeAdded { .. })
    ) || back.name() == there.name()
}

/// Rules no pair of committed dumps shows yet (each has its synthetic
/// test in the module's unit tests); a rule that a real pair shows must
/// leave this list.
const RULES_WITHOUT_A_REAL_PAIR: &[DriftRule] = &[
    DriftRule::PositionalNameNotOnWire,
    DriftRule::EncodingChanged,
    DriftRule::UnknownValueRefused,
    DriftRule::KnownValues,
    DriftRule::UnknownRequestTypeKillsInput,
];

#[test]
fn every_rule_is_shown_by_a_real_pair_of_releases_or_listed_as_not_yet() {
    let mut seen = Vec::new();
    for d in ["vllm", "tokenspeed"] {
        let rs = releases(&schemas(), d);
        let pairs = rs
            .windows(2)
            .map(|w| (w[0].clone(), w[1].clone()))
            .chain(rs.first().zip(rs.last()).map(|(a, b)| (a.clone(), b.clone())));
        for (a, b) in pairs {
            for c in changes(d, &a, &b) {
                seen.push(c.a_reads_b.1);
                seen.push(c.b_reads_a.1);
            }
        }
    }
    for r in DriftRule::ALL {
        let listed = RULES_WITHOUT_A_REAL_PAIR.contains(&r);
        let shown = seen.contains(&r);
        assert!(
            listed != shown,
            "{r:?}: {}",
            if shown { "shown by a real pair: take it off the list" } else { "shown by no real pair: list it" }
        );
    }
}
