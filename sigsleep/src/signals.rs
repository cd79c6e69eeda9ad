//! The asynchronous side of sigsleep: how the four job signals reach the
//! main loop, and how a suspension stops the process.
//!
//! All four (`SIGTSTP`, `SIGCONT`, `SIGTERM`, `SIGINT`) stay blocked except
//! while the main loop waits in [`Waiter::wait_until`]:
//!
//! - `SIGCONT`, `SIGTERM` and `SIGINT` have handlers that log a timestamped
//!   event in a small ring. The wait unblocks them atomically (`ppoll` with
//!   a signal mask), so handlers run only inside it, one at a time, and the
//!   main loop reads the ring with no handler running.
//! - `SIGTSTP` is never unblocked by the wait and has no handler. A signalfd
//!   tells the wait that one is pending; the main loop records the instant
//!   and then lets that very signal in with its default action
//!   ([`Waiter::take_stop`]), which stops the process.
//!
//! Why not stop from a handler: a process that stops itself must generate a
//! stop signal, and the kernel discards a pending `SIGCONT` when it does. A
//! resume that arrives while the suspend is being handled would be lost and
//! the job stopped for good. Stopping with the launcher's own, still
//! pending, `SIGTSTP` leaves the race to the kernel, which settles it: a
//! `SIGCONT` sent first discards the pending `SIGTSTP`, one sent later
//! continues the stopped process.

use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicUsize, Ordering::Relaxed};

use crate::clock::{self, Stamp};
use crate::ledger::Event;

const JOB_SIGNALS: [libc::c_int; 4] = [libc::SIGTSTP, libc::SIGCONT, libc::SIGTERM, libc::SIGINT];

/// The signal that brings a running job a new wall-time limit: a
/// realtime one, sent with `sigqueue`, its value the limit in nanoseconds
/// (0: none). It is queued, never merged, and carries its value, so the
/// last one sent is the limit. A launcher starts sigsleep with it blocked
/// (its default action would end the process); sigsleep reads it from a
/// signalfd and never lets it in.
///
/// A fixed number, not one counted from `SIGRTMIN`: the C libraries
/// reserve different realtime signals for themselves (`SIGRTMIN` is 34
/// with glibc, 35 with musl), and the agent and sigsleep may be built
/// against different ones. 40 is free under both.
pub fn limit_signal() -> libc::c_int {
    40
}

/// Sends process `pid` (a sigsleep) the new wall-time limit `walltime_ns`
/// (0: none) as [`limit_signal`].
pub fn send_limit(pid: libc::pid_t, walltime_ns: u64) -> io::Result<()> {
    let value = libc::sigval {
        sival_ptr: walltime_ns as usize as *mut libc::c_void,
    };
    // SAFETY: a plain system call; the value is carried, never read as a
    // pointer.
    if unsafe { libc::sigqueue(pid, limit_signal(), value) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Why a job is ended, as its launcher says with the `SIGTERM`: a plain
/// `kill` is a cancel; [`send_end`] queues the signal with one of these as
/// its value. A job that runs a program has the reason written to its
/// error file, as Slurm's step writes it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndWhy {
    Cancelled,
    /// A job of a higher-priority partition needs its cores.
    Preempted,
    /// It goes back to the queue.
    Requeued,
}

impl EndWhy {
    fn value(self) -> usize {
        match self {
            EndWhy::Cancelled => 0,
            EndWhy::Preempted => 1,
            EndWhy::Requeued => 2,
        }
    }

    fn of(value: usize) -> EndWhy {
        match value {
            1 => EndWhy::Preempted,
            2 => EndWhy::Requeued,
            _ => EndWhy::Cancelled,
        }
    }
}

/// Sends process `pid` (a sigsleep) the `SIGTERM` that ends its job, with
/// why.
pub fn send_end(pid: libc::pid_t, why: EndWhy) -> io::Result<()> {
    let value = libc::sigval {
        sival_ptr: why.value() as *mut libc::c_void,
    };
    // SAFETY: a plain system call; the value is carried, never read as a
    // pointer.
    if unsafe { libc::sigqueue(pid, libc::SIGTERM, value) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends held process `pid` (a sigsleep started with `--held`) the
/// `SIGCONT` that starts its job, queued with the instant the controller
/// started the job (wall-clock ns; 0: none), from which its run counts
/// ([`started_at`]).
pub fn send_start(pid: libc::pid_t, started_at_ns: i64) -> io::Result<()> {
    let value = libc::sigval {
        sival_ptr: started_at_ns.max(0) as usize as *mut libc::c_void,
    };
    // SAFETY: a plain system call; the value is carried, never read as a
    // pointer.
    if unsafe { libc::sigqueue(pid, libc::SIGCONT, value) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The start instant the last `SIGCONT` sent by [`send_start`] carried
/// (wall-clock ns), or 0.
pub fn started_at() -> i64 {
    STARTED_AT.load(Relaxed)
}

static STARTED_AT: AtomicI64 = AtomicI64::new(0);

/// Why the first `SIGTERM` came ([`EndWhy::Cancelled`] for one sent with
/// `kill`, or none yet).
pub fn end_why() -> EndWhy {
    EndWhy::of(END_WHY.load(Relaxed))
}

/// Set by the first `SIGTERM` only: the job ends for the first reason it
/// was given.
static END_WHY: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Events the handlers logged and the main loop has not read yet. A handler
/// blocks the other job signals and the wait's mask is lifted once a
/// handler returns, so one wait sees one or two events; 16 leaves a wide
/// margin before [`lost`] is set, and keeps each process's writable pages
/// few.
pub const CAP: usize = 16;

const KIND_RESUME: u8 = 1;
const KIND_TERM: u8 = 2;
const KIND_INT: u8 = 3;

struct Slot {
    kind: AtomicU8,
    real: AtomicI64,
    mono: AtomicI64,
}

#[allow(clippy::declare_interior_mutable_const)] // only used to build RING
const EMPTY: Slot = Slot {
    kind: AtomicU8::new(0),
    real: AtomicI64::new(0),
    mono: AtomicI64::new(0),
};

/// Ring of logged events. Written by handlers at `HEAD`, read by the main
/// loop at `TAIL`; the blocking discipline above means the two never run at
/// the same time, so relaxed atomics suffice.
static RING: [Slot; CAP] = [EMPTY; CAP];
static HEAD: AtomicUsize = AtomicUsize::new(0);
static TAIL: AtomicUsize = AtomicUsize::new(0);
static LOST: AtomicBool = AtomicBool::new(false);

fn push(kind: u8, at: Stamp) {
    let head = HEAD.load(Relaxed);
    if head - TAIL.load(Relaxed) >= CAP {
        LOST.store(true, Relaxed);
        return;
    }
    let slot = &RING[head % CAP];
    slot.kind.store(kind, Relaxed);
    slot.real.store(at.real, Relaxed);
    slot.mono.store(at.mono, Relaxed);
    HEAD.store(head + 1, Relaxed);
}

/// Hands every logged event to `f`, oldest first. Call only with the job
/// signals blocked (anywhere outside [`Waiter::wait_until`]).
pub fn drain(mut f: impl FnMut(Event)) {
    let head = HEAD.load(Relaxed);
    let mut tail = TAIL.load(Relaxed);
    while tail != head {
        let slot = &RING[tail % CAP];
        let at = Stamp {
            real: slot.real.load(Relaxed),
            mono: slot.mono.load(Relaxed),
        };
        match slot.kind.load(Relaxed) {
            KIND_RESUME => f(Event::Resume(at)),
            KIND_TERM => f(Event::Terminate(at, libc::SIGTERM)),
            KIND_INT => f(Event::Terminate(at, libc::SIGINT)),
            _ => {}
        }
        tail += 1;
    }
    TAIL.store(tail, Relaxed);
}

/// Whether a `SIGCONT` waits to be let in. A wait lets one signal in
/// before its mask is lifted, lowest number first, so a `SIGCONT` sent
/// together with a `SIGTERM` waits behind it.
pub fn cont_pending() -> bool {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending fills the set; sigismember reads it.
    unsafe {
        libc::sigpending(set.as_mut_ptr()) == 0
            && libc::sigismember(set.as_ptr(), libc::SIGCONT) == 1
    }
}

/// Whether the ring ever overflowed.
pub fn lost() -> bool {
    LOST.load(Relaxed)
}

/// Keeps `errno` intact across a handler, as the interrupted code expects.
struct SavedErrno(libc::c_int);

impl SavedErrno {
    fn save() -> SavedErrno {
        // SAFETY: __errno_location returns this thread's errno slot.
        SavedErrno(unsafe { *libc::__errno_location() })
    }
}

impl Drop for SavedErrno {
    fn drop(&mut self) {
        // SAFETY: as in `save`.
        unsafe { *libc::__errno_location() = self.0 };
    }
}

extern "C" fn on_cont(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let _errno = SavedErrno::save();
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; its value
    // is only read for a signal queued with one.
    let started_at = unsafe {
        match info.as_ref() {
            Some(i) if i.si_code == libc::SI_QUEUE => i.si_value().sival_ptr as usize as i64,
            _ => 0,
        }
    };
    if started_at > 0 {
        STARTED_AT.store(started_at, Relaxed);
    }
    push(KIND_RESUME, clock::now());
}

extern "C" fn on_end(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let _errno = SavedErrno::save();
    let kind = if sig == libc::SIGINT {
        KIND_INT
    } else {
        // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo; its
        // value is only read for a signal queued with one.
        let why = unsafe {
            match info.as_ref() {
                Some(i) if i.si_code == libc::SI_QUEUE => i.si_value().sival_ptr as usize,
                _ => 0,
            }
        };
        if END_WHY.load(Relaxed) == usize::MAX {
            END_WHY.store(why, Relaxed);
        }
        KIND_TERM
    };
    push(kind, clock::now());
}

/// A handler that reads the signal's information (`SA_SIGINFO`).
type InfoHandler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

fn info_handler(f: InfoHandler) -> libc::sighandler_t {
    f as *const () as libc::sighandler_t
}

fn set_of(signals: &[libc::c_int]) -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset takes valid numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for &s in signals {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

/// Whether the launcher left `sig` ignored.
fn ignored(sig: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is valid to receive the current one; a
    // null new action only queries.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

fn set_action(sig: libc::c_int, handler: libc::sighandler_t, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the mask is filled before use.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_mask = set_of(&JOB_SIGNALS);
        // No SA_RESTART: a handler must interrupt the wait so that the main
        // loop recomputes the deadline.
        sa.sa_flags = flags;
        libc::sigaction(sig, &sa, ptr::null_mut())
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn fd_or_err(fd: libc::c_int) -> io::Result<libc::c_int> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd)
    }
}

/// Blocks the job signals, then installs their handlers and the `SIGTSTP`
/// watch. Launchers start sigsleep with these signals blocked so that
/// nothing is lost before this runs; a signal already pending is seen at the
/// first [`Waiter::wait_until`].
pub fn install() -> io::Result<Waiter> {
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    let mut blocked = set_of(&JOB_SIGNALS);
    // SAFETY: a valid set and signal number.
    unsafe { libc::sigaddset(&mut blocked, limit_signal()) };
    // SAFETY: valid sets; `old` is written by the call.
    if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &blocked, old.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful sigprocmask above.
    let mut during_wait = unsafe { old.assume_init() };
    for s in [libc::SIGCONT, libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a valid set and signal number.
        unsafe { libc::sigdelset(&mut during_wait, s) };
    }
    // SAFETY: as above; SIGTSTP and the limit signal stay blocked while
    // waiting (they are watched through signalfds instead).
    unsafe {
        libc::sigaddset(&mut during_wait, libc::SIGTSTP);
        libc::sigaddset(&mut during_wait, limit_signal());
    }

    set_action(libc::SIGCONT, info_handler(on_cont), libc::SA_SIGINFO)?;
    set_action(libc::SIGTERM, info_handler(on_end), libc::SA_SIGINFO)?;
    // A shell starts background jobs with SIGINT ignored so that ^C at the
    // terminal spares them; keep that choice.
    if !ignored(libc::SIGINT) {
        set_action(libc::SIGINT, info_handler(on_end), libc::SA_SIGINFO)?;
    }
    // The default action is what stops the job in `take_stop`, whatever
    // the launcher had set.
    set_action(libc::SIGTSTP, libc::SIG_DFL, 0)?;

    // SAFETY: plain system calls; the descriptors belong to the Waiter and
    // live as long as the process.
    let tstp = fd_or_err(unsafe {
        libc::signalfd(
            -1,
            &set_of(&[libc::SIGTSTP]),
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
        )
    })?;
    // SAFETY: as above.
    let limit = fd_or_err(unsafe {
        libc::signalfd(
            -1,
            &set_of(&[limit_signal()]),
            libc::SFD_CLOEXEC | libc::SFD_NONBLOCK,
        )
    })?;
    // SAFETY: as above.
    let timer = fd_or_err(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
        )
    })?;
    Ok(Waiter {
        during_wait,
        tstp,
        limit,
        limit_ready: std::cell::Cell::new(false),
        timer,
    })
}

/// SIGTERM or SIGINT, if one is pending (sent, and not let in yet).
pub fn end_pending() -> Option<libc::c_int> {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigpending fills the set on success; sigismember reads it.
    unsafe {
        if libc::sigpending(set.as_mut_ptr()) != 0 {
            return None;
        }
        let set = set.assume_init();
        [libc::SIGTERM, libc::SIGINT]
            .into_iter()
            .find(|&s| libc::sigismember(&set, s) == 1)
    }
}

/// The one place where the job signals are let in.
pub struct Waiter {
    /// The launcher's signal mask with SIGCONT, SIGTERM and SIGINT let in
    /// (other signals the launcher blocked stay blocked) and SIGTSTP kept
    /// out.
    during_wait: libc::sigset_t,
    /// Readable while a SIGTSTP is pending. Never read: the pending signal
    /// is what stops the process in [`Waiter::take_stop`].
    tstp: libc::c_int,
    /// Readable while a new wall-time limit waits ([`limit_signal`]), and
    /// whether the last wait found it so.
    limit: libc::c_int,
    limit_ready: std::cell::Cell<bool>,
    /// A CLOCK_MONOTONIC timer armed at the absolute deadline. `ppoll`'s own
    /// timeout is relative and the kernel lets it run late by 0.1 % of its
    /// length (2 ms on a 2 s sleep); a timerfd fires on time.
    timer: libc::c_int,
}

impl Waiter {
    /// Sleeps until the monotonic instant `deadline_ns` (forever if `None`),
    /// until a handler has run, or until a SIGTSTP is pending. Returns
    /// whether a SIGTSTP is pending.
    pub fn wait_until(&self, deadline_ns: Option<i64>) -> bool {
        self.wait(deadline_ns, None).0
    }

    /// [`Waiter::wait_until`], also woken when `extra` is readable (a job
    /// supervisor's SIGCHLD signalfd). Returns whether a SIGTSTP is
    /// pending, and whether `extra` is readable.
    pub fn wait(&self, deadline_ns: Option<i64>, extra: Option<libc::c_int>) -> (bool, bool) {
        let mut fds = [
            libc::pollfd {
                fd: self.tstp,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: extra.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.limit,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.timer,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // poll skips a negative descriptor.
        let mut nfds = 3;
        if let Some(ns) = deadline_ns {
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: (ns / 1_000_000_000) as _,
                    tv_nsec: (ns % 1_000_000_000) as libc::c_long,
                },
            };
            // SAFETY: a valid timerfd and itimerspec; old value not wanted.
            let armed = unsafe {
                libc::timerfd_settime(self.timer, libc::TFD_TIMER_ABSTIME, &spec, ptr::null_mut())
            };
            // A valid timerfd and a positive instant cannot fail; if it did,
            // return at once rather than wait without a deadline.
            if armed != 0 {
                return (false, false);
            }
            nfds = 4;
        }
        // SAFETY: `fds` holds `nfds` valid entries; no timeout (the timer is
        // the timeout); the mask is a valid set.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), nfds, ptr::null(), &self.during_wait) };
        self.limit_ready
            .set(n > 0 && fds[2].revents & libc::POLLIN != 0);
        (
            n > 0 && fds[0].revents & libc::POLLIN != 0,
            n > 0 && fds[1].revents & libc::POLLIN != 0,
        )
    }

    /// The wall-time limit last sent ([`limit_signal`]) by this process's
    /// launcher (its parent), in nanoseconds, if one came since the last
    /// call (the last wait saw it).
    pub fn new_limit(&self) -> Option<u64> {
        if !self.limit_ready.take() {
            return None;
        }
        let mut last = None;
        loop {
            let mut info = MaybeUninit::<libc::signalfd_siginfo>::uninit();
            let size = std::mem::size_of::<libc::signalfd_siginfo>();
            // SAFETY: reads at most one siginfo into a buffer of that size
            // from a non-blocking signalfd.
            let got = unsafe { libc::read(self.limit, info.as_mut_ptr().cast(), size) };
            if got != size as isize {
                return last;
            }
            // SAFETY: the read filled it whole.
            let info = unsafe { info.assume_init() };
            // Only a value queued by the launcher is a limit: a plain
            // kill of this signal (by the job's own processes, say)
            // carries none.
            // SAFETY: getppid has no preconditions.
            let parent = unsafe { libc::getppid() };
            if info.ssi_code == libc::SI_QUEUE && info.ssi_pid == parent as u32 {
                last = Some(info.ssi_ptr);
            }
        }
    }

    /// Keeps `sig` blocked during the wait too, for a caller that watches
    /// it through a signalfd of its own.
    pub fn keep_blocked(&mut self, sig: libc::c_int) {
        // SAFETY: a valid set and signal number.
        unsafe { libc::sigaddset(&mut self.during_wait, sig) };
    }

    /// Takes the pending SIGTSTP without stopping: a job supervisor stops
    /// its job's processes, not itself, so that it can go on timing the
    /// suspension and hear the resume.
    pub fn consume_stop(&self) {
        let mut info = MaybeUninit::<libc::signalfd_siginfo>::uninit();
        // SAFETY: reads at most one siginfo into a buffer of that size from
        // a non-blocking signalfd; nothing pending is not an error here.
        unsafe {
            libc::read(
                self.tstp,
                info.as_mut_ptr().cast(),
                std::mem::size_of::<libc::signalfd_siginfo>(),
            )
        };
    }

    /// Lets the pending SIGTSTP in with its default action, which stops the
    /// process here until a SIGCONT; then shuts SIGTSTP out again. If a
    /// SIGCONT came first, the kernel has already discarded the SIGTSTP and
    /// this returns at once (the SIGCONT's handler runs at the next wait).
    pub fn take_stop(&self) {
        let tstp = set_of(&[libc::SIGTSTP]);
        // SAFETY: valid sets. Unblocking delivers the pending SIGTSTP on the
        // way out of the call: the process stops right there.
        unsafe {
            libc::sigprocmask(libc::SIG_UNBLOCK, &tstp, ptr::null_mut());
            libc::sigprocmask(libc::SIG_BLOCK, &tstp, ptr::null_mut());
        }
    }
}
