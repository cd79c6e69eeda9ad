//! Generic resources on real processes: a job finds the GPUs it was given
//! in its environment, writes them in its record, and no GPU ever serves
//! two jobs at once; a request no node can meet is refused with why.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;

use std::collections::HashMap;

use common::{config_text, json_of, Cluster};

/// Two nodes of 4 cores and 2 GPUs each, hosted in-process.
fn gpu_cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    // The [[nodes]] table comes last: this key is its own.
    let text = config_text(dir.path(), "vn[1-2]", 4, true, "") + "gpus = 2\n";
    Cluster::start_text(dir, &text)
}

/// A process's environment variable, from /proc.
fn env_of(pid: i32, name: &str) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|&b| b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(str::to_string))
}

#[test]
fn jobs_find_their_gpus_in_the_environment_and_never_share_one() {
    let c = gpu_cluster();
    let nodes = json_of(&c.ok(&["nodes", "--format", "json"]));
    assert_eq!(
        nodes[0]["gres"],
        serde_json::json!([{"name": "gpu", "total": 2, "alloc": 0}])
    );
    // Six one-core jobs of one GPU each, on four GPUs: four at once.
    let ids = c.submit(&[
        "--cores",
        "1",
        "--runtime",
        "4",
        "--gpus",
        "1",
        "--count",
        "6",
    ]);
    let running = || -> Vec<serde_json::Value> {
        json_of(&c.ok(&["queue", "--format", "json"]))
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["state"] == "running")
            .cloned()
            .collect()
    };
    c.wait_for("four jobs running", || running().len() == 4);
    let table = c.ok(&["nodes"]);
    assert!(
        table.contains("GRES(A/T)") && table.contains("gpu:4/4"),
        "{table}"
    );
    let mut seen = Vec::new();
    for j in running() {
        let id = j["id"].as_u64().unwrap();
        // "vn1:gpu=1": the job's node is its first, where it runs.
        let devices = j["devices"].as_str().unwrap().to_string();
        let (node, gpu) = devices.split_once(":gpu=").unwrap();
        assert_eq!(j["nodes"], node, "{j}");
        assert_eq!(j["gres"], serde_json::json!({"gpu": 1}));
        c.wait_for(&format!("job {id}'s process"), || c.pids(id).len() == 1);
        let pid = c.pids(id)[0];
        assert_eq!(
            env_of(pid, "CUDA_VISIBLE_DEVICES").as_deref(),
            Some(gpu),
            "job {id} was given {devices}"
        );
        seen.push(devices);
    }
    seen.sort();
    assert_eq!(
        seen,
        ["vn1:gpu=0", "vn1:gpu=1", "vn2:gpu=0", "vn2:gpu=1"],
        "each GPU to one job"
    );
    // Three GPUs on one node: no node has them.
    let out = c.ctl(&["submit", "--cores", "1", "--runtime", "1", "--gpus", "3"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("gpu:3") && err.contains("no node"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let mut wait = vec!["wait"];
    let id_texts: Vec<String> = ids.iter().map(u64::to_string).collect();
    wait.extend(id_texts.iter().map(String::as_str));
    c.ok(&wait);
    // Every record names one GPU; records that overlap in time never name
    // the same one.
    let recs = c.records();
    assert_eq!(recs.len(), 6);
    let mut by_gpu: HashMap<(String, u32), Vec<(i64, i64)>> = HashMap::new();
    for r in &recs {
        assert_eq!(r.devices.len(), 1, "{r:?}");
        let d = &r.devices[0];
        assert_eq!(
            (d.node.as_ref(), d.kind.as_ref(), d.ids.len()),
            (r.node.as_ref(), "gpu", 1)
        );
        by_gpu
            .entry((d.node.to_string(), d.ids[0]))
            .or_default()
            .push((r.start, r.end));
    }
    for (gpu, mut spans) in by_gpu {
        spans.sort_unstable();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "GPU {gpu:?} ran two jobs at once: {spans:?}"
            );
        }
    }
}

#[test]
fn a_job_without_gpus_uses_the_cores_beside_them() {
    let c = gpu_cluster();
    let gpu = c.submit(&["--cores", "1", "--runtime", "30", "--gres", "gpu:2"]);
    let plain = c.submit(&["--cores", "3", "--runtime", "30"]);
    c.wait_state(gpu[0], "running");
    c.wait_state(plain[0], "running");
    // Both on vn1: first fit, and the plain job needs no device.
    assert_eq!(c.job(gpu[0])["devices"], "vn1:gpu=0,1");
    assert_eq!(c.job(plain[0])["nodes"], "vn1");
    assert_eq!(c.job(plain[0])["devices"], serde_json::Value::Null);
    c.wait_for("the job's process", || c.pids(plain[0]).len() == 1);
    assert_eq!(env_of(c.pids(plain[0])[0], "CUDA_VISIBLE_DEVICES"), None);
    c.ok(&["cancel", &gpu[0].to_string(), &plain[0].to_string()]);
}

#[test]
fn a_job_on_thousands_of_gpu_nodes_starts_and_records_every_one() {
    // 8,000 nodes of 4 GPUs: the job's devices, written out, are longer
    // than the 128 KiB Linux allows one argument of a new process.
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), "vn[0001-8000]", 1, true, "") + "gpus = 4\n";
    let c = Cluster::start_text(dir, &text);
    let id = c.submit(&["--cores", "8000", "--gpus", "4", "--runtime", "0.5"])[0];
    let devices = c.job(id)["devices"].as_str().unwrap().len();
    assert!(devices > 128 << 10, "{devices} bytes of devices");
    c.ok(&["wait", &id.to_string()]);
    assert_eq!(c.state(id), "completed", "{}", c.log());
    let r = c.record(id);
    assert_eq!(r.devices.len(), 8000);
    assert!(r
        .devices
        .iter()
        .all(|d| d.kind == "gpu" && d.ids == [0, 1, 2, 3]));
    assert_eq!(r.devices[7999].node, "vn8000");
}
