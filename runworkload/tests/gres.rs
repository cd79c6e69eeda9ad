//! A replay on the GPU demo cluster (configs/gpu.toml: 12 of 16 nodes with
//! 4 GPUs each, a quarter of the trace's jobs asking 2 GPUs of each node),
//! on real processes and in the twin: the same jobs ask GPUs in both, each
//! gets 2 on every node it runs on and only on nodes that have them, no
//! GPU serves two jobs at once, and calcmets reports the GPUs' use.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bin, json, records, repo};

fn replay(out: &Path, extra: &[&str]) -> PathBuf {
    let o = Command::new(bin("runworkload"))
        .arg("--config")
        .arg(repo().join("configs/gpu.toml"))
        .arg("--workload")
        .arg(repo().join("configs/workloads/kth-sp2-200.swf"))
        .args([
            "--jobs",
            "80",
            "--cores-per-proc",
            "2",
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
    out.join("shrink-100")
}

/// The trace jobs that asked GPUs, from jobs.csv.
fn gpu_jobs(run: &Path) -> BTreeSet<i64> {
    formats::results::read_jobs(run)
        .unwrap()
        .unwrap()
        .into_iter()
        .filter(|r| !r.gres.is_empty())
        .inspect(|r| assert_eq!(r.gres, "gpu:2"))
        .map(|r| r.trace_id)
        .collect()
}

#[test]
fn jobs_get_their_gpus_on_real_processes_and_in_the_twin() {
    let tmp = tempfile::tempdir().unwrap();
    let emulated = replay(&tmp.path().join("emu"), &[]);
    let twin = replay(&tmp.path().join("twin"), &["--simulate"]);

    let asked = gpu_jobs(&emulated);
    assert_eq!(asked, gpu_jobs(&twin), "the same jobs ask GPUs in both");
    assert!((10..=30).contains(&asked.len()), "{} of 80", asked.len());

    for run in [&emulated, &twin] {
        let rows = formats::results::read_jobs(run).unwrap().unwrap();
        let by_id: HashMap<u64, &formats::results::JobRow> =
            rows.iter().map(|r| (r.job_id, r)).collect();
        let recs = records(run);
        assert_eq!(recs.len(), 80, "{}", run.display());
        let mut spans: HashMap<(String, u32), Vec<(i64, i64)>> = HashMap::new();
        for r in &recs {
            let row = by_id[&r.id];
            if row.gres.is_empty() {
                assert!(r.devices.is_empty(), "{r:?}");
                continue;
            }
            // Two GPUs on each of its nodes, all of them GPU nodes.
            let nodes = formats::nodeset::expand(&formats::nodeset::parse(&row.nodes).unwrap());
            let held: Vec<&str> = r.devices.iter().map(|d| d.node.as_ref()).collect();
            assert_eq!(held, nodes, "{}: {r:?}", run.display());
            for d in &r.devices {
                assert_eq!((d.kind.as_ref(), d.ids.len()), ("gpu", 2), "{r:?}");
                let n: u32 = d.node.trim_start_matches("vn").parse().unwrap();
                assert!(n <= 12 && d.ids.iter().all(|&i| i < 4), "{r:?}");
                for &i in &d.ids {
                    spans
                        .entry((d.node.to_string(), i))
                        .or_default()
                        .push((r.start, r.end));
                }
            }
        }
        for (gpu, mut s) in spans {
            s.sort_unstable();
            for w in s.windows(2) {
                assert!(
                    w[1].0 >= w[0].1,
                    "{}: GPU {gpu:?} ran two jobs at once",
                    run.display()
                );
            }
        }
        let m = json(&run.join("manifest.json"));
        assert_eq!(m["resources"]["gpu"], 48);
        assert_eq!(m["workload_gres"][0], "fraction=0.25 -> gpu:2");
        let metrics = json(&run.join("metrics.json"));
        let gpu = &metrics["resources"]["gpu"];
        assert_eq!(gpu["devices"], 48);
        let u = gpu["utilization"].as_f64().unwrap();
        assert!(u > 0.0 && u < 1.0, "{u}");
    }

    // calcmets shows each run's GPU utilization, and the devices in dump.
    let table = Command::new(bin("calcmets"))
        .arg(&emulated)
        .arg(&twin)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("utilization gpu"), "{table}");
    let dump = Command::new(bin("calcmets"))
        .arg("dump")
        .arg(emulated.join("records"))
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.contains(r#""devices":[{"node":"vn0"#), "{dump}");
}
