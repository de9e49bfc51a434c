//! Which Ollama the lab's runtime imitates: the behaviours that changed between releases, each
//! with the upstream change it comes from (ollama/ollama, read at its tags).
//!
//! - Thinking by default from **0.12.4**: `server/routes.go` GenerateHandler/ChatHandler set
//!   `req.Think` to true when absent for a model with the thinking capability (commit
//!   90d429f5a "thinking: turn on thinking mode for all reasoning models", first tagged
//!   v0.12.4). Before, a thinking model only thought when asked.
//! - cgroup memory from **0.13.0**: `discover/cpu_linux.go` getCPUMemByCgroups reads
//!   `/sys/fs/cgroup/memory.max` and `memory.current` (commit 4aba2e8b7 "discover: Support
//!   cgroups cores and memory limitations", first tagged v0.13.0), so FreeMemory is
//!   memory.max − memory.current. With another model loaded `server/sched.go` loads with
//!   requireFull, `llm/server.go` answers ErrLoadRequiredFull when the model does not fit
//!   and the scheduler unloads a runner (findRunnerToUnload: idle ones first) to make room;
//!   with nothing loaded the load fails with "model requires more system memory (X) than is
//!   available (Y)", HTTP 500 (routes.go handleScheduleError). Before 0.13, and on cgroup v1
//!   (no `/sys/fs/cgroup/memory.max`), FreeMemory is the host's `/proc/meminfo`, the load
//!   goes ahead and the kernel kills the container at its limit.

use std::fmt;

/// An Ollama release number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OllamaVersion(pub u32, pub u32, pub u32);

/// The version the lab claims by default (the published lab ran 0.12.x).
pub const DEFAULT: &str = "0.12.6";

impl OllamaVersion {
    /// `0.13.0`, `v0.13.1`, `0.13` (patch 0), `0.13.0-rc0` (the pre-release is ignored).
    pub fn parse(text: &str) -> Result<Self, String> {
        let err = || format!("invalid Ollama version {text:?} (expected like 0.13.0)");
        let t = text.trim().trim_start_matches('v');
        let core = t.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(err());
        }
        let n = |i: usize| -> Result<u32, String> {
            parts.get(i).map_or(Ok(0), |p| p.parse().map_err(|_| err()))
        };
        Ok(Self(n(0)?, n(1)?, n(2)?))
    }

    /// Models that can think do so when the request does not say (≥ 0.12.4).
    pub fn thinks_by_default(self) -> bool {
        self >= OllamaVersion(0, 12, 4)
    }

    /// Free memory is read from cgroup v2 files, so a load that does not fit evicts or is
    /// refused instead of being OOM-killed (≥ 0.13.0).
    pub fn reads_cgroup_memory(self) -> bool {
        self >= OllamaVersion(0, 13, 0)
    }
}

impl fmt::Display for OllamaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Check a user-given version; returns it as given (trimmed) for `/api/version`.
pub fn check(text: &str) -> Result<String, String> {
    OllamaVersion::parse(text)?;
    Ok(text.trim().trim_start_matches('v').to_string())
}

/// Ollama's `format.HumanBytes2` (format/bytes.go): binary units, one decimal.
pub fn human_bytes2(b: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = KIB * 1024;
    const GIB: u64 = MIB * 1024;
    match b {
        b if b >= GIB => format!("{:.1} GiB", b as f64 / GIB as f64),
        b if b >= MIB => format!("{:.1} MiB", b as f64 / MIB as f64),
        b if b >= KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(OllamaVersion::parse("0.13.0"), Ok(OllamaVersion(0, 13, 0)));
        assert_eq!(OllamaVersion::parse("v0.12.6"), Ok(OllamaVersion(0, 12, 6)));
        assert_eq!(OllamaVersion::parse("0.13"), Ok(OllamaVersion(0, 13, 0)));
        assert_eq!(
            OllamaVersion::parse("0.13.0-rc0"),
            Ok(OllamaVersion(0, 13, 0))
        );
        assert!(OllamaVersion::parse("latest").is_err());
        assert!(OllamaVersion::parse("1.2.3.4").is_err());
        assert!(!OllamaVersion(0, 12, 3).thinks_by_default());
        assert!(OllamaVersion(0, 12, 4).thinks_by_default());
        assert!(!OllamaVersion(0, 12, 11).reads_cgroup_memory());
        assert!(OllamaVersion(0, 13, 0).reads_cgroup_memory());
        assert_eq!(human_bytes2(2_925_813_350), "2.7 GiB");
        assert_eq!(human_bytes2(1536), "1.5 KiB");
        assert_eq!(human_bytes2(12), "12 B");
    }
}
