//! The end message: how sigsleep tells its launcher that its job ended,
//! once the record is written and before the process is torn down.
//!
//! A process's exit reaches its parent only after the kernel has released
//! its memory and files (about 40 µs here, even for a static C program),
//! and then through whichever thread waits for children. Each end delays
//! the start that follows it by that much; in a replay at 10,000× a chain
//! of short jobs adds it up into trace seconds. With `--end-fd`, sigsleep
//! writes one fixed-size message, in one write, to a socket the launcher
//! shares with all its jobs (the agent's is a datagram socket that learns
//! each sender's pid from the kernel), then exits as before; the launcher
//! takes the message as the exit and still reaps the process.

/// Bytes in one message.
pub const LEN: usize = 16;

/// One job's end: which process, the exit status it is about to return,
/// and when it said so (CLOCK_MONOTONIC, ns), which lets a launcher tell a
/// message of a process whose pid was since reused from one of the
/// process that has it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub pid: i32,
    pub code: i32,
    pub at_ns: i64,
}

impl End {
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&self.code.to_le_bytes());
        b[8..16].copy_from_slice(&self.at_ns.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; LEN]) -> End {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        let mut at = [0u8; 8];
        at.copy_from_slice(&b[8..16]);
        End {
            pid: i32::from_le_bytes(word(0)),
            code: i32::from_le_bytes(word(4)),
            at_ns: i64::from_le_bytes(at),
        }
    }
}

/// Keeps `fd` from every program this process starts: only sigsleep may
/// say that the job ended.
pub fn keep_to_self(fd: i32) {
    // SAFETY: fcntl on a descriptor number; an invalid one fails with
    // EBADF, which changes nothing.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
}

/// Writes this process's end, exiting with `code`, to `fd`. A failure is
/// no loss: the launcher still learns of the exit when it reaps.
pub fn announce(fd: i32, code: i32) {
    let msg = End {
        // SAFETY: getpid cannot fail.
        pid: unsafe { libc::getpid() },
        code,
        at_ns: crate::clock::now().mono,
    }
    .encode();
    // SAFETY: the process is about to exit and starts nothing more: a
    // launcher gone (no reader left) must not make this write kill it,
    // after its record and before its status. Then LEN bytes from a live
    // buffer.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        libc::write(fd, msg.as_ptr().cast(), LEN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_as_written() {
        let e = End {
            pid: 4_194_303,
            code: -3,
            at_ns: i64::MAX - 7,
        };
        assert_eq!(End::decode(&e.encode()), e);
    }
}
