//! When each job is submitted: pure arithmetic from the trace and the
//! chosen schedule, as offsets from the run's start. The submitter waits
//! for each offset as an absolute deadline, so lateness never accumulates.

use crate::trace::TraceJob;

/// How jobs are submitted.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// At each job's own (shrunk) submit time.
    Trace,
    /// The originating study's schedule: `warmup_jobs` at once, then the
    /// rest in groups of `group`, group j (from 0) at
    /// `warmup + (drift + period)·j`.
    Groups {
        warmup_jobs: usize,
        warmup_ns: i64,
        group: usize,
        period_ns: i64,
        drift_ns: i64,
    },
}

/// Time compression of one run: `factor` (1.0 = 100 %) scales submit
/// times, run times and wall-time limits; `speedup` divides every time on
/// top of that, so that days of trace replay in minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub factor: f64,
    pub speedup: f64,
}

impl Scale {
    pub fn apply(&self, ns: i64) -> i64 {
        (ns as f64 * self.factor / self.speedup).round() as i64
    }

    pub fn apply_u(&self, ns: u64) -> u64 {
        (ns as f64 * self.factor / self.speedup).round() as u64
    }

    /// A policy duration of the trace (a gang time slice) as the replay
    /// runs it; never zero, which would turn every pass into a turn.
    pub fn duration(&self, d: std::time::Duration) -> std::time::Duration {
        let ns = self.apply_u(d.as_nanos().min(u64::MAX as u128) as u64);
        std::time::Duration::from_nanos(ns.max(1_000))
    }

    /// The cluster a run starts: the config with its policy durations (gang
    /// time slices, partitions' `max_time_s`, the scheduling interval, the
    /// requeue delay) read
    /// as trace seconds and scaled as the trace's times are (the emulation's
    /// wall-clock `pass_floor_ms` is not). A user who writes Slurm's 30 s
    /// slice means 30 s of the trace; read as wall-clock seconds at 10,000x, no slice would
    /// ever end.
    pub fn cluster(&self, config: &controller::config::Cluster) -> controller::config::Cluster {
        let mut c = config.clone();
        c.time_slice = self.duration(c.time_slice);
        c.requeue_delay = std::time::Duration::from_nanos(
            self.apply_u(c.requeue_delay.as_nanos().min(u64::MAX as u128) as u64),
        );
        // Zero (a pass after every event) stays zero.
        c.schedule_interval = std::time::Duration::from_nanos(
            self.apply_u(c.schedule_interval.as_nanos().min(u64::MAX as u128) as u64),
        );
        for p in &mut c.partitions {
            p.time_slice = self.duration(p.time_slice);
            if p.max_time_ns > 0 {
                p.max_time_ns = self.apply_u(p.max_time_ns).max(1);
            }
        }
        // An external scheduler's `now` is the trace's time.
        if let Some(b) = &mut c.batsim {
            b.wall_per_second = self.factor / self.speedup;
        }
        c
    }
}

/// Offset of each job's submission from the start, in job order: the
/// trace's submit times scaled, and their gaps divided by `load` (1: the
/// trace's arrivals); or the groups' schedule.
pub fn targets(jobs: &[TraceJob], schedule: &Schedule, scale: Scale, load: f64) -> Vec<i64> {
    let Some(first) = jobs.iter().map(|j| j.submit_ns).min() else {
        return Vec::new();
    };
    match schedule {
        Schedule::Trace => jobs
            .iter()
            .map(|j| (scale.apply(j.submit_ns - first) as f64 / load).round() as i64)
            .collect(),
        Schedule::Groups {
            warmup_jobs,
            warmup_ns,
            group,
            period_ns,
            drift_ns,
        } => {
            // These are replay times already, not trace times: the speedup
            // does not apply. The period is shrunk with the run; the
            // warm-up and the drift (the originating script's fixed
            // overheads) are not.
            let step = drift_ns + (*period_ns as f64 * scale.factor).round() as i64;
            (0..jobs.len())
                .map(|i| {
                    if i < *warmup_jobs {
                        0
                    } else {
                        let j = ((i - warmup_jobs) / (*group).max(1)) as i64;
                        warmup_ns + step * j
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn job(submit_s: i64) -> TraceJob {
        TraceJob {
            trace_id: submit_s,
            line: 1,
            submit_ns: submit_s * S,
            run_ns: 0,
            walltime_ns: 0,
            cores: 1,
            cancel_after_ns: None,
            preceding: None,
            trace_run_ns: 0,
            queue: -1,
            partition: -1,
            profile: None,
        }
    }

    #[test]
    fn trace_times_are_shrunk_and_sped_up() {
        let jobs = [job(1000), job(1100), job(1400)];
        let half = Scale {
            factor: 0.5,
            speedup: 10.0,
        };
        let t = targets(&jobs, &Schedule::Trace, half, 1.0);
        assert_eq!(t, [0, 5 * S, 20 * S]);
        // Twice the load: the gaps halved.
        let t = targets(&jobs, &Schedule::Trace, half, 2.0);
        assert_eq!(t, [0, 5 * S / 2, 10 * S]);
    }

    #[test]
    fn groups_at_fixed_deadlines() {
        let jobs: Vec<TraceJob> = (0..9).map(job).collect();
        let s = Schedule::Groups {
            warmup_jobs: 3,
            warmup_ns: 10 * S,
            group: 2,
            period_ns: 4 * S,
            drift_ns: S / 2,
        };
        let t = targets(
            &jobs,
            &s,
            Scale {
                factor: 0.5,
                speedup: 1.0,
            },
            1.0,
        );
        // Warm-up at 0; then groups at 10, 12.5, 15: 10 + (0.5 + 2)·j.
        assert_eq!(
            t,
            [
                0,
                0,
                0,
                10 * S,
                10 * S,
                25 * S / 2,
                25 * S / 2,
                15 * S,
                15 * S
            ]
        );
    }
}
