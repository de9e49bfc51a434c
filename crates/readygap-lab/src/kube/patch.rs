//! The three PATCH flavours kubectl and kube-rs send: JSON merge patch (RFC 7386), strategic
//! merge patch (merge patch whose lists of named objects merge by `name`, directives such as
//! `$setElementOrder` ignored) and JSON patch (RFC 6902: add, remove, replace, test, copy, move).

use serde_json::Value;

/// Which patch a request carries, from its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
    Json,
}

impl PatchKind {
    /// From a Content-Type header (None: unsupported, e.g. server-side apply).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/json-patch+json" => Some(Self::Json),
            _ => None,
        }
    }
}

/// Apply a patch to a document.
pub fn apply(kind: PatchKind, doc: &Value, patch: &Value) -> Result<Value, String> {
    match kind {
        PatchKind::Merge => Ok(merge(doc.clone(), patch, false)),
        PatchKind::Strategic => Ok(merge(doc.clone(), patch, true)),
        PatchKind::Json => json_patch(doc.clone(), patch),
    }
}

fn named_list(v: &[Value]) -> bool {
    !v.is_empty()
        && v.iter()
            .all(|x| x.get("name").is_some_and(Value::is_string))
}

fn merge(mut target: Value, patch: &Value, strategic: bool) -> Value {
    let Value::Object(pm) = patch else {
        return patch.clone();
    };
    if !target.is_object() {
        target = Value::Object(Default::default());
    }
    if let Value::Object(tm) = &mut target {
        for (k, v) in pm {
            if strategic && k.starts_with('$') {
                continue;
            }
            if v.is_null() {
                tm.remove(k);
                continue;
            }
            match (tm.get_mut(k), v) {
                (Some(Value::Array(cur)), Value::Array(new))
                    if strategic && named_list(new) && named_list(cur) =>
                {
                    for item in new {
                        let name = &item["name"];
                        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
                            cur.retain(|c| c["name"] != *name);
                        } else if let Some(existing) = cur.iter_mut().find(|c| c["name"] == *name) {
                            *existing = merge(existing.clone(), item, true);
                        } else {
                            cur.push(merge(Value::Object(Default::default()), item, true));
                        }
                    }
                }
                (Some(cur), _) => {
                    let merged = merge(cur.clone(), v, strategic);
                    *cur = merged;
                }
                (None, _) => {
                    tm.insert(k.clone(), merge(Value::Null, v, strategic));
                }
            }
        }
    }
    target
}

fn unescape(seg: &str) -> String {
    seg.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<(Vec<String>, String), String> {
    if !path.starts_with('/') {
        return Err(format!("invalid JSON pointer {path:?}"));
    }
    let mut segs: Vec<String> = path[1..].split('/').map(unescape).collect();
    let last = segs.pop().unwrap_or_default();
    Ok((segs, last))
}

fn parent<'a>(doc: &'a mut Value, segs: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for s in segs {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(s)
                .ok_or_else(|| format!("path segment {s:?} not found"))?,
            Value::Array(a) => {
                let i: usize = s.parse().map_err(|_| format!("bad array index {s:?}"))?;
                a.get_mut(i)
                    .ok_or_else(|| format!("index {i} out of range"))?
            }
            _ => return Err(format!("cannot descend into {s:?}")),
        };
    }
    Ok(cur)
}

fn get_at(doc: &Value, path: &str) -> Result<Value, String> {
    doc.pointer(path)
        .cloned()
        .ok_or_else(|| format!("path {path:?} not found"))
}

fn remove_at(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (segs, last) = split_pointer(path)?;
    match parent(doc, &segs)? {
        Value::Object(m) => m
            .remove(&last)
            .ok_or_else(|| format!("path {path:?} not found")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("bad array index {last:?}"))?;
            if i < a.len() {
                Ok(a.remove(i))
            } else {
                Err(format!("index {i} out of range"))
            }
        }
        _ => Err(format!("path {path:?} not found")),
    }
}

fn add_at(doc: &mut Value, path: &str, value: Value, replace: bool) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (segs, last) = split_pointer(path)?;
    match parent(doc, &segs)? {
        Value::Object(m) => {
            if replace && !m.contains_key(&last) {
                return Err(format!("path {path:?} not found"));
            }
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" && !replace {
                a.push(value);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| format!("bad array index {last:?}"))?;
            if replace {
                let slot = a
                    .get_mut(i)
                    .ok_or_else(|| format!("index {i} out of range"))?;
                *slot = value;
            } else if i <= a.len() {
                a.insert(i, value);
            } else {
                return Err(format!("index {i} out of range"));
            }
            Ok(())
        }
        _ => Err(format!("path {path:?} not found")),
    }
}

fn json_patch(mut doc: Value, patch: &Value) -> Result<Value, String> {
    let ops = patch
        .as_array()
        .ok_or("a JSON patch must be an array of operations")?;
    for op in ops {
        let path = op["path"].as_str().ok_or("operation without a path")?;
        match op["op"].as_str() {
            Some("add") => add_at(
                &mut doc,
                path,
                op.get("value").cloned().ok_or("add without a value")?,
                false,
            )?,
            Some("replace") => add_at(
                &mut doc,
                path,
                op.get("value").cloned().ok_or("replace without a value")?,
                true,
            )?,
            Some("remove") => {
                remove_at(&mut doc, path)?;
            }
            Some("test") => {
                if get_at(&doc, path)? != op["value"] {
                    return Err(format!("test failed at {path:?}"));
                }
            }
            Some("copy") => {
                let from = op["from"].as_str().ok_or("copy without from")?;
                let v = get_at(&doc, from)?;
                add_at(&mut doc, path, v, false)?;
            }
            Some("move") => {
                let from = op["from"].as_str().ok_or("move without from")?;
                let v = remove_at(&mut doc, from)?;
                add_at(&mut doc, path, v, false)?;
            }
            other => return Err(format!("unsupported JSON patch operation {other:?}")),
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rollout_restart_patch_adds_an_annotation() {
        let d = json!({"spec": {"template": {"metadata": {"labels": {"app": "ollama"}}, "spec": {"containers": [{"name": "ollama", "image": "a"}]}}}});
        let p = json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"}}}}});
        let out = apply(PatchKind::Strategic, &d, &p).unwrap();
        assert_eq!(
            out["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
            "2026-11-30T10:00:00Z"
        );
        assert_eq!(
            out["spec"]["template"]["metadata"]["labels"]["app"],
            "ollama"
        );
    }

    #[test]
    fn strategic_lists_merge_by_name_but_merge_patch_replaces() {
        let d = json!({"containers": [{"name": "ollama", "image": "a", "ports": [1]}, {"name": "side", "image": "s"}]});
        let p = json!({"$setElementOrder/containers": [{"name": "ollama"}], "containers": [{"name": "ollama", "image": "b"}]});
        let s = apply(PatchKind::Strategic, &d, &p).unwrap();
        assert_eq!(
            s["containers"][0],
            json!({"name": "ollama", "image": "b", "ports": [1]})
        );
        assert_eq!(s["containers"].as_array().unwrap().len(), 2);
        assert!(s.get("$setElementOrder/containers").is_none());
        let m = apply(
            PatchKind::Merge,
            &d,
            &json!({"containers": [{"name": "ollama", "image": "b"}]}),
        )
        .unwrap();
        assert_eq!(m["containers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn merge_patch_null_removes() {
        let out = apply(
            PatchKind::Merge,
            &json!({"a": 1, "b": {"c": 2}}),
            &json!({"a": null, "b": {"d": 3}}),
        )
        .unwrap();
        assert_eq!(out, json!({"b": {"c": 2, "d": 3}}));
    }

    #[test]
    fn json_patch_ops() {
        let d = json!({"spec": {"replicas": 1, "list": [1, 2]}});
        let p = json!([
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/spec/list/-", "value": 9},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "add", "path": "/metadata", "value": {"a~b/c": 1}},
            {"op": "copy", "from": "/spec/replicas", "path": "/copy"}
        ]);
        let out = apply(PatchKind::Json, &d, &p).unwrap();
        assert_eq!(
            out,
            json!({"spec": {"replicas": 3, "list": [2, 9]}, "metadata": {"a~b/c": 1}, "copy": 3})
        );
        assert!(
            apply(
                PatchKind::Json,
                &d,
                &json!([{"op": "replace", "path": "/nope", "value": 1}])
            )
            .is_err()
        );
        assert!(apply(PatchKind::Json, &d, &json!({"op": "add"})).is_err());
        assert!(
            apply(
                PatchKind::Json,
                &d,
                &json!([{"op": "test", "path": "/spec/replicas", "value": 2}])
            )
            .is_err()
        );
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z/~0-9-]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("[a-z$/]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn patching_never_panics(doc in arb_json(), patch in arb_json(), path in "(/[a-z0-9~-]{0,3}){0,3}", op in "add|remove|replace|test|copy|move|bogus") {
            for kind in [PatchKind::Merge, PatchKind::Strategic, PatchKind::Json] {
                let _ = apply(kind, &doc, &patch);
            }
            let ops = json!([{"op": op, "path": path, "from": path, "value": patch}]);
            let _ = apply(PatchKind::Json, &doc, &ops);
        }

        #[test]
        fn merge_patch_with_itself_is_idempotent(doc in arb_json(), patch in arb_json()) {
            let once = apply(PatchKind::Merge, &doc, &patch).unwrap();
            let twice = apply(PatchKind::Merge, &once, &patch).unwrap();
            proptest::prop_assert_eq!(once, twice);
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/strategic-merge-patch+json; charset=utf-8"),
            Some(PatchKind::Strategic)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            None
        );
    }
}
