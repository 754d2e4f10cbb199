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
    pub(crate) async fn names_checked(&self) -> Result<()> {
        self.names
            .get_or_try_init(|| async {
                let clock = self.exec.clock();
                self.exec
                    .retried(&clock, || self.migrate_names(false))
                    .await
            })
            .await
            .map(drop)
    }

    /// Finds whose the older parameters are (taking them when `adopt`), and moves them when
    /// they are this key's.
    async fn migrate_names(&self, adopt: bool) -> Result<()> {
        let legacy = keys::legacy_sidecar(&self.key, "redbloom:params");
        let today = self.guard.key();
        let old: Option<String> = self
            .exec
            .query(&legacy, redis::cmd("GET").arg(&legacy))
            .await?;
        let Some(stored) = old else {
            return Ok(());
        };
        let new: bool = self
            .exec
            .query(today, redis::cmd("EXISTS").arg(today))
            .await?;
        let shards = Fields(&stored).number::<u32>("shards").unwrap_or(1).max(1);
        let owner = match (new, adopt, keys::legacy_partner(&self.key)) {
            // Today's parameters are there: this key's filter has today's names already.
            (true, false, _) => Owner::Other,
            (_, true, _) | (_, _, None) => Owner::This,
            (false, false, Some(other)) => self.owner_of(&other, shards).await?,
        };
        match owner {
            Owner::Other => Ok(()),
            Owner::Unknown => Err(refusal(&self.key)),
            Owner::This => {
                for index in (0..shards).filter(|_| shards > 1) {
                    let shard = keys::shard_key(&self.key, index, shards);
                    self.migrate_group(&shard, None).await?;
                }
                self.migrate_group(&self.key, Some((&legacy, today))).await
            }
        }
    }

    /// Whose the older parameters are, between this key and `other`: the one whose data key
    /// (its bits, or its first shard) exists while the other's does not.
    async fn owner_of(&self, other: &str, shards: u32) -> Result<Owner> {
        let exists = |key: String| async move {
            self.exec
                .query::<bool>(&key, redis::cmd("EXISTS").arg(&key))
                .await
        };
        let ours = exists(data_key(&self.key, shards)).await?;
        let theirs = exists(data_key(other, shards)).await?;
        Ok(owner(ours, theirs))
    }

    /// Moves the companions of `key` (the filter's own key, with its parameters `params`: older
    /// and today's names; or one shard's key) to today's names.
    async fn migrate_group(&self, key: &str, params: Option<(&str, &str)>) -> Result<()> {
        let old = keys::legacy_sidecar(key, "redbloom:");
        let new = keys::sidecar(key, "");
        let [first, second] = match params {
            Some((old, new)) => [old.to_owned(), new.to_owned()],
            None => [old.clone(), old.clone()],
        };
        let pattern = format!("{}*", glob_escape(&old));
        let reply = self
            .exec
            .script(
                &first,
                &MIGRATE_NAMES,
                &[&first, &second],
                &[&pattern, &old, &new],
            )
            .await?;
        match reply {
            Value::Array(_) => Ok(()),
            other => Err(Error::UnexpectedReply(format!(
                "{other:?} from the move to today's names"
            ))),
        }
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
    let Some(stored) = get::<C, Option<String>>(conn, "GET", &legacy).await? else {
        return Ok(None);
    };
    let Some(other) = keys::legacy_partner(key) else {
        return Ok(Some(stored));
    };
    let shards = Fields(&stored).number::<u32>("shards").unwrap_or(1).max(1);
    let ours = get::<C, bool>(conn, "EXISTS", &data_key(key, shards)).await?;
    let theirs = get::<C, bool>(conn, "EXISTS", &data_key(&other, shards)).await?;
    match owner(ours, theirs) {
        Owner::This => Ok(Some(stored)),
        Owner::Other => Ok(None),
        Owner::Unknown => Err(refusal(key)),
    }
}

/// `COMMAND key`'s reply.
async fn get<C: redis::aio::ConnectionLike, T: redis::FromRedisValue>(
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

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync, K: Kind> Bloom<C, K> {
    /// Takes a filter made by an earlier build under companion names that this key and another
    /// shared (`{K}:redbloom:…`, made by both `K` and `{K}`) for this key, and moves it to
    /// today's names; a no-op when there is none. Needed only after a call failed with
    /// [`Error::LegacyNames`]: a filter whose older names were its own alone, or whose data key
    /// tells whose it is, moves by itself at the first call.
    ///
    /// # Errors
    /// Network faults as for [`add`](Bloom::add).
    pub async fn adopt_legacy_names(&self) -> Result<()> {
        let core = &*self.0;
        let clock = core.exec.clock();
        core.exec
            .retried(&clock, || core.migrate_names(true))
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
