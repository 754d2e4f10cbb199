//! Snapshot files (SPEC.md §5): a filter of any kind, its parameters and its bytes, in one
//! versioned, checksummed, chunked file that streams to any `AsyncWrite` and back from any
//! `AsyncRead`: the file format (no Redis), and `transfer`, which moves a filter's keys to a
//! file and back for the kinds (`strings`: plain and counting filters).
//!
//! The format, byte by byte: docs/snapshot-format.md.

mod chunk;
mod error;
mod format;
mod growing;
mod input;
mod reader;
mod strings;
mod transfer;
mod window;
mod writer;

#[cfg(test)]
mod tests;

pub use self::{
    error::SnapshotError,
    format::{SectionHeader, SnapshotHeader},
    reader::SnapshotReader,
    strings::OfflineBloom,
    transfer::{ImportMode, Transferred},
    writer::SnapshotWriter,
};
