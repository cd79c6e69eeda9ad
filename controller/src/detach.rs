//! `controller serve --detach`: the controller runs in the background and
//! the command returns once it listens, as `slurmctld` does without `-D`,
//! so a script's next command finds it.
//!
//! The process forks before any thread exists (before the async runtime).
//! The child leaves the terminal's session, sends its output to a log
//! file, and serves; once it listens it writes one byte to a pipe. The
//! parent waits on that pipe: a byte means the controller is up (its pid
//! goes to standard output); the pipe closing without one means it
//! stopped at start, and the parent shows the log's last line and fails.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::Path;

use anyhow::{bail, Context, Result};
use nix::unistd::{fork, ForkResult};

/// The child's end of the pipe: [`Ready::notify`] tells the waiting parent
/// that the controller listens.
pub struct Ready(File);

impl Ready {
    pub fn notify(mut self) {
        // A parent that is gone (killed meanwhile) is nobody to tell.
        let _ = self.0.write_all(b"1");
    }
}

/// Forks. In the child, returns what to notify once listening; in the
/// parent, waits for that and exits the process (0 up, 2 not).
///
/// Call only while the process has a single thread.
pub fn fork_serving(log: &Path) -> Result<Ready> {
    let log_file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open the log {}", log.display()))?;
    let (read_end, write_end) = nix::unistd::pipe().context("cannot make a pipe")?;
    // SAFETY: the process has one thread (the caller's promise), so the
    // child may run any code.
    match unsafe { fork() }.context("cannot fork")? {
        ForkResult::Child => {
            drop(read_end);
            become_background(&log_file)?;
            Ok(Ready(File::from(write_end)))
        }
        ForkResult::Parent { child } => {
            drop(write_end);
            std::process::exit(wait_for_child(read_end, child.as_raw(), log));
        }
    }
}

/// Out of the terminal's session (a Ctrl-C or a closed terminal no longer
/// reaches it), input from /dev/null, output to the log.
fn become_background(log: &File) -> Result<()> {
    nix::unistd::setsid().context("cannot start a session")?;
    let null = File::open("/dev/null").context("cannot open /dev/null")?;
    nix::unistd::dup2_stdin(&null).context("cannot redirect standard input")?;
    nix::unistd::dup2_stdout(log).context("cannot redirect standard output")?;
    nix::unistd::dup2_stderr(log).context("cannot redirect standard error")?;
    Ok(())
}

/// The parent's side: the exit code to leave with.
fn wait_for_child(read_end: OwnedFd, child: i32, log: &Path) -> i32 {
    let mut byte = [0u8; 1];
    let up = matches!(File::from(read_end).read(&mut byte), Ok(1));
    if up {
        println!("{child}");
        eprintln!(
            "controller: serving in the background (pid {child}), log in {}",
            log.display()
        );
        return 0;
    }
    // It stopped at start: reap it, and show why.
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
    let why = std::fs::read_to_string(log)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim_start_matches("controller: ").to_string())
        })
        .unwrap_or_else(|| "no message".into());
    eprintln!(
        "controller: did not start: {why} (log in {})",
        log.display()
    );
    2
}

/// Where a detached controller logs: `--log`, else `controller.log` in its
/// state directory (created if need be, as serve would).
pub fn log_path(state_dir: &Path, flag: Option<&Path>) -> Result<std::path::PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(state_dir)
        .with_context(|| format!("cannot create state directory {}", state_dir.display()))?;
    if !state_dir.is_dir() {
        bail!("{} is not a directory", state_dir.display());
    }
    Ok(state_dir.join("controller.log"))
}
