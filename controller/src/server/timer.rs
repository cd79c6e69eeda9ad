//! A wake-up at an instant, to within tens of microseconds: tokio's own
//! timer counts whole milliseconds, and a pass due at a job's begin, at a
//! think time's end or at a gang turn would run up to a millisecond late:
//! ten trace seconds at 10,000x. A timerfd (the kernel's high-resolution
//! timer) armed for the instant, awaited through tokio's reactor.

use std::os::fd::{AsFd, AsRawFd, RawFd};

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

/// The timerfd, as tokio's reactor wants it.
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// The server's precise wake-up: one at a time.
pub struct Precise {
    /// `None` where no timerfd could be had (outside a runtime): tokio's
    /// timer then, coarser.
    fd: Option<AsyncFd<Fd>>,
}

impl Precise {
    pub fn new() -> Precise {
        // Registering outside a runtime would panic.
        if tokio::runtime::Handle::try_current().is_err() {
            return Precise { fd: None };
        }
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .ok()
        .and_then(|fd| {
            // SAFETY: the TimerFd owns its descriptor, open for as long as
            // it lives, and `Fd` always gives that one; the AsyncFd owns
            // the TimerFd.
            unsafe { AsyncFd::register_with_interest(Fd(fd), Interest::READABLE) }.ok()
        });
        Precise { fd }
    }

    /// Returns at `at` (at once if it has passed). Each call arms the
    /// timer afresh, so a wait given up (another branch of a `select!`
    /// won) leaves nothing behind that matters.
    pub async fn sleep_until(&self, at: Instant) {
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let Some(fd) = &self.fd else {
            tokio::time::sleep_until(at).await;
            return;
        };
        let armed = fd.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(left)),
            TimerSetTimeFlags::empty(),
        );
        if armed.is_err() {
            // The kernel refused (it does not): tokio's timer, coarser.
            tokio::time::sleep_until(at).await;
            return;
        }
        loop {
            let Ok(mut ready) = fd.readable().await else {
                tokio::time::sleep_until(at).await;
                return;
            };
            let mut count = [0u8; 8];
            match nix::unistd::read(fd.get_ref().0.as_fd(), &mut count) {
                Ok(_) => return,
                Err(nix::errno::Errno::EAGAIN) => ready.clear_ready(),
                Err(_) => {
                    tokio::time::sleep_until(at).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_wakes_at_its_instant_to_well_under_a_millisecond() {
        let p = Precise::new();
        let mut late = Vec::new();
        for _ in 0..50 {
            let at = Instant::now() + std::time::Duration::from_micros(1_300);
            p.sleep_until(at).await;
            let now = Instant::now();
            assert!(now >= at, "woke early");
            late.push(now - at);
        }
        late.sort();
        // tokio's timer would be up to a millisecond late at the median.
        assert!(late[25] < std::time::Duration::from_micros(500), "{late:?}");
    }
}
