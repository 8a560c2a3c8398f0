//! `gpu-runner`: the command line ([`cli`]) over the runner's crates, and a
//! facade that re-exports them under the module names the tests, benches
//! and fuzz targets use (as rustls's crate re-exports its private
//! modules). The crates, bottom to top (docs/runner/README.md "Code
//! layout"):
//!
//! - `engine-client` ([`dialect`], [`transport`]): what a gateway is on the
//!   engine wire: each dialect's frames and the ZeroMQ engine client;
//! - `process-sandbox` ([`launcher`], [`listening`], [`workdir`],
//!   [`redact`], [`untrusted`]): launched processes and the files read
//!   from them, kept in bounds;
//! - `mock-engine` ([`mock`]): the scripted mock engines of each dialect;
//! - `scenario-checks` ([`scenario`], [`check`], [`load`], [`model_facts`],
//!   [`release`], [`report`]): the scenario and check vocabulary and the
//!   reports;
//! - `engine-replay` ([`replay`], [`record`], [`adapt`], [`tokenspeed`]):
//!   scenarios replayed against engines;
//! - `gateway-scoring` ([`gateway`], [`http`], [`fault`], [`soak`],
//!   [`scoreboard`]): real gateways scored with the suite playing the
//!   engine.

pub mod cli;

pub use engine_client::{dialect, transport};
pub use engine_replay::{adapt, record, replay, tokenspeed};
pub use gateway_scoring::{fault, gateway, http, scoreboard, soak};
pub use mock_engine as mock;
pub use process_sandbox::{launcher, listening, redact, untrusted, workdir};
pub use scenario_checks::{check, load, model_facts, release, report, scenario};

/// Drawing the house of `gpu-runner`: the command line, one module per
/// command family, over the runner's crates; its modules use each other
/// without a cycle.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_command_line_has_no_module_cycle() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        assert!(g.edges.contains_key("cli"));
    }
}
