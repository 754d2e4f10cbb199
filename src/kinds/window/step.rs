//! One part's batch of adds or checks: the dense path when it pays, else the per-item scripts
//! in commands of a bounded size, a few in flight at once, in order.
//!
//! Retries: each command (or dense step) is retried by itself; a write whose replicas are
//! awaited is retried whole with its `WAIT` (`WAIT` confirms the writes of its own connection,
//! so after a reconnect a `WAIT` alone would confirm nothing).

use super::scripts::{self, call, Run, WINDOW_ADD, WINDOW_ADD_ONCE, WINDOW_EXISTS};
use super::{dense, newest, ranges, Window};
use crate::bitfield::{self, MAX_OFFSETS_PER_COMMAND};
use crate::core::{Conn, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::exec::{self, Cap};
use crate::io::once::Step;
use crate::scripts::Arg;
use futures_util::future::BoxFuture;

/// The items of one part, added (`write`) or checked; after a write, `WAIT` when asked.
pub(super) async fn batch<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
    write: bool,
) -> Result<Vec<bool>> {
    // A write's reply recorded across retries ([`once`](crate::io::once)).
    let step = write.then(|| ctx.step()).flatten();
    let step = step.as_ref();
    if !write || ctx.exec().options().replicas.is_none() {
        let answers = attempt(ctx, items, (write, step), false).await;
        if let Some(step) = step {
            step.settle(ctx.exec(), &answers).await;
        }
        return answers;
    }
    let prefix = &ctx.part().prefix;
    let answers = ctx
        .written(prefix, Engine::Scripts, || {
            attempt(ctx, items, (write, step), true)
        })
        .await;
    if let Some(step) = step {
        step.settle(ctx.exec(), &answers).await;
    }
    answers
}

/// The part's items by the dense path, or in commands of a bounded size, each retried unless
/// the caller retries the whole.
async fn attempt<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: &[&[u8]],
    (write, step): (bool, Option<&Step>),
    whole: bool,
) -> Result<Vec<bool>> {
    if let Some(answers) = dense::batch(ctx, items, (write, step), whole).await? {
        return Ok(answers);
    }
    // Generations too large to move whole: by ranges (not under a caller that retries the
    // whole with its WAIT: each range is retried by itself).
    if !whole && ranges::pays(ctx, items.len(), write, dense::whole_bytes(write)) {
        let answers = match write {
            true => ranges::add(ctx, items, step).await?,
            false => ranges::check(ctx, items).await?,
        };
        if let Some(answers) = answers {
            return Ok(answers);
        }
    }
    let k = ctx.part().geometry.hashes as usize;
    // Each item may test every generation: a command's work is bounded as a plain filter's
    // is (MAX_OFFSETS_PER_COMMAND bits).
    let per_command = (MAX_OFFSETS_PER_COMMAND / (k * ctx.kind().generations as usize)).max(1);
    if items.len() <= per_command {
        return command(ctx, items, (write, step.map(|s| (s, 0))), whole).await;
    }
    let commands = items.chunks(per_command).enumerate();
    let commands = commands
        .map(|(index, chunk)| command(ctx, chunk, (write, step.map(|s| (s, index))), whole));
    exec::in_order(commands.collect()).await
}

/// One per-item script on some of the part's items: the add's or the check's flags. Boxed,
/// for [`exec::in_order`] (rust-lang/rust#110338).
fn command<'a, C: Conn>(
    ctx: Ctx<'a, C, Window>,
    items: &'a [&'a [u8]],
    (write, step): (bool, Option<(&'a Step, usize)>),
    whole: bool,
) -> BoxFuture<'a, Result<Vec<bool>>> {
    Box::pin(async move {
        let geometry = ctx.part().geometry;
        let k = geometry.hashes as usize;
        let offsets = geometry.offsets(items)?;
        if !write {
            if let Some(found) = newest_first(ctx, &offsets, k, whole).await? {
                return Ok(found);
            }
        }
        script(ctx, items.len(), &offsets, (write, step), whole).await
    })
}

/// A check that reads the newest generation first ([`newest`](super::newest)), when the part's
/// last reads found enough there: the flags, the items not found there checked by the script;
/// `None` when the check goes by the script alone.
async fn newest_first<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    offsets: &[u64],
    k: usize,
    whole: bool,
) -> Result<Option<Vec<bool>>> {
    let (exec, part) = (ctx.exec(), ctx.part());
    if !exec.has(Cap::BitfieldRo) || !part.newest.tries() {
        return Ok(None);
    }
    let items = offsets.len() / k;
    let key = part.generation(ctx.kind().guess());
    let read = bitfield::get(&key, offsets, true);
    let reply = match ctx
        .retried_unless(whole, || exec.query_raw(&key, &read))
        .await
    {
        // A server before Redis 6.2: the script learns it and reads with BITFIELD.
        Err(err) if exec.lacks(Cap::BitfieldRo, ctx.key(), &err) => return Ok(None),
        reply => reply?,
    };
    let mut flags = newest::all_set(&reply, k, items).ok_or_else(|| {
        Error::UnexpectedReply(format!("{reply:?} from BITFIELD_RO of {items} items"))
    })?;
    let missed: Vec<usize> = (0..items).filter(|&i| !flags[i]).collect();
    part.newest.found(items - missed.len(), items);
    if missed.is_empty() {
        return Ok(Some(flags));
    }
    let rest: Vec<u64> = missed
        .iter()
        .flat_map(|&i| offsets[i * k..(i + 1) * k].iter().copied())
        .collect();
    let found = script(ctx, missed.len(), &rest, (false, None), whole).await?;
    for (&i, found) in missed.iter().zip(found) {
        flags[i] = found;
    }
    Ok(Some(flags))
}

/// The per-item script on `items` items whose bit offsets are `offsets` (`k` an item).
async fn script<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    items: usize,
    offsets: &[u64],
    (write, step): (bool, Option<(&Step, usize)>),
    whole: bool,
) -> Result<Vec<bool>> {
    let k = ctx.part().geometry.hashes as usize;
    let step = step.filter(|_| ctx.exec().has(Cap::Exact));
    let run = Run {
        script: match (write, step) {
            (false, _) => &WINDOW_EXISTS,
            (true, None) => &WINDOW_ADD,
            (true, Some(_)) => &WINDOW_ADD_ONCE,
        },
        read_only: !write,
        store: write,
        flags: true,
        step,
    };
    let tail: [&dyn Arg; 2] = [&k, &offsets];
    let once = || async {
        match call(ctx, run, &tail).await {
            // The ACL refuses the recording script's ring: the plain add, from now on.
            Err(err)
                if step.is_some() && ctx.exec().lacks(Cap::Exact, &ctx.part().prefix, &err) =>
            {
                let run = Run {
                    script: &WINDOW_ADD,
                    step: None,
                    ..run
                };
                call(ctx, run, &tail).await
            }
            reply => reply,
        }
    };
    let reply = ctx.retried_unless(whole, once).await?;
    let (flags, verified) = scripts::flags(&reply, items)?;
    if let Some(guard) = ctx.guard().filter(|_| verified) {
        guard.mark_checked();
    }
    Ok(flags)
}
