//! One module per command of the command line (see [`crate::cli`]).

pub mod bench;
pub mod bench_scale;
pub mod cast;
pub mod dashboard;
pub mod drop_caches;
pub mod export;
pub mod lab;
pub mod replay;
pub mod report;
pub mod run;
pub mod watch;
