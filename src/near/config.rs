//! A near cache's configuration and what it reports: the public side of SPEC.md §6.

use crate::error::{Error, Result};
use std::time::Duration;

/// The budget of a copy when none is given: 256 MiB.
pub(crate) const DEFAULT_BUDGET: u64 = 256 << 20;

/// How often a tracked copy is read again when no invalidation came, unless
/// [`NearCache::floor`] says otherwise (or the refresh interval is longer).
pub(crate) const DEFAULT_FLOOR: Duration = Duration::from_secs(60);

/// A filter's near cache: its copy's refresh interval (the most a cached answer may lag
/// behind Redis), memory budget and, optionally, the client that opens its invalidation
/// connection. Given to [`Builder::near_cache`](crate::Builder::near_cache).
///
/// ```
/// use std::time::Duration;
/// let cache = redbloom::NearCache::new(Duration::from_secs(1)).budget(64 << 20);
/// assert_eq!(cache.refresh(), Duration::from_secs(1));
/// assert_eq!(cache.budget_bytes(), 64 << 20);
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct NearCache {
    pub(super) refresh: Duration,
    pub(super) budget: u64,
    pub(super) floor: Duration,
    pub(super) tracking: Option<redis::Client>,
}

impl NearCache {
    /// A near cache whose answers lag at most `refresh` behind Redis, with the default
    /// budget (256 MiB) and no tracking: the copy is read again every `refresh`.
    pub fn new(refresh: Duration) -> Self {
        NearCache {
            refresh,
            budget: DEFAULT_BUDGET,
            floor: DEFAULT_FLOOR,
            tracking: None,
        }
    }

    /// The most bytes the copy may take.
    pub fn budget(mut self, bytes: u64) -> Self {
        self.budget = bytes;
        self
    }

    /// Learn of changes from Redis's invalidation messages (`CLIENT TRACKING` in broadcast
    /// mode, over a RESP3 connection of its own that `client` opens, with its address,
    /// credentials and TLS): the copy is read again only after a change, instead of every
    /// interval. Needs Redis 6 or later and, under an ACL, `CLIENT TRACKING` and `HELLO`.
    /// Without them, or while that connection is down, the copy is read every interval.
    /// For a single server (or a primary and its replicas): on a Redis Cluster one node sees
    /// only its own keys, so the filter refuses tracking there and reads every interval.
    pub fn tracking(mut self, client: redis::Client) -> Self {
        self.tracking = Some(client);
        self
    }

    /// With tracking, read the copy again at least this often even when no invalidation
    /// came (a floor against messages lost on a connection that died without a word).
    /// One minute unless given; never more often than the refresh interval.
    pub fn floor(mut self, every: Duration) -> Self {
        self.floor = every;
        self
    }

    /// The refresh interval: the most a cached answer lags behind Redis.
    pub fn refresh(&self) -> Duration {
        self.refresh
    }

    /// The most bytes the copy may take.
    pub fn budget_bytes(&self) -> u64 {
        self.budget
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.refresh.is_zero() {
            return Err(Error::InvalidConfig(
                "the near cache's refresh interval must be longer than zero".into(),
            ));
        }
        Ok(())
    }
}

/// What a near cache has done, from
/// [`RedisBloom::near_cache_stats`](crate::RedisBloom::near_cache_stats) and its peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct NearCacheStats {
    /// Items answered from a fresh copy, with no round trip.
    pub hits: u64,
    /// Items answered from a copy past its interval, because Redis could not be reached.
    pub stale_hits: u64,
    /// Items answered by Redis: no copy yet, or the copy past its interval.
    pub misses: u64,
    /// Copies read.
    pub refreshes: u64,
    /// Reads of a copy that failed.
    pub failed_refreshes: u64,
    /// Invalidation messages received for the filter's keys.
    pub invalidations: u64,
    /// Since the current copy's read began (`None`: no copy).
    pub age: Option<Duration>,
    /// The copy may miss changes older than the interval: Redis could not be reached when the
    /// copy was due.
    pub stale: bool,
    /// Invalidations are being received (tracking on and its connection up).
    pub tracking: bool,
    /// The copy's bytes.
    pub bytes: u64,
    /// The copy was turned off: the filter outgrew the budget (a filter that grows).
    pub over_budget: bool,
}

/// `Ok` when a copy of `bytes` fits `config` (and its interval is valid).
///
/// # Errors
/// [`Error::InvalidConfig`] for a zero interval; [`Error::NearCacheBudget`] naming both sizes.
pub(crate) fn check_budget(key: &str, config: &NearCache, bytes: u64) -> Result<()> {
    config.validate()?;
    if bytes > config.budget {
        return Err(Error::NearCacheBudget {
            key: key.to_owned(),
            bytes,
            budget: config.budget,
        });
    }
    Ok(())
}
