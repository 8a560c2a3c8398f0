#![no_main]
//! Fuzz target `tokenspeed_request`: see fuzz/README.md and `engine_fuzz::oracle::tokenspeed_request`.

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("tokenspeed_request", data));
