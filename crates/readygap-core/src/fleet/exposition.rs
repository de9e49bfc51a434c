//! The registry as text: OpenMetrics 1.0 (what Prometheus asks for first) and the older
//! Prometheus text format 0.0.4 (what `promtool check metrics` and plain `curl` read), from
//! one writer. The differences that matter (OpenMetrics spec, prometheus/OpenMetrics
//! `specification/OpenMetrics.md`; Prometheus `expfmt` text format):
//! - a counter family is named without `_total` in OpenMetrics (`# TYPE readygap_trials
//!   counter`, sample `readygap_trials_total`), with it in the text format;
//! - OpenMetrics has `# UNIT` lines and ends with `# EOF`;
//! - label values escape `\`, `"` and newlines in both.
//!
//! [`negotiate`] picks the format from a scrape's `Accept` header.

use super::{FleetMetrics, HISTOGRAMS, SeriesKey, SeriesValues};
use std::fmt::Write;

/// An exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// The Prometheus text format 0.0.4.
    Text,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// OpenMetrics when the `Accept` header names it (Prometheus sends
/// `application/openmetrics-text;version=1.0.0,...;q=0.75,text/plain;version=0.0.4;q=0.5,...`),
/// else the text format.
pub fn negotiate(accept: Option<&str>) -> Format {
    let wants = accept.is_some_and(|a| {
        a.split(',').any(|part| {
            let mut fields = part.split(';').map(str::trim);
            let media = fields.next().unwrap_or_default();
            let q = fields
                .filter_map(|f| f.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            media.eq_ignore_ascii_case("application/openmetrics-text") && q > 0.0
        })
    });
    if wants {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// A label value with `\`, `"` and newlines escaped.
pub fn escape(v: &str) -> String {
    // The backslash first, so the escapes added after it stay single.
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A float as both formats read it (`+Inf`, `1.0`, `0.25`).
fn num(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else if v.is_nan() {
        "NaN".into()
    } else {
        format!("{v:?}")
    }
}

fn labels(k: &SeriesKey) -> String {
    format!(
        "namespace=\"{}\",deployment=\"{}\",model=\"{}\",runtime=\"{}\"",
        escape(&k.namespace),
        escape(&k.deployment),
        escape(&k.model),
        escape(&k.runtime)
    )
}

/// The family header: HELP, TYPE and (OpenMetrics, when given) UNIT. `name` is the
/// family's OpenMetrics name; counters get `_total` in the text format.
fn header(out: &mut String, f: Format, name: &str, kind: &str, unit: Option<&str>, help: &str) {
    let name = match (f, kind) {
        (Format::Text, "counter") => format!("{name}_total"),
        _ => name.to_string(),
    };
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if let (Format::OpenMetrics, Some(u)) = (f, unit) {
        let _ = writeln!(out, "# UNIT {name} {u}");
    }
}

/// Reads one counter of a series.
type Count = fn(&SeriesValues) -> u64;

/// The whole registry in format `f`.
pub fn encode(m: &FleetMetrics, f: Format) -> String {
    let mut out = String::new();
    for (i, (_, name, help)) in HISTOGRAMS.iter().enumerate() {
        header(&mut out, f, name, "histogram", Some("seconds"), help);
        for (k, s) in m.series() {
            let h = &s.histograms[i];
            let l = labels(k);
            for (le, n) in h.cumulative() {
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"{}\"}} {n}", num(le));
            }
            let _ = writeln!(out, "{name}_sum{{{l}}} {}", num(h.sum));
            let _ = writeln!(out, "{name}_count{{{l}}} {}", h.count);
        }
    }
    let counters: [(&str, &str, Count); 2] = [
        (
            "readygap_trials",
            "Replacements measured as trials (ended: completed or failed).",
            |s| s.trials,
        ),
        (
            "readygap_trial_failures",
            "Trials that ended failed (a timeout, no inference observed, an OOM kill, ...).",
            |s| s.failures,
        ),
    ];
    for (name, help, get) in counters {
        header(&mut out, f, name, "counter", None, help);
        for (k, s) in m.series() {
            let _ = writeln!(out, "{name}_total{{{}}} {}", labels(k), get(s));
        }
    }
    header(
        &mut out,
        f,
        "readygap_verdicts",
        "counter",
        None,
        "Verdicts on trials by kind (readiness contract and OOM detector).",
    );
    for (k, s) in m.series() {
        for (v, n) in &s.verdicts {
            let _ = writeln!(
                out,
                "readygap_verdicts_total{{{},verdict=\"{}\"}} {n}",
                labels(k),
                escape(v)
            );
        }
    }
    header(
        &mut out,
        f,
        "readygap_last_trial_timestamp_seconds",
        "gauge",
        Some("seconds"),
        "When the last trial ended (Unix time).",
    );
    for (k, s) in m.series() {
        if let Some(t) = s.last_trial {
            let _ = writeln!(
                out,
                "readygap_last_trial_timestamp_seconds{{{}}} {}",
                labels(k),
                num(t)
            );
        }
    }
    header(
        &mut out,
        f,
        "readygap_watched_deployments",
        "gauge",
        None,
        "Deployments matching the selector that are being watched.",
    );
    let _ = writeln!(out, "readygap_watched_deployments {}", m.watched);
    header(
        &mut out,
        f,
        "readygap_series_dropped",
        "counter",
        None,
        "Trials not kept in a series because the series limit was reached.",
    );
    let _ = writeln!(out, "readygap_series_dropped_total {}", m.dropped);
    if f == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_asks_for_openmetrics_and_curl_gets_text() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                    version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(negotiate(Some(prom)), Format::OpenMetrics);
        assert_eq!(negotiate(Some("*/*")), Format::Text);
        assert_eq!(negotiate(None), Format::Text);
        assert_eq!(
            negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(num(1.0), "1.0");
        assert_eq!(num(0.25), "0.25");
        assert_eq!(num(f64::INFINITY), "+Inf");
    }
}
