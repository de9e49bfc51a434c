//! Live feeds: one async task per feed, each `run(config, tx, cancel)`, stamping every event
//! with the wall-clock instant it was received. Parsing lives in pure functions that tests
//! call on fixtures.
//!
//! - [`kube`]: watches of Pods, EndpointSlices, Events and Nodes.
//! - [`runtime`]: the LLM runtime of each pod (probe, residency, models, inference).
//! - [`logs`]: the runtime's request log (someone else's inference, seen, not sent).
//! - [`watch`]: a watcher stream as events (the kube feeds' common part).
//! - [`pod_events`]: the Events of the target's pods, one scoped watch per pod.
//! - [`nodes`]: the Node watch, said once and paused when the cluster refuses it.
//! - [`memory`]: the serving container's memory (cgroup stream over exec, Summary API).
//! - [`gpu`]: the GPU memory of a pod that asks for a GPU (`nvidia-smi` over exec).
//! - [`container`]: which container of a pod serves the runtime.
//! - [`pod_spec`]: the probes and models volume of a pod spec (for the contract verdicts).

pub mod container;
pub mod gpu;
pub mod kube;
pub mod logs;
pub mod memory;
pub mod nodes;
pub mod pod_events;
pub mod pod_spec;
pub mod runtime;
pub mod watch;
