fn main() {
    // A position-dependent executable needs no start-up relocations of its
    // own data, so those pages stay shared with every other copy instead of
    // being written (and made private) in each of thousands of processes.
    // A static build (crt-static, as .cargo/config.toml asks) is a
    // static-pie that relocates itself cheaply; -no-pie would break it.
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if !features.split(',').any(|f| f == "crt-static") {
        println!("cargo:rustc-link-arg-bin=sigsleep=-no-pie");
    }
}
