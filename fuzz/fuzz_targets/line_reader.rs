//! The CLI's line reader against a plain model of SPEC.md §3: a line's bytes without its `\n`
//! (and one `\r` before it) are the item; empty lines are skipped; batches hold 1..=B items;
//! an item longer than the limit L stops the reading with an error naming its line (counting
//! every line from 1), after the items before it. The reader sees the input through a buffer of
//! 1..=16 bytes, so lines straddle refills, and in half the runs hands batches over early.
//! `cargo +nightly fuzz run line_reader`
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::BufReader;

#[path = "../../cli/src/lines.rs"]
#[allow(dead_code)]
mod lines;

fuzz_target!(|data: &[u8]| {
    let Some((&[first, second, third], input)) = data.split_first_chunk::<3>() else {
        return;
    };
    let batch = usize::from(first % 9);
    let limit = usize::from(second % 12);
    let buffer = usize::from(third % 16) + 1;
    let max_bytes = if third & 0x10 != 0 {
        usize::from(third >> 5) * (lines::ITEM_OVERHEAD_BYTES + 4) + 1
    } else {
        usize::MAX
    };
    let reader = BufReader::with_capacity(buffer, input);
    let mut batches = lines::LineBatches::with_limits(reader, batch, limit, max_bytes);
    if third & 0x80 != 0 {
        batches = batches.eager();
    }
    let mut got = Vec::new();
    let mut got_err = None;
    for items in batches {
        match items {
            Ok(items) => {
                assert!(got_err.is_none(), "nothing after the error");
                assert!(!items.is_empty() && items.len() <= batch.max(1));
                got.extend(items);
            }
            Err(lines::LineError::TooLong { line, limit: said }) => {
                assert!(got_err.is_none(), "one error");
                assert_eq!(said, limit);
                got_err = Some(line);
            }
            Err(lines::LineError::Read(err)) => panic!("reading a byte slice cannot fail: {err}"),
        }
    }

    let mut want: Vec<Vec<u8>> = Vec::new();
    let mut want_err = None;
    let mut rest = input;
    let mut number = 0u64;
    while !rest.is_empty() {
        number += 1;
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                (line.strip_suffix(b"\r").unwrap_or(line), &rest[end + 1..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        if line.len() > limit {
            want_err = Some(number);
            break;
        }
        if !line.is_empty() {
            want.push(line.to_vec());
        }
        rest = next;
    }
    assert_eq!(got, want);
    assert_eq!(got_err, want_err);
});
