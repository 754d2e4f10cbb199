//! The window filter's dense path, for batches that outweigh the generations: move bitmaps
//! instead of running a script per item (the plain filter's dense path, `crate::dense`, over
//! every live generation).
//!
//! - **Add**: one transaction reads every declared generation (`GET`), writes the batch's
//!   bitmap to the scratch key, ORs it into the current generation in a script that runs the
//!   window head's checks (parameters, epoch) and keeps the expiry, and deletes the scratch
//!   key. "New" is computed here from the bytes before, exactly as the per-item script would
//!   answer.
//! - **Check**: one pipeline of the head's checks (a read-only script replying the epoch), then
//!   `GETRANGE` of every declared generation in chunks; the live ones are tested here.

use super::scripts::WINDOW_MERGE_ONCE;
use super::scripts::{classify, clock_moved, index, Reply, TRIES, WINDOW_AT, WINDOW_MERGE};
use super::Window;
use crate::core::{Conn, Ctx};
use crate::dense;
use crate::error::{Error, Result};
use crate::io::exec::Cap;
use crate::io::once::Step;
use crate::io::tx::{Slot, Tx};
use redis::Value;

/// What a refused dense merge falls back to.
const MERGE: Cap = Cap::Merge {
    from: "dense merge",
    to: "per-item script",
};

/// The most bytes of all live generations together a dense add reads and a dense check
/// reads: one add's transaction holds the server while it copies them (about 1 ms for 4 MiB
/// on the machine of BENCHMARKS.md), and every check in flight holds a copy here.
const MAX_ADD_BYTES: u64 = 16 << 20;
const MAX_READ_BYTES: u64 = dense::MAX_READ_BYTES;

/// The most bytes of all live generations together the dense path takes whole (`write`: an
/// add), past which batches go by ranges.
pub(super) fn whole_bytes(write: bool) -> u64 {
    match write {
        true => MAX_ADD_BYTES,
        false => MAX_READ_BYTES,
    }
}

/// Bytes of the live generations moved whole that one bit of the per-item scripts is worth,
/// for an add and a check alike: the scripts answer from every live generation, at several
/// times a plain filter's `BITFIELD` per bit (about 15 µs an add of 11 bits, 3.8 µs a check,
/// into four generations of 3.7 MB), where a pass over them whole takes about 70 ms (an add)
/// and 22 ms (a check): break-even near 280 and 230 bytes a bit. At 32, batches of up to
/// 42,000 items there went by the scripts, those of 6,000 to 20,000 1.5-4.3x slower to add and
/// 1.0-2.8x to check (BENCHMARKS.md, "Window batches by ranges").
const BYTES_PER_BIT: u64 = 256;

/// Items per bulk call: when the generations are small enough for the dense path, a bit per
/// 16 bytes of them (16 times the bits that pay for a pass: few passes), else a batch that
/// pays by itself for a pass by ranges over all the live generations (`ranges`).
pub(super) fn batch_size(bytes: u64, generations: u32, hashes: u32) -> usize {
    let all = bytes * u64::from(generations);
    if bytes > dense::MAX_BYTES || all > MAX_ADD_BYTES {
        return dense::add_batch_size(all * 8, hashes);
    }
    (all.div_ceil(32 * u64::from(hashes)) * 2).clamp(4096, 1_000_000) as usize
}

/// The part's batch by the dense path when it pays, else `None`; retried unless the caller
/// retries the whole (`whole`). An add under a `step` is recorded across retries
/// ([`once`](crate::io::once)).
pub(super) async fn batch<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
    (write, step): (bool, Option<&Step>),
    whole: bool,
) -> Result<Option<Vec<bool>>> {
    let (exec, generations) = (ctx.exec(), ctx.kind().generations);
    let geometry = ctx.part().geometry;
    let bytes = geometry.max_bytes();
    let all = bytes * u64::from(generations);
    // The batch's bits outweigh the live generations' bytes at [`BYTES_PER_BIT`].
    let bits = dense::units_of(items.len(), geometry.hashes);
    let pays = dense::outweighs(bits, BYTES_PER_BIT, all);
    let fits = match write {
        true => bytes <= dense::MAX_BYTES && all <= MAX_ADD_BYTES,
        false => all <= MAX_READ_BYTES,
    };
    if !pays || !fits || (write && !exec.has(MERGE)) {
        return Ok(None);
    }
    let offsets = geometry.offsets(items)?;
    let offsets = offsets.as_slice();
    let step = step.filter(|_| exec.has(Cap::Exact));
    let answers = match (write, step) {
        (true, Some(step)) => match ctx
            .retried_unless(whole, || add_once(ctx, offsets, step))
            .await
        {
            // The ACL refuses the scratch key, BITOP or the ring: the per-item script (which
            // records its answers where the ring is granted), as the plain filter does.
            Err(err) if exec.lacks(MERGE, ctx.key(), &err) => return Ok(None),
            done => done?,
        },
        (true, None) => match ctx.retried_unless(whole, || add(ctx, offsets)).await {
            // A user granted the generations but not the scratch key or BITOP: the same add
            // by the per-item script.
            Err(err) if exec.lacks(MERGE, ctx.key(), &err) => return Ok(None),
            done => done?,
        },
        (false, _) => ctx.retried_unless(whole, || read(ctx, offsets)).await?,
    };
    Ok(Some(answers))
}

/// One attempt of the dense add (again with the server's epoch when the guess was off).
async fn add<C: Conn>(ctx: Ctx<'_, C, Window>, offsets: &[u64]) -> Result<Vec<bool>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let (g, k) = (window.generations as usize, part.geometry.hashes as usize);
    for _ in 0..TRIES {
        let guess = window.guess();
        let (keys, mut tx, olds) = generations_read(ctx, guess);
        // EVAL, not EVALSHA: NOSCRIPT cannot be retried inside a transaction. Probing
        // (`dense::Seen`), the script stages the bitmap itself after finding a new bit; else
        // the transaction stages it and deletes it after.
        let ro = exec.has(Cap::BitfieldRo);
        let mut merge = window.eval("EVAL", &WINDOW_MERGE, &keys, guess, true, (ro, part));
        let bitmap = dense::bitmap(offsets);
        let probe = part.dense_seen.probes(false);
        let merged: Slot<Value> = match probe {
            true => tx.add(merge.arg(bitmap).arg("bare").arg(1).to_owned()),
            false => {
                tx.add_unread(redis::cmd("SET").arg(&part.scratch).arg(bitmap).to_owned());
                let merged = tx.add(merge.arg("").arg("bare").arg(0).to_owned());
                tx.add_unread(redis::cmd("DEL").arg(&part.scratch).to_owned());
                merged
            }
        };
        let mut replies = exec.run(&keys[1], &tx).await?;
        let merged = replies.take(merged)?;
        // Every bit of the batch was in the current generation (lua/window_merge.lua): no
        // item new, nothing written.
        if merged == Value::Int(0) {
            part.dense_seen.answered(&[]);
            return Ok(vec![false; offsets.len() / k]);
        }
        let Some(epoch) = window.epoch_from(ctx.key(), merged)? else {
            continue;
        };
        let mut olds = olds
            .into_iter()
            .map(|slot| replies.take(slot))
            .collect::<Result<Vec<_>>>()?;
        let current = index(guess, epoch)?;
        let mut new = dense::new_flags(olds[current].take().unwrap_or_default(), offsets, k);
        for old in olds[current + 1..current + g].iter().flatten() {
            mark_present(&mut new, old, offsets, k);
        }
        part.dense_seen.answered(&new);
        return Ok(new);
    }
    Err(clock_moved())
}

/// One attempt of the dense add recorded under `step` (its command 0): one transaction reads
/// every declared generation and runs the recording script, which replies (and records) the
/// epoch, which older generations existed, and the current generation's bytes from before.
/// Older generations are never written again, so the answers are the same whether the reply
/// is the first attempt's or a retry's record; a retry that no longer finds an older
/// generation that existed (it left the window meanwhile) cannot tell them:
/// [`Error::OutcomeUnknown`], nothing applied again.
async fn add_once<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    offsets: &[u64],
    step: &Step,
) -> Result<Vec<bool>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let (g, k) = (window.generations as usize, part.geometry.hashes as usize);
    let ring_key = format!("{}:", part.prefix);
    let rings = step.rings(&ring_key);
    let bitmap = dense::bitmap(offsets);
    for _ in 0..TRIES {
        let guess = window.guess();
        let (mut keys, mut tx, olds) = generations_read(ctx, guess);
        keys.extend(rings.iter().cloned());
        let ro = exec.has(Cap::BitfieldRo);
        // EVAL, not EVALSHA: NOSCRIPT cannot be retried inside a transaction.
        let mut merge = window.eval("EVAL", &WINDOW_MERGE_ONCE, &keys, guess, true, (ro, part));
        let [id, epoch, retry, _, answer] = step.args(&ring_key, 0);
        // The first key is a generation, whose TTL is not the filter's: "0".
        merge
            .arg(&bitmap)
            .arg("record")
            .arg(u8::from(part.dense_seen.probes(true)))
            .arg(id)
            .arg(epoch)
            .arg(retry)
            .arg("0")
            .arg(answer);
        let merged: Slot<Value> = tx.add(merge);
        let mut replies = exec.run(&keys[1], &tx).await?;
        let record = match classify(replies.take(merged)?)? {
            Reply::Done(Value::BulkString(record)) => record,
            // Every bit of the batch was in the current generation (lua/window_merge.lua): no
            // item new, nothing written, nothing recorded.
            Reply::Done(Value::Int(0)) => {
                part.dense_seen.answered(&[]);
                return Ok(vec![false; offsets.len() / k]);
            }
            Reply::Done(other) => {
                return Err(Error::UnexpectedReply(format!(
                    "{other:?} from a dense add"
                )))
            }
            Reply::Epoch(now) => {
                step.unsent(0);
                window.server.learn(now);
                continue;
            }
            Reply::Params(stored) => return Err(window.mismatch(ctx.key(), stored)),
            Reply::Lost(gone) => return Err(super::scripts::lost(ctx.key(), gone)),
        };
        let olds = olds
            .into_iter()
            .map(|slot| replies.take(slot))
            .collect::<Result<Vec<_>>>()?;
        let (epoch, existed, before) = parse_record(&record, g)?;
        let mut new = dense::new_flags(before.to_vec(), offsets, k);
        let mut unread = Vec::new();
        for (back, existed) in (1..g).zip(existed) {
            let older = usize::try_from(guess + 1 - (epoch - back as i64))
                .ok()
                .and_then(|i| olds.get(i));
            match (existed, older) {
                (false, _) => {}
                (true, Some(Some(bytes))) => mark_present(&mut new, bytes, offsets, k),
                // Gone since, or not among the keys this attempt declared: read by name.
                (true, _) => unread.push(part.generation(epoch - back as i64)),
            }
        }
        for key in unread {
            let get = redis::cmd("GET").arg(&key).to_owned();
            let bytes: Option<Vec<u8>> = exec.query(&key, &get).await?;
            let Some(bytes) = bytes else {
                return Err(Error::OutcomeUnknown {
                    key: ctx.key().to_owned(),
                    step: format!("the generation {key} it may have written is gone"),
                });
            };
            mark_present(&mut new, &bytes, offsets, k);
        }
        step.acknowledge(exec, &format!("{}:", part.prefix), 0)
            .await;
        part.dense_seen.answered(&new);
        return Ok(new);
    }
    Err(clock_moved())
}

/// Each declared generation's bytes, as a transaction reads them (`None`: no such key).
type Olds = Vec<Slot<Option<Vec<u8>>>>;

/// The keys a dense add declares for `guess` (the generations, the checked keys, the scratch
/// key), and a transaction that first reads every declared generation (`GET`).
fn generations_read<C>(ctx: Ctx<'_, C, Window>, guess: i64) -> (Vec<String>, Tx, Olds) {
    let (window, part) = (ctx.kind(), ctx.part());
    let mut keys = part.keys(guess, window.generations, ctx.guard());
    keys.push(part.scratch.clone());
    let mut tx = Tx::atomic();
    let olds = keys[..window.generations as usize + 2]
        .iter()
        .map(|key| tx.add(redis::cmd("GET").arg(key).to_owned()))
        .collect();
    (keys, tx, olds)
}

/// Items found in an older generation's `bytes` are not new.
fn mark_present(new: &mut [bool], bytes: &[u8], offsets: &[u64], k: usize) {
    for (new, present) in new.iter_mut().zip(dense::present(bytes, offsets, k)) {
        *new &= !present;
    }
}

/// A recorded dense add's reply, `EPOCH:MASK:BYTES` (lua/window_merge.lua): the current
/// generation's epoch, whether each older live generation existed (newest first), and the
/// current generation's bytes from before.
fn parse_record(record: &[u8], generations: usize) -> Result<(i64, Vec<bool>, &[u8])> {
    let unexpected = || {
        let head = String::from_utf8_lossy(&record[..record.len().min(40)]).into_owned();
        Error::UnexpectedReply(format!("{head:?}… from a dense add"))
    };
    let mut parts = record.splitn(3, |&b| b == b':');
    let (Some(epoch), Some(mask), Some(before)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(unexpected());
    };
    let epoch = std::str::from_utf8(epoch)
        .ok()
        .and_then(|e| e.parse().ok())
        .ok_or_else(unexpected)?;
    if mask.len() + 1 != generations || mask.iter().any(|b| !matches!(b, b'0' | b'1')) {
        return Err(unexpected());
    }
    Ok((epoch, mask.iter().map(|&b| b == b'1').collect(), before))
}

/// One attempt of the dense check.
async fn read<C: Conn>(ctx: Ctx<'_, C, Window>, offsets: &[u64]) -> Result<Vec<bool>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let (g, k) = (window.generations as usize, part.geometry.hashes as usize);
    for _ in 0..TRIES {
        let guess = window.guess();
        let keys = part.keys(guess, window.generations, ctx.guard());
        let mut tx = Tx::plain();
        let eval_ro = exec.has(Cap::EvalRo);
        let by = if eval_ro { "EVAL_RO" } else { "EVAL" };
        let ro = exec.has(Cap::BitfieldRo);
        let head: Slot<Value> =
            tx.add(window.eval(by, &WINDOW_AT, &keys, guess, false, (ro, part)));
        let chunks: Vec<dense::Whole> = keys[..g + 2]
            .iter()
            .map(|key| dense::read_whole(&mut tx, key, part.geometry.bits))
            .collect();
        let mut replies = match exec.run(&keys[1], &tx).await {
            Err(err) if eval_ro && exec.lacks(Cap::EvalRo, ctx.key(), &err) => continue,
            replies => replies?,
        };
        let Some((epoch, gone)) = window.at_from(ctx.key(), replies.take(head)?)? else {
            continue;
        };
        let current = index(guess, epoch)?;
        let mut present = vec![false; offsets.len() / k];
        for (index, whole) in chunks.into_iter().enumerate() {
            let bytes = whole.take(&mut replies)?;
            if !(current..current + g).contains(&index) || bytes.is_empty() {
                continue;
            }
            // A live generation's bit set: the filter is there (no question of a replica
            // that has not synced, `core::lost`).
            ctx.saw(bytes.iter().any(|&byte| byte != 0));
            for (present, found) in present.iter_mut().zip(dense::present(&bytes, offsets, k)) {
                *present |= found;
            }
        }
        // A live generation gone (the ledger lists it) is lost data, not "absent".
        if let Some(gone) = gone.filter(|_| present.iter().any(|&p| !p)) {
            return Err(super::scripts::lost(ctx.key(), gone));
        }
        return Ok(present);
    }
    Err(clock_moved())
}
