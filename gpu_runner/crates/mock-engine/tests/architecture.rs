//! Drawing the house of `mock-engine`: its rooms (the vLLM mock, its
//! script, the TokenSpeed mock, retargeting to older releases, recorded
//! registrations, token functions) use each other without a cycle.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_rooms_of_the_mock_use_each_other_without_a_cycle() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.edges["tokens"].is_empty(), "tokens uses {:?}", g.edges["tokens"]);
}
