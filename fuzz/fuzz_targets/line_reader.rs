//! The CLI's line reader against a plain model of SPEC.md §3: a line's bytes without its `\n`
//! (and one `\r` before it) are the item; empty lines are skipped; batches hold 1..=B items.
//! `cargo +nightly fuzz run line_reader`
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/bin/redbloom/lines.rs"]
#[allow(dead_code)]
mod lines;

fuzz_target!(|data: &[u8]| {
    let Some((&first, input)) = data.split_first() else {
        return;
    };
    let batch = usize::from(first % 9);
    let mut got = Vec::new();
    for items in lines::LineBatches::new(input, batch) {
        let items = items.expect("reading a byte slice cannot fail");
        assert!(!items.is_empty() && items.len() <= batch.max(1));
        got.extend(items);
    }

    let mut want: Vec<Vec<u8>> = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                (line.strip_suffix(b"\r").unwrap_or(line), &rest[end + 1..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        if !line.is_empty() {
            want.push(line.to_vec());
        }
        rest = next;
    }
    assert_eq!(got, want);
});
