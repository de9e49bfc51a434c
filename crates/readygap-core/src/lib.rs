//! The pure core: events, the reducer, trials and their timelines, time series and
//! statistics. Nothing here does I/O or reads a clock.

pub mod bench;
pub mod event;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod fleet;
pub mod focus;
pub mod gpu;
pub mod kube_events;
pub mod rbac;
pub mod record;
pub mod replay;
pub mod report;
pub mod residency;
pub mod runtime_log;
pub mod series;
pub mod state;
pub mod stats;
pub mod thresholds;
pub mod timeline;
pub mod units;
pub mod verdict;
pub mod vram;
