//! Checks that read the newest generation first, with a plain `BITFIELD_RO`, when most of the
//! items checked lately were there.
//!
//! A generation's key exists only while the generation is live (it expires the moment it
//! leaves the window, by the server's clock), so an item whose bits are all set in the key of
//! the generation the client takes for the current one is present, without the script's
//! clock or its walk of the older generations. A check by the script costs the server about
//! twice what the same check by a plain `BITFIELD_RO` does (each offset goes into Lua and out
//! again through `redis.call`: BENCHMARKS.md "The newest generation first"), so where the
//! items checked are mostly recent ones (an event seen again within the window, a page
//! crawled again), reading that one key first and sending the script only the items not found
//! there costs the server less. Where most are not found (a blacklist, mostly absent items),
//! the read would be paid on top of the script: the part then goes by the script alone, and
//! tries the read again every [`SAMPLE`] checks.

use std::sync::atomic::{AtomicU32, Ordering};

/// Every how many checks a part that found too few items in the newest generation reads it
/// first again, to learn whether the items checked have changed.
pub(super) const SAMPLE: u32 = 32;

/// Whether a part's checks read the newest generation first: 0 while the last read found at
/// least half of its items there, else the checks since it did not (starting at 1, so that a
/// new part's first read comes at its [`SAMPLE`]th check).
#[derive(Debug)]
pub(crate) struct Newest(AtomicU32);

impl Default for Newest {
    fn default() -> Self {
        Newest(AtomicU32::new(1))
    }
}

impl Newest {
    /// Whether this check reads the newest generation first.
    pub(super) fn tries(&self) -> bool {
        if self.0.load(Ordering::Relaxed) == 0 {
            return true;
        }
        self.0
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SAMPLE)
    }

    /// A read of the newest generation found `found` of `of` items.
    pub(super) fn found(&self, found: usize, of: usize) {
        let enough = found * 2 >= of;
        match enough {
            true => self.0.store(0, Ordering::Relaxed),
            false => {
                // The count of checks goes on from where it was (or starts, after reads that
                // found enough).
                let _ = self
                    .0
                    .compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
            }
        }
    }
}

/// Per item of a `BITFIELD_RO … GET u1 …` reply of `k` bits an item: whether all its bits are
/// set.
pub(super) fn all_set(reply: &redis::Value, k: usize, items: usize) -> Option<Vec<bool>> {
    let redis::Value::Array(bits) = reply else {
        return None;
    };
    if bits.len() != k * items {
        return None;
    }
    bits.chunks(k)
        .map(|item| {
            item.iter().try_fold(true, |all, bit| match bit {
                redis::Value::Int(0) => Some(false),
                redis::Value::Int(1) => Some(all),
                _ => None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_part_reads_first_while_enough_is_found_and_samples_when_not() {
        let newest = Newest::default();
        // A new part: the script alone, until its SAMPLEth check.
        let first: Vec<bool> = (0..SAMPLE).map(|_| newest.tries()).collect();
        assert_eq!(first.iter().filter(|&&t| t).count(), 1);
        assert!(first[SAMPLE as usize - 1]);
        newest.found(5, 10);
        assert!(
            (0..20).all(|_| newest.tries()),
            "found enough: always first"
        );
        newest.found(4, 10);
        let after: Vec<bool> = (0..2 * SAMPLE).map(|_| newest.tries()).collect();
        assert_eq!(after.iter().filter(|&&t| t).count(), 2, "{after:?}");
    }

    #[test]
    fn an_item_is_found_when_its_k_bits_are_set() {
        let reply = Value::Array(
            [1, 1, 1, 0, 1, 1, 0, 0, 0]
                .iter()
                .map(|&b| Value::Int(b))
                .collect(),
        );
        assert_eq!(all_set(&reply, 3, 3), Some(vec![true, false, false]));
        assert_eq!(all_set(&reply, 3, 2), None, "a reply of another length");
        assert_eq!(all_set(&Value::Nil, 3, 3), None);
    }
}
