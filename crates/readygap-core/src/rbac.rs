//! Kubernetes RBAC, the one matcher: which rules a user holds in a namespace (through
//! ClusterRoleBindings and RoleBindings) and whether any of them allows a request. The
//! lab's API server authorises with it and readygap's permission check (readygap-live
//! `rbac`) asks it whether a Role grants what readygap needs, so a Role that works in
//! the lab works on a cluster, and both read a rule the same way.
//!
//! Follows the RBAC authorizer of kubernetes/kubernetes:
//! - `plugin/pkg/auth/authorizer/rbac/rbac.go`: `RuleAllows` (a resource request needs
//!   the verb, the API group, the resource with its subresource and the name to match; a
//!   non-resource request the verb and the URL) and `appliesToUser` (a ServiceAccount
//!   subject without a namespace means the binding's namespace);
//! - `pkg/apis/rbac/v1/evaluation_helpers.go`: `VerbMatches`, `APIGroupMatches`
//!   (`*` matches any), `ResourceMatches` (`*`, the combined `pods/exec`, or `*/exec` for
//!   any resource's subresource; a rule on `pods` grants no subresource),
//!   `ResourceNameMatches` (no resourceNames: any name, else the requested name must be
//!   listed, so a request without a name (list, create) never matches a rule limited by
//!   names) and `NonResourceURLMatches` (`*`, exact, or a prefix ending in `*`);
//! - `pkg/registry/rbac/validation/rule.go` `VisitRulesFor`: every ClusterRoleBinding's
//!   ClusterRole applies in all namespaces; a RoleBinding applies only in its own
//!   namespace, whether it names a Role (of that namespace) or a ClusterRole.
//!
//! Pure: the caller reads Roles and bindings from wherever it keeps them.

/// One RBAC rule (`rbac/v1` PolicyRule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    /// API groups; `""` is the core group, `*` any.
    pub api_groups: Vec<String>,
    /// Resources, subresources after a slash (`pods/exec`), `*` any, `*/exec` any's exec.
    pub resources: Vec<String>,
    /// Object names the rule is limited to; empty: every name.
    pub resource_names: Vec<String>,
    /// Non-resource URLs (`/healthz`, `/api/*`), for rules that are not about resources.
    pub non_resource_urls: Vec<String>,
}

impl Rule {
    /// A rule on resources: `verbs` on `resources` of `groups`, every name.
    pub fn on_resources(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
        Rule {
            verbs: owned(verbs),
            api_groups: owned(groups),
            resources: owned(resources),
            ..Rule::default()
        }
    }

    /// A rule on non-resource URLs.
    pub fn on_urls(verbs: &[&str], urls: &[&str]) -> Rule {
        Rule {
            verbs: owned(verbs),
            non_resource_urls: owned(urls),
            ..Rule::default()
        }
    }
}

fn owned(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| (*x).to_owned()).collect()
}

/// What a request asks to do, as the authorizer sees it (`authorizer.Attributes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// A request on an API resource.
    Resource {
        verb: &'a str,
        /// `""` for the core group.
        group: &'a str,
        /// The resource alone (`pods`).
        resource: &'a str,
        /// `""` when there is none (`exec` of `pods/exec`).
        subresource: &'a str,
        /// `""` when the request names no object (list, watch, create).
        name: &'a str,
        /// `""` at cluster scope.
        namespace: &'a str,
    },
    /// A request on a URL outside the API (`/healthz`, `/version`).
    NonResource { verb: &'a str, path: &'a str },
}

impl<'a> Request<'a> {
    /// A request on `resource` as RBAC writes it (`pods` or `pods/exec`), for no
    /// particular object, at cluster scope; see [`Request::named`] and
    /// [`Request::in_namespace`].
    pub fn resource(verb: &'a str, group: &'a str, resource: &'a str) -> Self {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name: "",
            namespace: "",
        }
    }

    /// The same request on the object `name`.
    pub fn named(mut self, object: &'a str) -> Self {
        if let Request::Resource { name, .. } = &mut self {
            *name = object;
        }
        self
    }

    /// The same request in `namespace`.
    pub fn in_namespace(mut self, ns: &'a str) -> Self {
        if let Request::Resource { namespace, .. } = &mut self {
            *namespace = ns;
        }
        self
    }

    /// The namespace whose RoleBindings count: `""` (cluster-wide bindings only) for a
    /// non-resource request and a cluster-scoped one.
    pub fn namespace(&self) -> &'a str {
        match self {
            Request::Resource { namespace, .. } => namespace,
            Request::NonResource { .. } => "",
        }
    }
}

/// `*` in verbs, groups and resources (rbac/v1 `VerbAll`, `APIGroupAll`, `ResourceAll`).
const ALL: &str = "*";

fn any_or(list: &[String], wanted: &str) -> bool {
    list.iter().any(|x| x == ALL || x == wanted)
}

impl Rule {
    /// Whether this rule allows `request` (rbac.go `RuleAllows`).
    pub fn allows(&self, request: &Request<'_>) -> bool {
        match *request {
            Request::Resource {
                verb,
                group,
                resource,
                subresource,
                name,
                ..
            } => {
                any_or(&self.verbs, verb)
                    && any_or(&self.api_groups, group)
                    && self.resource_matches(resource, subresource)
                    && self.name_matches(name)
            }
            Request::NonResource { verb, path } => {
                any_or(&self.verbs, verb) && self.url_matches(path)
            }
        }
    }

    /// `ResourceMatches`: `*`, the combined `resource/subresource`, or `*/subresource`.
    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            r == ALL
                || match r.split_once('/') {
                    // "pods/exec" or "*/exec": only a request for that subresource.
                    Some((res, sub)) => {
                        !subresource.is_empty()
                            && sub == subresource
                            && (res == resource || res == ALL)
                    }
                    None => subresource.is_empty() && r == resource,
                }
        })
    }

    /// `ResourceNameMatches`: no names, or the requested name among them.
    fn name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }

    /// `NonResourceURLMatches`: `*`, the path itself, or a prefix ending in `*`.
    fn url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == ALL || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
        })
    }
}

/// Whether any of `rules` allows `request`.
pub fn allowed(rules: &[Rule], request: &Request<'_>) -> bool {
    rules.iter().any(|r| r.allows(request))
}

/// Who is asking: the user name and groups the authenticator gave
/// (a ServiceAccount is `system:serviceaccount:NS:NAME`).
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub name: &'a str,
    pub groups: &'a [String],
}

/// A subject of a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    /// `namespace` empty: the binding's namespace.
    ServiceAccount {
        namespace: String,
        name: String,
    },
    /// A kind RBAC does not know: applies to nobody.
    Other,
}

impl Subject {
    /// Whether this subject is `user`, in a binding of `binding_namespace` (`""` for a
    /// ClusterRoleBinding) (rbac.go `appliesToUser`).
    pub fn applies_to(&self, user: &Identity<'_>, binding_namespace: &str) -> bool {
        match self {
            Subject::User(name) => name == user.name,
            Subject::Group(name) => user.groups.iter().any(|g| g == name),
            Subject::ServiceAccount { namespace, name } => {
                let ns = if namespace.is_empty() {
                    binding_namespace
                } else {
                    namespace
                };
                !ns.is_empty() && user.name == format!("system:serviceaccount:{ns}:{name}")
            }
            Subject::Other => false,
        }
    }
}

/// The role a binding grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRef {
    /// A Role of the binding's namespace.
    Role(String),
    ClusterRole(String),
}

impl RoleRef {
    /// The name of the role.
    pub fn name(&self) -> &str {
        match self {
            RoleRef::Role(n) | RoleRef::ClusterRole(n) => n,
        }
    }

    /// The error RBAC's rule visitor reports for a binding to a missing role (the API
    /// server's NotFound text, `role.rbac.authorization.k8s.io "x" not found`).
    pub fn not_found(&self) -> String {
        let kind = match self {
            RoleRef::Role(_) => "role",
            RoleRef::ClusterRole(_) => "clusterrole",
        };
        format!(
            "{kind}.rbac.authorization.k8s.io \"{}\" not found",
            self.name()
        )
    }
}

/// A RoleBinding (`namespace` set) or a ClusterRoleBinding (`namespace` `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub namespace: Option<String>,
    pub role: RoleRef,
    pub subjects: Vec<Subject>,
}

/// The rules `user` holds for a request in `namespace` (`""`: cluster-wide bindings only),
/// and the errors met on the way (bindings to missing roles), in the order of `bindings`
/// (rule.go `VisitRulesFor`). `role(r, ns)` gives the rules of role `r` (a Role looked up
/// in `ns`, the binding's namespace; a ClusterRole at cluster scope), `None` when it does
/// not exist.
pub fn rules_for<'b>(
    user: &Identity<'_>,
    namespace: &str,
    bindings: impl IntoIterator<Item = &'b Binding>,
    mut role: impl FnMut(&RoleRef, &str) -> Option<Vec<Rule>>,
) -> (Vec<Rule>, Vec<String>) {
    let mut rules = Vec::new();
    let mut errors = Vec::new();
    for binding in bindings {
        let binding_ns = match &binding.namespace {
            None => "",
            Some(ns) if !namespace.is_empty() && ns == namespace => ns.as_str(),
            Some(_) => continue,
        };
        if !binding
            .subjects
            .iter()
            .any(|s| s.applies_to(user, binding_ns))
        {
            continue;
        }
        match role(&binding.role, binding_ns) {
            Some(r) => rules.extend(r),
            None => errors.push(binding.role.not_found()),
        }
    }
    (rules, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(s: &[&str]) -> Vec<String> {
        owned(s)
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
        Rule::on_resources(verbs, groups, resources)
    }

    fn get(resource: &str) -> Request<'_> {
        Request::resource("get", "", resource)
    }

    #[test]
    fn wildcards_match_any_verb_group_and_resource() {
        let everything = rule(&["*"], &["*"], &["*"]);
        assert!(everything.allows(&Request::resource("delete", "apps", "deployments")));
        assert!(everything.allows(&get("pods/exec")));
        assert!(rule(&["*"], &[""], &["pods"]).allows(&Request::resource("patch", "", "pods")));
        assert!(
            rule(&["get"], &["*"], &["deployments"]).allows(&Request::resource(
                "get",
                "apps",
                "deployments"
            ))
        );
        // A wildcard verb is not a wildcard group.
        assert!(
            !rule(&["*"], &[""], &["deployments"]).allows(&Request::resource(
                "get",
                "apps",
                "deployments"
            ))
        );
        // "*" is the wildcard; a verb that merely contains it is not.
        assert!(!rule(&["get*"], &[""], &["pods"]).allows(&get("pods")));
    }

    #[test]
    fn the_core_group_is_the_empty_string() {
        let core = rule(&["get"], &[""], &["pods"]);
        assert!(core.allows(&get("pods")));
        assert!(!core.allows(&Request::resource("get", "apps", "pods")));
        // No groups at all: nothing (a rule must list "" for the core group).
        assert!(!rule(&["get"], &[], &["pods"]).allows(&get("pods")));
    }

    #[test]
    fn subresources_are_granted_by_name_or_star_slash() {
        let pods = rule(&["get", "create"], &[""], &["pods"]);
        assert!(pods.allows(&get("pods")));
        // A rule on pods grants none of its subresources.
        assert!(!pods.allows(&get("pods/exec")));
        let exec = rule(&["create"], &[""], &["pods/exec"]);
        assert!(exec.allows(&Request::resource("create", "", "pods/exec")));
        assert!(!exec.allows(&Request::resource("create", "", "pods")));
        assert!(!exec.allows(&Request::resource("create", "", "pods/portforward")));
        let any_exec = rule(&["create"], &[""], &["*/exec"]);
        assert!(any_exec.allows(&Request::resource("create", "", "pods/exec")));
        assert!(!any_exec.allows(&Request::resource("create", "", "pods")));
        assert!(!any_exec.allows(&Request::resource("create", "", "pods/log")));
        // "pods/*" is not a wildcard in RBAC: only "*" and "*/sub" are.
        assert!(!rule(&["get"], &[""], &["pods/*"]).allows(&get("pods/log")));
    }

    #[test]
    fn resource_names_limit_a_rule_to_those_objects() {
        let mut named = rule(&["delete"], &[""], &["pods"]);
        named.resource_names = own(&["a", "b"]);
        assert!(named.allows(&Request::resource("delete", "", "pods").named("b")));
        assert!(!named.allows(&Request::resource("delete", "", "pods").named("c")));
        // A request for no particular object (list, create) never matches a named rule.
        assert!(!named.allows(&Request::resource("delete", "", "pods")));
        named.resource_names.clear();
        assert!(named.allows(&Request::resource("delete", "", "pods")));
        assert!(named.allows(&Request::resource("delete", "", "pods").named("c")));
        // Names apply to subresources too.
        let mut proxy = rule(&["create"], &[""], &["pods/proxy"]);
        proxy.resource_names = own(&["p:1"]);
        assert!(proxy.allows(&Request::resource("create", "", "pods/proxy").named("p:1")));
        assert!(!proxy.allows(&Request::resource("create", "", "pods/proxy").named("p")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_star_prefix() {
        let urls = Rule {
            verbs: own(&["get"]),
            non_resource_urls: own(&["/healthz", "/apis/*"]),
            ..Rule::default()
        };
        let url = |path| Request::NonResource { verb: "get", path };
        assert!(urls.allows(&url("/healthz")));
        assert!(!urls.allows(&url("/healthz/ping")));
        assert!(urls.allows(&url("/apis/apps/v1")));
        assert!(!urls.allows(&url("/apis")));
        assert!(!urls.allows(&Request::NonResource {
            verb: "post",
            path: "/healthz"
        }));
        // A resource rule grants no URL, a URL rule no resource.
        assert!(!rule(&["*"], &["*"], &["*"]).allows(&url("/healthz")));
        assert!(!urls.allows(&get("pods")));
    }

    fn sa(ns: &str, name: &str) -> String {
        format!("system:serviceaccount:{ns}:{name}")
    }

    #[test]
    fn cluster_roles_apply_everywhere_through_cluster_role_bindings_only_in_place_through_role_bindings()
     {
        let name = sa("lab", "readygap");
        let groups = own(&["system:serviceaccounts", "system:authenticated"]);
        let user = Identity {
            name: &name,
            groups: &groups,
        };
        let bindings = [
            Binding {
                namespace: None,
                role: RoleRef::ClusterRole("nodes".into()),
                subjects: vec![Subject::ServiceAccount {
                    namespace: "lab".into(),
                    name: "readygap".into(),
                }],
            },
            Binding {
                namespace: Some("lab".into()),
                role: RoleRef::ClusterRole("pods".into()),
                // Without a namespace: the binding's.
                subjects: vec![Subject::ServiceAccount {
                    namespace: String::new(),
                    name: "readygap".into(),
                }],
            },
            Binding {
                namespace: Some("lab".into()),
                role: RoleRef::Role("missing".into()),
                subjects: vec![Subject::Group("system:authenticated".into())],
            },
            Binding {
                namespace: Some("lab".into()),
                role: RoleRef::Role("deployments".into()),
                subjects: vec![Subject::User("someone-else".into())],
            },
        ];
        let role = |r: &RoleRef, ns: &str| match (r, ns) {
            (RoleRef::ClusterRole(n), "") if n == "nodes" => {
                Some(vec![rule(&["list"], &[""], &["nodes"])])
            }
            (RoleRef::ClusterRole(n), "") if n == "pods" => {
                Some(vec![rule(&["delete"], &[""], &["pods"])])
            }
            (RoleRef::Role(n), "lab") if n == "deployments" => {
                Some(vec![rule(&["patch"], &["apps"], &["deployments"])])
            }
            _ => None,
        };
        // ClusterRole lookups are at cluster scope whatever the binding's namespace.
        let role = |r: &RoleRef, ns: &str| match r {
            RoleRef::ClusterRole(_) => role(r, ""),
            RoleRef::Role(_) => role(r, ns),
        };
        let delete = Request::resource("delete", "", "pods").named("p");
        let (in_lab, errors) = rules_for(&user, "lab", &bindings, role);
        assert!(allowed(&in_lab, &delete.in_namespace("lab")));
        assert!(allowed(&in_lab, &Request::resource("list", "", "nodes")));
        assert!(!allowed(
            &in_lab,
            &Request::resource("patch", "apps", "deployments")
        ));
        assert_eq!(
            errors,
            vec!["role.rbac.authorization.k8s.io \"missing\" not found"]
        );
        // Another namespace: only the ClusterRoleBinding's rules.
        let (elsewhere, errors) = rules_for(&user, "other", &bindings, role);
        assert!(!allowed(&elsewhere, &delete.in_namespace("other")));
        assert!(allowed(&elsewhere, &Request::resource("list", "", "nodes")));
        assert!(errors.is_empty());
        // Cluster scope: the RoleBindings count nowhere.
        let (cluster, _) = rules_for(&user, "", &bindings, role);
        assert_eq!(cluster, vec![rule(&["list"], &[""], &["nodes"])]);
        // A ServiceAccount subject of another namespace is another user.
        let other_name = sa("other", "readygap");
        let other = Identity {
            name: &other_name,
            groups: &[],
        };
        assert!(rules_for(&other, "lab", &bindings, role).0.is_empty());
    }
}
