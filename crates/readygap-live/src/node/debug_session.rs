//! Running node scripts in a debug pod through the Kubernetes API, for clusters without
//! ssh: [`DebugPodSession`] creates the pod of [`super::debug_pod`] on the node when it is
//! not there yet (an existing Running pod of the same name on the same node is reused, so
//! consecutive trials share one pod, as ssh shares one ControlMaster connection), waits for
//! it to run with a bounded deadline, and execs [`super::debug_pod_exec_argv`] in it over the
//! API's WebSocket exec. The pod has `activeDeadlineSeconds`, so a forgotten one ends by itself;
//! [`DebugPodSession::delete_if_created`] removes it sooner.
//!
//! Failures become [`NodeError`]s that say what to do: a 403 names the missing permission
//! (`create pods`, `create pods/exec`, see [`crate::rbac`]) or the Pod Security level of the
//! namespace that refuses privileged pods; a pod that does not start says its phase, the
//! container's waiting reason (an image pull failure) and the scheduler's message; a script
//! that fails gives its exit code and stderr; `DROP_REFUSED_STATUS` is [`NodeError::DropRefused`].
//!
//! Needs in the namespace: `get`/`create`/`delete` on `pods` and `get`/`create` on
//! `pods/exec`, and a Pod Security level of `privileged`
//! (`pod-security.kubernetes.io/enforce: privileged`, or no label where the cluster default
//! is privileged).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, AttachedProcess, DeleteParams, PostParams};
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use super::NodeError;
use super::access::{DROP_REFUSED_STATUS, NodeAccess, RemoteScript, debug_pod_exec_argv};
use super::debug_pod::debug_pod_manifest_with_image;
use super::validate::NodeName;

/// The container name in the debug pod's manifest.
const CONTAINER: &str = "node";
/// Waiting reasons after which the pod will not start without a change.
const STUCK_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// What a script printed (its exit code was 0: failures are errors), as a command's.
pub type PodOutput = super::exec::CommandOutput;

/// One node reached through a debug pod in `namespace`.
pub struct DebugPodSession {
    client: kube::Client,
    namespace: String,
    node: NodeName,
    image: String,
    pod_name: String,
    created: AtomicBool,
}

impl DebugPodSession {
    /// A session for `node` whose pod runs `image` in `namespace`. Nothing is contacted yet.
    pub fn new(client: kube::Client, namespace: &str, node: NodeName, image: &str) -> Self {
        let manifest = debug_pod_manifest_with_image(&node, image);
        let pod_name = manifest.metadata.name.unwrap_or_default();
        Self {
            client,
            namespace: namespace.to_owned(),
            node,
            image: image.to_owned(),
            pod_name,
            created: AtomicBool::new(false),
        }
    }

    /// The session for a [`NodeAccess::DebugPod`]; other kinds are refused.
    pub fn for_access(
        client: kube::Client,
        namespace: &str,
        access: &NodeAccess,
    ) -> Result<Self, NodeError> {
        match access {
            NodeAccess::DebugPod { node, image } => {
                let node = NodeName::new(node.as_str())?;
                Ok(Self::new(client, namespace, node, image))
            }
            other => Err(NodeError::InvalidAccess {
                spec: other.target(),
                reason: "not a debug-pod access".into(),
            }),
        }
    }

    /// The pod's name (`readygap-node-NODE`).
    pub fn pod_name(&self) -> &str {
        &self.pod_name
    }

    /// Whether this session created the pod (rather than finding it running).
    pub fn created_pod(&self) -> bool {
        self.created.load(Ordering::SeqCst)
    }

    /// Short description for messages.
    pub fn target(&self) -> String {
        format!(
            "debug pod {}/{} on {}",
            self.namespace, self.pod_name, self.node
        )
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn kube_error(&self, verb: &str, resource: &str, e: &kube::Error) -> NodeError {
        kube_error(&self.target(), &self.namespace, verb, resource, e)
    }

    /// A [`NodeError::DebugPod`] of this session.
    fn failed(&self, detail: impl Into<String>) -> NodeError {
        NodeError::DebugPod {
            target: self.target(),
            detail: detail.into(),
        }
    }

    /// Makes sure the pod runs on the node: reuses a Running one, replaces one that ended
    /// or sits elsewhere, creates it when missing, and waits until `deadline`.
    pub async fn ensure_running(&self, timeout: Duration) -> Result<(), NodeError> {
        let deadline = Instant::now() + timeout;
        let api = self.api();
        let existing = match bounded(deadline, api.get_opt(&self.pod_name)).await {
            None => return Err(self.timeout(timeout, "reading the pod")),
            Some(r) => r.map_err(|e| self.kube_error("get", "pods", &e))?,
        };
        if let Some(pod) = existing {
            match pod_state(&pod, self.node.as_str()) {
                PodState::Running => return Ok(()),
                PodState::Starting => return self.wait_running(deadline, timeout).await,
                PodState::Stuck(why) | PodState::Unusable(why) => {
                    tracing::info!(pod = %self.pod_name, %why, "replacing the debug pod");
                    self.delete_and_wait(&pod, deadline, timeout).await?;
                }
            }
        }
        let manifest = debug_pod_manifest_with_image(&self.node, &self.image);
        match bounded(deadline, api.create(&PostParams::default(), &manifest)).await {
            None => return Err(self.timeout(timeout, "creating the pod")),
            Some(Ok(_)) => self.created.store(true, Ordering::SeqCst),
            // Another session created it a moment ago: use it.
            Some(Err(kube::Error::Api(s))) if s.code == 409 => {}
            Some(Err(e)) => return Err(self.kube_error("create", "pods", &e)),
        }
        self.wait_running(deadline, timeout).await
    }

    /// Waits (watching, not polling) until the pod runs or cannot start.
    async fn wait_running(&self, deadline: Instant, timeout: Duration) -> Result<(), NodeError> {
        let node = self.node.as_str().to_owned();
        let settled = move |pod: Option<&Pod>| match pod {
            None => true,
            Some(p) => !matches!(pod_state(p, &node), PodState::Starting),
        };
        let waited = bounded(
            deadline,
            kube::runtime::wait::await_condition(self.api(), &self.pod_name, settled),
        )
        .await;
        let pod = match waited {
            Some(Ok(pod)) => pod,
            Some(Err(e)) => return Err(self.failed(format!("watching the pod failed: {e}"))),
            None => {
                // Say where it stands: one last read, bounded on its own.
                let last = tokio::time::timeout(
                    Duration::from_secs(5),
                    self.api().get_opt(&self.pod_name),
                )
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
                let state = last
                    .as_ref()
                    .map_or_else(|| "it no longer exists".to_owned(), describe_pod);
                return Err(self.failed(format!(
                    "the pod did not start within {timeout:?}: {state}; is {} a node of this cluster, and can it pull {}?",
                    self.node, self.image
                )));
            }
        };
        match pod.as_ref().map(|p| pod_state(p, self.node.as_str())) {
            Some(PodState::Running) => Ok(()),
            None => Err(self.failed("the pod was deleted while starting")),
            Some(PodState::Stuck(why) | PodState::Unusable(why)) => {
                Err(self.failed(format!("the pod cannot start: {why}")))
            }
            Some(PodState::Starting) => Err(self.failed("the pod is still starting")),
        }
    }

    async fn delete_and_wait(
        &self,
        pod: &Pod,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), NodeError> {
        let existed = self
            .delete_by(deadline, timeout, "deleting the old pod")
            .await?;
        if !existed {
            return Ok(());
        }
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let gone = kube::runtime::wait::conditions::is_deleted(&uid);
        match bounded(
            deadline,
            kube::runtime::wait::await_condition(self.api(), &self.pod_name, gone),
        )
        .await
        {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.failed(format!("watching the old pod go failed: {e}"))),
            None => Err(self.timeout(timeout, "waiting for the old pod to go")),
        }
    }

    fn timeout(&self, after: Duration, doing: &str) -> NodeError {
        tracing::debug!(pod = %self.pod_name, doing, "debug pod deadline passed");
        NodeError::Timeout {
            target: format!("{} ({doing})", self.target()),
            after,
        }
    }

    /// Starts `script` in the running pod and returns the attached process (stdout and
    /// stderr piped). For long-lived scripts such as [`RemoteScript::SampleHost`].
    pub async fn spawn(
        &self,
        script: RemoteScript,
        timeout: Duration,
    ) -> Result<AttachedProcess, NodeError> {
        let deadline = Instant::now() + timeout;
        self.ensure_running(timeout).await?;
        // The defaults: no stdin, stdout and stderr piped.
        let ap = AttachParams::default().container(CONTAINER);
        let argv = debug_pod_exec_argv(script);
        match bounded(deadline, self.api().exec(&self.pod_name, argv, &ap)).await {
            None => Err(self.timeout(timeout, "starting the exec")),
            Some(Ok(p)) => Ok(p),
            Some(Err(e)) => Err(self.kube_error("create", "pods/exec", &e)),
        }
    }

    /// Runs `script` to completion within `timeout` (pod start included) and returns what it
    /// printed; a non-zero exit is an error with its stderr.
    pub async fn run(
        &self,
        script: RemoteScript,
        timeout: Duration,
    ) -> Result<PodOutput, NodeError> {
        let deadline = Instant::now() + timeout;
        let mut process = self.spawn(script, timeout).await?;
        let collected = bounded(deadline, collect(&mut process)).await;
        let Some((stdout, stderr, status)) = collected else {
            process.abort();
            return Err(self.timeout(timeout, "running the script"));
        };
        let code = exit_code(status.as_ref())
            .map_err(|detail| self.failed(format!("{detail}; stderr: {}", stderr.trim())))?;
        match code {
            0 => Ok(PodOutput { stdout, stderr }),
            c if c == DROP_REFUSED_STATUS && script == RemoteScript::DropCaches => {
                Err(NodeError::DropRefused {
                    target: self.target(),
                    stderr: stderr.trim().to_owned(),
                })
            }
            c => Err(NodeError::CommandFailed {
                target: self.target(),
                status: format!("exit code {c}"),
                stderr: stderr.trim().to_owned(),
            }),
        }
    }

    /// Why a spawned process ended: its exit status and stderr as an error.
    pub async fn ended(&self, mut process: AttachedProcess) -> NodeError {
        let limit = Duration::from_secs(5);
        let (_, stderr, status) = tokio::time::timeout(limit, collect(&mut process))
            .await
            .unwrap_or_default();
        let detail = match exit_code(status.as_ref()) {
            Ok(code) => format!("the script ended with exit code {code}"),
            Err(why) => why,
        };
        self.failed(format!("{detail}; stderr: {}", stderr.trim()))
    }

    /// Deletes the pod (whoever created it), without waiting for it to go.
    pub async fn delete(&self) -> Result<(), NodeError> {
        let limit = Duration::from_secs(10);
        let deadline = Instant::now() + limit;
        self.delete_by(deadline, limit, "deleting the pod")
            .await
            .map(drop)
    }

    /// Deletes the pod with no grace period unless `deadline` passes first (a timeout
    /// after `timeout`, while `doing`); `false` when it was not there.
    async fn delete_by(
        &self,
        deadline: Instant,
        timeout: Duration,
        doing: &str,
    ) -> Result<bool, NodeError> {
        let dp = DeleteParams::default().grace_period(0);
        match bounded(deadline, self.api().delete(&self.pod_name, &dp)).await {
            None => Err(self.timeout(timeout, doing)),
            Some(Ok(_)) => Ok(true),
            Some(Err(kube::Error::Api(s))) if s.code == 404 => Ok(false),
            Some(Err(e)) => Err(self.kube_error("delete", "pods", &e)),
        }
    }

    /// Deletes the pod if this session created it (a pod found running is left alone).
    pub async fn delete_if_created(&self) -> Result<(), NodeError> {
        if self.created.swap(false, Ordering::SeqCst) {
            self.delete().await
        } else {
            Ok(())
        }
    }
}

/// `fut` unless `deadline` passes first (`None` then).
async fn bounded<F: std::future::Future>(deadline: Instant, fut: F) -> Option<F::Output> {
    tokio::time::timeout_at(deadline, fut).await.ok()
}

/// Everything on stdout and stderr, then the exec's status.
async fn collect(process: &mut AttachedProcess) -> (String, String, Option<Status>) {
    let status = process.take_status();
    let (stdout, stderr) = (process.stdout(), process.stderr());
    let (out, err) = tokio::join!(read_all(stdout), read_all(stderr));
    let status = match status {
        Some(s) => s.await,
        None => None,
    };
    (out, err, status)
}

/// Everything a stream gives until it ends (nothing without a stream; a read error ends it).
async fn read_all(stream: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut text = String::new();
    if let Some(mut s) = stream {
        let _ = s.read_to_string(&mut text).await;
    }
    text
}

/// Where a debug pod stands for a session on `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PodState {
    /// Its container runs: exec can start.
    Running,
    /// Pending or creating, with no sign it cannot start.
    Starting,
    /// It will not start as it is (image pull failure, bad config): the reason.
    Stuck(String),
    /// Ended, being deleted, or on another node: replace it.
    Unusable(String),
}

/// Sorts a pod for a session on `node`.
pub(crate) fn pod_state(pod: &Pod, node: &str) -> PodState {
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Unusable("it is being deleted".into());
    }
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if bound.is_some_and(|b| b != node) {
        return PodState::Unusable(format!("it runs on node {}", bound.unwrap_or_default()));
    }
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    if matches!(phase, "Succeeded" | "Failed") {
        return PodState::Unusable(format!("it ended ({})", describe_pod(pod)));
    }
    let container = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == CONTAINER).or(cs.first()));
    let state = container.and_then(|c| c.state.as_ref());
    if let Some(waiting) = state.and_then(|s| s.waiting.as_ref())
        && let Some(reason) = waiting.reason.as_deref()
        && STUCK_REASONS.contains(&reason)
    {
        return PodState::Stuck(describe_pod(pod));
    }
    if state.is_some_and(|s| s.terminated.is_some()) {
        return PodState::Unusable(format!("its container ended ({})", describe_pod(pod)));
    }
    if phase == "Running" && state.is_some_and(|s| s.running.is_some()) {
        return PodState::Running;
    }
    PodState::Starting
}

/// One line on a pod's state: phase, reason, the container's waiting or terminated reason
/// with its message, and an unscheduled pod's condition message.
pub(crate) fn describe_pod(pod: &Pod) -> String {
    let Some(status) = pod.status.as_ref() else {
        return "phase unknown (no status yet)".into();
    };
    let mut parts = vec![format!(
        "phase {}",
        status.phase.as_deref().unwrap_or("Pending")
    )];
    if let Some(r) = &status.reason {
        parts.push(format!("reason {r}"));
    }
    if let Some(m) = &status.message {
        parts.push(m.clone());
    }
    for c in status.container_statuses.iter().flatten() {
        let Some(state) = &c.state else { continue };
        if let Some(w) = &state.waiting {
            parts.push(format!(
                "container {} waiting: {}{}",
                c.name,
                w.reason.as_deref().unwrap_or("unknown"),
                w.message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ));
        }
        if let Some(t) = &state.terminated {
            parts.push(format!(
                "container {} terminated: {} (exit {})",
                c.name,
                t.reason.as_deref().unwrap_or("unknown"),
                t.exit_code
            ));
        }
    }
    for cond in status.conditions.iter().flatten() {
        if cond.type_ == "PodScheduled" && cond.status == "False" {
            parts.push(format!(
                "unscheduled: {}",
                cond.message.as_deref().unwrap_or("no message")
            ));
        }
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some()
        && status.container_statuses.as_ref().is_none_or(Vec::is_empty)
        && status.phase.as_deref().is_none_or(|p| p == "Pending")
    {
        parts.push("no kubelet has started it".into());
    }
    parts.join(", ")
}

/// The exit code in an exec's final status: `Success` is 0, `NonZeroExitCode` carries the
/// code as a cause; anything else (no status, another failure) is an error.
pub(crate) fn exit_code(status: Option<&Status>) -> Result<i32, String> {
    let Some(s) = status else {
        return Err("the exec ended without an exit status (connection lost?)".into());
    };
    if s.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if s.reason.as_deref() == Some("NonZeroExitCode")
        && let Some(code) = s
            .details
            .iter()
            .flat_map(|d| d.causes.iter().flatten())
            .find(|c| c.reason.as_deref() == Some("ExitCode"))
            .and_then(|c| c.message.as_deref()?.parse::<i32>().ok())
    {
        return Ok(code);
    }
    Err(format!(
        "the exec failed: {}",
        s.message.as_deref().unwrap_or("no message")
    ))
}

/// A kube error as a [`NodeError`]: refusals say which permission is missing (or that the
/// namespace's Pod Security level forbids privileged pods), the rest say what was done.
pub(crate) fn kube_error(
    target: &str,
    namespace: &str,
    verb: &str,
    resource: &str,
    e: &kube::Error,
) -> NodeError {
    if let kube::Error::Api(s) = e
        && s.code == 403
        && s.message.contains("violates PodSecurity")
    {
        return NodeError::Forbidden {
            target: target.to_owned(),
            detail: format!(
                "the namespace {namespace} does not allow privileged pods ({}); use a namespace labelled pod-security.kubernetes.io/enforce=privileged (--namespace), or a node access other than debug-pod",
                s.message
            ),
        };
    }
    let request = crate::rbac::Request {
        verb,
        group: "",
        resource,
        namespace: Some(namespace),
    };
    if let Some(why) = crate::rbac::explain_kube_error(e, &request) {
        return NodeError::Forbidden {
            target: target.to_owned(),
            detail: why,
        };
    }
    if let kube::Error::Api(s) = e
        && s.code == 404
        && s.message.contains("namespaces")
    {
        return NodeError::DebugPod {
            target: target.to_owned(),
            detail: format!("the namespace {namespace} does not exist ({})", s.message),
        };
    }
    NodeError::DebugPod {
        target: target.to_owned(),
        detail: format!("{verb} {resource} failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    fn status(v: serde_json::Value) -> Status {
        serde_json::from_value(v).expect("status")
    }

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(
                json!({"status": "Failure", "code": code, "reason": reason, "message": message}),
            )
            .expect("status"),
        )
    }

    #[test]
    fn exit_codes_from_the_exec_status() {
        assert_eq!(
            exit_code(Some(&status(json!({"status": "Success"})))),
            Ok(0)
        );
        let failed = status(json!({"status": "Failure", "reason": "NonZeroExitCode",
            "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "97"}]}}));
        assert_eq!(exit_code(Some(&failed)), Ok(97));
        let other =
            status(json!({"status": "Failure", "reason": "InternalError", "message": "boom"}));
        assert!(exit_code(Some(&other)).expect_err("error").contains("boom"));
        assert!(exit_code(None).is_err());
    }

    #[test]
    fn pod_states() {
        let running = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "node"}]},
            "status": {"phase": "Running", "containerStatuses": [{"name": "node", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {}}}]}}),
        );
        assert_eq!(pod_state(&running, "n1"), PodState::Running);
        assert!(
            matches!(pod_state(&running, "n2"), PodState::Unusable(w) if w.contains("node n1"))
        );
        let pulling = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "node"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "node", "image": "nope:1", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image \"nope:1\""}}}]}}),
        );
        match pod_state(&pulling, "n1") {
            PodState::Stuck(why) => assert!(
                why.contains("phase Pending")
                    && why.contains("ImagePullBackOff")
                    && why.contains("nope:1"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        let creating = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "node"}]},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "node", "image": "b", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}}),
        );
        assert_eq!(pod_state(&creating, "n1"), PodState::Starting);
        let ended = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "node"}]},
            "status": {"phase": "Failed", "reason": "DeadlineExceeded", "message": "Pod was active on the node longer than the specified deadline"}}),
        );
        assert!(
            matches!(pod_state(&ended, "n1"), PodState::Unusable(w) if w.contains("DeadlineExceeded"))
        );
        let deleting = pod(
            json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "node"}]}, "status": {"phase": "Running"}}),
        );
        assert!(matches!(pod_state(&deleting, "n1"), PodState::Unusable(_)));
        let pending = pod(
            json!({"metadata": {"name": "p"}, "spec": {"nodeName": "ghost", "containers": [{"name": "node"}]},
            "status": {"phase": "Pending"}}),
        );
        assert_eq!(pod_state(&pending, "ghost"), PodState::Starting);
        assert!(
            describe_pod(&pending).contains("no kubelet has started it"),
            "{}",
            describe_pod(&pending)
        );
    }

    #[test]
    fn refusals_name_the_permission_or_the_pod_security_level() {
        let rbac = api_error(
            403,
            "Forbidden",
            "pods is forbidden: User \"system:serviceaccount:lab:readygap\" cannot create resource \"pods\" in API group \"\" in the namespace \"lab\"",
        );
        let e = kube_error("debug pod lab/x on n", "lab", "create", "pods", &rbac);
        let text = e.to_string();
        assert!(matches!(e, NodeError::Forbidden { .. }));
        assert!(
            text.contains("create pods") && text.contains("manifests/rbac"),
            "{text}"
        );
        let psa = api_error(
            403,
            "Forbidden",
            "pods \"readygap-node-n\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostPID=true)",
        );
        let text = kube_error("t", "apps", "create", "pods", &psa).to_string();
        assert!(
            text.contains("does not allow privileged pods")
                && text.contains("pod-security.kubernetes.io/enforce=privileged")
                && text.contains("baseline"),
            "{text}"
        );
        // A refused WebSocket upgrade has no Status: the request itself is explained.
        let upgrade = kube::Error::UpgradeConnection(
            kube::client::UpgradeConnectionError::ProtocolSwitch(http::StatusCode::FORBIDDEN),
        );
        let text = kube_error("t", "lab", "create", "pods/exec", &upgrade).to_string();
        assert!(
            text.contains("create pods/exec") && text.contains("-n lab"),
            "{text}"
        );
        let missing = api_error(404, "NotFound", "namespaces \"nope\" not found");
        let text = kube_error("t", "nope", "create", "pods", &missing).to_string();
        assert!(text.contains("namespace nope does not exist"), "{text}");
        let other = api_error(500, "InternalError", "etcd down");
        let text = kube_error("t", "lab", "get", "pods", &other).to_string();
        assert!(
            text.contains("get pods failed") && text.contains("etcd down"),
            "{text}"
        );
    }

    #[test]
    fn sessions_only_for_debug_pod_access() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let cfg = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
            let client = kube::Client::try_from(cfg).expect("client");
            let access = NodeAccess::DebugPod {
                node: NodeName::new("lab-node-1").expect("node"),
                image: "busybox:1.36".into(),
            };
            let s = DebugPodSession::for_access(client.clone(), "ns", &access).expect("session");
            assert_eq!(s.pod_name(), "readygap-node-lab-node-1");
            assert_eq!(
                s.target(),
                "debug pod ns/readygap-node-lab-node-1 on lab-node-1"
            );
            assert!(!s.created_pod());
            assert!(DebugPodSession::for_access(client, "ns", &NodeAccess::Local).is_err());
        });
    }
}
