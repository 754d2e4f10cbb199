//! Snapshots of growing filters (SPEC.md §5): per part (shard), a `segment` section for each
//! string holding its levels (meta: the segment's number) and a `counts` section, the level
//! counts as `level=items` lines.
//!
//! An export reads each part's number of levels first, then the segments those levels use, and
//! the counts last (the core puts every hash section after the strings): every item added
//! before the export began has its bits in the file, and the counts include at least those
//! items (an item added meanwhile may be counted without its bits: a level then fills a little
//! early, never late, so the rate bound holds). An import stages the segments and the counts
//! beside the filter, checks the counts against the segments, and the core swaps each part in
//! with one script: the filter's segments past the file's are deleted with it. A file cannot
//! be merged into a filter (`Seam::merge_allowed`).

use super::{params_keys, Growing, Part};
use crate::core::sharded::Shards;
use crate::core::{Conn, Ctx};
use crate::error::{Error, Result};
use crate::io::guard::Guard;
use crate::io::tx::{Slot, Tx};
use crate::snapshot::{self, invalid, Group, SectionHeader, Staged, Stored};
use std::collections::BTreeMap;

const SEGMENT: &str = "segment";
const COUNTS: &str = "counts";

impl Growing {
    /// The segments the first `levels` levels use (none without a level).
    fn used(&self, levels: usize) -> usize {
        match levels {
            0 => 0,
            n => self.segments_of(n),
        }
    }

    /// Where a section of a file goes back: its part's counts or segment, staged beside the
    /// counts.
    pub(super) fn place_section(
        &self,
        parts: &Shards<Part>,
        nonce: &str,
        section: &SectionHeader,
    ) -> Result<Staged> {
        let Some(part) = parts.parts().get(section.shard as usize) else {
            return Err(invalid(format!(
                "no shard {} for the {section}",
                section.shard
            )));
        };
        let staging = |what: &str| format!("{}:import:{nonce}:{what}", part.counts);
        let (target, staging, hash) = match section.role.as_str() {
            COUNTS => (part.counts.clone(), staging(COUNTS), true),
            SEGMENT => {
                let s: usize = section
                    .meta
                    .parse()
                    .ok()
                    .filter(|&s| s < part.segment_keys.len())
                    .ok_or_else(|| {
                        invalid(format!("the filter has no segment for the {section}"))
                    })?;
                let most = self.segments[s].div_ceil(8);
                if section.len > most {
                    return Err(invalid(format!(
                        "segment {s} holds {} bytes, more than its {most}",
                        section.len
                    )));
                }
                (part.segment_keys[s].clone(), staging(&s.to_string()), false)
            }
            _ => {
                return Err(invalid(format!(
                    "the filter has no place for the {section}"
                )))
            }
        };
        Ok(Staged {
            target,
            staging,
            len: section.len,
            ttl_ms: section.ttl_ms,
            expire_at_ms: None,
            hash,
            pieces: None,
        })
    }

    /// The number of levels the counts describe: fields 0..L-1, each at most its level's
    /// capacity, every level below the newest full.
    fn check_counts(&self, part: usize, mut fields: Vec<(u64, u64)>) -> Result<usize> {
        fields.sort_unstable();
        for (i, &(level, items)) in fields.iter().enumerate() {
            let capacity = self.levels.get(i).map(|l| l.capacity);
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

/// The part's sections: its number of levels read first (with a filter of one key's stored
/// parameters), then a section for each segment those levels use, and one for the counts.
pub(super) async fn sections<C: Conn>(ctx: Ctx<'_, C, Growing>) -> Result<Vec<Stored>> {
    let (kind, part) = (ctx.kind(), ctx.part());
    let mut tx = Tx::plain();
    let stored: Option<Slot<Option<String>>> = params_keys(ctx.guard())
        .map(|[params, _]| tx.add(redis::cmd("GET").arg(params).to_owned()));
    let levels: Slot<usize> = tx.add(redis::cmd("HLEN").arg(&part.counts).to_owned());
    let mut replies = ctx.exec().run(&part.counts, &tx).await?;
    if let Some(stored) = stored {
        if let Some(stored) = replies.take(stored)? {
            ctx.params().compare(Some(stored))?;
        }
    }
    let levels = replies.take(levels)?.min(kind.levels.len());
    let shard = ctx.index as u32;
    let mut sections: Vec<Stored> = part.segment_keys[..kind.used(levels)]
        .iter()
        .enumerate()
        .map(|(s, key)| Stored {
            shard,
            role: SEGMENT.to_owned(),
            meta: s.to_string(),
            key: key.clone(),
            max_bytes: kind.segments[s].div_ceil(8),
            hash: false,
        })
        .collect();
    sections.push(Stored {
        shard,
        role: COUNTS.to_owned(),
        meta: String::new(),
        key: part.counts.clone(),
        max_bytes: u64::MAX,
        hash: true,
    });
    Ok(sections)
}

/// A segment longer than the filter's: another filter's.
pub(super) fn too_long(key: &str, guard: &Guard, stored: &Stored, len: u64) -> Error {
    snapshot::too_long(key, guard.fingerprint(), "segment", stored, len)
}

/// The staged sections by part, each part's counts checked against its segments (the file
/// must hold every part, and exactly the segments its levels use); each part's segments past
/// the file's go with the swap.
pub(super) async fn groups<C: Conn>(
    ctx: Ctx<'_, C, Growing>,
    staged: &[Staged],
) -> Result<Vec<Group>> {
    let (kind, parts) = (ctx.kind(), ctx.parts.parts());
    let mut by_part: BTreeMap<usize, Vec<Staged>> = BTreeMap::new();
    for s in staged {
        let part = parts
            .iter()
            .position(|p| p.counts == s.target || p.segment_keys.contains(&s.target))
            .ok_or_else(|| invalid(format!("no part holds {}", s.target)))?;
        by_part.entry(part).or_default().push(s.clone());
    }
    if by_part.len() != parts.len() {
        return Err(invalid(format!(
            "the file holds {} of the filter's {} shards",
            by_part.len(),
            parts.len()
        )));
    }
    let mut groups = Vec::new();
    for (part, group) in by_part {
        let segment_keys = &parts[part].segment_keys;
        let counts = group
            .iter()
            .find(|s| s.hash)
            .ok_or_else(|| invalid(format!("shard {part} has no level counts")))?;
        // The counts as staged (the file's, parsed and written by the staging).
        let fields: Vec<(u64, u64)> = match counts.len {
            0 => Vec::new(),
            _ => {
                let cmd = redis::cmd("HGETALL").arg(&counts.staging).to_owned();
                ctx.exec().query(&counts.staging, &cmd).await?
            }
        };
        let levels = kind.check_counts(part, fields)?;
        let used = kind.used(levels);
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
        groups.push(Group {
            staged: group,
            extra: segment_keys[used..].to_vec(),
        });
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_round_trip_as_text() {
        use crate::snapshot::parse_hash_text;
        let text = parse_hash_text(b"0=10\n1=7\n").unwrap();
        assert_eq!(text, vec![(0, 10), (1, 7)]);
        assert!(parse_hash_text(b"0=x\n").is_err());
        assert!(parse_hash_text(b"nonsense").is_err());
    }
}
