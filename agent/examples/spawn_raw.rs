//! The baseline of the end-to-end throughput benchmark
//! (scripts/bench-throughput.sh): start and reap `sigsleep` as fast as one
//! process can, without clemu. Every job is a zero-length sigsleep with the
//! arguments an agent gives it, in a process group of its own, appending
//! its record to LOG; at most CONCURRENCY run at once.
//!
//!   spawn_raw SIGSLEEP JOBS CONCURRENCY LOG
//!
//! Prints the jobs per second.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!("usage: spawn_raw SIGSLEEP JOBS CONCURRENCY LOG");
        std::process::exit(2)
    };
    if args.len() != 5 {
        usage();
    }
    let (Ok(jobs), Ok(width)) = (args[2].parse::<u64>(), args[3].parse::<u64>()) else {
        usage()
    };
    let (sigsleep, log) = (&args[1], &args[4]);
    let me = std::process::id().to_string();
    let start = Instant::now();
    let mut children = std::collections::HashMap::new();
    let mut next = 1;
    let mut done = 0;
    while done < jobs {
        while next <= jobs && (children.len() as u64) < width {
            let child = Command::new(sigsleep)
                .args(["--runtime", "0.000000000", "--walltime", "0.000000000"])
                .args(["--id", &next.to_string(), "--cores", "1"])
                .args(["--submit", "0.000000000", "--node", "vn0001", "--log", log])
                .args(["--die-with-parent", &me])
                .process_group(0)
                .stdin(Stdio::null())
                .spawn();
            match child {
                Ok(c) => {
                    children.insert(c.id() as i32, c);
                }
                Err(e) => {
                    eprintln!("spawn_raw: cannot start {sigsleep}: {e}");
                    std::process::exit(1);
                }
            }
            next += 1;
        }
        // Any child: the first to end frees a slot.
        match nix::sys::wait::wait() {
            Ok(status) => {
                if let Some(pid) = status.pid() {
                    children.remove(&pid.as_raw());
                    done += 1;
                }
            }
            Err(e) => {
                eprintln!("spawn_raw: wait: {e}");
                std::process::exit(1);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{:.1}", jobs as f64 / secs);
}
