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

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Result;
use formats::results::Manifest;

/// One side of a comparison: its manifest and the trace jobs it replayed.
pub struct Side {
    pub manifest: Manifest,
    /// The trace jobs of its `jobs.csv`, by trace id; `None` without one.
    pub trace_ids: Option<BTreeSet<i64>>,
}

impl Side {
    pub fn read(dir: &Path) -> Result<Side> {
        let manifest = Manifest::read(dir)?;
        let trace_ids = formats::results::read_jobs(dir)?
            .map(|rows| rows.into_iter().map(|r| r.trace_id).collect());
        Ok(Side {
            manifest,
            trace_ids,
        })
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

/// A file name as the runs name it (`configs/demo.toml` → `demo.toml`).
fn base(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `4515-4714` for a contiguous run of ids, else the first and last with
/// how many there are.
fn ids_text(ids: &BTreeSet<i64>) -> String {
    match (ids.first(), ids.last()) {
        (Some(a), Some(b)) if (b - a + 1) as usize == ids.len() => {
            format!("{} jobs, trace ids {a}-{b}", ids.len())
        }
        (Some(a), Some(b)) => format!("{} jobs, trace ids from {a} to {b}", ids.len()),
        _ => "no job".into(),
    }
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
    differ(
        &mut out,
        "trace",
        base(&ma.trace.path).to_string(),
        base(&mb.trace.path).to_string(),
    );
    if let (Some(x), Some(y)) = (&a.trace_ids, &b.trace_ids) {
        if x != y {
            out.push(format!("slice: {} vs {}", ids_text(x), ids_text(y)));
        }
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
    differ(&mut out, "routes", ma.routes.join(" "), mb.routes.join(" "));
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
        Side {
            manifest: serde_json::from_value(m).unwrap(),
            trace_ids: Some(ids.collect()),
        }
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
