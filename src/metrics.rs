//! The crate's metrics (docs/operations.md "Metrics"), all of them here. With the `metrics`
//! feature they go to the [`metrics`](https://docs.rs/metrics) facade, whose recorder (a
//! Prometheus exporter, say) is the application's choice; without a recorder they cost a lookup
//! each. Without the feature every function here is empty: nothing is paid.
//!
//! | name | type | labels |
//! |---|---|---|
//! | `redbloom_calls_total` | counter | `kind`, `op`, `outcome` |
//! | `redbloom_call_duration_seconds` | histogram | `kind`, `op`, `outcome` |
//! | `redbloom_retries_total` | counter | `kind` |
//! | `redbloom_fallbacks_total` | counter | `kind`, `from`, `to` |
//! | `redbloom_near_cache_total` | counter | `kind`, `event` (`hit`, `stale_hit`, `miss`, `refresh`, `failed_refresh`, `invalidation`) |

use crate::error::{Error, Result};

/// When a call began (with the feature; nothing without).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started(#[cfg(feature = "metrics")] std::time::Instant);

impl Started {
    #[inline]
    pub(crate) fn now() -> Self {
        Started(
            #[cfg(feature = "metrics")]
            std::time::Instant::now(),
        )
    }
}

/// What the near cache did, for `redbloom_near_cache_total`'s `event`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum NearEvent {
    Hit,
    StaleHit,
    Miss,
    Refresh,
    FailedRefresh,
    Invalidation,
}

impl NearEvent {
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    fn name(self) -> &'static str {
        match self {
            NearEvent::Hit => "hit",
            NearEvent::StaleHit => "stale_hit",
            NearEvent::Miss => "miss",
            NearEvent::Refresh => "refresh",
            NearEvent::FailedRefresh => "failed_refresh",
            NearEvent::Invalidation => "invalidation",
        }
    }
}

/// A call's outcome label: `ok`, or what failed.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn outcome<T>(result: &Result<T>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(err) => err.label(),
    }
}

/// A public call of a filter of `kind` ended with `result`.
#[inline]
pub(crate) fn call<T>(kind: &'static str, op: &'static str, result: &Result<T>, started: Started) {
    #[cfg(feature = "metrics")]
    {
        let outcome = outcome(result);
        let labels = [("kind", kind), ("op", op), ("outcome", outcome)];
        ::metrics::counter!("redbloom_calls_total", &labels).increment(1);
        ::metrics::histogram!("redbloom_call_duration_seconds", &labels)
            .record(started.0.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, op, result, started);
}

/// A step of a call of a filter of `kind` is retried after a passing fault.
#[inline]
pub(crate) fn retry(kind: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!("redbloom_retries_total", "kind" => kind).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A filter of `kind` falls back from `from` to `to` (the server or its ACL lacks `from`).
#[inline]
pub(crate) fn fallback(kind: &'static str, from: &'static str, to: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!("redbloom_fallbacks_total", "kind" => kind, "from" => from, "to" => to)
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, from, to);
}

/// A filter of `kind`'s near cache did `event`, `n` times (items, for hits and misses).
#[inline]
pub(crate) fn near(kind: &'static str, event: NearEvent, n: u64) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!("redbloom_near_cache_total", "kind" => kind, "event" => event.name())
        .increment(n);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, event, n);
}

impl Error {
    /// A short name of the error for metrics' `outcome`.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Error::InvalidConfig(_) => "invalid_config",
            Error::OffsetOutOfRange { .. } => "offset_out_of_range",
            Error::ParamsMismatch { .. } => "params_mismatch",
            Error::FileMismatch { .. } => "file_mismatch",
            Error::Lost { .. } => "lost",
            Error::ReplicaNotSynced { .. } => "replica_not_synced",
            Error::OutcomeUnknown { .. } => "outcome_unknown",
            Error::LegacyNames { .. } => "legacy_names",
            Error::ForeignString { .. } => "foreign_string",
            Error::Evictable { .. } => "evictable",
            Error::MissingCommands { .. } => "missing_commands",
            Error::FilterFull { .. } => "filter_full",
            Error::WrongType { .. } => "wrong_type",
            Error::Timeout(_) => "timeout",
            Error::Deadline(_) => "deadline",
            Error::NoPermission(_) => "no_permission",
            Error::OutOfMemory(_) => "out_of_memory",
            Error::NotReplicated { .. } => "not_replicated",
            Error::Connection(_) => "connection",
            Error::Closed(_) => "closed",
            Error::UnexpectedReply(_) => "unexpected_reply",
            Error::Snapshot(_) => "snapshot",
            Error::NearCacheBudget { .. } => "near_cache_budget",
            Error::Redis(_) => "redis",
        }
    }
}
