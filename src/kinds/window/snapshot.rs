//! Snapshots of window filters (SPEC.md §5): per part (shard), a `generation` section for each
//! live generation that exists (meta: its epoch), with the TTL it had.
//!
//! Generations are named by epoch of the server's clock, so an import into a server whose clock
//! agrees gives the same answers: the generations the file holds are live there too. An export
//! reads the generations live when it begins; each only gets bits set, so every add
//! acknowledged before the export began is in the file (unless its generation left the window
//! meanwhile, when it was due to be forgotten anyway). An import replaces each part's
//! generations with the file's, deleting the live ones the file does not hold, atomically per
//! part; a merge ORs each of the file's generations into the same generation of the filter.
//! An imported generation expires with its epoch (or sooner, as the file's TTL says), so one
//! that has left the window since the export goes at once; a file whose generations all have
//! is refused.

use super::part::{epoch_of, server_ms, Part};
use super::Window;
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::snapshot::{self, Group, ImportMode, SectionHeader, SnapshotError, Staged, Stored};
use std::ops::RangeInclusive;

/// The role of a generation's section.
const GENERATION: &str = "generation";

impl Window {
    /// The server's epoch now, read on the slot group of `part`.
    async fn epoch_now<C: Conn>(&self, exec: &Exec<C>, part: &Part) -> Result<i64> {
        Ok(self.now(exec, part).await?.1)
    }

    /// The server's time (ms) and epoch now, read on the slot group of `part`.
    async fn now<C: Conn>(&self, exec: &Exec<C>, part: &Part) -> Result<(u64, i64)> {
        let time = exec.query(&part.anchor(), &redis::cmd("TIME")).await?;
        let now = server_ms(time);
        Ok((now, epoch_of(now, self.window_ms, self.generations)))
    }

    /// The moment (ms) generation `epoch` leaves the window, as the add script that makes it
    /// sets it: the last millisecond before `(epoch + G) · W / (G − 1)`.
    fn leaves_at(&self, epoch: i64) -> u64 {
        let g = u128::from(self.generations);
        let end = u128::try_from(epoch).unwrap_or(0) + g;
        let at = (end * u128::from(self.window_ms)).div_ceil(g - 1);
        u64::try_from(at.saturating_sub(1)).unwrap_or(u64::MAX)
    }

    /// The generations a part may have at `epoch`: from the oldest live one to the next (a
    /// client whose clock runs ahead may have made it).
    fn live(&self, epoch: i64) -> RangeInclusive<i64> {
        epoch - i64::from(self.generations) + 1..=epoch + 1
    }
}

/// The part's live generations that exist, as sections (a filter of one key: its stored
/// parameters checked first).
pub(super) async fn sections<C: Conn>(ctx: Ctx<'_, C, Window>) -> Result<Vec<Stored>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    if let Some(guard) = ctx.guard() {
        window.check_stored(exec, guard, ctx.key()).await?;
    }
    let epoch = window.epoch_now(exec, part).await?;
    let mut sections = Vec::new();
    for e in window.live(epoch) {
        let key = part.generation(e);
        let exists: bool = exec.query(&key, redis::cmd("EXISTS").arg(&key)).await?;
        if exists {
            sections.push(Stored {
                shard: ctx.index as u32,
                role: GENERATION.to_owned(),
                meta: e.to_string(),
                key,
                max_bytes: part.geometry.max_bytes(),
                hash: false,
            });
        }
    }
    Ok(sections)
}

/// A generation longer than one holds: another filter's.
pub(super) fn too_long(key: &str, guard: &Guard, stored: &Stored, len: u64) -> Error {
    snapshot::too_long(key, guard.fingerprint(), "generation", stored, len)
}

/// Where a `generation` section goes back: its epoch's key in its part, staged beside it.
pub(super) fn place(parts: &Shards<Part>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
    let Some(part) = parts.parts().get(section.shard as usize) else {
        return Err(snapshot::invalid(format!(
            "no shard {} for the {section}",
            section.shard
        )));
    };
    let epoch: i64 = section
        .meta
        .parse()
        .ok()
        .filter(|_| section.role == GENERATION)
        .ok_or_else(|| snapshot::invalid(format!("the filter has no place for the {section}")))?;
    let max_bytes = part.geometry.max_bytes();
    if section.len > max_bytes {
        return Err(snapshot::invalid(format!(
            "generation {epoch} holds {} bytes, more than its {max_bytes}",
            section.len
        )));
    }
    Ok(Staged {
        target: part.generation(epoch),
        staging: format!("{}:import:{nonce}:{epoch}", part.prefix),
        len: section.len,
        ttl_ms: section.ttl_ms,
        expire_at_ms: None,
        hash: false,
        pieces: None,
    })
}

/// Each part's staged generations; a replace deletes its live generations the file lacks.
pub(super) async fn groups<C: Conn>(
    ctx: Ctx<'_, C, Window>,
    staged: &[Staged],
    mode: ImportMode,
) -> Result<Vec<Group>> {
    let (exec, window) = (ctx.exec(), ctx.kind());
    let mut groups = Vec::new();
    let (mut sections, mut gone) = (0, 0);
    for part in ctx.parts.parts() {
        let head = format!("{}:", part.prefix);
        let (now, epoch) = window.now(exec, part).await?;
        let mut group = Vec::new();
        for s in staged {
            let Some(e) = s.target.strip_prefix(&head).and_then(|e| e.parse().ok()) else {
                continue;
            };
            // A generation expires with its epoch (the file's TTL is how long it had left
            // when it was read: sooner, only when the filter was given a shorter TTL), so
            // one that has since left the window goes at once.
            let mut at = window.leaves_at(e);
            if let Some(ttl) = s.ttl_ms {
                at = at.min(now.saturating_add(ttl));
            }
            sections += 1;
            gone += usize::from(at <= now);
            group.push(Staged {
                expire_at_ms: Some(at),
                ..s.clone()
            });
        }
        // A replace deletes the ledger of the generations made (it lists the ones replaced;
        // the imported ones are not listed).
        let extra: Vec<String> = match mode {
            ImportMode::Merge => Vec::new(),
            ImportMode::Replace => window
                .live(epoch)
                .map(|e| part.generation(e))
                .filter(|k| !group.iter().any(|s| s.target == *k))
                .chain([part.made.clone()])
                .collect(),
        };
        groups.push(Group {
            staged: group,
            extra,
        });
    }
    if sections > 0 && gone == sections {
        return Err(Error::Snapshot(SnapshotError::Expired {
            what: format!("all {sections} generation(s): each has left the window"),
        }));
    }
    Ok(groups)
}
