//! Numbers that compare: a trace beside its replay counts the same jobs in
//! the same unit, a comparison of runs that are not the same replay is
//! refused with what differs, and the messages that misled say what is
//! so. The twin runs the replays: these are about what is counted and
//! said, not about timing.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{bin, repo};
use serde_json::Value;

fn kth() -> PathBuf {
    repo().join("configs/workloads/kth-sp2-200.swf")
}

/// The twin of the KTH slice on the demo cluster at `speedup` into `out`.
fn twin(out: &Path, speedup: &str, extra: &[&str]) -> Output {
    twin_of(&kth(), out, speedup, extra)
}

/// The twin of `trace` on the demo cluster at `speedup` into `out`.
fn twin_of(trace: &Path, out: &Path, speedup: &str, extra: &[&str]) -> Output {
    Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(trace)
        .args([
            "--cores-per-proc",
            "2",
            "--simulate",
            "-q",
            "--speedup",
            speedup,
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn ok(o: Output) -> Output {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

fn calcmets(args: &[&str]) -> Output {
    Command::new(bin("calcmets")).args(args).output().unwrap()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn a_trace_beside_its_replay_counts_the_same_jobs_in_the_same_unit() {
    let dir = tempfile::tempdir().unwrap();
    let trace = kth();
    for (failed, jobs) in [("run", 200), ("skip", 126)] {
        let out = dir.path().join(failed);
        ok(twin(&out, "10000", &["--failed", failed]));
        let run = out.join("shrink-100");
        let o = ok(calcmets(&[
            "--format",
            "json",
            "--swf",
            trace.to_str().unwrap(),
            run.to_str().unwrap(),
        ]));
        let v = json_of(&o);
        let (replay, original) = (&v[0], &v[1]);
        assert_eq!(replay["clock"], "trace", "{v:#}");
        assert_eq!(original["clock"], "trace", "{v:#}");
        // The same jobs: the 74 the trace saw fail count on both sides
        // when the run ran them, on neither when it left them out.
        assert_eq!(replay["jobs"], jobs, "--failed {failed}: {v:#}");
        assert_eq!(original["jobs"], jobs, "--failed {failed}: {v:#}");
        // The same cluster for utilization, and the same origin of time:
        // the run's first submission is the slice's first submit time.
        assert_eq!(original["cores"], replay["cores"]);
        let start = |x: &Value| x["window"][0].as_f64().unwrap();
        assert!((start(replay) - start(original)).abs() < 1e-3, "{v:#}");
        // The replay's waits are in the trace's seconds (at least
        // hundreds), not the hundredths of a second the replay took.
        assert!(replay["wait"]["mean"].as_f64().unwrap() > 100.0, "{v:#}");
        let note = String::from_utf8_lossy(&o.stderr);
        assert!(note.contains("counted as the run replayed it"), "{note}");
    }
    // Without the run, the trace counts what it says completed.
    let v = json_of(&ok(calcmets(&[
        "--format",
        "json",
        "--swf",
        trace.to_str().unwrap(),
    ])));
    assert_eq!(v["jobs"], 126);
}

#[test]
fn fidelity_refuses_runs_that_are_not_the_same_replay_and_names_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("c"),
    );
    ok(twin(&a, "10000", &["--jobs", "60"]));
    ok(twin(&b, "10000", &["--jobs", "60", "--skip", "20"]));
    ok(twin(&c, "10000", &["--jobs", "60", "--shrink", "50"]));
    let run = |p: &Path, f: &str| p.join(f).to_str().unwrap().to_string();
    let o = calcmets(&["fidelity", &run(&a, "shrink-100"), &run(&b, "shrink-100")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not the same replay"), "{err}");
    assert!(
        err.contains("slice: 60 jobs, trace ids 4515-4574 vs 60 jobs, trace ids 4535-4594"),
        "{err}"
    );
    let o = calcmets(&["fidelity", &run(&a, "shrink-100"), &run(&c, "shrink-050")]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("factor: 100 % vs 50 %"), "{err}");
    // Forced, it compares and says what differs (exit 1: not the same
    // jobs); two twins are told apart by their directories.
    let o = calcmets(&[
        "fidelity",
        "--force",
        "--format",
        "json",
        &run(&a, "shrink-100"),
        &run(&b, "shrink-100"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v = json_of(&o);
    assert_eq!(v["unlike"].as_array().unwrap().len(), 1, "{v:#}");
    assert!(
        v["a"]["label"].as_str().unwrap().starts_with("twin ("),
        "{v:#}"
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
}

#[test]
fn messages_that_misled_say_what_is_so() {
    let dir = tempfile::tempdir().unwrap();

    // `--jobs 0` replayed "1 job lines in the trace".
    let o = twin(&dir.path().join("none"), "10000", &["--jobs", "0"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--jobs 0 would replay nothing"), "{err}");

    // A twin's results reused: its start is the trace's own (1996), not
    // when it ran: "started 11,000 days ago" was said.
    let out = dir.path().join("twin");
    let first = ok(twin(&out, "10000", &["--jobs", "20"]));
    // A cluster larger than the trace's machine: said, with the load
    // its jobs offer there (KTH: 100 processors, at 2 cores each, on the
    // demo's 256 cores).
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(
        err.contains("had 100 processors (200 cores at 2 per processor), the cluster 256 cores: its jobs offer 78 %"),
        "{err}"
    );
    // A directory of runs given where a run is wanted: its runs named.
    let o = calcmets(&["fidelity", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not a results directory but a directory of runs: give one of them")
            && err.contains("shrink-100"),
        "{err}"
    );
    // --by events of a run that had none: said, not an empty column.
    let run = out.join("shrink-100");
    let o = calcmets(&["--by", "events", run.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the run had no events"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Beside its trace, the note on statuses counted as completed names
    // only those the slice has (KTH's slice: failed jobs, no cancelled).
    let ran = dir.path().join("ran");
    ok(twin(&ran, "10000", &["--jobs", "20", "--cancelled", "run"]));
    let o = ok(calcmets(&[
        "--swf",
        kth().to_str().unwrap(),
        ran.join("shrink-100").to_str().unwrap(),
    ]));
    let note = String::from_utf8_lossy(&o.stderr);
    assert!(
        note.contains("its failed (status 0) jobs count as completed"),
        "{note}"
    );
    assert!(!note.contains("cancelled (status 5)"), "{note}");
    let o = twin(&out, "10000", &["--jobs", "20"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("written ") && err.contains(" s ago"), "{err}");
    assert!(!err.contains("days ago"), "{err}");

    // Random bytes without --cores: "not a record file", not a request
    // for the core count; an empty directory with --cores: an error, not
    // a table of dashes.
    let junk = dir.path().join("junk.rec");
    std::fs::write(
        &junk,
        (0..4096u32).map(|i| (i * 7 + 3) as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    let o = calcmets(&[junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not a record file"), "{err}");
    assert!(!err.contains("--cores"), "{err}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = calcmets(&["--cores", "8", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no record files"), "{err}");
    assert!(o.stdout.is_empty());

    // A trace whose first half is malformed: runworkload refused it and
    // calcmets --swf computed on it. Both refuse it now, alike.
    let text = std::fs::read_to_string(kth()).unwrap();
    let mut n = 0;
    let half: String = text
        .lines()
        .map(|l| {
            if l.starts_with(';') {
                return format!("{l}\n");
            }
            n += 1;
            if n <= 100 {
                format!("garbage {n}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let bad = dir.path().join("half.swf");
    std::fs::write(&bad, half).unwrap();
    let o = calcmets(&["--swf", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let from_calcmets = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(
        from_calcmets.contains("not an SWF trace"),
        "{from_calcmets}"
    );
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--workload")
        .arg(&bad)
        .args(["--simulate", "--out"])
        .arg(dir.path().join("half"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let from_runworkload = String::from_utf8_lossy(&o.stderr);
    assert!(
        from_runworkload.contains("not an SWF trace"),
        "{from_runworkload}"
    );

    // A client with no controller: what to start, not only "Connection
    // refused".
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef\n").unwrap();
    let mut perms = std::fs::metadata(&secret).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(&secret, perms).unwrap();
    let o = Command::new(bin("controller"))
        .arg("--config")
        .arg(repo().join("configs/demo.toml"))
        .arg("--addr")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--secret-file")
        .arg(&secret)
        .arg("queue")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no controller listens"), "{err}");
    assert!(err.contains("controller serve"), "{err}");
}

#[test]
fn the_twin_gives_the_same_numbers_in_trace_seconds_at_any_speed_up() {
    // The scheduling interval is in trace seconds: the twin of a slice at
    // 1x and at 20,000x schedules alike (it once passed every wall-clock
    // millisecond: 20 trace seconds at 20,000x, a millisecond at 1x).
    let dir = tempfile::tempdir().unwrap();
    let (slow, fast) = (dir.path().join("slow"), dir.path().join("fast"));
    ok(twin(&slow, "1", &[]));
    ok(twin(&fast, "20000", &[]));
    let o = ok(calcmets(&[
        "fidelity",
        "--format",
        "json",
        slow.join("shrink-100").to_str().unwrap(),
        fast.join("shrink-100").to_str().unwrap(),
    ]));
    let v = json_of(&o);
    assert_eq!(v["unlike"].as_array().unwrap().len(), 0, "{v:#}");
    for m in [
        "makespan",
        "utilization",
        "wait_mean",
        "bounded_slowdown_mean",
    ] {
        let rel = v["metrics"][m]["rel"].as_f64().unwrap().abs();
        assert!(rel < 1e-6, "{m}: {rel}: {v:#}");
    }
    // And the manifest says when the scheduler passed, in both clocks.
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(fast.join("shrink-100/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(m["scheduling"]["interval_s"], 0.0, "{m:#}");
    assert_eq!(m["scheduling"]["floor_wall_s"], 0.0, "{m:#}");
}

#[test]
fn a_load_sweep_compresses_arrivals_and_keeps_run_times() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load");
    ok(twin(
        &out,
        "10000",
        &["--load", "100:200:100", "--jobs", "80"],
    ));
    let rows = |run: &str| {
        formats::results::read_jobs(&out.join(run))
            .unwrap()
            .unwrap()
    };
    let (base, double) = (rows("load-100"), rows("load-200"));
    assert_eq!(base.len(), double.len());
    let first = |r: &[formats::results::JobRow]| r[0].target_submit;
    for (a, b) in base.iter().zip(&double) {
        assert_eq!(a.trace_id, b.trace_id);
        // Run times as they were; gaps between arrivals halved.
        assert_eq!(a.runtime_wall_s, b.runtime_wall_s);
        let (ga, gb) = (
            a.target_submit - first(&base),
            b.target_submit - first(&double),
        );
        assert!((ga / 2.0 - gb).abs() < 1e-6, "{ga} {gb}");
    }
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("load-200/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["load"], 2.0);
    // Twice the work in the same time: the cluster is busier.
    let v = json_of(&ok(calcmets(&["--format", "json", out.to_str().unwrap()])));
    let util = |i: usize| v[i]["utilization"].as_f64().unwrap();
    assert!(util(1) > util(0) * 1.3, "{v:#}");
    // Its waits are not the trace's: refused beside it.
    let o = calcmets(&[
        "--swf",
        kth().to_str().unwrap(),
        out.join("load-200").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("load 200 %"));
    // And the charts draw a line by load.
    let plots = dir.path().join("plots");
    ok(calcmets(&[
        "plot",
        "--out",
        plots.to_str().unwrap(),
        out.to_str().unwrap(),
    ]));
    let svg = std::fs::read_to_string(plots.join("bsld-by-load.svg")).unwrap();
    assert!(svg.contains("Mean bounded slowdown by load"));
}

#[test]
fn a_runs_records_copied_twice_count_once_and_the_same_jobs_from_another_file_are_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("a/shrink-100");
    ok(twin(&tmp.path().join("a"), "10000", &[]));
    let before = json_of(&ok(calcmets(&["--format", "json", run.to_str().unwrap()])));
    // The log appended to itself.
    let log = run.join("records/jobs.rec");
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, [bytes.clone(), bytes].concat()).unwrap();
    let o = ok(calcmets(&["--format", "json", run.to_str().unwrap()]));
    let after = json_of(&o);
    assert_eq!(after["jobs"], before["jobs"]);
    assert_eq!(after["utilization"], before["utilization"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("repeat another of the same job and start"),
        "{err}"
    );
    // The same jobs under another file name are the same replay; jobs
    // under the same name with other run times are not.
    let copy = tmp.path().join("copy.swf");
    std::fs::copy(kth(), &copy).unwrap();
    let edited = tmp.path().join("edited/kth-sp2-200.swf");
    std::fs::create_dir_all(edited.parent().unwrap()).unwrap();
    let text = std::fs::read_to_string(kth()).unwrap();
    let doubled: String = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if l.starts_with(';') || f.len() < 4 {
                return format!("{l}\n");
            }
            let run: i64 = f[3].parse().unwrap();
            let mut f: Vec<String> = f.iter().map(|s| s.to_string()).collect();
            f[3] = (run * 2).max(-1).to_string();
            f.join(" ") + "\n"
        })
        .collect();
    std::fs::write(&edited, doubled).unwrap();
    let other = |name: &str, trace: &Path| {
        ok(twin_of(trace, &tmp.path().join(name), "10000", &[]));
        tmp.path().join(name).join("shrink-100")
    };
    let (copied, changed) = (other("copied", &copy), other("changed", &edited));
    let fid = |b: &Path| calcmets(&["fidelity", run.to_str().unwrap(), b.to_str().unwrap()]);
    let same = fid(&copied);
    assert!(
        same.status.success(),
        "{}",
        String::from_utf8_lossy(&same.stderr)
    );
    let refused = fid(&changed);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("of the same trace ids are other jobs"),
        "{err}"
    );
}

/// The KTH slice with `edit` made to each job line's fields, at `path`.
fn kth_edited(path: &Path, edit: impl Fn(&mut [String])) {
    let text = std::fs::read_to_string(kth()).unwrap();
    let edited: String = text
        .lines()
        .map(|l| {
            if l.starts_with(';') || l.split_whitespace().count() < 18 {
                return format!("{l}\n");
            }
            let mut f: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            edit(&mut f);
            f.join(" ") + "\n"
        })
        .collect();
    std::fs::write(path, edited).unwrap();
}

#[test]
fn a_trace_set_beside_a_replay_of_other_jobs_of_the_same_ids_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    // Every way of treating the jobs the trace cancelled: each job is
    // checked as that run made it of its line.
    let runs: Vec<PathBuf> = ["run", "replay", "skip"]
        .iter()
        .map(|c| {
            let out = tmp.path().join(c);
            ok(twin(&out, "10000", &["--cancelled", c]));
            out.join("shrink-100")
        })
        .collect();
    let beside = |trace: &Path, run: &Path| {
        calcmets(&["--swf", trace.to_str().unwrap(), run.to_str().unwrap()])
    };
    for run in &runs {
        ok(beside(&kth(), run));
    }
    let refused = |trace: &Path, why: &str| {
        let o = beside(trace, &runs[0]);
        assert_eq!(o.status.code(), Some(2), "{why}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("it is not the trace the run replayed"),
            "{why}: {err}"
        );
        err.to_string()
    };
    // One job's processors, another's limit: other jobs of the same ids.
    let procs = tmp.path().join("procs.swf");
    kth_edited(&procs, |f| {
        if f[0] == "4600" {
            f[4] = "7".into();
            f[7] = "7".into();
        }
    });
    let err = refused(&procs, "processors");
    assert!(
        err.contains("1 of the 200 jobs the run replayed are other jobs in it")
            && err.contains("trace job 4600: 14 cores"),
        "{err}"
    );
    let limit = tmp.path().join("limit.swf");
    kth_edited(&limit, |f| {
        if f[0] == "4515" || f[0] == "4516" {
            f[8] = "999999".into();
        }
    });
    let err = refused(&limit, "limits");
    assert!(err.contains("2 of the 200 jobs"), "{err}");
    // Every job but the first an hour later: the same jobs, otherwise
    // spaced.
    let later = tmp.path().join("later.swf");
    kth_edited(&later, |f| {
        if f[0] != "4515" {
            let s: i64 = f[1].parse().unwrap();
            f[1] = (s + 3600).to_string();
        }
    });
    let err = refused(&later, "arrivals");
    assert!(err.contains("further apart or closer together"), "{err}");
    // The whole trace an hour later is the same jobs, spaced alike.
    let shifted = tmp.path().join("shifted.swf");
    kth_edited(&shifted, |f| {
        let s: i64 = f[1].parse().unwrap();
        f[1] = (s + 3600).to_string();
    });
    ok(beside(&shifted, &runs[0]));
}

#[test]
fn jobs_the_trace_gives_no_run_time_count_alike_emulated_and_in_the_twin() {
    let tmp = tempfile::tempdir().unwrap();
    // Three jobs of the slice ran 0 s: a process takes a moment all the
    // same, which the emulated run's records show.
    let zeroed = tmp.path().join("zeroed.swf");
    kth_edited(&zeroed, |f| {
        if ["4516", "4520", "4525"].contains(&f[0].as_str()) {
            f[3] = "0".into();
        }
    });
    let args = |out: &Path| {
        vec![
            "--config".to_string(),
            repo().join("configs/demo.toml").display().to_string(),
            "--workload".into(),
            zeroed.display().to_string(),
            "--cores-per-proc".into(),
            "2".into(),
            "--jobs".into(),
            "30".into(),
            "--speedup".into(),
            "10000".into(),
            "-q".into(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let (emu, twin) = (tmp.path().join("emu"), tmp.path().join("twin"));
    ok(Command::new(bin("runworkload"))
        .args(args(&emu))
        .output()
        .unwrap());
    ok(Command::new(bin("runworkload"))
        .args(args(&twin))
        .arg("--simulate")
        .output()
        .unwrap());
    let (emu, twin) = (emu.join("shrink-100"), twin.join("shrink-100"));
    for run in [&emu, &twin] {
        let v = json_of(&ok(calcmets(&["--format", "json", run.to_str().unwrap()])));
        assert_eq!(v["skipped"]["excluded_by"]["no_run_time"], 3, "{v:#}");
    }
    let o = calcmets(&[
        "fidelity",
        "--format",
        "json",
        emu.to_str().unwrap(),
        twin.to_str().unwrap(),
    ]);
    let v = json_of(&o);
    assert_eq!(
        v["metrics"]["jobs"]["a"], v["metrics"]["jobs"]["b"],
        "{v:#}"
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("count different jobs"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_trace_out_of_submit_order_is_said_and_each_job_keeps_its_time() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("unordered.swf");
    // Job 3 was submitted before job 2, whose line comes first.
    std::fs::write(
        &trace,
        "; MaxProcs: 8\n\
         1   0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 100 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n\
         3  50 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n\
         4 200 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = ok(twin_of(&trace, &out, "100", &[]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "unordered.swf:4: submitted at 50 s, before line 3 (100 s): 1 job line(s) of the \
             slice are out of submit order"
        ),
        "{err}"
    );
    // Each job still starts at its own submit time: nothing waits.
    let v = json_of(&ok(calcmets(&[
        "--format",
        "json",
        out.join("shrink-100").to_str().unwrap(),
    ])));
    assert_eq!(v["jobs"], 4, "{v:#}");
    assert_eq!(v["wait"]["max"], 0.0, "{v:#}");
    // A trace in order says nothing of the kind.
    let o = ok(twin(&dir.path().join("kth"), "10000", &[]));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("submit order"));
}

/// A twin whose schedule hangs on the order of events at one instant says
/// so, in its manifest and beside any comparison with it: here job 1 ends
/// at trace second 10 as job 3 arrives. The twin takes the end first, and
/// job 2 (the whole cluster) starts then; with every delay 1 ns, job 3's
/// arrival comes first and is backfilled on the one free node, and job 2
/// waits 100 s more. No emulated run keeps the twin's order.
#[test]
fn a_twin_that_hangs_on_a_tie_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tie.swf");
    std::fs::write(
        &trace,
        "; job 1 ends as job 3 arrives\n\
         1 0 0 10 120 -1 -1 120 1000 -1 1 1 1 -1 1 -1 -1 -1\n\
         2 5 0 10 128 -1 -1 128 100 -1 1 1 1 -1 1 -1 -1 -1\n\
         3 10 0 100 8 -1 -1 8 100 -1 1 1 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let out = dir.path().join("tie");
    let o = ok(twin_of(&trace, &out, "1", &[]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("hangs on the order of events at one instant"),
        "{err}"
    );
    let run = out.join("shrink-100");
    let m = common::json(&run.join("manifest.json"));
    // Waits 0, 5 and 10 s in the twin; 0, 105 and 0 nudged.
    let moved = m["ties"]["wait_mean"].as_f64().unwrap();
    assert!((moved - 6.0).abs() < 1e-6, "{m:#}");
    let o = calcmets(&["fidelity", run.to_str().unwrap(), run.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("b is a twin whose schedule hangs on the order of events"),
        "{err}"
    );
    // And the figures against it 1 ns later: a mean wait of 5 against 35.
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("with b as it runs 1 ns later (its ties): wait_mean -85.71 %"),
        "{text}"
    );
    let o = calcmets(&[
        "fidelity",
        "--format",
        "json",
        run.to_str().unwrap(),
        run.to_str().unwrap(),
    ]);
    let v = json_of(&o);
    let later = v["ties"]["against_later"]["b"]["wait_mean"]
        .as_f64()
        .unwrap();
    assert!((later - (5.0 / 35.0 - 1.0)).abs() < 1e-9, "{v:#}");
    // The bundled slice does not hang on ties: nothing said.
    let o = ok(twin(&dir.path().join("kth"), "10000", &[]));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hangs on the order"));
    let m = common::json(&dir.path().join("kth/shrink-100/manifest.json"));
    assert!(
        m["ties"]["wait_mean"].as_f64().unwrap().abs() < 0.005,
        "{m:#}"
    );
}
