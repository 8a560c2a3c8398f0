#![no_main]
//! Fuzz target `stop_detector`: see fuzz/README.md and `engine_fuzz::stop`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::stop::check(data));
