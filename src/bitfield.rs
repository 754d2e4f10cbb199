//! `BITFIELD` commands over bit offsets, and folding their replies into per-item answers.
//!
//! One `BITFIELD key SET u1 o 1 ...` sets the same bits, in the same order, as go-zero's set
//! script's `SETBIT`s, atomically, and replies with every bit's old value, so "was this item
//! new" stays exact. It costs the server about a third of the script (see BENCHMARKS.md).

use redis::{Cmd, Value};

/// `BITFIELD key SET u1 o 1` for every offset.
pub(crate) fn set(key: &str, offsets: &[u64]) -> Cmd {
    let mut cmd = with_capacity(key, offsets.len(), 4);
    cmd.arg("BITFIELD").arg(key);
    for &offset in offsets {
        cmd.arg("SET").arg("u1").arg(offset).arg(1);
    }
    cmd
}

/// `BITFIELD_RO key GET u1 o` for every offset (plain `BITFIELD` when `read_only` is false, for
/// servers older than Redis 6.2).
pub(crate) fn get(key: &str, offsets: &[u64], read_only: bool) -> Cmd {
    let mut cmd = with_capacity(key, offsets.len(), 3);
    cmd.arg(if read_only { "BITFIELD_RO" } else { "BITFIELD" })
        .arg(key);
    for &offset in offsets {
        cmd.arg("GET").arg("u1").arg(offset);
    }
    cmd
}

fn with_capacity(key: &str, offsets: usize, args_per_offset: usize) -> Cmd {
    // Each offset takes at most 10 digits, plus "SET"/"GET", "u1" and "1".
    Cmd::with_capacity(2 + offsets * args_per_offset, 16 + key.len() + offsets * 16)
}

/// What a group of `k` bit replies means for its item.
#[derive(Clone, Copy)]
pub(crate) enum Fold {
    /// After a `SET`: the item is new when any of its bits was 0.
    AnyZero,
    /// After a `GET`: the item may be present when all of its bits are 1.
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

#[cfg(test)]
mod tests {
    use super::*;

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
