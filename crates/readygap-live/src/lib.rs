//! readygap-live: everything that touches a live cluster. The sources (Kubernetes watches,
//! the LLM runtime of each pod, container memory, the nodes' hosts), how nodes are reached,
//! the actions readygap takes (delete, restart, infer, drop caches), the explanations of RBAC
//! refusals, the trial runner, the session recorder and `run`'s headless session.
//!
//! It takes plain configuration structs (no command-line types; their shared branches and
//! defaults in `settings`) and emits
//! [`readygap_core::event::Event`]s; the binary owns the command line and the screen.

pub mod actions;
pub mod cluster;
pub mod fleet;
pub mod host;
pub mod kubeconfig;
pub mod node;
pub mod node_host;
pub mod rbac;
pub mod run;
pub mod runner;
pub mod session;
pub mod settings;
pub mod sources;
pub mod store;
pub mod trial;
