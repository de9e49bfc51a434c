//! The real memory cgroup of one container of the real engine: created under the machine's
//! memory hierarchy (cgroup v1 `/sys/fs/cgroup/memory/readygap/…`, or v2
//! `/sys/fs/cgroup/readygap/…` where the unified hierarchy has the memory controller), with
//! the container's memory limit, read back as the kubelet and the dashboard read it, and
//! removed when the container is gone. Processes join it through `cgroup.procs`
//! (see `wrap_argv`), so the kernel charges and OOM-kills them as a container runtime would.
//! On v2 `memory.oom.group` is set as the kubelet sets it; v1 has no such switch, so the
//! kernel kills one process (the largest: Ollama's runner) and the others live on.

use crate::runtime::MemorySnapshot;
use std::path::{Path, PathBuf};

/// Which cgroup hierarchy holds the memory controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

const V1_ROOT: &str = "/sys/fs/cgroup/memory";
const V2_ROOT: &str = "/sys/fs/cgroup";

/// The memory hierarchy of this machine, if a memory controller is mounted where containers'
/// runtimes find it.
pub fn detect() -> Option<CgroupVersion> {
    if Path::new(V1_ROOT).join("memory.limit_in_bytes").exists() {
        return Some(CgroupVersion::V1);
    }
    let controllers =
        std::fs::read_to_string(Path::new(V2_ROOT).join("cgroup.controllers")).ok()?;
    controllers
        .split_whitespace()
        .any(|c| c == "memory")
        .then_some(CgroupVersion::V2)
}

/// Remove the cgroups (and kill their processes) that a lab process left behind when it died
/// without stopping its containers: names start with the creating process's id
/// (`<pid>-<lab>-<pod>-<n>`), and that process is gone.
pub fn sweep_stale() {
    let Some(version) = detect() else { return };
    let root = match version {
        CgroupVersion::V1 => Path::new(V1_ROOT).join("readygap"),
        CgroupVersion::V2 => Path::new(V2_ROOT).join("readygap"),
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if e.path().is_dir() && !Path::new(&format!("/proc/{pid}")).exists() {
            let cg = MemoryCgroup {
                version,
                dir: e.path(),
                limit: 0,
            };
            cg.remove(std::time::Duration::from_secs(2));
        }
    }
}

/// One container's memory cgroup.
#[derive(Debug)]
pub struct MemoryCgroup {
    pub version: CgroupVersion,
    /// The cgroup's directory.
    pub dir: PathBuf,
    pub limit: u64,
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

impl MemoryCgroup {
    /// Create `readygap/<name>` with `limit` bytes (0: no limit).
    pub fn create(name: &str, limit: u64) -> std::io::Result<Self> {
        let version = detect().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "no memory cgroup controller on this machine (neither v1 /sys/fs/cgroup/memory nor v2 with memory)",
            )
        })?;
        let root = match version {
            CgroupVersion::V1 => PathBuf::from(V1_ROOT),
            CgroupVersion::V2 => PathBuf::from(V2_ROOT),
        };
        Self::create_under(version, &root, name, limit)
    }

    /// Create `readygap/<name>` under the hierarchy mounted at `root`.
    fn create_under(
        version: CgroupVersion,
        root: &Path,
        name: &str,
        limit: u64,
    ) -> std::io::Result<Self> {
        let parent = root.join("readygap");
        if !parent.exists() {
            std::fs::create_dir(&parent).map_err(|e| io_err("creating", &parent, e))?;
        }
        if version == CgroupVersion::V2 {
            // Children get the memory controller only when the parent delegates it.
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+memory");
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+memory");
        }
        let dir = parent.join(name);
        if dir.exists() {
            // A leftover of a crashed run with the same name: empty, then reuse.
            let cg = Self {
                version,
                dir: dir.clone(),
                limit,
            };
            cg.kill_all();
            let _ = std::fs::remove_dir(&dir);
        }
        std::fs::create_dir(&dir).map_err(|e| io_err("creating", &dir, e))?;
        let cg = Self {
            version,
            dir,
            limit,
        };
        match version {
            CgroupVersion::V1 => {
                if limit > 0 {
                    cg.write("memory.limit_in_bytes", &limit.to_string())?;
                }
            }
            CgroupVersion::V2 => {
                if limit > 0 {
                    cg.write("memory.max", &limit.to_string())?;
                }
                // What the kubelet sets on cgroup v2 (KEP-4088 behaviour of 1.28+).
                let _ = cg.write("memory.oom.group", "1");
            }
        }
        Ok(cg)
    }

    fn write(&self, file: &str, value: &str) -> std::io::Result<()> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|e| io_err("writing", &p, e))
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    fn read_u64(&self, file: &str) -> u64 {
        self.read(file).trim().parse().unwrap_or(0)
    }

    /// `KEY VALUE` lines of a flat-keyed file.
    fn keyed(&self, file: &str, key: &str) -> u64 {
        self.read(file)
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
            .unwrap_or(0)
    }

    /// The process ids in the cgroup.
    pub fn pids(&self) -> Vec<u32> {
        self.read("cgroup.procs")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// How many processes the kernel's OOM killer killed in this cgroup.
    pub fn oom_kills(&self) -> u64 {
        match self.version {
            CgroupVersion::V1 => self.keyed("memory.oom_control", "oom_kill"),
            CgroupVersion::V2 => self.keyed("memory.events", "oom_kill"),
        }
    }

    /// How often usage hit the limit (v1 `memory.failcnt`, v2 `max` of memory.events).
    pub fn failcnt(&self) -> u64 {
        match self.version {
            CgroupVersion::V1 => self.read_u64("memory.failcnt"),
            CgroupVersion::V2 => self.keyed("memory.events", "max"),
        }
    }

    /// The cgroup's memory now, as the kubelet's Summary API computes it.
    pub fn snapshot(&self) -> MemorySnapshot {
        let (current, anon, file, active_file, inactive_file, kernel) = match self.version {
            CgroupVersion::V1 => (
                self.read_u64("memory.usage_in_bytes"),
                self.keyed("memory.stat", "total_rss"),
                self.keyed("memory.stat", "total_cache"),
                self.keyed("memory.stat", "total_active_file"),
                self.keyed("memory.stat", "total_inactive_file"),
                self.read_u64("memory.kmem.usage_in_bytes"),
            ),
            CgroupVersion::V2 => (
                self.read_u64("memory.current"),
                self.keyed("memory.stat", "anon"),
                self.keyed("memory.stat", "file"),
                self.keyed("memory.stat", "active_file"),
                self.keyed("memory.stat", "inactive_file"),
                self.keyed("memory.stat", "kernel"),
            ),
        };
        MemorySnapshot {
            current_bytes: current,
            limit_bytes: self.limit,
            oom_kill_count: self.oom_kills(),
            working_set_bytes: current.saturating_sub(inactive_file),
            anon_bytes: anon,
            file_bytes: file,
            active_file_bytes: active_file,
            inactive_file_bytes: inactive_file,
            kernel_bytes: kernel,
            max_events: self.failcnt(),
        }
    }

    /// `argv` run so that its process joins this cgroup before it executes (the shell writes
    /// its own pid to cgroup.procs, then `exec`s: the pid stays the same).
    pub fn wrap_argv(&self, argv: &[String]) -> Vec<String> {
        let procs = self.dir.join("cgroup.procs");
        let mut v = vec![
            "/bin/sh".to_string(),
            "-c".to_string(),
            format!("echo $$ > '{}' || exit 126; exec \"$@\"", procs.display()),
            "sh".to_string(),
        ];
        v.extend(argv.iter().cloned());
        v
    }

    /// The path a container's process sees for `path` when it is a cgroup file: the
    /// container's own cgroup is its `/sys/fs/cgroup/memory` (v1) or `/sys/fs/cgroup` (v2).
    pub fn container_view(&self, text: &str) -> String {
        let dir = self.dir.display().to_string();
        match self.version {
            CgroupVersion::V1 => text.replace("/sys/fs/cgroup/memory/", &format!("{dir}/")),
            CgroupVersion::V2 => text.replace("/sys/fs/cgroup/", &format!("{dir}/")),
        }
    }

    /// SIGKILL every process still in the cgroup (the runtime's kill of a stopped container).
    pub fn kill_all(&self) {
        for pid in self.pids() {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", &pid.to_string()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// Remove the cgroup once its processes are gone (waits up to `wait`).
    pub fn remove(&self, wait: std::time::Duration) {
        let deadline = std::time::Instant::now() + wait;
        loop {
            self.kill_all();
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            if std::time::Instant::now() >= deadline {
                tracing::warn!("lab engine: cgroup {} not removed", self.dir.display());
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory shaped like a cgroup v2 memory cgroup (this machine has only v1, so the v2
    /// path is checked against files written the way the kernel writes them: flat-keyed
    /// `memory.events` and `memory.stat`, one number in `memory.current`).
    #[test]
    fn a_v2_cgroup_is_created_and_read_as_the_kernel_writes_it() {
        let root = tempfile::tempdir().unwrap();
        let cg = MemoryCgroup::create_under(CgroupVersion::V2, root.path(), "pod-a", 667_611_136)
            .unwrap();
        assert_eq!(cg.dir, root.path().join("readygap/pod-a"));
        let read = |f: &str| std::fs::read_to_string(cg.dir.join(f)).unwrap();
        assert_eq!(read("memory.max"), "667611136");
        assert_eq!(read("memory.oom.group"), "1");
        assert_eq!(
            std::fs::read_to_string(root.path().join("readygap/cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        let write = |f: &str, t: &str| std::fs::write(cg.dir.join(f), t).unwrap();
        write("memory.current", "547553280\n");
        write(
            "memory.events",
            "low 0\nhigh 0\nmax 84\noom 1\noom_kill 1\noom_group_kill 0\n",
        );
        write(
            "memory.stat",
            "anon 500000000\nfile 40000000\nkernel 7000000\nactive_file 30000000\ninactive_file 10000000\n",
        );
        write("cgroup.procs", "4242\n4243\n");
        assert_eq!(cg.oom_kills(), 1);
        assert_eq!(cg.failcnt(), 84, "`max` of memory.events");
        assert_eq!(cg.pids(), [4242, 4243]);
        let m = cg.snapshot();
        assert_eq!(m.current_bytes, 547_553_280);
        assert_eq!(m.limit_bytes, 667_611_136);
        assert_eq!(m.working_set_bytes, 547_553_280 - 10_000_000);
        assert_eq!(
            (m.anon_bytes, m.file_bytes, m.kernel_bytes),
            (500_000_000, 40_000_000, 7_000_000)
        );
        assert_eq!(m.oom_kill_count, 1);
        assert_eq!(
            cg.container_view("cat /sys/fs/cgroup/memory.current"),
            format!("cat {}/memory.current", cg.dir.display())
        );
    }

    #[test]
    fn a_v1_cgroup_gets_its_limit_in_limit_in_bytes() {
        let root = tempfile::tempdir().unwrap();
        let cg =
            MemoryCgroup::create_under(CgroupVersion::V1, root.path(), "pod-b", 1 << 30).unwrap();
        assert_eq!(
            std::fs::read_to_string(cg.dir.join("memory.limit_in_bytes")).unwrap(),
            "1073741824"
        );
        assert!(
            !cg.dir.join("memory.oom.group").exists(),
            "v1 has no oom.group"
        );
    }
}
