fn main() {
    // A position-dependent executable needs no start-up relocations of its
    // own data, so those pages stay shared with every other copy instead of
    // being written (and made private) in each of thousands of processes.
    // The static build of .cargo/config.toml is position-dependent already
    // (`relocation-model=static`); a dynamic build (that file removed) is
    // made so here.
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if !features.split(',').any(|f| f == "crt-static") {
        println!("cargo:rustc-link-arg-bin=sigsleep=-no-pie");
    }
}
