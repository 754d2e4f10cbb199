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

use super::scripts::{clock_moved, index, TRIES, WINDOW_AT, WINDOW_MERGE};
use super::Window;
use crate::core::{Conn, Ctx};
use crate::dense;
use crate::error::Result;
use crate::io::exec::Cap;
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

/// A script runs about four times the server's work per bit of a `BITFIELD`: the bitmap pays
/// when the batch's bits outweigh the generations' bytes by a quarter of the plain filter's
/// ratio (`crate::dense::worth_it`).
fn outweighs(bytes: u64, generations: u32, items: usize, hashes: u32) -> bool {
    items as u64 * u64::from(hashes) * 32 >= bytes * u64::from(generations)
}

/// Items per bulk call: twice the batch that makes the dense path pay (so that partial
/// batches pay too) when the generations are small enough for it, else 4,096.
pub(super) fn batch_size(bytes: u64, generations: u32, hashes: u32) -> usize {
    let all = bytes * u64::from(generations);
    if bytes > dense::MAX_BYTES || all > MAX_ADD_BYTES {
        return 4096;
    }
    (all.div_ceil(32 * u64::from(hashes)) * 2).clamp(4096, 1_000_000) as usize
}

/// The part's batch by the dense path when it pays, else `None`; retried unless the caller
/// retries the whole (`whole`).
pub(super) async fn batch<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
    write: bool,
    whole: bool,
) -> Result<Option<Vec<bool>>> {
    let (exec, generations) = (ctx.exec(), ctx.kind().generations);
    let geometry = ctx.part().geometry;
    let bytes = geometry.max_bytes();
    let all = bytes * u64::from(generations);
    let pays = outweighs(bytes, generations, items.len(), geometry.hashes);
    let fits = match write {
        true => bytes <= dense::MAX_BYTES && all <= MAX_ADD_BYTES,
        false => all <= MAX_READ_BYTES,
    };
    if !pays || !fits || (write && !exec.has(MERGE)) {
        return Ok(None);
    }
    let offsets = geometry.offsets(items)?;
    let offsets = offsets.as_slice();
    let answers = match write {
        true => match ctx.retried_unless(whole, || add(ctx, offsets)).await {
            // A user granted the generations but not the scratch key or BITOP: the same add
            // by the per-item script.
            Err(err) if exec.lacks(MERGE, ctx.key(), &err) => return Ok(None),
            done => done?,
        },
        false => ctx.retried_unless(whole, || read(ctx, offsets)).await?,
    };
    Ok(Some(answers))
}

/// One attempt of the dense add (again with the server's epoch when the guess was off).
async fn add<C: Conn>(ctx: Ctx<'_, C, Window>, offsets: &[u64]) -> Result<Vec<bool>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let (g, k) = (window.generations as usize, part.geometry.hashes as usize);
    for _ in 0..TRIES {
        let guess = window.guess();
        let mut keys = part.keys(guess, window.generations, ctx.guard());
        keys.push(part.scratch.clone());
        let mut tx = Tx::atomic();
        let olds: Vec<Slot<Option<Vec<u8>>>> = keys[..g + 2]
            .iter()
            .map(|key| tx.add(redis::cmd("GET").arg(key).to_owned()))
            .collect();
        tx.add_unread(
            redis::cmd("SET")
                .arg(&part.scratch)
                .arg(dense::bitmap(offsets))
                .to_owned(),
        );
        // EVAL, not EVALSHA: NOSCRIPT cannot be retried inside a transaction.
        let ro = exec.has(Cap::BitfieldRo);
        let merge = window.eval("EVAL", &WINDOW_MERGE, &keys, guess, true, ro);
        let merged: Slot<Value> = tx.add(merge);
        tx.add_unread(redis::cmd("DEL").arg(&part.scratch).to_owned());
        let mut replies = exec.run(&keys[1], &tx).await?;
        let Some(epoch) = window.epoch_from(ctx.key(), replies.take(merged)?)? else {
            continue;
        };
        let mut olds = olds
            .into_iter()
            .map(|slot| replies.take(slot))
            .collect::<Result<Vec<_>>>()?;
        let current = index(guess, epoch)?;
        let mut new = dense::new_flags(olds[current].take().unwrap_or_default(), offsets, k);
        for old in olds[current + 1..current + g].iter().flatten() {
            for (new, present) in new.iter_mut().zip(dense::present(old, offsets, k)) {
                *new &= !present;
            }
        }
        return Ok(new);
    }
    Err(clock_moved())
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
        let head: Slot<Value> = tx.add(window.eval(by, &WINDOW_AT, &keys, guess, false, ro));
        let chunks: Vec<dense::Whole> = keys[..g + 2]
            .iter()
            .map(|key| dense::read_whole(&mut tx, key, part.geometry.bits))
            .collect();
        let mut replies = match exec.run(&keys[1], &tx).await {
            Err(err) if eval_ro && exec.lacks(Cap::EvalRo, ctx.key(), &err) => continue,
            replies => replies?,
        };
        let Some(epoch) = window.epoch_from(ctx.key(), replies.take(head)?)? else {
            continue;
        };
        let current = index(guess, epoch)?;
        let mut present = vec![false; offsets.len() / k];
        for (index, whole) in chunks.into_iter().enumerate() {
            let bytes = whole.take(&mut replies)?;
            if !(current..current + g).contains(&index) || bytes.is_empty() {
                continue;
            }
            for (present, found) in present.iter_mut().zip(dense::present(&bytes, offsets, k)) {
                *present |= found;
            }
        }
        return Ok(present);
    }
    Err(clock_moved())
}
