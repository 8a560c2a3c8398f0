//! Drawing the house of `scenario-checks`: the check vocabulary is the
//! ground floor of the scenario model, the loader and the reports, and the
//! scenario model stands on the checks, never the other way.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_scenario_model_stands_on_the_check_vocabulary() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.edges["scenario"].contains_key("check"));
    assert!(!g.edges["check"].contains_key("scenario"), "check uses scenario: {:?}", g.edges["check"]);
}
