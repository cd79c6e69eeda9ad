//! What a running cluster shows of itself: `GET /metrics` in Prometheus'
//! text format over real HTTP, matching the run's counters, and each
//! agent's host report (`controller nodes --hosts`) counting its live job
//! processes.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One HTTP request; the status code and the body.
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn scrape(addr: &str) -> prometheus_parse::Scrape {
    let (status, body) = http_get(addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap()
}

/// The value of a sample, by name and (optionally) one label.
fn value(s: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && label.is_none_or(|(k, v)| x.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no sample {name} {label:?}"));
    match &sample.value {
        prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => *v,
        prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn metrics_are_prometheus_text_and_match_the_run() {
    let c = Cluster::start("vn[1-2]", 4, "metrics_listen = \"127.0.0.1:0\"");
    let addr = std::fs::read_to_string(c.dir.path().join("state/metrics_address")).unwrap();

    let ids = c.submit(&["--cores", "4", "--runtime", "1.5", "--count", "3"]);
    c.wait_state(ids[0], "running");
    c.ok(&["suspend", &ids[0].to_string()]);
    std::thread::sleep(Duration::from_millis(300));
    c.ok(&["resume", &ids[0].to_string()]);
    for &id in &ids {
        c.wait_state(id, "completed");
    }

    let s = scrape(&addr);
    assert_eq!(value(&s, "clemu_jobs_submitted_total", None), 3.0);
    assert_eq!(value(&s, "clemu_jobs_started_total", None), 3.0);
    assert_eq!(value(&s, "clemu_jobs_ended_total", None), 3.0);
    assert_eq!(value(&s, "clemu_suspensions_total", None), 1.0);
    assert_eq!(value(&s, "clemu_jobs", Some(("state", "completed"))), 3.0);
    assert_eq!(value(&s, "clemu_jobs", Some(("state", "running"))), 0.0);
    assert_eq!(value(&s, "clemu_nodes", Some(("state", "idle"))), 2.0);
    assert_eq!(value(&s, "clemu_cores", None), 8.0);
    assert_eq!(value(&s, "clemu_cores_allocated", None), 0.0);
    assert_eq!(value(&s, "clemu_agents_connected", None), 1.0);
    // Nothing waits to be synced for long: syncs follow changes within
    // 100 ms (the last jobs' ends may be noted but not yet synced when
    // they are seen completed).
    assert!(value(&s, "clemu_journal_lag_seconds", None) < 1.0);
    c.wait_for("every entry synced", || {
        value(&scrape(&addr), "clemu_journal_unsynced_entries", None) == 0.0
    });
    // The pass histogram counts every pass the counters do.
    let stats = json_of(&c.ok(&["stats", "--format", "json"]));
    let passes = stats["schedule_passes"].as_u64().unwrap() as f64;
    let hist = s
        .samples
        .iter()
        .find(|x| x.metric == "clemu_schedule_pass_seconds")
        .unwrap();
    let prometheus_parse::Value::Histogram(buckets) = &hist.value else {
        panic!("{hist:?}");
    };
    let inf = buckets
        .iter()
        .find(|b| b.less_than == f64::INFINITY)
        .unwrap();
    assert!(
        passes >= 1.0 && inf.count >= passes,
        "{buckets:?} vs {passes}"
    );
    assert!(buckets.windows(2).all(|w| w[0].count <= w[1].count));
    assert_eq!(
        stats["pass_seconds"]["count"].as_u64().unwrap() as f64,
        passes
    );

    let (status, _) = http_get(&addr, "/elsewhere");
    assert_eq!(status, 404);
}

#[test]
fn each_host_reports_its_live_job_processes() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let ids = c.submit(&["--cores", "2", "--runtime", "30", "--count", "3"]);
    for &id in &ids {
        c.wait_state(id, "running");
    }
    // Reports come every ten heartbeats (200 ms here), and two beats after
    // the number of live jobs changed.
    let deadline = Instant::now() + Duration::from_secs(20);
    let report = loop {
        let hosts = json_of(&c.ok(&["nodes", "--hosts", "--format", "json"]));
        let h = &hosts.as_array().unwrap()[0];
        if h["report"]["jobs_alive"].as_u64() == Some(3) {
            break h.clone();
        }
        assert!(Instant::now() < deadline, "no report of 3 jobs: {hosts}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(report["nodes"], "vn[1-2]");
    assert_eq!(report["running"], 3);
    let r = &report["report"];
    assert!(r["jobs_private_kb"].as_u64().unwrap() > 0, "{r}");
    assert!(
        r["jobs_rss_kb"].as_u64() >= r["jobs_private_kb"].as_u64(),
        "{r}"
    );
    assert!(r["mem_total_kb"].as_u64().unwrap() >= r["mem_available_kb"].as_u64().unwrap());
    // The table shows the same host.
    let table = c.ok(&["nodes", "--hosts"]);
    assert!(table.lines().nth(1).unwrap().contains("vn[1-2]"), "{table}");

    c.ok(&[
        "cancel",
        &ids[0].to_string(),
        &ids[1].to_string(),
        &ids[2].to_string(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let hosts = json_of(&c.ok(&["nodes", "--hosts", "--format", "json"]));
        if hosts[0]["report"]["jobs_alive"].as_u64() == Some(0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the report still counts ended jobs: {hosts}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
