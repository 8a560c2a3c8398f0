//! Replaying scenarios against an engine through the gateway side
//! (docs/runner.md "Scenarios", "TokenSpeed scenarios"):
//!
//! - [`run`]: one run for every dialect: requests level by level of
//!   `after`, outputs through the gateway's stop detection, aborts and
//!   late outputs; the results the checks read;
//! - [`runner`]: one `run_all` for every dialect: the scenarios of a run on
//!   the shared engine or a fresh one, verdicts, skips and expectations.
//!
//! The scenario models and the checks live in `crate::scenario` and
//! `crate::tokenspeed::scenario`; each dialect's part of a run is its
//! `Replay` implementation in `crate::dialect`.

pub mod run;
pub mod runner;
