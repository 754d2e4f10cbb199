//! Items from a file: one per line, raw bytes, in batches (SPEC.md §3), in bounded memory.
//!
//! An item is at most [`MAX_ITEM_BYTES`] (64 KiB) long. Real items are far shorter: URLs (HTTP
//! servers reject request lines past 8-16 KiB: nginx 8 KiB, Apache 8,190 bytes), Redis keys,
//! e-mail addresses (254 bytes), event ids and UUIDs (tens of bytes); Go's `bufio.Scanner` draws
//! its line limit at the same 64 KiB. A longer line is an error naming it and its number, so a
//! file without newlines (`/dev/zero`, a binary file) fails at once instead of filling memory:
//! the reader never holds more than one line of up to the limit (plus a `\r`) besides its
//! `BufRead`'s own buffer.

use std::fmt;
use std::io::{self, BufRead};

/// The longest item (a line without its `\n` and one `\r` before it), in bytes.
pub(crate) const MAX_ITEM_BYTES: usize = 64 * 1024;

/// What an item costs in memory besides its bytes: its `Vec` (24 bytes) and the allocator's
/// rounding and header; used to bound a batch's and the pipeline's memory.
pub(crate) const ITEM_OVERHEAD_BYTES: usize = 64;

/// An item's cost in memory: its length plus [`ITEM_OVERHEAD_BYTES`].
pub(crate) fn cost(item: &[u8]) -> usize {
    item.len() + ITEM_OVERHEAD_BYTES
}

/// Why reading stopped.
#[derive(Debug)]
pub(crate) enum LineError {
    /// The reader failed.
    Read(io::Error),
    /// Line `line` (counting from 1, empty lines included) holds an item longer than `limit`.
    TooLong { line: u64, limit: usize },
}

impl LineError {
    /// The error as said of `file`: "line 3 of items.txt is longer than …".
    pub(crate) fn describe(&self, file: &str) -> String {
        match self {
            LineError::Read(err) => format!("cannot read {file}: {err}"),
            LineError::TooLong { line, limit } => {
                format!("line {line} of {file} is longer than the {limit}-byte limit for one item")
            }
        }
    }
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::Read(err) => err.fmt(f),
            LineError::TooLong { line, limit } => {
                write!(
                    f,
                    "line {line} is longer than the {limit}-byte limit for one item"
                )
            }
        }
    }
}

/// Reads items from `reader`: a line's bytes without its trailing `\n` (and one `\r` before it)
/// are the item; empty lines are skipped; no UTF-8 requirement; no item is longer than the
/// limit ([`MAX_ITEM_BYTES`] by default).
///
/// Each batch holds 1 to `batch` items, and stops early once its items cost (see [`cost`]) the
/// byte cap, or when [`eager`](LineBatches::eager), once the reader's buffered bytes are used
/// up, so that a batch never waits on a read that may block (a pipe whose writer is slow): what
/// was read is handed over first. Items before a bad line come in a batch of their own, and
/// the error after them.
pub(crate) struct LineBatches<R> {
    reader: R,
    batch: usize,
    max_item: usize,
    max_bytes: usize,
    eager: bool,
    bytes_read: u64,
    /// Lines ended so far (by `\n`), empty ones included.
    lines: u64,
    /// The start of a line whose end the reader has not yet buffered (at most the limit and a
    /// `\r`; empty, without an allocation, between lines).
    line: Vec<u8>,
    error: Option<LineError>,
    done: bool,
}

impl<R: BufRead> LineBatches<R> {
    /// Batches of at most `batch` items (at least 1), items of at most [`MAX_ITEM_BYTES`].
    #[cfg(test)]
    pub(crate) fn new(reader: R, batch: usize) -> Self {
        Self::with_limits(reader, batch, MAX_ITEM_BYTES, usize::MAX)
    }

    /// Batches of at most `batch` items (at least 1) that stop once they cost `max_bytes`;
    /// items of at most `max_item` bytes.
    pub(crate) fn with_limits(reader: R, batch: usize, max_item: usize, max_bytes: usize) -> Self {
        LineBatches {
            reader,
            batch: batch.max(1),
            max_item,
            max_bytes,
            eager: false,
            bytes_read: 0,
            lines: 0,
            line: Vec::new(),
            error: None,
            done: false,
        }
    }

    /// Ends each batch where the reader's buffered bytes end, before a read that may block.
    pub(crate) fn eager(mut self) -> Self {
        self.eager = true;
        self
    }

    /// Bytes consumed so far, for progress.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    fn too_long(&self) -> LineError {
        LineError::TooLong {
            line: self.lines + 1,
            limit: self.max_item,
        }
    }

    /// Ends a line (`ended`: by a `\n`, not by the end of the input); returns its item's cost.
    fn end_line(
        &mut self,
        mut item: Vec<u8>,
        ended: bool,
        items: &mut Vec<Vec<u8>>,
    ) -> Result<usize, LineError> {
        if ended && item.last() == Some(&b'\r') {
            item.pop();
        }
        if item.len() > self.max_item {
            return Err(self.too_long());
        }
        self.lines += 1;
        if item.is_empty() {
            return Ok(0);
        }
        let cost = cost(&item);
        items.push(item);
        Ok(cost)
    }

    fn next_batch(&mut self, items: &mut Vec<Vec<u8>>) -> Result<(), LineError> {
        let mut cost = 0usize;
        // Whether the reader's buffered bytes are used up, so that the next read may block.
        let mut drained = false;
        while items.len() < self.batch && cost < self.max_bytes {
            if self.eager && drained && !items.is_empty() {
                break;
            }
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => return Err(LineError::Read(err)),
            };
            if buf.is_empty() {
                self.done = true;
                if !self.line.is_empty() {
                    let item = std::mem::take(&mut self.line);
                    self.end_line(item, false, items)?;
                }
                break;
            }
            // At most the rest of the limit, plus a `\r` that goes with the `\n`, plus the `\n`;
            // `read_until` on a slice finds it with std's fast `memchr`.
            let room = (self.max_item + 2).saturating_sub(self.line.len());
            let len = buf.len();
            let mut window = &buf[..len.min(room)];
            let n = match window.read_until(b'\n', &mut self.line) {
                Ok(n) => n,
                Err(err) => return Err(LineError::Read(err)),
            };
            self.reader.consume(n);
            self.bytes_read += n as u64;
            if self.line.last() == Some(&b'\n') {
                self.line.pop();
                drained = n == len;
                let mut item = std::mem::take(&mut self.line);
                if item.capacity() > item.len() + 1 {
                    // A line that straddled refills grew by doubling.
                    item.shrink_to_fit();
                }
                cost += self.end_line(item, true, items)?;
            } else if n == room {
                return Err(self.too_long());
            } else {
                drained = true;
            }
        }
        Ok(())
    }
}

impl<R: BufRead> Iterator for LineBatches<R> {
    type Item = Result<Vec<Vec<u8>>, LineError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(err) = self.error.take() {
            return Some(Err(err));
        }
        if self.done {
            return None;
        }
        let mut items = Vec::new();
        match self.next_batch(&mut items) {
            Ok(()) if items.is_empty() => None,
            Ok(()) => Some(Ok(items)),
            Err(err) => {
                self.done = true;
                if items.is_empty() {
                    Some(Err(err))
                } else {
                    self.error = Some(err);
                    Some(Ok(items))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(input: &[u8], batch: usize) -> Vec<Vec<Vec<u8>>> {
        LineBatches::new(input, batch).map(Result::unwrap).collect()
    }

    #[test]
    fn strips_lf_and_crlf_and_skips_empty_lines() {
        let got = items(b"a\r\nb\n\n\r\nc", 10);
        assert_eq!(got, [vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]]);
    }

    #[test]
    fn keeps_raw_bytes_and_inner_carriage_returns() {
        let got = items(b"\xff\xfe\x00\n x \n\r\r\na\rb\n", 10);
        let want: Vec<Vec<u8>> = vec![
            b"\xff\xfe\x00".to_vec(),
            b" x ".to_vec(),
            b"\r".to_vec(),
            b"a\rb".to_vec(),
        ];
        assert_eq!(got, [want]);
    }

    #[test]
    fn batches_hold_at_most_the_batch_size() {
        let input: Vec<u8> = (0..10)
            .flat_map(|i| format!("item{i}\n").into_bytes())
            .collect();
        let sizes: Vec<usize> = items(&input, 4).iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 4, 2]);
        let mut reader = LineBatches::new(&input[..], 0);
        assert_eq!(reader.next().unwrap().unwrap().len(), 1, "batch 0 means 1");
        assert_eq!(reader.bytes_read(), 6);
    }

    #[test]
    fn empty_inputs_give_no_batches() {
        assert!(items(b"", 10).is_empty());
        assert!(items(b"\n\r\n\n", 10).is_empty());
    }

    #[test]
    fn read_errors_are_returned_once() {
        struct Failing;
        impl io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk gone"))
            }
        }
        let mut reader = LineBatches::new(io::BufReader::new(Failing), 10);
        assert!(reader.next().unwrap().is_err());
        assert!(reader.next().is_none());
    }

    /// Every item of `reader`, then the error if any.
    fn drain<R: BufRead>(reader: LineBatches<R>) -> (Vec<Vec<u8>>, Option<String>) {
        let mut got = Vec::new();
        for batch in reader {
            match batch {
                Ok(items) => got.extend(items),
                Err(err) => return (got, Some(err.to_string())),
            }
        }
        (got, None)
    }

    #[test]
    fn items_up_to_the_limit_pass_and_longer_lines_are_named() {
        // At the limit, with and without "\r\n", and across a 3-byte buffer.
        let input = b"abcd\nabcd\r\n\nabcde\nx\n";
        for cap in [1, 2, 3, 64] {
            let reader = io::BufReader::with_capacity(cap, &input[..]);
            let (got, err) = drain(LineBatches::with_limits(reader, 10, 4, usize::MAX));
            assert_eq!(got, [b"abcd".to_vec(), b"abcd".to_vec()], "buffer {cap}");
            assert_eq!(
                err.as_deref(),
                Some("line 4 is longer than the 4-byte limit for one item")
            );
        }
        // The last line, unended: its "\r" is part of the item.
        let (got, err) = drain(LineBatches::with_limits(
            &b"ab\nabcd\r"[..],
            10,
            4,
            usize::MAX,
        ));
        assert_eq!(got, [b"ab".to_vec()]);
        assert_eq!(
            err.as_deref(),
            Some("line 2 is longer than the 4-byte limit for one item")
        );
    }

    #[test]
    fn an_endless_line_fails_in_bounded_memory() {
        let zeros = io::BufReader::with_capacity(8192, io::repeat(0));
        let mut reader = LineBatches::new(zeros, 1000);
        let err = reader.next().unwrap().unwrap_err();
        assert_eq!(
            err.to_string(),
            "line 1 is longer than the 65536-byte limit for one item"
        );
        assert!(reader.line.capacity() <= 2 * MAX_ITEM_BYTES);
        assert!(reader.bytes_read() <= MAX_ITEM_BYTES as u64 + 8192);
        assert!(reader.next().is_none());
    }

    #[test]
    fn batches_stop_at_their_byte_cap_and_where_a_read_would_block() {
        let input = b"aaaa\nbbbb\ncccc\ndddd\n";
        let cap = 2 * cost(b"aaaa");
        let sizes: Vec<usize> = LineBatches::with_limits(&input[..], 10, 64, cap)
            .map(|b| b.unwrap().len())
            .collect();
        assert_eq!(sizes, [2, 2]);
        // A 12-byte buffer holds "aaaa\nbbbb\ncc": the batch ends there, before reading on.
        let reader = io::BufReader::with_capacity(12, &input[..]);
        let sizes: Vec<usize> = LineBatches::new(reader, 10)
            .eager()
            .map(|b| b.unwrap().len())
            .collect();
        assert_eq!(sizes, [2, 2]);
    }
}
