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

impl Stamp {
    /// The instant `real_ns` on the wall clock, read off both clocks as
    /// this one was: `self` moved back to it. `self` itself when `real_ns`
    /// is not before it (a launcher's clock ahead of this host's) or is 0
    /// (none given).
    pub fn back_to(self, real_ns: i64) -> Stamp {
        if real_ns <= 0 || real_ns >= self.real {
            return self;
        }
        let by = self.real - real_ns;
        Stamp {
            real: real_ns,
            mono: self.mono - by,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_moves_back_on_both_clocks_and_never_forward() {
        let s = Stamp {
            real: 1_000,
            mono: 50,
        };
        assert_eq!(
            s.back_to(960),
            Stamp {
                real: 960,
                mono: 10
            }
        );
        assert_eq!(s.back_to(0), s);
        assert_eq!(s.back_to(1_000), s);
        assert_eq!(s.back_to(2_000), s);
    }
}
