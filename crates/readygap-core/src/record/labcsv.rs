//! Import and export of the CSV schema of the public k8s-llm-recovery-lab results
//! (`data/published` in the repository, see its SOURCE.md).
//!
//! Recovery files (`run,t0_delete_ms,t1_k8s_ready_ms,…`) become trials. The derived interval
//! columns are recomputed from the raw timestamps; where a file's value is empty or disagrees,
//! a warning names the file, line and run, and the recomputed value is used. Rows whose
//! inference failed (`http_code` other than 200, e.g. `FAIL`) are failed trials, not errors.
//!
//! The readiness files of the study (a rollout summary, and EndpointSlice samples) carry no
//! T0–T4 columns; they are read into interval metrics of their own.

use crate::event::{CacheDrop, RuntimeDurations, Timestamp};
use crate::stats::Summary;
use crate::timeline::{Marks, Trial, TrialStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The columns of a recovery file, in the study's order.
pub const RECOVERY_COLUMNS: [&str; 18] = [
    "run",
    "t0_delete_ms",
    "t1_k8s_ready_ms",
    "t2_runtime_ms",
    "t3_inference_start_ms",
    "t4_inference_done_ms",
    "pod_recovery_ms",
    "runtime_recovery_ms",
    "ready_to_runtime_ms",
    "functional_recovery_ms",
    "ready_to_inference_ms",
    "request_wall_ms",
    "http_code",
    "total_duration_ms",
    "load_duration_ms",
    "prompt_eval_duration_ms",
    "eval_duration_ms",
    "memory_current_bytes",
];

/// The extra leading columns of the study's cold-cache file.
pub const COLD_COLUMNS: [&str; 5] = [
    "cache_condition",
    "precondition_model_resident",
    "cached_kb_before",
    "cached_kb_after_drop",
    "drop_caches_success",
];

/// Names the T0 column has in the study's files.
const T0_NAMES: [&str; 3] = ["t0_delete_ms", "t0_scaleup_ms", "t0_transition_ms"];

/// Derived columns: (name, from, to).
const DERIVED: [(&str, usize, usize); 6] = [
    ("pod_recovery_ms", 0, 1),
    ("runtime_recovery_ms", 0, 2),
    ("ready_to_runtime_ms", 1, 2),
    ("functional_recovery_ms", 0, 4),
    ("ready_to_inference_ms", 1, 4),
    ("request_wall_ms", 3, 4),
];

/// What kind of study file it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CsvKind {
    /// T0–T4 per run.
    Recovery,
    /// A rollout per run: when the new pod and endpoints appeared and the old ones went.
    ReadinessSummary,
    /// EndpointSlice samples during rollouts.
    ReadinessEndpoints,
}

/// A study file read.
#[derive(Debug, Clone)]
pub struct LabCsv {
    pub path: PathBuf,
    pub kind: CsvKind,
    pub trials: Vec<Trial>,
    /// Interval metrics of readiness files (seconds), by name.
    pub metrics: BTreeMap<String, Summary>,
    pub warnings: Vec<String>,
}

/// Errors that stop the import of a file: a recording's ([`super::jsonl::ReadError`]).
pub type CsvError = super::jsonl::ReadError;

/// A data row: its line in the file, the columns by name, its fields.
struct Row<'a> {
    line: u64,
    index: &'a BTreeMap<String, usize>,
    record: csv::StringRecord,
}

/// A malformed row: its line and what is wrong.
type RowError = (u64, String);

impl Row<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.index
            .get(name)
            .and_then(|i| self.record.get(*i))
            .map(str::trim)
            .filter(|s| !s.is_empty())
    }

    fn int(&self, name: &str) -> Result<Option<i64>, RowError> {
        self.get(name)
            .map(|s| {
                s.parse::<i64>().map_err(|_| {
                    let message = format!("column {name}: {s:?} is not a whole number");
                    (self.line, message)
                })
            })
            .transpose()
    }
}

/// Read one study CSV file.
pub fn import(path: &Path) -> Result<LabCsv, CsvError> {
    let text = std::fs::read_to_string(path).map_err(|source| CsvError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    import_str(path, &text)
}

/// Read study CSV text (`path` is used in messages).
pub fn import_str(path: &Path, text: &str) -> Result<LabCsv, CsvError> {
    let malformed = |line: u64, message: String| CsvError::Malformed {
        path: path.to_path_buf(),
        line: line as usize,
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| malformed(1, e.to_string()))?
        .clone();
    let index: BTreeMap<String, usize> = headers
        .iter()
        .enumerate()
        .map(|(i, h)| (h.trim().to_string(), i))
        .collect();
    let kind = if T0_NAMES.iter().any(|n| index.contains_key(*n)) {
        CsvKind::Recovery
    } else if index.contains_key("rollout_start_ms") {
        CsvKind::ReadinessSummary
    } else if index.contains_key("timestamp_ms") && index.contains_key("ready") {
        CsvKind::ReadinessEndpoints
    } else {
        return Err(malformed(
            1,
            "not a k8s-llm-recovery-lab results file: no t0_*_ms, rollout_start_ms or \
             timestamp_ms column"
                .into(),
        ));
    };
    let mut out = LabCsv {
        path: path.to_path_buf(),
        kind,
        trials: Vec::new(),
        metrics: BTreeMap::new(),
        warnings: Vec::new(),
    };
    let mut rows = Vec::new();
    for rec in reader.records() {
        let record = rec.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line());
            malformed(line, e.to_string())
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let index = &index;
        rows.push(Row {
            line,
            index,
            record,
        });
    }
    match kind {
        CsvKind::Recovery => rows.iter().try_for_each(|row| {
            let trial = recovery_row(path, row, &mut out.warnings)?;
            out.trials.push(trial);
            Ok(())
        }),
        CsvKind::ReadinessSummary => readiness_summary(path, &rows, &mut out),
        CsvKind::ReadinessEndpoints => readiness_endpoints(&rows, &mut out),
    }
    .map_err(|(l, m)| malformed(l, m))?;
    Ok(out)
}

fn recovery_row(path: &Path, row: &Row, warnings: &mut Vec<String>) -> Result<Trial, RowError> {
    let (line, run) = (row.line, row.get("run").unwrap_or("?"));
    let t0_col = T0_NAMES
        .iter()
        .find(|n| row.index.contains_key(**n))
        .copied()
        .unwrap_or("t0_delete_ms");
    let raw = [
        row.int(t0_col)?,
        row.int("t1_k8s_ready_ms")?,
        row.int("t2_runtime_ms")?,
        row.int("t3_inference_start_ms")?,
        row.int("t4_inference_done_ms")?,
    ];
    for (name, a, b) in DERIVED {
        if !row.index.contains_key(name) {
            continue;
        }
        let recomputed = raw[a].zip(raw[b]).map(|(a, b)| b - a);
        let given = row.int(name)?;
        match (given, recomputed) {
            (Some(g), Some(r)) if g != r => warnings.push(format!(
                "{}:{line}: run {run}: {name} is {g}, recomputed {r} from the raw timestamps; \
                 using {r}",
                path.display()
            )),
            (None, Some(r)) => warnings.push(format!(
                "{}:{line}: run {run}: {name} is empty, recomputed {r} from the raw timestamps",
                path.display()
            )),
            _ => {}
        }
    }
    let http = row.get("http_code").unwrap_or("");
    let ok = http == "200";
    let ts = |v: Option<i64>| v.and_then(chrono::DateTime::from_timestamp_millis);
    let marks = Marks {
        t0: ts(raw[0]),
        t1: ts(raw[1]),
        t2: ts(raw[2]),
        t3: ts(raw[3]),
        t4: if ok { ts(raw[4]) } else { None },
        ..Marks::default()
    };
    let status = if ok {
        TrialStatus::Ok
    } else {
        TrialStatus::Failed {
            reason: crate::timeline::Failure::new(
                crate::timeline::FailureKind::Other,
                if http.is_empty() {
                    "no http_code".to_string()
                } else {
                    format!("http_code {http}")
                },
            ),
        }
    };
    let index = run.parse::<u32>().unwrap_or(0);
    let mut trial = Trial::imported(index, marks, status);
    if !ok {
        trial.inference_end = ts(raw[4]);
    }
    trial.http_status = http.parse().ok();
    let dur = |name: &str| -> Result<Option<u64>, RowError> {
        Ok(row
            .int(name)?
            .filter(|_| ok)
            .map(|ms| ms.max(0) as u64 * 1_000_000))
    };
    trial.durations = RuntimeDurations {
        total_ns: dur("total_duration_ms")?,
        load_ns: dur("load_duration_ms")?,
        prompt_eval_ns: dur("prompt_eval_duration_ms")?,
        eval_ns: dur("eval_duration_ms")?,
        ..Default::default()
    };
    trial.memory_after = row.int("memory_current_bytes")?.map(|b| b.max(0) as u64);
    // The file's own condition column (cache: warm/cold; cold-node runs).
    trial.condition = ["cache_condition", "recovery_condition", "control_condition"]
        .iter()
        .find_map(|c| row.get(c))
        .map(str::to_string);
    if let Some(cond) = row.get("cache_condition") {
        let before = row.int("cached_kb_before")?.map(|v| v.max(0) as u64);
        let after = row
            .int("cached_kb_after_drop")?
            .or(row.int("cached_kb_after_precondition")?)
            .map(|v| v.max(0) as u64);
        if cond == "cold" {
            trial.cold = Some(CacheDrop {
                node: row.get("target_node").unwrap_or_default().to_string(),
                cached_kb_before: before,
                cached_kb_after: after,
                dropped: row.get("drop_caches_success") == Some("true"),
                error: None,
            });
        }
    }
    Ok(trial)
}

fn readiness_summary(path: &Path, rows: &[Row], out: &mut LabCsv) -> Result<(), RowError> {
    let spans = [
        ("rollout_to_new_pod_seen", "new_pod_first_seen_ms"),
        ("rollout_to_new_pod_running", "new_pod_running_ms"),
        ("rollout_to_new_endpoint_seen", "new_endpoint_first_seen_ms"),
        ("rollout_to_new_endpoint_ready", "new_endpoint_ready_ms"),
        (
            "rollout_to_old_endpoint_not_ready",
            "old_endpoint_not_ready_ms",
        ),
        ("rollout_to_old_endpoint_removed", "old_endpoint_removed_ms"),
    ];
    let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut gaps = Vec::new();
    for row in rows {
        let (line, run) = (row.line, row.get("run").unwrap_or("?"));
        let start = row.int("rollout_start_ms")?;
        for (metric, col) in spans {
            match (start, row.int(col)?) {
                (Some(s), Some(v)) => values.entry(metric).or_default().push((v - s) as f64 / 1e3),
                _ => out.warnings.push(format!(
                    "{}:{line}: run {run}: {col} is empty",
                    path.display()
                )),
            }
        }
        if let Some(v) = row.int("new_endpoint_nonserving_ms")? {
            values
                .entry("new_endpoint_nonserving")
                .or_default()
                .push(v as f64 / 1e3);
        } else if row.index.contains_key("new_endpoint_nonserving_ms") {
            out.warnings.push(format!(
                "{}:{line}: run {run}: new_endpoint_nonserving_ms is empty",
                path.display()
            ));
        }
        if let Some(g) = row.int("traffic_gap_count")? {
            gaps.push(g as f64);
        }
    }
    let values = values.into_iter().chain([("traffic_gap_count", gaps)]);
    let summaries = values.filter_map(|(k, v)| Some((k.to_string(), Summary::of(&v)?)));
    out.metrics.extend(summaries);
    Ok(())
}

fn readiness_endpoints(rows: &[Row], out: &mut LabCsv) -> Result<(), RowError> {
    // Per run: samples (instants) and the instants where no endpoint was ready and serving.
    let mut runs: BTreeMap<String, BTreeMap<i64, bool>> = BTreeMap::new();
    for row in rows {
        let run = row.get("run").unwrap_or("?").to_string();
        let Some(ts) = row.int("timestamp_ms")? else {
            return Err((row.line, "timestamp_ms is empty".into()));
        };
        let up = row.get("ready") == Some("true") && row.get("serving") == Some("true");
        let at = runs.entry(run).or_default().entry(ts).or_insert(false);
        *at |= up;
    }
    let mut spans = Vec::new();
    let mut gaps = Vec::new();
    for samples in runs.values() {
        if let (Some(first), Some(last)) = (samples.keys().next(), samples.keys().last()) {
            spans.push((last - first) as f64 / 1e3);
        }
        gaps.push(samples.values().filter(|up| !**up).count() as f64);
    }
    for (k, v) in [("sampled_span", spans), ("traffic_gap_samples", gaps)] {
        out.metrics
            .extend(Summary::of(&v).map(|s| (k.to_string(), s)));
    }
    Ok(())
}

/// Write trials in the study's exact column order (the cold-cache file's order when any
/// trial ran a cold step), so the study's own analysis scripts read them.
pub fn export(trials: &[Trial], out: impl std::io::Write) -> csv::Result<()> {
    let any_cold = trials.iter().any(|t| t.cold.is_some());
    let mut w = csv::Writer::from_writer(out);
    let mut header: Vec<&str> = vec!["run"];
    if any_cold {
        header.extend(COLD_COLUMNS);
    }
    header.extend(&RECOVERY_COLUMNS[1..]);
    // Trials observed (T3/T4 from the runtime's request log) say so in one extra, last
    // column; without any the columns stay exactly the study's.
    let any_log = trials.iter().any(|t| t.inference_source.is_some());
    if any_log {
        header.push("t3_t4_source");
    }
    // A runtime that answers HTTP before its model is ready (llama-server's 503 "Loading
    // model") splits T2: two more last columns, only then.
    let split_t2 = trials
        .iter()
        .any(|t| t.marks.t2_http.is_some() && t.marks.t2_http != t.marks.t2);
    if split_t2 {
        header.extend(["t2_http_answers_ms", "http_to_model_ready_ms"]);
    }
    // T2 as the study took it, through the Service after T1: two more last columns, only
    // where a trial has it; `ready_to_runtime_service_ms` compares with the study's
    // `ready_to_runtime_ms`.
    let service_t2 = trials.iter().any(|t| t.marks.t2_service.is_some());
    if service_t2 {
        header.extend(["t2_service_ms", "ready_to_runtime_service_ms"]);
    }
    w.write_record(&header)?;
    let ms = |t: Option<Timestamp>| t.map(|t| t.timestamp_millis());
    let opt = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    for (i, t) in trials.iter().filter(|t| !t.is_running()).enumerate() {
        let m = &t.marks;
        let t4 = ms(m.t4.or(t.inference_end));
        let raw = [ms(m.t0), ms(m.t1), ms(m.t2), ms(m.t3), t4];
        let mut row: Vec<String> = vec![(i + 1).to_string()];
        if any_cold {
            match &t.cold {
                Some(c) => row.extend([
                    "cold".to_string(),
                    "false".to_string(),
                    opt(c.cached_kb_before.map(|v| v as i64)),
                    opt(c.cached_kb_after.map(|v| v as i64)),
                    c.dropped.to_string(),
                ]),
                None => row.extend(["warm", "", "", "", ""].map(String::from)),
            }
        }
        row.extend(raw.iter().map(|v| opt(*v)));
        for (_, a, b) in DERIVED {
            row.push(opt(raw[a].zip(raw[b]).map(|(a, b)| b - a)));
        }
        row.push(if t.is_ok() {
            "200".into()
        } else {
            t.http_status
                .filter(|s| *s != 200)
                .map(|s| s.to_string())
                .unwrap_or_else(|| "FAIL".into())
        });
        let d = |v: Option<u64>| opt(v.map(|ns| (ns as f64 / 1e6).round() as i64));
        let du = &t.durations;
        row.extend([du.total_ns, du.load_ns, du.prompt_eval_ns, du.eval_ns].map(d));
        row.push(opt(t.memory_after.map(|v| v as i64)));
        if any_log {
            row.push(
                t.inference_source
                    .map_or("request", |s| s.name())
                    .to_string(),
            );
        }
        if split_t2 {
            let h = ms(m.t2_http);
            row.push(opt(h));
            row.push(opt(h.zip(raw[2]).map(|(a, b)| b - a)));
        }
        if service_t2 {
            let s = ms(m.t2_service);
            row.push(opt(s));
            row.push(opt(raw[1].zip(s).map(|(a, b)| b - a)));
        }
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::Metric;

    const SAMPLE: &str = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,pod_recovery_ms,runtime_recovery_ms,ready_to_runtime_ms,functional_recovery_ms,ready_to_inference_ms,request_wall_ms,http_code,total_duration_ms,load_duration_ms,prompt_eval_duration_ms,eval_duration_ms
1,1000,2500,3000,3010,9000,1500,2000,500,8000,6500,5990,200,5900,4000,1500,300
2,20000,21000,21500,21510,30000,999,,500,10000,9000,8490,200,8400,6000,2000,300
3,40000,41000,41500,41510,41600,1000,1500,500,1600,600,90,FAIL,0,0,0,0
";

    #[test]
    fn recomputes_derived_columns_and_warns() {
        let csv = import_str(Path::new("s.csv"), SAMPLE).unwrap();
        assert_eq!(csv.kind, CsvKind::Recovery);
        assert_eq!(csv.trials.len(), 3);
        // Row 2 (line 3): pod_recovery 999 disagrees (1000), runtime_recovery empty (1500).
        assert_eq!(csv.warnings.len(), 2, "{:?}", csv.warnings);
        assert!(csv.warnings[0].starts_with("s.csv:3: run 2: pod_recovery_ms is 999"));
        assert!(csv.warnings[1].contains("runtime_recovery_ms is empty"));
        assert_eq!(csv.trials[1].metric(Metric::K8sRecovery), Some(1.0));
        assert_eq!(csv.trials[0].metric(Metric::LoadDuration), Some(4.0));
        // The FAIL row is a failed trial: no T4-based metrics, but k8s recovery counts.
        let failed = &csv.trials[2];
        assert!(!failed.is_ok());
        assert_eq!(failed.reason(), Some("http_code FAIL"));
        assert_eq!(failed.metric(Metric::ReadyToInference), None);
        assert_eq!(failed.metric(Metric::K8sRecovery), Some(1.0));
    }

    #[test]
    fn export_round_trips_through_import() {
        let csv = import_str(Path::new("s.csv"), SAMPLE).unwrap();
        let mut out = Vec::new();
        export(&csv.trials, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(&RECOVERY_COLUMNS.join(",")));
        let back = import_str(Path::new("e.csv"), &text).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.trials.len(), 3);
        for (a, b) in csv.trials.iter().zip(&back.trials) {
            assert_eq!(a.marks, b.marks);
            assert_eq!(a.status, b.status);
            assert_eq!(a.durations, b.durations);
        }
    }

    #[test]
    fn t2_through_the_service_adds_two_last_columns_compared_with_the_studys() {
        let mut csv = import_str(Path::new("s.csv"), SAMPLE).unwrap();
        // Run 1: T1 at 2500, the runtime answered on the pod's address at 3000 and through
        // the Service 420 ms after T1.
        let t = &mut csv.trials[0];
        t.marks.t2_service = Some(t.marks.t1.unwrap() + chrono::Duration::milliseconds(420));
        let mut out = Vec::new();
        export(&csv.trials, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let header = text.lines().next().unwrap();
        assert!(
            header.ends_with(",t2_service_ms,ready_to_runtime_service_ms"),
            "{header}"
        );
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert!(rows[0].ends_with(",2920,420"), "{}", rows[0]);
        assert!(rows[1].ends_with(",,"), "no mark, empty cells: {}", rows[1]);
        assert_eq!(
            csv.trials[0].metric(Metric::ReadyToRuntimeService),
            Some(0.42)
        );
        assert_eq!(
            csv.trials[0].metric(Metric::RuntimeRecoveryService),
            Some(1.92)
        );
        let back = import_str(Path::new("e.csv"), &text).unwrap();
        assert_eq!(back.trials.len(), 3);
    }

    #[test]
    fn a_split_t2_adds_two_last_columns_and_still_imports() {
        let mut csv = import_str(Path::new("s.csv"), SAMPLE).unwrap();
        let mut plain = Vec::new();
        export(&csv.trials, &mut plain).unwrap();
        assert!(!String::from_utf8(plain).unwrap().contains("t2_http"));
        let t = &mut csv.trials[0];
        let t2 = t.marks.t2.unwrap();
        t.marks.t2_http = Some(t2 - chrono::Duration::milliseconds(700));
        let mut out = Vec::new();
        export(&csv.trials, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let header = text.lines().next().unwrap();
        assert!(
            header.ends_with(",t2_http_answers_ms,http_to_model_ready_ms"),
            "{header}"
        );
        let row = text.lines().nth(1).unwrap();
        assert!(row.ends_with(",700"), "{row}");
        let back = import_str(Path::new("e.csv"), &text).unwrap();
        assert_eq!(
            back.trials.len(),
            3,
            "the study's readers ignore the extra columns"
        );
    }

    #[test]
    fn unknown_schema_and_bad_numbers_are_errors_with_lines() {
        let e = import_str(Path::new("x.csv"), "a,b\n1,2\n").unwrap_err();
        assert!(e.to_string().starts_with("x.csv:1: not a k8s-llm"), "{e}");
        let bad = SAMPLE.replace("1,1000,2500", "1,10x0,2500");
        let e = import_str(Path::new("y.csv"), &bad).unwrap_err();
        assert!(
            e.to_string().starts_with("y.csv:2: column t0_delete_ms"),
            "{e}"
        );
    }
}
