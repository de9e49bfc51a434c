//! `readygap export`: the trials of a recording (or CSV) in the study's CSV column order.

use color_eyre::eyre::{Result, WrapErr};
use readygap_core::record::labcsv;
use readygap_core::report;
use std::path::PathBuf;

/// The command-line arguments of `readygap export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    pub file: PathBuf,
    /// The CSV to write (`-` for stdout).
    #[arg(long)]
    pub csv: PathBuf,
}

/// `readygap export FILE --csv OUT` (`-` for stdout).
pub fn export(args: &ExportArgs) -> Result<i32> {
    let csv = &args.csv;
    let loaded = report::load_trials(&args.file)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    if csv.as_os_str() == "-" {
        labcsv::export(&loaded.trials, std::io::stdout().lock())?;
    } else {
        let out =
            std::fs::File::create(csv).wrap_err_with(|| format!("creating {}", csv.display()))?;
        labcsv::export(&loaded.trials, out)
            .wrap_err_with(|| format!("writing {}", csv.display()))?;
    }
    Ok(0)
}
