//! The memory feed's parsers: on the REAL cgroup v1 hierarchy of this machine (files read
//! live, a real allocation seen in our own cgroup, the real streaming script run by `sh` with
//! GNU `head`, and its builtins-only twin run by dash and bash with no command on PATH, as in
//! an image without coreutils), and on cgroup v2 fixtures.

use readygap_core::event::MemorySource;
use readygap_live::sources::memory::{
    BlockSplitter, CgroupVersion, DETECT_SCRIPT, Detection, MARKER, builtin_stream_script, detect,
    parse_block, parse_detection, parse_summary, parse_v1, parse_v2, split_head_output,
    stream_script,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixture(dir: &str, file: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cgroup/v2")
        .join(dir)
        .join(file);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn v2(dir: &str) -> readygap_live::sources::memory::CgroupReading {
    parse_v2(
        &fixture(dir, "memory.current"),
        &fixture(dir, "memory.max"),
        &fixture(dir, "memory.events"),
        &fixture(dir, "memory.stat"),
    )
    .expect("v2 fixture parses")
}

#[test]
fn v2_fixture_with_a_limit_and_an_oom_kill() {
    let r = v2("limited");
    assert_eq!(r.usage, 2_979_528_704);
    assert_eq!(r.limit, Some(4 * 1024 * 1024 * 1024));
    assert_eq!(r.oom_kill, Some(1));
    assert_eq!(r.inactive_file, Some(1_408_360_448));
    assert_eq!(r.working_set(), Some(2_979_528_704 - 1_408_360_448));
    let s = r.sample("ollama-x", MemorySource::CgroupV2);
    assert_eq!(
        (s.pod.as_str(), s.current, s.limit),
        ("ollama-x", 2_979_528_704, Some(4 << 30))
    );
}

#[test]
fn v2_fixture_without_limit_floors_the_working_set() {
    let r = v2("unlimited");
    assert_eq!(r.limit, None, "`max` is no limit");
    assert_eq!(r.oom_kill, Some(0));
    // inactive_file (60 000 000) exceeds usage (57 344 000): the working set is 0, not negative.
    assert_eq!(r.working_set(), Some(0));
}

#[test]
fn malformed_files_are_errors_not_panics() {
    assert!(parse_v2("", "max", "", "").is_err());
    assert!(
        parse_v2("12x", "max", "", "")
            .unwrap_err()
            .contains("memory.current")
    );
    assert!(
        parse_v2("1", "lots", "", "")
            .unwrap_err()
            .contains("memory.max")
    );
    assert!(
        parse_v1("1", "", "", "")
            .unwrap_err()
            .contains("memory.limit_in_bytes")
    );
    // Missing keys are unknown, not zero.
    let r = parse_v2("100", "max", "garbage", "anon 5").unwrap();
    assert_eq!(
        (r.oom_kill, r.inactive_file, r.working_set()),
        (None, None, None)
    );
}

fn head_block(version: CgroupVersion, contents: &[&str; 4]) -> String {
    let mut out = String::new();
    for (i, (f, c)) in version.files().iter().zip(contents).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("==> {f} <==\n{c}"));
    }
    out
}

#[test]
fn v2_stream_blocks_split_at_any_byte_parse_the_same() {
    let files = [
        "memory.current",
        "memory.max",
        "memory.events",
        "memory.stat",
    ];
    let a: Vec<String> = files.iter().map(|f| fixture("limited", f)).collect();
    let b: Vec<String> = files.iter().map(|f| fixture("unlimited", f)).collect();
    let mut stream = String::new();
    for block in [&a, &b] {
        let arr = [
            block[0].as_str(),
            block[1].as_str(),
            block[2].as_str(),
            block[3].as_str(),
        ];
        stream.push_str(&head_block(CgroupVersion::V2, &arr));
        stream.push_str(MARKER);
        stream.push('\n');
    }
    // Feed the stream in chunks of every size from 1 to 97 bytes.
    for chunk in [1usize, 2, 7, 13, 97, stream.len()] {
        let mut s = BlockSplitter::default();
        let mut blocks = Vec::new();
        for piece in stream.as_bytes().chunks(chunk) {
            blocks.extend(s.push(piece));
        }
        assert_eq!(blocks.len(), 2, "chunk {chunk}");
        let r0 = parse_block(CgroupVersion::V2, &blocks[0]).unwrap();
        let r1 = parse_block(CgroupVersion::V2, &blocks[1]).unwrap();
        assert_eq!(r0, v2("limited"), "chunk {chunk}");
        assert_eq!(r1, v2("unlimited"), "chunk {chunk}");
    }
    // A partial block at the end is kept until its marker arrives.
    let mut s = BlockSplitter::default();
    let cut = stream.len() - MARKER.len() - 1;
    assert_eq!(s.push(&stream.as_bytes()[..cut]).len(), 1);
    assert_eq!(s.push(&stream.as_bytes()[cut..]).len(), 1);
}

#[test]
fn detection_output() {
    assert_eq!(parse_detection("cgroup-v2\n"), Some(CgroupVersion::V2));
    assert_eq!(parse_detection("cgroup-v1\n"), Some(CgroupVersion::V1));
    assert_eq!(
        parse_detection("cgroup-v2\ncgroup-v1\n"),
        Some(CgroupVersion::V2)
    );
    assert_eq!(parse_detection("sh: cat: not found\n"), None);
}

#[test]
fn summary_api_document() {
    let doc: serde_json::Value = serde_json::from_str(
        r#"{"node":{"nodeName":"n1"},"pods":[
          {"podRef":{"name":"other","namespace":"ns","uid":"u0"},"containers":[{"name":"ollama","memory":{"usageBytes":1,"workingSetBytes":1}}]},
          {"podRef":{"name":"ollama-a","namespace":"ns","uid":"u1"},"containers":[
            {"name":"sidecar","memory":{"usageBytes":5,"workingSetBytes":4}},
            {"name":"ollama","memory":{"time":"2026-11-30T10:00:00Z","usageBytes":3000000000,"workingSetBytes":1500000000,"rssBytes":1300000000}}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        parse_summary(&doc, "ns", "ollama-a", "ollama"),
        Some((3_000_000_000, Some(1_500_000_000)))
    );
    assert_eq!(
        parse_summary(&doc, "ns", "ollama-a", "sidecar"),
        Some((5, Some(4)))
    );
    assert_eq!(parse_summary(&doc, "other-ns", "ollama-a", "ollama"), None);
    assert_eq!(
        parse_summary(&serde_json::json!({"pods": 3}), "ns", "x", "y"),
        None
    );
}

/// This process's cgroup v1 memory directory, if the machine has a v1 memory hierarchy.
fn own_v1_dir() -> Option<PathBuf> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.to_string())
    })?;
    let dir = Path::new("/sys/fs/cgroup/memory").join(rel.trim_start_matches('/'));
    dir.join("memory.usage_in_bytes").exists().then_some(dir)
}

fn read_v1(dir: &Path) -> readygap_live::sources::memory::CgroupReading {
    let r = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}/{f}: {e}", dir.display()))
    };
    parse_v1(
        &r("memory.usage_in_bytes"),
        &r("memory.limit_in_bytes"),
        &r("memory.oom_control"),
        &r("memory.stat"),
    )
    .expect("real v1 files parse")
}

/// The reason of the tests that read the machine's cgroup v1 files: ignored in a plain
/// `cargo test`, run by CI (`-- --include-ignored`, on a cgroup v1 machine), and failing,
/// never passing, where they run without the hierarchy.
const NEEDS_V1: &str = "needs a cgroup v1 memory hierarchy (/sys/fs/cgroup/memory), as on CI";

/// This process's cgroup v2 directory when the memory controller is on the v2 hierarchy.
fn own_v2_dir() -> Option<PathBuf> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    dir.join("memory.current").exists().then_some(dir)
}

/// The real files of whichever hierarchy holds this process's memory controller (a machine
/// has v1 or v2, rarely both): each present one is read and checked; with neither the test
/// fails, since nothing would have been checked.
#[test]
fn real_cgroup_files_of_this_machine() {
    let (v1, v2) = (own_v1_dir(), own_v2_dir());
    assert!(
        v1.is_some() || v2.is_some(),
        "neither a cgroup v1 memory hierarchy nor cgroup v2 memory files for this process"
    );
    if let Some(dir) = v2 {
        real_cgroup_v2_files(&dir);
    }
    if let Some(dir) = v1 {
        real_cgroup_v1_files(&dir);
    }
}

fn real_cgroup_v2_files(dir: &Path) {
    let r = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}/{f}: {e}", dir.display()))
    };
    // memory.stat is read once: other tests in this process move the page cache between
    // two reads, so the parsed field is compared with the very text it was parsed from.
    let stat = r("memory.stat");
    let before = parse_v2(
        &r("memory.current"),
        &r("memory.max"),
        &r("memory.events"),
        &stat,
    )
    .expect("real v2 files parse");
    assert!(before.usage > 0);
    let key = |k: &str| readygap_live::sources::memory::keyed(&stat, k).unwrap_or(0);
    assert_eq!(before.inactive_file, Some(key("inactive_file")));
    let ratio = before.usage as f64 / (key("anon") + key("file") + key("kernel")).max(1) as f64;
    assert!(
        (0.75..=1.6).contains(&ratio),
        "usage {} vs anon+file+kernel",
        before.usage
    );
    let mut block = vec![0u8; 96 << 20];
    for i in (0..block.len()).step_by(4096) {
        block[i] = 1;
    }
    let after = parse_v2(
        &r("memory.current"),
        &r("memory.max"),
        &r("memory.events"),
        &r("memory.stat"),
    )
    .unwrap();
    assert!(
        after.usage.saturating_sub(before.usage) >= 64 << 20,
        "usage rose by {}",
        after.usage.saturating_sub(before.usage)
    );
    assert!(
        std::hint::black_box(&block)
            .iter()
            .step_by(4096)
            .all(|b| *b == 1)
    );
}

fn real_cgroup_v1_files(dir: &Path) {
    // memory.stat is read once: other tests in this process move the page cache between
    // two reads (CI once saw total_inactive_file 585 MB parsed vs 759 MB re-read), so the
    // parsed field is compared with the very text it was parsed from.
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap();
    let r = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let before = parse_v1(
        &r("memory.usage_in_bytes"),
        &r("memory.limit_in_bytes"),
        &r("memory.oom_control"),
        &stat,
    )
    .expect("real v1 files parse");
    assert!(before.usage > 0, "{before:?}");
    // The kernel's own breakdown: usage ≈ rss + cache (+ kernel memory); within 25 %.
    let key = |k: &str| readygap_live::sources::memory::keyed(&stat, k).unwrap_or(0);
    let rss_cache = key("total_rss") + key("total_cache");
    assert!(rss_cache > 0);
    let ratio = before.usage as f64 / rss_cache as f64;
    assert!(
        (0.75..=1.6).contains(&ratio),
        "usage {} vs rss+cache {rss_cache}",
        before.usage
    );
    assert_eq!(before.inactive_file, Some(key("total_inactive_file")));
    assert!(before.working_set().unwrap() <= before.usage);
    // The limit: unlimited (huge) is None, else the kernel's number.
    let raw_limit: u64 = std::fs::read_to_string(dir.join("memory.limit_in_bytes"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(before.limit, (raw_limit < (1 << 62)).then_some(raw_limit));
    // oom_kill is present on kernels ≥ 4.13.
    let oom = std::fs::read_to_string(dir.join("memory.oom_control")).unwrap();
    if oom.contains("oom_kill ") {
        assert!(before.oom_kill.is_some());
    }

    // Allocate and touch 96 MiB: our cgroup's usage must rise by most of it.
    let mut block = vec![0u8; 96 << 20];
    for i in (0..block.len()).step_by(4096) {
        block[i] = (i % 251) as u8 + 1;
    }
    let after = read_v1(dir);
    let grew = after.usage.saturating_sub(before.usage);
    // Other tests run in this process too; require most of the allocation, not all.
    assert!(
        grew >= 64 << 20,
        "usage grew by only {grew} bytes after touching 96 MiB"
    );
    assert!(
        std::hint::black_box(&block)
            .iter()
            .step_by(4096)
            .all(|b| *b != 0)
    );
}

#[test]
#[ignore = "needs a cgroup v1 memory hierarchy (/sys/fs/cgroup/memory), as on CI"]
fn the_real_stream_script_on_this_machines_v1_files() {
    let root = Path::new(V1_USAGE);
    assert!(root.exists(), "{NEEDS_V1}: no {V1_USAGE}");
    let sh = which("sh").unwrap_or_else(|()| panic!("sh not installed"));
    let script = stream_script(CgroupVersion::V1, Duration::from_millis(100));
    let mut child = std::process::Command::new(sh)
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let mut out = child.stdout.take().unwrap();
    let mut splitter = BlockSplitter::default();
    let mut blocks = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut buf = [0u8; 4096];
    while blocks.len() < 3 && std::time::Instant::now() < deadline {
        use std::io::Read;
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        blocks.extend(splitter.push(&buf[..n]));
    }
    child.kill().ok();
    child.wait().ok();
    assert!(blocks.len() >= 3, "got {} blocks", blocks.len());
    let files = split_head_output(&blocks[0]);
    assert_eq!(
        files.len(),
        4,
        "GNU head names each of the 4 files: {:?}",
        files.keys()
    );
    let kernel_now: u64 = std::fs::read_to_string(root)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    for b in &blocks {
        let r = parse_block(CgroupVersion::V1, b).expect("block parses");
        assert!(r.usage > 0);
        // The host-wide usage moves, but not by half within a second.
        let ratio = r.usage as f64 / kernel_now as f64;
        assert!((0.5..2.0).contains(&ratio), "{} vs {kernel_now}", r.usage);
        assert!(r.inactive_file.is_some(), "total_inactive_file read");
    }
}

fn which(cmd: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(cmd))
                .find(|p| p.is_file())
        })
        .ok_or(())
}

#[test]
fn invalid_bytes_do_not_stall_the_stream() {
    let mut s = BlockSplitter::default();
    // A split multi-byte character is kept for the next chunk…
    let text = "==> /sys/fs/cgroup/memory.current <==\né\n";
    let bytes = text.as_bytes();
    let cut = text.find('é').unwrap() + 1;
    assert!(s.push(&bytes[..cut]).is_empty());
    assert!(s.push(&bytes[cut..]).is_empty());
    // …but a byte that can never be UTF-8 is replaced, and the marker still ends the block.
    let blocks = s.push(b"\xff\xfe\n@@readygap\n");
    assert_eq!(blocks.len(), 1);
    assert!(
        blocks[0].contains('é') && blocks[0].contains('\u{fffd}'),
        "{:?}",
        blocks[0]
    );
    assert!(
        parse_block(CgroupVersion::V2, &blocks[0]).is_err(),
        "garbage is an error, not a sample"
    );
}

/// `SHELL -c SCRIPT` with nothing on PATH (an image with a shell and no coreutils), `ticks`
/// lines on its stdin, then stdin closed; its stdout.
fn shell_without_coreutils(shell: &str, script: &str, ticks: usize) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new(shell)
        .args(["-c", script])
        .env_clear()
        .env("PATH", "/nonexistent")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{shell}: {e}"));
    let mut stdin = child.stdin.take().expect("stdin");
    for _ in 0..ticks {
        stdin.write_all(b"\n").expect("a tick");
    }
    drop(stdin);
    let out = child
        .wait_with_output()
        .expect("the shell ends at end of input");
    assert!(out.status.success(), "{shell}: {}", out.status);
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The shells a serving image may have without coreutils: Debian's dash (its `sh`) and bash.
const SHELLS: [&str; 2] = ["/bin/dash", "/bin/bash"];

#[test]
fn detection_tells_an_image_without_head_and_sleep() {
    for shell in SHELLS {
        let bare = shell_without_coreutils(shell, DETECT_SCRIPT, 0);
        assert!(!detect(&bare).coreutils, "{shell}: {bare:?}");
        let with = std::process::Command::new(shell)
            .args(["-c", DETECT_SCRIPT])
            .output()
            .expect("the shell runs");
        let with = String::from_utf8_lossy(&with.stdout);
        assert!(detect(&with).coreutils, "{shell}: {with:?}");
        // The hierarchy is found with builtins alone, as with coreutils.
        assert_eq!(detect(&bare).version, detect(&with).version, "{shell}");
        if Path::new(V1_USAGE).exists() {
            assert_eq!(
                detect(&bare),
                Detection {
                    version: Some(CgroupVersion::V1),
                    coreutils: false
                },
                "{shell}"
            );
        }
    }
}

const V1_USAGE: &str = "/sys/fs/cgroup/memory/memory.usage_in_bytes";

#[test]
fn the_builtin_stream_gives_heads_blocks_one_per_tick() {
    // The v2 fixtures, one without its final newline, through each shell's builtins.
    let dir = tempfile::tempdir().unwrap();
    let names = [
        "memory.current",
        "memory.max",
        "memory.events",
        "memory.stat",
    ];
    let paths: Vec<String> = names
        .iter()
        .map(|n| {
            let p = dir.path().join(n);
            let text = fixture("limited", n);
            let text = if *n == "memory.max" {
                text.trim_end().to_string()
            } else {
                text
            };
            std::fs::write(&p, text).unwrap();
            p.display().to_string()
        })
        .collect();
    let script = builtin_stream_script(&paths);
    for shell in SHELLS {
        let out = shell_without_coreutils(shell, &script, 3);
        let blocks = BlockSplitter::default().push(out.as_bytes());
        assert_eq!(blocks.len(), 3, "{shell}: one block per tick: {out}");
        for b in &blocks {
            assert_eq!(split_head_output(b).len(), 4, "{shell}: {b}");
            assert_eq!(
                parse_block(CgroupVersion::V2, b),
                Ok(v2("limited")),
                "{shell}"
            );
        }
    }
}

#[test]
#[ignore = "needs a cgroup v1 memory hierarchy (/sys/fs/cgroup/memory), as on CI"]
fn the_builtin_stream_on_this_machines_v1_files() {
    assert!(Path::new(V1_USAGE).exists(), "{NEEDS_V1}: no {V1_USAGE}");
    let script = builtin_stream_script(&CgroupVersion::V1.files());
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").unwrap();
    let limit: u64 = limit.trim().parse().unwrap();
    for shell in SHELLS {
        let out = shell_without_coreutils(shell, &script, 2);
        let blocks = BlockSplitter::default().push(out.as_bytes());
        assert_eq!(blocks.len(), 2, "{shell}: {out}");
        for b in &blocks {
            let r = parse_block(CgroupVersion::V1, b).expect("block parses");
            assert!(r.usage > 0, "{shell}");
            assert_eq!(r.limit, (limit < (1 << 62)).then_some(limit), "{shell}");
            assert!(
                r.inactive_file.is_some(),
                "{shell}: total_inactive_file read"
            );
        }
    }
}
