//! Snapshots of module filters (SPEC.md §5, §7): per part (shard), the module's own dump of its
//! key, chunk by chunk (`BF.SCANDUMP`), each chunk a section of the file; an import loads them
//! into a staging key beside the part's (`BF.LOADCHUNK`) and renames it into place, every part
//! in one step on one server (src/snapshot/dump.rs says how chunks are read, checked and
//! loaded, and why an export is consistent with the dump header it starts from).
//!
//! Before an export or an import, the parameters are checked as the kind's steps check them:
//! stored beside the filter (they must be this client's), or for a filter another client made,
//! what `BF.INFO` reports. An import writes this client's parameters beside the filter in the
//! same step as the swap; a key holding another client's filter (no parameters stored) is not
//! replaced (a mismatch, nothing written). A server without `BF.SCANDUMP`/`BF.LOADCHUNK`
//! (valkey-bloom) is refused with [`Error::MissingCommands`] before anything is read or
//! written. A file cannot be merged into a module filter: it holds the module's chunks, not
//! items.

use super::{steps, Module, Part};
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::keys;
use crate::snapshot::{self, Group, SectionHeader, Staged, Stored};
use redis::Value;

/// The refusal of `import --merge`.
pub(super) const NO_MERGE: &str = "a module filter's snapshot cannot be merged into a filter: \
                                   the file holds the module's dump chunks, not items (import \
                                   it whole, or load the items)";

/// `Ok` when the server has the module's dump commands, else [`Error::MissingCommands`] naming
/// those it lacks (asked with `COMMAND INFO`; a user whose ACL refuses `COMMAND` is not asked:
/// the commands themselves then tell).
async fn ensure_dump_commands<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<()> {
    let key = &ctx.part().key;
    let cmd = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(&snapshot::DUMP_COMMANDS)
        .to_owned();
    match ctx.exec().query::<Vec<Value>>(key, &cmd).await {
        Ok(known) if known.iter().any(|info| matches!(info, Value::Nil)) => {
            Err(Error::MissingCommands {
                key: ctx.key().to_owned(),
                missing: snapshot::DUMP_COMMANDS
                    .iter()
                    .zip(&known)
                    .filter(|(_, info)| matches!(info, Value::Nil))
                    .map(|(name, _)| (*name).to_owned())
                    .collect(),
                instead: snapshot::missing_dump_instead().to_owned(),
            })
        }
        Ok(_) | Err(Error::NoPermission(_)) => Ok(()),
        Err(err) => Err(err),
    }
}

/// The parameters of the filter checked for a snapshot: a filter of one key's part probed
/// (stored parameters, or `BF.INFO` of another client's filter), a sharded one's beside.
async fn check<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<()> {
    steps::ensure_commands(ctx).await?;
    ensure_dump_commands(ctx).await?;
    match ctx.guard() {
        Some(_) => ctx.retried(|| steps::probe(ctx)).await,
        None => ctx.ensure_beside(false).await,
    }
}

/// The part's key as the one section the core dumps (the dump makes it one section per
/// chunk), the parameters checked first.
pub(super) async fn sections<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<Vec<Stored>> {
    let result = check(ctx).await;
    steps::or_missing(ctx, result).await?;
    Ok(vec![Stored {
        shard: ctx.index as u32,
        role: snapshot::CHUNK.to_owned(),
        meta: String::new(),
        key: ctx.part().key.clone(),
        max_bytes: u64::MAX,
        hash: false,
    }])
}

/// Where a dump chunk goes back: its part's key, staged beside it.
pub(super) fn place(parts: &Shards<Part>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
    let part = parts
        .parts()
        .get(section.shard as usize)
        .filter(|_| section.role == snapshot::CHUNK)
        .ok_or_else(|| snapshot::invalid(format!("the filter has no place for the {section}")))?;
    if section.len > snapshot::MAX_CHUNK {
        return Err(snapshot::invalid(format!(
            "a dump chunk of {} bytes, more than {}",
            section.len,
            snapshot::MAX_CHUNK
        )));
    }
    Ok(Staged {
        target: part.key.clone(),
        staging: keys::sidecar(&part.key, &format!("redbloom:import:{nonce}")),
        len: section.len,
        ttl_ms: section.ttl_ms,
        expire_at_ms: None,
        hash: false,
        pieces: None,
    })
}

/// Each part's staged key, its own slot group (the file must hold every part); a filter of one
/// key is probed first (another client's filter whose `BF.INFO` disagrees is a mismatch).
pub(super) async fn groups<C: Conn>(
    ctx: Ctx<'_, C, Module>,
    staged: &[Staged],
) -> Result<Vec<Group>> {
    let result = check(ctx).await;
    steps::or_missing(ctx, result).await?;
    let parts = ctx.parts.parts();
    let mut groups = Vec::with_capacity(parts.len());
    for part in parts {
        let Some(s) = staged.iter().find(|s| s.target == part.key) else {
            return Err(snapshot::invalid(format!(
                "the file holds {} of the filter's {} shards",
                staged.len(),
                parts.len()
            )));
        };
        groups.push(Group {
            staged: vec![s.clone()],
            extra: Vec::new(),
        });
    }
    Ok(groups)
}
