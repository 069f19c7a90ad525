#![no_main]
//! libFuzzer entry point; the target itself is `redmark_fuzz::framing`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| redmark_fuzz::framing(data));
