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
//!
//! A window over module filters ([`window`]) is moved as a window filter is (SPEC.md §4
//! "window", src/kinds/window/snapshot.rs): per part, each live generation that exists, its
//! dump chunks as sections (meta `EPOCH:ITER`: the generation's epoch, then the iterator), the
//! header chunk with the generation's TTL. An import loads each into a staging key beside the
//! part's and renames it into place as the generation of its epoch, expiring when that epoch
//! leaves the window (or sooner, as the file's TTL says): a generation that has left the window
//! since the export goes at once, and a file whose generations all have is refused. A replace
//! deletes the part's live generations the file lacks and its ledger of generations made (the
//! imported ones are not listed), as a window filter's import does
//! (src/snapshot/generations.rs). Its parameters are checked by the script that lists the live
//! generations (an export) and by the swap (an import).

use super::{steps, window, Module, Part};
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::keys;
use crate::snapshot::{
    self, Generations, Group, ImportMode, SectionHeader, Staged, Stored, WindowPart,
};
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
/// (stored parameters, or `BF.INFO` of another client's filter; a window's: by its scripts or
/// its swap), a sharded one's beside.
async fn check<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<()> {
    steps::ensure_commands(ctx).await?;
    ensure_dump_commands(ctx).await?;
    match ctx.guard() {
        Some(_) if ctx.kind().window.is_some() => Ok(()),
        Some(_) => ctx.retried(|| steps::probe(ctx)).await,
        None => ctx.ensure_beside(false).await,
    }
}

/// The part's keys as the sections the core dumps (the dump makes each one section per
/// chunk), the parameters checked first: its key, or a window's live generations that exist
/// (meta: each one's epoch).
pub(super) async fn sections<C: Conn>(ctx: Ctx<'_, C, Module>) -> Result<Vec<Stored>> {
    let result = check(ctx).await;
    steps::or_missing(ctx, result).await?;
    let keys = match ctx.kind().window {
        None => vec![(String::new(), ctx.part().key.clone())],
        Some(_) => {
            let (_, live) = steps::or_missing(ctx, window::live(ctx).await).await?;
            live.into_iter()
                .map(|g| (g.epoch.to_string(), g.key))
                .collect()
        }
    };
    let shard = ctx.index as u32;
    Ok(keys
        .into_iter()
        .map(|(meta, key)| Stored {
            shard,
            role: snapshot::CHUNK.to_owned(),
            meta,
            key,
            max_bytes: u64::MAX,
            hash: false,
        })
        .collect())
}

/// Where a dump chunk goes back: its part's key (a window's: the generation of its epoch),
/// staged beside it.
pub(super) fn place(
    module: &Module,
    parts: &Shards<Part>,
    nonce: &str,
    section: &SectionHeader,
) -> Result<Staged> {
    let nowhere = || snapshot::invalid(format!("the filter has no place for the {section}"));
    let part = parts
        .parts()
        .get(section.shard as usize)
        .filter(|_| section.role == snapshot::CHUNK)
        .ok_or_else(nowhere)?;
    let (target, staging) = match (&module.window, snapshot::chunk_meta(&section.meta).0) {
        (None, None) => (
            part.key.clone(),
            keys::sidecar(&part.key, &format!("redbloom:import:{nonce}")),
        ),
        (Some(spec), Some(epoch)) => {
            let epoch: i64 = epoch.parse().map_err(|_| nowhere())?;
            (
                format!("{}:{epoch}", spec.prefix(&part.key)),
                keys::sidecar(&part.key, &format!("redbloom:import:{nonce}:{epoch}")),
            )
        }
        _ => return Err(nowhere()),
    };
    if section.len > snapshot::MAX_CHUNK {
        return Err(snapshot::invalid(format!(
            "a dump chunk of {} bytes, more than {}",
            section.len,
            snapshot::MAX_CHUNK
        )));
    }
    Ok(Staged {
        target,
        staging,
        len: section.len,
        ttl_ms: section.ttl_ms,
        expire_at_ms: None,
        hash: false,
        pieces: None,
    })
}

/// Each part's staged key, its own slot group (the file must hold every part); a filter of one
/// key is probed first (another client's filter whose `BF.INFO` disagrees is a mismatch). A
/// window's: each part's staged generations (src/snapshot/generations.rs).
pub(super) async fn groups<C: Conn>(
    ctx: Ctx<'_, C, Module>,
    staged: &[Staged],
    mode: ImportMode,
) -> Result<Vec<Group>> {
    let result = check(ctx).await;
    steps::or_missing(ctx, result).await?;
    let parts = ctx.parts.parts();
    if let Some(spec) = &ctx.kind().window {
        let mut generations = Generations::default();
        for part in parts {
            let now = snapshot::server_now(ctx.exec(), &part.key).await?;
            let (prefix, ledger) = (spec.prefix(&part.key), spec.ledger(&part.key));
            let at = WindowPart {
                prefix: &prefix,
                ledger: &ledger,
                epochs: spec.epochs(),
            };
            generations.part(at, staged, now, mode);
        }
        return generations.groups();
    }
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
