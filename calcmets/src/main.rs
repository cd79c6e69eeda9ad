use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = calcmets::cli::Cli::parse();
    match calcmets::run(cli) {
        Ok(calcmets::Outcome::Clean) => ExitCode::SUCCESS,
        Ok(calcmets::Outcome::Problems) => ExitCode::from(1),
        Err(e) if calcmets::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("calcmets: error: {e:#}");
            ExitCode::from(2)
        }
    }
}
