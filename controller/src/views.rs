//! How client commands print the controller's answers: tables for people
//! (node lists folded in nodeset notation), JSON for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use formats::wire::{ClusterStats, JobInfo, NodeInfo};
use serde_json::json;

fn secs(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    let ms = (ns / 1_000_000) % 1000;
    if ms == 0 {
        format!("{s}")
    } else {
        format!("{s}.{ms:03}")
    }
}

/// `queue` as a table, like squeue.
pub fn queue_table(jobs: &[JobInfo], now_ns: i64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>8}  {:<10} {:<10} {:>6} {:>10}  {:<20} REASON",
        "JOBID", "PARTITION", "STATE", "CORES", "ELAPSED", "NODES"
    );
    for j in jobs {
        let elapsed = if j.start_ns == 0 {
            "-".to_string()
        } else {
            let end = if j.end_ns > 0 { j.end_ns } else { now_ns };
            secs((end - j.start_ns).max(0) as u64)
        };
        let _ = writeln!(
            out,
            "{:>8}  {:<10} {:<10} {:>6} {:>10}  {:<20} {}",
            j.id,
            j.partition,
            j.state.as_str(),
            j.cores,
            elapsed,
            if j.nodes.is_empty() { "-" } else { &j.nodes },
            j.reason
        );
    }
    out
}

pub fn queue_json(jobs: &[JobInfo]) -> serde_json::Value {
    serde_json::Value::Array(
        jobs.iter()
            .map(|j| {
                json!({
                    "id": j.id,
                    "state": j.state.as_str(),
                    "partition": j.partition,
                    "cores": j.cores,
                    "nodes": j.nodes,
                    "submit": j.submit_ns as f64 / 1e9,
                    "start": (j.start_ns > 0).then(|| j.start_ns as f64 / 1e9),
                    "end": (j.end_ns > 0).then(|| j.end_ns as f64 / 1e9),
                    "runtime": j.runtime_ns as f64 / 1e9,
                    "walltime": j.walltime_ns as f64 / 1e9,
                    "reason": j.reason,
                    "suspensions": j.suspensions.iter().map(|&(s, r)| {
                        json!([s as f64 / 1e9, (r > 0).then(|| r as f64 / 1e9)])
                    }).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

/// `nodes` as a table, like sinfo: nodes of the same state and size on
/// one line, folded.
pub fn nodes_table(nodes: &[NodeInfo]) -> String {
    let mut groups: BTreeMap<(&str, u32, u64, &str), Vec<&str>> = BTreeMap::new();
    let mut alloc: BTreeMap<(&str, u32, u64, &str), u64> = BTreeMap::new();
    for n in nodes {
        let key = (n.state.as_str(), n.cpus, n.memory_mb, n.reason.as_str());
        groups.entry(key).or_default().push(&n.name);
        *alloc.entry(key).or_default() += u64::from(n.alloc_cpus);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<10} {:>6} {:>5} {:>10} {:>13}  {:<30} REASON",
        "STATE", "NODES", "CPUS", "MEMORY", "CPUS(A/T)", "NODELIST"
    );
    for (key, names) in &groups {
        let (state, cpus, mem, reason) = *key;
        let total = names.len() as u64 * u64::from(cpus);
        let _ = writeln!(
            out,
            "{:<10} {:>6} {:>5} {:>10} {:>13}  {:<30} {}",
            state,
            names.len(),
            cpus,
            format!("{mem}M"),
            format!("{}/{}", alloc[key], total),
            formats::nodeset::fold(names.iter().copied()),
            reason
        );
    }
    out
}

pub fn nodes_json(nodes: &[NodeInfo]) -> serde_json::Value {
    serde_json::Value::Array(
        nodes
            .iter()
            .map(|n| {
                json!({
                    "name": n.name,
                    "state": n.state.as_str(),
                    "cpus": n.cpus,
                    "alloc_cpus": n.alloc_cpus,
                    "memory_mb": n.memory_mb,
                    "alloc_memory_mb": n.alloc_memory_mb,
                    "host": n.host,
                    "reason": n.reason,
                })
            })
            .collect(),
    )
}

pub fn stats_json(s: &ClusterStats) -> serde_json::Value {
    let jobs: serde_json::Map<String, serde_json::Value> = s
        .jobs
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), json!(v)))
        .collect();
    let nodes: serde_json::Map<String, serde_json::Value> = s
        .nodes
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), json!(v)))
        .collect();
    json!({
        "jobs": jobs,
        "nodes": nodes,
        "cores": s.cores,
        "alloc_cores": s.alloc_cores,
        "agents": s.agents,
        "submitted": s.submitted,
        "started": s.started,
        "ended": s.ended,
        "suspensions": s.suspensions,
        "schedule_passes": s.schedule_passes,
        "last_pass_seconds": s.last_pass_ns as f64 / 1e9,
        "refused_decisions": s.refused_decisions,
    })
}

pub fn stats_table(s: &ClusterStats) -> String {
    let mut out = String::new();
    let line = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "{k:<22} {v}");
    };
    let jobs: Vec<String> = s
        .jobs
        .iter()
        .map(|(k, v)| format!("{} {v}", k.as_str()))
        .collect();
    let nodes: Vec<String> = s
        .nodes
        .iter()
        .map(|(k, v)| format!("{} {v}", k.as_str()))
        .collect();
    line(&mut out, "jobs", jobs.join(", "));
    line(&mut out, "nodes", nodes.join(", "));
    line(
        &mut out,
        "cores allocated",
        format!("{} of {}", s.alloc_cores, s.cores),
    );
    line(&mut out, "agents", s.agents.to_string());
    line(&mut out, "submitted", s.submitted.to_string());
    line(&mut out, "started", s.started.to_string());
    line(&mut out, "ended", s.ended.to_string());
    line(&mut out, "suspensions", s.suspensions.to_string());
    line(&mut out, "scheduling passes", s.schedule_passes.to_string());
    line(
        &mut out,
        "last pass",
        format!("{:.3} ms", s.last_pass_ns as f64 / 1e6),
    );
    line(
        &mut out,
        "refused decisions",
        s.refused_decisions.to_string(),
    );
    out
}
