#![no_main]
//! libFuzzer entry point; the target itself is `redmark_fuzz::label`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| redmark_fuzz::label(data));
