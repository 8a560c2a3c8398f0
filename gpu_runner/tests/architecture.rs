//! Drawing the house of `gpu-runner`: the command line, one module per
//! command family, over the runner's crates; its modules use each other
//! without a cycle.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_command_line_has_no_module_cycle() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.edges.contains_key("cli"));
}
