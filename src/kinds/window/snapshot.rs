//! Snapshots of window filters (SPEC.md §5): per part (shard), a `generation` section for each
//! live generation that exists (meta: its epoch), with the TTL it had.
//!
//! Generations are named by epoch of the server's clock, so an import into a server whose clock
//! agrees gives the same answers: the generations the file holds are live there too. An export
//! reads the generations live when it begins; each only gets bits set, so every add
//! acknowledged before the export began is in the file (unless its generation left the window
//! meanwhile, when it was due to be forgotten anyway). An import replaces each part's
//! generations with the file's, deleting the live ones the file does not hold, atomically per
//! part.

use super::transfer::{self, Group, ImportMode, Staged, Stored, Transferred};
use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader};
use crate::error::{Error, Result};
use crate::kinds::window::epoch_of;
use crate::WindowBloom;
use redis::aio::ConnectionLike;
use tokio::io::{AsyncRead, AsyncWrite};

const KIND: &str = "window";
const GENERATION: &str = "generation";

fn invalid(what: String) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(what))
}

impl<C> WindowBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// The server's epoch now, read on the part of `key`.
    async fn epoch_now(&self, key: &str) -> Result<i64> {
        let view = self.window_parts();
        let (secs, micros): (u64, u64) = view.exec.query(key, &redis::cmd("TIME")).await?;
        let ms = secs * 1_000 + micros / 1_000;
        Ok(epoch_of(ms, view.window_ms, view.generations))
    }

    /// The generations a part may have now: from the oldest live one to the next (a client
    /// whose clock runs ahead may have made it).
    fn live(&self, epoch: i64) -> std::ops::RangeInclusive<i64> {
        let g = i64::from(self.window_parts().generations);
        epoch - g + 1..=epoch + 1
    }

    /// Writes the filter to `out` as a snapshot file, as
    /// [`RedisBloom::export`](crate::RedisBloom::export) does: each part's live generations,
    /// each with its TTL, read in 1 MiB pieces.
    ///
    /// # Errors
    /// As for [`RedisBloom::export`](crate::RedisBloom::export).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "export", kind = "window", key = self.key(), attempts))]
    pub async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let view = self.window_parts();
        if let Some(guard) = view.guard {
            guard.ensure(view.exec, false).await?;
        }
        let mut keys = Vec::new();
        for (shard, (prefix, checked, max_bytes)) in view.parts.iter().enumerate() {
            let anchor = format!("{prefix}:0");
            if let Some([params, _]) = checked {
                let stored: Option<String> = view
                    .exec
                    .query(params, redis::cmd("GET").arg(params))
                    .await?;
                if let Some(stored) = stored.filter(|s| s != view.fingerprint) {
                    return Err(Error::ParamsMismatch {
                        key: self.key().to_owned(),
                        stored,
                        requested: view.fingerprint.to_owned(),
                    });
                }
            }
            let epoch = self.epoch_now(&anchor).await?;
            for e in self.live(epoch) {
                let key = format!("{prefix}:{e}");
                let exists: bool = view
                    .exec
                    .query(&key, redis::cmd("EXISTS").arg(&key))
                    .await?;
                if exists {
                    keys.push(Stored {
                        shard: shard as u32,
                        role: GENERATION.to_owned(),
                        meta: e.to_string(),
                        key,
                        max_bytes: *max_bytes,
                        hash: false,
                    });
                }
            }
        }
        let header = SnapshotHeader::new(KIND, view.fingerprint, view.parts.len() as u32);
        let too_long = |stored: &Stored, len: u64| Error::ParamsMismatch {
            key: self.key().to_owned(),
            stored: format!("a generation {} of {len} bytes", stored.key),
            requested: view.fingerprint.to_owned(),
        };
        let (mut out, moved) = transfer::export(view.exec, &header, &keys, too_long, out).await?;
        tokio::io::AsyncWriteExt::shutdown(&mut out)
            .await
            .map_err(|e| Error::Snapshot(SnapshotError::Io(e)))?;
        Ok(moved)
    }

    /// Replaces the filter's generations with a snapshot file's, as
    /// [`RedisBloom::import`](crate::RedisBloom::import) does, one part at a time, each
    /// atomically; [`ImportMode::Merge`] ORs each of the file's generations into the same
    /// generation of the filter, as a plain filter's merge does (atomically, or by ranges).
    ///
    /// # Errors
    /// As for [`RedisBloom::import`](crate::RedisBloom::import).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "import", kind = "window", key = self.key(), attempts))]
    pub async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        let view = self.window_parts();
        let (mut reader, header) = SnapshotReader::open(input).await?;
        let shards = view.parts.len() as u32;
        transfer::check_header(&header, self.key(), KIND, view.fingerprint, shards)?;
        if let Some(guard) = view.guard {
            guard.ensure(view.exec, false).await?;
        }
        let nonce = super::strings::nonce();
        let place = |section: &SectionHeader| -> Result<Staged> {
            let Some((prefix, _, max_bytes)) = view.parts.get(section.shard as usize) else {
                return Err(invalid(format!(
                    "no shard {} for {section:?}",
                    section.shard
                )));
            };
            let epoch: i64 = section
                .meta
                .parse()
                .ok()
                .filter(|_| section.role == GENERATION)
                .ok_or_else(|| invalid(format!("no place for a section {section:?}")))?;
            if section.len > *max_bytes {
                return Err(invalid(format!(
                    "generation {epoch} holds {} bytes, more than its {max_bytes}",
                    section.len
                )));
            }
            Ok(Staged {
                target: format!("{prefix}:{epoch}"),
                staging: format!("{prefix}:import:{nonce}:{epoch}"),
                len: section.len,
                ttl_ms: section.ttl_ms,
                hash: false,
                pieces: None,
            })
        };
        let staged = transfer::stage(view.exec, &mut reader, mode, place).await?;
        let result = self.swap_parts(&staged, mode).await;
        if result.is_err() {
            transfer::drop_staged(view.exec, &staged).await;
        }
        result?;
        self.forget_checks();
        Ok(Transferred {
            file_bytes: reader.bytes_read(),
            filter_bytes: staged.iter().map(|s| s.len).sum(),
        })
    }

    /// Each part's staged generations swapped in, its live generations the file lacks deleted.
    async fn swap_parts(&self, staged: &[Staged], mode: ImportMode) -> Result<()> {
        let view = self.window_parts();
        let mut groups = Vec::new();
        for (prefix, _, _) in &view.parts {
            let head = format!("{prefix}:");
            let group: Vec<Staged> = staged
                .iter()
                .filter(|s| {
                    s.target
                        .strip_prefix(&head)
                        .is_some_and(|e| e.parse::<i64>().is_ok())
                })
                .cloned()
                .collect();
            let epoch = self.epoch_now(&format!("{prefix}:0")).await?;
            let extra: Vec<String> = match mode {
                ImportMode::Merge => Vec::new(),
                ImportMode::Replace => self
                    .live(epoch)
                    .map(|e| format!("{prefix}:{e}"))
                    .filter(|k| !group.iter().any(|s| s.target == *k))
                    .collect(),
            };
            groups.push(Group {
                staged: group,
                extra,
            });
        }
        let checked = view.parts.first().and_then(|part| part.1);
        transfer::swap_checked(
            view.exec,
            &groups,
            checked,
            view.guard,
            self.key(),
            view.fingerprint,
            mode,
        )
        .await
    }
}
