//! Filters made by builds before today's names (SPEC.md §3, "Names"): their companions were
//! named `{K}:redbloom:NAME` ([`keys::legacy_sidecar`]), which the keys `K` and `{K}` both
//! produced. Before its first call, a handle asks once whether such older parameters exist for
//! its key, and when they do and are its own, moves the filter's companions to today's names
//! (lua/migrate_names.lua, one atomic step per slot group: each shard's, then the key's own,
//! whose parameters move last). Older parameters that the two keys shared are this key's when
//! its data key exists and the other's does not; the other's when the reverse holds; else the
//! call fails with [`Error::LegacyNames`] until [`Bloom::adopt_legacy_names`] says whose.

use super::kind::{Fields, Kind};
use super::{Bloom, Conn, Core};
use crate::error::{Error, Result};
use crate::keys;
use crate::retry::Clock;
use redis::aio::ConnectionLike;
use redis::Value;

crate::scripts::script! {
    /// Moves one slot group of a filter from the older names to today's.
    MIGRATE_NAMES = crate::scripts::lua!["migrate_names"];
}

/// Whose the older parameters at a key's older name are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// This key's: its companions move to today's names.
    This,
    /// The other key's that produced the same older names: this key leaves them alone.
    Other,
    /// Either key's: the call is refused.
    Unknown,
}

impl<C: Conn, K: Kind> Core<C, K> {
    /// Once per handle, before its first call: a filter this key's under the older names is
    /// moved to today's; one that may be this key's or the other's refuses the call.
    pub(crate) async fn names_checked(&self, clock: &Clock) -> Result<()> {
        self.names
            .get_or_try_init(|| async {
                self.exec
                    .retried(clock, || async {
                        migrate(&mut self.exec.conn().clone(), &self.key, false).await
                    })
                    .await
                    .map(drop)
            })
            .await
            .map(drop)
    }
}

/// Moves the filter at `key` from the older names to today's when the older parameters are
/// its own (or `adopt`: taken for it); `Ok(false)` when there is nothing to move (none are
/// stored, or they are the other key's).
///
/// # Errors
/// [`Error::LegacyNames`] when they may be either key's and not `adopt`; network faults.
async fn migrate<C: ConnectionLike>(conn: &mut C, key: &str, adopt: bool) -> Result<bool> {
    let legacy = keys::legacy_sidecar(key, "redbloom:params");
    let today = keys::sidecar(key, "params");
    let Some(stored) = legacy_params(conn, &legacy, adopt).await? else {
        return Ok(false);
    };
    let shards = Fields(&stored).number::<u32>("shards").unwrap_or(1).max(1);
    // Today's parameters are there: this key has a filter under today's names, which a move
    // would overwrite. It is left alone, and so are the older names (the other key's, or
    // forgotten); taking them for this key needs this key's filter cleared first.
    if ask::<C, bool>(conn, "EXISTS", &today).await? {
        return match adopt {
            false => Ok(false),
            true => Err(Error::InvalidConfig(format!(
                "{key:?} has a filter under today's names already: clear it before taking the \
                 older names {}* for it",
                keys::legacy_sidecar(key, "redbloom:")
            ))),
        };
    }
    let owner = match (adopt, keys::legacy_partner(key)) {
        (true, _) | (_, None) => Owner::This,
        (false, Some(other)) => owner_of(conn, (key, &other), shards).await?,
    };
    match owner {
        Owner::Other => Ok(false),
        Owner::Unknown => Err(refusal(key)),
        Owner::This => {
            for index in (0..shards).filter(|_| shards > 1) {
                migrate_group(conn, &keys::shard_key(key, index, shards), None).await?;
            }
            migrate_group(conn, key, Some((&legacy, &today))).await?;
            Ok(true)
        }
    }
}

/// Takes a filter made by an earlier build under companion names that `key` and another key
/// shared (`{K}:redbloom:…`, made by both `K` and `{K}`) for `key`, and moves it to today's
/// names (one atomic step per slot group: each shard's, then the key's own, whose parameters
/// move last). Returns whether there was one. Needed only after a call failed with
/// [`Error::LegacyNames`]: a filter whose older names were its own alone, or whose data key
/// tells whose it is, moves by itself at a handle's first call. The CLI: `redbloom --key KEY
/// migrate`.
///
/// ```no_run
/// # async fn demo(mut conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// if redbloom::adopt_legacy_names(&mut conn, "{events}").await? {
///     println!("{{events}} moved to today's names");
/// }
/// # Ok(()) }
/// ```
///
/// # Errors
/// Network faults as for [`Bloom::add`](crate::Bloom::add).
pub async fn adopt_legacy_names<C: ConnectionLike>(conn: &mut C, key: &str) -> Result<bool> {
    migrate(conn, key, true).await
}

/// Whose the older parameters are, between `key` and `other`: the one whose data key (its
/// bits, or its first shard) exists while the other's does not.
async fn owner_of<C: ConnectionLike>(
    conn: &mut C,
    (key, other): (&str, &str),
    shards: u32,
) -> Result<Owner> {
    let ours = ask::<C, bool>(conn, "EXISTS", &data_key(key, shards)).await?;
    let theirs = ask::<C, bool>(conn, "EXISTS", &data_key(other, shards)).await?;
    Ok(owner(ours, theirs))
}

/// Moves the companions of `key` (the filter's own key, with its parameters `params`: older
/// and today's names; or one shard's key) to today's names.
async fn migrate_group<C: ConnectionLike>(
    conn: &mut C,
    key: &str,
    params: Option<(&str, &str)>,
) -> Result<()> {
    let old = keys::legacy_sidecar(key, "redbloom:");
    let new = keys::sidecar(key, "");
    let [first, second] = match params {
        Some((old, new)) => [old.to_owned(), new.to_owned()],
        None => [old.clone(), old.clone()],
    };
    let pattern = format!("{}*", glob_escape(&old));
    let cmd = MIGRATE_NAMES.call(false, true, &[&first, &second], &[&pattern, &old, &new]);
    let reply: Value = cmd
        .query_async(conn)
        .await
        .map_err(|e| Error::from_redis(e, &first))?;
    match reply {
        Value::Array(_) => Ok(()),
        other => Err(Error::UnexpectedReply(format!(
            "{other:?} from the move to today's names"
        ))),
    }
}

/// The parameters stored under `key`'s older name, when they are `key`'s (for
/// [`StoredParams::read`](super::stored::StoredParams::read)): `None` when there are none, or
/// when they are the other key's.
///
/// # Errors
/// [`Error::LegacyNames`] when they may be either key's; network faults.
pub(crate) async fn stored_params<C: redis::aio::ConnectionLike>(
    conn: &mut C,
    key: &str,
) -> Result<Option<String>> {
    let legacy = keys::legacy_sidecar(key, "redbloom:params");
    let Some(stored) = legacy_params(conn, &legacy, false).await? else {
        return Ok(None);
    };
    let Some(other) = keys::legacy_partner(key) else {
        return Ok(Some(stored));
    };
    let shards = Fields(&stored).number::<u32>("shards").unwrap_or(1).max(1);
    match owner_of(conn, (key, &other), shards).await? {
        Owner::This => Ok(Some(stored)),
        Owner::Other => Ok(None),
        Owner::Unknown => Err(refusal(key)),
    }
}

/// The parameters stored at the older name `legacy`. A user whose ACL grants today's names but
/// not the older ones reads none (every call asks once: a refusal must not fail them), unless
/// it asked to `adopt` them.
async fn legacy_params<C: ConnectionLike>(
    conn: &mut C,
    legacy: &str,
    adopt: bool,
) -> Result<Option<String>> {
    match ask::<C, Option<String>>(conn, "GET", legacy).await {
        Err(Error::NoPermission(_)) if !adopt => Ok(None),
        read => read,
    }
}

/// `COMMAND key`'s reply.
async fn ask<C: redis::aio::ConnectionLike, T: redis::FromRedisValue>(
    conn: &mut C,
    command: &str,
    key: &str,
) -> Result<T> {
    redis::cmd(command)
        .arg(key)
        .query_async(conn)
        .await
        .map_err(|e| Error::from_redis(e, key))
}

/// The key whose existence says that a filter of `shards` shards at `key` exists: its bits,
/// or its first shard.
fn data_key(key: &str, shards: u32) -> String {
    match shards {
        1 => key.to_owned(),
        n => keys::shard_key(key, 0, n),
    }
}

/// Whose older parameters are, from whether this key's data key exists (`ours`) and the other
/// key's (`theirs`).
fn owner(ours: bool, theirs: bool) -> Owner {
    match (ours, theirs) {
        (true, false) => Owner::This,
        (false, true) => Owner::Other,
        _ => Owner::Unknown,
    }
}

/// The refusal of a call on `key` whose older parameters may be either key's.
fn refusal(key: &str) -> Error {
    Error::LegacyNames {
        key: key.to_owned(),
        other: keys::legacy_partner(key).unwrap_or_default(),
        legacy: keys::legacy_sidecar(key, "redbloom:"),
    }
}

impl<C: ConnectionLike + Clone + Send + Sync, K: Kind> Bloom<C, K> {
    /// [`adopt_legacy_names`] for this filter's key, on its connection: takes the older
    /// names for it and moves them to today's; a no-op when there are none.
    ///
    /// # Errors
    /// Network faults as for [`add`](Bloom::add).
    pub async fn adopt_legacy_names(&self) -> Result<()> {
        let core = &*self.0;
        let clock = core.exec.clock();
        core.exec
            .retried(&clock, || async {
                migrate(&mut core.exec.conn().clone(), &core.key, true).await
            })
            .await?;
        core.names.get_or_init(|| async {}).await;
        Ok(())
    }
}

/// `text` as a SCAN pattern that matches it alone: the glob characters escaped.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\' | '^' | '-') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::glob_escape;

    #[test]
    fn patterns_match_the_text_alone() {
        assert_eq!(glob_escape("{q}:redbloom:"), "{q}:redbloom:");
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
