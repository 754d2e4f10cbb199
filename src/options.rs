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
}
