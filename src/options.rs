//! How a filter's calls wait, retry and confirm: set by the [`Builder`](crate::Builder), read
//! by the executor. Its own module so that neither the builder nor any kind depends on the
//! other for it.

use crate::retry::Retry;
use std::time::Duration;

/// A filter's call options.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// The most one public call may take, every step and retry included.
    pub(crate) timeout: Option<Duration>,
    /// Retries after passing faults.
    pub(crate) retry: Retry,
    /// Replicas that must confirm every write, and how long to wait for them.
    pub(crate) replicas: Option<(u32, Duration)>,
    /// Bytes per step of a large batch's range merge or range read (`None`: the default,
    /// [`dense::RANGE_BYTES`](crate::dense::RANGE_BYTES)).
    pub(crate) merge_chunk: Option<u64>,
    /// Write even when the server may evict the filter's keys.
    pub(crate) accept_eviction: bool,
    /// Retried writes go as before, without a record of their answers
    /// ([`once`](crate::io::once)).
    pub(crate) inexact_retries: bool,
    /// How long an import waits for its input's next byte (`None`: the default,
    /// [`IDLE_INPUT`](crate::snapshot::IDLE_INPUT)).
    pub(crate) input_idle: Option<Duration>,
    /// Single-item calls go each as its own step, not grouped ([`group`](crate::core)).
    pub(crate) no_group_commit: bool,
}

impl Options {
    /// How long an import waits for its input's next byte.
    pub(crate) fn input_idle(&self) -> Duration {
        self.input_idle.unwrap_or(crate::snapshot::IDLE_INPUT)
    }

    /// Whether single-item calls go by group commit.
    pub(crate) fn group_commit(&self) -> bool {
        !self.no_group_commit
    }

    /// Bytes per step of a range merge or range read.
    pub(crate) fn merge_chunk(&self) -> u64 {
        self.merge_chunk.unwrap_or(crate::dense::RANGE_BYTES)
    }
}
