//! Overlapping residency kills the container: the published "1B resident, then 3B under
//! 4 GiB" case, over real HTTP.

use readygap_lab::ground_truth::Transition;
use readygap_lab::runtime::{ExecChunk, RuntimeEvent};
use readygap_lab::testkit::runtime::*;
use serde_json::{Value, json};

#[tokio::test]
async fn loading_3b_next_to_a_resident_1b_under_4gib_is_oom_killed() {
    let p = profile("azure-1b");
    let one = p.model_named("llama3.2:1b").expect("1b").resident_bytes;
    // Speed 5: the 3B load takes ~0.8 s before the kill, long enough to watch memory rise.
    let mut lab = start_listening(
        p,
        Options {
            speed: 5.0,
            ..Options::default()
        },
    )
    .await;
    let http = client();

    let first: Value = post_json(&http, &lab.url("/api/generate"), &json!({"model": "llama3.2:1b", "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": -1})).await;
    assert_eq!(first["response"], "READY");
    lab.wait_event(|e| matches!(e, RuntimeEvent::ModelResident { .. }))
        .await;
    // A long exec stream runs in the container when it dies.
    let mut watch = lab.handle.exec(vec![
        "sh".into(),
        "-c".into(),
        "while :; do cat /sys/fs/cgroup/memory.current; sleep 0.02; done".into(),
    ]);
    assert!(matches!(watch.recv().await, Some(ExecChunk::Stdout(_))));

    let url = lab.url("/api/generate");
    let second = tokio::spawn(async move {
        client().post(url)
            .json(&json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY", "stream": false}))
            .send().await
    });
    // memory.current climbs from the 1B level towards the limit, never past it, until the kill.
    let mut samples = Vec::new();
    wait_until("the OOM kill", || {
        samples.push(lab.handle.memory().current_bytes);
        lab.handle.oom_killed()
    })
    .await;
    let before_kill: Vec<u64> = samples.iter().copied().filter(|b| *b > 0).collect();
    assert!(before_kill.iter().all(|b| *b <= 4 << 30), "{before_kill:?}");
    assert!(
        before_kill
            .iter()
            .any(|b| *b > 14_987_264 + one + (1 << 30)),
        "the 3B load never rose: {before_kill:?}"
    );
    let second = second.await.expect("request task");
    match second {
        Err(e) => assert!(!e.is_timeout(), "expected a reset connection, got {e}"),
        Ok(r) => {
            assert_eq!(r.status(), 500);
            let v: Value = r.json().await.expect("json");
            assert_eq!(
                v["error"],
                "llama runner process has terminated: signal: killed"
            );
        }
    }

    let RuntimeEvent::OomKilled { resident, limit } = lab
        .wait_event(|e| matches!(e, RuntimeEvent::OomKilled { .. }))
        .await
    else {
        unreachable!()
    };
    assert_eq!(limit, 4 << 30);
    let names: Vec<&str> = resident.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(names, ["llama3.2:1b", "llama3.2:3b"]);
    assert_eq!(resident[0].1, one);
    // The 3B was killed part-way: what it had loaded filled the limit.
    assert!(
        resident[1].1 > 0 && resident[1].1 < 2_640_238_592,
        "{resident:?}"
    );
    assert!(
        14_987_264 + resident[0].1 + resident[1].1 >= limit - 1,
        "{resident:?}"
    );

    let gt = lab.spec.ground_truth.entries();
    let oom = gt
        .iter()
        .find(|e| e.transition == Transition::OomKilled)
        .expect("oom_killed in the ground truth");
    assert_eq!(oom.detail["limit"], json!(4u64 << 30));
    assert_eq!(oom.detail["resident"].as_array().map(Vec::len), Some(2));

    let mem = lab.handle.memory();
    assert_eq!(mem.oom_kill_count, 1);
    assert_eq!(mem.current_bytes, 0, "a dead container has no memory");
    assert!(lab.handle.oom_killed());
    assert!(!lab.handle.is_listening());
    // The exec stream died with the container (137), and the port is closed.
    let mut last = None;
    while let Some(chunk) = watch.recv().await {
        last = Some(chunk);
    }
    assert_eq!(last, Some(ExecChunk::Exit(137)));
    wait_until("port closed", || {
        std::net::TcpStream::connect((lab.spec.ip, 11434)).is_err()
    })
    .await;
    let out = lab.handle.exec(vec!["true".into()]).collect().await;
    assert_eq!(out.code, Some(126));

    // The kubelet restarts the container: same pod, same address, a fresh cgroup.
    let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let restarted = readygap_lab::runtime::start(lab.spec.clone(), tx)
        .await
        .expect("restart on the same address");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(RuntimeEvent::Listening)) => break,
            Ok(Some(_)) => continue,
            other => panic!("restarted runtime never listened: {other:?}"),
        }
    }
    let mem = restarted.memory();
    assert_eq!((mem.current_bytes, mem.oom_kill_count), (14_987_264, 0));
    let tags = http
        .get(lab.url("/api/tags"))
        .send()
        .await
        .expect("tags after restart");
    assert_eq!(tags.status(), 200);
    restarted.stop().await;
    lab.handle.stop().await;
}

#[tokio::test]
async fn models_that_fit_together_do_not_oom() {
    // 16 GiB (azure-8b): 1B and 3B both fit.
    let mut lab = start_listening(profile("azure-8b"), Options::default()).await;
    let http = client();
    for model in ["llama3.2:1b", "llama3.2:3b"] {
        let r: Value = post_json(
            &http,
            &lab.url("/api/generate"),
            &json!({"model": model, "prompt": "Reply with exactly: READY", "stream": false}),
        )
        .await;
        assert_eq!(r["response"], "READY", "{model}");
        lab.wait_event(|e| matches!(e, RuntimeEvent::ModelResident { .. }))
            .await;
    }
    assert_eq!(lab.handle.resident().len(), 2);
    assert_eq!(lab.handle.memory().oom_kill_count, 0);
    assert!(lab.handle.is_listening());
    lab.handle.stop().await;
}
