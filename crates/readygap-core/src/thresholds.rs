//! The thresholds of the readiness-contract verdicts a user may judge differently
//! (`[verdicts]` in the config file, `--verdict-*` flags): settings the session event carries,
//! so a replay judges as the session did. A module of its own so that the event does not
//! depend on the verdict detector (which reads events).

use serde::{Deserialize, Serialize};

/// The thresholds of the verdicts a user may want to set (seconds, bytes). The defaults are
/// in [`Default`]; README "Readiness-contract verdicts" lists them with their flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VerdictThresholds {
    /// A replacement Pending this long with a scheduling failure is a stalled rollout
    /// (default 15 s: a real scheduler retries within seconds, a GPU never appears).
    pub rollout_stall_after_s: f64,
    /// A Ready window shorter than this before the first answer is no shallow-readiness
    /// verdict (default 0.5 s).
    pub shallow_min_s: f64,
    /// Probe failures and a restart this far apart are not the same kill (default 120 s).
    pub kill_window_s: f64,
    /// A container at or under this much memory holds the runtime alone, no model
    /// (`model_not_resident`; default 128 MiB: Ollama idles at ~14 MiB).
    pub runtime_only_bytes: u64,
    /// A model counts as resident at Ready when `/api/ps` showed it no later than this after
    /// the endpoint turned ready (residency is polled, every 0.25 s by default; default
    /// 0.3 s — raise it with a slower `--residency-interval`).
    pub resident_slack_s: f64,
    /// A first inference whose load took less than this did not load the model (default
    /// 0.25 s).
    pub no_load_s: f64,
}

impl Default for VerdictThresholds {
    fn default() -> Self {
        Self {
            rollout_stall_after_s: 15.0,
            shallow_min_s: 0.5,
            kill_window_s: 120.0,
            runtime_only_bytes: 128 << 20,
            resident_slack_s: 0.3,
            no_load_s: 0.25,
        }
    }
}

impl VerdictThresholds {
    /// Every threshold finite and not negative (a config or flag value that is not is an
    /// error naming it).
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in [
            ("rollout_stall_after", self.rollout_stall_after_s),
            ("shallow_min", self.shallow_min_s),
            ("kill_window", self.kill_window_s),
            ("resident_slack", self.resident_slack_s),
            ("no_load", self.no_load_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("verdict threshold {name} = {v}: not a duration"));
            }
        }
        Ok(())
    }
}
