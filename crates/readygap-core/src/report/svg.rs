//! The report's charts as SVG strings: the stacked T0→T4 bars of every trial and of each
//! file's mean on one time axis shared by all inputs, the memory of a trial's pods against
//! their limit with its T-marks and OOM marks, and a recording's EndpointSlice and
//! residency band. Every shape that carries a number has a `<title>` and a text label where
//! it is wide enough; the bar groups carry their marks as `data-` attributes (seconds since
//! T0, the same numbers as `report --format json`) for tests and scripts.

use super::figures::{Bar, FileFigures, RecordingFigures, secs};
use super::markup::{chart_css, colour, esc, gib, px, seconds_label, tick_label, ticks};
use crate::event::Timestamp;
use crate::residency::Verdict;
use crate::timeline::Trial;
use std::fmt::Write as _;

const WIDTH: f64 = 1000.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 200.0;
const ROW: f64 = 18.0;
const BAR_H: f64 = 13.0;

/// Names of T0..T4 as the legend and titles say them.
pub const MARK_NAMES: [&str; 5] = [
    "T0 replacement requested",
    "T1 pod Ready",
    "T2 runtime answers HTTP",
    "T3 first inference sent",
    "T4 inference done",
];

fn mark_colour(k: usize) -> &'static str {
    [
        colour::READY,
        colour::READY,
        colour::RUNTIME,
        colour::SENT,
        colour::INFERENCE,
    ][k]
}

/// A `<text>` of class `class` anchored at (`x`, `y`); `body` is markup (escaped already).
fn text(out: &mut String, class: &str, x: f64, y: f64, anchor: &str, body: &str) {
    let _ = write!(
        out,
        r#"<text class="{class}" x="{}" y="{}" text-anchor="{anchor}">{body}</text>"#,
        px(x),
        px(y)
    );
}

/// How an `<svg>` element starts: standalone (a file of its own, with the XML namespace
/// and the style sheet) or inline in the HTML page (which holds the style sheet).
fn open_svg(out: &mut String, class: &str, height: f64, label: &str, standalone: bool) {
    let ns = if standalone {
        // A namespace name, not a reference: nothing is fetched from it.
        r#" xmlns="http://www.w3.org/2000/svg""#
    } else {
        ""
    };
    let _ = write!(
        out,
        r#"<svg{ns} class="chart {class}" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{l}"><title>{l}</title>"#,
        w = px(WIDTH),
        h = px(height),
        l = esc(label),
    );
    if standalone {
        let _ = write!(
            out,
            "<style>{}</style><rect class=\"background\" width=\"100%\" height=\"100%\" style=\"fill: var(--bg)\"/>",
            chart_css()
        );
    }
}

/// The time axis shared by all bars: seconds since T0 from 0 to the latest mark of any
/// input, in round steps.
#[derive(Debug, Clone)]
pub struct TimeAxis {
    pub end: f64,
    pub step: f64,
    pub ticks: Vec<f64>,
}

impl TimeAxis {
    pub fn of(files: &[FileFigures]) -> TimeAxis {
        let hi = files
            .iter()
            .flat_map(|f| f.bars.iter().chain(&f.mean))
            .map(Bar::end)
            .fold(1.0, f64::max);
        let (step, ticks) = ticks(0.0, hi, 8);
        TimeAxis {
            end: *ticks.last().unwrap_or(&hi),
            step,
            ticks,
        }
    }

    fn x(&self, s: f64) -> f64 {
        LEFT + (s.max(0.0) / self.end).min(1.0) * (WIDTH - LEFT - RIGHT)
    }
}

fn axis_row(out: &mut String, axis: &TimeAxis, y: f64, top: bool) {
    let side = if top { "top" } else { "bottom" };
    let _ = write!(out, r#"<g class="axis" data-side="{side}">"#);
    for t in &axis.ticks {
        let label = format!("{} s", tick_label(*t, axis.step));
        text(out, "tick", axis.x(*t), y, "middle", &label);
    }
    let (x, label_y) = (
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        y + if top { -16.0 } else { 18.0 },
    );
    let label = "seconds since T0 (replacement requested)";
    text(out, "axis-label", x, label_y, "middle", label);
    out.push_str("</g>");
}

fn legend(out: &mut String, y: f64) {
    let mut x = 8.0;
    let items = [
        (colour::READY, "→T1 pod Ready"),
        (colour::RUNTIME, "→T2 runtime answers HTTP"),
        (colour::SENT, "→T3 inference sent"),
        (colour::INFERENCE, "→T4 inference done"),
        (colour::FAILED, "failed / OOM"),
    ];
    out.push_str(r#"<g class="legend">"#);
    for (c, label) in items {
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="12" height="12" style="fill: {c}"/><text x="{}" y="{}">{}</text>"#,
            px(x),
            px(y - 10.0),
            px(x + 16.0),
            px(y),
            esc(label)
        );
        x += 16.0 + label.chars().count() as f64 * 6.6 + 18.0;
    }
    out.push_str("</g>");
}

fn data_marks(bar: &Bar) -> String {
    // Rust's `{}` of an f64 is its shortest round-trip form, as serde_json writes it.
    let marks = bar
        .marks
        .iter()
        .enumerate()
        .filter_map(|(k, m)| m.map(|v| format!(r#" data-t{k}="{v}""#)));
    let failed = bar.failed_at.map(|f| format!(r#" data-failed-at="{f}""#));
    marks.chain(failed).collect()
}

fn bar_text(bar: &Bar, who: &str) -> String {
    let mut parts = vec![who.to_string()];
    for (k, m) in bar.marks.iter().enumerate().skip(1) {
        if let Some(v) = m {
            parts.push(format!("{} at {v:.3} s", MARK_NAMES[k]));
        }
    }
    parts.extend(bar.failed.as_ref().map(|r| format!("failed: {r}")));
    parts.join("; ")
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    s.chars().take(n.saturating_sub(1)).chain(['…']).collect()
}

/// One bar's shapes: its segments in time order, each coloured by the mark it ends at (T2
/// before T1 when the runtime answered before the pod turned Ready), a failed tail, labels.
fn bar_shapes(out: &mut String, axis: &TimeAxis, bar: &Bar, y: f64, h: f64) {
    let mut marks: Vec<(f64, usize)> = bar
        .marks
        .iter()
        .enumerate()
        .skip(1)
        .filter_map(|(k, m)| m.map(|v| (v, k)))
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut prev, mut prev_k) = (0.0, 0usize);
    for (v, k) in &marks {
        let (x0, x1) = (axis.x(prev), axis.x(*v));
        let w = (x1 - x0).max(0.0);
        let _ = write!(
            out,
            r#"<rect class="seg" data-to="T{k}" x="{}" y="{}" width="{}" height="{}" style="fill: {}"><title>T{prev_k}→T{k}: {:.3} s</title></rect>"#,
            px(x0),
            px(y),
            px(w),
            px(h),
            mark_colour(*k),
            v - prev
        );
        if w >= 34.0 {
            let cls = if *k == 1 {
                "seg-label on-dark"
            } else {
                "seg-label on-light"
            };
            let (x, label) = (x0 + w / 2.0, seconds_label(v - prev));
            text(out, cls, x, y + h - 3.0, "middle", &label);
        }
        (prev, prev_k) = (*v, *k);
    }
    if let (Some(reason), Some(at)) = (&bar.failed, bar.failed_at)
        && at > prev
    {
        let (x0, x1) = (axis.x(prev), axis.x(at));
        let _ = write!(
            out,
            r#"<rect class="fail" x="{}" y="{}" width="{}" height="{}"><title>T{prev_k}→failure: {:.3} s ({})</title></rect>"#,
            px(x0),
            px(y),
            px((x1 - x0).max(0.0)),
            px(h),
            at - prev,
            esc(reason)
        );
        prev = at;
    }
    let (cls, label) = match (&bar.failed, bar.marks[4]) {
        (Some(reason), _) => ("failed", format!("failed: {}", esc(&short(reason, 30)))),
        (None, Some(t4)) => ("total", format!("{} s", seconds_label(t4))),
        (None, None) => ("muted", "no T4".to_string()),
    };
    let _ = write!(
        out,
        r#"<text class="{cls}" x="{}" y="{}">{label}</text>"#,
        px(axis.x(prev) + 6.0),
        px(y + h - 2.0)
    );
}

/// The bars of every input on one time axis (`report --format svg`, and the page's first
/// figure).
pub fn bars(files: &[FileFigures], standalone: bool) -> String {
    let axis = TimeAxis::of(files);
    let top = 100.0;
    let mut body = String::new();
    let mut y = top;
    for (i, f) in files.iter().enumerate() {
        if f.bars.is_empty() && f.mean.is_none() {
            continue;
        }
        let _ = write!(
            body,
            r#"<g class="file-bars" data-file="{}" data-index="{i}"><text class="title" x="8" y="{}">{}</text>"#,
            esc(&f.path),
            px(y + 13.0),
            esc(&f.path)
        );
        y += 20.0;
        // A bar's group: its marks as `data-` attributes, its text as title and label.
        let group = |body: &mut String, head: &str, cls: &str, who: &str, b: &Bar, y, h, ly| {
            let t = esc(&bar_text(b, who));
            let marks = data_marks(b);
            let _ = write!(
                body,
                r#"{head}{marks} role="img" aria-label="{t}"><title>{t}</title>"#
            );
            text(body, cls, LEFT - 8.0, ly, "end", &esc(who));
            bar_shapes(body, &axis, b, y, h);
            body.push_str("</g>");
        };
        for b in &f.bars {
            let n = b.trial.unwrap_or(0);
            let cold = if b.cold { " (cold)" } else { "" };
            let observed = if b.external { " (observed)" } else { "" };
            let who = format!("trial {n}{cold}{observed}");
            let head = format!(r#"<g class="trial-bar" data-trial="{n}""#);
            let (h, ly) = (BAR_H, y + BAR_H - 2.0);
            group(&mut body, &head, "muted", &who, b, y, h, ly);
            y += ROW;
        }
        if let Some(m) = &f.mean {
            let who = format!("mean of {}", super::trials_text(f.bars.len()));
            let h = BAR_H + 5.0;
            let head = r#"<g class="mean-bar""#;
            group(&mut body, head, "total", &who, m, y, h, y + h - 4.0);
            y += h + 5.0;
        }
        body.push_str("</g>");
        y += 12.0;
    }
    let bottom = y;
    let height = bottom + 44.0;
    let mut out = String::new();
    open_svg(
        &mut out,
        "bars",
        height,
        "T0 to T4 of every trial and the mean per input, seconds since T0 on one shared axis",
        standalone,
    );
    let _ = write!(
        out,
        r#"<text class="title" x="8" y="20">Recovery timeline: T0→T1→T2→T3→T4 per trial, one time axis for all inputs</text>"#
    );
    legend(&mut out, 44.0);
    out.push_str(r#"<g class="grid-lines">"#);
    for t in &axis.ticks {
        let x = px(axis.x(*t));
        let _ = write!(
            out,
            r#"<line class="grid" x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
            px(top - 6.0),
            px(bottom)
        );
    }
    out.push_str("</g>");
    axis_row(&mut out, &axis, top - 10.0, true);
    out.push_str(&body);
    axis_row(&mut out, &axis, bottom + 14.0, false);
    out.push_str("</svg>");
    out
}

/// Where a trial's figures end, in seconds since its T0: its last mark, failure or verdict;
/// a trial still open at the end of the recording runs to that end.
pub fn trial_span(t: &Trial, rec: &RecordingFigures) -> Option<f64> {
    let (end, t0) = (Bar::of_trial(t)?.end(), t.marks.t0?);
    Some(if t.is_running() {
        end.max(secs(t0, rec.end))
    } else {
        end
    })
}

/// The memory of the pods of one trial against their limit, from `lo` to `hi` seconds
/// around its T0 (the same window for every trial of a recording), with the trial's marks
/// and the verdicts (OOM kills, warnings) that fall in the window.
pub fn memory(rec: &RecordingFigures, t: &Trial, lo: f64, hi: f64) -> Option<String> {
    let t0 = t.marks.t0?;
    let in_window = |ts| {
        let s = secs(t0, ts);
        s >= lo && s <= hi
    };
    let pods: Vec<_> = rec
        .memory
        .iter()
        .filter(|m| m.points.iter().any(|(ts, v)| v.is_some() && in_window(*ts)))
        .collect();
    // GPU memory (VRAM) of the GPU pods in the window, on the same axis.
    let gpus: Vec<_> = rec
        .gpu
        .iter()
        .filter(|m| m.points.iter().any(|(ts, v)| v.is_some() && in_window(*ts)))
        .collect();
    let (x0, x1, y0, y1) = (70.0, WIDTH - 130.0, 56.0, 176.0);
    let peak = pods
        .iter()
        .chain(&gpus)
        .flat_map(|m| m.points.iter().filter(|(ts, _)| in_window(*ts)))
        .filter_map(|(_, v)| *v)
        .chain(pods.iter().chain(&gpus).filter_map(|m| m.limit))
        .max()
        .unwrap_or(0);
    let gib_f = |b: u64| b as f64 / (1u64 << 30) as f64;
    let (ystep, yticks) = ticks(0.0, gib_f(peak).max(0.1) * 1.05, 4);
    let ymax = *yticks.last().unwrap_or(&1.0);
    let x = |s: f64| x0 + ((s - lo) / (hi - lo)).clamp(0.0, 1.0) * (x1 - x0);
    let y = |b: u64| y1 - (gib_f(b) / ymax).clamp(0.0, 1.0) * (y1 - y0);
    let mut out = String::new();
    let label = format!(
        "Memory of the serving container during trial {} against its limit, with T0–T4 and OOM marks",
        t.index
    );
    open_svg(&mut out, "memory", 216.0, &label, false);
    let title = if gpus.is_empty() {
        "container memory (GiB) against the limit"
    } else {
        "container memory and GPU memory (VRAM, dashed; GiB) against the limit and the GPU's total"
    };
    let _ = write!(
        out,
        r#"<text class="title" x="8" y="18">trial {}: {title}</text>"#,
        t.index
    );
    // Axes and grid.
    for v in &yticks {
        let yy = y1 - (v / ymax) * (y1 - y0);
        let _ = write!(
            out,
            r#"<line class="grid" x1="{}" y1="{yy}" x2="{}" y2="{yy}"/><text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
            px(x0),
            px(x1),
            px(x0 - 6.0),
            px(yy + 4.0),
            tick_label(*v, ystep),
            yy = px(yy),
        );
    }
    let (xstep, xticks) = ticks(lo, hi, 8);
    out.push_str(r#"<g class="axis">"#);
    for s in xticks
        .iter()
        .filter(|s| **s >= lo - 1e-9 && **s <= hi + 1e-9)
    {
        let label = format!("{} s", tick_label(*s, xstep));
        text(&mut out, "tick", x(*s), y1 + 14.0, "middle", &label);
    }
    let _ = write!(
        out,
        r#"<text class="axis-label" x="{}" y="{}" text-anchor="middle">seconds since this trial's T0</text><text class="axis-label" x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">GiB</text></g>"#,
        px((x0 + x1) / 2.0),
        px(y1 + 32.0),
        px((y0 + y1) / 2.0),
        px((y0 + y1) / 2.0),
    );
    let _ = write!(
        out,
        r#"<line class="axis-line" x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}"/>"#,
        x0 = px(x0),
        x1 = px(x1),
        y1 = px(y1)
    );
    // T-marks.
    let m = &t.marks;
    for (k, ts) in [m.t0, m.t1, m.t2, m.t3, m.t4].into_iter().enumerate() {
        let Some(ts) = ts else { continue };
        let xx = px(x(secs(t0, ts)));
        let _ = write!(
            out,
            r#"<g class="t-mark" data-mark="T{k}"><line class="mark" x1="{xx}" y1="{}" x2="{xx}" y2="{}"/><text class="muted" x="{xx}" y="{}" text-anchor="middle">T{k}</text><title>{} at {:.3} s</title></g>"#,
            px(y0 - 4.0),
            px(y1),
            px(y0 - 8.0 - if k % 2 == 1 { 10.0 } else { 0.0 }),
            MARK_NAMES[k],
            secs(t0, ts)
        );
    }
    // The containers' limits (solid) and the GPUs' totals (dotted).
    let lines = |ms: &[&super::figures::PodMemory]| {
        let mut l: Vec<u64> = ms.iter().filter_map(|m| m.limit).collect();
        l.sort();
        l.dedup();
        l
    };
    let limits = lines(&pods)
        .into_iter()
        .map(|l| (l, "limit-line", "", "limit"));
    let totals = lines(&gpus).into_iter().map(|l| {
        (
            l,
            "gpu-total-line",
            r#" style="stroke-dasharray: 2 3""#,
            "GPU",
        )
    });
    for (l, class, style, label) in limits.chain(totals) {
        let yy = px(y(l));
        let _ = write!(
            out,
            r#"<g class="{class}"><line class="limit" x1="{}" y1="{yy}" x2="{}" y2="{yy}"{style}/><text x="{}" y="{}">{label} {}</text></g>"#,
            px(x0),
            px(x1),
            px(x1 + 6.0),
            px(y(l) + 4.0),
            gib(l)
        );
    }
    // The curves, broken at gaps: each container's memory solid, each GPU pod's VRAM dashed.
    let curves = pods
        .iter()
        .map(|p| (*p, "memory-line", String::new(), "", p.pod.clone(), 34))
        .chain(gpus.iter().map(|g| {
            let title = "GPU memory (VRAM) of ".to_string();
            (
                *g,
                "gpu-line",
                title,
                "; stroke-dasharray: 6 3",
                format!("GPU memory {}", short(&g.pod, 24)),
                0,
            )
        }));
    for (i, (p, class, title, dash, legend, cut)) in curves.enumerate() {
        let c = colour::SERIES[i % colour::SERIES.len()];
        let _ = write!(
            out,
            r#"<g class="{class}" data-pod="{}"><title>{title}{}</title>"#,
            esc(&p.pod),
            esc(&p.pod)
        );
        let points: Vec<Option<String>> = p
            .points
            .iter()
            .filter(|(ts, _)| in_window(*ts))
            .map(|(ts, v)| v.map(|b| format!("{},{}", px(x(secs(t0, *ts))), px(y(b)))))
            .collect();
        for run in points.split(Option::is_none).filter(|r| !r.is_empty()) {
            let mut run: Vec<&str> = run.iter().flatten().map(String::as_str).collect();
            if run.len() == 1 {
                run.push(run[0]);
            }
            let _ = write!(
                out,
                r#"<polyline points="{}" style="fill: none; stroke: {c}; stroke-width: 2{dash}"/>"#,
                run.join(" ")
            );
        }
        out.push_str("</g>");
        let ly = 18.0 + (i as f64) * 14.0;
        let legend = if cut > 0 { short(&legend, cut) } else { legend };
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="12" height="4" style="fill: {c}"/><text x="{}" y="{}">{}</text>"#,
            px(x1 - 260.0),
            px(ly - 5.0),
            px(x1 - 244.0),
            px(ly),
            esc(&legend)
        );
    }
    if pods.is_empty() && gpus.is_empty() {
        let (x, y) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
        let label = "no memory samples in this window";
        text(&mut out, "muted", x, y, "middle", label);
    }
    // Verdicts in the window: kills as solid marks, warnings dashed.
    for v in rec.verdicts.iter().filter(|v| in_window(v.ts)) {
        verdict_mark(&mut out, v, x(secs(t0, v.ts)), (y0, y1), true);
    }
    out.push_str("</svg>");
    Some(out)
}

/// A verdict's mark at `x` from `y0` to `y1`: solid for a kill, dashed for a warning, with
/// its name over the line (`OOM` for a kill) when `labelled`.
fn verdict_mark(out: &mut String, v: &Verdict, x: f64, (y0, y1): (f64, f64), labelled: bool) {
    let (name, kill) = (v.kind.name(), v.kind.is_kill());
    let (cls, xx) = (if kill { "oom" } else { "risk" }, px(x));
    let _ = write!(
        out,
        r#"<g class="verdict-mark" data-kind="{name}"><line class="{cls}" x1="{xx}" y1="{}" x2="{xx}" y2="{}"/>"#,
        px(y0),
        px(y1)
    );
    if labelled {
        let (label, dy) = if kill { ("OOM", 0.0) } else { (name, 14.0) };
        text(out, "failed", x, y1 - 4.0 - dy, "middle", &esc(label));
    }
    let _ = write!(out, "<title>{name}: {}</title></g>", esc(&v.message));
}

/// Which count of the endpoints a lane shows.
type CountOf = fn(&crate::state::EndpointCounts) -> u32;

/// A recording's band over its whole length: each trial's T0→T4, the EndpointSlice ready /
/// serving / terminating counts (zero ready highlighted), each model's residency, OOM marks.
pub fn session_band(rec: &RecordingFigures) -> String {
    let total = secs(rec.start, rec.end).max(1.0);
    let (x0, x1) = (LEFT, WIDTH - 40.0);
    let x = |s: f64| x0 + (s / total).clamp(0.0, 1.0) * (x1 - x0);
    let at = |ts| secs(rec.start, ts);
    let mut models: Vec<String> = Vec::new();
    for (m, _) in rec.residency.iter().flat_map(|c| &c.loaded) {
        if !models.contains(m) {
            models.push(m.clone());
        }
    }
    let lane_h = 18.0;
    let top = 34.0;
    let lanes = 4 + models.len();
    let bottom = top + lanes as f64 * (lane_h + 4.0);
    let height = bottom + 40.0;
    let mut out = String::new();
    open_svg(
        &mut out,
        "session",
        height,
        "The recording over time: trials, EndpointSlice ready, serving and terminating endpoints, resident models, OOM marks",
        false,
    );
    let _ = write!(
        out,
        r#"<text class="title" x="8" y="18">the whole recording ({:.1} s): trials, EndpointSlice endpoints, resident models</text>"#,
        total
    );
    let lane_y = |i: usize| top + i as f64 * (lane_h + 4.0);
    let names = ["trials", "ready", "serving", "terminating"];
    for (i, n) in names
        .iter()
        .map(|s| s.to_string())
        .chain(models.iter().cloned())
        .enumerate()
    {
        let (y, label) = (lane_y(i) + lane_h - 5.0, esc(&short(&n, 20)));
        text(&mut out, "muted", LEFT - 8.0, y, "end", &label);
    }
    // Trials.
    out.push_str(r#"<g class="lane" data-lane="trials">"#);
    for t in &rec.trials {
        let Some(t0) = t.marks.t0 else { continue };
        let m = &t.marks;
        let mut marks: Vec<(Timestamp, usize)> = [m.t1, m.t2, m.t3, m.t4]
            .into_iter()
            .enumerate()
            .filter_map(|(k, ts)| ts.map(|ts| (ts, k + 1)))
            .collect();
        marks.sort();
        let mut prev = t0;
        for (ts, k) in &marks {
            let _ = write!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{}" style="fill: {}"><title>trial {} T{k} at {:.3} s since T0</title></rect>"#,
                px(x(at(prev))),
                px(lane_y(0)),
                px((x(at(*ts)) - x(at(prev))).max(0.0)),
                px(lane_h),
                mark_colour(*k),
                t.index,
                secs(t0, *ts)
            );
            prev = *ts;
        }
        let _ = write!(
            out,
            r#"<line class="mark" x1="{xx}" y1="{}" x2="{xx}" y2="{}"/><text class="muted" x="{}" y="{}">trial {}</text>"#,
            px(lane_y(0)),
            px(bottom),
            px(x(at(t0)) + 2.0),
            px(lane_y(0) - 3.0),
            t.index,
            xx = px(x(at(t0))),
        );
    }
    out.push_str("</g>");
    // Endpoints: a step function; each value holds until the next point.
    let lanes_of: [(usize, &str, CountOf, &str); 3] = [
        (1, "ready", |c| c.ready, colour::GREEN),
        (2, "serving", |c| c.serving, colour::RUNTIME),
        (3, "terminating", |c| c.terminating, colour::PURPLE),
    ];
    for (lane, name, get, c) in lanes_of {
        let _ = write!(out, r#"<g class="lane" data-lane="{name}">"#);
        for (i, (ts, v)) in rec.endpoints.iter().enumerate() {
            let Some(v) = v else { continue };
            let until = rec.endpoints.get(i + 1).map_or(rec.end, |n| n.0);
            let (a, b) = (x(at(*ts)), x(at(until)));
            let w = (b - a).max(0.0);
            let n = get(v);
            let (yy, label_y) = (px(lane_y(lane)), lane_y(lane) + lane_h - 5.0);
            let span = format!("from {:.3} s to {:.3} s", at(*ts), at(until));
            if n > 0 {
                // A count above zero in the lane's colour.
                let extra = if lane == 3 && v.serving_terminating > 0 {
                    format!(", {} still serving", v.serving_terminating)
                } else {
                    String::new()
                };
                let _ = write!(
                    out,
                    r#"<rect x="{}" y="{yy}" width="{}" height="{}" style="fill: {c}"><title>{n} {name}{extra} {span}</title></rect>"#,
                    px(a),
                    px(w),
                    px(lane_h)
                );
                if w >= 16.0 {
                    text(
                        &mut out,
                        "on-light",
                        a + w / 2.0,
                        label_y,
                        "middle",
                        &n.to_string(),
                    );
                }
            } else if lane == 1 {
                // Zero ready endpoints, highlighted.
                let _ = write!(
                    out,
                    r#"<rect class="zero-ready" x="{}" y="{yy}" width="{}" height="{}"><title>0 ready endpoints {span}</title></rect>"#,
                    px(a),
                    px(w),
                    px(lane_h)
                );
                if w >= 44.0 {
                    text(&mut out, "muted", a + w / 2.0, label_y, "middle", "0 ready");
                }
            }
        }
        out.push_str("</g>");
    }
    // Residency: each model from the change that loaded it to the one that unloaded it.
    for (mi, model) in models.iter().enumerate() {
        let lane = 4 + mi;
        let _ = write!(
            out,
            r#"<g class="lane" data-lane="resident" data-model="{}">"#,
            esc(model)
        );
        let mut open: Vec<(String, Timestamp, u64)> = Vec::new();
        let mut spans = Vec::new();
        for c in &rec.residency {
            if let Some((_, size)) = c.loaded.iter().find(|(m, _)| m == model) {
                open.push((c.pod.clone(), c.ts, *size));
            }
            if c.unloaded.contains(model)
                && let Some(i) = open.iter().position(|(p, _, _)| *p == c.pod)
            {
                let (pod, from, size) = open.remove(i);
                spans.push((pod, from, c.ts, size));
            }
        }
        spans.extend(open.into_iter().map(|(p, f, s)| (p, f, rec.end, s)));
        for (pod, from, until, size) in spans {
            let (a, b) = (x(at(from)), x(at(until)));
            let _ = write!(
                out,
                r#"<rect x="{}" y="{}" width="{}" height="{}" style="fill: {}; fill-opacity: 0.8"><title>{} resident in {} ({}) from {:.3} s to {:.3} s</title></rect>"#,
                px(a),
                px(lane_y(lane)),
                px((b - a).max(1.0)),
                px(lane_h),
                colour::SERIES[mi % colour::SERIES.len()],
                esc(model),
                esc(&pod),
                gib(size),
                at(from),
                at(until)
            );
        }
        out.push_str("</g>");
    }
    for v in &rec.verdicts {
        verdict_mark(&mut out, v, x(at(v.ts)), (top - 4.0, bottom), false);
    }
    let (step, xt) = ticks(0.0, total, 10);
    out.push_str(r#"<g class="axis">"#);
    for s in xt.iter().filter(|s| **s <= total + 1e-9) {
        let label = format!("{} s", tick_label(*s, step));
        text(&mut out, "tick", x(*s), bottom + 12.0, "middle", &label);
    }
    let (label, x) = ("seconds since the recording started", (x0 + x1) / 2.0);
    text(&mut out, "axis-label", x, bottom + 30.0, "middle", label);
    out.push_str("</g></svg>");
    out
}
