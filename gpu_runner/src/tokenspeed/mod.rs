//! The TokenSpeed dialect in the runner (docs/runner.md "TokenSpeed";
//! wire facts: docs/tokenspeed-wire.md):
//!
//! - [`mock`]: a mock TokenSpeed 0.1.1 engine (handshake, receive path,
//!   generation, cadence, abort, faults);
//! - [`scenario`]: the TokenSpeed replay scenarios (`golden/replay/tokenspeed/`),
//!   their checks and verdicts;
//! - [`run`]: `gpu-runner run --dialect tokenspeed` / `--engine tokenspeed`.

pub mod mock;
pub mod run;
pub mod scenario;
