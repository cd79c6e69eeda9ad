//! Which clock a run's numbers are in.
//!
//! A replay compresses time: a factor f and a speed-up S run every trace
//! second as f/S seconds of the host's clock. Records carry the host's
//! instants (the twin's, virtual ones on the same scale). A researcher
//! thinks in the workload's seconds, so every figure of a run is given in
//! **trace seconds** unless `--clock wall` asks for the records' own:
//! durations multiplied by S/f, instants mapped so that the run's first
//! submission is the slice's first submit time in the trace (SWF field 2:
//! seconds since the log's start), as `calcmets --swf` counts them.
//!
//! The conversion is one affine map per run ([`Clock`]); the metrics are
//! computed in the records' nanoseconds (τ brought to them) and the
//! finished [`Summary`](crate::metrics::Summary) is converted, so that no
//! rounding enters the sums.

use anyhow::{bail, Result};
use formats::results::Manifest;
use serde::Serialize;

/// The two clocks a figure can be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// The workload's seconds: what the trace's own metrics are in.
    Trace,
    /// The records' own: the host's wall clock (the twin's virtual clock,
    /// which runs as the host's would have).
    Wall,
}

impl ClockKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ClockKind::Trace => "trace",
            ClockKind::Wall => "wall",
        }
    }

    /// How a duration in this clock is labelled: `trace s`, `wall s`.
    pub fn unit(self) -> &'static str {
        match self {
            ClockKind::Trace => "trace s",
            ClockKind::Wall => "wall s",
        }
    }
}

/// An affine map from the records' clock to the one the figures are in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clock {
    pub kind: ClockKind,
    /// Seconds of this clock per second of the records'.
    pub scale: f64,
    /// One instant in both clocks: Unix ns in the records' clock, and
    /// seconds in this one.
    pub from_ns: i64,
    pub to_s: f64,
}

impl Clock {
    /// The records' own clock, as it is.
    pub fn wall() -> Clock {
        Clock {
            kind: ClockKind::Wall,
            scale: 1.0,
            from_ns: 0,
            to_s: 0.0,
        }
    }

    /// A trace's own seconds (an SWF trace read with `--swf`).
    pub fn trace_itself() -> Clock {
        Clock {
            kind: ClockKind::Trace,
            ..Clock::wall()
        }
    }

    /// The trace clock of a replay, from its manifest: durations × S/f,
    /// the run's start (its first deadline) at the slice's first submit
    /// time. `None` for a manifest that does not say its factor and
    /// speed-up.
    pub fn of_manifest(m: &Manifest) -> Option<Clock> {
        let scale = m.trace_per_wall()?;
        let from_ns = (m.start? * 1e9).round() as i64;
        Some(Clock {
            kind: ClockKind::Trace,
            scale,
            from_ns,
            to_s: m.slice.first_submit.unwrap_or(0.0),
        })
    }

    /// An instant of the records (Unix ns) in this clock, seconds.
    pub fn instant(&self, ns: i64) -> f64 {
        self.to_s + (ns.saturating_sub(self.from_ns)) as f64 / 1e9 * self.scale
    }

    /// A duration of the records (seconds) in this clock.
    pub fn duration(&self, secs: f64) -> f64 {
        secs * self.scale
    }

    /// A duration of this clock (ns) in the records' ns: what τ and
    /// windows given in this clock are applied as.
    pub fn records_duration_ns(&self, ns: i64) -> i64 {
        (ns as f64 / self.scale).round() as i64
    }

    /// An instant of this clock (ns) as the records' Unix ns.
    pub fn records_instant_ns(&self, ns: i64) -> i64 {
        let since = ns as f64 / 1e9 - self.to_s;
        self.from_ns
            .saturating_add((since / self.scale * 1e9).round() as i64)
    }
}

/// The clock each run is read in: the one asked for, else the trace's
/// where the run has one (a results directory, a trace) and the records'
/// own where it has not (loose record files). Runs set side by side must
/// share a kind of clock: a table of trace seconds beside wall seconds
/// would compare unlike numbers, so it is refused, saying which run is in
/// which.
pub fn choose(
    asked: Option<ClockKind>,
    runs: &[(&str, Option<Clock>, bool)],
) -> Result<Vec<Clock>> {
    let mut out = Vec::with_capacity(runs.len());
    for &(name, trace, is_trace_file) in runs {
        let clock = match (asked, trace) {
            (Some(ClockKind::Wall), _) if is_trace_file => bail!(
                "{name}: a trace has only its own clock (trace seconds); drop --clock wall, \
                 or read it apart"
            ),
            (Some(ClockKind::Wall), _) => Clock::wall(),
            (_, Some(c)) => c,
            (Some(ClockKind::Trace), None) => bail!(
                "{name}: record files without a results directory's manifest.json have only \
                 the wall clock (no factor or speed-up to undo); give the results directory, \
                 or --clock wall"
            ),
            (None, None) => Clock::wall(),
        };
        out.push(clock);
    }
    if let Some(first) = out.first() {
        if let Some(k) = out.iter().position(|c| c.kind != first.kind) {
            let which = |i: usize| format!("{} ({})", runs[i].0, out[i].kind.unit());
            bail!(
                "the runs are in different clocks and would compare unlike numbers: {} beside \
                 {}; read them apart, or all with --clock wall",
                which(0),
                which(k)
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replays_instants_map_back_onto_the_trace() {
        // Factor 0.5 at speed-up 10,000: a trace second is 50 µs.
        let c = Clock {
            kind: ClockKind::Trace,
            scale: 20_000.0,
            from_ns: 1_800_000_000_000_000_000,
            to_s: 4_000.0,
        };
        assert_eq!(c.instant(1_800_000_000_000_000_000), 4_000.0);
        // 1 ms of the run later: 20 trace seconds.
        assert!((c.instant(1_800_000_000_001_000_000) - 4_020.0).abs() < 1e-6);
        assert_eq!(c.duration(0.5e-3), 10.0);
        // τ of 10 trace s is 0.5 ms of the run.
        assert_eq!(c.records_duration_ns(10_000_000_000), 500_000);
        assert_eq!(
            c.records_instant_ns(4_020_000_000_000),
            1_800_000_000_001_000_000
        );
    }

    #[test]
    fn runs_in_different_clocks_are_refused_with_which_is_which() {
        let trace = Some(Clock::trace_itself());
        let ok = choose(None, &[("a", trace, false), ("b", trace, true)]).unwrap();
        assert!(ok.iter().all(|c| c.kind == ClockKind::Trace));
        let err = choose(
            None,
            &[("shrink-100", trace, false), ("records", None, false)],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("shrink-100 (trace s) beside records (wall s)"),
            "{err}"
        );
        let err = choose(Some(ClockKind::Wall), &[("kth", trace, true)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("kth: a trace has only its own clock"), "{err}");
        let err = choose(Some(ClockKind::Trace), &[("records", None, false)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("have only the wall clock"), "{err}");
        let wall = choose(Some(ClockKind::Wall), &[("a", trace, false)]).unwrap();
        assert_eq!(wall[0], Clock::wall());
    }
}
