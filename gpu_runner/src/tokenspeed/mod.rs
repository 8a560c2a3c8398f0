//! The TokenSpeed dialect in the runner (docs/runner/tokenspeed.md "TokenSpeed";
//! wire facts: docs/tokenspeed-wire.md):
//!
//! - [`scenario`]: the TokenSpeed replay scenarios (`golden/replay/tokenspeed/`),
//!   their checks and verdicts;
//! - [`run`]: `gpu-runner run --dialect tokenspeed` / `--engine tokenspeed`.

pub mod run;
pub mod scenario;
