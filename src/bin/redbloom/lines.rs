//! Items from a file: one per line, raw bytes, in batches (SPEC.md §3).

use std::io::{self, BufRead};

/// Reads items from `reader`: a line's bytes without its trailing `\n` (and one `\r` before it)
/// are the item; empty lines are skipped; no UTF-8 requirement.
pub(crate) struct LineBatches<R> {
    reader: R,
    batch: usize,
    bytes_read: u64,
    done: bool,
}

impl<R: BufRead> LineBatches<R> {
    /// Batches of at most `batch` items (at least 1).
    pub(crate) fn new(reader: R, batch: usize) -> Self {
        LineBatches {
            reader,
            batch: batch.max(1),
            bytes_read: 0,
            done: false,
        }
    }

    /// Bytes consumed so far, for progress.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    fn next_batch(&mut self) -> io::Result<Vec<Vec<u8>>> {
        let mut items = Vec::with_capacity(self.batch);
        while items.len() < self.batch {
            let mut line = Vec::new();
            let n = self.reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                self.done = true;
                break;
            }
            self.bytes_read += n as u64;
            if line.last() == Some(&b'\n') {
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
            }
            if !line.is_empty() {
                items.push(line);
            }
        }
        Ok(items)
    }
}

impl<R: BufRead> Iterator for LineBatches<R> {
    type Item = io::Result<Vec<Vec<u8>>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_batch() {
            Ok(items) if items.is_empty() => None,
            Ok(items) => Some(Ok(items)),
            Err(err) => {
                self.done = true;
                Some(Err(err))
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
}
