//! The pure core's integration tests: recordings round-trip, the study's CSV files, the
//! replay index and trial timelines (one module per subject).

mod bad_input;
mod bench;
mod fleet;
mod record_roundtrip;
mod recordings;
mod replay_index;
mod timeline;
mod verdicts;
