//! A counting filter's batch in one part: a check that outweighs the counters reads them whole;
//! a write that outweighs them swaps them (`swap`); the rest goes in commands of at most
//! `MAX_OFFSETS_PER_COMMAND` counters, a few in flight, in order, a write and its `WAIT`
//! retried together.

use super::swap::{self, read_whole};
use super::{Counters, Counting};
use crate::bitfield::{self, Fold, MAX_OFFSETS_PER_COMMAND};
use crate::core::{Conn, Ctx, Op};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::exec::{self, Cap, Exec};
use crate::io::guard::Guard;
use crate::io::once::GuardStep;
use crate::io::once::{self, Step};
use crate::scripts::Arg;
use futures_util::future::BoxFuture;
use redis::Value;
use std::sync::atomic::AtomicBool;

script! {
    /// Removes items: nothing unless every counter is above zero; saturated counters stay.
    COUNTING_REMOVE = lua!["counting_remove"];
    /// Adds items only if absent (`CF.ADDNX`).
    COUNTING_ADD_ABSENT = lua!["counting_add_absent"];
}
use crate::scripts::{lua, script};

/// What a refused dense swap falls back to.
const SWAP: Cap = Cap::Merge {
    from: "dense swap",
    to: "BITFIELD",
};

/// One part's items.
pub(super) async fn part<C: Conn>(
    ctx: Ctx<'_, C, Counting>,
    items: &[&[u8]],
    op: Op,
) -> Result<Vec<bool>> {
    let part = ctx.part();
    let exec = ctx.exec();
    let k = part.geometry.hashes as usize;
    // A check that outweighs the counters reads them whole (as the plain filter's dense check
    // reads its bits) and tests them here.
    let bytes = part.max_bytes();
    if op == Op::Exists && swap::read_worth_it(bytes, items.len(), part.geometry.hashes) {
        let cells = part.geometry.offsets(items)?;
        return ctx
            .retried(|| async {
                let counters = read_whole(exec, part).await?;
                ctx.saw(counters.iter().any(|&byte| byte != 0));
                Ok(cells
                    .chunks(k)
                    .map(|item| item.iter().all(|&cell| swap::counter(&counters, cell) > 0))
                    .collect())
            })
            .await;
    }
    // A write whose answers are recorded across retries: each command records them
    // ([`once`]), and so does each swap (`swap::run`).
    let step = match op {
        Op::Exists => None,
        _ => exec.step(),
    };
    // A write that outweighs the counters reads them, changes them here and swaps them back
    // whole, unless other writers keep changing them meanwhile.
    if op != Op::Exists
        && exec.has(SWAP)
        && swap::worth_it(
            bytes,
            items.len(),
            part.geometry.hashes,
            swap::MAX_SWAP_BYTES,
        )
    {
        let cells = part.geometry.offsets(items)?;
        match swap::run(ctx, &cells, op).await {
            Ok(Some(answers)) => return Ok(answers),
            Ok(None) => {
                let cause = "other writers changed the counters during every swap";
                exec.fell_back(&part.key, ("dense swap", "BITFIELD", cause), false);
            }
            // A user granted the counters but not the scratch keys or the swap's commands: the
            // same batch by BITFIELD.
            Err(err) if exec.lacks(SWAP, &part.key, &err) => {}
            Err(err) => return Err(err),
        }
    }
    let per_command = (MAX_OFFSETS_PER_COMMAND / k).max(1);
    let on = On {
        exec,
        params: ctx.params(),
        guard: ctx.guard(),
        shard_of: ctx.shard_of(),
        part,
        seen: ctx.seen,
        step: step.as_ref(),
    };
    let attempt = || async move {
        if items.len() <= per_command {
            return on.command(items, op, 0).await;
        }
        let commands = items
            .chunks(per_command)
            .enumerate()
            .map(|(index, chunk)| on.boxed(chunk, op, index));
        exec::in_order(commands.collect()).await
    };
    match op {
        Op::Exists => ctx.retried(attempt).await,
        _ => {
            let _beside = part.turns.beside().await;
            let answers = ctx.written(&part.key, Engine::Fast, attempt).await;
            if let Some(step) = &step {
                step.settle(exec, &answers).await;
            }
            answers
        }
    }
}

/// Where a part's commands go: the executor, the filter's parameters (and its guard when it
/// lives in this part's slot group) and the part.
struct On<'a, C> {
    exec: &'a Exec<C>,
    params: &'a Guard,
    guard: Option<&'a Guard>,
    /// The filter's guard when this part is a shard that must exist ([`Ctx::shard_of`]).
    shard_of: Option<&'a Guard>,
    part: &'a Counters,
    /// Told when a check reads a counter above zero (the key exists).
    seen: Option<&'a AtomicBool>,
    /// A write's step, when its answers are recorded across retries.
    step: Option<&'a Step>,
}

impl<C> Clone for On<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C> Copy for On<'_, C> {}

impl<'a, C: Conn> On<'a, C> {
    /// [`command`](On::command), boxed (see [`exec::in_order`]).
    fn boxed(
        self,
        items: &'a [&'a [u8]],
        op: Op,
        index: usize,
    ) -> BoxFuture<'a, Result<Vec<bool>>> {
        Box::pin(self.command(items, op, index))
    }

    /// One command: its items' counters incremented (with the guard's step, for a filter of
    /// one key, in the same transaction), read, or changed by a script that checks the
    /// parameters of a filter of one key in the same step.
    async fn command(self, items: &[&[u8]], op: Op, index: usize) -> Result<Vec<bool>> {
        let On {
            exec,
            params,
            guard,
            shard_of,
            part,
            seen,
            step,
        } = self;
        let guard_step = GuardStep::of(guard).shard_of(shard_of);
        if let Some(step) = step.filter(|_| exec.has(Cap::Exact)) {
            match command_once(
                exec,
                (params, guard, guard_step),
                part,
                items,
                op,
                (step, index),
            )
            .await
            {
                Err(err) if exec.lacks(Cap::Exact, &part.key, &err) => {}
                done => return done,
            }
        }
        command(exec, (params, guard, seen), guard_step, part, items, op).await
    }
}

async fn command<C: Conn>(
    exec: &Exec<C>,
    (params, guard, seen): (&Guard, Option<&Guard>, Option<&AtomicBool>),
    guard_step: GuardStep<'_>,
    part: &Counters,
    items: &[&[u8]],
    op: Op,
) -> Result<Vec<bool>> {
    let cells = part.geometry.offsets(items)?;
    let k = part.geometry.hashes as usize;
    let count = items.len();
    let unexpected = |reply: &Value| {
        Error::UnexpectedReply(format!("{reply:?} for {count} items of {k} counters"))
    };
    match op {
        // A filter of one key, or a shard that must exist: the guard, the check that the
        // counters are there (a write never makes a lost filter again) and the increments in
        // one script.
        Op::Add if guard_step.fingerprint() != "" => {
            let bit_offsets: Vec<u64> = cells.iter().map(|cell| cell * 4).collect();
            let on = (part.key.as_str(), guard_step);
            once::bitfield_guarded(exec, on, ("incr", k), &bit_offsets).await
        }
        Op::Add => {
            let incr = bitfield::increment(&part.key, &cells);
            let reply: Value = exec.query(&part.key, &incr).await?;
            bitfield::fold_counters(&reply, k, count, Fold::AnyZero)
                .ok_or_else(|| unexpected(&reply))
        }
        Op::Exists => {
            let read = |read_only| bitfield::get_counters(&part.key, &cells, read_only);
            let reply: Value = match exec.has(Cap::BitfieldRo) {
                true => match exec.query(&part.key, &read(true)).await {
                    Err(err) if exec.lacks(Cap::BitfieldRo, &part.key, &err) => {
                        exec.query(&part.key, &read(false)).await?
                    }
                    reply => reply?,
                },
                false => exec.query(&part.key, &read(false)).await?,
            };
            crate::core::lost::saw(seen, bitfield::any_set(&reply));
            bitfield::fold_counters(&reply, k, count, Fold::AllOne)
                .ok_or_else(|| unexpected(&reply))
        }
        Op::Remove | Op::AddIfAbsent => {
            let mut keys = vec![part.key.as_str()];
            keys.extend(guard.map(Guard::key));
            let script = match op {
                Op::Remove => &COUNTING_REMOVE,
                _ => &COUNTING_ADD_ABSENT,
            };
            let fingerprint = absent_arg(op, params, guard, guard_step);
            let bit_offsets: Vec<u64> = cells.iter().map(|cell| cell * 4).collect();
            let reply = exec
                .script(&part.key, script, &keys, &[&fingerprint, &k, &bit_offsets])
                .await?;
            if let Some(refusal) = params.refused(&reply) {
                return Err(refusal);
            }
            flags(&reply, count).ok_or_else(|| unexpected(&reply))
        }
    }
}

/// One write command recorded under `step` (its command `index`): the increments as a
/// script of `BITFIELD` after the parameters check (when their guard lives here and has not
/// checked them yet), or the remove or add-if-absent script, each applying and recording its
/// reply, or reading back the reply an earlier attempt recorded.
async fn command_once<C: Conn>(
    exec: &Exec<C>,
    (params, guard, guard_step): (&Guard, Option<&Guard>, GuardStep<'_>),
    part: &Counters,
    items: &[&[u8]],
    op: Op,
    (step, index): (&Step, usize),
) -> Result<Vec<bool>> {
    let cells = part.geometry.offsets(items)?;
    let k = part.geometry.hashes as usize;
    let count = items.len();
    let unexpected = |reply: &Value| {
        Error::UnexpectedReply(format!("{reply:?} for {count} items of {k} counters"))
    };
    let bit_offsets: Vec<u64> = cells.iter().map(|cell| cell * 4).collect();
    if op == Op::Add {
        // The guard's step in the same script: one round trip, the write recorded with it.
        let on = (part.key.as_str(), guard_step);
        return once::bitfield(exec, on, ("incr", k), &bit_offsets, (step, index)).await;
    }
    let rings = step.rings(&part.key);
    let [id, epoch, retry, keep, answer] = step.args(&part.key, index);
    let mut keys = vec![part.key.as_str()];
    keys.extend(guard.map(Guard::key));
    keys.extend(rings.iter().map(String::as_str));
    let script = match op {
        Op::Remove => &once::COUNTING_REMOVE,
        _ => &once::COUNTING_ADD_ABSENT,
    };
    let fingerprint = absent_arg(op, params, guard, guard_step);
    let args: [&dyn Arg; 8] = [
        &fingerprint,
        &k,
        &bit_offsets,
        &id,
        &epoch,
        &retry,
        &keep,
        &answer,
    ];
    let reply = exec.script(&part.key, script, &keys, &args).await?;
    if let Some(refusal) = params.refused(&reply) {
        return Err(refusal);
    }
    flags(&reply, count).ok_or_else(|| unexpected(&reply))
}

/// The remove or add-if-absent script's first argument: the client's parameters (compared
/// with the stored ones of a filter of one key); for an add-if-absent into a shard that must
/// exist, "1" (lua/counting_add_absent.lua: a shard gone is lost, never made again).
fn absent_arg<'a>(
    op: Op,
    params: &'a Guard,
    guard: Option<&Guard>,
    step: GuardStep<'_>,
) -> &'a str {
    match (op, guard) {
        (Op::AddIfAbsent, None) if step.shard_must_exist() => "1",
        _ => params.fingerprint(),
    }
}

/// One flag per item from a script's array of 0/1.
fn flags(reply: &Value, items: usize) -> Option<Vec<bool>> {
    let Value::Array(values) = reply else {
        return None;
    };
    if values.len() != items {
        return None;
    }
    values
        .iter()
        .map(|v| match v {
            Value::Int(flag) => Some(*flag == 1),
            _ => None,
        })
        .collect()
}
