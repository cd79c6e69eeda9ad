//! Whether two runs are the same replay, and what each run is.
//!
//! A comparison is only worth its numbers when its sides ran the same
//! jobs on the same cluster under the same policy, at the same factor and
//! load: then what differs is what the comparison is about (the emulation
//! against its twin, clemu against Slurm). [`differences`] names, one per
//! line, everything else that differs, from the runs' manifests and
//! `jobs.csv`; `calcmets fidelity` refuses runs that have any unless
//! `--force`. [`label`] says what a run is: `emulated`, `twin`, `Slurm`,
//! or a Batsim scheduler, emulated or in the twin.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use formats::results::Manifest;

/// One side of a comparison: its manifest and the trace jobs it replayed.
pub struct Side {
    pub manifest: Manifest,
    /// The trace jobs of its `jobs.csv`, by trace id, each as it was in
    /// trace seconds: what tells the same jobs apart from others of the
    /// same ids (a trace edited under the same name), and the same jobs
    /// read from another file alike. `None` without a `jobs.csv`.
    pub jobs: Option<BTreeMap<i64, Shape>>,
}

/// A replayed job as its trace gave it, in trace seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub cores: u32,
    pub run_s: f64,
    pub limit_s: f64,
    /// Its submission after the slice's first (`None` for a job that
    /// followed another, `--feedback`: its instant is the run's).
    pub submit_s: Option<f64>,
}

impl Shape {
    /// Alike to within what the runs' clocks keep: their Unix seconds
    /// hold about a microsecond, `scale` trace seconds each.
    pub fn alike(&self, o: &Shape, scale: f64) -> bool {
        let near = |x: f64, y: f64| (x - y).abs() <= slack(x.abs().max(y.abs()), scale);
        self.cores == o.cores
            && near(self.run_s, o.run_s)
            && near(self.limit_s, o.limit_s)
            && match (self.submit_s, o.submit_s) {
                (Some(x), Some(y)) => near(x, y),
                _ => true,
            }
    }
}

/// How far apart two instants or durations of about `size` trace
/// seconds may be and still be the same, on runs whose Unix seconds hold
/// about a microsecond, `scale` trace seconds each.
pub fn slack(size: f64, scale: f64) -> f64 {
    0.05 + 1e-6 * scale + 1e-6 * size
}

impl Side {
    pub fn read(dir: &Path) -> Result<Side> {
        let manifest = Manifest::read(dir)?;
        let rows = formats::results::read_jobs(dir)?;
        // Files written before the trace-second columns: from the run's
        // own, through its scale.
        let scale = manifest.trace_per_wall().unwrap_or(1.0);
        let first = rows
            .iter()
            .flatten()
            .filter(|r| r.follows.is_none())
            .map(|r| r.target_submit)
            .reduce(f64::min);
        let jobs = rows.map(|rows| {
            rows.iter()
                .map(|r| {
                    let shape = Shape {
                        cores: r.cores,
                        run_s: r.runtime_trace_s.unwrap_or(r.runtime_wall_s * scale),
                        limit_s: r.walltime_trace_s.unwrap_or(r.walltime_wall_s * scale),
                        submit_s: first
                            .filter(|_| r.follows.is_none())
                            .map(|f| (r.target_submit - f) * scale),
                    };
                    (r.trace_id, shape)
                })
                .collect()
        });
        Ok(Side { manifest, jobs })
    }
}

/// What a run is, in a word or two: what its column or side is called.
pub fn label(m: &Manifest) -> String {
    let twin = m.mode == "simulated";
    match (m.backend.as_str(), m.policy.as_str()) {
        ("slurm", _) => "Slurm".into(),
        (_, "batsim") if twin => "Batsim scheduler, twin".into(),
        (_, "batsim") => "Batsim scheduler, emulated".into(),
        _ if twin => "twin".into(),
        _ => "emulated".into(),
    }
}

/// What the manifests cannot tell about two runs that they otherwise
/// agree on, for standard error: whether an external Batsim scheduler
/// was the same program with the same settings on both sides (the
/// manifest knows only where it listened).
pub fn unknowable(a: &Side, b: &Side) -> Option<String> {
    (a.manifest.policy == "batsim" && b.manifest.policy == "batsim").then(|| {
        "both runs were decided by an external Batsim scheduler; the runs do not say which \
         program it was or how it was set, so they are compared as given: make sure it was \
         the same"
            .to_string()
    })
}

/// A file name as the runs name it (`configs/demo.toml` → `demo.toml`).
fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `4515-4714` for a contiguous run of ids, else the first and last with
/// how many there are.
fn ids_text(ids: &BTreeMap<i64, Shape>) -> String {
    match (ids.keys().next(), ids.keys().next_back()) {
        (Some(a), Some(b)) if (b - a + 1) as usize == ids.len() => {
            format!("{} jobs, trace ids {a}-{b}", ids.len())
        }
        (Some(a), Some(b)) => format!("{} jobs, trace ids from {a} to {b}", ids.len()),
        _ => "no job".into(),
    }
}

/// `trace 12: 4 cores, 600 s run, 1,200 s limit, submitted at 30 s`.
pub fn shape_text(id: i64, s: &Shape) -> String {
    let submit = s
        .submit_s
        .map_or(String::new(), |t| format!(", submitted at +{t:.0} s"));
    format!(
        "trace job {id}: {} cores, {:.0} s run, {:.0} s limit{submit}",
        s.cores, s.run_s, s.limit_s
    )
}

fn percent(f: f64) -> String {
    let p = f * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0} %")
    } else {
        format!("{p} %")
    }
}

/// What differs between `a` and `b` besides what a comparison compares
/// (where the jobs ran: the emulation, the twin, Slurm; and how fast),
/// one phrase each (`factor: 100 % vs 50 %`); empty for the same replay.
pub fn differences(a: &Side, b: &Side) -> Vec<String> {
    let (ma, mb) = (&a.manifest, &b.manifest);
    let mut out = Vec::new();
    fn differ(out: &mut Vec<String>, what: &str, x: String, y: String) {
        if x != y {
            out.push(format!("{what}: {x} vs {y}"));
        }
    }
    match (&a.jobs, &b.jobs) {
        (Some(x), Some(y)) if !x.keys().eq(y.keys()) => {
            out.push(format!("slice: {} vs {}", ids_text(x), ids_text(y)));
        }
        // The same ids: the same jobs if each is what it was, whatever
        // the files were called.
        (Some(x), Some(y)) => {
            let scale = [ma, mb]
                .iter()
                .filter_map(|m| m.trace_per_wall())
                .fold(1.0, f64::max);
            let unlike: Vec<(&i64, &Shape, &Shape)> = x
                .iter()
                .zip(y.values())
                .map(|((id, x), y)| (id, x, y))
                .filter(|(_, x, y)| !x.alike(y, scale))
                .collect();
            if let Some(&(id, x, y)) = unlike.first() {
                let (ta, tb) = (base(&ma.trace.path), base(&mb.trace.path));
                let files = if ta == tb {
                    format!("both read from a trace named {ta}: one was edited")
                } else {
                    format!("trace {ta} vs {tb}")
                };
                out.push(format!(
                    "jobs: {} of the same trace ids are other jobs ({} vs {}); {files}",
                    unlike.len(),
                    shape_text(*id, x),
                    shape_text(*id, y),
                ));
            }
        }
        _ => differ(
            &mut out,
            "trace",
            base(&ma.trace.path).to_string(),
            base(&mb.trace.path).to_string(),
        ),
    }
    let (sa, sb) = (&ma.slice, &mb.slice);
    differ(
        &mut out,
        "cores per trace processor",
        sa.cores_per_proc.to_string(),
        sb.cores_per_proc.to_string(),
    );
    differ(
        &mut out,
        "jobs the trace cancelled (--cancelled)",
        sa.cancelled.clone(),
        sb.cancelled.clone(),
    );
    differ(
        &mut out,
        "jobs the trace saw fail (--failed)",
        sa.failed.clone(),
        sb.failed.clone(),
    );
    differ(
        &mut out,
        "user feedback (--feedback)",
        sa.feedback.to_string(),
        sb.feedback.to_string(),
    );
    differ(&mut out, "factor", percent(ma.factor), percent(mb.factor));
    differ(&mut out, "load", percent(ma.load), percent(mb.load));
    match (&ma.config_sha256, &mb.config_sha256) {
        (Some(x), Some(y)) if x != y => out.push(format!(
            "config: {} vs {} (their files differ)",
            ma.config, mb.config
        )),
        _ => differ(
            &mut out,
            "cluster",
            format!("{} cores on {} nodes", ma.cores.unwrap_or(0), ma.nodes),
            format!("{} cores on {} nodes", mb.cores.unwrap_or(0), mb.nodes),
        ),
    }
    differ(&mut out, "policy", ma.policy.clone(), mb.policy.clone());
    differ(
        &mut out,
        "preemption",
        ma.preemption.clone(),
        mb.preemption.clone(),
    );
    differ(
        &mut out,
        "gang time slice (trace s)",
        ma.time_slice_s.to_string(),
        mb.time_slice_s.to_string(),
    );
    let interval = |m: &Manifest| {
        m.scheduling
            .map_or("-".to_string(), |s| s.interval_s.to_string())
    };
    differ(
        &mut out,
        "scheduling interval (trace s)",
        interval(ma),
        interval(mb),
    );
    differ(
        &mut out,
        "schedule",
        serde_json::to_string(&ma.schedule).unwrap_or_default(),
        serde_json::to_string(&mb.schedule).unwrap_or_default(),
    );
    let routes = |m: &Manifest| match m.routes.join(" ") {
        r if r.is_empty() => "none".to_string(),
        r => r,
    };
    differ(&mut out, "routes", routes(ma), routes(mb));
    let events = |m: &Manifest| {
        m.events.as_ref().map_or("none".to_string(), |e| {
            let file = e.file.as_deref().map(base).unwrap_or("");
            let failures = e.failures.as_deref().unwrap_or("");
            format!("{file}{failures}")
        })
    };
    differ(&mut out, "events", events(ma), events(mb));
    differ(
        &mut out,
        "tau (trace s)",
        ma.tau_in_trace().unwrap_or(10.0).to_string(),
        mb.tau_in_trace().unwrap_or(10.0).to_string(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(m: serde_json::Value, ids: std::ops::RangeInclusive<i64>) -> Side {
        let shapes = ids
            .map(|id| {
                let shape = Shape {
                    cores: 4,
                    run_s: 100.0 * id as f64,
                    limit_s: 0.0,
                    submit_s: Some(10.0 * id as f64),
                };
                (id, shape)
            })
            .collect();
        Side {
            manifest: serde_json::from_value(m).unwrap(),
            jobs: Some(shapes),
        }
    }

    #[test]
    fn jobs_are_told_by_what_they_were_not_by_their_files_name() {
        let m = |path: &str| {
            serde_json::json!({"factor": 1.0, "speedup": 10000.0, "policy": "easy",
                "trace": {"path": path}, "mode": "emulated"})
        };
        // The same jobs from two files: alike.
        let a = side(m("KTH-SP2-1996-2.1-cln.swf.gz"), 1..=200);
        let b = side(m("kth-sp2-200.swf"), 1..=200);
        assert_eq!(differences(&a, &b), Vec::<String>::new());
        // A file of the same name whose run times were doubled: not.
        let mut edited = side(m("KTH-SP2-1996-2.1-cln.swf.gz"), 1..=200);
        for s in edited.jobs.iter_mut().flat_map(|j| j.values_mut()) {
            s.run_s *= 2.0;
        }
        assert_eq!(
            differences(&a, &edited),
            [
                "jobs: 200 of the same trace ids are other jobs (trace job 1: 4 cores, 100 s \
              run, 0 s limit, submitted at +10 s vs trace job 1: 4 cores, 200 s run, 0 s \
              limit, submitted at +10 s); both read from a trace named \
              KTH-SP2-1996-2.1-cln.swf.gz: one was edited"
            ]
        );
    }

    #[test]
    fn the_same_replay_has_no_difference_and_another_slice_is_named() {
        let m = serde_json::json!({"factor": 1.0, "speedup": 10000.0, "policy": "easy",
            "trace": {"path": "configs/workloads/kth-sp2-200.swf"}, "mode": "emulated"});
        let twin = serde_json::json!({"factor": 1.0, "speedup": 1.0, "policy": "easy",
            "trace": {"path": "/abs/kth-sp2-200.swf"}, "mode": "simulated"});
        let (a, b) = (side(m.clone(), 1..=200), side(twin, 1..=200));
        assert_eq!(differences(&a, &b), Vec::<String>::new());
        assert_eq!(
            (label(&a.manifest), label(&b.manifest)),
            ("emulated".into(), "twin".into())
        );
        let other = side(m, 101..=300);
        assert_eq!(
            differences(&a, &other),
            ["slice: 200 jobs, trace ids 1-200 vs 200 jobs, trace ids 101-300"]
        );
    }

    #[test]
    fn factor_policy_and_config_are_named() {
        let a = side(
            serde_json::json!({"factor": 1.0, "policy": "easy", "config": "a.toml",
                "config_sha256": "aa"}),
            1..=3,
        );
        let b = side(
            serde_json::json!({"factor": 0.5, "policy": "fcfs", "config": "b.toml",
                "config_sha256": "bb", "backend": "slurm"}),
            1..=3,
        );
        let d = differences(&a, &b);
        assert_eq!(
            d,
            [
                "factor: 100 % vs 50 %",
                "config: a.toml vs b.toml (their files differ)",
                "policy: easy vs fcfs"
            ]
        );
        assert_eq!(label(&b.manifest), "Slurm");
    }
}
