//! The lab runtime over real HTTP on loopback: every endpoint, model loading and residency,
//! memory while loading, keep-alive, boot and stop.

use readygap_lab::ground_truth::Transition;
use readygap_lab::profile::Stage;
use readygap_lab::runtime::RuntimeEvent;
use readygap_lab::testkit::runtime::*;
use serde_json::{Value, json};

const IDLE: u64 = 14_987_264;

#[tokio::test]
async fn every_endpoint_answers_and_generate_loads_the_model() {
    let p = profile("azure-3b");
    let resident = p.served_model().expect("3b").resident_bytes;
    let mut lab = start_listening(p, Options::default()).await;
    let http = client();

    let root = http.get(lab.url("/")).send().await.expect("GET /");
    assert_eq!(root.status(), 200);
    assert_eq!(root.text().await.expect("body"), "Ollama is running");
    let version: Value = get_json(&http, &lab.url("/api/version")).await;
    assert!(
        version["version"]
            .as_str()
            .is_some_and(|v| v.split('.').count() == 3),
        "{version}"
    );

    let tags: Value = get_json(&http, &lab.url("/api/tags")).await;
    let models = tags["models"].as_array().expect("models");
    let names: Vec<&str> = models.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(names, ["llama3.2:3b", "llama3.2:1b", "llama3.1:8b"]);
    let m = &models[0];
    assert_eq!(m["model"], "llama3.2:3b");
    assert_eq!(m["size"], 2_019_393_189u64);
    assert_eq!(m["digest"].as_str().map(str::len), Some(64));
    assert!(
        m["modified_at"]
            .as_str()
            .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
    );
    assert_eq!(m["details"]["format"], "gguf");
    assert_eq!(m["details"]["families"], json!(["llama"]));
    assert_eq!(m["details"]["parameter_size"], "3.2B");
    assert_eq!(m["details"]["quantization_level"], "Q4_K_M");

    let ps: Value = get_json(&http, &lab.url("/api/ps")).await;
    assert_eq!(ps["models"], json!([]));
    let idle = lab.handle.memory();
    assert_eq!(idle.current_bytes, IDLE);
    assert_eq!(idle.limit_bytes, 4 << 30);
    assert_eq!(idle.working_set_bytes, IDLE);

    let show: Value = post_json(
        &http,
        &lab.url("/api/show"),
        &json!({"model": "llama3.2:3b"}),
    )
    .await;
    assert_eq!(show["details"]["family"], "llama");
    assert_eq!(show["model_info"]["general.architecture"], "llama");

    // Not streamed: loads the model, answers READY with Ollama's durations.
    let before = std::time::Instant::now();
    let reply: Value = post_json(&http, &lab.url("/api/generate"), &json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"})).await;
    let wall = before.elapsed().as_nanos() as u64;
    assert_eq!(reply["response"], "READY");
    assert_eq!(reply["done"], true);
    assert_eq!(reply["done_reason"], "stop");
    let d = |k: &str| {
        reply[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} missing: {reply}"))
    };
    let (total, load, pe, eval) = (
        d("total_duration"),
        d("load_duration"),
        d("prompt_eval_duration"),
        d("eval_duration"),
    );
    assert!(load > 0 && pe > 0 && eval > 0, "{reply}");
    assert!(load + pe + eval <= total, "{reply}");
    assert!(
        total <= wall,
        "server total {total} ns > client wall {wall} ns"
    );
    // Load dominates prompt eval for the 3B profile (3961.8 vs 1269.6 ms before speed).
    assert!(load > pe, "{reply}");
    assert!(d("prompt_eval_count") > 0 && d("eval_count") > 0);
    assert!(reply["context"].as_array().is_some_and(|c| !c.is_empty()));
    assert_eq!(
        lab.wait_event(|e| matches!(e, RuntimeEvent::ModelResident { .. }))
            .await,
        RuntimeEvent::ModelResident {
            model: "llama3.2:3b".into()
        }
    );

    let loaded = lab.handle.memory();
    assert_eq!(
        loaded.current_bytes,
        IDLE + resident,
        "warm load: no page cache charged"
    );
    assert_eq!(
        loaded.working_set_bytes,
        loaded.current_bytes - loaded.inactive_file_bytes
    );
    let ps: Value = get_json(&http, &lab.url("/api/ps")).await;
    let running = &ps["models"][0];
    assert_eq!(running["name"], "llama3.2:3b");
    assert_eq!(running["size"], resident);
    assert_eq!(running["size_vram"], 0);
    assert_eq!(running["context_length"], 4096);
    let expires =
        chrono::DateTime::parse_from_rfc3339(running["expires_at"].as_str().expect("expires_at"))
            .expect("rfc3339");
    // keep_alive 1h at speed 50 = 72 s from now.
    let left = expires
        .signed_duration_since(chrono::Utc::now())
        .num_seconds();
    assert!((60..=73).contains(&left), "expires in {left} s");

    // A second request reuses the resident model: load is tiny.
    let again: Value = post_json(&http, &lab.url("/api/generate"), &json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"})).await;
    assert!(
        again["load_duration"].as_u64().expect("load") < load / 2,
        "{again}"
    );

    // Streamed: NDJSON, the first token early, then done with durations.
    let text = http
        .post(lab.url("/api/generate"))
        .json(&json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY"}))
        .send()
        .await
        .expect("stream")
        .text()
        .await
        .expect("body");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("ndjson line"))
        .collect();
    assert!(lines.len() >= 2, "{text}");
    assert_eq!(lines[0]["response"], "READY");
    assert_eq!(lines[0]["done"], false);
    let last = lines.last().expect("last");
    assert_eq!(last["done"], true);
    assert!(last["eval_duration"].as_u64().is_some_and(|e| e > 0));

    // /api/chat: the same model, the answer in an assistant message.
    let chat: Value = post_json(
        &http,
        &lab.url("/api/chat"),
        &json!({"model": "llama3.2:3b", "stream": false, "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Reply with exactly: READY"}]}),
    )
    .await;
    assert_eq!(
        chat["message"],
        json!({"role": "assistant", "content": "READY"})
    );
    assert_eq!(chat["done"], true);
    assert!(
        chat.get("context").is_none() && chat.get("response").is_none(),
        "{chat}"
    );
    assert!(chat["eval_duration"].as_u64().is_some_and(|e| e > 0));

    // Empty prompt with keep_alive 0 unloads, as Ollama does.
    let unload: Value = post_json(
        &http,
        &lab.url("/api/generate"),
        &json!({"model": "llama3.2:3b", "prompt": "", "keep_alive": 0, "stream": false}),
    )
    .await;
    assert_eq!(unload["done_reason"], "unload");
    assert_eq!(
        lab.wait_event(|e| matches!(e, RuntimeEvent::ModelUnloaded { .. }))
            .await,
        RuntimeEvent::ModelUnloaded {
            model: "llama3.2:3b".into()
        }
    );
    let ps: Value = get_json(&http, &lab.url("/api/ps")).await;
    assert_eq!(ps["models"], json!([]));
    assert_eq!(lab.handle.memory().current_bytes, IDLE);

    let gt: Vec<Transition> = lab
        .spec
        .ground_truth
        .entries()
        .iter()
        .map(|e| e.transition)
        .collect();
    assert_eq!(gt.first(), Some(&Transition::RuntimeListening));
    assert_eq!(
        gt.iter()
            .filter(|t| **t == Transition::InferenceDone)
            .count(),
        4
    );
    assert_eq!(
        gt.iter()
            .filter(|t| **t == Transition::ModelResident)
            .count(),
        1
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn errors_are_ollama_shaped() {
    let lab = start_listening(profile("azure-1b"), Options::default()).await;
    let http = client();
    let missing = http
        .post(lab.url("/api/generate"))
        .json(&json!({"model": "nope:7b", "prompt": "hi"}))
        .send()
        .await
        .expect("send");
    assert_eq!(missing.status(), 404);
    assert_eq!(
        missing.json::<Value>().await.expect("json"),
        json!({"error": "model 'nope:7b' not found"})
    );
    let missing = http
        .post(lab.url("/api/show"))
        .json(&json!({"model": "nope:7b"}))
        .send()
        .await
        .expect("send");
    assert_eq!(missing.status(), 404);
    for (body, needle) in [
        ("{", "invalid JSON"),
        ("", "missing request body"),
        ("{\"prompt\":\"x\"}", "model is required"),
    ] {
        let r = http
            .post(lab.url("/api/generate"))
            .body(body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "{body}");
        let v: Value = r.json().await.expect("json");
        assert!(
            v["error"].as_str().is_some_and(|e| e.contains(needle)),
            "{body}: {v}"
        );
    }
    let bad_keep = http
        .post(lab.url("/api/generate"))
        .json(&json!({"model": "llama3.2:1b", "keep_alive": "10"}))
        .send()
        .await
        .expect("send");
    assert_eq!(bad_keep.status(), 400);
    assert_eq!(
        http.get(lab.url("/api/nothing"))
            .send()
            .await
            .expect("send")
            .status(),
        404
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn memory_rises_linearly_while_loading_and_keep_alive_expires() {
    // A 3 s load at speed 1 (other stages short) so memory can be watched mid-load.
    let mut p = fixed(profile("azure-3b"));
    p.runtime_listen = Stage::fixed(20.0);
    p.request_overhead = Stage::fixed(1.0);
    let spec = p
        .models
        .iter_mut()
        .find(|m| m.name == "llama3.2:3b")
        .expect("3b");
    spec.load = Stage::fixed(3000.0);
    spec.prompt_eval = Stage::fixed(10.0);
    spec.eval = Stage::fixed(10.0);
    let resident = spec.resident_bytes;
    let mut lab = start_listening(
        p,
        Options {
            speed: 1.0,
            ..Options::default()
        },
    )
    .await;
    let url = lab.url("/api/generate");
    let request = tokio::spawn(async move {
        client().post(url)
            .json(&json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "2s"}))
            .send().await.expect("generate").json::<Value>().await.expect("json")
    });
    // Watch memory: it must pass through values strictly between idle and loaded, and never
    // go down while loading.
    let mut samples = Vec::new();
    wait_until("the load to finish", || {
        let m = lab.handle.memory();
        samples.push(m.current_bytes);
        m.current_bytes == IDLE + resident
    })
    .await;
    let mid = samples
        .iter()
        .filter(|b| **b > IDLE + resident / 10 && **b < IDLE + resident * 9 / 10)
        .count();
    assert!(mid >= 3, "no mid-load samples: {samples:?}");
    assert!(
        samples.windows(2).all(|w| w[0] <= w[1]),
        "memory went down while loading"
    );
    let reply = request.await.expect("request task");
    assert_eq!(reply["response"], "READY");
    let load = reply["load_duration"].as_u64().expect("load");
    assert!(
        load >= 3_000_000_000,
        "load {load} ns shorter than the 3 s stage"
    );

    // keep_alive 2s: unloaded by the runtime's own timer.
    lab.wait_event(|e| matches!(e, RuntimeEvent::ModelUnloaded { .. }))
        .await;
    assert_eq!(lab.handle.memory().current_bytes, IDLE);
    lab.handle.stop().await;
}

#[tokio::test]
async fn boot_refuses_connections_until_listening_and_stop_frees_the_port() {
    let mut p = fixed(profile("azure-1b"));
    p.runtime_listen = Stage::fixed(3000.0);
    let mut lab = start(
        p.clone(),
        Options {
            speed: 1.0,
            ..Options::default()
        },
    )
    .await;
    // Booting: the port is reserved but nobody listens.
    let refused = tokio::net::TcpStream::connect((lab.spec.ip, 11434)).await;
    assert!(refused.is_err(), "connected while booting");
    assert!(!lab.handle.is_listening());
    // The container runs while the runtime boots: exec works, the ollama CLI cannot connect.
    let cat = lab
        .handle
        .exec(vec!["cat".into(), "/sys/fs/cgroup/memory.current".into()])
        .collect()
        .await;
    assert_eq!(cat.stdout_text(), "14987264\n");
    let ps = lab
        .handle
        .exec(vec!["ollama".into(), "ps".into()])
        .collect()
        .await;
    assert_eq!(ps.code, Some(1));
    assert!(
        ps.stderr_text().contains("could not connect"),
        "{}",
        ps.stderr_text()
    );
    lab.wait_event(|e| matches!(e, RuntimeEvent::Listening))
        .await;
    assert!(
        tokio::net::TcpStream::connect((lab.spec.ip, 11434))
            .await
            .is_ok()
    );
    lab.handle.stop().await;
    assert!(!lab.handle.is_listening());
    assert!(
        tokio::net::TcpStream::connect((lab.spec.ip, 11434))
            .await
            .is_err(),
        "still accepting after stop"
    );
    // The same address can be bound again at once (a restarted container).
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let again = readygap_lab::runtime::start(lab.spec.clone(), tx)
        .await
        .expect("rebind after stop");
    again.stop().await;
}

#[tokio::test]
async fn an_empty_volume_has_no_models_until_pulled() {
    // The emptyDir scenario (the study's archived failing runs): nothing on disk after a
    // replacement, so generate is a 404 until the model is pulled again.
    let disk = std::sync::Arc::new(readygap_lab::runtime::ModelDisk::empty());
    let lab = start_listening(
        profile("azure-1b"),
        Options {
            disk: Some(disk.clone()),
            ..Options::default()
        },
    )
    .await;
    let http = client();
    let tags: Value = get_json(&http, &lab.url("/api/tags")).await;
    assert_eq!(tags, json!({"models": []}));
    let missing = http
        .post(lab.url("/api/generate"))
        .json(&json!({"model": "llama3.2:1b", "prompt": "Reply with exactly: READY", "stream": false}))
        .send()
        .await
        .expect("generate");
    assert_eq!(missing.status(), 404);
    let pulled: Value = post_json(
        &http,
        &lab.url("/api/pull"),
        &json!({"model": "llama3.2:1b", "stream": false}),
    )
    .await;
    assert_eq!(pulled, json!({"status": "success"}));
    assert_eq!(disk.list().len(), 1);
    let unknown = http
        .post(lab.url("/api/pull"))
        .json(&json!({"model": "nope:1b"}))
        .send()
        .await
        .expect("pull");
    assert_eq!(unknown.status(), 500);
    let reply: Value = post_json(
        &http,
        &lab.url("/api/generate"),
        &json!({"model": "llama3.2:1b", "prompt": "Reply with exactly: READY", "stream": false}),
    )
    .await;
    assert_eq!(reply["response"], "READY");
    lab.handle.stop().await;
}

#[tokio::test]
async fn default_keep_alive_is_five_minutes_and_zero_unloads_after_answering() {
    let mut lab = start_listening(profile("azure-1b"), Options::default()).await;
    let http = client();
    let ask = async |keep_alive: Option<Value>| {
        let mut body =
            json!({"model": "llama3.2:1b", "prompt": "Reply with exactly: READY", "stream": false});
        if let Some(k) = keep_alive {
            body["keep_alive"] = k;
        }
        let reply = post_json(&http, &lab.url("/api/generate"), &body).await;
        assert_eq!(reply["response"], "READY", "{reply}");
    };
    // Milliseconds until the first resident model expires, as /api/ps says.
    let expires_in_ms = async || {
        let ps = get_json(&http, &lab.url("/api/ps")).await;
        let expires = chrono::DateTime::parse_from_rfc3339(
            ps["models"][0]["expires_at"].as_str().expect("expires_at"),
        )
        .expect("rfc3339");
        expires
            .signed_duration_since(chrono::Utc::now())
            .num_milliseconds()
    };
    ask(None).await;
    // 5 minutes at speed 50 = 6 s.
    let left = expires_in_ms().await;
    assert!((3_000..=6_000).contains(&left), "expires in {left} ms");
    // A number of seconds works too: 600 s at speed 50 = 12 s.
    ask(Some(json!(600))).await;
    let left = expires_in_ms().await;
    assert!((9_000..=12_000).contains(&left), "expires in {left} ms");
    // keep_alive 0 with a prompt: answered, then unloaded.
    ask(Some(json!(0))).await;
    assert_eq!(
        lab.wait_event(|e| matches!(e, RuntimeEvent::ModelUnloaded { .. }))
            .await,
        RuntimeEvent::ModelUnloaded {
            model: "llama3.2:1b".into()
        }
    );
    let ps: Value = get_json(&http, &lab.url("/api/ps")).await;
    assert_eq!(ps["models"], json!([]));
    lab.handle.stop().await;
}
