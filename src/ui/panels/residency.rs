//! The Residency panel: per pod runtime, the models resident in memory (`/api/ps`: name, size,
//! the part in VRAM apart, expires-in relative to `state.now`), the models on disk, and a
//! warning when the resident host memory (size − size_vram: VRAM is charged to no cgroup)
//! adds up to 85 % or more of the container's memory limit. The first line names the
//! runtime and what its API can and cannot tell ([`can_tell`]); a model the runtime is
//! still loading (llama-server's router) says so; the runtime's own load figures from
//! `/metrics` (llama-server with `--metrics`, vLLM) follow the pod's line ([`metrics_line`]).

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_age, panel, put_lines, secs, wrap};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use readygap_core::state::State;
use readygap_core::units::Gib;

/// The share of the memory limit from which resident models are a warning.
pub const WARN_FRACTION: f64 = 0.85;

/// What a runtime's API tells of residency, and what it does not (by the runtime's name as
/// the session records it: `llamacpp (--runtime)`).
pub fn can_tell(runtime: &str) -> &'static str {
    match runtime.split_whitespace().next().unwrap_or("") {
        "ollama" => "/api/ps: resident models, size, VRAM, expiry",
        "llamacpp" => {
            "/health: loading vs ready; router /models: loading/loaded per model; /metrics with --metrics; one-model server: no VRAM, no expiry"
        }
        "openai" => {
            "/v1/models: served models only; memory is preallocated (resident = up), no loading state; vLLM /metrics: running, waiting, KV cache"
        }
        _ => "",
    }
}

/// The runtime's `/metrics` figures in one line: requests running and waiting, KV cache in
/// use, tokens generated; `None` when it exported none.
pub fn metrics_line(m: &readygap_core::event::RuntimeMetrics) -> Option<String> {
    let parts: Vec<String> = [
        m.running.map(|r| format!("running {r:.0}")),
        m.waiting.map(|w| format!("waiting {w:.0}")),
        m.kv_cache.map(|k| format!("KV cache {:.0}%", 100.0 * k)),
        m.tokens_generated
            .map(|t| format!("{t:.0} tokens generated")),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| format!("  /metrics: {}", parts.join(" · ")))
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(inner) = panel("Residency", theme, area, buf) else {
        return;
    };
    let width = inner.width as usize;
    let mut lines: Vec<Line> = Vec::new();
    if let Some(rt) = &state.session.runtime {
        // Wrapped, never cut: what the API can tell is the reason a figure is missing.
        let head = format!("{rt}: ");
        for (i, l) in wrap(
            &format!("{head}{}", can_tell(rt)),
            width.saturating_sub(1),
            4,
        )
        .into_iter()
        .enumerate()
        {
            let l = l.strip_prefix(' ').unwrap_or(&l).to_string();
            match l.strip_prefix(&head).filter(|_| i == 0) {
                Some(rest) => lines.push(Line::from(vec![
                    Span::styled(head.clone(), theme.accent()),
                    Span::styled(rest.to_string(), theme.muted()),
                ])),
                None => lines.push(Line::styled(format!("  {l}"), theme.muted())),
            }
        }
    }
    if state.runtimes.is_empty() {
        lines.push(Line::styled("no runtime seen yet", theme.muted()));
    }
    let focus = view.focus_pod(state);
    // The focused pod first, then the others.
    let mut pods: Vec<&String> = state.runtimes.keys().collect();
    pods.sort_by_key(|p| (Some(p.as_str()) != focus.as_deref(), p.to_string()));
    for pod in pods {
        let Some(rt) = state.runtimes.get(pod) else {
            continue;
        };
        let probe = match rt.last_probe_ok {
            Some(true) => Span::styled(
                format!(" up {:.0}ms", rt.last_latency_ms.unwrap_or(0.0)),
                theme.ok(),
            ),
            Some(false) if rt.last_probe_answered => {
                Span::styled(" answers, not ready", theme.warn())
            }
            Some(false) => Span::styled(" down", theme.error()),
            None => Span::styled(" not probed", theme.muted()),
        };
        lines.push(Line::from(vec![
            Span::styled(pod.clone(), theme.accent().add_modifier(Modifier::BOLD)),
            probe,
        ]));
        // Why it is not ready, in the runtime's words, on lines of its own (wrapped).
        if rt.last_probe_ok == Some(false) {
            let why = rt.last_probe_error.as_deref().unwrap_or_default();
            for l in wrap(why, width.saturating_sub(1), 2) {
                lines.push(Line::styled(format!(" {l}"), theme.warn()));
            }
        }
        if let Some(text) = rt.metrics.as_ref().and_then(|(_, m)| metrics_line(m)) {
            lines.push(Line::styled(text, theme.muted()));
        }
        let total: u64 = rt.resident.iter().map(|m| m.host_bytes()).sum();
        let limit = state.memory.get(pod).and_then(|m| m.limit);
        if let Some(limit) = limit.filter(|l| *l > 0)
            && total as f64 >= WARN_FRACTION * limit as f64
        {
            lines.push(Line::styled(
                format!(
                    "  ⚠ {:.0}% of {} limit resident",
                    100.0 * total as f64 / limit as f64,
                    Gib(limit)
                ),
                theme.warn().add_modifier(Modifier::BOLD),
            ));
        }
        if rt.resident.is_empty() {
            lines.push(Line::styled("  nothing resident", theme.muted()));
        }
        for m in &rt.resident {
            let expires = match (m.expires_at, state.now) {
                (Some(e), Some(now)) if e > now => format!("expires in {}", fmt_age(secs(now, e))),
                (Some(_), Some(_)) => "expired".into(),
                _ => String::new(),
            };
            let mut spans = vec![
                Span::styled(format!("  {} ", m.name), theme.text()),
                Span::styled(format!("{} ", Gib(m.size)), theme.accent()),
            ];
            if let Some(st) = &m.status {
                spans.push(Span::styled(format!("{st} "), theme.warn()));
            }
            if m.size_vram > 0 {
                spans.push(Span::styled(
                    format!("VRAM {} ", Gib(m.size_vram)),
                    theme.muted(),
                ));
            }
            spans.push(Span::styled(expires, theme.muted()));
            lines.push(Line::from(spans));
        }
        if !rt.on_disk.is_empty() {
            lines.push(Line::styled("  on disk:", theme.muted()));
            for m in &rt.on_disk {
                lines.push(Line::from(vec![
                    Span::styled(format!("    {} ", m.name), theme.text()),
                    Span::styled(Gib(m.size).to_string(), theme.muted()),
                ]));
            }
        }
    }
    put_lines(buf, inner, &lines);
}
