//! A cold cache on the real cluster (issue 32): `readygap run --cold --node-access local`
//! drops this node's page cache (the cluster's one node is this machine) before each trial,
//! so the replacement's real Ollama reads gemma3:270m's ~290 MB from disk; five warm trials
//! (the files still cached from the pod before) and five cold ones, compared by the median of
//! the real engine's own `load_duration`. The readiness probe is the study's shallow HTTP one
//! (`overlays/http-readiness`): with the shipped inference-aware probe the load would happen
//! inside the probe, before T1, and the T3 inference would find the model resident.

use crate::support::{Cluster, cluster, own_trials, repo};
use readygap_core::timeline::Trial;
use std::path::Path;

const MODEL: &str = "gemma3:270m";

/// `readygap run --trials 5` (`--cold --node-access local` when `cold`); readygap's trials.
fn five(c: &Cluster, rec: &Path, cold: bool) -> Vec<Trial> {
    let mut args = vec![
        "--model",
        MODEL,
        "--trials",
        "5",
        "--cooldown",
        "2s",
        "--format",
        "json",
    ];
    if cold {
        args.extend_from_slice(&["--cold", "--node-access", "local"]);
    }
    let out = c.run(rec, &args);
    assert!(
        out.status.success(),
        "readygap run (cold {cold}) failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let own = own_trials(rec);
    assert_eq!(own.len(), 5, "{own:#?}");
    own
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Each trial's load_duration in ms (the real Ollama's own figure for the T3 inference).
fn loads(trials: &[Trial]) -> Vec<f64> {
    trials
        .iter()
        .map(|t| {
            assert!(t.is_ok(), "trial {} failed: {:?}", t.index, t.status);
            t.durations.load_ns.expect("load_duration") as f64 / 1e6
        })
        .collect()
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn a_load_after_the_nodes_page_cache_is_dropped_is_slower_than_a_warm_one() {
    let c = cluster();
    let shipped = std::fs::read_to_string(
        repo().join("manifests/overlays/http-readiness/kustomization.yaml"),
    )
    .expect("the http-readiness overlay");
    let patches = &shipped[shipped.find("patches:").expect("its patches")..];
    let dir = tempfile::tempdir().unwrap();
    let overlay = crate::support::smollm2_overlay(dir.path(), "overlay", &format!("{patches}\n"));
    c.deploy(&overlay);

    let warm = five(&c, &dir.path().join("warm.jsonl"), false);
    let cold = five(&c, &dir.path().join("cold.jsonl"), true);
    for t in &warm {
        assert!(t.cold.is_none(), "a warm trial ran a cold step: {t:?}");
    }
    for t in &cold {
        let d = t.cold.as_ref().expect("the cold step");
        eprintln!(
            "cold trial {}: {} Cached {:?} kB -> {:?} kB, dropped {}",
            t.index, d.node, d.cached_kb_before, d.cached_kb_after, d.dropped
        );
        assert!(d.error.is_none() && d.dropped, "{d:?}");
        assert_eq!(t.condition.as_deref(), Some("cold"), "{t:?}");
    }
    let (w, k) = (loads(&warm), loads(&cold));
    let (mw, mk) = (median(w.clone()), median(k.clone()));
    eprintln!(
        "load_duration of {MODEL} (ms): warm {w:.0?} median {mw:.0}; cold {k:.0?} median {mk:.0}"
    );
    assert!(mk > mw, "cold median {mk:.0} ms <= warm median {mw:.0} ms");

    // Back to the shipped probe for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}
