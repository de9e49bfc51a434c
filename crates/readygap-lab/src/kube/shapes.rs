//! The lab's built-in Deployment and Service in the shape of the other LLM servers, as
//! `manifests/overlays/llamacpp` and `manifests/overlays/vllm` shape the real manifests:
//! llama.cpp's `llama-server` (port 8080, `-m /models/<model>.gguf`, readiness `GET
//! /health`) and vLLM's OpenAI server (port 8000, one `nvidia.com/gpu`, readiness `GET
//! /health`). The Deployment keeps its name (`ollama`), so readygap's defaults apply.

use crate::engine::llama_server::{HEALTH, LLAMA_IMAGE, LLAMA_PORT, MODELS_MOUNT, gguf_file};
use serde_json::{Value, json};

/// The image of vLLM's OpenAI-compatible server.
pub const VLLM_IMAGE: &str = "vllm/vllm-openai:v0.10.1";
/// vLLM's default port.
pub const VLLM_PORT: u16 = 8000;

/// Which server the built-in workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    #[default]
    Ollama,
    Llamacpp,
    Vllm,
}

impl Shape {
    /// The names on the command line (`--lab-server`).
    pub const NAMES: [(&'static str, Shape); 3] = [
        ("ollama", Shape::Ollama),
        ("llamacpp", Shape::Llamacpp),
        ("vllm", Shape::Vllm),
    ];
}

fn probe(c: &mut Value, port: u16) {
    if c["readinessProbe"].is_object() {
        let period = c["readinessProbe"]["periodSeconds"].clone();
        c["readinessProbe"] = json!({
            "httpGet": {"path": HEALTH, "port": port, "scheme": "HTTP"},
            "periodSeconds": period, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3
        });
    }
}

/// Shape the Deployment and Service for `shape` serving `model`.
pub fn apply(shape: Shape, dep: &mut Value, svc: &mut Value, model: &str) {
    let port = match shape {
        Shape::Ollama => return,
        Shape::Llamacpp => LLAMA_PORT,
        Shape::Vllm => VLLM_PORT,
    };
    let c = &mut dep["spec"]["template"]["spec"]["containers"][0];
    c["ports"] = json!([{"name": "http", "containerPort": port, "protocol": "TCP"}]);
    if let Some(o) = c.as_object_mut() {
        o.remove("env");
    }
    c["volumeMounts"] = json!([{"name": "models", "mountPath": MODELS_MOUNT}]);
    probe(c, port);
    match shape {
        Shape::Llamacpp => {
            c["image"] = json!(LLAMA_IMAGE);
            c["args"] = json!([
                "-m",
                format!("{MODELS_MOUNT}/{}", gguf_file(model)),
                "--alias",
                model,
                "--host",
                "0.0.0.0",
                "--port",
                LLAMA_PORT.to_string(),
                "-c",
                "2048",
                "-t",
                "1",
                "--metrics",
                "--no-webui"
            ]);
        }
        Shape::Vllm => {
            c["image"] = json!(VLLM_IMAGE);
            c["args"] = json!([
                "--model",
                model,
                "--served-model-name",
                model,
                "--host",
                "0.0.0.0",
                "--port",
                VLLM_PORT.to_string(),
                "--download-dir",
                MODELS_MOUNT
            ]);
            c["resources"]["limits"]["nvidia.com/gpu"] = json!("1");
            c["resources"]["requests"]["nvidia.com/gpu"] = json!("1");
            dep["spec"]["template"]["spec"]["tolerations"] =
                json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
        }
        Shape::Ollama => {}
    }
    svc["spec"]["ports"] =
        json!([{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep() -> Value {
        json!({"spec": {"template": {"spec": {"containers": [{
            "name": "ollama", "image": "ollama/ollama:0.6.8",
            "env": [{"name": "OLLAMA_HOST", "value": "0.0.0.0:11434"}],
            "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}},
            "readinessProbe": {"httpGet": {"path": "/api/tags", "port": 11434}, "periodSeconds": 1}
        }]}}}})
    }

    #[test]
    fn the_deployment_takes_each_servers_shape() {
        for (shape, image, port) in [
            (Shape::Llamacpp, LLAMA_IMAGE, LLAMA_PORT),
            (Shape::Vllm, VLLM_IMAGE, VLLM_PORT),
        ] {
            let (mut d, mut s) = (dep(), json!({"spec": {}}));
            apply(shape, &mut d, &mut s, "gemma3:270m");
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(c["image"], image);
            assert!(c.get("env").is_none());
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/health");
            assert_eq!(c["ports"][0]["containerPort"], port);
            assert_eq!(s["spec"]["ports"][0]["port"], port);
        }
        let (mut d, mut s) = (dep(), json!({"spec": {}}));
        apply(Shape::Llamacpp, &mut d, &mut s, "gemma3:270m");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["args"][1],
            "/models/gemma3.gguf"
        );
        let (mut d, mut s) = (dep(), json!({"spec": {}}));
        apply(Shape::Vllm, &mut d, &mut s, "m");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "1"
        );
    }
}
