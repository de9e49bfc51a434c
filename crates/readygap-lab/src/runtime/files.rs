//! The files a container exposes about its memory, rendered from the runtime's state: cgroup
//! v2 (`/sys/fs/cgroup/memory.*`) or v1 (`/sys/fs/cgroup/memory/memory.*`) depending on the
//! profile, and the node's `/proc/meminfo` (its `Cached:` from the node's page cache).
//! Numbers agree with each other: usage = anon + file + kernel, working set = usage −
//! inactive_file, v1 `rss`/`cache` are the v2 `anon`/`file`.

use super::{Breakdown, NodeCache, Runtime};

/// The content of `path` inside the container, if it exists.
pub(crate) fn read(rt: &Runtime, path: &str) -> Option<String> {
    let b = rt.breakdown();
    let v1 = rt.spec.profile.cgroup_v1;
    match path {
        "/proc/meminfo" => Some(node_meminfo(&rt.spec.node_cache, b.anon)),
        "/etc/hostname" => Some(format!("{}\n", rt.spec.pod_name)),
        "/proc/self/cgroup" | "/proc/1/cgroup" => Some(if v1 {
            format!(
                "12:memory:/kubepods/burstable/pod{}/{}\n0::/\n",
                rt.spec.pod_uid, rt.spec.pod_name
            )
        } else {
            "0::/\n".to_string()
        }),
        _ if v1 => cgroup_v1(path, &b),
        _ => cgroup_v2(path, &b),
    }
}

/// Whether `path` names a directory of the container's file system.
pub(crate) fn is_dir(rt: &Runtime, path: &str) -> bool {
    let path = path.trim_end_matches('/');
    matches!(
        path,
        "" | "/proc" | "/sys" | "/sys/fs" | "/sys/fs/cgroup" | "/etc"
    ) || (rt.spec.profile.cgroup_v1 && path == "/sys/fs/cgroup/memory")
}

fn limit_v2(limit: u64) -> String {
    if limit == 0 {
        "max".to_string()
    } else {
        limit.to_string()
    }
}

fn cgroup_v2(path: &str, b: &Breakdown) -> Option<String> {
    let name = path.strip_prefix("/sys/fs/cgroup/")?;
    let text = match name {
        "memory.current" => format!("{}\n", b.current()),
        "memory.max" => format!("{}\n", limit_v2(b.limit)),
        "memory.high" => "max\n".to_string(),
        "memory.low" | "memory.min" | "memory.swap.current" => "0\n".to_string(),
        "memory.swap.max" => "max\n".to_string(),
        "memory.oom.group" => "1\n".to_string(),
        "memory.events" => format!(
            "low 0\nhigh 0\nmax {}\noom {}\noom_kill {}\noom_group_kill {}\n",
            b.max_events, b.oom_kills, b.oom_kills, b.oom_kills
        ),
        "memory.stat" => stat_v2(b),
        "cgroup.controllers" => "cpuset cpu io memory hugetlb pids rdma misc\n".to_string(),
        _ => return None,
    };
    Some(text)
}

/// `kernel` split into kernel stacks, page tables and (reclaimable, unreclaimable) slab.
fn split_kernel(b: &Breakdown) -> (u64, u64, u64, u64) {
    let kernel_stack = 147_456;
    let pagetables = 262_144;
    let slab = b.kernel.saturating_sub(kernel_stack + pagetables);
    let slab_reclaimable = slab / 3;
    (
        kernel_stack,
        pagetables,
        slab_reclaimable,
        slab - slab_reclaimable,
    )
}

fn stat_v2(b: &Breakdown) -> String {
    let (kernel_stack, pagetables, slab_r, slab_u) = split_kernel(b);
    let lines: Vec<(&str, u64)> = vec![
        ("anon", b.anon),
        ("file", b.file()),
        ("kernel", b.kernel),
        ("kernel_stack", kernel_stack),
        ("pagetables", pagetables),
        ("sec_pagetables", 0),
        ("percpu", 0),
        ("sock", 0),
        ("vmalloc", 0),
        ("shmem", 0),
        ("zswap", 0),
        ("zswapped", 0),
        ("file_mapped", b.active_file),
        ("file_dirty", 0),
        ("file_writeback", 0),
        ("swapcached", 0),
        ("anon_thp", 0),
        ("file_thp", 0),
        ("shmem_thp", 0),
        ("inactive_anon", 0),
        ("active_anon", b.anon),
        ("inactive_file", b.inactive_file),
        ("active_file", b.active_file),
        ("unevictable", 0),
        ("slab_reclaimable", slab_r),
        ("slab_unreclaimable", slab_u),
        ("slab", slab_r + slab_u),
        ("workingset_refault_anon", 0),
        ("workingset_refault_file", 0),
        ("workingset_activate_anon", 0),
        ("workingset_activate_file", 0),
        ("workingset_restore_anon", 0),
        ("workingset_restore_file", 0),
        ("workingset_nodereclaim", 0),
        ("pgscan", 0),
        ("pgsteal", 0),
        ("pgfault", b.anon / 4096 + 1_000),
        ("pgmajfault", b.inactive_file / 4096 / 32),
        ("thp_fault_alloc", 0),
        ("thp_collapse_alloc", 0),
    ];
    lines.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

/// What cgroup v1 prints for "no limit".
const V1_UNLIMITED: u64 = 9_223_372_036_854_771_712;

fn cgroup_v1(path: &str, b: &Breakdown) -> Option<String> {
    let name = path.strip_prefix("/sys/fs/cgroup/memory/")?;
    let limit = if b.limit == 0 { V1_UNLIMITED } else { b.limit };
    let text = match name {
        "memory.usage_in_bytes" => format!("{}\n", b.current()),
        "memory.limit_in_bytes" => format!("{limit}\n"),
        "memory.max_usage_in_bytes" => format!("{}\n", b.current()),
        "memory.failcnt" => format!("{}\n", b.max_events),
        "memory.oom_control" => format!(
            "oom_kill_disable 0\nunder_oom 0\noom_kill {}\n",
            b.oom_kills
        ),
        "memory.stat" => stat_v1(b, limit),
        _ => return None,
    };
    Some(text)
}

fn stat_v1(b: &Breakdown, limit: u64) -> String {
    let cache = b.file();
    let rss = b.anon;
    let mapped = b.active_file;
    let local: Vec<(&str, u64)> = vec![
        ("cache", cache),
        ("rss", rss),
        ("rss_huge", 0),
        ("shmem", 0),
        ("mapped_file", mapped),
        ("dirty", 0),
        ("writeback", 0),
        ("pgpgin", (rss + cache) / 4096 + 500),
        ("pgpgout", 500),
        ("pgfault", rss / 4096 + 1_000),
        ("pgmajfault", b.inactive_file / 4096 / 32),
        ("inactive_anon", 0),
        ("active_anon", rss),
        ("inactive_file", b.inactive_file),
        ("active_file", b.active_file),
        ("unevictable", 0),
        ("hierarchical_memory_limit", limit),
    ];
    let mut out: String = local.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    for (k, v) in &local {
        if *k == "hierarchical_memory_limit" {
            continue;
        }
        out.push_str(&format!("total_{k} {v}\n"));
    }
    out
}

/// Memory of the rest of the node (system daemons, other pods), in kB.
const NODE_OTHER_USED_KB: u64 = 1_874_212;

/// The node's `/proc/meminfo`: `Cached:` from its page cache, anon memory from the rest of the
/// node plus `anon_bytes` (the containers it runs).
pub(crate) fn node_meminfo(cache: &NodeCache, anon_bytes: u64) -> String {
    let total = cache.mem_total_kb();
    let cached = cache.cached_kb();
    let buffers = 91_324;
    let anon = NODE_OTHER_USED_KB + anon_bytes / 1024;
    let slab = 312_488;
    let used = anon + cached + buffers + slab;
    let free = total.saturating_sub(used);
    let available = free + cached + buffers + slab / 2;
    let active_file = cached / 3;
    let lines: Vec<(&str, u64)> = vec![
        ("MemTotal", total),
        ("MemFree", free),
        ("MemAvailable", available),
        ("Buffers", buffers),
        ("Cached", cached),
        ("SwapCached", 0),
        ("Active", anon + active_file),
        ("Inactive", cached - active_file + buffers),
        ("Active(anon)", anon),
        ("Inactive(anon)", 0),
        ("Active(file)", active_file),
        ("Inactive(file)", cached - active_file + buffers),
        ("Unevictable", 0),
        ("Mlocked", 0),
        ("SwapTotal", 0),
        ("SwapFree", 0),
        ("Zswap", 0),
        ("Zswapped", 0),
        ("Dirty", 148),
        ("Writeback", 0),
        ("AnonPages", anon),
        ("Mapped", 412_380),
        ("Shmem", 4_772),
        ("KReclaimable", slab / 2),
        ("Slab", slab),
        ("SReclaimable", slab / 2),
        ("SUnreclaim", slab - slab / 2),
        ("KernelStack", 11_264),
        ("PageTables", 18_620),
        ("SecPageTables", 0),
        ("NFS_Unstable", 0),
        ("Bounce", 0),
        ("WritebackTmp", 0),
        ("CommitLimit", total / 2),
        ("Committed_AS", anon + 2_000_000),
        ("VmallocTotal", 34_359_738_367),
        ("VmallocUsed", 62_480),
        ("VmallocChunk", 0),
        ("Percpu", 9_856),
        ("HardwareCorrupted", 0),
        ("AnonHugePages", 0),
        ("ShmemHugePages", 0),
        ("ShmemPmdMapped", 0),
        ("FileHugePages", 0),
        ("FilePmdMapped", 0),
    ];
    let mut out: String = lines
        .iter()
        .map(|(k, v)| format!("{:<16}{v:>8} kB\n", format!("{k}:")))
        .collect();
    for (k, v) in [
        ("HugePages_Total", 0),
        ("HugePages_Free", 0),
        ("HugePages_Rsvd", 0),
        ("HugePages_Surp", 0),
    ] {
        out.push_str(&format!("{:<16}{v:>8}\n", format!("{k}:")));
    }
    out.push_str(&format!("{:<16}{:>8} kB\n", "Hugepagesize:", 2048));
    out.push_str(&format!("{:<16}{:>8} kB\n", "Hugetlb:", 0));
    out.push_str(&format!("{:<16}{:>8} kB\n", "DirectMap4k:", 274_368));
    out.push_str(&format!(
        "{:<16}{:>8} kB\n",
        "DirectMap2M:",
        total.saturating_sub(274_368)
    ));
    out
}
