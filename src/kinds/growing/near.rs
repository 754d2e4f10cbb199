//! A growing filter's near cache: each part's number of levels and its segments. Its size
//! grows with the filter: known before each read (`HLEN` first), a read over the budget turns
//! the copy off instead of taking it.

use super::Growing;
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::near::{self, Near, NearCache};
use redis::aio::ConnectionLike;

/// The copy: per part, its levels and the segments they lie in.
#[derive(Debug)]
pub(super) struct Copy {
    parts: Vec<(usize, Vec<Vec<u8>>)>,
}

impl near::Copy for Copy {
    fn bytes(&self) -> u64 {
        self.parts
            .iter()
            .flat_map(|(_, segments)| segments)
            .map(|bytes| bytes.len() as u64)
            .sum()
    }
}

/// The near cache of a growing filter: its first level (every part's) must fit the budget.
pub(super) fn attach<C>(growing: &mut Growing<C>, config: NearCache) -> Result<()> {
    // The first level lies at the start of the first segment.
    let bytes = growing.levels[0].end().div_ceil(8) * u64::from(growing.parts.count());
    let keys = growing
        .parts
        .parts()
        .iter()
        .map(|p| p.counts.clone())
        .collect();
    growing.near = Some(Near::new(
        &growing.key,
        config,
        bytes,
        near::prefixes(keys),
    )?);
    Ok(())
}

impl<C> Growing<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// The answer for `item` from the near cache's copy, when it may give it now (see
    /// [`Near::answer_now`]).
    pub(super) fn answer_now(&self, item: &[u8]) -> Option<bool> {
        self.near
            .as_ref()?
            .answer_now(item, |copy, item| self.in_copy(copy, item))
    }

    /// Whether `item` is in some level of the copy.
    fn in_copy(&self, copy: &Copy, item: &[u8]) -> bool {
        let i = self.parts.part_of(item);
        let (levels, segments) = &copy.parts[i];
        let hash = ItemHash::of(item, Layout::Native);
        (0..*levels)
            .rev()
            .any(|level| self.in_level(segments, level, &hash))
    }

    /// Checks `items` from the near cache's copy while it is fresh, else from Redis.
    pub(super) async fn check<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let Some(near) = &self.near else {
            return self.per_part(items, false).await;
        };
        let clock = self.exec.clock();
        let parts = self.parts.parts();
        let answer = |copy: &Copy, item: &[u8]| self.in_copy(copy, item);
        let read = || async {
            if let Some(guard) = &self.guard {
                self.exec
                    .retried(&clock, || guard.ensure(&self.exec, false))
                    .await?;
            }
            let mut bytes = 0;
            for part in parts {
                let hlen = redis::cmd("HLEN").arg(&part.counts).to_owned();
                let levels: usize = self
                    .exec
                    .retried(&clock, || self.exec.query(&part.counts, &hlen))
                    .await?;
                bytes += self.bytes_of(levels.clamp(1, self.levels.len()));
            }
            if bytes > near.budget() {
                return Err(Error::NearCacheBudget {
                    key: self.key.clone(),
                    bytes,
                    budget: near.budget(),
                });
            }
            let mut copy = Copy {
                parts: Vec::with_capacity(parts.len()),
            };
            for part in parts {
                let read = self.exec.retried(&clock, || self.read_levels(part)).await?;
                copy.parts.push(read);
            }
            Ok(copy)
        };
        let remote = || self.per_part(items, false);
        near.check(items, answer, read, remote).await
    }
}
