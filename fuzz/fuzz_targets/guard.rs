#![no_main]
//! libFuzzer entry point; the target itself is `redmark_fuzz::guard`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| redmark_fuzz::guard(data));
