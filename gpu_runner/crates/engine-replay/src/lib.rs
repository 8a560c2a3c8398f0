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
