//! The policy that relays: clemu's events out to a Batsim scheduler, its
//! decisions back (see the module's overview).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use formats::scheduler::{Latency, SchedulerReport};
use formats::wire::JobState;
use serde_json::{json, Value};
use tracing::{debug, warn};

mod orders;

use super::link::Link;
use super::protocol::{self, Event, Message, Order};
use super::{Settings, Unit, WORKLOAD};
use crate::policy::{Decisions, Happened, Policy, View};

/// How often the emulation speaks while nothing happens: pybatsim gives
/// up after 2 s without a message.
const KEEPALIVE_NS: i64 = 1_000_000_000;

pub struct Bridge {
    settings: Settings,
    realtime: bool,
    state: Mutex<State>,
}

/// A job the scheduler has heard of.
#[derive(Default)]
struct Job {
    /// Resources Batsim-wise (cores, or nodes).
    res: u32,
    cores: u32,
    /// Its resources while it holds them (empty before it starts).
    alloc: Vec<u32>,
    started: bool,
    rejected: bool,
    /// Its profile's delay, and how long it has run (Batsim seconds):
    /// what a kill reports as its progress.
    delay: f64,
    ran: f64,
    running_since: Option<f64>,
    killed: bool,
    /// Suspended at the scheduler's request (its resources are free).
    suspended: bool,
    /// The scheduler asked for a suspension or a resumption not yet
    /// confirmed: it hears the confirmation (a standard scheduler never
    /// does, nor hears of an administrator's).
    confirm: bool,
    profile: String,
}

/// A `KILL_JOB`, answered with `JOB_KILLED` once all its jobs are over.
struct Kill {
    ids: Vec<String>,
    waiting: HashSet<u64>,
    progress: serde_json::Map<String, Value>,
}

#[derive(Default)]
struct State {
    link: Option<Link>,
    begun: bool,
    failure: Option<String>,
    /// Monotonic ns of Batsim time 0.
    epoch: Option<i64>,
    /// Resource → node.
    res_node: Vec<usize>,
    /// Node → its first resource.
    first_res: Vec<u32>,
    /// Resource → the job holding it.
    holder: Vec<Option<u64>>,
    jobs: HashMap<u64, Job>,
    /// Events for the next request.
    outbox: Vec<Event>,
    /// Decisions stamped later than their request, until their time.
    deferred: Vec<(f64, Order)>,
    /// `CALL_ME_LATER` times not yet called.
    calls: Vec<f64>,
    kills: Vec<Kill>,
    /// Jobs over: an order stamped later that names one comes too late
    /// and is dropped, not an error.
    ended: HashSet<u64>,
    last_sent: i64,
    /// Batsim time of the last request.
    last_now_s: f64,
    /// The `now` of the scheduler's last reply: when it is free again. No
    /// request is stamped earlier (so no job starts at 0 before it was
    /// submitted, as in Batsim).
    reply_now: f64,
    latency_us: Option<hdrhistogram::Histogram<u64>>,
    messages: u64,
}

impl Bridge {
    pub fn new(settings: Settings, realtime: bool) -> Bridge {
        let mut st = State::default();
        let mut next = 0u32;
        for (n, (_, cpus)) in settings.nodes.iter().enumerate() {
            st.first_res.push(next);
            let count = match settings.unit {
                Unit::Core => *cpus,
                Unit::Node => 1,
            };
            for _ in 0..count {
                st.res_node.push(n);
            }
            next += count;
        }
        st.holder = vec![None; st.res_node.len()];
        st.latency_us = hdrhistogram::Histogram::new(3).ok();
        Bridge {
            settings,
            realtime,
            state: Mutex::new(st),
        }
    }

    /// A bridge that can decide nothing, and says why at once.
    pub fn unusable(why: &str) -> Bridge {
        let bridge = Bridge::new(
            Settings {
                endpoint: super::DEFAULT_ENDPOINT.into(),
                unit: Unit::Core,
                wall_per_second: 1.0,
                reply_timeout: Duration::from_secs(1),
                nodes: Vec::new(),
            },
            false,
        );
        bridge
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failure = Some(why.to_string());
        bridge
    }

    fn seconds(&self, st: &State, mono: i64) -> f64 {
        let epoch = st.epoch.unwrap_or(mono);
        ((mono - epoch) as f64 / (1e9 * self.settings.wall_per_second)).max(0.0)
    }

    fn mono(&self, st: &State, seconds: f64) -> i64 {
        let epoch = st.epoch.unwrap_or(0);
        epoch.saturating_add((seconds * 1e9 * self.settings.wall_per_second) as i64)
    }

    /// The resources as `SIMULATION_BEGINS` lists them.
    fn resources(&self) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        for (n, (name, cpus)) in self.settings.nodes.iter().enumerate() {
            match self.settings.unit {
                Unit::Node => out.push((name.clone(), n as u32)),
                Unit::Core => {
                    for c in 0..*cpus {
                        out.push((format!("{name}/{c}"), out.len() as u32));
                    }
                }
            }
        }
        out
    }

    /// One request and its reply; the reply's orders.
    fn round_trip(
        &self,
        st: &mut State,
        now_s: f64,
        now_mono: i64,
    ) -> Result<Vec<(f64, Order)>, String> {
        if st.link.is_none() {
            let link =
                blocking(|| Link::connect(&self.settings.endpoint, self.settings.reply_timeout))?;
            st.link = Some(link);
        }
        let now_s = now_s.max(st.reply_now);
        let mut events = std::mem::take(&mut st.outbox);
        events.sort_by(|a, b| a.timestamp.total_cmp(&b.timestamp));
        let request = serde_json::to_string(&Message { now: now_s, events })
            .map_err(|e| format!("cannot encode a request: {e}"))?;
        let link = st.link.as_ref().expect("connected above");
        let took = Instant::now();
        let reply = match blocking(|| link.round_trip(request, self.settings.reply_timeout)) {
            Ok(r) => r,
            Err(e) => {
                // The socket is in no state to carry anything more.
                st.link = None;
                return Err(e);
            }
        };
        let took = took.elapsed();
        if let Some(h) = &mut st.latency_us {
            let _ = h.record(took.as_micros().max(1) as u64);
        }
        st.messages += 1;
        st.last_sent = now_mono;
        st.last_now_s = now_s;
        let reply: Message = serde_json::from_str(&reply).map_err(|e| {
            format!(
                "scheduler at {}: a reply is not a Batsim message: {e}",
                self.settings.endpoint
            )
        })?;
        if reply.now.is_finite() {
            st.reply_now = st.reply_now.max(reply.now);
        }
        protocol::orders(&reply, st.holder.len() as u32)
            .map_err(|e| format!("scheduler at {}: {e}", self.settings.endpoint))
    }

    fn begin(&self, st: &mut State, view: &View) -> Result<(), String> {
        let first = view
            .happened
            .iter()
            .filter_map(|h| match h {
                Happened::Submitted { at_ns, .. } => Some(*at_ns),
                _ => None,
            })
            .min()
            .unwrap_or(view.now_ns);
        // Time 0 is SIMULATION_BEGINS, a microsecond of the host's clock
        // before the first submission: no job may start at 0 (pybatsim's
        // allocations refuse it), and in Batsim none could, since none is
        // submitted before the simulation begins.
        st.epoch = Some(first.min(view.now_ns) - 1_000);
        // SIMULATION_BEGINS comes alone, in the first message.
        st.outbox.push(Event::new(
            0.0,
            "SIMULATION_BEGINS",
            protocol::simulation_begins(&self.resources()),
        ));
        let orders = self.round_trip(st, 0.0, view.now_ns)?;
        st.begun = true;
        st.deferred.extend(orders);
        Ok(())
    }

    /// What happened, as Batsim events in the outbox.
    fn hear(&self, st: &mut State, view: &View) {
        for h in &view.happened {
            match *h {
                Happened::Submitted {
                    job,
                    at_ns,
                    cores,
                    walltime_ns,
                    runtime_ns,
                } => {
                    let t = self.seconds(st, at_ns);
                    let res = match self.settings.unit {
                        Unit::Core => cores,
                        Unit::Node => {
                            let per = self
                                .settings
                                .nodes
                                .iter()
                                .map(|n| n.1)
                                .max()
                                .unwrap_or(1)
                                .max(1);
                            cores.div_ceil(per)
                        }
                    };
                    let scale = 1e9 * self.settings.wall_per_second;
                    let delay = runtime_ns as f64 / scale;
                    let walltime = if walltime_ns == 0 {
                        -1.0
                    } else {
                        walltime_ns as f64 / scale
                    };
                    let profile = format!("delay_{delay}");
                    let id = job_id(job);
                    st.outbox.push(Event::new(
                        t,
                        "JOB_SUBMITTED",
                        json!({
                            "job_id": id,
                            "job": {"id": id, "subtime": t, "walltime": walltime, "res": res, "profile": profile},
                            "profile": {"type": "delay", "delay": delay},
                        }),
                    ));
                    st.jobs.insert(
                        job,
                        Job {
                            res,
                            cores,
                            profile,
                            delay,
                            ..Job::default()
                        },
                    );
                }
                Happened::Ended { job, at_ns, state } => {
                    let t = self.seconds(st, at_ns);
                    let Some(j) = st.jobs.remove(&job) else {
                        continue;
                    };
                    st.ended.insert(job);
                    for &r in &j.alloc {
                        if st.holder[r as usize] == Some(job) {
                            st.holder[r as usize] = None;
                        }
                    }
                    // A rejected job never completes, as in Batsim.
                    if !j.rejected {
                        let (name, code) = match state {
                            _ if j.killed => ("COMPLETED_KILLED", 0),
                            JobState::Completed => ("COMPLETED_SUCCESSFULLY", 0),
                            JobState::Timeout => ("COMPLETED_WALLTIME_REACHED", 0),
                            JobState::Cancelled => ("COMPLETED_KILLED", 0),
                            _ => ("COMPLETED_FAILED", 1),
                        };
                        st.outbox.push(Event::new(
                            t,
                            "JOB_COMPLETED",
                            json!({"job_id": job_id(job), "job_state": name, "return_code": code,
                                   "alloc": formats::intervals::format(&j.alloc)}),
                        ));
                    }
                    let mut done = Vec::new();
                    for (i, k) in st.kills.iter_mut().enumerate() {
                        if k.waiting.remove(&job) {
                            let ran = j.ran + j.running_since.map_or(0.0, |s| (t - s).max(0.0));
                            let progress = if j.delay > 0.0 {
                                (ran / j.delay).clamp(0.0, 1.0)
                            } else {
                                1.0
                            };
                            k.progress.insert(
                                job_id(job),
                                json!({"profile": j.profile, "progress": progress}),
                            );
                            if k.waiting.is_empty() {
                                done.push(i);
                            }
                        }
                    }
                    for i in done.into_iter().rev() {
                        let k = st.kills.remove(i);
                        st.outbox.push(Event::new(
                            t,
                            "JOB_KILLED",
                            json!({"job_ids": k.ids, "job_progress": k.progress}),
                        ));
                    }
                }
                Happened::Suspended { job, at_ns } | Happened::Resumed { job, at_ns } => {
                    let suspended = matches!(h, Happened::Suspended { .. });
                    let t = self.seconds(st, at_ns);
                    if let Some(j) = st.jobs.get_mut(&job) {
                        if suspended {
                            j.ran += j.running_since.take().map_or(0.0, |s| (t - s).max(0.0));
                        } else {
                            j.running_since = Some(t);
                        }
                    }
                    if let Some(j) = st.jobs.get_mut(&job).filter(|j| j.confirm) {
                        j.confirm = false;
                        let kind = if suspended {
                            "JOB_SUSPENDED"
                        } else {
                            "JOB_RESUMED"
                        };
                        st.outbox
                            .push(Event::new(t, kind, json!({"job_id": job_id(job)})));
                    }
                }
                Happened::NoMoreJobs { at_ns } => {
                    let t = self.seconds(st, at_ns);
                    st.outbox.push(Event::new(
                        t,
                        "NOTIFY",
                        json!({"type": "no_more_static_job_to_submit"}),
                    ));
                }
            }
        }
    }

    fn pass(&self, st: &mut State, view: &View) -> Result<Decisions, String> {
        if !st.begun {
            self.begin(st, view)?;
        }
        self.hear(st, view);
        let now_s = self.seconds(st, view.now_ns);
        // Calls whose time has come.
        st.calls.sort_by(f64::total_cmp);
        let due = st.calls.partition_point(|&t| t <= now_s + 1e-9);
        for t in st.calls.drain(..due).collect::<Vec<_>>() {
            st.outbox.push(Event::new(t, "REQUESTED_CALL", json!({})));
        }
        let keepalive = self.realtime && view.now_ns - st.last_sent >= KEEPALIVE_NS;
        if !st.outbox.is_empty() || keepalive {
            let orders = self.round_trip(st, now_s, view.now_ns)?;
            st.deferred.extend(orders);
        }
        // Orders whose time has come, in their order.
        let mut list = Vec::new();
        let ready: Vec<(f64, Order)>;
        (ready, st.deferred) = std::mem::take(&mut st.deferred)
            .into_iter()
            .partition(|(t, _)| *t <= now_s + 1e-9);
        for (_, order) in ready {
            self.carry_out(st, now_s, order, &mut list)?;
        }
        let mut wake = st
            .deferred
            .iter()
            .map(|(t, _)| *t)
            .chain(st.calls.iter().copied())
            .fold(f64::INFINITY, f64::min);
        if !st.outbox.is_empty() {
            // JOB_KILLED for jobs already over: said at the next pass.
            wake = wake.min(now_s);
        }
        let mut wake_at_ns = wake
            .is_finite()
            .then(|| self.mono(st, wake).max(view.now_ns));
        if self.realtime {
            let k = st.last_sent + KEEPALIVE_NS;
            wake_at_ns = Some(wake_at_ns.map_or(k, |w| w.min(k)));
        }
        debug!(decisions = list.len(), "batsim reply carried out");
        Ok(Decisions { list, wake_at_ns })
    }
}

impl Policy for Bridge {
    fn decide(&self, view: &View) -> Decisions {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.failure.is_some() {
            return Decisions::default();
        }
        match self.pass(&mut st, view) {
            Ok(d) => d,
            Err(e) => {
                st.failure = Some(e);
                Decisions::default()
            }
        }
    }

    fn wants_events(&self) -> bool {
        true
    }

    fn may_look_ahead(&self) -> bool {
        // Every call is a message to the external scheduler.
        false
    }

    fn refused(&self, why: &[String]) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.failure.is_none() {
            let more = match why.len() {
                1 => String::new(),
                n => format!(" (and {} more)", n - 1),
            };
            st.failure = Some(format!(
                "scheduler at {}: the cluster refused its decision: {}{more}",
                self.settings.endpoint, why[0]
            ));
        }
    }

    fn failure(&self) -> Option<String> {
        self.state.lock().ok().and_then(|s| s.failure.clone())
    }

    fn report(&self) -> Option<SchedulerReport> {
        let st = self.state.lock().ok()?;
        let h = st.latency_us.as_ref()?;
        let ms = |us: u64| us as f64 / 1000.0;
        Some(SchedulerReport {
            endpoint: self.settings.endpoint.clone(),
            messages: st.messages,
            reply_ms: Latency {
                p50: ms(h.value_at_quantile(0.5)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
            },
            failure: st.failure.clone(),
        })
    }
}

impl Drop for Bridge {
    /// Tells the scheduler the simulation is over, as Batsim does, so it
    /// exits on its own.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        // Also after a scheduler's mistake, so that it exits; not if the
        // link failed.
        if !st.begun || st.link.is_none() {
            return;
        }
        let now_s = st
            .outbox
            .iter()
            .map(|e| e.timestamp)
            .fold(st.last_now_s, f64::max);
        let ends = Message {
            now: now_s,
            events: vec![Event::new(now_s, "SIMULATION_ENDS", json!({}))],
        };
        if let (Some(link), Ok(text)) = (&st.link, serde_json::to_string(&ends)) {
            if let Err(e) = blocking(|| link.round_trip(text, Duration::from_secs(2))) {
                warn!("batsim: SIMULATION_ENDS: {e}");
            }
        }
    }
}

fn job_id(job: u64) -> String {
    format!("{WORKLOAD}!{job}")
}

fn parse_id(s: &str) -> Result<u64, String> {
    s.strip_prefix(WORKLOAD)
        .and_then(|r| r.strip_prefix('!'))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("{s:?} is not a job of clemu's (they are {WORKLOAD}!N)"))
}

/// Runs `f`, which blocks, without starving the server's other tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}
