//! `readygap report` and `readygap export`: statistics of recordings (`.jsonl`, replayed
//! through the reducer) and of the study's CSV files, as a table, CSV, JSON or Markdown, or
//! drawn: a self-contained HTML page (`html`) and the bars of every input as SVG (`svg`).

pub mod document;
pub mod figures;
pub mod html;
pub mod markup;
pub mod svg;

use crate::record::{jsonl, labcsv};
use crate::state::State;
use crate::stats::{Summary, TrialStats};
use crate::timeline::{Metric, Trial};
use eyre::{Result, WrapErr, eyre};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Output formats of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
    Markdown,
    Html,
    Svg,
}

impl Format {
    /// The names on the command line.
    pub const NAMES: [(&'static str, Format); 6] = [
        ("table", Format::Table),
        ("csv", Format::Csv),
        ("json", Format::Json),
        ("markdown", Format::Markdown),
        ("html", Format::Html),
        ("svg", Format::Svg),
    ];
}

/// The statistics of one file.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub path: String,
    pub trials: usize,
    pub failed: usize,
    /// Which trials failed and why (the count alone does not say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_trials: Vec<FailedTrial>,
    pub metrics: BTreeMap<String, Summary>,
    /// OOM verdicts and warnings of a recording, by kind (`overlapping_residency_oom`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub verdicts: BTreeMap<String, usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Every trial as its document ([`document::trial`]): the same objects `run --format
    /// json` gives in its `trials` (here `trials` stays the count).
    #[serde(serialize_with = "document::serialize_trials")]
    pub trial_list: Vec<Trial>,
    /// Readiness-contract verdicts of a recording with their evidence
    /// (`verdict::ContractVerdict::to_json`); their counts are in `verdicts`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readiness_verdicts: Vec<serde_json::Value>,
    /// Statistics per trial condition (`warm`, `cold`, a study CSV's condition column):
    /// present when any trial has one, so warm and cold trials are never silently mixed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, ConditionReport>,
    /// What the file says about how it was measured, where it tells: `cache` (warm, cold,
    /// mixed) and `readiness` (shallow, inference-aware), with the evidence.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub measured: BTreeMap<String, String>,
    /// The runtime's start-up phases as its log told them (`Marks::startup`: vLLM's
    /// `weights_loaded`, `kv_cache_*`, `graphs_captured`, `engine_ready`; `model_loaded`,
    /// `listening`): statistics of each one's seconds since T0, over the trials that have
    /// it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub startup_phases: BTreeMap<String, Summary>,
}

/// Statistics of each start-up phase's seconds since T0, over `trials`.
pub fn startup_phases(trials: &[Trial]) -> BTreeMap<String, Summary> {
    let mut since: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in trials {
        let Some(t0) = t.marks.t0 else { continue };
        for (name, at) in &t.marks.startup {
            let s = (*at - t0).num_microseconds().unwrap_or(0) as f64 / 1e6;
            since.entry(name).or_default().push(s);
        }
    }
    since
        .into_iter()
        .filter_map(|(name, v)| Some((name.to_string(), Summary::of(&v)?)))
        .collect()
}

/// A failed trial: its number, what started it, when, and why it failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedTrial {
    pub index: u32,
    pub trigger: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t0: Option<crate::event::Timestamp>,
    pub reason: String,
}

impl FailedTrial {
    /// The failed ones of `trials`, in order.
    pub fn of(trials: &[Trial]) -> Vec<FailedTrial> {
        trials
            .iter()
            .filter_map(|t| {
                Some(FailedTrial {
                    index: t.index,
                    trigger: t.trigger.clone(),
                    t0: t.marks.t0,
                    reason: t.reason()?.to_string(),
                })
            })
            .collect()
    }
}

/// The statistics of the trials of one condition.
#[derive(Debug, Clone, Serialize)]
pub struct ConditionReport {
    pub trials: usize,
    pub failed: usize,
    pub metrics: BTreeMap<String, Summary>,
}

impl ConditionReport {
    /// The statistics of `trials` (finished ones).
    pub fn of<'a>(trials: impl IntoIterator<Item = &'a Trial>) -> Self {
        let stats = TrialStats::of(trials);
        let metrics = stats.metrics.into_iter();
        ConditionReport {
            trials: stats.trials,
            failed: stats.failed,
            metrics: metrics.map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }
}

/// Trials without a condition are listed under this name when others have one.
pub const UNFLAGGED: &str = "unflagged";

/// Per-condition statistics of `trials` (empty when no trial has a condition).
pub fn conditions_of(trials: &[Trial]) -> BTreeMap<String, ConditionReport> {
    if trials.iter().all(|t| t.condition.is_none()) {
        return BTreeMap::new();
    }
    let mut groups: BTreeMap<String, Vec<&Trial>> = BTreeMap::new();
    for t in trials {
        let c = t.condition.clone().unwrap_or_else(|| UNFLAGGED.to_string());
        groups.entry(c).or_default().push(t);
    }
    groups
        .into_iter()
        .map(|(c, ts)| (c, ConditionReport::of(ts)))
        .collect()
}

/// What the trials' own columns tell of the conditions of a study file: `cache` from the
/// trials' conditions; `readiness` from the first inference after Ready — it paid the model
/// load (`load_duration` ≥ 0.25 s: Ready came before the model was loaded, a shallow or no
/// readiness probe) or it did not (the model was loaded before Ready: inference-aware);
/// `ready_to_runtime` when it is negative in some trials, and why it can be.
pub fn measured_conditions(trials: &[Trial]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut conds: std::collections::BTreeSet<&str> = trials
        .iter()
        .filter_map(|t| t.condition.as_deref())
        .collect();
    // Some trials flagged and others not: say so; the flagged ones never name the file.
    if !conds.is_empty() && trials.iter().any(|t| t.condition.is_none()) {
        conds.insert(UNFLAGGED);
    }
    let cache = match conds.len() {
        0 => None,
        1 => conds.first().map(|c| c.to_string()),
        _ => Some(format!("mixed ({})", Vec::from_iter(conds).join(", "))),
    };
    out.extend(cache.map(|c| ("cache".to_string(), c)));
    let mut loads: Vec<f64> = trials
        .iter()
        .filter(|t| t.is_ok() && t.marks.t1.is_some() && t.marks.t3.is_some())
        .filter_map(|t| t.durations.load_ns.map(|n| n as f64 / 1e9))
        .collect();
    if !loads.is_empty() {
        loads.sort_by(f64::total_cmp);
        let median = crate::stats::percentile(&loads, 50.0);
        let (kind, why) = if median >= 0.25 {
            (
                "shallow",
                "the first inference after Ready loaded the model",
            )
        } else {
            ("inference-aware", "the model was loaded before Ready")
        };
        let text = format!("{kind} ({why}: median load_duration {median:.3} s)");
        out.insert("readiness".into(), text);
    }
    // A negative T2 − T1 is a fact of the probe, not an error: say why where it occurs.
    let r2r: Vec<f64> = trials
        .iter()
        .filter_map(|t| t.metric(crate::timeline::Metric::ReadyToRuntime))
        .collect();
    let negative = r2r.iter().filter(|v| **v < 0.0).count();
    if negative > 0 {
        let service = trials
            .iter()
            .filter(|t| {
                t.metric(crate::timeline::Metric::ReadyToRuntimeService)
                    .is_some()
            })
            .count();
        let compare = if service > 0 {
            format!(
                "; `ready_to_runtime_service` (the first answer through the Service after Ready, \
                 in {}) is the figure to compare with the study's",
                trials_text(service)
            )
        } else {
            String::new()
        };
        let text = format!(
            "negative in {negative} of {}: the runtime answered on the pod's address before the \
             pod was Ready (a readiness probe that needs the runtime, as the inference-aware one \
             does, passes only after it answers); the study's T2 was an answer through the \
             Service, which cannot come before Ready{compare}",
            trials_text(r2r.len())
        );
        out.insert("ready_to_runtime".to_string(), text);
    }
    out
}

impl FileReport {
    /// Build a report from trials.
    pub fn from_trials(path: &str, trials: Vec<Trial>, warnings: Vec<String>) -> Self {
        let all = ConditionReport::of(&trials);
        FileReport {
            path: path.to_string(),
            trials: all.trials,
            failed: all.failed,
            failed_trials: FailedTrial::of(&trials),
            metrics: all.metrics,
            verdicts: BTreeMap::new(),
            warnings,
            conditions: conditions_of(&trials),
            startup_phases: startup_phases(&trials),
            trial_list: trials,
            readiness_verdicts: Vec::new(),
            measured: BTreeMap::new(),
        }
    }
}

/// The whole report (the JSON shape of `report --format json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub files: Vec<FileReport>,
}

/// What a file yields: its trials, warnings, and metrics that are not per trial.
#[derive(Default)]
pub struct Loaded {
    pub trials: Vec<Trial>,
    pub warnings: Vec<String>,
    pub extra: BTreeMap<String, Summary>,
    pub verdicts: BTreeMap<String, usize>,
    /// Readiness-contract verdicts with evidence (recordings).
    pub readiness_verdicts: Vec<serde_json::Value>,
    /// What a study file's columns tell of its conditions.
    pub measured: BTreeMap<String, String>,
}

/// Trials of a file: a recording replayed through the reducer, or a study CSV.
pub fn load_trials(path: &Path) -> Result<Loaded> {
    let is_csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv {
        let csv = labcsv::import(path)?;
        return Ok(Loaded {
            measured: measured_conditions(&csv.trials),
            trials: csv.trials,
            warnings: csv.warnings,
            extra: csv.metrics,
            ..Loaded::default()
        });
    }
    let mut state = State::new();
    let (_, warnings) = jsonl::for_each(path, |ev| state.apply(&ev))?;
    Ok(Loaded::of_state(&state, warnings))
}

impl Loaded {
    /// What a session's state yields: a replayed recording's, or the runner's own at the
    /// end of `run` (so the two reports agree).
    pub fn of_state(state: &State, warnings: Vec<String>) -> Loaded {
        let verdicts = state
            .oom
            .counts()
            .into_iter()
            .chain(state.contract.counts())
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let readiness_verdicts = state
            .contract
            .verdicts
            .iter()
            .map(|v| v.to_json())
            .collect();
        // A recording says its readiness itself (verdicts); the cache and a negative
        // ready_to_runtime are said as for a study file.
        let measured = measured_conditions(&state.timeline.trials)
            .into_iter()
            .filter(|(k, _)| k == "cache" || k == "ready_to_runtime")
            .collect();
        Loaded {
            trials: state.timeline.trials.clone(),
            warnings,
            verdicts,
            readiness_verdicts,
            measured,
            ..Loaded::default()
        }
    }
}

impl FileReport {
    /// The report of what a file (or a run) yielded, labelled `path`.
    pub fn of_loaded(path: &str, l: Loaded) -> FileReport {
        let mut r = FileReport::from_trials(path, l.trials, l.warnings);
        r.metrics.extend(l.extra);
        r.verdicts = l.verdicts;
        r.readiness_verdicts = l.readiness_verdicts;
        r.measured = l.measured;
        r
    }
}

/// Report on one file.
pub fn report_file(path: &Path) -> Result<FileReport> {
    let l = load_trials(path)?;
    Ok(FileReport::of_loaded(&path.display().to_string(), l))
}

/// Files given on the command line; directories are searched for `.csv` and `.jsonl` files.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found).wrap_err_with(|| format!("reading directory {}", p.display()))?;
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    if out.is_empty() {
        return Err(eyre!("no recordings or CSV files found"));
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "csv" || e == "jsonl") {
            out.push(p);
        }
    }
    Ok(())
}

/// Order of rows: the study's metrics first, then any others.
fn ordered(metrics: &BTreeMap<String, Summary>) -> Vec<(&str, &Summary)> {
    let mut rows: Vec<(&str, &Summary)> = metrics.iter().map(|(k, v)| (k.as_str(), v)).collect();
    rows.sort_by_key(|(k, _)| {
        Metric::ALL
            .iter()
            .position(|m| m.name() == *k)
            .unwrap_or(usize::MAX)
    });
    rows
}

fn is_bytes(name: &str) -> bool {
    name == Metric::MemoryAfter.name()
}

fn is_count(name: &str) -> bool {
    name.ends_with("_count") || name.ends_with("_samples")
}

fn cell(name: &str, v: f64) -> String {
    if is_bytes(name) || is_count(name) {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Render the report.
pub fn render(report: &Report, format: Format) -> Result<String> {
    let mut out = String::new();
    match format {
        Format::Html => out = html::render(report)?,
        Format::Svg => out = svg::bars(&figures::of_report(report)?, true),
        Format::Json => {
            out = serde_json::to_string_pretty(report)?;
            out.push('\n');
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record([
                "file", "metric", "unit", "n", "mean", "median", "p95", "min", "max", "stddev",
            ])?;
            for f in &report.files {
                for (name, s) in ordered(&f.metrics) {
                    let mut record = vec![f.path.clone()];
                    record.extend(row(name, s));
                    record.push(cell(name, s.stddev));
                    w.write_record(record)?;
                }
            }
            out = String::from_utf8(w.into_inner().map_err(|e| eyre!("{e}"))?)?;
        }
        Format::Table | Format::Markdown => {
            let md = format == Format::Markdown;
            for (i, f) in report.files.iter().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                if md {
                    writeln!(out, "### {}\n", f.path)?;
                    writeln!(out, "{}, {} failed\n", trials_text(f.trials), f.failed)?;
                    writeln!(out, "{MD_HEAD}")?;
                } else {
                    writeln!(
                        out,
                        "{}  ({}, {} failed)",
                        f.path,
                        trials_text(f.trials),
                        f.failed
                    )?;
                    write_row(&mut out, &HEAD, false, "  ")?;
                }
                write_rows(&mut out, &f.metrics, md, "  ")?;
                if f.metrics.is_empty() {
                    writeln!(out, "  (no completed trial)")?;
                }
                if !f.verdicts.is_empty() {
                    let list: Vec<String> = f
                        .verdicts
                        .iter()
                        .map(|(k, n)| format!("{k}: {n}"))
                        .collect();
                    writeln!(
                        out,
                        "{}verdicts: {}",
                        if md { "\n" } else { "  " },
                        list.join(", ")
                    )?;
                }
                for t in &f.failed_trials {
                    let at =
                        t.t0.map(|t0| format!(" at {}", t0.format("%H:%M:%S%.3f")))
                            .unwrap_or_default();
                    writeln!(
                        out,
                        "{}failed: trial {} ({}{at}): {}",
                        if md { "\n- " } else { "  " },
                        t.index,
                        t.trigger,
                        t.reason
                    )?;
                }
                render_conditions(&mut out, f, md)?;
            }
        }
    }
    Ok(out)
}

/// The Markdown line that shows the bars' SVG (written next to the Markdown file).
pub fn markdown_figure(svg_name: &str) -> String {
    format!(
        "\n![T0→T1→T2→T3→T4 of every trial and the mean per input, one time axis]({})\n",
        svg_name.replace(' ', "%20")
    )
}

/// The columns of a statistics table: the metric, its unit, n and [`STATS`].
const HEAD: [&str; 8] = ["metric", "unit", "n", "mean", "median", "p95", "min", "max"];

/// Reads one statistic of a summary.
type Stat = fn(&Summary) -> f64;

/// The statistics a table shows of each metric, in column order.
const STATS: [(&str, Stat); 5] = [
    ("mean", |s| s.mean),
    ("median", |s| s.median),
    ("p95", |s| s.p95),
    ("min", |s| s.min),
    ("max", |s| s.max),
];

/// The head of a Markdown statistics table.
const MD_HEAD: &str = "| metric | unit | n | mean | median | p95 | min | max |\n|---|---|---:|---:|---:|---:|---:|---:|";

/// The cells of a metric's row, in the order of [`HEAD`].
fn row(name: &str, s: &Summary) -> Vec<String> {
    let mut cells = vec![name.to_string(), unit(name).to_string(), s.n.to_string()];
    cells.extend(STATS.iter().map(|(_, get)| cell(name, get(s))));
    cells
}

/// One row of a Markdown table, or of the text table (whose metric column ends at the same
/// place whatever the indent).
fn write_row(out: &mut String, cells: &[impl AsRef<str>], md: bool, indent: &str) -> Result<()> {
    let cells: Vec<&str> = cells.iter().map(AsRef::as_ref).collect();
    if md {
        return Ok(writeln!(out, "| {} |", cells.join(" | "))?);
    }
    let w = 36 - indent.len();
    write!(
        out,
        "{indent}{:<w$} {:>5} {:>4}",
        cells[0], cells[1], cells[2]
    )?;
    for c in &cells[3..] {
        write!(out, " {c:>12}")?;
    }
    Ok(writeln!(out)?)
}

/// The statistics rows of `metrics` (a Markdown table's or the text table's).
fn write_rows(
    out: &mut String,
    metrics: &BTreeMap<String, Summary>,
    md: bool,
    indent: &str,
) -> Result<()> {
    for (name, s) in ordered(metrics) {
        write_row(out, &row(name, s), md, indent)?;
    }
    Ok(())
}

/// The conditions of a file (table and Markdown): what its columns tell, then the
/// statistics of each condition's trials apart, so warm and cold are never mixed silently.
fn render_conditions(out: &mut String, f: &FileReport, md: bool) -> Result<()> {
    let pad = if md { "" } else { "  " };
    for (k, v) in &f.measured {
        writeln!(out, "{}{pad}{k}: {v}", if md { "\n" } else { "" })?;
    }
    if f.conditions.len() < 2 && f.conditions.keys().all(|k| k == UNFLAGGED) {
        return Ok(());
    }
    for (c, r) in &f.conditions {
        if md {
            writeln!(
                out,
                "\n#### {c}: {}, {} failed\n",
                trials_text(r.trials),
                r.failed
            )?;
            writeln!(out, "{MD_HEAD}")?;
        } else {
            writeln!(out, "  {c}: {}, {} failed", trials_text(r.trials), r.failed)?;
        }
        write_rows(out, &r.metrics, md, "    ")?;
    }
    Ok(())
}

fn unit(name: &str) -> &'static str {
    if is_bytes(name) {
        "B"
    } else if name.ends_with("_per_second") {
        "1/s"
    } else if is_count(name) {
        "count"
    } else {
        "s"
    }
}

/// "1 trial", "2 trials".
pub fn trials_text(n: usize) -> String {
    if n == 1 {
        "1 trial".into()
    } else {
        format!("{n} trials")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_shape() {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,0,1500,2000,2010,5000,200\n2,0,2500,3000,3010,8000,200\n";
        let parsed = labcsv::import_str(Path::new("a.csv"), csv).unwrap();
        let r = Report {
            files: vec![FileReport::from_trials("a.csv", parsed.trials, vec![])],
        };
        let v: serde_json::Value =
            serde_json::from_str(&render(&r, Format::Json).unwrap()).unwrap();
        let f = &v["files"][0];
        assert_eq!(f["path"], "a.csv");
        assert_eq!(f["trials"], 2);
        assert_eq!(f["failed"], 0);
        let k = &f["metrics"]["k8s_recovery"];
        assert_eq!(k["n"], 2);
        assert_eq!(k["mean"], 2.0);
        assert_eq!(k["min"], 1.5);
        assert_eq!(k["max"], 2.5);
        assert!(k["stddev"].is_number() && k["p95"].is_number() && k["median"].is_number());
    }

    #[test]
    fn table_has_three_decimals() {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,0,1234,2000,2010,5000,200\n";
        let parsed = labcsv::import_str(Path::new("a.csv"), csv).unwrap();
        let r = Report {
            files: vec![FileReport::from_trials("a.csv", parsed.trials, vec![])],
        };
        let t = render(&r, Format::Table).unwrap();
        let line = t.lines().find(|l| l.contains("k8s_recovery")).unwrap();
        assert!(line.contains("1.234"), "{line}");
        let md = render(&r, Format::Markdown).unwrap();
        assert!(md.contains("| k8s_recovery | s | 1 | 1.234 |"), "{md}");
    }

    /// A study file where one run's runtime answered before Ready: the report says why its
    /// ready_to_runtime is negative; without such a run it says nothing of it.
    #[test]
    fn a_negative_ready_to_runtime_is_explained() {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,0,1500,2000,2010,5000,200\n2,0,2500,1000,3010,8000,200\n";
        let parsed = labcsv::import_str(Path::new("a.csv"), csv).unwrap();
        let why = &measured_conditions(&parsed.trials)["ready_to_runtime"];
        assert!(
            why.starts_with("negative in 1 of 2 trials: the runtime answered"),
            "{why}"
        );
        let mut r = FileReport::from_trials("a.csv", parsed.trials.clone(), vec![]);
        r.measured = measured_conditions(&parsed.trials);
        let t = render(&Report { files: vec![r] }, Format::Table).unwrap();
        assert!(
            t.contains("  ready_to_runtime: negative in 1 of 2 trials"),
            "{t}"
        );
        assert!(!why.contains("ready_to_runtime_service"), "{why}");
        // With T2 through the Service measured, the report names it as the study's figure.
        let mut with_service = parsed.trials.clone();
        let t1 = with_service[1].marks.t1.unwrap();
        with_service[1].marks.t2_service = Some(t1 + chrono::Duration::milliseconds(300));
        let why = &measured_conditions(&with_service)["ready_to_runtime"];
        assert!(
            why.ends_with(
                "; `ready_to_runtime_service` (the first answer through the Service after \
                 Ready, in 1 trial) is the figure to compare with the study's"
            ),
            "{why}"
        );
        let ordered =
            labcsv::import_str(Path::new("b.csv"), &csv.replace(",1000,", ",3000,")).unwrap();
        assert!(!measured_conditions(&ordered.trials).contains_key("ready_to_runtime"));
    }

    /// "8 trials, 1 failed" says which one and why (issue 31: a watcher's recording did not).
    #[test]
    fn failed_trials_are_named_with_their_reason() {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,0,1500,2000,2010,5000,200\n2,0,2500,3000,3010,8000,FAIL\n";
        let parsed = labcsv::import_str(Path::new("a.csv"), csv).unwrap();
        let r = FileReport::from_trials("a.csv", parsed.trials, vec![]);
        assert_eq!(r.failed, 1);
        assert_eq!(r.failed_trials.len(), 1, "{:?}", r.failed_trials);
        let failed = &r.failed_trials[0];
        assert_eq!(failed.index, 2);
        let t = render(
            &Report {
                files: vec![r.clone()],
            },
            Format::Table,
        )
        .unwrap();
        let line = format!("  failed: trial 2 ({}", failed.trigger);
        assert!(t.contains(&line) && t.contains(&failed.reason), "{t}");
        let v: serde_json::Value =
            serde_json::from_str(&render(&Report { files: vec![r] }, Format::Json).unwrap())
                .unwrap();
        assert_eq!(v["files"][0]["failed_trials"][0]["index"], 2);
    }
}
