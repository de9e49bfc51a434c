//! Kubernetes permissions: the table of what readygap needs, a check of RBAC rules
//! against it, and plain explanations of the API server's 403 answers.
//!
//! The table ([`READYGAP_PERMISSIONS`]) is the single list the manifests in
//! `manifests/rbac` are checked against (tests/manifests.rs): the full Role grants every
//! namespaced entry, the read-only Role none of the entries that `--read-only` gives up,
//! and `manifests/rbac/cluster` the cluster-scoped ones.
//!
//! [`explain_forbidden`] turns a 403 [`Status`] into one sentence naming the verb, the
//! resource and the manifest that grants it. It parses the message the API server
//! writes for every authorisation failure (k8s.io/apiserver `forbiddenMessage`):
//!
//! ```text
//! pods "x" is forbidden: User "system:serviceaccount:ns:readygap" cannot create resource "pods/exec" in API group "" in the namespace "ns"
//! nodes is forbidden: User "u" cannot list resource "nodes" in API group "" at the cluster scope
//! forbidden: User "u" cannot get path "/metrics"
//! ```
//!
//! optionally followed by `: <authorizer's reason>` (webhook authorizers add one).

use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::core::Status;
use readygap_core::rbac;

/// Where a permission is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In the lab namespace, by the Role in `manifests/rbac`.
    Namespaced,
    /// Cluster-wide, by the optional ClusterRole in `manifests/rbac/cluster`.
    Cluster,
}

/// One verb on one resource that readygap uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// RBAC verb: get, list, watch, create, patch, delete.
    pub verb: &'static str,
    /// API group; "" is the core group.
    pub group: &'static str,
    /// Resource, with its subresource after a slash as RBAC writes it (`pods/exec`).
    pub resource: &'static str,
    pub scope: Scope,
    /// Whether `--read-only` keeps using it. Permissions that change the cluster or run
    /// anything inside a pod (delete, patch, exec, port-forward) are not read-only.
    pub read_only: bool,
    /// What readygap does with it, for messages and documentation.
    pub purpose: &'static str,
}

impl Permission {
    /// The manifest directory that grants this permission.
    pub fn manifest(&self) -> &'static str {
        match self.scope {
            Scope::Namespaced => "manifests/rbac",
            Scope::Cluster => "manifests/rbac/cluster",
        }
    }
}

const fn ns(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    read_only: bool,
    purpose: &'static str,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        scope: Scope::Namespaced,
        read_only,
        purpose,
    }
}

const fn cluster(verb: &'static str, resource: &'static str, purpose: &'static str) -> Permission {
    Permission {
        verb,
        group: "",
        resource,
        scope: Scope::Cluster,
        read_only: true,
        purpose,
    }
}

const WATCH_PODS: &str = "watch the serving pod and its replacement";
const EXEC: &str = "stream cgroup memory files and drop caches inside the pod (WebSocket exec opens with GET, 1.35+ also checks create)";
const PORT_FORWARD: &str = "reach the runtime when pods/proxy is not usable (WebSocket port-forward opens with GET, 1.35+ also checks create)";
const EVENTS: &str = "read Kubernetes events (scheduling, pulls, probe failures, OOM kills)";
const SLICES: &str = "see endpoint readiness as the Service sees it";
const ROLLOUTS: &str = "follow rollouts";
const SERVICES: &str = "find the Service in front of the runtime";
const NODES: &str = "read node labels and addresses (to guess the SSH host)";

/// Everything readygap asks the API server for.
pub static READYGAP_PERMISSIONS: &[Permission] = &[
    ns("get", "", "pods", true, WATCH_PODS),
    ns("list", "", "pods", true, WATCH_PODS),
    ns("watch", "", "pods", true, WATCH_PODS),
    ns(
        "delete",
        "",
        "pods",
        false,
        "delete the serving pod to start a trial (T0)",
    ),
    ns(
        "create",
        "",
        "pods",
        false,
        "create the node-access debug pod (--node-access debug-pod; the namespace must allow privileged pods)",
    ),
    ns("get", "", "pods/exec", false, EXEC),
    ns("create", "", "pods/exec", false, EXEC),
    ns("get", "", "pods/portforward", false, PORT_FORWARD),
    ns("create", "", "pods/portforward", false, PORT_FORWARD),
    ns(
        "get",
        "",
        "pods/proxy",
        true,
        "probe the runtime's HTTP API through the API server",
    ),
    // A POST through the pod proxy is verb `create` (apiserver
    // pkg/endpoints/request/requestinfo.go maps the HTTP method for connect subresources
    // as for any other: POST = create).
    ns(
        "create",
        "",
        "pods/proxy",
        false,
        "send the T3 inference, the preload and the unload (POSTs through the pod proxy)",
    ),
    ns(
        "get",
        "",
        "pods/log",
        true,
        "read the runtime's request log (the silent observer)",
    ),
    ns(
        "get",
        "",
        "services/proxy",
        true,
        "probe the runtime through the Service after Ready (the study's T2)",
    ),
    ns("get", "", "services", true, SERVICES),
    ns("list", "", "services", true, SERVICES),
    ns("watch", "", "services", true, SERVICES),
    ns("get", "", "events", true, EVENTS),
    ns("list", "", "events", true, EVENTS),
    ns("watch", "", "events", true, EVENTS),
    ns("get", "events.k8s.io", "events", true, EVENTS),
    ns("list", "events.k8s.io", "events", true, EVENTS),
    ns("watch", "events.k8s.io", "events", true, EVENTS),
    ns("get", "discovery.k8s.io", "endpointslices", true, SLICES),
    ns("list", "discovery.k8s.io", "endpointslices", true, SLICES),
    ns("watch", "discovery.k8s.io", "endpointslices", true, SLICES),
    ns("get", "apps", "deployments", true, ROLLOUTS),
    ns("list", "apps", "deployments", true, ROLLOUTS),
    ns("watch", "apps", "deployments", true, ROLLOUTS),
    ns(
        "patch",
        "apps",
        "deployments",
        false,
        "restart the rollout (patch the pod template)",
    ),
    ns("get", "apps", "replicasets", true, ROLLOUTS),
    ns("list", "apps", "replicasets", true, ROLLOUTS),
    ns("watch", "apps", "replicasets", true, ROLLOUTS),
    cluster("get", "nodes", NODES),
    cluster("list", "nodes", NODES),
    cluster("watch", "nodes", NODES),
    cluster(
        "get",
        "nodes/proxy",
        "read the kubelet Summary API (memory when exec is not allowed)",
    ),
];

/// The table entry for a verb on a resource (`resource` with `/subresource`), if any.
pub fn lookup(verb: &str, group: &str, resource: &str) -> Option<&'static Permission> {
    READYGAP_PERMISSIONS
        .iter()
        .find(|p| p.verb == verb && p.group == group && p.resource == resource)
}

/// Whether any of `rules` allows `verb` on `resource` (with `/subresource`) in `group`
/// for every object name, by the RBAC authorizer's matching (readygap-core `rbac`, the
/// matcher the lab's API server authorises with): `*` matches any verb, group or
/// resource, and `*/sub` matches any resource's `sub`. A rule limited by `resourceNames`
/// does not count, since readygap acts on pods whose names it cannot know in advance (the
/// request names no object, which such a rule never matches).
pub fn rules_allow(rules: &[PolicyRule], verb: &str, group: &str, resource: &str) -> bool {
    let request = rbac::Request::resource(verb, group, resource);
    rules.iter().any(|rule| core_rule(rule).allows(&request))
}

/// A Kubernetes PolicyRule as readygap-core's matcher reads it.
fn core_rule(rule: &PolicyRule) -> rbac::Rule {
    let list = |v: &Option<Vec<String>>| v.clone().unwrap_or_default();
    rbac::Rule {
        verbs: rule.verbs.clone(),
        api_groups: list(&rule.api_groups),
        resources: list(&rule.resources),
        resource_names: list(&rule.resource_names),
        non_resource_urls: list(&rule.non_resource_urls),
    }
}

/// The permissions among `wanted` that `rules` do not grant.
pub fn missing<'a>(
    rules: &[PolicyRule],
    wanted: impl IntoIterator<Item = &'a Permission>,
) -> Vec<&'a Permission> {
    wanted
        .into_iter()
        .filter(|p| !rules_allow(rules, p.verb, p.group, p.resource))
        .collect()
}

/// What was refused, parsed from a 403 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    /// The user the API server saw (a ServiceAccount is `system:serviceaccount:NS:NAME`).
    pub user: String,
    pub verb: String,
    pub target: ForbiddenTarget,
    /// Extra words some authorizers (webhooks) append after the standard sentence.
    pub reason: Option<String>,
}

/// The object of a refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForbiddenTarget {
    /// A resource request; `resource` includes `/subresource`; `namespace` is `None` at
    /// cluster scope.
    Resource {
        group: String,
        resource: String,
        namespace: Option<String>,
    },
    /// A non-resource URL such as `/metrics`.
    Path(String),
}

/// Parses the API server's authorisation failure sentence out of a 403 message.
/// Returns `None` when the message does not have that shape.
pub fn parse_forbidden(message: &str) -> Option<Forbidden> {
    let start = message.find("User \"")? + "User ".len();
    let mut rest = &message[start..];
    let user = take_quoted(&mut rest)?;
    rest = rest.strip_prefix(" cannot ")?;
    let (verb, after_verb) = rest.split_once(' ')?;
    rest = after_verb;
    let target = if let Some(after) = rest.strip_prefix("resource ") {
        rest = after;
        let resource = take_quoted(&mut rest)?;
        rest = rest.strip_prefix(" in API group ")?;
        let group = take_quoted(&mut rest)?;
        let namespace = if let Some(after) = rest.strip_prefix(" in the namespace ") {
            rest = after;
            Some(take_quoted(&mut rest)?)
        } else {
            rest = rest.strip_prefix(" at the cluster scope")?;
            None
        };
        ForbiddenTarget::Resource {
            group,
            resource,
            namespace,
        }
    } else {
        rest = rest.strip_prefix("path ")?;
        ForbiddenTarget::Path(take_quoted(&mut rest)?)
    };
    let reason = rest
        .strip_prefix(':')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned);
    if reason.is_none() && !rest.trim().is_empty() {
        return None;
    }
    Some(Forbidden {
        user,
        verb: verb.to_owned(),
        target,
        reason,
    })
}

/// Reads a Go `%q` string at the start of `rest` and advances past it. Handles the
/// escapes Go writes for ordinary text (`\"`, `\\`, `\n`, `\t`); others are kept as
/// written.
fn take_quoted(rest: &mut &str) -> Option<String> {
    let body = rest.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => {
                *rest = &body[i + 1..];
                return Some(out);
            }
            '\\' => match chars.next()? {
                (_, 'n') => out.push('\n'),
                (_, 't') => out.push('\t'),
                (_, e @ ('"' | '\\')) => out.push(e),
                (_, other) => {
                    out.push('\\');
                    out.push(other);
                }
            },
            c => out.push(c),
        }
    }
    None
}

/// How `kubectl auth can-i` names a resource: `pods/exec`, `deployments.apps`,
/// `endpointslices.discovery.k8s.io`.
fn resource_name(group: &str, resource: &str) -> String {
    if group.is_empty() {
        return resource.to_owned();
    }
    match resource.split_once('/') {
        Some((res, sub)) => format!("{res}.{group}/{sub}"),
        None => format!("{resource}.{group}"),
    }
}

/// One sentence for a parsed refusal: who, which verb on what, where, and what to apply.
pub fn explain(forbidden: &Forbidden) -> String {
    let (who, as_user) = match forbidden.user.as_str() {
        "" => ("readygap".to_owned(), String::new()),
        user => (format!("readygap (as {user})"), format!(" --as {user}")),
    };
    let verb = &forbidden.verb;
    let mut text = match &forbidden.target {
        ForbiddenTarget::Path(path) => format!(
            "forbidden: {who} may not `{verb}` the path {path}; readygap's manifests grant no \
             non-resource paths, so this request is not one readygap should make"
        ),
        ForbiddenTarget::Resource {
            group,
            resource,
            namespace,
        } => {
            let what = resource_name(group, resource);
            let (place, in_ns) = match namespace {
                Some(ns) => (format!("in namespace {ns}"), format!(" -n {ns}")),
                None => ("at cluster scope".to_owned(), String::new()),
            };
            let remedy = match lookup(verb, group, resource) {
                Some(p) if p.scope == Scope::Cluster => format!(
                    "apply {} (optional: it lets readygap {})",
                    p.manifest(),
                    p.purpose
                ),
                Some(p) if p.read_only => format!("apply {}", p.manifest()),
                Some(p) => format!("apply {} (or use --read-only)", p.manifest()),
                None => "readygap does not expect to need this; it is not granted by \
                         manifests/rbac"
                    .to_owned(),
            };
            let check = format!("kubectl auth can-i {verb} {what}{in_ns}{as_user}");
            format!(
                "forbidden: {who} may not `{verb} {what}` {place}; {remedy}; check with `{check}`"
            )
        }
    };
    if let Some(reason) = &forbidden.reason {
        text.push_str("; the authorizer added: ");
        text.push_str(reason);
    }
    text
}

/// Explains an API error [`Status`] that refused a request (HTTP 403). A message that
/// does not have the API server's usual shape is still reported, with the resource from
/// the status details when there is one.
pub fn explain_forbidden(status: &Status) -> String {
    if let Some(parsed) = parse_forbidden(&status.message) {
        return explain(&parsed);
    }
    let resource = status
        .details
        .as_ref()
        .filter(|d| !d.kind.is_empty())
        .map(|d| format!(" on {}", resource_name(&d.group, &d.kind)))
        .unwrap_or_default();
    let message = Some(status.message.as_str()).filter(|m| !m.is_empty());
    let message = message.unwrap_or("no message");
    format!(
        "forbidden (HTTP {}){resource}: {message}; readygap's permissions are in manifests/rbac \
         (and manifests/rbac/cluster)",
        status.code
    )
}

/// A request readygap made, for refusals that come without a [`Status`] body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    /// With `/subresource`, as RBAC writes it (`pods/exec`).
    pub resource: &'a str,
    /// `None` for cluster-scoped requests.
    pub namespace: Option<&'a str>,
}

impl<'a> Request<'a> {
    pub const fn new(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
    ) -> Self {
        Self {
            verb,
            group,
            resource,
            namespace,
        }
    }
}

/// Explains a refused request when only the request itself is known. WebSocket
/// upgrades (exec, port-forward) fail with a bare 403 and no Status to parse.
pub fn explain_request(request: &Request<'_>) -> String {
    explain(&Forbidden {
        user: String::new(),
        verb: request.verb.to_owned(),
        target: ForbiddenTarget::Resource {
            group: request.group.to_owned(),
            resource: request.resource.to_owned(),
            namespace: request.namespace.map(str::to_owned),
        },
        reason: None,
    })
}

/// The explanation of a kube client error if it is a refusal (HTTP 403), else `None`.
/// `request` is what was asked; it is used when the error carries no Status (a refused
/// WebSocket upgrade).
pub fn explain_kube_error(error: &kube::Error, request: &Request<'_>) -> Option<String> {
    match error {
        kube::Error::Api(status) if status.code == 403 || status.reason == "Forbidden" => {
            Some(explain_forbidden(status))
        }
        kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
            code,
        )) if code.as_u16() == 403 => Some(explain_request(request)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SA: &str = "system:serviceaccount:llm-recovery-lab:readygap";

    fn msg(prefix: &str, tail: &str) -> String {
        format!("{prefix} is forbidden: User \"{SA}\" cannot {tail}")
    }

    fn status_from_json(json: &str) -> Status {
        serde_json::from_str(json).expect("test status parses")
    }

    /// Every purpose reads as "it lets readygap <purpose>" in the hint of a refusal: it
    /// starts with a verb (issue 31: "it lets readygap node labels and addresses").
    #[test]
    fn every_purpose_starts_with_a_verb() {
        const VERBS: [&str; 12] = [
            "watch", "delete", "create", "stream", "reach", "probe", "send", "read", "see",
            "follow", "find", "restart",
        ];
        for p in READYGAP_PERMISSIONS {
            let first = p.purpose.split_whitespace().next().unwrap_or_default();
            assert!(
                VERBS.contains(&first),
                "{} {}: {:?}",
                p.verb,
                p.resource,
                p.purpose
            );
        }
        let f = Forbidden {
            user: String::new(),
            verb: "list".into(),
            target: ForbiddenTarget::Resource {
                group: String::new(),
                resource: "nodes".into(),
                namespace: None,
            },
            reason: None,
        };
        let text = explain(&f);
        assert!(
            text.contains("(optional: it lets readygap read node labels and addresses"),
            "{text}"
        );
    }

    #[test]
    fn parses_named_subresource_refusal() {
        let m = msg(
            "pods \"ollama-7d9c8b6f5-x2x7k\"",
            "create resource \"pods/exec\" in API group \"\" in the namespace \"llm-recovery-lab\"",
        );
        let f = parse_forbidden(&m).expect("parses");
        assert_eq!(f.user, SA);
        assert_eq!(f.verb, "create");
        assert_eq!(
            f.target,
            ForbiddenTarget::Resource {
                group: String::new(),
                resource: "pods/exec".into(),
                namespace: Some("llm-recovery-lab".into()),
            }
        );
        assert_eq!(f.reason, None);
    }

    #[test]
    fn explains_exec_refusal_with_manifest_and_read_only_hint() {
        let status = status_from_json(
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"pods \"ollama-7d9c8b6f5-x2x7k\" is forbidden: User \"system:serviceaccount:llm-recovery-lab:readygap\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"llm-recovery-lab\"",
            "reason":"Forbidden","details":{"name":"ollama-7d9c8b6f5-x2x7k","kind":"pods"},"code":403}"#,
        );
        let text = explain_forbidden(&status);
        assert!(
            text.starts_with(
                "forbidden: readygap (as system:serviceaccount:llm-recovery-lab:readygap) may not \
                 `create pods/exec` in namespace llm-recovery-lab; apply manifests/rbac (or use \
                 --read-only)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "`kubectl auth can-i create pods/exec -n llm-recovery-lab --as \
                 system:serviceaccount:llm-recovery-lab:readygap`"
            ),
            "{text}"
        );
    }

    #[test]
    fn read_only_permission_does_not_suggest_read_only_mode() {
        let m = msg(
            "endpointslices.discovery.k8s.io",
            "watch resource \"endpointslices\" in API group \"discovery.k8s.io\" in the namespace \"llm-recovery-lab\"",
        );
        let text = explain(&parse_forbidden(&m).expect("parses"));
        assert!(
            text.contains(
                "may not `watch endpointslices.discovery.k8s.io` in namespace llm-recovery-lab; \
                 apply manifests/rbac;"
            ),
            "{text}"
        );
        assert!(!text.contains("--read-only"), "{text}");
    }

    #[test]
    fn explains_grouped_write_refusal() {
        let m = msg(
            "deployments.apps \"ollama\"",
            "patch resource \"deployments\" in API group \"apps\" in the namespace \"llm-recovery-lab\"",
        );
        let text = explain(&parse_forbidden(&m).expect("parses"));
        assert!(text.contains("may not `patch deployments.apps`"), "{text}");
        assert!(text.contains("(or use --read-only)"), "{text}");
    }

    #[test]
    fn cluster_scope_points_to_cluster_manifest() {
        let m = msg(
            "nodes",
            "list resource \"nodes\" in API group \"\" at the cluster scope",
        );
        let f = parse_forbidden(&m).expect("parses");
        assert_eq!(
            f.target,
            ForbiddenTarget::Resource {
                group: String::new(),
                resource: "nodes".into(),
                namespace: None,
            }
        );
        let text = explain(&f);
        assert!(
            text.contains("may not `list nodes` at cluster scope"),
            "{text}"
        );
        assert!(
            text.contains("apply manifests/rbac/cluster (optional"),
            "{text}"
        );
        assert!(
            text.contains("kubectl auth can-i list nodes --as"),
            "{text}"
        );
    }

    #[test]
    fn keeps_webhook_authorizer_reason() {
        // GKE's webhook authorizer appends its own reason after a colon.
        let m = format!(
            "{}: requires one of [\"container.pods.exec\"] permission(s).",
            msg(
                "pods \"ollama-0\"",
                "get resource \"pods/exec\" in API group \"\" in the namespace \"default\""
            )
        );
        let f = parse_forbidden(&m).expect("parses");
        assert_eq!(
            f.reason.as_deref(),
            Some("requires one of [\"container.pods.exec\"] permission(s).")
        );
        let text = explain(&f);
        assert!(text.contains("in namespace default"), "{text}");
        assert!(
            text.ends_with(
                "the authorizer added: requires one of [\"container.pods.exec\"] permission(s)."
            ),
            "{text}"
        );
    }

    #[test]
    fn unexpected_permission_is_called_out() {
        let m = msg(
            "secrets",
            "list resource \"secrets\" in API group \"\" in the namespace \"llm-recovery-lab\"",
        );
        let text = explain(&parse_forbidden(&m).expect("parses"));
        assert!(text.contains("may not `list secrets`"), "{text}");
        assert!(
            text.contains("readygap does not expect to need this"),
            "{text}"
        );
    }

    #[test]
    fn parses_non_resource_path_and_anonymous_user() {
        let f =
            parse_forbidden("forbidden: User \"system:anonymous\" cannot get path \"/metrics\"")
                .expect("parses");
        assert_eq!(f.user, "system:anonymous");
        assert_eq!(f.verb, "get");
        assert_eq!(f.target, ForbiddenTarget::Path("/metrics".into()));
        assert!(explain(&f).contains("may not `get` the path /metrics"));
    }

    #[test]
    fn unescapes_go_quoted_user() {
        let f = parse_forbidden(
            "pods is forbidden: User \"odd\\\"name\" cannot list resource \"pods\" in API group \"\" in the namespace \"x\"",
        )
        .expect("parses");
        assert_eq!(f.user, "odd\"name");
    }

    #[test]
    fn rejects_messages_of_another_shape() {
        for m in [
            "",
            "the server could not find the requested resource",
            "pods \"x\" is forbidden: User \"u\" cannot",
            "pods is forbidden: User \"u\" cannot list resource \"pods\" in API group \"\"",
            "pods is forbidden: User \"u\" cannot list resource \"pods\" in API group \"\" in the namespace \"x",
            "pods is forbidden: User \"u\" cannot list resource \"pods\" in API group \"\" at the cluster scope and more",
            "User \"unterminated",
        ] {
            assert_eq!(parse_forbidden(m), None, "{m:?}");
        }
    }

    #[test]
    fn unparsed_status_still_names_resource_and_code() {
        let status = status_from_json(
            r#"{"status":"Failure","message":"admission webhook denied the request",
            "reason":"Forbidden","details":{"name":"ollama","group":"apps","kind":"deployments"},"code":403}"#,
        );
        let text = explain_forbidden(&status);
        assert_eq!(
            text,
            "forbidden (HTTP 403) on deployments.apps: admission webhook denied the request; \
             readygap's permissions are in manifests/rbac (and manifests/rbac/cluster)"
        );
        let empty = explain_forbidden(&Status::default());
        assert!(empty.contains("no message"), "{empty}");
    }

    const EXEC_REQUEST: Request<'static> = Request {
        verb: "create",
        group: "",
        resource: "pods/exec",
        namespace: Some("llm-recovery-lab"),
    };

    #[test]
    fn explains_a_request_without_a_status() {
        assert_eq!(
            explain_request(&EXEC_REQUEST),
            "forbidden: readygap may not `create pods/exec` in namespace llm-recovery-lab; \
             apply manifests/rbac (or use --read-only); check with `kubectl auth can-i create \
             pods/exec -n llm-recovery-lab`"
        );
    }

    #[test]
    fn kube_errors_are_explained_only_when_forbidden() {
        let refused_upgrade = kube::Error::UpgradeConnection(
            kube::client::UpgradeConnectionError::ProtocolSwitch(axum::http::StatusCode::FORBIDDEN),
        );
        assert_eq!(
            explain_kube_error(&refused_upgrade, &EXEC_REQUEST),
            Some(explain_request(&EXEC_REQUEST))
        );
        let other_upgrade = kube::Error::UpgradeConnection(
            kube::client::UpgradeConnectionError::ProtocolSwitch(axum::http::StatusCode::NOT_FOUND),
        );
        assert_eq!(explain_kube_error(&other_upgrade, &EXEC_REQUEST), None);

        let m = msg(
            "pods \"ollama-0\"",
            "delete resource \"pods\" in API group \"\" in the namespace \"llm-recovery-lab\"",
        );
        let forbidden = Status {
            code: 403,
            reason: "Forbidden".into(),
            message: m,
            ..Status::default()
        };
        let text = explain_kube_error(&kube::Error::Api(forbidden.boxed()), &EXEC_REQUEST)
            .expect("a refusal");
        // The Status wins over the caller's guess of the request.
        assert!(text.contains("may not `delete pods`"), "{text}");
        let not_found = Status {
            code: 404,
            reason: "NotFound".into(),
            message: "pods \"x\" not found".into(),
            ..Status::default()
        };
        assert_eq!(
            explain_kube_error(&kube::Error::Api(not_found.boxed()), &EXEC_REQUEST),
            None
        );
    }

    /// Go's %q for the characters these tests generate.
    fn go_quote(s: &str) -> String {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(message in ".{0,200}") {
            let _ = parse_forbidden(&message);
        }

        #[test]
        fn parses_what_the_api_server_writes(
            user in "[a-z:\"\\\\-]{1,40}",
            verb in "(get|list|watch|create|patch|delete)",
            resource in "[a-z]{1,12}(/[a-z]{1,8})?",
            group in "([a-z.]{1,20})?",
            namespace in proptest::option::of("[a-z0-9-]{1,20}"),
            name in proptest::option::of("[a-z0-9-]{1,20}"),
            reason in proptest::option::of("[ -~]{1,40}"),
        ) {
            let base = resource.split('/').next().unwrap_or_default();
            let gr = if group.is_empty() { base.to_owned() } else { format!("{base}.{group}") };
            let subject = match &name {
                Some(n) => format!("{gr} {}", go_quote(n)),
                None => gr,
            };
            let place = match &namespace {
                Some(ns) => format!(" in the namespace {}", go_quote(ns)),
                None => " at the cluster scope".to_owned(),
            };
            let mut message = format!(
                "{subject} is forbidden: User {} cannot {verb} resource {} in API group {}{place}",
                go_quote(&user), go_quote(&resource), go_quote(&group)
            );
            let reason = reason.map(|r| r.trim().to_owned()).filter(|r| !r.is_empty());
            if let Some(r) = &reason {
                message.push_str(": ");
                message.push_str(r);
            }
            let parsed = parse_forbidden(&message).expect("parses");
            proptest::prop_assert_eq!(parsed, Forbidden {
                user,
                verb,
                target: ForbiddenTarget::Resource { group, resource, namespace },
                reason,
            });
        }
    }

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..PolicyRule::default()
        }
    }

    #[test]
    fn rule_matching_follows_rbac() {
        let rules = [
            rule(&[""], &["pods"], &["get", "list"]),
            rule(&["apps"], &["*"], &["watch"]),
            rule(&[""], &["*/exec"], &["create"]),
        ];
        assert!(rules_allow(&rules, "get", "", "pods"));
        assert!(!rules_allow(&rules, "delete", "", "pods"));
        // A resource rule does not grant its subresources.
        assert!(!rules_allow(&rules, "get", "", "pods/exec"));
        assert!(rules_allow(&rules, "watch", "apps", "replicasets"));
        assert!(!rules_allow(&rules, "watch", "", "pods"));
        assert!(rules_allow(&rules, "create", "", "pods/exec"));
        assert!(!rules_allow(&rules, "create", "", "pods/portforward"));
        let everything = [rule(&["*"], &["*"], &["*"])];
        assert!(missing(&everything, READYGAP_PERMISSIONS).is_empty());
    }

    #[test]
    fn resource_names_restrict_a_rule() {
        let mut named = rule(&[""], &["pods"], &["delete"]);
        named.resource_names = Some(vec!["ollama-0".into()]);
        assert!(!rules_allow(&[named.clone()], "delete", "", "pods"));
        named.resource_names = Some(vec![]);
        assert!(rules_allow(&[named], "delete", "", "pods"));
    }

    #[test]
    fn table_is_consistent() {
        for (i, p) in READYGAP_PERMISSIONS.iter().enumerate() {
            assert!(
                ["get", "list", "watch", "create", "patch", "delete"].contains(&p.verb),
                "{p:?}"
            );
            // No duplicates: lookup finds this very entry.
            let found = lookup(p.verb, p.group, p.resource).expect("listed");
            assert!(
                std::ptr::eq(found, &READYGAP_PERMISSIONS[i]),
                "duplicate {p:?}"
            );
            // Anything that writes or runs code in a pod is not read-only.
            let writes = matches!(p.verb, "create" | "patch" | "delete")
                || p.resource == "pods/exec"
                || p.resource == "pods/portforward";
            assert_eq!(p.read_only, !writes, "{p:?}");
        }
        assert_eq!(lookup("escalate", "", "pods"), None);
    }
}
