//! Writes a generated recording of N events (default 1,000,000): a trial every 30 s with
//! memory, residency and probe samples at 4 Hz. For benchmarks and replay tests:
//! `cargo run --release --example generate_session -- OUT.jsonl [N]`.

use readygap_core::record::jsonl::{Header, Recorder};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "session.jsonl".into());
    let n: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let events = readygap_core::fixtures::session(n);
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
