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

use super::part::Part;
use super::Window;
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::epochs::Epochs;
use crate::error::{Error, Result};
use crate::io::guard::Guard;
use crate::snapshot::{
    self, Generations, Group, ImportMode, SectionHeader, Staged, Stored, WindowPart,
};

/// The role of a generation's section.
const GENERATION: &str = "generation";

impl Window {
    /// Its window's arithmetic.
    fn epochs(&self) -> Epochs {
        Epochs {
            window_ms: self.window_ms,
            generations: self.generations,
        }
    }
}

/// The part's live generations that exist, as sections (a filter of one key: its stored
/// parameters checked first).
pub(super) async fn sections<C: Conn>(ctx: Ctx<'_, C, Window>) -> Result<Vec<Stored>> {
    let (exec, window, part) = (ctx.exec(), ctx.kind(), ctx.part());
    if let Some(guard) = ctx.guard() {
        window.check_stored(exec, guard, ctx.key()).await?;
    }
    let now = snapshot::server_now(exec, &part.anchor()).await?;
    let epochs = window.epochs();
    let mut sections = Vec::new();
    for e in epochs.live(epochs.epoch_of(now)) {
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
    let mut generations = Generations::default();
    for part in ctx.parts.parts() {
        let now = snapshot::server_now(exec, &part.anchor()).await?;
        let at = WindowPart {
            prefix: &part.prefix,
            ledger: &part.made,
            epochs: window.epochs(),
        };
        generations.part(at, staged, now, mode);
    }
    generations.groups()
}
