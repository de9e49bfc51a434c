//! The Timeline panel: the current trial as a horizontal bar of its marks T0–T4 on one time
//! axis in the order they were reached (T0→T1→T2→T3→T4, or T0→T2→T1→… when the runtime
//! answered before Ready), each segment in the colour of the mark it ends at with its
//! seconds labelled (a running trial grows with `state.now`),
//! T2 "HTTP answers" ticked on the bar where the runtime answers before its model is ready
//! (llama-server's 503 "Loading model"), with its lead over "model ready" labelled, the
//! Events that explain the trial (a failed probe, a kill, FailedScheduling) ticked `!` where
//! they happened, the new pod's start-up lines in its log (listening, model load begun and
//! done) ticked `◆`,
//! the statistics of the finished trials (mean/median/p95 from `TrialStats`), and the last
//! trials as rows with ✓/✗ and the failure reason.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_secs, panel, put_line, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use readygap_core::event::Timestamp;
use readygap_core::kube_events::{self, EventRow};
use readygap_core::state::State;
use readygap_core::stats::TrialStats;
use readygap_core::timeline::{Metric, Trial};

/// The bar's glyph for reached segments and for the growing segment of a running trial.
pub const BAR: &str = "█";
pub const GROWING: &str = "▒";
/// The tick of T2 "HTTP answers" on the bar.
pub const HTTP_TICK: &str = "┃";
/// The tick of an Event that explains the trial (warning colour).
pub const EVENT_TICK: &str = "!";
/// The tick of a start-up line of the new pod's log (accent colour).
pub const LOG_TICK: &str = "◆";

/// T2 "HTTP answers" where it is apart from T2 "model ready" (before it, or T2 not reached
/// yet); `None` where the runtime does not tell them apart (one instant).
pub fn http_apart(trial: &Trial) -> Option<Timestamp> {
    let m = &trial.marks;
    m.t2_http.filter(|h| m.t2.is_none_or(|t2| *h < t2))
}

/// The metrics shown in the statistics table.
pub const SHOWN: [Metric; 6] = [
    Metric::K8sRecovery,
    Metric::RuntimeRecovery,
    Metric::ReadyToInference,
    Metric::FunctionalRecovery,
    Metric::InferenceWall,
    Metric::LoadDuration,
];

/// One coloured piece of the bar: from mark `from_mark` to mark `to_mark` (0..=4), in the
/// order the marks were reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    pub from: Timestamp,
    pub to: Timestamp,
    /// The mark the segment starts at (0 = T0, ...).
    pub from_mark: usize,
    /// The mark the segment leads to (1 = T1, ..., 4 = T4); its colour is that mark's role.
    pub to_mark: usize,
    /// Still growing (the mark is not reached yet).
    pub growing: bool,
}

/// The segments of a trial's bar on one time axis: between consecutive reached marks in the
/// order they were reached (T2 before T1 when the runtime answered on the pod's address
/// before the pod was Ready, as the inference-aware readiness probe makes it), so the
/// segments add up to the trial's span; plus, while running, one growing segment from the
/// latest reached mark to `now`, towards the first mark not reached yet.
pub fn segments(trial: &Trial, now: Option<Timestamp>) -> Vec<Segment> {
    let m = &trial.marks;
    let mut reached: Vec<(Timestamp, usize)> = [m.t0, m.t1, m.t2, m.t3, m.t4]
        .into_iter()
        .enumerate()
        .filter_map(|(k, t)| t.map(|t| (t, k)))
        .collect();
    // By time; marks at the same instant keep their T order. T0 opens the bar.
    reached.sort();
    let mut out: Vec<Segment> = reached
        .windows(2)
        .map(|w| Segment {
            from: w[0].0,
            to: w[1].0,
            from_mark: w[0].1,
            to_mark: w[1].1,
            growing: false,
        })
        .collect();
    let next = (1..=4).find(|k| !reached.iter().any(|(_, r)| r == k));
    if trial.is_running()
        && let (Some(&(from, from_mark)), Some(next), Some(now)) = (reached.last(), next, now)
        && now > from
    {
        out.push(Segment {
            from,
            to: now,
            from_mark,
            to_mark: next,
            growing: true,
        });
    }
    out
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(inner) = panel("Timeline", theme, area, buf) else {
        return;
    };
    let mut y = 0u16;
    match state.timeline.current() {
        Some(trial) => {
            put_line(buf, inner, y, &trial_title(trial, state.now, theme));
            y += 1;
            if y < inner.height {
                let events = kube_events::of_trial(trial, None, &state.kube_events);
                let ticks = Ticks {
                    events: &events,
                    log: log_marks(state, trial),
                };
                draw_bar(trial, state.now, &ticks, theme, inner, y, buf);
                y += 1;
            }
            put_line(buf, inner, y, &segment_labels(trial, state.now, theme));
            y += 1;
        }
        None => {
            put_line(
                buf,
                inner,
                y,
                &Line::styled(
                    if view.connection.is_some() {
                        "no trial yet: waiting for the cluster"
                    } else {
                        "no trial yet: start one (t, c, d, r) or replace a pod"
                    },
                    theme.muted(),
                ),
            );
            y += 1;
        }
    }

    // Blank separator rows only when there is room for them.
    let sep = u16::from(inner.height >= 10);
    let stats = TrialStats::of(&state.timeline.trials);
    if stats.trials > 0 && y + sep < inner.height {
        y += sep;
        let trials = readygap_core::report::trials_text(stats.trials);
        let title = format!("{trials}, {} failed", stats.failed);
        let head = format!(
            "{title:<20}{:>3}{:>9}{:>9}{:>9}",
            "n", "mean", "median", "p95"
        );
        let bold = theme.muted().add_modifier(Modifier::BOLD);
        put_line(buf, inner, y, &Line::styled(head, bold));
        y += 1;
        for m in SHOWN {
            let Some(s) = stats.get(m) else { continue };
            let line = Line::from(vec![
                Span::styled(format!("{:<20}", m.name()), theme.text()),
                Span::styled(
                    format!(
                        "{:>3}{:>9}{:>9}{:>9}",
                        s.n,
                        fmt_secs(s.mean),
                        fmt_secs(s.median),
                        fmt_secs(s.p95)
                    ),
                    theme.accent(),
                ),
            ]);
            if !put_line(buf, inner, y, &line) {
                return;
            }
            y += 1;
        }
    }

    // The last finished trials, newest first, as many as fit.
    let finished: Vec<&Trial> = state
        .timeline
        .trials
        .iter()
        .rev()
        .filter(|t| !t.is_running())
        .collect();
    if !finished.is_empty() && y + sep < inner.height {
        y += sep;
        for t in finished {
            if !put_line(buf, inner, y, &trial_row(t, theme)) {
                return;
            }
            y += 1;
        }
    }
}

fn trial_title(trial: &Trial, now: Option<Timestamp>, theme: &Theme) -> Line<'static> {
    // What the reader checks first comes first (the title is cut at the panel's width): the
    // outcome and its time, where T3/T4 came from, T2 through the Service, then the trigger.
    let mut spans = vec![Span::styled(format!("#{} ", trial.index), theme.title())];
    let elapsed = |end: Option<Timestamp>| match (trial.marks.t0, end) {
        (Some(a), Some(b)) => fmt_secs(secs(a, b)),
        _ => "–".into(),
    };
    let (status, style) = if trial.is_running() {
        (format!("running {}", elapsed(now)), theme.accent())
    } else if trial.is_ok() {
        (format!("✓ {}", elapsed(trial.marks.t4)), theme.ok())
    } else {
        (
            format!("✗ {}", trial.reason().unwrap_or("failed")),
            theme.error(),
        )
    };
    spans.push(Span::styled(status, style));
    if let Some(source) = &trial.inference_source {
        spans.push(Span::styled(
            format!(" · T3/T4 source: {source}"),
            theme.muted(),
        ));
    }
    // The study's T2, through the Service after Ready, beside the bar's T2 on the pod.
    if let (Some(t1), Some(svc)) = (trial.marks.t1, trial.marks.t2_service) {
        spans.push(Span::styled(
            format!(" · via Service T1+{}", fmt_secs(secs(t1, svc))),
            theme.muted(),
        ));
    }
    spans.push(Span::styled(" · ", theme.muted()));
    if trial.cold.is_some() {
        spans.push(Span::styled("cold ", theme.accent()));
    }
    spans.push(Span::styled(trial.trigger.clone(), theme.text()));
    Line::from(spans)
}

/// What is ticked on the bar besides its marks.
struct Ticks<'a> {
    /// The Events of the trial's pods (those that explain it are ticked).
    events: &'a [EventRow],
    /// When the new pod's log said it listens or loads a model.
    log: Vec<Timestamp>,
}

/// The start-up lines of the trial's new pod (read from its log whether or not the Log view
/// is on), from its T0.
fn log_marks(state: &State, trial: &Trial) -> Vec<Timestamp> {
    let (Some(pod), Some(t0)) = (trial.new_pod.as_deref(), trial.marks.t0) else {
        return Vec::new();
    };
    let end = trial.marks.t4.or(state.now).unwrap_or(t0);
    let marks = state.log_tail.startup_marks(pod, t0, end);
    marks.map(|(ts, _)| ts).collect()
}

/// Draw the bar of the trial on row `y` of `area`.
fn draw_bar(
    trial: &Trial,
    now: Option<Timestamp>,
    ticks: &Ticks,
    theme: &Theme,
    area: Rect,
    y: u16,
    buf: &mut Buffer,
) {
    let segs = segments(trial, now);
    let (Some(t0), Some(end)) = (trial.marks.t0, segs.last().map(|s| s.to)) else {
        return;
    };
    let total = secs(t0, end).max(1e-3);
    let width = area.width as f64;
    let col = |t: Timestamp| ((secs(t0, t) / total) * width).round().clamp(0.0, width) as u16;
    for s in &segs {
        let (a, mut b) = (col(s.from), col(s.to));
        if b <= a && s.to > s.from {
            b = (a + 1).min(area.width);
        }
        let style = Style::new().fg(theme.segment(s.to_mark));
        let glyph = if s.growing { GROWING } else { BAR };
        for x in a..b {
            if let Some(cell) = buf.cell_mut((area.x + x, area.y + y)) {
                cell.set_symbol(glyph).set_style(style);
            }
        }
    }
    if let Some(h) = http_apart(trial).filter(|h| *h >= t0 && *h <= end) {
        let x = col(h).min(area.width.saturating_sub(1));
        if let Some(cell) = buf.cell_mut((area.x + x, area.y + y)) {
            cell.set_symbol(HTTP_TICK).set_style(theme.text());
        }
    }
    // Where the new pod's log said it listens or loads (under the Events' ticks).
    for ts in ticks.log.iter().filter(|ts| **ts >= t0 && **ts <= end) {
        let x = col(*ts).min(area.width.saturating_sub(1));
        if let Some(cell) = buf.cell_mut((area.x + x, area.y + y)) {
            cell.set_symbol(LOG_TICK).set_style(theme.accent());
        }
    }
    // Where the Events that explain the trial happened (a failed probe, a kill, a pod that
    // cannot be scheduled): a tick in the warning colour at each one's last time.
    for r in ticks
        .events
        .iter()
        .filter(|r| r.explains && r.last >= t0 && r.last <= end)
    {
        let x = col(r.last).min(area.width.saturating_sub(1));
        if let Some(cell) = buf.cell_mut((area.x + x, area.y + y)) {
            cell.set_symbol(EVENT_TICK).set_style(theme.warn());
        }
    }
}

fn segment_labels(trial: &Trial, now: Option<Timestamp>, theme: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for s in segments(trial, now) {
        let k = s.to_mark;
        let text = if s.growing {
            format!("T{}→… {} ", s.from_mark, fmt_secs(secs(s.from, s.to)))
        } else {
            format!("T{}→T{} {} ", s.from_mark, k, fmt_secs(secs(s.from, s.to)))
        };
        spans.push(Span::styled(text, Style::new().fg(theme.segment(k))));
        // The lead of "HTTP answers" over "model ready", after the segment that reached T2.
        if k == 2
            && let Some(h) = http_apart(trial)
        {
            let lead = match (trial.marks.t2, s.growing) {
                (Some(t2), false) => format!("(HTTP {} before) ", fmt_secs(secs(h, t2))),
                _ => "(HTTP answers) ".to_string(),
            };
            spans.push(Span::styled(lead, theme.muted()));
        }
    }
    if spans.is_empty() {
        spans.push(Span::styled("T0", theme.muted()));
    }
    Line::from(spans)
}

fn trial_row(t: &Trial, theme: &Theme) -> Line<'static> {
    let (mark, style) = if t.is_ok() {
        ("✓", theme.ok())
    } else {
        ("✗", theme.error())
    };
    let value = |m: Metric| t.metric(m).map_or_else(|| "–".into(), fmt_secs);
    let mut spans = vec![
        Span::styled(format!("#{:<3}", t.index), theme.muted()),
        Span::styled(format!("{mark} "), style),
        Span::styled(
            format!(
                "k8s {:>6}  func {:>6}  ",
                value(Metric::K8sRecovery),
                value(Metric::FunctionalRecovery)
            ),
            theme.text(),
        ),
    ];
    match t.reason() {
        Some(r) => spans.push(Span::styled(r.to_string(), theme.error())),
        None => spans.push(Span::styled(t.trigger.clone(), theme.muted())),
    }
    Line::from(spans)
}
