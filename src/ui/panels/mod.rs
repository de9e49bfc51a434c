//! The dashboard's panels, one file each: each renders its part of the [`State`] into a
//! buffer area (pure functions of the state, the view state and the theme).
//!
//! [`State`]: readygap_core::state::State

pub mod banner;
pub mod dialog;
pub mod endpoints;
pub mod footer;
pub mod header;
pub mod host;
pub mod log;
pub mod memory;
pub mod pods;
pub mod replaybar;
pub mod residency;
pub mod timeline;
pub mod verdicts;
