//! `engine-testkit`: what the suite's tests and tools share, written once
//! (the test-support crate of the workspace, as `h2-support` is h2's).
//!
//! - [`corpus`]: walking a golden corpus and parsing its cases
//!   (docs/case-format.md); `conformance` checks what it loads;
//! - [`hex`]: hex frames, hex literals, hex in failure messages;
//! - [`house`]: the module graph of a crate read from its sources, and
//!   the check that it has no import cycle (the `architecture` tests);
//! - [`json`]: JSON and wire values both ways, through the canonical view
//!   of `engine_protocol::view`;
//! - [`outcome`]: the one classification of a check's outcome (pass, fail,
//!   expected failure, drift, skip), shared by `conformance verify`, the
//!   runner's reports and the fuzz seed tests, with its totals, labels and
//!   JUnit elements; and [`outcome::EngineVerdict`], what the engine said
//!   of a message (accept, or reject with a class);
//! - [`build`]: builders of vLLM requests and output batches for tests;
//! - [`model`]: the one loader of a model directory (`tokenizer.json`,
//!   `tokenizer_config.json`, `config.json`, `generation_config.json`) and,
//!   with feature `translate`, its gateway tokenizer;
//! - [`bless`]: generated files checked against their source;
//! - [`rng`]: the deterministic pseudo-random source of tests and seeds;
//! - [`fuzz_dict`]: the libFuzzer dictionaries of both fuzz crates' seed
//!   writers;
//! - [`split`] and [`oracle`]: the input convention and the oracles of the
//!   fuzz targets (`fuzz/`), shared with the stable seed tests
//!   (`protocol/tests/fuzz_seed_corpus.rs`).
//!
//! What the suite needs at run time (`corpus`, `hex`, `json`, `model`,
//! `outcome`: `conformance verify` and the runner read goldens, models and
//! report outcomes with them) is always built; what only tests, seed
//! writers and fuzz targets use (`bless`, `build`, `house`, `rng`,
//! `fuzz_dict`, `split`, `oracle`) is behind the feature `test-support`,
//! on by default and turned on by the workspace's dev-dependencies, so the
//! `gpu-runner` and `conformance` binaries carry none of it.
//!
//! It depends on `engine-protocol` (without its translation layer),
//! `serde_json` and `hex` only; `engine-protocol` itself depends on no crate
//! of ours and takes this one as a dev-dependency of its integration tests.

pub mod corpus;
pub mod hex;
pub mod json;
pub mod model;
pub mod outcome;

#[cfg(feature = "test-support")]
pub mod bless;
#[cfg(feature = "test-support")]
pub mod build;
#[cfg(feature = "test-support")]
pub mod fuzz_dict;
#[cfg(feature = "test-support")]
pub mod house;
#[cfg(feature = "test-support")]
pub mod oracle;
#[cfg(feature = "test-support")]
pub mod rng;
#[cfg(feature = "test-support")]
pub mod split;

pub use outcome::{EngineVerdict, Totals, Verdict};

/// Runs `f` on a thread with a 256 MiB stack and returns what it returns
/// (a panic in `f` is resumed on the caller). Case files nest as deep as the
/// decoder's depth limit (`engine_protocol::view::MAX_JSON_DEPTH`), and
/// reading, cloning or dropping such a document recurses once per level:
/// more than a test thread's default stack holds in a debug build. Tests
/// that load a whole corpus run the loading in here.
pub fn on_large_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let thread = std::thread::Builder::new().name("engine-testkit-large-stack".into()).stack_size(256 << 20);
    match thread.spawn(f).expect("a thread for the deep case files").join() {
        Ok(t) => t,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
