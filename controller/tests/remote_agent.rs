//! An agent process on its own, over real TCP: it registers, runs jobs,
//! streams their records to the controller; killed, it takes its jobs
//! with it and its nodes go down.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::process::Child;

use formats::record::Status;

/// Two partitions on the same nodes: `again` requeues the jobs of a lost
/// node (the default, as Slurm), `once` ends them as node_fail.
const REQUEUE_AND_FAIL: &str = r#"[[partitions]]
name = "again"
nodes = "ALL"
default = true
[[partitions]]
name = "once"
nodes = "ALL"
on_node_fail = "fail"
"#;

fn agent(c: &Cluster, nodes: &str, host: &str) -> Child {
    spawn_agent(c, nodes, host)
}

#[test]
fn records_of_remote_agents_end_up_with_the_controller() {
    let c = Cluster::start_remote("rn[1-4]", 4);
    let mut a1 = agent(&c, "rn[1-2]", "h1");
    let mut a2 = agent(&c, "rn[3-4]", "h2");
    c.wait_nodes_up();
    let hosts: Vec<String> = json_of(&c.ok(&["nodes", "--format", "json"]))
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["host"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hosts, ["h1", "h1", "h2", "h2"]);
    let ids = c.submit(&["--cores", "4", "--runtime", "0.5", "--count", "8"]);
    for &id in &ids {
        c.wait_state(id, "completed");
    }
    // Every job has exactly one record, in the controller's record file,
    // though it ran on another "host".
    let recs = c.records();
    let mut got: Vec<u64> = recs.iter().map(|r| r.id).collect();
    got.sort_unstable();
    assert_eq!(got, ids);
    let nodes: std::collections::BTreeSet<&str> = recs.iter().map(|r| &*r.node).collect();
    assert_eq!(nodes.len(), 4, "all four nodes were used: {nodes:?}");
    c.ok(&["shutdown"]);
    assert!(a1.wait().unwrap().success());
    assert!(a2.wait().unwrap().success());
}

#[test]
fn a_killed_agent_takes_its_jobs_with_it_and_they_are_requeued_or_failed() {
    let c = Cluster::start_remote_with("rn[1-2]", 4, REQUEUE_AND_FAIL);
    let mut a = agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    let again = c.submit(&["--cores", "2", "--runtime", "3"])[0];
    let once = c.submit(&["--partition", "once", "--cores", "2", "--runtime", "600"])[0];
    let spool = c.dir.path().join("spool-h1/h1.rec");
    c.wait_for("both jobs' processes", || {
        sigsleep_pids(again, &spool).len() == 1 && sigsleep_pids(once, &spool).len() == 1
    });
    let pids = [
        sigsleep_pids(again, &spool)[0],
        sigsleep_pids(once, &spool)[0],
    ];
    a.kill().unwrap();
    a.wait().unwrap();
    // The kernel kills the jobs with their agent (parent-death signal): no
    // ghost is left, on this host, of any job of this cluster.
    c.wait_for("the jobs' processes to die with their agent", || {
        pids.iter().all(|&p| proc_state(p).is_none_or(|s| s == 'Z'))
    });
    c.wait_for("no sigsleep of this cluster to be left", || {
        sigsleep_pids(again, &spool).is_empty() && sigsleep_pids(once, &spool).is_empty()
    });
    // Its nodes are down within the heartbeat timeout (2 s here; the
    // connection's end tells the controller at once).
    c.wait_for("the nodes to be down", || {
        json_of(&c.ok(&["nodes", "--format", "json"]))
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["state"] == "down")
    });
    // After the timeout the jobs count as lost: one requeued, one failed.
    c.wait_state(once, "node_fail");
    c.wait_state(again, "pending");
    assert!(c.job(again)["reason"]
        .as_str()
        .unwrap()
        .contains("requeued"));
    // The agent comes back: its nodes return to service, the requeued job
    // runs again and completes.
    let mut a = agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    c.wait_state(again, "completed");
    // One record per execution that ended: the killed ones left none.
    let recs = c.records();
    assert_eq!(recs.iter().filter(|r| r.id == again).count(), 1, "{recs:?}");
    assert!(recs.iter().all(|r| r.id != once), "{recs:?}");
    let r = c.record(again);
    assert_eq!(r.status, Status::Completed);
    c.ok(&["shutdown"]);
    a.wait().unwrap();
}

#[test]
fn jobs_an_agent_fences_are_lost_not_failed() {
    // The controller stops answering for longer than an agent's fence time
    // (half the heartbeat timeout) but less than the timeout: the agent
    // kills its jobs, and the controller, back, must count those
    // executions lost (requeued, or node_fail), not ended by signal 9.
    let c = Cluster::start_restartable("rn[1-2]", 4, false, REQUEUE_AND_FAIL, 4_000);
    let mut a = agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    let again = c.submit(&["--cores", "2", "--runtime", "4"])[0];
    let once = c.submit(&["--partition", "once", "--cores", "2", "--runtime", "600"])[0];
    let spool = c.dir.path().join("spool-h1/h1.rec");
    c.wait_for("both jobs' processes", || {
        sigsleep_pids(again, &spool).len() == 1 && sigsleep_pids(once, &spool).len() == 1
    });
    let pid = c.serve.id().to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(ok.success());
    };
    signal("-STOP");
    c.wait_for("the agent to fence its jobs", || {
        sigsleep_pids(again, &spool).is_empty() && sigsleep_pids(once, &spool).is_empty()
    });
    signal("-CONT");
    c.wait_state(once, "node_fail");
    assert!(
        c.job(once)["reason"]
            .as_str()
            .unwrap()
            .contains("lost the controller"),
        "{}",
        c.job(once)
    );
    // The requeued job runs again, once, to its end.
    c.wait_state(again, "completed");
    let recs = c.records();
    assert_eq!(recs.iter().filter(|r| r.id == again).count(), 1, "{recs:?}");
    assert!(recs.iter().all(|r| r.id != once), "{recs:?}");
    let log = c.log();
    assert!(log.contains("job requeued"), "{log}");
    // The agent stayed connected throughout.
    assert!(a.try_wait().unwrap().is_none());
    c.ok(&["shutdown"]);
    a.wait().unwrap();
}
