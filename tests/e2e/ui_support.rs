//! Event sequences for the dashboard tests: a session with one full trial (delete → new pod
//! Ready → probe → inference done) with memory, residency, endpoints and host samples, then an
//! OOM kill of the new pod. Times are fixed offsets from `readygap_core::fixtures::BASE_MS`.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use readygap::ui::theme::Theme;
use readygap::ui::view::ViewState;
use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::state::State;

pub const GIB: u64 = 1 << 30;
/// When the trial's delete is sent (T0).
pub const T0: i64 = 10_000;
/// Cut-offs of the scenario's stages.
pub const BEFORE_TRIAL: i64 = 9_999;
pub const MID_LOAD: i64 = 15_000;
pub const AFTER_T4: i64 = 19_000;
pub const AFTER_OOM: i64 = 30_000;

fn slice(eps: &[(&str, bool, bool, bool)]) -> EndpointSliceView {
    EndpointSliceView {
        name: "ollama-x7k2p".into(),
        service: Some("ollama".into()),
        endpoints: eps
            .iter()
            .map(|(pod, ready, serving, terminating)| EndpointView {
                addresses: vec!["10.0.0.1".into()],
                pod: Some((*pod).into()),
                ready: *ready,
                serving: *serving,
                terminating: *terminating,
            })
            .collect(),
    }
}

fn slice_ev(ms: i64, eps: &[(&str, bool, bool, bool)]) -> Event {
    ev(
        ms,
        Source::Kube,
        EventKind::EndpointSliceApplied(slice(eps)),
    )
}

fn resident(ms: i64, pod: &str, models: &[(&str, u64)], expires_ms: i64) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::Residency {
            pod: pod.into(),
            models: models
                .iter()
                .map(|(n, s)| ResidentModel {
                    name: (*n).into(),
                    size: *s,
                    size_vram: 0,
                    expires_at: Some(at(expires_ms)),
                    ..Default::default()
                })
                .collect(),
        },
    )
}

fn host(ms: i64, node: Option<&str>, cpu: f32, avail_gib: f64, cached_gib: f64) -> Event {
    ev(
        ms,
        Source::Host,
        EventKind::HostSample(HostSample {
            node: node.map(str::to_string),
            cpu_percent: Some(cpu),
            mem_total: 16 * GIB,
            mem_available: Some((avail_gib * GIB as f64) as u64),
            cached: Some((cached_gib * GIB as f64) as u64),
            ..HostSample::default()
        }),
    )
}

/// The whole scenario, in timestamp order.
pub fn scenario() -> Vec<Event> {
    let mut v = vec![ev(
        0,
        Source::Session,
        EventKind::Session(SessionInfo {
            context: "kind-lab".into(),
            namespace: "llm".into(),
            target: "deploy/ollama".into(),
            model: Some("llama3.2:3b".into()),
            mode: "live".into(),
            ..Default::default()
        }),
    )];
    v.push(applied(0, pod("ollama-0", "uid-0", Stage::Ready, 0)));
    v.push(slice_ev(0, &[("ollama-0", true, true, false)]));
    let disk = |pod: &str| {
        ev(
            0,
            Source::Runtime,
            EventKind::ModelsOnDisk {
                pod: pod.into(),
                models: vec![
                    DiskModel {
                        name: "llama3.2:3b".into(),
                        size: 2_019_393_189,
                    },
                    DiskModel {
                        name: "qwen2.5:0.5b".into(),
                        size: 397_821_319,
                    },
                ],
            },
        )
    };
    v.push(disk("ollama-0"));
    v.push(resident(
        0,
        "ollama-0",
        &[("llama3.2:3b", 3_400_000_000)],
        300_000,
    ));
    // Memory of the old pod at 4 Hz until it is deleted.
    for k in 0..40 {
        v.push(memory(
            k * 250,
            "ollama-0",
            2_900_000_000 + (k as u64 % 3) * 1_000_000,
        ));
    }
    for s in 0..15 {
        let ms = s * 2_000;
        v.push(host(ms, None, 12.0 + s as f32, 9.5, 3.0));
        v.push(host(ms + 1, Some("lab-node-1"), 30.0 + s as f32, 6.0, 4.5));
    }
    // The trial.
    v.extend(full_trial(
        T0,
        1,
        ("ollama-0", "uid-0"),
        ("ollama-1", "uid-1"),
    ));
    v.push(slice_ev(T0 + 20, &[("ollama-0", false, false, true)]));
    v.push(slice_ev(T0 + 1_800, &[("ollama-1", true, true, false)]));
    v.push(ev(
        T0 + 1_000,
        Source::Kube,
        EventKind::PodDeleted(pod("ollama-0", "uid-0", Stage::Ready, T0)),
    ));
    v.push(disk("ollama-1"));
    v.push(resident(T0 + 2_500, "ollama-1", &[], T0 + 2_500));
    // The new pod's memory rises while the model loads (T3 → T4), with one missed sample.
    for k in 0..36 {
        let ms = T0 + 1_500 + k * 250;
        if k == 20 {
            v.push(ev(
                ms,
                Source::Memory,
                EventKind::SourceError {
                    feed: "memory".into(),
                    message: "exec stream closed".into(),
                },
            ));
            continue;
        }
        let cur = 150_000_000 + (k as u64).min(26) * 105_000_000;
        v.push(memory(ms, "ollama-1", cur));
    }
    v.push(resident(
        T0 + 7_900,
        "ollama-1",
        &[("llama3.2:3b", 3_700_000_000)],
        T0 + 307_900,
    ));
    // After T4: memory climbs to the limit and the container is OOM-killed.
    for k in 0..20 {
        let ms = AFTER_T4 + 500 + k * 250;
        v.push(memory(
            ms,
            "ollama-1",
            3_000_000_000 + k as u64 * 70_000_000,
        ));
    }
    let mut oom = pod("ollama-1", "uid-1", Stage::Started, 25_100);
    oom.containers[0].restart_count = 1;
    oom.containers[0].state = ContainerState::Terminated {
        reason: "OOMKilled".into(),
        exit_code: 137,
        finished_at: Some(at(25_000)),
    };
    oom.containers[0].ready = false;
    v.push(applied(25_100, oom));
    v.push(slice_ev(25_100, &[("ollama-1", false, false, false)]));
    v.push(memory(25_200, "ollama-1", 12_000_000));
    v.sort_by_key(|e| e.ts);
    v
}

/// The scenario's events up to and including `until_ms`.
pub fn until(until_ms: i64) -> Vec<Event> {
    let cut = at(until_ms);
    scenario().into_iter().filter(|e| e.ts <= cut).collect()
}

pub fn state_at(until_ms: i64) -> State {
    State::from_events(&until(until_ms))
}

/// Render the whole dashboard into a `w`×`h` test terminal.
pub fn frame(
    state: &State,
    view: &ViewState,
    theme: &Theme,
    w: u16,
    h: u16,
) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    t.draw(|f| {
        let area = f.area();
        readygap::ui::render(state, view, theme, area, f.buffer_mut())
    })
    .expect("draw");
    t
}

/// The text of a buffer's rows.
pub fn text(buf: &ratatui::buffer::Buffer) -> String {
    let a = buf.area;
    let mut s = String::new();
    for y in a.top()..a.bottom() {
        for x in a.left()..a.right() {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}
