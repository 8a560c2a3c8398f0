#![no_main]
//! Fuzz target `tokenspeed_handshake`: see fuzz/README.md and `engine_fuzz::oracle::tokenspeed_handshake`.

engine_fuzz::install_counting_allocator!();

libfuzzer_sys::fuzz_target!(|data: &[u8]| engine_fuzz::fuzz("tokenspeed_handshake", data));
