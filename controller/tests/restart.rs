//! The controller killed with SIGKILL mid-run and started again on the same
//! state directory: no accepted job is lost or duplicated, agents on other
//! hosts reconnect and report their jobs, and every job ends with exactly
//! one record.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::collections::BTreeMap;

use formats::record::Status;

/// Job id → state, from `queue --all`.
fn states(c: &Cluster) -> BTreeMap<u64, String> {
    json_of(&c.ok(&["queue", "--all", "--format", "json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["id"].as_u64().unwrap(),
                j["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every job of `ids` has exactly one record, a completed one.
fn one_completed_record_each(c: &Cluster, ids: &[u64]) {
    let recs = c.records();
    for &id in ids {
        let mine: Vec<_> = recs.iter().filter(|r| r.id == id).collect();
        assert_eq!(mine.len(), 1, "records of job {id}: {mine:?}\n{}", c.log());
        assert_eq!(mine[0].status, Status::Completed, "{:?}", mine[0]);
    }
    assert_eq!(recs.len(), ids.len(), "records of unknown jobs: {recs:?}");
}

/// Each running job has its nodes, and the cores the nodes count as
/// allocated are exactly those of the running jobs, none past a node's.
fn cores_held_by_running_jobs(c: &Cluster) {
    let queue = json_of(&c.ok(&["queue", "--format", "json"]));
    let running: Vec<&serde_json::Value> = queue
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["state"] == "running")
        .collect();
    assert!(!running.is_empty(), "{queue}");
    for j in &running {
        assert!(
            j["nodes"]
                .as_str()
                .is_some_and(|n| !n.is_empty() && n != "-"),
            "a running job without nodes: {j}"
        );
    }
    let held: u64 = running.iter().map(|j| j["cores"].as_u64().unwrap()).sum();
    let nodes = json_of(&c.ok(&["nodes", "--format", "json"]));
    let mut allocated = 0;
    for n in nodes.as_array().unwrap() {
        let (alloc, cpus) = (
            n["alloc_cpus"].as_u64().unwrap(),
            n["cpus"].as_u64().unwrap(),
        );
        assert!(alloc <= cpus, "overbooked: {n}");
        allocated += alloc;
    }
    assert_eq!(allocated, held, "{queue}\n{nodes}");
}

#[test]
fn remote_agents_keep_their_jobs_through_a_controller_crash() {
    // Agents fence their jobs after half the heartbeat timeout without
    // the controller: 5 s, ample for a restart.
    let mut c = Cluster::start_restartable("rn[1-4]", 4, false, "", 10_000);
    let mut a1 = spawn_agent(&c, "rn[1-2]", "h1");
    let mut a2 = spawn_agent(&c, "rn[3-4]", "h2");
    c.wait_nodes_up();
    // 16 cores; 24 jobs of 2 cores for 3 s: three waves, the second still
    // running when the controller is back.
    let first = c.submit(&["--cores", "2", "--runtime", "3", "--count", "24"]);
    c.wait_for("a first job to complete", || {
        states(&c).values().any(|s| s == "completed")
    });
    c.wait_for("jobs to be running", || {
        states(&c).values().filter(|s| *s == "running").count() >= 4
    });
    c.kill9();
    // Jobs go on, and some end, while no controller is there.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    c.restart();
    // The jobs it finds running hold their cores again: nothing else is
    // started on top of them.
    c.wait_for("the agents to report their jobs again", || {
        c.log().contains("job reported again by its agent")
    });
    cores_held_by_running_jobs(&c);
    // Ids go on from where they were: nothing accepted is reused.
    let more = c.submit(&["--cores", "2", "--runtime", "0.5", "--count", "4"]);
    assert!(more[0] > *first.last().unwrap(), "{more:?} after {first:?}");
    let all: Vec<u64> = first.iter().chain(&more).copied().collect();
    for &id in &all {
        c.wait_state(id, "completed");
    }
    let s = states(&c);
    assert_eq!(s.len(), all.len(), "{s:?}");
    assert!(s.values().all(|v| v == "completed"), "{s:?}");
    one_completed_record_each(&c, &all);
    // The agents never stopped: they reconnected.
    assert!(a1.try_wait().unwrap().is_none());
    assert!(a2.try_wait().unwrap().is_none());
    let log = c.log();
    assert!(log.contains("recovered from the journal"), "{log}");
    assert!(log.contains("job reported again by its agent"), "{log}");
    c.ok(&["shutdown"]);
    a1.wait().unwrap();
    a2.wait().unwrap();
}

#[test]
fn jobs_of_hosted_agents_die_with_the_controller_and_run_again() {
    // Agents hosted by the controller die with it, and so do their jobs;
    // the journal is folded into a snapshot at every sync here, so the
    // restart goes through the snapshot too.
    let mut c = Cluster::start_restartable("vn[1-2]", 4, true, "journal_compact_mb = 0", 2_000);
    let ids = c.submit(&["--cores", "4", "--runtime", "2", "--count", "5"]);
    c.wait_for("two jobs' processes", || {
        ids.iter().filter(|&&id| c.pids(id).len() == 1).count() == 2
    });
    let running: Vec<i32> = ids.iter().flat_map(|&id| c.pids(id)).collect();
    c.kill9();
    c.wait_for("the jobs' processes to die with the controller", || {
        running
            .iter()
            .all(|&p| proc_state(p).is_none_or(|s| s == 'Z'))
    });
    c.restart();
    for &id in &ids {
        c.wait_state(id, "completed");
    }
    one_completed_record_each(&c, &ids);
    let log = c.log();
    assert!(log.contains("journal folded into a snapshot"), "{log}");
    assert!(log.contains("job requeued"), "{log}");
}

#[test]
fn a_second_controller_on_the_same_state_directory_is_refused() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let out = std::process::Command::new(binary("controller"))
        .arg("serve")
        .arg("--config")
        .arg(&c.config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is in use by another controller") && err.contains(&c.serve.id().to_string()),
        "{err}"
    );
    // The first one goes on, reachable at the address it wrote.
    let id = c.submit(&["--cores", "1", "--runtime", "0.1"])[0];
    c.wait_state(id, "completed");
    c.ok(&["shutdown"]);
}

#[test]
fn answers_that_do_not_wait_for_the_disk_still_survive_a_crash() {
    // `journal_sync = "background"` answers once a change is written,
    // not synced: a SIGKILL right after the answer must still find every
    // acknowledged job at the restart (the page cache keeps what was
    // written; only the host's crash could lose it).
    let mut c =
        Cluster::start_restartable("vn[1-2]", 4, true, "journal_sync = \"background\"", 2_000);
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.extend(c.submit(&["--cores", "4", "--runtime", "600"]));
    }
    c.kill9();
    c.restart();
    let after = states(&c);
    for id in &ids {
        assert!(
            after.contains_key(id),
            "job {id} lost: {after:?}\n{}",
            c.log()
        );
    }
    assert_eq!(after.len(), ids.len(), "{after:?}");
}

#[test]
fn a_journal_sync_mode_that_does_not_exist_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[controller]\njournal_sync = \"never\"\n[[nodes]]\nnames = \"n1\"\ncpus = 1\n",
    )
    .unwrap();
    let out = std::process::Command::new(binary("controller"))
        .args(["serve", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("c.toml") && err.contains("controller.journal_sync") && err.contains("never"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
