//! The sections of a filter kept in one string per part (plain bits, counting counters): one
//! `bits` section per part, the part's string as Redis holds it (as long as its highest byte
//! set), so that an export imported elsewhere gives the same bytes.

use super::transfer::{Group, Staged, Stored};
use super::SectionHeader;
use crate::error::Result;
use crate::keys;

/// The section of a part's string.
pub(crate) const BITS: &str = "bits";

/// Part `shard`'s string at `key`, of at most `max_bytes`, as a section.
pub(crate) fn section(shard: usize, key: &str, max_bytes: u64) -> Stored {
    Stored {
        shard: shard as u32,
        role: BITS.to_owned(),
        meta: String::new(),
        key: key.to_owned(),
        max_bytes,
        hash: false,
    }
}

/// Where a `bits` section goes back: its part's key (`key_of(shard)`: the key and its most
/// bytes), staged beside it.
///
/// # Errors
/// [`Error::Snapshot`](crate::Error::Snapshot) for a section of another role, of a part the
/// filter does not have, or longer than the part holds.
pub(crate) fn place<'a>(
    section: &SectionHeader,
    nonce: &str,
    key_of: impl Fn(usize) -> Option<(&'a str, u64)>,
) -> Result<Staged> {
    let (key, max_bytes) = key_of(section.shard as usize)
        .filter(|_| section.role == BITS)
        .ok_or_else(|| super::invalid(format!("the filter has no place for the {section}")))?;
    if section.len > max_bytes {
        return Err(super::invalid(format!(
            "shard {} holds {} bytes, more than its {max_bytes}",
            section.shard, section.len
        )));
    }
    Ok(Staged {
        target: key.to_owned(),
        staging: keys::sidecar(key, &format!("redbloom:import:{nonce}")),
        len: section.len,
        ttl_ms: section.ttl_ms,
        expire_at_ms: None,
        hash: false,
        pieces: None,
    })
}

/// Every part's staged string, each its own slot group; the file must hold all `parts`.
///
/// # Errors
/// [`Error::Snapshot`](crate::Error::Snapshot) when the file lacks a part.
pub(crate) fn groups(staged: &[Staged], parts: usize) -> Result<Vec<Group>> {
    if staged.len() != parts {
        return Err(super::invalid(format!(
            "the file holds {} of the filter's {parts} shards",
            staged.len(),
        )));
    }
    Ok(staged
        .iter()
        .map(|s| Group {
            staged: vec![s.clone()],
            extra: Vec::new(),
        })
        .collect())
}
