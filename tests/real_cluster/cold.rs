//! A cold cache on the real cluster (issue 32): `readygap run --cold --node-access local`
//! drops this node's page cache (the cluster's one node is this machine) before each trial,
//! so the replacement's real Ollama reads gemma3:270m's 253 MB blob from disk; five warm
//! trials (the files still cached from the load before) and five cold ones. The readiness probe is the study's shallow HTTP one
//! (`overlays/http-readiness`): with the shipped inference-aware probe the load would happen
//! inside the probe, before T1, and the T3 inference would find the model resident.
//!
//! The kernel's own evidence rides beside readygap's: a sampler asks the kernel every 20 ms
//! how much of gemma3's blob (the hostPath volume's file, this machine's page cache) is
//! resident (`fincore`, util-linux-extra: mincore(2) over the file), so each cold trial shows the
//! blob evicted at its T3 and read back from disk by the load, each warm one the blob cached
//! through its load. A load's time from a cold cache depends on the disk under it: on a VM
//! whose disk the host caches, reading ~250 MB costs a fraction of a second, inside the
//! noise of a 1.1 s load (a CI run measured cold 1088 ms < warm 1142 ms with the blob
//! evicted), so the medians of the real engine's `load_duration` are printed beside what a
//! cold read of the blob costs here, and the test asserts the kernel's residency instead.

use crate::support::{Cluster, cluster, cluster_dir, own_trials, repo};
use chrono::{DateTime, Utc};
use readygap_core::timeline::Trial;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

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

/// gemma3:270m's model blob on the cluster's models volume (its manifest's model layer).
fn blob() -> PathBuf {
    let models = cluster_dir().join("pv/ollama-models/models");
    let manifest = models.join("manifests/registry.ollama.ai/library/gemma3/270m");
    let m: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display())),
    )
    .expect("the manifest's JSON");
    let digest = m["layers"]
        .as_array()
        .expect("layers")
        .iter()
        .find(|l| l["mediaType"] == "application/vnd.ollama.image.model")
        .and_then(|l| l["digest"].as_str())
        .expect("a model layer");
    models.join("blobs").join(digest.replace(':', "-"))
}

/// The bytes of `file` in the page cache, by the kernel (`fincore --bytes`).
fn resident(file: &Path) -> u64 {
    let out = Command::new("fincore")
        .args(["--bytes", "--noheadings", "--output", "RES"])
        .arg(file)
        .output()
        .expect("fincore (Debian: util-linux-extra)");
    assert!(out.status.success(), "fincore: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("fincore said {text:?}: {e}"))
}

/// Bytes of the blob resident, stamped when the kernel was asked.
type Samples = Vec<(DateTime<Utc>, u64)>;

/// The blob's residency every 20 ms, stamped when read, until dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Samples>>,
}

impl Sampler {
    fn start(file: PathBuf) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut v = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let r = resident(&file);
                v.push((Utc::now(), r));
                std::thread::sleep(Duration::from_millis(20));
            }
            v
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Samples {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().expect("the sampler")
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The residency samples of `trial`'s load: the last one at or before T3 and the first at or
/// after T4 (the T3 inference is what loads the model; `load_duration` is inside T3..T4).
fn around_load(samples: &[(DateTime<Utc>, u64)], t: &Trial) -> (u64, u64) {
    let (t3, t4) = (
        t.marks.t3.expect("T3"),
        t.marks.t4.expect("T4 of a trial that is ok"),
    );
    let before = samples
        .iter()
        .rev()
        .find(|(at, _)| *at <= t3)
        .unwrap_or_else(|| panic!("no residency sample before trial {}'s T3", t.index));
    let after = samples
        .iter()
        .find(|(at, _)| *at >= t4)
        .unwrap_or_else(|| panic!("no residency sample after trial {}'s T4", t.index));
    (before.1, after.1)
}

/// What reading `file` from a cold cache costs here, against reading it cached, in ms (the
/// node's cache dropped as `--node-access local` drops it: sync, then drop_caches 3).
fn cold_read_cost_ms(file: &Path) -> f64 {
    let read = || {
        let t = std::time::Instant::now();
        let n = std::io::copy(
            &mut std::fs::File::open(file).expect("the blob"),
            &mut std::io::sink(),
        )
        .expect("reading the blob");
        assert!(n > 0);
        t.elapsed().as_secs_f64() * 1e3
    };
    let st = Command::new("sh")
        .args(["-c", "sync && echo 3 > /proc/sys/vm/drop_caches"])
        .status()
        .expect("sh");
    assert!(st.success(), "dropping the page cache as root");
    let cold = read();
    let warm = read();
    eprintln!("reading the blob here: cold {cold:.0} ms, cached {warm:.0} ms");
    cold - warm
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
fn a_cold_trial_evicts_the_models_blob_and_its_load_reads_it_back_from_disk() {
    let c = cluster();
    let shipped = std::fs::read_to_string(
        repo().join("manifests/overlays/http-readiness/kustomization.yaml"),
    )
    .expect("the http-readiness overlay");
    let patches = &shipped[shipped.find("patches:").expect("its patches")..];
    let dir = tempfile::tempdir().unwrap();
    let overlay = crate::support::smollm2_overlay(dir.path(), "overlay", &format!("{patches}\n"));
    c.deploy(&overlay);
    let file = blob();
    let size = std::fs::metadata(&file).expect("the blob").len();

    // Warm means the files cached as a load before left them (the deployment before served
    // smollm2): read once here, as that load would have.
    std::io::copy(
        &mut std::fs::File::open(&file).expect("the blob"),
        &mut std::io::sink(),
    )
    .expect("reading the blob");
    let sampler = Sampler::start(file.clone());
    let warm = five(&c, &dir.path().join("warm.jsonl"), false);
    let cold = five(&c, &dir.path().join("cold.jsonl"), true);
    let samples = sampler.finish();
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
    // The kernel's word: a warm load finds the blob cached, a cold one reads it from disk.
    let mb = |b: u64| b as f64 / 1e6;
    for t in &warm {
        let (before, after) = around_load(&samples, t);
        eprintln!(
            "warm trial {}: blob resident {:.0} MB at T3, {:.0} MB at T4 (of {:.0} MB)",
            t.index,
            mb(before),
            mb(after),
            mb(size)
        );
        assert!(
            before >= size * 9 / 10,
            "warm trial {}: blob not cached at T3 (the node is this machine: did another \
             process drop its page cache?)",
            t.index
        );
    }
    for t in &cold {
        let (before, after) = around_load(&samples, t);
        eprintln!(
            "cold trial {}: blob resident {:.0} MB at T3, {:.0} MB at T4 (of {:.0} MB)",
            t.index,
            mb(before),
            mb(after),
            mb(size)
        );
        assert!(
            before <= size / 10,
            "cold trial {}: {:.0} MB of the blob still cached at T3",
            t.index,
            mb(before)
        );
        assert!(
            after >= size * 9 / 10,
            "cold trial {}: the load did not read the blob ({:.0} MB cached at T4)",
            t.index,
            mb(after)
        );
    }

    let (w, k) = (loads(&warm), loads(&cold));
    let (mw, mk) = (median(w.clone()), median(k.clone()));
    eprintln!(
        "load_duration of {MODEL} (ms): warm {w:.0?} median {mw:.0}; cold {k:.0?} median {mk:.0}"
    );
    // The load's time is printed, not asserted: with the blob evicted and read back (checked
    // above), the real Ollama's load_duration was 2649 ms cold against 1338 ms warm on one
    // run here, 1088 against 1142 in a CI run and 1255 against 1318 in another: this VM's disk
    // is cached by its host, so reading the blob cold costs what is printed below, inside
    // the load's own noise.
    let cost = cold_read_cost_ms(&file);
    eprintln!(
        "cold median - warm median {:.0} ms; a cold read of the blob costs {cost:.0} ms more than a cached one here",
        mk - mw
    );

    // Back to the shipped probe for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}
