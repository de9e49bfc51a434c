//! The real binary in a real terminal: `readygap replay` of a small recording (generated here)
//! in a detached tmux session at 160×48. All six panel titles appear, the T4 mark shows once
//! the replay reached it, `q` exits, and the terminal is restored (the shell prints after the
//! process and `stty` shows canonical mode again). A replay-keys test presses `]` (the header's
//! trial number changes) and `End` (the last trial's T4 shows). A third test runs a deliberate panic while
//! the dashboard holds the terminal (this test binary re-run inside tmux) and checks that the
//! panic hook restored it. Needs tmux (`apt-get install -y tmux`): the tests are ignored by a
//! plain `cargo test`, and `.ci/run` runs them (see [`crate::peers`]).

use crate::ui_support::scenario;
use readygap_core::fixtures::at;
use readygap_core::record::jsonl::{Header, Recorder};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of this test's own (its own socket), killed when dropped.
pub(crate) struct Tmux {
    pub(crate) socket: String,
}

impl Tmux {
    pub(crate) fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("running tmux")
    }

    /// A detached 160×48 session `rg` running `script` under `sh`, with its own config dir.
    pub(crate) fn start(&self, config_home: &Path, script: &str) {
        let out = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            "rg",
            "-x",
            "160",
            "-y",
            "48",
            "-e",
            &format!("XDG_CONFIG_HOME={}", config_home.display()),
            "-e",
            "TERM=xterm-256color",
            "sh",
            "-c",
            script,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Resize the session's window to `w`×`h` (the program sees a SIGWINCH).
    pub(crate) fn resize(&self, w: u16, h: u16) {
        let out = self.cmd(&[
            "resize-window",
            "-t",
            "rg",
            "-x",
            &w.to_string(),
            "-y",
            &h.to_string(),
        ]);
        assert!(
            out.status.success(),
            "tmux resize-window: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub(crate) fn capture(&self) -> String {
        let out = self.cmd(&["capture-pane", "-p", "-t", "rg"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Poll the pane until `cond` holds, for at most 60 s.
    pub(crate) fn wait(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.capture();
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; pane:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Only this test's own server (its own socket).
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

fn write_recording(path: &Path) {
    let mut rec = Recorder::create(
        path,
        &Header::new(at(0), "kind-lab", "llm", "deploy/ollama"),
    )
    .expect("creating the recording");
    for ev in scenario() {
        rec.write(&ev).expect("writing an event");
    }
}

#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn replay_in_tmux_shows_panels_and_t4_then_quits_cleanly() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = dir.path().join("replay_small.jsonl");
    write_recording(&recording);
    let tmux = Tmux {
        socket: format!("readygap-test-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    // 30 s of events at ×6: about 5 s. After the dashboard exits the shell prints EXITED and
    // the terminal mode (icanon = cooked again, -icanon = still raw).
    let script = format!(
        "'{bin}' replay '{}' --speed 6; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        recording.display()
    );
    let config_home = dir.path().join("config");
    tmux.start(&config_home, &script);

    let titles = [
        "╭ Pods",
        "╭ Timeline",
        "╭ Residency",
        "╭ Memory",
        "╭ Endpoints",
        "╭ Host",
    ];
    tmux.wait("the six panel titles", |s| {
        titles.iter().all(|t| s.contains(t))
    });
    let screen = tmux.wait("the T4 mark", |s| s.contains("T3→T4 5.59s"));
    assert!(screen.contains("REPLAY"), "{screen}");
    assert!(screen.contains("deploy/ollama"), "{screen}");

    let out = tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    assert!(out.status.success());
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "exit status 0: {screen}");
    // The alternate screen is gone and the terminal is back in canonical mode.
    let screen = tmux.wait("stty output", |s| {
        s.lines().any(|l| l.trim().ends_with("icanon"))
    });
    assert!(
        !screen.contains("╭ Pods"),
        "alternate screen left: {screen}"
    );
    assert!(
        screen.lines().any(|l| l.trim() == "icanon"),
        "terminal still raw: {screen}"
    );
}

/// Run inside tmux by `panic_restores_the_terminal`: start the real dashboard in the terminal,
/// wait until it has switched the terminal to raw mode, then panic on another thread.
#[test]
#[ignore = "a child process of panic_restores_the_terminal"]
fn panic_child() {
    if std::env::var_os("READYGAP_PANIC_CHILD").is_none() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let store = readygap_live::store::Store::new();
        let _ui = tokio::spawn(readygap::ui::app::run_dashboard(
            readygap::ui::app::DashboardOptions::default(),
            store.reader(),
            readygap::ui::app::Actions::None,
        ));
        for ev in scenario() {
            store.apply(&ev);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while !crossterm::terminal::is_raw_mode_enabled().unwrap_or(false) {
            assert!(
                Instant::now() < deadline,
                "dashboard never entered raw mode"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("deliberate panic while the dashboard holds the terminal");
    });
}

/// The UI thread may be drawing when another thread panics: the dashboard's panic hook waits
/// for that frame and stops all drawing before ratatui restores the terminal, so no frame lands
/// over the panic message or the restored terminal.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn panic_restores_the_terminal() {
    crate::peers::tmux();
    let tmux = Tmux {
        socket: format!("readygap-test-panic-{}", std::process::id()),
    };
    let me = std::env::current_exe().expect("test binary path");
    let script = format!(
        "'{}' ui_tmux::panic_child --ignored --exact --nocapture --test-threads 1; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?\\(icanon\\|echo\\)'; sleep 60",
        me.display()
    );
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "rg",
        "-x",
        "120",
        "-y",
        "40",
        "-e",
        "READYGAP_PANIC_CHILD=1",
        "-e",
        "RUST_BACKTRACE=0",
        "-e",
        "TERM=xterm-256color",
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        out.status.success(),
        "tmux new-session: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = tmux.wait("the child to exit and stty to answer", |s| {
        s.contains("EXITED")
            && s.lines().any(|l| l.trim().ends_with("icanon"))
            && s.lines().any(|l| l.trim().ends_with("echo"))
    });
    assert!(
        screen.contains("EXITED 101"),
        "the child test failed by panicking: {screen}"
    );
    assert!(
        screen.contains("deliberate panic"),
        "panic message printed: {screen}"
    );
    assert!(
        !screen.contains("╭ Pods"),
        "alternate screen left: {screen}"
    );
    assert!(
        screen.lines().any(|l| l.trim() == "icanon") && screen.lines().any(|l| l.trim() == "echo"),
        "terminal still raw after the panic (stty shows -icanon or -echo): {screen}"
    );
}

/// The replay keys in the real binary: `--from t0:1` at a slow speed, `]` moves the header to
/// trial 2, `End` shows the last trial finished (its T4) with the bar at the end, `q` exits 0.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn replay_keys_in_tmux_seek_between_trials() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    let recording = dir.path().join("replay_trials.jsonl");
    // Cut a few events after the last T4, so the recording ends with a finished trial.
    let mut events = readygap_core::fixtures::session(1_600);
    let t4s: Vec<_> = readygap_core::record::index::ReplayIndex::new(events.clone())
        .marks()
        .iter()
        .filter(|m| m.which == 4)
        .map(|m| m.at)
        .collect();
    let trials = t4s.len();
    assert!(trials >= 3, "{trials} finished trials");
    events.truncate(t4s[trials - 1] + 5);
    let mut rec = Recorder::create(
        &recording,
        &Header::new(at(0), "kind-lab", "llm", "deploy/ollama"),
    )
    .expect("creating the recording");
    for ev in &events {
        rec.write(ev).expect("writing an event");
    }
    drop(rec);
    let tmux = Tmux {
        socket: format!("readygap-test-keys-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' replay '{}' --speed 0.05 --from t0:1; echo EXITED $?; sleep 60",
        recording.display()
    );
    let config_home = dir.path().join("config");
    tmux.start(&config_home, &script);
    tmux.wait("trial 1 and the replay bar", |s| {
        s.contains("trial #1 running") && s.contains("playing") && s.contains("×1/20")
    });
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "]"]).status.success());
    tmux.wait("trial 2 in the header", |s| s.contains("trial #2 running"));
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "End"]).status.success());
    let last = format!("trial #{trials} ✓");
    let screen = tmux.wait("the last trial's T4", |s| {
        s.contains(&last) && s.contains("T3→T4 5.59s")
    });
    assert!(screen.contains("■ end"), "the bar is at the end: {screen}");
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "q"]).status.success());
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "exit status 0: {screen}");
}

/// `readygap demo` at 160×48: the lab starts in-process, all six panels show, `t` (confirmed
/// with `y`) runs a full trial that reaches T4 on screen, and `q` exits with the terminal
/// restored.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn demo_in_tmux_runs_a_trial_to_t4() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux {
        socket: format!("readygap-demo-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' demo --speed 4 --recordings-dir '{}'; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
        dir.path().display()
    );
    let config_home = dir.path().join("config");
    tmux.start(&config_home, &script);
    let titles = [
        "╭ Pods",
        "╭ Timeline",
        "╭ Residency",
        "╭ Memory",
        "╭ Endpoints",
        "╭ Host",
    ];
    let screen = tmux.wait("the six panels and a Ready pod", |s| {
        titles.iter().all(|t| s.contains(t)) && s.contains("Running True")
    });
    assert!(screen.contains("DEMO"), "{screen}");
    assert!(screen.contains("t: trial"), "the hint line: {screen}");
    tmux.cmd(&["send-keys", "-t", "rg", "t"]);
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    tmux.cmd(&["send-keys", "-t", "rg", "y"]);
    let screen = tmux.wait("the trial's T4", |s| s.contains("T3→T4 "));
    assert!(screen.contains("trial #1"), "{screen}");
    // `R` starts a recording: the header shows it; `R` again stops it and the header drops it.
    assert!(!screen.contains("● REC"), "not recording yet: {screen}");
    tmux.cmd(&["send-keys", "-t", "rg", "R"]);
    let screen = tmux.wait("the header's recording indicator", |s| {
        s.lines().next().is_some_and(|l| l.contains("● REC"))
    });
    assert!(
        screen.contains(&dir.path().display().to_string()),
        "the header names the file in --recordings-dir: {screen}"
    );
    tmux.cmd(&["send-keys", "-t", "rg", "R"]);
    tmux.wait("the indicator to go", |s| {
        s.lines().next().is_some_and(|l| !l.contains("● REC")) && s.contains("recording stopped")
    });
    let written: Vec<_> = std::fs::read_dir(dir.path())
        .expect("recordings dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(written.len(), 1, "one recording written by R … R");
    tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "exit status 0: {screen}");
    let screen = tmux.wait("stty output", |s| {
        s.lines().any(|l| l.trim().ends_with("icanon"))
    });
    assert!(
        !screen.contains("╭ Pods"),
        "alternate screen left: {screen}"
    );
    assert!(
        screen.lines().any(|l| l.trim() == "icanon"),
        "terminal still raw: {screen}"
    );
}

/// The instants (from a recording) at which each trial stopped running, and the events.
fn trial_ends(
    path: &Path,
) -> (
    Vec<chrono::DateTime<chrono::Utc>>,
    Vec<readygap_core::event::Event>,
) {
    let events = readygap_core::record::jsonl::read(path)
        .expect("reading the recording")
        .events;
    let mut state = readygap_core::state::State::new();
    let mut ends = Vec::new();
    for ev in &events {
        state.apply(ev);
        while state
            .timeline
            .trials
            .get(ends.len())
            .is_some_and(|t| !t.is_running())
        {
            ends.push(ev.ts);
        }
    }
    (ends, events)
}

/// During a running trial (`t`, confirmed), `i` sends an inference at once; during the next
/// one, `d` (confirmed) deletes at once: each action is requested within a bound of its key
/// and before its trial ended (a runner that reads no command while a trial runs sends it
/// after the trial's end). Either action ends its trial (an inference to a replacement that
/// does not serve yet fails it; a delete supersedes it), hence one trial each.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn demo_in_tmux_takes_i_and_d_while_a_trial_runs() {
    use readygap_core::event::{Action, EventKind};
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux {
        socket: format!("readygap-keys-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let rec = dir.path().join("keys.jsonl");
    let script = format!(
        "'{bin}' demo --speed 1 --record '{}' --recordings-dir '{}'; echo EXITED $?; sleep 60",
        rec.display(),
        dir.path().display()
    );
    tmux.start(&dir.path().join("config"), &script);
    let keys = |k: &str| {
        tmux.cmd(&["send-keys", "-t", "rg", k]);
    };
    let ended = |n: usize| {
        move |s: &str| {
            s.contains(&format!("trial #{n} ✓"))
                || s.contains(&format!("trial #{n} ✗"))
                || s.contains(&format!("trial #{}", n + 1))
        }
    };
    tmux.wait("a Ready pod", |s| {
        s.contains("╭ Pods") && s.contains("Running True")
    });
    keys("t");
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    keys("y");
    tmux.wait("trial #1 running", |s| s.contains("trial #1 running"));
    let infer_key = chrono::Utc::now();
    keys("i");
    tmux.wait("trial #1's end", ended(1));
    tmux.wait("a Ready pod again", |s| s.contains("Running True"));
    keys("t");
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    keys("y");
    tmux.wait("trial #2 running", |s| s.contains("trial #2 running"));
    keys("d");
    tmux.wait("the delete's confirmation", |s| s.contains("Confirm"));
    let delete_key = chrono::Utc::now();
    keys("y");
    tmux.wait("trial #2's end", ended(2));
    keys("q");
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "{screen}");

    let (ends, events) = trial_ends(&rec);
    assert!(ends.len() >= 2, "two trials ended: {ends:?}");
    let requested = |after: chrono::DateTime<chrono::Utc>, f: &dyn Fn(&Action) -> bool| {
        events
            .iter()
            .find(|e| {
                e.ts >= after
                    && matches!(&e.kind, EventKind::ActionRequested { action, .. } if f(action))
            })
            .map(|e| e.ts)
            .expect("the action was requested after its key")
    };
    let bound = chrono::Duration::seconds(3);
    let infer = requested(infer_key, &|a| matches!(a, Action::Infer { .. }));
    assert!(
        infer - infer_key < bound,
        "`i` at {infer_key}, the inference at {infer}"
    );
    assert!(
        infer <= ends[0],
        "the inference ({infer}) before trial #1's end ({})",
        ends[0]
    );
    let delete = requested(delete_key, &|a| matches!(a, Action::DeletePod { .. }));
    assert!(
        delete - delete_key < bound,
        "`y` at {delete_key}, the delete at {delete}"
    );
    assert!(
        delete <= ends[1],
        "the delete ({delete}) before trial #2's end ({})",
        ends[1]
    );
}

/// A readiness-contract verdict on screen: `readygap demo --scenario http-readiness`, `t`
/// (confirmed), and once the trial answered the Memory panel's bottom lines name
/// `shallow_readiness` with its window and the advice.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn demo_in_tmux_shows_the_shallow_readiness_verdict() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux {
        socket: format!("readygap-verdict-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' demo --speed 4 --scenario http-readiness --recordings-dir '{}'; echo EXITED $?; sleep 60",
        dir.path().display()
    );
    tmux.start(&dir.path().join("config"), &script);
    let screen = tmux.wait("a Ready pod", |s| s.contains("Running True"));
    assert!(
        !screen.contains("shallow_readiness"),
        "no verdict before a trial: {screen}"
    );
    tmux.cmd(&["send-keys", "-t", "rg", "t"]);
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    tmux.cmd(&["send-keys", "-t", "rg", "y"]);
    let screen = tmux.wait("the verdict", |s| {
        s.contains("▲ shallow_readiness") && s.contains("ready and serving")
    });
    assert!(
        screen.contains("→ make Ready wait for an answer"),
        "{screen}"
    );
    tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "exit status 0: {screen}");
}

/// Started while its API server is down, the dashboard keeps trying: the header says it is
/// not connected and when the next try is, the keys that need the cluster are refused with
/// that reason, this machine's Host figures show meanwhile; once a lab answers on the
/// kubeconfig's address the pods appear and the keys come back. `q` exits 0.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn a_dashboard_started_before_its_api_server_connects_once_it_answers() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().expect("tempdir");
    // A port nothing listens on (yet): the kubeconfig names it, as a user's names a cluster
    // that is restarting.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters:\n- name: lab\n  cluster:\n    server: http://127.0.0.1:{port}\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: lab\n    namespace: {}\nusers:\n- name: lab\n  user: {{}}\n",
            readygap_lab::kube::objects::NAMESPACE
        ),
    )
    .expect("writing the kubeconfig");
    let tmux = Tmux {
        socket: format!("readygap-test-connect-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' --kubeconfig '{}' --model llama3.2:1b; echo EXITED $?; sleep 60",
        kubeconfig.display()
    );
    tmux.start(&dir.path().join("config"), &script);
    let screen = tmux.wait("the connection state and this machine's memory", |s| {
        s.contains("NOT CONNECTED: try 1 failed, next try at") && s.contains("avail")
    });
    assert!(screen.contains("not connected"), "footer: {screen}");
    assert!(
        !screen.contains("t trial"),
        "no trial key offered: {screen}"
    );
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "t"]).status.success());
    tmux.wait("the refused key's reason", |s| {
        s.contains("not connected to the cluster yet: `t` (trial) waits for it")
    });
    // A later try failed too, with the reason on screen.
    tmux.wait("a later try", |s| s.contains("NOT CONNECTED: try 2 failed"));

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut o = readygap_lab::serve::LabOptions::new(
        readygap_lab::profile::Profile::named("local-1b").expect("profile"),
    );
    o.port = port;
    o.speed = 10.0;
    o.kubeconfig_out = Some(dir.path().join("lab-kubeconfig"));
    let lab = rt
        .block_on(readygap_lab::serve::serve(o))
        .expect("the lab on the kubeconfig's port");
    let screen = tmux.wait("the lab's pod and the keys", |s| {
        s.contains("ollama-") && s.contains("t trial") && !s.contains("NOT CONNECTED")
    });
    assert!(screen.contains("LIVE"), "{screen}");
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "q"]).status.success());
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "exit status 0: {screen}");
    rt.block_on(lab.shutdown());
}

/// The Events that explain a trial are on screen without a key press (issue 34), at 200×55
/// and at the smallest size (80×24), in a real terminal: on `demo --scenario
/// aggressive-liveness` the kubelet's `Unhealthy` with the probe's output and the trials that
/// failed say "killed by the liveness probe"; on `demo --scenario gpu-surge` the scheduler's
/// `FailedScheduling` with its `Insufficient nvidia.com/gpu`. Each screen is printed.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn events_that_explain_a_trial_are_on_screen_at_200x55_and_80x24() {
    crate::peers::tmux();
    let bin = env!("CARGO_BIN_EXE_readygap");
    // What must be on screen (a message may wrap between its words).
    for (scenario, key, explained) in [
        (
            "aggressive-liveness",
            None,
            ["Liveness probe failed", "Unhealthy"],
        ),
        ("gpu-surge", Some("r"), ["FailedScheduling", "Insufficient"]),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let tmux = Tmux {
            socket: format!("readygap-events-{scenario}-{}", std::process::id()),
        };
        let script =
            format!("'{bin}' demo --speed 3 --scenario {scenario}; echo EXITED $?; sleep 60");
        tmux.start(&dir.path().join("config"), &script);
        tmux.wait("a Ready pod", |s| s.contains("Running True"));
        // The liveness kills come by themselves; the surge stalls once a rollout restarts.
        if let Some(key) = key {
            tmux.cmd(&["send-keys", "-t", "rg", key]);
            tmux.wait("the confirmation", |s| s.contains("Confirm"));
            tmux.cmd(&["send-keys", "-t", "rg", "y"]);
        }
        for (w, h) in [(200, 55), (80, 24)] {
            tmux.resize(w, h);
            let screen = tmux.wait(&format!("{explained:?} at {w}×{h}"), |s| {
                s.lines().count() >= h as usize - 1
                    && s.lines().all(|l| l.chars().count() <= w as usize)
                    && explained.iter().all(|e| s.contains(e))
                    && (scenario != "gpu-surge" || s.contains("nvidia.com/gpu"))
            });
            eprintln!("{scenario} at {w}×{h}:\n{screen}");
            if scenario == "aggressive-liveness" && w == 200 {
                let failed = tmux.wait("a trial failed by the probe", |s| {
                    s.contains("killed by the liveness")
                });
                assert!(failed.contains("Unhealthy"), "{failed}");
            }
        }
        tmux.cmd(&["send-keys", "-t", "rg", "q"]);
        let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
        assert!(screen.contains("EXITED 0"), "{screen}");
    }
}

/// The Log view (issue 34) in a real terminal on `demo`: `L` follows the focused pod's log
/// (its "Listening on" line marked), a trial replaces the pod and the view follows the new
/// one, whose model load readygap's inference causes is marked ("model loaded", Ollama's
/// "llama runner started in … seconds") and ticked `◆` on the Timeline's bar; at 200×55 and
/// 80×24; `L` again gives Endpoints their place back. Each screen is printed.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn the_log_view_follows_the_new_pod_through_a_trial_at_200x55_and_80x24() {
    crate::peers::tmux();
    let bin = env!("CARGO_BIN_EXE_readygap");
    let dir = tempfile::tempdir().expect("tempdir");
    let tmux = Tmux {
        socket: format!("readygap-log-view-{}", std::process::id()),
    };
    let script = format!("'{bin}' demo --speed 3; echo EXITED $?; sleep 60");
    tmux.start(&dir.path().join("config"), &script);
    tmux.resize(200, 55);
    tmux.wait("a Ready pod", |s| s.contains("Running True"));
    tmux.cmd(&["send-keys", "-t", "rg", "L"]);
    let first = tmux.wait("the focused pod's log with its Listening line", |s| {
        s.contains("· following") && s.contains("▸ listening") && s.contains("Listening on")
    });
    let pod_of = |s: &str| {
        s.split("Log · ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .map(str::to_string)
    };
    let old = pod_of(&first).unwrap_or_else(|| panic!("no pod in the Log title:\n{first}"));
    tmux.cmd(&["send-keys", "-t", "rg", "t"]);
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    tmux.cmd(&["send-keys", "-t", "rg", "y"]);
    for (w, h) in [(200, 55), (80, 24)] {
        tmux.resize(w, h);
        let screen = tmux.wait(&format!("the new pod's model load at {w}×{h}"), |s| {
            s.lines().all(|l| l.chars().count() <= w as usize)
                && pod_of(s).is_some_and(|p| p != old)
                && s.contains("▸ model loaded")
                && s.contains(readygap::ui::panels::timeline::LOG_TICK)
        });
        eprintln!("log view at {w}×{h}:\n{screen}");
        assert!(
            !screen.contains("Endpoints"),
            "the log has their place:\n{screen}"
        );
    }
    tmux.resize(200, 55);
    tmux.cmd(&["send-keys", "-t", "rg", "L"]);
    tmux.wait("the Endpoints panel back", |s| {
        s.contains("Endpoints") && !s.contains("Log · ")
    });
    tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "{screen}");
}
