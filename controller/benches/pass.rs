//! One scheduling pass of the `easy` policy on configs/raijin-3600.toml
//! (3,600 nodes, 57,600 cores), full of running jobs, with 10,000 and
//! 100,000 jobs queued behind them: what the server does each time a job
//! arrives or ends (take a snapshot view, run the policy), timed over
//! repeated passes.
//!
//!   cargo bench -p controller --bench pass [-- [CONFIG.toml] QUEUED...]
//!
//! CONFIG (relative to the repository) replaces raijin-3600, such as
//! configs/fugaku.toml (158,976 nodes of 48 cores).
//!
//! Jobs are drawn from a fixed pseudo-random sequence (sizes 1 to 2,048
//! cores, skewed small as in real traces; run times of a minute to a day;
//! wall-time requests 1 to 3 times the run time), so every run schedules
//! the same queue. Two cases:
//!
//! - **mixed**: the machine filled with such jobs, the queue behind them;
//!   the first pass backfills what fits, later ones find nothing to start.
//! - **fragmented** (the worst case for backfilling): every node runs a
//!   15-core job, so 3,600 single cores are free all over the machine; the
//!   head of the queue asks for the whole machine, and every job behind it
//!   that would fit in the free cores runs past the head's reservation, so
//!   each pass considers every one of them and starts none.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use controller::config::Cluster as Config;
use controller::core::{Discard, Now};
use formats::wire::JobSpec;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn job(&mut self) -> JobSpec {
        // Half the jobs small (1-16 cores), the rest up to 2,048 cores.
        let cores = if self.next().is_multiple_of(2) {
            1 + (self.next() % 16) as u32
        } else {
            1 << (self.next() % 12)
        };
        let runtime_s = 60 + self.next() % 86_400;
        let walltime_s = runtime_s * (1 + self.next() % 3);
        JobSpec {
            cores,
            runtime_ns: runtime_s * 1_000_000_000,
            walltime_ns: walltime_s * 1_000_000_000,
            ..Default::default()
        }
    }
}

fn main() {
    let queued: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && !a.ends_with(".toml"))
        .filter_map(|a| a.parse().ok())
        .collect();
    let queued = if queued.is_empty() {
        vec![10_000, 100_000]
    } else {
        queued
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = std::env::args()
        .skip(1)
        .find(|a| a.ends_with(".toml"))
        .unwrap_or_else(|| "configs/raijin-3600.toml".into());
    let config = match Config::load(&root.join(path)) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("pass: {e:#}");
            std::process::exit(2);
        }
    };
    println!(
        "| case | queued jobs | running jobs | cores busy | pass p50 | pass max | first pass (starts) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for fragmented in [false, true] {
        for &q in &queued {
            bench(&config, q, fragmented);
        }
    }
}

fn bench(config: &Arc<Config>, queued: usize, fragmented: bool) {
    let now = Now {
        mono: 1_000_000_000,
        wall: 1_700_000_000_000_000_000,
    };
    let mut cluster = common::cluster_up("pass", config, now);
    let policy = controller::policy(config, false);
    let mut rng = Lcg(42);
    let cores = config.total_cores();
    let hour = 3_600_000_000_000;
    if fragmented {
        let per_node = JobSpec {
            cores: config.nodes[0].cpus - 1,
            runtime_ns: hour,
            walltime_ns: hour,
            ..Default::default()
        };
        let n = config.nodes.len();
        cluster
            .submit(vec![per_node; n], 0, now, &mut Discard)
            .expect("submit");
        let decisions = policy.decide(&cluster.view(now)).list;
        cluster.apply(decisions, now, &mut Discard);
        let head = JobSpec {
            cores: cores as u32,
            ..rng.job()
        };
        let mut queue = vec![head];
        queue.extend((1..queued).map(|_| {
            let mut j = rng.job();
            j.walltime_ns = j.walltime_ns.max(2 * hour);
            j
        }));
        cluster.submit(queue, 0, now, &mut Discard).expect("submit");
    } else {
        // Fill the machine: jobs for its cores, started by one pass.
        let mut fill = Vec::new();
        let mut sum = 0;
        while sum < cores {
            let j = rng.job();
            sum += u64::from(j.cores);
            fill.push(j);
        }
        cluster.submit(fill, 0, now, &mut Discard).expect("submit");
        let decisions = policy.decide(&cluster.view(now)).list;
        cluster.apply(decisions, now, &mut Discard);
        let queue = (0..queued).map(|_| rng.job()).collect();
        cluster.submit(queue, 0, now, &mut Discard).expect("submit");
    }

    // The first pass over the new queue backfills what fits; the later
    // ones find nothing to start: the steady cost of a pass.
    let t = Instant::now();
    let decisions = policy.decide(&cluster.view(now)).list;
    let first = t.elapsed();
    let started = decisions.len();
    cluster.apply(decisions, now, &mut Discard);
    let mut times: Vec<Duration> = (0..21)
        .map(|_| {
            let t = Instant::now();
            let d = policy.decide(&cluster.view(now));
            let took = t.elapsed();
            assert!(d.list.is_empty(), "a later pass started jobs");
            took
        })
        .collect();
    times.sort();
    let busy: u64 = cluster
        .view(now)
        .nodes
        .iter()
        .map(|n| u64::from(n.cpus - n.free_cpus))
        .sum();
    let running = cluster.active_jobs() - cluster.view(now).queue.len();
    println!(
        "| {} | {} | {running} | {busy} of {cores} | {:.2} ms | {:.2} ms | {:.2} ms ({started}) |",
        if fragmented { "fragmented" } else { "mixed" },
        cluster.view(now).queue.len(),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        ms(first),
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
