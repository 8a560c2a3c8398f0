//! The check vocabulary every scenario kind shares: one serde-tagged
//! [`ScenarioCheck`] enum read and validated when a scenario file loads
//! ([`CheckSpec::parse`]), one [`Observation`] model of what a replay run
//! saw, one implementation of each replay check ([`replay::check`]), and
//! typed errors ([`CheckError`] at load, [`CheckFailure`] when a check
//! fails, rendered by the report).
//!
//! Relies on the scenario formats of docs/runner/ (scenarios.md "Scenarios",
//! tokenspeed.md "TokenSpeed scenarios", gateway.md "Gateway scenarios"): a
//! check is `{"check": NAME, ...}` with the fields listed in scenarios.md
//! "Check vocabulary" (generated from
//! [`VOCABULARY`]); keys a check does not know are ignored. The gateway
//! under test evaluates the same enum against its own observation of the
//! HTTP exchange (`gateway_scoring::gateway::checks`).
//!
//! - [`spec`]: the enum, its fields, which scenario kinds take which check;
//! - [`error`]: load errors and check failures;
//! - [`observation`]: what a replay run observed, one model for both
//!   dialects;
//! - `engine_replay::adapt` (a crate above): from the runs' result types
//!   to the observation;
//! - [`replay`]: the replay checks and a scenario's verdict rules;
//! - [`logprobs`], [`constraint`]: the logprob and structured-output checks'
//!   helpers.

pub mod constraint;
pub mod error;
pub mod logprobs;
pub mod observation;
pub mod replay;
pub mod spec;

pub use error::{CheckError, CheckFailure};
pub use observation::{
    failure_class, Failure, Observation, Refusal, RequestObservation, RequestOutcome, RunObservation,
    UtilityObservation,
};
pub use replay::ScenarioFailure;
pub use spec::{
    parse_list, vocabulary_markdown, CheckSpec, Count, FailureClass, LogprobsSpec, ScenarioCheck, ScenarioKind,
    SentSpec, StopValue, VOCABULARY,
};

#[cfg(test)]
mod tests;
