//! Where a replay stands, as it runs: a bar on a terminal; off one (a log
//! file, a batch job's output), a plain line every few seconds, so that a
//! replay of minutes says which run it is at and when it should end;
//! nothing with `-q`.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// A bar, redrawn in place (standard error is a terminal).
    Bar,
    /// A line every [`LINE_EVERY`].
    Lines,
}

/// How often a line is written off a terminal.
pub const LINE_EVERY: Duration = Duration::from_secs(5);

/// Where a run's jobs stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub submitted: u64,
    pub running: u64,
    pub suspended: u64,
    pub pending: u64,
    pub over: u64,
}

/// One run's progress.
pub struct Progress {
    shown: Shown,
    /// The run's name and what it is (`shrink-050`, `factor 50 %`).
    label: String,
    jobs: u64,
    started: Instant,
    /// When the last job is due, from the start.
    last_due: Duration,
}

enum Shown {
    Off,
    Bar(ProgressBar),
    Lines { next: Instant },
}

impl Progress {
    /// `what`: the run's compression in words (`factor 50 %, load 100 %`);
    /// `last_due`: when its last job is due, from now.
    pub fn new(mode: Mode, label: &str, what: &str, jobs: u64, last_due: Duration) -> Progress {
        let shown = match mode {
            Mode::Off => Shown::Off,
            Mode::Bar => {
                let bar = ProgressBar::new(jobs);
                bar.set_style(
                    ProgressStyle::with_template(
                        "{prefix:>11} [{elapsed_precise}] {bar:30} {pos}/{len} over  {msg}  ETA {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar.set_prefix(label.to_string());
                Shown::Bar(bar)
            }
            Mode::Lines => Shown::Lines {
                next: Instant::now() + LINE_EVERY,
            },
        };
        Progress {
            shown,
            label: format!("{label} ({what})"),
            jobs,
            started: Instant::now(),
            last_due,
        }
    }

    /// Shows `c`: at once on a bar, every [`LINE_EVERY`] as a line.
    pub fn update(&mut self, c: &Counts) {
        match &mut self.shown {
            Shown::Off => {}
            Shown::Bar(bar) => {
                bar.set_position(c.over);
                bar.set_message(format!(
                    "submitted {}, running {}, suspended {}, pending {}",
                    c.submitted, c.running, c.suspended, c.pending
                ));
            }
            Shown::Lines { next } => {
                let now = Instant::now();
                if now < *next {
                    return;
                }
                *next = now + LINE_EVERY;
                let line = line(&self.label, self.jobs, c, now - self.started, self.last_due);
                eprintln!("runworkload: {line}");
            }
        }
    }

    pub fn finish(&self) {
        if let Shown::Bar(bar) = &self.shown {
            bar.finish_and_clear();
        }
    }
}

/// The time still to go, estimated: until the last job is due at least,
/// and as long again as the jobs over so far took, for the rest.
fn to_go(jobs: u64, over: u64, elapsed: Duration, last_due: Duration) -> Option<Duration> {
    let by_deadlines = last_due.saturating_sub(elapsed);
    let by_pace =
        (over > 0).then(|| elapsed.mul_f64((jobs.saturating_sub(over)) as f64 / over as f64));
    match (by_pace, over) {
        (Some(p), _) => Some(p.max(by_deadlines)),
        (None, _) if by_deadlines > Duration::ZERO => Some(by_deadlines),
        _ => None,
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// One progress line.
fn line(label: &str, jobs: u64, c: &Counts, elapsed: Duration, last_due: Duration) -> String {
    let end = to_go(jobs, c.over, elapsed, last_due).map_or("end not known yet".to_string(), |d| {
        format!("about {} to go", seconds(d))
    });
    format!(
        "{label}: submitted {}/{jobs}, running {}, suspended {}, pending {}, over {}; {} \
         elapsed, {end}",
        c.submitted,
        c.running,
        c.suspended,
        c.pending,
        c.over,
        seconds(elapsed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_the_run_where_its_jobs_stand_and_when_it_should_end() {
        let c = Counts {
            submitted: 120,
            running: 8,
            suspended: 1,
            pending: 3,
            over: 100,
        };
        let l = line(
            "shrink-050 (factor 50 %)",
            200,
            &c,
            Duration::from_secs(30),
            Duration::from_secs(40),
        );
        assert_eq!(
            l,
            "shrink-050 (factor 50 %): submitted 120/200, running 8, suspended 1, pending 3, \
             over 100; 30 s elapsed, about 30 s to go"
        );
        // Before any job is over: until the last is due.
        assert_eq!(
            to_go(200, 0, Duration::from_secs(5), Duration::from_secs(40)),
            Some(Duration::from_secs(35))
        );
        assert_eq!(
            to_go(200, 0, Duration::from_secs(50), Duration::from_secs(40)),
            None
        );
    }
}
