//! The counting filter's dense path, for batches that outweigh the counters: read them whole,
//! apply the batch here, and write them back in one compare-and-set script
//! (`lua/counting_swap.lua`) that writes nothing if they changed since the read.
//!
//! A `BITFIELD ... INCRBY u4` costs the server about 0.5 µs per counter and its reply, so a
//! bulk load of 1M items of 7 counters held it about 4.6 s (216k items/s). Moving the counters
//! instead costs a copy or two of their bytes per batch. The swap is one atomic step for the
//! whole key, so each item of the batch is added or removed atomically as on the per-item
//! path, and the answers are those the per-item path gives for the same counters: computed
//! from the bytes the swap found, in input order.

use super::{Counters, Counting};
use crate::core::{Conn, Ctx, Op};
use crate::dense;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::lease::Lease;
use crate::io::once::{self, Step};
use crate::io::tx::{Slot, Tx};
use crate::scripts::{lua, once_lua};
use redis::Value;

/// The dense path's compare-and-set of a whole key of counters (run with `EVAL` inside a
/// `MULTI`, where `EVALSHA`'s `NOSCRIPT` could not be answered by loading it).
const COUNTING_SWAP: &str = lua!["counting_swap"];
/// [`COUNTING_SWAP`], its answers recorded across retries ([`once`](crate::io::once)).
const COUNTING_SWAP_ONCE: &str = once_lua!(lua!["counting_swap"]);

/// The largest key of counters written whole: a swap holds the server while it compares and
/// copies the key's bytes (measured on Redis 7.0.15: docs/design.md "Counting filters"), and a
/// batch in flight holds three copies here.
pub(crate) const MAX_SWAP_BYTES: u64 = 8 << 20;

/// The scratch keys' TTL: they are deleted by the swap that reads them, and expire if a
/// transaction fails between the `SET`s and the script.
pub(crate) const SCRATCH_TTL_MS: u64 = 60_000;

/// Swaps tried before a batch goes the per-item way: each fails only when another writer
/// changed the counters between the read and the swap.
pub(crate) const SWAP_ATTEMPTS: usize = 3;

/// Bytes of counters swapped whole that one counter by `BITFIELD ... INCRBY u4` is worth: a
/// load's counters by `BITFIELD` cost about 1 µs each of wall time (300,000 items of 7 into
/// 4.8 MB in 2.0 s, exact answers on), a batch swapped into 4.8 MB about 37 ms (300,000 items
/// in batches of 20,000: 0.53-0.59 s, 15 swaps): break-even near 75 bytes a counter. At 8 (each counter's `BITFIELD` arguments against the key's bytes), batches of
/// up to 85,000 items went by `BITFIELD` there (BENCHMARKS.md, "Counting batches priced as
/// ranges").
const WRITE_BYTES_PER_COUNTER: u64 = 64;

/// The same for a check reading the counters whole against `BITFIELD_RO ... GET u4`: about
/// 0.5 µs a counter (300,000 items' checks in 1.0-1.3 s), a batch read whole about 9-10 ms
/// (300,000 checked in batches of 10,000: 0.27-0.30 s, 30 reads).
const READ_BYTES_PER_COUNTER: u64 = 128;

/// Whether a batch of `items` items of `hashes` counters each is cheaper dense on a key of
/// `bytes` bytes of counters: the key is at most `max_bytes` and the batch's counters outweigh
/// it at [`WRITE_BYTES_PER_COUNTER`].
pub(crate) fn worth_it(bytes: u64, items: usize, hashes: u32, max_bytes: u64) -> bool {
    let counters = dense::units_of(items, hashes);
    bytes <= max_bytes && dense::outweighs(counters, WRITE_BYTES_PER_COUNTER, bytes)
}

/// Whether a check of such a batch is cheaper by reading the counters whole (at most
/// `dense::MAX_READ_BYTES`).
pub(crate) fn read_worth_it(bytes: u64, items: usize, hashes: u32) -> bool {
    let counters = dense::units_of(items, hashes);
    bytes <= dense::MAX_READ_BYTES && dense::outweighs(counters, READ_BYTES_PER_COUNTER, bytes)
}

/// A batch size for bulk adds and removes on a key of `bytes` bytes of counters: a counter per
/// 4 bytes of them (16 times the break-even of [`worth_it`]: few swaps), else as many
/// items as a few `BITFIELD` commands take (`per_item`).
pub(crate) fn batch_size(bytes: u64, hashes: u32, per_item: usize) -> usize {
    if bytes <= MAX_SWAP_BYTES {
        (bytes.div_ceil(8 * u64::from(hashes)) * 2).clamp(1_000, 1_000_000) as usize
    } else {
        per_item
    }
}

/// A write batch the dense way: the counters read whole, the batch applied here, and the
/// result swapped in by one script that writes nothing if they changed since the read (tried
/// [`SWAP_ATTEMPTS`] times, each retried). `None` when every swap found them changed: the
/// batch then goes the per-item way.
pub(super) async fn run<C: Conn>(
    ctx: Ctx<'_, C, Counting>,
    cells: &[u64],
    op: Op,
) -> Result<Option<Vec<bool>>> {
    let (part, exec) = (ctx.part(), ctx.exec());
    let (old_key, new_key) = &part.scratch;
    let _turn = part.turns.local().await;
    let mut keys = vec![part.key.as_str(), old_key, new_key];
    keys.extend(ctx.guard().map(|guard| guard.key()));
    let adds = if op == Op::Remove { "0" } else { "1" };
    // With a record across retries, each swap (its compare and set) is a command of one step:
    // a retry after a lost reply reads back the answers of a swap that went through instead of
    // reading the counters again and swapping twice.
    let step = exec.step();
    let rings = step.as_ref().map(|step| step.rings(&part.key));
    keys.extend(rings.iter().flatten().map(String::as_str));
    // Concurrent writers' swaps take turns, instead of failing each other's. (With a filter
    // that waits for replicas, the lease's round trip before each shard's swap lets a first
    // shard's `WAIT` go out before the other shards' swaps: those still go when it fails,
    // `Shards::fan_out`; cli/tests/counting_wait.rs.)
    let lease = Lease::take(exec, &part.lease, &part.turns).await;
    let swapped = swap(ctx, (cells, op), (&keys, adds), step.as_ref()).await;
    if let Some(step) = &step {
        step.settle(exec, &swapped).await;
    }
    lease.release().await;
    swapped
}

/// The swap's attempts (see [`run`]).
async fn swap<C: Conn>(
    ctx: Ctx<'_, C, Counting>,
    (cells, op): (&[u64], Op),
    (keys, adds): (&[&str], &str),
    step: Option<&Step>,
) -> Result<Option<Vec<bool>>> {
    let (part, exec, params) = (ctx.part(), ctx.exec(), ctx.params());
    let (old_key, new_key) = &part.scratch;
    let k = part.geometry.hashes as usize;
    for index in 0..SWAP_ATTEMPTS {
        let swapped = ctx
            .retried(|| async {
                let since = exec.carrier(&part.key);
                let old = read_whole(exec, part).await?;
                let mut new = old.clone();
                let answers = apply(op, &mut new, cells, k);
                let changed = if new == old { "0" } else { "1" };
                let once = step.as_ref().map(|step| {
                    step.args_answering(&part.key, index, once::answers_text(&answers))
                });
                let mut tx = Tx::atomic();
                for (scratch, bytes) in [(old_key, &old), (new_key, &new)] {
                    let mut set = redis::cmd("SET");
                    set.arg(scratch).arg(bytes).arg("PX").arg(SCRATCH_TTL_MS);
                    tx.add_unread(set);
                }
                let mut eval = redis::cmd("EVAL");
                eval.arg(match once {
                    Some(_) => COUNTING_SWAP_ONCE,
                    None => COUNTING_SWAP,
                })
                .arg(keys.len())
                .arg(keys)
                .arg(params.fingerprint())
                .arg(adds)
                .arg(changed);
                if let Some(once) = &once {
                    eval.arg(once);
                }
                let reply: Slot<Value> = tx.add(eval);
                let reply = exec.run(&part.key, &tx).await?.take(reply)?;
                if let Some(refusal) = params.refused(&reply) {
                    return Err(refusal);
                }
                match reply {
                    Value::Int(1) => {
                        exec.confirm(&part.key, Engine::Fast, since).await?;
                        Ok(Some(answers))
                    }
                    // The answers recorded (now, or by an attempt whose reply was lost).
                    Value::BulkString(_) if once.is_some() => {
                        let answers = once::flags(&reply, cells.len() / k)?;
                        if let Some(step) = &step {
                            step.acknowledge(exec, &part.key, index).await;
                        }
                        exec.confirm(&part.key, Engine::Fast, since).await?;
                        Ok(Some(answers))
                    }
                    Value::Int(0) => Ok(None),
                    reply => Err(Error::UnexpectedReply(format!(
                        "{reply:?} from the counters' swap"
                    ))),
                }
            })
            .await?;
        if swapped.is_some() {
            return Ok(swapped);
        }
    }
    Ok(None)
}

/// A key's counters, in chunks of a few MiB, in one round trip.
pub(super) async fn read_whole<C: Conn>(exec: &Exec<C>, part: &Counters) -> Result<Vec<u8>> {
    let mut tx = Tx::plain();
    let whole = dense::read_whole(&mut tx, &part.key, part.geometry.bits * 4);
    let mut replies = exec.run(&part.key, &tx).await?;
    whole.take(&mut replies)
}

/// Counter `cell` (Redis's order: counter i is bits 4i..4i+3, the high nibble of byte i/2 for
/// an even i); 0 past the end.
pub(crate) fn counter(counters: &[u8], cell: u64) -> u8 {
    let byte = counters.get((cell / 2) as usize).copied().unwrap_or(0);
    match cell % 2 {
        0 => byte >> 4,
        _ => byte & 0x0f,
    }
}

fn set_counter(counters: &mut [u8], cell: u64, value: u8) {
    let byte = &mut counters[(cell / 2) as usize];
    *byte = match cell % 2 {
        0 => (*byte & 0x0f) | (value << 4),
        _ => (*byte & 0xf0) | value,
    };
}

/// Applies a write batch (`k` cells per item) to `counters` as the per-item path would, item
/// after item, and returns its answers: for [`Op::Add`], whether a counter went from 0 to 1;
/// for [`Op::AddIfAbsent`], whether the item was added (some counter was 0); for
/// [`Op::Remove`], whether it was present (each counter above the times the item holds it, or
/// saturated) and so removed (saturated counters stay). `counters` grows to the highest
/// counter written, as `BITFIELD` grows the key. `Op::Exists` changes nothing.
pub(crate) fn apply(op: Op, counters: &mut Vec<u8>, cells: &[u64], k: usize) -> Vec<bool> {
    if op != Op::Remove {
        if let Some(&max) = cells.iter().max() {
            let len = (max / 2 + 1) as usize;
            if counters.len() < len {
                counters.resize(len, 0);
            }
        }
    }
    cells
        .chunks(k)
        .map(|item| match op {
            Op::Exists => item.iter().all(|&cell| counter(counters, cell) > 0),
            Op::Add => increment(counters, item),
            Op::AddIfAbsent => {
                let absent = item.iter().any(|&cell| counter(counters, cell) == 0);
                if absent {
                    increment(counters, item);
                }
                absent
            }
            Op::Remove => {
                let present = item.iter().all(|&cell| {
                    let value = counter(counters, cell);
                    let times = item.iter().filter(|&&other| other == cell).count();
                    value == 15 || usize::from(value) >= times
                });
                if present {
                    for &cell in item {
                        let value = counter(counters, cell);
                        if value != 15 {
                            set_counter(counters, cell, value - 1);
                        }
                    }
                }
                present
            }
        })
        .collect()
}

/// Increments each counter (saturating at 15); whether one went from 0 to 1.
fn increment(counters: &mut [u8], item: &[u64]) -> bool {
    let mut new = false;
    for &cell in item {
        let value = counter(counters, cell);
        new |= value == 0;
        set_counter(counters, cell, (value + 1).min(15));
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_use_redis_nibble_order() {
        let mut counters = vec![0u8; 2];
        set_counter(&mut counters, 0, 1);
        set_counter(&mut counters, 3, 15);
        assert_eq!(counters, [0x10, 0x0f]);
        assert_eq!(
            (
                counter(&counters, 0),
                counter(&counters, 1),
                counter(&counters, 3)
            ),
            (1, 0, 15)
        );
        assert_eq!(counter(&counters, 100), 0, "past the end");
    }

    #[test]
    fn adds_and_removes_follow_the_per_item_rules() {
        let mut counters = Vec::new();
        // Item a holds counter 5 twice; b shares counter 1 with a.
        let (a, b) = ([1, 5, 5], [1, 2, 3]);
        assert_eq!(
            apply(Op::Add, &mut counters, &[a, a, b].concat(), 3),
            [true, false, true]
        );
        assert_eq!(counters.len(), 3, "grown to the highest counter");
        assert_eq!((counter(&counters, 1), counter(&counters, 5)), (3, 4));
        assert_eq!(
            apply(Op::AddIfAbsent, &mut counters, &[b, [7, 8, 9]].concat(), 3),
            [false, true]
        );
        assert_eq!(
            apply(Op::Remove, &mut counters, &[b, b, a, a, a].concat(), 3),
            [true, false, true, true, false]
        );
        assert_eq!(
            counters.iter().filter(|&&byte| byte != 0).count(),
            2,
            "7, 8, 9 left"
        );
        assert_eq!(
            apply(Op::Exists, &mut counters, &[7, 8, 9, 1, 2, 3], 3),
            [true, false]
        );
    }

    #[test]
    fn saturated_counters_stay_and_removes_past_the_end_change_nothing() {
        let mut counters = Vec::new();
        let item = [4u64, 6];
        apply(Op::Add, &mut counters, &item.repeat(20), 2);
        assert_eq!(counter(&counters, 4), 15);
        let removed = apply(Op::Remove, &mut counters, &item.repeat(20), 2);
        assert!(removed.iter().all(|&r| r), "a saturated item stays present");
        assert_eq!(counter(&counters, 6), 15);
        let mut empty = Vec::new();
        assert_eq!(apply(Op::Remove, &mut empty, &[1000, 2000], 2), [false]);
        assert!(empty.is_empty(), "a remove never grows the counters");
    }

    #[test]
    fn dense_only_pays_for_batches_that_outweigh_the_counters() {
        let mib = 1 << 20;
        assert!(worth_it(5 * mib, 100_000, 7, MAX_SWAP_BYTES));
        assert!(!worth_it(5 * mib, 10_000, 7, MAX_SWAP_BYTES));
        // 7 counters an item at 64 bytes (128 for a check): 4,480,000 bytes from 10,000 items.
        assert!(worth_it(4_480_000, 10_000, 7, MAX_SWAP_BYTES));
        assert!(!worth_it(4_480_000, 9_999, 7, MAX_SWAP_BYTES));
        assert!(read_worth_it(4_480_000, 5_000, 7) && !read_worth_it(4_480_000, 4_999, 7));
        assert!(!worth_it(64 * mib, 10_000_000, 7, MAX_SWAP_BYTES));
        assert_eq!(batch_size(64 * mib, 7, 9_000), 9_000);
        let batch = batch_size(5 * mib, 7, 9_000);
        assert!(worth_it(5 * mib, batch / 2, 7, MAX_SWAP_BYTES));
    }
}
