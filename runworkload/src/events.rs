//! What happens to the cluster during a replay besides its jobs: nodes
//! that fail and come back, drains, cancellations, at instants of the
//! trace, shrunk and sped up like the jobs.
//!
//! They come from a file (`--events`), in either of two forms, one event
//! per line:
//!
//! - Batsim's external events, JSON lines: `{"timestamp": 10.0, "type":
//!   "machine_unavailable", "resources": "0-4 6"}` (or
//!   `machine_available`), and the same inside a `generic` event's `data`
//!   string (Batsim 5). Resources are node numbers, the config's nodes in
//!   order from 0, as Batsim's `unit = "node"` numbers them.
//! - A plain form: `TIME down|up|drain|undrain NODESET [REASON]`, or
//!   `TIME cancel JOB` (a trace job number); `#` starts a comment.
//!
//! or are generated (`--failures mtbf=S,mttr=S,seed=N`): each node fails
//! after an exponential time of mean `mtbf` and comes back after one of
//! mean `mttr`, from a seeded generator, so the same seed gives the same
//! failures.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use serde_json::Value;

use crate::trace::Slice;

/// What an event does.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// Nodes fail: their jobs are killed, then requeued or over as
    /// `node_fail`, as their partition says.
    Down {
        nodes: String,
        reason: String,
    },
    Up {
        nodes: String,
    },
    Drain {
        nodes: String,
        reason: String,
    },
    Undrain {
        nodes: String,
    },
    /// Cancel job `i` of the slice.
    Cancel(usize),
}

impl What {
    /// Its kind, as the plain form writes it.
    pub fn kind(&self) -> &'static str {
        match self {
            What::Down { .. } => "down",
            What::Up { .. } => "up",
            What::Drain { .. } => "drain",
            What::Undrain { .. } => "undrain",
            What::Cancel(_) => "cancel",
        }
    }
}

/// An event at an instant of the trace (ns, as its submit times).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at_ns: i64,
    pub what: What,
    /// Where it comes from: `FILE:LINE`, or `generated`.
    pub source: String,
}

impl Event {
    /// The event in the plain form (a job named by its trace number).
    pub fn plain(&self, slice: &Slice) -> String {
        let t = self.at_ns as f64 / 1e9;
        match &self.what {
            What::Down { nodes, reason } | What::Drain { nodes, reason } => {
                format!("{t} {} {nodes} {reason}", self.what.kind())
                    .trim_end()
                    .to_string()
            }
            What::Up { nodes } | What::Undrain { nodes } => {
                format!("{t} {} {nodes}", self.what.kind())
            }
            What::Cancel(i) => format!("{t} cancel {}", slice.jobs[*i].trace_id),
        }
    }
}

/// `--failures mtbf=S,mttr=S,seed=N`, seconds of the trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Failures {
    pub mtbf_s: f64,
    pub mttr_s: f64,
    pub seed: u64,
}

impl Failures {
    pub fn parse(s: &str) -> Result<Failures> {
        let mut mtbf = None;
        let mut mttr = None;
        let mut seed = 0;
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| anyhow!("--failures: {part:?} is not KEY=VALUE"))?;
            let secs = || -> Result<f64> {
                formats::seconds::duration_ns(v)
                    .map(|ns| ns as f64 / 1e9)
                    .map_err(|e| anyhow!("--failures: {k}: {e}"))
            };
            match k.trim() {
                "mtbf" => mtbf = Some(secs()?),
                "mttr" => mttr = Some(secs()?),
                "seed" => {
                    seed = v
                        .trim()
                        .parse()
                        .map_err(|_| anyhow!("--failures: seed {v:?} is not a whole number"))?
                }
                other => bail!("--failures: no key {other:?} (mtbf, mttr, seed)"),
            }
        }
        let (Some(mtbf_s), Some(mttr_s)) = (mtbf, mttr) else {
            bail!("--failures needs mtbf=SECONDS and mttr=SECONDS (and seed=N)");
        };
        if mtbf_s <= 0.0 || mttr_s <= 0.0 {
            bail!("--failures: mtbf and mttr must be more than 0");
        }
        Ok(Failures {
            mtbf_s,
            mttr_s,
            seed,
        })
    }

    /// Failures of every node of `config` from trace instant `from` to
    /// `to` (ns): down after an exponential time of mean `mtbf`, up again
    /// after one of mean `mttr`, node by node, in time order.
    pub fn generate(&self, config: &controller::config::Cluster, from: i64, to: i64) -> Vec<Event> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        // Exponential of mean `mean` seconds, in ns: the inverse of its
        // distribution function at a uniform draw in (0, 1].
        let mut exp = |mean: f64| -> i64 {
            let u = ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
            (-u.ln() * mean * 1e9) as i64
        };
        let mut out = Vec::new();
        for node in &config.nodes {
            let mut t = from.saturating_add(exp(self.mtbf_s));
            while t < to {
                let back = t.saturating_add(exp(self.mttr_s).max(1));
                out.push(Event {
                    at_ns: t,
                    what: What::Down {
                        nodes: node.name.clone(),
                        reason: "generated failure".into(),
                    },
                    source: "generated".into(),
                });
                out.push(Event {
                    at_ns: back,
                    what: What::Up {
                        nodes: node.name.clone(),
                    },
                    source: "generated".into(),
                });
                t = back.saturating_add(exp(self.mtbf_s));
            }
        }
        out.sort_by_key(|e| e.at_ns);
        out
    }
}

/// What puts back the nodes the events that were `given` left failed or
/// drained: an `Up` or `Undrain` for each node set taken down or drained
/// and not given back by a later event of the same set.
pub fn left_over(events: &[Event], given: &[bool]) -> Vec<What> {
    let mut down: Vec<&str> = Vec::new();
    let mut drained: Vec<&str> = Vec::new();
    for (e, _) in events.iter().zip(given).filter(|(_, g)| **g) {
        match &e.what {
            What::Down { nodes, .. } => down.push(nodes),
            What::Up { nodes } => down.retain(|n| n != nodes),
            What::Drain { nodes, .. } => drained.push(nodes),
            What::Undrain { nodes } => drained.retain(|n| n != nodes),
            What::Cancel(_) => {}
        }
    }
    let up = down.into_iter().map(|n| What::Up { nodes: n.into() });
    let undrain = drained
        .into_iter()
        .map(|n| What::Undrain { nodes: n.into() });
    up.chain(undrain).collect()
}

/// Reads an events file against the cluster and the slice: every node
/// must be the cluster's, every job the slice's, and times must not go
/// backwards. Errors name the file and line.
pub fn read(
    path: &Path,
    config: &controller::config::Cluster,
    slice: &Slice,
) -> Result<Vec<Event>> {
    let name = path.display().to_string();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read events {name}"))?;
    let names: HashMap<&str, usize> = config
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let jobs: HashMap<i64, usize> = slice
        .jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.trace_id, i))
        .collect();
    let cx = Reader {
        config,
        names: &names,
        jobs: &jobs,
    };
    let mut out: Vec<Event> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", n + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let event = if line.starts_with('{') {
            cx.batsim(line)
        } else {
            cx.plain(line)
        }
        .map_err(|e| anyhow!("{at}: {e}"))?;
        if let Some(last) = out.last() {
            if event.at_ns < last.at_ns {
                bail!(
                    "{at}: time {} s is before the previous event's {} s: events must be in \
                     time order",
                    event.at_ns as f64 / 1e9,
                    last.at_ns as f64 / 1e9
                );
            }
        }
        out.push(Event {
            source: at,
            ..event
        });
    }
    Ok(out)
}

struct Reader<'a> {
    config: &'a controller::config::Cluster,
    names: &'a HashMap<&'a str, usize>,
    jobs: &'a HashMap<i64, usize>,
}

impl Reader<'_> {
    /// A nodeset of the cluster's nodes, folded.
    fn nodes(&self, expr: &str) -> Result<String, String> {
        let set = self
            .config
            .groups
            .parse(expr)
            .map_err(|e| format!("{expr:?}: {e}"))?;
        let mut idx = Vec::new();
        for n in formats::nodeset::expand(&set) {
            match self.names.get(n.as_str()) {
                Some(&i) => idx.push(i),
                None => return Err(format!("no node {n} in the cluster")),
            }
        }
        if idx.is_empty() {
            return Err(format!("{expr:?} names no node"));
        }
        Ok(self.config.fold(&idx))
    }

    fn time(&self, t: f64) -> Result<i64, String> {
        if !(t.is_finite() && (0.0..1e9).contains(&t)) {
            return Err(format!("time {t} is not a number of seconds from 0"));
        }
        Ok((t * 1e9).round() as i64)
    }

    fn plain(&self, line: &str) -> Result<Event, String> {
        let mut words = line.split_whitespace();
        let (Some(t), Some(kind), Some(target)) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "{line:?}: not TIME down|up|drain|undrain NODESET [REASON], nor TIME cancel JOB"
            ));
        };
        let at_ns = self.time(
            t.parse()
                .map_err(|_| format!("time {t:?} is not a number of seconds"))?,
        )?;
        let reason = words.collect::<Vec<_>>().join(" ");
        let what = match kind {
            "down" => What::Down {
                nodes: self.nodes(target)?,
                reason,
            },
            "up" => What::Up {
                nodes: self.nodes(target)?,
            },
            "drain" => What::Drain {
                nodes: self.nodes(target)?,
                reason,
            },
            "undrain" => What::Undrain {
                nodes: self.nodes(target)?,
            },
            "cancel" => {
                let id: i64 = target
                    .parse()
                    .map_err(|_| format!("job {target:?} is not a trace job number"))?;
                What::Cancel(
                    *self
                        .jobs
                        .get(&id)
                        .ok_or_else(|| format!("trace job {id} is not a job of the replay"))?,
                )
            }
            other => {
                return Err(format!(
                    "no event {other:?} (down, up, drain, undrain, cancel)"
                ))
            }
        };
        Ok(Event {
            at_ns,
            what,
            source: String::new(),
        })
    }

    fn batsim(&self, line: &str) -> Result<Event, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let t = v
            .get("timestamp")
            .and_then(Value::as_f64)
            .ok_or("no \"timestamp\" (a number)")?;
        let at_ns = self.time(t)?;
        // Batsim 5 wraps the event in a generic one's `data` string.
        let inner: Value;
        let body = match v.get("type").and_then(Value::as_str) {
            Some("generic") => {
                let data = v
                    .get("data")
                    .and_then(Value::as_str)
                    .ok_or("a generic event with no \"data\" string")?;
                inner = serde_json::from_str(data)
                    .map_err(|e| format!("its \"data\" is not a JSON event: {e}"))?;
                &inner
            }
            _ => &v,
        };
        let kind = body
            .get("type")
            .and_then(Value::as_str)
            .ok_or("no \"type\"")?;
        let resources = body
            .get("resources")
            .and_then(Value::as_str)
            .ok_or("no \"resources\" (an interval set of node numbers, \"0-4 6\")")?;
        let idx: Vec<usize> = formats::intervals::parse(resources, self.config.nodes.len() as u32)?
            .into_iter()
            .map(|i| i as usize)
            .collect();
        let nodes = self.config.fold(&idx);
        let what = match kind {
            "machine_unavailable" => What::Down {
                nodes,
                reason: "machine_unavailable".into(),
            },
            "machine_available" => What::Up { nodes },
            other => {
                return Err(format!(
                    "event type {other:?}: clemu applies machine_unavailable and \
                     machine_available"
                ))
            }
        };
        Ok(Event {
            at_ns,
            what,
            source: String::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceJob;

    fn config() -> controller::config::Cluster {
        controller::config::Cluster::from_str(
            "[[nodes]]\nnames = \"vn[1-8]\"\ncpus = 4\n[groups]\nrack = \"vn[5-8]\"\n",
            Path::new("t.toml"),
        )
        .unwrap()
    }

    fn slice() -> Slice {
        Slice {
            jobs: vec![TraceJob {
                trace_id: 42,
                line: 1,
                submit_ns: 0,
                run_ns: 1,
                walltime_ns: 0,
                cores: 1,
                cancel_after_ns: None,
                preceding: None,
                trace_run_ns: 1,
                queue: -1,
                partition: -1,
                profile: None,
            }],
            ..Slice::default()
        }
    }

    fn read_text(text: &str) -> Result<Vec<Event>> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ev");
        std::fs::write(&p, text).unwrap();
        read(&p, &config(), &slice())
    }

    #[test]
    fn both_forms_read_to_the_same_events() {
        let plain = read_text(
            "# a comment\n10 down vn[1-2] power cut\n20 up vn[1-2]\n25 drain @rack\n30 undrain vn[5-8]\n40 cancel 42\n",
        )
        .unwrap();
        let kinds: Vec<(i64, &str)> = plain
            .iter()
            .map(|e| (e.at_ns / 1_000_000_000, e.what.kind()))
            .collect();
        assert_eq!(
            kinds,
            [
                (10, "down"),
                (20, "up"),
                (25, "drain"),
                (30, "undrain"),
                (40, "cancel")
            ]
        );
        assert_eq!(
            plain[0].what,
            What::Down {
                nodes: "vn[1-2]".into(),
                reason: "power cut".into()
            }
        );
        assert_eq!(plain[4].what, What::Cancel(0));
        assert!(plain[0].source.ends_with(":2"));
        let batsim = read_text(concat!(
            r#"{"timestamp": 10, "type": "machine_unavailable", "resources": "0-1"}"#,
            "\n",
            r#"{"type": "generic", "timestamp": 20.0, "data": "{\"type\": \"machine_available\", \"resources\": \"0 1\"}"}"#,
            "\n"
        ))
        .unwrap();
        assert_eq!(
            batsim[0].what,
            What::Down {
                nodes: "vn[1-2]".into(),
                reason: "machine_unavailable".into()
            }
        );
        assert_eq!(batsim[1].what, plain[1].what);
        assert_eq!(batsim[1].at_ns, plain[1].at_ns);
        // The plain form written back reads the same.
        let again = read_text(
            &plain
                .iter()
                .map(|e| e.plain(&slice()) + "\n")
                .collect::<String>(),
        )
        .unwrap();
        let what = |v: &[Event]| v.iter().map(|e| e.what.clone()).collect::<Vec<_>>();
        assert_eq!(what(&again), what(&plain));
    }

    #[test]
    fn bad_events_are_refused_by_file_and_line() {
        for (text, needle) in [
            ("10 down vn9\n", ":1: no node vn9 in the cluster"),
            ("10 down vn1\n5 up vn1\n", ":2: time 5 s is before"),
            ("10 reboot vn1\n", ":1: no event \"reboot\""),
            ("10 cancel 7\n", ":1: trace job 7 is not a job"),
            ("ten down vn1\n", ":1: time \"ten\""),
            (
                r#"{"timestamp": 1, "type": "machine_unavailable", "resources": "8"}"#,
                ":1: \"8\" names resource 8, and there are 8",
            ),
            (
                r#"{"timestamp": 1, "type": "machine_on_fire", "resources": "1"}"#,
                ":1: event type",
            ),
            ("{not json\n", ":1: not JSON"),
        ] {
            let e = read_text(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn generated_failures_are_reproducible_and_alternate() {
        let f = Failures::parse("mtbf=1000,mttr=100,seed=7").unwrap();
        let a = f.generate(&config(), 0, 100_000 * 1_000_000_000);
        let b = f.generate(&config(), 0, 100_000 * 1_000_000_000);
        assert_eq!(a, b, "same seed, same failures");
        let c = Failures { seed: 8, ..f }.generate(&config(), 0, 100_000 * 1_000_000_000);
        assert_ne!(a, c);
        // About 100 failures per node over 100 MTBFs (each ~1100 s).
        let downs = a.iter().filter(|e| e.what.kind() == "down").count();
        assert!((8 * 60..8 * 120).contains(&downs), "{downs}");
        assert!(a.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        // Node by node, down and up alternate.
        let vn1: Vec<&str> = a
            .iter()
            .filter(|e| matches!(&e.what, What::Down { nodes, .. } | What::Up { nodes } if nodes == "vn1"))
            .map(|e| e.what.kind())
            .collect();
        assert!(vn1.chunks(2).all(|p| p == ["down", "up"]), "{vn1:?}");
        for bad in ["mtbf=10", "mtbf=0,mttr=1", "mtbf=1,mttr=1,seed=x", "x=1"] {
            assert!(Failures::parse(bad).is_err(), "{bad}");
        }
    }
}
