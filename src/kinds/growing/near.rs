//! A growing filter's near cache: each part's number of levels and its segments. Its size
//! grows with the filter: known before each read (`HLEN` first), a read over the budget turns
//! the copy off instead of taking it.

use super::{read, Growing, Part};
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::layout::Layout;

/// The copy: per part, its levels and the segments they lie in.
#[derive(Debug)]
pub struct Copy {
    parts: Vec<(usize, Vec<Vec<u8>>)>,
}

impl crate::near::Copy for Copy {
    fn bytes(&self) -> u64 {
        self.parts
            .iter()
            .flat_map(|(_, segments)| segments)
            .map(|bytes| bytes.len() as u64)
            .sum()
    }
}

impl Growing {
    /// The copy's bytes when the filter is built: its first level (every part's), which lies
    /// at the start of the first segment, must fit the budget.
    pub(super) fn first_copy_bytes(&self, parts: &Shards<Part>) -> u64 {
        self.levels[0].end().div_ceil(8) * u64::from(parts.count())
    }

    /// Whether `item` is in some level of the copy.
    pub(super) fn found_in(&self, parts: &Shards<Part>, copy: &Copy, item: &[u8]) -> bool {
        let (levels, segments) = &copy.parts[parts.part_of(item)];
        let hash = ItemHash::of(item, Layout::Native);
        self.in_levels(*levels, segments, &hash)
    }
}

/// A new copy: a sharded filter's parameters checked, every part's number of levels read
/// (`HLEN`) and their bytes checked against the budget, then every part's levels read whole.
///
/// # Errors
/// [`Error::NearCacheBudget`] when the levels have outgrown the budget.
pub(super) async fn read<C: Conn>(ctx: Ctx<'_, C, Growing>, budget: u64) -> Result<Copy> {
    ctx.ensure_beside(false).await?;
    let kind = ctx.kind();
    let levels = ctx
        .each_part(|ctx| async move {
            let counts = &ctx.part().counts;
            let hlen = redis::cmd("HLEN").arg(counts).to_owned();
            ctx.exec().query::<usize>(counts, &hlen).await
        })
        .await?;
    let bytes = levels
        .iter()
        .map(|&n| kind.bytes_of(n.clamp(1, kind.levels.len())))
        .sum();
    if bytes > budget {
        return Err(Error::NearCacheBudget {
            key: ctx.key().to_owned(),
            bytes,
            budget,
        });
    }
    let parts = ctx.each_part(read::levels).await?;
    for (index, (levels, _)) in parts.iter().enumerate() {
        if *levels == 0 && !ctx.params().is_checked() {
            // A part without levels (its counts missing) and no parameters seen stored: an
            // empty filter, unless the server is a replica that has not synced and holds
            // nothing yet (SPEC.md §3, "Replicas").
            let counts = &ctx.at(index).part().counts;
            ctx.retried(|| crate::core::lost::synced(ctx.exec(), ctx.key(), counts))
                .await?;
        }
    }
    Ok(Copy { parts })
}
