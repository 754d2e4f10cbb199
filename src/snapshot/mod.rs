//! Snapshot files (SPEC.md §5): a filter of any kind, its parameters and its bytes, in one
//! versioned, checksummed, chunked file that streams to any `AsyncWrite` and back from any
//! `AsyncRead`: the file format (no Redis), and `transfer`, which moves a filter's keys (as
//! sections its kind names) to a file and back. Nothing here knows a kind: each kind's folder
//! says which keys are its sections and where they go back (`core/transfer.rs` runs it).
//!
//! The format, byte by byte: docs/snapshot-format.md.

mod chunk;
mod dump;
mod error;
mod export;
mod format;
mod generations;
mod idle;
mod input;
mod reader;
mod stage;
pub(crate) mod strings;
mod swap;
mod transfer;
mod writer;

#[cfg(test)]
mod tests;

pub use self::{
    error::SnapshotError,
    format::{SectionHeader, SnapshotHeader},
    reader::SnapshotReader,
    transfer::{ImportMode, Transferred},
    writer::SnapshotWriter,
};

pub(crate) use self::dump::{
    chunk_meta, export_dumps, missing_dump_instead, stage_dumps, FirstLink, CHUNK, DUMP_COMMANDS,
    MAX_CHUNK, MODULE_TYPE,
};
pub(crate) use self::export::export;
pub(crate) use self::generations::{server_now, Generations, WindowPart};
pub(crate) use self::idle::{Idle, IDLE_INPUT};
pub(crate) use self::stage::{drop_staged, stage};
pub(crate) use self::swap::swap_checked;
pub(crate) use self::transfer::{check_header, nonce, too_long, Group, Params, Staged, Stored};

#[cfg(test)]
pub(crate) use self::transfer::parse_hash_text;

/// A file that does not hold what it should.
pub(crate) fn invalid(what: String) -> crate::Error {
    crate::Error::Snapshot(SnapshotError::InvalidInput(what))
}
