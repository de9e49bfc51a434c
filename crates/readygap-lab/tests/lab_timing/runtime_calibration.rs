//! End to end, the runtime spends what its profile says: for every profile (stages fixed at
//! their means), a trial from container start (T1 with readiness `none`) through the first
//! `/api/tags` 200 (T2) to a finished generate (T4) takes the profile's published
//! ready_to_inference mean, divided by the speed. Catches a stage left out or applied twice.

use readygap_lab::profile::Profile;
use readygap_lab::testkit::runtime::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const SPEED: f64 = 5.0;

#[tokio::test]
async fn a_trial_takes_the_profiles_published_means() {
    let _alone = crate::alone().await;
    let http = client();
    for p in Profile::all() {
        let name = p.name.clone();
        let expected = p.trial_means();
        let listen_ms = p.runtime_listen.mean_ms;
        let t1 = Instant::now();
        let lab = start(
            fixed(p),
            Options {
                speed: SPEED,
                ..Options::default()
            },
        )
        .await;
        // The study's T2 loop, every 2 ms here (finer than its 100 ms, so the loop adds little).
        let t2 = loop {
            if let Ok(r) = http.get(lab.url("/api/tags")).send().await
                && r.status() == 200
            {
                break Instant::now();
            }
            assert!(t1.elapsed() < DEADLINE, "{name}: never answered");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let model = lab.spec.profile.model.clone();
        let reply: Value = post_json(
            &http,
            &lab.url("/api/generate"),
            &json!({"model": model, "prompt": "Reply with exactly: READY", "stream": false}),
        )
        .await;
        let t4 = Instant::now();
        assert_eq!(reply["response"], "READY", "{name}");

        let lab_ms = |d: Duration| d.as_secs_f64() * 1000.0 * SPEED;
        let ready_to_runtime = lab_ms(t2 - t1);
        let ready_to_inference = lab_ms(t4 - t1);
        // Sleeps never end early; the machine adds a little (×5 here), so allow +8%.
        assert!(
            ready_to_runtime >= listen_ms * 0.99 && ready_to_runtime <= listen_ms * 1.08 + 150.0,
            "{name}: ready_to_runtime {ready_to_runtime:.0} ms vs stage {listen_ms:.0} ms"
        );
        let want = expected.ready_to_inference_ms;
        eprintln!(
            "{name}: ready_to_runtime {ready_to_runtime:.0} ms (stage {listen_ms:.0}), ready_to_inference {ready_to_inference:.0} ms (profile {want:.0})"
        );
        assert!(
            ready_to_inference >= want * 0.99 && ready_to_inference <= want * 1.08,
            "{name}: ready_to_inference {ready_to_inference:.0} ms vs profile {want:.0} ms"
        );
        lab.handle.stop().await;
    }
}
