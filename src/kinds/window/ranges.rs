//! Window generations past 4 MiB, by ranges (as a plain filter's merge by ranges): large
//! batches move the parts of the generations they touch instead of running a script per item.
//!
//! - **Add.** A first step makes the current generation (its expiry, the ledger) and replies
//!   its epoch E; the batch is *pinned* to E. Each range of generation E the batch touches is
//!   then one script (`lua/window_range_head.lua`, then the plain filter's range merge), which
//!   ORs the range's bitmap in and replies the range's bytes from before, from which come the
//!   items not in E before. The older live generations are never written again: their ranges
//!   are read (`GETRANGE`) and an item all of whose bits one of them holds is not new.
//! - **Pinned.** A range refuses to write once the server's epoch has passed E (an item written
//!   into E after that could leave the window before W is up): the batch then goes again into
//!   the current generation. What it wrote into E stays (bits only ever added: false positives
//!   at most, no item lost), and E, now older, answers for the batch's items from the bytes its
//!   ranges replied before they wrote, not from what they wrote.
//! - **Recorded** (exact answers across retries, SPEC.md §3): each range's script is in the
//!   once wrapper, its record (the bytes from before) deleted once the reply is in hand; a range
//!   retried after a lost reply answers from its record instead of writing again.
//! - **Check.** One step (the window head's checks, the epoch, the ledger: a generation gone is
//!   [`Error::Lost`]), then the ranges of every live generation the batch touches are read.
//!
//! Each range is atomic, a batch is not: two clients adding one item at the same moment may
//! both report it new (as for a plain filter's ranges); no bit is ever lost.

use super::part::Part;
use super::scripts::{
    self, call, classify, Reply, Run, WINDOW_AT, WINDOW_MAKE, WINDOW_MERGE_RANGE,
    WINDOW_MERGE_RANGE_ONCE,
};
use super::Window;
use crate::core::{Conn, Ctx};
use crate::dense::{self, Grouped, RangeMerge};
use crate::error::{Error, Result};
use crate::io::exec::Cap;
use crate::io::once::Step;
use crate::scripts::Arg;
use futures_util::StreamExt;
use redis::Value;

/// What an add by ranges refused by the ACL falls back to.
const BY_RANGES: Cap = Cap::Merge {
    from: "window add by ranges",
    to: "per-item script",
};

/// Generation boundaries a batch's ranges may cross before the batch gives up (each crossing
/// sends the batch again, whole): a batch that takes longer than several generations has
/// generations too short for it.
const PINS: usize = 8;

/// Where the records of a batch's ranges start among its step's commands (after any per-item
/// command's).
const RECORD_BASE: usize = 1 << 12;

/// Bytes of the live generations' ranges that one bit of the per-item add script is worth:
/// that script costs the server several times a plain filter's `BITFIELD` per bit (it answers
/// from every live generation: 10-14 µs of wall time per item of 11 bits into generations of
/// 19.5 MB), and a pass by ranges about 0.2 s there whatever the batch. Break-even measured
/// (`scripts/window_batches.sh`, BENCHMARKS.md "Window batches by ranges"): about 15,000 items
/// with the older generations filled, 20,000 with only the current one; this ratio sends
/// batches by ranges from about 18,700 (at the plain filter's 64, from 112,000: 1.4-1.8x
/// slower at 30,000).
const WRITE_BYTES_PER_BIT: u64 = 384;

/// The same for checks, against the per-item check script (about 5 µs per item there): checks
/// by ranges from about 14,000 items (at the plain filter's 128, from 56,000: 2.3-5.6x slower at
/// 30,000).
const READ_BYTES_PER_BIT: u64 = 512;

/// Whether a batch of `items` goes by ranges: generations too large for the whole-generation
/// dense path (`whole`: what that path takes), and enough offsets to pay for the ranges of all
/// the live generations.
pub(super) fn pays<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: usize,
    write: bool,
    whole: u64,
) -> bool {
    let geometry = ctx.part().geometry;
    let g = u64::from(ctx.kind().generations);
    let all = geometry.max_bytes() * g;
    let range = ctx.exec().options().merge_chunk();
    let offsets = (items * geometry.hashes as usize) as u64;
    let too_large = geometry.max_bytes() > dense::MAX_BYTES || all > whole;
    too_large
        && match write {
            true => dense::ranges_pay(all, range, offsets, WRITE_BYTES_PER_BIT),
            false => dense::ranges_pay(all, range, offsets, READ_BYTES_PER_BIT),
        }
}

/// The part's batch added by ranges; `None` when the ACL refuses them (nothing written: the
/// batch goes by the per-item script).
pub(super) async fn add<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
    step: Option<&Step>,
) -> Result<Option<Vec<bool>>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    if !exec.has(BY_RANGES) {
        return Ok(None);
    }
    let Some(grouped) = grouped(ctx, items)? else {
        return Ok(None);
    };
    let step = step.filter(|_| exec.has(Cap::Exact));
    let ranges = grouped.ranges();
    // Generations this batch wrote into before the epoch passed them: their epoch, which
    // ranges were done, and for each item whether one of its bits there was 0 before.
    let mut passed: Vec<Pinned> = Vec::new();
    for pin in 0..PINS {
        let epoch = make(ctx).await?;
        let mut pinned = Pinned {
            epoch,
            done: vec![false; ranges],
            not_in: vec![false; grouped.items()],
        };
        let mut buffer = vec![0u8; range_bytes(ctx) as usize];
        let batches = [&grouped];
        let mut pending =
            (0..ranges).filter_map(|r| RangeMerge::new(&batches, r, &mut buffer, <[u8]>::to_vec));
        let merge = |(merge, bitmap): (RangeMerge, Vec<u8>)| {
            let index = RECORD_BASE + pin * ranges + merge.r();
            merge_range(ctx, (epoch, step.map(|s| (s, index))), merge, bitmap)
        };
        let mut moved = false;
        // The first range alone: an ACL refusal writes nothing anywhere.
        if let Some(first) = pending.next() {
            match merge(first).await {
                Ok(Merged::Done(merge, old)) => pinned.mark(&batches, merge, old),
                Ok(Merged::Moved) => moved = true,
                Err(err)
                    if pin == 0
                        && (exec.lacks(BY_RANGES, ctx.key(), &err)
                            || exec.lacks(Cap::Exact, ctx.key(), &err)) =>
                {
                    return Ok(None);
                }
                Err(err) => return Err(err),
            }
        }
        if !moved {
            let mut steps = futures_util::stream::iter(pending)
                .map(merge)
                .buffered(in_flight(ctx));
            while let Some(merged) = steps.next().await {
                match merged? {
                    Merged::Done(merge, old) => pinned.mark(&batches, merge, old),
                    Merged::Moved => moved = true,
                }
            }
        }
        if moved {
            passed.push(pinned);
            continue;
        }
        // Not in the current generation before; now, in none of the older ones.
        let mut new = pinned.not_in;
        let g = i64::from(window.generations);
        for older in epoch - g + 1..epoch {
            if !new.iter().any(|&n| n) {
                break;
            }
            let earlier = passed.iter().find(|p| p.epoch == older);
            let present = present_in(ctx, &grouped, &part.generation(older), earlier).await?;
            for (new, present) in new.iter_mut().zip(present) {
                *new &= !present;
            }
        }
        return Ok(Some(new));
    }
    Err(Error::UnexpectedReply(format!(
        "a batch of {} items crossed {PINS} generation boundaries of {} while its ranges went: \
         generations too short for batches this large (use smaller batches)",
        items.len(),
        ctx.key()
    )))
}

/// The part's batch checked by ranges: the head's checks and the epoch (a live generation the
/// ledger lists that is gone is [`Error::Lost`]), then the ranges of each live generation.
pub(super) async fn check<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
) -> Result<Option<Vec<bool>>> {
    let Some(grouped) = grouped(ctx, items)? else {
        return Ok(None);
    };
    let window = ctx.kind();
    let run = Run {
        script: &WINDOW_AT,
        read_only: true,
        store: false,
        flags: false,
        step: None,
    };
    let window_at = || async {
        let reply = call(ctx, run, &[]).await?;
        window
            .at_from(ctx.key(), reply)?
            .ok_or_else(scripts::clock_moved)
    };
    let (epoch, gone) = ctx.retried(window_at).await?;
    let mut found = vec![false; grouped.items()];
    let g = i64::from(window.generations);
    for live in epoch - g + 1..=epoch {
        let present = present_in(ctx, &grouped, &ctx.part().generation(live), None).await?;
        for (found, present) in found.iter_mut().zip(present) {
            *found |= present;
        }
    }
    // A live generation gone (the ledger lists it) is lost data, not "absent".
    if let Some(gone) = gone.filter(|_| found.iter().any(|&f| !f)) {
        return Err(scripts::lost(ctx.key(), gone));
    }
    Ok(Some(found))
}

/// A generation the batch wrote ranges into under a pinned epoch.
struct Pinned {
    epoch: i64,
    /// Ranges written (their bytes from before in hand).
    done: Vec<bool>,
    /// For each item, whether one of its bits in a range done was 0 before.
    not_in: Vec<bool>,
}

impl Pinned {
    fn mark(&mut self, batches: &[&Grouped], merge: RangeMerge, old: Vec<u8>) {
        merge.mark_new(batches, old, std::slice::from_mut(&mut self.not_in));
        self.done[merge.r()] = true;
    }
}

/// What one range's script did.
enum Merged {
    /// Written: the range's bytes from before.
    Done(RangeMerge, Vec<u8>),
    /// Refused: the server's epoch passed the pinned one (nothing written).
    Moved,
}

/// The batch's offsets grouped by ranges of the part's generations.
fn grouped<C: Conn>(ctx: Ctx<'_, C, Window>, items: &[&[u8]]) -> Result<Option<Grouped>> {
    let geometry = ctx.part().geometry;
    let offsets = geometry.offsets(items)?;
    let range = range_bytes(ctx);
    Ok(Grouped::of(
        &offsets,
        geometry.hashes as usize,
        geometry.bits,
        range,
    ))
}

/// The ranges' size (`Builder::merge_chunk_bytes`), at most a generation's.
fn range_bytes<C: Conn>(ctx: Ctx<'_, C, Window>) -> u64 {
    ctx.exec().options().merge_chunk()
}

/// Ranges in flight at once: [`RANGES_IN_FLIGHT_BYTES`](dense::RANGES_IN_FLIGHT_BYTES) of them.
fn in_flight<C: Conn>(ctx: Ctx<'_, C, Window>) -> usize {
    (dense::RANGES_IN_FLIGHT_BYTES / range_bytes(ctx)).max(1) as usize
}

/// The epoch of a `{"at", EPOCH}` reply.
fn epoch_of<C: Conn>(ctx: Ctx<'_, C, Window>, reply: Value) -> Result<i64> {
    match reply {
        Value::Array(at) => match at.as_slice() {
            [Value::BulkString(what), Value::Int(epoch)] if what == b"at" => Ok(*epoch),
            other => Err(Error::UnexpectedReply(format!(
                "{other:?} for an epoch of {}",
                ctx.key()
            ))),
        },
        other => Err(Error::UnexpectedReply(format!("{other:?} for an epoch"))),
    }
}

/// The first step of an add by ranges: the current generation made (with its expiry, listed
/// in the ledger), and its epoch. Retried.
async fn make<C: Conn>(ctx: Ctx<'_, C, Window>) -> Result<i64> {
    let run = Run {
        script: &WINDOW_MAKE,
        read_only: false,
        store: true,
        flags: false,
        step: None,
    };
    ctx.retried(|| async { epoch_of(ctx, call(ctx, run, &[]).await?) })
        .await
}

/// One range of the batch ORed into the generation of `epoch` (recorded under `step` and the
/// range's command index), retried; [`Merged::Moved`] when the epoch has passed.
async fn merge_range<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    (epoch, step): (i64, Option<(&Step, usize)>),
    merge: RangeMerge,
    bitmap: Vec<u8>,
) -> Result<Merged> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let target = part.generation(epoch);
    let reply = ctx
        .retried(|| async {
            let mut keys = vec![
                target.as_str(),
                part.scratch.as_str(),
                part.scratch_or.as_str(),
            ];
            let rings = step.map(|(step, _)| step.rings(&ring_key(part)));
            keys.extend(rings.iter().flatten().map(String::as_str));
            let once = step.map(|(step, index)| {
                // A generation's TTL is not the filter's: "0".
                let [id, at, retry, _, answer] = step.args(&ring_key(part), index);
                [id, at, retry, "0".to_owned(), answer]
            });
            let mut args: Vec<&dyn Arg> = vec![
                &merge.first_byte,
                &bitmap,
                &epoch,
                &window.window_ms,
                &window.generations,
            ];
            if let Some(once) = &once {
                args.extend(once.iter().map(|arg| arg as &dyn Arg));
            }
            let script = match step {
                Some(_) => &WINDOW_MERGE_RANGE_ONCE,
                None => &WINDOW_MERGE_RANGE,
            };
            exec.script(&target, script, &keys, &args).await
        })
        .await?;
    match classify(reply)? {
        Reply::Done(Value::BulkString(old)) => {
            if let Some((step, index)) = step {
                step.forget(exec, &ring_key(part), index).await;
            }
            Ok(Merged::Done(merge, old))
        }
        // An empty range of a generation shorter than it: no bytes from before.
        Reply::Done(Value::Nil) => Ok(Merged::Done(merge, Vec::new())),
        // A range that set no new bit (lua/merge_range.lua): every bit of its bitmap was set
        // before, as these bytes say; nothing written, nothing recorded.
        Reply::Done(Value::Int(0)) => Ok(Merged::Done(merge, bitmap)),
        Reply::Epoch(now) => {
            if let Some((step, index)) = step {
                step.unsent(index);
            }
            window.server.learn(now);
            Ok(Merged::Moved)
        }
        Reply::Lost(key) => Err(scripts::lost(ctx.key(), key)),
        Reply::Done(other) => Err(Error::UnexpectedReply(format!(
            "{other:?} from an add by ranges"
        ))),
        Reply::Params(stored) => Err(window.mismatch(ctx.key(), stored)),
    }
}

/// The key the records of the part's ring slots are named beside (as the other window steps').
fn ring_key(part: &Part) -> String {
    format!("{}:", part.prefix)
}

/// For each item of `grouped`, whether the generation `key` holds all its bits: the ranges
/// the batch touches read (`GETRANGE`, several in flight). A generation the batch wrote into
/// under an earlier pin (`earlier`) answers, for the ranges it wrote, from their bytes from
/// before.
async fn present_in<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    grouped: &Grouped,
    key: &str,
    earlier: Option<&Pinned>,
) -> Result<Vec<bool>> {
    let exec = ctx.exec();
    let read = |r: usize| async move {
        let Some((first, last)) = grouped.span(r) else {
            return Ok(None);
        };
        if earlier.is_some_and(|p| p.done[r]) {
            return Ok(None);
        }
        let mut cmd = redis::cmd("GETRANGE");
        cmd.arg(key).arg(first).arg(last);
        let bytes: Vec<u8> = ctx.retried(|| exec.query(key, &cmd)).await?;
        Ok::<_, Error>(Some((r, first, bytes)))
    };
    let mut reads = futures_util::stream::iter(0..grouped.ranges())
        .map(read)
        .buffered(in_flight(ctx));
    let mut present = vec![true; grouped.items()];
    while let Some(read) = reads.next().await {
        if let Some((r, first, bytes)) = read? {
            grouped.mark_absent(r, first, &bytes, &mut present);
        }
    }
    if let Some(earlier) = earlier {
        for (present, not_in) in present.iter_mut().zip(&earlier.not_in) {
            *present &= !not_in;
        }
    }
    Ok(present)
}
