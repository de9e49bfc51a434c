//! Reaching a Kubernetes node's kernel from readygap: how (ssh through the system OpenSSH
//! client, `minikube ssh`, `docker exec` into a kind node, locally, or a privileged debug
//! pod), per-node configuration and guesses, validated argv-only commands from fixed
//! templates, and dropping a node's page cache before a cold-cache trial.
//!
//! Layout: [`validate`] (names and hosts), [`access`] (the access kinds and command
//! templates), [`exec`] (running with deadlines, sorting failures), [`config`]
//! (`[nodes."PATTERN"]` and [`guess_access`]), [`drop_caches`] (the drop and its
//! judgement), [`debug_pod`] (the pod spec), [`debug_session`] (creating it and exec-ing
//! in it through the Kubernetes API), [`cli`] (`readygap drop-caches`). Host sampling of a
//! node lives in [`crate::host`]; the feed that follows the selected node and announces its
//! access in [`crate::node_host`].

pub mod access;
pub mod config;
pub mod debug_pod;
pub mod debug_session;
pub mod drop_caches;
pub mod error;
pub mod exec;
pub mod validate;

pub use access::{
    ControlOp, HostKeyPolicy, NodeAccess, NodeCommand, ProcRoot, RemoteScript, SshAccess,
    Transport, debug_pod_exec_argv,
};
pub use config::{NodeConfig, NodeFacts, NodesSection, guess_access};
pub use debug_pod::debug_pod_manifest;
pub use debug_session::{DebugPodSession, PodOutput};
pub use drop_caches::{
    DropCachesResult, DropThreshold, drop_caches, drop_caches_in_pod, drop_caches_via,
};
pub use error::NodeError;
pub use validate::{Host, NodeName, User};
