//! How late the server's timed wake-up comes, with the timerfd alone and
//! with the stretch awake before each instant that the server uses
//! (`controller::server::timer`): rounds of wake-ups at 1.3 to 2.2 ms
//! from one another, the two kinds taking turns, on an otherwise idle
//! runtime. Prints, per round, how late each came (p50, p90, p99).
//!
//!     cargo run --release -p controller --example timer_wakeup [ROUNDS] [WAKEUPS]
//!
//! (defaults 3 and 400). On a machine whose idle processors wake slowly,
//! the timerfd alone is late by that wake-up; awake, by a few µs.

use std::time::Duration;

use controller::server::timer::Precise;
use tokio::time::Instant;

fn percentiles(mut late: Vec<Duration>) -> String {
    late.sort();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    format!(
        "p50 {:6.1} µs, p90 {:6.1} µs, p99 {:6.1} µs",
        at(0.5),
        at(0.9),
        at(0.99)
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let arg = |i: usize, default: usize| -> usize {
        match std::env::args().nth(i) {
            None => default,
            Some(a) => a.parse().unwrap_or_else(|_| {
                eprintln!("timer_wakeup: {a:?} is not a count");
                std::process::exit(2)
            }),
        }
    };
    let (rounds, wakeups) = (arg(1, 3), arg(2, 400).max(1));
    let alone = Precise::with_early(Duration::ZERO);
    let awake = Precise::new();
    for round in 1..=rounds {
        let (mut late_alone, mut late_awake) = (Vec::new(), Vec::new());
        for i in 0..wakeups {
            // Spread over a millisecond, so that no phase of the host's
            // tick is favoured.
            let gap = Duration::from_micros(1_300 + (i as u64 * 37) % 900);
            for (timer, late) in [(&alone, &mut late_alone), (&awake, &mut late_awake)] {
                let at = Instant::now() + gap;
                timer.sleep_until(at).await;
                late.push(Instant::now() - at);
            }
        }
        println!(
            "round {round}: timerfd alone late {}; awake for the last stretch late {}",
            percentiles(late_alone),
            percentiles(late_awake)
        );
    }
}
