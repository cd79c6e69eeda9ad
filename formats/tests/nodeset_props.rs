//! Property: folding a set of node names and expanding the folded form
//! gives back the same set (fold ∘ expand is the identity on sets), for
//! names with zero padding, several numeric groups and plain names.

#![cfg(feature = "nodeset")]
#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::collections::BTreeSet;

use formats::nodeset::{expand, fold, parse};
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        // vn0042: padded
        (0u32..3000).prop_map(|n| format!("vn{n:04}")),
        // n17: unpadded
        (0u32..300).prop_map(|n| format!("n{n}")),
        // r2sw11-p3: three dimensions
        (0u32..4, 0u32..12, 0u32..3).prop_map(|(a, b, c)| format!("r{a}sw{b}-p{c}")),
        // login: no number
        prop::sample::select(vec!["login".to_string(), "gw".to_string()]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn fold_then_expand_is_the_identity(names in prop::collection::btree_set(name(), 0..200)) {
        let folded = fold(names.iter().map(String::as_str));
        let back: BTreeSet<String> = expand(&parse(&folded).unwrap()).into_iter().collect();
        prop_assert_eq!(&back, &names, "folded: {}", folded);
        // Folding is stable.
        prop_assert_eq!(fold(back.iter().map(String::as_str)), folded);
    }

    #[test]
    fn set_operators_agree_with_set_algebra(
        a in prop::collection::btree_set((0u32..60).prop_map(|n| format!("x{n:02}")), 1..40),
        b in prop::collection::btree_set((0u32..60).prop_map(|n| format!("x{n:02}")), 1..40),
    ) {
        let fa = fold(a.iter().map(String::as_str));
        let fb = fold(b.iter().map(String::as_str));
        let eval = |op: &str| -> BTreeSet<String> {
            expand(&parse(&format!("{fa}{op}{fb}")).unwrap()).into_iter().collect()
        };
        prop_assert_eq!(eval(","), a.union(&b).cloned().collect::<BTreeSet<_>>());
        prop_assert_eq!(eval("!"), a.difference(&b).cloned().collect::<BTreeSet<_>>());
        prop_assert_eq!(eval("&"), a.intersection(&b).cloned().collect::<BTreeSet<_>>());
        prop_assert_eq!(eval("^"), a.symmetric_difference(&b).cloned().collect::<BTreeSet<_>>());
    }
}

#[test]
fn a_hundred_thousand_nodes() {
    let all = parse("vn[000000-099999]").unwrap();
    assert_eq!(all.len(), 100_000);
    let names = expand(&all);
    let odd: Vec<&str> = names
        .iter()
        .skip(1)
        .step_by(2)
        .map(String::as_str)
        .collect();
    let folded = fold(odd.iter().copied());
    assert_eq!(parse(&folded).unwrap().len(), 50_000);
    let rest = parse(&format!("vn[000000-099999]!{folded}")).unwrap();
    assert_eq!(rest.len(), 50_000);
}
