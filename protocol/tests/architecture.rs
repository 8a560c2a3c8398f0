//! Drawing the house: the top-level modules of `engine-protocol`, read from
//! its sources, use each other without a cycle, so the crate is built
//! floor by floor (the schema tables at the bottom, importing nothing of
//! the crate; the codec, the typed structs, the fast decoders and the
//! translation layer above them).

use engine_testkit::house::{acyclic_crate, Graph};

fn house() -> Graph {
    acyclic_crate(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_modules_of_the_crate_use_each_other_without_a_cycle() {
    // Panics naming the files of every step of a cycle.
    house();
}

#[test]
fn the_schema_tables_are_the_ground_floor() {
    let g = house();
    let uses: Vec<&String> = g.edges["schema"].keys().collect();
    assert!(uses.is_empty(), "schema uses {uses:?}");
}

#[test]
fn the_typed_structs_sit_below_the_fast_decoders() {
    let g = house();
    assert!(g.edges["hot"].contains_key("typed"));
    assert!(!g.edges["typed"].contains_key("hot"), "typed uses hot: {:?}", g.edges["typed"]["hot"]);
}
