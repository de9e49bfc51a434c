//! `report --format html`: one self-contained page (inline CSS and SVG; no script, font,
//! image or link outside the file). First the bars of every input on one time axis, then
//! per input file its environment, the statistics table of `report` (the same numbers as
//! `--format json`), and for a recording its trials, the memory of each trial against the
//! limit, the EndpointSlice and residency band, the residency changes and the verdicts. Any
//! other field of the file's JSON report (added by later analyses) is shown as a table.

use super::figures::{FileFigures, RecordingFigures, secs};
use super::markup::{chart_css, esc, gib};
use super::{FileReport, Report, STATS, cell, ordered, trials_text, unit};
use eyre::Result;
use std::fmt::Write as _;

/// The fields of a file's JSON report that have their own section (`trial_list`: the
/// Trials table).
const SHOWN: [&str; 7] = [
    "path",
    "trials",
    "failed",
    "metrics",
    "verdicts",
    "warnings",
    "trial_list",
];

const PAGE_CSS: &str = r#"
body { background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 16px 24px 48px; max-width: 1060px; }
h1 { font-size: 1.6em; margin: 0.3em 0; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid var(--grid); padding-bottom: 0.2em; overflow-wrap: anywhere; }
h3 { font-size: 1.05em; margin: 1.4em 0 0.4em; }
p.muted, .muted { color: var(--muted); }
table { border-collapse: collapse; margin: 0.3em 0 0.8em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--grid); padding: 2px 8px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; }
thead th { background: var(--panel); }
figure { margin: 0.5em 0 1em; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.9em; }
nav ul { columns: 2; padding-left: 1.2em; }
a { color: inherit; }
code { font-size: 0.92em; }
td.failed { color: #D55E00; font-weight: 600; }
ul.events { margin: 0; padding-left: 1.2em; font-size: 90%; }
ul.events li.warning { color: #D55E00; }
"#;

/// The page.
pub fn render(report: &Report) -> Result<String> {
    let figures = super::figures::of_report(report)?;
    let mut out = String::new();
    writeln!(out, "<!DOCTYPE html>")?;
    writeln!(out, r#"<html lang="en"><head><meta charset="utf-8"/>"#)?;
    writeln!(
        out,
        r#"<meta name="viewport" content="width=device-width, initial-scale=1"/><meta name="color-scheme" content="light dark"/>"#
    )?;
    writeln!(out, "<title>readygap report</title>")?;
    writeln!(
        out,
        "<style>{}{}</style></head><body>",
        chart_css(),
        PAGE_CSS
    )?;
    writeln!(out, "<header><h1>readygap report</h1>")?;
    let trials: usize = report.files.iter().map(|f| f.trials).sum();
    writeln!(
        out,
        r#"<p class="muted">{} input files, {}; rendered by readygap {}. Durations in seconds; T0 replacement requested, T1 pod Ready, T2 runtime answers HTTP, T3 first inference sent, T4 inference done.</p>"#,
        report.files.len(),
        trials_text(trials),
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(out, "<nav><ul>")?;
    for (i, f) in report.files.iter().enumerate() {
        writeln!(
            out,
            r##"<li><a href="#file-{i}">{}</a> ({}, {} failed)</li>"##,
            esc(&f.path),
            trials_text(f.trials),
            f.failed
        )?;
    }
    writeln!(out, "</ul></nav></header>")?;
    writeln!(
        out,
        r#"<section class="comparison"><h2>Recovery timeline of every input</h2><figure>{}<figcaption>Each bar is one trial: its segments end at the mark of their colour, with their seconds written on them where they fit, and the trial's T4 (or why it failed) at its end. The bold bar under each input is its mean: each mark at the mean of the statistic that ends there (T1 <code>k8s_recovery</code>, T2 <code>runtime_recovery</code>, T4 <code>functional_recovery</code>, T3 = T4 − <code>inference_wall</code>), as in the tables below. All inputs share one time axis.</figcaption></figure></section>"#,
        super::svg::bars(&figures, false)
    )?;
    for (i, (f, fig)) in report.files.iter().zip(&figures).enumerate() {
        file_section(&mut out, i, f, fig)?;
    }
    writeln!(out, "</body></html>")?;
    Ok(out)
}

fn file_section(out: &mut String, i: usize, f: &FileReport, fig: &FileFigures) -> Result<()> {
    writeln!(
        out,
        r#"<section class="file" id="file-{i}" data-path="{}"><h2>{}</h2><p>{}, {} failed</p>"#,
        esc(&f.path),
        esc(&f.path),
        trials_text(f.trials),
        f.failed
    )?;
    writeln!(out, r#"<h3>Environment</h3><table class="environment">"#)?;
    for (k, v) in &fig.environment {
        writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v))?;
    }
    writeln!(out, "</table>")?;
    stats_table(out, f)?;
    // The verdict counts, read from the JSON shape (whatever type the field has there).
    let json = serde_json::to_value(f)?;
    match json.get("verdicts") {
        Some(serde_json::Value::Object(counts)) if counts.values().all(|v| v.is_u64()) => {
            writeln!(
                out,
                r#"<h3>Verdicts</h3><table class="verdict-counts"><thead><tr><th>verdict</th><th class="num">count</th></tr></thead>"#
            )?;
            for (k, n) in counts {
                writeln!(
                    out,
                    r#"<tr data-verdict="{}"><td>{}</td><td class="num">{n}</td></tr>"#,
                    esc(k),
                    esc(k)
                )?;
            }
            writeln!(out, "</table>")?;
        }
        Some(v) => writeln!(
            out,
            r#"<h3>Verdicts</h3><div class="extra" data-field="verdicts">{}</div>"#,
            json_html(v)
        )?,
        None => {}
    }
    if let Some(rec) = &fig.recording {
        recording(out, rec)?;
    }
    // Fields other analyses add to the JSON report (readiness-contract verdicts, ...).
    if let serde_json::Value::Object(map) = &json {
        for (k, v) in map.iter().filter(|(k, _)| !SHOWN.contains(&k.as_str())) {
            writeln!(
                out,
                r#"<h3>{}</h3><div class="extra" data-field="{}">{}</div>"#,
                esc(&k.replace('_', " ")),
                esc(k),
                json_html(v)
            )?;
        }
    }
    if !f.warnings.is_empty() {
        writeln!(
            out,
            "<details><summary>{} warnings</summary><ul>",
            f.warnings.len()
        )?;
        for w in &f.warnings {
            writeln!(out, "<li>{}</li>", esc(w))?;
        }
        writeln!(out, "</ul></details>")?;
    }
    writeln!(out, "</section>")?;
    Ok(())
}

fn stats_table(out: &mut String, f: &FileReport) -> Result<()> {
    writeln!(out, "<h3>Statistics</h3>")?;
    if f.metrics.is_empty() {
        writeln!(out, r#"<p class="muted">no completed trial</p>"#)?;
        return Ok(());
    }
    writeln!(
        out,
        r#"<table class="stats"><thead><tr><th>metric</th><th>unit</th><th class="num">n</th><th class="num">mean</th><th class="num">median</th><th class="num">p95</th><th class="num">min</th><th class="num">max</th></tr></thead><tbody>"#
    )?;
    for (name, s) in ordered(&f.metrics) {
        write!(
            out,
            r#"<tr data-metric="{}"><td>{}</td><td>{}</td><td class="num" data-stat="n">{}</td>"#,
            esc(name),
            esc(name),
            unit(name),
            s.n
        )?;
        for (stat, get) in STATS {
            let v = get(s);
            write!(
                out,
                r#"<td class="num" data-stat="{stat}" data-value="{v}">{}</td>"#,
                cell(name, v)
            )?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table>")?;
    Ok(())
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.3}"))
}

/// Events listed under one trial in the Trials table.
const EVENTS_PER_TRIAL: usize = 12;

fn recording(out: &mut String, rec: &RecordingFigures) -> Result<()> {
    writeln!(
        out,
        r#"<h3>Trials</h3><table class="trials"><thead><tr><th>trial</th><th>trigger</th><th class="num">T1</th><th class="num">T2</th><th class="num">T3</th><th class="num">T4</th><th>outcome</th></tr></thead><tbody>"#
    )?;
    for (i, t) in rec.trials.iter().enumerate() {
        let Some(t0) = t.marks.t0 else { continue };
        let m = &t.marks;
        let marks: String = [m.t1, m.t2, m.t3, m.t4]
            .map(|x| format!(r#"<td class="num">{}</td>"#, opt_s(x.map(|x| secs(t0, x)))))
            .concat();
        let outcome = match (t.reason(), t.is_running()) {
            (Some(r), _) => format!(r#"<td class="failed">failed: {}</td>"#, esc(r)),
            (None, true) => "<td>still running when the recording ended</td>".into(),
            (None, false) => "<td>ok</td>".into(),
        };
        writeln!(
            out,
            r#"<tr data-trial="{}"><td>{}</td><td>{}</td>{marks}{outcome}</tr>"#,
            t.index,
            t.index,
            esc(&t.trigger),
        )?;
        let next_t0 = rec.trials.get(i + 1).and_then(|n| n.marks.t0);
        // Under each trial, where its new pod's log said it listens and loads its model.
        let startup: Vec<String> = rec
            .log_marks
            .iter()
            .filter(|(ts, pod, _)| {
                t.new_pod.as_deref() == Some(pod.as_str())
                    && *ts >= t0
                    && next_t0.is_none_or(|n| *ts < n)
            })
            .map(|(ts, _, m)| format!("{} {}", esc(m.label()), opt_s(Some(secs(t0, *ts)))))
            .collect();
        if !startup.is_empty() {
            writeln!(
                out,
                r#"<tr class="log-marks" data-trial-log="{}"><td></td><td colspan="6">the runtime's log: {}</td></tr>"#,
                t.index,
                startup.join(" · ")
            )?;
        }
        // Under a trial that failed or has Events that explain it, its Events (at most
        // EVENTS_PER_TRIAL, the explaining ones first) in the words the cluster wrote them.
        let rows = crate::kube_events::of_trial(t, next_t0, &rec.events);
        if t.reason().is_some() || rows.iter().any(|r| r.explains) {
            let items: String = rows
                .iter()
                .take(EVENTS_PER_TRIAL)
                .map(|r| {
                    let count = if r.count > 1 {
                        format!(" ×{}", r.count)
                    } else {
                        String::new()
                    };
                    format!(
                        r#"<li class="{}">{}: <b>{}</b>{count} {}: {}</li>"#,
                        if r.warning { "warning" } else { "normal" },
                        opt_s(Some(secs(t0, r.last))),
                        esc(&r.reason),
                        esc(&r.object),
                        esc(&r.message)
                    )
                })
                .collect();
            if !items.is_empty() {
                writeln!(
                    out,
                    r#"<tr class="events" data-trial-events="{}"><td></td><td colspan="6"><ul class="events">{items}</ul></td></tr>"#,
                    t.index
                )?;
            }
        }
    }
    writeln!(
        out,
        r#"</tbody></table><p class="muted">seconds since each trial's T0; under a trial, where its new pod's log said it listens and loads its model; under a trial that failed or whose Events explain it, the Events of its pods (at seconds since its T0), those that explain it first</p>"#
    )?;
    // One window for every trial of the recording, so the curves compare.
    let spans: Vec<f64> = rec
        .trials
        .iter()
        .filter_map(|t| super::svg::trial_span(t, rec))
        .collect();
    if !spans.is_empty() {
        let hi = spans.iter().copied().fold(1.0, f64::max);
        let (lo, hi) = (-(hi * 0.05).max(1.0), hi * 1.08 + 1.0);
        writeln!(out, "<h3>Memory of each trial</h3>")?;
        for t in &rec.trials {
            if let Some(svg) = super::svg::memory(rec, t, lo, hi) {
                writeln!(out, "<figure>{svg}</figure>")?;
            }
        }
    }
    writeln!(
        out,
        "<h3>EndpointSlices and residency over the recording</h3><figure>{}<figcaption>ready, serving and terminating endpoints (one per pod across the Service's slices; zero ready highlighted), the models each runtime held (<code>/api/ps</code>), OOM kills (solid) and warnings (dashed).</figcaption></figure>",
        super::svg::session_band(rec)
    )?;
    if !rec.residency.is_empty() {
        writeln!(
            out,
            r#"<h3>Residency changes</h3><table class="residency"><thead><tr><th class="num">at (s)</th><th>pod</th><th>change</th><th>resident after</th></tr></thead><tbody>"#
        )?;
        for c in &rec.residency {
            let mut change: Vec<String> = c
                .loaded
                .iter()
                .map(|(m, b)| format!("+ {} ({})", esc(m), gib(*b)))
                .collect();
            change.extend(c.unloaded.iter().map(|m| format!("− {}", esc(m))));
            change.extend(c.note.as_ref().map(|n| format!("({})", esc(n))));
            let after: Vec<String> = c
                .resident
                .iter()
                .map(|(m, b)| format!("{} ({})", esc(m), gib(*b)))
                .collect();
            writeln!(
                out,
                r#"<tr><td class="num">{:.3}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                secs(rec.start, c.ts),
                esc(&c.pod),
                change.join(", "),
                if after.is_empty() {
                    "none".into()
                } else {
                    after.join(", ")
                }
            )?;
        }
        writeln!(
            out,
            r#"</tbody></table><p class="muted">seconds since the recording started</p>"#
        )?;
    }
    if !rec.verdicts.is_empty() {
        writeln!(
            out,
            r#"<h3>Verdict evidence</h3><table class="verdicts"><thead><tr><th class="num">at (s)</th><th>verdict</th><th>pod</th><th>models</th><th>limit</th><th>what happened</th></tr></thead><tbody>"#
        )?;
        for v in &rec.verdicts {
            let models: Vec<String> = v
                .models
                .iter()
                .map(|(m, b)| {
                    let est = if v.estimated.contains(m) {
                        ", estimated"
                    } else {
                        ""
                    };
                    format!("{} ({}{est})", esc(m), gib(*b))
                })
                .collect();
            writeln!(
                out,
                r#"<tr data-verdict="{}"><td class="num">{:.3}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                v.kind.name(),
                secs(rec.start, v.ts),
                v.kind.name(),
                esc(&v.pod),
                models.join(", "),
                v.limit.map_or_else(|| "—".into(), gib),
                esc(&v.message)
            )?;
        }
        writeln!(out, "</tbody></table>")?;
    }
    Ok(())
}

/// Any JSON value as markup: objects as two-column tables, arrays of objects as tables with
/// a column per key, other arrays as lists, scalars as text.
pub fn json_html(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "—".into(),
        Value::String(s) => esc(s),
        Value::Bool(_) | Value::Number(_) => esc(&v.to_string()),
        Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
            let mut keys: Vec<&String> = Vec::new();
            for k in items
                .iter()
                .filter_map(Value::as_object)
                .flat_map(|o| o.keys())
            {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
            let mut s = String::from("<table><thead><tr>");
            for k in &keys {
                let _ = write!(s, "<th>{}</th>", esc(k));
            }
            s.push_str("</tr></thead><tbody>");
            for it in items {
                s.push_str("<tr>");
                for k in &keys {
                    let _ = write!(
                        s,
                        "<td>{}</td>",
                        it.get(k.as_str()).map_or("".into(), json_html)
                    );
                }
                s.push_str("</tr>");
            }
            s.push_str("</tbody></table>");
            s
        }
        Value::Array(items) => {
            let mut s = String::from("<ul>");
            for it in items {
                let _ = write!(s, "<li>{}</li>", json_html(it));
            }
            s.push_str("</ul>");
            s
        }
        Value::Object(map) => {
            let mut s = String::from("<table>");
            for (k, v) in map {
                let _ = write!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(k), json_html(v));
            }
            s.push_str("</table>");
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::labcsv;
    use std::path::Path;

    fn report() -> Report {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,0,1500,2000,2010,5000,200\n2,0,2500,3000,3010,8000,FAIL\n";
        let parsed = labcsv::import_str(Path::new("a<b>.csv"), csv).unwrap();
        Report {
            files: vec![FileReport::from_trials("a<b>.csv", parsed.trials, vec![])],
        }
    }

    #[test]
    fn a_page_has_a_bar_per_trial_a_mean_bar_and_the_statistics() {
        let html = render(&report()).unwrap();
        assert_eq!(html.matches(r#"<g class="trial-bar""#).count(), 2);
        assert_eq!(html.matches(r#"<g class="mean-bar""#).count(), 1);
        assert!(html.contains(r#"data-metric="k8s_recovery""#), "{html}");
        assert!(html.contains(r#"data-stat="mean" data-value="2">2.000<"#));
        assert!(html.contains("failed: http_code FAIL"));
        // The path is text, escaped everywhere.
        assert!(!html.contains("a<b>"));
        assert!(html.contains("a&lt;b&gt;.csv"));
    }

    #[test]
    fn unknown_fields_of_the_json_report_are_tables() {
        let v = serde_json::json!([{"kind": "contract_met", "n": 2}, {"kind": "x<y"}]);
        let h = json_html(&v);
        assert!(
            h.starts_with("<table><thead><tr><th>kind</th><th>n</th>"),
            "{h}"
        );
        assert!(h.contains("x&lt;y"));
    }
}
