//! `engine-client`: what a gateway is on the engine wire. The suite's own
//! gateway side (vLLM calls this the engine-core client) for every dialect
//! the suite speaks, over real ZeroMQ.
//!
//! - [`dialect`]: the only place a dialect's frames are named: the
//!   `EngineWire` trait (encode ADD / ABORT, decode an output batch into
//!   typed steps, the death sentinel) for vLLM EngineCore and TokenSpeed;
//! - [`transport`]: one engine client for every dialect
//!   (`EngineClient<D>`): sockets, handshake, request streams, output
//!   demultiplexing, failure detection, the frame-size guard.
//!
//! Wire facts relied on: docs/runner/transport.md, docs/wire-protocol.md
//! and docs/tokenspeed-wire.md. All encoding and decoding goes through
//! `engine_protocol`; this crate adds sockets and state, no codec.

pub mod dialect;
pub mod transport;

/// Drawing the house of `engine-client`: the dialects' frames are the
/// ground floor, the transport (sockets, handshake, streams) stands on
/// them, and nothing here uses a scenario, a check or a mock.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_dialects_are_the_ground_floor_and_the_transport_stands_on_them() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        assert!(g.edges["dialect"].is_empty(), "dialect uses {:?}", g.edges["dialect"]);
        assert!(g.edges["transport"].contains_key("dialect"));
    }
}
