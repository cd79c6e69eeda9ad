use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match formats::usage::parse::<calcmets::cli::Cli>("calcmets") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
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
