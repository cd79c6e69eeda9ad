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
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const JOBS: usize = 4;

/// One cluster: two controllers of one config, each with a fresh state
/// directory, and an agent host `h1`.
struct Run {
    dir: PathBuf,
    config: PathBuf,
    addrs: [String; 2],
    serve: [Option<Child>; 2],
    agent: Option<Child>,
}

impl Run {
    /// Starts cluster `name` under `top`; its agent keeps its record
    /// directory (and mark) under `tmp`, the agent's temporary directory,
    /// whatever the cluster.
    fn start(top: &Path, name: &str, tmp: &Path) -> Run {
        let addrs = [0, 1].map(|_| format!("127.0.0.1:{}", free_port()));
        let mut r = Run::start_at(top, name, addrs);
        r.agent = Some(r.spawn_agent(tmp));
        r
    }

    /// The two controllers alone, at `addrs`.
    fn start_at(top: &Path, name: &str, addrs: [String; 2]) -> Run {
        let dir = top.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("cluster.toml");
        std::fs::write(&config, config_text(&dir, &addrs)).unwrap();
        let secret = top.join("secret");
        if !secret.exists() {
            std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
            std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
        }
        let mut r = Run {
            dir,
            config,
            addrs,
            serve: [None, None],
            agent: None,
        };
        r.serve(0);
        r.serve(1);
        r
    }

    fn spawn_agent(&self, tmp: &Path) -> Child {
        Command::new(binary("agent"))
            .args(["--controller", &self.addrs.join(",")])
            .args(["--nodes", "t[1-2]", "--cpus", "2", "--host", "h1"])
            .arg("--secret-file")
            .arg(self.dir.parent().unwrap().join("secret"))
            .arg("--sigsleep")
            .arg(binary("sigsleep"))
            // The default record directory, under the temporary directory.
            .env("TMPDIR", tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file("agent"))
            .spawn()
            .unwrap()
    }

    fn log_file(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("{name}.log")))
            .unwrap()
    }

    fn serve(&mut self, i: usize) {
        let child = Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(["serve", "--listen", &self.addrs[i], "--state-dir"])
            .arg(self.dir.join(format!("state{i}")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log_file(&format!("serve{i}")))
            .spawn()
            .unwrap();
        self.serve[i] = Some(child);
        self.wait_for("the controller to listen", |r| {
            r.ctl(i, &["stats"]).status.success()
        });
    }

    fn ctl(&self, i: usize, args: &[&str]) -> Output {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(["--addr", &self.addrs[i]])
            .args(args)
            .output()
            .unwrap()
    }

    fn stats(&self, i: usize) -> serde_json::Value {
        json(&self.ctl(i, &["stats", "--format", "json"]))
    }

    fn logs(&self) -> String {
        ["serve0", "serve1", "agent"]
            .iter()
            .map(|n| {
                let text =
                    std::fs::read_to_string(self.dir.join(format!("{n}.log"))).unwrap_or_default();
                format!("--- {n}.log\n{text}")
            })
            .collect()
    }

    fn wait_for(&self, what: &str, mut ok: impl FnMut(&Run) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(40);
        while !ok(self) {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Jobs submitted, the primary killed with SIGKILL while they run, and
    /// every job completed once by the backup alone.
    fn fail_over(&mut self) {
        self.wait_for("the backup to hold the whole state", |r| {
            let s = r.stats(0);
            s["controller"]["role"] == "primary"
                && s["controller"]["backups"][0]["copying"] == false
                && s["nodes"]["idle"].as_u64() == Some(2)
        });
        let first = self.stats(0)["controller"]["cluster"].clone();
        assert!(first.is_string(), "{first}");
        let out = self.ctl(
            0,
            &["submit", "--cores", "1", "--runtime", "3", "--count", "4"],
        );
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        self.wait_for("the jobs to run", |r| {
            r.stats(0)["jobs"]["running"].as_u64() == Some(JOBS as u64)
        });
        if let Some(mut c) = self.serve[0].take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        // A client with the list, while no controller leads, rides out the
        // takeover: its job is accepted once the backup leads.
        let out = Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(["--addr", &self.addrs.join(",")])
            .args(["submit", "--cores", "1", "--runtime", "1"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.logs()
        );
        assert_eq!(
            self.stats(1)["controller"]["role"],
            "primary",
            "{}",
            self.logs()
        );
        let s = self.stats(1);
        assert_eq!(s["controller"]["cluster"], first, "{s}");
        self.wait_for("every job to complete", |r| {
            r.stats(1)["jobs"]["completed"].as_u64() == Some(JOBS as u64 + 1)
        });
        let records = std::process::Command::new(binary("calcmets"))
            .arg("dump")
            .arg(self.dir.join("state1").join("records"))
            .output()
            .unwrap();
        let lines = String::from_utf8_lossy(&records.stdout).lines().count();
        assert_eq!(lines, JOBS + 1, "one record per job\n{}", self.logs());
    }

    fn shutdown(&mut self) {
        let out = self.ctl(1, &["shutdown"]);
        assert!(out.status.success(), "{}", self.logs());
        let deadline = Instant::now() + Duration::from_secs(30);
        for c in self.serve.iter_mut().chain([&mut self.agent]).flatten() {
            while c.try_wait().unwrap().is_none() {
                assert!(Instant::now() < deadline, "a process did not stop");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for c in self.serve.iter_mut().chain([&mut self.agent]).flatten() {
            let _ = c.kill();
            let _ = c.wait();
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
    let mut one = Run::start(top.path(), "one", &tmp);
    one.fail_over();
    one.shutdown();
    // The first cluster's mark stays on the host: its backup's term, acting
    // alone.
    let marks: Vec<PathBuf> = walk(&tmp)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "mark"))
        .collect();
    assert_eq!(marks.len(), 1, "{marks:?}");
    let left = std::fs::read_to_string(&marks[0]).unwrap();
    assert!(left.starts_with("2 2 18446744073709551615 "), "{left}");

    let mut two = Run::start(top.path(), "two", &tmp);
    two.fail_over();
    let agent = std::fs::read_to_string(two.dir.join("agent.log")).unwrap();
    assert!(
        agent.contains("set aside the mark of another cluster (term 2 of cluster")
            && agent.contains("led by controller 2 acting alone)"),
        "{agent}"
    );
    // Each cluster's identity, in its controllers' term files.
    let cluster = |r: &Run, i: usize| {
        let t = std::fs::read_to_string(r.dir.join(format!("state{i}")).join("term")).unwrap();
        t.split_whitespace().nth(2).unwrap().to_string()
    };
    assert_eq!(cluster(&one, 0), cluster(&one, 1));
    assert_eq!(cluster(&two, 0), cluster(&two, 1));
    assert_ne!(cluster(&one, 1), cluster(&two, 1));
    two.shutdown();
}

#[test]
fn an_agent_that_serves_a_cluster_refuses_another_by_name_until_restarted() {
    let top = tempfile::tempdir().unwrap();
    let tmp = top.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut one = Run::start(top.path(), "one", &tmp);
    one.wait_for("the agent to register", |r| {
        r.stats(0)["nodes"]["idle"].as_u64() == Some(2)
    });
    let first = one.stats(0)["controller"]["cluster"]
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
    let two = Run::start_at(top.path(), "two", one.addrs.clone());
    let why = format!("h1: the agent serves cluster {first} (term 1) since it started");
    two.wait_for("the new cluster to turn the agent away", |r| {
        r.stats(0)["controller"]["turned_away"]
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
    assert_ne!(two.stats(0)["controller"]["role"], "primary");
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
    let mut two = two;
    two.agent = Some(two.spawn_agent(&tmp));
    two.wait_for("the new cluster to lead with the agent", |r| {
        let s = r.stats(0);
        s["controller"]["role"] == "primary" && s["nodes"]["idle"].as_u64() == Some(2)
    });
    let second = two.stats(0)["controller"]["cluster"].clone();
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
