//! The client commands a user drives a cluster with, against a real
//! controller: a submission waiting past `max_jobs` says why and stops on
//! a signal without leaving anything behind, `cancel` picks jobs by state,
//! partition and name as `scancel` does, and `wait` waits for jobs.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{binary, json_of, queue_ids as ids, Cluster};

/// Regression: `controller submit` waiting at `max_jobs` ignored Ctrl-C
/// and SIGTERM, said nothing, and its waiting request was accepted later
/// anyway.
#[test]
fn a_waiting_submission_says_why_and_stops_on_a_signal() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // No agent: nodes are down and every job stays queued.
        let c = Cluster::start_remote_with("vn[1-2]", 4, "max_jobs = 3");
        let mut child = Command::new(binary("controller"))
            .arg("--config")
            .arg(&c.config)
            .args(["submit", "--cores", "1", "--runtime", "60"])
            .args(["--count", "5", "--batch", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The first batch is accepted (ids 1, 2, printed at once); the
        // second does not fit and waits.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        for _ in 0..2 {
            stdout.read_line(&mut first).unwrap();
        }
        assert_eq!(first, "1\n2\n");
        // Past a second, it says on stderr that it waits, and why.
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        assert!(
            line.contains("waiting") && line.contains("max_jobs is 3"),
            "{line}"
        );
        let held = json_of(&c.ok(&["stats", "--format", "json"]));
        assert_eq!(held["held_requests"], 1, "{held}");

        let at = Instant::now();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert!(
            at.elapsed() < Duration::from_secs(5),
            "took {:?} to stop",
            at.elapsed()
        );
        assert_eq!(status.code(), Some(1), "stopped before all were submitted");
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        assert!(
            rest.contains("interrupted: 2 of 5 jobs submitted"),
            "{rest}"
        );

        // The withdrawn request is never accepted: once room is made, the
        // queue holds only what was acknowledged.
        c.ok(&["cancel", "1", "2"]);
        std::thread::sleep(Duration::from_millis(500));
        let stats = json_of(&c.ok(&["stats", "--format", "json"]));
        assert_eq!(stats["held_requests"], 0, "{stats}");
        assert_eq!(stats["submitted"], 2, "{stats}");
        assert_eq!(
            ids(&c.ok(&["queue", "--format", "json"])),
            Vec::<u64>::new()
        );
    }
}

#[test]
fn cancel_picks_jobs_by_state_partition_and_name() {
    let c = Cluster::start(
        "vn[1-2]",
        2,
        r#"
[[partitions]]
name = "batch"
nodes = "ALL"
default = true

[[partitions]]
name = "debug"
nodes = "vn1"
"#,
    );
    // Running: 1 and 2 (the nodes' four cores); pending: 3 to 6.
    let running = c.submit(&[
        "--cores",
        "2",
        "--runtime",
        "60",
        "--count",
        "2",
        "--name",
        "sim",
    ]);
    c.wait_state(running[1], "running");
    let sim = c.submit(&[
        "--cores",
        "1",
        "--runtime",
        "60",
        "--count",
        "2",
        "--name",
        "sim",
    ]);
    let other = c.submit(&["--cores", "1", "--runtime", "60", "--name", "other"]);
    let debug = c.submit(&["--cores", "1", "--runtime", "60", "--partition", "debug"]);
    let queue = json_of(&c.ok(&["queue", "--format", "json"]));
    assert_eq!(queue[0]["name"], "sim");
    assert!(c.ok(&["queue"]).contains(" sim "), "the table shows names");

    // Pending jobs named sim: 3 and 4, not the running ones.
    let out = c.ok(&["cancel", "--state", "pending", "--name", "sim"]);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["3", "4"], "{out}");
    assert_eq!(sim, [3, 4]);
    // By partition.
    assert_eq!(
        c.ok(&["cancel", "--partition", "debug"]).trim(),
        debug[0].to_string()
    );
    // Ids and a filter: those of them that match.
    let out = c.ok(&[
        "cancel",
        "--state",
        "pending",
        &running[0].to_string(),
        &other[0].to_string(),
    ]);
    assert_eq!(out.trim(), other[0].to_string());
    assert_eq!(c.state(running[0]), "running");
    // A filter that matches nothing says so, and is not an error.
    let none = c.ctl(&["cancel", "--name", "nobody"]);
    assert!(none.status.success());
    assert!(String::from_utf8_lossy(&none.stderr).contains("no job matched"));
    // Every job not yet over.
    let out = c.ok(&["cancel", "--all"]);
    assert_eq!(out.lines().count(), 2, "{out}");
    c.wait_for("every job to be over", || {
        ids(&c.ok(&["queue", "--format", "json"])).is_empty()
    });
    // A filter is required, and a state must be one a job not over has.
    for (args, needle) in [
        (&["cancel"][..], "required"),
        (
            &["cancel", "--state", "completed"],
            "pending, running or suspended",
        ),
    ] {
        let out = c.ctl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{args:?}"
        );
    }
}

#[test]
fn wait_returns_when_the_jobs_are_over_and_says_how_they_ended() {
    let c = Cluster::start("vn1", 4, "");
    let quick = c.submit(&["--cores", "1", "--runtime", "0.5", "--count", "2"]);
    let long = c.submit(&["--cores", "1", "--runtime", "60"]);
    let at = Instant::now();
    c.ok(&["wait", &quick[0].to_string(), &quick[1].to_string()]);
    assert!(at.elapsed() < Duration::from_secs(20));
    for id in &quick {
        assert_eq!(c.state(*id), "completed");
    }
    // Their records, for calcmets; the running job has none yet.
    let out = c.ctl(&["records"]);
    assert!(out.status.success());
    let (recs, stats) = formats::record::decode_all(&out.stdout);
    assert_eq!(stats.damaged(), 0);
    let mut got: Vec<u64> = recs.iter().map(|r| r.id).collect();
    got.sort_unstable();
    assert_eq!(got, quick);
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 of 3 jobs have no record"));
    // Waiting for every job not over: the long one, cancelled meanwhile.
    let mut waiting = Command::new(binary("controller"))
        .arg("--config")
        .arg(&c.config)
        .arg("wait")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "returned with a job running"
    );
    c.ok(&["cancel", &long[0].to_string()]);
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a job did not complete");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("job {} ended cancelled", long[0])),
        "{err}"
    );
}

#[test]
fn submit_after_waits_for_other_jobs_to_be_over() {
    let c = Cluster::start("vn1", 4, "");
    let first = c.submit(&["--cores", "1", "--runtime", "1"]);
    let other = c.submit(&["--cores", "1", "--runtime", "60"]);
    let ids = format!("{},{}", first[0], other[0]);
    let then = c.submit(&["--cores", "1", "--runtime", "0.2", "--after", &ids]);
    // Held while either runs, though cores are free, and the queue says why.
    let job = c.job(then[0]);
    assert_eq!(job["state"], "pending", "{job}");
    assert_eq!(job["reason"], "Dependency", "{job}");
    c.wait_state(first[0], "completed");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.state(then[0]), "pending", "one of the two still runs");
    // However the other ends (afterany), the job goes, as submitted.
    c.ok(&["cancel", &other[0].to_string()]);
    c.ok(&["wait", &then[0].to_string()]);
    let (waited, ended) = (c.record(then[0]), c.record(other[0]));
    assert!(waited.start >= ended.end, "{waited:?} {ended:?}");
    assert!(waited.submit < ended.end, "its submit instant is its own");

    // With a think time, it is submitted that long after the last end.
    let a = c.submit(&["--cores", "1", "--runtime", "0.3"]);
    let b = c.submit(&[
        "--cores",
        "1",
        "--runtime",
        "0.1",
        "--after",
        &a[0].to_string(),
        "--think",
        "0.5",
    ]);
    c.ok(&["wait", &b[0].to_string()]);
    let ended = c.job(a[0])["end"].as_f64().unwrap();
    let gap = c.record(b[0]).submit as f64 / 1e9 - ended;
    // The queue's instants are f64 seconds since the epoch: about 0.2 µs
    // apart at this date, so "0.5 s" may read a hair under.
    assert!(
        (0.5 - 1e-6..0.5 + 0.2).contains(&gap),
        "submitted {gap} s after"
    );

    // Waiting for a job that does not exist is refused, naming it.
    for (args, needle) in [
        (&["--after", "999"][..], "cannot wait for job 999"),
        (&["--think", "1"][..], "--after"),
    ] {
        let out = c.ctl(&[&["submit", "--cores", "1", "--runtime", "1"][..], args].concat());
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn an_array_runs_its_tasks_as_jobs_at_most_its_limit_at_once() {
    let c = Cluster::start("vn[1-2]", 8, "");
    let ids = c.submit(&["--cores", "1", "--runtime", "0.5", "--array", "0-9%3"]);
    assert_eq!(ids.len(), 10);
    // Three run; the seven others show folded, waiting for the limit.
    let table = c.ok(&["queue"]);
    let first = ids[0];
    assert!(
        table.contains(&format!("{first}_[3-9%3]")) && table.contains("JobArrayTaskLimit"),
        "{table}"
    );
    assert!(table.contains(&format!("{first}_0 ")), "{table}");
    let ids_text: Vec<String> = ids.iter().map(u64::to_string).collect();
    let mut args = vec!["wait"];
    args.extend(ids_text.iter().map(String::as_str));
    c.ok(&args);
    // Each task a job with its own record; never more than 3 at once.
    let mut recs: Vec<_> = ids.iter().map(|&id| c.record(id)).collect();
    recs.sort_by_key(|r| r.start);
    let mut most = 0;
    for r in &recs {
        let at_once = recs
            .iter()
            .filter(|o| o.start <= r.start && o.end > r.start)
            .count();
        most = most.max(at_once);
    }
    assert_eq!(most, 3, "{recs:?}");
    // In waves of three, as the twin runs them (0, 0, 0, 1, 1, 1, ...).
    let waves: Vec<i64> = recs
        .iter()
        .map(|r| ((r.start - recs[0].start) as f64 / 0.5e9).round() as i64)
        .collect();
    assert_eq!(waves, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3], "{recs:?}");
    let json = c.job(ids[4]);
    assert_eq!(json["array"]["job"], first);
    assert_eq!(json["array"]["index"], 4);
}
