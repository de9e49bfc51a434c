//! `readygap report`: the statistics of recordings (.jsonl) and of the study's CSV files, as
//! text or drawn (HTML page, SVG bars), on stdout or into `-o FILE`.

use color_eyre::eyre::{Result, WrapErr};
use readygap_core::report::{self, Format, Report};
use std::io::Write;
use std::path::PathBuf;

/// The command-line arguments of `readygap report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Recordings, CSV files, or directories holding them.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, default_value = "table", value_parser = crate::args::one_of(&Format::NAMES))]
    pub format: Format,
    /// Print the warnings (inconsistent data, torn lines) on stderr.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub warnings: bool,
    /// Write the report to this file instead of stdout (`--format html -o OUT.html`: one
    /// self-contained page; with `--format markdown` the bars go to OUT.svg beside it,
    /// linked as an image).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// `readygap report FILES…`: the warnings (inconsistent data, torn lines) on stderr when
/// `--warnings`; the report into `--output` when given (Markdown then links the bars,
/// written as SVG next to it).
pub fn report(args: &ReportArgs) -> Result<i32> {
    let mut files_out = Vec::new();
    for path in report::expand_paths(&args.files)? {
        let r = report::report_file(&path)?;
        if args.warnings {
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
        }
        files_out.push(r);
    }
    let report = Report { files: files_out };
    let mut text = report::render(&report, args.format)?;
    let Some(out) = &args.output else {
        std::io::stdout().write_all(text.as_bytes())?;
        return Ok(0);
    };
    if args.format == Format::Markdown {
        let svg_path = out.with_extension("svg");
        if &svg_path == out {
            color_eyre::eyre::bail!(
                "{}: the Markdown report needs another name than its figure's (OUT.md writes OUT.svg)",
                out.display()
            );
        }
        let svg = report::render(&report, Format::Svg)?;
        std::fs::write(&svg_path, svg)
            .wrap_err_with(|| format!("writing {}", svg_path.display()))?;
        let name = svg_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        text.push_str(&report::markdown_figure(&name));
    }
    std::fs::write(out, text).wrap_err_with(|| format!("writing {}", out.display()))?;
    Ok(0)
}
