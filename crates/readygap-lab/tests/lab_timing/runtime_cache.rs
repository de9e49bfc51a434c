//! The node's page cache: after `drop_caches` the next load is slower by the profile's
//! cold_load_factor (1.1656, published cold vs warm load_duration), then warm again; a cold
//! load charges page cache to the container up to its limit, as the published cold-cache
//! memory.current shows.

use readygap_lab::runtime::{NodeCache, RuntimeEvent};
use readygap_lab::testkit::runtime::*;
use serde_json::json;
use std::sync::Arc;

async fn generate_and_unload(lab: &mut Lab) -> (f64, u64, u64) {
    let http = client();
    let r = post_json(&http, &lab.url("/api/generate"), &json!({"model": "llama3.2:3b", "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"})).await;
    assert_eq!(r["response"], "READY", "{r}");
    lab.wait_event(|e| matches!(e, RuntimeEvent::ModelResident { .. }))
        .await;
    let mem = lab.handle.memory();
    let unload = post_json(
        &http,
        &lab.url("/api/generate"),
        &json!({"model": "llama3.2:3b", "keep_alive": 0}),
    )
    .await;
    assert_eq!(unload["done_reason"], "unload");
    lab.wait_event(|e| matches!(e, RuntimeEvent::ModelUnloaded { .. }))
        .await;
    (
        r["load_duration"].as_u64().expect("load") as f64,
        mem.current_bytes,
        mem.inactive_file_bytes,
    )
}

#[tokio::test]
async fn drop_caches_makes_the_next_load_cold_then_warm_again() {
    let _alone = crate::alone().await;
    // Fixed stages (no sampling noise); speed 2 makes the 3B load ~2 s warm, ~2.3 s cold.
    let p = fixed(profile("azure-3b-cold"));
    let factor = p.cold_load_factor;
    let limit = p.memory_limit_bytes;
    let cache = Arc::new(NodeCache::new(false));
    let mut lab = start_listening(
        p,
        Options {
            speed: 2.0,
            node_cache: Some(cache.clone()),
            ..Options::default()
        },
    )
    .await;

    let (warm, warm_mem, warm_cache) = generate_and_unload(&mut lab).await;
    assert_eq!(warm_cache, 0, "a warm load charges no page cache");
    let (before, after) = cache.drop_caches();
    assert!(before > after, "{before} → {after}");
    let (cold, cold_mem, cold_cache) = generate_and_unload(&mut lab).await;
    assert!(
        cache.cached_kb() > after + 1_900_000,
        "the model file is cached again"
    );
    let (warm_again, _, _) = generate_and_unload(&mut lab).await;

    let ratio = cold / warm;
    assert!(
        (ratio - factor).abs() < 0.07,
        "cold/warm = {ratio:.3}, profile factor {factor:.3} (warm {warm} ns, cold {cold} ns)"
    );
    let again = warm_again / warm;
    assert!((again - 1.0).abs() < 0.07, "warm again/warm = {again:.3}");
    // Cold: page cache charged up to the limit (published cold memory.current ≈ 4 292 521 165).
    assert!(cold_cache > 1_000_000_000, "{cold_cache}");
    assert!(
        cold_mem > warm_mem && cold_mem <= limit,
        "{cold_mem} vs limit {limit}"
    );
    assert!(
        (cold_mem as f64 - 4_292_521_165.0).abs() < 0.01 * limit as f64,
        "cold memory.current {cold_mem}"
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn a_node_started_cold_loads_cold_first() {
    let _alone = crate::alone().await;
    let p = fixed(profile("azure-3b-cold"));
    let factor = p.cold_load_factor;
    assert!(p.start_cold);
    let cache = Arc::new(NodeCache::new(true));
    let mut lab = start_listening(
        p,
        Options {
            speed: 2.0,
            node_cache: Some(cache.clone()),
            ..Options::default()
        },
    )
    .await;
    let (cold, _, cold_cache) = generate_and_unload(&mut lab).await;
    let (warm, _, _) = generate_and_unload(&mut lab).await;
    assert!(cold_cache > 0);
    let ratio = cold / warm;
    assert!((ratio - factor).abs() < 0.07, "cold/warm = {ratio:.3}");
    lab.handle.stop().await;
}
