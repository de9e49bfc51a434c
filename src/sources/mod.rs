//! Live feeds: one async task per feed, each `run(config, tx, cancel)`, stamping every event
//! with the wall-clock instant it was received. Parsing lives in pure functions that tests
//! call on fixtures.
//!
//! - [`kube`]: watches of Pods, EndpointSlices, Events and Nodes.
//! - [`runtime`]: the LLM runtime of each pod (probe, residency, models, inference).
//! - [`logs`]: the runtime's request log (someone else's inference, seen, not sent).
//! - [`memory`]: the serving container's memory (cgroup stream over exec, Summary API).

pub mod kube;
pub mod logs;
pub mod memory;
pub mod runtime;
