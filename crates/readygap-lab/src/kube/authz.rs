//! Who is asking, and may they: the lab API server's authentication and RBAC authorisation,
//! as a real API server does them, so that a Role that works in the lab works on a cluster.
//!
//! - Authentication: the bearer token of the lab's kubeconfig is the cluster admin
//!   (`kubernetes-admin`, group `system:masters`, as kubeadm's admin.conf); a token the lab
//!   issued through TokenRequest (`kubectl create token SA`) is that ServiceAccount while it
//!   is unexpired and the ServiceAccount still exists. Any other token is 401 with the API
//!   server's Status body (apiserver `pkg/endpoints/filters/authentication.go`,
//!   `Unauthorized`: `apierrors.NewUnauthorized("Unauthorized")`). A request without
//!   credentials is the admin, because the lab serves plain HTTP and kubectl withholds
//!   credentials there (see [`authenticate`]); the admin may impersonate a ServiceAccount
//!   (`kubectl --as`). Serving TLS would let the lab refuse credential-less requests too.
//! - Request attributes follow apiserver `pkg/endpoints/request/requestinfo.go`
//!   (`NewRequestInfo`): POST = create, GET/HEAD = get (list without a name, watch with
//!   `?watch` other than false/0), PUT = update, PATCH = patch, DELETE = delete
//!   (deletecollection without a name); connect subresources (exec, portforward, attach,
//!   proxy) take the same mapping, so a POST through `pods/proxy` is `create`.
//! - A WebSocket upgrade of exec, attach or portforward (a GET, so `get`) must also be
//!   allowed `create` since 1.35 (feature gate `AuthorizePodWebsocketUpgradeCreatePermission`,
//!   beta and on by default from 1.35; kubernetes/website
//!   `content/en/docs/reference/command-line-tools-reference/feature-gates/AuthorizePodWebsocketUpgradeCreatePermission.md`,
//!   kubernetes/kubernetes PR 134577). `pods/proxy` gets no such extra check.
//! - RBAC: the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings stored in the lab,
//!   read into readygap-core's `rbac` bindings and rules and matched there, by the one
//!   matcher readygap's own permission check uses (after the RBAC authorizer,
//!   `plugin/pkg/auth/authorizer/rbac/rbac.go`: `*` wildcards, `*/sub` subresource
//!   wildcards, resourceNames, nonResourceURLs with a trailing `*`), plus the bootstrap policy every authenticated user has
//!   (`system:discovery`, `system:basic-user`, `system:public-info-viewer` from
//!   `plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`).
//! - A refusal is 403 with the body `responsewriters.ForbiddenStatusError` writes:
//!   `pods "x" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource
//!   "pods/proxy" in API group "" in the namespace "ns"`, reason Forbidden, details
//!   {name, group, kind = the resource}.
//! - SelfSubjectAccessReview and SelfSubjectRulesReview (`kubectl auth can-i`, `--list`) and
//!   TokenRequest (`serviceaccounts/token`) are served here.
//!
//! Not imitated: client certificates, RBAC's escalation check on writes of Roles and
//! bindings, aggregated ClusterRoles, audiences.

// Refusals are ready HTTP responses (a Kubernetes Status); boxing them buys nothing here.
#![allow(clippy::result_large_err)]

use super::resources::{CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES, SERVICEACCOUNTS};
use super::responses::{error, json_response};
use super::store::Store;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use readygap_core::rbac::{self, Binding, Identity, RoleRef, Rule, Subject};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;

/// The bearer token of the kubeconfig the lab writes: the lab's cluster admin.
pub const ADMIN_TOKEN: &str = "readygap-lab-token";
/// The admin's user name (as kubeadm's admin.conf).
pub const ADMIN_USER: &str = "kubernetes-admin";
/// The issuer and default audience of ServiceAccount tokens.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// A TokenRequest without expirationSeconds gets an hour (the API server's default).
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
/// The API server refuses shorter tokens (`expirationSeconds` must be at least 10 minutes).
const MIN_TOKEN_SECONDS: i64 = 600;

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// The lab's admin (group `system:masters`: everything is allowed).
    Admin,
    /// A ServiceAccount, from a token the lab issued.
    ServiceAccount { namespace: String, name: String },
}

impl User {
    /// The user name the API server reports (`system:serviceaccount:NS:NAME`).
    pub fn name(&self) -> String {
        match self {
            User::Admin => ADMIN_USER.to_owned(),
            User::ServiceAccount { namespace, name } => {
                format!("system:serviceaccount:{namespace}:{name}")
            }
        }
    }

    /// The user's groups.
    pub fn groups(&self) -> Vec<String> {
        match self {
            User::Admin => vec!["system:masters".into(), "system:authenticated".into()],
            User::ServiceAccount { namespace, .. } => vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }
}

/// A token the lab issued.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    name: String,
    uid: String,
    expires: DateTime<Utc>,
}

/// The tokens the lab issued (in memory: a restarted lab forgets them, as a new signing
/// key would invalidate them).
#[derive(Default)]
pub struct Tokens {
    issued: Mutex<HashMap<String, Issued>>,
}

impl Tokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn unauthorized() -> Response {
    error(401, "Unauthorized", "Unauthorized")
}

/// The user an `Impersonate-User` header names, for the admin (who may impersonate, as
/// `kubectl --as` does): only ServiceAccounts (`system:serviceaccount:NS:NAME`).
fn impersonated(headers: &HeaderMap) -> Option<Result<User, Response>> {
    let name = headers
        .get("impersonate-user")?
        .to_str()
        .ok()?
        .trim()
        .to_owned();
    let sa = name
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains(':'));
    Some(match sa {
        Some((namespace, n)) => Ok(User::ServiceAccount {
            namespace: namespace.to_owned(),
            name: n.to_owned(),
        }),
        None => Err(error(
            403,
            "Forbidden",
            &format!("the lab impersonates ServiceAccounts only, not {name:?}"),
        )),
    })
}

/// The user of a request, or the 401 answer for a token the lab does not know (expired,
/// revoked with its ServiceAccount, or never issued).
///
/// Over plain HTTP kubectl sends no credentials (client-go `tools/clientcmd/client_config.go`:
/// "only try to read the auth information if we are secure"), while it does send
/// `Impersonate-User` (`--as`). So on the plain-HTTP lab a request without credentials is
/// the lab's admin, who may impersonate a ServiceAccount; on the TLS lab
/// (`require_credentials`, a real engine: [`super::tls`]) it is 401, as on an API server
/// without anonymous auth. As the admin,
/// `kubectl --as system:serviceaccount:NS:SA auth can-i …` is checked as that account.
/// kube-rs (readygap) sends its bearer token over HTTP too, so a ServiceAccount
/// kubeconfig from `kubectl create token` is authorised as that account.
pub fn authenticate(
    tokens: &Tokens,
    store: &Store,
    headers: &HeaderMap,
    now: DateTime<Utc>,
    require_credentials: bool,
) -> Result<User, Response> {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty());
    let Some(authorization) = authorization else {
        if require_credentials {
            return Err(unauthorized());
        }
        return impersonated(headers).unwrap_or(Ok(User::Admin));
    };
    let token = authorization
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .ok_or_else(unauthorized)?;
    if token == ADMIN_TOKEN {
        return impersonated(headers).unwrap_or(Ok(User::Admin));
    }
    let issued = tokens.lock().get(&token).cloned();
    let Some(issued) = issued.filter(|i| i.expires > now) else {
        return Err(unauthorized());
    };
    // A bound token dies with its ServiceAccount (a new one of the same name has another uid).
    let alive = store
        .get(SERVICEACCOUNTS, &issued.namespace, &issued.name)
        .is_some_and(|sa| sa["metadata"]["uid"].as_str() == Some(issued.uid.as_str()));
    if !alive {
        return Err(unauthorized());
    }
    if headers.contains_key("impersonate-user") {
        return Err(error(
            403,
            "Forbidden",
            "a ServiceAccount may not impersonate in the lab",
        ));
    }
    Ok(User::ServiceAccount {
        namespace: issued.namespace,
        name: issued.name,
    })
}

/// What a request asks to do, as the authorizer sees it (`authorizer.Attributes`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    pub resource_request: bool,
    pub verb: String,
    pub group: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The URL path (for non-resource requests).
    pub path: String,
}

impl Attributes {
    /// `resource/subresource`, as RBAC rules name it.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// The request as the RBAC matcher takes it.
    pub fn request(&self) -> rbac::Request<'_> {
        if self.resource_request {
            rbac::Request::Resource {
                verb: &self.verb,
                group: &self.group,
                resource: &self.resource,
                subresource: &self.subresource,
                name: &self.name,
                namespace: &self.namespace,
            }
        } else {
            rbac::Request::NonResource {
                verb: &self.verb,
                path: &self.path,
            }
        }
    }
}

/// The attributes of a request, after apiserver `requestinfo.go` `NewRequestInfo`.
pub fn request_attributes(method: &Method, path: &str, query: &[(String, String)]) -> Attributes {
    let mut a = Attributes {
        verb: method.as_str().to_ascii_lowercase(),
        path: path.to_owned(),
        ..Attributes::default()
    };
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        vec![]
    } else {
        trimmed.split('/').collect()
    };
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return a;
    }
    let grouped = parts[0] == "apis";
    parts.remove(0);
    if grouped {
        if parts.len() < 3 {
            return a;
        }
        a.group = parts.remove(0).to_owned();
    }
    a.resource_request = true;
    parts.remove(0); // the version
    let mut special = false;
    if matches!(parts.first(), Some(&("proxy" | "watch"))) && parts.len() >= 2 {
        a.verb = parts.remove(0).to_owned();
        special = true;
    } else {
        a.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_owned();
    }
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        a.namespace = parts[1].to_owned();
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    let no_subresources = special && a.verb == "proxy";
    if parts.len() >= 3 && !no_subresources {
        a.subresource = parts[2].to_owned();
    }
    if parts.len() >= 2 {
        a.name = parts[1].to_owned();
    }
    if let Some(r) = parts.first() {
        a.resource = (*r).to_owned();
    }
    if a.name.is_empty() && a.verb == "get" {
        a.verb = match query.iter().find(|(k, _)| k == "watch") {
            Some((_, v)) if matches!(v.to_ascii_lowercase().as_str(), "false" | "0") => "list",
            Some(_) => "watch",
            None => "list",
        }
        .to_owned();
    }
    if a.name.is_empty() && a.verb == "delete" {
        a.verb = "deletecollection".to_owned();
    }
    a
}

/// Whether a request is a WebSocket upgrade.
pub fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A stored Role's rule (`rbac/v1` PolicyRule JSON).
fn rule_from_json(v: &Value) -> Rule {
    Rule {
        verbs: strings(&v["verbs"]),
        api_groups: strings(&v["apiGroups"]),
        resources: strings(&v["resources"]),
        resource_names: strings(&v["resourceNames"]),
        non_resource_urls: strings(&v["nonResourceURLs"]),
    }
}

/// A rule as SelfSubjectRulesReview lists it (a ResourceRule or a NonResourceRule).
fn rule_to_json(rule: &Rule) -> Value {
    let mut v = json!({"verbs": rule.verbs});
    if rule.non_resource_urls.is_empty() {
        v["apiGroups"] = json!(rule.api_groups);
        v["resources"] = json!(rule.resources);
        if !rule.resource_names.is_empty() {
            v["resourceNames"] = json!(rule.resource_names);
        }
    } else {
        v["nonResourceURLs"] = json!(rule.non_resource_urls);
    }
    v
}

/// The bootstrap rules every authenticated user has: discovery and public info
/// (`system:discovery`, `system:public-info-viewer`) and reviewing their own access
/// (`system:basic-user`).
fn authenticated_rules() -> Vec<Rule> {
    vec![
        Rule::on_urls(
            &["get"],
            &[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/openapi",
                "/openapi/*",
                "/version",
                "/version/",
                "/healthz",
                "/livez",
                "/readyz",
            ],
        ),
        Rule::on_resources(
            &["create"],
            &["authorization.k8s.io"],
            &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        ),
        Rule::on_resources(
            &["create"],
            &["authentication.k8s.io"],
            &["selfsubjectreviews"],
        ),
    ]
}

/// A binding's subject (a ServiceAccount without a namespace means the binding's).
fn subject_from_json(subject: &Value) -> Subject {
    let name = subject["name"].as_str().unwrap_or_default().to_owned();
    match subject["kind"].as_str().unwrap_or_default() {
        "User" => Subject::User(name),
        "Group" => Subject::Group(name),
        "ServiceAccount" => Subject::ServiceAccount {
            namespace: subject["namespace"].as_str().unwrap_or_default().to_owned(),
            name,
        },
        _ => Subject::Other,
    }
}

/// A stored RoleBinding (`namespace` set) or ClusterRoleBinding; `None` for a roleRef
/// kind RBAC does not know. A ClusterRoleBinding always names a ClusterRole.
fn binding_from_json(binding: &Value, namespace: Option<&str>) -> Option<Binding> {
    let name = binding["roleRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let role = match (namespace, binding["roleRef"]["kind"].as_str()) {
        (None, _) | (Some(_), Some("ClusterRole")) => RoleRef::ClusterRole(name),
        (Some(_), Some("Role")) => RoleRef::Role(name),
        _ => return None,
    };
    let subjects = binding["subjects"]
        .as_array()
        .map(|ss| ss.iter().map(subject_from_json).collect())
        .unwrap_or_default();
    Some(Binding {
        namespace: namespace.map(str::to_owned),
        role,
        subjects,
    })
}

/// The rules `user` holds in `namespace` (cluster-wide ones only for ""), and the errors
/// met on the way (a binding to a missing role), as RBAC's rule visitor collects them:
/// the bootstrap rules, then the stored bindings' (readygap-core `rbac::rules_for`).
fn rules_for(store: &Store, user: &User, namespace: &str) -> (Vec<Rule>, Vec<String>) {
    let mut bindings: Vec<Binding> = store
        .list(CLUSTERROLEBINDINGS, None)
        .0
        .iter()
        .filter_map(|b| binding_from_json(b, None))
        .collect();
    if !namespace.is_empty() {
        bindings.extend(
            store
                .list(ROLEBINDINGS, Some(namespace))
                .0
                .iter()
                .filter_map(|b| binding_from_json(b, Some(namespace))),
        );
    }
    let role = |r: &RoleRef, ns: &str| {
        let stored = match r {
            RoleRef::Role(name) => store.get(ROLES, ns, name),
            RoleRef::ClusterRole(name) => store.get(CLUSTERROLES, "", name),
        }?;
        Some(
            stored["rules"]
                .as_array()
                .map(|rs| rs.iter().map(rule_from_json).collect())
                .unwrap_or_default(),
        )
    };
    let (name, groups) = (user.name(), user.groups());
    let identity = Identity {
        name: &name,
        groups: &groups,
    };
    let (granted, errors) = rbac::rules_for(&identity, namespace, &bindings, role);
    let mut rules = authenticated_rules();
    rules.extend(granted);
    (rules, errors)
}

/// The authorizer's decision: allowed, or refused with RBAC's reason (may be empty).
pub fn decide(store: &Store, user: &User, a: &Attributes) -> Result<(), String> {
    if *user == User::Admin {
        return Ok(());
    }
    // Non-resource URLs are granted only cluster-wide.
    let ns = if a.resource_request {
        a.namespace.as_str()
    } else {
        ""
    };
    let (rules, errors) = rules_for(store, user, ns);
    if rbac::allowed(&rules, &a.request()) {
        return Ok(());
    }
    Err(if errors.is_empty() {
        String::new()
    } else {
        format!("RBAC: [{}]", errors.join(", "))
    })
}

/// The API server's 403 for refused attributes (`responsewriters.ForbiddenStatusError`).
pub fn forbidden(user: &User, a: &Attributes, reason: &str) -> Response {
    let who = user.name();
    let sentence = if !a.resource_request {
        format!("User {who:?} cannot {} path {:?}", a.verb, a.path)
    } else if !a.namespace.is_empty() {
        format!(
            "User {who:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            a.verb,
            a.combined_resource(),
            a.group,
            a.namespace
        )
    } else {
        format!(
            "User {who:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            a.verb,
            a.combined_resource(),
            a.group
        )
    };
    let sentence = if reason.is_empty() {
        sentence
    } else {
        format!("{sentence}: {reason}")
    };
    // apierrors.NewForbidden: "<resource>[.<group>] [\"name\"] is forbidden: …", or
    // "forbidden: …" without a resource.
    let qualified = match (a.resource.is_empty(), a.group.is_empty()) {
        (true, _) => String::new(),
        (false, true) => a.resource.clone(),
        (false, false) => format!("{}.{}", a.resource, a.group),
    };
    let message = match (qualified.is_empty(), a.name.is_empty()) {
        (true, _) => format!("forbidden: {sentence}"),
        (false, true) => format!("{qualified} is forbidden: {sentence}"),
        (false, false) => format!("{qualified} {:?} is forbidden: {sentence}", a.name),
    };
    let mut details = serde_json::Map::new();
    if !a.name.is_empty() {
        details.insert("name".into(), json!(a.name));
    }
    if !a.group.is_empty() {
        details.insert("group".into(), json!(a.group));
    }
    if !a.resource.is_empty() {
        details.insert("kind".into(), json!(a.resource));
    }
    let mut body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": "Forbidden", "code": 403});
    if !details.is_empty() {
        body["details"] = Value::Object(details);
    }
    json_response(StatusCode::FORBIDDEN, &body)
}

/// Authorise a request: the attributes from its method, path and query; a WebSocket
/// upgrade of exec, attach or portforward must also be allowed `create` (1.35+).
pub fn authorize(
    store: &Store,
    user: &User,
    method: &Method,
    path: &str,
    query: &[(String, String)],
    headers: &HeaderMap,
) -> Result<(), Response> {
    let a = request_attributes(method, path, query);
    decide(store, user, &a).map_err(|reason| forbidden(user, &a, &reason))?;
    let connect = a.group.is_empty()
        && a.resource == "pods"
        && matches!(a.subresource.as_str(), "exec" | "attach" | "portforward");
    if connect && a.verb == "get" && is_websocket_upgrade(headers) {
        let create = Attributes {
            verb: "create".into(),
            ..a
        };
        decide(store, user, &create).map_err(|reason| forbidden(user, &create, &reason))?;
    }
    Ok(())
}

fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// `POST /api/v1/namespaces/NS/serviceaccounts/NAME/token` (TokenRequest): a new token of
/// the ServiceAccount, JWT-shaped like the API server's (header.claims.signature; the
/// signature is random and the lab remembers the token instead of verifying it).
pub fn token_request(
    tokens: &Tokens,
    store: &Store,
    namespace: &str,
    name: &str,
    body: &[u8],
    now: DateTime<Utc>,
) -> Response {
    let Some(sa) = store.get(SERVICEACCOUNTS, namespace, name) else {
        return error(
            404,
            "NotFound",
            &format!("serviceaccounts \"{name}\" not found"),
        );
    };
    let req: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                return error(
                    400,
                    "BadRequest",
                    &format!("the request body is not valid JSON: {e}"),
                );
            }
        }
    };
    let seconds = req["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < MIN_TOKEN_SECONDS {
        return error(
            422,
            "Invalid",
            &format!(
                "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
        );
    }
    let audiences = match strings(&req["spec"]["audiences"]) {
        a if a.is_empty() => vec![ISSUER.to_owned()],
        a => a,
    };
    let uid = sa["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let expires = now + ChronoDuration::seconds(seconds);
    let header = json!({"alg": "RS256", "kid": "readygap-lab"});
    let claims = json!({
        "aud": audiences, "exp": expires.timestamp(), "iat": now.timestamp(),
        "nbf": now.timestamp(), "iss": ISSUER,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    });
    let signature: [u8; 32] = rand::random();
    let token = format!(
        "{}.{}.{}",
        base64url(header.to_string().as_bytes()),
        base64url(claims.to_string().as_bytes()),
        base64url(&signature)
    );
    tokens.lock().insert(
        token.clone(),
        Issued {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            uid,
            expires,
        },
    );
    let mut spec = req["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    spec["audiences"] = json!(audiences);
    spec["expirationSeconds"] = json!(seconds);
    json_response(
        StatusCode::CREATED,
        &json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)},
            "spec": spec,
            "status": {"token": token,
                       "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}
        }),
    )
}

/// Serves `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` and
/// `…/selfsubjectrulesreviews`; None for any other request.
pub fn self_review(
    store: &Store,
    user: &User,
    method: &Method,
    path: &str,
    body: &[u8],
) -> Option<Response> {
    let kind = match path.trim_end_matches('/') {
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" => "SelfSubjectAccessReview",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews" => "SelfSubjectRulesReview",
        _ => return None,
    };
    if *method != Method::POST {
        return Some(error(
            405,
            "MethodNotAllowed",
            &format!(
                "the server does not allow this method on the requested resource: {method} {path}"
            ),
        ));
    }
    // kubectl sends these as protobuf (and does not retry as JSON); answers are JSON.
    let parsed = if super::proto::is_protobuf(body) {
        super::proto::decode_object(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    let mut review: Value = match parsed {
        Ok(v) => v,
        Err(e) => {
            return Some(error(
                400,
                "BadRequest",
                &format!("the request body is not valid JSON or protobuf: {e}"),
            ));
        }
    };
    let spec = review["spec"].clone();
    review["kind"] = json!(kind);
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    if kind == "SelfSubjectAccessReview" {
        let a = if spec["resourceAttributes"].is_object() {
            let r = &spec["resourceAttributes"];
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            Attributes {
                resource_request: true,
                verb: s("verb"),
                group: s("group"),
                namespace: s("namespace"),
                resource: s("resource"),
                subresource: s("subresource"),
                name: s("name"),
                path: String::new(),
            }
        } else {
            let r = &spec["nonResourceAttributes"];
            Attributes {
                verb: r["verb"].as_str().unwrap_or_default().to_owned(),
                path: r["path"].as_str().unwrap_or_default().to_owned(),
                ..Attributes::default()
            }
        };
        review["status"] = match decide(store, user, &a) {
            Ok(()) => json!({"allowed": true}),
            Err(reason) if reason.is_empty() => json!({"allowed": false}),
            Err(reason) => json!({"allowed": false, "reason": reason}),
        };
    } else {
        let ns = spec["namespace"].as_str().unwrap_or_default();
        let (rules, errors) = if *user == User::Admin {
            (
                vec![
                    Rule::on_resources(&["*"], &["*"], &["*"]),
                    Rule::on_urls(&["*"], &["*"]),
                ],
                vec![],
            )
        } else {
            rules_for(store, user, ns)
        };
        let (non_resource, resource): (Vec<Rule>, Vec<Rule>) = rules
            .into_iter()
            .partition(|r| !r.non_resource_urls.is_empty());
        let mut status = json!({
            "resourceRules": resource.iter().map(rule_to_json).collect::<Vec<_>>(),
            "nonResourceRules": non_resource.iter().map(rule_to_json).collect::<Vec<_>>(),
            "incomplete": !errors.is_empty(),
        });
        if !errors.is_empty() {
            status["evaluationError"] = json!(errors.join(", "));
        }
        review["status"] = status;
    }
    Some(json_response(StatusCode::CREATED, &review))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: Method, path: &str, query: &[(&str, &str)]) -> Attributes {
        let q: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        request_attributes(&method, path, &q)
    }

    #[test]
    fn verbs_follow_requestinfo() {
        let ns = "/api/v1/namespaces/lab/pods";
        let cases = [
            (Method::GET, ns.to_owned(), vec![], "list", "pods", "", ""),
            (
                Method::GET,
                ns.to_owned(),
                vec![("watch", "1")],
                "watch",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                ns.to_owned(),
                vec![("watch", "false")],
                "list",
                "pods",
                "",
                "",
            ),
            (
                Method::GET,
                format!("{ns}/p"),
                vec![],
                "get",
                "pods",
                "",
                "p",
            ),
            (
                Method::POST,
                ns.to_owned(),
                vec![],
                "create",
                "pods",
                "",
                "",
            ),
            (
                Method::PUT,
                format!("{ns}/p"),
                vec![],
                "update",
                "pods",
                "",
                "p",
            ),
            (
                Method::PATCH,
                format!("{ns}/p"),
                vec![],
                "patch",
                "pods",
                "",
                "p",
            ),
            (
                Method::DELETE,
                format!("{ns}/p"),
                vec![],
                "delete",
                "pods",
                "",
                "p",
            ),
            (
                Method::DELETE,
                ns.to_owned(),
                vec![],
                "deletecollection",
                "pods",
                "",
                "",
            ),
            (
                Method::POST,
                format!("{ns}/p:11434/proxy/api/generate"),
                vec![],
                "create",
                "pods",
                "proxy",
                "p:11434",
            ),
            (
                Method::GET,
                format!("{ns}/p:11434/proxy/api/tags"),
                vec![],
                "get",
                "pods",
                "proxy",
                "p:11434",
            ),
            (
                Method::GET,
                format!("{ns}/p/exec"),
                vec![("command", "sh")],
                "get",
                "pods",
                "exec",
                "p",
            ),
            (
                Method::POST,
                format!("{ns}/p/portforward"),
                vec![],
                "create",
                "pods",
                "portforward",
                "p",
            ),
            (
                Method::GET,
                format!("{ns}/p/log"),
                vec![],
                "get",
                "pods",
                "log",
                "p",
            ),
        ];
        for (method, path, query, verb, resource, sub, name) in cases {
            let a = attrs(method.clone(), &path, &query);
            assert!(a.resource_request, "{method} {path}");
            assert_eq!(
                (
                    a.verb.as_str(),
                    a.resource.as_str(),
                    a.subresource.as_str(),
                    a.name.as_str(),
                    a.namespace.as_str()
                ),
                (verb, resource, sub, name, "lab"),
                "{method} {path}"
            );
        }
        let a = attrs(
            Method::GET,
            "/apis/apps/v1/namespaces/lab/deployments",
            &[("watch", "true")],
        );
        assert_eq!((a.group.as_str(), a.verb.as_str()), ("apps", "watch"));
        let a = attrs(Method::GET, "/api/v1/nodes", &[]);
        assert_eq!((a.verb.as_str(), a.namespace.as_str()), ("list", ""));
        let a = attrs(Method::GET, "/api/v1/namespaces/lab", &[]);
        assert_eq!(
            (a.resource.as_str(), a.name.as_str()),
            ("namespaces", "lab")
        );
        let a = attrs(Method::GET, "/apis", &[]);
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/apis"));
    }

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
        Rule::on_resources(verbs, groups, resources)
    }

    #[test]
    fn rules_match_like_rbac() {
        let proxy_post = attrs(
            Method::POST,
            "/api/v1/namespaces/lab/pods/p:1/proxy/api/generate",
            &[],
        );
        assert!(!rule(&["get"], &[""], &["pods/proxy"]).allows(&proxy_post.request()));
        assert!(rule(&["create"], &[""], &["pods/proxy"]).allows(&proxy_post.request()));
        assert!(rule(&["create"], &[""], &["*/proxy"]).allows(&proxy_post.request()));
        assert!(rule(&["*"], &["*"], &["*"]).allows(&proxy_post.request()));
        // A rule on pods grants no subresource.
        assert!(!rule(&["create"], &[""], &["pods"]).allows(&proxy_post.request()));
        let mut named = rule(&["create"], &[""], &["pods/proxy"]);
        named.resource_names = vec!["other".into()];
        assert!(!named.allows(&proxy_post.request()));
        named.resource_names = vec!["p:1".into()];
        assert!(named.allows(&proxy_post.request()));
        let apis = attrs(Method::GET, "/apis/apps/v1", &[]);
        assert!(Rule::on_urls(&["get"], &["/apis/*"]).allows(&apis.request()));
        assert!(!Rule::on_urls(&["get"], &["/api"]).allows(&apis.request()));
    }

    #[test]
    fn forbidden_body_is_the_api_servers() {
        let user = User::ServiceAccount {
            namespace: "ns".into(),
            name: "sa".into(),
        };
        let a = attrs(
            Method::POST,
            "/api/v1/namespaces/ns/pods/x/proxy/api/generate",
            &[],
        );
        let r = forbidden(&user, &a, "");
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let body =
            futures::executor::block_on(axum::body::to_bytes(r.into_body(), 1 << 16)).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v["message"],
            "pods \"x\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot create resource \"pods/proxy\" in API group \"\" in the namespace \"ns\""
        );
        assert_eq!(v["reason"], "Forbidden");
        assert_eq!(v["details"], json!({"name": "x", "kind": "pods"}));
        let nodes = attrs(Method::GET, "/api/v1/nodes", &[("watch", "1")]);
        let r = forbidden(&user, &nodes, "");
        let body =
            futures::executor::block_on(axum::body::to_bytes(r.into_body(), 1 << 16)).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v["message"],
            "nodes is forbidden: User \"system:serviceaccount:ns:sa\" cannot watch resource \"nodes\" in API group \"\" at the cluster scope"
        );
    }

    #[test]
    fn base64url_has_no_padding() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
