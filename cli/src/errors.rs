//! The library's errors in the command line's words: where the library's message names one of
//! its calls (`shared_with_go(true)`, `accept_eviction(true)`, `Bloom::adopt_legacy_names`,
//! a `ConnectionManager`), the line names the flag or command that does it here; a RedisBloom
//! key opened as another kind says to add `--module`, and a cluster node's `MOVED` to use
//! `--cluster`.

use redbloom::Error;

/// The line for `err` where the library's own words do not suit the command line; `None`
/// where they do.
pub(crate) fn in_flags(err: &Error) -> Option<String> {
    Some(match err {
        Error::ForeignString { key, bytes } => format!(
            "key {key:?} holds a string of {bytes} bytes with no stored parameters: not a filter \
             redbloom made, so it is left alone; if it is a go-zero filter shared with Go, say \
             so with --shared-with-go"
        ),
        Error::Evictable { key, policy, ttl } => format!(
            "the server holding filter {key:?} may evict its keys ({policy}{}), and a filter \
             that loses keys forgets items; nothing was written: set maxmemory-policy \
             noeviction on the server, or accept the risk with --accept-eviction",
            match ttl {
                true => ", which evicts keys with a TTL such as this filter's",
                false => "",
            }
        ),
        Error::LegacyNames { key, other, legacy } => format!(
            "filter {key:?} may be one an earlier redbloom made under the names {legacy}* that \
             the keys {key:?} and {other:?} shared, and nothing tells which key it belongs to: \
             nothing was read or written; if it is {key:?}'s, run `redbloom --key {key} \
             migrate`, else open it with --key {other}"
        ),
        Error::FilterFull { .. } => format!(
            "{err}; start a new filter with more room (a larger --capacity or --growth, or \
             more --shards)"
        ),
        Error::Closed(_) => "the connection to Redis closed at every try for --retry-for \
                             (a proxy in front of a server that is down?)"
            .to_owned(),
        Error::WrongType {
            found, expected, ..
        } if is_module_type(found) && !expected.split(" or ").any(is_module_type) => format!(
            "{err}: it is a RedisBloom (BF.*) filter; add --module to open it (with \
             --capacity N --fpr P, which must agree with it, or without a size when redbloom \
             made it)"
        ),
        // A node of a Redis Cluster at --url that the connection's check let through (an ACL
        // that refuses INFO): the slot's node answered.
        Error::Redis(source) if moved(source) => "Redis answered MOVED: --url names one node \
             of a Redis Cluster, and the filter's keys are on another; give a node's URL with \
             --cluster instead of --url"
            .to_owned(),
        _ => return None,
    })
}

/// Whether the server answered `MOVED`, to one command or to one of a pipeline's.
fn moved(err: &redbloom::redis::RedisError) -> bool {
    err.code() == Some("MOVED")
        || err
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, e)| e.code() == "MOVED"))
}

/// Whether `found` (as `TYPE` names it) is a module's Bloom filter.
fn is_module_type(found: &str) -> bool {
    redbloom::MODULE_KEY_TYPES.contains(&found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No line names a library call: `name(…)`, `Builder::`, `Bloom::`, `ConnectionManager`.
    #[test]
    fn the_lines_name_flags_not_library_calls() {
        let lines = [
            in_flags(&Error::ForeignString {
                key: "k".into(),
                bytes: 3,
            }),
            in_flags(&Error::Evictable {
                key: "k".into(),
                policy: "allkeys-lru".into(),
                ttl: true,
            }),
            in_flags(&Error::LegacyNames {
                key: "k".into(),
                other: "{k}".into(),
                legacy: "{k}:redbloom:".into(),
            }),
            in_flags(&Error::FilterFull {
                key: "k".into(),
                added: 2,
                reason: "a growing filter whose 2 levels have all taken their 30 items per shard"
                    .into(),
            }),
        ];
        let flags = [
            "--shared-with-go",
            "--accept-eviction",
            "redbloom --key k migrate",
            "--capacity",
        ];
        for (line, flag) in lines.iter().zip(flags) {
            let line = line.as_deref().expect("a line of the CLI's own");
            assert!(line.contains(flag), "{flag} in {line}");
            for call in [
                "(true)",
                "Builder::",
                "Bloom::",
                "ConnectionManager",
                "max_levels",
            ] {
                assert!(!line.contains(call), "{call} in {line}");
            }
        }
    }
}
