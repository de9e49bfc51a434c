//! Shared helpers of the lab runtime tests: start a runtime on a free loopback address, wait
//! for its events with bounded deadlines, and build profiles with fixed timings.

use crate::ground_truth::GroundTruth;
use crate::profile::{Profile, Stage};
use crate::runtime::{
    self, ModelDisk, NodeCache, RuntimeEvent, RuntimeFaults, RuntimeHandle, RuntimeSpec,
};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// Generous deadline for anything a loaded 2-core machine must do.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A runtime under test.
pub struct Lab {
    pub handle: RuntimeHandle,
    pub events: UnboundedReceiver<RuntimeEvent>,
    pub spec: RuntimeSpec,
    pub base: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A loopback address no other test (in this or another test process) is likely to use; a
/// clash is detected by the bind in `runtime::start` and retried.
fn candidate_ip() -> Ipv4Addr {
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    let pid = std::process::id();
    Ipv4Addr::new(
        127,
        100 + (pid % 100) as u8,
        (n % 250) as u8,
        1 + ((pid / 100) % 250) as u8,
    )
}

/// A profile with every stage fixed (sd 0), so timing comparisons are not noise.
pub fn fixed(mut profile: Profile) -> Profile {
    let fix = |s: &mut Stage| *s = Stage::fixed(s.mean_ms);
    fix(&mut profile.schedule);
    fix(&mut profile.container_start);
    fix(&mut profile.runtime_listen);
    fix(&mut profile.request_overhead);
    for m in &mut profile.models {
        fix(&mut m.load);
        fix(&mut m.prompt_eval);
        fix(&mut m.eval);
    }
    profile
}

pub fn profile(name: &str) -> Profile {
    Profile::named(name).unwrap_or_else(|| panic!("profile {name}"))
}

pub struct Options {
    pub speed: f64,
    pub disk: Option<Arc<ModelDisk>>,
    pub node_cache: Option<Arc<NodeCache>>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            speed: 50.0,
            disk: None,
            node_cache: None,
        }
    }
}

/// Start a runtime for `profile` (models of the profile on its disk) and wait until it listens.
pub async fn start_listening(profile: Profile, options: Options) -> Lab {
    let mut lab = start(profile, options).await;
    lab.wait_event(|e| matches!(e, RuntimeEvent::Listening))
        .await;
    assert!(lab.handle.is_listening());
    lab
}

/// Start a runtime without waiting.
pub async fn start(profile: Profile, options: Options) -> Lab {
    let profile = Arc::new(profile);
    let disk = options
        .disk
        .unwrap_or_else(|| Arc::new(ModelDisk::with_models(&profile.models)));
    let node_cache = options
        .node_cache
        .unwrap_or_else(|| Arc::new(NodeCache::new(profile.start_cold)));
    let mut last_error = None;
    for _ in 0..20 {
        let ip = candidate_ip();
        let spec = RuntimeSpec {
            pod_name: format!("ollama-test-{}", ip.octets()[2]),
            pod_uid: format!("uid-{ip}"),
            node_name: "lab-node-1".into(),
            ip,
            port: 11434,
            memory_limit_bytes: profile.memory_limit_bytes,
            profile: profile.clone(),
            disk: disk.clone(),
            node_cache: node_cache.clone(),
            speed: options.speed,
            ground_truth: GroundTruth::in_memory(),
            faults: Arc::new(RuntimeFaults::new()),
            gpus: 0,
            dialect: crate::runtime::Dialect::Ollama,
            shared_gpu: None,
        };
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        match runtime::start(spec.clone(), tx).await {
            Ok(handle) => {
                return Lab {
                    handle,
                    events,
                    base: format!("http://{ip}:11434"),
                    spec,
                };
            }
            Err(e) => last_error = Some(e),
        }
    }
    panic!("no free loopback address: {last_error:?}");
}

impl Lab {
    /// The next event matching `pred` (others are skipped), within the deadline.
    pub async fn wait_event(&mut self, pred: impl Fn(&RuntimeEvent) -> bool) -> RuntimeEvent {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.recv()).await {
                Ok(Some(e)) if pred(&e) => return e,
                Ok(Some(_)) => continue,
                Ok(None) => panic!("runtime event channel closed"),
                Err(_) => panic!("no matching runtime event within {DEADLINE:?}"),
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// An HTTP client for loopback (no proxies) with a bounded timeout.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()
        .expect("reqwest client")
}

/// Wait until `cond` holds, polling, within the deadline.
pub async fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// GET `url` and parse its body as JSON.
pub async fn get_json(http: &reqwest::Client, url: &str) -> serde_json::Value {
    http.get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: body is not JSON: {e}"))
}

/// POST `body` as JSON to `url` and parse the answer as JSON.
pub async fn post_json(
    http: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
) -> serde_json::Value {
    http.post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: body is not JSON: {e}"))
}
