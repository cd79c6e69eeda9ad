//! The swf_parser target: see `checks::swf_parser` for what it checks.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::swf_parser(data));
