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
//!
//! The DCGM exporter ([`parse_dcgm`]) serves the Prometheus text format: `DCGM_FI_DEV_FB_USED`,
//! `DCGM_FI_DEV_FB_FREE` (and `DCGM_FI_DEV_FB_RESERVED` where counted), in MiB ("Framebuffer
//! memory used (in MiB)", its `default-counters.csv`), one series per GPU labelled `gpu`,
//! `UUID`, and, with its Kubernetes pod mapping, the `pod`, `namespace` and `container` that
//! hold it (NVIDIA/dcgm-exporter `internal/pkg/transformation/const.go`: `podAttribute =
//! "pod"`; `pod_name`, `pod_namespace`, `container_name` with `--use-old-namespace`).
//!
//! Sources, in order of preference: the DCGM exporter (the node's own counters, no exec),
//! `nvidia-smi` in the container, the runtime's own figure (Ollama's `size_vram`: the
//! model's part only, no total). vLLM's and llama.cpp's `/metrics` carry no VRAM figure
//! (vLLM's `gpu_cache_usage_perc` is the share of its KV cache in use), so they are not one.

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

/// The GPUs the DCGM exporter's `text` (its `/metrics`) gives for pod `pod` of `namespace`,
/// and how many pods it labels at all (for the reason when `pod` has none). A malformed
/// memory series names its line.
pub fn parse_dcgm(text: &str, namespace: &str, pod: &str) -> Result<DcgmScrape, String> {
    // (gpu index, UUID) → used, free, reserved MiB.
    let mut by_gpu: std::collections::BTreeMap<(u32, String), [Option<f64>; 3]> =
        Default::default();
    let mut pods = std::collections::BTreeSet::new();
    let mut memory_series = 0;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let which = match line.split(['{', ' ']).next() {
            Some("DCGM_FI_DEV_FB_USED") => 0,
            Some("DCGM_FI_DEV_FB_FREE") => 1,
            Some("DCGM_FI_DEV_FB_RESERVED") => 2,
            _ => continue,
        };
        memory_series += 1;
        let bad = |why: &str| format!("DCGM exporter line {}: {why}: {line:?}", n + 1);
        let (labels, value) = match (line.find('{'), line.rfind('}')) {
            (Some(a), Some(b)) if a < b => (
                parse_labels(&line[a + 1..b]).map_err(|e| bad(&e))?,
                &line[b + 1..],
            ),
            (None, None) => (Vec::new(), line.split_once(' ').map_or("", |(_, v)| v)),
            _ => return Err(bad("unbalanced braces")),
        };
        let label = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let value: f64 = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad("no value"))?;
        let (p, ns) = (
            label("pod").or(label("pod_name")).unwrap_or(""),
            label("namespace").or(label("pod_namespace")).unwrap_or(""),
        );
        if !p.is_empty() {
            pods.insert((ns.to_string(), p.to_string()));
        }
        if p != pod || ns != namespace {
            continue;
        }
        let index = label("gpu")
            .and_then(|g| g.parse().ok())
            .ok_or_else(|| bad("no gpu index"))?;
        let uuid = label("UUID").unwrap_or("").to_string();
        by_gpu.entry((index, uuid)).or_default()[which] = Some(value);
    }
    if memory_series == 0 {
        return Err(
            "the DCGM exporter serves no DCGM_FI_DEV_FB_USED/FREE (not in its counters)".into(),
        );
    }
    let mut gpus = Vec::new();
    for ((index, uuid), [used, free, reserved]) in by_gpu {
        let (Some(used), Some(free)) = (used, free) else {
            return Err(format!(
                "the DCGM exporter gives GPU {index} of {pod} without both DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE"
            ));
        };
        let mib = |v: f64| (v.max(0.0) * MIB as f64) as u64;
        gpus.push(GpuMemory {
            index,
            uuid,
            used: mib(used),
            total: mib(used + free + reserved.unwrap_or(0.0)),
        });
    }
    Ok(DcgmScrape {
        gpus,
        pods: pods.len(),
    })
}

/// What one scrape of the DCGM exporter gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcgmScrape {
    /// The pod's GPUs (empty: the exporter labels none with the pod).
    pub gpus: Vec<GpuMemory>,
    /// How many pods the exporter labels (none: its pod mapping is off).
    pub pods: usize,
}

/// `a="x",b="y\"z"` (the text format's label set: `\\`, `\"` and `\n` escaped).
fn parse_labels(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = s.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=').ok_or("a label without =")?;
        let after = after
            .strip_prefix('"')
            .ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("an escape at the end".into()),
                },
                Some((_, c)) => value.push(c),
                None => return Err("an unterminated label value".into()),
            }
        };
        out.push((name.trim().to_string(), value));
        rest = after[end + 1..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
    }
    Ok(out)
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
    /// Why the sources preferred to it are not used (`DCGM exporter: not configured`).
    #[serde(default)]
    pub passed_over: Vec<String>,
    /// Why there is no figure (no source, or the last one failed).
    pub unavailable: Option<String>,
    /// The runtime's own figure (Ollama's `size_vram`: its models' part, no total), shown
    /// when no GPU source can be read.
    #[serde(default)]
    pub runtime: Option<u64>,
}

impl GpuView {
    /// A sample at `ts` from `source`.
    pub fn sample(
        &mut self,
        ts: Timestamp,
        source: &str,
        passed_over: &[String],
        gpus: &[GpuMemory],
    ) {
        let used = gpus.iter().map(|g| g.used).sum();
        let total = gpus.iter().map(|g| g.total).sum();
        self.series.push(ts, GpuPoint { used, total });
        self.gpus = gpus.to_vec();
        self.source = Some(source.to_string());
        self.passed_over = passed_over.to_vec();
        self.unavailable = None;
    }

    /// What the runtime says its models hold in VRAM (Ollama's `size_vram`), kept for when
    /// no GPU source can be read; none when it says nothing is there.
    pub fn runtime_figure(&mut self, models: &[crate::event::ResidentModel]) {
        self.runtime = Some(models.iter().map(|m| m.size_vram).sum()).filter(|v| *v > 0);
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
        v.sample(
            at(0),
            "nvidia-smi",
            &[],
            &parse_nvidia_smi(TWO_GPUS).unwrap(),
        );
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

    /// As dcgm-exporter 4.x serves `/metrics` with its Kubernetes pod mapping on (the
    /// labels of `internal/pkg/transformation`, the HELP texts of `default-counters.csv`):
    /// GPU 0 held by a vLLM pod, GPU 1 by no pod.
    const DCGM: &str = r#"# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",container="vllm",namespace="llm",pod="vllm-7d9f8-abcde"} 1980
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",container="vllm",namespace="llm",pod="vllm-7d9f8-abcde"} 7803
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-9c8d7e6f-5a4b-3c2d-1e0f-a9b8c7d6e5f4",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1"} 81004
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",container="vllm",namespace="llm",pod="vllm-7d9f8-abcde"} 73201
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-9c8d7e6f-5a4b-3c2d-1e0f-a9b8c7d6e5f4",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1"} 0
# HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-1",container="vllm",namespace="llm",pod="vllm-7d9f8-abcde"} 555
"#;

    #[test]
    fn the_dcgm_exporter_gives_the_pods_gpus_used_and_total_in_mib() {
        let s = parse_dcgm(DCGM, "llm", "vllm-7d9f8-abcde").unwrap();
        assert_eq!(s.pods, 1);
        assert_eq!(s.gpus.len(), 1, "{s:?}");
        let g = &s.gpus[0];
        assert_eq!(g.index, 0);
        assert!(g.uuid.starts_with("GPU-5b6c"));
        assert_eq!(g.used, 73201 * MIB);
        assert_eq!(
            g.total,
            (73201 + 7803 + 555) * MIB,
            "used + free + reserved"
        );
        // Another pod, or the same name in another namespace: none, and the exporter's
        // pod count says the mapping is on.
        let other = parse_dcgm(DCGM, "default", "vllm-7d9f8-abcde").unwrap();
        assert!(other.gpus.is_empty());
        assert_eq!(other.pods, 1);
        // The old label names (`--use-old-namespace`).
        let old = DCGM
            .replace("namespace=", "pod_namespace=")
            .replace(",pod=", ",pod_name=");
        assert_eq!(
            parse_dcgm(&old, "llm", "vllm-7d9f8-abcde")
                .unwrap()
                .gpus
                .len(),
            1
        );
    }

    #[test]
    fn a_dcgm_exporter_without_memory_or_with_a_broken_line_says_which_and_why() {
        let e = parse_dcgm(
            "# HELP x\nDCGM_FI_DEV_SM_CLOCK{gpu=\"0\"} 1980\n",
            "llm",
            "p",
        )
        .unwrap_err();
        assert!(e.contains("no DCGM_FI_DEV_FB_USED"), "{e}");
        let e = parse_dcgm(
            "DCGM_FI_DEV_FB_USED{gpu=\"0\",pod=\"p\",namespace=\"llm\"}\n",
            "llm",
            "p",
        )
        .unwrap_err();
        assert!(e.contains("line 1") && e.contains("no value"), "{e}");
        let e = parse_dcgm("DCGM_FI_DEV_FB_USED{gpu=\"0,pod=\"p\"} 5\n", "llm", "p").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = parse_dcgm(
            "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-x\",pod=\"p\",namespace=\"llm\"} 5\n",
            "llm",
            "p",
        )
        .unwrap_err();
        assert!(e.contains("without both"), "{e}");
        // Escaped quotes in another label do not end the value early.
        let t = "DCGM_FI_DEV_FB_USED{gpu=\"0\",modelName=\"a \\\"b\\\"\",pod=\"p\",namespace=\"llm\"} 5\n\
                 DCGM_FI_DEV_FB_FREE{gpu=\"0\",modelName=\"a \\\"b\\\"\",pod=\"p\",namespace=\"llm\"} 7\n";
        assert_eq!(parse_dcgm(t, "llm", "p").unwrap().gpus[0].total, 12 * MIB);
        // Without the pod mapping no series has a pod.
        let s = parse_dcgm(
            &DCGM.replace(
                ",container=\"vllm\",namespace=\"llm\",pod=\"vllm-7d9f8-abcde\"",
                "",
            ),
            "llm",
            "vllm-7d9f8-abcde",
        )
        .unwrap();
        assert_eq!((s.gpus.len(), s.pods), (0, 0));
    }
}
