//! Property: the metrics of a set of records do not depend on the order of
//! the records, nor on how they are split into files.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;

use calcmets::inputs::Source;
use calcmets::metrics::{Params, Summary};
use formats::record::{encode, Flags, JobRecord, Status, Suspension};
use proptest::prelude::*;

const S: i64 = 1_000_000_000;

fn record() -> impl Strategy<Value = JobRecord<'static>> {
    (
        1u32..=64,
        0i64..10_000,
        0i64..5_000,
        0i64..5_000,
        prop::collection::vec((0i64..100, 1i64..100), 0..3),
        prop::sample::select(vec![
            Status::Completed,
            Status::Completed,
            Status::Cancelled,
        ]),
    )
        .prop_map(|(cores, s, w, r, susp, status)| {
            let submit = 1_800_000_000 * S + s * S / 7;
            let start = submit + w * S / 3;
            let mut t = start;
            let suspensions: Vec<Suspension> = susp
                .into_iter()
                .map(|(run, pause)| {
                    t += run * S;
                    let s = Suspension {
                        suspend: t,
                        resume: t + pause * S,
                    };
                    t += pause * S;
                    s
                })
                .collect();
            JobRecord {
                id: 0,
                cores,
                node: Cow::Borrowed("vn"),
                submit,
                start,
                end: t.max(start) + r * S / 11,
                runtime: 0,
                walltime: 0,
                status,
                flags: Flags::default(),
                suspensions,
                devices: Vec::new(),
                program: None,
            }
        })
}

fn summarize(dir: &std::path::Path, files: &[Vec<JobRecord<'static>>], by_size: bool) -> Summary {
    let mut sources = Vec::new();
    for (i, recs) in files.iter().enumerate() {
        let path = dir.join(format!("{i}.rec"));
        let mut bytes = Vec::new();
        for r in recs {
            encode(r, &mut bytes).unwrap();
        }
        std::fs::write(&path, bytes).unwrap();
        sources.push(Source::File(path));
    }
    let params = Params {
        tau_ns: 10 * S,
        window: None,
        by_size,
    };
    calcmets::summarize_records(
        &sources,
        &params,
        512,
        Default::default(),
        false,
        None,
        &mut Vec::new(),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn order_and_splitting_do_not_matter(
        // Past 256 jobs: batches of held jobs are counted mid-run too.
        recs in prop::collection::vec(record(), 1..700),
        shuffle in any::<u64>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        by_size in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let whole = summarize(dir.path(), std::slice::from_ref(&recs), by_size);

        // A deterministic shuffle, then a split into several files.
        let mut mixed = recs.clone();
        let mut x = shuffle | 1;
        for i in (1..mixed.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            mixed.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(mixed.len() + 1)).collect();
        at.sort_unstable();
        let mut files = Vec::new();
        let mut from = 0;
        for &to in &at {
            files.push(mixed[from..to].to_vec());
            from = to;
        }
        files.push(mixed[from..].to_vec());
        let dir2 = tempfile::tempdir().unwrap();
        let split = summarize(dir2.path(), &files, by_size);
        prop_assert_eq!(whole, split);
    }
}
