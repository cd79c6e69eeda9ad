//! Live metrics: `GET /metrics` over HTTP in Prometheus' text exposition
//! format (version 0.0.4), for `controller serve --metrics-listen ADDR`.
//!
//! Each scrape asks the server task for the cluster's counters and the
//! hosts' reports, as a client would, so what Prometheus sees is what
//! `controller stats` and `controller nodes --hosts` print. The endpoint
//! reads only and needs no secret: bind it to loopback or a trusted
//! network.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::time::Duration;

use formats::wire::{ClusterStats, HostInfo, Request, Response, PASS_BUCKETS};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::server::Event;

/// The content type of the text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Answers scrapes until `done` fires.
pub async fn serve(listener: TcpListener, events: mpsc::Sender<Event>, done: CancellationToken) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    debug!(%e, "metrics: accept failed");
                    continue;
                }
            },
            () = done.cancelled() => return,
        };
        let events = events.clone();
        let done = done.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(req, events.clone()));
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                // A client that never finishes its request is let go.
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    debug!(%peer, %e, "metrics: connection ended");
                },
                () = done.cancelled() => {}
            }
        });
    }
}

async fn answer(
    req: hyper::Request<Incoming>,
    events: mpsc::Sender<Event>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, body: String| {
        let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(CONTENT_TYPE) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        Ok(r)
    };
    if req.uri().path() != "/metrics" {
        return reply(StatusCode::NOT_FOUND, "only /metrics is here\n".into());
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n".into());
    }
    let stats = ask(&events, Request::Stats).await;
    let hosts = ask(&events, Request::Hosts).await;
    match (stats, hosts) {
        (Some(Response::Stats(s)), Some(Response::Hosts(h))) => {
            reply(StatusCode::OK, exposition(&s, &h))
        }
        _ => reply(
            StatusCode::SERVICE_UNAVAILABLE,
            "the controller is stopping\n".into(),
        ),
    }
}

async fn ask(events: &mpsc::Sender<Event>, req: Request) -> Option<Response> {
    let (reply, answer) = oneshot::channel();
    events.send(Event::Request { req, reply }).await.ok()?;
    answer.await.ok()
}

/// The metrics in the text exposition format.
pub fn exposition(s: &ClusterStats, hosts: &[HostInfo]) -> String {
    let mut out = String::new();
    let mut put = |name: &str, kind: &str, help: &str, lines: &[(String, f64)]| {
        let _ = writeln!(
            out,
            "# HELP clemu_{name} {help}\n# TYPE clemu_{name} {kind}"
        );
        for (labels, v) in lines {
            let _ = writeln!(out, "clemu_{name}{labels} {v}");
        }
    };
    let by_state = |v: Vec<(&str, u64)>| -> Vec<(String, f64)> {
        v.into_iter()
            .map(|(st, n)| (format!("{{state=\"{st}\"}}"), n as f64))
            .collect()
    };
    put(
        "jobs",
        "gauge",
        "Jobs by state (finished ones among the controller's recent history).",
        &by_state(s.jobs.iter().map(|(st, n)| (st.as_str(), *n)).collect()),
    );
    let nodes = by_state(s.nodes.iter().map(|(st, n)| (st.as_str(), *n)).collect());
    put("nodes", "gauge", "Nodes by state.", &nodes);
    let one = |v: u64| vec![(String::new(), v as f64)];
    put("cores", "gauge", "Cores of the cluster.", &one(s.cores));
    put(
        "cores_allocated",
        "gauge",
        "Cores held by jobs: running ones, and those an administrator suspended (a job the policy suspends gives its cores back).",
        &one(s.alloc_cores),
    );
    put(
        "agents_connected",
        "gauge",
        "Agents registered and heard from.",
        &one(s.agents),
    );
    put(
        "jobs_submitted_total",
        "counter",
        "Jobs accepted.",
        &one(s.submitted),
    );
    put(
        "jobs_started_total",
        "counter",
        "Job starts decided.",
        &one(s.started),
    );
    put(
        "jobs_ended_total",
        "counter",
        "Jobs that started and are over.",
        &one(s.ended),
    );
    put(
        "suspensions_total",
        "counter",
        "Suspensions of jobs.",
        &one(s.suspensions),
    );
    put(
        "jobs_requeued_total",
        "counter",
        "Jobs requeued after their node was lost.",
        &one(s.requeued),
    );
    put(
        "refused_decisions_total",
        "counter",
        "Policy decisions refused as illegal (a policy bug).",
        &one(s.refused_decisions),
    );
    let mut pass: Vec<(String, f64)> = PASS_BUCKETS
        .iter()
        .zip(&s.pass_buckets)
        .map(|(le, n)| (format!("_bucket{{le=\"{le}\"}}"), *n as f64))
        .collect();
    let count = s.pass_buckets.last().copied().unwrap_or(0);
    pass.push(("_bucket{le=\"+Inf\"}".into(), count as f64));
    pass.push(("_sum".into(), s.pass_ns_total as f64 / 1e9));
    pass.push(("_count".into(), count as f64));
    put(
        "schedule_pass_seconds",
        "histogram",
        "Duration of scheduling passes.",
        &pass,
    );
    put(
        "journal_unsynced_entries",
        "gauge",
        "Journal entries written but not yet synced.",
        &one(s.journal_unsynced),
    );
    put(
        "journal_lag_seconds",
        "gauge",
        "How long the oldest unsynced journal entry has waited.",
        &[(String::new(), s.journal_lag_ns as f64 / 1e9)],
    );
    put(
        "journal_unwritable",
        "gauge",
        "1 while the journal cannot be written (a full disk): no job is submitted nor started.",
        &one(u64::from(s.journal_error.is_some())),
    );
    put(
        "records_unwritable",
        "gauge",
        "1 while records of ended jobs cannot be made durable (a full disk): their agents keep them.",
        &one(u64::from(s.records_error.is_some())),
    );
    let r = &s.replication;
    put(
        "controller_primary",
        "gauge",
        "1 on the primary controller (or the only one), 0 on a backup or a candidate.",
        &one(u64::from(r.role == "primary" || r.role == "alone")),
    );
    // Which controller leads, as this one knows it: an info metric, the
    // addresses in its labels.
    put(
        "controller_info",
        "gauge",
        "Always 1: this controller's role, address and the primary's address.",
        &[(
            format!(
                "{{role=\"{}\",address=\"{}\",primary=\"{}\"}}",
                escape(&r.role),
                escape(&r.address),
                escape(&r.primary)
            ),
            1.0,
        )],
    );
    put(
        "backups_attached",
        "gauge",
        "Backups following this primary now: 0 means no takeover is possible.",
        &one(r.backups.len() as u64),
    );
    put(
        "controller_term",
        "gauge",
        "The controller's term: it grows by one at each takeover.",
        &one(r.term),
    );
    put(
        "journal_seq",
        "gauge",
        "Sequence number of the last journal entry this controller holds.",
        &one(r.seq),
    );
    let per_backup = |f: &dyn Fn(&formats::wire::BackupLag) -> f64| -> Vec<(String, f64)> {
        r.backups
            .iter()
            .map(|b| (format!("{{backup=\"{}\"}}", b.address), f(b)))
            .collect()
    };
    put(
        "replication_lag_entries",
        "gauge",
        "Journal entries a backup has not confirmed yet.",
        &per_backup(&|b| b.lag_entries as f64),
    );
    put(
        "replication_lag_seconds",
        "gauge",
        "How long the oldest entry a backup has not confirmed has waited.",
        &per_backup(&|b| b.lag_ns as f64 / 1e9),
    );
    put(
        "replication_copying",
        "gauge",
        "1 while a backup copies the whole state (it cannot take over yet).",
        &per_backup(&|b| f64::from(u8::from(b.copying))),
    );
    let per_host = |f: &dyn Fn(&formats::wire::HostReport) -> f64| -> Vec<(String, f64)> {
        hosts
            .iter()
            .filter_map(|h| {
                let r = h.report.as_ref()?;
                Some((format!("{{host=\"{}\"}}", escape(&h.host)), f(r)))
            })
            .collect()
    };
    put(
        "host_load1",
        "gauge",
        "Load average over a minute of an agent's host.",
        &per_host(&|r| (f64::from(r.load[0]) * 100.0).round() / 100.0),
    );
    put(
        "host_memory_available_bytes",
        "gauge",
        "Memory available on an agent's host.",
        &per_host(&|r| r.mem_available_kb as f64 * 1024.0),
    );
    put(
        "host_job_processes",
        "gauge",
        "Live job processes (sigsleep) on an agent's host.",
        &per_host(&|r| f64::from(r.jobs_alive)),
    );
    put(
        "host_job_private_bytes",
        "gauge",
        "Private memory of an agent's live job processes.",
        &per_host(&|r| r.jobs_private_kb as f64 * 1024.0),
    );
    out
}

/// A label value as the format wants it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
