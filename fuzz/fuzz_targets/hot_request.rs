#![no_main]
//! Fuzz target `hot_request`: the direct request decoder against the
//! reference typed path (see fuzz/README.md and
//! `engine_testkit::oracle::hot_request`).

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("hot_request", data));
