//! sigsleep: one job of an emulated cluster, as a real process.
//!
//! # How it works
//!
//! The job sleeps until it has counted its requested run time while not
//! suspended, then appends one [`formats::record`] frame to a log and exits.
//!
//! 1. [`signals::install`] blocks `SIGTSTP`, `SIGCONT`, `SIGTERM` and
//!    `SIGINT` and installs their handlers before anything else, so a signal
//!    sent right after launch is accounted rather than lost.
//! 2. The start instant is read, the flags parsed, the log opened; with
//!    `--ready-file`, the pid is written there for a launcher that could
//!    not block the signals (a shell) and waits for it before it sends any.
//!    With `--held` (a process started ahead of its job), the start is
//!    instead the first `SIGCONT`, waited for without counting anything.
//!    A launcher that knows when the job started (a controller's start,
//!    by `--started` or carried by that `SIGCONT`) moves the start back
//!    to it: the run counts from the job's start, as a batch system's
//!    accounting counts it, and the process's own launch is part of it
//!    (a sleep's as far as its run time goes: [`job_start`]).
//! 3. The main loop waits in `ppoll` on a timerfd armed at the absolute
//!    deadline; that wait is the only place the job signals are let in
//!    ([`signals`]): handlers log timestamped events and return, and a
//!    pending `SIGTSTP` is noted, then let in with its default action,
//!    which stops the process. After each
//!    wake the loop feeds the events to the [`ledger::Ledger`], which
//!    recomputes the absolute monotonic deadline `start + run time + time
//!    suspended`, so no error accumulates across sleeps. A new wall-time
//!    limit comes as a queued realtime signal read from a signalfd
//!    ([`signals::limit_signal`]); the ledger weighs the deadline again.
//! 4. At the deadline, or on `SIGTERM`/`SIGINT`, the record is encoded and
//!    written with exactly one `write(2)` on an `O_APPEND` file descriptor:
//!    concurrent jobs sharing a log never interleave. A sleep that counted
//!    its time ends, in its record, at its deadline
//!    ([`ledger::Ledger::end_at`]): the host's lateness in waking it is
//!    the emulation's, not its job's run.
//!
//! 5. With a program after `--`, the job is that program instead of a
//!    sleep ([`supervise`]): sigsleep starts it, times its suspensions the
//!    same way, ends it at its limit or on cancel, and once it is over
//!    kills and reaps whatever of it is left (it is the subreaper of them
//!    all) before the record is written. Told to end (a cancel, its limit,
//!    or a `SIGTERM` queued with why: [`signals::send_end`]), it first
//!    writes Slurm's step line saying so to the program's error file.
//!
//! 6. With `--end-fd`, once the record is written, sigsleep writes one
//!    message (pid, exit status, when) to its launcher's socket ([`end`]):
//!    the launcher learns of the end without waiting for the process to
//!    be torn down and reaped, and a start that waits for this end comes
//!    sooner.
//!
//! No async runtime, no threads, one allocation for the record at the end:
//! thousands of these sleep at once on one host. It builds against glibc
//! and musl alike; agents prefer the musl build, whose start-up asks the
//! processor nothing (glibc's probes its caches with CPUID, which a
//! virtual machine traps), when it says their [`SOURCE_ID`].

pub mod cli;
pub mod clock;
pub mod end;
pub mod ledger;
pub mod signals;
pub mod supervise;
pub mod tree;

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::Write;

use formats::record::{self, Flags, JobRecord};

use crate::cli::{Config, Parsed};
use crate::ledger::{Event, Ledger};

/// A digest of the code this build of sigsleep comes from (its sources,
/// the record formats, the lock file), the same for every target
/// (`build.rs`), printed by `sigsleep --source-id`: the agent runs a
/// sigsleep of another build only if it says the digest the agent was
/// built with.
pub const SOURCE_ID: &str = env!("SIGSLEEP_SOURCE_ID");

/// What comes before [`SOURCE_ID`] in the binary ([`SOURCE_ID_MARK`]).
pub const SOURCE_ID_NAME: &str = "clemu-sigsleep-source-id=";

/// [`SOURCE_ID`] as every sigsleep binary carries it, named and ended by
/// a NUL, so that an agent reads it from the file rather than running
/// the program (a process that reaps every child of its own, as the
/// agent does, cannot wait for one of them).
pub const SOURCE_ID_MARK: &str = concat!(
    "clemu-sigsleep-source-id=",
    env!("SIGSLEEP_SOURCE_ID"),
    "\0"
);

/// Exit code: the record could not be written.
pub const EXIT_LOG: i32 = 1;
/// Exit code: usage error.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: the wall-time limit ended the job (as coreutils `timeout`).
pub const EXIT_TIMEOUT: i32 = 124;

/// Runs sigsleep with `args` (the program name first); returns the exit
/// code.
pub fn main_exit_code(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let mut waiter = match signals::install() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("sigsleep: cannot install signal handlers: {e}");
            return EXIT_USAGE;
        }
    };
    let start = clock::now();
    let cfg = match cli::parse(args, std::env::var_os("SIGSLEEP_LOG")) {
        Ok(Parsed::Run(cfg)) => cfg,
        Ok(Parsed::Help) => {
            print!("{}", cli::HELP);
            return 0;
        }
        Ok(Parsed::Version) => {
            println!("sigsleep {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Ok(Parsed::SourceId) => {
            // Read from the mark at run time, so that the mark is in the
            // binary whole, where an agent looks for it.
            let mark = std::hint::black_box(SOURCE_ID_MARK);
            println!("{}", &mark[SOURCE_ID_NAME.len()..mark.len() - 1]);
            return 0;
        }
        Err(e) => {
            eprintln!("sigsleep: {e}\nTry 'sigsleep --help' for more information.");
            return EXIT_USAGE;
        }
    };
    // Told apart in `ps` and /proc while it is only held: the process
    // exists, but its job has not started. Named first thing, so that
    // whatever watches the host sees a held process as held as soon as
    // it can.
    let name = process_name();
    if cfg.held {
        set_process_name(HELD_NAME);
    }
    if let Some(fd) = cfg.end_fd {
        end::keep_to_self(fd);
    }
    if let Some(parent) = cfg.parent {
        // A program is ended as on a cancel (its processes are sigsleep's
        // to clean up, which SIGKILL would prevent); a sleep just goes.
        let sig = match cfg.program {
            Some(_) => libc::SIGTERM,
            None => libc::SIGKILL,
        };
        if !die_with(parent, sig) {
            eprintln!("sigsleep: launcher {parent} is gone; not starting");
            return EXIT_LOG;
        }
    }
    let mut log = match OpenOptions::new().append(true).create(true).open(&cfg.log) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sigsleep: cannot open log {}: {e}", cfg.log.display());
            return EXIT_LOG;
        }
    };

    // A program is scheduled as any process: real-time scheduling would
    // pass on to it.
    if cfg.realtime && cfg.program.is_none() {
        wait_in_real_time();
    }
    // Every signal counts from here on (the handlers are in, the log is
    // open): say so to a launcher that waits for it.
    if let Some(path) = &cfg.ready_file {
        if let Err(e) = write_ready(path) {
            eprintln!(
                "sigsleep: cannot write --ready-file {}: {e}",
                path.display()
            );
            return EXIT_LOG;
        }
    }
    let (start, mut ledger) = if cfg.held {
        match hold(&waiter, &cfg) {
            Ok(started) => {
                set_process_name(&name);
                started
            }
            Err(sig) => {
                // Ended before it started: no job ran, so no record.
                if let Some(path) = &cfg.ready_file {
                    let _ = std::fs::remove_file(path);
                }
                return 128 + sig;
            }
        }
    } else {
        // Set up (its log open, its priority raised): ready to sleep.
        let ready = clock::now();
        let start = job_start(start, ready, cfg.started_ns.unwrap_or(0), &cfg);
        (start, Ledger::new(start, cfg.runtime_ns, cfg.walltime_ns))
    };
    if let Some(prog) = &cfg.program {
        ledger.run_past_due();
        let step = supervise::Step {
            id: cfg.id,
            node: cfg.node.as_deref().unwrap_or("localhost"),
        };
        let ended = supervise::run(prog, &step, &mut waiter, &mut ledger);
        if signals::lost() {
            ledger.flag(Flags::EVENTS_LOST);
        }
        let mut outcome = ledger.finish(ended.end);
        let code = ended.code(outcome.terminated_by);
        outcome.status = ended.status;
        if ended.oom_kills > 0 {
            outcome.flags.insert(Flags::OUT_OF_MEMORY);
            // Where the job's errors go, as Slurm's step says it there.
            supervise::tell_job(prog, &supervise::oom_message(cfg.id, ended.oom_kills));
        }
        if let Some(path) = &prog.exit_file {
            if let Err(e) = std::fs::write(path, ended.exit_line()) {
                eprintln!("sigsleep: cannot write --exit-file {}: {e}", path.display());
            }
        }
        let program = Some(ended.program_end());
        let written = write_record(
            &cfg,
            (start.real, ended.end.real),
            outcome,
            program,
            &mut log,
        );
        return finish(&cfg, written, code);
    }
    loop {
        signals::drain(|ev| ledger.apply(ev));
        if ledger.terminated_by().is_some() {
            break;
        }
        let now = clock::now();
        let deadline = ledger.deadline();
        if deadline.is_some_and(|d| now.mono >= d) {
            break;
        }
        let stop = waiter.wait_until(deadline);
        if let Some(walltime) = waiter.new_limit() {
            ledger.set_walltime(walltime, clock::now());
        }
        if stop {
            // Handlers that ran during the wait came first.
            signals::drain(|ev| ledger.apply(ev));
            ledger.apply(Event::Suspend(clock::now()));
            waiter.take_stop();
        }
    }
    let end = ledger.end_at(clock::now());
    if signals::lost() {
        ledger.flag(Flags::EVENTS_LOST);
    }
    let outcome = ledger.finish(end);
    let code = match outcome.terminated_by {
        Some(sig) => 128 + sig,
        None if outcome.status == record::Status::Timeout => EXIT_TIMEOUT,
        None => 0,
    };
    let written = write_record(&cfg, (start.real, end.real), outcome, None, &mut log);
    finish(&cfg, written, code)
}

/// The exit status, once the record is written (or could not be), told
/// to the launcher with `--end-fd`.
fn finish(cfg: &Config, written: Result<(), Box<dyn std::error::Error>>, code: i32) -> i32 {
    // Gone once the job is over: a launcher that starts the next job with
    // the same file waits for that job, not for a stale file.
    if let Some(path) = &cfg.ready_file {
        let _ = std::fs::remove_file(path);
    }
    let code = match written {
        Ok(()) => code,
        Err(e) => {
            eprintln!(
                "sigsleep: cannot write record to {}: {e}",
                cfg.log.display()
            );
            EXIT_LOG
        }
    };
    if let Some(fd) = cfg.end_fd {
        end::announce(fd, code);
    }
    code
}

/// `--realtime`: from here on, this process is scheduled first-in
/// first-out at the lowest real-time priority, so that waking at its
/// deadline or at a signal does not wait behind the host's other work (a
/// busy emulator on two cores woke short jobs a millisecond or two late).
/// It only sleeps, writes one record and exits: it cannot hold a core.
/// Set up first (the ready file, the handlers), so that the costly part
/// of a start runs as any process. Where the host refuses (no root, no
/// CAP_SYS_NICE), the job runs as any process.
fn wait_in_real_time() {
    // The system call itself: musl's `sched_setscheduler` only says
    // ENOSYS. A zeroed sched_param is valid (musl's has more fields than
    // glibc's, which the kernel does not read).
    // SAFETY: a plain system call on this process with a valid pointer
    // for its duration; failure changes nothing.
    unsafe {
        let mut p: libc::sched_param = std::mem::zeroed();
        p.sched_priority = 1;
        libc::syscall(
            libc::SYS_sched_setscheduler,
            0,
            libc::SCHED_FIFO,
            &p as *const libc::sched_param,
        )
    };
}

/// The process name (`/proc/PID/comm`) of a sigsleep held before its
/// job's start.
pub const HELD_NAME: &[u8; 16] = b"sigsleep-held\0\0\0";

/// This process's name, as `prctl(PR_GET_NAME)` gives it (16 bytes, NUL
/// terminated).
fn process_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into the buffer.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

fn set_process_name(name: &[u8; 16]) {
    // SAFETY: a NUL-terminated name of 16 bytes at most; failure is
    // harmless (the name only helps people and tools tell processes apart).
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
}

/// The job's start, for a process whose first instant is `first`, set up
/// to sleep at `ready`, and whose launcher says the job started at
/// `given` (wall-clock ns; 0: none): `given`, from which its run counts,
/// as a batch system counts a job's run from its start. A sleep goes back
/// no further than its run time (or its limit, if shorter) before it was
/// ready: one whose launch took longer than its whole run has run that
/// long by then, and the rest of its launch counts as waiting, not as a
/// longer run (which would lower its bounded slowdown).
fn job_start(first: clock::Stamp, ready: clock::Stamp, given: i64, cfg: &Config) -> clock::Stamp {
    if given <= 0 || given >= first.real {
        return first;
    }
    // A sleep ends at its run time or at its limit, whichever comes first.
    let run = match cfg.walltime_ns {
        0 => cfg.runtime_ns,
        limit => cfg.runtime_ns.min(limit),
    };
    let earliest = match cfg.program {
        Some(_) => given,
        None => ready
            .real
            .saturating_sub(i64::try_from(run).unwrap_or(i64::MAX)),
    };
    ready.back_to(given.max(earliest))
}

/// `--held`: waits, counting nothing, for the `SIGCONT` that starts the
/// job. Returns the start and the ledger from there (with whatever came
/// with the `SIGCONT` already applied), or the signal that ended the
/// process before any start.
fn hold(waiter: &signals::Waiter, cfg: &Config) -> Result<(clock::Stamp, Ledger), i32> {
    loop {
        let stop_pending = waiter.wait_until(None);
        let mut events = [None; signals::CAP];
        let mut n = 0;
        signals::drain(|ev| {
            if let Some(slot) = events.get_mut(n) {
                *slot = Some(ev);
                n += 1;
            }
        });
        let events = &events[..n];
        let first = events.iter().flatten().next().copied();
        // Signals pending together are let in lowest number first: SIGINT
        // and SIGTERM before SIGCONT, which may still wait. A cancel sent
        // right behind the start can come first; the job started at the
        // first of them, and then the rest happened to it.
        let claim = events
            .iter()
            .position(|e| matches!(e, Some(Event::Resume(_))))
            .or_else(|| signals::cont_pending().then_some(usize::MAX));
        if let Some(claim) = claim {
            let at = match first {
                Some(Event::Suspend(at) | Event::Resume(at) | Event::Terminate(at, _)) => at,
                None => clock::now(),
            };
            let given = match signals::started_at() {
                0 => cfg.started_ns.unwrap_or(0),
                t => t,
            };
            let at = job_start(at, at, given, cfg);
            let mut ledger = Ledger::new(at, cfg.runtime_ns, cfg.walltime_ns);
            for (i, e) in events.iter().enumerate() {
                match e {
                    Some(e) if i != claim => ledger.apply(*e),
                    _ => {}
                }
            }
            return Ok((at, ledger));
        }
        if let Some(Event::Terminate(_, sig)) = first {
            return Err(sig);
        }
        if stop_pending {
            // A stop signal discards a pending SIGCONT: this is a job whose
            // start was sent and then its suspension, before it ran. It
            // starts now, and the main loop suspends it at once.
            let at = clock::now();
            return Ok((at, Ledger::new(at, cfg.runtime_ns, cfg.walltime_ns)));
        }
    }
}

/// Appends the job's record: started and ended at `(start, end)`; with
/// how its program ended, for a job that ran one.
fn write_record(
    cfg: &Config,
    (start, end): (i64, i64),
    outcome: ledger::Outcome,
    program: Option<record::ProgramEnd>,
    log: &mut File,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut flags = outcome.flags;
    let submit = cfg.submit_ns.unwrap_or_else(|| {
        flags.insert(Flags::SUBMIT_UNKNOWN);
        start
    });
    let node = match &cfg.node {
        Some(n) => Cow::Borrowed(n.as_str()),
        None => Cow::Owned(host_name()),
    };
    let rec = JobRecord {
        id: cfg.id,
        cores: cfg.cores,
        node,
        submit,
        start,
        end,
        runtime: cfg.runtime_ns,
        walltime: cfg.walltime_ns,
        status: outcome.status,
        flags,
        suspensions: outcome.suspensions,
        devices: cfg.devices.clone(),
        program,
    };
    let frame = record::encode_to_vec(&rec)?;
    // One write(2): O_APPEND makes it land whole at the end of the file even
    // with thousands of writers. A short write (disk full) leaves a torn
    // frame that readers detect; it is reported, not retried, because a
    // second write could interleave with another job's record.
    let n = log.write(&frame)?;
    if n != frame.len() {
        return Err(format!("short write: {n} of {} bytes", frame.len()).into());
    }
    Ok(())
}

/// Writes this process's pid to `path`, whole: to a file beside it, then
/// renamed over it, so that a launcher that sees the file sees the pid.
fn write_ready(path: &std::path::Path) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{}\n", std::process::id()))?;
    std::fs::rename(&tmp, path)
}

/// Asks for SIGKILL when the launching thread dies, so that a job never
/// outlives its agent. Returns false if the launcher `parent` is already
/// gone (this process was handed to another parent before it could ask).
fn die_with(parent: u32, sig: libc::c_int) -> bool {
    // SAFETY: plain prctl and getppid calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0);
        libc::getppid() as u32 == parent
    }
}

fn host_name() -> String {
    // SAFETY: a zeroed utsname is valid for uname to fill.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let bytes: Vec<u8> = u
        .nodename
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
