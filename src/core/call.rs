//! A public call as the outside sees it: its span (`tracing`, docs/operations.md
//! "Observability") and its metrics (docs/operations.md "Metrics"), made here for every call of
//! every kind.

use super::kind::Kind;
use super::{Conn, Core};
use crate::error::Result;
use crate::metrics;
use std::future::Future;
use tracing::Instrument;

/// The crate's public calls, by the name their spans and metrics carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Add,
    Exists,
    AddMany,
    ExistsMany,
    AddIfAbsent,
    AddManyIfAbsent,
    Remove,
    RemoveMany,
    Info,
    Clear,
    Expire,
    Export,
    Import,
    CheckParams,
    ReadOffline,
}

/// The span of a call named `$name`, with its item count when it has items.
macro_rules! span {
    ($name:literal, $kind:expr, $key:expr, $items:expr) => {
        match $items {
            Some(items) => tracing::debug_span!(
                target: "redbloom",
                $name,
                op = $name,
                kind = $kind,
                key = $key,
                items,
                attempts = tracing::field::Empty
            ),
            None => tracing::debug_span!(
                target: "redbloom",
                $name,
                op = $name,
                kind = $kind,
                key = $key,
                attempts = tracing::field::Empty
            ),
        }
    };
}

impl Call {
    /// The call's name: its span's name and `op`, its metrics' `op`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::Add => "add",
            Call::Exists => "exists",
            Call::AddMany => "add_many",
            Call::ExistsMany => "exists_many",
            Call::AddIfAbsent => "add_if_absent",
            Call::AddManyIfAbsent => "add_many_if_absent",
            Call::Remove => "remove",
            Call::RemoveMany => "remove_many",
            Call::Info => "info",
            Call::Clear => "clear",
            Call::Expire => "expire",
            Call::Export => "export",
            Call::Import => "import",
            Call::CheckParams => "check_params",
            Call::ReadOffline => "read_offline",
        }
    }

    /// The call's span (a span's name must be known where it is declared: one per call).
    fn span(self, kind: &'static str, key: &str, items: Option<usize>) -> tracing::Span {
        match self {
            Call::Add => span!("add", kind, key, items),
            Call::Exists => span!("exists", kind, key, items),
            Call::AddMany => span!("add_many", kind, key, items),
            Call::ExistsMany => span!("exists_many", kind, key, items),
            Call::AddIfAbsent => span!("add_if_absent", kind, key, items),
            Call::AddManyIfAbsent => span!("add_many_if_absent", kind, key, items),
            Call::Remove => span!("remove", kind, key, items),
            Call::RemoveMany => span!("remove_many", kind, key, items),
            Call::Info => span!("info", kind, key, items),
            Call::Clear => span!("clear", kind, key, items),
            Call::Expire => span!("expire", kind, key, items),
            Call::Export => span!("export", kind, key, items),
            Call::Import => span!("import", kind, key, items),
            Call::CheckParams => span!("check_params", kind, key, items),
            Call::ReadOffline => span!("read_offline", kind, key, items),
        }
    }
}

/// Runs `work`, the public call `call` of the filter `core` of kind `K` (on `items` items), in
/// its span (a DEBUG span; an `error` event in it when the call fails) and counted in the
/// metrics by kind, call and outcome, with its latency; the first call of a handle first asks
/// whether the filter was made under older names ([`legacy`](super::legacy)).
pub(crate) async fn run<C: Conn, K: Kind, T>(
    call: Call,
    core: &Core<C, K>,
    items: Option<usize>,
    work: impl Future<Output = Result<T>>,
) -> Result<T> {
    let span = call.span(K::NAME.as_str(), &core.key, items);
    let started = metrics::Started::now();
    let work = async {
        if core.names.initialized() {
            return work.await;
        }
        // One deadline bounds the whole call: the question asked before its first call's
        // steps, and those steps, which take their own clock after it.
        let clock = core.exec.clock();
        Box::pin(core.names_checked(&clock)).await?;
        match clock.deadline() {
            Some(deadline) => tokio::time::timeout_at(deadline, work)
                .await
                .unwrap_or_else(|_| {
                    Err(crate::Error::Deadline(clock.timeout().unwrap_or_default()))
                }),
            None => work.await,
        }
    };
    let result = work.instrument(span.clone()).await;
    if let Err(err) = &result {
        span.in_scope(|| tracing::debug!(target: "redbloom", error = %err));
    }
    metrics::call(K::NAME.as_str(), call.name(), &result, started);
    result
}
