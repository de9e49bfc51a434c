//! The Kubernetes side of the built-in lab: an API server real clients (kubectl, kube-rs)
//! accept, its object store with resourceVersions and watches, the controllers and kubelet
//! that replace deleted pods on the published timings, exec, proxies and server-side tables.
//!
//! - `resources`: the served resource types (discovery, routing).
//! - `store`: objects, the global resourceVersion, the bounded change history.
//! - `selectors`, `patch`, `tables`: request semantics (pure, unit tested).
//! - `objects`: builders of the lab's objects (checked against k8s-openapi types).
//! - `cluster`: shared state and the Deployment, ReplicaSet and EndpointSlice controllers.
//! - `scheduler`: when and where a pod is placed (GPUs, the models' volume), and its
//!   binding.
//! - `kubelet`: one task per pod once placed (container start, readiness, OOM restarts,
//!   graceful termination).
//! - `server`, `responses`: the API server's shared state and its Status responses.
//! - `api`, `watch`, `exec`, `proxy`, `logs`: the HTTP surface (`logs`: pods/log, the
//!   container's stdout with follow, timestamps, sinceTime and tailLines).
//! - `termination`: how a deleted pod's containers answer SIGTERM (exit, or hold the pod
//!   until the grace period ends).
//! - `service_network`: cluster DNS for Service names and kube-proxy's routing, as a pod's
//!   `curl` sees them.
//! - `proto`, `proto_schema`: protobuf request bodies (what kubectl's typed `create`s send)
//!   read into the JSON objects a JSON client would send; the field tables are generated.
//! - `authz`: authentication (admin and ServiceAccount tokens) and RBAC authorisation.
//! - `timing`: stratified draws of the kubelet's stage timings.
//! - `kubeconfig`: the kubeconfig the lab writes.
//! - `faults`: the fault switches of the admin endpoint.
//! - `accounting`: requests and response bytes served, per client and request.

pub mod accounting;
pub mod api;
pub mod authz;
pub mod cluster;
pub mod exec;
pub mod faults;
pub mod kubeconfig;
pub mod kubelet;
pub mod logs;
pub mod objects;
pub mod patch;
pub mod proto;
#[rustfmt::skip]
pub mod proto_schema;
pub mod proxy;
pub mod resources;
pub mod responses;
pub mod scheduler;
pub mod selectors;
pub mod server;
pub mod service_network;
pub mod shapes;
pub mod store;
pub mod tables;
pub mod termination;
pub mod timing;
pub mod tls;
pub mod watch;
