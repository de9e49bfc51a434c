//! `readygap cast`: a recording rendered offscreen through the dashboard into an asciicast
//! v2 file (plays in asciinema players; markers at every T0–T4).

use color_eyre::eyre::{Result, WrapErr};
use std::path::PathBuf;

/// The command-line arguments of `readygap cast`.
#[derive(Debug, clap::Args)]
pub struct CastArgs {
    pub file: PathBuf,
    /// The .cast file to write.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Terminal size COLSxROWS.
    #[arg(long, default_value = "120x36", value_parser = parse_size)]
    pub size: (u16, u16),
    /// Colour theme (a preset).
    #[arg(long, default_value = "default")]
    pub theme: String,
    /// Playback speed relative to the recording.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Shorten pauses longer than this many seconds (0 keeps them).
    #[arg(long, default_value_t = 2.0)]
    pub idle_limit: f64,
}

/// `120x36` → (120, 36).
fn parse_size(s: &str) -> std::result::Result<(u16, u16), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?}: expected COLSxROWS, e.g. 120x36"))?;
    let n = |v: &str| {
        v.trim()
            .parse::<u16>()
            .ok()
            .filter(|n| (10..=1000).contains(n))
            .ok_or_else(|| format!("{s:?}: sizes are whole numbers from 10 to 1000"))
    };
    Ok((n(w)?, n(h)?))
}

/// `readygap cast FILE -o OUT`.
pub fn cast(args: &CastArgs) -> Result<i32> {
    let (file, output) = (&args.file, &args.output);
    let rec = readygap_core::record::jsonl::read(file)?;
    for w in &rec.warnings {
        eprintln!("warning: {w}");
    }
    let (theme, unknown) = crate::ui::theme::Themes::builtin().pick(&args.theme);
    if let Some(msg) = unknown {
        eprintln!("warning: {msg}");
    }
    let view = crate::ui::view::ViewState {
        read_only: true,
        mode_label: "replay".into(),
        title: file.display().to_string(),
        ..Default::default()
    };
    let opts = crate::cast::CastOptions {
        width: args.size.0,
        height: args.size.1,
        speed: args.speed,
        idle_limit: (args.idle_limit > 0.0).then_some(args.idle_limit),
        title: format!("readygap: {}", file.display()),
        ..Default::default()
    };
    let cast = crate::cast::export(&rec.events, &opts, |state, area, buf| {
        crate::ui::render(state, &view, &theme, area, buf)
    });
    std::fs::write(output, cast.to_text())
        .wrap_err_with(|| format!("writing {}", output.display()))?;
    eprintln!(
        "wrote {} ({} events, {:.1} s)",
        output.display(),
        cast.events.len(),
        cast.header.duration
    );
    Ok(0)
}
