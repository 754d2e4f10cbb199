//! A module filter's steps in one part: its parameters checked (stored beside it, or read from
//! `BF.INFO` for a filter another client made), adds by a script around `BF.MADD` that makes
//! the filter with `BF.RESERVE` first (and records its reply across retries), checks by
//! `BF.MEXISTS`, and the checked `clear` and `expire`. A batch goes as commands of at most
//! [`PER_COMMAND`] items, a few in flight, in order; an add and its `WAIT` are retried
//! together.

use super::info;
use super::{Module, FOREIGN, OURS, PER_COMMAND, UNKNOWN};
use crate::core::{lost, Conn, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::exec::{self, Cap};
use crate::io::guard::Guard;
use crate::io::once::Step;
use crate::io::removal::Removal;
use crate::io::tx::{Slot, Tx};
use crate::scripts::{lua, once_lua, script, Arg};
use futures_util::future::BoxFuture;
use redis::Value;
use std::sync::atomic::Ordering;

script! {
    /// Adds items with `BF.MADD`, making the filter with `BF.RESERVE` first.
    MODULE_ADD = lua!["acl", "module_add"];
    /// [`MODULE_ADD`], its reply recorded across retries ([`once`](crate::io::once)); quiet: it
    /// only adds.
    MODULE_ADD_ONCE = once_lua!(quiet(1, 0) lua!["module_add"]);
    /// `clear` and `expire` of one module key, checked.
    MODULE_DROP = lua!["module_drop"];
}

/// The module's commands a module filter uses.
const COMMANDS: [&str; 6] = [
    "BF.RESERVE",
    "BF.ADD",
    "BF.MADD",
    "BF.EXISTS",
    "BF.MEXISTS",
    "BF.INFO",
];

/// One item's answer from the add script: `b'1'` new, `b'0'` seen, `b'F'` refused (full).
type Flag = u8;

/// Adds the items of one part.
pub(super) async fn add<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Vec<bool>> {
    let part = ctx.part();
    let step = ctx.step();
    let on = On {
        ctx,
        step: step.as_ref(),
    };
    let attempt = || async move {
        if items.len() <= PER_COMMAND {
            return on.command(items, 0).await;
        }
        let commands = items
            .chunks(PER_COMMAND)
            .enumerate()
            .map(|(index, chunk)| on.boxed(chunk, index));
        exec::in_order(commands.collect()).await
    };
    let flags = ctx.written(&part.key, Engine::Scripts, attempt).await;
    if let Some(step) = &step {
        step.settle(ctx.exec(), &flags).await;
    }
    let flags = or_missing(ctx, flags).await?;
    if let Some(added) = flags.iter().position(|&flag| flag == b'F') {
        return Err(Error::FilterFull {
            key: ctx.key().to_owned(),
            added: added as u64,
            reason: "the module refused to add to it: a non-scaling filter holding its \
                     capacity, or one that cannot scale further"
                .to_owned(),
        });
    }
    Ok(flags.into_iter().map(|flag| flag == b'1').collect())
}

/// Checks the items of one part (`BF.MEXISTS`; a missing filter holds no items). A batch of
/// one command goes in one round trip with what else it needs: the parameters of a filter of
/// one key not checked yet, and whether the key exists (for an answer of all "absent").
pub(super) async fn exists<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Vec<bool>> {
    let part = ctx.part();
    let exec = ctx.exec();
    let attempt = || async move {
        let unchecked = ctx.guard().is_some() && part.state() == UNKNOWN;
        if items.len() > PER_COMMAND {
            if unchecked {
                probe(ctx).await?;
            }
            let commands = items.chunks(PER_COMMAND).map(|chunk| {
                let command: BoxFuture<'_, Result<Vec<bool>>> = Box::pin(mexists(ctx, chunk));
                command
            });
            return Ok((exec::in_order(commands.collect()).await?, None));
        }
        let mut tx = Tx::plain();
        let stored = unchecked.then(|| {
            let get = redis::cmd("GET").arg(ctx.params().key()).to_owned();
            tx.add::<Option<String>>(get)
        });
        let found: Slot<Vec<i64>> = tx.add(mexists_cmd(&part.key, items));
        let there: Slot<bool> = tx.add(redis::cmd("EXISTS").arg(&part.key).to_owned());
        let mut replies = exec.run(&part.key, &tx).await?;
        let there = replies.take(there)?;
        if let Some(stored) = stored {
            learn(ctx, replies.take(stored)?, there).await?;
        }
        Ok((answers(replies.take(found)?, items.len())?, Some(there)))
    };
    let (answers, there) = or_missing(ctx, ctx.retried(attempt).await).await?;
    if !ctx.inline() {
        // A sharded filter's parts are all made before its parameters are stored, and the core
        // tells a lost one (`Seam::keeps_parts`): a key seen here spares it asking again.
        ctx.saw(there == Some(true));
        return Ok(answers);
    }
    if answers.iter().any(|&found| found) {
        return Ok(answers);
    }
    // Every item absent: from a filter that is gone while its parameters are stored (evicted,
    // deleted by hand) that is lost data, not "absent" (SPEC.md §3). An item found proves the
    // key is there.
    let there = match there {
        Some(there) => there,
        None => ctx.retried(|| lost::exists(exec, &part.key)).await?,
    };
    let names = (ctx.key(), part.key.as_str(), ctx.params().key());
    lost::confirm(exec, names, answers, there).await
}

fn mexists_cmd(key: &str, items: &[&[u8]]) -> redis::Cmd {
    redis::cmd("BF.MEXISTS").arg(key).arg(items).to_owned()
}

async fn mexists<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Vec<bool>> {
    let key = &ctx.part().key;
    let found: Vec<i64> = ctx.exec().query(key, &mexists_cmd(key, items)).await?;
    answers(found, items.len())
}

/// `BF.MEXISTS`'s reply, one per item.
fn answers(found: Vec<i64>, items: usize) -> Result<Vec<bool>> {
    if found.len() != items {
        return Err(Error::UnexpectedReply(format!(
            "{} answers from BF.MEXISTS for {items} items",
            found.len()
        )));
    }
    Ok(found.into_iter().map(|found| found == 1).collect())
}

/// Where a part's add commands go: the call, and the step that records their answers.
struct On<'a, C> {
    ctx: Ctx<'a, C, Module>,
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
    fn boxed(self, items: &'a [&'a [u8]], index: usize) -> BoxFuture<'a, Result<Vec<Flag>>> {
        Box::pin(self.command(items, index))
    }

    /// One `BF.MADD` of `items` (command `index` of the step), by the add script: the
    /// parameters checked, the filter made when it does not exist, the reply recorded when
    /// the step records. A filter another client made is compared with `BF.INFO` first, then
    /// the command goes again.
    async fn command(self, items: &[&[u8]], index: usize) -> Result<Vec<Flag>> {
        let On { ctx, step } = self;
        let (exec, part, kind) = (ctx.exec(), ctx.part(), ctx.kind());
        let records = step.is_some() && exec.has(Cap::Exact);
        if !records && part.state() != UNKNOWN && kind.inserts.load(Ordering::Acquire) {
            if let Some(flags) = insert(ctx, items).await? {
                return Ok(flags);
            }
        }
        let guard = ctx.guard();
        let fingerprint = guard.map_or("", Guard::fingerprint);
        let expansion = kind.growth.map(|g| g.to_string()).unwrap_or_default();
        let mut keys = vec![part.key.as_str()];
        keys.extend(guard.map(Guard::key));
        for _ in 0..2 {
            let foreign = part.compared();
            let args: [&dyn Arg; 6] = [
                &fingerprint,
                &foreign,
                &kind.fpr,
                &kind.per_part,
                &expansion,
                &items,
            ];
            let reply = match step.filter(|_| exec.has(Cap::Exact)) {
                Some(step) => {
                    let rings = step.rings(&part.key);
                    let mut keys = keys.clone();
                    keys.extend(rings.iter().map(String::as_str));
                    let once = step.args(&part.key, index);
                    let mut all: Vec<&dyn Arg> = args.to_vec();
                    all.extend(once.iter().map(|arg| arg as &dyn Arg));
                    match exec.script(&part.key, &MODULE_ADD_ONCE, &keys, &all).await {
                        Err(err) if exec.lacks(Cap::Exact, &part.key, &err) => {
                            let own = keys.len() - rings.len();
                            exec.script(&part.key, &MODULE_ADD, &keys[..own], &args)
                                .await?
                        }
                        reply => reply?,
                    }
                }
                None => exec.script(&part.key, &MODULE_ADD, &keys, &args).await?,
            };
            if let Some(refusal) = ctx.params().refused(&reply) {
                return Err(refusal);
            }
            if is_foreign(&reply) {
                // Made by another client since this one last looked: compared, then again
                // (a first attempt again: this one wrote nothing).
                if let Some(step) = step {
                    step.unsent(index);
                }
                probe(ctx).await?;
                continue;
            }
            if part.state() == UNKNOWN {
                // The key exists now, made by this client (its parameters stored beside a
                // filter of one key) or checked: later adds that need no record go bare.
                part.learn(OURS);
            }
            return flags(&reply, items.len());
        }
        Err(Error::UnexpectedReply(format!(
            "the module filter {:?} was made by another client, and still refused after its \
             parameters were compared",
            part.key
        )))
    }
}

/// One add of `items` into a key known to exist whose answers need no record (exact answers
/// across retries are off, or nothing retries): bare `BF.INSERT KEY NOCREATE ITEMS …`, the
/// server's cost of `BF.MADD` without a script's (a script around it costs the server about
/// 2.3x its CPU per item: BENCHMARKS.md). `None` when the script must go instead: the key is
/// gone (`NOCREATE` refuses to make it with the module's defaults; the script makes it with
/// this client's parameters, or finds it lost), or the server or the ACL refuses
/// `BF.INSERT` (then never asked again).
async fn insert<C: Conn>(ctx: Ctx<'_, C, Module>, items: &[&[u8]]) -> Result<Option<Vec<Flag>>> {
    let (exec, part) = (ctx.exec(), ctx.part());
    let cmd = redis::cmd("BF.INSERT")
        .arg(&part.key)
        .arg("NOCREATE")
        .arg("ITEMS")
        .arg(items)
        .to_owned();
    match exec.query_raw(&part.key, &cmd).await {
        Ok(Value::Array(added)) if added.len() <= items.len() => {
            // The module answers each item until one is refused (the filter is full): that
            // item and every one after it are refused.
            let mut flags: Vec<Flag> = Vec::with_capacity(items.len());
            for value in &added {
                flags.push(match value {
                    Value::Int(1) => b'1',
                    Value::Int(0) => b'0',
                    Value::ServerError(err) if is_full(err) => break,
                    other => {
                        return Err(Error::UnexpectedReply(format!(
                            "{other:?} in BF.INSERT's reply for one item (before it, {} added)",
                            flags.len()
                        )))
                    }
                });
            }
            flags.resize(items.len(), b'F');
            Ok(Some(flags))
        }
        Ok(other) => Err(Error::UnexpectedReply(format!(
            "{other:?} from BF.INSERT of {} items",
            items.len()
        ))),
        Err(Error::Redis(err)) if is_not_found(&err) => {
            part.learn(UNKNOWN);
            Ok(None)
        }
        Err(Error::Redis(err)) if unknown_command(&err) => {
            ctx.kind().inserts.store(false, Ordering::Release);
            Ok(None)
        }
        Err(Error::NoPermission(_)) => {
            ctx.kind().inserts.store(false, Ordering::Release);
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// Whether an item's error in `BF.INSERT`'s reply says the filter is full (RedisBloom: "non
/// scaling filter is full"; valkey-bloom: "non scaling filter is full" too, or "bloom object
/// reached max memory" when it cannot scale further).
fn is_full(err: &redis::ServerError) -> bool {
    let text = err.details().unwrap_or_default().to_ascii_lowercase();
    text.contains("full") || text.contains("max memory") || text.contains("limit")
}

/// Whether `err` is `BF.INSERT … NOCREATE`'s refusal of a key that does not exist
/// (RedisBloom: "ERR not found").
fn is_not_found(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("not found") || text.contains("does not exist")
}

/// Whether the add script found a filter another client made whose parameters this client
/// has not compared.
fn is_foreign(reply: &Value) -> bool {
    matches!(reply, Value::Array(values)
        if matches!(values.first(), Some(Value::BulkString(what)) if what == b"foreign"))
}

/// One flag per item from the add script's reply.
fn flags(reply: &Value, items: usize) -> Result<Vec<Flag>> {
    match reply {
        Value::BulkString(flags)
            if flags.len() == items && flags.iter().all(|f| matches!(f, b'0' | b'1' | b'F')) =>
        {
            Ok(flags.clone())
        }
        _ => Err(Error::UnexpectedReply(format!(
            "{reply:?} from BF.MADD of {items} items"
        ))),
    }
}

/// A filter of one key's parameters, checked once per filter: stored beside it (they must be
/// this client's), or, for a module filter another client made, what `BF.INFO` reports
/// ([`info::agrees`]). Nothing there yet: nothing learned (the first add makes it).
pub(super) async fn probe<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<()> {
    let (part, params) = (ctx.part(), ctx.params());
    let mut tx = Tx::plain();
    let stored: Slot<Option<String>> = tx.add(redis::cmd("GET").arg(params.key()).to_owned());
    let exists: Slot<bool> = tx.add(redis::cmd("EXISTS").arg(&part.key).to_owned());
    let mut replies = ctx.exec().run(&part.key, &tx).await?;
    learn(ctx, replies.take(stored)?, replies.take(exists)?).await
}

/// What the part is, from its `stored` parameters and whether its key `exists`: this
/// client's filter (the parameters must be its own), or another client's whose `BF.INFO`
/// must agree with them, or nothing yet.
async fn learn<C: Conn>(
    ctx: Ctx<'_, C, Module>,
    stored: Option<String>,
    exists: bool,
) -> Result<()> {
    let part = ctx.part();
    match (stored, exists) {
        (Some(stored), _) => {
            ctx.params().compare(Some(stored))?;
            part.learn(OURS);
        }
        (None, true) => {
            let found = info::read(ctx.exec(), &part.key).await?;
            info::agrees(ctx, &found)?;
            part.nonscaling
                .store(found.expansion.is_none(), Ordering::Release);
            part.learn(FOREIGN);
        }
        (None, false) => {}
    }
    Ok(())
}

/// Deletes the part's key (and, for a filter of one key, its parameters) or sets their TTL,
/// checked in the same script: the stored parameters, and that the key is a module filter. A
/// filter of one key that another client made is compared with `BF.INFO` first.
pub(super) async fn drop_part<C: Conn>(ctx: Ctx<'_, C, Module>, how: Removal) -> Result<bool> {
    let done = async {
        ensure_commands(ctx).await?;
        let (part, guard) = (ctx.part(), ctx.guard());
        if guard.is_some() && part.state() != OURS {
            probe(ctx).await?;
        }
        let mut keys = vec![part.key.as_str()];
        keys.extend(guard.map(Guard::key));
        let (op, millis) = how.args();
        let fingerprint = ctx.params().fingerprint();
        let reply = ctx
            .exec()
            .script(
                &part.key,
                &MODULE_DROP,
                &keys,
                &[&op, &millis, &fingerprint],
            )
            .await?;
        if let Some(refusal) = ctx.params().refused(&reply) {
            return Err(refusal);
        }
        match reply {
            Value::Int(existed) => Ok(existed == 1),
            other => Err(Error::UnexpectedReply(format!(
                "{other:?} from clear or expire of a module filter"
            ))),
        }
    };
    or_missing(ctx, done.await).await
}

/// `done`, or, when it failed because the server does not know a `BF.*` command,
/// [`Error::MissingCommands`] naming those it lacks (asked with `COMMAND INFO`).
pub(super) async fn or_missing<C: Conn, T>(ctx: Ctx<'_, C, Module>, done: Result<T>) -> Result<T> {
    match &done {
        Err(Error::Redis(err)) if unknown_command(err) => {}
        _ => return done,
    }
    let key = &ctx.part().key;
    let cmd = redis::cmd("COMMAND").arg("INFO").arg(&COMMANDS).to_owned();
    let known: Result<Vec<Value>> = ctx.exec().query(key, &cmd).await;
    let missing = match known {
        Ok(known) if known.len() == COMMANDS.len() => COMMANDS
            .iter()
            .zip(&known)
            .filter(|(_, info)| matches!(info, Value::Nil))
            .map(|(name, _)| (*name).to_owned())
            .collect(),
        _ => COMMANDS.iter().map(|name| (*name).to_owned()).collect(),
    };
    Err(missing_commands(ctx, missing))
}

/// `Ok` when the server has every `BF.*` command a module filter uses (asked once per filter,
/// with `COMMAND INFO`), else [`Error::MissingCommands`]: for the calls that may send none of
/// them (`info` and `clear` of a filter with no key yet). A user whose ACL refuses `COMMAND`
/// is not asked.
pub(super) async fn ensure_commands<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<()> {
    let kind = ctx.kind();
    if kind.has_commands.load(std::sync::atomic::Ordering::Acquire) {
        return Ok(());
    }
    let key = &ctx.part().key;
    let cmd = redis::cmd("COMMAND").arg("INFO").arg(&COMMANDS).to_owned();
    match ctx.exec().query::<Vec<Value>>(key, &cmd).await {
        Ok(known) if known.iter().any(|info| matches!(info, Value::Nil)) => {
            let missing = COMMANDS
                .iter()
                .zip(&known)
                .filter(|(_, info)| matches!(info, Value::Nil))
                .map(|(name, _)| (*name).to_owned())
                .collect();
            Err(missing_commands(ctx, missing))
        }
        Ok(_) | Err(Error::NoPermission(_)) => {
            kind.has_commands
                .store(true, std::sync::atomic::Ordering::Release);
            Ok(())
        }
        Err(err) => Err(err),
    }
}

/// [`Error::MissingCommands`] of `missing`.
fn missing_commands<C>(ctx: Ctx<'_, C, Module>, missing: Vec<String>) -> Error {
    Error::MissingCommands {
        key: ctx.key().to_owned(),
        missing,
        instead: "a module filter is the server's own Bloom filter (Redis 8, or a server with \
                  RedisBloom or valkey-bloom); the other kinds need no module (in the CLI: drop \
                  --module)"
            .to_owned(),
    }
}

/// Whether the server did not know a command (called directly, from a script, or asked of
/// the ACL by the add script: `redis.acl_check_cmd` on Redis, `server.acl_check_cmd` in
/// Valkey's words).
fn unknown_command(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("unknown command")
        || text.contains("unknown redis command called from")
        || (text.contains("invalid command passed to") && text.contains("acl_check_cmd"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_the_server_lacks_is_known_in_redis_and_valkey_words() {
        let err = |text: &str| {
            redis::RedisError::from((redis::ErrorKind::Client, "ERR", text.to_owned()))
        };
        for text in [
            "unknown command 'BF.ADD', with args beginning with: 'x'",
            "Unknown Redis command called from script script: 3d47ec0c, on @user_script:1.",
            "Unknown command called from script script: on @user_script:1.",
            "Invalid command passed to redis.acl_check_cmd() script: be52683, on @user_script:1.",
            "Invalid command passed to server.acl_check_cmd() script: on @user_script:1.",
        ] {
            assert!(unknown_command(&err(text)), "{text}");
        }
        assert!(!unknown_command(&err(
            "wrong number of arguments for 'bf.add'"
        )));
    }

    #[test]
    fn the_add_scripts_wrap_bf_madd() {
        assert!(MODULE_ADD.source().contains("BF.MADD"));
        assert!(MODULE_ADD_ONCE.source().contains("once_ring"));
        assert!(MODULE_ADD_ONCE.source().contains("BF.RESERVE"));
    }

    #[test]
    fn flags_are_checked() {
        let reply = Value::BulkString(b"10F".to_vec());
        assert_eq!(flags(&reply, 3).unwrap(), b"10F");
        assert!(flags(&reply, 2).is_err());
        assert!(flags(&Value::BulkString(b"1x".to_vec()), 2).is_err());
        let foreign = Value::Array(vec![
            Value::BulkString(b"foreign".to_vec()),
            Value::BulkString(Vec::new()),
        ]);
        assert!(is_foreign(&foreign));
        assert!(!is_foreign(&reply));
    }
}
