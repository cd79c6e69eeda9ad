//! Which partition each trace job goes to (`--route`). A trace has no
//! partitions of the cluster being emulated, so every job goes to the
//! default one unless a route sends it elsewhere, as a site's submit filter
//! sends small or short jobs to an express partition. With one that has a
//! higher priority and `preemption = "suspend"`, such a replay exercises
//! preemption by suspension.

use anyhow::{anyhow, bail, Result};

use crate::trace::TraceJob;

/// `NAME:COND[,COND]`: jobs meeting every condition go to partition NAME.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub partition: String,
    /// `cores<=N`: at most N cores (after --cores-per-proc).
    pub max_cores: Option<u32>,
    /// `walltime<=S`: a wall-time limit in the trace of at most S seconds
    /// (a job with none never matches).
    pub max_walltime_ns: Option<u64>,
    /// As given, for the manifest and messages.
    pub text: String,
}

impl Route {
    /// Parses one `--route` value, checking the partition against the
    /// config and that it could hold a job meeting the conditions.
    pub fn parse(s: &str, config: &controller::config::Cluster) -> Result<Route> {
        let bad = |why: String| {
            anyhow!("--route {s}: {why} (expected NAME:cores<=N or NAME:walltime<=SECONDS, conditions joined by commas)")
        };
        let (name, conds) = s
            .split_once(':')
            .ok_or_else(|| bad("no condition".into()))?;
        let Some(part) = config.partitions.iter().find(|p| p.name == name) else {
            let names: Vec<&str> = config.partitions.iter().map(|p| p.name.as_str()).collect();
            bail!(
                "--route {s}: the config has no partition {name:?} (it has {})",
                names.join(", ")
            );
        };
        let mut route = Route {
            partition: name.to_string(),
            max_cores: None,
            max_walltime_ns: None,
            text: s.to_string(),
        };
        for cond in conds.split(',') {
            let (key, value) = cond
                .split_once("<=")
                .ok_or_else(|| bad(format!("{cond:?} is not KEY<=VALUE")))?;
            match key.trim() {
                "cores" => {
                    let n: u32 = value
                        .trim()
                        .parse()
                        .map_err(|_| bad(format!("{value:?} is not a core count")))?;
                    route.max_cores = Some(n);
                }
                "walltime" => {
                    let secs: f64 = value
                        .trim()
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite() && *v >= 0.0 && *v < 1e9)
                        .ok_or_else(|| bad(format!("{value:?} is not a number of seconds")))?;
                    route.max_walltime_ns = Some((secs * 1e9) as u64);
                }
                other => return Err(bad(format!("unknown condition {other:?}"))),
            }
        }
        if config.partition_cores(part) == 0 {
            bail!("--route {s}: partition {name} has no cores");
        }
        Ok(route)
    }

    fn matches(&self, job: &TraceJob) -> bool {
        self.max_cores.is_none_or(|n| job.cores <= n)
            && self
                .max_walltime_ns
                .is_none_or(|w| job.walltime_ns > 0 && job.walltime_ns <= w)
    }
}

/// The partition of `job`: the first route it meets whose partition would
/// take it (the cores for it, and a `max_time_s`, in trace seconds, that
/// its limit keeps within), else `None` (the default partition).
pub fn partition_of<'a>(
    routes: &'a [Route],
    job: &TraceJob,
    config: &controller::config::Cluster,
) -> Option<&'a str> {
    let takes = |p: &controller::config::PartitionDef| {
        config.partition_cores(p) >= u64::from(job.cores)
            && (p.max_time_ns == 0 || job.walltime_ns <= p.max_time_ns)
    };
    routes
        .iter()
        .find(|r| {
            r.matches(job)
                && config
                    .partitions
                    .iter()
                    .any(|p| p.name == r.partition && takes(p))
        })
        .map(|r| r.partition.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> controller::config::Cluster {
        controller::config::Cluster::from_str(
            "[[nodes]]\nnames = \"n[1-4]\"\ncpus = 4\n\
             [[partitions]]\nname = \"batch\"\ndefault = true\n\
             [[partitions]]\nname = \"urgent\"\nnodes = \"n1\"\npriority = 10\nmax_time_s = 3600\n",
            std::path::Path::new("t.toml"),
        )
        .unwrap()
    }

    fn job(cores: u32, walltime_s: u64) -> TraceJob {
        TraceJob {
            trace_id: 1,
            line: 1,
            submit_ns: 0,
            run_ns: 1,
            walltime_ns: walltime_s * 1_000_000_000,
            cores,
            cancel_after_ns: None,
            preceding: None,
            trace_run_ns: 0,
            queue: -1,
            partition: -1,
            profile: None,
        }
    }

    #[test]
    fn jobs_go_to_the_first_route_they_meet_and_fit() {
        let c = config();
        let routes = [Route::parse("urgent:cores<=2,walltime<=600", &c).unwrap()];
        assert_eq!(partition_of(&routes, &job(2, 600), &c), Some("urgent"));
        assert_eq!(partition_of(&routes, &job(3, 600), &c), None);
        assert_eq!(partition_of(&routes, &job(2, 601), &c), None);
        // No wall-time limit in the trace: a walltime condition fails.
        assert_eq!(partition_of(&routes, &job(2, 0), &c), None);
        // A partition too small for the job is passed over.
        let big = [Route::parse("urgent:cores<=64", &c).unwrap()];
        assert_eq!(partition_of(&big, &job(8, 1), &c), None);
        assert_eq!(partition_of(&big, &job(4, 1), &c), Some("urgent"));
        // So is one whose limit is past the partition's max_time_s.
        assert_eq!(partition_of(&big, &job(4, 3601), &c), None);
    }

    #[test]
    fn a_bad_route_is_refused_by_name() {
        let c = config();
        for (bad, says) in [
            (
                "express:cores<=2",
                "no partition \"express\" (it has batch, urgent)",
            ),
            ("urgent", "no condition"),
            ("urgent:cores<2", "is not KEY<=VALUE"),
            ("urgent:cores<=two", "is not a core count"),
            ("urgent:memory<=2", "unknown condition \"memory\""),
            ("urgent:walltime<=-1", "is not a number of seconds"),
        ] {
            let e = Route::parse(bad, &c).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--route {bad}: ")) && e.contains(says),
                "{e}"
            );
        }
    }
}
