//! The dense add: the counts and the segments read in one transaction, the batch applied here
//! as the add script would (newest level first; a new item to the newest level, the next made
//! when it is full), and the bits merged with the counts set by one script
//! (`lua/grow_merge.lua`) that writes nothing if the counts changed since the read. Concurrent
//! writers' merges take turns through a lease, so that they do not fail each other's.

use super::{params_keys, Growing};
use crate::core::{Conn, Ctx};
use crate::dense;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::io::exec::Cap;
use crate::io::lease::Lease;
use crate::io::once::{self, Step};
use crate::io::tx::{Slot, Tx};
use crate::scripts::{lua, once_lua};
use redis::Value;
use std::sync::atomic::Ordering;

/// The dense add's compare-and-set merge (run with `EVAL` inside a `MULTI`, where
/// `EVALSHA`'s `NOSCRIPT` could not be answered by loading it).
const GROW_MERGE: &str = lua!["acl", "grow_merge"];
/// [`GROW_MERGE`], its answers recorded across retries ([`once`](crate::io::once)).
const GROW_MERGE_ONCE: &str = once_lua!(lua!["grow_merge"]);

/// Merges tried before a batch goes the per-item way: each fails only when another client
/// added a new item between the read and the merge.
const MERGE_ATTEMPTS: usize = 3;

/// The scratch keys' TTL: the merge deletes them; they expire if a transaction fails between
/// the `SET`s and the script.
const SCRATCH_TTL_MS: u64 = 60_000;

/// What a refused merge falls back to.
const MERGE: Cap = Cap::Merge {
    from: "dense merge",
    to: "per-item script",
};

/// A batch applied in memory by the dense add.
struct Applied {
    /// Per item handled (those before a full stop): whether it was new.
    answers: Vec<bool>,
    /// Each level's count after the batch.
    counts: Vec<u64>,
    /// Per segment, the offsets the batch set.
    added: Vec<Vec<u64>>,
    /// An item needed a level past the most.
    full: bool,
}

/// A batch added dense, when that pays and the merge is allowed: the answers (after `WAIT`,
/// when asked), or [`Error::FilterFull`]; `None` when the batch goes item by item instead (nothing
/// written): other clients changed the levels during every merge, or the ACL refused it.
pub(super) async fn add<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    hashes: &[ItemHash],
) -> Result<Option<Vec<bool>>> {
    if !pays(ctx, hashes.len()) {
        return Ok(None);
    }
    let since = ctx.exec().carrier(&ctx.part().counts);
    match merge(ctx, hashes).await {
        Ok(Some((answers, full))) => {
            ctx.exec()
                .confirm(&ctx.part().counts, Engine::Scripts, since)
                .await?;
            match full {
                true => Err(ctx.kind().full(ctx.key(), answers.len())),
                false => Ok(Some(answers)),
            }
        }
        Ok(None) => {
            let cause = "other clients changed the levels during every merge";
            let fallback = ("dense merge", "per-item script", cause);
            ctx.exec().fell_back(ctx.key(), fallback, false);
            Ok(None)
        }
        // A user granted the levels but not the scratch keys or the merge's commands: the
        // same batch by the per-item script.
        Err(err) if ctx.exec().lacks(MERGE, ctx.key(), &err) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The largest segment a merge writes (its `BITOP` and its scratch key's `SET` hold the server
/// while they copy it): a level past [`SEGMENT_BYTES`](super::shape::SEGMENT_BYTES) sits alone
/// in a segment of its own size, and the per-item script, the way left, holds the server about
/// as long per step (210 items a step at nine levels: 17.8 ms on average) for a few hundred
/// steps per batch of 100,000 (about 500 times the merge's server time: 85 µs an item against
/// about 0.16 µs, `INFO commandstats` of 4M- and 8M-item loads). A merge into a 15.9 MB
/// level holds it 14-19 ms (median), 52-74 ms at most, the one that makes the segment
/// (`SLOWLOG`, BENCHMARKS.md "The growing merge's BITOP asked of the ACL"; twice that before
/// the merge asked the ACL for its `BITOP` instead of running one more to prove it).
const MAX_WRITE_BYTES: u64 = crate::GrowingLevel::MAX_DENSE_BYTES;

/// The most bytes of levels a dense add reads per item of its batch. A merge moves the levels
/// known whole to the client and back through `BITOP`, whatever the batch's size, and takes
/// turns with every other merge of the filter; the per-item script's steps cost the server
/// about 6-8 µs an item at one or two levels and take no turns. Measured (`redbloom bench --op
/// add --items 200000 --concurrency 4 --batch B`, growth 2, rate 0.01, one private redis-server
/// 7.0.15): at levels of 0.5 MB, batches of 64 merged ran 32,359 items/s (4.97 µs of server
/// CPU an item) against 130,745 (7.33) item by item, of 256 merged 190,083 (1.11) against
/// 138,162 (7.01); at a level of 3.4 MB, of 256 merged 14,943 (8.74) against 143,925
/// (6.71), of 1,000 66,739 (2.11) against 160,589 (6.08), of 2,000 131,413 (1.28) against
/// 156,365 (6.15). 4 KiB an item lies between where the merge saves the server's time (about
/// 10 KiB an item) and where it also runs as fast (about 1.4 KiB).
const MAX_BYTES_PER_ITEM: u64 = 4 << 10;

/// Whether batches that add to level `level` (as the newest) can go dense: its segment is at
/// most [`MAX_WRITE_BYTES`] and the levels up to it at most `dense::MAX_READ_BYTES` together
/// ([`GrowingLevel::dense`](crate::GrowingLevel::dense)).
pub(super) fn level_merges(kind: &Growing, level: usize) -> bool {
    let segment = kind.levels[level].segment;
    kind.segments[segment].div_ceil(8) <= MAX_WRITE_BYTES
        && kind.bytes_of(level + 1) <= dense::MAX_READ_BYTES
}

/// Whether an add of `items` items is cheaper by reading the part's levels whole and merging
/// the batch's bits: the batch is more than a few items and reads at most
/// [`MAX_BYTES_PER_ITEM`] of the levels known per item, the levels it may need are at most
/// `dense::MAX_READ_BYTES` together, and the segments it may write at most
/// [`MAX_WRITE_BYTES`] each.
fn pays<C>(ctx: Ctx<'_, C, Growing>, items: usize) -> bool {
    let (kind, part) = (ctx.kind(), ctx.part());
    if items < 64 || !ctx.exec().has(MERGE) {
        return false;
    }
    let named = kind.levels_to_name(part, items, true);
    let known = (part.known.load(Ordering::Relaxed) as usize).clamp(1, named);
    let first = kind.levels[known - 1].segment;
    let biggest = (first..kind.segments_of(named))
        .map(|s| kind.segments[s].div_ceil(8))
        .max()
        .unwrap_or(0);
    dense::outweighs(items as u64, MAX_BYTES_PER_ITEM, kind.bytes_of(known))
        && kind.bytes_of(named) <= dense::MAX_READ_BYTES
        && biggest <= MAX_WRITE_BYTES
}

/// The merge under the part's [`Lease`], tried [`MERGE_ATTEMPTS`] times (each attempt
/// retried): `None` when every merge found the counts changed; else the answers, and whether an item needed a level past the
/// most (the items before it were added, it and the rest not).
async fn merge<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    hashes: &[ItemHash],
) -> Result<Option<(Vec<bool>, bool)>> {
    let part = ctx.part();
    let _turn = part.turns.local().await;
    // Concurrent writers' merges take turns ([`Lease`]).
    let lease_key = format!("{}:lease", part.counts);
    let lease = Lease::take(ctx.exec(), &lease_key, &part.turns).await;
    // With a record across retries, each merge (its compare and set) is a command of one step:
    // a retry after a lost reply reads back the answers of a merge that went through instead
    // of reading the levels again and answering from them.
    let step = ctx.step();
    let mut merged = None;
    for index in 0..MERGE_ATTEMPTS {
        let once = step.as_ref().map(|step| (step, index));
        match ctx.retried(|| attempt(ctx, hashes, once)).await {
            Ok(Some(applied)) => {
                let levels = applied.counts.len();
                part.known.store(levels as u32, Ordering::Relaxed);
                let newest = applied.counts.last().copied().unwrap_or(0);
                part.newest_count.store(newest, Ordering::Relaxed);
                merged = Some((applied.answers, applied.full));
                break;
            }
            // Another writer's add (or a merge that went without the lease) came between
            // this one's read and its merge.
            Ok(None) => {}
            Err(err) => {
                lease.release().await;
                return Err(err);
            }
        }
    }
    if let Some(step) = &step {
        step.settle(ctx.exec(), &Ok::<_, crate::Error>(())).await;
    }
    lease.release().await;
    Ok(merged)
}

/// One read, apply and merge; `None` when the counts changed since the read.
async fn attempt<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    hashes: &[ItemHash],
    once: Option<(&Step, usize)>,
) -> Result<Option<Applied>> {
    let (exec, kind, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let (counts, mut segments) = read(ctx).await?;
    // A level the counts name holds bits (its segment is made with its first item): an empty
    // segment under a level with items is gone, and the merge would make it again with only
    // this batch's bits (SPEC.md §3: a write never makes a lost filter again).
    for (level, &count) in counts.iter().enumerate() {
        let segment = kind.levels[level].segment;
        if count > 0 && segments.get(segment).is_none_or(Vec::is_empty) {
            return Err(Error::Lost {
                filter: ctx.key().to_owned(),
                key: part.segment_keys[segment].clone(),
            });
        }
    }
    let mut applied = kind.apply(&counts, &mut segments, hashes);
    let changed: Vec<usize> = (0..applied.counts.len())
        .filter(|&i| counts.get(i) != Some(&applied.counts[i]))
        .collect();
    // A recorded merge that went out before goes again even when it changes nothing: what looks
    // like nothing to do may be the lost attempt's work, whose answers its record holds. A first
    // attempt with nothing to do writes nothing (no record either).
    if changed.is_empty() && once.is_none_or(|(step, index)| !step.sent(index)) {
        // Nothing new: the answers hold for the transaction's snapshot.
        return Ok(Some(applied));
    }
    let expected = counts
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{i}={n}"))
        .collect::<Vec<_>>()
        .join(",");
    let touched: Vec<usize> = (0..applied.added.len())
        .filter(|&s| !applied.added[s].is_empty())
        .collect();
    let mut tx = Tx::atomic();
    let mut keys = vec![part.counts.clone()];
    keys.extend(touched.iter().map(|&s| part.segment_keys[s].clone()));
    for &s in &touched {
        let scratch = format!("{}:scratch:{s}", part.counts);
        tx.add_unread(
            redis::cmd("SET")
                .arg(&scratch)
                .arg(dense::bitmap(&applied.added[s]))
                .arg("PX")
                .arg(SCRATCH_TTL_MS)
                .to_owned(),
        );
        keys.push(scratch);
    }
    keys.extend(
        params_keys(ctx.guard())
            .into_iter()
            .flatten()
            .map(str::to_owned),
    );
    let recorded = once.map(|(step, index)| {
        keys.extend(step.rings(&part.counts));
        let mut answers = once::answers_text(&applied.answers);
        answers.push(if applied.full { 'F' } else { '-' });
        step.args_answering(&part.counts, index, answers)
    });
    let mut script = redis::cmd("EVAL");
    script
        .arg(match recorded {
            Some(_) => GROW_MERGE_ONCE,
            None => GROW_MERGE,
        })
        .arg(keys.len())
        .arg(&keys)
        .arg(&kind.fingerprint)
        .arg(touched.len())
        .arg(&expected)
        .arg(changed.len());
    for &i in &changed {
        script.arg(i);
    }
    for &i in &changed {
        script.arg(applied.counts[i]);
    }
    if let Some(recorded) = &recorded {
        script.arg(recorded);
    }
    let reply: Slot<Value> = tx.add(script);
    let reply = exec.run(&part.counts, &tx).await?.take(reply)?;
    if let Some(refusal) = kind.refused(ctx.key(), &reply) {
        return Err(refusal);
    }
    match reply {
        Value::Int(1) => Ok(Some(applied)),
        // The answers recorded (now, or by an attempt whose reply was lost); the counts read
        // stand for the part's hints.
        Value::BulkString(record) if once.is_some() => {
            let Some((&full, answers)) = record.split_last() else {
                return Err(Error::UnexpectedReply("an empty record".into()));
            };
            applied.answers = answers.iter().map(|&a| a == b'1').collect();
            applied.full = full == b'F';
            if let Some((step, index)) = once {
                step.forget(exec, &part.counts, index).await;
            }
            Ok(Some(applied))
        }
        Value::Int(0) => Ok(None),
        other => Err(Error::UnexpectedReply(format!(
            "{other:?} from a growing filter's merge"
        ))),
    }
}

/// The counts (per level) and the segments' bytes, read in one transaction; again with more
/// levels when the part has more than known.
async fn read<C: Conn>(ctx: Ctx<'_, C, Growing>) -> Result<(Vec<u64>, Vec<Vec<u8>>)> {
    let (kind, part) = (ctx.kind(), ctx.part());
    loop {
        let known = kind.known(part);
        let mut tx = Tx::atomic();
        let counts: Slot<Vec<(usize, u64)>> =
            tx.add(redis::cmd("HGETALL").arg(&part.counts).to_owned());
        let chunks = kind.read_segments(part, &mut tx, known);
        let mut replies = ctx.exec().run(&part.counts, &tx).await?;
        let mut pairs = replies.take(counts)?;
        pairs.sort_unstable();
        if pairs.iter().enumerate().any(|(i, (level, _))| *level != i)
            || pairs.len() > kind.levels.len()
        {
            return Err(Error::UnexpectedReply(format!(
                "the levels' counts of {:?} are not levels 0..n: {pairs:?}",
                ctx.key()
            )));
        }
        if pairs.len() > known {
            part.known.store(pairs.len() as u32, Ordering::Relaxed);
            continue;
        }
        let mut segments = Vec::with_capacity(chunks.len());
        for segment in chunks {
            segments.push(segment.take(&mut replies)?);
        }
        return Ok((pairs.into_iter().map(|(_, n)| n).collect(), segments));
    }
}

impl Growing {
    /// The batch applied to the segments read, item after item as the add script does.
    fn apply(&self, counts: &[u64], segments: &mut Vec<Vec<u8>>, hashes: &[ItemHash]) -> Applied {
        let mut counts = counts.to_vec();
        let mut added: Vec<Vec<u64>> = vec![Vec::new(); segments.len()];
        let mut answers = Vec::with_capacity(hashes.len());
        let mut offsets = Vec::new();
        let mut full = false;
        for hash in hashes {
            let present = self.in_levels(counts.len(), segments, hash);
            if !present {
                let newest = counts.len();
                if newest == 0 || counts[newest - 1] >= self.levels[newest - 1].capacity {
                    if newest >= self.levels.len() {
                        full = true;
                        break;
                    }
                    counts.push(0);
                }
                let level = &self.levels[counts.len() - 1];
                if segments.len() <= level.segment {
                    segments.resize(level.segment + 1, Vec::new());
                    added.resize(level.segment + 1, Vec::new());
                }
                offsets.clear();
                level.push_offsets(hash, &mut offsets);
                let bits = &mut segments[level.segment];
                let len = level.end().div_ceil(8) as usize;
                if bits.len() < len {
                    bits.resize(len, 0);
                }
                for &offset in &offsets {
                    bits[(offset / 8) as usize] |= 0x80 >> (offset & 7);
                }
                added[level.segment].extend_from_slice(&offsets);
                *counts.last_mut().expect("a level was made") += 1;
            }
            answers.push(!present);
        }
        Applied {
            answers,
            counts,
            added,
            full,
        }
    }
}
