//! One key of bits in its slot group, and the steps on it: set and test bits by the engine's
//! commands (`BITFIELD`, or go-zero's scripts), the dense merge and the whole-filter read (or,
//! for large keys, by ranges: the `ranges` and `merge` modules), and its info.

use super::merge::RangesDone;
use super::ranges::{Answer, Direction, Queue};
use crate::bitfield::{self, Fold, MAX_OFFSETS_PER_COMMAND};
use crate::dense::{self, Grouped};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::geometry::{check_offsets, Geometry};
use crate::hash::ItemHash;
use crate::info::{FilterInfo, KeyTtl};
use crate::io::exec::Conn;
use crate::io::exec::{self, Cap, Exec};
use crate::io::guard::Guard;
use crate::io::once::{self, Step};
use crate::io::tx::{Slot, Tx};
use crate::keys;
use crate::scripts;
use crate::sizing::{current_fpr, estimate_items};
use redis::Value;
use std::sync::{Arc, Mutex, OnceLock};

/// What a refused dense merge falls back to.
pub(super) const MERGE: Cap = Cap::Merge {
    from: "dense merge",
    to: "BITFIELD",
};

/// One key of bits, and the scratch keys beside it in its slot group.
#[derive(Debug, Clone)]
pub struct Bits {
    pub(crate) key: String,
    /// The dense path's scratch key (`{KEY}:redbloom:scratch`).
    pub(crate) scratch: String,
    /// The second scratch key of a merge by ranges (`{KEY}:redbloom:scratch:or`).
    pub(crate) scratch_or: String,
    pub(crate) geometry: Geometry,
    /// The batches waiting for a merge by ranges, and for a read by ranges (shared by the
    /// clones of this key's bits).
    queues: Arc<[Queue; 2]>,
    /// What the last dense add found: whether the next one first probes for a new bit.
    dense_seen: Arc<dense::Seen>,
}

/// How the steps run: the filter's executor and engine, and the parameters guard when it
/// lives in this key's slot group (a filter of one key), so that it goes in the same
/// transaction as each write.
#[derive(Debug)]
pub(crate) struct Run<'a, C> {
    pub(crate) exec: &'a Exec<C>,
    pub(crate) engine: Engine,
    pub(crate) guard: Option<&'a Guard>,
    /// Told when a read sees a bit set (the key exists).
    pub(crate) seen: Option<&'a std::sync::atomic::AtomicBool>,
    /// A write's step, when its answers are recorded across retries ([`once`]).
    pub(crate) step: Option<&'a Step>,
    /// For a shard of a native filter whose parameters this client has seen stored: the
    /// filter's guard. The shard must exist then: a write never makes a lost part again.
    pub(crate) shard_of: Option<&'a Guard>,
}

impl<'a, C> Run<'a, C> {
    /// The guard's step of this key's scripts: inline, or the shard's rule.
    fn guard_step(&self) -> once::GuardStep<'a> {
        once::GuardStep::of(self.guard).shard_of(self.shard_of)
    }
}

impl<C> Run<'_, C> {
    /// A read saw a bit set (`set`): the key exists.
    fn saw(&self, set: bool) {
        crate::core::lost::saw(self.seen, set);
    }
}

impl<C> Clone for Run<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for Run<'_, C> {}

/// A batch's items and their bit offsets, computed once, at first use, for every attempt.
#[derive(Debug)]
pub(crate) struct Batch<'a> {
    items: &'a [&'a [u8]],
    geometry: Geometry,
    per_command: usize,
    whole: OnceLock<Vec<u64>>,
    parts: Vec<OnceLock<Vec<u64>>>,
    /// The offsets grouped by ranges of the key, for a merge or read by ranges.
    grouped: OnceLock<Option<Arc<Grouped>>>,
    /// A recorded merge by ranges: the ranges whose answers are in hand, kept across attempts.
    pub(super) ranges_done: Mutex<Option<RangesDone>>,
}

impl<'a> Batch<'a> {
    pub(crate) fn new(items: &'a [&'a [u8]], geometry: Geometry) -> Self {
        let per_command = (MAX_OFFSETS_PER_COMMAND / geometry.hashes as usize).max(1);
        Batch {
            items,
            geometry,
            per_command,
            whole: OnceLock::new(),
            parts: (0..items.len().div_ceil(per_command))
                .map(|_| OnceLock::new())
                .collect(),
            grouped: OnceLock::new(),
            ranges_done: Mutex::new(None),
        }
    }

    /// The step index of range `r` of a recorded merge by ranges: after those of the batch's
    /// commands, so that a record is never read as another path's.
    pub(super) fn range_index(&self, r: usize) -> usize {
        self.parts.len() + r
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Every item's offsets, in order.
    fn whole(&self) -> Result<&[u64]> {
        cached(&self.whole, || self.geometry.offsets(self.items))
    }

    /// The offsets of the items of part `i` (of [`MAX_OFFSETS_PER_COMMAND`] at most).
    fn part(&self, i: usize) -> Result<(usize, &[u64])> {
        let first = i * self.per_command;
        let items = &self.items[first..(first + self.per_command).min(self.items.len())];
        let offsets = cached(&self.parts[i], || self.geometry.offsets(items))?;
        Ok((items.len(), offsets))
    }

    /// The offsets grouped by ranges of `range_bytes` (computed once: a range of the filter's
    /// options never changes); `None` for a batch of 2^32 offsets or more.
    pub(super) fn grouped(&self, range_bytes: u64) -> Result<Option<Arc<Grouped>>> {
        if let Some(done) = self.grouped.get() {
            return Ok(done.clone());
        }
        // The offsets as 32-bit numbers (a key holds at most 2^32 bits): half the memory of
        // `whole`.
        let Geometry { bits, hashes, .. } = self.geometry;
        let shift = (range_bytes * 8).trailing_zeros();
        let mut offsets = Vec::with_capacity(self.items.len() * hashes as usize);
        let mut item_offsets = Vec::with_capacity(hashes as usize);
        for item in self.items {
            item_offsets.clear();
            let hash = ItemHash::of(item, self.geometry.layout);
            self.geometry.push_offsets(&hash, &mut item_offsets);
            check_offsets(&item_offsets, bits)?;
            offsets.extend(item_offsets.iter().map(|&offset| offset as u32));
        }
        let ranges = bits.div_ceil(range_bytes * 8) as usize;
        let grouped = Grouped::with_ranges(&offsets, hashes as usize, shift, ranges);
        Ok(self.grouped.get_or_init(|| grouped.map(Arc::new)).clone())
    }
}

/// The cell's value, computed by `make` the first time.
fn cached(cell: &OnceLock<Vec<u64>>, make: impl FnOnce() -> Result<Vec<u64>>) -> Result<&[u64]> {
    if let Some(done) = cell.get() {
        return Ok(done);
    }
    let made = make()?;
    Ok(cell.get_or_init(|| made))
}

impl Bits {
    pub(crate) fn new(key: String, geometry: Geometry) -> Self {
        let scratch = keys::sidecar(&key, "redbloom:scratch");
        let scratch_or = keys::sidecar(&key, "redbloom:scratch:or");
        Bits {
            key,
            scratch,
            scratch_or,
            geometry,
            queues: Arc::default(),
            dense_seen: Arc::default(),
        }
    }

    /// Sets every item's bits: by the dense path (one transaction for a filter of up to 4 MiB;
    /// by ranges beyond) or by the engine's commands, at most [`MAX_OFFSETS_PER_COMMAND`]
    /// offsets each; true for each item one of whose bits flipped. One attempt: the caller
    /// retries.
    pub(crate) async fn write<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
    ) -> Result<Vec<bool>> {
        // A write whose answers are recorded: the dense add as one script that records the
        // bytes from before, the merge by ranges as one such script per range (ranges not
        // gathered with other batches: each range's record is this batch's), or commands that
        // each record their flags.
        if let Some(step) = ctx.step.filter(|_| ctx.exec.has(Cap::Exact)) {
            if let Some(scratch) = self.dense_scratch(ctx, batch.len()) {
                match self.merge_once(ctx, step, scratch, batch.whole()?).await {
                    Err(err)
                        if ctx.exec.lacks(MERGE, &self.key, &err)
                            || ctx.exec.lacks(Cap::Exact, &self.key, &err) => {}
                    done => return done,
                }
            }
            if let Some(new) = self.merge_ranges_once(ctx, step, batch).await? {
                return Ok(new);
            }
            if ctx.exec.has(Cap::Exact) {
                return self.in_commands(ctx, batch, Direction::Write).await;
            }
        }
        if let Some(scratch) = self.dense_scratch(ctx, batch.len()) {
            match self.merge(ctx, scratch, batch.whole()?).await {
                // A user granted the filter's key but not the scratch key or the merge's
                // commands: the same write by BITFIELD.
                Err(err) if ctx.exec.lacks(MERGE, &self.key, &err) => {}
                done => return done,
            }
        }
        if let Some(new) = self.write_by_ranges(ctx, batch).await? {
            return Ok(new);
        }
        self.in_commands(ctx, batch, Direction::Write).await
    }

    /// The dense add by ranges, for a key over [`dense::MAX_BYTES`] and a batch that, with the
    /// batches a merge may gather beside it, outweighs the ranges it touches; `None` when the
    /// batch goes by `BITFIELD` instead (nothing written).
    async fn write_by_ranges<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
    ) -> Result<Option<Vec<bool>>> {
        let bytes = self.geometry.max_bytes();
        let range = ctx.exec.options().merge_chunk();
        let offsets = batch.len() as u64 * u64::from(self.geometry.hashes);
        if ctx.engine != Engine::Fast
            || !ctx.exec.has(MERGE)
            || bytes <= dense::MAX_BYTES
            || !dense::merge_by_ranges(bytes, range, offsets * dense::GATHER)
        {
            return Ok(None);
        }
        self.by_ranges(ctx, batch, Direction::Write).await
    }

    /// A batch's turn in the queue of its direction; `None` when it goes by `BITFIELD` after
    /// all.
    async fn by_ranges<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
        direction: Direction,
    ) -> Result<Option<Vec<bool>>> {
        let Some(grouped) = batch.grouped(ctx.exec.options().merge_chunk())? else {
            return Ok(None);
        };
        let queue = &self.queues[matches!(direction, Direction::Read) as usize];
        match queue.serve(&(self, ctx), direction, grouped).await? {
            Answer::Done(answers) => Ok(Some(answers)),
            Answer::PerItem => Ok(None),
        }
    }

    /// Reads every item's bits; true for each item whose bits are all set.
    pub(crate) async fn read<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
    ) -> Result<Vec<bool>> {
        let geometry = self.geometry;
        if ctx.engine == Engine::Fast
            && geometry.max_bytes() <= dense::MAX_BYTES
            && dense::read_worth_it(geometry.bits, batch.len(), geometry.hashes)
        {
            let bitmap = self.read_whole(ctx).await?;
            ctx.saw(bitmap.iter().any(|&byte| byte != 0));
            return Ok(dense::present(
                &bitmap,
                batch.whole()?,
                geometry.hashes as usize,
            ));
        }
        // Past 4 MiB: the ranges the batch (and those gathered with it) touch, in bounded
        // memory.
        let range = ctx.exec.options().merge_chunk();
        let offsets = batch.len() as u64 * u64::from(geometry.hashes);
        if ctx.engine == Engine::Fast
            && geometry.max_bytes() > dense::MAX_BYTES
            && dense::read_by_ranges(geometry.max_bytes(), range, offsets * dense::GATHER)
        {
            if let Some(present) = self.by_ranges(ctx, batch, Direction::Read).await? {
                return Ok(present);
            }
        }
        self.in_commands(ctx, batch, Direction::Read).await
    }

    /// The parameters' step on its own round trip, before a write that cannot carry it (a
    /// script that would not be loaded again on `NOSCRIPT` in a pipeline, a pass by ranges):
    /// stored when missing, a mismatch reported before anything is written. Nothing when the
    /// guard does not live here or has checked them.
    /// A native filter whose parameters are stored but whose key is gone is refused here
    /// ([`Error::Lost`]: a write never makes a lost filter again).
    pub(super) async fn guard_alone<C: Conn>(&self, ctx: Run<'_, C>) -> Result<()> {
        let Some(guard) = ctx.guard.filter(|g| g.step_needed()) else {
            // A shard that must exist: asked first.
            if let Some(filter) = ctx.shard_of {
                let exists: bool = ctx
                    .exec
                    .query(&self.key, redis::cmd("EXISTS").arg(&self.key))
                    .await?;
                if !exists {
                    return Err(filter.lost(&self.key));
                }
            }
            return Ok(());
        };
        let mut tx = Tx::atomic();
        let exists = tx.add::<bool>(redis::cmd("EXISTS").arg(&self.key).to_owned());
        let Some(slot) = guard.step(&mut tx) else {
            return Ok(());
        };
        let mut replies = ctx.exec.run(&self.key, &tx).await?;
        let exists = replies.take(exists)?;
        let stored = slot.take(&mut replies)?;
        let was_stored = stored != Value::Nil;
        guard.check_step(stored)?;
        if was_stored && !exists {
            return Err(guard.lost(&self.key));
        }
        Ok(())
    }

    /// The scratch key when a batch of `items` is cheaper as a whole bitmap.
    fn dense_scratch<C: Conn>(&self, ctx: Run<'_, C>, items: usize) -> Option<&str> {
        let dense = ctx.engine == Engine::Fast
            && ctx.exec.has(MERGE)
            && dense::worth_it(self.geometry.bits, items, self.geometry.hashes);
        dense.then_some(self.scratch.as_str())
    }

    /// Runs the batch's parts, a few at a time ([`exec::in_order`]), in order on the connection;
    /// the answers in input order.
    async fn in_commands<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
        direction: Direction,
    ) -> Result<Vec<bool>> {
        match batch.parts.len() {
            0 => Ok(Vec::new()),
            1 => self.command(ctx, batch, direction, 0).await,
            // Futures do nothing until polled: each part's offsets are computed when it is
            // sent.
            parts => {
                let command = |i| self.boxed_command(ctx, batch, direction, i);
                exec::in_order((0..parts).map(command).collect()).await
            }
        }
    }

    /// Part `i` of the batch: one command.
    async fn command<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        batch: &Batch<'_>,
        direction: Direction,
        i: usize,
    ) -> Result<Vec<bool>> {
        let (items, offsets) = batch.part(i)?;
        match direction {
            Direction::Write => match ctx.step {
                Some(step) if ctx.exec.has(Cap::Exact) => {
                    match self.write_once(ctx, step, (i, items), offsets).await {
                        Err(err) if ctx.exec.lacks(Cap::Exact, &self.key, &err) => {
                            self.write_command(ctx, items, offsets).await
                        }
                        done => done,
                    }
                }
                _ => self.write_command(ctx, items, offsets).await,
            },
            Direction::Read => self.read_command(ctx, items, offsets).await,
        }
    }

    /// [`command`](Bits::command), boxed: the compiler cannot yet prove a future held in a
    /// stream `Send` for every lifetime it borrows (rust-lang/rust#110338). One allocation per
    /// command of a batch of several.
    fn boxed_command<'a, C: Conn>(
        &'a self,
        ctx: Run<'a, C>,
        batch: &'a Batch<'a>,
        direction: Direction,
        i: usize,
    ) -> futures_util::future::BoxFuture<'a, Result<Vec<bool>>> {
        Box::pin(self.command(ctx, batch, direction, i))
    }

    /// One write recorded under `step` (its command `index`): the parameters checked first
    /// (when their guard lives here and has not checked them yet), then `BITFIELD` as a
    /// script, or go-zero's set script or its batch form, each applying and recording its
    /// reply, or reading back the reply recorded by an earlier attempt.
    async fn write_once<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        step: &Step,
        (index, items): (usize, usize),
        offsets: &[u64],
    ) -> Result<Vec<bool>> {
        let rings = step.rings(&self.key);
        let k = self.geometry.hashes as usize;
        let hashes = self.geometry.hashes;
        let exec = ctx.exec;
        if ctx.engine == Engine::Fast {
            // The guard's step in the same script: one round trip, the write recorded with it.
            let on = (self.key.as_str(), ctx.guard_step());
            return once::bitfield(exec, on, ("set", k), offsets, (step, index)).await;
        }
        self.guard_alone(ctx).await?;
        let mut keys = vec![self.key.as_str()];
        keys.extend(rings.iter().map(String::as_str));
        let [id, epoch, retry, keep, answer] = step.args(&self.key, index);
        // go-zero's scripts (the go-zero layout: no guard step).
        match items {
            1 => {
                let args: [&dyn scripts::Arg; 6] = [&offsets, &id, &epoch, &retry, &keep, &answer];
                let reply = exec.script(&self.key, &once::ADD, &keys, &args).await?;
                Ok(vec![reply == Value::Int(1)])
            }
            _ => {
                let args: [&dyn scripts::Arg; 7] =
                    [&hashes, &offsets, &id, &epoch, &retry, &keep, &answer];
                let reply = exec
                    .script(&self.key, &once::ADD_MANY, &keys, &args)
                    .await?;
                fold(&reply, 1, items, Fold::AllOne)
            }
        }
    }

    /// One write: a `BITFIELD` (in one transaction with the guard for a native filter), or
    /// go-zero's set script or its batch form.
    async fn write_command<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        items: usize,
        offsets: &[u64],
    ) -> Result<Vec<bool>> {
        let k = self.geometry.hashes as usize;
        match ctx.engine {
            Engine::Fast if ctx.guard.is_some_and(Guard::step_needed) || ctx.shard_of.is_some() => {
                // A native filter of one key, or a shard that must exist: the guard, the check
                // that the key is there (a write never makes a lost filter again) and the write
                // in one script.
                let on = (self.key.as_str(), ctx.guard_step());
                once::bitfield_guarded(ctx.exec, on, ("set", k), offsets).await
            }
            Engine::Fast => {
                // No guard here (a go-zero filter, or a shard this client has not seen
                // stored): the bare command.
                let reply: Value = ctx
                    .exec
                    .query(&self.key, &bitfield::set(&self.key, offsets))
                    .await?;
                fold(&reply, k, items, Fold::AnyZero)
            }
            Engine::Scripts => {
                // The guard first: a pipeline would not load a script again on `NOSCRIPT`.
                self.guard_alone(ctx).await?;
                match items {
                    1 => {
                        // go-zero's set script, replying 1 when a bit flipped.
                        let reply = ctx
                            .exec
                            .script(&self.key, &scripts::ADD, &[&self.key], &[&offsets])
                            .await?;
                        Ok(vec![reply == Value::Int(1)])
                    }
                    _ => {
                        // One flag per item, 1 when new.
                        let hashes = self.geometry.hashes;
                        let reply = ctx
                            .exec
                            .script(
                                &self.key,
                                &scripts::ADD_MANY,
                                &[&self.key],
                                &[&hashes, &offsets],
                            )
                            .await?;
                        fold(&reply, 1, items, Fold::AllOne)
                    }
                }
            }
        }
    }

    /// One read: `BITFIELD_RO` (plain `BITFIELD` before Redis 6.2), or go-zero's test script
    /// or its batch form.
    async fn read_command<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        items: usize,
        offsets: &[u64],
    ) -> Result<Vec<bool>> {
        let k = self.geometry.hashes as usize;
        match ctx.engine {
            Engine::Fast => {
                let reply = self.read_bitfield(ctx, offsets).await?;
                ctx.saw(crate::bitfield::any_set(&reply));
                fold(&reply, k, items, Fold::AllOne)
            }
            Engine::Scripts if items == 1 => {
                // go-zero's test script replies Lua true (1) or false (nil).
                let reply = ctx
                    .exec
                    .script(&self.key, &scripts::EXISTS, &[&self.key], &[&offsets])
                    .await?;
                Ok(vec![reply == Value::Int(1)])
            }
            Engine::Scripts => {
                // One flag per item, 1 when present.
                let hashes = self.geometry.hashes;
                let reply = ctx
                    .exec
                    .script(
                        &self.key,
                        &scripts::EXISTS_MANY,
                        &[&self.key],
                        &[&hashes, &offsets],
                    )
                    .await?;
                fold(&reply, 1, items, Fold::AllOne)
            }
        }
    }

    /// `BITFIELD_RO`, or plain `BITFIELD` once the server has said it lacks `BITFIELD_RO`.
    async fn read_bitfield<C: Conn>(&self, ctx: Run<'_, C>, offsets: &[u64]) -> Result<Value> {
        if ctx.exec.has(Cap::BitfieldRo) {
            match ctx
                .exec
                .query(&self.key, &bitfield::get(&self.key, offsets, true))
                .await
            {
                Err(err) if ctx.exec.lacks(Cap::BitfieldRo, &self.key, &err) => {}
                reply => return reply,
            }
        }
        ctx.exec
            .query(&self.key, &bitfield::get(&self.key, offsets, false))
            .await
    }

    /// The dense add: the batch's bits as one bitmap ORed into the filter in one transaction;
    /// "new" from the bytes before.
    async fn merge<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        scratch: &str,
        offsets: &[u64],
    ) -> Result<Vec<bool>> {
        // One transaction: the bytes from before, then the OR of the batch's bitmap through
        // the scratch key (sent as EVAL so that NOSCRIPT cannot happen inside EXEC). Probing
        // (`dense::Seen`), the script stages the bitmap itself after finding a new bit
        // (nothing written when it sets none); else the transaction stages it, the script ORs
        // it in and the scratch key goes even if the OR failed.
        // The guard first, on its own round trip: it refuses a filter whose key is gone
        // before anything is written (a large batch: one round trip more is little).
        self.guard_alone(ctx).await?;
        let mut tx = Tx::atomic();
        let old: Slot<Option<Vec<u8>>> = tx.add(redis::cmd("GET").arg(&self.key).to_owned());
        let bitmap = dense::bitmap(offsets);
        let mut merge = redis::cmd("EVAL");
        merge
            .arg(scripts::MERGE.source())
            .arg(2)
            .arg(&self.key)
            .arg(scratch);
        if self.dense_seen.probes(false) {
            tx.add_unread(merge.arg(bitmap).to_owned());
        } else {
            tx.add_unread(redis::cmd("SET").arg(scratch).arg(bitmap).to_owned());
            tx.add_unread(merge);
            tx.add_unread(redis::cmd("DEL").arg(scratch).to_owned());
        }
        let mut replies = ctx.exec.run(&self.key, &tx).await?;
        let old = replies.take(old)?;
        let new = dense::new_flags(
            old.unwrap_or_default(),
            offsets,
            self.geometry.hashes as usize,
        );
        self.dense_seen.answered(&new);
        Ok(new)
    }

    /// The dense add recorded under `step` (its command 0): one script, whose reply (the
    /// bytes from before) a retry reads back; the record is deleted once the reply is in hand.
    /// A batch that sets no new bit writes and records nothing (`lua/once_merge.lua`).
    async fn merge_once<C: Conn>(
        &self,
        ctx: Run<'_, C>,
        step: &Step,
        scratch: &str,
        offsets: &[u64],
    ) -> Result<Vec<bool>> {
        // The guard's step in the same script, as for the per-item writes.
        let guard = ctx.guard_step();
        let rings = step.rings(&self.key);
        let mut keys = vec![self.key.as_str(), scratch];
        keys.extend(guard.key());
        keys.extend(rings.iter().map(String::as_str));
        let fingerprint = guard.fingerprint();
        let [id, epoch, retry, keep, answer] = step.args(&self.key, 0);
        let bitmap = dense::bitmap(offsets);
        let probe = u8::from(self.dense_seen.probes(true));
        let args: [&dyn scripts::Arg; 8] = [
            &bitmap,
            &fingerprint,
            &probe,
            &id,
            &epoch,
            &retry,
            &keep,
            &answer,
        ];
        let reply = ctx
            .exec
            .script(&self.key, &once::MERGE, &keys, &args)
            .await?;
        guard.check(&reply)?;
        let old = match reply {
            Value::BulkString(old) => old,
            // No bit new: nothing written, nothing recorded.
            Value::Int(0) => {
                let new = vec![false; offsets.len() / self.geometry.hashes as usize];
                self.dense_seen.answered(&new);
                return Ok(new);
            }
            reply => {
                return Err(Error::UnexpectedReply(format!(
                    "{reply:?} from a dense add"
                )))
            }
        };
        step.acknowledge(ctx.exec, &self.key, 0).await;
        let new = dense::new_flags(old, offsets, self.geometry.hashes as usize);
        self.dense_seen.answered(&new);
        Ok(new)
    }

    /// The filter's bytes, in chunks of a few MiB, in one round trip (the dense check).
    async fn read_whole<C: Conn>(&self, ctx: Run<'_, C>) -> Result<Vec<u8>> {
        let mut tx = Tx::plain();
        let whole = dense::read_whole(&mut tx, &self.key, self.geometry.bits);
        let mut replies = ctx.exec.run(&self.key, &tx).await?;
        whole.take(&mut replies)
    }

    /// The key's fill, size and TTL in one atomic round trip; `key` names the filter.
    pub(crate) async fn info<C: Conn>(&self, ctx: Run<'_, C>, key: &str) -> Result<FilterInfo> {
        let Geometry { bits, hashes, .. } = self.geometry;
        let mut tx = Tx::atomic();
        let bits_set = tx.add::<u64>(
            redis::cmd("BITCOUNT")
                .arg(&self.key)
                .arg(0)
                .arg((bits - 1) / 8)
                .to_owned(),
        );
        let bytes = tx.add::<u64>(redis::cmd("STRLEN").arg(&self.key).to_owned());
        let pttl = tx.add::<i64>(redis::cmd("PTTL").arg(&self.key).to_owned());
        let mut replies = ctx.exec.run(&self.key, &tx).await?;
        let bits_set = replies.take(bits_set)?;
        Ok(FilterInfo {
            key: key.to_owned(),
            bits,
            hashes,
            bits_set,
            bytes: replies.take(bytes)?,
            estimated_items: estimate_items(bits, hashes, bits_set),
            estimated_fpr: current_fpr(bits, hashes, bits_set),
            ttl: KeyTtl::from_pttl(replies.take(pttl)?),
        })
    }
}

/// `k` bit replies per item folded into one answer per item.
fn fold(reply: &Value, k: usize, items: usize, how: Fold) -> Result<Vec<bool>> {
    bitfield::fold(reply, k, items, how)
        .ok_or_else(|| Error::UnexpectedReply(format!("{reply:?} for {items} items of {k} bits")))
}
