//! The asynchronous side of sigsleep: signal handlers and the event log they
//! fill. Everything here runs in signal context or sets it up.
//!
//! The four job signals (`SIGTSTP`, `SIGCONT`, `SIGTERM`, `SIGINT`) stay
//! blocked except while the main loop waits in [`Waiter::wait`], which unblocks them
//! atomically (`ppoll` with a signal mask). Handlers therefore only ever run
//! inside that wait, one at a time (each blocks the others), and the main
//! loop reads the log with no handler running: no locks, no races, no
//! wake-up lost between "check" and "sleep".

use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicUsize, Ordering::Relaxed};

use crate::clock::{self, Stamp};
use crate::ledger::Event;

const JOB_SIGNALS: [libc::c_int; 4] = [libc::SIGTSTP, libc::SIGCONT, libc::SIGTERM, libc::SIGINT];

/// Events the handlers logged and the main loop has not read yet. The
/// handler's mask blocks the other job signals and the wait's mask is lifted
/// when a handler returns, so one wait sees one or two events; 16 leaves a
/// wide margin before [`lost`] is set, and keeps the ring (and so each
/// process's writable pages) small.
const CAP: usize = 16;

const KIND_SUSPEND: u8 = 1;
const KIND_RESUME: u8 = 2;
const KIND_TERM: u8 = 3;
const KIND_INT: u8 = 4;

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
/// signals blocked (anywhere outside [`Waiter::wait`]).
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
            KIND_SUSPEND => f(Event::Suspend(at)),
            KIND_RESUME => f(Event::Resume(at)),
            KIND_TERM => f(Event::Terminate(at, libc::SIGTERM)),
            KIND_INT => f(Event::Terminate(at, libc::SIGINT)),
            _ => {}
        }
        tail += 1;
    }
    TAIL.store(tail, Relaxed);
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

extern "C" fn on_tstp(_: libc::c_int) {
    let _errno = SavedErrno::save();
    push(KIND_SUSPEND, clock::now());
    // Stop the way the terminal driver would: default action, then the
    // signal again. It stays pending (blocked) until the handler's mask is
    // lifted, and a SIGCONT sent meanwhile discards it, so a resume racing
    // the suspend can never leave the job stopped for good.
    set_action(libc::SIGTSTP, libc::SIG_DFL);
    // SAFETY: raise is async-signal-safe.
    unsafe { libc::raise(libc::SIGTSTP) };
}

extern "C" fn on_cont(_: libc::c_int) {
    let _errno = SavedErrno::save();
    push(KIND_RESUME, clock::now());
    set_action(libc::SIGTSTP, handler(on_tstp));
}

extern "C" fn on_end(sig: libc::c_int) {
    let _errno = SavedErrno::save();
    let kind = if sig == libc::SIGINT {
        KIND_INT
    } else {
        KIND_TERM
    };
    push(kind, clock::now());
}

/// A handler function in the form `sigaction` takes.
fn handler(f: extern "C" fn(libc::c_int)) -> libc::sighandler_t {
    f as *const () as libc::sighandler_t
}

fn job_mask() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset takes valid numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in JOB_SIGNALS {
            libc::sigaddset(set.as_mut_ptr(), s);
        }
        set.assume_init()
    }
}

fn set_action(sig: libc::c_int, handler: libc::sighandler_t) -> bool {
    // SAFETY: a zeroed sigaction is valid; the mask is filled before use;
    // sigaction is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_mask = job_mask();
        // No SA_RESTART: a handler must interrupt the wait so that the main
        // loop recomputes the deadline.
        sa.sa_flags = 0;
        libc::sigaction(sig, &sa, ptr::null_mut()) == 0
    }
}

/// Blocks the job signals, then installs their handlers. Launchers start
/// sigsleep with these signals blocked so that nothing is lost before this
/// runs; a signal already pending is delivered at the first [`Waiter::wait`].
pub fn install() -> io::Result<Waiter> {
    let mask = job_mask();
    let mut old = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: valid sets; `old` is written by the call.
    if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &mask, old.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: initialised by the successful sigprocmask above.
    let mut during_wait = unsafe { old.assume_init() };
    for s in JOB_SIGNALS {
        // SAFETY: a valid set and signal number.
        unsafe { libc::sigdelset(&mut during_wait, s) };
    }
    let handlers: [(libc::c_int, libc::sighandler_t); 4] = [
        (libc::SIGTSTP, handler(on_tstp)),
        (libc::SIGCONT, handler(on_cont)),
        (libc::SIGTERM, handler(on_end)),
        (libc::SIGINT, handler(on_end)),
    ];
    for (sig, handler) in handlers {
        if !set_action(sig, handler) {
            return Err(io::Error::last_os_error());
        }
    }
    Waiter::new(during_wait)
}

/// The one place where the job signals are let in.
pub struct Waiter {
    /// The launcher's signal mask minus the job signals: other signals the
    /// launcher chose to block stay blocked while waiting.
    during_wait: libc::sigset_t,
    /// A CLOCK_MONOTONIC timer armed at the absolute deadline. `ppoll`'s own
    /// timeout is relative and the kernel lets it run late by 0.1 % of its
    /// length (2 ms on a 2 s sleep); a timerfd fires on time.
    timer: libc::c_int,
}

impl Waiter {
    fn new(during_wait: libc::sigset_t) -> io::Result<Waiter> {
        // SAFETY: plain system call; the fd is owned by the Waiter and lives
        // as long as the process.
        let timer = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        if timer < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Waiter { during_wait, timer })
    }

    /// Sleeps with the job signals unblocked until the monotonic instant
    /// `deadline_ns` (forever if `None`) or until a handler has run.
    pub fn wait_until(&self, deadline_ns: Option<i64>) {
        let mut pfd = libc::pollfd {
            fd: self.timer,
            events: libc::POLLIN,
            revents: 0,
        };
        let nfds = match deadline_ns {
            Some(ns) => {
                let spec = libc::itimerspec {
                    it_interval: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    },
                    it_value: libc::timespec {
                        tv_sec: (ns / 1_000_000_000) as libc::time_t,
                        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
                    },
                };
                // SAFETY: a valid timerfd and itimerspec; old value not wanted.
                let armed = unsafe {
                    libc::timerfd_settime(
                        self.timer,
                        libc::TFD_TIMER_ABSTIME,
                        &spec,
                        ptr::null_mut(),
                    )
                };
                // An unarmable timer cannot happen for a valid fd and a
                // positive instant; if it did, waiting without it would hang.
                if armed != 0 {
                    return;
                }
                1
            }
            None => 0,
        };
        // SAFETY: `pfd` is a valid pollfd for `nfds` entries; no timeout
        // (the timer is the timeout); the mask is a valid set.
        unsafe { libc::ppoll(&mut pfd, nfds, ptr::null(), &self.during_wait) };
    }
}
