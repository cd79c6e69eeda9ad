//! Drives suspensions and resumptions for scripts/bench-signals.sh over one
//! client connection to a running controller whose jobs 1..=JOBS run.
//!
//!   signal_load CONFIG JOBS HELD RATE SECONDS
//!
//! 1. suspends all JOBS jobs in one request, waits 3 s, resumes them all
//!    in one request, waits 3 s;
//! 2. suspends jobs 1..=HELD in one request and waits 3 s;
//! 3. for SECONDS, RATE operations a second at absolute deadlines, each
//!    one request for one job: resume the longest-suspended job and
//!    suspend the longest-running one, alternately (HELD stay suspended);
//! 4. resumes every job still suspended.
//!
//! Prints one JSON object: the wall-clock instants (seconds) at which each
//! phase began, and how late the paced requests were sent.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use client::Session;
use formats::wire::{Request, Response};

fn wall() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

async fn call(s: &mut Session, req: Request) -> Result<()> {
    match s.call(&req).await? {
        Response::Jobs(outcomes) => {
            if let Some(o) = outcomes.iter().find(|o| o.error.is_some()) {
                bail!("job {}: {:?}", o.id, o.error);
            }
            Ok(())
        }
        other => bail!("unexpected answer {other:?}"),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        bail!("usage: signal_load CONFIG JOBS HELD RATE SECONDS");
    }
    let config = controller::config::Cluster::load(Path::new(&args[1]))?;
    let jobs: u64 = args[2].parse().context("JOBS")?;
    let held: u64 = args[3].parse().context("HELD")?;
    let rate: f64 = args[4].parse().context("RATE")?;
    let secs: f64 = args[5].parse().context("SECONDS")?;
    let addr = config.client_address(None);
    let secret = config.client_secret(None)?;
    let mut s = Session::open(&addr, &secret).await?;
    let all: Vec<u64> = (1..=jobs).collect();
    let pause = Duration::from_secs(3);

    let suspend_all = wall();
    call(&mut s, Request::Suspend(all.clone())).await?;
    tokio::time::sleep(pause).await;
    let resume_all = wall();
    call(&mut s, Request::Resume(all)).await?;
    tokio::time::sleep(pause).await;

    let mut suspended: VecDeque<u64> = (1..=held).collect();
    let mut running: VecDeque<u64> = (held + 1..=jobs).collect();
    call(
        &mut s,
        Request::Suspend(suspended.iter().copied().collect()),
    )
    .await?;
    tokio::time::sleep(pause).await;

    let paced = wall();
    let start = Instant::now();
    let ops = (rate * secs) as u64;
    let mut late = Vec::with_capacity(ops as usize);
    for k in 0..ops {
        let due = start + Duration::from_secs_f64(k as f64 / rate);
        tokio::time::sleep_until(due.into()).await;
        late.push(due.elapsed().as_secs_f64());
        if k % 2 == 0 {
            let Some(id) = suspended.pop_front() else {
                break;
            };
            call(&mut s, Request::Resume(vec![id])).await?;
            running.push_back(id);
        } else {
            let Some(id) = running.pop_front() else {
                break;
            };
            call(&mut s, Request::Suspend(vec![id])).await?;
            suspended.push_back(id);
        }
    }
    let paced_end = wall();
    call(&mut s, Request::Resume(suspended.into_iter().collect())).await?;
    late.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        let i = ((late.len() as f64 * p).ceil() as usize).saturating_sub(1);
        late.get(i).copied().unwrap_or(0.0)
    };
    println!(
        "{{\"suspend_all\": {suspend_all:.6}, \"resume_all\": {resume_all:.6}, \"paced\": {paced:.6}, \
         \"paced_end\": {paced_end:.6}, \"ops\": {}, \"send_late_p50\": {:.6}, \"send_late_p99\": {:.6}}}",
        late.len(),
        pct(0.5),
        pct(0.99)
    );
    Ok(())
}
