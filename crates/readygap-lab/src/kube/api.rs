//! The lab's Kubernetes API server (HTTP, JSON): discovery, get/list/watch with selectors and
//! resourceVersions, create, patch, replace, delete (pods gracefully), the scale and status
//! subresources, Table output for kubectl, pod/service/node proxies, exec and port-forward
//! over WebSocket, pod admission (the namespace must exist; a namespace labelled
//! `pod-security.kubernetes.io/enforce: baseline|restricted` refuses host namespaces,
//! privileged containers and hostPath volumes with 403, as Pod Security Admission does),
//! and the lab's admin endpoints:
//!
//! - `POST /lab/faults` with any of `{"drop_watches": true, "expire_resource_versions": true,
//!   "drop_connections": true, "restart_api_server": true, "exec_delay_ms": 500,
//!   "runtime": {"hang": true, "http_500": false, "slow_exec_ms": 200,
//!   "crash_mid_inference": true}}` → `{"applied": [...]}`.
//! - `POST /lab/nodes/{node}/drop-caches` → `{"node", "cached_kb_before", "cached_kb_after"}`.
//! - `GET /lab/ground-truth` → the ground-truth entries so far.
//! - `GET /lab/requests` → `[{"user_agent", "method", "path", "query", "requests",
//!   "bytes"}]`, every API request served so far ([`super::accounting`]).
//!
//! Request bodies are JSON or Kubernetes protobuf (read into the same JSON by [`proto`]: what
//! kubectl's typed `create`s, `create token` and `auth can-i` send).
//!
//! Not served: YAML and CBOR bodies (415), server-side apply, the OpenAPI schemas (only the
//! v3 index and per-group PATCH operations kubectl reads), SPDY upgrades, the metrics API.

// Handlers fail with a ready HTTP response (a Kubernetes Status); boxing it buys nothing here.
#![allow(clippy::result_large_err)]

use super::patch::{self, PatchKind};
use super::resources::{
    self, DEPLOYMENTS, JOBS, NODES, PODS, PVCS, REPLICASETS, Resource, SERVICEACCOUNTS, SERVICES,
};
pub use super::resources::{ResourcePath, parse_path};
pub use super::responses::{error, json_response};
use super::selectors::{FieldSelector, LabelSelector};
pub use super::server::Api;
use super::store::{StoreError, rv_of};
use super::tables::{self, IncludeObject};
use super::watch::{self, WatchRequest};
use super::{authz, exec, objects, proto, proxy};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn store_error(e: StoreError) -> Response {
    match e {
        StoreError::NotFound { kind, name } => {
            error(404, "NotFound", &format!("{kind} \"{name}\" not found"))
        }
        StoreError::AlreadyExists { kind, name } => error(
            409,
            "AlreadyExists",
            &format!("{kind} \"{name}\" already exists"),
        ),
        StoreError::Invalid(m) => error(422, "Invalid", &m),
        StoreError::Expired { requested, oldest } => error(
            410,
            "Expired",
            &format!("too old resource version: {requested} ({oldest})"),
        ),
    }
}

/// The router of the API server.
pub fn router(api: Arc<Api>) -> Router {
    Router::new().fallback(counted).with_state(api)
}

/// Every request of the API (not the lab's admin endpoints) counted with its response bytes.
async fn counted(State(api): State<Arc<Api>>, req: Request) -> Response {
    if req.uri().path().starts_with("/lab/") {
        return dispatch(State(api), req).await;
    }
    let key = super::accounting::RequestKey {
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string(),
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or("").to_string(),
    };
    let resp = dispatch(State(api.clone()), req).await;
    api.served.count(key, resp)
}

fn query_pairs(uri: &axum::http::Uri) -> Vec<(String, String)> {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

fn q<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn truthy(v: Option<&str>) -> bool {
    matches!(v, Some("true" | "1" | "True"))
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').next().unwrap_or("").contains("as=Table"))
}

async fn dispatch(State(api): State<Arc<Api>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    // Authentication, then authorisation, before anything else, as the API server's filter
    // chain does (the lab's own admin endpoints under /lab/ are not part of the API).
    let secure = api
        .require_credentials
        .load(std::sync::atomic::Ordering::Relaxed);
    let store = &api.cluster.store;
    let user = if path.starts_with("/lab/") {
        // Over TLS (a real engine), the lab's own switches are its admin's.
        if secure {
            match authz::authenticate(&api.tokens, store, req.headers(), chrono::Utc::now(), true) {
                Ok(authz::User::Admin) => {}
                Ok(_) => return error(403, "Forbidden", "the lab's endpoints are its admin's"),
                Err(r) => return r,
            }
        }
        None
    } else {
        match authz::authenticate(
            &api.tokens,
            store,
            req.headers(),
            chrono::Utc::now(),
            secure,
        ) {
            Ok(u) => Some(u),
            Err(r) => return r,
        }
    };
    if let Some(user) = &user {
        let pairs = query_pairs(req.uri());
        let store = &api.cluster.store;
        if let Err(r) = authz::authorize(store, user, &method, &path, &pairs, req.headers()) {
            return r;
        }
        if path.starts_with("/apis/authorization.k8s.io/v1/selfsubject") {
            let body = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
                Ok(b) => b,
                Err(e) => {
                    return error(400, "BadRequest", &format!("reading the request body: {e}"));
                }
            };
            return authz::self_review(store, user, &method, &path, &body).unwrap_or_else(|| {
                error(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )
            });
        }
    }
    match (method.clone(), path.as_str()) {
        (Method::GET, "/version") => return version(),
        (Method::GET, "/healthz" | "/readyz" | "/livez") => return "ok".into_response(),
        (Method::GET, "/api") => return json_response(StatusCode::OK, &api_versions(&api)),
        (Method::GET, "/apis") => return json_response(StatusCode::OK, &api_groups()),
        (Method::GET, "/openapi/v3") => return json_response(StatusCode::OK, &openapi_v3_root()),
        _ => {}
    }
    if method == Method::GET
        && let Some(gv) = path.strip_prefix("/openapi/v3/")
    {
        return match openapi_v3_group(gv) {
            Some(v) => json_response(StatusCode::OK, &v),
            None => error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        };
    }
    if let Some(gv) = discovery_group_version(&path) {
        return match resource_list(gv) {
            Some(v) if method == Method::GET => json_response(StatusCode::OK, &v),
            _ => error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        };
    }
    if path.starts_with("/lab/") {
        return admin(api, req).await;
    }
    let Some(rp) = parse_path(&path) else {
        return error(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let pairs = query_pairs(req.uri());
    // Upgrades first: exec and port-forward take the request whole.
    if rp.resource == PODS && matches!(rp.sub.as_deref(), Some("exec" | "portforward" | "attach")) {
        let (mut parts, _body) = req.into_parts();
        let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
            Ok(ws) => ws,
            Err(_) => {
                return error(
                    400,
                    "BadRequest",
                    "Upgrade request required (the lab speaks the WebSocket channel protocols only)",
                );
            }
        };
        let ns = rp.namespace.clone().unwrap_or_default();
        let name = rp.name.clone().unwrap_or_default();
        return match rp.sub.as_deref() {
            Some("exec") => exec::exec(api, ns, name, pairs, ws).await,
            Some("portforward") => exec::portforward(api, ns, name, pairs, ws).await,
            _ => error(400, "BadRequest", "attach is not supported by the lab"),
        };
    }
    let headers = req.headers().clone();
    let uri = req.uri().clone();
    let body = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(e) => return error(400, "BadRequest", &format!("reading the request body: {e}")),
    };
    if matches!(rp.sub.as_deref(), Some("proxy")) {
        return proxy::proxy(api, rp, method, uri, headers, body).await;
    }
    if !rp.resource.namespaced && rp.namespace.is_some() {
        return error(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    let body = match json_request_body(&method, &headers, body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    match (&method, rp.name.as_deref(), rp.sub.as_deref()) {
        (&Method::GET, None, _) => {
            if truthy(q(&pairs, "watch")) {
                watch_response(api, &rp, &pairs, &headers)
            } else {
                list(&api, &rp, &pairs, &headers)
            }
        }
        (&Method::GET, Some(name), None | Some("status")) => get(&api, &rp, name, &headers, &pairs),
        (&Method::GET, Some(name), Some("scale")) => scale_get(&api, &rp, name),
        (&Method::GET, Some(name), Some("log")) => {
            super::logs::logs(&api, rp.namespace.as_deref().unwrap_or(""), name, &pairs)
        }
        // kubectl create token sends a protobuf TokenRequest (read into JSON above): its
        // duration and audiences count.
        (&Method::POST, Some(name), Some("token")) if rp.resource == SERVICEACCOUNTS => {
            authz::token_request(
                &api.tokens,
                &api.cluster.store,
                rp.namespace.as_deref().unwrap_or_default(),
                name,
                &body,
                chrono::Utc::now(),
            )
        }
        (&Method::POST, None, None) => create(&api, &rp, &body),
        (&Method::PATCH, Some(name), sub) => patch_object(&api, &rp, name, sub, &headers, &body),
        (&Method::PUT, Some(name), sub) => replace(&api, &rp, name, sub, &body),
        (&Method::DELETE, Some(name), None) => delete(&api, &rp, name, &pairs, &body),
        _ => error(
            405,
            "MethodNotAllowed",
            &format!(
                "the server does not allow this method on the requested resource: {method} {path}"
            ),
        ),
    }
}

/// The media type of a request body (`None`: no Content-Type, which counts as JSON).
fn media_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
}

/// The body of a create, replace or delete as JSON: JSON as sent, a Kubernetes protobuf
/// body (what client-go's typed clients send for built-in kinds, and do not retry as JSON)
/// read into the JSON object a JSON client would have sent ([`proto`]). Other media types
/// (YAML, CBOR) get the API server's 415. Patches carry their own media types.
fn json_request_body(method: &Method, headers: &HeaderMap, body: Bytes) -> Result<Bytes, Response> {
    if !matches!(*method, Method::POST | Method::PUT | Method::DELETE) {
        return Ok(body);
    }
    match media_type(headers).as_deref() {
        None | Some("" | "application/json") => Ok(body),
        Some(proto::CONTENT_TYPE) => match proto::decode_object(&body) {
            Ok(obj) => Ok(Bytes::from(obj.to_string())),
            Err(proto::ProtoError::Malformed(m)) => Err(error(400, "BadRequest", &m)),
            Err(proto::ProtoError::UnknownKind { api_version, kind }) => Err(unsupported_body(
                "application/json",
                &format!(
                    "protobuf is read for the lab's built-in kinds; got kind {kind:?} of {api_version:?}"
                ),
            )),
        },
        // A DELETE's options are optional: the lab reads them from JSON or protobuf only.
        Some(_) if *method == Method::DELETE => Ok(Bytes::new()),
        Some(ct) => Err(unsupported_body(
            "application/json, application/vnd.kubernetes.protobuf",
            &format!("got {ct:?}"),
        )),
    }
}

/// 415 in the API server's words (apiserver `endpoints/handlers/negotiation/errors.go`), and
/// what the lab saw.
fn unsupported_body(accepted: &str, saw: &str) -> Response {
    error(
        415,
        "UnsupportedMediaType",
        &format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted} ({saw})"
        ),
    )
}

/// The group-versions the OpenAPI v3 documents cover, as (path key, group, version).
fn openapi_group_versions() -> Vec<(String, &'static str)> {
    let mut v = vec![("api/v1".to_string(), "")];
    for g in resources::GROUPS {
        v.push((format!("apis/{g}/v1"), g));
    }
    v
}

/// `/openapi/v3`: the index of per-group documents.
fn openapi_v3_root() -> Value {
    let paths: serde_json::Map<String, Value> = openapi_group_versions()
        .into_iter()
        .map(|(k, _)| {
            let url = format!("/openapi/v3/{k}?hash=readygap-lab");
            (k, json!({"serverRelativeURL": url}))
        })
        .collect();
    json!({"paths": paths})
}

/// A minimal OpenAPI v3 document of one group-version: the object paths with their PATCH
/// operation, its group-version-kind and the `fieldValidation` parameter, which is what
/// kubectl reads to decide that the server validates fields (so it needs no schema).
fn openapi_v3_group(gv: &str) -> Option<Value> {
    let (_, group) = openapi_group_versions()
        .into_iter()
        .find(|(k, _)| k == gv)?;
    let mut paths = serde_json::Map::new();
    for r in resources::ALL.iter().filter(|r| r.group == group) {
        let prefix = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/v1")
        };
        let path = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("{prefix}/{}/{{name}}", r.plural)
        };
        let gvk = json!({"group": group, "version": "v1", "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
        ]);
        let op = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk
            })
        };
        paths.insert(path, json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": objects::KUBE_VERSION},
        "paths": paths,
        "components": {}
    }))
}

fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1", "minor": "33", "emulationMajor": "1", "emulationMinor": "33",
            "minCompatibilityMajor": "1", "minCompatibilityMinor": "32",
            "gitVersion": objects::KUBE_VERSION, "gitCommit": "readygap-lab", "gitTreeState": "clean",
            "buildDate": "2026-11-30T00:00:00Z", "goVersion": "go1.24.6", "compiler": "gc",
            "platform": "linux/amd64"
        }),
    )
}

fn api_versions(api: &Api) -> Value {
    let port = api.port.load(Ordering::Relaxed);
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": format!("127.0.0.1:{port}")}]})
}

fn api_groups() -> Value {
    let groups: Vec<Value> = resources::GROUPS
        .iter()
        .map(|g| {
            let gv = format!("{g}/v1");
            json!({"name": g, "versions": [{"groupVersion": gv, "version": "v1"}],
                   "preferredVersion": {"groupVersion": gv, "version": "v1"}})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn discovery_group_version(path: &str) -> Option<&str> {
    let p = path.trim_end_matches('/');
    if p == "/api/v1" {
        return Some("v1");
    }
    let rest = p.strip_prefix("/apis/")?;
    let mut it = rest.split('/');
    let (g, v) = (it.next()?, it.next()?);
    if it.next().is_some() || v.is_empty() || g.is_empty() {
        return None;
    }
    Some(rest)
}

fn resource_list(gv: &str) -> Option<Value> {
    let (group, version) = match gv.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", gv),
    };
    if version != "v1" || !(group.is_empty() || resources::GROUPS.contains(&group)) {
        return None;
    }
    let verbs = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);
    let mut list: Vec<Value> = resources::ALL
        .iter()
        .filter(|r| r.group == group)
        .map(|r| {
            let mut v = json!({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
                               "kind": r.kind, "verbs": verbs});
            if !r.short_names.is_empty() {
                v["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                v["categories"] = json!(r.categories);
            }
            v
        })
        .collect();
    let sub = |name: &str, namespaced: bool, kind: &str, verbs: Value| json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs});
    match group {
        "" => {
            list.push(sub(
                "pods/exec",
                true,
                "PodExecOptions",
                json!(["create", "get"]),
            ));
            list.push(sub(
                "pods/portforward",
                true,
                "PodPortForwardOptions",
                json!(["create", "get"]),
            ));
            list.push(sub(
                "pods/proxy",
                true,
                "PodProxyOptions",
                json!(["create", "delete", "get", "patch", "update"]),
            ));
            list.push(sub("pods/log", true, "Pod", json!(["get"])));
            list.push(sub(
                "pods/status",
                true,
                "Pod",
                json!(["get", "patch", "update"]),
            ));
            list.push(sub(
                "services/proxy",
                true,
                "ServiceProxyOptions",
                json!(["create", "delete", "get", "patch", "update"]),
            ));
            list.push(sub(
                "nodes/proxy",
                false,
                "NodeProxyOptions",
                json!(["create", "delete", "get", "patch", "update"]),
            ));
            let mut token = sub(
                "serviceaccounts/token",
                true,
                "TokenRequest",
                json!(["create"]),
            );
            token["group"] = json!("authentication.k8s.io");
            token["version"] = json!("v1");
            list.push(token);
        }
        "authorization.k8s.io" => {
            for (name, kind) in [
                ("selfsubjectaccessreviews", "SelfSubjectAccessReview"),
                ("selfsubjectrulesreviews", "SelfSubjectRulesReview"),
            ] {
                list.push(sub(name, false, kind, json!(["create"])));
            }
        }
        "apps" => {
            for r in ["deployments", "replicasets"] {
                let mut s = sub(
                    &format!("{r}/scale"),
                    true,
                    "Scale",
                    json!(["get", "patch", "update"]),
                );
                s["group"] = json!("autoscaling");
                s["version"] = json!("v1");
                list.push(s);
                list.push(sub(
                    &format!("{r}/status"),
                    true,
                    if r == "deployments" {
                        "Deployment"
                    } else {
                        "ReplicaSet"
                    },
                    json!(["get", "patch", "update"]),
                ));
            }
        }
        _ => {}
    }
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

fn selectors(pairs: &[(String, String)]) -> Result<(LabelSelector, FieldSelector), Response> {
    let labels = LabelSelector::parse(q(pairs, "labelSelector").unwrap_or("")).map_err(|e| {
        error(
            400,
            "BadRequest",
            &format!("unable to parse requirement: {e}"),
        )
    })?;
    let fields = FieldSelector::parse(q(pairs, "fieldSelector").unwrap_or(""))
        .map_err(|e| error(400, "BadRequest", &format!("invalid field selector: {e}")))?;
    Ok((labels, fields))
}

fn list(api: &Api, rp: &ResourcePath, pairs: &[(String, String)], headers: &HeaderMap) -> Response {
    let (labels, fields) = match selectors(pairs) {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (items, rv) = api.cluster.store.list(rp.resource, rp.namespace.as_deref());
    let items: Vec<&Value> = items
        .iter()
        .map(|v| v.as_ref())
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect();
    if wants_table(headers) {
        let include = IncludeObject::parse(q(pairs, "includeObject"));
        return json_response(
            StatusCode::OK,
            &tables::table(&rp.resource, items, rv, include, chrono::Utc::now()),
        );
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": format!("{}List", rp.resource.kind), "apiVersion": rp.resource.api_version(),
            "metadata": {"resourceVersion": rv.to_string()}, "items": items
        }),
    )
}

fn get(
    api: &Api,
    rp: &ResourcePath,
    name: &str,
    headers: &HeaderMap,
    pairs: &[(String, String)],
) -> Response {
    let ns = rp.namespace.as_deref().unwrap_or("");
    match api.cluster.store.get(rp.resource, ns, name) {
        Some(o) if wants_table(headers) => {
            let include = IncludeObject::parse(q(pairs, "includeObject"));
            json_response(
                StatusCode::OK,
                &tables::table(
                    &rp.resource,
                    [o.as_ref()],
                    rv_of(&o),
                    include,
                    chrono::Utc::now(),
                ),
            )
        }
        Some(o) => json_response(StatusCode::OK, &o),
        None => error(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", rp.resource.plural),
        ),
    }
}

fn watch_response(
    api: Arc<Api>,
    rp: &ResourcePath,
    pairs: &[(String, String)],
    headers: &HeaderMap,
) -> Response {
    let (labels, fields) = match selectors(pairs) {
        Ok(s) => s,
        Err(r) => return r,
    };
    if truthy(q(pairs, "sendInitialEvents")) {
        return error(
            422,
            "Invalid",
            "sendInitialEvents is not supported by the lab; list, then watch",
        );
    }
    let resource_version = match q(pairs, "resourceVersion").filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => match s.parse::<u64>() {
            Ok(v) => Some(v),
            Err(_) => {
                return error(
                    400,
                    "BadRequest",
                    &format!("invalid resource version {s:?}"),
                );
            }
        },
    };
    let timeout = q(pairs, "timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .map(Duration::from_secs);
    let req = WatchRequest {
        resource: rp.resource,
        namespace: rp.namespace.clone(),
        labels,
        fields,
        resource_version,
        timeout,
        bookmarks: truthy(q(pairs, "allowWatchBookmarks")),
        bookmark_interval: api.bookmark_interval,
        table: wants_table(headers).then(|| IncludeObject::parse(q(pairs, "includeObject"))),
    };
    api.watches_opened.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let store = api.cluster.store.clone();
    let drop = api.watch_drop_token();
    let shutdown = api.cluster.shutdown.clone();
    tokio::spawn(watch::run(store, req, tx, drop, shutdown));
    let stream = tokio_stream_from(rx);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| error(500, "InternalError", "building the watch response"))
}

/// A stream over an mpsc receiver.
pub fn tokio_stream_from<T: Send + 'static>(
    rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

fn parse_body(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            400,
            "BadRequest",
            &format!("the request body is not valid JSON: {e}"),
        )
    })
}

/// An object with (if present) an object as metadata: what indexing below relies on.
fn check_shape(obj: &Value) -> Result<(), String> {
    if !obj.is_object() {
        return Err("the request body must be a JSON object".into());
    }
    match obj.get("metadata") {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(_) => Err("metadata must be an object".into()),
    }
}

/// Check an object against its k8s-openapi type.
fn validate(resource: &Resource, obj: Value) -> Result<Value, String> {
    use k8s_openapi::api as k;
    match (resource.group, resource.plural) {
        ("", "pods") => objects::typed::<k::core::v1::Pod>(obj),
        ("", "services") => objects::typed::<k::core::v1::Service>(obj),
        ("", "namespaces") => objects::typed::<k::core::v1::Namespace>(obj),
        ("", "nodes") => objects::typed::<k::core::v1::Node>(obj),
        ("", "events") => objects::typed::<k::core::v1::Event>(obj),
        ("", "persistentvolumeclaims") => objects::typed::<k::core::v1::PersistentVolumeClaim>(obj),
        ("", "configmaps") => objects::typed::<k::core::v1::ConfigMap>(obj),
        ("", "secrets") => objects::typed::<k::core::v1::Secret>(objects::secret_as_stored(obj)),
        ("batch", "jobs") => objects::typed::<k::batch::v1::Job>(obj),
        ("apps", "deployments") => objects::typed::<k::apps::v1::Deployment>(obj),
        ("apps", "replicasets") => objects::typed::<k::apps::v1::ReplicaSet>(obj),
        ("discovery.k8s.io", "endpointslices") => {
            objects::typed::<k::discovery::v1::EndpointSlice>(obj)
        }
        ("events.k8s.io", "events") => objects::typed::<k::events::v1::Event>(obj),
        ("", "serviceaccounts") => objects::typed::<k::core::v1::ServiceAccount>(obj),
        ("rbac.authorization.k8s.io", "roles") => objects::typed::<k::rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "rolebindings") => {
            objects::typed::<k::rbac::v1::RoleBinding>(obj)
        }
        ("rbac.authorization.k8s.io", "clusterroles") => {
            objects::typed::<k::rbac::v1::ClusterRole>(obj)
        }
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            objects::typed::<k::rbac::v1::ClusterRoleBinding>(obj)
        }
        _ => Ok(obj),
    }
}

/// Fill the defaults the API server fills for a new Deployment.
fn default_deployment(d: &mut Value) {
    let spec = &mut d["spec"];
    if spec["replicas"].is_null() {
        spec["replicas"] = json!(1);
    }
    if spec["strategy"].is_null() {
        spec["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
    }
    if spec["revisionHistoryLimit"].is_null() {
        spec["revisionHistoryLimit"] = json!(10);
    }
    if spec["progressDeadlineSeconds"].is_null() {
        spec["progressDeadlineSeconds"] = json!(600);
    }
    let ps = &mut spec["template"]["spec"];
    for (k, v) in [
        ("restartPolicy", json!("Always")),
        ("terminationGracePeriodSeconds", json!(30)),
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("securityContext", json!({})),
    ] {
        if ps[k].is_null() {
            ps[k] = v;
        }
    }
    d["metadata"]["generation"] = json!(1);
    d["status"] = json!({});
}

fn create(api: &Api, rp: &ResourcePath, body: &Bytes) -> Response {
    let mut obj = match parse_body(body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if let Err(e) = check_shape(&obj) {
        return error(400, "BadRequest", &e);
    }
    if let Some(ns) = &rp.namespace {
        obj["metadata"]["namespace"] = json!(ns);
    }
    if obj["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        match obj["metadata"]["generateName"].as_str() {
            Some(g) => obj["metadata"]["name"] = json!(format!("{g}{}", api.cluster.suffix(5))),
            None => {
                return error(
                    422,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                );
            }
        }
    }
    for f in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove(f);
        }
    }
    if rp.resource == DEPLOYMENTS {
        // Validate the shape first: defaulting indexes into spec and template.
        obj = match validate(&rp.resource, obj) {
            Ok(v) => v,
            Err(e) => return error(422, "Invalid", &format!("Deployment is invalid: {e}")),
        };
        default_deployment(&mut obj);
    }
    if rp.resource == PVCS {
        objects::bind_pvc(&mut obj);
    }
    if rp.resource == SERVICES {
        let store = &api.cluster.store;
        objects::default_service(&mut obj, || {
            let used: Vec<String> = store
                .list(SERVICES, None)
                .0
                .iter()
                .filter_map(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
                .collect();
            (50..=254)
                .map(|n| format!("10.96.0.{n}"))
                .find(|ip| !used.contains(ip))
                .unwrap_or_else(|| "10.96.1.1".into())
        });
    }
    if rp.resource == JOBS {
        // The lab runs no Job pods: a Job is done as soon as it exists.
        obj["status"] = objects::job_complete_status(chrono::Utc::now());
    }
    let obj = match validate(&rp.resource, obj) {
        Ok(v) => v,
        Err(e) => {
            return error(
                422,
                "Invalid",
                &format!("{} is invalid: {e}", rp.resource.kind),
            );
        }
    };
    let mut obj = obj;
    if rp.resource == PODS {
        if let Err(r) = admit_pod(api, &obj) {
            return r;
        }
        if obj["status"]["phase"].is_null() {
            obj["status"]["phase"] = json!("Pending");
        }
    }
    match api.cluster.store.create(rp.resource, obj) {
        Ok(created) => {
            if rp.resource == PODS {
                api.cluster.start_kubelet(&created);
            }
            json_response(StatusCode::CREATED, &created)
        }
        Err(e) => store_error(e),
    }
}

/// What the API server checks before storing a new pod: its namespace exists, and the
/// namespace's Pod Security Admission level (`pod-security.kubernetes.io/enforce`) allows it.
/// Only the baseline checks a node-access pod trips are made: host namespaces, privileged
/// containers, hostPath volumes (`restricted` includes them).
fn admit_pod(api: &Api, pod: &Value) -> Result<(), Response> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let Some(namespace) = api.cluster.store.get(resources::NAMESPACES, "", ns) else {
        return Err(error(
            404,
            "NotFound",
            &format!("namespaces \"{ns}\" not found"),
        ));
    };
    let level = namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
        .as_str()
        .unwrap_or("privileged");
    if !matches!(level, "baseline" | "restricted") {
        return Ok(());
    }
    let spec = &pod["spec"];
    let mut violations = Vec::new();
    let host: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|k| spec[**k] == true)
        .map(|k| format!("{k}=true"))
        .collect();
    if !host.is_empty() {
        violations.push(format!("host namespaces ({})", host.join(", ")));
    }
    let privileged: Vec<String> = spec["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter(|c| c["securityContext"]["privileged"] == true)
        .map(|c| format!("\"{}\"", c["name"].as_str().unwrap_or_default()))
        .collect();
    if !privileged.is_empty() {
        let noun = if privileged.len() == 1 {
            "container"
        } else {
            "containers"
        };
        violations.push(format!(
            "privileged ({noun} {} must not set securityContext.privileged=true)",
            privileged.join(", ")
        ));
    }
    let host_paths: Vec<String> = spec["volumes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter(|v| v["hostPath"].is_object())
        .map(|v| format!("\"{}\"", v["name"].as_str().unwrap_or_default()))
        .collect();
    if !host_paths.is_empty() {
        let noun = if host_paths.len() == 1 {
            "volume"
        } else {
            "volumes"
        };
        violations.push(format!(
            "hostPath volumes ({noun} {})",
            host_paths.join(", ")
        ));
    }
    if violations.is_empty() {
        return Ok(());
    }
    Err(error(
        403,
        "Forbidden",
        &format!(
            "pods \"{name}\" is forbidden: violates PodSecurity \"{level}:latest\": {}",
            violations.join(", ")
        ),
    ))
}

/// Keep what a write to the main resource may not change (status) or, for the status
/// subresource, take only the status.
fn merge_for_write(resource: &Resource, cur: &Value, mut next: Value, sub: Option<&str>) -> Value {
    if sub == Some("status") {
        let mut out = cur.clone();
        out["status"] = next["status"].clone();
        return out;
    }
    if cur.get("status").is_some() && !matches!(resource.plural, "events" | "endpointslices") {
        next["status"] = cur["status"].clone();
    }
    for f in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match cur["metadata"].get(f) {
            Some(v) => next["metadata"][f] = v.clone(),
            None => {
                if let Some(m) = next["metadata"].as_object_mut() {
                    m.remove(f);
                }
            }
        }
    }
    if matches!(resource.plural, "deployments" | "replicasets") && cur["spec"] != next["spec"] {
        let g = cur["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
        next["metadata"]["generation"] = json!(g);
    }
    next
}

fn write(
    api: &Api,
    rp: &ResourcePath,
    name: &str,
    sub: Option<&str>,
    f: impl FnOnce(&Value) -> Result<Value, Response>,
) -> Response {
    let ns = rp.namespace.clone().unwrap_or_default();
    let mut failure: Option<Response> = None;
    let resource = rp.resource;
    let result = api.cluster.store.mutate(resource, &ns, name, |cur| {
        let next = match f(cur) {
            Ok(v) => v,
            Err(r) => {
                failure = Some(r);
                return Err(StoreError::Invalid("rejected".into()));
            }
        };
        check_shape(&next).map_err(StoreError::Invalid)?;
        let next = merge_for_write(&resource, cur, next, sub);
        let next = validate(&resource, next).map_err(StoreError::Invalid)?;
        *cur = next;
        Ok(())
    });
    if let Some(r) = failure {
        return r;
    }
    match result {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => store_error(e),
    }
}

fn patch_object(
    api: &Api,
    rp: &ResourcePath,
    name: &str,
    sub: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let Some(kind) = PatchKind::from_content_type(ct) else {
        return error(
            415,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {ct:?})"
            ),
        );
    };
    let p = match parse_body(body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if sub == Some("scale") {
        return scale_write(api, rp, name, |scale| {
            patch::apply(kind, scale, &p).map_err(|e| error(422, "Invalid", &e))
        });
    }
    if !matches!(sub, None | Some("status")) {
        return error(
            405,
            "MethodNotAllowed",
            "PATCH is not supported on this subresource",
        );
    }
    write(api, rp, name, sub, |cur| {
        patch::apply(kind, cur, &p).map_err(|e| error(422, "Invalid", &e))
    })
}

fn replace(api: &Api, rp: &ResourcePath, name: &str, sub: Option<&str>, body: &Bytes) -> Response {
    let obj = match parse_body(body) {
        Ok(v) => v,
        Err(r) => return r,
    };
    if sub == Some("scale") {
        return scale_write(api, rp, name, |_| Ok(obj.clone()));
    }
    if !matches!(sub, None | Some("status")) {
        return error(
            405,
            "MethodNotAllowed",
            "PUT is not supported on this subresource",
        );
    }
    let wanted_rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    write(api, rp, name, sub, |cur| {
        if let Some(rv) = &wanted_rv
            && cur["metadata"]["resourceVersion"].as_str() != Some(rv.as_str())
        {
            return Err(error(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    rp.resource.plural
                ),
            ));
        }
        Ok(obj.clone())
    })
}

fn scale_of(obj: &Value) -> Value {
    let selector = obj["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
                     "uid": obj["metadata"]["uid"], "resourceVersion": obj["metadata"]["resourceVersion"],
                     "creationTimestamp": obj["metadata"]["creationTimestamp"]},
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector}
    })
}

fn scale_get(api: &Api, rp: &ResourcePath, name: &str) -> Response {
    if !matches!(rp.resource, DEPLOYMENTS | REPLICASETS) {
        return error(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    match api
        .cluster
        .store
        .get(rp.resource, rp.namespace.as_deref().unwrap_or(""), name)
    {
        Some(o) => json_response(StatusCode::OK, &scale_of(&o)),
        None => error(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", rp.resource.plural),
        ),
    }
}

fn scale_write(
    api: &Api,
    rp: &ResourcePath,
    name: &str,
    f: impl FnOnce(&Value) -> Result<Value, Response>,
) -> Response {
    if !matches!(rp.resource, DEPLOYMENTS | REPLICASETS) {
        return error(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    let ns = rp.namespace.clone().unwrap_or_default();
    let Some(cur) = api.cluster.store.get(rp.resource, &ns, name) else {
        return error(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", rp.resource.plural),
        );
    };
    let new_scale = match f(&scale_of(&cur)) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(replicas) = new_scale["spec"]["replicas"].as_i64().filter(|r| *r >= 0) else {
        return error(
            422,
            "Invalid",
            "Scale.spec.replicas: Invalid value: must be a non-negative integer",
        );
    };
    let resource = rp.resource;
    let r = api.cluster.store.mutate(resource, &ns, name, |o| {
        if o["spec"]["replicas"] != json!(replicas) {
            o["spec"]["replicas"] = json!(replicas);
            let g = o["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            o["metadata"]["generation"] = json!(g);
        }
        Ok(())
    });
    match r {
        Ok(o) => json_response(StatusCode::OK, &scale_of(&o)),
        Err(e) => store_error(e),
    }
}

fn delete(
    api: &Api,
    rp: &ResourcePath,
    name: &str,
    pairs: &[(String, String)],
    body: &Bytes,
) -> Response {
    let ns = rp.namespace.clone().unwrap_or_default();
    let opts: Value = if body.is_empty() {
        json!({})
    } else {
        serde_json::from_slice(body).unwrap_or(json!({}))
    };
    let grace = q(pairs, "gracePeriodSeconds")
        .and_then(|s| s.parse::<i64>().ok())
        .or_else(|| opts["gracePeriodSeconds"].as_i64());
    let cluster = &api.cluster;
    let result = match rp.resource {
        PODS => cluster.delete_pod(&ns, name, grace),
        DEPLOYMENTS | REPLICASETS => {
            let r = cluster.store.delete(rp.resource, &ns, name);
            if let Ok(obj) = &r {
                cluster.delete_dependents(&ns, obj["metadata"]["uid"].as_str().unwrap_or(""));
            }
            r
        }
        NODES => return error(403, "Forbidden", "the lab does not delete its nodes"),
        _ => cluster.store.delete(rp.resource, &ns, name),
    };
    match result {
        Ok(v) => json_response(StatusCode::OK, &v),
        Err(e) => store_error(e),
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct FaultRequest {
    drop_watches: bool,
    expire_resource_versions: bool,
    restart_api_server: bool,
    drop_connections: bool,
    exec_delay_ms: Option<u64>,
    runtime: Option<Value>,
}

async fn admin(api: Arc<Api>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let body = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
        Ok(b) => b,
        Err(e) => return error(400, "BadRequest", &format!("reading the request body: {e}")),
    };
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, segs.as_slice()) {
        (Method::GET, ["lab", "requests"]) => json_response(StatusCode::OK, &api.served.to_json()),
        (Method::POST, ["lab", "faults"]) => {
            let f: FaultRequest = match serde_json::from_slice(&body) {
                Ok(f) => f,
                Err(e) => return error(400, "BadRequest", &format!("invalid fault request: {e}")),
            };
            let mut applied = Vec::new();
            if f.expire_resource_versions {
                api.cluster.store.expire_history();
                applied.push("expire_resource_versions");
            }
            if f.drop_watches {
                api.drop_watches();
                applied.push("drop_watches");
            }
            if f.drop_connections {
                api.drop_connections();
                applied.push("drop_connections");
            }
            if let Some(ms) = f.exec_delay_ms {
                api.exec_delay_ms.store(ms, Ordering::Relaxed);
                applied.push("exec_delay_ms");
            }
            if let Some(rt) = &f.runtime {
                if let Err(e) = super::faults::apply_runtime_faults(&api.cluster.runtime_faults, rt)
                {
                    return error(400, "BadRequest", &e);
                }
                applied.push("runtime");
            }
            if f.restart_api_server {
                api.restart.notify_one();
                applied.push("restart_api_server");
            }
            json_response(StatusCode::OK, &json!({"applied": applied}))
        }
        (Method::POST, ["lab", "nodes", node, "drop-caches"]) => {
            match api.cluster.node_caches.get(*node) {
                Some(cache) => {
                    let (before, after) = cache.drop_caches();
                    api.cluster.settings.ground_truth.log(
                        node,
                        crate::ground_truth::Transition::CachesDropped,
                        json!({"cached_kb_before": before, "cached_kb_after": after}),
                    );
                    json_response(
                        StatusCode::OK,
                        &json!({"node": node, "cached_kb_before": before, "cached_kb_after": after}),
                    )
                }
                None => error(404, "NotFound", &format!("nodes \"{node}\" not found")),
            }
        }
        (Method::GET, ["lab", "ground-truth"]) => json_response(
            StatusCode::OK,
            &json!(api.cluster.settings.ground_truth.entries()),
        ),
        _ => error(404, "NotFound", "unknown lab endpoint"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_like_the_api_server() {
        let p = parse_path("/api/v1/namespaces/ns/pods/p1/exec").unwrap();
        assert_eq!(
            (
                p.resource,
                p.namespace.as_deref(),
                p.name.as_deref(),
                p.sub.as_deref()
            ),
            (PODS, Some("ns"), Some("p1"), Some("exec"))
        );
        let p = parse_path("/api/v1/pods").unwrap();
        assert_eq!((p.resource, p.namespace, p.name), (PODS, None, None));
        let p = parse_path("/api/v1/namespaces/ns").unwrap();
        assert_eq!(
            (p.resource.plural, p.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        let p = parse_path("/api/v1/namespaces/ns/pods/p1:11434/proxy/api/tags").unwrap();
        assert_eq!(
            (p.name.as_deref(), p.sub.as_deref(), p.rest.as_str()),
            (Some("p1:11434"), Some("proxy"), "api/tags")
        );
        let p = parse_path("/apis/apps/v1/namespaces/ns/deployments/ollama/scale").unwrap();
        assert_eq!((p.resource, p.sub.as_deref()), (DEPLOYMENTS, Some("scale")));
        let p = parse_path("/api/v1/nodes/lab-node-1/proxy/stats/summary").unwrap();
        assert_eq!((p.resource, p.rest.as_str()), (NODES, "stats/summary"));
        assert!(parse_path("/apis/apps/v2/deployments").is_none());
        assert!(parse_path("/api/v1/widgets").is_none());
        assert!(parse_path("/nonsense").is_none());
    }

    #[test]
    fn discovery_lists_subresources() {
        let v = resource_list("v1").unwrap();
        let names: Vec<&str> = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        for n in [
            "pods",
            "pods/exec",
            "nodes/proxy",
            "services",
            "events",
            "persistentvolumeclaims",
        ] {
            assert!(names.contains(&n), "{n}");
        }
        let apps = resource_list("apps/v1").unwrap();
        assert!(
            apps["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "deployments/scale" && r["group"] == "autoscaling")
        );
        assert!(resource_list("bogus/v1").is_none());
    }
}
