//! Dropping a node's page cache (`echo 3 > /proc/sys/vm/drop_caches`) and judging whether
//! it worked from the `Cached:` figure of `/proc/meminfo` read just before and just after.
//!
//! The judgement ([`DropThreshold`]): the drop counts as done when, after it, `Cached` is
//! below 64 MiB, or it fell by at least half of its value before (or, when
//! `min_drop_kb` is set, by at least that many kB instead of half). `Cached` includes
//! shared memory and tmpfs, which no drop can free, so a node with a large tmpfs may report
//! `dropped: false` with the reason in `error`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::access::{NodeAccess, RemoteScript};
use super::exec;

/// The outcome for one node, serialised exactly as
/// `{"node":…,"cached_kb_before":…,"cached_kb_after":…,"dropped":true|false,"error":…}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropCachesResult {
    pub node: String,
    pub cached_kb_before: Option<u64>,
    pub cached_kb_after: Option<u64>,
    pub dropped: bool,
    pub error: Option<String>,
}

impl DropCachesResult {
    /// A result for a node that could not be reached or was refused.
    pub fn failed(node: &str, error: String) -> Self {
        Self {
            node: node.to_owned(),
            cached_kb_before: None,
            cached_kb_after: None,
            dropped: false,
            error: Some(error),
        }
    }
}

/// When a drop counts as done. See the module documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DropThreshold {
    /// Done when `Cached` after the drop is below this many kB (default 65536, 64 MiB).
    pub below_kb: u64,
    /// Done when `Cached` fell by at least this fraction of its value before (default 0.5).
    pub min_fraction: f64,
    /// When set, replaces `min_fraction`: done when `Cached` fell by at least this many kB.
    pub min_drop_kb: Option<u64>,
}

impl Default for DropThreshold {
    fn default() -> Self {
        Self {
            below_kb: 64 * 1024,
            min_fraction: 0.5,
            min_drop_kb: None,
        }
    }
}

impl DropThreshold {
    /// `None` when the drop counts as done, otherwise the reason it does not.
    pub fn judge(&self, before_kb: u64, after_kb: u64) -> Option<String> {
        if after_kb < self.below_kb {
            return None;
        }
        let fell = before_kb.saturating_sub(after_kb);
        let (needed, how) = match self.min_drop_kb {
            Some(kb) => (kb, format!("{kb} kB")),
            None => {
                // Rounded up, so 0.5 of 3 kB needs 2 kB.
                let need = (before_kb as f64 * self.min_fraction).ceil() as u64;
                (
                    need,
                    format!("{:.0}% of {before_kb} kB", self.min_fraction * 100.0),
                )
            }
        };
        if fell >= needed {
            None
        } else {
            Some(format!(
                "Cached fell by only {fell} kB ({before_kb} → {after_kb} kB); needed {how} or a value below {} kB (shared memory and tmpfs cannot be dropped)",
                self.below_kb
            ))
        }
    }
}

/// Reads the two `Cached: N kB` lines the drop script prints. Returns (before, after);
/// a missing second line gives `None` for after.
pub fn parse_drop_output(stdout: &str) -> Result<(u64, Option<u64>), String> {
    let mut values = Vec::new();
    for line in stdout.lines() {
        if let Some(rest) = line.trim().strip_prefix("Cached:") {
            values.push(parse_kb(rest).ok_or_else(|| format!("cannot read {line:?}"))?);
        }
    }
    match values.as_slice() {
        [before] => Ok((*before, None)),
        [before, after] => Ok((*before, Some(*after))),
        [] => Err(format!(
            "no \"Cached:\" line in the output: {:?}",
            stdout.chars().take(200).collect::<String>()
        )),
        more => Err(format!("{} \"Cached:\" lines, expected 2", more.len())),
    }
}

/// Parses ` 1234 kB` (the unit of every /proc/meminfo size).
pub(crate) fn parse_kb(text: &str) -> Option<u64> {
    let mut parts = text.split_whitespace();
    let value = parts.next()?.parse::<u64>().ok()?;
    match parts.next() {
        None | Some("kB") => {}
        Some(_) => return None,
    }
    if parts.next().is_some() {
        return None;
    }
    Some(value)
}

/// Drops the page cache on one node and reports before/after. Never panics and never
/// returns an error: every failure is in `error`, with `dropped: false`.
pub async fn drop_caches(
    node: &str,
    access: &NodeAccess,
    threshold: &DropThreshold,
    timeout: Duration,
) -> DropCachesResult {
    let cmd = match access.command(RemoteScript::DropCaches) {
        Ok(cmd) => cmd,
        Err(e) => return DropCachesResult::failed(node, e.to_string()),
    };
    let output = match exec::run(&cmd, timeout).await {
        Ok(out) => out,
        Err(e) => return DropCachesResult::failed(node, e.to_string()),
    };
    judge_output(node, &cmd.target, &output.stdout, threshold)
}

/// Drops the page cache on one node like [`drop_caches`], reaching a
/// [`NodeAccess::DebugPod`] through the Kubernetes API with `kube` (client and the
/// namespace of the pod). The pod is created when missing and left running for the next
/// drop (it ends by its own deadline); see [`super::DebugPodSession`]. Other kinds ignore
/// `kube`.
pub async fn drop_caches_via(
    node: &str,
    access: &NodeAccess,
    kube: Option<(kube::Client, String)>,
    threshold: &DropThreshold,
    timeout: Duration,
) -> DropCachesResult {
    match (access, kube) {
        (NodeAccess::DebugPod { .. }, Some((client, namespace))) => {
            match super::DebugPodSession::for_access(client, &namespace, access) {
                Ok(session) => drop_caches_in_pod(node, &session, threshold, timeout).await,
                Err(e) => DropCachesResult::failed(node, e.to_string()),
            }
        }
        _ => drop_caches(node, access, threshold, timeout).await,
    }
}

/// Drops the page cache through a debug pod session (created or reused within `timeout`).
pub async fn drop_caches_in_pod(
    node: &str,
    session: &super::DebugPodSession,
    threshold: &DropThreshold,
    timeout: Duration,
) -> DropCachesResult {
    match session.run(RemoteScript::DropCaches, timeout).await {
        Ok(out) => judge_output(node, &session.target(), &out.stdout, threshold),
        Err(e) => DropCachesResult::failed(node, e.to_string()),
    }
}

/// The result for the drop script's output: both `Cached:` figures judged by `threshold`.
fn judge_output(
    node: &str,
    target: &str,
    stdout: &str,
    threshold: &DropThreshold,
) -> DropCachesResult {
    match parse_drop_output(stdout) {
        Err(detail) => {
            DropCachesResult::failed(node, format!("{target}: unexpected output: {detail}"))
        }
        Ok((before, None)) => DropCachesResult {
            node: node.to_owned(),
            cached_kb_before: Some(before),
            cached_kb_after: None,
            dropped: false,
            error: Some(format!("{target}: no \"Cached:\" after the drop")),
        },
        Ok((before, Some(after))) => {
            let reason = threshold.judge(before, after);
            DropCachesResult {
                node: node.to_owned(),
                cached_kb_before: Some(before),
                cached_kb_after: Some(after),
                dropped: reason.is_none(),
                error: reason,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialises_to_the_agreed_shape() {
        let r = DropCachesResult {
            node: "n1".into(),
            cached_kb_before: Some(2048),
            cached_kb_after: Some(100),
            dropped: true,
            error: None,
        };
        assert_eq!(
            serde_json::to_string(&r).expect("json"),
            r#"{"node":"n1","cached_kb_before":2048,"cached_kb_after":100,"dropped":true,"error":null}"#
        );
        let f = DropCachesResult::failed("n2", "boom".into());
        assert_eq!(
            serde_json::to_string(&f).expect("json"),
            r#"{"node":"n2","cached_kb_before":null,"cached_kb_after":null,"dropped":false,"error":"boom"}"#
        );
    }

    #[test]
    fn parses_the_two_cached_lines() {
        let out = "Cached:          1735500 kB\nCached:            90112 kB\n";
        assert_eq!(parse_drop_output(out), Ok((1_735_500, Some(90_112))));
        assert_eq!(parse_drop_output("Cached: 5 kB\n"), Ok((5, None)));
        assert!(parse_drop_output("").is_err());
        assert!(parse_drop_output("Cached: x kB\nCached: 1 kB\n").is_err());
        assert!(parse_drop_output("Cached: 1 MB\n").is_err());
        assert!(parse_drop_output("Cached: 1 kB\nCached: 1 kB\nCached: 1 kB\n").is_err());
    }

    #[test]
    fn threshold_rules() {
        let t = DropThreshold::default();
        assert_eq!(t.judge(1_000_000, 400_000), None); // fell by 60 %
        assert!(t.judge(1_000_000, 600_000).is_some()); // fell by 40 %, still ≥ 64 MiB
        assert_eq!(t.judge(70_000, 60_000), None); // below 64 MiB after
        assert_eq!(t.judge(1_000_000, 500_000), None); // exactly half
        assert!(t.judge(100_000, 200_000).is_some()); // grew
        let t = DropThreshold {
            min_drop_kb: Some(32_768),
            ..DropThreshold::default()
        };
        assert_eq!(t.judge(1_000_000, 960_000), None);
        let reason = t.judge(1_000_000, 990_000).expect("not enough");
        assert!(
            reason.contains("10000 kB") && reason.contains("32768 kB"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn an_access_that_cannot_run_is_reported_in_error() {
        let pod = NodeAccess::DebugPod {
            node: crate::node::NodeName::new("ok").expect("name"),
            image: "busybox".into(),
        };
        let r = drop_caches(
            "ok",
            &pod,
            &DropThreshold::default(),
            Duration::from_secs(1),
        )
        .await;
        assert!(!r.dropped);
        assert_eq!((r.cached_kb_before, r.cached_kb_after), (None, None));
        assert!(
            r.error.as_deref().is_some_and(|e| e.contains("debug pod")),
            "{r:?}"
        );
    }
}
