//! Names of the keys kept beside a filter, in the same Redis Cluster slot (SPEC.md §3, "Names,
//! losses and records").
//!
//! A companion of the filter `KEY` (its parameters, generations, levels, records, scratch and
//! lease keys) is named `{TAG}:redbloom:LEN:KEY:NAME`: `TAG` puts it in `KEY`'s slot, `LEN` is
//! the length of `KEY` in bytes, so that the name says where `KEY` ends, and `NAME` says which
//! companion it is. Read from the left (`TAG` ends at the first `}`, `KEY` after `LEN` bytes),
//! the name gives back `KEY` and `NAME`: no two filter keys share a companion, whatever they
//! hold (braces anywhere, empty tags, NUL), and `K` and `{K}` share nothing.
//!
//! Builds before this one named them `{K}:redbloom:NAME` ([`legacy_sidecar`]), which `K` and
//! `{K}` both produce; a filter made under those names is migrated or refused
//! (`core::legacy`).

use crate::error::{Error, Result};

/// The companion `name` of the filter `key` (`{TAG}:redbloom:LEN:KEY:NAME`), hashed to `key`'s
/// cluster slot. `TAG` is `key`'s hash tag when it has one; else `key` itself, when it can be a
/// tag (not empty, no `}`); else the first tag `rbslot.N` of `key`'s slot. `name` may start
/// with `redbloom:` (the older names' marker), which is left out: `sidecar(k, "redbloom:params")`
/// is `sidecar(k, "params")`.
pub(crate) fn sidecar(key: &str, name: &str) -> String {
    let name = name.strip_prefix("redbloom:").unwrap_or(name);
    let tag = match hash_tag(key) {
        Some(tag) => tag.to_owned(),
        None if !key.is_empty() && !key.contains('}') => key.to_owned(),
        None => slot_tag(slot(key)),
    };
    format!("{{{tag}}}:redbloom:{}:{key}:{name}", key.len())
}

/// The name the builds before this one gave the companion `name` of `key` (`name` starting
/// with `redbloom:`): `{KEY}:redbloom:…` for a key without a hash tag (and so also for the key
/// `{KEY}`), `KEY:redbloom:…` for one with a tag, `{rbslot.N}:KEY:redbloom:…` for a key
/// holding a `}` but no tag. Only read, to find filters made under those names.
pub(crate) fn legacy_sidecar(key: &str, name: &str) -> String {
    if hash_tag(key).is_some() {
        format!("{key}:{name}")
    } else if !key.contains('}') {
        format!("{{{key}}}:{name}")
    } else {
        format!("{{{}}}:{key}:{name}", slot_tag(slot(key)))
    }
}

/// The other filter key whose older companions ([`legacy_sidecar`]) are `key`'s too: `{K}` for
/// a key `K` without a tag or a `}`, and `K` for the key `{K}`; `None` for every other key,
/// whose older names were its own.
pub(crate) fn legacy_partner(key: &str) -> Option<String> {
    match hash_tag(key) {
        None if !key.is_empty() && !key.contains('}') => Some(format!("{{{key}}}")),
        Some(tag) if key.len() == tag.len() + 2 => Some(tag.to_owned()),
        _ => None,
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
/// ([`sidecar`]: `{TAG}:redbloom:LEN:KEY:NAME`), and those of the builds before
/// ([`legacy_sidecar`]: `{KEY}:redbloom:NAME`).
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
        assert_eq!(sidecar("seen", "p"), "{seen}:redbloom:4:seen:p");
        assert_eq!(
            sidecar("seen", "redbloom:params"),
            sidecar("seen", "params")
        );
        assert_eq!(
            sidecar("{user}:seen", "p"),
            "{user}:redbloom:11:{user}:seen:p"
        );
        assert_eq!(sidecar("a{b", "p"), "{a{b}:redbloom:3:a{b:p");
        assert_eq!(hash_tag("{a{b}:p"), Some("a{b"));
        assert_eq!(hash_tag("x{}y{z}"), None, "an empty first tag means no tag");
        // Keys Redis hashes whole, with a '}' that keeps them from being a tag.
        let odd = sidecar("x{}y{z}", "p");
        assert!(
            odd.starts_with("{rbslot.") && odd.ends_with(":redbloom:7:x{}y{z}:p"),
            "{odd}"
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
            "",
            "\0",
        ] {
            assert_eq!(slot(&sidecar(key, "redbloom:params")), slot(key), "{key}");
            assert!(
                check_not_reserved(&sidecar(key, "redbloom:params")).is_err(),
                "{key}"
            );
            assert!(!is_shard_key(&sidecar(key, "p")), "{key}");
        }
    }

    /// The case: `q` and `{q}` shared `{q}:redbloom:params`; now each has its own.
    #[test]
    fn a_key_and_its_braced_name_share_nothing() {
        assert_eq!(
            legacy_sidecar("q", "redbloom:params"),
            "{q}:redbloom:params"
        );
        assert_eq!(
            legacy_sidecar("{q}", "redbloom:params"),
            "{q}:redbloom:params"
        );
        assert_ne!(sidecar("q", "params"), sidecar("{q}", "params"));
        assert_eq!(legacy_partner("q").as_deref(), Some("{q}"));
        assert_eq!(legacy_partner("{q}").as_deref(), Some("q"));
        assert_eq!(legacy_partner("a{b").as_deref(), Some("{a{b}"));
        assert_eq!(legacy_partner("{a{b}").as_deref(), Some("a{b"));
        for key in ["{q}:x", "x{q}", "a}b", "", "{}", "{}x"] {
            assert_eq!(legacy_partner(key), None, "{key}");
        }
        for key in ["q", "{q}", "a{b", "{a{b}", "{q}:x", "a}b", ""] {
            if let Some(partner) = legacy_partner(key) {
                assert_eq!(
                    legacy_sidecar(key, "redbloom:params"),
                    legacy_sidecar(&partner, "redbloom:params"),
                    "{key}"
                );
                assert_eq!(legacy_partner(&partner).as_deref(), Some(key));
            }
        }
    }

    /// `KEY` and `NAME` read back from a companion's name: the inverse of [`sidecar`].
    fn parse(companion: &str) -> Option<(&str, &str)> {
        let close = companion.find('}')?;
        let rest = companion[close + 1..].strip_prefix(":redbloom:")?;
        let (len, rest) = rest.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let key = rest.get(..len)?;
        let name = rest.get(len..)?.strip_prefix(':')?;
        Some((key, name))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
        /// No two distinct (key, name) pairs share a companion: the name reads back as the key
        /// and the name it was made of. Every companion hashes to its key's slot and is refused
        /// as a filter key.
        #[test]
        fn companions_are_never_shared(
            key in "(\\{|\\}|:|a|b|\\x00|redbloom|é|[0-9]){0,12}",
            other in "(\\{|\\}|:|a|b|\\x00|redbloom|é|[0-9]){0,12}",
            name in "(params|gen:[0-9a-f]{2}|once:1\\.2|scratch|a:b)",
        ) {
            let companion = sidecar(&key, &name);
            proptest::prop_assert_eq!(parse(&companion), Some((key.as_str(), name.as_str())));
            proptest::prop_assert_eq!(slot(&companion), slot(&key));
            proptest::prop_assert!(check_not_reserved(&companion).is_err());
            if key != other {
                proptest::prop_assert_ne!(&companion, &sidecar(&other, &name));
                proptest::prop_assert_ne!(&companion, &sidecar(&other, "params"));
            }
            proptest::prop_assert_ne!(&companion, &key);
            proptest::prop_assert!(!is_shard_key(&companion));
            let braced = format!("{{{key}}}");
            proptest::prop_assert_ne!(&sidecar(&braced, &name), &companion);
        }
    }
}
