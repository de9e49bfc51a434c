//! The signals that end readygap as its own quit does: SIGINT (Ctrl-C outside raw mode, or
//! `kill -INT`), SIGTERM (`kill`, a service manager) and SIGHUP (the terminal went away).
//! Without a handler each of them kills the process where it stands: the terminal stays in
//! raw mode on the alternate screen, debug pods stay on the node and a trial ends unrecorded.
//! Waiting on [`quit`] lets the caller close down cleanly instead.

/// Wait for the first of SIGINT, SIGTERM and SIGHUP; its name. From the first call on, these
/// signals no longer kill the process. Pending forever where signals cannot be listened to.
pub async fn quit() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
            _ = hup.recv() => "SIGHUP",
        }
    }
    #[cfg(not(unix))]
    {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    }
}
