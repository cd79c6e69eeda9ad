//! The host report: the machine's load and memory and what the agent's job
//! processes hold, read from `/proc`. It costs one small read per live job,
//! so the uplink makes it every few heartbeats, off the async threads.

use formats::wire::HostReport;

/// Reads the host's load and memory and the memory of the processes
/// `pids` (those that have ended meanwhile are left out).
pub fn report(pids: &[i32]) -> HostReport {
    let mut r = HostReport::default();
    if let Ok(text) = std::fs::read_to_string("/proc/loadavg") {
        for (slot, field) in r.load.iter_mut().zip(text.split_whitespace()) {
            *slot = field.parse().unwrap_or(0.0);
        }
    }
    if let Ok(text) = std::fs::read_to_string("/proc/meminfo") {
        for line in text.lines() {
            let kb = || {
                line.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            if line.starts_with("MemTotal:") {
                r.mem_total_kb = kb();
            } else if line.starts_with("MemAvailable:") {
                r.mem_available_kb = kb();
            }
        }
    }
    let page_kb = page_size() / 1024;
    for &pid in pids {
        // statm: size resident shared text lib data dt, in pages.
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/statm")) else {
            continue;
        };
        let mut f = text
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse::<u64>().unwrap_or(0));
        let (resident, shared) = (f.next().unwrap_or(0), f.next().unwrap_or(0));
        r.jobs_alive += 1;
        r.jobs_rss_kb += resident * page_kb;
        r.jobs_private_kb += resident.saturating_sub(shared) * page_kb;
    }
    r
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).unwrap_or(4096).max(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_this_host_and_a_live_process() {
        // The test process itself is the live process: a child would race
        // with the spawner tests, whose reaper collects any child of this
        // process.
        let r = super::report(&[std::process::id() as i32, i32::MAX]);
        assert!(
            r.mem_total_kb > 0 && r.mem_available_kb <= r.mem_total_kb,
            "{r:?}"
        );
        assert_eq!(r.jobs_alive, 1, "the missing pid is left out");
        assert!(
            r.jobs_rss_kb > 0 && r.jobs_private_kb <= r.jobs_rss_kb,
            "{r:?}"
        );
    }
}
