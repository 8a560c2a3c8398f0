#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_runner_fuzz::testee_frames::check(data));
