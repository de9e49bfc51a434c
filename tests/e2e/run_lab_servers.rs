//! `readygap run` against the lab imitating the other LLM servers (`LabOptions::shape`,
//! `--lab-server`): the runtime is guessed from the pod's image, T2 splits where the server
//! tells the two apart (llama-server: 503 "Loading model" first, so "HTTP answers" strictly
//! before "model ready") and not where it does not (vLLM refuses connections until its
//! model is loaded: "HTTP answers" = "model ready"), and the streamed completion ends with
//! the server's timings (llama.cpp) or its usage (vLLM); vLLM's `/metrics` are recorded.

use clap::Parser;
use readygap::args::RunArgs;
use readygap::commands::run::run_with;
use readygap_lab::kube::shapes::Shape;
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: RunArgs,
}

static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn lab(shape: Shape) -> (LabHandle, String) {
    lab_in(shape, readygap_lab::scenario::Scenario::Baseline).await
}

/// The lab (profile local-1b at speed 4) serving `shape` in `scenario`, ready, and its model.
async fn lab_in(shape: Shape, scenario: readygap_lab::scenario::Scenario) -> (LabHandle, String) {
    let p = Profile::named("local-1b").expect("profile");
    let model = p.model.clone();
    let mut o = LabOptions::new(p);
    o.speed = 4.0;
    o.shape = shape;
    o.scenario = scenario;
    let lab = serve(o).await.expect("lab starts");
    lab.wait_ready(Duration::from_secs(120))
        .await
        .expect("lab ready");
    (lab, model)
}

async fn one_trial(lab: &LabHandle, model: &str, extra: &[&str]) -> readygap_live::run::RunOutput {
    let kc = lab.kubeconfig.display().to_string();
    let mut v = vec![
        "readygap",
        "--kubeconfig",
        kc.as_str(),
        "-n",
        lab.namespace.as_str(),
        "--model",
        model,
        "--trials",
        "1",
        "--cooldown",
        "0s",
        "--format",
        "json",
    ];
    v.extend_from_slice(extra);
    let args = Wrap::try_parse_from(v).expect("arguments parse").args;
    tokio::time::timeout(
        Duration::from_secs(180),
        run_with(args, CancellationToken::new()),
    )
    .await
    .expect("the trial ends")
    .expect("the run ends")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_imitation_answers_http_before_its_model_is_ready() {
    let _one = ONE_LAB.lock().await;
    let (lab, model) = lab(Shape::Llamacpp).await;
    let out = one_trial(&lab, &model, &[]).await;
    assert_eq!(out.trials.len(), 1, "{}", out.stdout);
    let t = &out.trials[0];
    assert!(t.is_ok(), "{t:?}");
    let (http, ready) = (t.marks.t2_http.expect("T2 HTTP"), t.marks.t2.expect("T2"));
    assert!(http < ready, "503 before 200: {http} vs {ready}");
    assert!(
        t.durations.eval_tokens.is_some_and(|n| n > 0),
        "{:?}",
        t.durations
    );
    assert!(t.durations.eval_ns.is_some(), "timings: {:?}", t.durations);
    assert!(
        out.stdout.contains("\"runtime_http_answers\""),
        "{}",
        out.stdout
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_imitation_refuses_until_loaded_so_http_is_model_ready() {
    let _one = ONE_LAB.lock().await;
    let (lab, model) = lab(Shape::Vllm).await;
    // The openai adapter over the pod proxy: the API server's 503 for a refused connection
    // is not the runtime's answer.
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("vllm.jsonl");
    let rec_arg = rec.display().to_string();
    let out = one_trial(&lab, &model, &["--runtime", "openai", "--record", &rec_arg]).await;
    assert_eq!(out.trials.len(), 1, "{}", out.stdout);
    // vLLM's /metrics, read through the pod proxy (GET), are on record.
    let metrics: Vec<_> = readygap_core::record::jsonl::read(&rec)
        .unwrap()
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            readygap_core::event::EventKind::RuntimeMetrics { metrics, .. } => Some(metrics),
            _ => None,
        })
        .collect();
    assert!(
        metrics
            .iter()
            .any(|m| m.running.is_some() && m.waiting == Some(0.0) && m.kv_cache.is_some()),
        "{metrics:?}"
    );
    let t = &out.trials[0];
    assert!(t.is_ok(), "{t:?}");
    assert_eq!(
        t.marks.t2_http, t.marks.t2,
        "vLLM: HTTP answers = model ready"
    );
    assert!(t.marks.t2.is_some());
    assert!(
        t.durations.eval_tokens.is_some_and(|n| n > 0),
        "usage: {:?}",
        t.durations
    );
    assert_eq!(t.durations.eval_ns, None, "vLLM sends no timings");
    // vLLM's start-up phases, read from the new pod's log as the imitation writes them in
    // vLLM's words, are secondary marks of the trial, in vLLM's order, after T0 and by T2
    // (vLLM serves HTTP only once its engine is up).
    let phases = [
        "weights_loaded",
        "kv_cache_profiled",
        "kv_cache_allocated",
        "graphs_captured",
        "engine_ready",
        "listening",
    ];
    let at: Vec<_> = phases
        .iter()
        .map(|p| {
            *t.marks
                .startup
                .get(*p)
                .unwrap_or_else(|| panic!("no {p} in {:?}", t.marks.startup))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] <= w[1]),
        "in order: {:?}",
        t.marks.startup
    );
    assert!(t.marks.t0.unwrap() <= at[0] && at[5] <= t.marks.t2.unwrap());
    // `run --format json` carries them, and `report --format json` of the recording gives
    // each phase's statistics.
    assert!(out.stdout.contains("\"graphs_captured\""), "{}", out.stdout);
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["report", "--format", "json"])
        .arg(&rec)
        .output()
        .expect("readygap report");
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).expect("report json");
    let phases = &v["files"][0]["startup_phases"];
    for p in ["weights_loaded", "kv_cache_allocated", "graphs_captured"] {
        assert_eq!(phases[p]["n"], 1, "{p}: {phases}");
    }
    // The OpenAI API says nothing of the models on disk: no verdict that the model is
    // missing (it answered).
    let verdicts = v["files"][0]["readiness_verdicts"].to_string();
    assert!(
        !verdicts.contains("model_missing_after_replacement"),
        "{verdicts}"
    );
    lab.shutdown().await;
}

/// GPU memory (issue 33, part): on the lab's `gpu` scenario the serving container asks for
/// a GPU, so readygap reads `nvidia-smi` in it (one long-lived exec, the lab's simulated
/// GPU answering as the real query prints): the recording holds the new pod's VRAM from that
/// source, rising as the model loads, on a GPU of 24 GiB. On the baseline scenario (no GPU
/// asked) there is no GPU sampler at all: no sample, no "unavailable".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gpu_pods_vram_is_read_with_nvidia_smi_and_a_cpu_pod_has_none() {
    use readygap_core::event::EventKind;
    let _one = ONE_LAB.lock().await;
    for (scenario, gpu) in [
        (readygap_lab::scenario::Scenario::Gpu, true),
        (readygap_lab::scenario::Scenario::Baseline, false),
    ] {
        let (lab, model) = lab_in(Shape::Ollama, scenario).await;
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("gpu.jsonl");
        let rec_arg = rec.display().to_string();
        let out = one_trial(&lab, &model, &["--record", &rec_arg]).await;
        let t = &out.trials[0];
        assert!(t.is_ok(), "{scenario}: {t:?}");
        let events = readygap_core::record::jsonl::read(&rec).unwrap().events;
        let new_pod = t.new_pod.clone().unwrap();
        let vram: Vec<(u64, u64)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::GpuSample {
                    pod, source, gpus, ..
                } if *pod == new_pod => {
                    assert_eq!(source, readygap_live::sources::gpu::SOURCE);
                    Some((
                        gpus.iter().map(|g| g.used).sum(),
                        gpus.iter().map(|g| g.total).sum(),
                    ))
                }
                _ => None,
            })
            .collect();
        let unavailable = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::GpuUnavailable { .. }))
            .count();
        if gpu {
            assert!(!vram.is_empty(), "no GPU sample of {new_pod}");
            assert!(vram.iter().all(|(_, total)| *total == 24 << 30), "{vram:?}");
            let (first, last) = (vram[0].0, vram.last().unwrap().0);
            assert!(last > first, "VRAM rose as the model loaded: {vram:?}");
            assert_eq!(unavailable, 0);
            eprintln!(
                "[gpu] {} samples of {new_pod}: {:.2} → {:.2} GiB of 24",
                vram.len(),
                first as f64 / (1u64 << 30) as f64,
                last as f64 / (1u64 << 30) as f64
            );
        } else {
            assert!(vram.is_empty() && unavailable == 0, "{scenario}: {vram:?}");
        }
        lab.shutdown().await;
    }
}

/// `vram_overcommit` (issue 33) on the lab's `gpu-shared` scenario: one physical GPU
/// time-sliced into two `nvidia.com/gpu`, vLLM's imitation rolled out with surge. Once the
/// old pod holds its 0.9 of the GPU, the surge pod lands on the same GPU (one UUID in both
/// pods' `nvidia-smi`), finds too little free memory, writes vLLM's own refusal and exits:
/// the trial fails by the restart, and the verdict quotes the line and names the GPU with
/// both pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_vllm_on_a_shared_full_gpu_is_vram_overcommit() {
    let _one = ONE_LAB.lock().await;
    let (lab, model) = lab_in(Shape::Vllm, readygap_lab::scenario::Scenario::GpuShared).await;
    let dir = tempfile::tempdir().unwrap();
    // The lab turns Ready once the first pod's engine answers (its VRAM held); should a
    // replacement still find the GPU free, the next one meets a loaded predecessor.
    let mut failed = None;
    for i in 0..2 {
        let rec = dir.path().join(format!("shared-{i}.jsonl"));
        let rec_arg = rec.display().to_string();
        let extra = [
            "--runtime",
            "openai",
            "--replace",
            "restart",
            "--ready-timeout",
            "20s",
            "--record",
            &rec_arg,
        ];
        let out = one_trial(&lab, &model, &extra).await;
        let t = out.trials[0].clone();
        if !t.is_ok() {
            failed = Some((t, rec, out.stdout));
            break;
        }
    }
    let (t, rec, stdout) = failed.expect("a surge pod on the loaded GPU fails");
    let status = format!("{:?}", t.status).to_lowercase();
    assert!(status.contains("restart"), "{status}");
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["report", "--format", "json"])
        .arg(&rec)
        .output()
        .expect("readygap report");
    let v: serde_json::Value = serde_json::from_slice(&report.stdout).expect("report json");
    let verdicts = v["files"][0]["readiness_verdicts"]
        .as_array()
        .unwrap()
        .clone();
    let over: Vec<_> = verdicts
        .iter()
        .filter(|x| x["verdict"] == "vram_overcommit")
        .collect();
    assert_eq!(over.len(), 1, "{verdicts:#?}");
    // The surge pod never turned Ready (the trial may not have named it): the verdict's pod
    // is one of the GPU's two holders, the one whose engine refused.
    let msg = over[0]["message"].as_str().unwrap();
    let pod = over[0]["pod"].as_str().unwrap();
    if let Some(new_pod) = &t.new_pod {
        assert_eq!(pod, new_pod);
    }
    assert!(
        msg.contains("Free memory on device") && msg.contains("less than desired GPU memory"),
        "{msg}"
    );
    let pods = over[0]["evidence"]["gpu"]["pods"]
        .as_array()
        .expect("the GPU's holders");
    assert_eq!(pods.len(), 2, "the old pod and the surge pod: {msg}");
    assert!(pods.iter().any(|p| p["pod"] == pod), "{msg}");
    assert!(stdout.contains("vram_overcommit"), "{stdout}");
    eprintln!("[gpu-shared] {msg}");
    lab.shutdown().await;
}

/// The DCGM exporter is the preferred source of GPU memory (issue 33): with `--dcgm URL`
/// (the lab's imitation of the exporter, pods labelled as its Kubernetes mapping labels
/// them) the new pod's samples come from it once it labels the pod, and the `nvidia-smi`
/// exec stops (no sample from it after the first from DCGM); samples read before say why
/// DCGM was passed over. An exporter that refuses: `nvidia-smi`, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dcgm_exporter_is_preferred_once_it_labels_the_pod() {
    use readygap_core::event::EventKind;
    let _one = ONE_LAB.lock().await;
    let (lab, model) = lab_in(Shape::Ollama, readygap_lab::scenario::Scenario::Gpu).await;
    let url = lab.dcgm_exporter().await.expect("the lab's DCGM exporter");
    let dir = tempfile::tempdir().unwrap();
    let samples = |rec: &std::path::Path, pod: &str| -> Vec<(String, Vec<String>, u64)> {
        readygap_core::record::jsonl::read(rec)
            .unwrap()
            .events
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::GpuSample {
                    pod: p,
                    source,
                    gpus,
                    passed_over,
                } if p == pod => Some((source, passed_over, gpus.iter().map(|g| g.used).sum())),
                _ => None,
            })
            .collect()
    };
    for (dcgm, works) in [
        (url.clone(), true),
        ("http://127.0.0.1:9/metrics".into(), false),
    ] {
        let rec = dir.path().join("dcgm.jsonl");
        let rec_arg = rec.display().to_string();
        let out = one_trial(&lab, &model, &["--dcgm", &dcgm, "--record", &rec_arg]).await;
        let t = &out.trials[0];
        assert!(t.is_ok(), "{t:?}");
        let pod = t.new_pod.clone().unwrap();
        let s = samples(&rec, &pod);
        let from_dcgm = format!("DCGM exporter {dcgm}");
        let first = s.iter().position(|(src, _, _)| *src == from_dcgm);
        if works {
            let first = first.unwrap_or_else(|| panic!("no sample from DCGM: {s:?}"));
            assert!(
                s[first..].iter().all(|(src, _, _)| *src == from_dcgm),
                "nvidia-smi after DCGM: {s:?}"
            );
            assert!(s[first..].iter().all(|(_, why, _)| why.is_empty()));
            assert!(
                s.iter().map(|x| x.2).max() > s.first().map(|x| x.2),
                "{s:?}"
            );
            assert!(
                s[..first]
                    .iter()
                    .all(|(src, why, _)| src == readygap_live::sources::gpu::SOURCE
                        && why.iter().any(|w| w.contains(&dcgm))),
                "{s:?}"
            );
            eprintln!(
                "[dcgm] {} samples of {pod}, the first {first} from nvidia-smi",
                s.len()
            );
        } else {
            assert!(first.is_none() && !s.is_empty(), "{s:?}");
            assert!(
                s.iter()
                    .all(|(src, why, _)| src == readygap_live::sources::gpu::SOURCE
                        && why
                            .iter()
                            .any(|w| w.starts_with(&format!("DCGM exporter {dcgm}: ")))),
                "{s:?}"
            );
        }
    }
    lab.shutdown().await;
}
