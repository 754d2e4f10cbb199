//! One slot group of one call: what a kind's steps get from the core.

use super::kind::Seam;
use super::{Conn, Core};
use crate::engine::Engine;
use crate::error::Result;
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::retry::Clock;
use std::future::Future;

/// The part `index` of a filter, in a call whose clock is `clock`.
pub(crate) struct Ctx<'a, C, K: Seam> {
    pub(crate) core: &'a Core<C, K>,
    pub(crate) clock: &'a Clock,
    pub(crate) index: usize,
}

impl<C, K: Seam> Clone for Ctx<'_, C, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C, K: Seam> Copy for Ctx<'_, C, K> {}

impl<'a, C, K: Seam> Ctx<'a, C, K> {
    pub(crate) fn exec(&self) -> &'a Exec<C> {
        &self.core.exec
    }

    /// The kind's own state.
    pub(crate) fn kind(&self) -> &'a K {
        &self.core.kind
    }

    /// This slot group's keys and state.
    pub(crate) fn part(&self) -> &'a K::Part {
        &self.core.parts.parts()[self.index]
    }

    /// The filter's name.
    pub(crate) fn key(&self) -> &'a str {
        &self.core.key
    }

    /// The filter's parameters guard, whatever slot it lives in.
    pub(crate) fn params(&self) -> &'a Guard {
        &self.core.guard
    }

    /// The parameters guard when it lives in this part's slot group (a filter of one key), so
    /// that each step checks the parameters in the same transaction or script; `None` for a
    /// shard, whose filter checks them beside.
    pub(crate) fn guard(&self) -> Option<&'a Guard> {
        self.core.inline().then_some(&self.core.guard)
    }
}

impl<'a, C: Conn, K: Seam> Ctx<'a, C, K> {
    /// `attempt` under the filter's retry policy and the call's clock.
    pub(crate) async fn retried<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.core.exec.retried(self.clock, attempt).await
    }

    /// A write step: `attempt`, then `WAIT` for the replicas the filter asks for (on the
    /// connection that carried the write, routed by a command on `key` that `engine` allows),
    /// retried as one: after a reconnect a `WAIT` alone would confirm nothing.
    pub(crate) async fn written<T, F, Fut>(
        &self,
        key: &str,
        engine: Engine,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let exec = &self.core.exec;
        exec.retried(self.clock, || {
            let done = attempt();
            async move {
                let done = done.await?;
                exec.confirm(key, engine).await?;
                Ok(done)
            }
        })
        .await
    }
}
