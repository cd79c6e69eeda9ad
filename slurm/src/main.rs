fn main() -> std::process::ExitCode {
    // As Slurm's C commands: a reader that goes away (`squeue | head`)
    // ends the command quietly, where Rust's ignored SIGPIPE would make
    // every later print panic.
    // SAFETY: restoring a signal's default action before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    slurm::main_of(std::env::args().collect())
}
