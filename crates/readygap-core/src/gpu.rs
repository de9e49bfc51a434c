//! GPU memory of a pod, pure: what `nvidia-smi` prints when asked for the GPUs' memory
//! ([`parse_nvidia_smi`]), and per pod over time ([`GpuView`]). On a GPU the memory that
//! decides a recovery is VRAM, which Kubernetes neither schedules nor limits nor charges to
//! any cgroup: the Memory panel shows it beside the cgroup curve, and says which source it
//! came from, or why there is none (a missing source is a state, never a zero).
//!
//! `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits`
//! prints one line per GPU the container sees, `0, GPU-5b6c…, 3218, 81559`, memory in MiB
//! (NVIDIA's `nvidia-smi --help-query-gpu`: "memory.used … in MiB", `nounits` drops the
//! unit). A GPU whose figure the driver cannot read prints `[N/A]` there.

use crate::event::Timestamp;
use crate::series::Series;
use serde::{Deserialize, Serialize};

/// The arguments of the query readygap runs (in the container, through exec).
pub const NVIDIA_SMI_QUERY: [&str; 3] = [
    "nvidia-smi",
    "--query-gpu=index,uuid,memory.used,memory.total",
    "--format=csv,noheader,nounits",
];

const MIB: u64 = 1 << 20;

/// One GPU's memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuMemory {
    pub index: u32,
    pub uuid: String,
    /// Bytes in use.
    pub used: u64,
    /// Bytes on the GPU.
    pub total: u64,
}

/// The GPUs of one `nvidia-smi` query, or what is wrong with its output (the line and why).
pub fn parse_nvidia_smi(text: &str) -> Result<Vec<GpuMemory>, String> {
    let mut gpus = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |why: &str| format!("nvidia-smi line {}: {why}: {line:?}", n + 1);
        if f.len() != 4 {
            return Err(bad("not index, uuid, memory.used, memory.total"));
        }
        let mib = |s: &str, what: &str| {
            s.parse::<u64>()
                .map(|v| v * MIB)
                .map_err(|_| bad(&format!("{what} is {s}")))
        };
        gpus.push(GpuMemory {
            index: f[0].parse().map_err(|_| bad("no GPU index"))?,
            uuid: f[1].to_string(),
            used: mib(f[2], "memory.used")?,
            total: mib(f[3], "memory.total")?,
        });
    }
    if gpus.is_empty() {
        return Err("nvidia-smi printed no GPU".into());
    }
    Ok(gpus)
}

/// Used and total bytes of a pod's GPUs at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuPoint {
    pub used: u64,
    pub total: u64,
}

/// A pod's GPU memory over time, where it comes from, and why when it cannot be read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    /// The sum over the pod's GPUs.
    pub series: Series<GpuPoint>,
    /// The latest sample's GPUs.
    pub gpus: Vec<GpuMemory>,
    /// `nvidia-smi in the container`, ...
    pub source: Option<String>,
    /// Why there is no figure (no source, or the last one failed).
    pub unavailable: Option<String>,
}

impl GpuView {
    /// A sample at `ts` from `source`.
    pub fn sample(&mut self, ts: Timestamp, source: &str, gpus: &[GpuMemory]) {
        let used = gpus.iter().map(|g| g.used).sum();
        let total = gpus.iter().map(|g| g.total).sum();
        self.series.push(ts, GpuPoint { used, total });
        self.gpus = gpus.to_vec();
        self.source = Some(source.to_string());
        self.unavailable = None;
    }

    /// No figure from now on, and why: the line breaks here (a gap, not a zero).
    pub fn unavailable(&mut self, ts: Timestamp, why: &str) {
        self.series.gap(ts);
        self.unavailable = Some(why.to_string());
    }

    /// The latest figures, unless the source is unavailable now.
    pub fn latest(&self) -> Option<GpuPoint> {
        self.unavailable
            .is_none()
            .then(|| self.series.last_value().copied())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `nvidia-smi` 550 prints the query on an H100 node with two GPUs.
    const TWO_GPUS: &str = "0, GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b, 3218, 81559\n\
                            1, GPU-9c8d7e6f-5a4b-3c2d-1e0f-a9b8c7d6e5f4, 0, 81559\n";

    #[test]
    fn the_query_reads_each_gpus_memory_in_mib() {
        let g = parse_nvidia_smi(TWO_GPUS).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].index, 0);
        assert!(g[0].uuid.starts_with("GPU-5b6c"));
        assert_eq!((g[0].used, g[0].total), (3218 * MIB, 81559 * MIB));
        assert_eq!(g[1].used, 0);
    }

    #[test]
    fn malformed_and_partial_output_says_which_line_and_why() {
        let e = parse_nvidia_smi("0, GPU-x, [N/A], 81559\n").unwrap_err();
        assert!(
            e.contains("line 1") && e.contains("memory.used is [N/A]"),
            "{e}"
        );
        let e = parse_nvidia_smi("0, GPU-x, 3218\n").unwrap_err();
        assert!(e.contains("not index, uuid"), "{e}");
        let e = parse_nvidia_smi(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        )
        .unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        assert!(parse_nvidia_smi("\n").is_err());
    }

    #[test]
    fn a_source_that_fails_is_a_gap_and_a_reason_never_a_zero() {
        let at = |s: i64| chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let mut v = GpuView::default();
        v.sample(at(0), "nvidia-smi", &parse_nvidia_smi(TWO_GPUS).unwrap());
        assert_eq!(
            v.latest(),
            Some(GpuPoint {
                used: 3218 * MIB,
                total: 2 * 81559 * MIB
            })
        );
        v.unavailable(at(1), "nvidia-smi: not found in the container");
        assert_eq!(v.latest(), None);
        assert_eq!(
            v.unavailable.as_deref(),
            Some("nvidia-smi: not found in the container")
        );
    }
}
