//! A job may be a batch script: the agent writes it and runs it (through
//! sigsleep) on the job's node, in its directory, with Slurm's variables,
//! its output where Slurm's patterns say, and the job ends as the script
//! did.

#![allow(clippy::unwrap_used)] // tests: a failure should panic

mod common;
use common::*;

use formats::wire::{submit_key, ArraySpec, JobSpec, Program, Request, Response};

fn spec(script: &str, workdir: &std::path::Path, stdout: &str) -> JobSpec {
    JobSpec {
        cores: 2,
        mem_per_cpu_mb: 100,
        runtime_ns: 0,
        walltime_ns: 60_000_000_000,
        name: Some("fit".into()),
        program: Some(Box::new(Program {
            script: script.into(),
            workdir: workdir.display().to_string(),
            env: vec![("FROM_SUBMITTER".into(), "yes".into())],
            stdout: stdout.into(),
            stderr: String::new(),
            user: "ana".into(),
            signal: None,
            ntasks: 1,
            cpus_per_task: 2,
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
        })),
        ..Default::default()
    }
}

async fn submit(c: &Cluster, specs: Vec<JobSpec>) -> Vec<u64> {
    let secret = client::read_secret(&c.secret_path()).unwrap();
    let mut s = client::Session::open(&c.address(), &secret).await.unwrap();
    match s
        .call(&Request::Submit {
            specs,
            key: submit_key(),
        })
        .await
        .unwrap()
    {
        Response::Submitted(ids) => ids,
        other => panic!("submit: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_script_runs_with_slurms_variables_and_its_exit_decides_its_state() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let work = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\n\
        echo \"$SLURM_JOB_ID $SLURM_JOB_NAME $SLURM_JOB_NODELIST $SLURM_CPUS_ON_NODE \
        $SLURM_JOB_PARTITION $FROM_SUBMITTER $(pwd)\"\n\
        exit 3\n";
    let ids = submit(&c, vec![spec(script, work.path(), "")]).await;
    let id = ids[0];
    c.wait_state(id, "failed");
    let out = std::fs::read_to_string(work.path().join(format!("slurm-{id}.out"))).unwrap();
    let node = c.job(id)["nodes"].as_str().unwrap().to_string();
    assert_eq!(
        out.trim(),
        format!(
            "{id} fit {node} 2 {} yes {}",
            c.job(id)["partition"].as_str().unwrap(),
            work.path().display()
        )
    );
    assert_eq!(c.job(id)["reason"], "exit code 3");
    // The record says how the program ended.
    let rec = c.record(id);
    assert_eq!(rec.program.unwrap().exit_code(), "3:0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_tasks_write_where_the_pattern_says_and_complete() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let work = tempfile::tempdir().unwrap();
    let mut s = spec(
        "#!/bin/sh\necho task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID\n",
        work.path(),
        "out/%x-%A_%a.txt",
    );
    std::fs::create_dir(work.path().join("out")).unwrap();
    s.array = Some(ArraySpec {
        indices: vec![1, 2, 3],
        limit: 0,
    });
    let ids = submit(&c, vec![s]).await;
    assert_eq!(ids.len(), 3);
    for &id in &ids {
        c.wait_state(id, "completed");
    }
    let first = ids[0];
    for (i, _) in ids.iter().enumerate() {
        let index = i + 1;
        let path = work.path().join(format!("out/fit-{first}_{index}.txt"));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, format!("task {index} of {first}\n"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_script_leaves_no_process() {
    let c = Cluster::start("vn[1-2]", 4, "");
    let work = tempfile::tempdir().unwrap();
    let pids = work.path().join("pids");
    let script = format!(
        "#!/bin/sh\n(trap '' TERM; echo $$ > /dev/null; sleep 300) &\necho $! >> {p}\n\
         setsid sh -c 'echo $$ >> {p}; exec sleep 300' &\nsleep 300\n",
        p = pids.display()
    );
    let id = submit(&c, vec![spec(&script, work.path(), "")]).await[0];
    c.wait_for("the script's two children", || {
        std::fs::read_to_string(&pids)
            .unwrap_or_default()
            .lines()
            .count()
            >= 2
    });
    c.ok(&["cancel", &id.to_string()]);
    c.wait_state(id, "cancelled");
    for pid in std::fs::read_to_string(&pids).unwrap().lines() {
        let pid: i32 = pid.parse().unwrap();
        assert!(
            proc_state(pid).is_none_or(|s| s == 'Z'),
            "process {pid} of the job is left"
        );
    }
}

/// An agent that hears nothing from its controller for its fence time
/// kills its jobs at once: a script's process that left the job's
/// process group (`setsid`) goes too, though the SIGKILL to the group
/// takes sigsleep, its subreaper, first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_its_agent_fences_leaves_no_process() {
    let c = Cluster::start_restartable("rn[1-2]", 4, false, "", 4_000);
    let mut a = spawn_agent(&c, "rn[1-2]", "h1");
    c.wait_nodes_up();
    let work = tempfile::tempdir().unwrap();
    let pids = work.path().join("pids");
    let script = format!(
        "#!/bin/sh\nsetsid sh -c 'echo $$ >> {p}; exec sleep 300' &\nsleep 300\n",
        p = pids.display()
    );
    submit(&c, vec![spec(&script, work.path(), "")]).await;
    let read = || std::fs::read_to_string(&pids).unwrap_or_default();
    c.wait_for("the script's child", || !read().is_empty());
    let pid: i32 = read().trim().parse().unwrap();
    let controller = c.serve.id() as i32;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(controller, libc::SIGSTOP) };
    c.wait_for("the fence to reach the child", || {
        proc_state(pid).is_none_or(|s| s == 'Z')
    });
    // SAFETY: as above.
    unsafe { libc::kill(controller, libc::SIGCONT) };
    c.ok(&["shutdown"]);
    a.wait().unwrap();
}
