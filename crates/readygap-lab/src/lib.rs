//! The built-in lab: a Kubernetes API server with the controllers that matter for recovery,
//! and an Ollama-compatible runtime per pod, all on loopback, calibrated to the published
//! k8s-llm-recovery-lab measurements. It is the embedded default (`readygap demo`), the demo,
//! and the test bed: real clients (kubectl, kube-rs, the official Ollama clients) talk to it.
//!
//! Layout:
//! - `profile`: calibration profiles (stage timings, model sizes, memory limits).
//! - `ollama_version`: what changed between the Ollama releases the runtime imitates.
//! - `ground_truth`: the JSON-lines log of when each transition really happened.
//! - `runtime`: the Ollama-compatible runtime of one pod (HTTP API, memory, exec commands).
//! - `engine`: what runs a pod's container: that runtime, or a real `ollama serve` per pod.
//! - `peers`: finding the real kubectl (tests, `readygap lab bench`).
//! - the Kubernetes side (API server, store with resourceVersions and watches, controllers).

pub mod engine;
pub mod ground_truth;
pub mod kube;
pub mod ollama_version;
pub mod peers;
pub mod profile;
pub mod runtime;
pub mod scenario;
pub mod serve;
#[cfg(feature = "testkit")]
pub mod testkit;
