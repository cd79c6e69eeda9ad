//! Every input the fuzzers ever crashed on (fuzz/regressions/<target>/),
//! fed again to the same decoder, with the same checks as the fuzz target:
//! a bug fixed stays fixed.
#![cfg(all(feature = "swf", feature = "wire", feature = "nodeset"))]
#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::collections::BTreeSet;
use std::path::PathBuf;

use formats::nodeset::{self, Groups};
use formats::record::{encode_to_vec, RecordReader};
use formats::{swf, wire};

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn nodeset_parser() {
    let found = inputs("nodeset_parser");
    assert!(!found.is_empty(), "the nodeset regressions are missing");
    for (path, data) in found {
        let Ok(text) = std::str::from_utf8(&data) else {
            continue;
        };
        let mut groups = Groups::new();
        groups.define("rack1", "vn[00-09]");
        if let Ok(set) = groups.parse(text) {
            let folded = nodeset::folded(&set);
            if folded.len() <= 1 << 20 {
                let again = nodeset::parse(&folded).unwrap();
                if set.len() <= 10_000 {
                    let a: BTreeSet<String> = set.iter().collect();
                    let b: BTreeSet<String> = again.iter().collect();
                    assert_eq!(a, b, "{}", path.display());
                }
            }
        }
    }
}

#[test]
fn record_decoder() {
    for (path, data) in inputs("record_decoder") {
        let mut reader = RecordReader::new(&data[..]);
        while let Ok(Some(rec)) = reader.next_record() {
            let frame = encode_to_vec(&rec).unwrap();
            assert!(
                data.windows(frame.len()).any(|w| w == frame.as_slice()),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn swf_parser() {
    for (_, data) in inputs("swf_parser") {
        let mut reader = swf::from_bytes(&data);
        while let Ok(Some(_)) = reader.next_job() {}
    }
}

#[test]
fn wire_decoder() {
    for (_, data) in inputs("wire_decoder") {
        let _ = wire::decode::<wire::FromAgent>(&data);
        let _ = wire::decode::<wire::ToAgent>(&data);
        let _ = wire::decode::<wire::Request>(&data);
        let _ = wire::decode::<wire::Response>(&data);
    }
}
