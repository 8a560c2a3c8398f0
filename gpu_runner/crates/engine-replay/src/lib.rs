//! `engine-replay`: scenarios replayed against engines through the
//! suite's engine client (docs/runner/replay.md, docs/runner/scenarios.md).
//!
//! - [`replay`]: one run for every dialect (requests level by level of
//!   `after`, outputs through the gateway's stop detection, aborts and late
//!   outputs), one `run_all` for every dialect (the scenarios of a run on
//!   the shared engine or a fresh one, verdicts, skips and expectations),
//!   and `--record`'s results;
//! - [`dialect`]: each dialect's part of a replay run (its `Replay`
//!   implementation: translation, stop detection, what it observes);
//! - [`adapt`]: from a run's results to the check vocabulary's
//!   observation;
//! - [`record`]: `--record`, every frame set of a run as a golden-shaped
//!   file without a verdict;
//! - [`tokenspeed`]: `gpu-runner run --dialect tokenspeed`.

pub mod adapt;
pub mod dialect;
pub mod record;
pub mod replay;
pub mod tokenspeed;

/// Drawing the house of `engine-replay`: the run and its results at the
/// bottom, each dialect's part of a run and the observation adapter above
/// them, the TokenSpeed command on top.
#[cfg(test)]
mod architecture {
    use engine_testkit::house::acyclic_crate;

    #[test]
    fn the_dialects_replay_parts_stand_on_the_run() {
        let g = acyclic_crate(env!("CARGO_MANIFEST_DIR"));
        assert!(g.edges["dialect"].contains_key("replay"));
        assert!(!g.edges["replay"].contains_key("dialect"), "replay uses dialect: {:?}", g.edges["replay"]);
    }
}
