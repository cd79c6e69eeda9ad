//! An agent process on its own, over real TCP: it registers, runs jobs,
//! streams their records to the controller; killed, it takes its jobs
//! with it and its nodes go down.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::process::{Child, Command, Stdio};

use formats::record::Status;

fn agent(c: &Cluster, nodes: &str, host: &str) -> Child {
    Command::new(binary("agent"))
        .args([
            "--controller",
            &c.address(),
            "--nodes",
            nodes,
            "--cpus",
            "4",
        ])
        .arg("--secret-file")
        .arg(c.secret_path())
        .arg("--record-dir")
        .arg(c.dir.path().join(format!("spool-{host}")))
        .args(["--host", host])
        .arg("--sigsleep")
        .arg(binary("sigsleep"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(c.dir.path().join(format!("{host}.log"))).unwrap())
        .spawn()
        .unwrap()
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
fn a_killed_agent_takes_its_jobs_with_it_and_its_nodes_go_down() {
    let c = Cluster::start_remote("rn[1-2]", 4);
    let mut a = agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    let id = c.submit(&["--cores", "2", "--runtime", "600"])[0];
    c.wait_for("the job's process", || {
        sigsleep_pids(id, &c.dir.path().join("spool-h1/h1.rec")).len() == 1
    });
    let pid = sigsleep_pids(id, &c.dir.path().join("spool-h1/h1.rec"))[0];
    a.kill().unwrap();
    a.wait().unwrap();
    // The kernel kills the job with its agent (parent-death signal).
    c.wait_for("the job's process to die with its agent", || {
        proc_state(pid).is_none_or(|s| s == 'Z')
    });
    c.wait_state(id, "node_fail");
    let nodes = json_of(&c.ok(&["nodes", "--format", "json"]));
    assert!(nodes
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["state"] == "down"));
    // No record: the job never finished.
    assert!(c
        .records()
        .iter()
        .all(|r| r.id != id || r.status != Status::Completed));
    // The agent comes back: its nodes return to service.
    let mut a = agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    let id = c.submit(&["--cores", "2", "--runtime", "0.2"])[0];
    c.wait_state(id, "completed");
    c.ok(&["shutdown"]);
    a.wait().unwrap();
}
