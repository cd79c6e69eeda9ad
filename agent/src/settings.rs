//! How an agent runs its jobs: what the controller decides (sent at
//! registration, [`RunSettings`]) and what only the host knows (where
//! sigsleep is).

use std::path::PathBuf;
use std::time::Duration;

pub use formats::wire::{RunSettings, SuspendMode};

/// Settings of the agents a controller runs or accepts; the controller's
/// config fills them, `[agents]` section.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// The one program an agent ever runs.
    pub sigsleep: PathBuf,
    pub suspend_mode: SuspendMode,
    /// In `slurm` mode, time between `SIGTSTP` and `SIGSTOP`.
    pub suspend_grace: Duration,
    /// Time between `SIGTERM` and `SIGKILL` when a job is cancelled.
    pub kill_grace: Duration,
    pub heartbeat: Duration,
    /// Jobs wait under real-time scheduling (`[agents] realtime`).
    pub realtime: bool,
    /// A job's run counts from its process's first instant
    /// (`[agents] run_from = "launch"`).
    pub run_from_launch: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            sigsleep: default_sigsleep(),
            suspend_mode: SuspendMode::Tstp,
            suspend_grace: Duration::from_secs(2),
            kill_grace: Duration::from_secs(10),
            heartbeat: Duration::from_secs(1),
            realtime: true,
            run_from_launch: false,
        }
    }
}

impl AgentSettings {
    /// What an agent is told at registration. `remote`: it runs on its own
    /// (streams its records, and fences its jobs after `fence` without
    /// news); an agent hosted by the controller lives and dies with it.
    pub fn run_settings(&self, remote: bool, fence: Duration) -> RunSettings {
        RunSettings {
            heartbeat_ms: self.heartbeat.as_millis() as u64,
            suspend_mode: self.suspend_mode,
            suspend_grace_ms: self.suspend_grace.as_millis() as u64,
            kill_grace_ms: self.kill_grace.as_millis() as u64,
            stream_records: remote,
            fence_ms: if remote {
                fence.as_millis().max(1) as u64
            } else {
                0
            },
            mark: Default::default(),
            realtime: self.realtime,
            run_from_launch: self.run_from_launch,
        }
    }
}

/// `sigsleep` beside the running executable (where `cargo build` puts it),
/// else the first on the PATH, else the bare name (which will not start,
/// and says so).
pub fn default_sigsleep() -> PathBuf {
    let beside = std::env::current_exe().ok().and_then(|exe| {
        // Test binaries live one level down, in deps/.
        let dir = exe.parent()?;
        [dir.join("sigsleep"), dir.parent()?.join("sigsleep")]
            .into_iter()
            .find(|p| p.is_file())
    });
    beside
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("sigsleep"))
                    .find(|p| p.is_file())
            })
        })
        .unwrap_or_else(|| PathBuf::from("sigsleep"))
}
