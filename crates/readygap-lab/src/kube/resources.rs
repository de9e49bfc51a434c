//! The resource types the lab's API server serves: group, version, plural, kind, scope and
//! short names, used by discovery, URL routing and the store. ConfigMaps, Secrets and Jobs are
//! only stored (a Job is marked complete at creation): the lab simulates no Job pods.
//! ServiceAccounts and the RBAC objects are stored and read by the authorizer (`authz`).

/// One served resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
}

impl Resource {
    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

#[allow(clippy::too_many_arguments)]
const fn res(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        categories,
    }
}

pub const NAMESPACES: Resource = res(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    false,
    &["ns"],
    &[],
);
pub const NODES: Resource = res("", "v1", "nodes", "node", "Node", false, &["no"], &[]);
pub const PODS: Resource = res("", "v1", "pods", "pod", "Pod", true, &["po"], &["all"]);
pub const SERVICES: Resource = res(
    "",
    "v1",
    "services",
    "service",
    "Service",
    true,
    &["svc"],
    &["all"],
);
pub const CORE_EVENTS: Resource = res("", "v1", "events", "event", "Event", true, &["ev"], &[]);
pub const PVCS: Resource = res(
    "",
    "v1",
    "persistentvolumeclaims",
    "persistentvolumeclaim",
    "PersistentVolumeClaim",
    true,
    &["pvc"],
    &[],
);
pub const CONFIGMAPS: Resource = res(
    "",
    "v1",
    "configmaps",
    "configmap",
    "ConfigMap",
    true,
    &["cm"],
    &[],
);
pub const SECRETS: Resource = res("", "v1", "secrets", "secret", "Secret", true, &[], &[]);
pub const JOBS: Resource = res("batch", "v1", "jobs", "job", "Job", true, &[], &["all"]);
pub const DEPLOYMENTS: Resource = res(
    "apps",
    "v1",
    "deployments",
    "deployment",
    "Deployment",
    true,
    &["deploy"],
    &["all"],
);
pub const REPLICASETS: Resource = res(
    "apps",
    "v1",
    "replicasets",
    "replicaset",
    "ReplicaSet",
    true,
    &["rs"],
    &["all"],
);
pub const ENDPOINT_SLICES: Resource = res(
    "discovery.k8s.io",
    "v1",
    "endpointslices",
    "endpointslice",
    "EndpointSlice",
    true,
    &[],
    &[],
);
pub const EVENTS: Resource = res(
    "events.k8s.io",
    "v1",
    "events",
    "event",
    "Event",
    true,
    &["ev"],
    &[],
);

pub const SERVICEACCOUNTS: Resource = res(
    "",
    "v1",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    true,
    &["sa"],
    &[],
);
pub const ROLES: Resource = res(
    "rbac.authorization.k8s.io",
    "v1",
    "roles",
    "role",
    "Role",
    true,
    &[],
    &[],
);
pub const ROLEBINDINGS: Resource = res(
    "rbac.authorization.k8s.io",
    "v1",
    "rolebindings",
    "rolebinding",
    "RoleBinding",
    true,
    &[],
    &[],
);
pub const CLUSTERROLES: Resource = res(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterroles",
    "clusterrole",
    "ClusterRole",
    false,
    &[],
    &[],
);
pub const CLUSTERROLEBINDINGS: Resource = res(
    "rbac.authorization.k8s.io",
    "v1",
    "clusterrolebindings",
    "clusterrolebinding",
    "ClusterRoleBinding",
    false,
    &[],
    &[],
);

/// Every served resource.
pub const ALL: &[Resource] = &[
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    CORE_EVENTS,
    PVCS,
    CONFIGMAPS,
    SECRETS,
    DEPLOYMENTS,
    REPLICASETS,
    ENDPOINT_SLICES,
    EVENTS,
    JOBS,
    SERVICEACCOUNTS,
    ROLES,
    ROLEBINDINGS,
    CLUSTERROLES,
    CLUSTERROLEBINDINGS,
];

/// The API groups other than core, in discovery order.
pub const GROUPS: &[&str] = &[
    "apps",
    "batch",
    "discovery.k8s.io",
    "events.k8s.io",
    "rbac.authorization.k8s.io",
    "authorization.k8s.io",
];

/// Find a resource by group and plural.
pub fn find(group: &str, plural: &str) -> Option<Resource> {
    ALL.iter()
        .copied()
        .find(|r| r.group == group && r.plural == plural)
}

/// A parsed resource path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// Subresource and the rest of the path (`proxy`, `api/tags`).
    pub sub: Option<String>,
    pub rest: String,
}

/// Parse `/api/v1/...` or `/apis/{group}/{version}/...` into a resource path.
pub fn parse_path(path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match segs.as_slice() {
        ["api", "v1", rest @ ..] => ("", rest),
        ["apis", group, "v1", rest @ ..] => (*group, rest),
        _ => return None,
    };
    if rest.is_empty() || rest[0].is_empty() {
        return None;
    }
    let (namespace, plural, tail) = if rest[0] == "namespaces" && rest.len() >= 3 {
        (Some(rest[1].to_string()), rest[2], &rest[3..])
    } else {
        (None, rest[0], &rest[1..])
    };
    let resource = find(group, plural)?;
    let name = tail
        .first()
        .filter(|s| !s.is_empty())
        .map(|s| s.to_string());
    let sub = tail.get(1).map(|s| s.to_string());
    let rest_path = if tail.len() > 2 {
        tail[2..].join("/")
    } else {
        String::new()
    };
    Some(ResourcePath {
        resource,
        namespace,
        name,
        sub,
        rest: rest_path,
    })
}
