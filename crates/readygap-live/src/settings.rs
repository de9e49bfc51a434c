//! The settings tree's shared branches, each default written once: the limits of a
//! trial's stages ([`StageTimeouts`]), the memory feed ([`MemoryConfig`]), the T2
//! probes' interval ([`PROBE_INTERVAL`]) and the pause between trials ([`COOLDOWN`]); the
//! runtime polls' intervals are [`crate::sources::runtime::PollConfig`]'s and the runtime's
//! port [`crate::sources::runtime::RuntimeKind::default_port`]'s. The command line (the binary's `SessionArgs`)
//! shows these defaults in its help ([`duration_text`]), the session
//! ([`crate::run::SessionConfig`]) holds the branches, and the trial runner
//! ([`crate::runner::TrialConfig`]) holds the same branches, copied whole, never field by
//! field. (Shape as ratatui's component template: one `Config` handed down.)

use std::time::Duration;

/// How often a new pod's runtime is probed for T2 (`--probe-interval`'s default).
pub const PROBE_INTERVAL: Duration = Duration::from_millis(50);

/// The pause between `readygap run`'s trials (`--cooldown`'s default).
pub const COOLDOWN: Duration = Duration::from_secs(15);

/// Limits of a trial's stages: a stage that does not finish in time ends the trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct StageTimeouts {
    /// T0 → T1 (`--ready-timeout`).
    #[serde(rename = "ready_timeout")]
    pub ready: Duration,
    /// T1 → T2 (`--runtime-timeout`).
    #[serde(rename = "runtime_timeout")]
    pub runtime: Duration,
    /// T3 → T4 (`--inference-timeout`; also the limit of readygap's inference requests).
    #[serde(rename = "inference_timeout")]
    pub inference: Duration,
    /// Waiting for a pod to replace at the start of a trial.
    #[serde(rename = "target_timeout")]
    pub target: Duration,
}

impl Default for StageTimeouts {
    /// The defaults of `readygap run` and the dashboard.
    fn default() -> Self {
        Self {
            ready: Duration::from_secs(300),
            runtime: Duration::from_secs(300),
            inference: Duration::from_secs(600),
            target: Duration::from_secs(120),
        }
    }
}

/// The memory feed of each pod (its container's cgroup, read through exec).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryConfig {
    /// Follow each pod's memory (`--no-memory` turns it off).
    #[serde(rename = "memory")]
    pub follow: bool,
    /// Interval of the samples (`--memory-interval`).
    #[serde(rename = "memory_interval")]
    pub interval: Duration,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            follow: true,
            interval: Duration::from_millis(250),
        }
    }
}

/// A default duration as the command line writes it (`300s`, `50ms`), for its help.
pub fn duration_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms >= 1000 && ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_written_as_the_command_line_reads_them() {
        assert_eq!(duration_text(PROBE_INTERVAL), "50ms");
        assert_eq!(duration_text(StageTimeouts::default().ready), "300s");
        assert_eq!(duration_text(StageTimeouts::default().inference), "600s");
        assert_eq!(duration_text(MemoryConfig::default().interval), "250ms");
        for d in [
            PROBE_INTERVAL,
            Duration::from_secs(300),
            Duration::from_millis(1500),
        ] {
            assert_eq!(
                readygap_core::units::parse_duration(&duration_text(d)),
                Ok(d)
            );
        }
    }
}
