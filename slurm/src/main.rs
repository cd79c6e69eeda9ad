fn main() -> std::process::ExitCode {
    slurm::main_of(std::env::args().collect())
}
