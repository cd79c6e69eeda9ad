//! Which inputs form which run. A run is one column of output: a results
//! directory that runworkload left (it holds `manifest.json`), a trace given
//! with `--swf`, or everything else on the command line taken together.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::clock::{Clock, ClockKind};
use crate::inputs::{self, Source};

use formats::results::Manifest;
pub use formats::results::MANIFEST;

#[derive(Debug, Clone)]
pub struct Run {
    pub name: String,
    pub input: RunInput,
    /// Total cores from the run's manifest, if it has one.
    pub manifest_cores: Option<u64>,
    /// τ from the run's manifest, in its wall clock (a replay scales it
    /// with its times) and in the trace's, ns.
    pub manifest_tau: Option<i64>,
    pub manifest_tau_trace: Option<i64>,
    /// The run's trace clock: a replay's (from its manifest), or a trace's
    /// own; `None` for loose record files, which have only their own.
    pub trace_clock: Option<Clock>,
    /// The emulation's measured costs (the manifest's `latency`).
    pub latency: Option<formats::results::Latencies>,
    /// Devices of each generic resource, from the run's manifest.
    pub manifest_resources: std::collections::BTreeMap<String, u64>,
    /// The results directory it is, if it is one.
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub enum RunInput {
    Records(Vec<Source>),
    Swf(PathBuf),
    /// The replicas of one replay (`runworkload --replicas`), each a
    /// results directory of its own, in their order.
    Replicas(Vec<Run>),
}

/// Groups the command line into runs. Each results directory (one holding
/// `manifest.json`, or each such directory directly inside a given one) is a
/// run of its own; every `--swf` trace is a run; the remaining files and
/// directories form one run named "records". With `merge`, all record
/// inputs form a single run whatever they are. Inputs that would be read
/// as nothing (a directory without record files, record files beside
/// results directories) are described in `warnings`.
pub fn plan(
    inputs: &[PathBuf],
    traces: &[PathBuf],
    merge: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    let mut loose = Vec::new();
    for input in inputs {
        if merge {
            loose.push(input.clone());
            continue;
        }
        if input.is_dir() {
            if input.join(MANIFEST).is_file() {
                runs.push(results_dir(input)?);
                continue;
            }
            if let Some(set) = replica_set(input)? {
                runs.push(set);
                continue;
            }
            let children = result_children(input)?;
            if !children.is_empty() {
                for child in &children {
                    match replica_set(child)? {
                        Some(set) => runs.push(set),
                        None => runs.push(results_dir(child)?),
                    }
                }
                let beside = inputs::expand(std::slice::from_ref(input))?
                    .into_iter()
                    .filter(|s| match s {
                        inputs::Source::File(f) => !children.iter().any(|c| f.starts_with(c)),
                        inputs::Source::Stdin => false,
                    })
                    .count();
                if beside > 0 {
                    warnings.push(format!(
                        "{}: {beside} record file(s) outside its results directories are not \
                         read (name them on the command line to read them)",
                        input.display()
                    ));
                }
                continue;
            }
        }
        loose.push(input.clone());
    }
    if !loose.is_empty() {
        let manifest = match loose.as_slice() {
            [one] if one.join(MANIFEST).is_file() => Some(read_manifest(one)?),
            _ => None,
        };
        let mut empty = Vec::new();
        for input in loose.iter().filter(|i| i.is_dir()) {
            if inputs::expand(std::slice::from_ref(input))?.is_empty() {
                empty.push(input.display().to_string());
            }
        }
        let sources = inputs::expand_distinct(&loose, warnings)?;
        // Nothing to read at all is an error, not a table of dashes.
        if sources.is_empty() {
            anyhow::bail!(
                "{}: no record files (*.{}) in it: nothing to count",
                empty.join(", "),
                inputs::RECORD_EXT
            );
        }
        for e in empty {
            warnings.push(format!(
                "{e}: no record files (*.{}) in it",
                inputs::RECORD_EXT
            ));
        }
        let mut run = Run {
            name: "records".into(),
            input: RunInput::Records(sources),
            manifest_cores: None,
            manifest_tau: None,
            manifest_tau_trace: None,
            manifest_resources: Default::default(),
            trace_clock: None,
            latency: None,
            dir: None,
        };
        if let Some(m) = &manifest {
            run.take_manifest(m);
        }
        runs.push(run);
    }
    for t in traces {
        runs.push(Run {
            name: trace_name(t),
            input: RunInput::Swf(t.clone()),
            manifest_cores: None,
            manifest_tau: None,
            manifest_tau_trace: None,
            manifest_resources: Default::default(),
            trace_clock: Some(Clock::trace_itself()),
            latency: None,
            dir: None,
        });
    }
    name_apart(&mut runs);
    Ok(runs)
}

/// Results directories of the same name (`a/shrink-100`, `b/shrink-100`:
/// the same factor of two sweeps) are named with the directory that holds
/// each, so that no two columns or curves share a name.
fn name_apart(runs: &mut [Run]) {
    let mut seen = std::collections::HashMap::new();
    for r in runs.iter() {
        *seen.entry(r.name.clone()).or_insert(0u32) += 1;
    }
    for r in runs.iter_mut() {
        if seen[&r.name] < 2 {
            continue;
        }
        if let Some(parent) = r
            .dir
            .as_deref()
            .and_then(Path::parent)
            .and_then(Path::file_name)
        {
            r.name = format!("{}/{}", parent.to_string_lossy(), r.name);
        }
    }
}

/// The results directories of the replicas in `dir`, in their order, when
/// it holds the replicas of one replay; `None` otherwise.
pub fn replica_dirs(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    Ok(replica_set(dir)?.map(|set| match set.input {
        RunInput::Replicas(members) => members.into_iter().filter_map(|m| m.dir).collect(),
        _ => Vec::new(),
    }))
}

/// The replicas in `dir`, as one run, when `dir` holds no manifest of its
/// own and every results directory in it is a replica of one replay
/// (`runworkload --replicas`); `None` otherwise.
fn replica_set(dir: &Path) -> Result<Option<Run>> {
    if !dir.is_dir() || dir.join(MANIFEST).is_file() {
        return Ok(None);
    }
    let mut members = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        if !path.join(MANIFEST).is_file() {
            continue;
        }
        let m = read_manifest(&path)?;
        let Some(r) = &m.replica else {
            return Ok(None);
        };
        members.push((r.index, path));
    }
    if members.is_empty() {
        return Ok(None);
    }
    members.sort();
    let runs = members
        .iter()
        .map(|(_, p)| results_dir(p))
        .collect::<Result<Vec<_>>>()?;
    let first = runs[0].clone();
    Ok(Some(Run {
        input: RunInput::Replicas(runs),
        dir: None,
        ..first
    }))
}

fn result_children(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        // A directory of replicas sorts as its first.
        if let Some(set) = replica_set(&path)? {
            if let RunInput::Replicas(members) = &set.input {
                if let Some(d) = members[0].dir.as_deref() {
                    let m = read_manifest(d)?;
                    out.push((m.start.unwrap_or(f64::INFINITY), -m.factor, path));
                }
            }
            continue;
        }
        if path.join(MANIFEST).is_file() {
            // Runs in the order they were made (a sweep's 100 %, 90 %, …),
            // as runworkload lists them, so a run keeps its column and its
            // colour whichever tool shows it.
            // (A sweep of twins starts every run at the trace's start: then
            // the larger factor first, as the sweep ran them.)
            let m = read_manifest(&path)?;
            out.push((m.start.unwrap_or(f64::INFINITY), -m.factor, path));
        }
    }
    out.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then_with(|| a.1.total_cmp(&b.1))
            .then_with(|| a.2.cmp(&b.2))
    });
    Ok(out.into_iter().map(|(_, _, p)| p).collect())
}

fn results_dir(dir: &Path) -> Result<Run> {
    let m = read_manifest(dir)?;
    let name = if m.label.is_empty() {
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string())
    } else {
        m.label.clone()
    };
    let mut run = Run {
        name,
        input: RunInput::Records(inputs::expand(&[dir.to_path_buf()])?),
        manifest_cores: None,
        manifest_tau: None,
        manifest_tau_trace: None,
        manifest_resources: Default::default(),
        trace_clock: None,
        latency: None,
        dir: Some(dir.to_path_buf()),
    };
    run.take_manifest(&m);
    Ok(run)
}

/// The clock each of `runs` is read in ([`crate::clock::choose`]).
pub fn clocks(runs: &[Run], asked: Option<ClockKind>) -> Result<Vec<Clock>> {
    crate::clock::choose(
        asked,
        &runs
            .iter()
            .map(|r| (r.name.as_str(), r.trace_clock, r.is_trace()))
            .collect::<Vec<_>>(),
    )
}

impl Run {
    /// What the run's manifest tells: cores, τ, devices, its trace clock.
    fn take_manifest(&mut self, m: &Manifest) {
        self.manifest_cores = cores_of(m);
        self.manifest_tau = tau_of(m);
        self.manifest_tau_trace = m.tau_in_trace().map(|t| (t * 1e9).round() as i64);
        self.manifest_resources = m.resources.clone();
        self.trace_clock = Clock::of_manifest(m);
        self.latency = m.latency.clone();
    }

    /// A warning when the emulation's measured costs come to a visible
    /// share (5 %) of τ (`tau_trace_s`, trace seconds): the bounded
    /// slowdowns of jobs shorter than τ then carry the host's delays.
    pub fn latency_warning(&self, tau_trace_s: f64) -> Option<String> {
        latency_warning(&self.name, self.latency.as_ref()?, tau_trace_s)
    }

    /// Whether it is a trace read with `--swf`.
    pub fn is_trace(&self) -> bool {
        matches!(self.input, RunInput::Swf(_))
    }

    /// τ in `clock`'s ns: `--tau` as given (in that clock), else the
    /// manifest's in that clock, else 10 s of it.
    pub fn tau_ns(&self, clock: ClockKind, asked: Option<i64>) -> i64 {
        let recorded = match clock {
            ClockKind::Trace => self.manifest_tau_trace,
            ClockKind::Wall => self.manifest_tau,
        };
        asked.or(recorded).unwrap_or(crate::DEFAULT_TAU_NS)
    }
}

/// The manifest of the results directory `dir`.
pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest> {
    Ok(Manifest::read(dir)?)
}

/// The node count a results directory's manifest gives, if it does.
pub fn manifest_nodes(dir: &Path) -> Option<u64> {
    Some(read_manifest(dir).ok()?.nodes).filter(|&n| n > 0)
}

fn tau_of(m: &Manifest) -> Option<i64> {
    m.tau
        .filter(|t| *t >= 0.0)
        .map(|t| (t * 1e9).round() as i64)
}

fn cores_of(m: &Manifest) -> Option<u64> {
    m.cores.filter(|&c| c > 0)
}

pub fn trace_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    name.trim_end_matches(".gz")
        .trim_end_matches(".swf")
        .to_string()
}

/// The warning for run `name` whose host's measured delays `l` are a
/// visible share (a twentieth or more, at the median) of τ, in trace
/// seconds: what `calcmets` and `runworkload` say of such a run.
pub fn latency_warning(
    name: &str,
    l: &formats::results::Latencies,
    tau_trace_s: f64,
) -> Option<String> {
    let mut parts = Vec::new();
    for (what, d) in [
        ("start", &l.start),
        ("end", &l.end),
        ("suspend", &l.suspend),
        ("resume", &l.resume),
        ("arrive", &l.arrive),
    ] {
        if let Some(d) = d.filter(|d| d.p50_s > tau_trace_s * 0.05) {
            parts.push(format!(
                "{what} p50 {:.3} ms ({:.3} trace s, {:.0} % of it)",
                d.p50_ms,
                d.p50_s,
                d.p50_s / tau_trace_s * 100.0
            ));
        }
    }
    (!parts.is_empty()).then(|| {
        format!(
            "{name}: the host's own delays are a visible share of tau ({tau_trace_s} trace s): \
             {}; jobs shorter than tau carry them in their bounded slowdowns (a smaller \
             speed-up, or a larger --tau, holds)",
            parts.join(", ")
        )
    })
}
