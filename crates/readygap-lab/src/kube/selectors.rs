//! Label and field selectors as the API server parses them from `labelSelector=` and
//! `fieldSelector=`: `=`, `==`, `!=`, `in (…)`, `notin (…)`, `key` and `!key` for labels;
//! `=`, `==`, `!=` on dotted field paths for fields.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

/// A parsed field selector (all requirements must hold): (path, wanted, equal?).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, String, bool)>);

fn split_top_level(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {rest:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parse a selector string; the error says what is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some(idx) = part.find(" notin") {
                LabelReq::NotIn(part[..idx].trim().to_string(), parse_set(&part[idx + 6..])?)
            } else if let Some(idx) = part.find(" in") {
                LabelReq::In(part[..idx].trim().to_string(), parse_set(&part[idx + 3..])?)
            } else {
                LabelReq::Exists(part.trim().to_string())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(format!("invalid label key {key:?} in selector {s:?}"));
            }
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Does an object with these labels match?
    pub fn matches_labels(&self, labels: &serde_json::Map<String, Value>) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }

    /// Does this object match?
    pub fn matches(&self, obj: &Value) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let empty = serde_json::Map::new();
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        self.matches_labels(labels)
    }
}

/// The value of a dotted field path as the API server compares it (missing = empty string).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parse a field selector string.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let (k, v, eq) = if let Some((k, v)) = part.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, v, true)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, v, true)
            } else {
                return Err(format!("invalid field selector requirement {part:?}"));
            };
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '.') {
                return Err(format!("invalid field label {k:?}"));
            }
            reqs.push((k.to_string(), v.trim().to_string(), eq));
        }
        Ok(Self(reqs))
    }

    /// Does this object match?
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(k, v, eq)| (field_value(obj, k) == *v) == *eq)
    }

    /// The single `metadata.name=X` requirement, if that is what this selector is.
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _, eq)| k == "metadata.name" && *eq)
            .map(|(_, v, _)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "p1", "namespace": "ns", "labels": labels},
               "spec": {"nodeName": "lab-node-1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "ollama", "tier": "llm"}));
        let cases = [
            ("app=ollama", true),
            ("app==ollama", true),
            ("app!=ollama", false),
            ("app in (ollama, other)", true),
            ("app notin (ollama)", false),
            ("tier notin (web)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
            ("app=ollama,tier in (llm)", true),
            ("app=ollama,tier=web", false),
            ("", true),
        ];
        for (sel, want) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&o), want, "{sel}");
        }
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        assert!(LabelSelector::parse("app in ollama").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        let cases = [
            ("metadata.name=p1", true),
            ("metadata.name!=p1", false),
            ("spec.nodeName=lab-node-1,status.phase=Running", true),
            ("status.phase==Pending", false),
            ("spec.missing=", true),
        ];
        for (sel, want) in cases {
            assert_eq!(
                FieldSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(FieldSelector::parse("nonsense").is_err());
        assert_eq!(
            FieldSelector::parse("metadata.name=x").unwrap().name(),
            Some("x")
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = LabelSelector::parse(&s);
            let _ = FieldSelector::parse(&s);
        }

        #[test]
        fn equality_selector_matches_exactly_its_value(v in "[a-z0-9]{1,10}", w in "[a-z0-9]{1,10}") {
            let o = obj(json!({"k": v}));
            let s = LabelSelector::parse(&format!("k={w}")).unwrap();
            proptest::prop_assert_eq!(s.matches(&o), v == w);
            let n = LabelSelector::parse(&format!("k!={w}")).unwrap();
            proptest::prop_assert_eq!(n.matches(&o), v != w);
        }
    }
}
