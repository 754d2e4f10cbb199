//! Adds item by item: the add script (`lua/grow_add.lua`), one atomic step for as many items
//! as one command takes, and the planning of every step (the levels it names, the items it
//! takes), which checks share.

use super::shape::Level;
use super::{params_keys, Growing, Part};
use crate::bitfield::MAX_OFFSETS_PER_COMMAND;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::io::exec::Cap;
use crate::io::once::Step;
use crate::scripts::{lua, once_lua, script, Arg};
use redis::Value;
use std::sync::atomic::Ordering;

script! {
    /// Adds items: tests every level, sets the newest, makes the next one when it is full.
    GROW_ADD = lua!["acl", "find_sort", "grow_add"];
    /// [`GROW_ADD`], its reply recorded across retries ([`once`](crate::io::once)); quiet: it
    /// only sets bits (its flags follow five other elements).
    GROW_ADD_ONCE = once_lua!(quiet(6, 0) lua!["find_sort", "grow_add"]);
}

/// What the add script answered.
struct Answer {
    levels: u32,
    count: u64,
    verified: bool,
    flags: Vec<bool>,
    full: bool,
}

impl Growing {
    /// The levels a step names: those the part is known to have (at least one), and for a
    /// write as many more as `items` new items could fill, up to the most.
    pub(super) fn levels_to_name(&self, part: &Part, items: usize, write: bool) -> usize {
        let most = self.levels.len();
        let known = (part.known.load(Ordering::Relaxed) as usize).min(most);
        if !write {
            return known.max(1);
        }
        let (mut named, mut room) = match known {
            0 => (1, self.levels[0].capacity),
            n => (
                n,
                self.levels[n - 1]
                    .capacity
                    .saturating_sub(part.newest_count.load(Ordering::Relaxed)),
            ),
        };
        while room < items as u64 && named < most {
            room = room.saturating_add(self.levels[named].capacity);
            named += 1;
        }
        named
    }

    /// The levels to name and the items that fit one command with their offsets (a write's
    /// script takes every bit's, a check one 64-bit read per word).
    pub(super) fn plan(&self, part: &Part, items: usize, write: bool) -> (usize, usize) {
        let width = |named: usize| -> usize {
            self.levels[..named]
                .iter()
                .map(|l| match write {
                    true => l.hashes() as usize,
                    false => l.per_item as usize,
                })
                .sum()
        };
        let named = self.levels_to_name(part, items, write);
        let take = (MAX_OFFSETS_PER_COMMAND / width(named)).clamp(1, items);
        // Fewer items may need fewer levels (and then fit more items a command).
        let fewer = self.levels_to_name(part, take, write);
        (
            fewer,
            (MAX_OFFSETS_PER_COMMAND / width(fewer)).clamp(1, take),
        )
    }

    /// Reads the add script's reply for the filter `key`.
    fn answer(&self, key: &str, reply: Value) -> Result<Answer> {
        let unexpected = |reply: &Value| {
            Error::UnexpectedReply(format!("{reply:?} from a growing filter's script"))
        };
        if let Some(refusal) = self.refused(key, &reply) {
            return Err(refusal);
        }
        let Value::Array(values) = &reply else {
            return Err(unexpected(&reply));
        };
        let int = |i: usize| match values.get(i) {
            Some(Value::Int(n)) if *n >= 0 => Some(*n as u64),
            _ => None,
        };
        let (head, levels, count, verified, full) = (5, int(0), int(1), int(2), int(4));
        let (Some(levels), Some(count), Some(verified), Some(full)) =
            (levels, count, verified, full)
        else {
            return Err(unexpected(&reply));
        };
        let flags = values[head.min(values.len())..]
            .iter()
            .map(|v| match v {
                Value::Int(flag) => Some(*flag == 1),
                _ => None,
            })
            .collect::<Option<Vec<bool>>>()
            .ok_or_else(|| unexpected(&reply))?;
        Ok(Answer {
            levels: levels as u32,
            count,
            verified: verified == 1,
            flags,
            full: full == 1,
        })
    }
}

/// One script: as many of `items` as one command takes (at most `MAX_OFFSETS_PER_COMMAND`
/// bits), retried; their answers, at least one item's.
pub(super) async fn step<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    items: &[ItemHash],
) -> Result<Vec<bool>> {
    // Each command's reply recorded across retries (a command that names too few levels
    // writes nothing, and the next, naming more, is another command of the step).
    let once = ctx.step();
    let answers = commands(ctx, items, once.as_ref()).await;
    if let Some(step) = &once {
        step.settle(ctx.exec(), &answers).await;
    }
    answers
}

/// The step's commands (see [`step`]), each retried.
async fn commands<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    items: &[ItemHash],
    once: Option<&Step>,
) -> Result<Vec<bool>> {
    let (kind, part) = (ctx.kind(), ctx.part());
    let mut index = 0;
    loop {
        let once = once.map(|step| (step, index));
        index += 1;
        let (named, take) = kind.plan(part, items.len(), true);
        let levels = &kind.levels[..named];
        let mut offsets = Vec::new();
        for hash in &items[..take] {
            for level in levels {
                level.push_offsets(hash, &mut offsets);
            }
        }
        let answer = ctx.retried(|| script(ctx, levels, &offsets, once)).await?;
        part.known.store(answer.levels, Ordering::Relaxed);
        part.newest_count.store(answer.count, Ordering::Relaxed);
        if answer.verified {
            if let Some(guard) = ctx.guard() {
                guard.mark_checked();
            }
        }
        if answer.full {
            return Err(kind.full(ctx.key(), answer.flags.len()));
        }
        if !answer.flags.is_empty() {
            return Ok(answer.flags);
        }
        // The part has more levels than named: name them.
    }
}

/// Runs the add script once (again by `BITFIELD` when the server turns out to lack
/// `BITFIELD_RO`).
async fn script<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    levels: &[Level],
    offsets: &[u64],
    once: Option<(&Step, usize)>,
) -> Result<Answer> {
    let (exec, kind, part) = (ctx.exec(), ctx.kind(), ctx.part());
    let once = once.filter(|_| exec.has(Cap::Exact));
    let rings = once.map(|(step, _)| step.rings(&part.counts));
    let mut keys = vec![part.counts.as_str()];
    keys.extend(part.level_keys[..levels.len()].iter().map(String::as_str));
    keys.extend(params_keys(ctx.guard()).into_iter().flatten());
    keys.extend(rings.iter().flatten().map(String::as_str));
    let hashes: Vec<u32> = levels.iter().map(Level::hashes).collect();
    let capacities: Vec<u64> = levels.iter().map(|l| l.capacity).collect();
    loop {
        let read_only = exec.has(Cap::BitfieldRo);
        let read = match read_only {
            true => "bitfield_ro",
            false => "bitfield",
        };
        let recorded = once.map(|(step, index)| step.args(&part.counts, index));
        let (named, most) = (levels.len(), kind.levels.len());
        let mut args: Vec<&dyn Arg> = vec![
            &kind.fingerprint,
            &read,
            &named,
            &most,
            &hashes,
            &capacities,
            &offsets,
        ];
        args.extend(recorded.iter().flatten().map(|arg| arg as &dyn Arg));
        let lua = match recorded {
            Some(_) => &GROW_ADD_ONCE,
            None => &GROW_ADD,
        };
        let reply = exec.script(&part.counts, lua, &keys, &args).await;
        match reply {
            Err(err) if read_only && exec.lacks(Cap::BitfieldRo, ctx.key(), &err) => {
                if let Some((step, index)) = once {
                    step.unsent(index);
                }
            }
            // The ACL refuses the recording script's ring: the plain add, from now on.
            Err(err) if once.is_some() && exec.lacks(Cap::Exact, &part.counts, &err) => {
                return Box::pin(script(ctx, levels, offsets, None)).await;
            }
            reply => return kind.answer(ctx.key(), reply?),
        }
    }
}
