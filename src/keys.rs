//! Names of the keys kept beside a filter, in the same Redis Cluster slot.

use crate::error::{Error, Result};

/// The key `suffix` beside `key`, hashed to `key`'s cluster slot: `key` keeps its hash tag when
/// it has one (`{user}:seen` gives `{user}:seen:SUFFIX`); otherwise the whole key becomes the
/// tag (`seen` gives `{seen}:SUFFIX`, whose slot is that of `seen`). A key that Redis hashes
/// whole but that cannot be a tag itself, because it holds a `}` (`{}x`, `a}b`: no tag by
/// Redis's rule), gets the first tag `{rbslot.N}` of its slot: `{rbslot.N}:KEY:SUFFIX`.
pub(crate) fn sidecar(key: &str, suffix: &str) -> String {
    if hash_tag(key).is_some() {
        format!("{key}:{suffix}")
    } else if !key.contains('}') {
        format!("{{{key}}}:{suffix}")
    } else {
        format!("{{{}}}:{key}:{suffix}", slot_tag(slot(key)))
    }
}

/// The first tag `rbslot.N` (N = 0, 1, …) that hashes to `target`: a name in a chosen slot for
/// the keys beside a key whose own name cannot be a tag. At most a few tens of thousands of
/// CRC16s of a dozen bytes, once per slot and process: the names of a write's records are
/// made per command, so the tags found are kept.
fn slot_tag(target: u16) -> String {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex, PoisonError};
    static FOUND: LazyLock<Mutex<HashMap<u16, String>>> = LazyLock::new(Mutex::default);
    let known = FOUND
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&target)
        .cloned();
    known.unwrap_or_else(|| {
        let tag = (0u64..)
            .map(|n| format!("rbslot.{n}"))
            .find(|tag| slot(tag) == target)
            .expect("every slot is reached");
        FOUND
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(target, tag.clone());
        tag
    })
}

/// The part of a key name that marks redbloom's own keys: the companions kept beside a filter
/// (`{KEY}:redbloom:params`, `{KEY}:redbloom:scratch`) and those of the kinds to come.
pub(crate) const RESERVED: &str = ":redbloom:";

/// Refuses a filter at a key that some filter uses for itself: a companion key (its name holds
/// `:redbloom:`) or a shard's key (`{rbI.N}:KEY:shard:I/S`). Writing bits there would corrupt
/// that other filter.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the key.
pub(crate) fn check_not_reserved(key: &str) -> Result<()> {
    if key.contains(RESERVED) {
        return Err(Error::InvalidConfig(format!(
            "the key {key:?} is a companion key that redbloom keeps beside a filter (its name \
             holds {RESERVED:?}), not a filter; open the filter by its own key"
        )));
    }
    if is_shard_key(key) {
        return Err(Error::InvalidConfig(format!(
            "the key {key:?} is one shard of a sharded filter, not a filter; open the filter by \
             its own key with its shard count"
        )));
    }
    Ok(())
}

/// Whether `key` has the shape of [`shard_key`]'s names: `{rbI.N}:…:shard:I/S`.
fn is_shard_key(key: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = key.strip_prefix("{rb") else {
        return false;
    };
    let Some((tag, rest)) = rest.split_once("}:") else {
        return false;
    };
    let Some((index, n)) = tag.split_once('.') else {
        return false;
    };
    let Some((_, tail)) = rest.rsplit_once(":shard:") else {
        return false;
    };
    let Some((i, shards)) = tail.split_once('/') else {
        return false;
    };
    digits(index) && digits(n) && digits(i) && digits(shards)
}

/// The Redis Cluster hash slot of `key` (CRC16/XMODEM of its hash tag, or of the whole key,
/// modulo 16384), as `CLUSTER KEYSLOT` computes it.
pub(crate) fn slot(key: &str) -> u16 {
    let hashed = hash_tag(key).unwrap_or(key);
    let mut crc: u16 = 0;
    for &byte in hashed.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The key of shard `index` of `shards` of the filter `key`: a name whose hash tag (first, so
/// that `key`'s own tag does not count) hashes into the `index`-th of `shards` equal ranges of
/// the 16384 slots, so that a cluster whose masters own equal slot ranges holds an equal share
/// of the shards.
pub(crate) fn shard_key(key: &str, index: u32, shards: u32) -> String {
    let range = |slot: u16| (u32::from(slot) * shards / 16384) == index;
    let tag = (0u64..)
        .map(|n| format!("rb{index}.{n}"))
        .find(|tag| range(slot(tag)))
        .expect("every range of slots is reached");
    format!("{{{tag}}}:{key}:shard:{index}/{shards}")
}

/// The hash tag Redis Cluster hashes instead of the whole key: the text between the first `{`
/// and the next `}`, when that is not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_cluster_slots() {
        // CRC16/XMODEM("123456789") = 0x31C3; Redis Cluster's reference vector.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(
            slot("foo{}{bar}"),
            slot("foo{}{bar}"),
            "an empty tag hashes the whole key"
        );
    }

    #[test]
    fn shards_spread_over_equal_slot_ranges() {
        for shards in [2u32, 3, 8, 16] {
            for index in 0..shards {
                let key = shard_key("seen", index, shards);
                assert_eq!(u32::from(slot(&key)) * shards / 16384, index, "{key}");
                assert!(key.contains(":seen:shard:"), "{key}");
            }
        }
        // The filter's own hash tag does not pull its shards together.
        let a = slot(&shard_key("{t}:x", 0, 2));
        let b = slot(&shard_key("{t}:x", 1, 2));
        assert!(a < 8192 && b >= 8192);
    }

    #[test]
    fn companion_and_shard_keys_cannot_be_filters() {
        for key in [
            "{foo}:redbloom:params",
            "{foo}:redbloom:scratch",
            "{user}:seen:redbloom:params",
            &sidecar("seen", "redbloom:params"),
            &shard_key("seen", 3, 8),
            &shard_key("{t}:x", 0, 2),
        ] {
            let err = check_not_reserved(key).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig(_)), "{key}");
            assert!(err.to_string().contains(key), "{err}");
        }
        for key in [
            "seen",
            "{foo}:params",
            "redbloom",
            "app:redbloom",
            "{rb1.2}:x",
            "{rbx.2}:seen:shard:1/2",
            "seen:shard:1/2",
        ] {
            assert!(check_not_reserved(key).is_ok(), "{key}");
        }
    }

    #[test]
    fn sidecars_share_the_keys_slot() {
        assert_eq!(sidecar("seen", "p"), "{seen}:p");
        assert_eq!(sidecar("{user}:seen", "p"), "{user}:seen:p");
        assert_eq!(sidecar("a{b", "p"), "{a{b}:p");
        assert_eq!(hash_tag("{a{b}:p"), Some("a{b"));
        assert_eq!(hash_tag("x{}y{z}"), None, "an empty first tag means no tag");
        // Keys Redis hashes whole, with a '}' that keeps them from being a tag.
        let odd = sidecar("x{}y{z}", "p");
        assert!(
            odd.starts_with("{rbslot.") && odd.ends_with(":x{}y{z}:p"),
            "{odd}"
        );
        assert_eq!(
            sidecar("{}x", "redbloom:params"),
            sidecar("{}x", "redbloom:params")
        );
        assert_ne!(
            sidecar("{}x", "p"),
            sidecar("{}y", "p"),
            "one name per filter"
        );
        for key in [
            "seen",
            "{user}:seen",
            "a{b",
            "x:{t}",
            "{}x",
            "a}b",
            "x{}y{z}",
            "}",
            "{}",
        ] {
            assert_eq!(slot(&sidecar(key, "redbloom:params")), slot(key), "{key}");
            assert!(
                check_not_reserved(&sidecar(key, "redbloom:params")).is_err(),
                "{key}"
            );
            assert!(!is_shard_key(&sidecar(key, "p")), "{key}");
        }
    }
}
