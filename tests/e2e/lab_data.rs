//! The published results in data/published: every file is read without a crash, and the
//! report reproduces the published figures from the raw timestamps (through the binary).

use std::path::{Path, PathBuf};
use std::process::Command;

fn lab_data() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let p = here.join("data/published/results");
    assert!(
        p.is_dir(),
        "{} is missing: the published results are part of the repository",
        p.display()
    );
    p
}

fn csv_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            csv_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "csv") {
            out.push(p);
        }
    }
}

#[test]
fn every_published_file_is_read() {
    let mut files = Vec::new();
    csv_files(&lab_data(), &mut files);
    assert!(
        files.len() >= 15,
        "expected the 15 CSV files, found {}",
        files.len()
    );
    for f in &files {
        let csv = readygap_core::record::labcsv::import(f).unwrap_or_else(|e| panic!("{e}"));
        let has_data = !csv.trials.is_empty() || !csv.metrics.is_empty();
        assert!(has_data, "{}: nothing read", f.display());
    }
}

#[test]
fn archive_rows_are_failed_trials() {
    let f = lab_data().join("archive/cloud-cpu-invalid/1b-model-not-persistent.csv");
    let csv = readygap_core::record::labcsv::import(&f).unwrap();
    assert_eq!(csv.trials.len(), 10);
    assert!(
        csv.trials
            .iter()
            .all(|t| t.reason() == Some("http_code FAIL"))
    );
}

#[test]
fn local_readiness_summary_warns_about_the_empty_column() {
    let f = lab_data()
        .join("local-mac/ollama/llama3.2-3b/readiness/ollama-3b-inference-readiness-summary.csv");
    let csv = readygap_core::record::labcsv::import(&f).unwrap();
    assert_eq!(csv.warnings.len(), 10, "{:?}", csv.warnings);
    assert!(csv.warnings[0].contains(":2: run 1: new_endpoint_nonserving_ms is empty"));
}

#[test]
fn report_gives_the_published_means() {
    let f = lab_data().join("local-mac/ollama/llama3.2-3b/pvc-recovery-4gi.csv");
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["report", "--format", "json"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &v["files"][0]["metrics"];
    let r = |k: &str| (m[k]["mean"].as_f64().unwrap() * 1000.0).round() / 1000.0;
    assert_eq!(r("ready_to_inference"), 14.310);
    assert_eq!(r("k8s_recovery"), 1.962);
    assert_eq!(v["files"][0]["trials"], 10);
    assert_eq!(v["files"][0]["failed"], 0);

    let table = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("report")
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("ready_to_inference"))
        .unwrap();
    assert!(line.contains("14.310"), "{line}");
}

#[test]
fn export_writes_the_study_columns_and_reads_back() {
    let f = lab_data().join("cloud-cpu/ollama/llama3.2-3b/cache/cold-cache-recovery.csv");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let st = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("export")
        .arg(&f)
        .arg("--csv")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let original = std::fs::read_to_string(&f).unwrap();
    assert_eq!(
        text.lines().next(),
        original.lines().next(),
        "cold-cache column order"
    );
    // Same raw timestamps and derived values row by row.
    for (a, b) in text.lines().zip(original.lines()).skip(1) {
        let a: Vec<&str> = a.split(',').collect();
        let b: Vec<&str> = b.split(',').collect();
        assert_eq!(a[6..], b[6..]);
        assert_eq!(a[3..6], b[3..6]);
    }
}
