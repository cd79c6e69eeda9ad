//! How client commands print the controller's answers: tables for people
//! (node lists folded in nodeset notation), JSON for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use formats::wire::{ClusterStats, HostInfo, JobInfo, NodeInfo, PASS_BUCKETS};
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

/// A job's id as squeue shows it: `ARRAY_INDEX` for a task of an array.
fn job_id(j: &JobInfo) -> String {
    match j.array {
        Some(t) => format!("{}_{}", t.job, t.index),
        None => j.id.to_string(),
    }
}

/// Indices as Slurm folds them: `3,5-9`.
fn fold_indices(ids: &[u32]) -> String {
    formats::intervals::format(ids).replace(' ', ",")
}

/// `queue` as a table, like squeue. The tasks of an array that wait for
/// its limit show on one line, folded: `12_[5-99%10]`.
pub fn queue_table(jobs: &[JobInfo], now_ns: i64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>12}  {:<12} {:<10} {:<10} {:>6} {:>10}  {:<20} REASON",
        "JOBID", "NAME", "PARTITION", "STATE", "CORES", "ELAPSED", "NODES"
    );
    let throttled = |j: &JobInfo| j.array.is_some() && j.reason == "JobArrayTaskLimit";
    let mut k = 0;
    while k < jobs.len() {
        let j = &jobs[k];
        if let (true, Some(t)) = (throttled(j), j.array) {
            let mut indices = vec![t.index];
            let mut next = k + 1;
            while next < jobs.len()
                && throttled(&jobs[next])
                && jobs[next].array.is_some_and(|u| u.job == t.job)
            {
                indices.extend(jobs[next].array.map(|u| u.index));
                next += 1;
            }
            let _ = writeln!(
                out,
                "{:>12}  {:<12} {:<10} {:<10} {:>6} {:>10}  {:<20} {}",
                format!("{}_[{}%{}]", t.job, fold_indices(&indices), t.limit),
                if j.name.is_empty() { "-" } else { &j.name },
                j.partition,
                j.state.as_str(),
                j.cores,
                "-",
                "-",
                j.reason
            );
            k = next;
            continue;
        }
        k += 1;
        let elapsed = if j.start_ns == 0 {
            "-".to_string()
        } else {
            let end = if j.end_ns > 0 { j.end_ns } else { now_ns };
            secs((end - j.start_ns).max(0) as u64)
        };
        let _ = writeln!(
            out,
            "{:>12}  {:<12} {:<10} {:<10} {:>6} {:>10}  {:<20} {}",
            job_id(j),
            if j.name.is_empty() { "-" } else { &j.name },
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
                    "name": j.name,
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
                    "array": j.array.map(|t| json!({"job": t.job, "index": t.index, "limit": t.limit})),
                    "suspensions": j.suspensions.iter().map(|&(s, r)| {
                        json!([s as f64 / 1e9, (r > 0).then(|| r as f64 / 1e9)])
                    }).collect::<Vec<_>>(),
                    // Per node: {"gpu": 2}; and the devices it got.
                    "gres": j.gres.as_ref().map(|g| {
                        g.asks.iter().map(|(k, n)| (k.clone(), json!(n))).collect::<serde_json::Map<_, _>>()
                    }),
                    "devices": j.gres.as_ref().filter(|g| !g.devices.is_empty()).map(|g| &g.devices),
                    // As Slurm's ExitCode: "code:signal".
                    "exit_code": j.state.is_final().then(|| format!("{}:{}", j.exit.0, j.exit.1)),
                    "program": j.program.as_ref().map(|p| json!({
                        "user": p.user, "workdir": p.workdir, "stdout": p.stdout,
                        "stderr": p.stderr, "comment": p.comment,
                    })),
                })
            })
            .collect(),
    )
}

/// `nodes` as a table, like sinfo: nodes of the same state and size on
/// one line, folded. With generic resources, a column gives each kind's
/// devices held and in all (`gpu:3/8`).
pub fn nodes_table(nodes: &[NodeInfo]) -> String {
    type Key<'a> = (&'a str, u32, u64, Vec<(&'a str, u32)>, &'a str);
    let mut groups: BTreeMap<Key, Vec<&NodeInfo>> = BTreeMap::new();
    for n in nodes {
        let kinds = n.gres.iter().map(|(k, t, _)| (k.as_str(), *t)).collect();
        let key = (
            n.state.as_str(),
            n.cpus,
            n.memory_mb,
            kinds,
            n.reason.as_str(),
        );
        groups.entry(key).or_default().push(n);
    }
    let gres = nodes.iter().any(|n| !n.gres.is_empty());
    let mut out = String::new();
    let _ = write!(
        out,
        "{:<10} {:>6} {:>5} {:>10} {:>13}  ",
        "STATE", "NODES", "CPUS", "MEMORY", "CPUS(A/T)"
    );
    if gres {
        let _ = write!(out, "{:<16} ", "GRES(A/T)");
    }
    let _ = writeln!(out, "{:<30} REASON", "NODELIST");
    for (key, group) in &groups {
        let (state, cpus, mem, kinds, reason) = key;
        let total = group.len() as u64 * u64::from(*cpus);
        let alloc: u64 = group.iter().map(|n| u64::from(n.alloc_cpus)).sum();
        let _ = write!(
            out,
            "{:<10} {:>6} {:>5} {:>10} {:>13}  ",
            state,
            group.len(),
            cpus,
            format!("{mem}M"),
            format!("{alloc}/{total}"),
        );
        if gres {
            let cell: Vec<String> = kinds
                .iter()
                .enumerate()
                .map(|(k, (name, t))| {
                    let held: u32 = group.iter().map(|n| n.gres[k].2).sum();
                    format!("{name}:{held}/{}", t * group.len() as u32)
                })
                .collect();
            let cell = if cell.is_empty() {
                "-".into()
            } else {
                cell.join(",")
            };
            let _ = write!(out, "{cell:<16} ");
        }
        let _ = writeln!(
            out,
            "{:<30} {}",
            formats::nodeset::fold(group.iter().map(|n| n.name.as_str())),
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
                    "gres": n.gres.iter().map(|(k, total, held)| {
                        json!({"name": k, "total": total, "alloc": held})
                    }).collect::<Vec<_>>(),
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
        "requeued": s.requeued,
        "pass_seconds": {
            "buckets": PASS_BUCKETS.iter().zip(&s.pass_buckets).map(|(le, n)| json!([le, n])).collect::<Vec<_>>(),
            "count": s.pass_buckets.last().copied().unwrap_or(0),
            "sum": s.pass_ns_total as f64 / 1e9,
        },
        "journal_unsynced": s.journal_unsynced,
        "journal_lag_seconds": s.journal_lag_ns as f64 / 1e9,
        "journal_error": s.journal_error,
        "records_error": s.records_error,
        "max_jobs": s.max_jobs,
        "held_requests": s.held_requests,
        "held_jobs": s.held_jobs,
        "scheduler": s.policy_report,
        "scheduler_failure": s.policy_failure,
        "controller": {
            "role": s.replication.role,
            "address": s.replication.address,
            "primary": s.replication.primary,
            "term": s.replication.term,
            "cluster": (!s.replication.cluster.is_none()).then(|| s.replication.cluster.to_string()),
            "turned_away": s.replication.turned_away,
            "journal_seq": s.replication.seq,
            "backups": s.replication.backups.iter().map(|b| json!({
                "address": b.address,
                "copying": b.copying,
                "acked_seq": b.acked,
                "lag_entries": b.lag_entries,
                "lag_seconds": b.lag_ns as f64 / 1e9,
            })).collect::<Vec<_>>(),
        },
    })
}

/// One line: which controller answered, its role and term, and its
/// backup's lag.
pub fn replication_line(r: &formats::wire::Replication) -> String {
    let mut line = format!("controller {} ({}, term {})", r.address, r.role, r.term);
    if r.role != "primary" && !r.primary.is_empty() {
        let _ = write!(line, "; primary {}", r.primary);
    }
    for b in &r.backups {
        if b.copying {
            let _ = write!(line, "; backup {} copying the whole state", b.address);
        } else {
            let _ = write!(
                line,
                "; backup {} {} entries behind",
                b.address, b.lag_entries
            );
        }
    }
    if r.role == "primary" && r.backups.is_empty() {
        line.push_str("; no backup attached");
    }
    for t in &r.turned_away {
        let _ = write!(line, "; turned away {t}");
    }
    line
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
    let r = &s.replication;
    if r.role != "alone" {
        line(
            &mut out,
            "controller",
            format!(
                "{} {}, term {}, journal entry {}",
                r.role, r.address, r.term, r.seq
            ),
        );
        line(&mut out, "cluster", r.cluster.to_string());
        for t in &r.turned_away {
            line(&mut out, "turned away", t.clone());
        }
        if r.role == "backup" {
            line(&mut out, "primary", r.primary.clone());
        }
        for b in &r.backups {
            let state = if b.copying {
                "copying the whole state".to_string()
            } else {
                format!(
                    "{} entries behind, oldest waiting {:.1} ms",
                    b.lag_entries,
                    b.lag_ns as f64 / 1e6
                )
            };
            line(&mut out, "backup", format!("{}: {state}", b.address));
        }
        if r.role == "primary" && r.backups.is_empty() {
            line(&mut out, "backup", "none attached: acting alone".into());
        }
    }
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
    line(&mut out, "requeued", s.requeued.to_string());
    line(
        &mut out,
        "waiting submissions",
        format!(
            "{} jobs in {} requests (max_jobs {})",
            s.held_jobs, s.held_requests, s.max_jobs
        ),
    );
    let passes = s.pass_buckets.last().copied().unwrap_or(0);
    if passes > 0 {
        line(
            &mut out,
            "pass time",
            format!(
                "mean {:.3} ms, p50 <= {}, p99 <= {}",
                s.pass_ns_total as f64 / passes as f64 / 1e6,
                pass_quantile(s, 0.5),
                pass_quantile(s, 0.99)
            ),
        );
    }
    line(
        &mut out,
        "journal",
        format!(
            "{} entries not yet synced, oldest {:.1} ms",
            s.journal_unsynced,
            s.journal_lag_ns as f64 / 1e6
        ),
    );
    if let Some(e) = &s.journal_error {
        line(
            &mut out,
            "journal",
            format!("cannot be written, no job submitted nor started: {e}"),
        );
    }
    if let Some(e) = &s.records_error {
        line(
            &mut out,
            "records",
            format!("wait to be written, kept by their agents meanwhile: {e}"),
        );
    }
    if let Some(r) = &s.policy_report {
        line(
            &mut out,
            "scheduler",
            format!(
                "{}: {} messages, reply p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
                r.endpoint, r.messages, r.reply_ms.p50, r.reply_ms.p99, r.reply_ms.max
            ),
        );
    }
    if let Some(why) = &s.policy_failure {
        line(&mut out, "scheduler failed", why.clone());
    }
    out
}

/// The smallest bucket bound that holds quantile `q` of the passes.
fn pass_quantile(s: &ClusterStats, q: f64) -> String {
    let total = s.pass_buckets.last().copied().unwrap_or(0);
    let want = (total as f64 * q).ceil() as u64;
    match s.pass_buckets.iter().position(|&n| n >= want.max(1)) {
        Some(i) if i < PASS_BUCKETS.len() => format!("{} ms", PASS_BUCKETS[i] * 1e3),
        _ => format!("> {} ms", PASS_BUCKETS[PASS_BUCKETS.len() - 1] * 1e3),
    }
}

pub fn hosts_table(hosts: &[HostInfo]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>6} {:>18} {:>15} {:>10} {:>10} {:>10} {:>6}  NODES",
        "HOST", "JOBS", "LOAD 1/5/15", "MEM USED/TOTAL", "PROCESSES", "JOBS RSS", "PRIVATE", "AGE"
    );
    let gib = |kb: u64| kb as f64 / (1024.0 * 1024.0);
    let mib = |kb: u64| format!("{:.1}M", kb as f64 / 1024.0);
    for h in hosts {
        let (load, mem, procs, rss, private) = match &h.report {
            Some(r) => (
                format!("{:.2}/{:.2}/{:.2}", r.load[0], r.load[1], r.load[2]),
                format!(
                    "{:.1}/{:.1}G",
                    gib(r.mem_total_kb.saturating_sub(r.mem_available_kb)),
                    gib(r.mem_total_kb)
                ),
                r.jobs_alive.to_string(),
                mib(r.jobs_rss_kb),
                mib(r.jobs_private_kb),
            ),
            None => ("-".into(), "-".into(), "-".into(), "-".into(), "-".into()),
        };
        let age = if h.report.is_some() {
            format!("{:.0}s", h.report_age_ns as f64 / 1e9)
        } else {
            "-".into()
        };
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>18} {:>15} {:>10} {:>10} {:>10} {:>6}  {}{}",
            h.host,
            h.running,
            load,
            mem,
            procs,
            rss,
            private,
            age,
            h.nodes,
            if h.local { " (in the controller)" } else { "" }
        );
    }
    out
}

pub fn hosts_json(hosts: &[HostInfo]) -> serde_json::Value {
    serde_json::Value::Array(
        hosts
            .iter()
            .map(|h| {
                json!({
                    "host": h.host,
                    "nodes": h.nodes,
                    "local": h.local,
                    "running": h.running,
                    "report": h.report.as_ref().map(|r| json!({
                        "load": r.load,
                        "mem_total_kb": r.mem_total_kb,
                        "mem_available_kb": r.mem_available_kb,
                        "jobs_alive": r.jobs_alive,
                        "jobs_rss_kb": r.jobs_rss_kb,
                        "jobs_private_kb": r.jobs_private_kb,
                        "age_seconds": h.report_age_ns as f64 / 1e9,
                    })),
                })
            })
            .collect(),
    )
}
