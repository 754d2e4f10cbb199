//! ACL users and counting filters (SPEC.md §4 "counting"), on a private redis-server: a user
//! granted only the counting filter's key patterns and the commands of its [`AclKind::COMMANDS`]
//! works end to end (library and CLI, a filter of one key and a sharded one: single items, the
//! idempotent insert, removes, batches of several commands, info, expire, clear, `WAIT`); each
//! of those commands is needed by some operation, and so is each key pattern; a user without
//! access to the keys gets `Error::NoPermission` and writes nothing. docs/security.md's
//! counting paragraph is this file's grant list. The tests every kind has are written once in
//! `kinds/acl.rs`; this file describes the counting kind to them.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use kinds::acl::{self, assert_noperm, fresh_key, manager, set_user, user_url, AclKind, UserCli};
use kinds::{count, items};
use redbloom::kind::Counting;
use redbloom::{Bloom, CountingBloom, KeyTtl};
use redis::aio::ConnectionManager;
use serde_json::json;
use std::time::Duration;

/// The dense path's grants, beyond [`AclKind::KEYS`] and [`AclKind::COMMANDS`]: its scratch
/// keys beside a filter of one key, `{KEY}:redbloom:LEN:KEY:swap:*` (a sharded filter's are
/// under the shard pattern already) and the commands its swap script calls. Optional: refused,
/// big batches go by `BITFIELD`.
const DENSE_KEYS: &[&str] = &["~{bf:*}:redbloom:*:bf:*:swap:*"];
const DENSE_COMMANDS: &[&str] = &["bitop", "bitcount", "rename", "persist"];

impl AclKind for Counting {
    const PREFIX: &'static str = "bf";
    /// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
    const COMMANDS: &'static [(&'static str, &'static str)] = &[
        (
            "bitfield",
            "add (OVERFLOW SAT INCRBY u4); remove, add_if_absent (in Lua); WAIT's routing",
        ),
        ("bitfield_ro", "exists (GET u4)"),
        (
            "getrange",
            "info (the counters read whole); exists of a big batch (whole reads)",
        ),
        (
            "pttl",
            "info; exact answers (in Lua: a TTL caps a ring slot's)",
        ),
        (
            "evalsha",
            "remove, add_if_absent, the parameters check, clear, expire",
        ),
        ("eval", "any script after NOSCRIPT"),
        (
            "get",
            "the parameters check, add_if_absent of a filter of one key, clear, expire (in Lua)",
        ),
        (
            "set",
            "adds of a filter of one key and of a sharded one (SET NX GET); the parameters check \
             on a new filter and add_if_absent (in Lua)",
        ),
        (
            "exists",
            "the parameters check on a new filter, add_if_absent (in Lua: the counters' key)",
        ),
        ("strlen", "clear, expire (in Lua: the counters' length)"),
        (
            "type",
            "clear, expire (in Lua: the keys' type checked first)",
        ),
        ("del", "clear (in Lua; a sharded filter's parameters)"),
        (
            "pexpire",
            "expire (in Lua; a sharded filter's parameters); exact answers (a ring slot's TTL)",
        ),
        (
            "multi",
            "adds of a filter of one key (with the parameters' SET NX GET)",
        ),
        ("exec", "adds of a filter of one key"),
        ("wait", "wait_for_replicas"),
        ("info", "the eviction check before the first write"),
        (
            "hget",
            "exact answers across retries (in Lua: a write's record and its ring slot's epoch)",
        ),
        (
            "time",
            "exact answers across retries (in Lua: the ring's epoch)",
        ),
        (
            "hmget",
            "exact answers across retries (in Lua: a ring slot's epoch and start)",
        ),
        (
            "hdel",
            "exact answers across retries (in Lua: the records of answered writes)",
        ),
        (
            "hset",
            "exact answers across retries (in Lua: a write's record, a ring slot's start)",
        ),
        (
            "unlink",
            "exact answers across retries (in Lua: a ring slot of an older epoch)",
        ),
    ];
    /// Without one of these every operation works, but writes no longer record their answers
    /// across retries ([`Bloom::exact_retries`](redbloom::Bloom::exact_retries)).
    const EXACT_ONLY: &'static [&'static str] = &[
        "hget",
        "time",
        "hmget",
        "hdel",
        "hset",
        "unlink",
        "~{bf:*}:redbloom:*:bf:*:once:*",
    ];
    /// The counters of a filter of one key (the key itself), the stored parameters
    /// `{KEY}:redbloom:LEN:KEY:params` (of either), a sharded filter's counters
    /// `{rbI.N}:KEY:shard:I/S` (and, under the same pattern, their companions
    /// `{rbI.N}:redbloom:LEN:{rbI.N}:KEY:shard:I/S:…`), and the records of a filter of one key.
    const KEYS: &'static [&'static str] = &[
        "~bf:*",
        "~{bf:*}:redbloom:*:bf:*:params",
        "~{rb*}:bf:*:shard:*",
        "~{bf:*}:redbloom:*:bf:*:once:*",
    ];
    const OPTIONAL: &'static [&'static str] = &[];
    const DOCUMENTED: &'static str =
        "ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:*:KEY:params ~{rb*}";
    const DOCUMENTED_KEY: &'static str = "users:blocked";
    const FLAGS: &'static [&'static str] = &["--counting"];
    const CAPACITY: &'static str = "20000";
    const BIG: &'static str = "big";
    const REFUSED_CLI_KEYS: &'static str = "bf*";
    const MINIMAL_PW: &'static str = "counting-minimal-PW-2718";
    const OTHER_PW: &'static str = "counting-otherkeys-PW-1618";

    /// A counting filter for 20,000 items.
    fn builder(key: &str, shards: u32) -> redbloom::Builder<Counting> {
        CountingBloom::builder(key)
            .expected_items(20_000)
            .false_positive_rate(0.01)
            .shards(shards)
    }

    /// Of one key and then of 4 shards (each cleared after): single items, the idempotent
    /// insert, removes, small batches, batches of 20,000 items (140,000 counters: several
    /// commands on each key), info, expire, clear, and writes with `WAIT`.
    async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
        let conn = manager(url).await;
        let small = items("s", 4);
        let big = items("b", 20_000);
        for shards in [1, 4] {
            let blocked = Self::build(conn.clone(), key, shards)?;
            assert!(blocked.add("one").await?);
            assert!(blocked.exists("one").await?);
            assert!(blocked.add_if_absent("two").await?);
            assert!(!blocked.add_if_absent("two").await?);
            assert!(blocked.remove("one").await?);
            assert!(!blocked.exists("one").await?);
            assert_eq!(blocked.add_many(&small).await?, [true; 4]);
            assert_eq!(blocked.exists_many(&small).await?, [true; 4]);
            assert_eq!(blocked.add_many_if_absent(&small).await?, [false; 4]);
            assert_eq!(blocked.remove_many(&small).await?, [true; 4]);
            assert!(count(&blocked.add_many(&big).await?) > 19_500);
            assert_eq!(count(&blocked.exists_many(&big).await?), big.len());
            assert_eq!(count(&blocked.add_many_if_absent(&big).await?), 0);
            let info = blocked.info().await?;
            assert!(info.counters_in_use > 50_000, "{info:?}");
            assert_eq!(info.filter.ttl, KeyTtl::Persistent);
            assert!(blocked.expire(Duration::from_secs(600)).await?);
            let ttl = blocked.info().await?.filter.ttl.as_secs().unwrap();
            assert!((590..=600).contains(&ttl), "{ttl}");
            assert_eq!(count(&blocked.remove_many(&big).await?), big.len());
            assert!(blocked.clear().await?);
            assert!(!blocked.exists("two").await?);
        }
        for shards in [1, 4] {
            let waiting = Self::builder(key, shards)
                .wait_for_replicas(0, Duration::from_millis(100))
                .build(conn.clone())?;
            assert!(waiting.add("x").await?);
            assert!(waiting.add_if_absent("y").await?);
            assert!(waiting.remove("x").await?);
            assert!(count(&waiting.add_many(&big).await?) > 19_500);
            assert!(count(&waiting.add_many_if_absent(&small).await?) >= 3);
            assert_eq!(count(&waiting.remove_many(&big).await?), big.len());
            assert!(waiting.clear().await?);
        }
        Ok(())
    }

    fn cli_end_to_end(cli: &UserCli, file: &str) {
        cli.loads_checks_adds(file, 20_000, "line:7");
        cli.answers(&["remove", "x", "y", "x"], 0, "removed", json!(2));
        let out = cli.info();
        assert!(out["counters_in_use"].as_u64().unwrap() > 50_000, "{out}");
        cli.answers(&["unload", file], 0, "removed", json!(20_000));
        let wait = ["--wait-replicas", "0", "--timeout", "1", "add", "z"];
        cli.answers(&wait, 0, "new", json!(1));
        cli.expires(true);
    }

    async fn refused_too(bloom: &Bloom<ConnectionManager, Counting>, what: &str, big: &[String]) {
        let op = |op: &str| format!("{what} {op}");
        let pw = Self::OTHER_PW;
        assert_noperm(&op("add_if_absent"), bloom.add_if_absent("a").await, pw);
        assert_noperm(&op("remove"), bloom.remove("a").await, pw);
        let result = bloom.add_many_if_absent(big).await;
        assert_noperm(&op("add_many_if_absent"), result, pw);
        assert_noperm(&op("exists_many"), bloom.exists_many(&["a", "b"]).await, pw);
        assert_noperm(&op("remove_many"), bloom.remove_many(big).await, pw);
    }

    async fn own_keys_work(conn: ConnectionManager) {
        let own = Self::build(conn, "other:blocked", 1).unwrap();
        assert!(own.add_if_absent("a").await.unwrap());
        assert!(own.remove("a").await.unwrap());
    }

    fn refused_verbs(file: &str) -> Vec<Vec<&str>> {
        vec![
            vec!["add", "a"],
            vec!["exists", "a"],
            vec!["remove", "a"],
            vec!["load", file],
            vec!["unload", file],
            vec!["info"],
            vec!["expire", "60"],
            vec!["clear"],
        ]
    }
}

/// See [`acl::each_command_is_needed_and_together_they_are_enough`].
#[tokio::test]
async fn each_command_is_needed_and_together_they_are_enough() {
    acl::each_command_is_needed_and_together_they_are_enough::<Counting>().await;
}

/// See [`acl::the_documented_line_is_the_tested_one_and_works`].
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    acl::the_documented_line_is_the_tested_one_and_works::<Counting>().await;
}

/// See [`acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing`].
#[tokio::test]
async fn a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing() {
    acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing::<Counting>()
        .await;
}

/// With the dense grants ([`DENSE_KEYS`], [`DENSE_COMMANDS`]) big batches go dense (one swap,
/// a `RENAME`, per key), keep the filter's TTL and leave no scratch key. Without any one of
/// them the swap is refused before it writes, and the batch goes by `BITFIELD` with the same
/// answers: an add counted once (a remove of every item then leaves no counter in use) and
/// no scratch key left.
#[tokio::test]
async fn the_dense_grants_are_optional_and_a_refused_swap_writes_nothing() {
    let (server, mut admin) = acl::acl_server().await;
    let url = user_url(&server, "dense", Counting::MINIMAL_PW);
    let big = items("b", 20_000);
    let full = || {
        let mut rules = Counting::grant(Counting::MINIMAL_PW, &[], None);
        rules.extend(DENSE_KEYS.iter().map(|k| k.to_string()));
        rules.extend(DENSE_COMMANDS.iter().map(|c| format!("+{c}")));
        rules
    };
    let mut cases: Vec<(String, Vec<String>)> = vec![("every grant".into(), full())];
    for missing in DENSE_COMMANDS {
        let rules = full().into_iter().filter(|r| *r != format!("+{missing}"));
        cases.push((format!("without {missing}"), rules.collect()));
    }
    for missing in DENSE_KEYS {
        let rules = full().into_iter().filter(|r| r != missing);
        cases.push((format!("without {missing}"), rules.collect()));
    }
    for (what, rules) in cases {
        set_user(&mut admin, "dense", &rules).await;
        for shards in [1, 4] {
            // A sharded filter's scratch keys are under its shards' pattern.
            let dense = what == "every grant" || (shards > 1 && what.starts_with("without ~"));
            let what = format!("{what}, {shards} shard(s)");
            let blocked =
                Counting::build(manager(&url).await, &fresh_key("bf", "dense"), shards).unwrap();
            let renames = common::calls(&mut admin, "rename").await;
            let new = count(&blocked.add_many(&big).await.unwrap());
            assert!(new > 19_500, "{what}: {new} new");
            let swaps = common::calls(&mut admin, "rename").await - renames;
            assert_eq!(swaps, if dense { u64::from(shards) } else { 0 }, "{what}");
            assert_eq!(count(&blocked.exists_many(&big).await.unwrap()), big.len());
            assert!(blocked.expire(Duration::from_secs(600)).await.unwrap());
            let removed = count(&blocked.remove_many(&big).await.unwrap());
            assert_eq!(removed, big.len(), "{what}");
            let info = blocked.info().await.unwrap();
            assert_eq!(
                info.counters_in_use, 0,
                "{what}: counted once, removed once"
            );
            let ttl = info.filter.ttl.as_secs();
            assert!(
                ttl.is_some_and(|t| (590..=600).contains(&t)),
                "{what}: {ttl:?}"
            );
            let scratch = acl::keys(&mut admin, "*:redbloom:*:swap:*").await;
            assert!(scratch.is_empty(), "{what}: {scratch:?}");
            assert!(blocked.clear().await.unwrap());
        }
    }
}
