//! Checks: by the items' words in every level (`BITFIELD_RO`, no script), or, for a batch
//! large enough, by the levels read whole; and the read-only check of a filter of one key's
//! stored parameters that comes along with them until this client has seen them stored.

use super::{params_keys, Growing, Part};
use crate::core::{Conn, Ctx};
use crate::dense;
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::io::exec::Cap;
use crate::io::tx::{Replies, Slot, Tx};
use redis::Value;
use std::sync::atomic::Ordering;

/// A pipeline's check of a filter of one key's stored parameters.
pub(super) struct ParamsCheck {
    stored: Slot<Option<String>>,
    /// What the bare name holds (`TYPE`).
    bare: Slot<String>,
}

impl ParamsCheck {
    /// The parameters' `GET` and the bare key's `TYPE`, added to a pipeline of reads, for a
    /// filter of one key (`ctx.guard()`); `always`: even when this client has seen them.
    pub(super) fn add<C>(ctx: &Ctx<'_, C, Growing>, tx: &mut Tx, always: bool) -> Option<Self> {
        let guard = ctx.guard().filter(|g| always || !g.is_checked())?;
        let [params, bare] = params_keys(Some(guard))?;
        Some(ParamsCheck {
            stored: tx.add(redis::cmd("GET").arg(params).to_owned()),
            bare: tx.add(redis::cmd("TYPE").arg(bare).to_owned()),
        })
    }

    /// The answer: a mismatch when other parameters are stored, or none and the bare key holds
    /// something; this client's stored marks them seen.
    pub(super) fn take<C>(
        check: Option<Self>,
        ctx: &Ctx<'_, C, Growing>,
        replies: &mut Replies,
    ) -> Result<()> {
        let Some(check) = check else {
            return Ok(());
        };
        let kind = ctx.kind();
        match replies.take(check.stored)? {
            Some(stored) if stored == kind.fingerprint => {
                if let Some(guard) = ctx.guard() {
                    guard.mark_checked();
                }
                Ok(())
            }
            Some(stored) => Err(kind.mismatch(ctx.key(), Some(stored))),
            None => match replies.take(check.bare)?.as_str() {
                "none" => Ok(()),
                "string" => Err(kind.mismatch(ctx.key(), None)),
                // Its levels are kept beside it: the bare key holds nothing (or, refused
                // above, another kind's bits).
                found => Err(Error::WrongType {
                    key: ctx.key().to_owned(),
                    found: found.to_owned(),
                    expected: "none".to_owned(),
                    source: redis::RedisError::from(std::io::Error::other(format!(
                        "{} holds a {found}",
                        ctx.key()
                    ))),
                }),
            },
        }
    }
}

impl Growing {
    /// The reads of the segments that hold the first `levels` levels, whole, added to `tx`.
    pub(super) fn read_segments(
        &self,
        part: &Part,
        tx: &mut Tx,
        levels: usize,
    ) -> Vec<dense::Whole> {
        (0..self.segments_of(levels))
            .map(|s| dense::read_whole(tx, &part.segment_keys[s], self.segment_bits(s, levels)))
            .collect()
    }
}

/// Bytes of the levels read whole that one word an item reads (`GET i64` in `BITFIELD_RO`) is
/// worth. Checks of 1,000,000 items of two words against a level of 26.5 MB (`--capacity
/// 10000000 --fpr 0.001`): read word by word, about 0.35-0.5 µs of server time a word
/// (`INFO commandstats`: 131 `BITFIELD_RO`s of 5.7 ms) and 1 µs of wall time an item; read
/// whole, about 46 ms a batch, whatever its size: break-even near 290 bytes a word. Priced at
/// 8 bytes a bit (40 a word of five bits), the CLI's batches of 100,000 read such a level word
/// by word, 1.5x slower, and batches of 20,000 to 50,000 into levels of 5.3 and 7.9 MB 1.6-3x
/// slower (`scripts/growing_checks.sh`, BENCHMARKS.md "Growing checks read whole").
const READ_BYTES_PER_WORD: u64 = 256;

/// Whether a check of `items` items is cheaper by reading the part's known levels whole (at
/// most `dense::MAX_READ_BYTES` together) than by sending their words' offsets.
pub(super) fn whole_pays<C>(ctx: Ctx<'_, C, Growing>, items: usize) -> bool {
    let kind = ctx.kind();
    let known = kind.known(ctx.part());
    let bytes = kind.bytes_of(known);
    let words: u64 = kind.levels[..known]
        .iter()
        .map(|l| u64::from(l.per_item))
        .sum();
    bytes <= dense::MAX_READ_BYTES
        && dense::outweighs(items as u64 * words, READ_BYTES_PER_WORD, bytes)
}

/// The dense check: the part's levels read whole (retried), every item tested here.
pub(super) async fn whole<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    hashes: &[ItemHash],
) -> Result<Vec<bool>> {
    ctx.retried(|| async {
        let (levels, segments) = levels(ctx).await?;
        Ok(ctx.kind().test_levels(levels, &segments, hashes))
    })
    .await
}

/// A part's number of levels (`HLEN`) and its segments, each read whole (`GETRANGE` in
/// 4 MiB pieces), in one round trip; two when the part has more levels than known. One
/// attempt.
pub(super) async fn levels<C: Conn>(ctx: Ctx<'_, C, Growing>) -> Result<(usize, Vec<Vec<u8>>)> {
    let (kind, part) = (ctx.kind(), ctx.part());
    loop {
        let known = kind.known(part);
        let mut tx = Tx::plain();
        let check = ParamsCheck::add(&ctx, &mut tx, false);
        let count: Slot<usize> = tx.add(redis::cmd("HLEN").arg(&part.counts).to_owned());
        let chunks = kind.read_segments(part, &mut tx, known);
        let mut replies = ctx.exec().run(&part.counts, &tx).await?;
        ParamsCheck::take(check, &ctx, &mut replies)?;
        let levels = replies.take(count)?;
        if levels > known {
            part.known.store(levels as u32, Ordering::Relaxed);
            continue;
        }
        let mut segments = Vec::with_capacity(chunks.len());
        for segment in chunks {
            segments.push(segment.take(&mut replies)?);
        }
        // A segment that holds a level is never empty.
        confirm(&ctx, levels, |s| {
            segments.get(s).is_some_and(|b| !b.is_empty())
        })
        .await?;
        return Ok((levels, segments));
    }
}

/// A check of as many of `items` as one round trip takes (at most `MAX_OFFSETS_PER_COMMAND`
/// reads), without a script: `HLEN` of the counts and one `BITFIELD_RO` per segment known
/// (one in all for a filter under 4 MiB), reading each item's words in every level with
/// `GET i64`, in one pipeline (read-only commands: replicas may serve them). The stored
/// parameters come along until they have been seen. Again with more levels when an item was
/// found nowhere and the part has more than known.
pub(super) async fn step<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    items: &[ItemHash],
) -> Result<Vec<bool>> {
    loop {
        let (named, take) = ctx.kind().plan(ctx.part(), items.len(), false);
        let found = ctx.retried(|| words(ctx, named, &items[..take])).await?;
        if let Some(found) = found {
            return Ok(found);
        }
    }
}

/// One pipeline of [`step`]: `None` when it must go again (more levels than named, or no
/// `BITFIELD_RO`).
async fn words<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    named: usize,
    items: &[ItemHash],
) -> Result<Option<Vec<bool>>> {
    let (exec, kind, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let read_only = exec.has(Cap::BitfieldRo);
    let mut tx = Tx::plain();
    let check = ParamsCheck::add(&ctx, &mut tx, false);
    let count: Slot<u32> = tx.add(redis::cmd("HLEN").arg(&part.counts).to_owned());
    // Per segment: its read, and the masks its words must match, in order.
    let mut reads = Vec::new();
    for s in 0..kind.segments_of(named) {
        let levels = || kind.levels[..named].iter().filter(|l| l.segment == s);
        let mut cmd = redis::cmd(match read_only {
            true => "BITFIELD_RO",
            false => "BITFIELD",
        });
        cmd.arg(&part.segment_keys[s]);
        let mut masks = Vec::new();
        for hash in items {
            for level in levels() {
                level.for_each_word(hash, |offset, mask| {
                    cmd.arg("GET").arg("i64").arg(offset);
                    masks.push(mask);
                });
            }
        }
        let widths: Vec<usize> = levels().map(|l| l.per_item as usize).collect();
        reads.push((tx.add(cmd), masks, widths));
    }
    let mut replies = match exec.run(&part.counts, &tx).await {
        Err(err) if read_only && exec.lacks(Cap::BitfieldRo, ctx.key(), &err) => return Ok(None),
        replies => replies?,
    };
    ParamsCheck::take(check, &ctx, &mut replies)?;
    let count = replies.take(count)?;
    let mut present = vec![false; items.len()];
    // Per segment read: whether a word read was not zero, which proves it exists.
    let mut seen = Vec::with_capacity(reads.len());
    for (read, masks, widths) in reads {
        let reply: Value = replies.take(read)?;
        let words = match &reply {
            Value::Array(words) if words.len() == masks.len() => words,
            _ => {
                return Err(Error::UnexpectedReply(format!(
                    "{reply:?} for {} words",
                    masks.len()
                )))
            }
        };
        seen.push(words.iter().any(|w| !matches!(w, Value::Int(0))));
        let mut at = 0;
        for found in present.iter_mut() {
            for &width in &widths {
                let level = (at..at + width).all(|i| match words[i] {
                    Value::Int(word) => (word as u64) & masks[i] == masks[i],
                    _ => false,
                });
                *found |= level;
                at += width;
            }
        }
    }
    part.known.store(count, Ordering::Relaxed);
    // A level past those read matters only to an item found nowhere.
    if count as usize > named && present.contains(&false) {
        return Ok(None);
    }
    if present.contains(&false) {
        confirm(&ctx, count as usize, |s| {
            seen.get(s).copied().unwrap_or(false)
        })
        .await?;
    }
    Ok(Some(present))
}

/// Lost levels are an error, not "absent" (SPEC.md §3): a level is made with its first item,
/// in its segment, in the step that counts it (lua/grow_add.lua, grow_merge.lua), so every
/// segment of the `levels` levels the counts name exists, and the parameters of a filter of one
/// key are stored with its first level. After a read that answered "absent": the segments that
/// read as nothing but zeros (`seen` says which did not: a word or byte not zero proves its
/// segment is there, so a filter in use seldom asks) are asked whether they exist, and a filter
/// of one key without levels whether its parameters are stored (its counts are gone).
/// [`Error::Lost`] names the key that is gone.
async fn confirm<C: Conn>(
    ctx: &Ctx<'_, C, Growing>,
    levels: usize,
    seen: impl Fn(usize) -> bool,
) -> Result<()> {
    let (kind, part, exec) = (ctx.kind(), ctx.part(), ctx.exec());
    let lost = |key: &str| Error::Lost {
        filter: ctx.key().to_owned(),
        key: key.to_owned(),
    };
    let needed = match levels {
        0 => 0,
        levels => kind.segments_of(levels),
    };
    let unseen: Vec<&String> = (0..needed)
        .filter(|&s| !seen(s))
        .map(|s| &part.segment_keys[s])
        .collect();
    if !unseen.is_empty() {
        let mut tx = Tx::plain();
        let asked: Vec<Slot<bool>> = unseen
            .iter()
            .map(|key| tx.add(redis::cmd("EXISTS").arg(key.as_str()).to_owned()))
            .collect();
        let mut replies = exec.run(&part.counts, &tx).await?;
        for (key, exists) in unseen.into_iter().zip(asked) {
            if !replies.take(exists)? {
                return Err(lost(key));
            }
        }
    }
    if let (0, Some(guard)) = (levels, ctx.guard()) {
        let params = guard.key();
        let stored: bool = exec.query(params, redis::cmd("EXISTS").arg(params)).await?;
        if stored {
            return Err(lost(&part.counts));
        }
    }
    Ok(())
}
