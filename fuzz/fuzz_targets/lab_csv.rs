//! Any text as a study CSV: no panic, errors name the file (and the line where one applies),
//! and what is accepted computes statistics without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap_core::record::labcsv::{CsvError, import_str};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match import_str(Path::new("fuzz.csv"), &text) {
        Ok(csv) => {
            let _ = format!("{csv:?}");
        }
        Err(e) => {
            assert!(e.to_string().starts_with("fuzz.csv"), "{e}");
            if let CsvError::Malformed { line, .. } = e {
                assert!(
                    line >= 1 && line <= text.lines().count() + 1,
                    "line {line}"
                );
            }
        }
    }
});
