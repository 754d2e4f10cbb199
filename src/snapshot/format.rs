//! The file's constants and the contents of its blocks: which fields, in which order, how each is
//! encoded (big-endian integers; strings as a `u16` length then UTF-8 bytes). Pure functions;
//! the framing around a block (tag, length, checksums) is the writer's and the reader's.
//! docs/snapshot-format.md is the reference; the test `format_is_pinned_byte_for_byte` keeps
//! the two in step.

use std::time::{SystemTime, UNIX_EPOCH};

use super::SnapshotError;

/// The file's first 8 bytes.
pub(super) const MAGIC: [u8; 8] = *b"RBLOOMSN";
/// The format version this code writes, and the only one it reads.
pub(super) const VERSION: u16 = 1;
/// The tag of the header block, the file's first block.
pub(super) const TAG_HEADER: u8 = b'H';
/// The tag of a section header block.
pub(super) const TAG_SECTION: u8 = b'S';
/// The tag of the end block, the file's last.
pub(super) const TAG_END: u8 = b'E';
/// The most content bytes of a header or section header block.
pub(super) const MAX_BLOCK: usize = 64 * 1024;
/// The exact content length of the end block.
pub(super) const END_LEN: usize = 4 + 8;
/// The length of a chunk's prefix: raw length, encoding, stored length, CRC of the raw bytes.
pub(super) const CHUNK_PREFIX: usize = 4 + 1 + 4 + 4;
/// The most raw bytes in one chunk, and the size the writer cuts sections into.
pub(super) const MAX_CHUNK: usize = 1 << 20;
/// A section's TTL field when the key has none.
const NO_TTL: i64 = -1;

/// What a snapshot file is of: the filter's kind and parameters, written once at its start.
///
/// The format does not interpret `kind` or `params`: the filter's code writes them and, on
/// import, compares them with its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    /// The filter's kind: `"plain"`, `"window"`, `"growing"` or `"counting"`.
    pub kind: String,
    /// Every parameter of the filter, as the kind's code spells them (for example
    /// `"kind=growing capacity=1000 fpr=0.01 ..."`).
    pub params: String,
    /// How many shards the filter has (1 for an unsharded filter); every section's shard is
    /// below it.
    pub shards: u32,
    /// When the snapshot was taken, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// What wrote the file, for example `"redbloom 0.1.0"`.
    pub writer: String,
}

impl SnapshotHeader {
    /// A header taken now (`created_ms`) by this crate (`writer` is `"redbloom <version>"`).
    pub fn new(kind: impl Into<String>, params: impl Into<String>, shards: u32) -> Self {
        let created_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self {
            kind: kind.into(),
            params: params.into(),
            shards,
            created_ms,
            writer: concat!("redbloom ", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }

    /// Writes the header block's content into `out` (cleared first).
    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), SnapshotError> {
        if self.shards == 0 {
            return Err(invalid(
                "the header's shard count must be at least 1".into(),
            ));
        }
        out.clear();
        put_str(out, &self.kind, "kind")?;
        put_str(out, &self.params, "params")?;
        out.extend_from_slice(&self.shards.to_be_bytes());
        out.extend_from_slice(&self.created_ms.to_be_bytes());
        put_str(out, &self.writer, "writer")?;
        check_block_len(out.len(), "the header")
    }

    /// Reads a header block's content; the error says which field is wrong.
    pub(super) fn decode(content: &[u8]) -> Result<Self, String> {
        let mut fields = Fields(content);
        let header = Self {
            kind: fields.string("kind")?,
            params: fields.string("params")?,
            shards: u32::from_be_bytes(fields.array("shard count")?),
            created_ms: u64::from_be_bytes(fields.array("creation time")?),
            writer: fields.string("writer")?,
        };
        fields.end()?;
        if header.shards == 0 {
            return Err("the shard count is 0".into());
        }
        Ok(header)
    }
}

/// One saved part of a filter (usually one Redis key): which shard, what it is, and how many raw
/// bytes follow in its chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionHeader {
    /// The shard the part belongs to, below [`SnapshotHeader::shards`].
    pub shard: u32,
    /// What the part is, for the kind's code: `"bits"`, `"counts"`, `"level"`, `"generation"`...
    pub role: String,
    /// Free text the kind's code uses (a generation's epoch, a hash's fields encoded by the
    /// caller...); empty if none.
    pub meta: String,
    /// The section's length in raw bytes: exactly this many bytes are written, and read back.
    pub len: u64,
    /// The key's time to live in milliseconds, `None` if it has none.
    pub ttl_ms: Option<u64>,
}

/// How errors name a section: `section "bits" of shard 0 (meta "…", 1024 bytes)`.
impl std::fmt::Display for SectionHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "section {:?} of shard {}", self.role, self.shard)?;
        if !self.meta.is_empty() {
            write!(f, " (meta {:?})", self.meta)?;
        }
        write!(f, ", {} bytes", self.len)
    }
}

impl SectionHeader {
    /// A section of `len` bytes for `shard` and `role`, with no meta and no TTL.
    pub fn new(shard: u32, role: impl Into<String>, len: u64) -> Self {
        Self {
            shard,
            role: role.into(),
            meta: String::new(),
            len,
            ttl_ms: None,
        }
    }

    /// Writes the section header block's content into `out` (cleared first).
    pub(super) fn encode(&self, out: &mut Vec<u8>) -> Result<(), SnapshotError> {
        let ttl = match self.ttl_ms {
            None => NO_TTL,
            Some(ms) => i64::try_from(ms)
                .map_err(|_| invalid(format!("the TTL {ms} ms does not fit in an i64")))?,
        };
        out.clear();
        out.extend_from_slice(&self.shard.to_be_bytes());
        put_str(out, &self.role, "role")?;
        put_str(out, &self.meta, "meta")?;
        out.extend_from_slice(&self.len.to_be_bytes());
        out.extend_from_slice(&ttl.to_be_bytes());
        check_block_len(out.len(), "a section header")
    }

    /// Reads a section header block's content; the error says which field is wrong.
    pub(super) fn decode(content: &[u8]) -> Result<Self, String> {
        let mut fields = Fields(content);
        let shard = u32::from_be_bytes(fields.array("shard")?);
        let role = fields.string("role")?;
        let meta = fields.string("meta")?;
        let len = u64::from_be_bytes(fields.array("length")?);
        let ttl = i64::from_be_bytes(fields.array("TTL")?);
        fields.end()?;
        let ttl_ms = match ttl {
            NO_TTL => None,
            ms => Some(u64::try_from(ms).map_err(|_| format!("the TTL {ms} is below -1"))?),
        };
        Ok(Self {
            shard,
            role,
            meta,
            len,
            ttl_ms,
        })
    }
}

/// The end block's content: what the reader must have seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EndBlock {
    /// How many sections the file has.
    pub(super) sections: u32,
    /// The sum of their lengths.
    pub(super) total: u64,
}

impl EndBlock {
    /// The block's content.
    pub(super) fn encode(self) -> [u8; END_LEN] {
        let mut out = [0; END_LEN];
        out[..4].copy_from_slice(&self.sections.to_be_bytes());
        out[4..].copy_from_slice(&self.total.to_be_bytes());
        out
    }

    /// Reads the block's content.
    pub(super) fn decode(content: &[u8]) -> Result<Self, String> {
        let mut fields = Fields(content);
        let end = Self {
            sections: u32::from_be_bytes(fields.array("section count")?),
            total: u64::from_be_bytes(fields.array("total length")?),
        };
        fields.end()?;
        Ok(end)
    }
}

/// The content length allowed for a block with `tag`, as (least, most); `None` for an unknown
/// tag.
pub(super) fn block_len_range(tag: u8) -> Option<(usize, usize)> {
    match tag {
        TAG_HEADER | TAG_SECTION => Some((0, MAX_BLOCK)),
        TAG_END => Some((END_LEN, END_LEN)),
        _ => None,
    }
}

fn invalid(message: String) -> SnapshotError {
    SnapshotError::InvalidInput(message)
}

/// Appends `s` as a `u16` length and its bytes.
fn put_str(out: &mut Vec<u8>, s: &str, field: &str) -> Result<(), SnapshotError> {
    let len = u16::try_from(s.len()).map_err(|_| {
        invalid(format!(
            "the {field} string is {} bytes; the most is {}",
            s.len(),
            u16::MAX
        ))
    })?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

fn check_block_len(len: usize, what: &str) -> Result<(), SnapshotError> {
    if len > MAX_BLOCK {
        return Err(invalid(format!(
            "{what} takes {len} bytes; the most is {MAX_BLOCK}"
        )));
    }
    Ok(())
}

/// The fields of a block's content, read from the front.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("the {field} field runs past the block's end"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn string(&mut self, field: &str) -> Result<String, String> {
        let len = u16::from_be_bytes(self.array(field)?);
        let bytes = self.take(usize::from(len), field)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| format!("the {field} field is not UTF-8"))
    }

    fn end(self) -> Result<(), String> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(format!("{n} unknown bytes after the block's last field")),
        }
    }
}
