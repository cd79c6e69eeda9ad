use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use runworkload::cli::{self, Cli};
use tokio_util::sync::CancellationToken;

/// The embedded cluster's jobs need the sigsleep binary. `cargo run -p
/// runworkload` builds only runworkload; when that is how this program was
/// started and sigsleep is not built yet, build it the same way.
fn ensure_sigsleep(path: &std::path::Path) -> Result<Option<std::path::PathBuf>, String> {
    if path.is_file() {
        return Ok(None);
    }
    let (Some(cargo), Ok(exe)) = (std::env::var_os("CARGO"), std::env::current_exe()) else {
        return Err(format!(
            "sigsleep not found at {}: build it (cargo build --release) or set [agents] sigsleep",
            path.display()
        ));
    };
    let release = exe.components().any(|c| c.as_os_str() == "release");
    eprintln!("runworkload: building sigsleep, which the jobs run (once)");
    let mut cmd = std::process::Command::new(cargo);
    cmd.args(["build", "-q", "-p", "sigsleep"]);
    if release {
        cmd.arg("--release");
    }
    let built = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    let beside = exe.with_file_name("sigsleep");
    if built.success() && beside.is_file() {
        Ok(Some(beside))
    } else {
        Err(format!(
            "sigsleep not found at {} and could not be built",
            path.display()
        ))
    }
}

/// The signals that stop a replay as Ctrl-C does: a terminal's, a batch
/// system's or `timeout`'s, and a closed terminal's.
const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Turns the first stop signal into `stop` (the run at hand is cancelled,
/// kept and marked `interrupted`), noting which in `stopped_by`; a second
/// one quits at once.
fn watch_signals(stop: CancellationToken, stopped_by: Arc<AtomicI32>) -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut streams = Vec::new();
    for s in STOP_SIGNALS {
        streams.push((s, signal(SignalKind::from_raw(s))?));
    }
    tokio::spawn(async move {
        let first = next_signal(&mut streams).await;
        stopped_by.store(first, Ordering::Relaxed);
        eprintln!(
            "\nrunworkload: {}: stopping; cancelling the run's unfinished jobs and keeping what \
             completed ({} again to quit at once)",
            signal_name(first),
            signal_name(first)
        );
        stop.cancel();
        let second = next_signal(&mut streams).await;
        eprintln!(
            "runworkload: {}: quitting without cleaning up",
            signal_name(second)
        );
        std::process::exit(128 + second);
    });
    Ok(())
}

/// The next of `streams`' signals to come.
async fn next_signal(streams: &mut [(i32, tokio::signal::unix::Signal)]) -> i32 {
    let waits = streams.iter_mut().map(|(s, stream)| {
        let s = *s;
        Box::pin(async move {
            stream.recv().await;
            s
        })
    });
    futures_util::future::select_all(waits).await.0
}

/// Warnings as runworkload's other lines say things (`runworkload:
/// warning: ...`), with no instant or module: what a user reads. `-v`
/// keeps tracing's own lines, with their instants, to follow a run by.
struct OneLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for OneLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            tracing::Level::ERROR => "error",
            tracing::Level::WARN => "warning",
            tracing::Level::INFO => "note",
            _ => "debug",
        };
        write!(writer, "runworkload: {level}: ")?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

fn main() -> ExitCode {
    let cli = match formats::usage::parse::<Cli>("runworkload") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let log = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter);
    if cli.verbose == 0 {
        log.event_format(OneLine).init();
    } else {
        log.init();
    }
    let (mut plan, warnings) = match cli::plan(&cli) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("runworkload: {e:#}");
            return ExitCode::from(2);
        }
    };
    if plan.progress != runworkload::progress::Mode::Off && std::io::stderr().is_terminal() {
        plan.progress = runworkload::progress::Mode::Bar;
    }
    if plan.backend.runs_sigsleep_here() {
        match ensure_sigsleep(&plan.config.agent.sigsleep) {
            Ok(Some(built)) => plan.config.agent.sigsleep = built,
            Ok(None) => {}
            Err(e) => {
                eprintln!("runworkload: {e}");
                return ExitCode::from(2);
            }
        }
    }
    for w in warnings.iter().take(20) {
        eprintln!("runworkload: warning: {w}");
    }
    if warnings.len() > 20 {
        eprintln!("runworkload: warning: ... and {} more", warnings.len() - 20);
    }
    let s = &plan.slice;
    eprintln!(
        "runworkload: {} jobs to replay from {} ({} read, {} too large for the cluster, {} with unknown run time or size)",
        s.jobs.len(),
        plan.workload.display(),
        s.read,
        s.too_large,
        s.unknown
    );
    // A cluster of another size than the trace's machine offers another
    // load: what was 100 % busy there is less (or more) here.
    let cluster_cores = plan.config.total_cores();
    if let Some(procs) = s.max_procs.filter(|&p| p > 0) {
        let traced = procs.saturating_mul(u64::from(plan.cores_per_proc));
        if traced != cluster_cores && cluster_cores > 0 {
            eprintln!(
                "runworkload: note: the trace's machine had {procs} processors ({traced} cores \
                 at {} per processor), the cluster {cluster_cores} cores: its jobs offer {:.0} % \
                 of the load they offered there (--cores-per-proc, or a cluster of {traced} \
                 cores, keeps it)",
                plan.cores_per_proc,
                traced as f64 / cluster_cores as f64 * 100.0
            );
        }
    }
    // What becomes of the jobs the trace did not complete: its own metrics
    // leave them out, so a user comparing with it must know.
    if s.trace_failed > 0 {
        eprintln!(
            "runworkload: {} jobs the trace saw fail (status 0) {}",
            s.trace_failed,
            match plan.failed {
                runworkload::trace::Failed::Run => {
                    "run for their run time as if they completed (--failed skip leaves them out)"
                }
                runworkload::trace::Failed::Skip => "are left out (--failed skip)",
            }
        );
    }
    if s.trace_cancelled > 0 {
        eprintln!(
            "runworkload: {} jobs the trace cancelled (status 5) {}",
            s.trace_cancelled,
            match plan.cancelled {
                runworkload::trace::Cancelled::Replay => {
                    "are cancelled at the trace's delay after their submission (--cancelled)"
                }
                runworkload::trace::Cancelled::Skip => "are left out (--cancelled skip)",
                runworkload::trace::Cancelled::Run => {
                    "run for their run time as if they completed (--cancelled run)"
                }
            }
        );
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runworkload: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(async {
        let stop = CancellationToken::new();
        // The signal that stopped the replay, if one did: its exit code is
        // that signal's.
        let stopped_by = Arc::new(AtomicI32::new(0));
        match watch_signals(stop.clone(), stopped_by.clone()) {
            Ok(()) => {}
            Err(e) => {
                eprintln!("runworkload: cannot watch for signals: {e}");
                return ExitCode::from(2);
            }
        }
        match runworkload::replay(&plan, &stop).await {
            Ok(results) => {
                for r in &results {
                    eprintln!("runworkload: {} -> {}", r.label, r.dir.display());
                }
                println!();
                // The runs are done and kept whatever follows; output asked
                // for that cannot be made is still a problem (exit 1).
                let mut problem = false;
                if let Err(e) = runworkload::compare(&results, &mut std::io::stdout().lock()) {
                    eprintln!("runworkload: {e}");
                    problem = true;
                }
                let dirs: Vec<PathBuf> = results.iter().map(|r| r.dir.clone()).collect();
                let charts = cli.out.join("plots");
                if cli.plot {
                    let args = calcmets::plot::PlotArgs {
                        out: charts.clone(),
                        inputs: dirs,
                        cores: None,
                        tau_ns: None,
                        window: None,
                        nodes: None,
                        clock: None,
                    };
                    match calcmets::plot::plot(&args) {
                        Ok(files) => {
                            eprintln!(
                                "runworkload: {} charts in {}",
                                files.len(),
                                charts.display()
                            );
                        }
                        Err(e) => {
                            eprintln!("runworkload: cannot draw the charts: {e:#}");
                            problem = true;
                        }
                    }
                } else {
                    eprintln!(
                        "runworkload: charts: calcmets plot --out {} {}",
                        charts.display(),
                        cli.out.display()
                    );
                }
                let signal = stopped_by.load(Ordering::Relaxed);
                if let Some(r) = results.iter().find(|r| r.interrupted) {
                    eprintln!(
                        "runworkload: {} stopped {} at {:.0} % of its jobs: kept its records, \
                         jobs.csv and the metrics of the {} completed jobs with a run time in {} \
                         (status interrupted; its unfinished jobs were cancelled)",
                        signal_name(signal),
                        r.label,
                        100.0 * r.summary.jobs as f64 / (plan.slice.jobs.len().max(1)) as f64,
                        r.summary.jobs,
                        r.dir.display()
                    );
                    // 128 + the signal, as a shell reports a process the
                    // signal ended.
                    ExitCode::from((128 + signal.clamp(1, 127)) as u8)
                } else if problem {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
            Err(e) => {
                eprintln!("runworkload: {e:#}");
                ExitCode::from(2)
            }
        }
    })
}
