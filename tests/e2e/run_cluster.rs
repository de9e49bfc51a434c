//! Cluster configuration: kubeconfig files (several, as KUBECONFIG lists them), contexts,
//! namespace overrides, and the target's selector from its Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use readygap_live::cluster::{ClusterConfig, config, selector_of};

const KC_A: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: a
  cluster:
    server: http://127.0.0.1:6001
contexts:
- name: ctx-a
  context:
    cluster: a
    user: u
    namespace: ns-a
current-context: ctx-a
users:
- name: u
  user: {}
"#;

const KC_B: &str = r#"apiVersion: v1
kind: Config
clusters:
- name: b
  cluster:
    server: http://127.0.0.1:6002
contexts:
- name: ctx-b
  context:
    cluster: b
    user: u
    namespace: ns-b
users:
- name: u
  user: {}
"#;

fn args(kubeconfig: std::ffi::OsString, context: Option<&str>, ns: Option<&str>) -> ClusterConfig {
    ClusterConfig {
        kubeconfig: Some(kubeconfig.into()),
        context: context.map(str::to_string),
        namespace: ns.map(str::to_string),
        deployment: "ollama".into(),
        selector: None,
        service: None,
    }
}

#[tokio::test]
async fn contexts_files_and_namespaces() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.yaml");
    let b = dir.path().join("b.yaml");
    std::fs::write(&a, KC_A).unwrap();
    std::fs::write(&b, KC_B).unwrap();
    let both = std::env::join_paths([&a, &b]).unwrap();

    let (cfg, ctx) = config(&args(a.clone().into(), None, None)).await.unwrap();
    assert_eq!(ctx, "ctx-a");
    assert_eq!(cfg.cluster_url.to_string(), "http://127.0.0.1:6001/");
    assert_eq!(cfg.default_namespace, "ns-a");
    assert_eq!(
        cfg.connect_timeout,
        Some(readygap_live::cluster::CONNECT_TIMEOUT)
    );

    let (cfg, ctx) = config(&args(both.clone(), Some("ctx-b"), None))
        .await
        .unwrap();
    assert_eq!(ctx, "ctx-b");
    assert_eq!(cfg.cluster_url.to_string(), "http://127.0.0.1:6002/");
    assert_eq!(cfg.default_namespace, "ns-b");

    let (cfg, _) = config(&args(both.clone(), None, Some("override")))
        .await
        .unwrap();
    assert_eq!(cfg.default_namespace, "override");

    let err = config(&args(both, Some("nope"), None))
        .await
        .expect_err("unknown context");
    assert!(format!("{err:#}").contains("nope"), "{err:#}");
    let err = config(&args(dir.path().join("missing.yaml").into(), None, None))
        .await
        .expect_err("missing file");
    assert!(format!("{err:#}").contains("missing.yaml"), "{err:#}");
}

#[test]
fn the_selector_of_a_deployment() {
    let d: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "ollama"},
        "spec": {"selector": {"matchLabels": {"app": "ollama", "tier": "llm"}},
                 "template": {"metadata": {"labels": {"app": "ollama", "tier": "llm"}}, "spec": {"containers": []}}}
    }))
    .unwrap();
    assert_eq!(selector_of(&d).unwrap(), "app=ollama,tier=llm");
    let bare: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "x"},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                 "template": {"spec": {"containers": []}}}
    }))
    .unwrap();
    let e = selector_of(&bare).unwrap_err().to_string();
    assert!(e.contains("--selector"), "{e}");
}
