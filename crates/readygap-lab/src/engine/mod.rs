//! What runs a lab pod's serving container: the simulated runtime (`crate::runtime`, the
//! default) or the real engine, a real `ollama serve` process per container built by
//! `scripts/peers.sh` (see `ollama`), in its own memory cgroup (see `cgroup`), its models
//! directory on the pod's volume (see `volume`).
//!
//! The kubelet asks `Engine::start_container`; everything else (exec, memory, residency, stop)
//! goes through the `RuntimeHandle` it returns, whichever engine made it.

pub mod cgroup;
pub mod ollama;
pub mod profiles;
pub mod volume;

use std::path::PathBuf;
use std::sync::Arc;

/// The `--engine` of `lab serve`, `demo` and `run --lab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// The lab's calibrated imitation of Ollama.
    #[default]
    Simulated,
    /// A real `ollama serve` per pod (peers from scripts/peers.sh).
    Ollama,
}

impl EngineKind {
    /// The names on the command line.
    pub const NAMES: [(&'static str, EngineKind); 2] = [
        ("simulated", EngineKind::Simulated),
        ("ollama", EngineKind::Ollama),
    ];
}

/// Where the real peers are (scripts/peers.sh writes them; its peers.env exports these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OllamaPeer {
    /// The `ollama` binary (`READYGAP_OLLAMA_BIN`).
    pub bin: PathBuf,
    /// The models directory the peers script imported the models into
    /// (`READYGAP_OLLAMA_MODELS`), copied (hard links) onto each volume.
    pub models: PathBuf,
}

impl OllamaPeer {
    /// The peers from `READYGAP_OLLAMA_BIN`/`READYGAP_OLLAMA_MODELS`, else the peers script's
    /// default place (`${READYGAP_PEERS:-$HOME/.cache/readygap/peers}`).
    pub fn from_env() -> Self {
        let root = std::env::var_os("READYGAP_PEERS")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/readygap/peers"))
            })
            .unwrap_or_else(|| PathBuf::from(".cache/readygap/peers"));
        let bin = std::env::var_os("READYGAP_OLLAMA_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("bin/ollama"));
        let models = std::env::var_os("READYGAP_OLLAMA_MODELS")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("models"));
        Self { bin, models }
    }

    /// Why the peers cannot be used, if they cannot (missing binary or models, no cgroup).
    pub fn missing(&self) -> Option<String> {
        if !self.bin.is_file() {
            return Some(format!(
                "no ollama binary at {} (run scripts/peers.sh, or set READYGAP_OLLAMA_BIN)",
                self.bin.display()
            ));
        }
        if !self.models.join("manifests").is_dir() {
            return Some(format!(
                "no imported models in {} (run scripts/peers.sh, or set READYGAP_OLLAMA_MODELS)",
                self.models.display()
            ));
        }
        if cgroup::detect().is_none() {
            return Some("no memory cgroup controller on this machine".into());
        }
        None
    }
}

/// The engine of one lab.
#[derive(Debug, Clone)]
pub enum Engine {
    Simulated,
    Ollama(Arc<ollama::OllamaEngine>),
}

impl Engine {
    /// The engine for `kind`; the real one checks its peers first (a clear error if absent).
    pub fn new(kind: EngineKind) -> Result<Self, String> {
        match kind {
            EngineKind::Simulated => Ok(Self::Simulated),
            EngineKind::Ollama => {
                let peer = OllamaPeer::from_env();
                if let Some(why) = peer.missing() {
                    return Err(format!("--engine ollama: {why}"));
                }
                Ok(Self::Ollama(Arc::new(ollama::OllamaEngine::new(peer)?)))
            }
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self {
            Self::Simulated => EngineKind::Simulated,
            Self::Ollama(_) => EngineKind::Ollama,
        }
    }
}
