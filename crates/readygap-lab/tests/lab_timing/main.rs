//! The built-in lab's timings against the published measurements: trials, model loads, the
//! page cache. They run one at a time (see [`alone`]): a timing compared with a published
//! mean must not share the 2-core machine with another lab in the same process.

mod kube_calibration;
mod runtime_cache;
mod runtime_calibration;

/// Held by each test of this binary for its whole run.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Wait until no other test of this binary runs.
pub async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    ALONE.lock().await
}
