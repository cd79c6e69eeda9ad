//! Reads a trace's text as `calcmets --swf` does (inflating it if it is
//! gzip-compressed) and parses nothing: the floor under calcmets's time on
//! a compressed trace, since one gzip stream inflates on one core only.
//! `scripts/bench-calcmets.sh` times it beside calcmets.

use formats::swf::Chunks;

fn main() -> std::io::Result<()> {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: swf_inflate TRACE");
        std::process::exit(2);
    };
    let mut chunks = Chunks::open(path.as_ref())?;
    let mut buf = Vec::new();
    let mut bytes = 0;
    while chunks.next_into(&mut buf)?.is_some() {
        bytes += buf.len();
    }
    println!("{bytes}");
    Ok(())
}
