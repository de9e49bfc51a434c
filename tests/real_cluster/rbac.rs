//! RBAC decided by the real API server: `manifests/rbac` and `manifests/watch`'s ClusterRole
//! applied with kubectl, a trial as the ServiceAccount (token from `kubectl create token`)
//! completes; a ServiceAccount without a binding is refused (403), and readygap's message
//! names the verb and the resource the API server refused.

use crate::support::{Cluster, MODEL, NS, cluster, repo};
use std::path::{Path, PathBuf};

/// A kubeconfig for `token` on the same server and CA as the admin's.
fn token_kubeconfig(c: &Cluster, token: &str, at: &Path) -> PathBuf {
    let view = |path: &str| {
        c.k(&[
            "config",
            "view",
            "--raw",
            "--minify",
            "-o",
            &format!("jsonpath={{{path}}}"),
        ])
    };
    let server = view(".clusters[0].cluster.server");
    let ca = view(".clusters[0].cluster.certificate-authority-data");
    assert!(
        !server.is_empty() && !ca.is_empty(),
        "admin kubeconfig without server/CA"
    );
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: sa\n  user:\n    token: {token}\ncontexts:\n- name: sa\n  context:\n    cluster: real\n    user: sa\n    namespace: {NS}\ncurrent-context: sa\n"
    );
    std::fs::write(at, text).unwrap();
    at.to_path_buf()
}

/// `readygap run --trials 1` with another kubeconfig (the ServiceAccount's).
fn run_as(c: &Cluster, kc: &Path, rec: &Path) -> std::process::Output {
    c.run_at(
        kc,
        rec,
        &[
            "--model",
            MODEL,
            "--trials",
            "1",
            "--cooldown",
            "0s",
            "--ready-timeout",
            "120s",
        ],
    )
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn a_trial_as_the_service_account_completes_and_a_refusal_names_verb_and_resource() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    c.k(&[
        "apply",
        "-k",
        &repo().join("manifests/rbac").to_string_lossy(),
    ]);
    c.k(&[
        "apply",
        "-f",
        &repo()
            .join("manifests/watch/clusterrole.yaml")
            .to_string_lossy(),
    ]);
    // The real authoriser's view of the shipped Role, asked as the ServiceAccount.
    let sa = format!("system:serviceaccount:{NS}:readygap");
    for (verb, resource, allowed) in [
        ("delete", "pods", "yes"),
        ("create", "pods/exec", "yes"),
        ("get", "pods/proxy", "yes"),
        ("get", "services/proxy", "yes"),
        ("delete", "deployments.apps", "no"),
    ] {
        let out = c.try_k(&["auth", "can-i", verb, resource, "-n", NS, "--as", &sa]);
        let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert_eq!(said, allowed, "can-i {verb} {resource} as {sa}");
    }

    let d = c.home.path();
    let token = c.kn(&["create", "token", "readygap", "--duration=1h"]);
    let kc = token_kubeconfig(&c, token.trim(), &d.join("sa.kubeconfig"));
    let rec = d.join("sa.jsonl");
    let out = run_as(&c, &kc, &rec);
    assert!(out.status.success(), "a trial as {sa} failed");
    let loaded = readygap_core::report::load_trials(&rec).expect("the recording reads");
    let own: Vec<_> = loaded.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 1, "{own:#?}");
    assert!(own[0].is_ok(), "{:?}", own[0].status);
    assert!(own[0].marks.t4.is_some(), "{:?}", own[0].marks);
    assert!(own[0].memory_after.is_some(), "memory through exec as {sa}");

    // A ServiceAccount with no binding: the real API server refuses, readygap says what.
    let exists = c.try_k(&["-n", NS, "get", "serviceaccount", "unbound"]);
    if !exists.status.success() {
        c.kn(&["create", "serviceaccount", "unbound"]);
    }
    let token = c.kn(&["create", "token", "unbound", "--duration=1h"]);
    let kc = token_kubeconfig(&c, token.trim(), &d.join("unbound.kubeconfig"));
    let out = run_as(&c, &kc, &d.join("unbound.jsonl"));
    assert!(!out.status.success(), "a run with no permission succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    let who = format!("system:serviceaccount:{NS}:unbound");
    assert!(err.contains(&who), "the refusal does not name {who}: {err}");
    assert!(
        ["list", "watch", "get", "delete", "create"]
            .iter()
            .any(|verb| err.contains(&format!("may not `{verb} "))),
        "the refusal names no verb and resource: {err}"
    );
    assert!(
        !err.contains("\u{1b}["),
        "colour codes in a message written to a file: {err}"
    );
}
