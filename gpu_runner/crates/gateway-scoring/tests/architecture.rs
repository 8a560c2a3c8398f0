//! Drawing the house of `gateway-scoring`: the HTTP client and the fault
//! wire are floors of their own (the fault wire is changed without reading
//! gateway mode), gateway mode and the scoreboard above them.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_fault_wire_and_the_http_client_use_nothing_of_gateway_mode() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    for floor in ["fault", "http"] {
        assert!(!g.edges[floor].contains_key("gateway"), "{floor} uses gateway: {:?}", g.edges[floor]);
    }
}
