//! Drawing the house: the top-level modules of `conformance`, read from its
//! sources, use each other without a cycle (the corpus and the gateway
//! kinds' checkers below the case checker, the reports above it).

use engine_testkit::house::acyclic_crate;

#[test]
fn the_modules_of_the_crate_use_each_other_without_a_cycle() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.floors().is_some());
}
