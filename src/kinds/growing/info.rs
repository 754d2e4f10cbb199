//! A growing filter's info: each part's levels, the new items they took and their bits set,
//! added up over the parts.

use super::read::ParamsCheck;
use super::Growing;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::info::{FilterInfo, GrowingInfo, KeyTtl};
use crate::io::tx::{Replies, Slot, Tx};

/// One part's levels as read.
#[derive(Debug)]
pub struct PartInfo {
    /// Per level made: its number, the new items it took, its bits set.
    levels: Vec<(u32, u64, u64)>,
    /// The bytes its segments hold.
    bytes: u64,
    ttl: KeyTtl,
}

/// One part's info (one attempt): its counts and TTL, with the stored parameters of a filter
/// of one key; then each level's bits set (its byte range of its segment) and each segment's
/// bytes.
pub(super) async fn part<C: Conn>(ctx: Ctx<'_, C, Growing>) -> Result<PartInfo> {
    let (exec, kind, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let mut tx = Tx::plain();
    let check = ParamsCheck::add(&ctx, &mut tx, true);
    let counts: Slot<Vec<(u32, u64)>> = tx.add(redis::cmd("HGETALL").arg(&part.counts).to_owned());
    let pttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(&part.counts).to_owned());
    let mut replies = exec.run(&part.counts, &tx).await?;
    ParamsCheck::take(check, &ctx, &mut replies)?;
    let mut counts = replies.take(counts)?;
    counts.sort_unstable();
    let ttl = KeyTtl::from_pttl(replies.take(pttl)?);
    if counts
        .last()
        .is_some_and(|&(level, _)| level as usize >= kind.levels.len())
    {
        return Err(Error::UnexpectedReply(format!(
            "{:?} has a level past its {} levels: {counts:?}",
            ctx.key(),
            kind.levels.len()
        )));
    }
    let mut tx = Tx::plain();
    let set: Vec<Slot<u64>> = counts
        .iter()
        .map(|&(level, _)| {
            let shape = &kind.levels[level as usize];
            tx.add(
                redis::cmd("BITCOUNT")
                    .arg(&part.level_keys[level as usize])
                    .arg(shape.base / 8)
                    .arg(shape.end() / 8 - 1)
                    .to_owned(),
            )
        })
        .collect();
    let strlen: Vec<Slot<u64>> = (0..kind.segments_of(counts.len()))
        .map(|s| tx.add(redis::cmd("STRLEN").arg(&part.segment_keys[s]).to_owned()))
        .collect();
    let mut replies = match counts.is_empty() {
        true => Replies::new(Vec::new()),
        false => exec.run(&part.counts, &tx).await?,
    };
    let mut levels = Vec::new();
    for ((level, items), set) in counts.into_iter().zip(set) {
        levels.push((level, items, replies.take(set)?));
    }
    let mut bytes = 0;
    if !levels.is_empty() {
        for len in strlen {
            bytes += replies.take(len)?;
        }
    }
    Ok(PartInfo { levels, bytes, ttl })
}

impl Growing {
    /// The filter `key`'s info from every part's: the levels' totals, the most levels any part
    /// has, and a check's rate (an absent item goes to one part: the parts' average).
    pub(super) fn total(&self, key: &str, parts: Vec<PartInfo>) -> Result<GrowingInfo> {
        let mut filter = FilterInfo {
            key: key.to_owned(),
            bits: 0,
            hashes: 0,
            bits_set: 0,
            bytes: 0,
            estimated_items: 0.0,
            estimated_fpr: 0.0,
            ttl: KeyTtl::Missing,
        };
        let (mut levels, mut capacity, mut items, mut fpr) = (0u32, 0u64, 0u64, 0.0f64);
        let count = parts.len() as u32;
        for part in parts {
            filter.bytes += part.bytes;
            filter.ttl = filter.ttl.longest_lived(part.ttl);
            levels = levels.max(part.levels.len() as u32);
            // ln of the chance that no level answers "present" for an absent item (in logs,
            // so that rates far below 1e-16 do not round to 0).
            let mut absent = 0.0f64;
            for (level, taken, set) in part.levels {
                let Some(shape) = self.levels.get(level as usize) else {
                    return Err(Error::UnexpectedReply(format!(
                        "{key:?} has a level {level}, past its {} levels",
                        self.levels.len()
                    )));
                };
                filter.bits += shape.bits();
                filter.hashes = filter.hashes.max(shape.hashes());
                filter.bits_set += set;
                capacity += shape.capacity;
                items += taken;
                absent += (-shape.fpr_with(taken)).ln_1p();
            }
            fpr += -absent.exp_m1() / f64::from(count);
        }
        filter.estimated_items = items as f64;
        filter.estimated_fpr = fpr;
        Ok(GrowingInfo {
            filter,
            levels,
            capacity,
            items,
            max_levels: self.levels.len() as u32,
        })
    }
}
