//! The fleet watcher's registry and exposition: histograms hold exactly what `report`'s
//! statistics say of the same trials, the ring and the series stay bounded, verdict labels
//! come from closed lists, and both exposition formats say the same numbers.

use readygap_core::fixtures::session;
use readygap_core::fleet::exposition::{Format, encode};
use readygap_core::fleet::{BUCKETS, FleetMetrics, HISTOGRAMS, SeriesKey};
use readygap_core::state::State;
use readygap_core::stats::TrialStats;
use readygap_core::timeline::Trial;
use std::collections::BTreeMap;

fn key(dep: &str) -> SeriesKey {
    SeriesKey {
        namespace: "lab".into(),
        deployment: dep.into(),
        model: "llama3.2:3b".into(),
        runtime: "ollama".into(),
    }
}

fn trials(events: usize) -> Vec<Trial> {
    State::from_events(&session(events)).timeline.trials
}

/// `name{labels}` → value of every sample line.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("a sample has a value");
            let v = match v {
                "+Inf" => f64::INFINITY,
                v => v.parse().expect("a number"),
            };
            (k.to_string(), v)
        })
        .collect()
}

const L: &str = r#"namespace="lab",deployment="chat",model="llama3.2:3b",runtime="ollama""#;

#[test]
fn histograms_hold_what_the_report_says_of_the_same_trials() {
    let ts = trials(4000);
    let ended: Vec<&Trial> = ts.iter().filter(|t| !t.is_running()).collect();
    assert!(ended.len() >= 5, "{} trials", ended.len());
    let mut m = FleetMetrics::new(100, 10);
    for t in &ts {
        m.observe(&key("chat"), t);
    }
    let stats = TrialStats::of(&ts);
    let text = encode(&m, Format::Text);
    let s = samples(&text);
    for (metric, name, _) in HISTOGRAMS {
        let want = stats.get(metric).expect("the report has this metric");
        let count = s[&format!("{name}_count{{{L}}}")];
        let sum = s[&format!("{name}_sum{{{L}}}")];
        assert_eq!(count as usize, want.n, "{name}");
        assert!(
            (sum - want.mean * want.n as f64).abs() < 1e-6,
            "{name}: {sum} vs {}",
            want.mean * want.n as f64
        );
        // Cumulative buckets, +Inf equal to the count, each bound as many as the values ≤ it.
        let values: Vec<f64> = ended.iter().filter_map(|t| t.metric(metric)).collect();
        for b in BUCKETS {
            let le = format!("{name}_bucket{{{L},le=\"{b:?}\"}}");
            let below = values.iter().filter(|v| **v <= b).count();
            assert_eq!(s[&le] as usize, below, "{le}");
        }
        assert_eq!(s[&format!("{name}_bucket{{{L},le=\"+Inf\"}}")], count);
    }
    assert_eq!(
        s[&format!("readygap_trials_total{{{L}}}")] as usize,
        stats.trials
    );
    assert_eq!(
        s[&format!("readygap_trial_failures_total{{{L}}}")] as usize,
        stats.failed
    );
    let last = ended
        .iter()
        .filter_map(|t| readygap_core::fleet::trial_end(t))
        .max()
        .unwrap();
    assert_eq!(
        s[&format!("readygap_last_trial_timestamp_seconds{{{L}}}")],
        last.timestamp_micros() as f64 / 1e6
    );
}

#[test]
fn both_formats_say_the_same_numbers_and_only_openmetrics_ends_with_eof() {
    let mut m = FleetMetrics::new(100, 10);
    for t in trials(1500) {
        m.observe(&key("chat"), &t);
    }
    let om = encode(&m, Format::OpenMetrics);
    let text = encode(&m, Format::Text);
    assert_eq!(samples(&om), samples(&text));
    assert!(om.ends_with("# EOF\n") && !text.contains("# EOF"));
    assert!(om.contains("# TYPE readygap_trials counter\n"), "{om}");
    assert!(
        text.contains("# TYPE readygap_trials_total counter\n"),
        "{text}"
    );
    assert!(om.contains("# UNIT readygap_ready_to_inference_seconds seconds\n"));
    assert!(!text.contains("# UNIT"));
}

#[test]
fn rings_and_series_stay_bounded_and_running_trials_wait() {
    let ts = trials(3000);
    let ended: Vec<&Trial> = ts.iter().filter(|t| !t.is_running()).collect();
    let mut m = FleetMetrics::new(2, 3);
    for _ in 0..40 {
        for t in &ended {
            m.observe(&key("a"), t);
            m.observe(&key("b"), t);
            m.observe(&key("c"), t);
        }
    }
    let n = 40 * ended.len() as u64;
    let rings: Vec<(usize, u64)> = m.rings().map(|(_, r)| (r.len(), r.seen)).collect();
    assert_eq!(rings, vec![(3, n); 3], "each ring keeps its last 3");
    assert_eq!(m.series().count(), 2, "at most two series");
    assert_eq!(
        m.dropped, n,
        "the third series' trials are counted as dropped"
    );
    let mut running = ended[0].clone();
    running.status = readygap_core::timeline::TrialStatus::Running;
    assert!(!m.observe(&key("a"), &running));
}

#[test]
fn verdict_labels_come_from_the_closed_lists_only() {
    let mut t = trials(1500)
        .into_iter()
        .find(|t| !t.is_running())
        .expect("a trial");
    // A made-up verdict name can no longer be put on a trial (its verdicts are
    // `ContractKind`s): the type closes the list.
    t.verdicts = vec![
        readygap_core::verdict::ContractKind::ShallowReadiness,
        readygap_core::verdict::ContractKind::TrafficGap,
    ];
    let mut m = FleetMetrics::new(10, 10);
    m.observe(&key("chat"), &t);
    m.observe(&key("chat"), &t);
    let s = samples(&encode(&m, Format::Text));
    let v = |name: &str| {
        s.get(&format!(
            "readygap_verdicts_total{{{L},verdict=\"{name}\"}}"
        ))
    };
    assert_eq!(v("shallow_readiness"), Some(&2.0));
    assert_eq!(v("traffic_gap"), Some(&2.0));
    assert!(!s.keys().any(|k| k.contains("made_up")), "{s:?}");
}

#[test]
fn label_values_are_escaped_in_the_exposition() {
    let t = trials(1500)
        .into_iter()
        .find(|t| !t.is_running())
        .expect("a trial");
    let mut m = FleetMetrics::new(10, 10);
    let mut k = key("chat");
    k.model = "we\"ird\\model\n".into();
    m.observe(&k, &t);
    let text = encode(&m, Format::OpenMetrics);
    assert!(
        text.contains(r#"model="we\"ird\\model\n""#),
        "{}",
        text.lines()
            .find(|l| l.contains("trials_total"))
            .unwrap_or("")
    );
}

/// Each interval goes into its histogram once, as soon as its end mark is known (issue 32):
/// a running trial with T0 and T1 is in `k8s_recovery` at once, and in nothing else; seen
/// again it is not counted twice; when it ends, the other intervals join and `k8s_recovery`
/// stays at one observation, so the histograms still hold exactly what `report` says.
#[test]
fn an_interval_is_observed_once_when_its_end_mark_is_known() {
    let ts = trials(4000);
    let done = ts
        .iter()
        .find(|t| t.is_ok() && t.marks.t4.is_some() && t.marks.t2.is_some())
        .expect("a completed trial")
        .clone();
    let mut running = done.clone();
    running.status = readygap_core::timeline::TrialStatus::Running;
    (running.marks.t2, running.marks.t3, running.marks.t4) = (None, None, None);
    running.inference_end = None;
    let count = |m: &FleetMetrics, name: &str| {
        samples(&encode(m, Format::Text))
            .get(&format!("{name}_count{{{L}}}"))
            .copied()
            .unwrap_or(0.0)
    };
    let [k8s, runtime, ready_inf, functional] = HISTOGRAMS.map(|(_, n, _)| n);
    let mut m = FleetMetrics::new(10, 10);
    assert_eq!(m.observe_intervals(&key("chat"), &running), 1);
    assert_eq!(m.observe_intervals(&key("chat"), &running), 0, "once");
    assert_eq!(count(&m, k8s), 1.0, "k8s_recovery at T1");
    for name in [runtime, ready_inf, functional] {
        assert_eq!(count(&m, name), 0.0, "{name} waits for its end mark");
    }
    // A trial is counted when it ends; its T1 interval is not observed again.
    let trials_total = format!("readygap_trials_total{{{L}}}");
    assert_eq!(
        samples(&encode(&m, Format::Text)).get(&trials_total),
        Some(&0.0)
    );
    assert!(m.observe(&key("chat"), &done));
    let s = samples(&encode(&m, Format::Text));
    for (metric, name, _) in HISTOGRAMS {
        assert_eq!(s[&format!("{name}_count{{{L}}}")], 1.0, "{name}");
        let want = done.metric(metric).expect("the completed trial's interval");
        assert!(
            (s[&format!("{name}_sum{{{L}}}")] - want).abs() < 1e-9,
            "{name}"
        );
    }
    // The next trial (another index) starts afresh.
    let mut next = running.clone();
    next.index += 1;
    assert_eq!(m.observe_intervals(&key("chat"), &next), 1);
    assert_eq!(count(&m, k8s), 2.0);
}
