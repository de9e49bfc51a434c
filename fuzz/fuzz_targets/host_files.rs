//! Any text as the files readygap reads from hosts and containers: `/proc/meminfo`,
//! `/proc/stat`'s cpu line, cgroup v1 and v2 memory files (as one `head` block or file by
//! file), the detection answer, the cache-drop script's output. No panic, and an error always
//! says something.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap_live::sources::memory::{
    CgroupVersion, parse_block, parse_detection, parse_v1, parse_v2,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = readygap_live::host::parse_meminfo(&text) {
        assert!(!e.is_empty());
    }
    for line in text.lines() {
        let _ = readygap_live::host::parse_cpu_line(line);
    }
    for v in [CgroupVersion::V1, CgroupVersion::V2] {
        if let Err(e) = parse_block(v, &text) {
            assert!(!e.is_empty());
        }
    }
    let parts: Vec<&str> = text.splitn(4, '\u{0}').collect();
    if let [a, b, c, d] = parts[..] {
        let _ = parse_v1(a, b, c, d);
        let _ = parse_v2(a, b, c, d);
    }
    let _ = parse_detection(&text);
    let _ = readygap_live::node::drop_caches::parse_drop_output(&text);
});
