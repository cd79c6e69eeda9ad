//! How long this host takes to wake a sleeping process: the floor under
//! every hop of an emulated start or end (a signal, a socket, a timer).
//! A parent sleeps a millisecond, stamps the monotonic clock and writes
//! the stamp to a pipe; a child blocked reading it takes the difference.
//! On a virtual machine the figure moves with the load of the host under
//! it, hour to hour; a replay's delays move with it.
//!
//!     cargo run --release -p sigsleep --example host_wakeup [ROUNDS]

use std::io::{Read, Write};
use std::os::fd::FromRawFd;

fn mono_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 2000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("host_wakeup: ROUNDS is a positive whole number");
            std::process::exit(2);
        }
    };
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        eprintln!("host_wakeup: pipe: {}", std::io::Error::last_os_error());
        std::process::exit(1);
    }
    // SAFETY: no other thread runs here, so the child may go on in Rust.
    match unsafe { libc::fork() } {
        -1 => {
            eprintln!("host_wakeup: fork: {}", std::io::Error::last_os_error());
            std::process::exit(1);
        }
        0 => {
            // The write end is the parent's: closed here, so that a parent
            // gone early ends the reads instead of leaving them waiting.
            // SAFETY: both descriptors are this process's, each owned once.
            unsafe { libc::close(fds[1]) };
            let mut pipe = unsafe { std::fs::File::from_raw_fd(fds[0]) };
            let mut late = Vec::with_capacity(rounds);
            let mut stamp = [0u8; 8];
            for _ in 0..rounds {
                if pipe.read_exact(&mut stamp).is_err() {
                    std::process::exit(1);
                }
                late.push(mono_ns() - i64::from_ne_bytes(stamp));
            }
            late.sort_unstable();
            let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize] as f64 / 1e3;
            let mean = late.iter().sum::<i64>() as f64 / late.len() as f64 / 1e3;
            println!(
                "wake-up through a pipe, {rounds} rounds (µs): p50 {:.1}, p90 {:.1}, p99 {:.1}, mean {mean:.1}",
                at(0.5),
                at(0.9),
                at(0.99)
            );
            std::process::exit(0);
        }
        child => {
            // The read end is the child's: closed here, so that a child
            // gone early fails the writes instead of filling the pipe.
            // SAFETY: both descriptors are this process's, each owned once.
            unsafe { libc::close(fds[0]) };
            let mut pipe = unsafe { std::fs::File::from_raw_fd(fds[1]) };
            for _ in 0..rounds {
                std::thread::sleep(std::time::Duration::from_millis(1));
                if pipe.write_all(&mono_ns().to_ne_bytes()).is_err() {
                    break;
                }
            }
            drop(pipe);
            let mut status = 0;
            // SAFETY: `child` is this process's child.
            let waited = unsafe { libc::waitpid(child, &mut status, 0) };
            std::process::exit(if waited == child && status == 0 { 0 } else { 1 });
        }
    }
}
