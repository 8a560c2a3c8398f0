//! Drawing the house of `engine-client`: the dialects' frames are the
//! ground floor, the transport (sockets, handshake, streams) stands on
//! them, and nothing here uses a scenario, a check or a mock.

use engine_testkit::house::acyclic_crate;

#[test]
fn the_dialects_are_the_ground_floor_and_the_transport_stands_on_them() {
    let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
    assert!(g.edges["dialect"].is_empty(), "dialect uses {:?}", g.edges["dialect"]);
    assert!(g.edges["transport"].contains_key("dialect"));
}
