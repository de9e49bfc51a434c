//! Any bytes as a recording: the reader never panics, every error names the file and a line
//! that exists, and whatever it accepts replays through the reducer without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap_core::record::index::ReplayIndex;
use readygap_core::record::jsonl::{ReadError, read_from};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.jsonl");
    match read_from(path, data) {
        Ok(rec) => {
            let n = rec.events.len();
            let index = ReplayIndex::new(rec.events);
            let _ = index.state_after(n);
        }
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz.jsonl"), "{e}");
            if let ReadError::Malformed { line, .. } = e {
                let lines = data.split(|b| *b == b'\n').count();
                assert!(line >= 1 && line <= lines, "line {line} of {lines}");
            }
        }
    }
});
