//! The lab's runtime imitates a given Ollama version, and readygap reads what each one does
//! (issue 14, items 5, 6 and 7): a thinking model streams `thinking` chunks before the answer
//! (Ollama ≥ 0.12.4 thinks by default, server/routes.go GenerateHandler), 0.12 loads a model
//! next to a resident one and is OOM-killed, 0.13 on cgroup v2 evicts the resident model or
//! refuses a load with 500 "model requires more system memory (X) than is available (Y)", and
//! a pod with a GPU (the `gpu` overlay: `nvidia.com/gpu: 1`) holds its models in VRAM.

use readygap_lab::profile::{Profile, thinking_model};
use readygap_lab::runtime::RuntimeEvent;
use readygap_lab::testkit::runtime::{Options, client, fixed, post_json, profile, start_listening};
use readygap_live::sources::runtime::ollama::GenerateStream;
use readygap_live::sources::runtime::stream::Fold;
use serde_json::{Value, json};

fn with_version(mut p: Profile, v: &str) -> Profile {
    p.ollama_version = v.into();
    p
}

/// The NDJSON lines of a streamed generate, as sent.
async fn stream_lines(http: &reqwest::Client, url: &str, body: Value) -> (u16, Vec<Value>) {
    let r = http.post(url).json(&body).send().await.expect("generate");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (status, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thinking_model_streams_its_thinking_first_and_readygap_sees_the_first_token() {
    let mut p = fixed(profile("local-1b"));
    p.models.push(thinking_model());
    let lab = start_listening(p, Options::default()).await;
    let http = client();
    let url = lab.url("/api/generate");
    let (status, lines) = stream_lines(
        &http,
        &url,
        json!({"model": "qwen3:1.7b", "prompt": "Reply with exactly: READY"}),
    )
    .await;
    assert_eq!(status, 200);
    // Thinking chunks (empty response) first, then the answer, then done.
    let first_answer = lines
        .iter()
        .position(|l| l["response"].as_str().is_some_and(|r| !r.is_empty()))
        .expect("an answer chunk");
    assert!(first_answer > 0, "{lines:#?}");
    for l in &lines[..first_answer] {
        assert_eq!(l["response"], "", "{l}");
        assert!(l["thinking"].as_str().is_some_and(|t| !t.is_empty()), "{l}");
        assert_eq!(l["done"], false);
    }
    assert!(
        lines[first_answer..]
            .iter()
            .all(|l| l.get("thinking").is_none())
    );
    assert_eq!(lines.last().expect("done")["done"], true);
    // readygap's stream reader: the first token is the first thinking chunk.
    let mut g = GenerateStream::default();
    let mut first_at = None;
    for (i, l) in lines.iter().enumerate() {
        if g.push(format!("{l}\n").as_bytes()).first_token {
            first_at = Some(i);
        }
    }
    assert_eq!(first_at, Some(0));
    assert_eq!(g.response, "READY");
    assert!(g.done);

    // think: false, as `--think false` sends it: the answer only.
    let (_, lines) = stream_lines(
        &http,
        &url,
        json!({"model": "qwen3:1.7b", "prompt": "Reply with exactly: READY", "think": false}),
    )
    .await;
    assert!(
        lines.iter().all(|l| l.get("thinking").is_none()),
        "{lines:#?}"
    );
    assert_eq!(lines[0]["response"], "READY");
    // A model that cannot think refuses think: true (routes.go: "%q does not support thinking").
    let reply = http
        .post(&url)
        .json(&json!({"model": "llama3.2:1b", "prompt": "x", "think": true}))
        .send()
        .await
        .expect("generate");
    assert_eq!(reply.status().as_u16(), 400);
    let body: Value = reply.json().await.expect("json");
    assert_eq!(body["error"], "\"llama3.2:1b\" does not support thinking");
}

#[test]
fn the_think_flag_is_sent_as_given() {
    use readygap_live::sources::runtime::ollama::generate_body;
    let body = |t| serde_json::from_slice::<Value>(&generate_body("m", "p", t)).unwrap();
    assert!(
        body(None).get("think").is_none(),
        "absent: the model's own default"
    );
    assert_eq!(body(Some(true))["think"], true);
    assert_eq!(body(Some(false))["think"], false);
}

/// 0.12.x: FreeMemory comes from /proc/meminfo (the host's), so the load goes ahead next to
/// the resident model and the kernel kills the container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_0_12_loads_next_to_a_resident_model_and_is_killed() {
    let p = with_version(fixed(profile("local-3b")), "0.12.6");
    let mut lab = start_listening(p, Options::default()).await;
    let http = client();
    let url = lab.url("/api/generate");
    post_json(
        &http,
        &url,
        &json!({"model": "llama3.2:1b", "prompt": "hi", "stream": false}),
    )
    .await;
    let r = http
        .post(&url)
        .json(&json!({"model": "llama3.2:3b", "prompt": "hi", "stream": false}))
        .send()
        .await;
    assert!(r.is_err() || r.is_ok_and(|r| r.status() == 500));
    let e = lab
        .wait_event(|e| matches!(e, RuntimeEvent::OomKilled { .. }))
        .await;
    let RuntimeEvent::OomKilled { resident, .. } = e else {
        unreachable!()
    };
    assert_eq!(resident.len(), 2, "{resident:?}");
}

/// 0.13 on cgroup v2 (discover/cpu_linux.go getCPUMemByCgroups): the new model does not fit
/// in memory.max − memory.current, so the scheduler unloads the idle 1B (server/sched.go
/// findRunnerToUnload) and loads the 3B; nothing is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_0_13_evicts_the_resident_model_to_make_room() {
    let p = with_version(fixed(profile("local-3b")), "0.13.0");
    let mut lab = start_listening(p, Options::default()).await;
    let http = client();
    let url = lab.url("/api/generate");
    let version: Value =
        readygap_lab::testkit::runtime::get_json(&http, &lab.url("/api/version")).await;
    assert_eq!(version["version"], "0.13.0");
    post_json(
        &http,
        &url,
        &json!({"model": "llama3.2:1b", "prompt": "hi", "stream": false}),
    )
    .await;
    let reply = post_json(
        &http,
        &url,
        &json!({"model": "llama3.2:3b", "prompt": "hi", "stream": false}),
    )
    .await;
    assert_eq!(reply["done"], true, "{reply}");
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let e = lab
            .wait_event(|e| {
                matches!(
                    e,
                    RuntimeEvent::ModelResident { .. }
                        | RuntimeEvent::ModelUnloaded { .. }
                        | RuntimeEvent::OomKilled { .. }
                )
            })
            .await;
        seen.push(e);
    }
    assert_eq!(
        seen,
        [
            RuntimeEvent::ModelResident {
                model: "llama3.2:1b".into()
            },
            RuntimeEvent::ModelUnloaded {
                model: "llama3.2:1b".into()
            },
            RuntimeEvent::ModelResident {
                model: "llama3.2:3b".into()
            },
        ]
    );
    assert!(!lab.handle.oom_killed());
    assert_eq!(lab.handle.resident().len(), 1);
}

/// 0.13 with nothing to evict: HTTP 500 with Ollama's sentence and figures (llm/server.go,
/// format.HumanBytes2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_0_13_refuses_a_model_larger_than_the_free_memory() {
    let mut p = with_version(fixed(profile("local-3b")), "0.13.0");
    p.memory_limit_bytes = 2 << 30;
    let lab = start_listening(p, Options::default()).await;
    let http = client();
    let r = http
        .post(lab.url("/api/generate"))
        .json(&json!({"model": "llama3.2:3b", "prompt": "hi", "stream": false}))
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status().as_u16(), 500);
    let body: Value = r.json().await.expect("json");
    let e = body["error"].as_str().expect("error");
    assert!(
        e.starts_with("model requires more system memory (2.7 GiB) than is available (2.0 GiB)"),
        "{e}"
    );
    assert!(!lab.handle.oom_killed());
}

/// 0.13 on cgroup v1: no memory.max at /sys/fs/cgroup, so the host's figures rule and the
/// container is killed as with 0.12.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_0_13_on_cgroup_v1_is_still_killed() {
    let mut p = with_version(fixed(profile("local-3b")), "0.13.0");
    p.cgroup_v1 = true;
    let mut lab = start_listening(p, Options::default()).await;
    let http = client();
    let url = lab.url("/api/generate");
    post_json(
        &http,
        &url,
        &json!({"model": "llama3.2:1b", "prompt": "hi", "stream": false}),
    )
    .await;
    let _ = http
        .post(&url)
        .json(&json!({"model": "llama3.2:3b", "prompt": "hi", "stream": false}))
        .send()
        .await;
    lab.wait_event(|e| matches!(e, RuntimeEvent::OomKilled { .. }))
        .await;
}
