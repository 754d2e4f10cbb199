//! Snapshots of growing filters (SPEC.md §5): per part (shard), a `segment` section for each
//! string holding its levels (meta: the segment's number) and a `counts` section, the level
//! counts as `level=items` lines.
//!
//! An export reads each part's number of levels first, then the segments those levels use, and
//! the counts last: every item added before the export began has its bits in the file, and the
//! counts include at least those items (an item added meanwhile may be counted without its
//! bits: a level then fills a little early, never late, so the rate bound holds). An import
//! stages the segments and the counts beside the filter and swaps each part in with one
//! script: the filter's segments past the file's are deleted with it.

use super::transfer::{self, Group, ImportMode, Staged, Stored, Transferred};
use super::{SectionHeader, SnapshotError, SnapshotHeader, SnapshotReader};
use crate::error::{Error, Result};
use crate::io::tx::Slot;
use crate::GrowingBloom;
use redis::aio::ConnectionLike;
use std::collections::BTreeMap;
use tokio::io::{AsyncRead, AsyncWrite};

const KIND: &str = "growing";
const SEGMENT: &str = "segment";
const COUNTS: &str = "counts";

fn invalid(what: String) -> Error {
    Error::Snapshot(SnapshotError::InvalidInput(what))
}

impl<C> GrowingBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Writes the filter to `out` as a snapshot file, as [`RedisBloom::export`](crate::RedisBloom::export)
    /// does: each part's segments read in 1 MiB pieces, then its level counts. Every add
    /// acknowledged before the export began is in the file.
    ///
    /// # Errors
    /// As for [`RedisBloom::export`](crate::RedisBloom::export).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "export", kind = "growing", key = self.key(), attempts))]
    pub async fn export<W: AsyncWrite + Unpin>(&self, out: W) -> Result<Transferred> {
        let view = self.growing_parts();
        if let Some(guard) = view.guard {
            guard.ensure(view.exec, false).await?;
        }
        let mut segments = Vec::new();
        let mut counts = Vec::new();
        for (shard, (counts_key, segment_keys, checked)) in view.parts.iter().enumerate() {
            let mut tx = crate::io::tx::Tx::plain();
            let stored: Option<Slot<Option<String>>> =
                checked.map(|[params, _]| tx.add(redis::cmd("GET").arg(params).to_owned()));
            let levels: Slot<usize> = tx.add(redis::cmd("HLEN").arg(*counts_key).to_owned());
            let mut replies = view.exec.run(counts_key, &tx).await?;
            if let Some(stored) = stored {
                match replies.take(stored)? {
                    Some(stored) if stored != view.fingerprint => {
                        return Err(Error::ParamsMismatch {
                            key: self.key().to_owned(),
                            stored,
                            requested: view.fingerprint.to_owned(),
                        })
                    }
                    _ => {}
                }
            }
            let levels = replies.take(levels)?.min(view.levels.len());
            let used = match levels {
                0 => 0,
                n => view.levels[n - 1].0 + 1,
            };
            for (s, key) in segment_keys.iter().enumerate().take(used) {
                segments.push(Stored {
                    shard: shard as u32,
                    role: SEGMENT.to_owned(),
                    meta: s.to_string(),
                    key: key.clone(),
                    max_bytes: view.segment_bytes[s],
                    hash: false,
                });
            }
            counts.push(Stored {
                shard: shard as u32,
                role: COUNTS.to_owned(),
                meta: String::new(),
                key: (*counts_key).to_owned(),
                max_bytes: u64::MAX,
                hash: true,
            });
        }
        segments.extend(counts);
        let header = SnapshotHeader::new(KIND, view.fingerprint, view.parts.len() as u32);
        let too_long = |stored: &Stored, len: u64| Error::ParamsMismatch {
            key: self.key().to_owned(),
            stored: format!("a segment {} of {len} bytes", stored.key),
            requested: view.fingerprint.to_owned(),
        };
        let (mut out, moved) =
            transfer::export(view.exec, &header, &segments, too_long, out).await?;
        tokio::io::AsyncWriteExt::shutdown(&mut out)
            .await
            .map_err(|e| Error::Snapshot(SnapshotError::Io(e)))?;
        Ok(moved)
    }

    /// Replaces the filter with a snapshot file's, as
    /// [`RedisBloom::import`](crate::RedisBloom::import) does, one part (shard) at a time,
    /// each atomically: its segments and level counts, and the segments it had past the
    /// file's deleted. [`ImportMode::Merge`] is refused (two filters' levels do not add up).
    ///
    /// # Errors
    /// As for [`RedisBloom::import`](crate::RedisBloom::import); [`Error::InvalidConfig`] for
    /// a merge.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "import", kind = "growing", key = self.key(), attempts))]
    pub async fn import<R: AsyncRead + Unpin>(
        &self,
        input: R,
        mode: ImportMode,
    ) -> Result<Transferred> {
        if mode == ImportMode::Merge {
            return Err(Error::InvalidConfig(
                "a growing filter's file cannot be merged into it (its levels and counts do not \
                 add up): import it whole, or load its items"
                    .into(),
            ));
        }
        let view = self.growing_parts();
        let (mut reader, header) = SnapshotReader::open(input).await?;
        let shards = view.parts.len() as u32;
        transfer::check_header(&header, self.key(), KIND, view.fingerprint, shards)?;
        if let Some(guard) = view.guard {
            guard.ensure(view.exec, false).await?;
        }
        let nonce = super::strings::nonce();
        let place = |section: &SectionHeader| -> Result<Staged> {
            let Some((counts, segment_keys, _)) = view.parts.get(section.shard as usize) else {
                return Err(invalid(format!(
                    "no shard {} for {section:?}",
                    section.shard
                )));
            };
            let staging = |what: &str| format!("{counts}:import:{nonce}:{what}");
            match section.role.as_str() {
                COUNTS => Ok(Staged {
                    target: (*counts).to_owned(),
                    staging: staging(COUNTS),
                    len: section.len,
                    ttl_ms: section.ttl_ms,
                    hash: true,
                    pieces: None,
                }),
                SEGMENT => {
                    let s: usize = section
                        .meta
                        .parse()
                        .ok()
                        .filter(|&s| s < segment_keys.len())
                        .ok_or_else(|| invalid(format!("no segment {:?}", section.meta)))?;
                    if section.len > view.segment_bytes[s] {
                        return Err(invalid(format!(
                            "segment {s} holds {} bytes, more than its {}",
                            section.len, view.segment_bytes[s]
                        )));
                    }
                    Ok(Staged {
                        target: segment_keys[s].clone(),
                        staging: staging(&s.to_string()),
                        len: section.len,
                        ttl_ms: section.ttl_ms,
                        hash: false,
                        pieces: None,
                    })
                }
                other => Err(invalid(format!("a section of role {other:?}"))),
            }
        };
        let staged = transfer::stage(view.exec, &mut reader, ImportMode::Replace, place).await?;
        let result = self.swap_parts(&staged).await;
        if result.is_err() {
            transfer::drop_staged(view.exec, &staged).await;
        }
        result?;
        self.forget_levels();
        Ok(Transferred {
            file_bytes: reader.bytes_read(),
            filter_bytes: staged.iter().filter(|s| !s.hash).map(|s| s.len).sum(),
        })
    }

    /// Checks each part's staged counts against its segments and swaps the part in.
    async fn swap_parts(&self, staged: &[Staged]) -> Result<()> {
        let view = self.growing_parts();
        // Per part: its staged keys, and the levels its counts say it has.
        let mut groups: BTreeMap<usize, Vec<Staged>> = BTreeMap::new();
        for s in staged {
            let part = view
                .parts
                .iter()
                .position(|(counts, segments, _)| {
                    *counts == s.target || segments.contains(&s.target)
                })
                .ok_or_else(|| invalid(format!("no part holds {}", s.target)))?;
            groups.entry(part).or_default().push(s.clone());
        }
        if groups.len() != view.parts.len() {
            return Err(invalid(format!(
                "the file holds {} of the filter's {} shards",
                groups.len(),
                view.parts.len()
            )));
        }
        let mut prepared = Vec::new();
        for (part, group) in &groups {
            let (_, segment_keys, _) = view.parts[*part];
            let counts = group
                .iter()
                .find(|s| s.hash)
                .ok_or_else(|| invalid(format!("shard {part} has no level counts")))?;
            // The counts as staged (the file's, parsed and written by `stage`).
            let fields: Vec<(u64, u64)> = match counts.len {
                0 => Vec::new(),
                _ => {
                    let cmd = redis::cmd("HGETALL").arg(&counts.staging).to_owned();
                    view.exec.query(&counts.staging, &cmd).await?
                }
            };
            let levels = self.check_counts(*part, fields)?;
            let used = match levels {
                0 => 0,
                n => view.levels[n - 1].0 + 1,
            };
            let mut segments: Vec<usize> = group
                .iter()
                .filter(|s| !s.hash)
                .filter_map(|s| segment_keys.iter().position(|k| *k == s.target))
                .collect();
            segments.sort_unstable();
            if segments != (0..used).collect::<Vec<_>>() {
                return Err(invalid(format!(
                    "shard {part}: {levels} levels use segments 0..{used}, the file holds {segments:?}"
                )));
            }
            prepared.push(Group {
                staged: group.clone(),
                extra: segment_keys[used..].to_vec(),
            });
        }
        let checked = view.parts.first().and_then(|part| part.2);
        transfer::swap_checked(
            view.exec,
            &prepared,
            checked,
            view.guard,
            self.key(),
            view.fingerprint,
            ImportMode::Replace,
        )
        .await?;
        Ok(())
    }

    /// The number of levels the counts describe: fields 0..L-1, each at most its level's
    /// capacity, every level below the newest full.
    fn check_counts(&self, part: usize, mut fields: Vec<(u64, u64)>) -> Result<usize> {
        let view = self.growing_parts();
        fields.sort_unstable();
        for (i, &(level, items)) in fields.iter().enumerate() {
            let capacity = view.levels.get(i).map(|l| l.1);
            let newest = i + 1 == fields.len();
            match capacity {
                Some(cap) if level == i as u64 && items <= cap && (newest || items == cap) => {}
                _ => {
                    return Err(invalid(format!(
                        "shard {part}: level counts {fields:?} are not those of this filter"
                    )))
                }
            }
        }
        Ok(fields.len())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_round_trip_as_text() {
        let text = super::transfer::parse_hash_text(b"0=10\n1=7\n").unwrap();
        assert_eq!(text, vec![(0, 10), (1, 7)]);
        assert!(super::transfer::parse_hash_text(b"0=x\n").is_err());
        assert!(super::transfer::parse_hash_text(b"nonsense").is_err());
    }
}
