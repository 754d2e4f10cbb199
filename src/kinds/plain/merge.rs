//! A pass over a key of bits by ranges (the `ranges` module's queue takes the turns).
//!
//! **Adds.** Each range the batch touches is one transaction: `SET` of the range's bitmap into
//! the scratch key (with a TTL), then `lua/merge_range.lua`, which ORs it in with native
//! commands (`GETRANGE` into a second scratch key, `BITOP OR`, `SETRANGE` back) and replies
//! with the range's bytes from before; the answers ("new") come from those. The first range
//! goes alone (an ACL refusal then writes nothing anywhere), then a key shorter than the pass
//! needs grows in one step, then the other ranges go pipelined,
//! [`RANGES_IN_FLIGHT_BYTES`](dense::RANGES_IN_FLIGHT_BYTES) at a time.
//!
//! **Checks** read the ranges the batch touches (`GETRANGE`, from the first to the last byte
//! holding one of its bits), as many in flight, and test the bits here.
//!
//! **Atomicity.** Each range is atomic, a batch is not: an item whose bits fall in two ranges is
//! set in two steps. Another client adding the same item at the same moment may then see one
//! of its bits set and one not, and both report it new. No bit is ever lost: every step ORs
//! into the bytes as they are at that moment.

use super::bits::{Bits, Run};
use super::ranges::{Answer, Direction, Pass};
use crate::dense::{self, Grouped, RangeMerge};
use crate::error::{Error, Result};
use crate::io::exec::Cap;
use crate::io::exec::Conn;
use crate::io::tx::{Slot, Tx};
use crate::scripts;
use futures_util::StreamExt;

/// The TTL of the scratch keys, should a merge step fail between their `SET` and their `DEL`.
const SCRATCH_TTL_MS: u64 = 60_000;

/// What a merge by ranges refused by the ACL falls back to.
const MERGE_BY_RANGES: Cap = Cap::Merge {
    from: "merge by ranges",
    to: "BITFIELD",
};

impl<C: Conn> Pass for (&Bits, Run<'_, C>) {
    fn pays(&self, direction: Direction, offsets: usize) -> bool {
        let (bits, ctx) = *self;
        match direction {
            Direction::Write => bits.merge_pays(ctx, offsets),
            Direction::Read => bits.read_pays(ctx, offsets),
        }
    }

    async fn run(&self, direction: Direction, batches: &[&Grouped]) -> Result<Vec<Answer>> {
        let (bits, ctx) = *self;
        match direction {
            Direction::Write => bits.merge_ranges(ctx, batches).await,
            Direction::Read => bits.read_ranges(ctx, batches).await,
        }
    }
}

impl Bits {
    /// Whether a merge of `offsets` offsets by ranges pays for its pass over the key.
    fn merge_pays<C: Conn>(&self, ctx: Run<'_, C>, offsets: usize) -> bool {
        let range = ctx.exec.options().merge_chunk();
        dense::merge_by_ranges(self.geometry.max_bytes(), range, offsets as u64)
    }

    /// Whether a read of the ranges `offsets` offsets touch pays.
    fn read_pays<C: Conn>(&self, ctx: Run<'_, C>, offsets: usize) -> bool {
        let range = ctx.exec.options().merge_chunk();
        dense::read_by_ranges(self.geometry.max_bytes(), range, offsets as u64)
    }

    /// One merge over the key for `batches` (grouped with the same ranges), in order: one
    /// answer per batch.
    async fn merge_ranges<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batches: &[&Grouped],
    ) -> Result<Vec<Answer>> {
        let per_item = || batches.iter().map(|_| Answer::PerItem).collect();
        let (scratch, scratch_or) = (&self.scratch, &self.scratch_or);
        let offsets: usize = batches.iter().map(|b| b.offsets()).sum();
        if !self.merge_pays(ctx, offsets) {
            return Ok(per_item());
        }
        let range = ctx.exec.options().merge_chunk();
        let bytes = self.geometry.max_bytes();
        // A native filter's parameters, stored again after a clear, or a mismatch reported
        // before anything is written.
        if let Some(guard) = ctx.guard {
            let mut tx = Tx::plain();
            if let Some(slot) = guard.step(&mut tx) {
                let stored = ctx.exec.run(&self.key, &tx).await?.take(slot)?;
                guard.check_step(stored)?;
            }
        }
        let mut new: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.items()]).collect();
        // Each range's transaction, made as the steps go out: the range's bitmap (built in one
        // buffer, reused) into the scratch key, then the script.
        let mut buffer = vec![0u8; range.min(bytes) as usize];
        let transaction = |bitmap: &[u8]| {
            let mut tx = Tx::atomic();
            let mut set = redis::cmd("SET");
            set.arg(scratch).arg(bitmap).arg("PX").arg(SCRATCH_TTL_MS);
            tx.add_unread(set);
            tx
        };
        let step = |(merge, mut tx): (RangeMerge, Tx)| async move {
            // EVAL, not EVALSHA: NOSCRIPT cannot be retried inside EXEC.
            let mut eval = redis::cmd("EVAL");
            eval.arg(scripts::MERGE_RANGE.source())
                .arg(3)
                .arg(&self.key)
                .arg(scratch)
                .arg(scratch_or)
                .arg(merge.first_byte);
            let old: Slot<Vec<u8>> = tx.add(eval);
            let old = ctx.exec.run(&self.key, &tx).await?.take(old)?;
            Ok::<_, Error>((merge, old))
        };
        let ranges = batches[0].ranges();
        // The first range alone: an ACL that refuses the merge refuses it before anything is
        // written (the script's one write to the key comes last), and the batches go by
        // BITFIELD. Then the key grows, if it must, in one step, and the other ranges follow.
        let mut next = 0;
        let first = std::iter::from_fn(|| {
            while next < ranges {
                next += 1;
                if let Some(made) = RangeMerge::new(batches, next - 1, &mut buffer, transaction) {
                    return Some(made);
                }
            }
            None
        })
        .next();
        if let Some(first) = first {
            match step(first).await {
                Ok((merge, old)) => merge.mark_new(batches, old, &mut new),
                Err(err) if ctx.exec.lacks(MERGE_BY_RANGES, &self.key, &err) => {
                    return Ok(per_item());
                }
                Err(err) => return Err(err),
            }
        }
        self.grow(ctx, batches).await?;
        let mut steps = futures_util::stream::iter(next..ranges)
            .filter_map(|r| {
                let made = RangeMerge::new(batches, r, &mut buffer, transaction);
                std::future::ready(made)
            })
            .map(step)
            .buffered(in_flight(range));
        while let Some(step) = steps.next().await {
            let (merge, old) = step?;
            merge.mark_new(batches, old, &mut new);
        }
        Ok(new.into_iter().map(Answer::Done).collect())
    }

    /// Grows the key, when shorter, up to the last byte the merge writes, in one step (a
    /// `SETRANGE` of one zero byte there, which Redis fills with zeros up to it; the bytes are
    /// unchanged and the length is the one the merge leaves). Grown range by range instead, the
    /// string would be reallocated at every few steps, and whenever the allocator cannot extend
    /// it in place, moved: each move copies the whole string (seen: 0.25-0.45 s near 512 MiB,
    /// several times in one load). One step costs Redis about 0.7 ns per byte, once (0.36-0.4 s
    /// for a new key of 512 MiB; a per-item first write pays as much).
    async fn grow<C: Conn>(&self, ctx: Run<'_, C>, batches: &[&Grouped]) -> Result<()> {
        let ranges = batches.first().map_or(0, |b| b.ranges());
        let Some(last) = (0..ranges).rev().find_map(|r| {
            batches
                .iter()
                .filter_map(|b| b.span(r))
                .map(|(_, hi)| hi)
                .max()
        }) else {
            return Ok(());
        };
        let length: u64 = ctx
            .exec
            .query(&self.key, redis::cmd("STRLEN").arg(&self.key))
            .await?;
        if length <= last {
            let mut grow = redis::cmd("SETRANGE");
            grow.arg(&self.key).arg(last).arg(&b"\0"[..]);
            let _: u64 = ctx.exec.query(&self.key, &grow).await?;
        }
        Ok(())
    }

    /// One read over the key for `batches`: each range any of them touches read once (from the
    /// first to the last byte holding one of their bits); for each item, whether its bits are
    /// all set.
    async fn read_ranges<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batches: &[&Grouped],
    ) -> Result<Vec<Answer>> {
        let offsets: usize = batches.iter().map(|b| b.offsets()).sum();
        if !self.read_pays(ctx, offsets) {
            return Ok(batches.iter().map(|_| Answer::PerItem).collect());
        }
        let range = ctx.exec.options().merge_chunk();
        let span = |r| {
            let spans = batches.iter().filter_map(|batch| batch.span(r));
            let span = spans.reduce(|(lo, hi), (l, h)| (lo.min(l), hi.max(h)));
            std::future::ready(span.map(|span| (r, span)))
        };
        let read = |(r, (first, last)): (usize, (u64, u64))| async move {
            let mut cmd = redis::cmd("GETRANGE");
            cmd.arg(&self.key).arg(first).arg(last);
            let bytes: Vec<u8> = ctx.exec.query(&self.key, &cmd).await?;
            Ok::<_, Error>((r, first, bytes))
        };
        let mut reads = futures_util::stream::iter(0..batches[0].ranges())
            .filter_map(span)
            .map(read)
            .buffered(in_flight(range));
        let mut present: Vec<Vec<bool>> = batches.iter().map(|b| vec![true; b.items()]).collect();
        while let Some(read) = reads.next().await {
            let (r, first, bytes) = read?;
            for (batch, present) in batches.iter().zip(&mut present) {
                batch.mark_absent(r, first, &bytes, present);
            }
        }
        Ok(present.into_iter().map(Answer::Done).collect())
    }
}

/// Ranges in flight at once: [`RANGES_IN_FLIGHT_BYTES`](dense::RANGES_IN_FLIGHT_BYTES) of them.
fn in_flight(range: u64) -> usize {
    (dense::RANGES_IN_FLIGHT_BYTES / range).max(1) as usize
}
