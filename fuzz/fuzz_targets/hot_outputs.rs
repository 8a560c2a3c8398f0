#![no_main]
//! Fuzz target `hot_outputs`: the fast output decoder against `decode_message`
//! (see fuzz/README.md and `engine_fuzz::oracle::hot_outputs`).

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("hot_outputs", data));
