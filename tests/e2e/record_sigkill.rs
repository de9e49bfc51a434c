//! A recording process killed with SIGKILL mid-trial leaves a file that replays up to the
//! kill; a torn last line is a warning, never an error, and everything before it is kept.

use readygap_core::record::jsonl;
use readygap_core::state::State;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigkill_mid_trial_leaves_a_replayable_recording() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("killed.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "run",
            "--lab",
            "local-3b",
            "--lab-speed",
            "4",
            "--trials",
            "3",
            "--cooldown",
            "0s",
            "--record",
        ])
        .arg(&rec)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Mid-trial: the T3 inference of the first trial has been sent and not finished.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(&rec).unwrap_or_default();
        if text.contains("\"inference_started\"") {
            break;
        }
        assert!(Instant::now() < deadline, "the run never reached T3");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let bytes = std::fs::read(&rec).unwrap();
    let torn = bytes.last() != Some(&b'\n');
    let recording = jsonl::read(&rec).expect("a killed recording still reads");
    if torn {
        assert_eq!(recording.warnings.len(), 1, "{:?}", recording.warnings);
        assert!(recording.warnings[0].contains("torn last line"));
    } else {
        assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
    }
    let state = State::from_events(&recording.events);
    let t = &state.timeline.trials[0];
    assert!(
        t.marks.t0.is_some() && t.marks.t3.is_some(),
        "{:?}",
        t.marks
    );
    assert!(
        t.is_running(),
        "killed between T3 and T4: the trial is still open"
    );

    // The same file cut in the middle of its last line (the kill landing mid-write).
    let complete: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .collect();
    let cut_at = complete[complete.len() - 2] + 1 + 10;
    let cut = dir.path().join("cut.jsonl");
    std::fs::write(&cut, &bytes[..cut_at]).unwrap();
    let again = jsonl::read(&cut).unwrap();
    assert_eq!(again.warnings.len(), 1, "{:?}", again.warnings);
    assert!(
        again.warnings[0].contains("torn last line"),
        "{}",
        again.warnings[0]
    );
    assert_eq!(
        again.events.len(),
        complete.len() - 2,
        "every line before the torn one"
    );
}
