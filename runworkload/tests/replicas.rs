//! A replay run several times (`--replicas`): each run in a directory of
//! its own, the twin's replicas perturbed by delays an emulated run
//! measured, from a seed; calcmets gives each figure as the replicas' mean
//! with its 95 % interval, and `fidelity` says metric by metric whether
//! two sets of replicas agree within their intervals.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::path::Path;
use std::process::Command;

use common::{bin, json, records, repo};

fn replay(out: &Path, extra: &[&str]) {
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/suspend.toml"))
        .arg("--workload")
        .arg(repo().join("configs/workloads/kth-sp2-200.swf"))
        .args([
            "--cores-per-proc",
            "2",
            "--jobs",
            "60",
            "--speedup",
            "20000",
            "-q",
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn replicas_of_the_emulation_and_of_a_perturbed_twin_compare_by_their_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let (emu, twin) = (dir.path().join("emu"), dir.path().join("twin"));
    replay(&emu, &["--replicas", "2"]);
    for r in ["r01", "r02"] {
        let run = emu.join("shrink-100").join(r);
        let m = json(&run.join("manifest.json"));
        assert_eq!(m["replica"]["of"], 2, "{m:#}");
        // Each emulated run measured its own delays, for the twin.
        let lat = std::fs::read_to_string(run.join("latency.csv")).unwrap();
        assert!(
            lat.lines().filter(|l| l.starts_with("start,")).count() >= 60,
            "{lat}"
        );
        // And its processes' ends reaching the controller (their wake-up
        // at their deadlines in it).
        assert!(
            m["latency"]["end"]["p50_ms"].as_f64().unwrap() > 0.0,
            "{m:#}"
        );
    }
    // The twin alone is deterministic: its replicas need delays to draw.
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/suspend.toml"))
        .arg("--workload")
        .arg(repo().join("configs/workloads/kth-sp2-200.swf"))
        .args(["--simulate", "--replicas", "3", "--out"])
        .arg(dir.path().join("bare"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--latencies"));

    replay(
        &twin,
        &[
            "--simulate",
            "--replicas",
            "3",
            "--seed",
            "5",
            "--latencies",
            emu.to_str().unwrap(),
        ],
    );
    let twin_run = |r: &str| twin.join("shrink-100").join(r);
    let m = json(&twin_run("r02").join("manifest.json"));
    assert_eq!(
        m["replica"]["seed"], 6,
        "replica 2 draws from seed + 1: {m:#}"
    );
    // Perturbed (its ends reported and its arrivals seen later, as the
    // emulation's): the twin's replicas differ from each other.
    let (a, b) = (records(&twin_run("r01")), records(&twin_run("r02")));
    assert_eq!(a.len(), 60);
    assert_ne!(
        a.iter().map(|r| r.start).collect::<Vec<_>>(),
        b.iter().map(|r| r.start).collect::<Vec<_>>()
    );
    // The same seed, the same run.
    let again = dir.path().join("again");
    replay(
        &again,
        &[
            "--simulate",
            "--replicas",
            "3",
            "--seed",
            "5",
            "--latencies",
            emu.to_str().unwrap(),
        ],
    );
    assert_eq!(records(&again.join("shrink-100/r01")), a);

    // calcmets: one column for the set, each figure's mean and interval.
    let o = Command::new(bin("calcmets"))
        .args(["--format", "json"])
        .arg(&twin)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["replicas"], 3, "{v:#}");
    assert_eq!(v["mean"]["jobs"], 60.0, "{v:#}");
    assert!(v["ci95"]["wait"]["mean"].as_f64().unwrap() >= 0.0, "{v:#}");
    let table = Command::new(bin("calcmets")).arg(&twin).output().unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains(" ± "));

    // fidelity: the emulation's replicas against the twin's.
    let o = Command::new(bin("calcmets"))
        .args(["fidelity", "--format", "json"])
        .arg(emu.join("shrink-100"))
        .arg(twin.join("shrink-100"))
        .output()
        .unwrap();
    // Metrics apart are a finding, not an error: said, with exit 0.
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(f["a"]["replicas"], 2, "{f:#}");
    assert_eq!(f["b"]["replicas"], 3, "{f:#}");
    let wait = &f["metrics"]["wait_mean"];
    assert!(wait["agree"].is_boolean(), "{f:#}");
    assert_eq!(wait["b"]["replicas"], 3, "{f:#}");
    assert!(f["all_agree"].is_boolean(), "{f:#}");
    // One replica against three: it has no interval (none given, not
    // "± 0"), and is weighed against where the other side's next
    // replica would lie.
    let o = Command::new(bin("calcmets"))
        .arg("fidelity")
        .arg(emu.join("shrink-100/r01"))
        .arg(twin.join("shrink-100"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("(one run, "), "{text}");
    assert!(text.contains("95 % prediction interval"), "{text}");
    let wait = text.lines().find(|l| l.starts_with("wait_mean")).unwrap();
    assert_eq!(wait.matches('±').count(), 1, "{wait}");
}
