//! The built-in lab's tests: its Kubernetes API against kube-rs and kubectl (JSON and the
//! protobuf of kubectl's typed commands), its
//! runtimes against the official Ollama client, the OOM kill, exec and faults.

mod apply_manifests;
mod client_pod_curl;
mod kube_api;
mod kube_kubectl;
mod kube_probes;
mod kube_protobuf;
mod kube_watch;
mod runtime_exec;
mod runtime_faults;
mod runtime_http;
mod runtime_oom;
mod runtime_python;
