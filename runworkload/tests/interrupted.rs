//! A replay stopped by a signal (SIGINT, SIGTERM as `timeout` and batch
//! systems send, SIGHUP) is marked `interrupted`, keeps `jobs.csv` and the
//! metrics of what completed, says so, and exits with the signal's code;
//! emulated (real processes, which are cancelled) or in the twin. Off a
//! terminal it says where it stands every few seconds.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, json, repo};

fn start(args: &[&str], out: &Path) -> Child {
    Command::new(bin("runworkload"))
        .arg("--out")
        .arg(out)
        .args(args)
        .stdout(Stdio::null())
        // A pipe: not a terminal, so progress comes as lines.
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// Waits for `child` (at most a minute) and returns its exit code and what
/// it wrote on standard error.
fn finish(child: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut child = child;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the replay did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// No sigsleep left of the run: every job's process was cancelled.
fn no_process_of(out: &Path) -> bool {
    let needle = out.to_string_lossy().into_owned();
    std::fs::read_dir("/proc").unwrap().flatten().all(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| !String::from_utf8_lossy(&c).contains(&needle))
            .unwrap_or(true)
    })
}

#[test]
fn sigterm_on_an_emulated_replay_keeps_what_completed_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("emulated");
    let config = repo().join("configs/demo.toml");
    let trace = repo().join("configs/workloads/kth-sp2-200.swf");
    // 200 jobs over about 35 s of wall clock at 20,000x: stopped at 7 s.
    let child = start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--workload",
            trace.to_str().unwrap(),
            "--cores-per-proc",
            "2",
            "--speedup",
            "20000",
        ],
        &out,
    );
    std::thread::sleep(Duration::from_secs(7));
    signal(&child, libc::SIGTERM);
    let (code, err) = finish(child);
    assert_eq!(code, Some(128 + libc::SIGTERM), "{err}");
    // Off a terminal, a line every few seconds: which run, where it stands.
    assert!(
        err.contains("runworkload: shrink-100 (factor 100 %, load 100 %): submitted "),
        "{err}"
    );
    assert!(err.contains("elapsed, about "), "{err}");
    assert!(err.contains("SIGTERM stopped shrink-100"), "{err}");
    let run = out.join("shrink-100");
    let m = json(&run.join("manifest.json"));
    assert_eq!(m["status"], "interrupted", "{m:#}");
    let rows = formats::results::read_jobs(&run).unwrap().unwrap();
    assert_eq!(rows.len(), 200);
    let completed = rows.iter().filter(|r| r.state == "completed").count();
    assert!(completed > 0 && completed < 200, "{completed} completed");
    // The jobs the interruption cancelled are told apart from those the
    // trace cancelled: only the trace's are `cancelled`.
    let interrupted = rows.iter().filter(|r| r.state == "interrupted").count();
    assert!(interrupted > 0, "no job was cut short");
    assert!(
        rows.iter()
            .all(|r| r.state != "cancelled" || r.cancel_after_trace_s.is_some()),
        "a job the trace did not cancel is counted as cancelled"
    );
    assert_eq!(m["counts"]["interrupted"], interrupted as u64, "{m:#}");
    // Jobs sent ahead begin at their instant: none is early, not even one
    // cancelled while it waited for it.
    assert!(
        rows.iter().all(|r| r.lateness_wall_ms >= 0.0),
        "{:?}",
        rows.iter().map(|r| r.lateness_wall_ms).fold(0.0, f64::min)
    );
    // At 20,000x the host's start delay is tens of trace seconds, more
    // than τ's 10: said when the run ends, as calcmets says it.
    assert!(
        err.contains("the host's own delays are a visible share of tau"),
        "{err}"
    );
    let metrics = json(&run.join("metrics.json"));
    assert_eq!(metrics["jobs"], completed as u64, "{metrics:#}");
    assert_eq!(metrics["clock"], "trace");
    assert!(no_process_of(&out), "a job's process outlived the replay");
}

#[test]
fn sigint_and_sighup_stop_the_twin_where_it_is() {
    // A twin long enough to be stopped: 300,000 jobs of one core, one a
    // second, on the demo cluster.
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("many.swf");
    let mut text = String::from("; MaxProcs: 256\n");
    for i in 1..=300_000u64 {
        text.push_str(&format!(
            "{i} {i} -1 {} 1 -1 -1 1 -1 -1 1 1 1 -1 1 -1 -1 -1\n",
            100 + i % 900
        ));
    }
    std::fs::write(&trace, text).unwrap();
    let config = repo().join("configs/demo.toml");
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGHUP, "SIGHUP")] {
        let out = dir.path().join(name);
        let child = start(
            &[
                "--config",
                config.to_str().unwrap(),
                "--workload",
                trace.to_str().unwrap(),
                "--simulate",
            ],
            &out,
        );
        // Once it has begun: its manifest says `running`.
        let manifest = out.join("shrink-100/manifest.json");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !manifest.is_file() {
            assert!(Instant::now() < deadline, "the twin never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        signal(&child, sig);
        let (code, err) = finish(child);
        assert_eq!(code, Some(128 + sig), "{name}: {err}");
        assert!(err.contains(&format!("{name} stopped shrink-100")), "{err}");
        let run = out.join("shrink-100");
        let m = json(&run.join("manifest.json"));
        assert_eq!(m["status"], "interrupted", "{name}: {m:#}");
        let rows = formats::results::read_jobs(&run).unwrap().unwrap();
        let completed = rows.iter().filter(|r| r.state == "completed").count();
        assert!(completed < 300_000, "{name}: the twin was not stopped");
        // The trace cancels none: every cancellation is the interruption's.
        assert!(rows.iter().all(|r| r.state != "cancelled"), "{name}");
        assert!(rows.iter().any(|r| r.state == "interrupted"), "{name}");
        // Its Batsim export is not a whole schedule: said.
        let export = Command::new(bin("calcmets"))
            .args(["export", "--format", "batsim", "--out"])
            .arg(dir.path().join(format!("{name}-batsim")))
            .arg(&run)
            .output()
            .unwrap();
        assert!(export.status.success());
        let err = String::from_utf8_lossy(&export.stderr);
        assert!(
            err.contains("was interrupted (by a signal)"),
            "{name}: {err}"
        );
        assert_eq!(json(&run.join("metrics.json"))["jobs"], completed as u64);
    }
}
