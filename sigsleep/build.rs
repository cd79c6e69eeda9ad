use std::hash::Hasher;
use std::path::{Path, PathBuf};

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
    source_id();
}

/// `SIGSLEEP_SOURCE_ID`: a digest of the code sigsleep is built from (its
/// sources, the record formats it writes, this script, the manifests and
/// the lock file), the same for every target. The agent, built with this
/// crate, runs a sigsleep built for another target (musl) only if that
/// one carries the same digest (`sigsleep::SOURCE_ID_MARK`, which the
/// agent finds in its file): a build from other code might speak another
/// language to it.
fn source_id() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = here.parent().expect("sigsleep lives in the workspace");
    let mut files = Vec::new();
    for dir in [here.join("src"), root.join("formats/src")] {
        collect(&dir, &mut files);
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    for f in [
        here.join("Cargo.toml"),
        here.join("build.rs"),
        root.join("formats/Cargo.toml"),
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
    ] {
        println!("cargo:rerun-if-changed={}", f.display());
        files.push(f);
    }
    files.sort();
    // SipHash with fixed keys: the same digest from the same bytes in any
    // build. It tells builds apart; it guards against nothing.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        h.write(rel.to_string_lossy().as_bytes());
        h.write(&std::fs::read(f).unwrap_or_default());
    }
    println!("cargo:rustc-env=SIGSLEEP_SOURCE_ID={:016x}", h.finish());
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        // Sources only: an editor's swap file is no change of code.
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
