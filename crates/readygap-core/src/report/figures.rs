//! What the HTML and SVG reports draw, gathered from one input file: the T0–T4 bar of each
//! trial and of the mean (seconds since T0), the environment the file names, and for a
//! recording (replayed through the reducer) the memory of each pod against its limit, the
//! EndpointSlice counts, the changes of resident models and the verdicts.

use super::FileReport;
use crate::event::{EventKind, Timestamp};
use crate::record::jsonl;
use crate::residency::Verdict;
use crate::state::{EndpointCounts, State};
use crate::stats::Summary;
use crate::timeline::Trial;
use eyre::Result;
use std::collections::BTreeMap;
use std::path::Path;

/// Seconds from `a` to `b`.
pub fn secs(a: Timestamp, b: Timestamp) -> f64 {
    (b - a).num_microseconds().unwrap_or(i64::MAX) as f64 / 1e6
}

/// One bar: the instants of T0..T4 in seconds since T0 (`None` = not reached).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bar {
    /// The trial's number; `None` for the mean bar.
    pub trial: Option<u32>,
    pub marks: [Option<f64>; 5],
    /// A failed trial: when its last step ended (the failed inference, the verdict).
    pub failed_at: Option<f64>,
    /// A failed trial's reason.
    pub failed: Option<String>,
    /// Started by someone else (observed), or a cold-cache trial.
    pub external: bool,
    pub cold: bool,
}

impl Bar {
    /// The bar of one trial; `None` without a T0.
    pub fn of_trial(t: &Trial) -> Option<Bar> {
        let t0 = t.marks.t0?;
        let m = &t.marks;
        let rel = |x: Option<Timestamp>| x.map(|x| secs(t0, x));
        let failed = t.reason().map(str::to_owned);
        let failed_at = failed.as_ref().and_then(|_| {
            let verdict = t.oom.as_ref().map(|v| v.ts);
            rel(t.inference_end.max(verdict))
        });
        Some(Bar {
            trial: Some(t.index),
            marks: [Some(0.0), rel(m.t1), rel(m.t2), rel(m.t3), rel(m.t4)],
            failed_at,
            failed,
            external: t.external,
            cold: t.cold.is_some(),
        })
    }

    /// The mean bar: each mark at the mean of the statistic that ends there (T1
    /// `k8s_recovery`, T2 `runtime_recovery`, T4 `functional_recovery`, T3 the last minus
    /// `inference_wall`), so its numbers are the statistics table's.
    pub fn mean(metrics: &BTreeMap<String, Summary>) -> Option<Bar> {
        let mean = |k: &str| metrics.get(k).map(|s| s.mean);
        let t4 = mean("functional_recovery");
        let t3 = t4.zip(mean("inference_wall")).map(|(a, b)| a - b);
        let (t1, t2) = (mean("k8s_recovery"), mean("runtime_recovery"));
        let marks = [Some(0.0), t1, t2, t3, t4];
        let bar = Bar {
            marks,
            ..Bar::default()
        };
        marks[1..].iter().any(Option::is_some).then_some(bar)
    }

    /// The latest instant the bar reaches.
    pub fn end(&self) -> f64 {
        self.marks
            .iter()
            .flatten()
            .copied()
            .chain(self.failed_at)
            .fold(0.0, f64::max)
    }
}

/// Memory of one pod's serving container over the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMemory {
    pub pod: String,
    pub limit: Option<u64>,
    /// Samples in bytes; `None` is a gap (the feed failed).
    pub points: Vec<(Timestamp, Option<u64>)>,
}

/// A change of the models a pod's runtime holds (`/api/ps`).
#[derive(Debug, Clone, PartialEq)]
pub struct ResidencyChange {
    pub ts: Timestamp,
    pub pod: String,
    /// Models that appeared, with their size in host memory (bytes).
    pub loaded: Vec<(String, u64)>,
    pub unloaded: Vec<String>,
    /// Everything resident after the change.
    pub resident: Vec<(String, u64)>,
    /// Why, when it is not what `/api/ps` said: the pod left the API (its runtime is gone).
    pub note: Option<String>,
}

/// What a recording shows besides its trials.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordingFigures {
    pub start: Timestamp,
    pub end: Timestamp,
    pub trials: Vec<Trial>,
    pub memory: Vec<PodMemory>,
    /// GPU memory (VRAM) of each GPU pod: used bytes over time, `limit` the GPUs' total.
    pub gpu: Vec<PodMemory>,
    pub endpoints: Vec<(Timestamp, Option<EndpointCounts>)>,
    pub residency: Vec<ResidencyChange>,
    pub verdicts: Vec<Verdict>,
    /// Every Kubernetes Event of the recording, at the time it happened.
    pub events: Vec<(Timestamp, crate::event::KubeEventView)>,
    /// The runtime's start-up lines of the recording (listening, model load begun and
    /// done): when written, the pod, what they mark.
    pub log_marks: Vec<(Timestamp, String, crate::runtime_log::LogMark)>,
}

/// Everything drawn for one input file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileFigures {
    pub path: String,
    pub bars: Vec<Bar>,
    pub mean: Option<Bar>,
    /// (what, value) rows: context, namespace, target, runtime, model, profile, version...
    pub environment: Vec<(String, String)>,
    pub recording: Option<RecordingFigures>,
}

/// The figures of every file of a report, in order.
pub fn of_report(report: &super::Report) -> Result<Vec<FileFigures>> {
    report.files.iter().map(of_file).collect()
}

/// The figures of a report's file: a `.jsonl` recording is replayed again for its series.
pub fn of_file(file: &FileReport) -> Result<FileFigures> {
    let path = Path::new(&file.path);
    // The trials the statistics count: a trial still open when the recording ended is
    // listed with the recording's trials, not drawn as a bar.
    let bars = file
        .trial_list
        .iter()
        .filter(|t| !t.is_running())
        .filter_map(Bar::of_trial)
        .collect();
    let mean = Bar::mean(&file.metrics);
    let is_recording = path.extension().is_some_and(|e| e == "jsonl");
    let (environment, recording) = if is_recording {
        let (env, rec) = replay(path)?;
        (env, Some(rec))
    } else {
        (environment_of_path(path), None)
    };
    Ok(FileFigures {
        path: file.path.clone(),
        bars,
        mean,
        environment,
        recording,
    })
}

/// The study's layout `results/<environment>/<runtime>/<model>/…`: what a CSV's path says.
pub fn environment_of_path(path: &Path) -> Vec<(String, String)> {
    let parts: Vec<String> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let mut env = vec![("source".to_string(), "study CSV".to_string())];
    if let Some(i) = parts.iter().rposition(|p| p == "results") {
        let rest = &parts[i + 1..parts.len().saturating_sub(1)];
        let names = ["environment (from the path)", "runtime", "model"];
        for (name, value) in names.iter().zip(rest) {
            env.push((name.to_string(), value.clone()));
        }
        if rest.len() > 3 {
            env.push(("experiment".into(), rest[3..].join("/")));
        }
    }
    env
}

/// A JSON value as text: a string as itself, anything else as JSON.
fn text(v: &serde_json::Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

fn setting(settings: &serde_json::Value, key: &str) -> Option<String> {
    settings.get(key).filter(|v| !v.is_null()).map(text)
}

/// Replay a recording and keep what the figures need.
fn replay(path: &Path) -> Result<(Vec<(String, String)>, RecordingFigures)> {
    let mut state = State::new();
    let mut residency = Vec::new();
    let mut events = Vec::new();
    let mut log_marks = Vec::new();
    let mut first: Option<Timestamp> = None;
    let (header, _) = jsonl::for_each(path, |ev| {
        first = Some(first.map_or(ev.ts, |f| f.min(ev.ts)));
        if let EventKind::Residency { pod, models } = &ev.kind {
            let before: Vec<String> = state
                .runtimes
                .get(pod)
                .map(|r| r.resident.iter().map(|m| m.name.clone()).collect())
                .unwrap_or_default();
            let resident: Vec<(String, u64)> = models
                .iter()
                .map(|m| (m.name.clone(), m.host_bytes()))
                .collect();
            let loaded: Vec<(String, u64)> = resident
                .iter()
                .filter(|(m, _)| !before.contains(m))
                .cloned()
                .collect();
            let unloaded: Vec<String> = before
                .into_iter()
                .filter(|b| !resident.iter().any(|(m, _)| m == b))
                .collect();
            if !loaded.is_empty() || !unloaded.is_empty() {
                residency.push(ResidencyChange {
                    ts: ev.ts,
                    pod: pod.clone(),
                    loaded,
                    unloaded,
                    resident,
                    note: None,
                });
            }
        }
        if let EventKind::KubeEvent(e) = &ev.kind {
            events.push((e.time.unwrap_or(ev.ts), e.clone()));
        }
        if let EventKind::LogLine { pod, text } = &ev.kind
            && let Some(m) = crate::runtime_log::mark(text).filter(|m| m.is_startup())
            && !log_marks.contains(&(ev.ts, pod.clone(), m))
        {
            log_marks.push((ev.ts, pod.clone(), m));
        }
        // A deleted pod's runtime holds nothing any more (the reducer forgets it).
        if let EventKind::PodDeleted(p) = &ev.kind
            && let Some(r) = state.runtimes.get(&p.name)
            && !r.resident.is_empty()
        {
            residency.push(ResidencyChange {
                ts: ev.ts,
                pod: p.name.clone(),
                loaded: vec![],
                unloaded: r.resident.iter().map(|m| m.name.clone()).collect(),
                resident: vec![],
                note: Some("pod deleted".into()),
            });
        }
        state.apply(&ev);
    })?;
    let start = first.unwrap_or(header.started).min(header.started);
    let end = state.now.unwrap_or(start);
    let memory = state
        .memory
        .iter()
        .map(|(pod, m)| PodMemory {
            pod: pod.clone(),
            limit: m.limit,
            points: m
                .series
                .points()
                .map(|p| (p.ts, p.value.map(|v| v.current)))
                .collect(),
        })
        .collect();
    let gpu = state
        .gpu
        .iter()
        .map(|(pod, g)| PodMemory {
            pod: pod.clone(),
            limit: g.series.last_value().map(|p| p.total).filter(|t| *t > 0),
            points: g
                .series
                .points()
                .map(|p| (p.ts, p.value.map(|v| v.used)))
                .collect(),
        })
        .filter(|g| !g.points.is_empty())
        .collect();
    let endpoints = state.endpoints.points().map(|p| (p.ts, p.value)).collect();
    let s = &header.settings;
    let session = &state.session;
    let or_session = |h: &str, s: &str| if h.is_empty() { s } else { h }.to_string();
    let runtime = setting(s, "runtime").unwrap_or_else(|| match setting(s, "probe_path") {
        Some(p) if p == "/api/tags" => "ollama (inferred from the probe path /api/tags)".into(),
        _ => "not recorded".into(),
    });
    let h = &header;
    let model = setting(s, "model").or_else(|| session.model.clone());
    let profile = setting(s, "lab").or_else(|| setting(s, "profile"));
    let profile = profile.unwrap_or_else(|| "none (not the built-in lab)".into());
    let started = h
        .started
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut env: Vec<(String, String)> = [
        ("source", "readygap recording".to_string()),
        ("context", or_session(&h.context, &session.context)),
        ("namespace", or_session(&h.namespace, &session.namespace)),
        ("target", or_session(&h.target, &session.target)),
        ("runtime", runtime),
        ("model", model.unwrap_or_else(|| "not recorded".into())),
        ("profile", profile),
        ("readygap version (recorded by)", h.tool_version.clone()),
        ("started", started),
    ]
    .map(|(k, v)| (k.to_string(), v))
    .into();
    if !session.mode.is_empty() {
        env.push(("mode".into(), session.mode.clone()));
    }
    for (k, v) in s.as_object().into_iter().flatten() {
        if !["model", "lab", "runtime"].contains(&k.as_str()) {
            env.push((format!("setting {k}"), text(v)));
        }
    }
    Ok((
        env,
        RecordingFigures {
            start,
            end,
            trials: state.timeline.trials.clone(),
            memory,
            gpu,
            endpoints,
            residency,
            verdicts: state.oom.verdicts.clone(),
            events,
            log_marks,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::labcsv;

    #[test]
    fn bars_are_seconds_since_t0_and_the_mean_uses_the_statistics() {
        let csv = "run,t0_delete_ms,t1_k8s_ready_ms,t2_runtime_ms,t3_inference_start_ms,t4_inference_done_ms,http_code\n1,1000,2500,3000,3010,6000,200\n2,0,2500,3000,3010,8000,FAIL\n";
        let parsed = labcsv::import_str(Path::new("a.csv"), csv).unwrap();
        let f = FileReport::from_trials("a.csv", parsed.trials, vec![]);
        let bars: Vec<Bar> = f.trial_list.iter().filter_map(Bar::of_trial).collect();
        assert_eq!(bars.len(), 2);
        assert_eq!(
            bars[0].marks,
            [Some(0.0), Some(1.5), Some(2.0), Some(2.01), Some(5.0)]
        );
        assert!(bars[1].failed.is_some(), "{:?}", bars[1]);
        let mean = Bar::mean(&f.metrics).unwrap();
        assert_eq!(mean.marks[1], Some(f.metrics["k8s_recovery"].mean));
        assert_eq!(mean.marks[1], Some(2.0));
        // T4 only from the completed trial.
        assert_eq!(mean.marks[4], Some(5.0));
        assert!((mean.marks[3].unwrap() - 2.01).abs() < 1e-9);
    }

    #[test]
    fn the_warm_recording_gives_memory_limits_residency_and_the_deleted_pods_unloads() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/warm-3b-series.jsonl");
        let report = super::super::report_file(&path).unwrap();
        let f = of_file(&report).unwrap();
        assert_eq!(f.bars.len(), 3);
        let rec = f.recording.unwrap();
        assert!(
            rec.memory.iter().all(|m| m.limit == Some(4 << 30)),
            "{:?}",
            rec.memory.iter().map(|m| m.limit).collect::<Vec<_>>()
        );
        let loads: Vec<_> = rec
            .residency
            .iter()
            .filter(|c| !c.loaded.is_empty())
            .collect();
        assert_eq!(loads.len(), 3, "llama3.2:3b loaded once in each new pod");
        assert!(
            loads
                .iter()
                .all(|c| c.loaded[0].0 == "llama3.2:3b" && c.loaded[0].1 > 2 << 30)
        );
        let deleted: Vec<_> = rec
            .residency
            .iter()
            .filter(|c| c.note.as_deref() == Some("pod deleted"))
            .collect();
        // Trial 1's pod (the first to hold the model) left the API during trial 3, when its
        // grace period ran out; the pod of trial 2 was still terminating when the recording
        // ended, and the first pod's /api/ps was never read.
        assert_eq!(deleted.len(), 1, "{deleted:?}");
        assert_eq!(deleted[0].pod, loads[0].pod);
        assert_eq!(deleted[0].unloaded, ["llama3.2:3b"]);
        assert!(deleted[0].resident.is_empty());
        let env = |k: &str| {
            f.environment
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(env("model").as_deref(), Some("llama3.2:3b"));
        assert_eq!(env("profile").as_deref(), Some("local-3b"));
        assert_eq!(env("namespace").as_deref(), Some("llm-recovery-lab"));
    }

    #[test]
    fn a_study_path_names_environment_runtime_and_model() {
        let env = environment_of_path(Path::new(
            "x/results/cloud-cpu/ollama/llama3.2-3b/cache/cold-cache-recovery.csv",
        ));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("environment (from the path)"), Some("cloud-cpu"));
        assert_eq!(get("runtime"), Some("ollama"));
        assert_eq!(get("model"), Some("llama3.2-3b"));
        assert_eq!(get("experiment"), Some("cache"));
    }
}
