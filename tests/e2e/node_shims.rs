//! The `kind` and `minikube` node accesses end to end through the real binary, with small
//! stand-ins for `docker` and `minikube` on PATH (this machine has neither a Docker engine
//! nor minikube). The stand-ins are the I/O boundary: each records the argv it was given,
//! checks the shape the real tool expects (`docker exec NODE sh -c SCRIPT`; `minikube ssh
//! [-p PROFILE] -n NODE -- COMMAND`, where the real minikube hands COMMAND to the node's
//! shell as one string) and then runs the command on this machine, as the node would. So
//! readygap's templates, quoting, the sudo wrapper, the output parsing and the
//! before/after judgement are exercised for real; only the container/VM hop is not.
//!
//! Dropping caches needs root (as on CI): the tests are ignored by a plain `cargo test`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Two drops at once would empty each other's cache before the "before" figure is read.
static DROP_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A 64 MiB file written and read back on a real disk, so there is page cache to drop.
fn cache_a_fresh_file(dir: &Path) {
    let path = dir.join("cache-me.bin");
    let mut random = std::fs::File::open("/dev/urandom").expect("/dev/urandom");
    let mut out = std::fs::File::create(&path).expect("create");
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..64 {
        random.read_exact(&mut buf).expect("random");
        out.write_all(&buf).expect("write");
    }
    out.sync_all().expect("sync");
    drop(out);
    let mut back = Vec::new();
    std::fs::File::open(&path)
        .expect("open")
        .read_to_end(&mut back)
        .expect("read");
    assert_eq!(back.len(), 64 << 20);
}

fn write_shim(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("shim");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Runs `readygap drop-caches … --format json` with `shims` first on PATH.
fn drop_caches(shims: &Path, args: &[&str]) -> (i32, serde_json::Value, String) {
    let path = format!(
        "{}:{}",
        shims.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("drop-caches")
        .args(args)
        .args([
            "--format",
            "json",
            "--timeout",
            "60s",
            "--min-drop-kb",
            "32768",
        ])
        .env("PATH", path)
        .output()
        .expect("run readygap");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}): {stdout:?}; stderr {stderr:?}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

fn argv_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| {
            panic!(
                "{} was not written ({e}): the shim never ran",
                file.display()
            )
        })
        .lines()
        .map(str::to_owned)
        .collect()
}

fn disk_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

fn assert_dropped(code: i32, json: &serde_json::Value, stderr: &str, node: &str) {
    assert_eq!(json["error"], serde_json::Value::Null, "{json} {stderr}");
    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["node"], node);
    assert_eq!(json["dropped"], true, "{json}");
    let before = json["cached_kb_before"].as_u64().expect("before");
    let after = json["cached_kb_after"].as_u64().expect("after");
    assert!(
        before >= after + 32 * 1024,
        "Cached should fall by at least half the 64 MiB file: {before} → {after} kB"
    );
}

#[ignore = "needs root: /proc/sys/vm/drop_caches writable (CI runs as root)"]
#[test]
fn kind_access_runs_the_script_through_docker_exec() {
    crate::peers::root();
    let shims = tempfile::tempdir().expect("shims");
    let log: PathBuf = shims.path().join("docker.argv");
    // docker exec NODE sh -c SCRIPT: one argv element per line, then run it here.
    write_shim(
        shims.path(),
        "docker",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{log}'\n\
             [ \"$1\" = exec ] || {{ echo \"docker: unexpected $1\" >&2; exit 125; }}\n\
             shift 2\n\
             exec \"$@\"\n",
            log = log.display()
        ),
    );
    let _one_at_a_time = DROP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path());
    let (code, json, stderr) =
        drop_caches(shims.path(), &["--node", "kind-worker", "--via", "kind"]);
    let argv = argv_lines(&log);
    assert_eq!(argv[..4], ["exec", "kind-worker", "sh", "-c"], "{argv:?}");
    // The script is ONE argument (never split or re-quoted), and it is the fixed template.
    let script = argv[4..].join("\n");
    assert!(
        script.starts_with(
            "sync; grep -E \"^(Cached|Shmem|Mapped|Dirty|Writeback):\" /proc/meminfo;"
        ),
        "{script}"
    );
    assert!(
        script.contains("echo 3 > /proc/sys/vm/drop_caches"),
        "{script}"
    );
    assert_dropped(code, &json, &stderr, "kind-worker");
}

#[ignore = "needs root and passwordless sudo (CI runs as root, .ci/sshd-setup.sh installs sudo)"]
#[test]
fn minikube_access_runs_the_script_through_minikube_ssh_with_sudo() {
    crate::peers::root();
    crate::peers::sudo();
    let shims = tempfile::tempdir().expect("shims");
    let log: PathBuf = shims.path().join("minikube.argv");
    // minikube ssh -p PROFILE -n NODE -- COMMAND: the node's shell gets COMMAND as a string.
    write_shim(
        shims.path(),
        "minikube",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{log}'\n\
             [ \"$1\" = ssh ] || {{ echo \"minikube: unexpected $1\" >&2; exit 64; }}\n\
             while [ \"$1\" != -- ]; do shift; done\n\
             shift\n\
             exec sh -c \"$*\"\n",
            log = log.display()
        ),
    );
    let _one_at_a_time = DROP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path());
    let (code, json, stderr) = drop_caches(
        shims.path(),
        &["--node", "dev-m02", "--via", "minikube", "--profile", "dev"],
    );
    let argv = argv_lines(&log);
    assert_eq!(
        argv[..6],
        ["ssh", "-p", "dev", "-n", "dev-m02", "--"],
        "{argv:?}"
    );
    let command = argv[6..].join("\n");
    assert!(command.starts_with("sudo -n sh -c '"), "{command}");
    assert_dropped(code, &json, &stderr, "dev-m02");
}

#[test]
fn a_failing_docker_is_a_clear_error_not_a_drop() {
    let shims = tempfile::tempdir().expect("shims");
    write_shim(
        shims.path(),
        "docker",
        "echo 'Error response from daemon: No such container: kind-worker' >&2\nexit 1\n",
    );
    let (code, json, _) = drop_caches(shims.path(), &["--node", "kind-worker", "--via", "kind"]);
    assert_eq!(code, 1, "{json}");
    assert_eq!(json["dropped"], false);
    let error = json["error"].as_str().expect("error text");
    assert!(error.contains("No such container"), "{error}");
    assert!(json["cached_kb_before"].is_null(), "{json}");
}
