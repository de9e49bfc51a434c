//! Small helpers of the HTML and SVG writers: escaping text for markup, numbers for labels
//! and attributes, round axis ticks, and the colour-blind-safe palette (Okabe & Ito, "Color
//! Universal Design", 2008) with its light and dark page colours.

/// Text (or an attribute value in double quotes) escaped for HTML and XML.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate: two decimals, no trailing zeros.
pub fn px(v: f64) -> String {
    let s = format!("{:.2}", if v.is_finite() { v } else { 0.0 });
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// Seconds for a label on a bar: one decimal from 10 s, else two.
pub fn seconds_label(v: f64) -> String {
    if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bytes as GiB with one decimal.
pub fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// A round step (1, 2 or 5 × 10^k) cutting `span` into about `want` parts.
pub fn nice_step(span: f64, want: usize) -> f64 {
    let raw = span.max(1e-9) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

/// An axis from `lo` to at least `hi` in round steps: (step, the ticks). The first tick is
/// the multiple of the step at or below `lo`, the last at or above `hi`.
pub fn ticks(lo: f64, hi: f64, want: usize) -> (f64, Vec<f64>) {
    let step = nice_step(hi - lo, want);
    let first = (lo / step).floor() as i64;
    let last = ((hi / step) - 1e-9).ceil().max(first as f64 + 1.0) as i64;
    // Snap float noise (0.30000000000000004) by multiplying integers.
    let out = (first..=last.min(first + 1000))
        .map(|k| k as f64 * step)
        .collect();
    (step, out)
}

/// A tick label: as many decimals as the step needs.
pub fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// The palette, by role. Okabe–Ito: blue, sky blue, yellow, orange, vermillion, bluish
/// green, reddish purple; distinguishable with every common colour-vision deficiency.
pub mod colour {
    /// The segment ending at T1 (pod Ready).
    pub const READY: &str = "#0072B2";
    /// The segment ending at T2 (runtime answers HTTP).
    pub const RUNTIME: &str = "#56B4E9";
    /// The segment ending at T3 (first inference sent).
    pub const SENT: &str = "#F0E442";
    /// The segment ending at T4 (inference done).
    pub const INFERENCE: &str = "#E69F00";
    /// Failures and OOM kills.
    pub const FAILED: &str = "#D55E00";
    pub const GREEN: &str = "#009E73";
    pub const PURPLE: &str = "#CC79A7";
    /// Lines of several pods, in order.
    pub const SERIES: [&str; 5] = [READY, INFERENCE, GREEN, PURPLE, RUNTIME];
}

/// The style sheet shared by the page and a standalone SVG: page colours for light and dark
/// (`prefers-color-scheme`), chart classes. Only colours that do not depend on the theme are
/// written into the SVG elements themselves.
pub fn chart_css() -> String {
    format!(
        r#"
:root {{ --fg: #1a1a1a; --bg: #ffffff; --muted: #5c5c5c; --grid: #d9d9d9; --panel: #f4f4f4; --limit: #8a3b6b; }}
@media (prefers-color-scheme: dark) {{
  :root {{ --fg: #e8e8e8; --bg: #16181c; --muted: #a8a8a8; --grid: #3a3d42; --panel: #22252a; --limit: #e3a0c8; }}
}}
svg text {{ fill: var(--fg); font: 12px system-ui, -apple-system, "Segoe UI", sans-serif; }}
svg text.muted, svg text.tick {{ fill: var(--muted); }}
svg text.on-dark {{ fill: #ffffff; }}
svg text.on-light {{ fill: #000000; }}
svg text.title {{ font-weight: 600; font-size: 13px; }}
svg text.axis-label {{ fill: var(--muted); font-style: italic; }}
svg text.total {{ font-weight: 600; }}
svg text.failed {{ fill: {failed}; font-weight: 600; }}
svg .grid {{ stroke: var(--grid); stroke-width: 1; }}
svg .axis-line {{ stroke: var(--muted); stroke-width: 1; }}
svg .limit {{ stroke: var(--limit); stroke-width: 1.5; stroke-dasharray: 6 4; fill: none; }}
svg .mark {{ stroke: var(--muted); stroke-width: 1; stroke-dasharray: 2 3; }}
svg .oom {{ stroke: {failed}; stroke-width: 2; }}
svg .risk {{ stroke: {sent}; stroke-width: 2; stroke-dasharray: 4 2; }}
svg .mean-bar rect.seg {{ stroke: var(--fg); stroke-width: 1; }}
svg rect.fail {{ fill: {failed}; fill-opacity: 0.55; stroke: {failed}; stroke-dasharray: 3 2; }}
svg rect.zero-ready {{ fill: {failed}; fill-opacity: 0.35; }}
"#,
        failed = colour::FAILED,
        sent = colour::SENT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(esc("a\u{1}b"), "a\u{FFFD}b");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 16.3, 6).1, vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        let (step, t) = ticks(0.0, 1.0, 5);
        assert_eq!(step, 0.2);
        assert_eq!(t.len(), 6);
        assert_eq!(ticks(-1.5, 9.0, 5).1, vec![-5.0, 0.0, 5.0, 10.0]);
        assert_eq!(
            ticks(-1.5, 9.0, 6).1,
            vec![-2.0, 0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        );
        assert_eq!(tick_label(0.4, 0.2), "0.4");
        assert_eq!(px(1.0), "1");
        assert_eq!(px(-0.001), "0");
        assert_eq!(px(2.345), "2.35");
    }
}
