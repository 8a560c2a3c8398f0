//! Replay scenarios, split by room (docs/runner.md "Scenarios"):
//!
//! - [`model`]: the scenario model both dialects share and its loading;
//! - [`record`]: what the client saw, as `--record` writes it
//!   (`<scenario>/results.json`).
//!
//! The checks are the crate's shared vocabulary ([`crate::check`]); the
//! run itself is `crate::scenario` (vLLM) and `crate::tokenspeed`.

pub mod model;
pub mod record;
