//! `readygap lab bench`'s arithmetic: endpoint transitions from states, pairing with the
//! ground truth (errors, missed transitions and how long they lasted), the JSON shape.

use readygap_core::bench::{
    BenchReport, Cost, EndpointChange, EndpointConditions, Endpoints, Instant, Matched,
    MethodResult, diff_endpoints, endpoint_instants, match_instants, parse_endpoint_sample,
};
use readygap_core::fixtures::at;

fn eps(list: &[(&str, bool, bool, bool)]) -> Endpoints {
    list.iter()
        .map(|(p, ready, serving, terminating)| {
            (
                p.to_string(),
                EndpointConditions {
                    ready: *ready,
                    serving: *serving,
                    terminating: *terminating,
                },
            )
        })
        .collect()
}

#[test]
fn a_rollover_is_not_ready_terminating_added_ready_removed() {
    let old = eps(&[("a", true, true, false)]);
    let deleting = eps(&[("a", false, true, true), ("b", false, false, false)]);
    let names = |v: Vec<(String, EndpointChange)>| -> Vec<(String, &'static str)> {
        v.into_iter().map(|(p, c)| (p, c.name())).collect()
    };
    assert_eq!(
        names(diff_endpoints(&old, &deleting)),
        vec![
            ("a".into(), "endpoint_not_ready"),
            ("a".into(), "endpoint_terminating"),
            ("b".into(), "endpoint_added"),
        ]
    );
    let after = eps(&[("b", true, true, false)]);
    assert_eq!(
        names(diff_endpoints(&deleting, &after)),
        vec![
            ("b".into(), "endpoint_ready"),
            ("a".into(), "endpoint_removed")
        ]
    );
    // Seen first already ready: added and ready at that instant.
    assert_eq!(
        names(diff_endpoints(
            &old,
            &eps(&[("a", true, true, false), ("c", true, true, false)])
        )),
        vec![
            ("c".into(), "endpoint_added"),
            ("c".into(), "endpoint_ready")
        ]
    );
    assert!(diff_endpoints(&old, &old).is_empty());
}

#[test]
fn the_first_state_is_where_observing_began() {
    let states = vec![
        (at(0), eps(&[("a", true, true, false)])),
        (at(500), eps(&[("a", true, true, false)])),
        (at(1000), eps(&[])),
    ];
    let got = endpoint_instants(&states);
    assert_eq!(got, vec![Instant::new("a", "endpoint_removed", at(1000))]);
}

#[test]
fn errors_pair_in_order_and_a_short_state_is_missed_with_its_duration() {
    let truth = vec![
        Instant::new("a", "endpoint_terminating", at(1000)),
        Instant::new("a", "endpoint_removed", at(1200)),
        Instant::new("b", "endpoint_ready", at(3000)),
    ];
    let seen = vec![
        Instant::new("a", "endpoint_removed", at(1450)),
        Instant::new("b", "endpoint_ready", at(3004)),
    ];
    let m = match_instants(&truth, &seen, &truth);
    assert_eq!(m.total, 3);
    assert_eq!(m.errors["endpoint_removed"], vec![250.0]);
    assert_eq!(m.errors["endpoint_ready"], vec![4.0]);
    assert_eq!(m.missed.len(), 1);
    assert_eq!(m.missed[0].transition, "endpoint_terminating");
    assert_eq!(m.missed[0].lasted_ms, Some(200.0));
    // A measured instant of another pod or transition never stands in.
    let other = vec![Instant::new("c", "endpoint_terminating", at(1000))];
    assert_eq!(match_instants(&truth, &other, &truth).missed.len(), 3);
}

#[test]
fn the_samplers_lines_parse_and_bad_ones_are_named() {
    let e = parse_endpoint_sample("ollama-x true true false;ollama-y false true true;").unwrap();
    assert_eq!(e.len(), 2);
    assert!(e["ollama-y"].terminating && !e["ollama-y"].ready);
    assert!(parse_endpoint_sample("").unwrap().is_empty());
    let err = parse_endpoint_sample("ollama-x maybe true false;").unwrap_err();
    assert!(err.contains("maybe"), "{err}");
    let err = parse_endpoint_sample("ollama-x;").unwrap_err();
    assert!(err.contains("ollama-x"), "{err}");
}

#[test]
fn the_json_has_the_issues_shape_and_ratios_of_medians() {
    let mut rg = MethodResult {
        trials: 2,
        cost: Some(Cost {
            cpu_s: 0.2,
            peak_rss_mib: 30.0,
        }),
        ..MethodResult::default()
    };
    rg.marks = Matched {
        errors: [("t1".to_string(), vec![1.0, -3.0])].into_iter().collect(),
        total: 2,
        missed: vec![],
    };
    let mut base = rg.clone();
    base.cost = Some(Cost {
        cpu_s: 8.0,
        peak_rss_mib: 60.0,
    });
    base.marks.errors.insert("t1".into(), vec![100.0, 300.0]);
    let r = BenchReport {
        trials: 2,
        readygap: rg,
        baseline: base,
        settings: Default::default(),
    };
    let j = r.to_json();
    assert_eq!(j["trials"], 2);
    let t1 = &j["error_ms"]["t1"];
    assert_eq!(t1["readygap"]["median"], 2.0);
    assert_eq!(t1["baseline"]["median"], 200.0);
    assert_eq!(t1["ratio"], 100.0);
    assert!(t1["readygap"]["p95"].as_f64().unwrap() > 2.0);
    for k in ["t2", "t4", "endpoint_ready", "endpoint_removed"] {
        assert!(j["error_ms"][k]["readygap"].is_object(), "{k}: {j}");
        assert!(
            j["error_ms"][k]["ratio"].is_null(),
            "no values, no ratio: {k}"
        );
    }
    assert_eq!(j["cpu_s_per_trial"]["readygap"], 0.1);
    assert_eq!(j["cpu_s_per_trial"]["ratio"], 40.0);
    assert_eq!(j["rss_mib"]["ratio"], 2.0);
    assert_eq!(j["missed_transitions"]["baseline"]["missed"], 0);
    assert!(r.to_table().contains("t1"));
}

#[test]
fn slices_are_one_service_and_a_deleted_slice_removes_its_endpoints() {
    use readygap_core::bench::SliceUnion;
    use readygap_core::event::{EndpointSliceView, EndpointView};
    let slice = |name: &str, pod: &str, ready: bool| EndpointSliceView {
        name: name.into(),
        service: Some("ollama".into()),
        endpoints: vec![
            EndpointView {
                pod: Some(pod.into()),
                ready,
                serving: ready,
                terminating: false,
                ..Default::default()
            },
            // An endpoint without a pod has nothing to compare with.
            EndpointView::default(),
        ],
    };
    let mut u = SliceUnion::default();
    let a = u.apply(&slice("s1", "a", true));
    let ab = u.apply(&slice("s2", "b", false));
    assert_eq!(a.len(), 1);
    assert_eq!(ab.len(), 2);
    let b = u.delete("s1");
    assert_eq!(b.keys().collect::<Vec<_>>(), vec!["b"]);
    let got = endpoint_instants(&[(at(0), a), (at(10), ab), (at(20), b)]);
    let names: Vec<(&str, &str)> = got
        .iter()
        .map(|i| (i.pod.as_str(), i.what.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![("b", "endpoint_added"), ("a", "endpoint_removed")]
    );
}
