//! How an agent runs its jobs: what the controller decides (sent at
//! registration, [`RunSettings`]) and what only the host knows (where
//! sigsleep is).

use std::path::{Path, PathBuf};
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

/// `sigsleep` beside the running executable (where `cargo build` puts it,
/// or its musl build: [`sigsleep_in`]), else the first on the PATH, else
/// the bare name (which will not start, and says so).
pub fn default_sigsleep() -> PathBuf {
    // Looked up once, at the first start: telling builds apart reads a
    // binary through. A musl build rebuilt or removed later is not seen
    // until the agent starts again.
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND.get_or_init(find_sigsleep).clone()
}

fn find_sigsleep() -> PathBuf {
    let beside = std::env::current_exe().ok().and_then(|exe| {
        // Test binaries live one level down, in deps/.
        let dir = exe.parent()?;
        sigsleep_in(dir).or_else(|| sigsleep_in(dir.parent()?))
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

/// The `sigsleep` that belongs with the executables of `dir`, if there is
/// one: `dir/sigsleep`, or rather the same program of cargo's musl build
/// (`cargo build -p sigsleep --target x86_64-unknown-linux-musl`, the same
/// profile) when there is one built from the same code as this program
/// (the digest its file carries is [`sigsleep::SOURCE_ID`]). That build starts a job
/// in a third of the time and keeps half its memory, having none of
/// glibc's start-up; one built from other code is passed over.
pub fn sigsleep_in(dir: &Path) -> Option<PathBuf> {
    let here = dir.join("sigsleep");
    if !here.is_file() {
        return None;
    }
    let twin = musl_build_of(&here).filter(|t| {
        let same = source_id(t).as_deref() == Some(sigsleep::SOURCE_ID);
        if !same {
            // Said, so that a benchmark does not measure the glibc build
            // unawares.
            tracing::warn!(
                "{} is from other code than this program (rebuild it): running {}",
                t.display(),
                here.display()
            );
        }
        same
    });
    Some(twin.unwrap_or(here))
}

/// For `<target>/<arch>-<os>-gnu/<profile>/NAME`, a file of cargo's build
/// for a target, `<target>/<arch>-<os>-musl/<profile>/NAME` if it exists.
fn musl_build_of(path: &Path) -> Option<PathBuf> {
    let profile_dir = path.parent()?;
    let triple_dir = profile_dir.parent()?;
    let musl = triple_dir.file_name()?.to_str()?.strip_suffix("-gnu")?;
    let twin = triple_dir
        .parent()?
        .join(format!("{musl}-musl"))
        .join(profile_dir.file_name()?)
        .join(path.file_name()?);
    twin.is_file().then_some(twin)
}

/// The [`sigsleep::SOURCE_ID_MARK`] in sigsleep binary `path`, read from
/// the file: running it to ask would race this process's reaper, which
/// waits for every child ([`crate::spawn`]).
fn source_id(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let name = sigsleep::SOURCE_ID_NAME.as_bytes();
    let len = sigsleep::SOURCE_ID.len();
    memchr::memmem::find_iter(&bytes, name).find_map(|at| {
        let id = bytes.get(at + name.len()..at + name.len() + len)?;
        let ended = bytes.get(at + name.len() + len) == Some(&0);
        (ended && id.iter().all(u8::is_ascii_hexdigit)).then(|| String::from_utf8_lossy(id).into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_musl_build_is_taken_if_it_comes_from_the_same_code() {
        let root = tempfile::tempdir().unwrap();
        let gnu = root.path().join("x86_64-unknown-linux-gnu/release");
        let musl = root.path().join("x86_64-unknown-linux-musl/release");
        std::fs::create_dir_all(&gnu).unwrap();
        // No sigsleep here at all: none.
        assert_eq!(sigsleep_in(&gnu), None);
        // A binary's bytes around its mark, and the name alone elsewhere.
        let script = |p: &Path, id: &str| {
            let name = sigsleep::SOURCE_ID_NAME;
            std::fs::write(p, format!("\x7fELF..{name}..{name}{id}\0..")).unwrap();
        };
        script(&gnu.join("sigsleep"), sigsleep::SOURCE_ID);
        // No musl build: the one here.
        assert_eq!(sigsleep_in(&gnu), Some(gnu.join("sigsleep")));
        std::fs::create_dir_all(&musl).unwrap();
        script(&musl.join("sigsleep"), sigsleep::SOURCE_ID);
        assert_eq!(sigsleep_in(&gnu), Some(musl.join("sigsleep")));
        // Built from other code: passed over.
        script(&musl.join("sigsleep"), "0123456789abcdef");
        assert_eq!(sigsleep_in(&gnu), Some(gnu.join("sigsleep")));
        // Not a cargo target's directory: the one here.
        let plain = root.path().join("bin");
        std::fs::create_dir_all(&plain).unwrap();
        std::fs::write(plain.join("sigsleep"), "").unwrap();
        assert_eq!(sigsleep_in(&plain), Some(plain.join("sigsleep")));
    }
}
