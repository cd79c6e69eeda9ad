//! Policies that suspend, emulated: real processes stopped and continued by
//! real signals, and their records checked against what the controller
//! decided and when.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::{JobRecord, Status};

const S: i64 = 1_000_000_000;
/// How far a record's suspension may be from the controller's decision: the
/// signal's trip through the agent to the process is milliseconds, so half
/// a second is generous yet far below the intervals being checked.
const MATCH_NS: i64 = S / 2;

/// The controller's suspension intervals of job `id` (wall ns).
fn decided(c: &Cluster, id: u64) -> Vec<(i64, i64)> {
    c.job(id)["suspensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let at = |k: usize| (p[k].as_f64().unwrap() * 1e9).round() as i64;
            (at(0), at(1))
        })
        .collect()
}

/// Asserts that the record's suspensions are the controller's, one for
/// one, within [`MATCH_NS`].
fn assert_matches(c: &Cluster, r: &JobRecord<'_>) {
    let d = decided(c, r.id);
    assert_eq!(
        r.suspensions.len(),
        d.len(),
        "job {}: record {:?} against decisions {d:?}",
        r.id,
        r.suspensions
    );
    for (s, &(ds, dr)) in r.suspensions.iter().zip(&d) {
        assert!(
            (s.suspend - ds).abs() < MATCH_NS && (s.resume - dr).abs() < MATCH_NS,
            "job {}: recorded {s:?}, decided ({ds}, {dr})",
            r.id
        );
    }
}

/// The intervals in which a record's process ran (not suspended).
fn running(r: &JobRecord<'_>) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut from = r.start;
    for s in &r.suspensions {
        out.push((from, s.suspend));
        from = s.resume;
    }
    out.push((from, r.end));
    out
}

fn overlap(a: &[(i64, i64)], b: &[(i64, i64)]) -> i64 {
    let mut total = 0;
    for &(a0, a1) in a {
        for &(b0, b1) in b {
            total += (a1.min(b1) - a0.max(b0)).max(0);
        }
    }
    total
}

#[test]
fn a_high_priority_job_suspends_just_enough_low_priority_work() {
    let c = Cluster::start(
        "vn[1-2]",
        4,
        r#"preemption = "suspend"
[[partitions]]
name = "low"
nodes = "ALL"
default = true
[[partitions]]
name = "high"
nodes = "ALL"
priority = 10
"#,
    );
    // Two low-priority jobs fill both nodes.
    let low = c.submit(&["--cores", "4", "--runtime", "5", "--count", "2"]);
    for &id in &low {
        c.wait_state(id, "running");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let high = c.submit(&["--partition", "high", "--cores", "4", "--runtime", "2"])[0];
    c.wait_state(high, "running");
    // One victim is enough, and its process really is stopped.
    let suspended: Vec<u64> = low
        .iter()
        .copied()
        .filter(|&id| c.state(id) == "suspended")
        .collect();
    assert_eq!(suspended.len(), 1, "victims {suspended:?}");
    let victim = suspended[0];
    let pid = c.pids(victim)[0];
    c.wait_for("the victim's process to stop", || {
        proc_state(pid) == Some('T')
    });
    // It resumes by itself once the high-priority job is over.
    for &id in low.iter().chain([&high]) {
        c.wait_state(id, "completed");
    }

    let h = c.record(high);
    let v = c.record(victim);
    assert_eq!(v.status, Status::Completed);
    assert_eq!(v.suspensions.len(), 1, "{v:?}");
    assert_matches(&c, &v);
    // The victim was stopped for the high-priority job's run, no more.
    let s = &v.suspensions[0];
    assert!((s.suspend - h.start).abs() < MATCH_NS, "{s:?} vs {h:?}");
    assert!((s.resume - h.end).abs() < MATCH_NS, "{s:?} vs {h:?}");
    // Suspended time does not count as run time.
    let run = v.end - v.start - v.suspended_ns();
    assert!((run - 5 * S).abs() < S / 5, "victim ran {run} ns");
    // The other low-priority job was never touched.
    let other = low.iter().copied().find(|&id| id != victim).unwrap();
    let o = c.record(other);
    assert!(o.suspensions.is_empty(), "{o:?}");
    assert!(decided(&c, other).is_empty());
}

/// The job a gang turn will start has its process started ahead, held:
/// it exists while the job is pending, counts nothing, and is the very
/// process the turn lets run. With `prestart = false` the process starts
/// at the turn. Either way the record starts at the turn.
#[test]
fn the_job_a_gang_turn_starts_was_started_ahead_and_held() {
    for prestart in [true, false] {
        let c = Cluster::start(
            "vn1",
            4,
            &format!(
                "time_slice_s = 3.0\nprestart = {prestart}\n\
                 [[partitions]]\nname = \"gang\"\nnodes = \"ALL\"\noversubscribe = 2\n"
            ),
        );
        let ids = c.submit(&["--cores", "4", "--runtime", "3.5", "--count", "2"]);
        c.wait_state(ids[0], "running");
        let (first, second) = (ids[0], ids[1]);
        if prestart {
            c.wait_for("the second job's process, ahead of its turn", || {
                c.pids(second).len() == 1
            });
            // Seen before the turn (3 s away): it existed while pending.
            assert_eq!(c.state(second), "pending");
            let held = c.pids(second)[0];
            let cmdline = std::fs::read(format!("/proc/{held}/cmdline")).unwrap();
            assert!(String::from_utf8_lossy(&cmdline).contains("--held\0"));
            assert_eq!(proc_state(held), Some('S'), "held, not stopped");
            let comm = || std::fs::read_to_string(format!("/proc/{held}/comm")).unwrap();
            assert_eq!(comm().trim_end(), "sigsleep-held");
            c.wait_state(second, "running");
            assert_eq!(c.pids(second), [held], "the turn started another process");
            c.wait_for("the started process to drop its held name", || {
                comm().trim_end() == "sigsleep"
            });
        } else {
            std::thread::sleep(std::time::Duration::from_millis(500));
            assert_eq!(c.state(second), "pending");
            assert!(
                c.pids(second).is_empty(),
                "started ahead with prestart = false"
            );
        }
        for &id in &ids {
            c.wait_state(id, "completed");
        }
        let (a, b) = (c.record(first), c.record(second));
        for r in [&a, &b] {
            assert_eq!(r.status, Status::Completed);
            assert_matches(&c, r);
            let run = r.end - r.start - r.suspended_ns();
            assert!(
                (run - 35 * S / 10).abs() < S / 5,
                "job {} ran {run} ns",
                r.id
            );
        }
        // The second job started at the turn, not when its process did.
        let decided = (c.job(second)["start"].as_f64().unwrap() * 1e9) as i64;
        assert!(
            (b.start - decided).abs() < MATCH_NS,
            "{b:?} against {decided}"
        );
        assert!(b.start - a.start > 2 * S, "{b:?} started with {a:?}");
    }
}

/// Under FCFS and EASY alike, the job that waits for a running one to end
/// has its process started ahead of that end (the controller knows it
/// from the run time), held; the pass at the end lets that very process
/// run, and its record starts then. (It is started 100 ms ahead: too short
/// to be seen pending reliably, so the process that runs the job shows it
/// by its command line, `--held`, which no start at the pass has.)
#[test]
fn the_job_waiting_for_an_end_was_started_ahead_and_held() {
    for (policy, prestart) in [("fcfs", true), ("easy", true), ("easy", false)] {
        let c = Cluster::start(
            "vn1",
            4,
            &format!("policy = \"{policy}\"\nprestart = {prestart}\n"),
        );
        let blocker = c.submit(&["--cores", "4", "--runtime", "2"])[0];
        c.wait_state(blocker, "running");
        let next = c.submit(&["--cores", "4", "--runtime", "1"])[0];
        c.wait_state(next, "running");
        let pid = c.pids(next)[0];
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&cmdline).contains("--held\0"),
            prestart,
            "{policy}, prestart = {prestart}"
        );
        c.wait_state(next, "completed");
        let (a, b) = (c.record(blocker), c.record(next));
        assert_matches(&c, &b);
        // It started at the pass that saw the end, not when its process
        // was made.
        let decided = (c.job(next)["start"].as_f64().unwrap() * 1e9) as i64;
        assert!(
            (b.start - decided).abs() < MATCH_NS,
            "{policy}: {b:?} vs {decided}"
        );
        assert!(b.start >= a.end, "{policy}: {b:?} before {a:?} ended");
    }
}

#[test]
fn gang_time_slicing_takes_turns_on_the_cores() {
    let c = Cluster::start(
        "vn1",
        4,
        r#"time_slice_s = 1.0
[[partitions]]
name = "gang"
nodes = "ALL"
oversubscribe = 2
"#,
    );
    // 2.7 s of work each, not a whole number of slices: a job that ended
    // on a slice boundary would race the rotation that suspends it.
    let ids = c.submit(&["--cores", "4", "--runtime", "2.7", "--count", "2"]);
    for &id in &ids {
        c.wait_state(id, "completed");
    }
    let a = c.record(ids[0]);
    let b = c.record(ids[1]);
    for r in [&a, &b] {
        assert_eq!(r.status, Status::Completed);
        assert!(
            !r.suspensions.is_empty(),
            "job {} never gave way: {r:?}",
            r.id
        );
        assert_matches(&c, r);
        let run = r.end - r.start - r.suspended_ns();
        assert!(
            (run - 27 * S / 10).abs() < S / 5,
            "job {} ran {run} ns",
            r.id
        );
        // Each turn away lasts about one slice: the other job's turn.
        for s in &r.suspensions {
            let d = s.duration_ns();
            assert!(
                (S / 2..2 * S).contains(&d),
                "job {}: turn away {d} ns",
                r.id
            );
        }
    }
    // Rotation, not sharing: the two never run on the cores at once.
    let both = overlap(&running(&a), &running(&b));
    assert!(both < S / 5, "ran together for {both} ns: {a:?} {b:?}");
    // 5.4 seconds of work on one node's cores, one at a time.
    let span = a.end.max(b.end) - a.start.min(b.start);
    assert!(
        (54 * S / 10 - S / 5..74 * S / 10).contains(&span),
        "span {span} ns"
    );
}
