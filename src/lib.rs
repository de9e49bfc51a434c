//! readygap: a terminal dashboard and instrument for LLM recovery experiments on Kubernetes.
//!
//! Everything that happens is an [`core::event::Event`]; the screen, the statistics and the
//! recordings are functions of the event stream (see `core`).

pub mod actions;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod core;
pub mod host;
pub mod kubeconfig;
pub mod lab;
pub mod live;
pub mod node;
pub mod node_host;
pub mod rbac;
pub mod record;
pub mod replay;
pub mod report;
pub mod run;
pub mod session;
pub mod sources;
pub mod trial;
pub mod ui;
