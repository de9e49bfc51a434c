//! `readygap cast`: a recording rendered offscreen through the dashboard into an asciicast
//! v2 file (plays in asciinema players; markers at every T0–T4).

use color_eyre::eyre::{Result, WrapErr};
use std::path::Path;

/// `readygap cast FILE -o OUT`.
pub fn cast(
    file: &Path,
    output: &Path,
    size: (u16, u16),
    theme: &str,
    speed: f64,
    idle_limit: f64,
) -> Result<i32> {
    let rec = readygap_core::record::jsonl::read(file)?;
    for w in &rec.warnings {
        eprintln!("warning: {w}");
    }
    let (theme, unknown) = crate::ui::theme::Themes::builtin().pick(theme);
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
        width: size.0,
        height: size.1,
        speed,
        idle_limit: (idle_limit > 0.0).then_some(idle_limit),
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
