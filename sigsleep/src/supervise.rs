//! A program as the job: sigsleep runs it, times it as it times a sleep,
//! and makes sure nothing of it outlives the job.
//!
//! The program starts in sigsleep's process group, so the launcher's
//! signals to the group reach it as they reach sigsleep. sigsleep is the
//! subreaper of everything the program starts: a process that leaves the
//! group (a daemon calling `setsid`) and is orphaned comes back to it as a
//! child, so the job's processes are always sigsleep's descendants, read
//! from `/proc/PID/task/TID/children`.
//!
//! - **Suspend** (`SIGTSTP`): the instant is recorded; the processes that
//!   left the group get the `SIGTSTP` the group got, and `--suspend-grace`
//!   later every process of the job gets `SIGSTOP`, as Slurm does. sigsleep
//!   itself does not stop: it goes on hearing signals.
//! - **Resume** (`SIGCONT`): every process of the job gets `SIGCONT`.
//!   Suspended time counts neither as run time nor towards the limit.
//! - **The end**: the program's exit, or `SIGTERM`/`SIGINT` (cancel), or
//!   the wall-time limit (every process gets `SIGTERM`, and `--kill-wait`
//!   later `SIGKILL`). `--signal` warns the job before the limit. Once the
//!   job is over, every process left is killed with `SIGKILL` and reaped,
//!   until none is left, and the record says how the program ended.

use std::ffi::OsString;
use std::fs::File;

use formats::record::Status;

use crate::cli::Program;
use crate::clock::{self, Stamp};
use crate::ledger::{Event, Ledger};
use crate::signals::{self, Waiter};

/// What Slurm's step writes to the job's error file after an OOM kill,
/// for job `id`'s batch step.
pub fn oom_message(id: u64, kills: u32) -> String {
    format!(
        "slurmstepd: error: Detected {kills} oom-kill event(s) in StepId={id}.batch. Some of \
         your processes may have been killed by the cgroup out-of-memory handler.\n"
    )
}

/// The line Slurm's step writes to a batch job's error file when the job
/// is told to end, `why` (none: a cancel), at `at` (local time, as Slurm's
/// default time format prints it).
pub fn end_message(id: u64, node: &str, at: i64, why: Option<&str>) -> String {
    let due = why.map(|w| format!(" DUE TO {w}")).unwrap_or_default();
    let at = local_date(at.div_euclid(1_000_000_000)).unwrap_or_else(|| "Unknown".into());
    format!("slurmstepd: error: *** JOB {id} ON {node} CANCELLED AT {at}{due} ***\n")
}

/// Slurm's `slurm_make_time_str` with its default format: `s` (seconds
/// since the epoch) in local time, `YYYY-MM-DDTHH:MM:SS`; `None` for a
/// time the C library cannot convert. Built against musl, it sets `TZ`
/// for a moment ([`zone`]): only for a program of one thread, as
/// sigsleep is (clemu's other programs are built against glibc).
pub fn local_date(s: i64) -> Option<String> {
    #[cfg(target_env = "musl")]
    let _zone = zone::Pinned::new();
    // The C library's time_t, unnamed: the libc crate marks musl's as
    // deprecated (a 64-bit type there too, on x86-64).
    let t = [s as _];
    // SAFETY: localtime_r reads `t` and writes only into `tm`, which
    // lives for the call; no pointer outlives it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(t.as_ptr(), &mut tm) }.is_null() {
        return None;
    }
    Some(format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    ))
}

/// The time zone as glibc reads `TZ`, for musl's build: a zone's name
/// that also reads as a POSIX rule (`PST8PDT`, `EST5EDT`) is the rule to
/// musl, which then keeps summer time all year, and musl knows no
/// `TZDIR`; glibc reads the zone's file, `${TZDIR:-/usr/share/zoneinfo}/$TZ`.
/// While a [`zone::Pinned`] lives, `TZ` names that file (`:PATH`), as both
/// read it alike; then it is as it was, for the job's processes to come.
#[cfg(target_env = "musl")]
mod zone {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStrExt;

    extern "C" {
        fn tzset();
    }

    pub struct Pinned(Option<OsString>);

    impl Pinned {
        pub fn new() -> Pinned {
            let Some(tz) = std::env::var_os("TZ") else {
                return Pinned(None);
            };
            // `:NAME` is NAME's file to both; an absolute path is read alike.
            let name = tz.as_bytes().strip_prefix(b":").unwrap_or(tz.as_bytes());
            if name.is_empty() || name[0] == b'/' {
                return Pinned(None);
            }
            let dir = std::env::var_os("TZDIR").unwrap_or_else(|| "/usr/share/zoneinfo".into());
            let file = std::path::Path::new(&dir).join(std::ffi::OsStr::from_bytes(name));
            // Only a zone file: glibc reads anything else as a rule, as
            // musl does.
            let mut magic = [0u8; 4];
            let zone_file = std::fs::File::open(&file)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .is_ok_and(|()| &magic == b"TZif");
            if !zone_file {
                return Pinned(None);
            }
            let mut pinned = OsString::from(":");
            pinned.push(file);
            // sigsleep has one thread: nothing reads the environment
            // meanwhile.
            std::env::set_var("TZ", pinned);
            // SAFETY: tzset takes no arguments and only reads TZ.
            unsafe { tzset() };
            Pinned(Some(tz))
        }
    }

    impl Drop for Pinned {
        fn drop(&mut self) {
            if let Some(tz) = self.0.take() {
                std::env::set_var("TZ", tz);
                // SAFETY: as above.
                unsafe { tzset() };
            }
        }
    }
}

/// Appends `text` where the job's errors go (its error file, else its
/// output file); to sigsleep's own standard error if it has neither or
/// cannot write there.
pub fn tell_job(prog: &Program, text: &str) {
    use std::io::Write;
    let written = prog.stderr.as_ref().or(prog.stdout.as_ref()).map(|path| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
    });
    if !matches!(written, Some(Ok(()))) {
        eprint!("{text}");
    }
}

/// Slurm's step line for a job told to end, with why when it is more
/// than a cancel (the value its SIGTERM carried).
fn tell_cancelled(prog: &Program, step: &Step, at: i64) {
    let why = match signals::end_why() {
        signals::EndWhy::Cancelled => None,
        signals::EndWhy::Preempted => Some("PREEMPTION"),
        signals::EndWhy::Requeued => Some("JOB REQUEUE"),
    };
    tell_job(prog, &end_message(step.id, step.node, at, why));
}

/// Who the job is, for the lines written to its files: its id and the
/// node it runs on.
pub struct Step<'a> {
    pub id: u64,
    pub node: &'a str,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It could not be started (126: not executable, 127: not found), as a
    /// shell says.
    NotStarted(i32),
    /// Its output or error file could not be opened (this error number),
    /// so it was never launched. `--exit-file` says Slurm's launch
    /// failure, for the launcher that shows the job as Slurm does.
    NoOutput(i32),
}

pub use formats::record::SLURM_LAUNCH_FAILURE;

/// The job's end, as the record and sigsleep's exit status say it.
#[derive(Debug)]
pub struct Ended {
    pub status: Status,
    pub exit: Exit,
    pub end: Stamp,
    /// User and system CPU time of every process of the job.
    pub cpu_ns: u64,
    /// The largest resident set of any one of them, in KiB.
    pub max_rss_kib: u64,
    /// How many of its processes were killed for going over
    /// `--mem-limit`.
    pub oom_kills: u32,
}

impl Ended {
    /// `--exit-file`'s line: `STATE CODE SIGNAL`.
    pub fn exit_line(&self) -> String {
        let (code, signal) = match self.exit {
            Exit::Code(c) | Exit::NotStarted(c) => (c, 0),
            Exit::Signal(s) => (0, s),
            Exit::NoOutput(_) => (0, SLURM_LAUNCH_FAILURE),
        };
        format!("{} {code} {signal}\n", self.state())
    }

    /// How the job ended, as `--exit-file` names it: the record's status,
    /// or `out_of_memory` for a job not cancelled nor timed out that had
    /// a process killed for memory (as Slurm's job whose step saw an OOM
    /// kill ends OUT_OF_MEMORY however its script exits).
    pub fn state(&self) -> &'static str {
        match self.status {
            Status::Failed if self.oom_kills > 0 => "out_of_memory",
            s => s.as_str(),
        }
    }

    /// How the program ended, as its record keeps it.
    pub fn program_end(&self) -> formats::record::ProgramEnd {
        use formats::record::ProgramEnd;
        let (kind, value) = match self.exit {
            Exit::Code(c) => (ProgramEnd::EXITED, c),
            Exit::Signal(s) => (ProgramEnd::SIGNALED, s),
            Exit::NotStarted(c) => (ProgramEnd::NOT_STARTED, c),
            Exit::NoOutput(errno) => (ProgramEnd::NOT_LAUNCHED, errno),
        };
        ProgramEnd {
            kind,
            value,
            cpu_ns: self.cpu_ns,
            max_rss_kib: self.max_rss_kib,
        }
    }

    /// sigsleep's exit status: 0 completed; 124 timeout; 128+N cancelled
    /// by signal N; otherwise the program's own (its code, or 128+N for a
    /// signal, 126 or 127 when it could not start).
    pub fn code(&self, terminated_by: Option<i32>) -> i32 {
        match (self.status, terminated_by) {
            (Status::Completed, _) => 0,
            (Status::Timeout, _) => crate::EXIT_TIMEOUT,
            (Status::Cancelled, Some(sig)) => 128 + sig,
            _ => match self.exit {
                Exit::Code(c) | Exit::NotStarted(c) => c,
                Exit::NoOutput(_) => 126,
                Exit::Signal(s) => 128 + s,
            },
        }
    }
}

/// Why the job is ending, once it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Cancelled,
    Timeout,
}

/// Runs `prog` as the job started at `start`, until it is over; the
/// ledger counts its suspensions.
pub fn run(prog: &Program, step: &Step, waiter: &mut Waiter, ledger: &mut Ledger) -> Ended {
    // Watched through its signalfd: the wait must not let it in.
    waiter.keep_blocked(libc::SIGCHLD);
    let chld = match sigchld_fd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("sigsleep: cannot watch the program (signalfd): {e}");
            return not_started(126);
        }
    };
    // SAFETY: plain prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if ledger.terminated_by().is_some() {
        // Cancelled together with its start (a held process that got both
        // at once): the program never runs.
        return Ended {
            status: Status::Cancelled,
            ..not_started(0)
        };
    }
    if !children_readable() {
        eprintln!(
            "sigsleep: this kernel does not list a process's children \
             (/proc/PID/task/TID/children): processes the program leaves may outlive the job"
        );
    }
    let main = match spawn(prog) {
        Ok(pid) => pid,
        Err(exit) => {
            return Ended {
                exit,
                ..not_started(0)
            }
        }
    };
    let mut main_exit = None;
    let mut ending = None;
    let mut kill_at: Option<i64> = None;
    let mut stop_at: Option<i64> = None;
    let mut warned = prog.signal.is_none();
    // With `--mem-limit`: when the job's memory is next sampled, and
    // whether it ever went over.
    let mut sample_at = prog.mem_limit_kib.map(|_| clock::now().mono);
    let mut oom_kills = 0;
    if ledger.deadline().is_none() {
        // Suspended before the program existed (a held process started
        // and suspended at once): it has not had the group's SIGTSTP.
        signal_all(libc::SIGTSTP, |_| true);
        stop_at = Some(grace_end(prog));
    }
    // A SIGTSTP seen by the last wait, taken once the signals handled
    // during that wait (which came first) are.
    let mut suspend = false;
    loop {
        let mut events = [None; signals::CAP];
        let mut n = 0;
        signals::drain(|ev| {
            if let Some(slot) = events.get_mut(n) {
                *slot = Some(ev);
                n += 1;
            }
        });
        for ev in events.iter().flatten() {
            ledger.apply(*ev);
            match ev {
                Event::Resume(_) => {
                    stop_at = None;
                    signal_all(libc::SIGCONT, |_| true);
                }
                Event::Terminate(at, _) if ending.is_none() => {
                    ending = Some(Ending::Cancelled);
                    tell_cancelled(prog, step, at.real);
                    // Ending: nothing is stopped any more.
                    stop_at = None;
                    kill_at = Some(cancel_all(prog));
                }
                _ => {}
            }
        }
        // A job being ended is not suspended: its processes must be free
        // to act on the SIGTERM they got.
        if std::mem::take(&mut suspend) && ending.is_none() {
            ledger.apply(Event::Suspend(clock::now()));
            // The group got the launcher's SIGTSTP; those that left it
            // get it from here.
            let group = own_group();
            signal_all(libc::SIGTSTP, |pid| pgid(pid) != group);
            stop_at = Some(grace_end(prog));
        }
        reap(main, &mut main_exit);
        if main_exit.is_some() {
            break;
        }
        let now = clock::now().mono;
        if kill_at.is_some_and(|k| now >= k) {
            break;
        }
        if stop_at.is_some_and(|t| now >= t) {
            stop_at = None;
            signal_all(libc::SIGSTOP, |_| true);
        }
        if let (Some(at), Some(limit)) = (sample_at, prog.mem_limit_kib) {
            // Not while suspended: its stopped processes free nothing.
            if now >= at && ending.is_none() && ledger.deadline().is_some() {
                oom_kills += u32::from(kill_over_memory(limit));
                sample_at = Some(now.saturating_add(MEM_SAMPLE_NS));
            }
        }
        // None while suspended: suspended time does not count.
        let deadline = ledger.deadline();
        if ending.is_none() && deadline.is_some_and(|d| now >= d) {
            ending = Some(Ending::Timeout);
            stop_at = None;
            let at = clock::now().real;
            tell_job(
                prog,
                &end_message(step.id, step.node, at, Some("TIME LIMIT")),
            );
            kill_at = Some(end_all(prog, |_| true));
        }
        let warn_at = match (prog.signal, deadline) {
            (Some(w), Some(d)) if !warned && ending.is_none() => {
                Some(d.saturating_sub(w.before_ns.min(i64::MAX as u64) as i64))
            }
            _ => None,
        };
        if let (Some(at), Some(w)) = (warn_at, prog.signal) {
            if now >= at {
                warned = true;
                if w.program_only {
                    // SAFETY: a signal to the program's own pid, not reaped
                    // yet (it is our child: its pid cannot be reused).
                    unsafe { libc::kill(main, w.signal) };
                } else {
                    signal_all(w.signal, |_| true);
                }
                continue;
            }
        }
        let next = [
            deadline.filter(|_| ending.is_none()),
            warn_at,
            stop_at,
            kill_at,
            sample_at.filter(|_| ending.is_none()),
        ]
        .into_iter()
        .flatten()
        .min();
        let (stop, child) = waiter.wait(next, Some(chld));
        // A new limit: the next turn weighs the deadline again (and a
        // `--signal` warning, if it has not gone yet).
        if let Some(walltime) = waiter.new_limit() {
            ledger.set_walltime(walltime, crate::clock::now());
        }
        if child {
            drain_fd(chld);
        }
        if stop {
            waiter.consume_stop();
            suspend = true;
        }
    }
    // A SIGTERM to the whole group (a terminal's, or a launcher other than
    // the agent, which signals this process alone) reaches the program and
    // this process at once: the program may have died of it before this
    // process took its own, still pending (blocked, or left pending by a
    // wait that returned for a ready descriptor). Then the job counts as
    // cancelled, not failed.
    let mut late = None;
    signals::drain(|ev| {
        if let Event::Terminate(at, _) = ev {
            late.get_or_insert(at);
        }
        ledger.apply(ev);
    });
    if ending.is_none() {
        let late = late.or_else(|| {
            let sig = signals::end_pending()?;
            let at = clock::now();
            ledger.apply(Event::Terminate(at, sig));
            Some(at)
        });
        if let Some(at) = late {
            ending = Some(Ending::Cancelled);
            tell_cancelled(prog, step, at.real);
        }
    }
    kill_everything(main, &mut main_exit);
    let end = clock::now();
    let exit = main_exit.unwrap_or(Exit::Signal(libc::SIGKILL));
    let status = match ending {
        Some(Ending::Cancelled) => Status::Cancelled,
        Some(Ending::Timeout) => Status::Timeout,
        // A process killed for memory fails the job, whatever the
        // program made of it.
        None if exit == Exit::Code(0) && oom_kills == 0 => Status::Completed,
        None => Status::Failed,
    };
    let (cpu_ns, max_rss_kib) = crate::tree::children_usage();
    Ended {
        status,
        exit,
        end,
        cpu_ns,
        max_rss_kib,
        oom_kills,
    }
}

/// How often a job with `--mem-limit` has its memory sampled.
const MEM_SAMPLE_NS: i64 = 1_000_000_000;

/// When the job's processes hold more than `limit_kib` together, kills
/// the largest of them, as the kernel's out-of-memory killer does in a
/// job's memory cgroup; says whether it did.
fn kill_over_memory(limit_kib: u64) -> bool {
    let me = std::process::id() as i32;
    let sizes: Vec<(u64, i32)> = crate::tree::descendants_of(me)
        .into_iter()
        .map(|pid| (crate::tree::memory_kib(pid), pid))
        .collect();
    if sizes.iter().map(|&(kib, _)| kib).sum::<u64>() <= limit_kib {
        return false;
    }
    let Some(&(_, pid)) = sizes.iter().max() else {
        return false;
    };
    // SAFETY: a signal to a process of the job (our descendant; its pid
    // cannot be reused before we reap it, or its parent does).
    unsafe { libc::kill(pid, libc::SIGKILL) };
    true
}

/// When a suspension begun now stops every process of the job.
fn grace_end(prog: &Program) -> i64 {
    clock::now()
        .mono
        .saturating_add(prog.suspend_grace_ns.min(i64::MAX as u64) as i64)
}

/// Whether this kernel lists a process's children in /proc.
fn children_readable() -> bool {
    let me = std::process::id();
    std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
}

fn not_started(code: i32) -> Ended {
    Ended {
        status: Status::Failed,
        exit: Exit::NotStarted(code),
        end: clock::now(),
        cpu_ns: 0,
        max_rss_kib: 0,
        oom_kills: 0,
    }
}

/// An output file of the job, emptied (unless `keep`: `--open-append`)
/// and opened for appending, as Slurm's step opens it: what sigsleep and
/// srun's steps add to it lands at its end, never under what the program
/// writes next.
fn create_output(path: &std::path::Path, keep: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(!keep)
        .custom_flags(libc::O_APPEND)
        .open(path)
}

/// Starts the program in this process group; a failure is said on
/// standard error (of the job's files when they could be opened) and
/// given as a shell's exit status, or as an output that could not be
/// opened.
fn spawn(prog: &Program) -> Result<i32, Exit> {
    let Some(first) = prog.argv.first() else {
        return Err(Exit::NotStarted(127));
    };
    let out = match &prog.stdout {
        Some(path) => match create_output(path, prog.append) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("sigsleep: cannot open --stdout {}: {e}", path.display());
                return Err(Exit::NoOutput(e.raw_os_error().unwrap_or(0)));
            }
        },
        None => None,
    };
    let err = match (&prog.stderr, &out) {
        (Some(path), _) if Some(path) != prog.stdout.as_ref() => {
            match create_output(path, prog.append) {
                Ok(f) => Some(f),
                Err(e) => {
                    eprintln!("sigsleep: cannot open --stderr {}: {e}", path.display());
                    return Err(Exit::NoOutput(e.raw_os_error().unwrap_or(0)));
                }
            }
        }
        (_, Some(f)) => f.try_clone().ok(),
        _ => None,
    };
    let started = posix_spawn(prog, out.as_ref(), err.as_ref());
    started.map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        };
        let said = format!("sigsleep: cannot run {}: {e}\n", show(first));
        match err {
            Some(mut f) => {
                let _ = std::io::Write::write_all(&mut f, said.as_bytes());
            }
            None => eprint!("{said}"),
        }
        Exit::NotStarted(code)
    })
}

/// Starts `prog` with `posix_spawnp`, which glibc does by `vfork`: a job
/// start then costs no copy of this process's pages (`fork`, which
/// `Command` falls back to for a working directory in a static build,
/// cost 0.2 to 0.4 ms more per `sigsleep -- /bin/true` here; see
/// BENCHMARKS.md). Standard input is `/dev/null`,
/// the outputs are `out` and `err` (else this process's), the working
/// directory is `--chdir`'s. The signal mask is emptied, or a script
/// could not trap SIGTERM and would not stop on SIGTSTP (this process
/// blocks the job's signals), and SIGPIPE is back to its default, as
/// `Command` leaves it; handlers are reset by exec, and a SIGINT the
/// launcher left ignored stays so. The group is this process's.
fn posix_spawn(prog: &Program, out: Option<&File>, err: Option<&File>) -> std::io::Result<i32> {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let cstring = |s: &std::ffi::OsStr| {
        CString::new(s.as_bytes()).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "nul byte in an argument")
        })
    };
    let argv = prog
        .argv
        .iter()
        .map(|a| cstring(a))
        .collect::<std::io::Result<Vec<CString>>>()?;
    let chdir = prog
        .chdir
        .as_ref()
        .map(|d| cstring(d.as_os_str()))
        .transpose()?;
    let mut argv_ptrs: Vec<*mut libc::c_char> =
        argv.iter().map(|a| a.as_ptr().cast_mut()).collect();
    argv_ptrs.push(std::ptr::null_mut());
    let null = File::open("/dev/null")?;
    let ok = |rc: libc::c_int| {
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::from_raw_os_error(rc))
        }
    };
    extern "C" {
        static environ: *const *mut libc::c_char;
    }
    // SAFETY: the attribute and actions objects are initialised before
    // use and destroyed once, below; every pointer handed to glibc (the
    // C strings, the argument vector, the environment) outlives the call.
    unsafe {
        let mut files = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
        ok(libc::posix_spawn_file_actions_init(files.as_mut_ptr()))?;
        let mut attr = std::mem::MaybeUninit::<libc::posix_spawnattr_t>::uninit();
        if let Err(e) = ok(libc::posix_spawnattr_init(attr.as_mut_ptr())) {
            libc::posix_spawn_file_actions_destroy(files.as_mut_ptr());
            return Err(e);
        }
        let f = files.as_mut_ptr();
        let a = attr.as_mut_ptr();
        let mut none = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut none);
        let mut pipe = none;
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let flags = (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short;
        let mut pid = 0;
        let result = ok(libc::posix_spawn_file_actions_adddup2(
            f,
            null.as_raw_fd(),
            0,
        ))
        .and_then(|()| match out {
            Some(o) => ok(libc::posix_spawn_file_actions_adddup2(f, o.as_raw_fd(), 1)),
            None => Ok(()),
        })
        .and_then(|()| match err {
            Some(e) => ok(libc::posix_spawn_file_actions_adddup2(f, e.as_raw_fd(), 2)),
            None => Ok(()),
        })
        .and_then(|()| match &chdir {
            Some(d) => ok(libc::posix_spawn_file_actions_addchdir_np(f, d.as_ptr())),
            None => Ok(()),
        })
        .and_then(|()| ok(libc::posix_spawnattr_setsigmask(a, &none)))
        .and_then(|()| ok(libc::posix_spawnattr_setsigdefault(a, &pipe)))
        .and_then(|()| ok(libc::posix_spawnattr_setflags(a, flags)))
        .and_then(|()| {
            ok(libc::posix_spawnp(
                &mut pid,
                argv[0].as_ptr(),
                f,
                a,
                argv_ptrs.as_ptr(),
                environ,
            ))
        });
        libc::posix_spawnattr_destroy(a);
        libc::posix_spawn_file_actions_destroy(f);
        result.map(|()| pid)
    }
}

fn show(s: &OsString) -> String {
    s.to_string_lossy().into_owned()
}

/// Passes a cancel's `SIGTERM` on to every process of the job, once each.
/// The agent signals this process alone. When it leads its own group (as
/// the agent starts it), the group hears it from the kernel at once, so
/// that a process forked while /proc is walked is not missed, and the walk
/// reaches only those that left the group; this process's own copy finds
/// it cancelled already. Returns when `SIGKILL` follows.
fn cancel_all(prog: &Program) -> i64 {
    let group = own_group();
    // SAFETY: plain system calls.
    if group == unsafe { libc::getpid() } {
        // SAFETY: a signal to this process's own group.
        unsafe { libc::killpg(group, libc::SIGTERM) };
        end_all(prog, |pid| pgid(pid) != group)
    } else {
        end_all(prog, |_| true)
    }
}

/// Signals every process of the job to end: `SIGTERM` (to those `which`
/// names: the others have it) and `SIGCONT` (so that a stopped one can act
/// on it). Returns when `SIGKILL` follows.
fn end_all(prog: &Program, which: impl Fn(i32) -> bool) -> i64 {
    signal_all(libc::SIGTERM, which);
    signal_all(libc::SIGCONT, |_| true);
    clock::now()
        .mono
        .saturating_add(prog.kill_wait_ns.min(i64::MAX as u64) as i64)
}

/// Reaps every child that has ended, noting the program's exit. Returns
/// whether any child is left.
fn reap(main: i32, main_exit: &mut Option<Exit>) -> bool {
    loop {
        let mut status = 0;
        // SAFETY: a valid status pointer; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid == 0 {
            return true;
        }
        if pid < 0 {
            return std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD);
        }
        if pid == main {
            *main_exit = Some(if libc::WIFSIGNALED(status) {
                Exit::Signal(libc::WTERMSIG(status))
            } else {
                Exit::Code(libc::WEXITSTATUS(status))
            });
        }
    }
}

/// Kills every process of the job and reaps them all, until this process
/// has no child left (a process may fork while the others die: round
/// again).
///
/// With no child left, the job has no process left at all, and `/proc`
/// need not be read (the usual end: the program's processes all exited):
/// this process is the subreaper of every one of them, and the kernel
/// hands a process's orphans to it before that process can be reaped.
fn kill_everything(main: i32, main_exit: &mut Option<Exit>) {
    while reap(main, main_exit) {
        let pids = descendants();
        for &pid in &pids {
            // SAFETY: pids read just now from our own descendants; one
            // that has ended is a zombie of ours until reaped, so its pid
            // is not another process's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if !reap(main, main_exit) || descendants().is_empty() {
            // Reap what died between the two looks.
            reap(main, main_exit);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Sends `sig` to every live process of the job for which `which` holds.
fn signal_all(sig: libc::c_int, which: impl Fn(i32) -> bool) {
    for pid in descendants() {
        if which(pid) {
            // SAFETY: as in kill_everything: our descendants' pids.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

fn own_group() -> i32 {
    // SAFETY: plain system call.
    unsafe { libc::getpgrp() }
}

fn pgid(pid: i32) -> i32 {
    // SAFETY: plain system call; -1 for a process gone.
    unsafe { libc::getpgid(pid) }
}

/// Every live process of the job: this process's descendants.
fn descendants() -> Vec<i32> {
    crate::tree::descendants_of(std::process::id() as i32)
}

/// SIGCHLD, blocked, as a readable descriptor.
fn sigchld_fd() -> std::io::Result<libc::c_int> {
    // SAFETY: valid sets; plain system calls.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(fd)
    }
}

/// Empties a signalfd (several SIGCHLD may have merged into one).
fn drain_fd(fd: libc::c_int) {
    let mut info = std::mem::MaybeUninit::<libc::signalfd_siginfo>::uninit();
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: reads whole siginfos into a buffer of that size from a
    // non-blocking descriptor, until none is left.
    while unsafe { libc::read(fd, info.as_mut_ptr().cast(), size) } == size as isize {}
}
