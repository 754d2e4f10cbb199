//! Invalidations from Redis (server-assisted client-side caching): a RESP3 connection of the
//! near cache's own with `CLIENT TRACKING ON BCAST PREFIX …` for the filter's keys. Every
//! change to a key under those prefixes, by any client (this one's included), sends an
//! `invalidate` push, which marks the copy out of date ([`Signal::invalidate`]). A lost
//! connection counts as an invalidation (changes may have gone unheard) and turns tracking off
//! until the next read of the copy opens it again.

use super::Signal;
use redis::aio::{AsyncPushSender, MultiplexedConnection, SendError};
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The fewest prefixes that cover `keys` (Redis refuses overlapping prefixes on one
/// connection): a key under another's name is covered by it.
pub(crate) fn prefixes(mut keys: Vec<String>) -> Vec<String> {
    keys.sort();
    keys.dedup();
    let mut kept: Vec<String> = Vec::new();
    for key in keys {
        if !kept.iter().any(|p| key.starts_with(p.as_str())) {
            kept.push(key);
        }
    }
    kept
}

/// The tracking connection and what it needs to open again.
pub(crate) struct Tracker {
    client: Option<redis::Client>,
    prefixes: Vec<String>,
    signal: Arc<Signal>,
    /// The open connection (kept so that its task lives).
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// Which connection is current: a push from an older one is ignored.
    generation: Arc<AtomicU64>,
    /// The server refused tracking (too old, an ACL, a cluster): reads every interval.
    refused: AtomicBool,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("prefixes", &self.prefixes)
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl Tracker {
    pub(crate) fn new(client: &redis::Client, prefixes: Vec<String>, signal: Arc<Signal>) -> Self {
        let info = client.get_connection_info().clone();
        let redis = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        // Without RESP3 no push would arrive: no client then, and tracking refused.
        let client = redis::Client::open(info.set_redis_settings(redis)).ok();
        Tracker {
            client,
            prefixes,
            signal,
            conn: tokio::sync::Mutex::new(None),
            generation: Arc::new(AtomicU64::new(0)),
            refused: AtomicBool::new(false),
        }
    }

    /// Opens the tracking connection when it is down (waiting at most `patience`); leaves
    /// tracking off when it cannot.
    pub(crate) async fn ensure(&self, patience: Duration) {
        if self.signal.up.load(Ordering::SeqCst) || self.refused.load(Ordering::Relaxed) {
            return;
        }
        let Some(client) = &self.client else {
            self.refuse("the client could not be opened with RESP3");
            return;
        };
        let mut conn = self.conn.lock().await;
        if self.signal.up.load(Ordering::SeqCst) {
            return;
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let sender = Pushes {
            signal: Arc::clone(&self.signal),
            generation,
            current: Arc::clone(&self.generation),
        };
        let patience = patience.max(Duration::from_secs(1));
        let config = AsyncConnectionConfig::new()
            .set_push_sender(sender)
            .set_connection_timeout(Some(patience))
            .set_response_timeout(Some(patience));
        let opened = client
            .get_multiplexed_async_connection_with_config(&config)
            .await;
        let mut opened = match opened {
            Ok(opened) => opened,
            Err(err) => {
                tracing::debug!(target: "redbloom", error = %err, "near cache: tracking connection not opened");
                return;
            }
        };
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("TRACKING").arg("ON").arg("BCAST");
        for prefix in &self.prefixes {
            cmd.arg("PREFIX").arg(prefix);
        }
        let cluster: redis::RedisResult<String> = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut opened)
            .await;
        if cluster.is_ok_and(|info| info.contains("cluster_enabled:1")) {
            self.refuse("the server is a cluster node: one node sees only its own keys");
            return;
        }
        match cmd.query_async::<()>(&mut opened).await {
            Ok(()) => {
                self.signal.up.store(true, Ordering::SeqCst);
                *conn = Some(opened);
                tracing::info!(target: "redbloom", prefixes = ?self.prefixes, "near cache: tracking on");
            }
            Err(err) if err.code().is_some() => self.refuse(&err.to_string()),
            Err(err) => {
                tracing::debug!(target: "redbloom", error = %err, "near cache: tracking not turned on");
            }
        }
    }

    fn refuse(&self, why: &str) {
        self.refused.store(true, Ordering::Relaxed);
        tracing::warn!(target: "redbloom",
            why,
            "near cache: no tracking; the copy is read every interval"
        );
    }
}

/// The push sender of one tracking connection.
struct Pushes {
    signal: Arc<Signal>,
    generation: u64,
    current: Arc<AtomicU64>,
}

impl AsyncPushSender for Pushes {
    fn send(&self, info: PushInfo) -> Result<(), SendError> {
        if self.current.load(Ordering::SeqCst) != self.generation {
            return Ok(());
        }
        match info.kind {
            PushKind::Invalidate => {
                self.signal.invalidations.fetch_add(1, Ordering::Relaxed);
                crate::metrics::near(self.signal.kind, crate::metrics::NearEvent::Invalidation, 1);
                self.signal.invalidate();
            }
            PushKind::Disconnection => {
                self.signal.up.store(false, Ordering::SeqCst);
                self.signal.invalidate();
                tracing::info!(target: "redbloom", "near cache: tracking connection lost");
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::prefixes;

    #[test]
    fn prefixes_never_overlap() {
        let keys = ["bl", "{bl}:redbloom:params", "bl:x", "a", "ab", "b"]
            .map(String::from)
            .to_vec();
        assert_eq!(prefixes(keys), ["a", "b", "{bl}:redbloom:params"]);
    }
}
