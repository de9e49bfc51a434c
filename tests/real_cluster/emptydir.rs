//! The model gone after a replacement (issue 32; the study's first cloud run): the models
//! directory on an `emptyDir`, the model copied into the first pod once (`kubectl cp` of its
//! manifest and blobs from the models PersistentVolume: no registry can be reached here), a
//! `readygap run` trial that deletes the pod. The real kubelet gives the replacement a new,
//! empty `emptyDir`; the real Ollama answers, `/api/tags` lists nothing and the generate
//! answers 404 "model not found". readygap must say `model_missing_after_replacement`, naming
//! the volume. The readiness probe is the study's shallow `GET /api/tags`, as in that run (with the
//! shipped inference-aware probe the replacement would never turn Ready at all).

use crate::support::{Cluster, MODEL, NS, cluster, repo};
use serde_json::Value;

/// The smollm2 overlay, models on an emptyDir, readiness `GET /api/tags`.
fn emptydir_overlay(dir: &std::path::Path) -> std::path::PathBuf {
    crate::support::smollm2_overlay(
        dir,
        "emptydir",
        r#"patches:
  - target: {group: apps, version: v1, kind: Deployment, name: ollama}
    patch: |-
      - op: replace
        path: /spec/template/spec/volumes/0
        value:
          name: models
          emptyDir: {}
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe
        value:
          httpGet: {path: /api/tags, port: http}
          periodSeconds: 1
          timeoutSeconds: 1
          failureThreshold: 3
"#,
    )
}

/// A directory holding what Ollama needs of `MODEL`: `manifests/…/smollm2/135m` and the
/// blobs it names, taken from the models PersistentVolume (a hostPath on the one node).
fn model_files(c: &Cluster, out: &std::path::Path) -> u64 {
    let pv = c.k(&[
        "get",
        "pv",
        "ollama-models",
        "-o",
        "jsonpath={.spec.hostPath.path}",
    ]);
    let models = std::path::Path::new(&pv).join("models");
    let (name, tag) = MODEL.split_once(':').expect("name:tag");
    let rel = format!("manifests/registry.ollama.ai/library/{name}/{tag}");
    let manifest = std::fs::read_to_string(models.join(&rel)).expect("the model's manifest");
    let m: Value = serde_json::from_str(&manifest).expect("the manifest's JSON");
    std::fs::create_dir_all(out.join(&rel).parent().unwrap()).unwrap();
    std::fs::write(out.join(&rel), &manifest).unwrap();
    std::fs::create_dir_all(out.join("blobs")).unwrap();
    let mut bytes = 0;
    for d in std::iter::once(&m["config"]).chain(m["layers"].as_array().into_iter().flatten()) {
        let blob = d["digest"].as_str().expect("digest").replace(':', "-");
        bytes += std::fs::copy(
            models.join("blobs").join(&blob),
            out.join("blobs").join(&blob),
        )
        .expect("copying a blob");
    }
    bytes
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn a_replacement_on_an_emptydir_has_no_model_and_readygap_names_the_volume() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    c.deploy(&emptydir_overlay(dir.path()));
    let first = c.pod();
    // The first pod's emptyDir starts empty too: the model is copied into it once.
    let empty = c.kn(&["exec", &first, "-c", "ollama", "--", "ollama", "list"]);
    assert!(
        !empty.contains(MODEL),
        "a new emptyDir holds no model: {empty}"
    );
    let files = dir.path().join("models");
    let bytes = model_files(&c, &files);
    let dest = format!("{NS}/{first}:/root/.ollama/models");
    c.k(&[
        "cp",
        "-c",
        "ollama",
        &format!("{}/.", files.display()),
        &dest,
    ]);
    let listed = c.kn(&["exec", &first, "-c", "ollama", "--", "ollama", "list"]);
    eprintln!("copied {bytes} bytes into {first}'s emptyDir; ollama list:\n{listed}");
    assert!(listed.contains(MODEL), "{listed}");

    let rec = dir.path().join("run.jsonl");
    let out = c.run(
        &rec,
        &["--model", MODEL, "--trials", "1", "--format", "json"],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the trial fails: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let loaded = readygap_core::report::load_trials(&rec).expect("the recording");
    let t = loaded
        .trials
        .iter()
        .find(|t| !t.external)
        .expect("readygap's trial");
    let new_pod = t.new_pod.clone().expect("the replacement pod");
    eprintln!("readygap's trial: {:?}, marks {:?}", t.reason(), t.marks);

    // The real components: the replacement's volume is an emptyDir, its Ollama lists no
    // model (`ollama show` answers "not found", as readygap's generate was answered).
    let volume = c.kn(&[
        "get",
        "pod",
        &new_pod,
        "-o",
        "jsonpath={.spec.volumes[?(@.name==\"models\")]}",
    ]);
    let listed = c.kn(&["exec", &new_pod, "-c", "ollama", "--", "ollama", "list"]);
    let show = c.try_k(&[
        "-n", NS, "exec", &new_pod, "-c", "ollama", "--", "ollama", "show", MODEL,
    ]);
    eprintln!(
        "kubectl: {new_pod} volume {volume}; ollama list:\n{listed}ollama show {MODEL}: exit {:?}: {}",
        show.status.code(),
        String::from_utf8_lossy(&show.stderr).trim()
    );
    assert!(volume.contains("\"emptyDir\":{}"), "{volume}");
    assert!(!listed.contains(MODEL), "{listed}");
    assert!(
        String::from_utf8_lossy(&show.stderr).contains("not found"),
        "{show:?}"
    );
    let kubelet = c.kn(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={new_pod}"),
        "-o",
        "custom-columns=REASON:.reason,MESSAGE:.message",
    ]);
    eprintln!("kubectl get events {new_pod}:\n{kubelet}");

    let v = loaded
        .readiness_verdicts
        .iter()
        .find(|v| v["verdict"] == "model_missing_after_replacement" && v["pod"] == new_pod.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no model_missing_after_replacement on {new_pod}: {:#?}",
                loaded.readiness_verdicts
            )
        });
    eprintln!(
        "readygap's verdict: model_missing_after_replacement: {}\n  advice: {}",
        v["message"], v["advice"]
    );
    assert_eq!(v["evidence"]["models_volume"], "emptyDir", "{v:#}");
    assert_eq!(v["evidence"]["models_mount"], "/root/.ollama", "{v:#}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains(&format!("{MODEL} is not on disk"))),
        "{v:#}"
    );
    // The trial failed on the runtime's own answer to its generate.
    assert!(
        t.reason()
            .is_some_and(|r| r.contains(&format!("model '{MODEL}' not found"))),
        "{t:?}"
    );

    // Back to the shipped manifests (the PersistentVolumeClaim) for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}
