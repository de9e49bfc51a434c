//! readygap on a real Kubernetes: the one-node v1.34 cluster of `scripts/cluster.sh` (real
//! kube-apiserver, scheduler, controllers, kubelet, containerd, runc, kube-proxy, CoreDNS)
//! serving the real Ollama from the shipped manifests (`manifests/overlays/smollm2`).
//!
//! Every test is `#[ignore = "needs the real cluster: …"]`: a plain `cargo test` lists them;
//! `.ci/run` starts the cluster, exports `READYGAP_REAL_KUBECONFIG` and runs them, where a
//! missing cluster fails with the reason. They share one cluster and one namespace, so they
//! run one at a time (`support::cluster()` holds a lock).

mod bench;
mod cold;
mod conformance;
mod dashboard;
mod emptydir;
mod external;
mod faults;
mod gpu_surge;
mod liveness;
mod memory;
mod oom;
mod rbac;
mod scale;
mod study;
mod support;
mod trials;
mod watch_in_cluster;
