#![no_main]
//! Fuzz target `handshake`: see fuzz/README.md and `engine_fuzz::oracle`.

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("handshake", data));
