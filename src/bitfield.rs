//! `BITFIELD` commands over bit offsets, and folding their replies into per-item answers.
//!
//! One `BITFIELD key SET u1 o 1 ...` sets the same bits, in the same order, as go-zero's set
//! script's `SETBIT`s, atomically, and replies with every bit's old value, so "was this item
//! new" stays exact. It costs the server about a third of the script (see BENCHMARKS.md).

use redis::{Cmd, Value};

/// The most bit offsets one command carries (1,170 items of the go-zero layout): a batch
/// larger than that goes as several commands, so that no command holds the server for long,
/// nor its memory (one command of 60k items took 133 MiB of a server's memory), nor outlasts
/// a response timeout (`tests/large_batches.rs`). Every kind's commands are bounded by it.
pub const MAX_OFFSETS_PER_COMMAND: usize = 1 << 14;

/// `BITFIELD key SET u1 o 1` for every offset.
pub(crate) fn set(key: &str, offsets: &[u64]) -> Cmd {
    command(key, "BITFIELD", &[], offsets, 4, |cmd, offset| {
        cmd.arg("SET").arg("u1").arg(offset).arg(1);
    })
}

/// `BITFIELD_RO key GET u1 o` for every offset (plain `BITFIELD` when `read_only` is false, for
/// servers older than Redis 6.2).
pub(crate) fn get(key: &str, offsets: &[u64], read_only: bool) -> Cmd {
    command(key, reader(read_only), &[], offsets, 3, |cmd, offset| {
        cmd.arg("GET").arg("u1").arg(offset);
    })
}

/// `BITFIELD key OVERFLOW SAT INCRBY u4 #i 1` for every counter index: 4-bit counters that
/// saturate at 15 (a counting filter's add); the reply is every counter's new value.
pub(crate) fn increment(key: &str, cells: &[u64]) -> Cmd {
    command(
        key,
        "BITFIELD",
        &["OVERFLOW", "SAT"],
        cells,
        4,
        |cmd, cell| {
            let mut buf = [0; 21];
            cmd.arg("INCRBY")
                .arg("u4")
                .arg(counter_name(cell, &mut buf))
                .arg(1);
        },
    )
}

/// `BITFIELD_RO key GET u4 #i` for every counter index (plain `BITFIELD` when `read_only` is
/// false, for servers older than Redis 6.2).
pub(crate) fn get_counters(key: &str, cells: &[u64], read_only: bool) -> Cmd {
    command(key, reader(read_only), &[], cells, 3, |cmd, cell| {
        cmd.arg("GET")
            .arg("u4")
            .arg(counter_name(cell, &mut [0; 21]));
    })
}

/// The read command: `BITFIELD_RO`, or `BITFIELD` on a server older than Redis 6.2.
fn reader(read_only: bool) -> &'static str {
    match read_only {
        true => "BITFIELD_RO",
        false => "BITFIELD",
    }
}

/// `NAME key HEAD...` and `each`'s arguments for every position, in order.
fn command(
    key: &str,
    name: &str,
    head: &[&str],
    positions: &[u64],
    args_per_position: usize,
    each: impl Fn(&mut Cmd, u64),
) -> Cmd {
    let mut cmd = with_capacity(key, positions.len() + head.len(), args_per_position);
    cmd.arg(name).arg(key).arg(head);
    for &position in positions {
        each(&mut cmd, position);
    }
    cmd
}

/// `#i`, `BITFIELD`'s name of 4-bit counter `i`, written into `buf` (no allocation per
/// counter on the per-item path).
fn counter_name(cell: u64, buf: &mut [u8; 21]) -> &[u8] {
    use std::io::Write;
    buf[0] = b'#';
    let mut digits = &mut buf[1..];
    // 20 digits hold any u64: the write cannot run out of room.
    let _ = write!(digits, "{cell}");
    let free = digits.len();
    &buf[..21 - free]
}

/// Folds a reply of `items × k` counter values into one answer per item: after an
/// [`increment`], whether any counter went from 0 to 1 (the item was certainly absent); after
/// a [`get_counters`], whether every counter is above 0. `None` for a reply of another shape.
pub(crate) fn fold_counters(
    reply: &Value,
    k: usize,
    items: usize,
    fold: Fold,
) -> Option<Vec<bool>> {
    let Value::Array(values) = reply else {
        return None;
    };
    if values.len() != items * k {
        return None;
    }
    values
        .chunks(k)
        .map(|item| {
            let mut answer = matches!(fold, Fold::AllOne);
            for value in item {
                let Value::Int(value @ 0..=15) = value else {
                    return None;
                };
                match fold {
                    Fold::AnyZero => answer |= *value == 1,
                    Fold::AllOne => answer &= *value > 0,
                }
            }
            Some(answer)
        })
        .collect()
}

fn with_capacity(key: &str, offsets: usize, args_per_offset: usize) -> Cmd {
    // Each offset takes at most 10 digits, plus "SET"/"GET", "u1" and "1".
    Cmd::with_capacity(2 + offsets * args_per_offset, 16 + key.len() + offsets * 16)
}

/// What a group of `k` bit (or counter) replies means for its item.
#[derive(Clone, Copy)]
pub(crate) enum Fold {
    /// After a `SET`: the item is new when any of its bits was 0 (for counters: when any
    /// went from 0 to 1).
    AnyZero,
    /// After a `GET`: the item may be present when all of its bits are 1 (counters above 0).
    AllOne,
}

/// Folds a reply of `items × k` bit values into one answer per item; `None` when the reply does
/// not have that shape.
pub(crate) fn fold(reply: &Value, k: usize, items: usize, fold: Fold) -> Option<Vec<bool>> {
    let Value::Array(bits) = reply else {
        return None;
    };
    if bits.len() != items * k {
        return None;
    }
    bits.chunks(k)
        .map(|item| {
            let mut zeros = 0;
            for bit in item {
                match bit {
                    Value::Int(0) => zeros += 1,
                    Value::Int(1) => {}
                    _ => return None,
                }
            }
            Some(match fold {
                Fold::AnyZero => zeros > 0,
                Fold::AllOne => zeros == 0,
            })
        })
        .collect()
}

/// Whether a `BITFIELD` reply of bits or counters holds one that is not zero.
pub(crate) fn any_set(reply: &redis::Value) -> bool {
    match reply {
        redis::Value::Array(values) => values
            .iter()
            .any(|v| matches!(v, redis::Value::Int(n) if *n != 0)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_set_tells_a_bit_or_counter_above_zero() {
        use redis::Value;
        let reply = |values: &[i64]| Value::Array(values.iter().map(|&v| Value::Int(v)).collect());
        assert!(!any_set(&reply(&[0, 0, 0])));
        assert!(any_set(&reply(&[0, 1, 0])));
        assert!(any_set(&reply(&[0, 15])));
        assert!(!any_set(&reply(&[])));
        assert!(!any_set(&Value::Nil));
    }

    #[test]
    fn commands_carry_every_offset_in_order() {
        let set = set("f", &[7, 0, 7]).get_packed_command();
        let want = b"*14\r\n$8\r\nBITFIELD\r\n$1\r\nf\r\n\
            $3\r\nSET\r\n$2\r\nu1\r\n$1\r\n7\r\n$1\r\n1\r\n\
            $3\r\nSET\r\n$2\r\nu1\r\n$1\r\n0\r\n$1\r\n1\r\n\
            $3\r\nSET\r\n$2\r\nu1\r\n$1\r\n7\r\n$1\r\n1\r\n";
        assert_eq!(String::from_utf8_lossy(&set), String::from_utf8_lossy(want));
        let get = get("f", &[4294967295], true).get_packed_command();
        let want = b"*5\r\n$11\r\nBITFIELD_RO\r\n$1\r\nf\r\n$3\r\nGET\r\n$2\r\nu1\r\n$10\r\n4294967295\r\n";
        assert_eq!(get, want);
        assert!(
            String::from_utf8_lossy(&super::get("f", &[1], false).get_packed_command())
                .starts_with("*5\r\n$8\r\nBITFIELD\r\n")
        );
    }

    #[test]
    fn counters_are_4_bit_cells_that_saturate() {
        assert_eq!(
            counter_name(u64::MAX, &mut [0; 21]),
            b"#18446744073709551615"
        );
        let incr = String::from_utf8_lossy(&increment("f", &[3]).get_packed_command()).into_owned();
        assert!(incr.contains("OVERFLOW\r\n$3\r\nSAT\r\n$6\r\nINCRBY\r\n$2\r\nu4\r\n$2\r\n#3\r\n"));
        let after = Value::Array([1, 5, 15, 2].map(Value::Int).to_vec());
        assert_eq!(
            fold_counters(&after, 2, 2, Fold::AnyZero),
            Some(vec![true, false])
        );
        assert_eq!(
            fold_counters(&after, 2, 2, Fold::AllOne),
            Some(vec![true, true])
        );
        let zero = Value::Array([0, 5].map(Value::Int).to_vec());
        assert_eq!(fold_counters(&zero, 2, 1, Fold::AllOne), Some(vec![false]));
        let bad = Value::Array([16, 5].map(Value::Int).to_vec());
        assert_eq!(fold_counters(&bad, 2, 1, Fold::AllOne), None);
    }

    #[test]
    fn folds_groups_of_k_bits() {
        let reply = Value::Array([1, 1, 0, 1, 1, 1].map(Value::Int).to_vec());
        assert_eq!(fold(&reply, 3, 2, Fold::AnyZero), Some(vec![true, false]));
        assert_eq!(fold(&reply, 3, 2, Fold::AllOne), Some(vec![false, true]));
        assert_eq!(fold(&reply, 3, 3, Fold::AllOne), None, "wrong length");
        assert_eq!(fold(&Value::Nil, 3, 0, Fold::AllOne), None);
        let odd = Value::Array(vec![Value::Int(2)]);
        assert_eq!(fold(&odd, 1, 1, Fold::AllOne), None, "not a bit");
    }
}
