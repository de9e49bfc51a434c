//! The API server's shared state (`Api`): the cluster, the tokens the lab issued, and the
//! switches that drop watches and long connections; the routes of `api` and the
//! subresources (`exec`, `logs`, `proxy`) all serve from it.

use super::authz;
use super::cluster::Cluster;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The API server's state.
pub struct Api {
    pub cluster: Arc<Cluster>,
    /// Cancelled (and replaced) to drop every open watch.
    watch_drop: Mutex<CancellationToken>,
    /// Cancelled (and replaced) to drop every long-running connection (API restart).
    conn_drop: Mutex<CancellationToken>,
    /// Extra delay before exec output, in ms (fault).
    pub exec_delay_ms: AtomicU64,
    /// How often watches send bookmarks.
    pub bookmark_interval: Duration,
    /// Set by `POST /lab/faults {"restart_api_server": true}`; the server loop watches it.
    pub restart: tokio::sync::Notify,
    pub port: AtomicU64,
    /// How many watch streams were opened (for tests of resumption).
    pub watches_opened: AtomicU64,
    /// The ServiceAccount tokens the lab issued (TokenRequest).
    pub tokens: authz::Tokens,
    /// Requests and bytes served, per client and request (`GET /lab/requests`).
    pub served: super::accounting::Served,
    /// The lab serves TLS: a request without credentials is 401, and the lab's own
    /// endpoints (`/lab/…`) are the admin's (see [`super::tls`]).
    pub require_credentials: std::sync::atomic::AtomicBool,
}

impl Api {
    /// API state over a cluster.
    pub fn new(cluster: Arc<Cluster>, bookmark_interval: Duration) -> Self {
        Self {
            cluster,
            watch_drop: Mutex::new(CancellationToken::new()),
            conn_drop: Mutex::new(CancellationToken::new()),
            exec_delay_ms: AtomicU64::new(0),
            bookmark_interval,
            restart: tokio::sync::Notify::new(),
            port: AtomicU64::new(0),
            watches_opened: AtomicU64::new(0),
            tokens: authz::Tokens::default(),
            served: Default::default(),
            require_credentials: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn token(m: &Mutex<CancellationToken>) -> CancellationToken {
        m.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn fire(m: &Mutex<CancellationToken>) {
        let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
        g.cancel();
        *g = CancellationToken::new();
    }

    /// A token cancelled when watches must drop.
    pub fn watch_drop_token(&self) -> CancellationToken {
        Self::token(&self.watch_drop)
    }

    /// A token cancelled when long connections (exec, port-forward, watches) must drop.
    pub fn conn_drop_token(&self) -> CancellationToken {
        Self::token(&self.conn_drop)
    }

    /// Drop every open watch (their streams end with an error).
    pub fn drop_watches(&self) {
        Self::fire(&self.watch_drop);
    }

    /// Drop every long-running connection.
    pub fn drop_connections(&self) {
        Self::fire(&self.watch_drop);
        Self::fire(&self.conn_drop);
    }
}
