//! Replaying scenarios against an engine through the gateway side, split by
//! room (docs/runner/scenarios.md "Scenarios", docs/runner/tokenspeed.md
//! "TokenSpeed scenarios"):
//!
//! - the scenario model both dialects share and its loading are
//!   `scenario_checks::scenario` (a crate below);
//! - [`run`]: one run for every dialect: requests level by level of
//!   `after`, outputs through the gateway's stop detection, aborts and
//!   late outputs; the results the checks read;
//! - [`runner`]: one `run_all` for every dialect: the scenarios of a run on
//!   the shared engine or a fresh one, verdicts, skips and expectations;
//! - [`record`]: what the client saw, as `--record` writes it
//!   (`<scenario>/results.json`).
//!
//! The checks are the crate's shared vocabulary ([`scenario_checks::check`]); each
//! dialect's part of a run is its `Replay` implementation in
//! `engine_client::dialect`.

pub mod record;
pub mod run;
pub mod runner;

#[cfg(test)]
mod tests;
