//! readygap: a terminal dashboard and instrument for LLM recovery experiments on Kubernetes.

pub mod cli;
pub mod lab;
