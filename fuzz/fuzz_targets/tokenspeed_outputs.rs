#![no_main]
//! Fuzz target `tokenspeed_outputs`: see fuzz/README.md and `engine_fuzz::oracle::tokenspeed_outputs`.

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("tokenspeed_outputs", data));
