//! Every real trace at hand parses, with plausible metrics: the KTH slice
//! the repository ships always, and the Parallel Workloads Archive copies
//! in ../shared/workloads where they are (a fresh clone elsewhere has only
//! the slice, so no test here runs on nothing).

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// The trace the repository ships.
fn bundled() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs/workloads/kth-sp2-200.swf");
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

/// Every trace at hand: the shared ones, and the bundled slice.
fn traces() -> Vec<PathBuf> {
    let mut traces = vec![bundled()];
    if let Some(dir) = workloads() {
        let mut shared: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let n = p.to_string_lossy();
                n.ends_with(".swf") || n.ends_with(".swf.gz")
            })
            .collect();
        shared.sort();
        assert!(shared.len() >= 4, "{shared:?}");
        traces.extend(shared);
    }
    traces
}

/// The shared traces: $CLEMU_SHARED/workloads, else ../shared/workloads
/// beside the repository, else /work/shared/workloads; `None` on a machine
/// that has none of them (the tests then check the bundled slice alone).
fn workloads() -> Option<PathBuf> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut candidates = Vec::new();
    if let Some(s) = std::env::var_os("CLEMU_SHARED") {
        candidates.push(PathBuf::from(s).join("workloads"));
    }
    candidates.push(repo.join("../shared/workloads"));
    candidates.push(PathBuf::from("/work/shared/workloads"));
    let found = candidates.into_iter().find(|p| p.is_dir());
    if found.is_none() {
        eprintln!("no shared workloads found (set CLEMU_SHARED): the bundled slice only");
    }
    found
}

#[test]
fn every_trace_gives_plausible_metrics() {
    for t in &traces() {
        let out = Command::new(env!("CARGO_BIN_EXE_calcmets"))
            .args(["--format", "json", "--strict", "--swf"])
            .arg(t)
            .output()
            .unwrap();
        let name = t.display();
        let err = String::from_utf8_lossy(&out.stderr);
        // NASA's trace knows no job's wait: said, and a warning under
        // --strict is exit 1.
        let unknown_waits = err.contains("of its jobs have no wait time (−1 in the trace)");
        assert_eq!(
            unknown_waits,
            name.to_string().contains("NASA"),
            "{name}: {err}"
        );
        assert_eq!(
            out.status.code(),
            Some(if unknown_waits { 1 } else { 0 }),
            "{name}: {err}"
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let jobs = v["jobs"].as_u64().unwrap();
        assert!(jobs > 0, "{name}");
        let u = v["utilization"].as_f64().unwrap();
        assert!(u > 0.0 && u <= 1.0, "{name}: utilization {u}");
        for k in ["wait", "response", "slowdown", "bounded_slowdown"] {
            let s = &v[k];
            let q: Vec<f64> = ["p50", "p95", "p99", "max"]
                .iter()
                .map(|p| s[*p].as_f64().unwrap())
                .collect();
            assert!(q.windows(2).all(|w| w[0] <= w[1]), "{name} {k}: {q:?}");
            assert!(q[0] >= 0.0, "{name} {k}");
            let mean = s["mean"].as_f64().unwrap();
            assert!(mean >= 0.0 && mean <= q[3], "{name} {k}: mean {mean}");
        }
        assert!(
            v["bounded_slowdown"]["p50"].as_f64().unwrap() >= 1.0,
            "{name}"
        );
        assert!(v["slowdown"]["p50"].as_f64().unwrap() >= 1.0, "{name}");
        assert!(v["weighted_slowdown"].as_f64().unwrap() >= 1.0, "{name}");
        assert_eq!(v["suspensions"], 0, "{name}");
    }
}

#[test]
fn known_counts_of_the_traces() {
    // The bundled slice: 126 of its 200 jobs completed, 74 failed.
    let mut known = vec![(bundled(), 126, 100)];
    let dir = workloads();
    // From ../shared/workloads/README.md: status counts per trace.
    for (file, jobs, cores) in [
        // The 40-job sample: 22 completed, 18 failed.
        ("KTH-SP2-1996-2.1-cln.sample40.swf", 22, 100),
        // NASA: every status is -1 (unknown), so all are included but the
        // 173 with run time 0.
        ("NASA-iPSC-1993-3.1-cln.swf.gz", 18_239 - 173, 128),
        // RICC: 431,549 completed, two of which ran for 0 s.
        ("RICC-2010-2.swf.gz", 431_547, 8192),
    ] {
        if let Some(dir) = &dir {
            known.push((dir.join(file), jobs, cores));
        }
    }
    for (file, jobs, cores) in known {
        let file = file.display().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_calcmets"))
            .args(["--format", "json", "--swf"])
            .arg(&file)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["jobs"], jobs, "{file}");
        assert_eq!(v["cores"], cores, "{file}");
    }
}

/// The chunked reader (plain lines read from bit masks, everything else by
/// the general parser) and the line-by-line reader (the general parser
/// alone) see the same jobs, bit for bit, and the same malformed lines.
#[test]
fn both_swf_readers_agree_on_every_trace() {
    use formats::swf::{self, Chunks, Fields, Header};
    for t in traces() {
        let n = t.to_string_lossy().to_string();
        let mut general = Vec::new();
        let mut reader = swf::open(&t).unwrap();
        while let Some(next) = reader.next_job().unwrap() {
            general.push(next.map(|j| (j.line, j.fields.map(f64::to_bits))));
        }
        let mut chunked = Vec::new();
        let mut chunks = Chunks::open(&t).unwrap();
        let mut text = Vec::new();
        let mut first_line = 1;
        while let Some(last) = chunks.next_into(&mut text).unwrap() {
            let mut header = Header::default();
            first_line +=
                swf::parse_chunk(&text, first_line, last, &mut header, Fields::ALL, |r| {
                    chunked.push(r.map(|j| (j.line, j.fields.map(f64::to_bits))))
                });
        }
        assert!(general.len() > 30, "{n}");
        assert_eq!(chunked.len(), general.len(), "{n}");
        for (c, g) in chunked.iter().zip(&general) {
            assert_eq!(c, g, "{n}");
        }
    }
}

/// calcmets and scripts/calcmets_swf.py (the same definitions written the
/// obvious way, the benchmark's baseline) agree on every number of the
/// traces small enough for exact percentiles (up to 65,536 jobs): the
/// bundled slice, and the shared traces where they are.
#[test]
fn calcmets_agrees_with_the_python_reference() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/calcmets_swf.py");
    let mut small = vec![bundled()];
    if let Some(dir) = workloads() {
        for file in [
            "KTH-SP2-1996-2.1-cln.swf.gz",
            "NASA-iPSC-1993-3.1-cln.swf.gz",
            "KTH-SP2-1996-2.1-cln.sample40.swf",
        ] {
            small.push(dir.join(file));
        }
    }
    for trace in small {
        let file = &trace.display().to_string();
        let reference = Command::new("python3")
            .arg(&script)
            .arg(&trace)
            .output()
            .unwrap_or_else(|e| panic!("python3 is needed to run {}: {e}", script.display()));
        assert!(reference.status.success(), "{file}: {reference:?}");
        let reference: Value = serde_json::from_slice(&reference.stdout).unwrap();
        // On every core, and on one (no worker threads: the reading thread
        // parses everything), where taskset is there to ask for it.
        let calcmets = env!("CARGO_BIN_EXE_calcmets");
        let mut runs = vec![Command::new(calcmets)];
        if Command::new("taskset").arg("-V").output().is_ok() {
            let mut one = Command::new("taskset");
            one.args(["-c", "0", calcmets]);
            runs.push(one);
        }
        for mut run in runs {
            let ours = run
                .args(["--format", "json", "--swf"])
                .arg(&trace)
                .output()
                .unwrap();
            assert!(ours.status.success(), "{file}");
            let ours: Value = serde_json::from_slice(&ours.stdout).unwrap();
            assert!(ours["jobs"].as_u64().unwrap() > 20, "{file}");
            compare(file, "", &ours, &reference);
        }
    }
}

/// Equal structure, and equal numbers: to a relative 1e-12, and to 1e-9
/// (calcmets keeps slowdowns in units of 1e-9).
fn compare(file: &str, key: &str, ours: &Value, reference: &Value) {
    match (ours, reference) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(a), keys(b), "{file}: keys of {key}");
            for (k, v) in a {
                compare(file, &format!("{key}.{k}"), v, &b[k]);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{file}: {key}");
            for (x, y) in a.iter().zip(b) {
                compare(file, key, x, y);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 + 1e-12 * b.abs(),
                "{file}: {key}: calcmets {a}, Python {b}"
            );
        }
        _ => assert_eq!(ours, reference, "{file}: {key}"),
    }
}
