//! Units: durations and quantities as people and Kubernetes write them, and sizes as the
//! screen shows them. One scanner reads every duration readygap accepts (the command line's
//! `500ms`/`30s`/`2m`, replay offsets like `1m30s`, Go's `time.ParseDuration` syntax that
//! Ollama's `keep_alive` uses); one parser reads Kubernetes quantities; one formatter
//! writes GiB.

use std::fmt;
use std::time::Duration;

/// The terms of a duration: numbers each followed by a unit (`1h2m3.5s` → `[(1, "h"),
/// (2, "m"), (3.5, "s")]`). A unit is the run of letters after a number; `None` when a
/// term has no number or the number does not parse. An empty text has no terms.
pub fn duration_terms(text: &str) -> Option<Vec<(f64, &str)>> {
    let mut rest = text;
    let mut terms = Vec::new();
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        terms.push((number, &rest[..unit_len]));
        rest = &rest[unit_len..];
    }
    Some(terms)
}

/// Milliseconds of the units readygap's own durations use (largest first).
const UNITS_MS: [(&str, f64); 4] = [
    ("h", 3_600_000.0),
    ("m", 60_000.0),
    ("s", 1_000.0),
    ("ms", 1.0),
];

/// `90s`, `1m30s`, `1h2m3.5s`, `500ms`, `1.5m` → ms: units in decreasing order, each once,
/// no bare numbers (a replay offset, `--from`).
pub fn parse_offset_ms(text: &str) -> Option<i64> {
    let terms = duration_terms(text).filter(|t| !t.is_empty())?;
    let mut total = 0.0;
    let mut last_rank: Option<usize> = None;
    for (n, unit) in terms {
        let rank = UNITS_MS.iter().position(|(u, _)| *u == unit)?;
        if last_rank.is_some_and(|l| rank <= l) {
            return None;
        }
        last_rank = Some(rank);
        total += n * UNITS_MS[rank].1;
    }
    (total.is_finite() && total < 1e15).then_some(total.round() as i64)
}

/// A duration of the command line in ms: `500ms`, `30s`, `2m`, compounds as in
/// [`parse_offset_ms`], or a bare number of seconds.
fn duration_ms(text: &str) -> Option<f64> {
    let text = text.trim();
    match duration_terms(text)?.as_slice() {
        [] => None,
        [(n, "")] => Some(n * 1000.0),
        _ => parse_offset_ms(text).map(|ms| ms as f64),
    }
}

/// Parses `500ms`, `30s`, `2m` (or `1m30s`), or a bare number of seconds: positive and at
/// most a day.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let ms = duration_ms(text)
        .ok_or_else(|| format!("invalid duration {text:?} (try 30s, 500ms or 2m)"))?;
    if !ms.is_finite() || ms <= 0.0 || ms > 86_400_000.0 {
        return Err(format!(
            "duration {text:?} must be positive and at most a day"
        ));
    }
    Ok(Duration::from_millis(ms.round() as u64))
}

/// [`parse_duration`], and zero (`0`, `0s`, `0ms`) too (a pause that may be none).
pub fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    if duration_ms(text) == Some(0.0) {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// Go's `time.ParseDuration`, in seconds: `5m`, `1h30m`, `300ms`, `-1s`, `0`, with Go's
/// error texts (Ollama's `keep_alive` is parsed by it; see Go's src/time/format.go).
pub fn parse_go_duration(text: &str) -> Result<f64, String> {
    let err = || format!("time: invalid duration \"{text}\"");
    let s = text.trim();
    let (sign, rest) = match s.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    let terms = duration_terms(rest)
        .filter(|t| !t.is_empty())
        .ok_or_else(err)?;
    let mut total = 0.0;
    for (number, unit) in terms {
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("time: missing unit in duration \"{text}\"")),
            _ => return Err(format!("time: unknown unit in duration \"{text}\"")),
        };
        total += number * scale;
    }
    Ok(sign * total)
}

/// A Kubernetes memory quantity (`32Gi`, `32893436Ki`, `1G`, plain bytes) in bytes.
pub fn parse_memory(q: &str) -> Option<u64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(q.len());
    let (num, unit) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: f64 = match unit {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => return None,
    };
    let bytes = n * mult;
    (bytes.is_finite() && bytes >= 0.0).then_some(bytes as u64)
}

/// A Kubernetes CPU quantity (`8`, `7800m`) in cores.
pub fn parse_cpu(q: &str) -> Option<f64> {
    let q = q.trim();
    let cores = match q.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok()? / 1000.0,
        None => q.parse::<f64>().ok()?,
    };
    (cores.is_finite() && cores > 0.0).then_some(cores)
}

/// Bytes as GiB: `{}` writes two decimals (`1.50 GiB`), a precision writes that many
/// (`{:.1}` → `1.5 GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gib(pub u64);

impl fmt::Display for Gib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimals = f.precision().unwrap_or(2);
        write!(
            f,
            "{:.*} GiB",
            decimals,
            self.0 as f64 / (1u64 << 30) as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_durations() {
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("NaN").is_err());
        assert!(parse_duration("2d").is_err());
        assert!(parse_duration("25h").is_err());
    }

    #[test]
    fn durations_accept_zero_for_a_pause() {
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(
            parse_duration_or_zero("250ms"),
            Ok(Duration::from_millis(250))
        );
        assert!(parse_duration_or_zero("soon").is_err());
    }

    #[test]
    fn offsets_have_units_in_decreasing_order() {
        assert_eq!(parse_offset_ms("90s"), Some(90_000));
        assert_eq!(parse_offset_ms("1m30s"), Some(90_000));
        assert_eq!(parse_offset_ms("1h2m3.5s"), Some(3_723_500));
        assert_eq!(parse_offset_ms("500ms"), Some(500));
        assert_eq!(parse_offset_ms("1.5m"), Some(90_000));
        assert_eq!(parse_offset_ms("1s1m"), None);
        assert_eq!(parse_offset_ms("1s1s"), None);
        assert_eq!(parse_offset_ms("90"), None);
        assert_eq!(parse_offset_ms("90x"), None);
        assert_eq!(parse_offset_ms(""), None);
    }

    #[test]
    fn gib_has_two_decimals_unless_told() {
        assert_eq!(Gib(3 << 29).to_string(), "1.50 GiB");
        assert_eq!(format!("{:.1}", Gib(3 << 29)), "1.5 GiB");
        assert_eq!(format!("{:.1}", Gib(0)), "0.0 GiB");
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_memory("32Gi"), Some(32 << 30));
        assert_eq!(parse_memory("32863436Ki"), Some(32_863_436 * 1024));
        assert_eq!(parse_memory("1G"), Some(1_000_000_000));
        assert_eq!(parse_memory("12345"), Some(12345));
        assert_eq!(parse_memory("lots"), None);
        assert_eq!(parse_memory("5Xi"), None);
        assert_eq!(parse_cpu("8"), Some(8.0));
        assert_eq!(parse_cpu("7800m"), Some(7.8));
        assert_eq!(parse_cpu("0"), None);
        assert_eq!(parse_cpu("x"), None);
    }

    #[test]
    fn go_durations_parse_like_go() {
        assert_eq!(parse_go_duration("5m"), Ok(300.0));
        assert_eq!(parse_go_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_go_duration("300ms"), Ok(0.3));
        assert_eq!(parse_go_duration("0"), Ok(0.0));
        assert_eq!(parse_go_duration("-1s"), Ok(-1.0));
        assert_eq!(parse_go_duration("1.5s"), Ok(1.5));
        assert!(
            parse_go_duration("10")
                .unwrap_err()
                .contains("missing unit")
        );
        assert!(
            parse_go_duration("5x")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("m").is_err());
    }
}
