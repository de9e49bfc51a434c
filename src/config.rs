//! The config file, `~/.config/readygap/config.toml` (or `--config FILE`): the file's shape
//! ([`ConfigFile`], every field optional) is kept apart from the resolved settings (the
//! dashboard's [`DashboardOptions`], from [`resolve`]). A missing default file is fine; a missing `--config` file, a syntax error, an
//! unknown key or a bad key binding is an error naming the file.
//!
//! ```toml
//! theme = "solarized-dark"
//! read_only = false
//! [keys]
//! delete_pod = "x"
//! quit = ["q", "ctrl-q"]
//! [verdicts]            # thresholds of the readiness-contract verdicts
//! rollout_stall_after = "30s"
//! runtime_memory = "256Mi"
//! ```

use crate::ui::app::DashboardOptions;
use crate::ui::keymap::Keymap;
use color_eyre::eyre::{Result, WrapErr, eyre};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One key or several for a command.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum KeyList {
    One(String),
    Many(Vec<String>),
}

impl KeyList {
    pub fn keys(&self) -> Vec<String> {
        match self {
            KeyList::One(k) => vec![k.clone()],
            KeyList::Many(v) => v.clone(),
        }
    }
}

/// The config file as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub theme: Option<String>,
    pub read_only: Option<bool>,
    pub keys: Option<BTreeMap<String, KeyList>>,
    /// Per-node access for the cold step (`[nodes."PATTERN"]`, see `node::config`).
    pub nodes: Option<BTreeMap<String, readygap_live::node::config::NodeConfig>>,
    /// Thresholds of the readiness-contract verdicts.
    pub verdicts: Option<VerdictsFile>,
    /// Where GPU memory is read (`[gpu]`).
    pub gpu: Option<GpuFile>,
}

/// `[gpu]` as written: `dcgm = "gpu-operator/nvidia-dcgm-exporter:9400"` (or a URL), the
/// DCGM exporter `--dcgm` names (the flag wins).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuFile {
    pub dcgm: Option<String>,
}

/// `[verdicts]` as written: durations (`15s`, `500ms`, `2m`) and a memory size (`128Mi`);
/// each missing one keeps its default ([`readygap_core::verdict::VerdictThresholds::default`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictsFile {
    pub rollout_stall_after: Option<String>,
    pub shallow_min: Option<String>,
    pub kill_window: Option<String>,
    pub runtime_memory: Option<String>,
    pub resident_slack: Option<String>,
    pub no_load: Option<String>,
}

/// readygap's config folder: `$XDG_CONFIG_HOME/readygap` or `~/.config/readygap`.
pub fn config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("readygap"))
}

/// Parse a config file's text; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<ConfigFile> {
    toml::from_str(text).map_err(|e| eyre!("config {file}: {}", e.message()))
}

/// Read the config: `explicit` (must exist) or the default file (may be missing).
pub fn load(explicit: Option<&Path>) -> Result<(ConfigFile, Option<PathBuf>)> {
    let (path, required) = match explicit {
        Some(p) => (p.to_path_buf(), true),
        None => match config_dir() {
            Some(d) => (d.join("config.toml"), false),
            None => return Ok((ConfigFile::default(), None)),
        },
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((parse(&text, &path.display().to_string())?, Some(path))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            Ok((ConfigFile::default(), None))
        }
        Err(e) => Err(e).wrap_err_with(|| format!("reading config {}", path.display())),
    }
}

/// The `[nodes]` tables of the config file, checked.
pub fn nodes_section(file: &ConfigFile) -> Result<readygap_live::node::config::NodesSection> {
    let section = readygap_live::node::config::NodesSection {
        nodes: file.nodes.clone().unwrap_or_default(),
    };
    for (pattern, config) in &section.nodes {
        config
            .check()
            .map_err(|e| eyre!("config [nodes.{pattern:?}]: {e}"))?;
    }
    Ok(section)
}

/// Resolve the file against the command line (`--theme`, `--read-only` win): the settings
/// in force, as the dashboard's options (its mode and title left to the caller).
pub fn resolve(
    file: &ConfigFile,
    path: Option<&Path>,
    cli_theme: Option<&str>,
    cli_read_only: bool,
) -> Result<DashboardOptions> {
    let overrides: BTreeMap<String, Vec<String>> = file
        .keys
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.keys()))
        .collect();
    let keymap = Keymap::with_overrides(&overrides).map_err(|e| {
        let file = path.map_or_else(|| "config".into(), |p| p.display().to_string());
        eyre!("config {file}: {e}")
    })?;
    Ok(DashboardOptions {
        theme: cli_theme
            .map(str::to_string)
            .or_else(|| file.theme.clone())
            .unwrap_or_else(|| "default".into()),
        read_only: cli_read_only || file.read_only.unwrap_or(false),
        keymap,
        // The user theme folder: `$XDG_CONFIG_HOME/readygap/themes` or `~/.config/readygap/themes`.
        themes_dir: config_dir().map(|d| d.join("themes")),
        ..DashboardOptions::default()
    })
}
