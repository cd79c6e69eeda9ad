//! Instants as sigsleep reads them: both clocks at once.
//! Records carry wall-clock time; deadlines run on the monotonic clock.

/// One instant read off both clocks. `real` (CLOCK_REALTIME) goes into the
/// record so that other processes can relate it to theirs; `mono`
/// (CLOCK_MONOTONIC) drives the deadline so that a wall-clock step during
/// the job does not change how long it sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub real: i64,
    pub mono: i64,
}

/// Reads both clocks. Async-signal-safe: only `clock_gettime`.
pub fn now() -> Stamp {
    Stamp {
        real: read(libc::CLOCK_REALTIME),
        mono: read(libc::CLOCK_MONOTONIC),
    }
}

fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clock ids exist on
    // every Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}
