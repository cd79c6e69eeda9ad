//! What one cluster leaves on an agent host never stops the next one
//! (docs/faults.md, "One cluster, one history"): real `controller serve`
//! processes, a primary and its backup on loopback, and a real agent
//! process with its default record directory, where its mark is kept.
//! Two clusters one after the other on that host, each with fresh state
//! directories and a failover (the primary killed with SIGKILL mid-run,
//! the backup going on alone), both complete every job, one of them
//! submitted during the takeover. And an agent that
//! serves one cluster refuses a controller of another, by name, and says
//! why, as that controller does, until it is restarted.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::pair::Pair;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const JOBS: usize = 4;

/// Cluster `name` under `top`: its two controllers, and its agent, whose
/// record directory (and mark) lies under `tmp`, the agent's temporary
/// directory, whatever the cluster.
fn start(top: &Path, name: &str, tmp: &Path) -> Pair {
    let addrs = [0, 1].map(|_| format!("127.0.0.1:{}", free_port()));
    let mut p = start_at(top, name, addrs);
    p.agent = Some(spawn_agent_h1(&p, tmp));
    p
}

/// The two controllers alone, at `addrs`.
fn start_at(top: &Path, name: &str, addrs: [String; 2]) -> Pair {
    let secret = top.join("secret");
    if !secret.exists() {
        std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
        std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    let mut p = Pair::configure(top.join(name), addrs, config_text);
    p.serve(0);
    p.serve(1);
    p
}

fn spawn_agent_h1(p: &Pair, tmp: &Path) -> Child {
    Command::new(binary("agent"))
        .args(["--controller", &p.addrs.join(",")])
        .args(["--nodes", "t[1-2]", "--cpus", "2", "--host", "h1"])
        .arg("--secret-file")
        .arg(p.dir.parent().unwrap().join("secret"))
        .arg("--sigsleep")
        .arg(binary("sigsleep"))
        // The default record directory, under the temporary directory.
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(p.log_file("agent"))
        .spawn()
        .unwrap()
}

/// Controller `i`'s stats, as a missing answer too (`null`).
fn stats(p: &Pair, i: usize) -> serde_json::Value {
    json(&p.ctl(i, &["stats", "--format", "json"]))
}

/// Jobs submitted, the primary killed with SIGKILL while they run, and
/// every job completed once by the backup alone.
fn fail_over(p: &mut Pair) {
    p.wait_for("the backup to hold the whole state", |p| {
        let s = stats(p, 0);
        s["controller"]["role"] == "primary"
            && s["controller"]["backups"][0]["copying"] == false
            && s["nodes"]["idle"].as_u64() == Some(2)
    });
    let first = stats(p, 0)["controller"]["cluster"].clone();
    assert!(first.is_string(), "{first}");
    p.ok(
        0,
        &["submit", "--cores", "1", "--runtime", "3", "--count", "4"],
    );
    p.wait_for("the jobs to run", |p| {
        stats(p, 0)["jobs"]["running"].as_u64() == Some(JOBS as u64)
    });
    p.kill9(0);
    // A client with the list, while no controller leads, rides out the
    // takeover: its job is accepted once the backup leads.
    let out = Command::new(binary("controller"))
        .arg("--config")
        .arg(&p.config)
        .args(["--addr", &p.addrs.join(",")])
        .args(["submit", "--cores", "1", "--runtime", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        p.logs()
    );
    assert_eq!(stats(p, 1)["controller"]["role"], "primary", "{}", p.logs());
    let s = stats(p, 1);
    assert_eq!(s["controller"]["cluster"], first, "{s}");
    p.wait_for("every job to complete", |p| {
        stats(p, 1)["jobs"]["completed"].as_u64() == Some(JOBS as u64 + 1)
    });
    let records = Command::new(binary("calcmets"))
        .arg("dump")
        .arg(p.state_dir(1).join("records"))
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&records.stdout).lines().count();
    assert_eq!(lines, JOBS + 1, "one record per job\n{}", p.logs());
}

fn shutdown(p: &mut Pair) {
    p.ok(1, &["shutdown"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    for c in p.serve.iter_mut().chain([&mut p.agent]).flatten() {
        while c.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a process did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn config_text(dir: &Path, addrs: &[String; 2]) -> String {
    format!(
        r#"
[controller]
listen = "{a}"
hosts = ["{a}", "{b}"]
secret_file = "{top}/secret"
state_dir = "{dir}/unused"
takeover_timeout_s = 1.5

[agents]
local = false
sigsleep = "{sigsleep}"
heartbeat_ms = 200
heartbeat_timeout_ms = 8000

[[agents.host]]
name = "h1"
nodes = "t[1-2]"

[[nodes]]
names = "t[1-2]"
cpus = 2
memory = "4G"
"#,
        a = addrs[0],
        b = addrs[1],
        top = dir.parent().unwrap().display(),
        dir = dir.display(),
        sigsleep = binary("sigsleep").display(),
    )
}

#[test]
fn two_clusters_one_after_the_other_on_one_agent_host_each_fail_over_and_complete() {
    let top = tempfile::tempdir().unwrap();
    let tmp = top.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut one = start(top.path(), "one", &tmp);
    fail_over(&mut one);
    shutdown(&mut one);
    // The first cluster's mark stays on the host: its backup's term, acting
    // alone.
    let marks: Vec<PathBuf> = walk(&tmp)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "mark"))
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    let left = std::fs::read_to_string(&marks[0]).unwrap();
    assert!(left.starts_with("2 2 18446744073709551615 "), "{left}");

    let mut two = start(top.path(), "two", &tmp);
    fail_over(&mut two);
    let agent = std::fs::read_to_string(two.dir.join("agent.log")).unwrap();
    assert!(
        agent.contains("set aside the mark of another cluster (term 2 of cluster")
            && agent.contains("led by controller 2 acting alone)"),
        "{agent}"
    );
    // Each cluster's identity, in its controllers' term files.
    let cluster = |p: &Pair, i: usize| {
        let t = std::fs::read_to_string(p.state_dir(i).join("term")).unwrap();
        t.split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(cluster(&one, 0), cluster(&one, 1));
    assert_eq!(cluster(&two, 0), cluster(&two, 1));
    assert_ne!(cluster(&one, 1), cluster(&two, 1));
    shutdown(&mut two);
}

#[test]
fn an_agent_that_serves_a_cluster_refuses_another_by_name_until_restarted() {
    let top = tempfile::tempdir().unwrap();
    let tmp = top.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut one = start(top.path(), "one", &tmp);
    one.wait_for("the agent to register", |p| {
        stats(p, 0)["nodes"]["idle"].as_u64() == Some(2)
    });
    let first = stats(&one, 0)["controller"]["cluster"]
        .as_str()
        .unwrap()
        .to_string();
    // Both controllers lost; the agent serves on, looking for them. A new
    // cluster comes up at their addresses, with fresh state: it shares the
    // secret, not the history.
    for c in one.serve.iter_mut() {
        if let Some(mut c) = c.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
    let mut agent = one.agent.take().unwrap();
    let mut two = start_at(top.path(), "two", one.addrs.clone());
    let why = format!("h1: the agent serves cluster {first} (term 1) since it started");
    two.wait_for("the new cluster to turn the agent away", |p| {
        stats(p, 0)["controller"]["turned_away"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t.as_str().unwrap().starts_with(&why)))
    });
    // It says so in `stats` and `nodes`, and leads nothing meanwhile.
    let table = String::from_utf8(two.ctl(0, &["stats"]).stdout).unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("turned away ") && l.contains(&why)),
        "{table}"
    );
    assert_ne!(stats(&two, 0)["controller"]["role"], "primary");
    let nodes = String::from_utf8(two.ctl(0, &["nodes"]).stdout).unwrap();
    assert!(
        nodes
            .lines()
            .next()
            .unwrap()
            .contains(&format!("turned away {why}")),
        "{nodes}"
    );
    // The agent says what it holds, what each controller offered, and
    // what would let it go on.
    two.wait_for("the agent to say why", |_| {
        let log = std::fs::read_to_string(one.dir.join("agent.log")).unwrap_or_default();
        log.contains(&format!(
            "this agent holds term 1 of cluster {first}, led by controller 1"
        )) && log.contains("the cluster it serves since it started")
            && log.contains("takes it only once the agent is restarted")
            && log.contains(&format!(
                "controller {} is candidate of cluster (none)",
                two.addrs[0]
            ))
    });
    // Restarted, it sets the old mark aside and the new cluster leads.
    let _ = agent.kill();
    let _ = agent.wait();
    two.agent = Some(spawn_agent_h1(&two, &tmp));
    two.wait_for("the new cluster to lead with the agent", |p| {
        let s = stats(p, 0);
        s["controller"]["role"] == "primary" && s["nodes"]["idle"].as_u64() == Some(2)
    });
    let second = stats(&two, 0)["controller"]["cluster"].clone();
    assert!(second.is_string() && second != first.as_str(), "{second}");
    assert_eq!(
        two.stats(0)["controller"]["turned_away"],
        serde_json::json!([])
    );
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_controller_alone_takes_an_agent_whatever_mark_it_holds() {
    // A controller alone has no witnesses: what a failover cluster left on
    // the host (a later term, acting alone) must not stop it.
    let c = common::Cluster::start_remote("a[1-2]", 4);
    let spool = c.dir.path().join("spool-h1");
    std::fs::create_dir_all(&spool).unwrap();
    let left = "2 2 18446744073709551615 3f2a9c81d4e6b7a0\n";
    std::fs::write(spool.join("mark"), left).unwrap();
    let mut agent = spawn_agent(&c, "a[1-2]", "h1");
    c.wait_nodes_up();
    let id = c.submit(&["--cores", "1", "--runtime", "0.2"])[0];
    c.wait_state(id, "completed");
    // The mark stays the other cluster's, for when its controllers return.
    assert_eq!(std::fs::read_to_string(spool.join("mark")).unwrap(), left);
    let _ = agent.kill();
    let _ = agent.wait();
}
