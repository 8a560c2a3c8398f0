//! Fuzzing support for `engine-protocol` (see fuzz/README.md).
//!
//! - [`split`]: the frame convention of the multi-frame targets;
//! - [`oracle`]: what every target checks (`engine_testkit::oracle`,
//!   shared with `protocol/tests/fuzz_seed_corpus.rs`);
//! - [`generic`]: the typed decoder against `rmpv`;
//! - [`alloc`]: the counting allocator and the allocation bound;
//! - [`seeds`]: seed corpus and dictionary written from the goldens;
//! - [`roundtrip`]: the structure-aware target's check;
//! - [`stop`]: the stop-detector target (streamed against one-shot).

pub mod alloc;
pub mod generic;
pub mod oracle;
pub mod roundtrip;
pub mod seeds;
pub mod split;
pub mod stop;

use engine_protocol::Outcome;

/// Every check: the oracles of [`oracle`], the `rmpv` comparison and the
/// allocation bound.
pub struct Full;

impl oracle::Probe for Full {
    fn decode<R>(&mut self, input: &[&[u8]], f: impl FnOnce() -> R) -> R {
        let mode = alloc::mode();
        if mode == alloc::Mode::Off {
            return f();
        }
        let (r, peak) = alloc::measure(f);
        let bound = alloc::bound(input, mode);
        let sizes: Vec<usize> = input.iter().map(|f| f.len()).collect();
        assert!(
            peak <= bound,
            "a decode of frames of {sizes:?} bytes allocated {peak} bytes at its peak, over the bound of {bound} \
             (ENGINE_FUZZ_ALLOC={mode:?}, fuzz/src/alloc.rs)"
        );
        r
    }

    fn payload(&mut self, payload: &[u8], outcome: &Outcome) {
        generic::check(payload, outcome);
    }
}

/// Runs target `name` with every check (the entry point of the fuzz
/// targets and of the fuzz crate's tests).
pub fn fuzz(name: &str, data: &[u8]) {
    if name == "roundtrip" {
        roundtrip::check(data);
    } else {
        assert!(oracle::run(name, data, &mut Full), "no fuzz target {name}");
    }
}

/// Installs [`alloc::Counting`] as the global allocator.
#[macro_export]
macro_rules! install_counting_allocator {
    () => {
        #[global_allocator]
        static ALLOC: $crate::alloc::Counting = $crate::alloc::Counting;
    };
}
