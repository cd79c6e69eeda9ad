//! `calcmets plot` on two results directories: every chart is well-formed
//! SVG with the series it should hold (one curve per run, one bar per run
//! and size class, one grey stretch per suspension), and bad options are
//! clear errors.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

use std::borrow::Cow;
use std::path::Path;
use std::process::{Command, Output};

use formats::record::{encode, Flags, JobRecord, Status, Suspension};

const S: i64 = 1_000_000_000;
const T0: i64 = 1_700_000_000 * S;

fn calcmets(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_calcmets"))
        .args(args)
        .output()
        .unwrap()
}

/// `calcmets plot --out OUT ARGS... INPUT`, which must succeed.
fn plot(out: &Path, args: &[&str], input: &Path) -> Output {
    let mut all = vec!["plot", "--out", out.to_str().unwrap()];
    all.extend_from_slice(args);
    all.push(input.to_str().unwrap());
    let o = calcmets(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// A results directory: 30 jobs of 1, 2 and 4 cores on 4 nodes, every
/// third one suspended once for 20 s; `slow` doubles the waits.
fn run_dir(dir: &Path, label: &str, slow: i64) {
    std::fs::create_dir_all(dir.join("records")).unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        format!(
            r#"{{"label": "{label}", "cores": 16, "start": {}, "tau": 10, "factor": 1.0, "speedup": 1.0}}"#,
            T0 / S
        ),
    )
    .unwrap();
    let mut buf = Vec::new();
    for id in 1..=30u64 {
        let i = id as i64;
        let submit = T0 + i * 10 * S;
        let start = submit + slow * i * S;
        let suspended = id % 3 == 0;
        let pause = if suspended { 20 * S } else { 0 };
        let run = 60 * S;
        encode(
            &JobRecord {
                id,
                cores: [1, 2, 4][(id % 3) as usize],
                node: Cow::Owned(format!("vn{}", id % 4)),
                submit,
                start,
                end: start + run + pause,
                runtime: run as u64,
                walltime: 0,
                status: Status::Completed,
                flags: Flags::default(),
                suspensions: if suspended {
                    vec![Suspension {
                        suspend: start + 10 * S,
                        resume: start + 10 * S + pause,
                    }]
                } else {
                    Vec::new()
                },
                devices: Vec::new(),
                program: None,
            },
            &mut buf,
        )
        .unwrap();
    }
    std::fs::write(dir.join("records/jobs.rec"), buf).unwrap();
}

fn svg(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    roxmltree::Document::parse(&text)
        .unwrap_or_else(|e| panic!("{} is not well-formed XML: {e}", path.display()));
    text
}

/// Elements `tag` (with their attributes) of an SVG document.
fn elements<'a>(doc: &'a roxmltree::Document<'a>, tag: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants().filter(|n| n.has_tag_name(tag)).collect()
}

/// The texts of an SVG document (labels, legend, titles), trimmed.
fn texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .collect()
}

fn has_text(svg: &str, want: &str) -> bool {
    texts(svg).iter().any(|t| t == want)
}

const BLUE: &str = "#1F77B4";
const ORANGE: &str = "#FF7F0E";

#[test]
fn charts_hold_one_series_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    run_dir(&results.join("shrink-050"), "shrink-050", 2);
    run_dir(&results.join("shrink-100"), "shrink-100", 1);
    let out = dir.path().join("plots");
    let o = plot(&out, &[], &results);
    let listed = String::from_utf8(o.stdout).unwrap();
    assert_eq!(listed.lines().count(), 7, "{listed}");

    // One curve per run (the legend's sample line is two points long).
    for name in ["cdf-wait.svg", "cdf-bsld.svg"] {
        let text = svg(&out.join(name));
        let doc = roxmltree::Document::parse(&text).unwrap();
        for color in [BLUE, ORANGE] {
            let curves = elements(&doc, "polyline")
                .into_iter()
                .filter(|n| n.attribute("stroke") == Some(color))
                .filter(|n| n.attribute("points").unwrap().split_whitespace().count() > 2)
                .count();
            assert_eq!(curves, 1, "{name}: curves of {color}");
        }
        assert!(
            text.contains("shrink-050") && text.contains("shrink-100"),
            "{name}: legend"
        );
    }
    let text = svg(&out.join("cdf-wait.svg"));
    assert!(text.contains("wait time (trace s, log scale"));

    // Three size classes (1, 2, 3-4 cores): a bar per run in each, and
    // one in the legend.
    let text = svg(&out.join("bsld-by-size.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    for color in [BLUE, ORANGE] {
        let bars = elements(&doc, "rect")
            .into_iter()
            .filter(|n| n.attribute("fill") == Some(color))
            .count();
        assert_eq!(bars, 3 + 1, "bars of {color}");
    }
    for label in ["1", "2", "3-4"] {
        assert!(
            has_text(&text, label),
            "no size class {label}: {:?}",
            texts(&text)
        );
    }

    // The timeline: utilization as an area, three queue curves.
    let text = svg(&out.join("shrink-100-timeline.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    assert_eq!(elements(&doc, "polygon").len(), 1);
    let curves = elements(&doc, "polyline")
        .into_iter()
        .filter(|n| n.attribute("stroke-width") == Some("2"))
        .filter(|n| n.attribute("points").unwrap().split_whitespace().count() > 2)
        .count();
    assert_eq!(curves, 3, "pending, running, suspended");
    assert!(text.contains("utilization (% of cores)"));

    // The Gantt chart: each of the 10 suspensions a grey stretch, plus the
    // legend's; each node a row.
    let text = svg(&out.join("shrink-100-gantt.svg"));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let grey = elements(&doc, "rect")
        .into_iter()
        .filter(|n| n.attribute("fill") == Some("#AAAAAA"))
        .count();
    assert_eq!(grey, 10 + 1);
    for node in ["vn0", "vn1", "vn2", "vn3"] {
        assert!(
            has_text(&text, node),
            "no row for {node}: {:?}",
            texts(&text)
        );
    }
}

#[test]
fn a_window_and_nodes_narrow_the_gantt_chart() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    run_dir(&run, "one", 1);
    let out = dir.path().join("plots");
    plot(&out, &["--window", "0:100", "--nodes", "vn[1-2]"], &run);
    let text = svg(&out.join("one-gantt.svg"));
    assert!(
        has_text(&text, "vn1") && has_text(&text, "vn2"),
        "{:?}",
        texts(&text)
    );
    assert!(!has_text(&text, "vn0") && !has_text(&text, "vn3"));

    let bad = calcmets(&["plot", "--window", "9:3", run.to_str().unwrap()]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("T1 must be after T0"), "{err}");
    let bad = calcmets(&[
        "plot",
        "--nodes",
        "vn[",
        "--out",
        out.to_str().unwrap(),
        run.to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--nodes"));
    // Loose records without a core count: a clear error, not a division by 0.
    let bad = calcmets(&[
        "plot",
        "--out",
        out.to_str().unwrap(),
        run.join("records/jobs.rec").to_str().unwrap(),
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--cores"));
}

#[test]
fn the_gantt_chart_draws_a_job_on_every_node_jobs_csv_lists() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("records")).unwrap();
    std::fs::write(
        run.join("manifest.json"),
        format!(r#"{{"label": "one", "cores": 16, "start": {}}}"#, T0 / S),
    )
    .unwrap();
    let mut buf = Vec::new();
    encode(
        &JobRecord {
            id: 1,
            cores: 12,
            node: Cow::Borrowed("vn0"),
            submit: T0,
            start: T0 + S,
            end: T0 + 61 * S,
            runtime: 60 * S as u64,
            walltime: 0,
            status: Status::Completed,
            flags: Flags::default(),
            suspensions: Vec::new(),
            devices: Vec::new(),
            program: None,
        },
        &mut buf,
    )
    .unwrap();
    std::fs::write(run.join("records/jobs.rec"), buf).unwrap();
    std::fs::write(
        run.join("jobs.csv"),
        "trace_id,job_id,cores,runtime_s,walltime_s,target_submit,actual_submit,lateness_ms,state,nodes\n\
         7,1,12,60.000,0.000,0.0,0.0,0.000,completed,\"vn[0-2]\"\n",
    )
    .unwrap();
    let out = dir.path().join("plots");
    plot(&out, &[], &run);
    let text = svg(&out.join("one-gantt.svg"));
    for node in ["vn0", "vn1", "vn2"] {
        assert!(
            has_text(&text, node),
            "no row for {node}: {:?}",
            texts(&text)
        );
    }
    let doc = roxmltree::Document::parse(&text).unwrap();
    // Job 1's colour is the palette's second; the legend's sample is the first.
    let bars = elements(&doc, "rect")
        .into_iter()
        .filter(|n| n.attribute("fill") == Some(ORANGE))
        .count();
    assert_eq!(bars, 3, "one bar per node of the job");
}

#[test]
fn the_gantt_chart_of_many_jobs_shows_how_busy_each_node_was() {
    // 3,000 short jobs on 4 nodes of 4 cores: too many to draw one by one.
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("records")).unwrap();
    std::fs::write(
        run.join("manifest.json"),
        format!(
            r#"{{"label": "many", "cores": 16, "nodes": 4, "start": {}}}"#,
            T0 / S
        ),
    )
    .unwrap();
    let mut buf = Vec::new();
    for id in 1..=3000u64 {
        let start = T0 + (id as i64 / 4) * S;
        encode(
            &JobRecord {
                id,
                cores: 2,
                node: Cow::Owned(format!("vn{}", id % 4)),
                submit: start,
                start,
                end: start + S,
                runtime: S as u64,
                walltime: 0,
                status: Status::Completed,
                flags: Flags::default(),
                suspensions: Vec::new(),
                devices: Vec::new(),
                program: None,
            },
            &mut buf,
        )
        .unwrap();
    }
    std::fs::write(run.join("records/jobs.rec"), buf).unwrap();
    let out = dir.path().join("plots");
    plot(&out, &[], &run);
    let text = svg(&out.join("many-gantt.svg"));
    assert!(
        has_text(&text, "many: how busy each node was"),
        "{:?}",
        texts(&text)
    );
    assert!(
        texts(&text)
            .iter()
            .any(|t| t.contains("3000 jobs, too many to draw one by one")),
        "{:?}",
        texts(&text)
    );
    // Each node half busy (one 2-core job of 4 cores at a time): cells of
    // one shade, not a bar per job.
    let doc = roxmltree::Document::parse(&text).unwrap();
    let fills: std::collections::BTreeSet<&str> = elements(&doc, "rect")
        .into_iter()
        .filter_map(|n| n.attribute("fill"))
        .collect();
    assert!(fills.len() < 12, "{fills:?}");
    // With --window, a few jobs again, one bar each.
    let narrow = dir.path().join("narrow");
    plot(&narrow, &["--window", "0:20"], &run);
    let text = svg(&narrow.join("many-gantt.svg"));
    assert!(has_text(&text, "many: jobs on nodes"), "{:?}", texts(&text));
}

#[test]
fn a_sweep_draws_mean_bounded_slowdown_by_factor_one_line_per_sweep() {
    let dir = tempfile::tempdir().unwrap();
    // Two sweeps of two factors each; the second's jobs wait longer.
    for (sweep, slow) in [("quiet", 1), ("failing", 3)] {
        for (label, factor) in [("shrink-050", 0.5), ("shrink-100", 1.0)] {
            let run = dir.path().join(sweep).join(label);
            run_dir(&run, label, slow);
            let m = run.join("manifest.json");
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&m).unwrap()).unwrap();
            v["factor"] = factor.into();
            std::fs::write(&m, v.to_string()).unwrap();
        }
    }
    let out = dir.path().join("plots");
    let o = calcmets(&[
        "plot",
        "--out",
        out.to_str().unwrap(),
        dir.path().join("quiet").to_str().unwrap(),
        dir.path().join("failing").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = svg(&out.join("bsld-by-factor.svg"));
    assert!(has_text(&text, "quiet") && has_text(&text, "failing"));
    assert!(text.contains("shrinking factor (%)"));
    // One line of two points per sweep; the failing one higher (smaller y).
    let doc = roxmltree::Document::parse(&text).unwrap();
    // (The legend's sample line is 24 pixels long; the data spans the plot.)
    let line = |color: &str| -> Vec<(f64, f64)> {
        elements(&doc, "polyline")
            .into_iter()
            .filter(|n| n.attribute("stroke") == Some(color))
            .map(|n| {
                n.attribute("points")
                    .unwrap()
                    .split_whitespace()
                    .map(|p| {
                        let (x, y) = p.split_once(',').unwrap();
                        (x.parse::<f64>().unwrap(), y.parse::<f64>().unwrap())
                    })
                    .collect::<Vec<_>>()
            })
            .find(|pts| pts.last().unwrap().0 - pts[0].0 > 100.0)
            .unwrap()
    };
    let (quiet, failing) = (line(BLUE), line(ORANGE));
    assert_eq!((quiet.len(), failing.len()), (2, 2));
    assert!(failing[0].1 < quiet[0].1 && failing[1].1 < quiet[1].1);

    // Runs of one factor are no sweep: no such chart.
    let one = dir.path().join("one");
    plot(&one, &[], &dir.path().join("quiet").join("shrink-100"));
    assert!(!one.join("bsld-by-factor.svg").exists());
}

#[test]
fn runs_of_one_name_from_two_sweeps_are_named_apart() {
    let dir = tempfile::tempdir().unwrap();
    for sweep in ["quiet", "failing"] {
        run_dir(&dir.path().join(sweep).join("shrink-100"), "shrink-100", 1);
    }
    let o = calcmets(&[
        "--format",
        "json",
        dir.path().join("quiet/shrink-100").to_str().unwrap(),
        dir.path().join("failing/shrink-100").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["run"], "quiet/shrink-100");
    assert_eq!(v[1]["run"], "failing/shrink-100");
}
