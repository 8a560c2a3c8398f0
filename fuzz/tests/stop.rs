//! The `stop_detector` seeds (written by `write-seeds` from the
//! `stop_detection` goldens) through the target's checks, on stable.

#[test]
fn every_stop_detector_seed_passes_the_target_checks() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/stop_detector");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus/stop_detector exists") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        engine_fuzz::stop::check(&data);
        n += 1;
    }
    assert!(n >= 100, "{n} stop_detector seeds");
}

#[test]
fn a_seed_reads_back_as_written() {
    use engine_fuzz::stop::{parse, unparse, StopInput};
    use engine_protocol::translate::{StopParams, StopSemantics};
    let mut params = StopParams::new(vec!["ab".into(), "\u{e9}".into()]);
    params.include_stop_str_in_output = true;
    params.semantics = StopSemantics::Smg;
    params.min_tokens = 3;
    let input = StopInput { params, sizes: vec![1, 3, 2], ids: vec![5, 300, 17] };
    let back = parse(&unparse(&input));
    assert_eq!(back.params, input.params);
    assert_eq!(back.sizes, input.sizes);
    assert_eq!(back.ids, input.ids);
}
