//! What a real cluster and a real Ollama send that the lab used not to (issue 14, items 5, 6,
//! 7 and 9), on event sequences and stream bytes: thinking and tool-call chunks, a chunk cut
//! inside a UTF-8 character, GPU offload in `/api/ps`, Ollama ≥ 0.13 evicting a model or
//! refusing a load, EndpointSlice conditions (nil `serving`, `publishNotReadyAddresses`,
//! dual-stack slices, serving-terminating endpoints).

use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::record::jsonl;
use readygap_core::state::State;
use readygap_live::sources::runtime::ollama::GenerateStream;
use readygap_live::sources::runtime::stream::Fold;
use serde_json::Value;
use std::process::Command;

const GIB: u64 = 1 << 30;

// ---------------------------------------------------------------- item 5: first token

/// A thinking model's stream as Ollama ≥ 0.12.4 sends it by default: `thinking` with an
/// empty `response` first (api/types.go GenerateResponse.Thinking), then the answer.
#[test]
fn a_thinking_chunk_is_the_first_token() {
    let mut g = GenerateStream::default();
    let p = g.push(
        br#"{"model":"qwen3:1.7b","created_at":"2026-11-30T10:00:01Z","response":"","thinking":"Okay","done":false}
"#,
    );
    assert!(
        p.first_token,
        "a chunk with thinking text is the first token"
    );
    let p = g.push(
        br#"{"model":"qwen3:1.7b","created_at":"2026-11-30T10:00:02Z","response":"READY","done":false}
"#,
    );
    assert!(!p.first_token, "only once");
    assert_eq!(g.response, "READY", "thinking is not the answer");
}

/// A chat chunk carrying only a tool call (api/types.go Message.ToolCalls) is the first
/// token too, and so is a thinking chunk of `/api/chat`.
#[test]
fn a_tool_call_chunk_is_the_first_token() {
    let mut g = GenerateStream::default();
    let p = g.push(
        br#"{"model":"qwen3:1.7b","created_at":"2026-11-30T10:00:01Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},"done":false}
"#,
    );
    assert!(p.first_token);
    let mut g = GenerateStream::default();
    let p = g.push(
        br#"{"model":"qwen3:1.7b","created_at":"2026-11-30T10:00:01Z","message":{"role":"assistant","content":"","thinking":"Hmm"},"done":false}
"#,
    );
    assert!(p.first_token);
    // An empty chunk is still not a token.
    let mut g = GenerateStream::default();
    let p = g.push(
        br#"{"model":"m","response":"","done":false}
"#,
    );
    assert!(!p.first_token);
}

/// HTTP chunks fall anywhere, also inside a multi-byte character: the text survives.
#[test]
fn a_chunk_cut_inside_a_utf8_character_keeps_the_text() {
    let line = "{\"model\":\"m\",\"response\":\"café 東京 ✓\",\"done\":false}\n{\"model\":\"m\",\"response\":\"\",\"done\":true}\n";
    let bytes = line.as_bytes();
    for cut in 1..bytes.len() {
        let mut g = GenerateStream::default();
        g.push(&bytes[..cut]);
        g.push(&bytes[cut..]);
        assert_eq!(g.response, "café 東京 ✓", "cut at byte {cut}");
        assert!(
            g.done && g.error.is_none(),
            "cut at byte {cut}: {:?}",
            g.error
        );
    }
}

// ---------------------------------------------------------------- item 6: GPU offload

fn resident_vram(ms: i64, pod: &str, models: &[(&str, u64, u64)]) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::Residency {
            pod: pod.into(),
            models: models
                .iter()
                .map(|(n, size, vram)| ResidentModel {
                    name: (*n).into(),
                    size: *size,
                    size_vram: *vram,
                    expires_at: None,
                    ..Default::default()
                })
                .collect(),
        },
    )
}

fn infer(ms: i64, req: u64, pod: &str, model: &str) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::InferenceStarted {
            request_id: req,
            pod: pod.into(),
            model: model.into(),
        },
    )
}

fn failed(ms: i64, req: u64, error: &str) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::InferenceDone(InferenceResult {
            request_id: req,
            ok: false,
            http_status: Some(500),
            error: Some(error.into()),
            ..InferenceResult::default()
        }),
    )
}

/// `/api/ps` `size` includes `size_vram` (Ollama server/routes.go PsHandler): a model fully
/// offloaded to a GPU takes no host memory, so 1B + 3B on the GPU under a 4 GiB host limit
/// is no risk.
#[test]
fn gpu_resident_models_do_not_count_against_the_host_limit() {
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        // 3B seen fully on the GPU earlier, then unloaded; now 1B on the GPU.
        resident_vram(
            100,
            "ollama-a",
            &[("llama3.2:3b", 3_300_000_000, 3_300_000_000)],
        ),
        resident_vram(200, "ollama-a", &[]),
        resident_vram(
            300,
            "ollama-a",
            &[("llama3.2:1b", 1_900_000_000, 1_900_000_000)],
        ),
        infer(400, 1, "ollama-a", "llama3.2:3b"),
    ];
    let s = State::from_events(&events);
    assert!(
        s.oom.verdicts.is_empty(),
        "no warning for models in VRAM: {:#?}",
        s.oom.verdicts
    );
    // Partly offloaded models count with their host part only.
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:3b", 3 * GIB, 2 * GIB)]),
        resident_vram(200, "ollama-a", &[]),
        resident_vram(300, "ollama-a", &[("llama3.2:1b", 2 * GIB, GIB)]),
        infer(400, 1, "ollama-a", "llama3.2:3b"),
    ];
    assert!(State::from_events(&events).oom.verdicts.is_empty());
    // The same sizes on the CPU are the published risk.
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:3b", 3 * GIB, 0)]),
        resident_vram(200, "ollama-a", &[]),
        resident_vram(300, "ollama-a", &[("llama3.2:1b", 2 * GIB, 0)]),
        infer(400, 1, "ollama-a", "llama3.2:3b"),
    ];
    let v = State::from_events(&events).oom.verdicts;
    assert_eq!(
        v.iter().map(|v| v.kind.name()).collect::<Vec<_>>(),
        ["oom_risk"]
    );
}

/// The Residency panel shows the host part against the limit and the VRAM apart.
#[test]
fn the_residency_panel_shows_vram_apart() {
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:3b", 4 * GIB, 4 * GIB)]),
    ];
    let s = State::from_events(&events);
    let theme = readygap::ui::theme::Theme::default_theme();
    let view = readygap::ui::view::ViewState::default();
    let area = ratatui::layout::Rect::new(0, 0, 60, 6);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    readygap::ui::panels::residency::render(&s, &view, &theme, area, &mut buf);
    let text = buffer_text(&buf);
    assert!(text.contains("VRAM 4.00 GiB"), "{text}");
    assert!(
        !text.contains("limit resident"),
        "no host-memory warning: {text}"
    );
}

fn buffer_text(buf: &ratatui::buffer::Buffer) -> String {
    let a = buf.area;
    (a.top()..a.bottom())
        .map(|y| {
            (a.left()..a.right())
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                + "\n"
        })
        .collect()
}

// ---------------------------------------------------------------- item 7: Ollama ≥ 0.13

/// Ollama ≥ 0.13 (discover/cpu_linux.go reads cgroup v2 memory.max/memory.current; the
/// scheduler, server/sched.go, then unloads a runner to make room): 1B leaves `/api/ps`
/// while the 3B request is loading, then 3B appears. That is `evicted_for_memory`, with both
/// models as evidence, and the trial's load included the eviction.
#[test]
fn a_model_unloaded_to_make_room_is_evicted_for_memory() {
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:1b", 1_900_000_000, 0)]),
        infer(200, 7, "ollama-a", "llama3.2:3b"),
        resident_vram(450, "ollama-a", &[]),
        resident_vram(4_000, "ollama-a", &[("llama3.2:3b", 2_640_238_592, 0)]),
    ];
    let s = State::from_events(&events);
    let names: Vec<&str> = s.oom.verdicts.iter().map(|v| v.kind.name()).collect();
    assert_eq!(names, ["evicted_for_memory"], "{:#?}", s.oom.verdicts);
    let v = &s.oom.verdicts[0];
    let json = v.evidence_json();
    assert_eq!(json["verdict"], "evicted_for_memory");
    assert_eq!(json["evicted"][0]["name"], "llama3.2:1b", "{json:#}");
    assert_eq!(json["loaded"]["name"], "llama3.2:3b", "{json:#}");
    assert_eq!(json["limit_bytes"], 4u64 << 30);
    assert!(v.message.contains("llama3.2:1b") && v.message.contains("llama3.2:3b"));
    // A load finishing before `/api/ps` shows it: the done inference is the evidence.
    let fast = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:1b", 1_900_000_000, 0)]),
        infer(200, 7, "ollama-a", "llama3.2:3b"),
        resident_vram(450, "ollama-a", &[]),
        infer_done(600, 7, true),
    ];
    let s = State::from_events(&fast);
    let names: Vec<&str> = s.oom.verdicts.iter().map(|v| v.kind.name()).collect();
    assert_eq!(names, ["evicted_for_memory"], "{:#?}", s.oom.verdicts);
    // An unload with no load waiting (keep-alive expiry) is nothing.
    let quiet = vec![
        memory(0, "ollama-a", 200 << 20),
        resident_vram(100, "ollama-a", &[("llama3.2:1b", 1_900_000_000, 0)]),
        resident_vram(450, "ollama-a", &[]),
    ];
    assert!(State::from_events(&quiet).oom.verdicts.is_empty());
}

/// With nothing to evict Ollama ≥ 0.13 answers 500 "model requires more system memory (X)
/// than is available (Y)" (llm/server.go): `insufficient_memory` with both figures parsed.
#[test]
fn a_refused_load_is_insufficient_memory_with_its_figures() {
    let events = vec![
        memory(0, "ollama-a", 200 << 20),
        infer(200, 9, "ollama-a", "llama3.1:8b"),
        failed(
            900,
            9,
            "model requires more system memory (5.3 GiB) than is available (3.8 GiB)",
        ),
    ];
    let s = State::from_events(&events);
    let names: Vec<&str> = s.oom.verdicts.iter().map(|v| v.kind.name()).collect();
    assert_eq!(names, ["insufficient_memory"], "{:#?}", s.oom.verdicts);
    let json = s.oom.verdicts[0].evidence_json();
    assert_eq!(
        json["required_bytes"],
        (5.3 * GIB as f64) as u64,
        "{json:#}"
    );
    assert_eq!(
        json["available_bytes"],
        (3.8 * GIB as f64) as u64,
        "{json:#}"
    );
    assert_eq!(json["models"][0]["name"], "llama3.1:8b");
}

// ---------------------------------------------------------------- item 9: EndpointSlices

fn endpoint(pod: &str, addr: &str, ready: bool, serving: bool, terminating: bool) -> EndpointView {
    EndpointView {
        addresses: vec![addr.into()],
        pod: Some(pod.into()),
        ready,
        serving,
        terminating,
    }
}

fn slice_ev(ms: i64, name: &str, eps: Vec<EndpointView>) -> Event {
    ev(
        ms,
        Source::Kube,
        EventKind::EndpointSliceApplied(EndpointSliceView {
            name: name.into(),
            service: Some("ollama".into()),
            endpoints: eps,
        }),
    )
}

/// discovery/v1 types.go: "serving … A nil value should be interpreted as true".
#[test]
fn a_nil_serving_condition_means_serving() {
    let slice: k8s_openapi::api::discovery::v1::EndpointSlice =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "ollama-abc", "labels": {"kubernetes.io/service-name": "ollama"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": false},
                 "targetRef": {"kind": "Pod", "name": "ollama-a"}},
                {"addresses": ["10.0.0.2"], "conditions": {},
                 "targetRef": {"kind": "Pod", "name": "ollama-b"}}
            ]
        }))
        .unwrap();
    let v = readygap_live::sources::kube::endpoint_slice_view(&slice);
    assert_eq!(
        v.endpoints
            .iter()
            .map(|e| (e.ready, e.serving, e.terminating))
            .collect::<Vec<_>>(),
        [(false, true, false), (true, true, false)]
    );
}

/// With `publishNotReadyAddresses` the controller sets ready = true for every pod
/// (k8s.io/endpointslice utils.go podToEndpoint: ready := PublishNotReadyAddresses ||
/// (serving && !terminating)); only `serving` follows the pod's Ready condition. The
/// endpoint-ready mark of a trial is the replacement's endpoint serving.
#[test]
fn with_publish_not_ready_addresses_the_endpoint_mark_waits_for_serving() {
    let mut events = vec![applied(
        -10_000,
        pod("ollama-a", "uid-a", Stage::Ready, -10_000),
    )];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(applied(
        300,
        pod("ollama-b", "uid-b", Stage::Scheduled, 300),
    ));
    // Published at once with ready: true, not serving yet.
    events.push(slice_ev(
        400,
        "ollama-v4",
        vec![endpoint("ollama-b", "10.0.0.2", true, false, false)],
    ));
    events.push(applied(
        1_700,
        pod("ollama-b", "uid-b", Stage::Ready, 1_700),
    ));
    events.push(slice_ev(
        1_750,
        "ollama-v4",
        vec![endpoint("ollama-b", "10.0.0.2", true, true, false)],
    ));
    let s = State::from_events(&events);
    let t = &s.timeline.trials[0];
    assert_eq!(t.marks.endpoint_ready, Some(at(1_750)), "{:#?}", t.marks);
}

/// A dual-stack Service has an IPv4 and an IPv6 slice naming the same pod: one endpoint.
#[test]
fn a_dual_stack_service_counts_each_pod_once() {
    let events = vec![
        slice_ev(
            0,
            "ollama-v4",
            vec![endpoint("ollama-a", "10.0.0.1", true, true, false)],
        ),
        slice_ev(
            10,
            "ollama-v6",
            vec![endpoint("ollama-a", "fd00::1", true, true, false)],
        ),
    ];
    let s = State::from_events(&events);
    let c = s.endpoints.last_value().copied().expect("counts");
    assert_eq!((c.total, c.ready, c.serving), (1, 1, 1), "{c:?}");
}

/// Zero ready endpoints while a terminating one still serves: kube-proxy sends traffic to it
/// (KEP-1669, GA in 1.28; pkg/proxy/topology.go CategorizeEndpoints falls back to
/// serving-terminating endpoints). That is its own state, not "no traffic", on screen and as
/// a message of the session (so a replay of the recording shows it too).
#[test]
fn zero_ready_with_a_serving_terminating_endpoint_is_its_own_state() {
    let events = vec![
        slice_ev(
            0,
            "ollama-v4",
            vec![endpoint("ollama-a", "10.0.0.1", true, true, false)],
        ),
        slice_ev(
            1_000,
            "ollama-v4",
            vec![endpoint("ollama-a", "10.0.0.1", false, true, true)],
        ),
        slice_ev(
            3_000,
            "ollama-v4",
            vec![endpoint("ollama-a", "10.0.0.1", false, false, true)],
        ),
    ];
    let s = State::from_events(&events[..2]);
    let theme = readygap::ui::theme::Theme::default_theme();
    let view = readygap::ui::view::ViewState::default();
    let area = ratatui::layout::Rect::new(0, 0, 50, 8);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    readygap::ui::panels::endpoints::render(&s, &view, &theme, area, &mut buf);
    let text: String = (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                + "\n"
        })
        .collect();
    assert!(
        text.contains("terminating still serving"),
        "the fallback state on screen:\n{text}"
    );
    assert!(!text.contains("none ready"), "{text}");
    let messages: Vec<String> = s.messages.iter().map(|m| m.text.clone()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("0 ready") && m.contains("terminating still serving")),
        "{messages:?}"
    );
    // Once nothing serves at all, it is "none ready" again.
    let s = State::from_events(&events);
    let mut buf = ratatui::buffer::Buffer::empty(area);
    readygap::ui::panels::endpoints::render(&s, &view, &theme, area, &mut buf);
    let text: String = (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                + "\n"
        })
        .collect();
    assert!(text.contains("none ready"), "{text}");
}

// ---------------------------------------------------------------- the lab, end to end

fn run(args: &[&str], rec: &std::path::Path) -> (std::process::Output, State) {
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(args)
        .arg("--record")
        .arg(rec)
        .output()
        .unwrap();
    let recording = jsonl::read(rec).unwrap_or_else(|e| {
        panic!(
            "recording: {e}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let state = State::from_events(&recording.events);
    (out, state)
}

/// The published 1B-then-3B case against a lab imitating Ollama 0.13: the trial succeeds,
/// and its evidence says the 1B was evicted for memory and the load included the reload.
#[test]
fn a_trial_against_ollama_0_13_reports_evicted_for_memory() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("evict.jsonl");
    let (out, state) = run(
        &[
            "run",
            "--lab",
            "local-3b",
            "--lab-speed",
            "4",
            "--lab-ollama-version",
            "0.13.0",
            "--model",
            "llama3.2:3b",
            "--preload-model",
            "llama3.2:1b",
            "--trials",
            "1",
            "--cooldown",
            "1s",
            "--format",
            "json",
        ],
        &rec,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kinds: Vec<&str> = state.oom.verdicts.iter().map(|v| v.kind.name()).collect();
    assert!(kinds.contains(&"evicted_for_memory"), "{kinds:?}");
    assert!(!kinds.iter().any(|k| k.ends_with("_oom")), "{kinds:?}");
    assert!(state.pods.values().all(|p| !p.oom_killed()));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let t = &report["files"][0]["trials"][0];
    assert_eq!(t["oom"]["verdict"], "evicted_for_memory", "{report:#}");
    assert_eq!(t["oom"]["evicted"][0]["name"], "llama3.2:1b");
    assert_eq!(t["oom"]["loaded"]["name"], "llama3.2:3b");
    assert!(
        state
            .messages
            .iter()
            .any(|m| m.text.starts_with("evicted_for_memory")),
        "on screen"
    );
}

/// The gpu overlay in the lab (`nvidia.com/gpu: 1`, manifests/overlays/gpu): models sit in
/// VRAM (`size_vram` = `size`), the host cgroup is not charged for them, and the published
/// 1B-then-3B sequence neither warns nor kills.
#[test]
fn a_gpu_trial_does_not_warn() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("gpu.jsonl");
    let (out, state) = run(
        &[
            "run",
            "--lab",
            "local-3b",
            "--lab-speed",
            "4",
            "--lab-scenario",
            "gpu",
            "--model",
            "llama3.2:3b",
            "--preload-model",
            "llama3.2:1b",
            "--trials",
            "1",
            "--cooldown",
            "1s",
            "--format",
            "json",
        ],
        &rec,
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(state.oom.verdicts.is_empty(), "{:#?}", state.oom.verdicts);
    let vram: u64 = state
        .runtimes
        .values()
        .flat_map(|r| r.resident.iter())
        .map(|m| m.size_vram)
        .sum();
    assert!(vram > 0, "models in VRAM: {:?}", state.runtimes);
}
