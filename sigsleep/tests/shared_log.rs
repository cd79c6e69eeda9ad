//! Many jobs, one log: 1,000 concurrent sigsleeps appending to the same file
//! leave 1,000 intact records, one per job.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

#[test]
fn thousand_concurrent_jobs_leave_thousand_intact_records() {
    const N: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut children = Vec::new();
    for id in 0..N {
        let mut cmd = sigsleep();
        // Long enough that all of them are alive at once, and each with a
        // distinct node name so frames differ in length.
        cmd.args(["--runtime", "1.5", "--cores", "2"])
            .args([
                "--id",
                &id.to_string(),
                "--node",
                &format!("vn{}", "x".repeat(id as usize % 37)),
            ])
            .arg("--log")
            .arg(&log);
        children.push(launch(cmd));
    }
    for mut c in children {
        assert_eq!(c.wait().unwrap().code(), Some(0));
    }
    let (recs, stats) = records(&log);
    assert_eq!(stats.damaged(), 0, "{stats:?}");
    assert_eq!(stats.skipped_bytes, 0, "{stats:?}");
    let mut ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..N).collect::<Vec<_>>());
    for r in &recs {
        assert_eq!(r.node.len(), 2 + r.id as usize % 37);
    }
}
