//! The wire_decoder target: see `checks::wire_decoder` for what it checks.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::wire_decoder(data));
