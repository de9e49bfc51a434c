//! readygap's node scripts (readygap-live's `RemoteScript`s) run in the lab's privileged
//! node container: the drop, its refusal without privilege, `whoami`, and the host sample
//! loop that the product's stream parser reads. These hold the lab's shell to what the
//! product sends a real node.

use readygap_lab::runtime::{ExecChunk, ExecOutput, NodeCache, PlainContainer, PlainSpec};
use std::sync::Arc;
use std::time::Duration;

fn node_container(privileged: bool) -> (Arc<PlainContainer>, Arc<NodeCache>) {
    let cache = Arc::new(NodeCache::new(false));
    let c = PlainContainer::start(PlainSpec {
        pod_name: "readygap-node-lab-node-1".into(),
        node_name: "lab-node-1".into(),
        node_cache: cache.clone(),
        host_proc: Some("/host/proc".into()),
        privileged,
        node_anon_bytes: Arc::new(|| 0),
        on_drop: Arc::new(|_, _| {}),
        network: Default::default(),
    });
    (c, cache)
}

async fn run(c: &Arc<PlainContainer>, script: &str) -> ExecOutput {
    let out = c.exec(vec!["sh".into(), "-c".into(), script.into()]);
    tokio::time::timeout(Duration::from_secs(20), out.collect())
        .await
        .expect("the command ends")
}

#[tokio::test]
async fn the_drop_script_runs_in_a_privileged_node_container() {
    let (c, cache) = node_container(true);
    let script =
        readygap_live::node::RemoteScript::DropCaches.text(readygap_live::node::ProcRoot::HostProc);
    let out = run(&c, &script).await;
    assert_eq!(out.code, Some(0), "{}", out.stderr_text());
    // The product's own parser reads the two readings (Cached: and its pinned part).
    let (before, after) = readygap_live::node::drop_caches::parse_drop_output(&out.stdout_text())
        .unwrap_or_else(|e| panic!("{e}: {}", out.stdout_text()));
    let after = after.expect("a reading after the drop");
    assert!(
        before.cached_kb > after.cached_kb,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.cached_kb, cache.cached_kb());
    assert_eq!(cache.drops(), 1);
}

#[tokio::test]
async fn an_unprivileged_container_cannot_drop_and_the_script_exits_97() {
    let (c, cache) = node_container(false);
    let script =
        readygap_live::node::RemoteScript::DropCaches.text(readygap_live::node::ProcRoot::HostProc);
    let out = run(&c, &script).await;
    assert_eq!(
        out.code,
        Some(readygap_live::node::access::DROP_REFUSED_STATUS)
    );
    assert!(
        out.stderr_text()
            .contains("cannot create /host/proc/sys/vm/drop_caches: Permission denied"),
        "{}",
        out.stderr_text()
    );
    let (before, after) = readygap_live::node::drop_caches::parse_drop_output(&out.stdout_text())
        .unwrap_or_else(|e| panic!("{e}: {}", out.stdout_text()));
    assert!(
        before.cached_kb > 0 && after.is_none(),
        "only the reading before: {}",
        out.stdout_text()
    );
    assert_eq!(cache.drops(), 0);
}

#[tokio::test]
async fn whoami_and_variables() {
    let (c, _) = node_container(true);
    let script =
        readygap_live::node::RemoteScript::Whoami.text(readygap_live::node::ProcRoot::HostProc);
    let out = run(&c, &script).await;
    assert_eq!(out.stdout_text(), "@user root\n@conn \n");
    let out = run(
        &c,
        "echo $HOME ${HOSTNAME}x \"[$NOPE]\" $NOPE end; echo 5$ $(id -u)",
    )
    .await;
    assert_eq!(
        out.stdout_text(),
        "/root readygap-node-lab-node-1x [] end\n5$ 0\n"
    );
    let out = run(&c, "id -z").await;
    assert_eq!(out.code, Some(1));
}

#[tokio::test]
async fn the_sample_loop_streams_until_the_reader_goes() {
    let (c, _) = node_container(true);
    let script = readygap_live::node::RemoteScript::SampleHost { interval_secs: 1 }
        .text(readygap_live::node::ProcRoot::HostProc);
    let mut out = c.exec(vec!["sh".into(), "-c".into(), script]);
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while text.matches("@end").count() < 2 {
        match tokio::time::timeout_at(deadline, out.recv())
            .await
            .expect("in time")
        {
            Some(ExecChunk::Stdout(b)) => text.push_str(&String::from_utf8_lossy(&b)),
            Some(other) => panic!("unexpected {other:?}"),
            None => panic!("ended early: {text}"),
        }
    }
    let mut parser = readygap_live::host::SampleStreamParser::default();
    let mut samples = 0;
    for line in text.lines() {
        if let Some(readygap_live::host::StreamItem::Sample { meminfo, cpu }) =
            parser.push_line(line).expect("line")
        {
            assert!(meminfo.cached.is_some() && cpu.is_some());
            samples += 1;
        }
    }
    assert!(samples >= 2, "{text}");
    assert_eq!(c.running_execs(), 1);
    drop(out);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while c.running_execs() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the loop did not end"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
