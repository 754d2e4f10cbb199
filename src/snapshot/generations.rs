//! A window's generations put back by an import (SPEC.md §4 "window", §5), for every kind whose
//! parts are generations named `{PREFIX}:{EPOCH}` by the server's clock (a window filter's
//! strings, a window over module filters): each expires when its epoch leaves the window (or
//! sooner, as the file's TTL says), so one that has left it since the export goes at once; a
//! replace deletes the part's live generations the file lacks and its ledger of generations
//! made (the imported ones are not listed); a file whose generations have all left the window
//! is refused, nothing written.

use super::{Group, ImportMode, SnapshotError, Staged};
use crate::epochs::{server_ms, Epochs};
use crate::error::{Error, Result};
use crate::io::exec::Exec;
use redis::aio::ConnectionLike;

/// The groups of an import's generations, part by part.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    groups: Vec<Group>,
    sections: usize,
    gone: usize,
}

/// One part of a windowed filter, as [`Generations::part`] puts it back.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowPart<'a> {
    /// Generation E is the key `{prefix}:{E}`.
    pub(crate) prefix: &'a str,
    /// The part's ledger of the generations it made.
    pub(crate) ledger: &'a str,
    pub(crate) epochs: Epochs,
}

impl Generations {
    /// Adds the group of one part's generations among `staged` (the server's time `now`, ms).
    pub(crate) fn part(
        &mut self,
        part: WindowPart<'_>,
        staged: &[Staged],
        now: u64,
        mode: ImportMode,
    ) {
        let head = format!("{}:", part.prefix);
        let mut group = Vec::new();
        for s in staged {
            let Some(e) = s.target.strip_prefix(&head).and_then(|e| e.parse().ok()) else {
                continue;
            };
            // A generation expires with its epoch (the file's TTL is how long it had left
            // when it was read: sooner, only when the filter was given a shorter TTL), so
            // one that has since left the window goes at once.
            let mut at = part.epochs.leaves_at(e);
            if let Some(ttl) = s.ttl_ms {
                at = at.min(now.saturating_add(ttl));
            }
            self.sections += 1;
            self.gone += usize::from(at <= now);
            group.push(Staged {
                expire_at_ms: Some(at),
                ..s.clone()
            });
        }
        // A replace deletes the ledger of the generations made (it lists the ones replaced;
        // the imported ones are not listed).
        let extra: Vec<String> = match mode {
            ImportMode::Merge => Vec::new(),
            ImportMode::Replace => part
                .epochs
                .live(part.epochs.epoch_of(now))
                .map(|e| format!("{head}{e}"))
                .filter(|k| !group.iter().any(|s| s.target == *k))
                .chain([part.ledger.to_owned()])
                .collect(),
        };
        self.groups.push(Group {
            staged: group,
            extra,
        });
    }

    /// Every part's group; refused when the file's generations have all left the window.
    pub(crate) fn groups(self) -> Result<Vec<Group>> {
        if self.sections > 0 && self.gone == self.sections {
            return Err(Error::Snapshot(SnapshotError::Expired {
                what: format!(
                    "all {} generation(s): each has left the window",
                    self.sections
                ),
            }));
        }
        Ok(self.groups)
    }
}

/// The server's time (ms), read on the slot group of `key`.
pub(crate) async fn server_now<C>(exec: &Exec<C>, key: &str) -> Result<u64>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    Ok(server_ms(exec.query(key, &redis::cmd("TIME")).await?))
}
