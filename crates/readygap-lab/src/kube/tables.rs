//! Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), with the columns the real API
//! server prints for pods, deployments, replicasets, endpointslices, nodes, services, events,
//! namespaces and persistentvolumeclaims. The clock is passed in, never read here.

use super::resources::Resource;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// What a row carries besides its cells (`includeObject=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// From the query parameter (default Metadata, as the API server does).
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

fn col(name: &str, ty: &str, priority: i32, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

/// The value at `path` in `v`, if every step exists.
fn field<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, p| cur.get(*p))
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    field(v, path).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, path: &[&str]) -> i64 {
    field(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    field(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `kubectl`'s short human duration (`5s`, `2m3s`, `3h`, `4d`).
pub fn human_duration(d: chrono::Duration) -> String {
    let secs = d.num_seconds();
    if secs < 0 {
        return "<invalid>".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let mins = secs / 60;
    if mins < 10 {
        let rem = secs % 60;
        return if rem == 0 {
            format!("{mins}m")
        } else {
            format!("{mins}m{rem}s")
        };
    }
    if mins < 180 {
        return format!("{mins}m");
    }
    let hours = mins / 60;
    if hours < 48 {
        return format!("{hours}h");
    }
    format!("{}d", hours / 24)
}

fn age(ts: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(ts) {
        Ok(t) => human_duration(now - t.with_timezone(&Utc)),
        Err(_) => "<unknown>".into(),
    }
}

fn pod_status(p: &Value) -> String {
    let mut reason = s(p, &["status", "reason"]).to_string();
    if reason.is_empty() {
        reason = s(p, &["status", "phase"]).to_string();
    }
    for cs in arr(p, &["status", "containerStatuses"]) {
        let waiting = s(cs, &["state", "waiting", "reason"]);
        let term = s(cs, &["state", "terminated", "reason"]);
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if !term.is_empty() {
            reason = term.to_string();
        }
    }
    if !s(p, &["metadata", "deletionTimestamp"]).is_empty() {
        reason = "Terminating".into();
    }
    reason
}

fn pod_row(p: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let statuses = arr(p, &["status", "containerStatuses"]);
    let total = arr(p, &["spec", "containers"]).len().max(statuses.len());
    let ready = statuses
        .iter()
        .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
        .count();
    let restarts: i64 = statuses.iter().map(|c| i(c, &["restartCount"])).sum();
    let last_restart = statuses
        .iter()
        .map(|c| s(c, &["lastState", "terminated", "finishedAt"]))
        .filter(|t| !t.is_empty())
        .max();
    let restarts_cell = match last_restart {
        Some(t) if restarts > 0 => format!("{restarts} ({} ago)", age(t, now)),
        _ => restarts.to_string(),
    };
    let ip = s(p, &["status", "podIP"]);
    let node = s(p, &["spec", "nodeName"]);
    vec![
        json!(s(p, &["metadata", "name"])),
        json!(format!("{ready}/{total}")),
        json!(pod_status(p)),
        json!(restarts_cell),
        json!(age(s(p, &["metadata", "creationTimestamp"]), now)),
        json!(if ip.is_empty() { "<none>" } else { ip }),
        json!(if node.is_empty() { "<none>" } else { node }),
        json!("<none>"),
        json!("<none>"),
    ]
}

/// The wide columns of a workload with a pod template (deployments, replicasets).
fn template_columns() -> [Value; 3] {
    [
        col(
            "Containers",
            "string",
            1,
            "Names of each container in the template.",
        ),
        col(
            "Images",
            "string",
            1,
            "Images referenced by each container in the template.",
        ),
        col("Selector", "string", 1, "Label selector for pods."),
    ]
}

/// The cells of `template_columns` for workload `o`.
fn template_cells(o: &Value) -> [Value; 3] {
    let cs = arr(o, &["spec", "template", "spec", "containers"]);
    let names: Vec<&str> = cs.iter().map(|c| s(c, &["name"])).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, &["image"])).collect();
    [
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector_string(&o["spec"]["selector"])),
    ]
}

fn selector_string(sel: &Value) -> String {
    let mut parts: Vec<String> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if parts.is_empty()
        && let Some(m) = sel.as_object()
    {
        parts = m
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| format!("{k}={v}")))
            .collect();
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

fn columns(resource: &Resource) -> Vec<Value> {
    let name = col(
        "Name",
        "string",
        0,
        "Name must be unique within a namespace.",
    );
    let age = col("Age", "string", 0, "CreationTimestamp of the object.");
    match (resource.group, resource.plural) {
        ("", "pods") => vec![
            name,
            col(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            col(
                "Status",
                "string",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            col(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            col("IP", "string", 1, "IP address allocated to the pod."),
            col(
                "Node",
                "string",
                1,
                "Name of the node the pod is assigned to.",
            ),
            col(
                "Nominated Node",
                "string",
                1,
                "Name of the node the pod is nominated to.",
            ),
            col(
                "Readiness Gates",
                "string",
                1,
                "Readiness gates of the pod.",
            ),
        ],
        ("apps", "deployments") => vec![
            name,
            col("Ready", "string", 0, "Number of the pod with ready state"),
            col(
                "Up-to-date",
                "integer",
                0,
                "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
            ),
            col(
                "Available",
                "integer",
                0,
                "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age,
        ]
        .into_iter()
        .chain(template_columns())
        .collect(),
        ("apps", "replicasets") => vec![
            name,
            col("Desired", "integer", 0, "Number of desired pods."),
            col("Current", "integer", 0, "Number of actual pods."),
            col("Ready", "integer", 0, "Number of pods ready."),
            age,
        ]
        .into_iter()
        .chain(template_columns())
        .collect(),
        ("discovery.k8s.io", "endpointslices") => vec![
            name,
            col("AddressType", "string", 0, "The IP protocol for this slice"),
            col("Ports", "string", 0, "The ports for this slice"),
            col("Endpoints", "string", 0, "The endpoints for this slice"),
            age,
        ],
        ("", "nodes") => vec![
            name,
            col("Status", "string", 0, "The status of the node"),
            col("Roles", "string", 0, "The roles of the node"),
            age,
            col(
                "Version",
                "string",
                0,
                "Kubelet Version reported by the node.",
            ),
            col(
                "Internal-IP",
                "string",
                1,
                "List of internal IPs for the node.",
            ),
            col(
                "External-IP",
                "string",
                1,
                "List of external IPs for the node.",
            ),
            col("OS-Image", "string", 1, "OS image reported by the node."),
            col(
                "Kernel-Version",
                "string",
                1,
                "Kernel version reported by the node.",
            ),
            col(
                "Container-Runtime",
                "string",
                1,
                "Container runtime reported by the node.",
            ),
        ],
        ("", "services") => vec![
            name,
            col("Type", "string", 0, "The type of service."),
            col("Cluster-IP", "string", 0, "The cluster IP of the service."),
            col(
                "External-IP",
                "string",
                0,
                "The external IP of the service.",
            ),
            col("Port(s)", "string", 0, "The ports of the service."),
            age,
            col("Selector", "string", 1, "The selector of the service."),
        ],
        (_, "events") => vec![
            col(
                "Last Seen",
                "string",
                0,
                "Time when last this event was seen.",
            ),
            col(
                "Type",
                "string",
                0,
                "Type of this event (Normal, Warning), new types could be added in the future.",
            ),
            col("Reason", "string", 0, "The reason for this event."),
            col("Object", "string", 0, "The object this event is about."),
            col(
                "Message",
                "string",
                0,
                "A human-readable description of the status of this operation.",
            ),
            col("Source", "string", 1, "The component reporting this event."),
            col(
                "First Seen",
                "string",
                1,
                "The time at which the event was first recorded.",
            ),
            col(
                "Count",
                "string",
                1,
                "The number of times this event has occurred.",
            ),
            col("Name", "string", 1, "The name of the event."),
        ],
        ("", "namespaces") => vec![
            name,
            col("Status", "string", 0, "The status of the namespace"),
            age,
        ],
        ("", "persistentvolumeclaims") => vec![
            name,
            col("Status", "string", 0, "The status of the claim."),
            col("Volume", "string", 0, "The name of the bound volume."),
            col("Capacity", "string", 0, "The capacity of the bound volume."),
            col(
                "Access Modes",
                "string",
                0,
                "The access modes of the bound volume.",
            ),
            col(
                "StorageClass",
                "string",
                0,
                "The storage class of the claim.",
            ),
            col(
                "VolumeAttributesClass",
                "string",
                0,
                "The volume attributes class of the claim.",
            ),
            age,
        ],
        ("", "configmaps") => vec![
            name,
            col("Data", "string", 0, "The number of data keys."),
            age,
        ],
        ("", "secrets") => vec![
            name,
            col("Type", "string", 0, "The type of the secret."),
            col("Data", "string", 0, "The number of data keys."),
            age,
        ],
        ("batch", "jobs") => vec![
            name,
            col("Status", "string", 0, "Status of the job."),
            col(
                "Completions",
                "string",
                0,
                "The desired number of successfully finished pods the job should be run with.",
            ),
            col(
                "Duration",
                "string",
                0,
                "Time required to complete the job.",
            ),
            age,
        ],
        _ => vec![name, age],
    }
}

fn event_time(e: &Value) -> &str {
    for path in [
        &["lastTimestamp"][..],
        &["deprecatedLastTimestamp"][..],
        &["eventTime"][..],
        &["metadata", "creationTimestamp"][..],
    ] {
        let t = s(e, path);
        if !t.is_empty() {
            return t;
        }
    }
    ""
}

fn row_cells(resource: &Resource, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(o, &["metadata", "name"]));
    let created = age(s(o, &["metadata", "creationTimestamp"]), now);
    match (resource.group, resource.plural) {
        ("", "pods") => pod_row(o, now),
        ("apps", "deployments") => vec![
            name,
            json!(format!(
                "{}/{}",
                i(o, &["status", "readyReplicas"]),
                i(o, &["spec", "replicas"])
            )),
            json!(i(o, &["status", "updatedReplicas"])),
            json!(i(o, &["status", "availableReplicas"])),
            json!(created),
        ]
        .into_iter()
        .chain(template_cells(o))
        .collect(),
        ("apps", "replicasets") => vec![
            name,
            json!(i(o, &["spec", "replicas"])),
            json!(i(o, &["status", "replicas"])),
            json!(i(o, &["status", "readyReplicas"])),
            json!(created),
        ]
        .into_iter()
        .chain(template_cells(o))
        .collect(),
        ("discovery.k8s.io", "endpointslices") => {
            let ports: Vec<String> = arr(o, &["ports"])
                .iter()
                .map(|p| i(p, &["port"]).to_string())
                .collect();
            let addrs: Vec<String> = arr(o, &["endpoints"])
                .iter()
                .flat_map(|e| arr(e, &["addresses"]).iter())
                .filter_map(|a| a.as_str().map(str::to_string))
                .collect();
            let eps = if addrs.is_empty() {
                "<unset>".to_string()
            } else if addrs.len() > 3 {
                format!("{} + {} more...", addrs[..3].join(","), addrs.len() - 3)
            } else {
                addrs.join(",")
            };
            vec![
                name,
                json!(s(o, &["addressType"])),
                json!(if ports.is_empty() {
                    "<unset>".to_string()
                } else {
                    ports.join(",")
                }),
                json!(eps),
                json!(created),
            ]
        }
        ("", "nodes") => {
            let ready = arr(o, &["status", "conditions"])
                .iter()
                .find(|c| s(c, &["type"]) == "Ready")
                .map(|c| {
                    if s(c, &["status"]) == "True" {
                        "Ready"
                    } else {
                        "NotReady"
                    }
                })
                .unwrap_or("Unknown");
            let roles: Vec<&str> = o["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.keys()
                        .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                        .collect()
                })
                .unwrap_or_default();
            let internal = arr(o, &["status", "addresses"])
                .iter()
                .find(|a| s(a, &["type"]) == "InternalIP")
                .map(|a| s(a, &["address"]))
                .unwrap_or("<none>");
            vec![
                name,
                json!(ready),
                json!(if roles.is_empty() {
                    "<none>".to_string()
                } else {
                    roles.join(",")
                }),
                json!(created),
                json!(s(o, &["status", "nodeInfo", "kubeletVersion"])),
                json!(internal),
                json!("<none>"),
                json!(s(o, &["status", "nodeInfo", "osImage"])),
                json!(s(o, &["status", "nodeInfo", "kernelVersion"])),
                json!(s(o, &["status", "nodeInfo", "containerRuntimeVersion"])),
            ]
        }
        ("", "services") => {
            let ports: Vec<String> = arr(o, &["spec", "ports"])
                .iter()
                .map(|p| format!("{}/{}", i(p, &["port"]), s(p, &["protocol"])))
                .collect();
            vec![
                name,
                json!(s(o, &["spec", "type"])),
                json!(s(o, &["spec", "clusterIP"])),
                json!("<none>"),
                json!(ports.join(",")),
                json!(created),
                json!(selector_string(&o["spec"]["selector"])),
            ]
        }
        (group, "events") => {
            let (obj_ref, reporter) = if group.is_empty() {
                (
                    &o["involvedObject"],
                    s(o, &["source", "component"]).to_string(),
                )
            } else {
                (&o["regarding"], s(o, &["reportingController"]).to_string())
            };
            let kind = s(obj_ref, &["kind"]).to_lowercase();
            let count = i(o, &["count"]).max(1);
            vec![
                json!(age(event_time(o), now)),
                json!(s(o, &["type"])),
                json!(s(o, &["reason"])),
                json!(format!("{kind}/{}", s(obj_ref, &["name"]))),
                json!(if group.is_empty() {
                    s(o, &["message"])
                } else {
                    s(o, &["note"])
                }),
                json!(reporter),
                json!(created),
                json!(count.to_string()),
                name,
            ]
        }
        ("", "namespaces") => vec![name, json!(s(o, &["status", "phase"])), json!(created)],
        ("", "persistentvolumeclaims") => {
            let modes: Vec<&str> = arr(o, &["status", "accessModes"])
                .iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect();
            vec![
                name,
                json!(s(o, &["status", "phase"])),
                json!(s(o, &["spec", "volumeName"])),
                json!(s(o, &["status", "capacity", "storage"])),
                json!(modes.join(",")),
                json!(s(o, &["spec", "storageClassName"])),
                json!("<unset>"),
                json!(created),
            ]
        }
        ("", "configmaps") => {
            let n = o["data"].as_object().map_or(0, |m| m.len())
                + o["binaryData"].as_object().map_or(0, |m| m.len());
            vec![name, json!(n), json!(created)]
        }
        ("", "secrets") => {
            let n = o["data"].as_object().map_or(0, |m| m.len());
            vec![name, json!(s(o, &["type"])), json!(n), json!(created)]
        }
        ("batch", "jobs") => {
            let complete = arr(o, &["status", "conditions"])
                .iter()
                .any(|c| c["type"] == "Complete" && c["status"] == "True");
            let want = o["spec"]["completions"].as_i64().unwrap_or(1);
            let duration = match (
                chrono::DateTime::parse_from_rfc3339(s(o, &["status", "startTime"])),
                chrono::DateTime::parse_from_rfc3339(s(o, &["status", "completionTime"])),
            ) {
                (Ok(a), Ok(b)) => human_duration(b - a),
                _ => String::new(),
            };
            vec![
                name,
                json!(if complete { "Complete" } else { "Running" }),
                json!(format!("{}/{want}", i(o, &["status", "succeeded"]))),
                json!(duration),
                json!(created),
            ]
        }
        _ => vec![name, json!(created)],
    }
}

fn row(resource: &Resource, o: &Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    let mut r = json!({"cells": row_cells(resource, o, now)});
    match include {
        IncludeObject::None => {}
        IncludeObject::Metadata => {
            r["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
            })
        }
        IncludeObject::Object => r["object"] = o.clone(),
    }
    r
}

/// A Table of these objects.
pub fn table<'a>(
    resource: &Resource,
    objects: impl IntoIterator<Item = &'a Value>,
    resource_version: u64,
    include: IncludeObject,
    now: DateTime<Utc>,
) -> Value {
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| row(resource, o, include, now))
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version.to_string()},
        "columnDefinitions": columns(resource),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::{DEPLOYMENTS, PODS};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn human_durations_like_kubectl() {
        let d = chrono::Duration::seconds;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(125)), "2m5s");
        assert_eq!(human_duration(d(600)), "10m");
        assert_eq!(human_duration(d(4 * 3600)), "4h");
        assert_eq!(human_duration(d(3 * 86400)), "3d");
    }

    #[test]
    fn pod_rows_show_readiness_status_and_restarts() {
        let pod = json!({
            "metadata": {"name": "ollama-abc-xyz12", "creationTimestamp": "2026-11-30T09:59:50Z"},
            "spec": {"containers": [{"name": "ollama"}], "nodeName": "lab-node-1"},
            "status": {"phase": "Running", "podIP": "127.0.0.10", "containerStatuses": [{
                "name": "ollama", "ready": false, "restartCount": 1,
                "state": {"running": {"startedAt": "2026-11-30T09:59:58Z"}},
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-11-30T09:59:57Z"}}
            }]}
        });
        let t = table(&PODS, [&pod], 7, IncludeObject::Metadata, now());
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "ollama-abc-xyz12");
        assert_eq!(cells[1], "0/1");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], "1 (3s ago)");
        assert_eq!(cells[4], "10s");
        assert_eq!(cells[5], "127.0.0.10");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            t["columnDefinitions"].as_array().unwrap().len(),
            cells.as_array().unwrap().len()
        );

        let mut terminating = pod.clone();
        terminating["metadata"]["deletionTimestamp"] = json!("2026-11-30T10:00:30Z");
        let t = table(&PODS, [&terminating], 7, IncludeObject::None, now());
        assert_eq!(t["rows"][0]["cells"][2], "Terminating");
        assert!(t["rows"][0].get("object").is_none());
    }

    #[test]
    fn deployment_rows() {
        let d = json!({
            "metadata": {"name": "ollama", "creationTimestamp": "2026-11-30T09:00:00Z"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "ollama"}},
                     "template": {"spec": {"containers": [{"name": "ollama", "image": "ollama/ollama:0.6.8"}]}}},
            "status": {"readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}
        });
        let t = table(&DEPLOYMENTS, [&d], 1, IncludeObject::Metadata, now());
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], 2);
        assert_eq!(cells[4], "60m");
        assert_eq!(cells[7], "app=ollama");
    }
}
