//! Writes a generated recording of N events (default 1,000,000): a trial every 30 s with
//! memory, residency and probe samples at 4 Hz; or, with `--repeat FILE`, the events of the
//! recording FILE repeated end to end with shifted times (one long monotonic session). For
//! benchmarks and replay tests:
//! `cargo run --release --example generate_session -- OUT.jsonl [N] [--repeat FILE]`.

use readygap_core::record::jsonl::{self, Header, Recorder};

fn main() -> std::io::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let repeat = args.iter().position(|a| a == "--repeat").map(|i| {
        let file = args.get(i + 1).cloned().unwrap_or_default();
        args.drain(i..(i + 2).min(args.len()));
        file
    });
    let mut args = args.into_iter();
    let out = args.next().unwrap_or_else(|| "session.jsonl".into());
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let events = match &repeat {
        None => readygap_core::fixtures::session(n),
        Some(file) => {
            let mut recorded = Vec::new();
            jsonl::for_each(std::path::Path::new(file), |e| recorded.push(e))
                .map_err(|e| std::io::Error::other(format!("{file}: {e}")))?;
            readygap_core::fixtures::repeated(&recorded, n)
        }
    };
    let mut rec = Recorder::create(
        std::path::Path::new(&out),
        &Header::new(
            readygap_core::fixtures::at(0),
            "generated",
            "llm-recovery-lab",
            "deployment/ollama",
        ),
    )?;
    for e in &events {
        rec.write(e)?;
    }
    eprintln!("wrote {} events to {out}", events.len());
    Ok(())
}
