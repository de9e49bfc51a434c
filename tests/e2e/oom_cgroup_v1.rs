//! A real OOM kill on this machine's cgroup v1 hierarchy: a child memory cgroup with a 64 MiB
//! limit, a process in it that allocates 256 MiB, the kernel kills it. readygap's memory
//! stream (the same `head` loop it runs in containers, parsed by `sources::memory`) sees the
//! `oom_kill` counter rise, and the detector reports the kill (`runner_oom`: the process died,
//! its cgroup lived). Needs a writable v1 memory hierarchy: ignored by a plain `cargo test`,
//! run by `.ci/run` (`--include-ignored`).

use readygap_core::event::{Event, EventKind, InferenceResult, ResidentModel, Source};
use readygap_core::residency::VerdictKind;
use readygap_core::state::State;
use readygap_live::sources::memory::{BlockSplitter, CgroupVersion, MARKER, parse_block};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Cgroup(std::path::PathBuf);

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Empty by now (the victim was killed); a v1 cgroup is removed with rmdir.
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn now_event(kind: EventKind, source: Source) -> Event {
    Event::new(chrono::Utc::now(), source, kind)
}

#[test]
#[ignore = "needs root and a writable cgroup v1 memory hierarchy (/sys/fs/cgroup/memory), as on CI"]
fn kernel_oom_kill_in_a_child_cgroup_is_seen_and_attributed() {
    let root = std::path::Path::new("/sys/fs/cgroup/memory");
    let dir = root.join(format!("readygap-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        let msg = format!(
            "cannot create a child memory cgroup under {} ({e}): this machine does not allow the real OOM test",
            root.display()
        );
        panic!("{msg}");
    }
    let cg = Cgroup(dir.clone());
    std::fs::write(dir.join("memory.limit_in_bytes"), (64u64 << 20).to_string()).unwrap();
    // No swap escape: where memsw exists, cap it at the same limit.
    let _ = std::fs::write(
        dir.join("memory.memsw.limit_in_bytes"),
        (64u64 << 20).to_string(),
    );

    // readygap's stream of the four v1 files, every 50 ms.
    let files = CgroupVersion::v1_files_under(&dir.display().to_string());
    let script = format!(
        "while :; do head -n 200 {}; echo {MARKER}; sleep 0.05; done",
        files.join(" ")
    );
    let mut sampler = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = sampler.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Event>();
    let reader = std::thread::spawn(move || {
        let mut splitter = BlockSplitter::default();
        let mut buf = [0u8; 8192];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            for block in splitter.push(&buf[..n]) {
                let reading = parse_block(CgroupVersion::V1, &block).expect("a v1 block parses");
                let s = reading.sample("ollama-victim", CgroupVersion::V1.source());
                if tx
                    .send(now_event(EventKind::MemorySample(s), Source::Memory))
                    .is_err()
                {
                    return;
                }
            }
        }
    });

    let mut state = State::new();
    let drain = |state: &mut State, until: Option<&dyn Fn(&State) -> bool>| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            while let Ok(ev) = rx.try_recv() {
                state.apply(&ev);
            }
            match until {
                Some(cond) if !cond(state) => {
                    assert!(Instant::now() < deadline, "timed out waiting for samples");
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => return,
            }
        }
    };
    // A first sample: the counter starts at 0 and the limit is read.
    drain(
        &mut state,
        Some(&|s: &State| s.memory.contains_key("ollama-victim")),
    );
    let before = state.memory["ollama-victim"].clone();
    assert_eq!(before.oom_kill, Some(0));
    assert_eq!(before.limit, Some(64 << 20));

    // The "runner": one model resident, a request that makes it grow past the limit.
    state.apply(&now_event(
        EventKind::Residency {
            pod: "ollama-victim".into(),
            models: vec![ResidentModel {
                name: "tiny:1b".into(),
                size: 32 << 20,
                size_vram: 0,
                expires_at: None,
                ..Default::default()
            }],
        },
        Source::Runtime,
    ));
    state.apply(&now_event(
        EventKind::InferenceStarted {
            request_id: 1,
            pod: "ollama-victim".into(),
            model: "tiny:3b".into(),
        },
        Source::Runtime,
    ));
    let victim = Command::new("sh")
        .args([
            "-c",
            &format!(
                "echo $$ > {}/cgroup.procs && exec python3 -c 'x = bytearray(256 << 20); print(len(x))'",
                dir.display()
            ),
        ])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    let killed = victim.status.signal() == Some(9) || victim.status.code() == Some(137);
    assert!(killed, "the kernel should kill it: {:?}", victim.status);

    // The stream sees the counter rise; then the request fails the way Ollama reports it.
    drain(
        &mut state,
        Some(&|s: &State| s.memory["ollama-victim"].oom_kill.unwrap_or(0) >= 1),
    );
    state.apply(&now_event(
        EventKind::InferenceDone(InferenceResult {
            request_id: 1,
            ok: false,
            http_status: Some(500),
            error: Some("llama runner process has terminated: signal: killed".into()),
            ..Default::default()
        }),
        Source::Runtime,
    ));
    sampler.kill().ok();
    sampler.wait().ok();
    reader.join().ok();
    drop(cg);

    let v = state.oom.verdicts.last().expect("a verdict");
    assert_eq!(v.kind, VerdictKind::RunnerOom, "{v:#?}");
    assert_eq!(v.limit, Some(64 << 20));
    assert!(v.message.contains("runner OOM-killed"), "{}", v.message);
    assert!(state.memory["ollama-victim"].oom_kill >= Some(1));
}
