//! Any bytes as a runtime's answer: the streamed generate folder (cut into chunks anywhere),
//! `/api/ps` and `/api/tags` bodies, the runtime's request-log lines, a `/metrics` text (its
//! figures finite), a 403 message. No panic; the folder's state only moves forward (first
//! token, done) and its buffer stays bounded.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap_live::sources::runtime::ollama::{GenerateStream, parse_ps, parse_tags};
use readygap_live::sources::runtime::stream::Fold;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut).max(1);
    let mut stream = GenerateStream::default();
    let (mut first, mut done) = (false, false);
    for chunk in body.chunks(step) {
        let p = stream.push(chunk);
        assert!(!(p.first_token && first), "first token reported twice");
        assert!(!(p.done && done), "done reported twice");
        first |= p.first_token;
        done |= p.done;
    }
    let p = stream.finish();
    assert!(!(p.done && done), "done reported twice");
    assert_eq!(stream.first_token_seen, first || p.first_token);

    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let _ = parse_ps(&v);
        let _ = parse_tags(&v);
        let _ = readygap_live::sources::memory::parse_summary(&v, "ns", "pod", "ollama");
    }
    let text = String::from_utf8_lossy(body);
    for line in text.lines() {
        let _ = readygap_live::sources::logs::parse_line("pod", line);
    }
    let _ = readygap_live::rbac::parse_forbidden(&text);
    if let Some(m) = readygap_live::sources::runtime::metrics::parse(&text) {
        for v in [m.running, m.waiting, m.kv_cache, m.tokens_generated].into_iter().flatten() {
            assert!(v.is_finite(), "a figure from /metrics is finite");
        }
    }
});
