//! A primary and its backup, two real `controller serve` processes on
//! loopback, with an agent process running real jobs: the backup holds
//! every job the primary acknowledged, and every record it kept; a backup
//! that stops answering holds the primary back for a bounded time only.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::pair::Pair;
use common::*;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn config_of(dir: &Path, addrs: &[String; 2]) -> String {
    format!(
        r#"
[controller]
listen = "{a}"
hosts = ["{a}", "{b}"]
secret_file = "{dir}/secret"
state_dir = "{dir}/unused"
schedule_interval_s = 0.005

[agents]
local = false
sigsleep = "{sigsleep}"
heartbeat_ms = 200
heartbeat_timeout_ms = 8000

[[agents.host]]
name = "h1"
nodes = "r[1-2]"

[[nodes]]
names = "r[1-2]"
cpus = 2
memory = "4G"
"#,
        a = addrs[0],
        b = addrs[1],
        dir = dir.display(),
        sigsleep = binary("sigsleep").display(),
    )
}

/// The pair, with an agent on `h1`, the backup holding the whole state.
fn start() -> Pair {
    let mut p = Pair::in_temp_dir(config_of);
    let secret = p.dir.join("secret");
    std::fs::write(&secret, "00112233445566778899aabbccddeeff\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    p.serve(0);
    p.serve(1);
    let agent = Command::new(binary("agent"))
        .args([
            "--controller",
            &p.addrs[0],
            "--nodes",
            "r[1-2]",
            "--cpus",
            "2",
        ])
        .arg("--secret-file")
        .arg(p.dir.join("secret"))
        .arg("--record-dir")
        .arg(p.dir.join("spool"))
        .args(["--host", "h1", "--sigsleep"])
        .arg(binary("sigsleep"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(p.log_file("agent"))
        .spawn()
        .unwrap();
    p.agent = Some(agent);
    p.wait_for("the backup to hold the whole state", |p| {
        let s = p.stats(0);
        s["controller"]["backups"][0]["copying"] == false && s["nodes"]["idle"].as_u64() == Some(2)
    });
    p
}

/// Jobs by state, from a controller's stats.
fn by_state(s: &serde_json::Value) -> serde_json::Value {
    s["jobs"].clone()
}

#[test]
fn the_backup_holds_every_job_the_primary_acknowledged_and_every_record() {
    let mut p = start();
    let s = p.stats(1);
    assert_eq!(s["controller"]["role"], "backup", "{s}");
    assert_eq!(s["controller"]["primary"], p.addrs[0].as_str());
    // A backup acts on nothing: a client that asks it is sent on to the
    // primary. 4 cores: 4 short jobs end, 4 long ones run, 4 wait.
    let short = p.ok(
        1,
        &["submit", "--cores", "1", "--runtime", "0.3", "--count", "4"],
    );
    assert_eq!(short.lines().count(), 4);
    p.wait_for("the short jobs to end", |p| {
        p.stats(0)["jobs"]["completed"].as_u64() == Some(4)
    });
    let long = p.ok(
        0,
        &["submit", "--cores", "1", "--runtime", "60", "--count", "8"],
    );
    // Acknowledged means held by the backup: no wait here.
    let backup = p.stats(1);
    let jobs = by_state(&backup);
    assert_eq!(jobs["completed"], 4, "{backup}");
    assert_eq!(
        jobs["running"].as_u64().unwrap() + jobs["pending"].as_u64().unwrap(),
        8,
        "{backup}"
    );
    assert_eq!(by_state(&p.stats(0)), jobs);
    let primary = p.stats(0);
    let b = &primary["controller"]["backups"][0];
    assert_eq!(b["address"], p.addrs[1].as_str(), "{primary}");
    assert_eq!(
        b["acked_seq"], primary["controller"]["journal_seq"],
        "{primary}"
    );
    assert_eq!(
        backup["controller"]["journal_seq"],
        primary["controller"]["journal_seq"]
    );

    // Both die at once. The backup's state directory alone, served as a
    // controller of its own, holds every job and every record.
    p.kill9(0);
    p.kill9(1);
    let alone = p.dir.join("alone.toml");
    let text = std::fs::read_to_string(&p.config).unwrap().replace(
        &format!("hosts = [\"{}\", \"{}\"]", p.addrs[0], p.addrs[1]),
        "",
    );
    std::fs::write(&alone, text).unwrap();
    let mut c = Command::new(binary("controller"))
        .arg("--config")
        .arg(&alone)
        .args(["serve", "--listen", &p.addrs[1], "--state-dir"])
        .arg(p.state_dir(1))
        .stderr(p.log_file("alone"))
        .spawn()
        .unwrap();
    let ask = |args: &[&str]| {
        Command::new(binary("controller"))
            .arg("--config")
            .arg(&alone)
            .args(["--addr", &p.addrs[1]])
            .args(args)
            .output()
            .unwrap()
    };
    p.wait_for("the copy to serve", |_| ask(&["stats"]).status.success());
    let out = ask(&["queue", "--all", "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let ids = queue_ids(&String::from_utf8_lossy(&out.stdout));
    let want: Vec<u64> = short
        .lines()
        .chain(long.lines())
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(ids, want);
    let records = formats::record::decode_all(
        &std::fs::read(p.state_dir(1).join("records/jobs.rec")).unwrap(),
    )
    .0;
    let mut recorded: Vec<u64> = records.iter().map(|r| r.id).collect();
    recorded.sort_unstable();
    assert_eq!(recorded, [1, 2, 3, 4], "one record per short job");
    c.kill().unwrap();
    c.wait().unwrap();
}

#[test]
fn a_stalled_backup_holds_answers_back_until_it_is_let_go() {
    let p = start();
    // Stopped, it confirms nothing: the primary's answer waits for it.
    p.signal(1, libc::SIGSTOP);
    let config = p.config.clone();
    let addr = p.addrs[0].clone();
    let submit = std::thread::spawn(move || {
        let began = Instant::now();
        let out = Command::new(binary("controller"))
            .arg("--config")
            .arg(&config)
            .args([
                "--addr",
                &addr,
                "submit",
                "--cores",
                "1",
                "--runtime",
                "0.1",
            ])
            .output()
            .unwrap();
        (out, began.elapsed())
    });
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        !submit.is_finished(),
        "answered before the backup held the job"
    );
    p.signal(1, libc::SIGCONT);
    let (out, took) = submit.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(3), "{took:?}");

    // Stopped for longer than the backup timeout (3 s), it is let go: the
    // primary answers, alone.
    p.signal(1, libc::SIGSTOP);
    let began = Instant::now();
    p.ok(0, &["submit", "--cores", "1", "--runtime", "0.1"]);
    let took = began.elapsed();
    assert!(took >= Duration::from_secs(2), "{took:?}");
    let s = p.stats(0);
    assert_eq!(s["controller"]["backups"], serde_json::json!([]), "{s}");
    p.ok(0, &["submit", "--cores", "1", "--runtime", "0.1"]);
    // Back, it fetches the whole state again.
    p.signal(1, libc::SIGCONT);
    p.wait_for("the backup to be back", |p| {
        p.stats(0)["controller"]["backups"][0]["copying"] == false
    });
    let primary = p.stats(0);
    p.wait_for("the backup to hold the 3 jobs", |p| {
        let s = p.stats(1);
        s["controller"]["journal_seq"] == primary["controller"]["journal_seq"]
            || by_state(&s) == by_state(&p.stats(0))
    });
    assert_eq!(by_state(&p.stats(1)), by_state(&p.stats(0)));

    // Stopping the cluster stops the backup too, rather than let it take
    // over.
    p.ok(0, &["shutdown"]);
    let mut p = p;
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.serve[1].as_mut().unwrap().try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the backup did not stop\n{}",
            p.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_host_the_config_does_not_list_is_refused_with_what_to_do() {
    // It could never witness a takeover: agents that take the machine's
    // name rather than the config's would leave every controller short
    // of a majority, silently.
    let p = start();
    let out = Command::new(binary("agent"))
        .args(["--controller", &format!("{},{}", p.addrs[0], p.addrs[1])])
        .args(["--nodes", "r[1-2]", "--cpus", "2", "--host", "stranger"])
        .arg("--secret-file")
        .arg(p.dir.join("secret"))
        .arg("--record-dir")
        .arg(p.dir.join("spool-stranger"))
        .arg("--sigsleep")
        .arg(binary("sigsleep"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("\"stranger\" is none of the config's [[agents.host]] (h1)")
            && err.contains("--host NAME"),
        "{err}"
    );
    // The agent of h1 serves on.
    assert_eq!(p.stats(0)["nodes"]["idle"].as_u64(), Some(2));
}
