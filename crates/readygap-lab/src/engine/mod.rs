//! What runs a lab pod's serving container: the simulated runtime (`crate::runtime`, the
//! default) or a real engine, a real `ollama serve` process per container built by
//! `scripts/peers.sh` (see `ollama`), or a real `llama-server` (see `llama_server`), in its
//! own memory cgroup (see `cgroup`), its models directory on the pod's volume (see
//! `volume`).
//!
//! The kubelet asks `Engine::start_container`; everything else (exec, memory, residency, stop)
//! goes through the `RuntimeHandle` it returns, whichever engine made it.

pub mod cgroup;
pub mod llama_server;
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
    /// A real llama.cpp `llama-server` per pod (peers from scripts/peers.sh).
    Llamacpp,
}

impl EngineKind {
    /// The names on the command line.
    pub const NAMES: [(&'static str, EngineKind); 3] = [
        ("simulated", EngineKind::Simulated),
        ("ollama", EngineKind::Ollama),
        ("llamacpp", EngineKind::Llamacpp),
    ];
}

/// Which real server the real engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Ollama,
    LlamaServer,
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

/// The llama.cpp peers: the `llama-server` binary (`READYGAP_LLAMA_SERVER`) and the
/// directory of its `.gguf` files (`READYGAP_LLAMA_MODELS`), as an [`OllamaPeer`] whose
/// `bin` and `models` are those.
pub fn llama_peer_from_env() -> OllamaPeer {
    let root = OllamaPeer::from_env()
        .bin
        .parent()
        .and_then(|b| b.parent())
        .map(PathBuf::from)
        .unwrap_or_default();
    let bin = std::env::var_os("READYGAP_LLAMA_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("bin/llama-server"));
    let models = std::env::var_os("READYGAP_LLAMA_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("gguf"));
    OllamaPeer { bin, models }
}

/// Why the llama.cpp peers cannot be used, if they cannot.
pub fn llama_peer_missing(peer: &OllamaPeer) -> Option<String> {
    if !peer.bin.is_file() {
        return Some(format!(
            "no llama-server at {} (run scripts/peers.sh llama, or set READYGAP_LLAMA_SERVER)",
            peer.bin.display()
        ));
    }
    if !peer.models.join("smollm2.gguf").is_file() {
        return Some(format!(
            "no smollm2.gguf in {} (run scripts/peers.sh llama, or set READYGAP_LLAMA_MODELS)",
            peer.models.display()
        ));
    }
    if cgroup::detect().is_none() {
        return Some("no memory cgroup controller on this machine".into());
    }
    None
}

/// The engine of one lab.
#[derive(Debug, Clone)]
pub enum Engine {
    Simulated,
    Ollama(Arc<ollama::OllamaEngine>),
    /// The real engine running `llama-server` (`server` is [`Server::LlamaServer`]).
    Llamacpp(Arc<ollama::OllamaEngine>),
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
            EngineKind::Llamacpp => {
                let peer = llama_peer_from_env();
                if let Some(why) = llama_peer_missing(&peer) {
                    return Err(format!("--engine llamacpp: {why}"));
                }
                let mut e = ollama::OllamaEngine::new(peer)?;
                e.server = Server::LlamaServer;
                Ok(Self::Llamacpp(Arc::new(e)))
            }
        }
    }

    pub fn kind(&self) -> EngineKind {
        match self {
            Self::Simulated => EngineKind::Simulated,
            Self::Ollama(_) => EngineKind::Ollama,
            Self::Llamacpp(_) => EngineKind::Llamacpp,
        }
    }

    /// The real engine, whichever server it runs.
    pub fn real(&self) -> Option<&Arc<ollama::OllamaEngine>> {
        match self {
            Self::Simulated => None,
            Self::Ollama(e) | Self::Llamacpp(e) => Some(e),
        }
    }
}
