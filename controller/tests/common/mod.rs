//! Helpers for the controller's integration tests: a real `controller
//! serve` process on a free loopback port, the real client commands, real
//! sigsleep processes and their record files.
#![allow(dead_code)] // each test file uses a different subset
#![allow(clippy::unwrap_used)] // test helpers: a failure should panic

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use formats::record::{decode_all, JobRecord};

pub mod pair;

pub fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_controller"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn binary(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: run the tests with `cargo test --workspace`, which builds it",
        p.display()
    );
    p
}

/// A running controller with its own state directory.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub serve: Child,
}

/// `nodes` of `cpus` cores, hosted in-process if `local`, plus `extra`
/// TOML: its leading keys belong to `[controller]`, and it may go on with
/// tables of its own (`[[partitions]]`).
pub fn config_text(dir: &Path, nodes: &str, cpus: u32, local: bool, extra: &str) -> String {
    config_text_with(dir, nodes, cpus, local, extra, "127.0.0.1:0", 2000)
}

/// [`config_text`] with a fixed address (a controller that restarts must
/// be found again) and the agents' heartbeat timeout.
pub fn config_text_with(
    dir: &Path,
    nodes: &str,
    cpus: u32,
    local: bool,
    extra: &str,
    listen: &str,
    heartbeat_timeout_ms: u64,
) -> String {
    format!(
        r#"
[controller]
listen = "{listen}"
state_dir = "{state}"
record_dir = "{records}"
schedule_interval_s = 0.005
timeout_grace_ms = 2000
{extra}

[agents]
local = {local}
sigsleep = "{sigsleep}"
kill_grace_ms = 2000
heartbeat_ms = 200
heartbeat_timeout_ms = {heartbeat_timeout_ms}

[[nodes]]
names = "{nodes}"
cpus = {cpus}
memory = "16G"
"#,
        state = dir.join("state").display(),
        records = dir.join("records").display(),
        sigsleep = binary("sigsleep").display(),
    )
}

impl Cluster {
    pub fn start(nodes: &str, cpus: u32, extra: &str) -> Cluster {
        Cluster::launch(nodes, cpus, true, extra, true)
    }

    /// A controller whose nodes are hosted by agent processes started
    /// separately (the nodes are down until then).
    pub fn start_remote(nodes: &str, cpus: u32) -> Cluster {
        Cluster::launch(nodes, cpus, false, "", false)
    }

    /// [`Cluster::start_remote`] with `extra` TOML (see [`config_text`]).
    pub fn start_remote_with(nodes: &str, cpus: u32, extra: &str) -> Cluster {
        Cluster::launch(nodes, cpus, false, extra, false)
    }

    fn launch(nodes: &str, cpus: u32, local: bool, extra: &str, wait_up: bool) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let text = config_text(dir.path(), nodes, cpus, local, extra);
        Cluster::launch_text(dir, &text, wait_up)
    }

    /// A controller that can be killed and restarted on the same address
    /// and state directory ([`Cluster::kill9`], [`Cluster::restart`]).
    pub fn start_restartable(
        nodes: &str,
        cpus: u32,
        local: bool,
        extra: &str,
        heartbeat_timeout_ms: u64,
    ) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let listen = format!("127.0.0.1:{}", free_port());
        let text = config_text_with(
            dir.path(),
            nodes,
            cpus,
            local,
            extra,
            &listen,
            heartbeat_timeout_ms,
        );
        Cluster::launch_text(dir, &text, local)
    }

    fn spawn_serve(dir: &Path, config: &Path) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("serve.log"))
            .unwrap();
        Command::new(binary("controller"))
            .arg("serve")
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    /// A controller on a config of the test's own, written in `dir`.
    pub fn start_text(dir: tempfile::TempDir, text: &str) -> Cluster {
        Cluster::launch_text(dir, text, true)
    }

    /// [`Cluster::start_text`] whose nodes wait for agents started
    /// separately ([`spawn_agent`]).
    pub fn start_text_remote(dir: tempfile::TempDir, text: &str) -> Cluster {
        Cluster::launch_text(dir, text, false)
    }

    fn launch_text(dir: tempfile::TempDir, text: &str, wait_up: bool) -> Cluster {
        let config = dir.path().join("cluster.toml");
        std::fs::write(&config, text).unwrap();
        let serve = Cluster::spawn_serve(dir.path(), &config);
        let c = Cluster { dir, config, serve };
        c.wait_for("the controller to listen", || {
            c.ctl(&["stats"]).status.success()
        });
        if wait_up {
            c.wait_nodes_up();
        }
        c
    }

    /// Kills the controller with SIGKILL: no chance to clean up.
    pub fn kill9(&mut self) {
        self.serve.kill().unwrap();
        self.serve.wait().unwrap();
    }

    /// Starts the controller again on the same configuration and state.
    pub fn restart(&mut self) {
        self.serve = Cluster::spawn_serve(self.dir.path(), &self.config);
        self.wait_for("the controller to listen again", || {
            self.ctl(&["stats"]).status.success()
        });
    }

    pub fn wait_nodes_up(&self) {
        self.wait_for("every node to be up", || {
            json_of(&self.ok(&["nodes", "--format", "json"]))
                .as_array()
                .unwrap()
                .iter()
                .all(|n| n["state"] != "down")
        });
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs a client command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "controller {args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8(out.stdout).unwrap()
    }

    pub fn submit(&self, args: &[&str]) -> Vec<u64> {
        let mut all = vec!["submit"];
        all.extend_from_slice(args);
        self.ok(&all)
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }

    pub fn job(&self, id: u64) -> serde_json::Value {
        let q = json_of(&self.ok(&["queue", "--all", "--format", "json"]));
        q.as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no job {id} in the queue"))
    }

    pub fn state(&self, id: u64) -> String {
        self.job(id)["state"].as_str().unwrap().to_string()
    }

    pub fn wait_state(&self, id: u64, want: &str) {
        self.wait_for(&format!("job {id} to be {want}"), || self.state(id) == want);
    }

    pub fn wait_for(&self, what: &str, mut ok: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ok() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn records(&self) -> Vec<JobRecord<'static>> {
        let path = self.dir.path().join("records/jobs.rec");
        let (recs, stats) = decode_all(&std::fs::read(path).unwrap_or_default());
        assert_eq!(stats.damaged(), 0);
        recs
    }

    pub fn record(&self, id: u64) -> JobRecord<'static> {
        let mut found: Vec<_> = self.records().into_iter().filter(|r| r.id == id).collect();
        assert_eq!(found.len(), 1, "records of job {id}: {found:?}");
        found.remove(0)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    pub fn address(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/address"))
            .unwrap()
            .trim()
            .to_string()
    }

    pub fn pids(&self, id: u64) -> Vec<i32> {
        sigsleep_pids(id, &self.dir.path().join("records/jobs.rec"))
    }

    pub fn secret_path(&self) -> PathBuf {
        self.dir.path().join("state/secret")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.serve.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.serve.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// An agent process for `c`, hosting `nodes` as `host`, its spool and log
/// in the cluster's directory.
pub fn spawn_agent(c: &Cluster, nodes: &str, host: &str) -> Child {
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
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(c.dir.path().join(format!("{host}.log")))
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// A TCP port free on loopback right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn json(out: &Output) -> serde_json::Value {
    json_of(&String::from_utf8_lossy(&out.stdout))
}

/// The ids of a JSON queue (`queue --format json`), in order.
pub fn queue_ids(queue: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = json_of(queue)
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect();
    ids.sort_unstable();
    ids
}

pub fn json_of(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
}

/// Pids of live sigsleep processes of job `id` writing to `log`, from
/// /proc (tests run in parallel, each cluster numbering its jobs from 1).
pub fn sigsleep_pids(id: u64, log: &Path) -> Vec<i32> {
    let want = format!("--id\0{id}\0");
    let log = format!("--log\0{}\0", log.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.contains("sigsleep") && c.contains(&want) && c.contains(&log)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The state letter of a process ('S', 'T', ...), or None if it is gone.
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}
