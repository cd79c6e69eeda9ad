//! Replays of a real trace on the embedded demo cluster, through the real
//! binaries: one record per job, metrics that agree with calcmets, run
//! times that scale with the factor, submissions on schedule, and the
//! promised errors on bad traces.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use formats::record::decode_all;
use serde_json::Value;

fn bin(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_BIN_EXE_runworkload"))
        .parent()
        .unwrap()
        .join(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo test --workspace`",
        p.display()
    );
    p
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A real trace: KTH from ../shared/workloads when present, else the slice
/// of it bundled in configs/workloads.
fn kth() -> (PathBuf, u64) {
    for dir in [
        repo().join("../shared/workloads"),
        PathBuf::from("/work/shared/workloads"),
    ] {
        let p = dir.join("KTH-SP2-1996-2.1-cln.swf.gz");
        if p.is_file() {
            return (p, 4514);
        }
    }
    (repo().join("configs/workloads/kth-sp2-200.swf"), 0)
}

fn replay(out: &Path, jobs: u32, extra: &[&str]) -> Output {
    let (trace, skip) = kth();
    Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(&trace)
        .args(["--skip", &skip.to_string(), "--jobs", &jobs.to_string()])
        .args(["--cores-per-proc", "2", "-q"])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (job id, run time in seconds) of every record of a run.
fn run_times(dir: &Path) -> HashMap<u64, f64> {
    let (recs, stats) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
    assert_eq!(stats.damaged(), 0);
    recs.iter()
        .map(|r| (r.id, (r.end - r.start - r.suspended_ns()) as f64 / 1e9))
        .collect()
}

#[test]
fn a_real_slice_replays_with_one_record_per_job_and_calcmets_agrees() {
    let out = tempfile::tempdir().unwrap();
    let o = replay(
        out.path(),
        200,
        &["--shrink", "50", "--speedup", "40000", "--plot"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = out.path().join("shrink-050");
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["status"], "completed");
    assert_eq!(manifest["cores"], 256);
    assert_eq!(manifest["slice"]["read"], 200);
    assert_eq!(manifest["counts"]["completed"], 200);
    // Every submitted job has exactly one record.
    let (recs, _) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
    let mut ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=200).collect::<Vec<_>>());
    // Metrics are sane and match calcmets on the results directory.
    let metrics = json(&dir.join("metrics.json"));
    let u = metrics["utilization"].as_f64().unwrap();
    assert!(u > 0.05 && u <= 1.0, "utilization {u}");
    assert!(metrics["bounded_slowdown"]["p50"].as_f64().unwrap() >= 1.0);
    let c = Command::new(bin("calcmets"))
        .args(["--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let from_calcmets: Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(from_calcmets, metrics);
    // The comparison table is printed.
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("shrink-050") && table.contains("utilization"),
        "{table}"
    );
    // Submissions on time: the schedule is absolute.
    assert!(
        manifest["lateness"]["max"].as_f64().unwrap() < 0.5,
        "{manifest}"
    );
    // --plot drew the run's charts, and the summary says where.
    for chart in [
        "shrink-050-timeline",
        "shrink-050-gantt",
        "cdf-wait",
        "cdf-bsld",
        "bsld-by-size",
    ] {
        let svg = std::fs::read_to_string(out.path().join(format!("plots/{chart}.svg"))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{chart}"
        );
    }
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(log.contains("5 charts in"), "{log}");
}

#[test]
fn run_times_scale_with_the_factor() {
    let out = tempfile::tempdir().unwrap();
    let o = replay(
        out.path(),
        200,
        &["--shrink", "100:50:50", "--speedup", "60000"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let full = run_times(&out.path().join("shrink-100"));
    let half = run_times(&out.path().join("shrink-050"));
    assert_eq!(full.len(), 200);
    assert_eq!(half.len(), 200);
    // Same jobs, same ids (each run numbers them from 1 in trace order);
    // each run time halves, to within the timer's latency.
    for (id, t) in &full {
        let h = half[id];
        assert!(
            (t / 2.0 - h).abs() < 0.05,
            "job {id}: {t} s at 100 %, {h} s at 50 %"
        );
    }
    let m100 = json(&out.path().join("shrink-100/manifest.json"));
    let m50 = json(&out.path().join("shrink-050/manifest.json"));
    let span = |m: &Value| m["end"].as_f64().unwrap() - m["start"].as_f64().unwrap();
    assert!(
        span(&m50) < span(&m100) * 0.75,
        "{} vs {}",
        span(&m50),
        span(&m100)
    );
    // calcmets sets the two runs side by side.
    let c = Command::new(bin("calcmets"))
        .arg(out.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&c.stdout);
    assert!(
        text.lines().next().unwrap().contains("shrink-050"),
        "{text}"
    );
    assert!(
        text.lines().next().unwrap().contains("shrink-100"),
        "{text}"
    );
}

#[test]
fn the_group_schedule_submits_at_the_computed_deadlines() {
    let out = tempfile::tempdir().unwrap();
    let o = replay(
        out.path(),
        30,
        &[
            "--speedup",
            "100000",
            "--schedule",
            "groups",
            "--warmup-jobs",
            "10",
            "--warmup",
            "1",
            "--group",
            "5",
            "--period",
            "0.6",
            "--drift",
            "0.1",
            "--shrink",
            "50",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = out.path().join("shrink-050");
    let manifest = json(&dir.join("manifest.json"));
    let start = manifest["start"].as_f64().unwrap();
    let csv = std::fs::read_to_string(dir.join("jobs.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (target_at, actual_at, submit_at) =
        (col("target_submit"), col("actual_submit"), col("submit_ns"));
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 30);
    for (i, r) in rows.iter().enumerate() {
        let target: f64 = r[target_at].parse().unwrap();
        let actual: f64 = r[actual_at].parse().unwrap();
        // 10 warm-up jobs at once, then groups of 5 at 1 + (0.1 + 0.6 · 50 %)·j.
        let want = if i < 10 {
            0.0
        } else {
            1.0 + 0.4 * ((i - 10) / 5) as f64
        };
        assert!(
            (target - start - want).abs() < 1e-3,
            "job {i}: target {}",
            target - start
        );
        // Sent ahead, to begin at its deadline: submitted then.
        let submitted = r[submit_at].parse::<f64>().unwrap() / 1e9;
        assert!(
            actual < target,
            "job {i} sent {} after its deadline",
            actual - target
        );
        assert!(
            submitted >= target - 1e-6 && submitted - target < 0.25,
            "job {i} late by {}",
            submitted - target
        );
    }
}

#[test]
fn bad_traces_give_the_promised_errors() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("bad.swf");
    std::fs::write(
        &trace,
        "; MaxProcs: 8\n1 0 0 1 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n2 1 0 x 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n3 2 0 1 1\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        Command::new(bin("runworkload"))
            .arg("--config")
            .arg(repo().join("configs/demo.toml"))
            .arg("--workload")
            .arg(&trace)
            .arg("--out")
            .arg(dir.path().join("out"))
            .args(["-q", "--speedup", "100"])
            .args(extra)
            .output()
            .unwrap()
    };
    // Malformed lines: a warning each, naming file and line; the rest runs.
    let o = run(&[]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.swf:3:") && err.contains("bad.swf:4:"),
        "{err}"
    );
    // --strict: an error, exit 2, nothing run.
    let o = run(&["--strict", "--force"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.swf:3:"));
    // A missing trace, an empty slice, a bad factor: one-line errors.
    for (workload, args, needle) in [
        ("/nonexistent.swf", vec![], "/nonexistent.swf"),
        (
            trace.to_str().unwrap(),
            vec!["--skip", "100"],
            "no job in the slice",
        ),
        (
            trace.to_str().unwrap(),
            vec!["--shrink", "100:50"],
            "--shrink",
        ),
    ] {
        let o = Command::new(bin("runworkload"))
            .arg("--config")
            .arg(repo().join("configs/demo.toml"))
            .args(["--workload", workload])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // An existing run is not overwritten without --force.
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));

    // Regressions: no job that fits wrote a run of 0 jobs; a file that is
    // no trace was warned about line by line and replayed as nothing.
    let exe = bin("runworkload");
    for (workload, args, needles) in [
        (
            repo().join("configs/workloads/kth-sp2-200.swf"),
            vec!["--cores-per-proc", "1000"],
            vec![
                "no job of the slice can be replayed",
                "200 need more than the 256 cores",
            ],
        ),
        (
            exe.clone(),
            vec![],
            vec!["not an SWF trace", "20 of the 20 job lines"],
        ),
    ] {
        let o = Command::new(&exe)
            .arg("--config")
            .arg(repo().join("configs/demo.toml"))
            .arg("--workload")
            .arg(&workload)
            .arg("--out")
            .arg(dir.path().join("nothing"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        for n in needles {
            assert!(err.contains(n), "{n:?} in {err}");
        }
        assert!(!dir.path().join("nothing").exists(), "no run written");
    }
}

/// A job the cluster refuses is named as the trace names it, not by its
/// 0-based place in a request.
#[test]
fn a_refused_job_is_named_by_its_trace_job_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("short.toml");
    std::fs::write(
        &config,
        format!(
            "[agents]\nlocal = true\nsigsleep = \"{}\"\n[[nodes]]\nnames = \"vn[1-2]\"\ncpus = 4\n\
             [[partitions]]\nname = \"short\"\nmax_time_s = 60\n",
            bin("sigsleep").display()
        ),
    )
    .unwrap();
    let trace = dir.path().join("t.swf");
    std::fs::write(
        &trace,
        "; MaxProcs: 8\n\
         7 0 0 1 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1\n\
         8 0 0 1 1 -1 -1 1 3600 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(&config)
        .arg("--workload")
        .arg(&trace)
        .arg("--out")
        .arg(dir.path().join("out"))
        .arg("-q")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("refused trace jobs 7 (line 2), 8 (line 3)")
            && err.contains("job 2 of 2: wall time over partition short's limit"),
        "{err}"
    );
    let m: Value = json(&dir.path().join("out/shrink-100/manifest.json"));
    assert_eq!(m["status"], "failed");
    assert!(m["error"].as_str().unwrap().contains("wall time"), "{m}");
}

#[test]
fn ctrl_c_stops_cleanly_and_keeps_what_finished() {
    let out = tempfile::tempdir().unwrap();
    let (trace, skip) = kth();
    let mut child = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(&trace)
        .args(["--skip", &skip.to_string(), "--jobs", "200", "-q"])
        .args(["--speedup", "5000", "--shrink", "100:50:50"])
        .arg("--out")
        .arg(out.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGINT),
        "a run stopped by a signal exits with its code"
    );
    let dir = out.path().join("shrink-100");
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(manifest["status"], "interrupted");
    assert!(
        !out.path().join("shrink-050").exists(),
        "no run after the interrupted one"
    );
    let (recs, stats) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
    assert_eq!(stats.damaged(), 0);
    let completed = manifest["counts"]["completed"].as_u64().unwrap_or(0);
    assert!(completed > 0, "{manifest}");
    assert_eq!(
        recs.iter()
            .filter(|r| r.status == formats::record::Status::Completed)
            .count() as u64,
        completed
    );
    // Nothing left running: every record's job is over, none still pending.
    assert!(manifest["counts"].get("pending").is_none(), "{manifest}");
    assert!(manifest["counts"].get("running").is_none(), "{manifest}");
}

#[test]
fn a_running_cluster_with_a_remote_agent_is_driven_with_controller() {
    // A controller whose nodes are hosted by an agent process of their own,
    // as on another host; runworkload drives it and fetches the records
    // the agent streamed to it.
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("cluster.toml");
    std::fs::write(
        &config,
        format!(
            "[controller]\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\nschedule_interval_s = 0.005\n\
             [agents]\nlocal = false\n\
             [[nodes]]\nnames = \"rn[01-16]\"\ncpus = 16\nmemory = \"32G\"\n",
            state.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
    let mut serve = Command::new(bin("controller"))
        .args(["serve", "--config"])
        .arg(&config)
        .stderr(log)
        .spawn()
        .unwrap();
    let address = state.join("address");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !address.is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let addr = std::fs::read_to_string(&address).unwrap();
    let mut agent = Command::new(bin("agent"))
        .args([
            "--controller",
            &addr,
            "--nodes",
            "rn[01-16]",
            "--cpus",
            "16",
        ])
        .args(["--host", "far"])
        .arg("--record-dir")
        .arg(dir.path().join("spool"))
        .arg("--secret-file")
        .arg(state.join("secret"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    let out = dir.path().join("results");
    let (trace, skip) = kth();
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(&config)
        .args(["--controller", &addr])
        .arg("--workload")
        .arg(&trace)
        .args(["--skip", &skip.to_string(), "--jobs", "40", "-q"])
        .args([
            "--cores-per-proc",
            "2",
            "--shrink",
            "50",
            "--speedup",
            "40000",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let shutdown = Command::new(bin("controller"))
        .arg("--config")
        .arg(&config)
        .arg("shutdown")
        .output()
        .unwrap();
    assert!(shutdown.status.success());
    serve.wait().unwrap();
    agent.wait().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stderr),
        std::fs::read_to_string(dir.path().join("serve.log")).unwrap()
    );
    let run = out.join("shrink-050");
    let manifest = json(&run.join("manifest.json"));
    assert_eq!(manifest["controller"], addr.as_str());
    assert_eq!(manifest["counts"]["completed"], 40, "{manifest}");
    let (recs, stats) = decode_all(&std::fs::read(run.join("records/jobs.rec")).unwrap());
    assert_eq!(stats.damaged(), 0);
    assert_eq!(recs.len(), 40);
    assert!(recs.iter().all(|r| r.node.starts_with("rn")));
    assert_eq!(json(&run.join("metrics.json"))["jobs"], 40);
}

/// Regression: a replay killed with `kill -9`, then run again with the
/// same --out, appended to the dead run's records (279 jobs of a 200-job
/// replay). Now the rerun is refused, `--force` replaces the run whole,
/// and calcmets says what an unfinished run lacks and never counts
/// another run's records.
#[test]
fn a_killed_run_is_never_silently_reused() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("shrink-100");
    let (trace, skip) = kth();
    let start = |extra: &[&str]| {
        let mut c = Command::new(bin("runworkload"));
        c.arg("--config")
            .arg(repo().join("configs/demo.toml"))
            .arg("--workload")
            .arg(&trace)
            .args(["--skip", &skip.to_string(), "--jobs", "200", "-q"])
            .args(["--cores-per-proc", "2"])
            .arg("--out")
            .arg(out.path())
            .args(extra);
        c
    };
    let mut child = start(&["--speedup", "5000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let records = dir.join("records/jobs.rec");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let n = std::fs::read(&records).map_or(0, |b| decode_all(&b).0.len());
        if n >= 10 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no records after 90 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL: no clean-up of any kind
    child.wait().unwrap();
    let stale = std::fs::read(&records).unwrap();
    let (stale_recs, _) = decode_all(&stale);
    assert_eq!(json(&dir.join("manifest.json"))["status"], "running");

    // calcmets reads it, and says what it is and what it lacks.
    let c = Command::new(bin("calcmets"))
        .args(["--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let err = String::from_utf8_lossy(&c.stderr);
    let completed = stale_recs
        .iter()
        .filter(|r| r.status == formats::record::Status::Completed)
        .count();
    assert!(
        err.contains("is unfinished")
            && err.contains(&format!("{completed} of its 200 jobs completed")),
        "{err}"
    );
    let strict = Command::new(bin("calcmets"))
        .arg("--strict")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        strict.status.code(),
        Some(1),
        "an unfinished run is a warning"
    );

    // Without --force: refused, saying what is there and what to do;
    // nothing touched.
    let o = start(&["--speedup", "40000"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds an unfinished run") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&records).unwrap(), stale);

    // With --force: the old run is gone whole, the new one is all there.
    let o = start(&["--speedup", "40000", "--force"]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (recs, _) = decode_all(&std::fs::read(&records).unwrap());
    let mut ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, (1..=200).collect::<Vec<_>>(), "one record per job");
    assert_eq!(json(&dir.join("manifest.json"))["status"], "completed");
    let metrics = json(&dir.join("metrics.json"));

    // Another run's records appended by hand are not counted, and said so.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&records)
        .unwrap();
    std::io::Write::write_all(&mut f, &stale).unwrap();
    drop(f);
    let c = Command::new(bin("calcmets"))
        .args(["--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(c.status.success());
    let v: Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_eq!(v["jobs"], metrics["jobs"]);
    assert_eq!(v["utilization"], metrics["utilization"]);
    assert_eq!(v["skipped"]["not_in_run"], Value::Null);
    assert_eq!(
        v["skipped"]["excluded_by"]["not_in_run"],
        stale_recs.len() as u64
    );
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(err.contains("are not of this run"), "{err}");
}

/// Runs runworkload on `workload` (the demo cluster, the given flags).
fn replay_of(workload: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(workload)
        .args(["--cores-per-proc", "2", "-q", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_batsim_workload_replays_as_the_trace_it_was_made_from() {
    // configs/workloads/kth-sp2-200.json is scripts/swf-to-batsim.py of
    // the SWF slice beside it: replayed in the twin, every job runs where
    // and when the SWF's does. Batsim's time starts at 0, the SWF's at
    // its UnixStartTime.
    let out = tempfile::tempdir().unwrap();
    let w = repo().join("configs/workloads/kth-sp2-200");
    let mut recs = Vec::new();
    for (ext, sub) in [("swf", "s"), ("json", "j")] {
        let o = replay_of(
            &w.with_extension(ext),
            &out.path().join(sub),
            &["--simulate"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let dir = out.path().join(sub).join("shrink-100");
        let (r, _) = decode_all(&std::fs::read(dir.join("records/jobs.rec")).unwrap());
        recs.push((r, json(&dir.join("manifest.json"))));
    }
    let (json_recs, json_manifest) = recs.pop().unwrap();
    let (swf_recs, swf_manifest) = recs.pop().unwrap();
    assert_eq!(json_manifest["trace"]["format"], "batsim");
    assert_eq!(swf_manifest["trace"]["format"], "swf");
    assert_eq!(json_manifest["trace"]["max_procs"], 100);
    assert_eq!(json_recs.len(), 200);
    let epoch = 843_480_031_000_000_000i64;
    let key = |r: &formats::record::JobRecord<'_>, shift: i64| {
        (
            r.id,
            r.cores,
            r.node.to_string(),
            r.submit - shift,
            r.start - shift,
            r.end - shift,
            r.walltime,
        )
    };
    let mut a: Vec<_> = json_recs.iter().map(|r| key(r, 0)).collect();
    let mut b: Vec<_> = swf_recs.iter().map(|r| key(r, epoch)).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);

    // Emulated: real processes, one record each.
    let o = replay_of(
        &w.with_extension("json"),
        &out.path().join("e"),
        &["--jobs", "30", "--speedup", "20000"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = out.path().join("e/shrink-100");
    assert_eq!(json(&dir.join("manifest.json"))["counts"]["completed"], 30);
    assert_eq!(run_times(&dir).len(), 30);
}

#[test]
fn a_run_exports_as_batsim_results_that_agree_with_calcmets() {
    // Real processes: the demo cluster at 40,000× speedup.
    let out = tempfile::tempdir().unwrap();
    let (trace, skip) = kth();
    let o = replay_of(
        &trace,
        out.path(),
        &[
            "--skip",
            &skip.to_string(),
            "--jobs",
            "120",
            "--speedup",
            "40000",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = out.path().join("shrink-100");
    let dest = out.path().join("batsim");
    let e = Command::new(bin("calcmets"))
        .args(["export", "--format", "batsim", "--out"])
        .arg(&dest)
        .arg(&run)
        .output()
        .unwrap();
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let text = std::fs::read_to_string(dest.join("jobs.csv")).unwrap();
    let mut lines = text.lines();
    // Batsim's columns in Batsim's order, clemu's after.
    assert_eq!(
        lines.next().unwrap(),
        "job_id,workload_name,profile,submission_time,requested_number_of_resources,\
         requested_time,success,final_state,starting_time,execution_time,finish_time,\
         waiting_time,turnaround_time,stretch,allocated_resources,consumed_energy,metadata,\
         clemu_job_id,nodes,suspensions,suspended_time"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 120);
    let f = |r: &Vec<&str>, k: usize| r[k].parse::<f64>().unwrap();
    // Each job's resources are as many as its cores, on the 256 of the
    // cluster, and no two jobs hold one at once.
    let mut spans: Vec<(f64, f64, Vec<u32>)> = Vec::new();
    for r in &rows {
        assert_eq!(r[7], "COMPLETED_SUCCESSFULLY");
        let ids = formats::intervals::parse(r[14], 256).unwrap();
        assert_eq!(ids.len(), r[4].parse::<usize>().unwrap(), "{r:?}");
        assert!(ids.iter().all(|&i| i < 256));
        spans.push((f(r, 8), f(r, 10), ids));
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.0 < b.1 && b.0 < a.1 {
                assert!(a.2.iter().all(|x| !b.2.contains(x)), "overlap: {a:?} {b:?}");
            }
        }
    }
    // Batsim's mean waiting time is calcmets' mean wait, both in trace
    // seconds.
    let metrics = json(&run.join("metrics.json"));
    assert_eq!(metrics["clock"], "trace");
    let mean_wait = rows.iter().map(|r| f(r, 11)).sum::<f64>() / rows.len() as f64;
    let calc = metrics["wait"]["mean"].as_f64().unwrap();
    assert!(
        (mean_wait - calc).abs() < 1e-5 * 40_000.0,
        "{mean_wait} against {calc}"
    );
    let schedule = json(&dest.join("schedule.json"));
    assert_eq!(schedule["nb_jobs"], 120);
    assert_eq!(schedule["nb_computing_machines"], 256);
    assert!((schedule["mean_waiting_time"].as_f64().unwrap() - calc).abs() < 1e-6 * 40_000.0);
    // In the run's own seconds: every time ÷ 40,000 (the speedup; factor 1).
    let wall = out.path().join("batsim-wall");
    let e = Command::new(bin("calcmets"))
        .args(["export", "--format", "batsim", "--clock", "wall", "--out"])
        .arg(&wall)
        .arg(&run)
        .output()
        .unwrap();
    assert!(e.status.success(), "{}", String::from_utf8_lossy(&e.stderr));
    let scaled = std::fs::read_to_string(wall.join("jobs.csv")).unwrap();
    for (a, b) in rows.iter().zip(scaled.lines().skip(1)) {
        let b: Vec<&str> = b.split(',').collect();
        for k in [3, 8, 11] {
            let (x, y) = (f(a, k), b[k].parse::<f64>().unwrap());
            assert!(
                (x - y * 40_000.0).abs() <= 1e-6 * 40_000.0 + 1e-9 * x.abs(),
                "{a:?} {b:?}"
            );
        }
    }
    // A directory that is no run is refused by name.
    let bad = Command::new(bin("calcmets"))
        .args(["export", "--format", "batsim", "--out"])
        .arg(&dest)
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a results directory"));
}

#[test]
fn a_scheduler_that_is_not_there_fails_the_run_and_says_where() {
    // configs/batsim.toml pointed at a port nobody listens on.
    let out = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = std::fs::read_to_string(repo().join("configs/batsim.toml"))
        .unwrap()
        .replace(
            "endpoint = \"tcp://127.0.0.1:28000\"",
            &format!("endpoint = \"tcp://127.0.0.1:{port}\"\nreply_timeout_s = 1"),
        );
    let config = out.path().join("batsim.toml");
    std::fs::write(&config, text).unwrap();
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(&config)
        .arg("--workload")
        .arg(repo().join("configs/workloads/kth-sp2-200.swf"))
        .args(["--jobs", "5", "--simulate", "-q", "--out"])
        .arg(out.path().join("r"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to the scheduler at tcp://127.0.0.1:{port}"
        )),
        "{err}"
    );
    let m = json(&out.path().join("r/shrink-100/manifest.json"));
    assert_eq!(m["status"], "failed");
    assert!(
        m["error"].as_str().unwrap().contains("cannot connect"),
        "{m}"
    );
    // Nothing could start: every job was cancelled, none ran.
    assert_eq!(m["counts"]["cancelled"], 5, "{m}");
}
