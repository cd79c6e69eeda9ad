//! Every input of `fuzz/regressions/<target>/`, fed again to the same
//! decoder with the fuzz target's own checks (`fuzz/fuzz_targets/checks.rs`):
//! what the fuzzers once crashed on, and the hard cases kept beside them
//! (each file named for what it tries). A bug fixed stays fixed. A target
//! whose folder is missing or empty fails: a test over no input proves
//! nothing.
#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::path::PathBuf;

#[path = "../../fuzz/fuzz_targets/checks.rs"]
#[allow(dead_code)] // shared with the fuzz targets
mod checks;

/// The inputs of one target, at least `min` of them.
fn inputs(target: &str, min: usize) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the {target} regressions are missing",
            dir.display()
        )
    });
    let mut found: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .filter(|(p, _)| p.extension().is_none_or(|e| e != "md"))
        .collect();
    found.sort();
    assert!(
        found.len() >= min,
        "{}: {} inputs, expected at least {min}",
        dir.display(),
        found.len()
    );
    found
}

/// Feeds every input of `target` to `check`, naming the one that fails.
fn replay(target: &str, min: usize, check: fn(&[u8])) {
    for (path, data) in inputs(target, min) {
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(
            outcome.is_ok(),
            "{} fails {target}'s checks",
            path.display()
        );
    }
}

#[test]
fn nodeset_parser() {
    replay("nodeset_parser", 10, checks::nodeset_parser);
}

#[test]
fn record_decoder() {
    replay("record_decoder", 8, checks::record_decoder);
}

#[test]
fn swf_parser() {
    replay("swf_parser", 8, checks::swf_parser);
}

#[test]
fn wire_decoder() {
    replay("wire_decoder", 6, checks::wire_decoder);
}
