//! A lab container that is not the Ollama runtime (a `busybox` debug pod, a sidecar): it
//! runs only `exec` commands, and sees its node: `/proc/meminfo` and `/proc/stat` are the
//! node's (as in a real container without lxcfs), and when the pod mounts the host's `/proc`
//! (a `hostPath` volume of `/proc`, as the node-access debug pod does) the node's files are
//! there too, with `sys/vm/drop_caches` writable by a privileged container. Writing 1, 2 or 3
//! to it drops the node's page cache exactly as the admin endpoint
//! `POST /lab/nodes/NODE/drop-caches` does, so the next model load on that node is cold.
//!
//! `/proc/stat` counters advance with wall-clock time (8 CPUs, USER_HZ 100, about 12 % busy);
//! they are plausible, not a model of the node's load.

use super::NodeCache;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// CPUs of a lab node (its capacity says `cpu: 8`).
const NODE_CPUS: u64 = 8;
/// The node was up this long when the lab started (so counters look like a real node's).
const UPTIME_AT_START_SECS: u64 = 3 * 86_400;
/// Clock ticks per second (USER_HZ).
const HZ: u64 = 100;

/// Anon memory of the node's other containers, in bytes (called on every read).
pub type NodeAnonBytes = Arc<dyn Fn() -> u64 + Send + Sync>;
/// Called with `Cached:` kB before and after each drop through `drop_caches`.
pub type OnDrop = Arc<dyn Fn(u64, u64) + Send + Sync>;

/// Everything a plain container needs.
#[derive(Clone)]
pub struct PlainSpec {
    pub pod_name: String,
    pub node_name: String,
    pub node_cache: Arc<NodeCache>,
    /// Where the host's `/proc` is mounted (`hostPath: /proc`), if it is.
    pub host_proc: Option<String>,
    /// `securityContext.privileged` of the container.
    pub privileged: bool,
    pub node_anon_bytes: NodeAnonBytes,
    pub on_drop: OnDrop,
    /// The pod's network (Service names, its own loopback), for `curl`.
    pub network: super::network::PodNetwork,
}

/// A running plain container.
pub struct PlainContainer {
    pub(crate) spec: PlainSpec,
    started: Instant,
    /// Cancelled when the container stops.
    pub(crate) shutdown: CancellationToken,
    /// Exec commands still running.
    pub(crate) running_execs: Arc<AtomicUsize>,
    /// Exec commands started (counted by `exec::PlainContainer::exec`).
    pub(crate) execs_started: AtomicU64,
}

impl PlainContainer {
    /// A container started now.
    pub fn start(spec: PlainSpec) -> Arc<Self> {
        Arc::new(Self {
            spec,
            started: Instant::now(),
            shutdown: CancellationToken::new(),
            running_execs: Arc::new(AtomicUsize::new(0)),
            execs_started: AtomicU64::new(0),
        })
    }

    /// Stop the container: running commands end with 137.
    pub fn stop(&self) {
        self.shutdown.cancel();
    }

    /// How many exec commands were started in this container.
    pub fn execs_started(&self) -> u64 {
        self.execs_started.load(Ordering::SeqCst)
    }

    /// How many exec commands are still running.
    pub fn running_execs(&self) -> usize {
        self.running_execs.load(Ordering::SeqCst)
    }

    /// `path` under the host's `/proc` mount, if it is one (`/host/proc/meminfo` → `meminfo`).
    fn host_proc_rel<'a>(&self, path: &'a str) -> Option<&'a str> {
        let mount = self.spec.host_proc.as_deref()?.trim_end_matches('/');
        path.strip_prefix(mount)?.strip_prefix('/')
    }

    /// The file under `/proc` that `path` names (the container's own `/proc` or the host's).
    fn proc_rel<'a>(&self, path: &'a str) -> Option<&'a str> {
        path.strip_prefix("/proc/")
            .or_else(|| self.host_proc_rel(path))
    }

    /// The content of `path`, if it exists.
    pub(crate) fn read(&self, path: &str) -> Option<String> {
        if path == "/etc/hostname" {
            return Some(format!("{}\n", self.spec.pod_name));
        }
        match self.proc_rel(path)? {
            "meminfo" => Some(super::files::node_meminfo(
                &self.spec.node_cache,
                (self.spec.node_anon_bytes)(),
            )),
            "stat" => Some(self.stat()),
            "sys/vm/drop_caches" => Some("0\n".into()),
            _ => None,
        }
    }

    /// Whether `path` names a directory.
    pub(crate) fn is_dir(&self, path: &str) -> bool {
        let path = path.trim_end_matches('/');
        if matches!(path, "" | "/proc" | "/etc" | "/proc/sys" | "/proc/sys/vm") {
            return true;
        }
        let Some(mount) = self
            .spec
            .host_proc
            .as_deref()
            .map(|m| m.trim_end_matches('/'))
        else {
            return false;
        };
        let parent = mount.rsplit_once('/').map_or("", |(p, _)| p);
        path == mount
            || path == parent
            || self
                .host_proc_rel(path)
                .is_some_and(|rel| matches!(rel, "sys" | "sys/vm"))
    }

    /// Open `path` for writing: `Err` says why it cannot be (as `sh` reports it).
    pub(crate) fn check_write(&self, path: &str) -> Result<(), &'static str> {
        match self.proc_rel(path) {
            Some("sys/vm/drop_caches") if self.spec.privileged => Ok(()),
            // Without CAP_SYS_ADMIN: the host's /proc refuses, the container's own
            // /proc/sys is mounted read-only.
            Some("sys/vm/drop_caches") if self.host_proc_rel(path).is_some() => {
                Err("Permission denied")
            }
            Some(_) if self.proc_rel(path).is_some() && self.read(path).is_none() => {
                Err("Directory nonexistent")
            }
            _ => Err("Read-only file system"),
        }
    }

    /// Write `bytes` to `path` (after [`Self::check_write`] allowed it).
    pub(crate) fn write(&self, path: &str, bytes: &[u8]) -> Result<(), &'static str> {
        self.check_write(path)?;
        match String::from_utf8_lossy(bytes).trim() {
            "1" | "2" | "3" => {
                let (before, after) = self.spec.node_cache.drop_caches();
                (self.spec.on_drop)(before, after);
                Ok(())
            }
            _ => Err("Invalid argument"),
        }
    }

    /// `/proc/stat` of the node now.
    fn stat(&self) -> String {
        let elapsed_ticks =
            (UPTIME_AT_START_SECS * 1000 + self.started.elapsed().as_millis() as u64) * HZ / 1000;
        let per_cpu = |i: u64| {
            // About 8 % user, 3 % system, 1 % iowait, the rest idle; a little different per CPU.
            let t = elapsed_ticks;
            let user = t * (80 + i) / 1000;
            let system = t * 30 / 1000;
            let iowait = t / 100;
            let irq = t / 1000;
            let softirq = t / 500;
            let idle = t - user - system - iowait - irq - softirq;
            [user, 0, system, idle, iowait, irq, softirq, 0, 0, 0]
        };
        let mut total = [0u64; 10];
        let mut lines = Vec::new();
        for i in 0..NODE_CPUS {
            let c = per_cpu(i);
            for (sum, v) in total.iter_mut().zip(c) {
                *sum += v;
            }
            lines.push(format!("cpu{i} {}", join(&c)));
        }
        let boot = chrono::Utc::now().timestamp() as u64 - elapsed_ticks / HZ;
        let mut out = format!("cpu  {}\n", join(&total));
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out.push_str(&format!(
            "intr {}\nctxt {}\nbtime {boot}\nprocesses {}\nprocs_running 1\nprocs_blocked 0\n",
            elapsed_ticks * 40,
            elapsed_ticks * 90,
            elapsed_ticks / 50
        ));
        out
    }
}

fn join(values: &[u64]) -> String {
    values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn container(privileged: bool, drops: Arc<Mutex<Vec<(u64, u64)>>>) -> Arc<PlainContainer> {
        PlainContainer::start(PlainSpec {
            pod_name: "readygap-node-n1".into(),
            node_name: "n1".into(),
            node_cache: Arc::new(NodeCache::new(false)),
            host_proc: Some("/host/proc".into()),
            privileged,
            node_anon_bytes: Arc::new(|| 1 << 30),
            on_drop: Arc::new(move |b, a| drops.lock().expect("lock").push((b, a))),
            network: Default::default(),
        })
    }

    #[test]
    fn host_proc_files_are_the_nodes() {
        let c = container(true, Arc::default());
        let meminfo = c.read("/host/proc/meminfo").expect("meminfo");
        assert!(meminfo.starts_with("MemTotal:"), "{meminfo}");
        assert_eq!(c.read("/proc/meminfo"), Some(meminfo));
        let stat = c.read("/host/proc/stat").expect("stat");
        let first = stat.lines().next().expect("line");
        assert!(first.starts_with("cpu  "), "{first}");
        assert_eq!(first.split_whitespace().count(), 11);
        assert!(c.read("/host/proc/nope").is_none());
        assert!(c.read("/host/procmeminfo").is_none());
        assert!(c.is_dir("/host/proc") && c.is_dir("/host") && c.is_dir("/host/proc/sys/vm"));
        assert!(!c.is_dir("/host/proc/meminfo"));
    }

    #[test]
    fn stat_counters_advance() {
        let c = container(true, Arc::default());
        let total = |s: String| -> u64 {
            s.lines()
                .next()
                .expect("cpu line")
                .split_whitespace()
                .skip(1)
                .map(|v| v.parse::<u64>().expect("number"))
                .sum()
        };
        let a = total(c.read("/host/proc/stat").expect("stat"));
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let b = total(c.read("/host/proc/stat").expect("stat"));
            if b > a {
                break;
            }
            assert!(Instant::now() < deadline, "counters did not advance");
            std::thread::yield_now();
        }
    }

    #[test]
    fn drop_caches_is_writable_only_when_privileged() {
        let drops = Arc::new(Mutex::new(Vec::new()));
        let c = container(true, drops.clone());
        assert_eq!(c.check_write("/host/proc/sys/vm/drop_caches"), Ok(()));
        assert_eq!(c.write("/host/proc/sys/vm/drop_caches", b"3\n"), Ok(()));
        let (before, after) = drops.lock().expect("lock")[0];
        assert!(before > after, "{before} → {after}");
        assert_eq!(c.spec.node_cache.drops(), 1);
        assert_eq!(
            c.write("/host/proc/sys/vm/drop_caches", b"7\n"),
            Err("Invalid argument")
        );
        assert_eq!(c.check_write("/etc/x"), Err("Read-only file system"));
        let plain = container(false, Arc::default());
        assert_eq!(
            plain.check_write("/host/proc/sys/vm/drop_caches"),
            Err("Permission denied")
        );
        assert_eq!(
            plain.write("/host/proc/sys/vm/drop_caches", b"3"),
            Err("Permission denied")
        );
        assert_eq!(plain.spec.node_cache.drops(), 0);
    }
}
