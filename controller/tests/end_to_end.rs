//! The cluster end to end on loopback: a real controller with its agents,
//! the real client commands, jobs as real sigsleep processes.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::record::Status;

#[test]
fn jobs_run_as_real_processes_and_leave_records() {
    let c = Cluster::start("vn[1-4]", 4, "");
    let ids = c.submit(&["--cores", "2", "--runtime", "1", "--count", "3"]);
    assert_eq!(ids, [1, 2, 3]);
    c.wait_for("the jobs' processes", || {
        ids.iter().all(|&id| c.pids(id).len() == 1)
    });
    for &id in &ids {
        assert_eq!(c.state(id), "running");
    }
    for &id in &ids {
        c.wait_state(id, "completed");
    }
    for &id in &ids {
        let r = c.record(id);
        assert_eq!(r.status, Status::Completed);
        assert_eq!(r.cores, 2);
        assert!(r.start >= r.submit);
        assert!(r.end - r.start >= 1_000_000_000);
    }
    let q = json_of(&c.ok(&["queue", "--all", "--format", "json"]));
    let job = &q[0];
    for key in ["id", "state", "partition", "cores", "nodes"] {
        assert!(job.get(key).is_some(), "queue json lacks {key}: {job}");
    }
    let nodes = json_of(&c.ok(&["nodes", "--format", "json"]));
    for key in ["name", "state", "cpus", "alloc_cpus"] {
        assert!(nodes[0].get(key).is_some(), "nodes json lacks {key}");
    }
}

#[test]
fn suspend_and_resume_are_real_signals_and_recorded() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let id = c.submit(&["--cores", "1", "--runtime", "2"])[0];
    c.wait_for("the job's process", || c.pids(id).len() == 1);
    let pid = c.pids(id)[0];
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.ok(&["suspend", &id.to_string()]);
    assert_eq!(c.state(id), "suspended");
    c.wait_for("the process to stop", || proc_state(pid) == Some('T'));
    std::thread::sleep(std::time::Duration::from_millis(1000));
    c.ok(&["resume", &id.to_string()]);
    c.wait_for("the process to run again", || proc_state(pid) != Some('T'));
    c.wait_state(id, "completed");
    let r = c.record(id);
    assert_eq!(r.suspensions.len(), 1, "{r:?}");
    let z = r.suspended_ns();
    assert!(
        (800_000_000..5_000_000_000).contains(&z),
        "suspended {z} ns"
    );
    // Run time excludes the suspension.
    let run = r.end - r.start - z;
    assert!((run - 2_000_000_000).abs() < 100_000_000, "run {run} ns");
    // Suspending what is not running is refused, with exit code 1.
    let out = c.ctl(&["suspend", &id.to_string()]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn cancel_gives_a_cancelled_record_and_ends_the_process() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let id = c.submit(&["--cores", "1", "--runtime", "600"])[0];
    c.wait_for("the job's process", || c.pids(id).len() == 1);
    c.ok(&["cancel", &id.to_string()]);
    c.wait_state(id, "cancelled");
    assert!(c.pids(id).is_empty());
    assert_eq!(c.record(id).status, Status::Cancelled);
    // A suspended job can be cancelled too.
    let id = c.submit(&["--cores", "1", "--runtime", "600"])[0];
    c.wait_for("the job's process", || c.pids(id).len() == 1);
    c.ok(&["suspend", &id.to_string()]);
    c.ok(&["cancel", &id.to_string()]);
    c.wait_state(id, "cancelled");
    assert_eq!(c.record(id).status, Status::Cancelled);
    assert_eq!(c.record(id).suspensions.len(), 1);
}

#[test]
fn drained_nodes_get_no_jobs() {
    let c = Cluster::start("vn[1-4]", 2, "");
    assert_eq!(
        c.ok(&["drain", "vn[1-3]", "--reason", "maintenance"])
            .trim(),
        "vn[1-3]"
    );
    let ids = c.submit(&["--cores", "1", "--runtime", "30", "--count", "3"]);
    c.wait_state(ids[0], "running");
    c.wait_state(ids[1], "running");
    // Only vn4's two cores are usable: the third job waits.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(c.state(ids[2]), "pending");
    for &id in &ids[..2] {
        assert_eq!(c.job(id)["nodes"], "vn4");
    }
    let nodes = json_of(&c.ok(&["nodes", "--format", "json"]));
    let drained: Vec<&str> = nodes
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["state"] == "drained")
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(drained, ["vn1", "vn2", "vn3"]);
    // The table folds node lists.
    let table = c.ok(&["nodes"]);
    assert!(
        table.contains("vn[1-3]") && table.contains("maintenance"),
        "{table}"
    );
    c.ok(&["undrain", "vn1"]);
    c.wait_state(ids[2], "running");
    assert_eq!(c.job(ids[2])["nodes"], "vn1");
    c.ok(&["cancel", "1", "2", "3"]);
}

#[test]
fn walltime_limit_gives_timeout() {
    let c = Cluster::start("vn1", 2, "");
    let id = c.submit(&["--cores", "1", "--runtime", "600", "--walltime", "1"])[0];
    c.wait_state(id, "timeout");
    let r = c.record(id);
    assert_eq!(r.status, Status::Timeout);
    assert!((r.end - r.start - 1_000_000_000).abs() < 200_000_000);
}

#[test]
fn impossible_and_bad_requests_are_refused_clearly() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let out = c.ctl(&["submit", "--cores", "9", "--runtime", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has 8"));
    // Jobs of a request are counted from 1 (regression: "job 0").
    let out = c.ctl(&["submit", "--cores", "9", "--runtime", "1", "--count", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("job 1 of 3: 9 cores, but partition"), "{err}");
    // A duration too long for the clocks says so (regression: it said
    // "non-negative").
    let out = c.ctl(&["submit", "--cores", "1", "--runtime", "1e300"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("too long") && !err.contains("non-negative"),
        "{err}"
    );
    let out = c.ctl(&["cancel", "42"]);
    assert_eq!(out.status.code(), Some(1));
    let out = c.ctl(&["drain", "vn9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no node vn9"));
    let out = c.ctl(&["submit", "--cores", "x", "--runtime", "1"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn shutdown_ends_every_job_and_the_controller() {
    let mut c = Cluster::start("vn[1-2]", 4, "");
    let ids = c.submit(&["--cores", "1", "--runtime", "600", "--count", "3"]);
    c.wait_for("the jobs' processes", || {
        ids.iter().all(|&id| c.pids(id).len() == 1)
    });
    c.ok(&["shutdown"]);
    let status = c.serve.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", c.log());
    for &id in &ids {
        assert!(c.pids(id).is_empty(), "job {id} outlived the controller");
        assert_eq!(c.record(id).status, Status::Cancelled);
    }
}
