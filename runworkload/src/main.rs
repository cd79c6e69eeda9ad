use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

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
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colours only for a person: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .init();
    let (mut plan, warnings) = match cli::plan(&cli) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("runworkload: {e:#}");
            return ExitCode::from(2);
        }
    };
    plan.progress = plan.progress && std::io::stderr().is_terminal();
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
        let token = stop.clone();
        let simulated = plan.backend.virtual_time();
        tokio::spawn(async move {
            if simulated && tokio::signal::ctrl_c().await.is_ok() {
                // The twin runs no process and never waits: nothing to
                // cancel or keep, and no point at which it would look.
                eprintln!("\nrunworkload: interrupted");
                std::process::exit(1);
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "\nrunworkload: interrupted; cancelling jobs, keeping finished records \
                     (Ctrl-C again to quit at once)"
                );
                token.cancel();
            }
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("runworkload: quitting without cleaning up");
                std::process::exit(1);
            }
        });
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
                if problem || results.iter().any(|r| r.interrupted) {
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
