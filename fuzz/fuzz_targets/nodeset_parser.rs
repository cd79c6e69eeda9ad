//! Feeds arbitrary text to the nodeset parser, with a few @groups defined.
//! It must never panic. A set it accepts folds to a form that parses back
//! to the same set.
#![no_main]

use formats::nodeset::{self, Groups};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut groups = Groups::new();
    groups.define("rack1", "vn[00-09]");
    groups.define("all", "@rack1,vn[10-19]");
    groups.define("self", "@self,x");
    let Ok(set) = groups.parse(text) else {
        return;
    };
    // Folding a large set is fine; listing it is not. A folded form longer
    // than an expression may be (scattered names fold to long lists) is
    // not parsed back.
    let folded = nodeset::folded(&set);
    if folded.len() > 1 << 20 {
        return;
    }
    let again = nodeset::parse(&folded).expect("a folded set parses");
    if set.len() <= 10_000 {
        // The same names, listed.
        let a: std::collections::BTreeSet<String> = set.iter().collect();
        let b: std::collections::BTreeSet<String> = again.iter().collect();
        assert_eq!(a, b, "{text:?} folded to {folded:?}");
        let names = nodeset::expand(&set);
        let refolded = nodeset::parse(&nodeset::fold(names.iter().map(String::as_str))).unwrap();
        assert_eq!(refolded.iter().collect::<std::collections::BTreeSet<_>>(), a);
    }
});
