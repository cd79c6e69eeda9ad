//! The controller's part of a job's start, by the job's size, in one
//! process: on configs/fugaku.toml (158,976 nodes of 48 cores, every
//! agent up), a job of N whole nodes is submitted alone, then one pass
//! runs (the view, the `easy` policy, the decision carried out), and the
//! job's end is taken. Sizes take turns, so the machine's noise falls on
//! all of them alike.
//!
//!   cargo bench -p controller --bench wide [-- ROUNDS [SIZE...]]
//!
//! Prints one Markdown table: each size's pass at p50 and p90, its end,
//! and the p50's difference from the one-node job's. No process starts:
//! this is what `scripts/bench-wide-start.sh` measures end to end less the
//! agent, the process and the wire.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use controller::config::Cluster as Config;
use controller::core::{Discard, Now};
use formats::wire::{Exit, JobSpec};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse::<usize>().ok());
    let rounds = args.next().unwrap_or(30);
    let mut sizes: Vec<usize> = args.collect();
    if sizes.is_empty() {
        sizes = vec![1, 1_000, 10_000, 80_000];
    }
    // As the controller's process does.
    controller::keep_freed_memory();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = match Config::load(&root.join("configs/fugaku.toml")) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("wide: {e:#}");
            std::process::exit(2);
        }
    };
    let mut now = Now {
        mono: 1_000_000_000,
        wall: 1_700_000_000_000_000_000,
    };
    let mut cluster = common::cluster_up("wide", &config, now);
    let mut scheduler =
        controller::core::Scheduler::new(controller::policy(&config, false), Duration::ZERO);
    let cpus = config.nodes[0].cpus;
    let mut passes: Vec<Vec<Duration>> = vec![Vec::new(); sizes.len()];
    let mut ends: Vec<Vec<Duration>> = vec![Vec::new(); sizes.len()];
    for _ in 0..rounds {
        for (k, &size) in sizes.iter().enumerate() {
            let spec = JobSpec {
                cores: cpus * size as u32,
                runtime_ns: 3_600_000_000_000,
                walltime_ns: 3_600_000_000_000,
                ..Default::default()
            };
            now.mono += 1_000_000;
            now.wall += 1_000_000;
            let ids = cluster
                .submit(vec![spec], 0, now, &mut Discard)
                .expect("submit");
            let t = Instant::now();
            scheduler.pass(&mut cluster, now, &mut Discard);
            passes[k].push(t.elapsed());
            let id = ids[0];
            // First fit on an empty machine: from its first node, whose
            // agent came up first.
            let agent = 1;
            if !cluster.runs(agent, id) {
                eprintln!("wide: the job of {size} nodes did not start");
                std::process::exit(1);
            }
            now.mono += 1_000_000;
            now.wall += 1_000_000;
            let t = Instant::now();
            cluster.job_ended(agent, id, Exit::Code(0), now, &mut Discard);
            ends[k].push(t.elapsed());
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |v: &mut Vec<Duration>, q: f64| {
        v.sort();
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    println!("| nodes | pass p50 (ms) | pass p90 | p50 − 1 node's | end p50 (ms) |");
    println!("|---:|---:|---:|---:|---:|");
    let base = ms(at(&mut passes[0], 0.5));
    for (k, &size) in sizes.iter().enumerate() {
        let p50 = ms(at(&mut passes[k], 0.5));
        println!(
            "| {size} | {p50:.3} | {:.3} | {:+.3} | {:.3} |",
            ms(at(&mut passes[k], 0.9)),
            p50 - base,
            ms(at(&mut ends[k], 0.5)),
        );
    }
}
