//! `pods/exec` and `pods/portforward` over WebSocket with the Kubernetes channel protocols
//! (`v5.channel.k8s.io`, `v4.channel.k8s.io`, `channel.k8s.io`): every binary frame starts
//! with a channel byte (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize, 255 close in v5).
//! Exec ends with a v1 Status on the error channel (Success, or Failure with the exit code
//! as a cause), as the kubelet writes it. Commands run in the pod's runtime, or in its plain
//! container when it runs no Ollama (a debug pod: it sees its node's files).

// Handlers fail with a ready HTTP response (a Kubernetes Status); boxing it buys nothing here.
#![allow(clippy::result_large_err)]

use super::resources::PODS;
use super::responses::error;
use super::server::Api;
use crate::runtime::ExecChunk;
use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROTOCOLS: [&str; 3] = ["v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io"];

/// Which channel protocol the client and the lab agreed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelProtocol {
    V1,
    V4,
    V5,
}

impl ChannelProtocol {
    fn from_header(h: Option<&str>) -> Self {
        match h {
            Some("v5.channel.k8s.io") => Self::V5,
            Some("v4.channel.k8s.io") => Self::V4,
            _ => Self::V1,
        }
    }
}

/// The error-channel payload for an exit code.
pub fn exit_status(protocol: ChannelProtocol, code: i32) -> Option<Vec<u8>> {
    match (protocol, code) {
        (ChannelProtocol::V1, 0) => None,
        (ChannelProtocol::V1, c) => Some(format!("command terminated with non-zero exit code: error executing command, exit status {c}").into_bytes()),
        (_, 0) => Some(json!({"metadata": {}, "status": "Success"}).to_string().into_bytes()),
        (_, c) => Some(
            json!({"metadata": {}, "status": "Failure",
                   "message": format!("command terminated with non-zero exit code: error executing command [], exit status {c}"),
                   "reason": "NonZeroExitCode",
                   "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]}})
            .to_string()
            .into_bytes(),
        ),
    }
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(Bytes::from(v))
}

/// The names of a pod's containers in the order the API server lists them (init
/// containers, containers, ephemeral containers: `podutil.VisitContainers`).
fn container_names(pod: &serde_json::Value) -> Vec<String> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| pod["spec"][*k].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// The checks before an exec (`exec: true`) or a port-forward: the pod exists, the named
/// container is one of its own, an exec into a pod with several containers names one
/// (kubernetes `pkg/registry/core/pod/strategy.go`, `validateContainer`: "a container name
/// must be specified for pod P, choose one of: [a b]" and "container C is not valid for pod
/// P", both 400), the pod has a node and its container runs. The lab runs only a pod's
/// first container, so an exec into a sidecar is refused.
fn running_pod_check(
    api: &Api,
    ns: &str,
    name: &str,
    container: Option<&str>,
    exec: bool,
) -> Result<(), Response> {
    let Some(pod) = api.cluster.store.get(PODS, ns, name) else {
        return Err(error(
            404,
            "NotFound",
            &format!("pods \"{name}\" not found"),
        ));
    };
    let cname = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("ollama");
    let names = container_names(&pod);
    let several = pod["spec"]["containers"]
        .as_array()
        .is_some_and(|c| c.len() > 1);
    match container {
        None if exec && several => {
            return Err(error(
                400,
                "BadRequest",
                &format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    names.join(" ")
                ),
            ));
        }
        Some(c) if !names.iter().any(|n| n == c) => {
            return Err(error(
                400,
                "BadRequest",
                &format!("container {c} is not valid for pod {name}"),
            ));
        }
        Some(c) if c != cname => {
            return Err(error(
                400,
                "BadRequest",
                &format!("the lab runs only the first container of a pod ({cname}), not {c}"),
            ));
        }
        _ => {}
    }
    if pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        return Err(error(
            400,
            "BadRequest",
            &format!("pod {name} does not have a host assigned"),
        ));
    }
    if pod["status"]["containerStatuses"][0]["state"]["running"].is_null() {
        return Err(error(
            400,
            "BadRequest",
            &format!("unable to upgrade connection: container not found (\"{cname}\")"),
        ));
    }
    Ok(())
}

/// Whether the pod's container image has no shell or coreutils (the lab's marker: an image
/// reference containing `distroless`); only the runtime binary itself can be run.
fn shell_less(api: &Api, ns: &str, name: &str) -> bool {
    api.cluster.store.get(PODS, ns, name).is_some_and(|p| {
        p["spec"]["containers"][0]["image"]
            .as_str()
            .is_some_and(|i| i.contains("distroless"))
    })
}

/// The error-channel Status of a command the image does not have, as the kubelet relays
/// containerd's and runc's error (kubectl prints it after "error: ").
fn not_found_status(program: &str, exec_id: &str) -> Vec<u8> {
    let message = format!(
        "Internal error occurred: error executing command in container: failed to exec in container: failed to start exec \"{exec_id}\": OCI runtime exec failed: exec failed: unable to start container process: exec: \"{program}\": executable file not found in $PATH: unknown"
    );
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
           "details": {"causes": [{"message": message}]}, "code": 500})
    .to_string()
    .into_bytes()
}

/// Handle `pods/{name}/exec`.
pub async fn exec(
    api: Arc<Api>,
    ns: String,
    name: String,
    pairs: Vec<(String, String)>,
    ws: WebSocketUpgrade,
) -> Response {
    let command: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return error(400, "BadRequest", "you must specify at least 1 command");
    }
    let container = pairs
        .iter()
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.as_str());
    if let Err(r) = running_pod_check(&api, &ns, &name, container, true) {
        return r;
    }
    let missing_program = (shell_less(&api, &ns, &name)
        && command[0].rsplit('/').next().is_none_or(|p| p != "ollama"))
    .then(|| command[0].clone());
    // The runtime's container, or a plain one (a debug pod) that sees its node.
    type Start = Box<dyn FnOnce(Vec<String>) -> crate::runtime::ExecStream + Send>;
    let start: Start = if let Some(runtime) = api.cluster.runtime_of(&ns, &name) {
        Box::new(move |argv| runtime.exec(argv))
    } else if let Some(plain) = api.cluster.plain_of(&ns, &name) {
        Box::new(move |argv| plain.exec(argv))
    } else {
        return error(
            400,
            "BadRequest",
            "unable to upgrade connection: container not found (\"ollama\")",
        );
    };
    let ws = ws.protocols(PROTOCOLS);
    let protocol =
        ChannelProtocol::from_header(ws.selected_protocol().and_then(|h| h.to_str().ok()));
    let delay = Duration::from_millis(api.exec_delay_ms.load(Ordering::Relaxed));
    let drop = api.conn_drop_token();
    let exec_id = api.cluster.hex(64);
    ws.on_upgrade(move |socket| async move {
        let (mut sink, mut stream) = socket.split();
        // The client's frames: stdin (ignored: no command here reads it), resize, close.
        let reader = async {
            while let Some(Ok(msg)) = stream.next().await {
                if matches!(msg, Message::Close(_)) {
                    break;
                }
            }
        };
        let writer = async {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if let Some(program) = &missing_program {
                if protocol != ChannelProtocol::V1 {
                    let _ = sink
                        .send(frame(3, &not_found_status(program, &exec_id)))
                        .await;
                }
                let _ = sink
                    .send(Message::Close(Some(CloseFrame {
                        code: 1000,
                        reason: "".into(),
                    })))
                    .await;
                return;
            }
            let mut out = start(command);
            let mut code = 0;
            while let Some(chunk) = out.recv().await {
                let msg = match chunk {
                    ExecChunk::Stdout(b) => frame(1, &b),
                    ExecChunk::Stderr(b) => frame(2, &b),
                    ExecChunk::Exit(c) => {
                        code = c;
                        break;
                    }
                };
                if sink.send(msg).await.is_err() {
                    return;
                }
            }
            if let Some(payload) = exit_status(protocol, code) {
                let _ = sink.send(frame(3, &payload)).await;
            }
            // A normal closure (1000): client-go treats anything else as an error.
            let _ = sink
                .send(Message::Close(Some(CloseFrame {
                    code: 1000,
                    reason: "".into(),
                })))
                .await;
        };
        tokio::select! {
            _ = writer => {}
            _ = reader => {}
            _ = drop.cancelled() => {}
        }
    })
}

/// Handle `pods/{name}/portforward` (one TCP connection to the pod per requested port).
pub async fn portforward(
    api: Arc<Api>,
    ns: String,
    name: String,
    pairs: Vec<(String, String)>,
    ws: WebSocketUpgrade,
) -> Response {
    let ports: Vec<u16> = pairs
        .iter()
        .filter(|(k, _)| k == "ports")
        .flat_map(|(_, v)| {
            v.split(',')
                .map(str::trim)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter_map(|p| p.parse().ok())
        .collect();
    if ports.is_empty() {
        return error(400, "BadRequest", "query parameter \"port\" is required");
    }
    if let Err(r) = running_pod_check(&api, &ns, &name, None, false) {
        return r;
    }
    let Some(ip) = api.cluster.with_pod(&ns, &name, |e| e.ip).flatten() else {
        return error(
            400,
            "BadRequest",
            "unable to upgrade connection: pod has no IP",
        );
    };
    let ws = ws.protocols(PROTOCOLS);
    let drop = api.conn_drop_token();
    ws.on_upgrade(move |socket| async move {
        tokio::select! {
            _ = forward(socket, ip, ports) => {}
            _ = drop.cancelled() => {}
        }
    })
}

async fn forward(socket: WebSocket, ip: std::net::Ipv4Addr, ports: Vec<u16>) {
    let (sink, mut stream) = socket.split();
    let sink = Arc::new(tokio::sync::Mutex::new(sink));
    let mut writers = Vec::new();
    let mut tasks = Vec::new();
    // The WebSocket closes when the pod side of every forwarded connection has closed.
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(ports.len()));
    for (i, port) in ports.iter().enumerate() {
        let data_ch = (2 * i) as u8;
        let prefix = port.to_le_bytes();
        {
            let mut s = sink.lock().await;
            if s.send(frame(data_ch, &prefix)).await.is_err()
                || s.send(frame(data_ch + 1, &prefix)).await.is_err()
            {
                return;
            }
        }
        match tokio::net::TcpStream::connect((ip, *port)).await {
            Ok(tcp) => {
                let (mut rd, wr) = tcp.into_split();
                writers.push(Some(wr));
                let sink = sink.clone();
                let open = open.clone();
                tasks.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; 32 * 1024];
                    loop {
                        match rd.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if sink
                                    .lock()
                                    .await
                                    .send(frame(data_ch, &buf[..n]))
                                    .await
                                    .is_err()
                                {
                                    break;
                                }
                            }
                        }
                    }
                    if open.fetch_sub(1, Ordering::SeqCst) == 1 {
                        let _ = sink
                            .lock()
                            .await
                            .send(Message::Close(Some(CloseFrame {
                                code: 1000,
                                reason: "".into(),
                            })))
                            .await;
                    }
                }));
            }
            Err(e) => {
                writers.push(None);
                open.fetch_sub(1, Ordering::SeqCst);
                let msg = format!("error forwarding port {port} to pod: {e}");
                let _ = sink
                    .lock()
                    .await
                    .send(frame(data_ch + 1, msg.as_bytes()))
                    .await;
            }
        }
    }
    while let Some(Ok(msg)) = stream.next().await {
        match msg {
            Message::Binary(b) if !b.is_empty() => {
                let ch = b[0];
                if ch == 255 {
                    // v5 close of one channel.
                    if let Some(&c) = b.get(1)
                        && let Some(Some(w)) = writers.get_mut(usize::from(c) / 2)
                    {
                        let _ = w.shutdown().await;
                    }
                    continue;
                }
                if ch % 2 == 0
                    && let Some(Some(w)) = writers.get_mut(usize::from(ch) / 2)
                    && w.write_all(&b[1..]).await.is_err()
                {
                    break;
                }
            }
            Message::Close(_) => break,
            _ => {}
        }
    }
    for t in tasks {
        t.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_per_protocol() {
        assert_eq!(exit_status(ChannelProtocol::V1, 0), None);
        let ok: serde_json::Value =
            serde_json::from_slice(&exit_status(ChannelProtocol::V5, 0).unwrap()).unwrap();
        assert_eq!(ok["status"], "Success");
        let fail: serde_json::Value =
            serde_json::from_slice(&exit_status(ChannelProtocol::V4, 3).unwrap()).unwrap();
        assert_eq!(fail["reason"], "NonZeroExitCode");
        assert_eq!(fail["details"]["causes"][0]["message"], "3");
        assert_eq!(
            ChannelProtocol::from_header(Some("v4.channel.k8s.io")),
            ChannelProtocol::V4
        );
    }
}
