//! Every file in `src/policy/` is a scheduling policy that a config can
//! name: this writes the module declarations and the list of their
//! `ENTRY` constants, which `src/policy.rs` includes. Adding a policy is
//! adding one file.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/policy");
    // A directory is watched whole: a new file reruns this.
    println!("cargo:rerun-if-changed={}", dir.display());
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => panic!("cannot list {}: {e}", dir.display()),
    };
    let mut modules: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let module = name.strip_suffix(".rs")?;
            let plain = !module.is_empty()
                && module
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && !module.starts_with(|c: char| c.is_ascii_digit());
            plain.then(|| module.to_string())
        })
        .collect();
    modules.sort();
    let mut out = String::from("// Written by build.rs from the files in src/policy/.\n");
    for m in &modules {
        let path = dir.join(format!("{m}.rs"));
        writeln!(out, "#[path = {:?}]\nmod {m};", path.display().to_string()).ok();
    }
    out.push_str("\n/// The policies of `src/policy/`, one file each.\npub const FROM_FILES: &[&Entry] = &[\n");
    for m in &modules {
        writeln!(out, "    &{m}::ENTRY,").ok();
    }
    out.push_str("];\n");
    let target =
        Path::new(&std::env::var("OUT_DIR").unwrap_or_else(|_| ".".into())).join("policies.rs");
    if let Err(e) = std::fs::write(&target, out) {
        panic!("cannot write {}: {e}", target.display());
    }
}
