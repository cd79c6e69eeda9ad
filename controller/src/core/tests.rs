//! The core's transitions, driven by hand with a recording [`Effects`].

use std::sync::Arc;

use formats::wire::{
    EndWhy, Exit, Held, HoldKind, JobSpec, JobState, NodeState, StartJob, ToAgent,
};

use super::*;
use crate::config;
use crate::journal::{Entry, Journal, Recovered};
use crate::policy::{ActiveState, Base, Decision, Policy, Preemption, Standard};

/// Everything the core wants done, kept to look at.
#[derive(Default)]
struct Recorder(Vec<(AgentId, ToAgent)>, Vec<Entry>);

impl Effects for Recorder {
    const JOURNALS: bool = true;

    fn to_agent(&mut self, agent: AgentId, msg: ToAgent) {
        self.0.push((agent, msg));
    }

    fn journal(&mut self, entry: Entry) {
        self.1.push(entry);
    }

    fn end_taken(&mut self, _: AgentId, _: u64) {}
}

const S: i64 = 1_000_000_000;

fn at(secs: i64) -> Now {
    Now {
        mono: secs * S,
        wall: (1_000 + secs) * S,
    }
}

fn cluster_with(extra: &str) -> Cluster {
    let cfg = config::Cluster::from_str(
        &format!("[[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\n{extra}"),
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(Arc::new(cfg));
    up(&mut c, 7, "h", "vn[1-4]", &[]).unwrap();
    c
}

/// An agent on its own host registers, holding `held`.
fn up(
    c: &mut Cluster,
    agent: AgentId,
    host: &str,
    nodes: &str,
    held: &[(u64, Held)],
) -> Result<Vec<(u64, Exit)>, String> {
    c.agent_up(
        agent,
        host,
        nodes,
        4,
        0,
        false,
        held,
        at(0),
        &mut Recorder::default(),
    )
}

fn cluster() -> Cluster {
    cluster_with("")
}

fn spec(cores: u32) -> JobSpec {
    JobSpec {
        cores,
        mem_per_cpu_mb: 1024,
        runtime_ns: 1_000_000_000,
        walltime_ns: 0,
        submit_ns: Some(5),
        ..Default::default()
    }
}

/// `s` with a run time (100 s) that lasts past every instant a test
/// cancels it at: a running job due by then is over.
fn long(s: JobSpec) -> JobSpec {
    JobSpec {
        runtime_ns: 100 * S as u64,
        ..s
    }
}

/// A batch job's program: `script`, run by user `u` from `/`.
fn batch_script(script: &str) -> Box<formats::wire::Program> {
    Box::new(formats::wire::Program {
        script: script.into(),
        workdir: "/".into(),
        env: Vec::new(),
        stdout: String::new(),
        stderr: String::new(),
        user: "u".into(),
        signal: None,
        ntasks: 1,
        cpus_per_task: 1,
        tasks_per_node: 0,
        comment: String::new(),
        args: Vec::new(),
        mem_limit_mb: 0,
        command: String::new(),
        partition_limit: false,
        exclusive: false,
        open_append: false,
        nodelist: String::new(),
        exclude: String::new(),
    })
}

/// An array of `cores`-core tasks, Slurm's `--array=LIST`.
fn array_spec(list: &str, cores: u32) -> JobSpec {
    JobSpec {
        array: Some(formats::wire::ArraySpec::parse(list).unwrap()),
        ..spec(cores)
    }
}

/// A pass of EASY, with the config's preemption.
fn pass_at(c: &mut Cluster, out: &mut Recorder, now: Now) {
    let d = Standard {
        base: Base::Easy,
        preemption: c.config().preemption,
    }
    .decide(&c.view(now));
    c.apply(d.list, now, out);
}

fn pass(c: &mut Cluster, out: &mut Recorder) {
    pass_at(c, out, at(1));
}

#[test]
fn a_job_runs_and_ends() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(6)], 0, at(0), &mut Recorder::default())
        .unwrap();
    pass(&mut c, &mut out);
    let j = &c.jobs[&ids[0]];
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.alloc[..], vec![(0, 4), (1, 2)]);
    assert_eq!(j.start_ns, at(1).wall);
    assert_eq!(c.node_state(0), NodeState::Allocated);
    assert_eq!(c.node_state(1), NodeState::Mixed);
    assert_eq!(c.loads[1].alloc_mem_mb, 2048);
    assert!(
        matches!(&out.0[0], (7, ToAgent::Start(s)) if s.node == "vn1" && s.cores == 6 && s.submit_ns == 5)
    );
    c.job_ended(7, ids[0], Exit::Code(0), at(3), &mut out);
    assert!(c.jobs.is_empty());
    assert_eq!(c.queue(true)[0].state, JobState::Completed);
    assert_eq!(c.queue(true)[0].nodes, "vn[1-2]");
    assert_eq!(c.loads[0].alloc_cpus + c.loads[1].alloc_cpus, 0);
    assert_eq!(c.loads[1].alloc_mem_mb, 0);
}

#[test]
fn each_time_slicing_partition_has_its_own_slice() {
    let c = cluster_with(
        "[controller]\ntime_slice_s = 20\n\
         [[partitions]]\nname = \"a\"\noversubscribe = 2\n\
         [[partitions]]\nname = \"b\"\noversubscribe = 3\ntime_slice_s = 2.5\n",
    );
    let v = c.view(at(0));
    let gang = |p: usize| v.partitions[p].gang.unwrap();
    assert_eq!((gang(0).oversubscribe, gang(0).slice_ns), (2, 20 * S));
    assert_eq!(
        (gang(1).oversubscribe, gang(1).slice_ns),
        (3, 2_500_000_000)
    );
}

#[test]
fn cancelling_many_pending_jobs_at_once_leaves_the_queue_right() {
    let mut c = cluster();
    let mut out = Recorder::default();
    // One job holds every core; the rest wait.
    let ids = c
        .submit(vec![spec(16); 1_000], 0, at(0), &mut Recorder::default())
        .unwrap();
    pass(&mut c, &mut out);
    let odd: Vec<u64> = ids[1..].iter().copied().filter(|i| i % 2 == 1).collect();
    let outcomes = c.cancel(&odd, at(1), &mut out);
    assert!(outcomes.iter().all(|o| o.error.is_none()));
    let queued: Vec<u64> = c.view(at(2)).queue.iter().map(|q| q.job).collect();
    let want: Vec<u64> = ids[1..].iter().copied().filter(|i| i % 2 == 0).collect();
    assert_eq!(queued, want);
    // They start in order once the first ends.
    c.job_ended(7, ids[0], Exit::Code(0), at(3), &mut out);
    pass_at(&mut c, &mut out, at(4));
    assert_eq!(c.jobs[&want[0]].state, JobState::Running);
    assert_eq!(c.view(at(5)).queue.len(), want.len() - 1);
    c.shutdown(at(6), &mut out);
    assert!(c.view(at(7)).queue.is_empty());
}

#[test]
fn drained_nodes_get_no_jobs() {
    let mut c = cluster();
    let mut out = Recorder::default();
    c.drain("vn[1-3]", "maintenance", at(0), &mut out).unwrap();
    let ids = c
        .submit(vec![spec(4), spec(4)], 0, at(0), &mut Recorder::default())
        .unwrap();
    pass(&mut c, &mut out);
    assert_eq!(c.jobs[&ids[0]].alloc[..], vec![(3, 4)]);
    assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
    assert_eq!(c.node_state(0), NodeState::Drained);
    c.undrain("vn1", &mut out).unwrap();
    pass(&mut c, &mut out);
    assert_eq!(c.jobs[&ids[1]].alloc[..], vec![(0, 4)]);
}

#[test]
fn exit_codes_map_to_states() {
    for (exit, want) in [
        (Exit::Code(124), JobState::Timeout),
        (Exit::Code(143), JobState::Cancelled),
        (Exit::Code(1), JobState::Failed),
        (Exit::Signal(9), JobState::Failed),
        (Exit::SpawnFailed, JobState::Failed),
    ] {
        let mut c = cluster();
        let mut out = Recorder::default();
        let id = c
            .submit(vec![spec(1)], 0, at(0), &mut Recorder::default())
            .unwrap()[0];
        pass(&mut c, &mut out);
        c.job_ended(7, id, exit, at(2), &mut out);
        assert_eq!(c.queue(true)[0].state, want, "{exit:?}");
    }
}

#[test]
fn cancel_suspend_resume() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![long(spec(1)), spec(16)],
            0,
            at(0),
            &mut Recorder::default(),
        )
        .unwrap();
    pass(&mut c, &mut out);
    // The second needs every core and waits; cancelling it is at once.
    assert_eq!(c.cancel(&[ids[1]], at(1), &mut out)[0].error, None);
    assert_eq!(
        c.queue(true).iter().find(|j| j.id == ids[1]).unwrap().state,
        JobState::Cancelled
    );
    assert_eq!(c.suspend(&[ids[0]], at(2), &mut out)[0].error, None);
    assert!(c.suspend(&[ids[0]], at(2), &mut out)[0].error.is_some());
    assert_eq!(c.jobs[&ids[0]].state, JobState::Suspended);
    // An administrator's suspension keeps the cores.
    assert_eq!(c.loads[0].alloc_cpus, 1);
    assert_eq!(c.resume(&[ids[0]], at(4), &mut out)[0].error, None);
    assert_eq!(c.jobs[&ids[0]].suspended_total, 2 * S);
    assert_eq!(c.cancel(&[ids[0]], at(5), &mut out)[0].error, None);
    let sent: Vec<String> = out.0.iter().map(|(_, m)| format!("{m:?}")).collect();
    assert!(
        sent[1].starts_with("Suspend")
            && sent[2].starts_with("Resume")
            && sent[3].starts_with("Cancel"),
        "{sent:?}"
    );
    // It ends by SIGTERM: cancelled.
    c.job_ended(7, ids[0], Exit::Code(143), at(6), &mut out);
    assert!(c.jobs.is_empty());
}

#[test]
fn a_cancel_once_a_running_job_was_due_finds_it_over() {
    let mut c = cluster();
    let mut out = Recorder::default();
    // Started at 1 s, each due at 2 s (its run time), the second at 3 s
    // after a suspension of 1 s.
    let ids = c
        .submit(vec![spec(1), spec(1)], 0, at(0), &mut Recorder::default())
        .unwrap();
    pass(&mut c, &mut out);
    assert_eq!(c.suspend(&[ids[1]], at(1), &mut out)[0].error, None);
    assert_eq!(c.resume(&[ids[1]], at(2), &mut out)[0].error, None);
    let sent = out.0.len();
    // At its due instant, or after, the first is over: its end is on its
    // way, and no order goes out.
    let e = c.cancel(&[ids[0]], at(2), &mut out)[0].error.clone();
    assert!(
        e.as_deref().is_some_and(|e| e.contains("already over")),
        "{e:?}"
    );
    assert_eq!(out.0.len(), sent);
    assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
    c.job_ended(7, ids[0], Exit::Code(0), at(2), &mut out);
    assert_eq!(
        c.queue(true).iter().find(|j| j.id == ids[0]).unwrap().state,
        JobState::Completed
    );
    // The second, suspended for a second, is not due yet: cancelled.
    assert_eq!(c.cancel(&[ids[1]], at(2), &mut out)[0].error, None);
    assert!(format!("{:?}", out.0.last().unwrap().1).starts_with("Cancel"));
}

#[test]
fn a_lost_agent_fails_its_jobs_and_downs_its_nodes() {
    let mut c = cluster_with(
        "[agents]\nheartbeat_timeout_ms = 10000\n\
         [[partitions]]\nname = \"p\"\non_node_fail = \"fail\"\n",
    );
    let mut out = Recorder::default();
    let id = c
        .submit(vec![spec(2)], 0, at(0), &mut Recorder::default())
        .unwrap()[0];
    pass(&mut c, &mut out);
    c.agent_down(7, "heartbeat timeout", false, at(2), &mut out);
    // It may come back within the timeout (from when it was last
    // heard of, at 0): until then the job waits.
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.lose_overdue(at(9), &mut out);
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.lose_overdue(at(10), &mut out);
    assert_eq!(c.queue(true)[0].state, JobState::NodeFail);
    assert!((0..c.nodes.len()).all(|n| c.node_state(n) == NodeState::Down));
    let id2 = c
        .submit(vec![spec(1)], 0, at(3), &mut Recorder::default())
        .unwrap()[0];
    pass_at(&mut c, &mut out, at(4));
    assert_eq!(
        c.jobs[&id2].state,
        JobState::Pending,
        "nothing runs on down nodes"
    );
    assert_ne!(id, id2);
}

#[test]
fn impossible_jobs_are_refused_at_submit() {
    let mut c = cluster();
    assert!(c
        .submit(vec![spec(17)], 0, at(0), &mut Recorder::default())
        .unwrap_err()
        .contains("memory for 16"));
    assert!(c
        .submit(vec![spec(0)], 0, at(0), &mut Recorder::default())
        .is_err());
    let mut s = spec(1);
    s.partition = Some("nope".into());
    assert!(c
        .submit(vec![s], 0, at(0), &mut Recorder::default())
        .unwrap_err()
        .contains("no partition"));
    // Five tasks on each node of 4 cores.
    let mut program = batch_script("#!/bin/sh\n");
    program.tasks_per_node = 5;
    let s = JobSpec {
        program: Some(program),
        ..spec(5)
    };
    let err = c
        .submit(vec![s], 0, at(0), &mut Recorder::default())
        .unwrap_err();
    assert!(
        err.contains("5 tasks of 1 cores on each node, but the nodes of partition"),
        "{err}"
    );
    assert!(c.jobs.is_empty());
}

#[test]
fn a_node_count_that_can_never_be_met_is_refused_at_submit() {
    let mut c = cluster();
    let refused = |c: &mut Cluster, cores: u32, nodes: (u32, u32)| {
        let s = JobSpec {
            nodes: Some(nodes),
            ..spec(cores)
        };
        c.submit(vec![s], 0, at(0), &mut Recorder::default())
            .unwrap_err()
    };
    // Four nodes of 4 cores.
    assert!(refused(&mut c, 5, (5, 5)).contains("asks 5 nodes, but partition"));
    assert!(refused(&mut c, 9, (1, 2)).contains("9 cores on at most 2 nodes"));
    assert!(refused(&mut c, 2, (3, 3)).contains("cannot span 3 nodes with 2 cores"));
    assert!(refused(&mut c, 4, (3, 2)).contains("cannot span 3-2 nodes"));
    assert!(refused(&mut c, 4, (0, 0)).contains("cannot span 0 nodes"));
    assert!(c.jobs.is_empty());
    // What can be met is taken, and runs on the nodes it asked.
    let s = JobSpec {
        nodes: Some((2, 2)),
        ..spec(4)
    };
    let id = c
        .submit(vec![s], 0, at(0), &mut Recorder::default())
        .unwrap()[0];
    let mut out = Recorder::default();
    pass_at(&mut c, &mut out, at(1));
    assert_eq!(c.jobs[&id].alloc[..], [(0, 3), (1, 1)]);
}

#[test]
fn a_node_count_needs_that_many_consecutive_nodes_in_a_contiguous_partition() {
    let mut c =
        cluster_with("[[partitions]]\nname = \"p\"\nnodes = \"vn[1-2,4]\"\ncontiguous = true\n");
    let asks = |least: u32| JobSpec {
        nodes: Some((least, least)),
        ..spec(3)
    };
    let err = c
        .submit(vec![asks(3)], 0, at(0), &mut Recorder::default())
        .unwrap_err();
    assert!(
        err.contains("asks 3 consecutive nodes, but partition p has at most 2 in a row"),
        "{err}"
    );
    assert!(c
        .submit(vec![asks(2)], 0, at(0), &mut Recorder::default())
        .is_ok());
}

#[test]
fn an_unknown_or_taken_node_is_refused_at_registration() {
    let mut c = cluster();
    assert!(up(&mut c, 8, "h2", "vn9", &[])
        .unwrap_err()
        .contains("no node vn9"));
    assert!(up(&mut c, 8, "h2", "vn1", &[])
        .unwrap_err()
        .contains("already served"));
}

#[test]
fn a_lost_job_is_requeued_by_default_and_runs_again() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c
        .submit(vec![spec(2)], 0, at(0), &mut Recorder::default())
        .unwrap()[0];
    pass(&mut c, &mut out);
    c.agent_down(7, "disconnected", false, at(2), &mut out);
    c.lose_overdue(at(100), &mut out);
    assert_eq!(c.jobs[&id].state, JobState::Pending);
    assert_eq!(c.counters.requeued, 1);
    assert!(c
        .loads
        .iter()
        .all(|n| n.alloc_cpus == 0 && n.slot_cpus == 0));
    up(&mut c, 9, "h", "vn[1-4]", &[]).unwrap();
    pass_at(&mut c, &mut out, at(101));
    assert_eq!(c.jobs[&id].state, JobState::Running);
    assert_eq!(c.jobs[&id].agent, Some(9));
}

#[test]
fn a_job_that_loses_a_node_of_another_agent_waits_for_its_process_to_end() {
    // Its process runs on h1 (its first node); h2, which held two of its
    // nodes, is lost. Run again at once, it could start on h1 beside the
    // process still there and take that process's end for its own.
    let cfg = config::Cluster::from_str(
        "[[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\n",
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    for (exit, then) in [
        (Exit::Signal(9), JobState::Pending),
        (Exit::Code(0), JobState::Completed),
    ] {
        let mut c = Cluster::new(Arc::new(cfg.clone()));
        up(&mut c, 7, "h1", "vn[1-2]", &[]).unwrap();
        up(&mut c, 8, "h2", "vn[3-4]", &[]).unwrap();
        let mut out = Recorder::default();
        let id = c
            .submit(vec![spec(12)], 0, at(0), &mut Recorder::default())
            .unwrap()[0];
        pass(&mut c, &mut out);
        assert_eq!(c.jobs[&id].agent, Some(7));
        let mut lost = Recorder::default();
        c.agent_down(8, "disconnected", false, at(2), &mut lost);
        assert_eq!(c.jobs[&id].state, JobState::Running, "not requeued yet");
        assert!(
            matches!(lost.0[..], [(7, ToAgent::Kill(k))] if k == id),
            "{:?}",
            lost.0
        );
        // Nothing starts on its cores meanwhile, not even the job itself.
        pass_at(&mut c, &mut out, at(3));
        assert!(c.loads[..2].iter().all(|n| n.alloc_cpus == 4));
        // Its end decides: killed, it runs again; ended on its own first
        // (its record written), it counts as it ended.
        c.job_ended(7, id, exit, at(4), &mut out);
        match then {
            JobState::Pending => assert_eq!(c.jobs[&id].state, JobState::Pending),
            _ => assert_eq!(c.queue(true)[0].state, then),
        }
    }
}

#[test]
fn an_agent_that_comes_back_reports_its_jobs() {
    // Four 1-core jobs run on host h; its agent is lost, then registers
    // again: job 1 still runs, job 2 is suspended there although the
    // controller wants it running, job 3 ended meanwhile, job 4 is not
    // reported (gone). It also runs job 99, unknown here.
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(1); 4], 0, at(0), &mut Recorder::default())
        .unwrap();
    pass(&mut c, &mut out);
    c.agent_down(7, "disconnected", false, at(2), &mut out);
    assert!(c
        .jobs
        .values()
        .all(|j| j.agent.is_none() && j.lost_at.is_some()));
    let mut back = Recorder::default();
    let ends = c
        .agent_up(
            8,
            "h",
            "vn[1-4]",
            4,
            0,
            false,
            &[
                (ids[0], Held::Running),
                (ids[1], Held::Suspended),
                (ids[2], Held::Ended(Exit::Code(0))),
                (99, Held::Running),
            ],
            at(3),
            &mut back,
        )
        .unwrap();
    assert_eq!(ends, [(ids[2], Exit::Code(0))]);
    assert_eq!(c.jobs[&ids[0]].agent, Some(8));
    assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
    assert_eq!(c.jobs[&ids[1]].agent, Some(8));
    assert_eq!(c.jobs[&ids[3]].state, JobState::Pending, "gone: requeued");
    let sent: Vec<String> = back.0.iter().map(|(a, m)| format!("{a} {m:?}")).collect();
    assert!(sent.contains(&format!("8 Resume({})", ids[1])), "{sent:?}");
    assert!(sent.contains(&"8 Kill(99)".to_string()), "{sent:?}");
    c.job_ended(8, ids[2], Exit::Code(0), at(3), &mut out);
    assert_eq!(
        c.queue(true).iter().find(|j| j.id == ids[2]).unwrap().state,
        JobState::Completed
    );
}

#[test]
fn bad_decisions_are_refused() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(4), spec(4)], 0, at(0), &mut Recorder::default())
        .unwrap();
    c.drain("vn3", "maintenance", at(0), &mut Recorder::default())
        .unwrap();
    let refused = c.apply(
        vec![
            Decision::Start {
                job: ids[0],
                alloc: vec![(0, 4)],
            },
            // Same cores again: refused.
            Decision::Start {
                job: ids[1],
                alloc: vec![(0, 4)],
            },
            // Wrong size: refused.
            Decision::Start {
                job: ids[1],
                alloc: vec![(1, 3)],
            },
            // A drained node: refused.
            Decision::Start {
                job: ids[1],
                alloc: vec![(2, 4)],
            },
            Decision::Resume(ids[0]),
            Decision::Suspend(999),
        ],
        at(1),
        &mut out,
    );
    assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
    assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
    assert_eq!(out.0.len(), 1);
    assert_eq!(c.loads[0].alloc_cpus, 4);
    // Each refusal says why, naming the job.
    assert_eq!(refused.len(), 5, "{refused:?}");
    assert!(
        refused[2].contains("vn3, which is drained (maintenance)"),
        "{refused:?}"
    );
    // Refused at a later node, a start leaves its earlier nodes as they
    // were (each node is checked and charged in one go).
    let refused = c.apply(
        vec![
            Decision::Start {
                job: ids[1],
                alloc: vec![(1, 2), (0, 2)],
            },
            Decision::Start {
                job: ids[1],
                alloc: vec![(1, 2), (2, 2)],
            },
        ],
        at(2),
        &mut out,
    );
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].contains("would overbook node vn1"),
        "{refused:?}"
    );
    assert!(refused[1].contains("which is drained"), "{refused:?}");
    assert_eq!(c.loads[1].alloc_cpus, 0);
    assert_eq!(c.loads[1].slot_cpus, 0);
    assert_eq!(c.loads[1].alloc_mem_mb, 0);
    assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
}

/// A start reads whether a node is usable from a bit kept apart from the
/// node: each way a node stops or comes back (drain, failure, its agent)
/// refuses or allows a start on it, as the node itself says.
#[test]
fn a_start_follows_each_way_a_node_goes_and_comes_back() {
    let mut c = cluster();
    let mut fx = Recorder::default();
    let ids = c.submit(vec![spec(4); 6], 0, at(0), &mut fx).unwrap();
    let start = |c: &mut Cluster, job: u64, node: usize| {
        let refused = c.apply(
            vec![Decision::Start {
                job,
                alloc: vec![(node, 4)],
            }],
            at(1),
            &mut Recorder::default(),
        );
        refused.first().cloned()
    };
    c.drain("vn1", "maintenance", at(0), &mut fx).unwrap();
    c.fail_nodes("vn2", "power", at(1), &mut fx).unwrap();
    let refused = start(&mut c, ids[0], 0).unwrap();
    assert!(refused.contains("drained (maintenance)"), "{refused}");
    let refused = start(&mut c, ids[0], 1).unwrap();
    assert!(refused.contains("failed (power)"), "{refused}");
    c.undrain("vn1", &mut fx).unwrap();
    c.repair_nodes("vn2", &mut fx).unwrap();
    assert_eq!(start(&mut c, ids[0], 0), None);
    assert_eq!(start(&mut c, ids[1], 1), None);
    // Its agent gone, no node is usable; back, they are again.
    c.agent_down(7, "disconnected", false, at(2), &mut fx);
    let refused = start(&mut c, ids[2], 2).unwrap();
    assert!(refused.contains("node of job"), "{refused}");
    let refused = start(&mut c, ids[2], 3).unwrap();
    assert!(refused.contains("node of job"), "{refused}");
    up(&mut c, 8, "h", "vn[3-4]", &[]).unwrap();
    assert_eq!(start(&mut c, ids[2], 2), None);
    // A start whose first node is up but a later one is not.
    let refused = c.apply(
        vec![Decision::Start {
            job: ids[3],
            alloc: vec![(3, 2), (0, 2)],
        }],
        at(3),
        &mut fx,
    );
    assert!(
        refused[0].contains("node vn1, which is down"),
        "{refused:?}"
    );
    assert_eq!(c.loads[3].alloc_cpus, 0);
    for n in 0..4 {
        assert_eq!(c.is_usable(n), c.nodes[n].usable(), "vn{}", n + 1);
    }
}

/// Partitions `low` (the default) and `high`, whose jobs suspend low
/// ones.
fn suspending_cluster() -> Cluster {
    cluster_with(
        "[controller]\npreemption = \"suspend\"\n\
         [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
         [[partitions]]\nname = \"high\"\npriority = 10\n",
    )
}

#[test]
fn a_job_the_policy_suspended_shows_as_ending_without_its_cores() {
    let mut c = suspending_cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![long(spec(8)), long(spec(8))],
            0,
            at(0),
            &mut Recorder::default(),
        )
        .unwrap();
    pass_at(&mut c, &mut out, at(1));
    let mut hi = spec(4);
    hi.partition = Some("high".into());
    c.submit(vec![hi], 0, at(2), &mut Recorder::default())
        .unwrap();
    pass_at(&mut c, &mut out, at(3));
    let suspended = ids
        .iter()
        .copied()
        .find(|id| c.jobs[id].state == JobState::Suspended)
        .expect("one low job suspended");
    let running = ids.iter().copied().find(|&id| id != suspended).unwrap();
    c.cancel(&[suspended, running], at(4), &mut out);
    let state = |id: u64| c.active.iter().find(|a| a.job == id).unwrap().state;
    // Its cores are another's already: a preemption that counts what ends
    // must not count them again.
    assert_eq!(state(suspended), ActiveState::EndingSuspended);
    assert_eq!(state(running), ActiveState::Ending);
}

#[test]
fn preemption_suspends_low_priority_jobs_and_resumes_them_after() {
    let mut c = suspending_cluster();
    let mut out = Recorder::default();
    let low = c
        .submit(vec![spec(16)], 0, at(0), &mut Recorder::default())
        .unwrap()[0];
    pass_at(&mut c, &mut out, at(1));
    let mut hi = spec(4);
    hi.partition = Some("high".into());
    let high = c
        .submit(vec![hi], 0, at(2), &mut Recorder::default())
        .unwrap()[0];
    pass_at(&mut c, &mut out, at(3));
    assert_eq!(c.jobs[&low].state, JobState::Suspended);
    assert_eq!(c.jobs[&high].state, JobState::Running);
    // The victim keeps its memory, gives its cores.
    assert_eq!(c.loads[0].alloc_mem_mb, 8192);
    assert_eq!(c.loads.iter().map(|n| n.alloc_cpus).sum::<u32>(), 4);
    c.job_ended(7, high, Exit::Code(0), at(5), &mut out);
    pass_at(&mut c, &mut out, at(6));
    assert_eq!(c.jobs[&low].state, JobState::Running);
    assert_eq!(c.jobs[&low].suspended_total, 3 * S);
    let sent: Vec<String> = out.0.iter().map(|(_, m)| format!("{m:?}")).collect();
    assert_eq!(sent.len(), 4, "{sent:?}");
    assert!(
        sent[1].starts_with("Suspend")
            && sent[2].starts_with("Start")
            && sent[3].starts_with("Resume")
    );
    // An administrator cannot resume what the scheduler suspended.
    let id = c
        .submit(vec![hi_spec()], 0, at(7), &mut Recorder::default())
        .unwrap()[0];
    pass_at(&mut c, &mut out, at(8));
    assert_eq!(c.jobs[&low].state, JobState::Suspended);
    assert!(c.resume(&[low], at(9), &mut out)[0]
        .error
        .as_deref()
        .unwrap()
        .contains("scheduler"));
    let _ = id;
}

/// Preemption that ends its victims (`cancel`, `requeue`): the urgent
/// job waits for them to be gone, nothing else takes its nodes meanwhile,
/// later passes end no one more, and the victim ends preempted, or is
/// requeued (unless it may not be: then preempted too).
#[test]
fn preemption_by_cancel_or_requeue_waits_for_its_victims() {
    for mode in ["cancel", "requeue"] {
        for requeueable in [true, false] {
            let mut c = cluster_with(&format!(
                "[controller]\npreemption = \"{mode}\"\n\
                 [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
                 [[partitions]]\nname = \"high\"\npriority = 10\n"
            ));
            let mut out = Recorder::default();
            let mut victim = spec(8);
            if !requeueable {
                victim.requeue = Some(false);
            }
            let low = c.submit(vec![victim], 0, at(0), &mut out).unwrap()[0];
            pass_at(&mut c, &mut out, at(1));
            let mut urgent = hi_spec();
            urgent.cores = 16;
            let high = c.submit(vec![urgent], 0, at(2), &mut out).unwrap()[0];
            let later = c.submit(vec![spec(4)], 0, at(2), &mut out).unwrap()[0];
            let cancels = |out: &Recorder| {
                out.0
                    .iter()
                    .filter(|(_, m)| {
                        let why = if mode == "requeue" && requeueable {
                            EndWhy::Requeued
                        } else {
                            EndWhy::Preempted
                        };
                        matches!(m, ToAgent::End { job, why: w } if *job == low && *w == why)
                    })
                    .count()
            };
            for t in [3, 4, 5] {
                pass_at(&mut c, &mut out, at(t));
                let what = format!("{mode}, requeueable {requeueable}, pass at {t}");
                assert_eq!(cancels(&out), 1, "{what}: its victim told to end once");
                assert_eq!(c.jobs[&high].state, JobState::Pending, "{what}");
                // The 8 free cores are the urgent job's: no one takes them.
                assert_eq!(c.jobs[&later].state, JobState::Pending, "{what}");
                assert_eq!(
                    c.loads.iter().map(|n| n.alloc_cpus).sum::<u32>(),
                    8,
                    "{what}"
                );
            }
            c.job_ended(7, low, Exit::Code(128 + 15), at(6), &mut out);
            pass_at(&mut c, &mut out, at(7));
            assert_eq!(c.jobs[&high].state, JobState::Running);
            let info = c.queue(true).into_iter().find(|j| j.id == low).unwrap();
            if mode == "requeue" && requeueable {
                assert_eq!(info.state, JobState::Pending);
                assert_eq!((info.restarts, info.reason.as_str()), (1, "BeginTime"));
            } else {
                assert_eq!(info.state, JobState::Preempted, "{mode}, {requeueable}");
                assert_eq!(info.exit, (0, 15));
            }
        }
    }
}

/// While a cancelled victim is on its way out, the job it makes room for
/// does not end another that could make room too.
#[test]
fn preemption_by_cancel_ends_no_more_victims_than_it_needs() {
    let mut c = cluster_with(
        "[controller]\npreemption = \"cancel\"\n\
         [[partitions]]\nname = \"low\"\npriority = 1\ndefault = true\n\
         [[partitions]]\nname = \"high\"\npriority = 10\n",
    );
    let mut out = Recorder::default();
    let lows = c
        .submit(vec![spec(8), spec(8)], 0, at(0), &mut out)
        .unwrap();
    pass_at(&mut c, &mut out, at(1));
    let mut urgent = hi_spec();
    urgent.cores = 8;
    let high = c.submit(vec![urgent], 0, at(2), &mut out).unwrap()[0];
    for t in [3, 4, 5] {
        pass_at(&mut c, &mut out, at(t));
    }
    let cancelled: Vec<u64> = out
        .0
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::End {
                job,
                why: EndWhy::Preempted,
            } => Some(*job),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    let (victim, spared) = if cancelled[0] == lows[0] {
        (lows[0], lows[1])
    } else {
        (lows[1], lows[0])
    };
    c.job_ended(7, victim, Exit::Code(128 + 15), at(6), &mut out);
    pass_at(&mut c, &mut out, at(7));
    assert_eq!(c.jobs[&high].state, JobState::Running);
    assert_eq!(c.jobs[&spared].state, JobState::Running);
}

fn hi_spec() -> JobSpec {
    let mut s = spec(4);
    s.partition = Some("high".into());
    s
}

/// What a restart must give back: every job's state, allocation and
/// history, the queue in its order, the nodes' load and drains.
type Picture = (
    Vec<formats::wire::JobInfo>,
    Vec<u64>,
    Vec<(u32, u32, u64, Option<String>, bool)>,
    u64,
);

fn picture(c: &Cluster) -> Picture {
    let queued = c.view(at(0)).queue.iter().map(|q| q.job).collect();
    // The usable bit with what it is kept from: a restart that set one
    // without the other would show.
    let nodes = c
        .nodes
        .iter()
        .zip(&c.loads)
        .enumerate()
        .map(|(i, (n, l))| {
            (
                l.alloc_cpus,
                l.slot_cpus,
                l.alloc_mem_mb,
                n.drained.clone(),
                c.is_usable(i) == n.usable(),
            )
        })
        .collect();
    (c.queue(true), queued, nodes, c.next_id)
}

/// `c` restarted from `entries` alone, and from a snapshot of it.
fn restarts(c: &Cluster, entries: &[Entry]) -> [Cluster; 2] {
    let replayed = Cluster::restore(
        Arc::clone(&c.config),
        Recovered {
            snapshot: Default::default(),
            entries: entries.to_vec(),
        },
        at(20),
    );
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, _) = Journal::open(dir.path(), 0).unwrap();
    journal.append(entries.to_vec());
    c.write_snapshot(&mut journal, at(20)).unwrap();
    let (_, rec) = Journal::open(dir.path(), 0).unwrap();
    assert!(rec.entries.is_empty(), "the snapshot holds every entry");
    let loaded = Cluster::restore(Arc::clone(&c.config), rec, at(20));
    [replayed, loaded]
}

#[test]
fn a_restart_replays_the_journal_to_the_same_tables() {
    let mut c = suspending_cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![spec(4), spec(4), spec(8), spec(16)],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass_at(&mut c, &mut out, at(1));
    // Held by an administrator, let go, held again (still held).
    c.suspend(&[ids[0]], at(2), &mut out);
    c.resume(&[ids[0]], at(3), &mut out);
    c.suspend(&[ids[0]], at(4), &mut out);
    // A high-priority job suspends a low one to run.
    c.submit(vec![hi_spec()], 0, at(5), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(6));
    let states: Vec<JobState> = c.queue(false).iter().map(|j| j.state).collect();
    assert_eq!(
        states.iter().filter(|s| **s == JobState::Suspended).count(),
        2,
        "{states:?}"
    );
    // One job told to end, one ended, one node drained, one more waiting.
    c.cancel(&[ids[2]], at(7), &mut out);
    c.job_ended(7, ids[1], Exit::Code(0), at(8), &mut out);
    c.drain("vn4", "disk", at(0), &mut out).unwrap();
    c.submit(vec![spec(2)], 0, at(9), &mut out).unwrap();
    for restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
        // Every started job waits for its agent to report it.
        assert!(restarted
            .jobs
            .values()
            .all(|j| j.started_mono.is_none() || j.lost_at.is_some()));
    }
}

#[test]
fn a_requeued_job_is_restored_pending() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(2)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    c.agent_down(7, "disconnected", false, at(2), &mut out);
    c.lose_overdue(at(15), &mut out);
    assert_eq!(c.jobs[&id].state, JobState::Pending);
    for restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
        assert!(restarted.jobs[&id].reason.starts_with("requeued"));
    }
}

/// A submission asked again with its key (its client lost the answer in a
/// takeover) gets the same jobs, also from a copy of the journal: the key
/// is journaled and kept in snapshots.
#[test]
fn a_submission_asked_again_with_its_key_gets_the_same_jobs() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![spec(1); 3], 42, at(0), &mut out).unwrap();
    assert_eq!(first, [1, 2, 3]);
    let again = c.submit(vec![spec(1); 3], 42, at(1), &mut out).unwrap();
    assert_eq!(again, first);
    let other = c.submit(vec![spec(1)], 43, at(1), &mut out).unwrap();
    assert_eq!(other, [4]);
    assert_eq!(c.active_jobs(), 4);
    assert!(out.1.contains(&Entry::Keyed {
        key: 42,
        first: 1,
        count: 3
    }));

    // Replayed from the entries, as a backup does.
    let config = Arc::clone(c.config());
    let mut copy = Cluster::copy(
        Arc::clone(&config),
        Recovered {
            snapshot: Default::default(),
            entries: out.1.clone(),
        },
        at(2),
    );
    assert_eq!(
        copy.submit(vec![spec(1); 3], 42, at(2), &mut out).unwrap(),
        first
    );
    // And from a snapshot of it.
    let head = copy.snapshot_head();
    let images: Vec<_> = copy.images(at(2)).collect();
    let snap = crate::journal::Snapshot::of(9, head, images);
    let mut again = Cluster::copy(
        config,
        Recovered {
            snapshot: snap,
            entries: Vec::new(),
        },
        at(3),
    );
    assert_eq!(
        again.submit(vec![spec(1)], 43, at(3), &mut out).unwrap(),
        [4]
    );
    assert_eq!(again.active_jobs(), 4);
}

fn after(ids: &[u64], think_s: Option<u64>) -> JobSpec {
    JobSpec {
        after: ids.to_vec(),
        think_ns: think_s.map(|t| t * S as u64),
        begin_ns: None,
        array: None,
        submit_ns: None,
        ..spec(1)
    }
}

fn queued(c: &Cluster) -> Vec<u64> {
    c.view(at(0)).queue.iter().map(|q| q.job).collect()
}

#[test]
fn a_job_waits_for_others_then_queues_as_submitted() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(8), spec(1)], 0, at(0), &mut out)
        .unwrap();
    let dep = c
        .submit(vec![after(&ids, None)], 0, at(1), &mut out)
        .unwrap()[0];
    // Held: the policy does not see it; the queue says why.
    assert!(!queued(&c).contains(&dep));
    assert_eq!(c.jobs_info(&[dep])[0].reason, "Dependency");
    pass(&mut c, &mut out);
    c.job_ended(7, ids[0], Exit::Code(0), at(5), &mut out);
    assert!(!queued(&c).contains(&dep), "one of its two still runs");
    // However the last one ends, the wait is over; it keeps its submit
    // instant (afterany).
    c.cancel(&[ids[1]], at(6), &mut out);
    assert!(!queued(&c).contains(&dep), "cancelling only asks the agent");
    c.job_ended(7, ids[1], Exit::Code(143), at(7), &mut out);
    assert!(queued(&c).contains(&dep));
    assert_eq!(c.jobs[&dep].submit_ns, at(1).wall);
}

#[test]
fn afterok_and_afternotok_wait_for_an_end_and_never_run_on_the_other() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(8), spec(8)], 0, at(0), &mut out)
        .unwrap();
    let on = |list: &str, dep: u64| JobSpec {
        after_ok: if list == "ok" { vec![dep] } else { Vec::new() },
        after_not_ok: if list == "notok" {
            vec![dep]
        } else {
            Vec::new()
        },
        ..after(&[], None)
    };
    let deps = c
        .submit(
            vec![
                on("ok", ids[0]),
                on("notok", ids[0]),
                on("ok", ids[1]),
                on("notok", ids[1]),
            ],
            0,
            at(1),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    c.job_ended(7, ids[0], Exit::Code(0), at(5), &mut out);
    c.job_ended(7, ids[1], Exit::Code(3), at(6), &mut out);
    // Each waits for the end it asked; the others can never run, and
    // say so, as Slurm's do.
    let q = queued(&c);
    assert!(q.contains(&deps[0]) && q.contains(&deps[3]), "{q:?}");
    for never in [deps[1], deps[2]] {
        assert!(!q.contains(&never));
        assert_eq!(c.jobs_info(&[never])[0].reason, "DependencyNeverSatisfied");
    }
    // One submitted now after a job already over is judged at once.
    let late = c
        .submit(vec![on("ok", ids[1])], 0, at(7), &mut out)
        .unwrap()[0];
    assert_eq!(c.jobs_info(&[late])[0].reason, "DependencyNeverSatisfied");
    let fine = c
        .submit(vec![on("ok", ids[0])], 0, at(7), &mut out)
        .unwrap()[0];
    assert!(queued(&c).contains(&fine));
}

#[test]
fn a_held_job_waits_out_of_the_queue_until_released_and_a_restart_keeps_it() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![
                JobSpec {
                    hold: true,
                    ..spec(1)
                },
                spec(1),
                spec(1),
            ],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    assert!(!queued(&c).contains(&ids[0]));
    assert_eq!(c.jobs_info(&[ids[0]])[0].reason, "JobHeldUser");
    // A queued job held by the operator leaves the queue.
    let held = c.hold(&[ids[1]], Some(HoldKind::Admin), true, at(1), &mut out);
    assert_eq!(held[0].error, None);
    assert_eq!(c.jobs_info(&[ids[1]])[0].reason, "JobHeldAdmin");
    assert_eq!(queued(&c), [ids[2]]);
    // A plain user can neither release the operator's hold nor make it
    // the user's own.
    let denied = c.hold(&[ids[1]], None, false, at(1), &mut out);
    assert_eq!(denied[0].error.as_deref(), Some("Access/permission denied"));
    c.hold(&[ids[1]], Some(HoldKind::User), false, at(1), &mut out);
    assert_eq!(c.jobs[&ids[1]].hold, Some(HoldKind::Admin));
    // A running job held runs on, its reason the hold's; released, it
    // has none. Releasing a job not held is no error.
    pass(&mut c, &mut out);
    assert_eq!(c.jobs[&ids[2]].state, JobState::Running);
    let run = c.hold(&[ids[2]], Some(HoldKind::Admin), true, at(2), &mut out);
    assert_eq!(run[0].error, None);
    assert_eq!(c.jobs[&ids[2]].state, JobState::Running);
    assert_eq!(c.jobs_info(&[ids[2]])[0].reason, "JobHeldAdmin");
    assert_eq!(
        c.hold(&[ids[2]], None, true, at(2), &mut out)[0].error,
        None
    );
    assert_eq!(c.jobs_info(&[ids[2]])[0].reason, "");
    assert_eq!(
        c.hold(&[ids[2]], None, false, at(2), &mut out)[0].error,
        None
    );
    // A restart finds both held, each by its holder.
    for r in restarts(&c, &out.1) {
        assert_eq!(r.jobs[&ids[0]].hold, Some(HoldKind::User));
        assert_eq!(r.jobs[&ids[1]].hold, Some(HoldKind::Admin));
        assert!(!queued(&r).contains(&ids[0]) && !queued(&r).contains(&ids[1]));
    }
    // Released, each joins the queue.
    assert_eq!(
        c.hold(&ids[..2], None, true, at(3), &mut out)[1].error,
        None
    );
    let q = queued(&c);
    assert!(q.contains(&ids[0]) && q.contains(&ids[1]), "{q:?}");
    for r in restarts(&c, &out.1) {
        assert_eq!(r.jobs[&ids[0]].hold, None);
        assert!(queued(&r).contains(&ids[0]));
    }
    // Held while it waits for another job: released, it still waits.
    let dep = c
        .submit(
            vec![JobSpec {
                hold: true,
                ..after(&[ids[2]], None)
            }],
            0,
            at(4),
            &mut out,
        )
        .unwrap()[0];
    c.hold(&[dep], None, false, at(5), &mut out);
    assert_eq!(c.jobs_info(&[dep])[0].reason, "Dependency");
    c.job_ended(7, ids[2], Exit::Code(0), at(6), &mut out);
    assert!(queued(&c).contains(&dep));
}

#[test]
fn a_running_job_held_waits_held_once_requeued() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(2), spec(2)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    let held = c.hold(&ids, Some(HoldKind::Admin), true, at(1), &mut out);
    assert!(held.iter().all(|o| o.error.is_none()), "{held:?}");
    // A restart finds them running, held by the operator.
    for r in restarts(&c, &out.1) {
        for id in &ids {
            assert_eq!(r.jobs[id].state, JobState::Running);
            assert_eq!(r.jobs[id].hold, Some(HoldKind::Admin));
            assert_eq!(r.jobs_info(&[*id])[0].reason, "JobHeldAdmin");
        }
    }
    // Requeued on request: held by the operator once its process is gone.
    assert_eq!(c.requeue(&ids[..1], false, at(2), &mut out)[0].error, None);
    c.job_ended(7, ids[0], Exit::Code(143), at(3), &mut out);
    assert_eq!(c.jobs[&ids[0]].state, JobState::Pending);
    assert_eq!(c.jobs[&ids[0]].reason, "JobHeldAdmin");
    // Requeued because its node was lost: held too, out of the queue.
    c.agent_down(7, "disconnected", false, at(4), &mut out);
    c.lose_overdue(at(100), &mut out);
    assert_eq!(
        c.jobs[&ids[1]].state,
        JobState::Pending,
        "{:?}",
        c.jobs[&ids[1]].reason
    );
    assert_eq!(c.jobs[&ids[1]].reason, "JobHeldAdmin");
    assert!(!queued(&c).contains(&ids[1]));
    for r in restarts(&c, &out.1) {
        assert_eq!(r.jobs[&ids[0]].reason, "JobHeldAdmin");
        assert!(!queued(&r).contains(&ids[0]) && !queued(&r).contains(&ids[1]));
    }
    // Released, it joins the queue (the node lost) or waits its
    // eligible time (requeued on request).
    c.hold(&ids, None, true, at(101), &mut out);
    assert!(queued(&c).contains(&ids[1]));
    assert_eq!(c.jobs[&ids[0]].reason, "BeginTime");
    // A job that ends held keeps the hold's reason, as on Slurm.
    let id = c.submit(vec![spec(1)], 0, at(102), &mut out).unwrap()[0];
    c.hold(&[id], Some(HoldKind::User), false, at(102), &mut out);
    assert_eq!(c.cancel(&[id], at(103), &mut out)[0].error, None);
    let info = c.queue(true).into_iter().find(|j| j.id == id).unwrap();
    assert_eq!(
        (info.state, info.reason.as_str()),
        (JobState::Cancelled, "JobHeldUser")
    );
}

#[test]
fn a_think_time_over_while_held_submits_the_job_at_its_release() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![spec(1)], 0, at(0), &mut out).unwrap()[0];
    let next = c
        .submit(vec![after(&[first], Some(5))], 0, at(0), &mut out)
        .unwrap()[0];
    c.hold(&[next], Some(HoldKind::User), false, at(1), &mut out);
    pass(&mut c, &mut out);
    c.job_ended(7, first, Exit::Code(0), at(2), &mut out);
    // Its think time ends at 7 s while it is held.
    c.release_due(at(10), &mut out);
    assert!(!queued(&c).contains(&next));
    let waiting = c.submit(vec![spec(1)], 0, at(20), &mut out).unwrap()[0];
    // Released at 50 s: submitted then, behind the job that came at 20.
    c.hold(&[next], None, false, at(50), &mut out);
    assert_eq!(c.jobs[&next].submit_ns, at(50).wall);
    assert!(c.jobs[&next].submit_mono > c.jobs[&waiting].submit_mono);
}

#[test]
fn a_jobs_limit_changes_in_the_queue_and_after_a_restart() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(16), spec(16), spec(16)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    let hour = 3600 * S as u64;
    // Running: its process is told, and policies expect its new end.
    out.0.clear();
    assert_eq!(c.limit(ids[0], hour, &mut out).error, None);
    assert!(matches!(
        out.0.as_slice(),
        [(_, ToAgent::Limit { job, walltime_ns })] if *job == ids[0] && *walltime_ns == hour
    ));
    // As a user's estimate, the limit is what policies expect it to run.
    let a = c
        .view(at(1))
        .active
        .iter()
        .find(|a| a.job == ids[0])
        .cloned()
        .unwrap();
    assert_eq!(a.remaining_ns, hour as i64);
    assert_eq!(a.expected_end_ns, a.since_ns + hour as i64);
    assert_eq!(
        c.limit(99, hour, &mut out).error.as_deref(),
        Some("Invalid job id specified")
    );
    assert_eq!(c.limit(ids[2], hour, &mut out).error, None);
    // The policy sees the new limit; the job keeps its place.
    let view = c.view(at(1));
    assert_eq!(
        view.queue.iter().map(|q| q.job).collect::<Vec<_>>(),
        [ids[1], ids[2]]
    );
    assert_eq!(view.queue[1].estimate_ns, hour);
    for r in restarts(&c, &out.1) {
        assert_eq!(r.jobs[&ids[2]].spec.walltime_ns, hour);
    }
}

#[test]
fn a_limit_changed_while_the_agent_is_away_reaches_it_when_it_comes_back() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(2)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    c.agent_down(7, "disconnected", false, at(2), &mut out);
    out.0.clear();
    let hour = 3600 * S as u64;
    assert_eq!(c.limit(id, hour, &mut out).error, None);
    assert!(out.0.is_empty(), "no agent to tell: {:?}", out.0);
    let told = |c: &mut Cluster| {
        let mut o = Recorder::default();
        c.agent_up(
            7,
            "h",
            "vn[1-4]",
            4,
            0,
            false,
            &[(id, Held::Running)],
            at(3),
            &mut o,
        )
        .unwrap();
        o.0.iter().any(|(_, m)| {
            matches!(m, ToAgent::Limit { job, walltime_ns } if *job == id && *walltime_ns == hour)
        })
    };
    for mut restarted in restarts(&c, &out.1) {
        assert!(told(&mut restarted), "after a restart");
    }
    assert!(told(&mut c));
}

#[test]
fn a_requeued_job_ends_then_waits_as_on_slurm_and_runs_again() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let no = JobSpec {
        requeue: Some(false),
        ..spec(1)
    };
    let held = JobSpec {
        hold: true,
        ..spec(1)
    };
    let ids = c
        .submit(vec![spec(2), no, held], 0, at(0), &mut out)
        .unwrap();
    let (id, refuses, waits) = (ids[0], ids[1], ids[2]);
    pass(&mut c, &mut out);
    let outcome = c.requeue(&[id, refuses, waits, 99], false, at(2), &mut out);
    let errors: Vec<_> = outcome.iter().map(|o| o.error.as_deref()).collect();
    assert_eq!(
        errors,
        [
            None,
            Some("Requested operation is presently disabled"),
            Some("Job is pending execution"),
            Some("Invalid job id specified"),
        ]
    );
    // Its process is ended (TERM, then KILL), told why: until it is gone,
    // the job holds its cores.
    assert!(out.0.iter().any(|m| matches!(
        m,
        (7, ToAgent::End { job, why: EndWhy::Requeued }) if *job == id
    )));
    assert_eq!(c.jobs[&id].state, JobState::Running);
    c.job_ended(7, id, Exit::Code(143), at(3), &mut out);
    let j = &c.jobs[&id];
    assert_eq!(
        (j.state, j.reason.as_str(), j.restarts),
        (JobState::Pending, "BeginTime", 1)
    );
    assert!(!queued(&c).contains(&id));
    assert_eq!(c.counters.requeued, 1);
    for r in restarts(&c, &out.1) {
        assert_eq!(picture(&r), picture(&c));
        assert_eq!(r.jobs[&id].restarts, 1);
    }
    // Eligible 121 s after it ended, as Slurm's requeued jobs are.
    c.release_due(at(3 + 120), &mut out);
    assert!(!queued(&c).contains(&id));
    c.release_due(at(3 + 121), &mut out);
    assert!(queued(&c).contains(&id));
    pass_at(&mut c, &mut out, at(125));
    assert_eq!(c.jobs[&id].state, JobState::Running);
    assert_eq!(c.jobs_info(&[id])[0].restarts, 1);
}

/// A batch job over may be requeued while its spec is kept, as Slurm
/// requeues finished batch jobs: under its id, its restarts counted,
/// eligible 121 s later; not a job that sleeps, nor one that refuses.
#[test]
fn a_finished_batch_job_is_requeued_while_kept_and_runs_again() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let batch = |requeue| JobSpec {
        program: Some(batch_script("#!/bin/sh\nexit 3\n")),
        requeue,
        ..spec(2)
    };
    let ids = c
        .submit(
            vec![batch(None), batch(Some(false)), spec(2), batch(None)],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    for &id in &ids {
        c.job_ended(7, id, Exit::Code(3), at(2), &mut out);
    }
    let outcome = c.requeue(&ids[..3], false, at(3), &mut out);
    let errors: Vec<_> = outcome.iter().map(|o| o.error.as_deref()).collect();
    assert_eq!(
        errors,
        [
            None,
            Some("Requested operation is presently disabled"),
            Some("Only batch jobs are accepted or processed"),
        ]
    );
    let id = ids[0];
    let j = &c.jobs[&id];
    assert_eq!(
        (j.state, j.reason.as_str(), j.restarts, j.submit_ns),
        (JobState::Pending, "BeginTime", 1, 5)
    );
    assert!(!c.done.contains_key(&id));
    assert_eq!(c.queue(true).iter().filter(|j| j.id == id).count(), 1);
    for r in restarts(&c, &out.1) {
        assert_eq!(picture(&r), picture(&c));
    }
    c.release_due(at(3 + 120), &mut out);
    assert!(!queued(&c).contains(&id));
    c.release_due(at(3 + 121), &mut out);
    assert!(queued(&c).contains(&id));
    pass_at(&mut c, &mut out, at(125));
    assert_eq!(c.jobs[&id].state, JobState::Running);
    // Over again, it may be requeued again.
    c.job_ended(7, id, Exit::Code(0), at(126), &mut out);
    assert_eq!(c.requeue(&[id], true, at(127), &mut out)[0].error, None);
    assert_eq!(c.jobs[&id].reason, "job requeued in held state");
    assert_eq!(c.jobs[&id].restarts, 2);
    // 300 s after its end, a finished job's spec is let go, whether or
    // not another job ended since.
    let alone = c.requeue(&[ids[3]], false, at(2 + 300), &mut out);
    assert!(
        alone[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no longer kept")),
        "{alone:?}"
    );
    c.submit(vec![batch(None)], 0, at(400), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(401));
    c.job_ended(7, ids[3] + 1, Exit::Code(0), at(402), &mut out);
    let late = c.requeue(&[ids[3]], false, at(403), &mut out);
    assert!(
        late[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("no longer kept")),
        "{late:?}"
    );
}

#[test]
fn a_job_requeued_held_waits_for_its_release_and_may_be_cancelled_meanwhile() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(2), spec(2)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    for o in c.requeue(&ids, true, at(2), &mut out) {
        assert_eq!(o.error, None);
    }
    // Cancelled before its process is gone: it ends cancelled.
    assert_eq!(c.cancel(&[ids[1]], at(2), &mut out)[0].error, None);
    c.job_ended(7, ids[1], Exit::Code(143), at(3), &mut out);
    assert_eq!(
        c.queue(true).iter().find(|j| j.id == ids[1]).unwrap().state,
        JobState::Cancelled
    );
    c.job_ended(7, ids[0], Exit::Code(143), at(3), &mut out);
    assert_eq!(c.jobs[&ids[0]].reason, "job requeued in held state");
    for r in restarts(&c, &out.1) {
        assert_eq!(r.jobs[&ids[0]].reason, "job requeued in held state");
        assert_eq!(r.jobs[&ids[0]].hold, Some(HoldKind::Requeued));
    }
    // Released, it still waits for its eligible time.
    c.release_due(at(200), &mut out);
    assert!(!queued(&c).contains(&ids[0]));
    assert_eq!(
        c.hold(&[ids[0]], None, false, at(4), &mut out)[0].error,
        None
    );
    assert_eq!(c.jobs[&ids[0]].reason, "BeginTime");
    c.release_due(at(3 + 121), &mut out);
    assert!(queued(&c).contains(&ids[0]));
}

#[test]
fn a_requeued_task_of_a_limited_array_gives_its_place_to_the_next() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let tasks = c
        .submit(vec![array_spec("0-1%1", 4)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    assert_eq!(
        c.requeue(&[tasks[0]], false, at(2), &mut out)[0].error,
        None
    );
    c.job_ended(7, tasks[0], Exit::Code(143), at(3), &mut out);
    // While it waits its 121 s, the next task runs.
    pass_at(&mut c, &mut out, at(4));
    assert_eq!(c.jobs[&tasks[1]].state, JobState::Running);
    // Back, it waits for the array's place.
    c.release_due(at(3 + 121), &mut out);
    assert_eq!(c.jobs_info(&[tasks[0]])[0].reason, "JobArrayTaskLimit");
    c.job_ended(7, tasks[1], Exit::Code(0), at(130), &mut out);
    pass_at(&mut c, &mut out, at(131));
    assert_eq!(c.jobs[&tasks[0]].state, JobState::Running);
}

#[test]
fn a_restart_settles_a_requeue_and_not_with_an_earlier_runs_record() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(2), spec(2)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    // The first runs again after a requeue; the second is being requeued
    // when the controller stops.
    c.requeue(&ids, false, at(2), &mut out);
    c.job_ended(7, ids[0], Exit::Code(143), at(3), &mut out);
    c.release_due(at(3 + 121), &mut out);
    pass_at(&mut c, &mut out, at(125));
    assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
    // The record file holds the first run's end of the first, and the end
    // of the second that came while the controller was down.
    let mut last = std::collections::HashMap::new();
    last.insert(ids[0], (JobState::Cancelled, at(3).wall));
    last.insert(ids[1], (JobState::Cancelled, at(126).wall));
    for mut r in restarts(&c, &out.1) {
        r.settle(&last, at(130), &mut Recorder::default());
        assert!(
            r.jobs.contains_key(&ids[0]),
            "its second run was ended by its first"
        );
        assert_eq!(
            r.jobs[&ids[1]].state,
            JobState::Pending,
            "the requeue was lost"
        );
        assert_eq!(r.jobs[&ids[1]].reason, "BeginTime");
    }
}

#[test]
fn a_held_task_of_a_throttled_array_stays_held_when_its_turn_comes() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let tasks = c
        .submit(vec![array_spec("0-2%1", 4)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    let held = c.hold(&[tasks[1]], Some(HoldKind::User), false, at(1), &mut out);
    assert_eq!(held[0].error, None);
    c.job_ended(7, tasks[0], Exit::Code(0), at(2), &mut out);
    // Its turn passes it by: the next task takes the array's slot.
    assert!(!queued(&c).contains(&tasks[1]));
    assert_eq!(c.jobs_info(&[tasks[1]])[0].reason, "JobHeldUser");
    assert!(queued(&c).contains(&tasks[2]) || c.jobs[&tasks[2]].state == JobState::Running);
    for r in restarts(&c, &out.1) {
        assert!(!queued(&r).contains(&tasks[1]));
    }
    // Released while the slot is taken, it waits for it, then runs.
    c.hold(&[tasks[1]], None, false, at(3), &mut out);
    assert_eq!(c.jobs_info(&[tasks[1]])[0].reason, "JobArrayTaskLimit");
    pass(&mut c, &mut out);
    c.job_ended(7, tasks[2], Exit::Code(0), at(4), &mut out);
    assert!(queued(&c).contains(&tasks[1]));
}

#[test]
fn a_singleton_waits_for_the_jobs_of_its_name_not_yet_over() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let named = |n: &str| JobSpec {
        name: Some(n.into()),
        ..spec(1)
    };
    let first = c
        .submit(vec![named("a"), named("a"), named("b")], 0, at(0), &mut out)
        .unwrap();
    let single = c
        .submit(
            vec![JobSpec {
                singleton: true,
                ..named("a")
            }],
            0,
            at(1),
            &mut out,
        )
        .unwrap()[0];
    assert_eq!(c.jobs[&single].spec.singleton_jobs, [first[0], first[1]]);
    assert_eq!(c.jobs_info(&[single])[0].reason, "Dependency");
    pass(&mut c, &mut out);
    c.job_ended(7, first[0], Exit::Code(0), at(2), &mut out);
    assert!(!queued(&c).contains(&single));
    c.job_ended(7, first[1], Exit::Code(1), at(3), &mut out);
    assert!(
        queued(&c).contains(&single),
        "a singleton waits for any end"
    );
}

#[test]
fn a_singleton_joined_by_a_question_mark_is_met_by_the_last_of_its_jobs() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let named = |n: &str| JobSpec {
        name: Some(n.into()),
        ..spec(1)
    };
    let first = c
        .submit(vec![named("a"), named("a"), named("b")], 0, at(0), &mut out)
        .unwrap();
    // singleton?afterok:B: the two jobs named `a` over, or B completed.
    let single = c
        .submit(
            vec![JobSpec {
                singleton: true,
                after_ok: vec![first[2]],
                any_dep: true,
                ..named("a")
            }],
            0,
            at(1),
            &mut out,
        )
        .unwrap()[0];
    pass(&mut c, &mut out);
    // One of the two over is not the singleton met.
    c.job_ended(7, first[0], Exit::Code(0), at(2), &mut out);
    assert!(!queued(&c).contains(&single));
    assert_eq!(c.jobs_info(&[single])[0].reason, "Dependency");
    // B failing leaves the singleton to wait for.
    c.job_ended(7, first[2], Exit::Code(1), at(3), &mut out);
    assert!(!queued(&c).contains(&single));
    assert_eq!(c.jobs_info(&[single])[0].reason, "Dependency");
    c.job_ended(7, first[1], Exit::Code(1), at(4), &mut out);
    assert!(
        queued(&c).contains(&single),
        "the last job of its name over meets the singleton"
    );
    // A restart counts the same from its tables.
    for r in restarts(&c, &out.1) {
        assert!(queued(&r).contains(&single));
    }
}

#[test]
fn a_think_time_submits_the_job_that_long_after_the_last_end() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![spec(16)], 0, at(0), &mut out).unwrap()[0];
    // Queued first, but submitted later than this one once released.
    let dep = c
        .submit(vec![after(&[first], Some(10))], 0, at(0), &mut out)
        .unwrap()[0];
    pass(&mut c, &mut out);
    let other = c.submit(vec![spec(16)], 0, at(3), &mut out).unwrap()[0];
    assert_eq!(c.next_release(), None);
    c.job_ended(7, first, Exit::Code(0), at(4), &mut out);
    assert_eq!(c.next_release(), Some(at(14).mono));
    c.release_due(at(13), &mut out);
    assert!(!queued(&c).contains(&dep));
    c.release_due(at(14), &mut out);
    // Submitted at the end + think time, behind the job submitted at 3.
    assert_eq!(queued(&c), [other, dep]);
    assert_eq!(c.jobs[&dep].submit_ns, at(14).wall);
    assert!(out.1.iter().any(
        |e| matches!(e, Entry::Released { id, at_ns } if *id == dep && *at_ns == at(14).wall)
    ));
}

#[test]
fn no_more_jobs_is_told_once_no_job_waits_out_of_the_queue() {
    use crate::policy::Happened;
    let told = |c: &mut Cluster, log: &mut Vec<Happened>| {
        log.extend(c.take_events());
        log.iter()
            .filter_map(|e| match e {
                Happened::NoMoreJobs { at_ns } => Some(*at_ns),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    // Nothing waits: told at once.
    let mut c = cluster();
    c.keep_events();
    c.no_more_jobs(at(3));
    assert_eq!(told(&mut c, &mut Vec::new()), [at(3).mono]);

    let mut c = cluster();
    c.keep_events();
    let mut out = Recorder::default();
    let mut log = Vec::new();
    let first = c.submit(vec![spec(16)], 0, at(0), &mut out).unwrap()[0];
    let dep = c
        .submit(vec![after(&[first], None)], 0, at(0), &mut out)
        .unwrap()[0];
    let gone = c
        .submit(vec![after(&[first], Some(100))], 0, at(0), &mut out)
        .unwrap()[0];
    pass(&mut c, &mut out);
    c.no_more_jobs(at(1));
    assert!(told(&mut c, &mut log).is_empty(), "two jobs are still held");
    c.cancel(&[gone], at(2), &mut out);
    assert!(told(&mut c, &mut log).is_empty(), "one job is still held");
    // Its wait over, the last held job is submitted to the scheduler, and
    // only then is the scheduler told that no more will come.
    c.job_ended(7, first, Exit::Code(0), at(5), &mut out);
    assert_eq!(told(&mut c, &mut log), [at(5).mono]);
    let submitted = log
        .iter()
        .position(|e| matches!(e, Happened::Submitted { job, .. } if *job == dep))
        .unwrap();
    assert!(
        matches!(log[submitted + 1], Happened::NoMoreJobs { .. }),
        "{log:?}"
    );
    // Once, however often a client says it.
    c.job_ended(7, dep, Exit::Code(0), at(6), &mut out);
    c.no_more_jobs(at(7));
    assert_eq!(told(&mut c, &mut log).len(), 1);
}

#[test]
fn waiting_for_a_job_that_does_not_exist_is_refused() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let e = c
        .submit(vec![after(&[5], None)], 0, at(0), &mut out)
        .unwrap_err();
    assert!(e.contains("job 5") && e.contains("no such job yet"), "{e}");
    let e = c
        .submit(vec![spec(1), after(&[1], Some(1))], 0, at(0), &mut out)
        .unwrap_err();
    assert!(e.contains("job 2 of 2"), "{e}");
    let e = c
        .submit(
            vec![JobSpec {
                think_ns: Some(1),
                begin_ns: None,
                array: None,
                ..spec(1)
            }],
            0,
            at(0),
            &mut out,
        )
        .unwrap_err();
    assert!(e.contains("think time"), "{e}");
}

#[test]
fn held_jobs_survive_a_restart() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(16), spec(16)], 0, at(0), &mut out)
        .unwrap();
    let held = c
        .submit(
            vec![after(&[ids[0]], Some(100)), after(&[ids[1]], None)],
            0,
            at(1),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    c.job_ended(7, ids[0], Exit::Code(0), at(5), &mut out);
    for restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
        // Still held, the first to be released at its instant.
        assert!(restarted.jobs[&held[0]].held && restarted.jobs[&held[1]].held);
        assert_eq!(restarted.jobs[&held[0]].deps_end, at(5).wall);
    }
    // Released, then restarted: submitted at its instant, not again.
    c.release_due(at(105), &mut out);
    for mut restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
        assert!(!restarted.jobs[&held[0]].held);
        assert_eq!(restarted.jobs[&held[0]].submit_ns, at(105).wall);
        restarted.release_due(at(200), &mut Recorder::default());
        assert_eq!(picture(&restarted), picture(&c));
    }
}

#[test]
fn a_failed_node_kills_its_jobs_which_run_again_elsewhere() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(4), spec(4)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    let (nodes, hit) = c.fail_nodes("vn1", "power", at(2), &mut out).unwrap();
    assert_eq!((nodes.as_str(), hit.as_slice()), ("vn1", &ids[..1]));
    assert!(out
        .0
        .iter()
        .any(|(a, m)| *a == 7 && matches!(m, ToAgent::Kill(j) if *j == ids[0])));
    assert_eq!(c.node_infos()[0].state, NodeState::Down);
    assert_eq!(c.node_infos()[0].reason, "power");
    // The process is gone: the job is requeued (the partition's default),
    // and starts again on a node that is up.
    c.job_ended(7, ids[0], Exit::Signal(9), at(3), &mut out);
    let info = &c.jobs_info(&ids[..1])[0];
    assert_eq!(info.state, JobState::Pending);
    assert!(
        info.reason.contains("vn1 failed (power)"),
        "{}",
        info.reason
    );
    pass_at(&mut c, &mut out, at(4));
    let j = &c.jobs[&ids[0]];
    assert_eq!(j.state, JobState::Running);
    assert!(j.alloc.iter().all(|&(n, _)| n != 0), "{:?}", j.alloc);
    // Kept over a restart; repaired, the node takes jobs again.
    for restarted in restarts(&c, &out.1) {
        assert_eq!(restarted.node_infos()[0].state, NodeState::Down);
    }
    c.repair_nodes("vn1", &mut out).unwrap();
    assert_eq!(c.node_infos()[0].state, NodeState::Idle);
    for restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
    }
    assert!(c.fail_nodes("vn9", "", at(5), &mut out).is_err());
}

#[test]
fn a_failed_node_ends_the_jobs_of_a_partition_that_does_not_requeue() {
    let mut c = cluster_with(
        "[[partitions]]\nname = \"p\"\nnodes = \"ALL\"\ndefault = true\non_node_fail = \"fail\"\n",
    );
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(4)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    c.fail_nodes("vn[1-4]", "rack", at(2), &mut out).unwrap();
    c.job_ended(7, id, Exit::Signal(9), at(3), &mut out);
    assert_eq!(c.queue(true)[0].state, JobState::NodeFail);
}

#[test]
fn an_array_is_a_job_per_task_with_at_most_its_limit_queued_or_running() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let array = JobSpec {
        array: Some(formats::wire::ArraySpec::parse("0-4%2").unwrap()),
        ..spec(1)
    };
    let ids = c.submit(vec![array], 0, at(0), &mut out).unwrap();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let infos = c.jobs_info(&ids);
    assert!(infos.iter().zip(0..).all(|(j, k)| j.array
        == Some(formats::wire::ArrayTask {
            job: 1,
            index: k,
            limit: 2
        })));
    // Two in the queue, the others wait for the limit.
    assert_eq!(queued(&c), [1, 2]);
    assert_eq!(infos[2].reason, "JobArrayTaskLimit");
    pass(&mut c, &mut out);
    // One ends, one is cancelled while it waits: the next one goes.
    c.cancel(&[4], at(2), &mut out);
    c.job_ended(7, 1, Exit::Code(0), at(3), &mut out);
    assert_eq!(queued(&c), [3]);
    for restarted in restarts(&c, &out.1) {
        assert_eq!(picture(&restarted), picture(&c));
    }
    c.job_ended(7, 2, Exit::Code(0), at(4), &mut out);
    assert_eq!(queued(&c), [3, 5]);
    // A limit above the tasks is no limit; an array without one has none.
    let more = c
        .submit(vec![array_spec("1,3,5-9:2", 1)], 0, at(5), &mut out)
        .unwrap();
    assert_eq!(more.len(), 5);
    assert!(more.iter().all(|id| queued(&c).contains(id)));
}

// Regressions found by a review of dependencies, node failures and arrays.

#[test]
fn a_cancel_while_killed_for_a_failed_node_ends_the_job() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(4)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    c.fail_nodes("vn1", "power", at(2), &mut out).unwrap();
    let r = c.cancel(&[id], at(2), &mut out);
    assert!(r[0].error.is_none(), "cancel accepted");
    c.job_ended(7, id, Exit::Signal(9), at(3), &mut out);
    assert!(
        !c.jobs.contains_key(&id),
        "cancelled job is back in the queue: {:?}",
        c.jobs_info(&[id])
    );
}

#[test]
fn no_job_starts_on_a_failed_node() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(4)], 0, at(0), &mut out).unwrap()[0];
    c.fail_nodes("vn1", "power", at(0), &mut out).unwrap();
    let refused = c.apply(
        vec![Decision::Start {
            job: id,
            alloc: vec![(0, 4)],
        }],
        at(1),
        &mut out,
    );
    assert!(
        !refused.is_empty(),
        "started on failed node vn1: {:?}",
        c.jobs_info(&[id])
    );
}

#[test]
fn a_restart_while_killing_for_a_failed_node_kills_and_keeps_why() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![spec(4)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    c.fail_nodes("vn1", "power", at(2), &mut out).unwrap();
    for mut restarted in restarts(&c, &out.1) {
        assert_eq!(restarted.jobs[&id].reason, c.jobs[&id].reason);
        let mut o2 = Recorder::default();
        restarted
            .agent_up(
                7,
                "h",
                "vn[1-4]",
                4,
                0,
                false,
                &[(id, Held::Running)],
                at(21),
                &mut o2,
            )
            .unwrap();
        // Killed (no record), not cancelled (sigsleep would write one).
        let orders: Vec<_> = o2.0.iter().map(|(_, m)| format!("{m:?}")).collect();
        assert!(
            o2.0.iter()
                .any(|(_, m)| matches!(m, ToAgent::Kill(j) if *j == id)),
            "{orders:?}"
        );
        restarted.job_ended(7, id, Exit::Signal(9), at(22), &mut o2);
        assert_eq!(restarted.jobs[&id].state, JobState::Pending, "requeued");
    }
}

#[test]
fn a_restart_keeps_the_queue_in_arrival_order() {
    let mut c = cluster();
    let mut out = Recorder::default();
    c.submit(vec![spec(16)], 0, at(0), &mut out).unwrap();
    pass(&mut c, &mut out);
    // b arrives at 1 (no instant given), a at 2 with a driver's instant.
    let b = c
        .submit(
            vec![JobSpec {
                submit_ns: None,
                ..spec(1)
            }],
            0,
            at(1),
            &mut out,
        )
        .unwrap()[0];
    let a = c.submit(vec![spec(1)], 0, at(2), &mut out).unwrap()[0];
    assert_eq!(queued(&c), [b, a]);
    for r in restarts(&c, &out.1) {
        assert_eq!(queued(&r), [b, a], "queue order changed by a restart");
    }
}

struct Dies;
impl Policy for Dies {
    fn decide(&self, _: &crate::policy::View) -> crate::policy::Decisions {
        Default::default()
    }
    fn failure(&self) -> Option<String> {
        Some("gone".into())
    }
}

#[test]
fn held_jobs_are_cancelled_when_the_policy_fails() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let a = c.submit(vec![spec(1)], 0, at(0), &mut out).unwrap()[0];
    let h = c
        .submit(vec![after(&[a], Some(10))], 0, at(0), &mut out)
        .unwrap()[0];
    let mut s = Scheduler::new(Box::new(Dies), std::time::Duration::ZERO);
    s.pass(&mut c, at(1), &mut out);
    assert!(s.failed().is_some());
    assert!(!c.jobs.contains_key(&a), "a cancelled as an orphan");
    // h could never start either: cancelled too, not left waiting, and
    // nothing left to wake for.
    assert!(!c.jobs.contains_key(&h));
    assert_eq!(c.jobs_info(&[h])[0].state, JobState::Cancelled);
    assert_eq!(s.due(&c), None);
    assert_eq!(c.next_release(), None);
}

#[test]
fn waiting_for_an_array_waits_for_all_its_tasks() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let tasks = c
        .submit(vec![array_spec("0-2", 1)], 0, at(0), &mut out)
        .unwrap();
    let h = c
        .submit(vec![after(&[tasks[0]], None)], 0, at(0), &mut out)
        .unwrap()[0];
    pass(&mut c, &mut out);
    c.job_ended(7, tasks[0], Exit::Code(0), at(2), &mut out);
    assert!(
        !queued(&c).contains(&h),
        "h queued while tasks {:?} of array {} still run",
        &tasks[1..],
        tasks[0]
    );
}

#[test]
fn array_tasks_held_for_others_keep_the_limit_across_a_restart() {
    // Array of dependent tasks with a limit, cancel some while held,
    // restart: arrays/waiters/releases the same.
    let mut c = cluster();
    let mut out = Recorder::default();
    let d = c.submit(vec![spec(16)], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    let tasks = c
        .submit(
            vec![JobSpec {
                array: Some(formats::wire::ArraySpec::parse("0-5%2").unwrap()),
                after: vec![d],
                think_ns: Some(5 * S as u64),
                begin_ns: None,
                ..spec(1)
            }],
            0,
            at(1),
            &mut out,
        )
        .unwrap();
    c.cancel(&[tasks[1]], at(2), &mut out);
    c.job_ended(7, d, Exit::Code(0), at(3), &mut out);
    c.release_due(at(8), &mut out);
    assert_eq!(queued(&c), [tasks[0], tasks[2]]);
    let live = |c: &Cluster| {
        let mut v: Vec<_> = c
            .arrays
            .iter()
            .map(|(k, a)| (*k, a.live, a.waiting.clone()))
            .collect();
        v.sort();
        v
    };
    for r in restarts(&c, &out.1) {
        assert_eq!(picture(&r), picture(&c));
        assert_eq!(live(&r), live(&c));
        assert_eq!(r.releases, c.releases);
    }
}

#[test]
fn a_job_dropped_on_restore_lets_its_array_and_waiters_go_on() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let tasks = c
        .submit(vec![array_spec("0-1%1", 4)], 0, at(0), &mut out)
        .unwrap();
    let h = c
        .submit(vec![after(&[tasks[0]], None)], 0, at(0), &mut out)
        .unwrap()[0];
    pass(&mut c, &mut out);
    assert_eq!(c.jobs[&tasks[0]].nodes, "vn1");
    // Restarted with vn1 gone from the configuration.
    let cfg = config::Cluster::from_str(
        "[[nodes]]\nnames = \"vn[2-4]\"\ncpus = 4\nmemory = \"8G\"\n",
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    let r = Cluster::restore(
        Arc::new(cfg),
        Recovered {
            snapshot: Default::default(),
            entries: out.1.clone(),
        },
        at(20),
    );
    assert!(!r.jobs.contains_key(&tasks[0]));
    // The next task takes the dropped one's place; the job waiting for
    // the array now waits for that task alone.
    assert!(!r.jobs[&tasks[1]].throttled);
    assert!(queued(&r).contains(&tasks[1]));
    assert_eq!((r.jobs[&h].held, r.jobs[&h].deps_left), (true, 1));
}

/// Four nodes of 4 cores, the first two with 2 GPUs each.
fn gpu_cluster() -> Cluster {
    let cfg = config::Cluster::from_str(
        "[[nodes]]\nnames = \"vn[1-2]\"\ncpus = 4\nmemory = \"8G\"\ngpus = 2\n\
         [[nodes]]\nnames = \"vn[3-4]\"\ncpus = 4\nmemory = \"8G\"\n",
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(Arc::new(cfg));
    up(&mut c, 7, "h", "vn[1-4]", &[]).unwrap();
    c
}

fn gpu_spec(cores: u32, gpus: u32) -> JobSpec {
    JobSpec {
        mem_per_cpu_mb: 0,
        gres: vec![("gpu".into(), gpus)],
        ..spec(cores)
    }
}

/// The devices each start order named, by job.
fn started_devices(out: &Recorder) -> Vec<(u64, String)> {
    out.0
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Start(s) => Some((s.job, s.devices.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn devices_go_lowest_first_to_nodes_that_have_them_free() {
    let mut c = gpu_cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![
                gpu_spec(1, 1),
                gpu_spec(1, 1),
                gpu_spec(1, 1),
                gpu_spec(1, 2),
                spec(1),
            ],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    // The fourth asks 2 GPUs of a node: only one is left (on vn2), so it
    // waits; the job that asks none takes a core of vn1 beside them.
    assert_eq!(
        started_devices(&out),
        vec![
            (ids[0], "vn1:gpu=0".to_string()),
            (ids[1], "vn1:gpu=1".to_string()),
            (ids[2], "vn2:gpu=0".to_string()),
            (ids[4], String::new()),
        ]
    );
    assert_eq!(c.jobs[&ids[3]].state, JobState::Pending);
    assert_eq!(c.jobs[&ids[4]].alloc[..], vec![(0, 1)]);
    let gres = |n: usize| c.node_infos()[n].gres.clone();
    assert_eq!(gres(0), vec![("gpu".to_string(), 2, 2)]);
    assert_eq!(gres(2), vec![]);
    // The second job ends: GPU 1 of vn1 is free, but the 2-GPU job still
    // needs a node with both free; the third ends too: vn2 has both.
    out.0.clear();
    c.job_ended(7, ids[1], Exit::Code(0), at(2), &mut out);
    pass_at(&mut c, &mut out, at(2));
    assert!(started_devices(&out).is_empty());
    c.job_ended(7, ids[2], Exit::Code(0), at(3), &mut out);
    pass_at(&mut c, &mut out, at(3));
    assert_eq!(
        started_devices(&out),
        vec![(ids[3], "vn2:gpu=0,1".to_string())]
    );
    // A finished job's devices stay in its history.
    let done = c.jobs_info(&[ids[1]]);
    let g = done[0].gres.as_ref().unwrap();
    assert_eq!(
        (g.asks.clone(), g.devices.as_str()),
        (vec![("gpu".into(), 1)], "vn1:gpu=1")
    );
}

#[test]
fn a_job_on_several_nodes_gets_devices_on_each() {
    let mut c = gpu_cluster();
    let mut out = Recorder::default();
    let ids = c.submit(vec![gpu_spec(6, 1)], 0, at(0), &mut out).unwrap();
    pass(&mut c, &mut out);
    assert_eq!(
        started_devices(&out),
        vec![(ids[0], "vn1:gpu=0;vn2:gpu=0".to_string())]
    );
    assert_eq!(c.jobs[&ids[0]].alloc[..], vec![(0, 4), (1, 2)]);
}

#[test]
fn a_request_no_node_can_meet_is_refused_with_why() {
    let mut c = gpu_cluster();
    let mut out = Recorder::default();
    let e = c
        .submit(vec![gpu_spec(1, 3)], 0, at(0), &mut out)
        .unwrap_err();
    assert!(
        e.contains("gpu:3") && e.contains("no node of partition batch"),
        "{e}"
    );
    let e = c
        .submit(vec![gpu_spec(9, 1)], 0, at(0), &mut out)
        .unwrap_err();
    assert!(e.contains("9 cores") && e.contains("have 8"), "{e}");
    let mut fpga = spec(1);
    fpga.gres = vec![("fpga".into(), 1)];
    let e = c.submit(vec![fpga], 0, at(0), &mut out).unwrap_err();
    assert!(e.contains("fpga") && e.contains("it has gpu"), "{e}");
    assert!(c.jobs.is_empty());
}

#[test]
fn a_suspended_job_keeps_its_devices() {
    let mut c = gpu_cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![gpu_spec(1, 2), gpu_spec(1, 2)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    c.suspend(&[ids[0]], at(2), &mut out);
    // Its core is held too (an administrator's suspension); on vn2 the
    // second job has its own GPUs.
    let third = c.submit(vec![gpu_spec(1, 1)], 0, at(2), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(3));
    assert_eq!(
        c.jobs[&third[0]].state,
        JobState::Pending,
        "every GPU is held"
    );
    assert_eq!(c.view(at(3)).nodes[0].free_gres, [0, 0, 0, 0]);
}

#[test]
fn a_restart_gives_back_the_same_devices() {
    let mut c = gpu_cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![gpu_spec(1, 1), gpu_spec(1, 1), gpu_spec(1, 1)],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    // The first ends: the journal then starts the third's replacement on
    // GPU 0 of vn1, which a fresh lowest-first choice in another order
    // would not give back.
    c.job_ended(7, ids[0], Exit::Code(0), at(2), &mut out);
    let more = c.submit(vec![gpu_spec(1, 1)], 0, at(2), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(3));
    assert_eq!(
        started_devices(&out).last(),
        Some(&(more[0], "vn1:gpu=0".to_string()))
    );
    for r in restarts(&c, &out.1) {
        assert_eq!(picture(&r), picture(&c));
        assert_eq!(r.device_free, c.device_free);
        for id in [ids[1], ids[2], more[0]] {
            assert_eq!(r.jobs[&id].devices, c.jobs[&id].devices, "job {id}");
        }
    }
}

/// A restart under a config whose node has fewer devices than a job held
/// does not restore that job (and invents no device when it would end).
#[test]
fn a_restart_with_fewer_devices_drops_the_job_that_held_more() {
    let cfg4 = "[[nodes]]\nnames = \"vn1\"\ncpus = 8\nmemory = \"8G\"\ngpus = 4\n";
    let mk = |text: &str| {
        let cfg = config::Cluster::from_str(text, std::path::Path::new("/tmp/t.toml")).unwrap();
        Cluster::new(Arc::new(cfg))
    };
    let mut c = mk(cfg4);
    up(&mut c, 7, "h", "vn1", &[]).unwrap();
    let mut out = Recorder::default();
    let ids = c
        .submit(
            vec![
                gpu_spec(1, 1),
                gpu_spec(1, 1),
                gpu_spec(1, 1),
                gpu_spec(1, 1),
            ],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    for &id in &ids[..3] {
        c.job_ended(7, id, Exit::Code(0), at(1), &mut out);
    }
    assert_eq!(c.devices_text(&c.jobs[&ids[3]].devices), "vn1:gpu=3");
    // Restart with the node now declared with 2 GPUs.
    let cfg2 = config::Cluster::from_str(
        "[[nodes]]\nnames = \"vn1\"\ncpus = 8\nmemory = \"8G\"\ngpus = 2\n",
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    let mut r = Cluster::restore(
        Arc::new(cfg2),
        Recovered {
            snapshot: Default::default(),
            entries: out.1.clone(),
        },
        at(2),
    );
    assert!(
        !r.jobs.contains_key(&ids[3]),
        "it held GPU 3 of a node that has 2"
    );
    let mut out2 = Recorder::default();
    up(&mut r, 8, "h", "vn1", &[(ids[3], Held::Running)]).unwrap_or_default();
    r.job_ended(8, ids[3], Exit::Code(0), at(3), &mut out2);
    assert_eq!(crate::gres::count(&r.device_free[0])[0], 2);
}

/// Random starts, ends, cancels, suspensions and resumptions by hand, gang
/// slices, preemption, node failures and repairs, restarts: no device is
/// ever held twice, held and free make every device of a node, and each
/// job holds what it asked on each of its nodes.
#[test]
fn devices_are_never_held_twice_whatever_happens() {
    let text = "[controller]\npreemption = \"suspend\"\n\
        [[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\ngpus = 2\nresources = { fpga = 1 }\n\
        [[nodes]]\nnames = \"vn[5-6]\"\ncpus = 4\nmemory = \"8G\"\n\
        [[partitions]]\nname = \"gang\"\noversubscribe = 2\ntime_slice_s = 1\ndefault = true\n\
        [[partitions]]\nname = \"low\"\npriority = 1\nnodes = \"vn[1-6]\"\n\
        [[partitions]]\nname = \"high\"\npriority = 10\nnodes = \"vn[1-6]\"\non_node_fail = \"requeue\"\n";
    let cfg =
        Arc::new(config::Cluster::from_str(text, std::path::Path::new("/tmp/t.toml")).unwrap());
    let mut seed: u64 = 0x9e37_79b9;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    for round in 0..40 {
        let mut c = Cluster::new(Arc::clone(&cfg));
        up(&mut c, 7, "h", "vn[1-6]", &[]).unwrap();
        let mut out = Recorder::default();
        let mut t = 0;
        for step in 0..400 {
            t += 1;
            let now = at(t);
            match rnd(10) {
                0..=2 => {
                    let mut s = spec(1 + rnd(6) as u32);
                    s.mem_per_cpu_mb = 0;
                    s.partition = Some(["gang", "low", "high"][rnd(3) as usize].into());
                    match rnd(3) {
                        0 => s.gres = vec![("gpu".into(), 1 + rnd(2) as u32)],
                        1 => s.gres = vec![("gpu".into(), 1), ("fpga".into(), 1)],
                        _ => {}
                    }
                    if s.cores > 4 && !s.gres.is_empty() {
                        s.cores = 4;
                    }
                    let _ = c.submit(vec![s], 0, now, &mut out);
                }
                3 | 4 => {
                    let started: Vec<u64> = c
                        .jobs
                        .values()
                        .filter(|j| !j.alloc.is_empty())
                        .map(|j| j.id)
                        .collect();
                    if !started.is_empty() {
                        let id = started[rnd(started.len() as u64) as usize];
                        let exit = if rnd(2) == 0 {
                            Exit::Code(0)
                        } else {
                            Exit::Signal(9)
                        };
                        c.job_ended(7, id, exit, now, &mut out);
                    }
                }
                5 => {
                    let ids: Vec<u64> = c.jobs.keys().copied().collect();
                    if !ids.is_empty() {
                        let id = ids[rnd(ids.len() as u64) as usize];
                        match rnd(3) {
                            0 => {
                                c.cancel(&[id], now, &mut out);
                            }
                            1 => {
                                c.suspend(&[id], now, &mut out);
                            }
                            _ => {
                                c.resume(&[id], now, &mut out);
                            }
                        }
                    }
                }
                6 => {
                    let n = 1 + rnd(6);
                    if rnd(2) == 0 {
                        let _ = c.fail_nodes(&format!("vn{n}"), "x", now, &mut out);
                    } else {
                        let _ = c.repair_nodes(&format!("vn{n}"), &mut out);
                    }
                }
                7 => {
                    // Restart from the journal: same devices.
                    let r = Cluster::restore(
                        Arc::clone(&cfg),
                        Recovered {
                            snapshot: Default::default(),
                            entries: out.1.clone(),
                        },
                        now,
                    );
                    assert_eq!(
                        r.device_free, c.device_free,
                        "round {round} step {step}: restart"
                    );
                }
                _ => {
                    // Any preemption: suspended, cancelled or requeued
                    // jobs give their devices back alike.
                    let d = Standard {
                        base: Base::Easy,
                        preemption: Preemption::NAMES[rnd(4) as usize].1,
                    }
                    .decide(&c.view(now));
                    c.apply(d.list, now, &mut out);
                }
            }
            // Invariant.
            for n in 0..c.nodes.len() {
                let total = crate::gres::all_free(&c.config.nodes[n].devices);
                let mut held = crate::gres::Masks::default();
                for j in c.jobs.values().filter(|j| !j.alloc.is_empty()) {
                    for (m, d) in &j.devices {
                        if *m != n {
                            continue;
                        }
                        for k in 0..crate::gres::MAX_KINDS {
                            assert_eq!(
                                held[k] & d[k],
                                0,
                                "round {round} step {step}: node {n} device held twice"
                            );
                            held[k] |= d[k];
                        }
                    }
                    // Asks what it got, on each node it holds.
                    if crate::gres::any(&j.gres) {
                        for &(m, _) in j.alloc.iter() {
                            let got = j
                                .devices
                                .iter()
                                .find(|(x, _)| *x == m)
                                .map(|(_, d)| crate::gres::count(d))
                                .unwrap_or_default();
                            assert_eq!(
                                got, j.gres,
                                "round {round} step {step}: job {} on node {m}",
                                j.id
                            );
                        }
                    }
                }
                let free = c.device_free[n];
                for k in 0..crate::gres::MAX_KINDS {
                    assert_eq!(
                        free[k] & held[k],
                        0,
                        "round {round} step {step}: node {n} free and held"
                    );
                    assert_eq!(
                        free[k] | held[k],
                        total[k],
                        "round {round} step {step}: node {n} lost a device"
                    );
                }
            }
        }
    }
}

/// The start orders sent.
fn starts(out: &Recorder) -> Vec<StartJob> {
    out.0
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Start(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// The start orders sent, as the `Prepare` that foresaw each would have
/// it: each carries its start's instant, which no `Prepare` knows.
fn starts_as_prepared(out: &Recorder) -> Vec<StartJob> {
    starts(out)
        .into_iter()
        .map(|s| {
            assert!(s.start_ns > 0, "a start with no instant: {s:?}");
            StartJob { start_ns: 0, ..s }
        })
        .collect()
}

/// The processes asked for ahead, each with how long it waits to be
/// claimed (ms).
fn prepared_within(out: &Recorder) -> Vec<(StartJob, u32)> {
    out.0
        .iter()
        .filter_map(|(_, m)| match m {
            ToAgent::Prepare {
                start,
                claim_within_ms,
            } => Some((start.clone(), *claim_within_ms)),
            _ => None,
        })
        .collect()
}

/// Before a gang turn, the processes of the jobs it will start are asked
/// for ahead, once, with the very orders the turn then sends; a scheduler
/// not asked to look ahead asks for none.
#[test]
fn a_gang_turn_sends_the_start_orders_its_processes_were_prepared_with() {
    let prepared = |out: &Recorder| -> Vec<StartJob> {
        prepared_within(out)
            .into_iter()
            .map(|(start, claim_within_ms)| {
                // The turn is 1 s away; the pass may come late.
                assert!(claim_within_ms >= 2_000, "{claim_within_ms}");
                start
            })
            .collect()
    };
    for look_ahead in [true, false] {
        let mut c = cluster_with(
            "[[partitions]]\nname = \"g\"\noversubscribe = 2\ntime_slice_s = 1\ndefault = true\n",
        );
        let mut out = Recorder::default();
        let whole = |_| JobSpec {
            mem_per_cpu_mb: 0,
            ..spec(4)
        };
        let ids = c
            .submit((0..8).map(whole).collect(), 0, at(0), &mut out)
            .unwrap();
        let policy = Box::new(Standard {
            base: Base::Easy,
            preemption: Preemption::Off,
        });
        let mut s = Scheduler::new(policy, std::time::Duration::ZERO).looking_ahead(look_ahead);
        out.0.clear();
        assert!(s.pass(&mut c, at(0), &mut out));
        let first: Vec<u64> = starts(&out).iter().map(|s| s.job).collect();
        assert_eq!(first, ids[..4]);
        // The pass itself guesses nothing: its orders are not held up.
        assert!(prepared(&out).is_empty());
        out.0.clear();
        s.prepare_ahead(&c, at(0), &mut out);
        let ahead = prepared(&out);
        if !look_ahead {
            assert!(ahead.is_empty(), "{ahead:?}");
            continue;
        }
        assert_eq!(ahead.iter().map(|s| s.job).collect::<Vec<_>>(), ids[4..]);
        // A pass before the turn, for the same wake-up, asks nothing again.
        out.0.clear();
        let half = Now {
            mono: S / 2,
            wall: at(0).wall + S / 2,
        };
        assert!(s.pass(&mut c, half, &mut out));
        assert!(!s.ahead_due(&c, half.mono));
        s.prepare_ahead(&c, half, &mut out);
        assert!(prepared(&out).is_empty());
        assert_eq!(s.due(&c), Some(S));
        out.0.clear();
        assert!(s.pass(&mut c, at(1), &mut out));
        assert_eq!(starts_as_prepared(&out), ahead);
    }
}

/// Under any policy, the pass at the next expected end of a job (its start,
/// plus its run time) is guessed ahead: the jobs it would start have their
/// processes asked for, held, with the very orders that pass sends once the
/// job has ended; once for those ends, and not before they are near.
#[test]
fn the_pass_at_a_jobs_expected_end_is_prepared_with_its_orders() {
    let prepared = |out: &Recorder| -> Vec<StartJob> {
        prepared_within(out).into_iter().map(|(s, _)| s).collect()
    };
    for base in [Base::Fcfs, Base::Easy] {
        let mut c = cluster();
        let mut out = Recorder::default();
        // A whole-cluster job of 10 s, then two of 8 cores waiting for it.
        let long = JobSpec {
            runtime_ns: 10 * S as u64,
            ..spec(16)
        };
        let ids = c
            .submit(vec![long, spec(8), spec(8)], 0, at(0), &mut out)
            .unwrap();
        let policy = Box::new(Standard {
            base,
            preemption: Preemption::Off,
        });
        let mut s = Scheduler::new(policy, std::time::Duration::ZERO).looking_ahead(true);
        assert!(s.pass(&mut c, at(0), &mut out));
        let next = c.next_events(0).unwrap();
        assert_eq!((next.at, next.ending), (10 * S, vec![ids[0]]));
        // Far from the end (9 s before it): nothing to prepare yet, but a
        // time to.
        assert!(!s.ahead_due(&c, S));
        assert_eq!(s.ahead_at(&c), Some(10 * S - 100_000_000));
        out.0.clear();
        let near = Now {
            mono: 10 * S - 5_000_000,
            wall: at(10).wall - 5_000_000,
        };
        assert!(s.ahead_due(&c, near.mono));
        s.prepare_ahead(&c, near, &mut out);
        let ahead = prepared(&out);
        assert_eq!(
            ahead.iter().map(|p| p.job).collect::<Vec<_>>(),
            ids[1..],
            "{base:?}"
        );
        // Once for those ends.
        assert!(!s.ahead_due(&c, near.mono));
        assert_eq!(s.ahead_at(&c), None);
        // The job ends; the pass sends exactly the orders prepared.
        out.0.clear();
        c.job_ended(7, ids[0], Exit::Code(0), at(10), &mut out);
        assert!(s.pass(&mut c, at(10), &mut out));
        assert_eq!(starts_as_prepared(&out), ahead, "{base:?}");
        // The view after an end frees what the job held.
        let v = c.view_after(at(10), &[ids[1]], &[]);
        let free: u32 = v.nodes.iter().map(|n| n.free_cpus).sum();
        assert_eq!(free, 8);
        assert!(v.active.iter().all(|a| a.job != ids[1]));
    }
}

/// A job's allocation is journaled as runs of consecutive nodes: as small
/// for 16 nodes as for one, and it comes back whole.
#[test]
fn an_allocation_is_journaled_as_runs_and_comes_back_whole() {
    let cfg = config::Cluster::from_str(
        "[[nodes]]\nnames = \"vn[01-20]\"\ncpus = 4\nmemory = \"8G\"\n",
        std::path::Path::new("/tmp/t.toml"),
    )
    .unwrap();
    let mut c = Cluster::new(Arc::new(cfg));
    up(&mut c, 7, "h", "vn[01-20]", &[]).unwrap();
    // 16 whole nodes, then two cores of the next, then a gap and one more.
    let alloc: Vec<(usize, u32)> = (0..16).map(|n| (n, 4)).chain([(16, 2), (18, 4)]).collect();
    let runs = c.runs_of(&alloc);
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(
        (
            runs[0].first.as_str(),
            runs[0].last.as_str(),
            runs[0].nodes,
            runs[0].cores
        ),
        ("vn01", "vn16", 16, 4)
    );
    assert_eq!(c.alloc_of(1, &runs), Some(alloc));
    // A run the configuration no longer has in this order is refused.
    let mut wrong = runs.clone();
    wrong[0].nodes = 15;
    assert_eq!(c.alloc_of(1, &wrong), None);
}

/// A job sent ahead with a begin instant (as a replay sends its jobs) is
/// held out of the queue until then, submitted then, and its start is
/// prepared ahead of its arrival like a job's after an end.
#[test]
fn a_job_sent_ahead_arrives_at_its_begin_and_its_start_is_prepared() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let begin = at(10);
    let ids = c
        .submit(
            vec![JobSpec {
                begin_ns: Some(begin.wall),
                ..spec(4)
            }],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    let policy = Box::new(Standard {
        base: Base::Easy,
        preemption: Preemption::Off,
    });
    let mut s = Scheduler::new(policy, std::time::Duration::ZERO).looking_ahead(true);
    // Held: nothing to start before its begin, which the scheduler wakes
    // for.
    assert_eq!(c.jobs[&ids[0]].reason, "BeginTime");
    assert!(!s.pass(&mut c, at(1), &mut out));
    assert_eq!(s.due(&c), Some(10 * S));
    let next = c.next_events(0).unwrap();
    assert_eq!((next.at, next.arriving), (10 * S, vec![ids[0]]));
    // Prepared ahead of its arrival.
    out.0.clear();
    let near = Now {
        mono: 10 * S - 5_000_000,
        wall: begin.wall - 5_000_000,
    };
    assert!(s.ahead_due(&c, near.mono));
    s.prepare_ahead(&c, near, &mut out);
    let prepared: Vec<StartJob> = prepared_within(&out).into_iter().map(|(s, _)| s).collect();
    assert_eq!(prepared.len(), 1);
    // It arrives at its begin, submitted then, and starts as prepared.
    out.0.clear();
    assert!(s.pass(&mut c, begin, &mut out));
    let job = &c.jobs[&ids[0]];
    assert_eq!((job.state, job.submit_ns), (JobState::Running, begin.wall));
    assert_eq!(starts_as_prepared(&out), prepared);
    // Its run counts from the pass that started it.
    assert_eq!(starts(&out)[0].start_ns, begin.wall);
}

/// vn1-vn2 busy until 10 s (the first of the ids), vn3 until 20 s, vn4
/// free, under EASY looking ahead, after its first pass.
fn one_node_free_until_an_end_at_10s() -> (Cluster, Recorder, Scheduler, Vec<u64>) {
    let mut c = cluster();
    let mut out = Recorder::default();
    let a = JobSpec {
        runtime_ns: 10 * S as u64,
        ..spec(8)
    };
    let b = JobSpec {
        runtime_ns: 20 * S as u64,
        ..spec(4)
    };
    let ids = c.submit(vec![a, b], 0, at(0), &mut out).unwrap();
    let policy = Box::new(Standard {
        base: Base::Easy,
        preemption: Preemption::Off,
    });
    let mut s = Scheduler::new(policy, std::time::Duration::ZERO).looking_ahead(true);
    assert!(s.pass(&mut c, at(0), &mut out));
    (c, out, s, ids)
}

/// `after_ns` past 10 s, as [`Now`].
fn past_10s(after_ns: i64) -> Now {
    Now {
        mono: 10 * S + after_ns,
        wall: at(10).wall + after_ns,
    }
}

/// A job of one node sent at `sent` to arrive at `begin`.
fn sent_ahead(c: &mut Cluster, out: &mut Recorder, begin: Now, sent: Now) -> u64 {
    let spec = JobSpec {
        begin_ns: Some(begin.wall),
        ..spec(4)
    };
    c.submit(vec![spec], 0, sent, out).unwrap()[0]
}

/// The processes asked for ahead, which must all be job `job`'s on two
/// nodes; then a pass at `begin` must start it with one of them.
fn prepared_twice_and_claimed(
    c: &mut Cluster,
    out: &mut Recorder,
    s: &mut Scheduler,
    job: u64,
    begin: Now,
    end_first: Option<u64>,
) {
    let prepared: Vec<StartJob> = prepared_within(out).into_iter().map(|(s, _)| s).collect();
    let nodes: Vec<&str> = prepared.iter().map(|p| p.node.as_str()).collect();
    assert!(prepared.iter().all(|p| p.job == job), "{prepared:?}");
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    assert_ne!(nodes[0], nodes[1]);
    out.0.clear();
    if let Some(ended) = end_first {
        c.job_ended(7, ended, Exit::Code(0), at(10), out);
        s.pass(c, at(10), out);
    }
    assert!(s.pass(c, begin, out));
    let started = starts_as_prepared(out);
    assert_eq!(started.len(), 1, "{started:?}");
    assert!(
        prepared.contains(&started[0]),
        "{started:?} not in {prepared:?}"
    );
}

/// An arrival expected with an end may come before it (an end reaches the
/// controller after its process's): its start is prepared for either
/// order, where the two go to different nodes, and the pass finds its
/// process held whichever comes first.
#[test]
fn an_arrival_taken_with_an_end_is_prepared_for_either_order() {
    for end_first in [true, false] {
        let (mut c, mut out, mut s, ids) = one_node_free_until_an_end_at_10s();
        // 100 us after the first one's expected end.
        let begin = past_10s(100_000);
        let late = sent_ahead(&mut c, &mut out, begin, at(1));
        // Taken together by the look-ahead (ends and arrivals within
        // 200 us of the first).
        let next = c.next_events(200_000).unwrap();
        assert_eq!((next.ending, next.arriving), (vec![ids[0]], vec![late]));
        out.0.clear();
        let near = past_10s(-5_000_000);
        assert!(s.ahead_due(&c, near.mono));
        s.prepare_ahead(&c, near, &mut out);
        let ended = end_first.then_some(ids[0]);
        prepared_twice_and_claimed(&mut c, &mut out, &mut s, late, begin, ended);
    }
}

/// An arrival just past a group of ends that starts nothing (here 0.3 ms
/// after the only running job's expected end, the queue empty) is
/// prepared with that group, with and without those ends: an end is
/// known only once its process has ended, often after such an arrival,
/// which found nothing held. A job sent ahead after the ends were
/// prepared is prepared then.
#[test]
fn an_arrival_just_after_ends_that_start_nothing_is_prepared_with_them() {
    let (mut c, mut out, mut s, ids) = one_node_free_until_an_end_at_10s();
    let near = past_10s(-50_000_000);
    // The end alone, the queue empty: nothing to prepare.
    out.0.clear();
    assert!(!s.ahead_due(&c, near.mono));
    // Then a job sent ahead, to arrive 0.3 ms after that end.
    let begin = past_10s(300_000);
    let late = sent_ahead(&mut c, &mut out, begin, near);
    assert_eq!(c.next_events(200_000).unwrap().arriving, Vec::<u64>::new());
    assert!(s.ahead_due(&c, near.mono));
    s.prepare_ahead(&c, near, &mut out);
    // It arrives before the end is known: it starts as prepared.
    prepared_twice_and_claimed(&mut c, &mut out, &mut s, late, begin, None);
    assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
}

#[test]
fn a_job_told_to_end_shows_its_end_from_then_while_it_completes() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let id = c.submit(vec![long(spec(1))], 0, at(0), &mut out).unwrap()[0];
    pass(&mut c, &mut out);
    assert_eq!(c.jobs_info(&[id])[0].end_ns, 0);
    c.cancel(&[id], at(5), &mut out);
    let info = &c.jobs_info(&[id])[0];
    assert!(info.completing);
    assert_eq!(info.end_ns, at(5).wall, "squeue's time stops at the cancel");
    c.job_ended(7, id, Exit::Signal(15), at(7), &mut out);
    assert_eq!(c.jobs_info(&[id])[0].end_ns, at(7).wall);
}

#[test]
fn after_with_a_delay_waits_that_long_past_its_jobs_start() {
    let mut c = cluster();
    let mut out = Recorder::default();
    // The first fills the cluster at 1 s; the second waits for room.
    let ids = c
        .submit(vec![spec(16), spec(16)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    let delayed = |dep: u64, minutes: u64| JobSpec {
        after_start: vec![dep],
        delays: vec![(dep, minutes * 60 * S as u64)],
        ..after(&[], None)
    };
    let waits = c
        .submit(
            vec![delayed(ids[0], 1), delayed(ids[1], 2)],
            0,
            at(2),
            &mut out,
        )
        .unwrap();
    assert_eq!(c.jobs_info(&waits)[0].reason, "Dependency");
    // Started at 1 s: let go at 61 s, not before; submitted when it was.
    assert_eq!(c.next_release(), Some(61 * S));
    c.release_due(at(60), &mut out);
    assert!(!queued(&c).contains(&waits[0]));
    c.release_due(at(61), &mut out);
    assert!(queued(&c).contains(&waits[0]));
    assert_eq!(c.jobs_info(&[waits[0]])[0].submit_ns, at(2).wall);
    // Its job starts at 100 s: two minutes from then.
    c.job_ended(7, ids[0], Exit::Code(0), at(100), &mut out);
    pass_at(&mut c, &mut out, at(100));
    assert_eq!(c.jobs[&ids[1]].state, JobState::Running);
    assert!(!queued(&c).contains(&waits[1]));
    assert_eq!(c.next_release(), Some(220 * S));
    c.release_due(at(220), &mut out);
    assert!(queued(&c).contains(&waits[1]));
}

#[test]
fn after_waits_for_a_start_and_a_question_mark_for_any_one_dependency() {
    let mut c = cluster();
    let mut out = Recorder::default();
    // The first fills the cluster; the second waits for room; the third
    // waits in the queue too, to be cancelled before it starts.
    let ids = c
        .submit(vec![spec(16), spec(16), spec(16)], 0, at(0), &mut out)
        .unwrap();
    let started = |dep: u64| JobSpec {
        after_start: vec![dep],
        ..after(&[], None)
    };
    let waits = c
        .submit(
            vec![started(ids[0]), started(ids[1]), started(ids[2])],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    pass(&mut c, &mut out);
    // Its job started: the first is let go; the others wait.
    let q = queued(&c);
    assert!(q.contains(&waits[0]), "{q:?}");
    assert!(!q.contains(&waits[1]) && !q.contains(&waits[2]));
    assert_eq!(c.jobs_info(&[waits[1]])[0].reason, "Dependency");
    // Cancelled without starting: what waited for its start goes on.
    c.cancel(&[ids[2]], at(2), &mut out);
    assert!(queued(&c).contains(&waits[2]));
    c.job_ended(7, ids[0], Exit::Code(0), at(3), &mut out);
    pass_at(&mut c, &mut out, at(3));
    assert!(queued(&c).contains(&waits[1]), "its job started");

    // `?`: the first dependency met lets it go; all failing, never.
    c.job_ended(7, ids[1], Exit::Code(0), at(4), &mut out);
    let ends = c
        .submit(vec![spec(1), spec(1), spec(1)], 0, at(4), &mut out)
        .unwrap();
    pass_at(&mut c, &mut out, at(4));
    assert!(ends.iter().all(|e| c.jobs[e].state == JobState::Running));
    let any_of = |ok: &[u64]| JobSpec {
        after_ok: ok.to_vec(),
        any_dep: true,
        ..after(&[], None)
    };
    let either = c
        .submit(
            vec![any_of(&[ends[0], ends[1]]), any_of(&[ends[0], ends[2]])],
            0,
            at(4),
            &mut out,
        )
        .unwrap();
    for (job, exit) in [(ends[0], 3), (ends[2], 1)] {
        c.job_ended(7, job, Exit::Code(exit), at(5), &mut out);
    }
    let q = queued(&c);
    assert!(!q.contains(&either[0]), "one failed, one still to come");
    assert_eq!(
        c.jobs_info(&[either[1]])[0].reason,
        "DependencyNeverSatisfied"
    );
    c.job_ended(7, ends[1], Exit::Code(0), at(6), &mut out);
    assert!(queued(&c).contains(&either[0]));
    // Submitted after one of them is over and met: at once.
    let late = c
        .submit(vec![any_of(&[ends[2], ends[1]])], 0, at(7), &mut out)
        .unwrap()[0];
    assert!(queued(&c).contains(&late));
}

#[test]
fn a_job_named_by_two_kinds_joined_by_a_question_mark_meets_either() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let ids = c
        .submit(vec![spec(16), spec(16)], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    // `afterok:A?afternotok:A`: however A ends, one of them is met.
    let either_end = JobSpec {
        after_ok: vec![ids[0]],
        after_not_ok: vec![ids[0]],
        any_dep: true,
        ..after(&[], None)
    };
    // `after:B?afterok:B`: B's start is enough.
    let start_or_ok = JobSpec {
        after_start: vec![ids[1]],
        after_ok: vec![ids[1]],
        any_dep: true,
        ..after(&[], None)
    };
    let waits = c
        .submit(vec![either_end, start_or_ok], 0, at(1), &mut out)
        .unwrap();
    c.job_ended(7, ids[0], Exit::Code(3), at(2), &mut out);
    pass_at(&mut c, &mut out, at(2));
    let q = queued(&c);
    assert!(q.contains(&waits[0]), "A failed: afternotok met");
    assert_eq!(c.jobs[&ids[1]].state, JobState::Running);
    assert!(q.contains(&waits[1]), "B started: after met");
}

#[test]
fn a_think_time_after_a_start_counts_from_that_start() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![spec(4)], 0, at(0), &mut out).unwrap()[0];
    pass_at(&mut c, &mut out, at(1));
    // Submitted once its dependency has started: 10 s after that start.
    let waits = c
        .submit(
            vec![JobSpec {
                after_start: vec![first],
                ..after(&[], Some(10))
            }],
            0,
            at(5),
            &mut out,
        )
        .unwrap()[0];
    c.release_due(at(10), &mut out);
    assert!(!queued(&c).contains(&waits), "not before 11 s");
    c.release_due(at(11), &mut out);
    assert!(queued(&c).contains(&waits), "at 11 s");
}

#[test]
fn aftercorr_pairs_each_task_with_the_task_of_its_index() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c
        .submit(vec![array_spec("1-2", 1)], 0, at(0), &mut out)
        .unwrap();
    // Tasks 1, 2 and 3: the last has no partner, and waits for every
    // task of the first, as on Slurm 22.05.
    let second = c
        .submit(
            vec![JobSpec {
                after_corr: vec![first[0]],
                exact_deps: true,
                ..array_spec("1-3", 1)
            }],
            0,
            at(0),
            &mut out,
        )
        .unwrap();
    assert_eq!(c.jobs[&second[0]].spec.after_ok, [first[0]]);
    assert_eq!(c.jobs[&second[1]].spec.after_ok, [first[1]]);
    assert_eq!(c.jobs[&second[2]].spec.after_ok, [first[0], first[1]]);
    assert!(!queued(&c).contains(&second[2]));
    pass(&mut c, &mut out);
    c.job_ended(7, first[1], Exit::Code(0), at(2), &mut out);
    let q = queued(&c);
    assert!(q.contains(&second[1]) && !q.contains(&second[0]), "{q:?}");
    assert!(!q.contains(&second[2]), "before the whole array: {q:?}");
    c.job_ended(7, first[0], Exit::Code(2), at(3), &mut out);
    // A task of the first failed: neither its partner nor the task with
    // none may ever start.
    for t in [second[0], second[2]] {
        assert_eq!(c.jobs_info(&[t])[0].reason, "DependencyNeverSatisfied");
    }
}

/// A program's run time is unknown: no end is expected of it, so no pass
/// is prepared for its cores coming free, however long its limit.
#[test]
fn a_running_program_has_no_expected_end() {
    let mut c = cluster();
    let mut out = Recorder::default();
    let program = JobSpec {
        program: Some(batch_script("#!/bin/sh\nsleep 1000\n")),
        walltime_ns: 50 * S as u64,
        ..spec(2)
    };
    let ids = c
        .submit(vec![program, long(spec(2))], 0, at(0), &mut out)
        .unwrap();
    pass(&mut c, &mut out);
    assert!(ids.iter().all(|id| c.jobs[id].state == JobState::Running));
    let next = c.next_events(0).unwrap();
    assert_eq!(next.ending, vec![ids[1]]);
    assert_eq!(
        Some(next.at),
        c.jobs[&ids[1]].started_mono.map(|t| t + 100 * S)
    );
}

/// A program with no time limit is expected to run for a year, as
/// Slurm's backfill takes it: it does not pass ahead of a blocked head
/// as though it ended at once, and a job running with none keeps the
/// head's reservation far enough off that a short job fits before it.
#[test]
fn a_program_without_a_limit_is_planned_as_running_a_year() {
    let program = |cores: u32, limit_s: u64| JobSpec {
        program: Some(batch_script("#!/bin/sh\nsleep 100\n")),
        walltime_ns: limit_s * S as u64,
        ..spec(cores)
    };
    // A limited job runs; the head wants the whole cluster; an unlimited
    // one would hold cores the head needs at its reservation.
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![program(4, 600)], 0, at(0), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(1));
    assert_eq!(c.jobs[&first[0]].state, JobState::Running);
    let ids = c
        .submit(vec![program(16, 60), program(4, 0)], 0, at(1), &mut out)
        .unwrap();
    pass_at(&mut c, &mut out, at(2));
    assert_eq!(c.jobs[&ids[0]].state, JobState::Pending, "the head waits");
    assert_eq!(
        c.jobs[&ids[1]].state,
        JobState::Pending,
        "an unlimited job would delay the head"
    );

    // An unlimited job runs; the head waits for it; a short job ends
    // long before, an unlimited one does not.
    let mut c = cluster();
    let mut out = Recorder::default();
    let first = c.submit(vec![program(4, 0)], 0, at(0), &mut out).unwrap();
    pass_at(&mut c, &mut out, at(1));
    assert_eq!(c.jobs[&first[0]].state, JobState::Running);
    let ids = c
        .submit(
            vec![program(16, 60), program(4, 5), program(4, 0)],
            0,
            at(1),
            &mut out,
        )
        .unwrap();
    pass_at(&mut c, &mut out, at(2));
    let states: Vec<JobState> = ids.iter().map(|id| c.jobs[id].state).collect();
    assert_eq!(
        states,
        [JobState::Pending, JobState::Running, JobState::Pending],
        "the head waits; the 5 s job fits before its reservation; the unlimited one does not"
    );
}

/// A batch job without a limit gets its partition's as it is submitted,
/// as on Slurm: it is planned so while it waits, and its node is told it.
/// A sleep of a trace keeps none.
#[test]
fn a_program_without_a_limit_gets_its_partitions() {
    let mut c = cluster_with("[[partitions]]\nname = \"short\"\nmax_time_s = 60\n");
    let mut out = Recorder::default();
    let program = JobSpec {
        program: Some(batch_script("#!/bin/sh\nsleep 100\n")),
        ..spec(1)
    };
    let ids = c
        .submit(vec![program, long(spec(1))], 0, at(0), &mut out)
        .unwrap();
    assert_eq!(c.jobs[&ids[0]].spec.walltime_ns, 60 * S as u64);
    let view = c.view(at(0));
    let queued = view.queue.iter().find(|q| q.job == ids[0]).unwrap();
    assert_eq!(
        queued.estimate_ns,
        60 * S as u64,
        "planned at its partition's"
    );
    // Slurm's database says `Partition_Limit` until it starts.
    let shown = |c: &Cluster| {
        let info = c.info(&c.jobs[&ids[0]]);
        info.program.as_ref().unwrap().partition_limit
    };
    assert!(shown(&c));
    pass(&mut c, &mut out);
    assert!(!shown(&c), "started: its limit is its own");
    assert_eq!(c.jobs[&ids[0]].spec.walltime_ns, 60 * S as u64);
    assert_eq!(c.jobs[&ids[1]].spec.walltime_ns, 0);
    let told = out.0.iter().find_map(|(_, m)| match m {
        ToAgent::Start(s) if s.job == ids[0] => Some(s.walltime_ns),
        _ => None,
    });
    assert_eq!(told, Some(60 * S as u64));
}

/// The limit a batch job got from its partition is its own after a
/// restart, whatever the partition's is by then, as Slurm's jobs keep
/// theirs; one that got none keeps none.
#[test]
fn a_limit_got_from_the_partition_survives_a_restart_with_another() {
    let program = || JobSpec {
        program: Some(batch_script("#!/bin/sh\nsleep 100\n")),
        ..spec(1)
    };
    let config = |max: u64| {
        Arc::new(
            config::Cluster::from_str(
                &format!(
                    "[[nodes]]\nnames = \"vn[1-4]\"\ncpus = 4\nmemory = \"8G\"\n\
                     [[partitions]]\nname = \"p\"\nmax_time_s = {max}\n"
                ),
                std::path::Path::new("/tmp/t.toml"),
            )
            .unwrap(),
        )
    };
    for (before, after) in [(60, 3600), (0, 3600), (3600, 60)] {
        let mut c = Cluster::new(config(before));
        up(&mut c, 7, "h", "vn[1-4]", &[]).unwrap();
        let mut out = Recorder::default();
        let held = JobSpec {
            hold: true,
            ..program()
        };
        let ids = c.submit(vec![program(), held], 0, at(0), &mut out).unwrap();
        pass(&mut c, &mut out);
        assert_eq!(c.jobs[&ids[0]].state, JobState::Running);
        assert_eq!(c.jobs[&ids[0]].spec.walltime_ns, before * S as u64);
        assert_eq!(c.jobs[&ids[1]].state, JobState::Pending);
        let restarted = Cluster::restore(
            config(after),
            Recovered {
                snapshot: Default::default(),
                entries: out.1.clone(),
            },
            at(20),
        );
        let what = format!("submitted under {before} s, restarted under {after} s");
        assert_eq!(
            restarted.jobs[&ids[0]].spec.walltime_ns,
            before * S as u64,
            "started: {what}"
        );
        // One still waiting takes its partition's as it is now, as
        // Slurm's gets it at its start.
        assert_eq!(
            restarted.jobs[&ids[1]].spec.walltime_ns,
            after * S as u64,
            "waiting: {what}"
        );
    }
}

/// A batch job's partition's limit is its own once it runs (a requeue
/// keeps it), or once one is set for it: sacct no longer says
/// `Partition_Limit` for it.
#[test]
fn a_partition_limit_becomes_the_jobs_own() {
    let mut c = cluster_with("[[partitions]]\nname = \"short\"\nmax_time_s = 60\n");
    let mut out = Recorder::default();
    let program = || JobSpec {
        program: Some(batch_script("#!/bin/sh\nsleep 100\n")),
        ..spec(1)
    };
    let held = JobSpec {
        hold: true,
        ..program()
    };
    let ids = c.submit(vec![program(), held], 0, at(0), &mut out).unwrap();
    let shown = |c: &Cluster, id: u64| {
        let info = c.info(&c.jobs[&id]);
        info.program.as_ref().unwrap().partition_limit
    };
    assert!(shown(&c, ids[0]) && shown(&c, ids[1]));
    pass(&mut c, &mut out);
    assert_eq!(c.requeue(&ids[..1], false, at(2), &mut out)[0].error, None);
    assert!(!shown(&c, ids[0]), "requeued after it ran");
    assert_eq!(c.limit(ids[1], 30 * S as u64, &mut out).error, None);
    assert!(!shown(&c, ids[1]), "a limit set for it");
    assert_eq!(c.jobs[&ids[1]].spec.walltime_ns, 30 * S as u64);
}

/// Named nodes are checked at submission as Slurm checks them: jobs the
/// nodes they may have can never hold are refused, not left waiting.
#[test]
fn named_nodes_that_can_never_hold_a_job_refuse_it() {
    let named = |cores: u32, nodes: Option<(u32, u32)>, cpt: u32, w: &str, x: &str| {
        let mut program = batch_script("#!/bin/sh\ntrue\n");
        program.nodelist = w.into();
        program.exclude = x.into();
        program.cpus_per_task = cpt;
        program.ntasks = cores / cpt;
        JobSpec {
            program: Some(program),
            nodes,
            ..spec(cores)
        }
    };
    let mut c = cluster();
    let mut submit = |s: JobSpec| c.submit(vec![s], 0, at(1), &mut Recorder::default());
    const UNAVAILABLE: &str = "Requested node configuration is not available";
    for (s, want) in [
        // Every node excluded; not enough left for its node count, its
        // cores or its tasks of three cores.
        (named(1, None, 1, "", "vn[1-4]"), "UNAVAILABLE"),
        (named(2, Some((2, 2)), 1, "", "vn[1-3]"), "nodes"),
        (named(13, None, 1, "", "vn1"), "UNAVAILABLE"),
        (named(12, None, 3, "", "vn1"), "tasks"),
        // A node named twice over, unknown, or too small for a task.
        (
            named(1, None, 1, "vn2", "vn2"),
            "Invalid node name specified",
        ),
        (named(1, None, 1, "vn9", ""), "Invalid node name specified"),
        (named(5, None, 5, "vn2", ""), "UNAVAILABLE"),
        // More named than it may span.
        (
            named(2, Some((1, 1)), 1, "vn[1-2]", ""),
            "invalid number of nodes (-N 2-1)",
        ),
    ] {
        let want = if want == "UNAVAILABLE" {
            UNAVAILABLE
        } else {
            want
        };
        let err = submit(s).expect_err(want);
        assert!(err.contains(want), "{err} (wanted {want})");
    }
    assert!(submit(named(8, None, 1, "vn2", "vn1")).is_ok());
}
