//! A wake-up at an instant, to within a few microseconds: tokio's own
//! timer counts whole milliseconds, and a pass due at a job's begin, at a
//! think time's end or at a gang turn would run up to a millisecond late:
//! ten trace seconds at 10,000x. A timerfd (the kernel's high-resolution
//! timer), awaited through tokio's reactor, is exact in the kernel, but
//! waking an idle processor and the reactor's thread from it took about
//! 100 µs at the median on a 2-core VM (170 µs at the 99th percentile):
//! one trace second at 10,000x, on every arrival (the `timer_wakeup`
//! example measures it). So the timerfd fires [`EARLY`] before the
//! instant, and the task covers the last stretch by yielding to the
//! scheduler until the instant has come: it stays runnable, the processor
//! never idles, and whatever else the server awaits beside this wake-up
//! is still polled meanwhile.

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

/// How long before its instant the timerfd fires, for the rest to be
/// covered awake: above the wake-up's 99th percentile where it was
/// measured, and a small cost: up to 200 µs of processor time per timed
/// pass (about 100 where the processor was idle and took that long to
/// wake).
const EARLY: std::time::Duration = std::time::Duration::from_micros(200);

/// The server's precise wake-up: one at a time.
pub struct Precise {
    /// `None` where no timerfd could be had (outside a runtime): tokio's
    /// timer then, coarser.
    fd: Option<AsyncFd<Fd>>,
    /// [`EARLY`], or another for tests and the `timer_wakeup` example.
    early: std::time::Duration,
}

impl Default for Precise {
    fn default() -> Precise {
        Precise::new()
    }
}

impl Precise {
    pub fn new() -> Precise {
        // Registering outside a runtime would panic.
        if tokio::runtime::Handle::try_current().is_err() {
            return Precise {
                fd: None,
                early: EARLY,
            };
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
        Precise { fd, early: EARLY }
    }

    /// The same, firing `early` before each instant instead of [`EARLY`]
    /// (zero: the timerfd alone), to measure what the stretch awake is
    /// worth (`cargo run --release -p controller --example timer_wakeup`).
    pub fn with_early(early: std::time::Duration) -> Precise {
        Precise {
            early,
            ..Precise::new()
        }
    }

    /// Returns at `at` (at once if it has passed). Each call arms the
    /// timer afresh, so a wait given up (another branch of a `select!`
    /// won) leaves nothing behind that matters.
    ///
    /// (Under tokio's paused clock, as in a test that pauses time, the
    /// last stretch would never end: time only advances there when every
    /// task waits.)
    pub async fn sleep_until(&self, at: Instant) {
        // A loop, so that a wake-up however early never turns into a
        // long spin.
        while at.saturating_duration_since(Instant::now()) > self.early {
            self.fire_at(at - self.early).await;
        }
        while Instant::now() < at {
            tokio::task::yield_now().await;
        }
    }

    /// Returns once the timerfd has fired at `at` (or tokio's timer, where
    /// there is no timerfd).
    async fn fire_at(&self, at: Instant) {
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

    // On one thread, so that the sender and the timer that wakes it can
    // only run if the last stretch hands the thread back.
    #[tokio::test]
    async fn what_else_is_awaited_is_served_in_the_last_stretch() {
        let p = Precise::with_early(std::time::Duration::from_secs(60));
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let _ = tx.send(());
        });
        let t0 = Instant::now();
        // The whole wait is the last stretch: the message, sent 20 ms in,
        // must win against an instant 30 s away.
        tokio::select! {
            biased;
            () = p.sleep_until(t0 + std::time::Duration::from_secs(30)) => panic!("the instant came first"),
            _ = rx => {}
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    }
}
