//! The cluster the commands act on: named by `CLEMU_CONF`, as Slurm's
//! commands find theirs by `SLURM_CONF`. Its config says where its
//! controllers listen, where its secret is, and what its partitions are
//! (sinfo and scontrol show them from there).

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use client::{Request, Response, Session};
use controller::config::Cluster as Config;
use formats::wire::{JobInfo, JobState, NodeInfo};

/// The environment variable naming the cluster's config file.
pub const CONF_VAR: &str = "CLEMU_CONF";

/// The cluster's name, as Slurm's `ClusterName` (and its database) give
/// it: what `-M/--clusters` may name.
pub const NAME: &str = "clemu";

/// Whether Slurm's `-M/--clusters LIST` names this cluster: by its
/// name, in any case, or `all`.
pub fn names_this(list: &str) -> bool {
    list.split(',')
        .any(|c| c.eq_ignore_ascii_case(NAME) || c.eq_ignore_ascii_case("all"))
}

/// `program`'s `-M/--clusters LIST`, as Slurm's commands take it: each
/// name it does not know is said; when it names no cluster clemu knows,
/// the command ends there, with Slurm's lines and exit status (`Err`).
/// Else whether the list was given, for the commands that then say
/// which cluster answers (`CLUSTER: clemu`, `on cluster clemu`).
pub fn reach(program: &str, list: Option<&str>) -> std::result::Result<bool, u8> {
    let Some(list) = list else {
        return Ok(false);
    };
    for c in list.split(',') {
        if !names_this(c) {
            eprintln!("{program}: error: No cluster '{c}' known by database.");
        }
    }
    if names_this(list) {
        return Ok(true);
    }
    eprintln!(
        "{program}: error: '{list}' can't be reached now, or it is an invalid entry for \
         --cluster.  Use 'sacctmgr list clusters' to see available clusters."
    );
    Err(1)
}

pub struct Cluster {
    pub config: Config,
    session: Session,
}

impl Cluster {
    /// Connects to the cluster `CLEMU_CONF` names.
    pub async fn open() -> Result<Cluster> {
        let path = conf_path()?;
        let config = Config::load(&path)?;
        let secret = config.client_secret(None)?;
        let addr = config.client_address(None);
        let session = Session::open(&addr, &secret).await.with_context(|| {
            format!(
                "cannot reach the controller of {} at {addr}: is it running? (`clemu-slurm up` \
                 starts one)",
                path.display()
            )
        })?;
        Ok(Cluster { config, session })
    }

    pub async fn call(&mut self, req: &Request) -> Result<Response> {
        match self.ask(req).await? {
            Response::Error(e) => bail!("{e}"),
            r => Ok(r),
        }
    }

    /// As [`Cluster::call`], with the controller's refusal as an answer
    /// (`Response::Error`), for a command that words it as Slurm does.
    pub async fn ask(&mut self, req: &Request) -> Result<Response> {
        self.session.call(req).await
    }

    /// Jobs not over; finished ones too with `all` (every one the
    /// controller keeps: scancel and scontrol act on the active ones).
    pub async fn jobs(&mut self, all: bool) -> Result<Vec<JobInfo>> {
        self.queue(&Request::Queue { all }).await
    }

    /// Jobs not over, and those that ended at or after `since_s` (Unix
    /// seconds): the controller leaves the rest out, so that a command
    /// polled every second costs the same after a million jobs.
    pub async fn recent(&mut self, since_s: i64) -> Result<Vec<JobInfo>> {
        let ended_since_ns = since_s.saturating_mul(1_000_000_000);
        self.queue(&Request::Recent { ended_since_ns }).await
    }

    /// These jobs, among those the controller keeps, by id.
    pub async fn by_ids(&mut self, ids: Vec<u64>) -> Result<Vec<JobInfo>> {
        self.queue(&Request::Jobs(ids)).await
    }

    async fn queue(&mut self, req: &Request) -> Result<Vec<JobInfo>> {
        match self.call(req).await? {
            Response::Queue(mut jobs) => {
                jobs.sort_by_key(|j| j.id);
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as i64);
                for j in &mut jobs {
                    at_limit(j, now);
                }
                Ok(jobs)
            }
            other => Err(anyhow!("unexpected answer to a queue request: {other:?}")),
        }
    }

    pub async fn nodes(&mut self) -> Result<Vec<NodeInfo>> {
        match self.call(&Request::Nodes).await? {
            Response::Nodes(n) => Ok(n),
            other => Err(anyhow!("unexpected answer to a nodes request: {other:?}")),
        }
    }

    /// The pending jobs expected to start, and when (Slurm's `squeue
    /// --start`).
    pub async fn starts(&mut self) -> Result<Vec<formats::wire::ExpectedStart>> {
        match self.call(&Request::Starts).await? {
            Response::Starts(s) => Ok(s),
            other => Err(anyhow!("unexpected answer to a starts request: {other:?}")),
        }
    }

    /// The name of the default partition (the first when none is marked).
    pub fn default_partition(&self) -> &str {
        self.config
            .partitions
            .iter()
            .find(|p| p.default)
            .or(self.config.partitions.first())
            .map_or("", |p| p.name.as_str())
    }
}

/// Slurm's `KillWait` for cluster `cfg`, in seconds: what a job gets
/// between SIGTERM and SIGKILL, half the agents' grace (the other half is
/// their own backstop).
pub fn kill_wait_s(cfg: &Config) -> u128 {
    cfg.agent.kill_grace.as_millis() / 2 / 1000
}

/// Who owns the cluster (its config file): the user its controller runs
/// as.
pub fn owner() -> String {
    use std::os::unix::fs::MetadataExt;
    conf_path()
        .ok()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| crate::users::by_uid(m.uid()))
        .map_or_else(crate::text::user_name, |u| u.name)
}

/// The config file `CLEMU_CONF` names, or why there is none.
pub fn conf_path() -> Result<PathBuf> {
    match std::env::var_os(CONF_VAR) {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => bail!(
            "{CONF_VAR} is not set: it names the cluster's config file, as SLURM_CONF does \
             (`clemu-slurm up` starts a cluster and prints what to set)"
        ),
    }
}

/// Runs a command's body on a runtime of its own; errors are printed as
/// Slurm prints them (`sbatch: error: ...`) and exit 1.
pub fn run<F>(name: &str, body: F) -> std::process::ExitCode
where
    F: std::future::Future<Output = Result<u8>>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{name}: error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(body) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A batch job as Slurm shows one that reached its time limit: its
/// supervisor signals it there and kills it a grace later, and all that
/// time it is `COMPLETING`, its time stopped at the limit; over, it
/// ended at the limit. (The controller learns of a limit the job's own
/// supervisor enforced only at the end; the limit and the job's running
/// time tell when it was.)
fn at_limit(j: &mut JobInfo, now_ns: i64) {
    if j.program.is_none() || j.walltime_ns == 0 || j.start_ns == 0 {
        return;
    }
    let suspended: i64 = j
        .suspensions
        .iter()
        .map(|&(from, to)| if to == 0 { now_ns - from } else { to - from })
        .sum();
    let limit_at = j
        .start_ns
        .saturating_add(suspended)
        .saturating_add(j.walltime_ns.min(i64::MAX as u64) as i64);
    match j.state {
        JobState::Running if !j.completing && j.end_ns == 0 && now_ns >= limit_at => {
            j.completing = true;
            j.end_ns = limit_at;
        }
        JobState::Timeout if j.end_ns > limit_at => j.end_ns = limit_at,
        _ => {}
    }
}
