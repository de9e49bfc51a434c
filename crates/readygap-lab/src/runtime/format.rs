//! Text formats the runtime shares with real Ollama: RFC 3339 times, the CLI's human sizes and
//! times (`5.7 GB`, `4 minutes from now`), and its tables (`ollama ps`, `ollama list`), laid out
//! like the published snapshots in `llama3.1-8b/environment/`.

use chrono::{DateTime, SecondsFormat, Utc};

/// RFC 3339 with nanoseconds, as Go's `time.RFC3339Nano` prints UTC times.
pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Ollama's `format.HumanBytes` (decimal units).
pub(crate) fn human_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "KB"),
    ];
    let Some((size, unit)) = UNITS.iter().find(|(size, _)| b >= *size) else {
        return format!("{b} B");
    };
    let value = b as f64 / *size as f64;
    if value >= 10.0 {
        format!("{} {unit}", value as u64)
    } else if value != value.trunc() {
        format!("{value:.1} {unit}")
    } else {
        format!("{} {unit}", value as u64)
    }
}

/// Ollama's `format.HumanDuration`.
pub(crate) fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < 1 {
        return "Less than a second".to_string();
    }
    if seconds == 1 {
        return "1 second".to_string();
    }
    if seconds < 60 {
        return format!("{seconds} seconds");
    }
    let minutes = d.num_minutes();
    if minutes == 1 {
        return "About a minute".to_string();
    }
    if minutes < 60 {
        return format!("{minutes} minutes");
    }
    let hours = (d.num_milliseconds() as f64 / 3_600_000.0).round() as i64;
    match hours {
        1 => "About an hour".to_string(),
        h if h < 48 => format!("{h} hours"),
        h if h < 24 * 7 * 2 => format!("{} days", h / 24),
        h if h < 24 * 30 * 2 => format!("{} weeks", h / 24 / 7),
        h if h < 24 * 365 * 2 => format!("{} months", h / 24 / 30),
        _ => format!("{} years", d.num_hours() / 24 / 365),
    }
}

/// Ollama's `format.HumanTime`: `4 minutes from now`, `12 minutes ago`, `Forever`.
pub(crate) fn human_time(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let delta = now.signed_duration_since(t);
    if delta.num_days() / 365 < -20 {
        "Forever".to_string()
    } else if delta < chrono::Duration::zero() {
        format!("{} from now", human_duration(-delta))
    } else {
        format!("{} ago", human_duration(delta))
    }
}

/// A table like the Ollama CLI prints: columns padded to their widest cell plus four spaces;
/// the last header cell is padded to the column width plus one space.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .chain([h.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let last = headers.len().saturating_sub(1);
    let mut out = String::new();
    for (i, h) in headers.iter().enumerate() {
        let pad = if i == last { 1 } else { 4 };
        out.push_str(&format!("{h:<w$}", w = widths[i] + pad));
    }
    out.push('\n');
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0) + 4;
            out.push_str(&format!("{cell:<w$}"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_like_the_cli() {
        assert_eq!(human_bytes(5_667_214_541), "5.7 GB");
        assert_eq!(human_bytes(4_920_753_328), "4.9 GB");
        assert_eq!(human_bytes(2_000_000_000), "2 GB");
        assert_eq!(human_bytes(14_987_264), "14 MB");
        assert_eq!(human_bytes(999), "999 B");
        let now = Utc::now();
        assert_eq!(
            human_time(now + chrono::Duration::seconds(4 * 60 + 50), now),
            "4 minutes from now"
        );
        assert_eq!(
            human_time(now - chrono::Duration::minutes(12), now),
            "12 minutes ago"
        );
        assert_eq!(
            human_time(now + chrono::Duration::nanoseconds(i64::MAX), now),
            "Forever"
        );
        assert_eq!(
            human_time(now + chrono::Duration::milliseconds(300), now),
            "Less than a second from now"
        );
    }

    #[test]
    fn tables_match_the_published_snapshot_layout() {
        // llama3.1-8b/environment/resident-model-snapshot.txt and runtime-snapshot.txt.
        let headers = ["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"];
        let ps = table(
            &headers,
            &[vec![
                "llama3.1:8b".into(),
                "46e0c10c039e".into(),
                "5.7 GB".into(),
                "17%/83% CPU/GPU".into(),
                "4096".into(),
                "4 minutes from now".into(),
            ]],
        );
        assert_eq!(
            ps,
            "NAME           ID              SIZE      PROCESSOR          CONTEXT    UNTIL              \n\
             llama3.1:8b    46e0c10c039e    5.7 GB    17%/83% CPU/GPU    4096       4 minutes from now    \n"
        );
        assert_eq!(
            table(&headers, &[]),
            "NAME    ID    SIZE    PROCESSOR    CONTEXT    UNTIL \n"
        );
        let list = table(
            &["NAME", "ID", "SIZE", "MODIFIED"],
            &[vec![
                "llama3.1:8b".into(),
                "46e0c10c039e".into(),
                "4.9 GB".into(),
                "12 minutes ago".into(),
            ]],
        );
        assert_eq!(
            list,
            "NAME           ID              SIZE      MODIFIED       \n\
             llama3.1:8b    46e0c10c039e    4.9 GB    12 minutes ago    \n"
        );
    }
}
