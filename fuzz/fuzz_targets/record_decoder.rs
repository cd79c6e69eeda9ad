//! The record_decoder target: see `checks::record_decoder` for what it checks.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::record_decoder(data));
