//! `readygap report`: the statistics of recordings (.jsonl) and of the study's CSV files.

use color_eyre::eyre::Result;
use readygap_core::report::{self, Format, Report};
use std::io::Write;
use std::path::PathBuf;

/// `readygap report FILES…`: the warnings (inconsistent data, torn lines) on stderr when
/// `warnings`.
pub fn report(files: &[PathBuf], format: Format, warnings: bool) -> Result<i32> {
    let mut files_out = Vec::new();
    for path in report::expand_paths(files)? {
        let r = report::report_file(&path)?;
        if warnings {
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
        }
        files_out.push(r);
    }
    let text = report::render(&Report { files: files_out }, format)?;
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(0)
}
