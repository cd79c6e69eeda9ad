//! Many jobs, one log: 1,000 sigsleeps that all end at the same instant and
//! append to the same file leave 1,000 intact records, one per job.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

#[test]
fn thousand_jobs_ending_together_leave_thousand_intact_records() {
    const N: u64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jobs.rec");
    let mut children = Vec::new();
    let mut group = 0;
    for id in 0..N {
        let mut cmd = sigsleep();
        // Distinct node names, so that frames differ in length.
        let node = format!("vn{}", "x".repeat(id as usize % 37));
        cmd.args(["--runtime", "600", "--cores", "2", "--id", &id.to_string()])
            .args(["--node", &node, "--log"])
            .arg(&log);
        // All in the first job's process group, so that one kill(2) ends
        // them all at once and their writes race for real.
        let child = launch_in_group(cmd, group);
        if id == 0 {
            group = child.id() as libc::pid_t;
        }
        children.push(child);
    }
    // Let every job reach its wait, then cancel the whole group at once.
    sleep_ms(500);
    // SAFETY: kill(2) on the process group of our own children.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGTERM) }, 0);
    for mut c in children {
        assert_eq!(c.wait().unwrap().code(), Some(128 + libc::SIGTERM));
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
    // They did end together: the records' end instants span little time.
    let first = recs.iter().map(|r| r.end).min().unwrap();
    let last = recs.iter().map(|r| r.end).max().unwrap();
    assert!(
        last - first < 10 * S,
        "ends spread over {} ms",
        (last - first) / MS
    );
}
