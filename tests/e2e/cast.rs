//! `readygap cast` writes asciicast v2: a header with width, height, timestamp, duration and
//! title; every event a `[time, code, data]` array with non-decreasing time; `"m"` markers at
//! every T0–T4 of the recording's trials, labelled like `trial 2 T1 Ready`.

use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{Header, Recorder};
use readygap_core::state::State;
use std::process::Command;

#[ignore = "needs asciinema (python3 -m pip install asciinema), which plays the cast"]
#[test]
fn cast_is_valid_asciicast_v2_with_markers_at_the_marks() {
    let dir = tempfile::tempdir().unwrap();
    let rec_path = dir.path().join("two-trials.jsonl");
    let mut events = vec![applied(
        -1_000,
        pod("ollama-a", "uid-a", Stage::Ready, -1_000),
    )];
    events.extend(full_trial(
        0,
        1,
        ("ollama-a", "uid-a"),
        ("ollama-b", "uid-b"),
    ));
    events.extend(full_trial(
        30_000,
        2,
        ("ollama-b", "uid-b"),
        ("ollama-c", "uid-c"),
    ));
    let mut rec = Recorder::create(&rec_path, &Header::new(at(-1_000), "lab", "ns", "t")).unwrap();
    for e in &events {
        rec.write(e).unwrap();
    }
    drop(rec);
    let out = dir.path().join("out.cast");
    let st = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("cast")
        .arg(&rec_path)
        .arg("-o")
        .arg(&out)
        .args(["--size", "100x30", "--idle-limit", "1"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );

    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert_eq!(header["width"], 100);
    assert_eq!(header["height"], 30);
    assert!(header["timestamp"].as_i64().unwrap() > 1_700_000_000);
    assert!(header["title"].as_str().unwrap().contains("two-trials"));
    let duration = header["duration"].as_f64().unwrap();

    let mut all_output = String::new();
    let mut last = 0.0f64;
    let mut markers = Vec::new();
    let mut output_bytes = 0usize;
    for (i, line) in lines.enumerate() {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", i + 2));
        let arr = v
            .as_array()
            .unwrap_or_else(|| panic!("line {}: not an array", i + 2));
        assert_eq!(arr.len(), 3, "line {}", i + 2);
        let t = arr[0].as_f64().unwrap();
        assert!(t >= last, "time goes back at line {}: {t} < {last}", i + 2);
        last = t;
        let code = arr[1].as_str().unwrap();
        let data = arr[2].as_str().unwrap();
        match code {
            "o" => {
                output_bytes += data.len();
                all_output.push_str(data);
            }
            "m" => markers.push((t, data.to_string())),
            other => panic!("unexpected event code {other}"),
        }
    }
    assert!(output_bytes > 1000, "frames were written");
    assert!(
        (duration - last).abs() < 1e-6,
        "duration is the last event's time"
    );

    asciinema_plays_it(&out, &all_output);

    let state = State::from_events(&events);
    let mut expected = Vec::new();
    for t in &state.timeline.trials {
        for label in [
            "T0 replacement requested",
            "T1 Ready",
            "T2 runtime answers",
            "T3 inference sent",
            "T4 inference done",
        ] {
            expected.push(format!("trial {} {label}", t.index));
        }
    }
    let got: Vec<String> = markers.iter().map(|(_, l)| l.clone()).collect();
    assert_eq!(got, expected);
    // The idle limit cut the 22 s pause between the trials to 1 s.
    let t4_1 = markers[4].0;
    let t0_2 = markers[5].0;
    assert!(t0_2 - t4_1 <= 1.5, "{t4_1} → {t0_2}");
}

#[test]
fn bad_size_is_refused_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["cast", "x.jsonl", "-o", "y.cast", "--size", "wide"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected COLSxROWS"));
}

/// The real peer: asciinema (PyPI `asciinema`) reads the file and writes exactly the frames.
fn asciinema_plays_it(cast: &std::path::Path, frames: &str) {
    crate::peers::asciinema();
    let out = Command::new("asciinema")
        .arg("cat")
        .arg(cast)
        .output()
        .expect("asciinema runs");
    assert!(
        out.status.success(),
        "asciinema cat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), frames);
}
