//! Effects readygap carries out: delete a pod, `rollout restart` a Deployment, send an
//! inference, unload a model, drop a node's page cache. Each one reports
//! `action_requested`, `action_started` (stamped just before the request is sent: T0 for
//! replacements) and `action_finished{outcome}`, and has a timeout.
//!
//! The [`Executor`] carries out [`Action`]s as the trial runner decided them (the pod, the
//! model, the grace and whether `--read-only` allows it are the runner's: see
//! [`crate::runner::Command`]), each in its own task, so the caller never blocks. The action
//! is the recorded `action_requested` payload itself; `ip` says where the pod's runtime is.

use crate::node::{DropThreshold, NodeAccess};
use crate::rbac::{self, explain_kube_error};
use crate::sources::runtime::{PodRef, RuntimeAdapter, until_not_resident};
use chrono::Utc;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use readygap_core::event::{Action, CacheDrop, Event, EventKind, Outcome, Source, Timestamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

/// The default prompt, as in the study.
pub const DEFAULT_PROMPT: &str = "Reply with exactly: READY";

/// Resolves how to reach a node by its name.
pub type NodeAccessFor = Arc<dyn Fn(&str) -> Result<NodeAccess, String> + Send + Sync>;

/// How node page caches are dropped.
#[derive(Clone)]
pub enum CacheDropper {
    /// Not configured: the drop fails with this explanation.
    None(String),
    /// Over ssh / minikube / kind / local, or a debug pod in the executor's namespace,
    /// through `crate::node`.
    Node { access: NodeAccessFor },
}

/// Timeouts of the actions.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub kube: Duration,
    pub inference: Duration,
    pub unload: Duration,
    pub drop_caches: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            kube: Duration::from_secs(30),
            inference: crate::settings::StageTimeouts::default().inference,
            unload: Duration::from_secs(60),
            drop_caches: Duration::from_secs(60),
        }
    }
}

/// Everything the actions need.
#[derive(Clone)]
pub struct Executor {
    pub client: kube::Client,
    pub namespace: String,
    pub runtime: Arc<dyn RuntimeAdapter>,
    /// The session's model: the runner resolves `i`, `u`, the cold step's unload and the
    /// trial's inference with it (`runner::ActionDefaults`).
    pub model: String,
    pub prompt: String,
    /// The grace of readygap's deletes (`--grace`), resolved by the runner likewise.
    pub default_grace: Option<u32>,
    pub dropper: CacheDropper,
    pub threshold: DropThreshold,
    pub timeouts: Timeouts,
    pub tx: mpsc::Sender<Event>,
    ids: Arc<AtomicU64>,
    /// Debug pods this executor created (in `namespace`), for [`Executor::delete_debug_pods`].
    debug_pods: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

async fn emit_at(tx: &mpsc::Sender<Event>, ts: Timestamp, kind: EventKind) {
    let _ = tx.send(Event::new(ts, Source::Action, kind)).await;
}

async fn emit(tx: &mpsc::Sender<Event>, kind: EventKind) {
    emit_at(tx, Utc::now(), kind).await;
}

impl Executor {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        runtime: Arc<dyn RuntimeAdapter>,
        model: &str,
        tx: mpsc::Sender<Event>,
    ) -> Self {
        Self {
            client,
            namespace: namespace.to_string(),
            runtime,
            model: model.to_string(),
            prompt: DEFAULT_PROMPT.to_string(),
            default_grace: None,
            dropper: CacheDropper::None("no node access configured (--node-access)".into()),
            threshold: DropThreshold::default(),
            timeouts: Timeouts::default(),
            tx,
            ids: Arc::new(AtomicU64::new(1)),
            debug_pods: Arc::default(),
        }
    }

    /// A fresh action id.
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Carry out `action` in the background; returns its action id at once. `ip`: the pod's
    /// address, for the actions that talk to its runtime.
    pub fn submit(&self, action: Action, ip: Option<String>) -> u64 {
        let id = self.next_id();
        self.spawn(id, action, ip);
        id
    }

    /// Carry out `action` in the background under an id drawn with [`Executor::next_id`].
    pub fn spawn(&self, id: u64, action: Action, ip: Option<String>) {
        let me = self.clone();
        tokio::spawn(async move {
            me.execute(id, action, ip).await;
        });
    }

    /// Carry out `action` to its end (events included); returns the outcome.
    pub async fn run(&self, action: Action, ip: Option<String>) -> (u64, Outcome) {
        let id = self.next_id();
        (id, self.execute(id, action, ip).await)
    }

    /// Record `action` as refused (`action_requested`, then `action_finished` with `why`),
    /// sending nothing: the runner refused it (`--read-only`).
    pub async fn refuse(&self, id: u64, action: Action, why: String) {
        emit(&self.tx, EventKind::ActionRequested { id, action }).await;
        let outcome = Outcome::Error { message: why };
        emit(&self.tx, EventKind::ActionFinished { id, outcome }).await;
    }

    /// Carry out one action with its events; returns the outcome.
    pub async fn execute(&self, id: u64, action: Action, ip: Option<String>) -> Outcome {
        emit(
            &self.tx,
            EventKind::ActionRequested {
                id,
                action: action.clone(),
            },
        )
        .await;
        let outcome = match action {
            Action::DeletePod { pod, grace_seconds } => {
                self.timed(self.delete_pod(id, &pod, grace_seconds)).await
            }
            Action::RolloutRestart { deployment } => {
                self.timed(self.rollout_restart(id, &deployment)).await
            }
            Action::Infer { pod, model } => {
                let pod = PodRef { name: pod, ip };
                self.infer(id, &pod, &model).await
            }
            Action::Unload { pod, model } => {
                let pod = PodRef { name: pod, ip };
                self.unload(id, &pod, &model).await
            }
            Action::DropCaches { node } => {
                emit(&self.tx, EventKind::ActionStarted { id }).await;
                let d = self.drop_caches(&node).await;
                let outcome = match (&d.error, d.dropped) {
                    (_, true) => Outcome::Ok,
                    (Some(e), false) => Outcome::Error { message: e.clone() },
                    (None, false) => Outcome::Error {
                        message: "the page cache did not fall".into(),
                    },
                };
                emit(&self.tx, EventKind::CachesDropped(d)).await;
                outcome
            }
        };
        emit(
            &self.tx,
            EventKind::ActionFinished {
                id,
                outcome: outcome.clone(),
            },
        )
        .await;
        outcome
    }

    /// Unload `model` (`keep_alive: 0`); done when the runtime stops listing it, not on its
    /// reply (see `until_not_resident`), within the unload timeout.
    async fn unload(&self, id: u64, pod: &PodRef, model: &str) -> Outcome {
        emit(&self.tx, EventKind::ActionStarted { id }).await;
        let limit = self.timeouts.unload;
        let asked = std::time::Instant::now();
        match tokio::time::timeout(limit, self.runtime.unload(pod, model)).await {
            Ok(Ok(())) => {
                let left = limit.saturating_sub(asked.elapsed());
                let gone = until_not_resident(
                    self.runtime.as_ref(),
                    pod,
                    model,
                    Duration::from_millis(50),
                );
                match tokio::time::timeout(left, gone).await {
                    Ok(()) => Outcome::Ok,
                    Err(_) => Outcome::Error {
                        message: format!(
                            "unload {model}: accepted, but still resident {limit:?} after the request"
                        ),
                    },
                }
            }
            Ok(Err(e)) => Outcome::Error { message: e },
            Err(_) => Outcome::Timeout {
                after_ms: limit.as_millis() as u64,
            },
        }
    }

    /// A request to the API server, bounded by the kube timeout.
    async fn timed(&self, fut: impl Future<Output = Result<(), String>>) -> Outcome {
        let limit = self.timeouts.kube;
        match tokio::time::timeout(limit, fut).await {
            Ok(Ok(())) => Outcome::Ok,
            Ok(Err(message)) => Outcome::Error { message },
            Err(_) => Outcome::Timeout {
                after_ms: limit.as_millis() as u64,
            },
        }
    }

    async fn delete_pod(&self, id: u64, pod: &str, grace: Option<u32>) -> Result<(), String> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let dp = DeleteParams {
            grace_period_seconds: grace,
            ..DeleteParams::default()
        };
        emit(&self.tx, EventKind::ActionStarted { id }).await;
        let req = rbac::Request::new("delete", "", "pods", Some(&self.namespace));
        api.delete(pod, &dp).await.map(|_| ()).map_err(|e| {
            explain_kube_error(&e, &req).unwrap_or_else(|| format!("delete pod {pod}: {e}"))
        })
    }

    async fn rollout_restart(&self, id: u64, deployment: &str) -> Result<(), String> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch = restart_patch(Utc::now());
        emit(&self.tx, EventKind::ActionStarted { id }).await;
        api.patch(
            deployment,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
        .map(|_| ())
        .map_err(|e| {
            let req = rbac::Request::new("patch", "apps", "deployments", Some(&self.namespace));
            explain_kube_error(&e, &req)
                .unwrap_or_else(|| format!("rollout restart {deployment}: {e}"))
        })
    }

    async fn infer(&self, id: u64, pod: &PodRef, model: &str) -> Outcome {
        let started = Utc::now();
        emit_at(&self.tx, started, EventKind::ActionStarted { id }).await;
        emit_at(
            &self.tx,
            started,
            EventKind::InferenceStarted {
                request_id: id,
                pod: pod.name.clone(),
                model: model.to_string(),
            },
        )
        .await;
        let tx = self.tx.clone();
        let first = Box::new(move || {
            let ev = Event::new(
                Utc::now(),
                Source::Runtime,
                EventKind::InferenceFirstToken { request_id: id },
            );
            let _ = tx.try_send(ev);
        });
        let fut = self.runtime.generate(pod, model, &self.prompt, id, first);
        let limit = self.timeouts.inference;
        let (result, outcome) = match tokio::time::timeout(limit, fut).await {
            Ok(r) if r.ok => (r, Outcome::Ok),
            Ok(r) => {
                let message = r.error.clone().unwrap_or_else(|| "inference failed".into());
                (r, Outcome::Error { message })
            }
            Err(_) => (
                readygap_core::event::InferenceResult {
                    request_id: id,
                    ok: false,
                    error: Some(format!("timeout: no done: true within {limit:?}")),
                    ..Default::default()
                },
                Outcome::Timeout {
                    after_ms: limit.as_millis() as u64,
                },
            ),
        };
        // T4 is when the adapter saw the answer end, not when its future returned.
        let ts = result.done_at.unwrap_or_else(Utc::now);
        let _ = self
            .tx
            .send(Event::new(
                ts,
                Source::Runtime,
                EventKind::InferenceDone(result),
            ))
            .await;
        outcome
    }

    /// Drop a node's page cache with the configured dropper.
    pub async fn drop_caches(&self, node: &str) -> CacheDrop {
        let failed = |e: String| CacheDrop {
            node: node.to_string(),
            error: Some(e),
            ..CacheDrop::default()
        };
        let a = match &self.dropper {
            CacheDropper::None(why) => return failed(why.clone()),
            CacheDropper::Node { access } => match access(node) {
                Ok(a) => a,
                Err(e) => return failed(e),
            },
        };
        let limit = self.timeouts.drop_caches;
        let r = match &a {
            // A debug pod is created in the target namespace (or reused: one per node, kept
            // for the next trial until its own deadline).
            NodeAccess::DebugPod { .. } => {
                let client = self.client.clone();
                match crate::node::DebugPodSession::for_access(client, &self.namespace, &a) {
                    Ok(session) => {
                        let r =
                            crate::node::drop_caches_in_pod(node, &session, &self.threshold, limit)
                                .await;
                        if session.created_pod()
                            && let Ok(mut pods) = self.debug_pods.lock()
                        {
                            pods.insert(session.pod_name().to_owned());
                        }
                        r
                    }
                    Err(e) => crate::node::DropCachesResult::failed(node, e.to_string()),
                }
            }
            _ => crate::node::drop_caches(node, &a, &self.threshold, limit).await,
        };
        CacheDrop {
            node: r.node,
            cached_kb_before: r.cached_kb_before,
            cached_kb_after: r.cached_kb_after,
            dropped: r.dropped,
            error: r.error,
        }
    }

    /// Deletes the debug pods this executor created for cold steps (at the end of a run;
    /// left alone they end by their own deadline). Returns one message per pod that could
    /// not be deleted.
    pub async fn delete_debug_pods(&self) -> Vec<String> {
        let names: Vec<String> = match self.debug_pods.lock() {
            Ok(mut pods) => std::mem::take(&mut *pods).into_iter().collect(),
            Err(_) => return vec!["the list of debug pods is unreadable".into()],
        };
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let dp = DeleteParams::default().grace_period(0);
        let mut errors = Vec::new();
        for name in names {
            match tokio::time::timeout(self.timeouts.kube, api.delete(&name, &dp)).await {
                Ok(Ok(_)) => {}
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => {}
                Ok(Err(e)) => errors.push(format!("deleting debug pod {name}: {e}")),
                Err(_) => errors.push(format!(
                    "deleting debug pod {name}: no answer within {:?}",
                    self.timeouts.kube
                )),
            }
        }
        errors
    }
}

/// The strategic merge patch `kubectl rollout restart` sends.
pub fn restart_patch(now: Timestamp) -> serde_json::Value {
    serde_json::json!({
        "spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        }}}}
    })
}
