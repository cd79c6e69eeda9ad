//! The clemu side of scripts/bench-throughput.sh: submits JOBS zero-length
//! one-core jobs in one request to a running controller, then asks for its
//! counters every 20 ms over the same connection until every job has ended
//! (started as a sigsleep, reaped, its record written). Prints jobs per
//! second from the submission to the last end.
//!
//!   submit_wait CONFIG JOBS

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use client::Session;
use formats::wire::{JobSpec, Request, Response};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        bail!("usage: submit_wait CONFIG JOBS");
    }
    let config = controller::config::Cluster::load(Path::new(&args[1]))?;
    let jobs: u64 = args[2].parse().context("JOBS")?;
    let addr = config.client_address(None);
    let secret = config.client_secret(None)?;
    let mut s = Session::open(&addr, &secret).await?;
    let spec = JobSpec {
        cores: 1,
        runtime_ns: 0,
        walltime_ns: 0,
        ..Default::default()
    };
    let start = Instant::now();
    match s
        .call(&Request::Submit {
            specs: vec![spec; jobs as usize],
            key: formats::wire::submit_key(),
        })
        .await?
    {
        Response::Submitted(ids) if ids.len() as u64 == jobs => {}
        other => bail!("submission refused: {other:?}"),
    }
    loop {
        match s.call(&Request::Stats).await? {
            Response::Stats(st) if st.ended >= jobs => break,
            Response::Stats(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            other => bail!("unexpected answer {other:?}"),
        }
    }
    println!("{:.1}", jobs as f64 / start.elapsed().as_secs_f64());
    Ok(())
}
