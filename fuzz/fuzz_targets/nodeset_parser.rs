//! The nodeset_parser target: see `checks::nodeset_parser` for what it checks.
#![no_main]

#[allow(dead_code)] // each target uses one of the checks
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::nodeset_parser(data));
