//! The kubeconfig the lab writes for its clients: one cluster at the lab's URL (with the
//! lab's CA when it serves TLS, see [`super::tls`]), context `readygap-lab` with the lab
//! namespace, a token user.

use serde_json::{Value, json};
use std::path::Path;

/// The context name.
pub const CONTEXT: &str = "readygap-lab";

/// A kubeconfig (JSON, which is valid YAML) for the lab.
pub fn kubeconfig(api_url: &str, namespace: &str, ca_pem: Option<&str>) -> Value {
    use base64::Engine;
    let mut cluster = json!({"server": api_url});
    if let Some(pem) = ca_pem {
        cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(pem).into();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": {"token": super::authz::ADMIN_TOKEN}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT
    })
}

/// Write the kubeconfig to `path`.
pub fn write(
    path: &Path,
    api_url: &str,
    namespace: &str,
    ca_pem: Option<&str>,
) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&kubeconfig(api_url, namespace, ca_pem))
        .map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_parses_with_kube_rs() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("kc");
        write(&p, "http://127.0.0.1:1234", "llm-recovery-lab", None).unwrap();
        let kc = kube::config::Kubeconfig::read_from(&p).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("http://127.0.0.1:1234")
        );
        assert_eq!(
            kc.contexts[0]
                .context
                .as_ref()
                .unwrap()
                .namespace
                .as_deref(),
            Some("llm-recovery-lab")
        );
    }
}
