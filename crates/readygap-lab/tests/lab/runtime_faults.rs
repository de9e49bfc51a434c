//! Runtime faults: a hung runtime accepts and never answers; HTTP 500 on every route; slow
//! exec; a crash mid-inference. Each is switched on and off on a live runtime.

use readygap_lab::testkit::runtime::*;
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn hang_accepts_and_never_answers_until_cleared() {
    let lab = start_listening(profile("azure-1b"), Options::default()).await;
    lab.spec.faults.set_hang(true);
    // TCP still connects: the process is alive, it just does not answer.
    assert!(
        tokio::net::TcpStream::connect((lab.spec.ip, 11434))
            .await
            .is_ok()
    );
    let short = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(400))
        .build()
        .expect("client");
    let err = short
        .get(lab.url("/api/tags"))
        .send()
        .await
        .expect_err("a hung runtime answered");
    assert!(err.is_timeout(), "{err}");
    lab.spec.faults.set_hang(false);
    let ok = client()
        .get(lab.url("/api/tags"))
        .send()
        .await
        .expect("tags");
    assert_eq!(ok.status(), 200);
    // A request hanging when the container stops ends (closed or reset) instead of hanging.
    lab.spec.faults.set_hang(true);
    let mut raw = tokio::net::TcpStream::connect((lab.spec.ip, 11434))
        .await
        .expect("connect");
    raw.write_all(b"GET /api/version HTTP/1.1\r\nHost: lab\r\n\r\n")
        .await
        .expect("write");
    lab.handle.stop().await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(DEADLINE, raw.read_to_end(&mut buf))
        .await
        .expect("the hung connection ended");
    assert!(
        read.is_err() || !String::from_utf8_lossy(&buf).contains(" 200 "),
        "{read:?} {buf:?}"
    );
}

#[tokio::test]
async fn http_500_on_every_route_until_cleared() {
    let lab = start_listening(profile("azure-1b"), Options::default()).await;
    lab.spec.faults.set_http_500(true);
    for path in ["/", "/api/tags", "/api/ps", "/api/version"] {
        let r = client().get(lab.url(path)).send().await.expect("send");
        assert_eq!(r.status(), 500, "{path}");
        let v: Value = r.json().await.expect("json error body");
        assert!(v["error"].as_str().is_some(), "{path}: {v}");
    }
    let r = client()
        .post(lab.url("/api/generate"))
        .body("{\"model\":\"llama3.2:1b\"}")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 500);
    lab.spec.faults.set_http_500(false);
    assert_eq!(
        client()
            .get(lab.url("/api/tags"))
            .send()
            .await
            .expect("send")
            .status(),
        200
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn slow_exec_delays_every_command() {
    let lab = start_listening(profile("azure-1b"), Options::default()).await;
    lab.spec.faults.set_slow_exec_ms(300);
    let start = Instant::now();
    let out = lab
        .handle
        .exec(vec!["sh".into(), "-c".into(), "true; echo done".into()])
        .collect()
        .await;
    assert_eq!(out.stdout_text(), "done\n");
    // Three commands (sh, true, echo), each at least 300 ms late.
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    lab.spec.faults.set_slow_exec_ms(0);
    lab.handle.stop().await;
}

/// `crash_mid_inference`: the next streamed generation gets its first token, then the
/// runtime's process exits (status 2): the stream breaks (no `done` line), the runtime
/// reports `Exited` for the kubelet, the ground truth logs it, and the switch is spent.
#[tokio::test]
async fn crash_mid_inference_breaks_the_stream_and_exits() {
    use futures::StreamExt;
    use readygap_lab::runtime::RuntimeEvent;
    let mut lab = start_listening(profile("azure-1b"), Options::default()).await;
    lab.spec.faults.set_crash_mid_inference(true);
    let r = client()
        .post(lab.url("/api/generate"))
        .body("{\"model\":\"llama3.2:1b\",\"prompt\":\"hi\"}")
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 200, "the stream starts");
    let mut body = r.bytes_stream();
    let mut got = Vec::new();
    let mut broke = false;
    while let Some(chunk) = tokio::time::timeout(DEADLINE, body.next())
        .await
        .expect("the stream ended")
    {
        match chunk {
            Ok(b) => got.extend_from_slice(&b),
            Err(_) => {
                broke = true;
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        !text.contains("\"done\":true"),
        "a crashed runtime finished the answer: {text}"
    );
    assert!(
        broke || text.contains("\"error\""),
        "the stream broke: {text}"
    );
    let ev = lab
        .wait_event(|e| matches!(e, RuntimeEvent::Exited { .. }))
        .await;
    assert_eq!(ev, RuntimeEvent::Exited { exit_code: 2 });
    assert!(
        !lab.spec.faults.crash_mid_inference(),
        "one crash per setting"
    );
    let logged = lab
        .spec
        .ground_truth
        .entries()
        .into_iter()
        .find(|e| e.transition == readygap_lab::ground_truth::Transition::ContainerExited)
        .expect("the crash is in the ground truth");
    assert_eq!(logged.detail["exit_code"], 2);
    lab.handle.stop().await;
}
