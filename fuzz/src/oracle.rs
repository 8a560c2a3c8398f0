//! What every fuzz target checks, beyond "no crash": the oracles of
//! `engine_testkit::oracle` (documented there; shared with
//! `protocol/tests/fuzz_seed_corpus.rs`), which this crate runs with the
//! checks that need its own dependencies plugged in through
//! [`Probe`] (`crate::Full`: the `rmpv` comparison and the allocation
//! bound).
//!
//! The engine's verdict on a golden case, the oracle of the seed tests, is
//! [`EngineVerdict`] (accept, or reject with a class).

pub use engine_testkit::oracle::*;
pub use engine_testkit::outcome::EngineVerdict;
