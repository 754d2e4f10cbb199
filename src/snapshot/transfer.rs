//! A filter's keys to a snapshot file and back (SPEC.md §5): the Redis side, for any kind
//! that names its keys as sections.
//!
//! - **Export** reads each key in [`READ_CHUNK`] pieces (`GETRANGE`): no command holds the
//!   server longer than one piece's copy, and memory stays at one chunk whatever the size.
//!   A key's length and TTL are taken before its bytes: bits only ever get set, so every bit
//!   set before the export began is in the file.
//! - **Import** writes staging keys beside the filter's (same slot), in pieces of at most one
//!   chunk (`SETRANGE`; an all-zero chunk is skipped), each with a TTL of [`STAGING_TTL_MS`]
//!   renewed at every piece (and every staging key's, at least once a second), then swaps them
//!   in with one script per slot group (`lua/import_swap.lua`) once the file's end block has
//!   been verified. An importer killed at any moment leaves the filter as it was, and its
//!   staging keys expire.
//! - **Merge** ([`ImportMode::Merge`]) stages as a replace does and ORs each staging key into
//!   the filter's (`BITOP OR`) in the same atomic step per slot group: other clients see the
//!   filter before or after, and a killed importer leaves it as it was. That step holds the
//!   server for one `BITOP` of the whole key (about 1.6 ms per MiB). Given a merge chunk
//!   ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), CLI `--merge-chunk`),
//!   it goes by ranges instead: each section staged in pieces of one range each (a key per
//!   range that is not all zeros: no staging string as large as the filter), the keys and the
//!   parameters checked with the same script once the file is verified, then the pieces ORed in
//!   one range per step (`lua/import_merge.lua`): no step holds the server longer than one
//!   range's copy. Each range is atomic, such a merge is not: bits only get set, so a
//!   concurrent reader sees a subset of the final bits, never a bit lost, and an importer
//!   killed midway leaves part of the file merged (merging again completes it).
//!
//! `export` reads the keys into a file, `stage` writes a file's sections into staging keys,
//! `swap` puts them in place; this module holds what they share.

use super::{invalid, SnapshotHeader};
use crate::error::{Error, Result};

/// Bytes per `GETRANGE` of an export (and the file's chunk size).
pub(crate) const READ_CHUNK: u64 = 1 << 20;

/// A staging key's TTL, renewed at every piece written: how long an interrupted import's keys
/// stay.
pub(crate) const STAGING_TTL_MS: u64 = 120_000;

/// One key of a filter, as a section of a snapshot.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The section's shard, role and meta, which say where it goes back.
    pub(crate) shard: u32,
    pub(crate) role: String,
    pub(crate) meta: String,
    /// The key in Redis.
    pub(crate) key: String,
    /// The most bytes it can hold (a longer key is not this filter's).
    pub(crate) max_bytes: u64,
    /// A hash (a growing filter's counts) rather than a string: its fields go in the section
    /// as text, a line `field=value` each ([`hash_text`]).
    pub(crate) hash: bool,
}

/// The most bytes of a hash's text: its fields are a growing filter's level counts.
pub(super) const MAX_HASH_TEXT: u64 = 64 << 10;

/// A hash's fields as a section's text: `field=value` lines, by field (numeric order).
pub(super) fn hash_text(mut fields: Vec<(u64, u64)>) -> Vec<u8> {
    fields.sort_unstable();
    fields
        .iter()
        .map(|(field, value)| format!("{field}={value}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The fields of a section's text (see [`hash_text`]).
pub(crate) fn parse_hash_text(text: &[u8]) -> Result<Vec<(u64, u64)>> {
    let bad = || invalid("a hash section that is not lines of field=value".to_owned());
    let text = std::str::from_utf8(text).map_err(|_| bad())?;
    text.lines()
        .map(|line| {
            let (field, value) = line.split_once('=').ok_or_else(bad)?;
            Ok((
                field.parse().map_err(|_| bad())?,
                value.parse().map_err(|_| bad())?,
            ))
        })
        .collect()
}

/// How an import puts the file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportMode {
    /// The filter becomes the file's: its keys replaced, atomically per slot group.
    Replace,
    /// The file's items are added to the filter (its bits ORed in), range by range
    /// ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), 128 KiB by default:
    /// no command holds the server longer than one range's OR, about 0.5 ms). Each range is
    /// atomic, the merge is not: bits only get set, so a concurrent reader sees a subset of the
    /// final bits, never one lost; an importer stopped midway leaves some ranges merged, and
    /// merging the file again finishes the job.
    Merge,
}

/// What an export or an import moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transferred {
    /// Bytes of the snapshot file written or read.
    pub file_bytes: u64,
    /// Bytes of the filter's keys (their lengths in Redis).
    pub filter_bytes: u64,
}

/// A section read from a file into its staging key.
#[derive(Debug, Clone)]
pub(crate) struct Staged {
    /// The filter's key it replaces, and its staging key.
    pub(crate) target: String,
    pub(crate) staging: String,
    pub(crate) len: u64,
    pub(crate) ttl_ms: Option<u64>,
    /// The moment (server time, ms) the key is to expire, when the kind knows it better than
    /// the file's relative TTL (a window's generation expires with its epoch).
    pub(crate) expire_at_ms: Option<u64>,
    /// The type the filter's key holds: a string, or the hash of a growing filter's counts
    /// (staged by the caller, not by [`stage`]).
    pub(crate) hash: bool,
    /// A merge's section, staged by ranges (set by [`stage`]; `None` from `place`).
    pub(crate) pieces: Option<Pieces>,
}

/// A section staged for a merge: a key per range of `range` bytes that holds a bit
/// (`STAGING:FIRST`, [`piece_key`]), in the order of the section.
#[derive(Debug, Clone)]
pub(crate) struct Pieces {
    pub(crate) range: u64,
    /// The first byte of each range staged.
    pub(crate) firsts: Vec<u64>,
}

/// The key of the piece of `staging` starting at byte `first`.
pub(super) fn piece_key(staging: &str, first: u64) -> String {
    format!("{staging}:{first}")
}

/// The scratch key of a merge into the key `staging` stands beside.
pub(super) fn scratch_key(staging: &str) -> String {
    format!("{staging}:or")
}

impl Staged {
    /// The TTL as the swap scripts take it: ms from now (> 0), none (-1), or the negated
    /// moment to expire at (< -1).
    pub(crate) fn ttl_arg(&self) -> i64 {
        match (self.expire_at_ms, self.ttl_ms) {
            (Some(at), _) => -i64::try_from(at.max(2)).unwrap_or(i64::MAX),
            (None, Some(ttl)) => i64::try_from(ttl).unwrap_or(i64::MAX),
            (None, None) => -1,
        }
    }

    /// Every key this section may have put in Redis: its staging key, or its pieces and the
    /// merge's scratch key.
    pub(super) fn keys(&self) -> Vec<String> {
        match &self.pieces {
            None => vec![self.staging.clone()],
            Some(pieces) => pieces
                .firsts
                .iter()
                .map(|&first| piece_key(&self.staging, first))
                .chain([scratch_key(&self.staging)])
                .collect(),
        }
    }
}

/// The stored parameters a swap checks and sets: their key, the key whose bits show a filter
/// without parameters, and the parameters.
#[derive(Debug, Clone)]
pub(crate) struct Params<'a> {
    pub(crate) key: &'a str,
    pub(crate) bare: &'a str,
    pub(crate) fingerprint: &'a str,
}

/// What a swap answered when it wrote nothing.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Other parameters stored (`None`: bits without any).
    Params(Option<String>),
}

/// One slot group's staged keys and the filter's keys there that the file does not have.
#[derive(Debug, Clone, Default)]
pub(crate) struct Group {
    pub(crate) staged: Vec<Staged>,
    pub(crate) extra: Vec<String>,
}

/// A file of another kind, with other parameters or over another shard count: refused before
/// anything is written.
pub(crate) fn check_header(
    header: &SnapshotHeader,
    key: &str,
    kind: &str,
    fingerprint: &str,
    shards: u32,
) -> Result<()> {
    if header.kind == kind && header.params == fingerprint && header.shards == shards {
        return Ok(());
    }
    Err(Error::FileMismatch {
        key: key.to_owned(),
        file: format!(
            "a {} filter with {} over {} shard(s)",
            header.kind, header.params, header.shards
        ),
        filter: format!("a {kind} filter with {fingerprint} over {shards} shard(s)"),
    })
}

/// The mismatch a key longer than its section may be means: `what` of another filter (a
/// generation, a segment) at the filter `key` whose parameters are `fingerprint`.
pub(crate) fn too_long(
    key: &str,
    fingerprint: &str,
    what: &str,
    stored: &Stored,
    len: u64,
) -> Error {
    Error::ParamsMismatch {
        key: key.to_owned(),
        stored: format!("a {what} {} of {len} bytes", stored.key),
        requested: fingerprint.to_owned(),
    }
}

/// A name for one import's staging keys: the time and the process.
pub(crate) fn nonce() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}.{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}
