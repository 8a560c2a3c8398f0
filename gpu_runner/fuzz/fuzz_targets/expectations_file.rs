#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gpu_runner_fuzz::expectations_file::check(data));
