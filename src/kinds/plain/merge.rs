//! A pass over a key of bits by ranges (the `ranges` module's queue takes the turns).
//!
//! **Adds.** Each range the batch touches is one script: `lua/stage_range.lua` (the range's
//! bitmap into the scratch key), then `lua/merge_range.lua`, which ORs it in with native
//! commands (`GETRANGE` into a second scratch key, `BITOP OR`, `SETRANGE` back) and replies
//! with the range's bytes from before; the answers ("new") come from those. The scratch keys'
//! commands are neither replicated nor appended to the AOF (only the `SETRANGE` is), and a
//! range that sets no new bit writes nothing and replies 0. The first range goes alone (an ACL
//! refusal then writes nothing anywhere), then a key shorter than the pass needs grows in one
//! step, then the other ranges go pipelined,
//! [`RANGES_IN_FLIGHT_BYTES`](dense::RANGES_IN_FLIGHT_BYTES) at a time.
//!
//! **Checks** read the ranges the batch touches (`GETRANGE`, from the first to the last byte
//! holding one of its bits), as many in flight, and test the bits here.
//!
//! **Recorded** (exact answers across retries, SPEC.md §3): a batch goes alone, not gathered
//! with others, and each range is the same script in the once wrapper, which also records the
//! range's bytes from before under the batch's step (a range that sets no new bit: nothing
//! recorded); the record is deleted as soon as its reply is in hand, and the answers of the
//! ranges done are kept with the batch ([`RangesDone`]), so that a retry of the batch sends
//! only the ranges whose replies it has not seen: applied, their records answer; not applied,
//! they apply. The records in Redis at any moment are those of the ranges in flight (at most
//! [`RANGES_IN_FLIGHT_BYTES`](dense::RANGES_IN_FLIGHT_BYTES) per batch) and of replies lost.
//!
//! **Atomicity.** Each range is atomic, a batch is not: an item whose bits fall in two ranges is
//! set in two steps. Another client adding the same item at the same moment may then see one
//! of its bits set and one not, and both report it new. No bit is ever lost: every step ORs
//! into the bytes as they are at that moment.

use super::bits::{Batch, Bits, Run};
use super::ranges::{Answer, Direction, Pass};
use crate::dense::{self, Grouped, RangeMerge};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::exec::Cap;
use crate::io::exec::Conn;
use crate::io::once::{self, Step};
use crate::scripts;
use futures_util::StreamExt;
use redis::Value;
use std::sync::PoisonError;

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

/// The answers of a recorded merge by ranges so far, kept with its batch across attempts.
#[derive(Debug)]
pub(crate) struct RangesDone {
    /// For each item, whether one of its bits in a range done was new.
    new: Vec<bool>,
    /// For each range, whether its answers are in `new` (its record acknowledged).
    done: Vec<bool>,
}

impl Bits {
    /// A batch's recorded merge by ranges under `step`, for a key over
    /// [`dense::MAX_BYTES`] and a batch that pays for it alone against recorded commands
    /// ([`dense::recorded_merge_by_ranges`]); `None` when the batch goes by recorded commands
    /// instead (nothing written).
    pub(super) async fn merge_ranges_once<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        step: &Step,
        batch: &Batch<'_>,
    ) -> Result<Option<Vec<bool>>> {
        let offsets = batch.len() * self.geometry.hashes as usize;
        if ctx.engine != Engine::Fast
            || !ctx.exec.has(MERGE_BY_RANGES)
            || self.geometry.max_bytes() <= dense::MAX_BYTES
            || !self.recorded_merge_pays(ctx, offsets)
        {
            return Ok(None);
        }
        let range = ctx.exec.options().merge_chunk();
        let Some(grouped) = batch.grouped(range)? else {
            return Ok(None);
        };
        self.guard_alone(ctx).await?;
        let ranges = grouped.ranges();
        let progress = &batch.ranges_done;
        let lock = || progress.lock().unwrap_or_else(PoisonError::into_inner);
        // A retry of the batch (`started`) sends only the ranges whose answers it lacks.
        let (started, to_do) = {
            let mut kept = lock();
            let started = kept.is_some();
            let done = &kept
                .get_or_insert_with(|| RangesDone {
                    new: vec![false; batch.len()],
                    done: vec![false; ranges],
                })
                .done;
            let to_do: Vec<usize> = (0..ranges).filter(|&r| !done[r]).collect();
            (started, to_do)
        };
        let batches = [grouped.as_ref()];
        let mut buffer = vec![0u8; range.min(self.geometry.max_bytes()) as usize];
        let rings = step.rings(&self.key);
        let merge = |(merge, bitmap): (RangeMerge, Vec<u8>)| {
            let rings = &rings;
            async move {
                let index = batch.range_index(merge.r());
                let mut keys = vec![
                    self.key.as_str(),
                    self.scratch.as_str(),
                    self.scratch_or.as_str(),
                ];
                keys.extend(rings.iter().map(String::as_str));
                let [id, epoch, retry, keep, answer] = step.args(&self.key, index);
                let args: [&dyn scripts::Arg; 7] = [
                    &merge.first_byte,
                    &bitmap,
                    &id,
                    &epoch,
                    &retry,
                    &keep,
                    &answer,
                ];
                let reply = ctx
                    .exec
                    .script(&self.key, &once::MERGE_RANGE, &keys, &args)
                    .await?;
                // The range's bytes from before; none when it set no new bit (nothing written,
                // nothing recorded: no item new there).
                let old = match reply {
                    Value::BulkString(old) => Some(old),
                    Value::Int(0) => None,
                    reply => {
                        return Err(Error::UnexpectedReply(format!(
                            "{reply:?} from a merge by ranges"
                        )))
                    }
                };
                // The answers kept before the record goes: a retry never sends this range again.
                let recorded = old.is_some();
                if let Some(done) = lock().as_mut() {
                    if let Some(old) = old {
                        merge.mark_new(&batches, old, std::slice::from_mut(&mut done.new));
                    }
                    done.done[merge.r()] = true;
                }
                if recorded {
                    step.forget(ctx.exec, &self.key, index).await;
                }
                Ok::<_, Error>(())
            }
        };
        let mut pending = to_do
            .into_iter()
            .filter_map(|r| RangeMerge::new(&batches, r, &mut buffer, <[u8]>::to_vec));
        // The first range alone, as the unrecorded pass does: a refusal (ACL) writes nothing
        // anywhere, and the batch goes by recorded commands instead.
        if let Some(first) = pending.next() {
            match merge(first).await {
                Ok(()) => {}
                Err(err)
                    if !started
                        && (ctx.exec.lacks(MERGE_BY_RANGES, &self.key, &err)
                            || ctx.exec.lacks(Cap::Exact, &self.key, &err)) =>
                {
                    *lock() = None;
                    return Ok(None);
                }
                Err(err) => return Err(err),
            }
        }
        self.grow(ctx, &batches).await?;
        let mut steps = futures_util::stream::iter(pending)
            .map(merge)
            .buffered(in_flight(range));
        while let Some(step) = steps.next().await {
            step?;
        }
        drop(steps);
        let new = lock().take().expect("made above").new;
        Ok(Some(new))
    }

    /// Whether a merge of `offsets` offsets by ranges pays for its pass over the key.
    fn merge_pays<C: Conn>(&self, ctx: Run<'_, C>, offsets: usize) -> bool {
        let range = ctx.exec.options().merge_chunk();
        dense::merge_by_ranges(self.geometry.max_bytes(), range, offsets as u64)
    }

    /// [`merge_pays`](Self::merge_pays) for a merge whose answers are recorded across
    /// retries, against recorded `BITFIELD` scripts.
    fn recorded_merge_pays<C: Conn>(&self, ctx: Run<'_, C>, offsets: usize) -> bool {
        let range = ctx.exec.options().merge_chunk();
        dense::recorded_merge_by_ranges(self.geometry.max_bytes(), range, offsets as u64)
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
        self.guard_alone(ctx).await?;
        let mut new: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.items()]).collect();
        // Each range's bitmap, made as the steps go out (built in one buffer, reused), then its
        // script, which stages it in the scratch key and ORs it in.
        let mut buffer = vec![0u8; range.min(bytes) as usize];
        let bitmap_of = <[u8]>::to_vec;
        let step = |(merge, bitmap): (RangeMerge, Vec<u8>)| async move {
            let keys = [self.key.as_str(), scratch.as_str(), scratch_or.as_str()];
            let args: [&dyn scripts::Arg; 2] = [&merge.first_byte, &bitmap];
            let reply = ctx
                .exec
                .script(&self.key, &scripts::MERGE_RANGE, &keys, &args)
                .await?;
            let old = match reply {
                Value::BulkString(old) => old,
                // No new bit (lua/merge_range.lua): every bit of the bitmap was set before, as
                // it says; nothing written.
                Value::Int(0) => bitmap,
                reply => {
                    return Err(Error::UnexpectedReply(format!(
                        "{reply:?} from a merge by ranges"
                    )))
                }
            };
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
                if let Some(made) = RangeMerge::new(batches, next - 1, &mut buffer, bitmap_of) {
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
                let made = RangeMerge::new(batches, r, &mut buffer, bitmap_of);
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
