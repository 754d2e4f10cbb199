//! A window filter's near cache: each part's live generations (and the next, which a client
//! ahead may have begun), with the server's clock as it was read, so that the copy rolls its
//! generations over by itself: at every answer, the live generations are those of the server's
//! time now (its time at the read plus the time elapsed here since), as the scripts compute
//! them. The estimate lags the server by at most the read's round trip, so the copy may find
//! an item that long past its window, never forget one early.

use super::part::Part;
use super::Window;
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::epochs::{epoch_of, server_ms};
use crate::error::Result;
use crate::hash::ItemHash;
use crate::layout::Layout;
use crate::near;
use std::time::Instant;

/// The copy: per part, its generations by epoch.
#[derive(Debug)]
pub struct Copy {
    parts: Vec<Vec<(i64, Vec<u8>)>>,
    /// The server's time (ms) when it was read, and when that was here.
    server_ms: u64,
    heard: Instant,
}

impl near::Copy for Copy {
    fn bytes(&self) -> u64 {
        self.parts
            .iter()
            .flatten()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum()
    }
}

/// The most bytes a copy takes: up to G + 1 generations per part.
pub(super) fn bytes(window: &Window, parts: &Shards<Part>) -> u64 {
    let per_part = parts.parts()[0].geometry;
    per_part.max_bytes() * u64::from(window.generations + 1) * u64::from(parts.count())
}

/// Whether `item` is in a generation of the copy that is live now.
pub(super) fn contains(window: &Window, parts: &Shards<Part>, copy: &Copy, item: &[u8]) -> bool {
    let i = parts.part_of(item);
    let now = copy
        .server_ms
        .saturating_add(u64::try_from(copy.heard.elapsed().as_millis()).unwrap_or(0));
    let epoch = epoch_of(now, window.window_ms, window.generations);
    let live = epoch - i64::from(window.generations) + 1..=epoch;
    let hash = ItemHash::of(item, Layout::Native);
    let geometry = &parts.parts()[i].geometry;
    copy.parts[i]
        .iter()
        .filter(|(e, _)| live.contains(e))
        .any(|(_, bytes)| geometry.all(&hash, |offset| crate::dense::test(bytes, offset)))
}

/// A live generation the part's ledger lists (`lua/window_args.lua`) with more than a second
/// left, that the copy did not read (`read`: the epochs it read bytes of), and that is gone:
/// [`Error::Lost`](crate::Error::Lost) naming it, as the scripts' checks fail.
async fn lost<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    part: &Part,
    (epoch, now): (i64, u64),
    read: &[i64],
) -> Result<()> {
    let exec = ctx.exec();
    let g = i64::from(ctx.kind().generations);
    let ledger: Option<String> = exec
        .query(&part.made, redis::cmd("GET").arg(&part.made))
        .await?;
    let ledger = ledger.unwrap_or_default();
    let listed = ledger.split(',').filter_map(|entry| {
        let (e, at) = entry.split_once(':')?;
        Some((e.parse::<i64>().ok()?, at.parse::<u64>().ok()?))
    });
    for (e, at) in listed {
        if e > epoch || e <= epoch - g || at.saturating_sub(now) <= 1000 || read.contains(&e) {
            continue;
        }
        let key = part.generation(e);
        if !crate::core::lost::exists(exec, &key).await? {
            return Err(super::scripts::lost(ctx.key(), key));
        }
    }
    Ok(())
}

/// Reads every part's generations from the oldest live one to the next, after the
/// parameters check. One attempt: the caller retries.
pub(super) async fn read<C: Conn>(ctx: Ctx<'_, C, Window>) -> Result<Copy> {
    let (exec, window) = (ctx.exec(), ctx.kind());
    if !ctx.inline() {
        ctx.params().ensure(exec, false).await?;
    }
    let g = i64::from(window.generations);
    let mut copy = Copy {
        parts: Vec::with_capacity(ctx.parts.parts().len()),
        server_ms: 0,
        heard: Instant::now(),
    };
    for (index, part) in ctx.parts.parts().iter().enumerate() {
        if ctx.inline() {
            window.check_stored(exec, ctx.params(), ctx.key()).await?;
        }
        let time = exec.query(&part.anchor(), &redis::cmd("TIME")).await?;
        let heard = Instant::now();
        let server_ms = server_ms(time);
        if index == 0 {
            copy.server_ms = server_ms;
            copy.heard = heard;
        }
        let epoch = epoch_of(server_ms, window.window_ms, window.generations);
        let mut generations = Vec::new();
        for e in epoch - g + 1..=epoch + 1 {
            let key = part.generation(e);
            let bytes = near::read_key(exec, &key, part.geometry.max_bytes()).await?;
            if !bytes.is_empty() {
                generations.push((e, bytes));
            }
        }
        let read: Vec<i64> = generations.iter().map(|(e, _)| *e).collect();
        lost(ctx, part, (epoch, server_ms), &read).await?;
        copy.parts.push(generations);
    }
    if copy.parts.iter().all(Vec::is_empty) && !ctx.params().is_checked() {
        // No live generation and no parameters seen stored: an empty window, unless the
        // server is a replica that has not synced and holds nothing yet (SPEC.md §3,
        // "Replicas"; asked by the first part's ledger, which exists while a generation is
        // live).
        let made = &ctx.parts.parts()[0].made;
        crate::core::lost::synced(exec, ctx.key(), made).await?;
    }
    Ok(copy)
}
