//! Drawing the house of `engine-replay`: the run and its results at the
//! bottom, each dialect's part of a run and the observation adapter above
//! them, the TokenSpeed command on top.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_dialects_replay_parts_stand_on_the_run() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.edges["dialect"].contains_key("replay"));
    assert!(!g.edges["replay"].contains_key("dialect"), "replay uses dialect: {:?}", g.edges["replay"]);
}
