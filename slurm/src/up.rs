//! `clemu-slurm up`: an emulated cluster started in one command, and the
//! two lines that make Slurm's commands reach it. `clemu-slurm down`
//! stops it.
//!
//! The cluster lives in one directory: its config (`cluster.toml`, what
//! `CLEMU_CONF` names), the controller's state and log, the job records,
//! and `bin/`, where Slurm's command names link to this program. Only
//! `bin/` takes Slurm's names, and only for who puts it on `PATH`. What a
//! stopped cluster left there stays until the next `up` in the same
//! directory, which starts afresh.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use client::{Request, Response};

use crate::cluster::{Cluster, CONF_VAR};

/// The commands `bin/` holds.
pub const COMMANDS: [&str; 9] = [
    "sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "srun", "sacctmgr", "sshare",
];

/// Slurm's other commands (Debian's slurm-client and slurm-wlm-contrib):
/// `bin/` holds them too, each saying that clemu does not provide it, so
/// that none falls through on the `PATH` to a real Slurm's, which would
/// act on the real cluster (`SLURM_CONF` set or not, it has its own).
pub const ABSENT: [&str; 13] = [
    "salloc", "sattach", "sbcast", "scrontab", "sdiag", "seff", "sh5util", "sjstat", "sprio",
    "sreport", "sstat", "strigger", "sview",
];

#[derive(Debug, Parser)]
#[command(name = "clemu-slurm up")]
pub struct UpArgs {
    /// Nodes, named node1, node2, ...
    #[arg(long, default_value_t = 1000)]
    nodes: u32,
    /// Cores per node.
    #[arg(long, default_value_t = 16)]
    cpus: u32,
    /// Memory per node (a size: 64G, 4000M).
    #[arg(long, default_value = "64G")]
    memory: String,
    /// The partition every node is in.
    #[arg(long, default_value = "batch")]
    partition: String,
    /// The scheduling policy (`controller policies`).
    #[arg(long, default_value = "easy")]
    policy: String,
    /// Preemption, as Slurm's `preempt/partition_prio` with this
    /// `PreemptMode` (cancel, requeue or suspend): a second partition,
    /// `urgent`, over the first half of the nodes, whose jobs preempt
    /// those of the first.
    #[arg(long, value_name = "MODE", value_parser = ["cancel", "requeue", "suspend"])]
    preempt: Option<String>,
    /// Where the cluster keeps everything [default: /tmp/clemu-cluster-UID].
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Debug, Parser)]
#[command(name = "clemu-slurm down")]
pub struct DownArgs {
    /// The cluster's directory [default: the one CLEMU_CONF names, else
    /// /tmp/clemu-cluster-UID].
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn default_dir() -> PathBuf {
    PathBuf::from(format!("/tmp/clemu-cluster-{}", nix::unistd::getuid()))
}

fn config_text(a: &UpArgs, dir: &Path) -> String {
    format!(
        r#"# Written by `clemu-slurm up`: {nodes} nodes of {cpus} cores.
[controller]
listen = "127.0.0.1:0"
state_dir = "{dir}/state"
record_dir = "{dir}/records"
policy = "{policy}"
preemption = "{preemption}"
schedule_interval_s = 0
# As slurmctld, whose state save runs behind its answers: sbatch is
# answered once its job is written (a crash of the controller loses
# nothing), and the disk catches up about 100 ms behind.
journal_sync = "background"

[agents]
local = true
# Twice Slurm's KillWait: a cancelled job gets SIGKILL half of this after
# its SIGTERM; the agent's own backstop waits the other half.
kill_grace_ms = 10000

[[nodes]]
names = "node[1-{nodes}]"
cpus = {cpus}
memory = "{memory}"

[[partitions]]
name = "{partition}"
nodes = "ALL"
default = true
{urgent}"#,
        urgent = match &a.preempt {
            None => String::new(),
            Some(_) => format!(
                "priority = 1\n\n[[partitions]]\nname = \"urgent\"\nnodes = \"node[1-{}]\"\n\
                 priority = 10\n",
                a.nodes.div_ceil(2)
            ),
        },
        preemption = a.preempt.as_deref().unwrap_or("off"),
        nodes = a.nodes,
        cpus = a.cpus,
        memory = a.memory,
        partition = a.partition,
        policy = a.policy,
        dir = dir.display(),
    )
}

pub fn up(argv: &[String]) -> Result<u8> {
    let a: UpArgs = crate::argv::parse_plain(argv)?;
    if a.nodes == 0 || a.cpus == 0 {
        bail!("--nodes and --cpus must be at least 1");
    }
    if a.preempt.is_some() && a.partition == "urgent" {
        bail!("--preempt adds a partition named urgent: --partition needs another name");
    }
    let dir = a.dir.clone().unwrap_or_else(default_dir);
    std::fs::create_dir_all(dir.join("bin"))
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let conf = dir.join("cluster.toml");
    if let Ok(pid) = std::fs::read_to_string(dir.join("controller.pid")) {
        if let Started::Elsewhere(host) = started(&dir) {
            bail!(
                "the cluster in {} was started on host {host}: stop it there (`clemu-slurm \
                 down --dir {}`) before starting one here, or remove {} if that host is gone \
                 for good",
                dir.display(),
                dir.display(),
                dir.join(HOST_FILE).display()
            );
        }
        // Only a controller that serves this cluster stops a new one: not
        // a pid some other program has since, nor a killed controller that
        // its parent has yet to reap (a zombie, seconds on some hosts), nor
        // one still ending from its SIGKILL, which is waited for: until it
        // is a zombie it holds its files and looks alive.
        let alive = started(&dir) == Started::Here
            && pid.trim().parse::<i32>().is_ok_and(|p| {
                let p = nix::unistd::Pid::from_raw(p);
                let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while killed(p) && !gone(p) && std::time::Instant::now() < until {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                serves(p, &conf)
            });
        if alive {
            bail!(
                "a cluster already runs in {} (controller pid {}): `clemu-slurm down --dir {}` \
                 stops it",
                dir.display(),
                pid.trim(),
                dir.display()
            );
        }
    }
    // A new cluster: what a stopped one left here (its state, its job
    // records) goes, so that `up` always starts the same way, whatever
    // version of clemu ran the last one.
    for old in ["state", "records"] {
        let path = dir.join(old);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot clear {}", path.display()))?;
        }
    }
    std::fs::write(&conf, config_text(&a, &dir))?;
    let exe = std::env::current_exe().context("cannot find this program's path")?;
    for name in COMMANDS.iter().chain(&ABSENT) {
        let link = dir.join("bin").join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("cannot link {}", link.display()))?;
    }
    let controller = exe.with_file_name("controller");
    if !controller.exists() {
        bail!(
            "no controller program beside {} (build the workspace: cargo build --release)",
            exe.display()
        );
    }
    let started = Instant::now();
    let out = std::process::Command::new(&controller)
        .args(["serve", "--detach", "--config"])
        .arg(&conf)
        .arg("--log")
        .arg(dir.join("controller.log"))
        .output()
        .with_context(|| format!("cannot run {}", controller.display()))?;
    if !out.status.success() {
        bail!(
            "the controller did not start: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // The host first: a pid file never pairs with another cluster's host.
    std::fs::write(dir.join(HOST_FILE), format!("{}\n", this_host()))?;
    std::fs::write(
        dir.join("controller.pid"),
        String::from_utf8_lossy(&out.stdout).trim(),
    )?;
    // Up means every node can take a job. Asked by the counts of nodes
    // by state, not by the list of every node: the controller's
    // allocator would keep the memory of that list's answer, polled
    // every 20 ms, as if each idle node cost 0.4 KiB more.
    std::env::set_var(CONF_VAR, &conf);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut c = Cluster::open().await?;
        loop {
            let stats = match c.call(&Request::Stats).await? {
                Response::Stats(s) => s,
                other => bail!("unexpected answer to a stats request: {other:?}"),
            };
            if stats
                .nodes
                .iter()
                .all(|&(state, n)| state != formats::wire::NodeState::Down || n == 0)
            {
                return Ok::<_, anyhow::Error>(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!(
                    "nodes still down after a minute: see {}",
                    dir.join("controller.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })?;
    eprintln!(
        "clemu-slurm: {} nodes of {} cores up in {:.2} s; `clemu-slurm down` stops them",
        a.nodes,
        a.cpus,
        started.elapsed().as_secs_f64()
    );
    println!("export {CONF_VAR}={}", conf.display());
    println!("export PATH={}:$PATH", dir.join("bin").display());
    Ok(0)
}

/// Where `up` says which host, in which boot, started the controller of
/// `controller.pid`: `HOSTNAME BOOT_ID`, so that a pid is only ever
/// looked up on the host and in the boot it belongs to.
const HOST_FILE: &str = "controller.host";

/// This host and boot, as [`HOST_FILE`] holds them.
fn this_host() -> String {
    let name = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{name} {}", boot.trim()).trim().to_string()
}

/// Where the controller of the cluster in `dir` was started.
#[derive(Debug, PartialEq, Eq)]
enum Started {
    /// On this host, in this boot (or by a clemu that did not say).
    Here,
    /// On this host, before it restarted: that controller is gone.
    BeforeRestart,
    /// On another host (sharing the directory): its pid means nothing here.
    Elsewhere(String),
}

fn started(dir: &Path) -> Started {
    let Ok(said) = std::fs::read_to_string(dir.join(HOST_FILE)) else {
        return Started::Here;
    };
    let here = this_host();
    let parts = |s: &str| {
        let (name, boot) = s.trim().split_once(' ').unwrap_or((s.trim(), ""));
        (name.to_string(), boot.trim().to_string())
    };
    let ((name, boot), (my_name, my_boot)) = (parts(&said), parts(&here));
    // The boot id first: it is this kernel's own, whatever the host's
    // name became since.
    if !boot.is_empty() && boot == my_boot {
        Started::Here
    } else if name != my_name {
        Started::Elsewhere(name)
    } else if !boot.is_empty() && !my_boot.is_empty() {
        Started::BeforeRestart
    } else {
        // No boot id to tell by: as before there was a host file.
        Started::Here
    }
}

/// Whether process `pid` is gone: no process has it, or the one that has
/// it has ended and waits to be reaped (a zombie's command line is empty).
fn gone(pid: nix::unistd::Pid) -> bool {
    nix::sys::signal::kill(pid, None) == Err(nix::errno::Errno::ESRCH)
        || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
}

/// Whether process `pid` has a SIGKILL pending: it is ending, whatever
/// it looks like meanwhile (SIGKILL cannot be blocked or ignored).
fn killed(pid: nix::unistd::Pid) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let bit = 1u64 << (libc::SIGKILL - 1);
    status.lines().any(|l| {
        ["SigPnd:", "ShdPnd:"].iter().any(|k| {
            l.strip_prefix(k)
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
                .is_some_and(|v| v & bit != 0)
        })
    })
}

/// Whether process `pid` is alive and a controller serving the cluster
/// of `conf` (a pid file outlives its process, and pids are reused).
fn serves(pid: nix::unistd::Pid, conf: &Path) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let Some(given) = args
        .windows(2)
        .find(|w| w[0] == b"--config")
        .map(|w| Path::new(std::ffi::OsStr::from_bytes(w[1])))
    else {
        return false;
    };
    // As the controller named it, from where it started.
    let theirs = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .map(|cwd| cwd.join(given))
        .and_then(std::fs::canonicalize);
    args.first().is_some_and(|a| a.ends_with(b"controller"))
        && matches!((theirs, std::fs::canonicalize(conf)), (Ok(a), Ok(b)) if a == b)
}

pub fn down(argv: &[String]) -> Result<u8> {
    let a: DownArgs = crate::argv::parse_plain(argv)?;
    let conf = match (&a.dir, std::env::var_os(CONF_VAR)) {
        (Some(d), _) => d.join("cluster.toml"),
        (None, Some(c)) => PathBuf::from(c),
        (None, None) => default_dir().join("cluster.toml"),
    };
    if !conf.exists() {
        bail!("no cluster at {}", conf.display());
    }
    std::env::set_var(CONF_VAR, &conf);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let asked = rt.block_on(async {
        let mut c = Cluster::open().await?;
        match c.call(&Request::Shutdown).await? {
            Response::ShuttingDown => Ok(()),
            other => bail!("unexpected answer: {other:?}"),
        }
    });
    let pid_file = conf.with_file_name("controller.pid");
    let pid = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .map(nix::unistd::Pid::from_raw);
    if let Err(e) = asked {
        // A controller that will not take the request (of another
        // version of clemu, say, after an upgrade) is still this
        // cluster's: it is stopped as its service manager would stop it.
        let dir = conf.parent().unwrap_or(Path::new("."));
        let here = started(dir);
        if let Started::Elsewhere(host) = &here {
            return Err(e.context(format!(
                "the cluster was started on host {host}: stop it there (or remove {} if that \
                 host is gone for good)",
                dir.join(HOST_FILE).display()
            )));
        }
        match pid {
            Some(p) if here == Started::Here && serves(p, &conf) => {
                eprintln!("clemu-slurm: {e:#}; sending its controller (pid {p}) SIGTERM");
                nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM)
                    .with_context(|| format!("cannot signal the controller, pid {p}"))?;
            }
            // The controller `up` started is gone (killed, or the host
            // restarted): the cluster is down already, as a stop of a
            // stopped service is no error.
            Some(p) if here == Started::BeforeRestart || gone(p) => {
                let _ = std::fs::remove_file(&pid_file);
                let _ = std::fs::remove_file(dir.join(HOST_FILE));
                eprintln!(
                    "clemu-slurm: the cluster of {} was not running (its controller, pid {p}, \
                     is gone)",
                    conf.display()
                );
                return Ok(0);
            }
            // A process that is not this cluster's controller has the pid
            // now, or none could be looked at: nothing is known.
            _ => return Err(e),
        }
    }
    // Gone once its pid is.
    if let Some(pid) = pid {
        let until = Instant::now() + Duration::from_secs(30);
        while serves(pid, &conf) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(&pid_file);
        let _ = std::fs::remove_file(conf.with_file_name(HOST_FILE));
    }
    eprintln!("clemu-slurm: the cluster of {} is down", conf.display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_is_looked_up_only_on_the_host_and_in_the_boot_it_belongs_to() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // A cluster of a clemu that did not say: taken as this host's.
        assert_eq!(started(d), Started::Here);
        std::fs::write(d.join(HOST_FILE), format!("{}\n", this_host())).unwrap();
        assert_eq!(started(d), Started::Here);
        let here = this_host();
        let (name, boot) = here.split_once(' ').unwrap();
        std::fs::write(d.join(HOST_FILE), format!("{name} 0000-before\n")).unwrap();
        assert_eq!(started(d), Started::BeforeRestart);
        std::fs::write(d.join(HOST_FILE), "login2.example.org 1234\n").unwrap();
        assert_eq!(started(d), Started::Elsewhere("login2.example.org".into()));
        // Renamed since, in the same boot: still here.
        std::fs::write(d.join(HOST_FILE), format!("old-name {boot}\n")).unwrap();
        assert_eq!(started(d), Started::Here);
        // Written where no boot id could be read: taken as here.
        std::fs::write(d.join(HOST_FILE), format!("{name}\n")).unwrap();
        assert_eq!(started(d), Started::Here);
    }
}
