//! `scenario-checks`: the vocabulary every run of the suite is written in.
//!
//! - [`scenario`]: the replay scenario model both dialects share
//!   (`ScenarioOf<D>`), its loading and the TokenSpeed scenarios;
//! - [`check`]: the check vocabulary every scenario kind shares (a typed
//!   enum read at load), the observation model and the replay checks;
//! - [`load`]: one loader for every kind of scenario file;
//! - [`model_facts`]: what a scenario may ask of the served model (EOS,
//!   token ids of a kind, its fingerprint) and the directives that ask it;
//! - [`release`]: the vLLM release a run speaks (`--release`, the venv's
//!   release), what a scenario needs of its table, values carried between
//!   tables;
//! - [`report`]: verdicts, expectations, shards, text/JSON/JUnit.
//!
//! Formats: docs/runner/scenarios.md (scenarios and the check vocabulary),
//! docs/runner/tokenspeed.md (TokenSpeed scenarios), docs/runner/replay.md
//! (reports and expectations). Nothing here opens a socket: the runs that
//! produce observations are `engine-replay` and `gateway-scoring`.

pub mod check;
pub mod load;
pub mod model_facts;
pub mod release;
pub mod report;
pub mod scenario;

/// Drawing the house of `scenario-checks`: the check vocabulary is the
/// ground floor of the scenario model, the loader and the reports, and the
/// scenario model stands on the checks, never the other way.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_scenario_model_stands_on_the_check_vocabulary() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        assert!(g.edges["scenario"].contains_key("check"));
        assert!(!g.edges["check"].contains_key("scenario"), "check uses scenario: {:?}", g.edges["check"]);
    }
}
