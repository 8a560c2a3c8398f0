//! Drawing the house: the top-level modules of `conformance`, read from its
//! sources, use each other without a cycle (the corpus and the gateway
//! kinds' checkers below the case checker, the reports above it).

use std::path::Path;

use engine_testkit::house::Graph;

#[test]
fn the_modules_of_the_crate_use_each_other_without_a_cycle() {
    let g = Graph::of_crate(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).expect("the crate's sources");
    if let Some(c) = g.cycle() {
        panic!("{}", g.explain(&c));
    }
    assert!(g.floors().is_some());
}
