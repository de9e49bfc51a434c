//! Bad input loses nothing and is named: properties of the recording reader and the study-CSV
//! import on damaged copies of real files (the shipped recordings, the published CSVs).
//! The coverage-guided side of the same claims is `fuzz/` (cargo-fuzz).

use proptest::prelude::*;
use readygap_core::record::jsonl::{ReadError, read, read_from};
use readygap_core::record::labcsv::{CsvError, import_str};
use std::path::{Path, PathBuf};

fn shipped(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../recordings")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Complete lines (ending in `\n`) of `bytes`, header included.
fn complete_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any bytes: no panic, and an error names the file and a line that exists.
    #[test]
    fn any_bytes_are_read_or_refused_with_file_and_line(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
        match read_from(Path::new("bad.jsonl"), &data[..]) {
            Ok(_) => {}
            Err(e) => {
                prop_assert!(e.to_string().starts_with("bad.jsonl:"), "{}", e);
                if let ReadError::Malformed { line, .. } = e {
                    prop_assert!(line >= 1 && line <= complete_lines(&data) + 1);
                }
            }
        }
    }

    /// One damaged line in the middle of a recording is refused with its own line number.
    #[test]
    fn a_damaged_line_is_named_by_its_number(pick in 1usize..10_000, junk in "[^\n]{1,40}") {
        let full = String::from_utf8(shipped("warm-3b-series.jsonl")).unwrap();
        let mut lines: Vec<&str> = full.lines().collect();
        let k = 1 + pick % (lines.len() - 1);
        let bad = format!("{{\"ts\": {junk}");
        lines[k] = &bad;
        let text = lines.join("\n") + "\n";
        match read_from(Path::new("damaged.jsonl"), text.as_bytes()) {
            Err(ReadError::Malformed { line, message, .. }) => prop_assert_eq!(line, k + 1, "{}", message),
            other => prop_assert!(false, "line {} damaged, got {:?}", k + 1, other.map(|r| r.events.len())),
        }
    }

    /// A published CSV with one cell of a recovery row replaced by junk: refused with the row's
    /// line and the column, never read as a number.
    #[test]
    fn a_damaged_study_csv_cell_names_line_and_column(row in 0usize..1000, col in 2usize..7, junk in "[a-z]{1,8}") {
        let path = lab_csv();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let header: Vec<&str> = lines[0].split(',').collect();
        let column = header[col].to_string();
        let k = 1 + row % (lines.len() - 1);
        let mut cells: Vec<String> = lines[k].split(',').map(String::from).collect();
        cells[col] = junk;
        lines[k] = cells.join(",");
        match import_str(&path, &(lines.join("\n") + "\n")) {
            Err(CsvError::Malformed { line, message, .. }) => {
                prop_assert_eq!(line, k + 1);
                prop_assert!(message.contains(&column), "{} does not name {}", message, column);
            }
            other => prop_assert!(false, "got {:?}", other.map(|c| c.trials.len())),
        }
    }
}

/// The published recovery CSV these properties damage (`data/published` in the repository).
fn lab_csv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/published/results/cloud-gpu/ollama/llama3.2-3b/recovery/gpu-recovery.csv")
}

/// A recording cut at any byte (a writer killed, a full disk) keeps every complete line: the
/// events before the cut are all read back, a torn last line is one warning, and only a cut
/// inside the header refuses the file (at line 1). Every offset of the header and the first
/// lines is tried, then offsets spread over the whole file.
#[test]
fn a_recording_cut_anywhere_keeps_every_complete_line() {
    let full = shipped("overlap-oom.jsonl");
    let header_end = full.iter().position(|b| *b == b'\n').unwrap() + 1;
    let offsets = (0..header_end + 2000)
        .chain((header_end + 2000..=full.len()).step_by(97))
        .chain([full.len()]);
    let mut tried = 0;
    for at in offsets {
        let part = &full[..at];
        match read_from(Path::new("cut.jsonl"), part) {
            Ok(rec) => {
                // The header line may be whole without its newline.
                assert!(
                    at + 1 >= header_end,
                    "a cut header was accepted at byte {at}"
                );
                // A cut just before a newline leaves a whole last line: it is read.
                let whole_last = at > header_end && !part.ends_with(b"\n") && full[at] == b'\n';
                let lines = complete_lines(part).saturating_sub(1) + usize::from(whole_last);
                let torn = !part.ends_with(b"\n") && at > header_end && !whole_last;
                assert_eq!(rec.events.len(), lines, "cut at byte {at}");
                assert_eq!(
                    rec.warnings.len(),
                    usize::from(torn),
                    "cut at byte {at}: {:?}",
                    rec.warnings
                );
            }
            Err(ReadError::Malformed { line, .. }) => {
                assert!(at < header_end, "cut at byte {at} refused after the header");
                assert_eq!(line, 1);
            }
            Err(e) => panic!("{e}"),
        }
        tried += 1;
    }
    assert!(tried > 2000);
}

#[test]
fn a_recording_that_is_a_directory_or_missing_names_the_path() {
    let missing = Path::new("/nonexistent/readygap.jsonl");
    let e = read(missing).unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/readygap.jsonl:"), "{e}");
}
