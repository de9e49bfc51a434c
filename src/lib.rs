//! readygap: a terminal dashboard and instrument for LLM recovery experiments on Kubernetes.

pub mod host;
pub mod lab;
pub mod node;
