//! A job's processes as `/proc` lists them: sigsleep and, below it, the
//! program and everything it started (sigsleep is their subreaper, so
//! even a daemon that left the session comes back under it). sigsleep
//! reads it to suspend, resume and end the job; the agent reads it to send
//! a signal to part of a job, as Slurm's `scancel --signal` does.

/// Every process below `root`, parents before their children, read from
/// `/proc/PID/task/TID/children`. Zombies are left out: they run nothing
/// and can take no signal.
pub fn descendants_of(root: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for child in children(pid) {
            if !zombie(child) {
                out.push(child);
            }
            todo.push(child);
        }
    }
    out
}

/// The program sigsleep `root` runs (a batch script's shell): its child
/// that started first. The others are orphans of the program's own
/// processes, which started after it.
pub fn program_of(root: i32) -> Option<i32> {
    children(root)
        .into_iter()
        .filter(|&c| !zombie(c))
        .min_by_key(|&c| (start_ticks(c), c))
}

/// The tasks of the job's steps: what every `srun` of the job runs (the
/// processes below each process named `srun`), not srun itself nor the
/// batch script, as Slurm's steps are signalled apart from its batch step.
pub fn step_tasks_of(root: i32) -> Vec<i32> {
    let all = descendants_of(root);
    let mut out = Vec::new();
    for &pid in &all {
        if comm(pid).as_deref() == Some("srun") {
            out.extend(descendants_of(pid));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The tasks of a step of the job below `root`, whose srun is process
/// `srun` started at `ticks` ([`start_ticks`], as that srun wrote them
/// down): everything below that srun, as `scancel JOB.STEP` reaches it.
/// None if that srun is gone, or is not the job's (its pid another
/// process's by now).
pub fn srun_tasks(root: i32, srun: i32, ticks: u64) -> Vec<i32> {
    if ticks == u64::MAX || start_ticks(srun) != ticks || !descendants_of(root).contains(&srun) {
        return Vec::new();
    }
    descendants_of(srun)
}

/// CPU time of this process's reaped children (a job's processes under
/// sigsleep, a step's tasks under srun), and the largest resident set of
/// one, in KiB.
pub fn children_usage() -> (u64, u64) {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage fills the struct on success.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, u.as_mut_ptr()) } != 0 {
        return (0, 0);
    }
    // SAFETY: filled by the successful call above.
    let u = unsafe { u.assume_init() };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (ns(u.ru_utime) + ns(u.ru_stime), u.ru_maxrss.max(0) as u64)
}

/// The memory `pid` holds, in KiB (0 once it is gone): its proportional
/// set (`Pss` of `/proc/PID/smaps_rollup`), which shares a page among the
/// processes that map it, so a job that forks is not counted a page per
/// process; else its resident set (`/proc/PID/statm`).
pub fn memory_kib(pid: i32) -> u64 {
    let pss = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Pss:"))?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        });
    if let Some(kib) = pss {
        return kib;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page / 1024)
}

fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    out
}

/// `/proc/PID/stat` after the command's closing parenthesis.
fn stat_tail(pid: i32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(')')
        .map(|(_, rest)| rest.trim_start().to_string())
}

/// When `pid` started, in clock ticks since boot (field 22 of its stat).
pub fn start_ticks(pid: i32) -> u64 {
    stat_tail(pid)
        .and_then(|t| t.split_whitespace().nth(19)?.parse().ok())
        .unwrap_or(u64::MAX)
}

fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|c| c.trim_end().to_string())
}

/// Whether `pid` is over: a zombie (or gone). A process whose main thread
/// ended while others run shows as a zombie too, but is not one: it still
/// has live threads.
fn zombie(pid: i32) -> bool {
    let z = stat_tail(pid).is_none_or(|t| t.starts_with('Z'));
    z && std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) <= 1
}
