//! The JSON document of one trial, the one `run --format json` (each file's `trials`) and
//! `report --format json` (each file's `trial_list`) both give, so a run and the report of
//! its own recording agree field for field: index, trigger, every mark (RFC 3339 with
//! milliseconds, `null` when not reached, the runtime's start-up phases under
//! `marks.startup`), every metric, the outcome and its reason, the OOM evidence, the cache
//! condition and the readiness-contract verdicts by name.

use crate::event::Timestamp;
use crate::timeline::{Metric, Trial};
use serde::Serializer;
use serde_json::{Map, Value, json};

/// A mark as RFC 3339 with milliseconds (`null` when not reached).
fn ms(t: Option<Timestamp>) -> Value {
    t.map(|t| Value::String(t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)))
        .unwrap_or(Value::Null)
}

/// The document of one trial.
pub fn trial(t: &Trial) -> Value {
    let m = &t.marks;
    let metrics: Map<String, Value> = Metric::ALL
        .into_iter()
        .map(|metric| {
            let v = t.metric(metric).map(Value::from).unwrap_or(Value::Null);
            (metric.name().to_string(), v)
        })
        .collect();
    let startup: Map<String, Value> = m
        .startup
        .iter()
        .map(|(k, v)| (k.clone(), ms(Some(*v))))
        .collect();
    let verdicts: Vec<&str> = t.verdicts.iter().map(|k| k.name()).collect();
    json!({
        "index": t.index,
        "external": t.external,
        "cold": t.cold.is_some(),
        "trigger": t.trigger,
        "new_pod": t.new_pod,
        "marks": {
            "t0": ms(m.t0), "t1": ms(m.t1), "t1_api": ms(m.t1_api), "t2": ms(m.t2),
            "t2_http": ms(m.t2_http),
            "t3": ms(m.t3), "t4": ms(m.t4), "deletion_seen": ms(m.deletion_seen),
            "scheduled": ms(m.scheduled), "container_started": ms(m.container_started),
            "endpoint_ready": ms(m.endpoint_ready), "model_resident": ms(m.model_resident),
            "first_token": ms(m.first_token),
            "startup": startup,
        },
        "metrics": metrics,
        "inference_source": t.inference_source.map_or("request", |s| s.name()),
        "ok": t.is_ok(),
        "reason": t.reason(),
        "oom": t.oom.as_ref().map(|v| v.evidence_json()),
        "condition": t.condition,
        "verdicts": verdicts,
    })
}

/// Serialise trials as their documents (`FileReport::trial_list`).
pub fn serialize_trials<S: Serializer>(trials: &[Trial], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(trials.iter().map(trial))
}
