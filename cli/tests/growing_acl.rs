//! ACL users and growing filters (SPEC.md §4 "growing"), on a private redis-server: a user
//! granted only the growing filter's key patterns and the commands of its [`AclKind::COMMANDS`]
//! works end to end (library and CLI, a filter of one key and one of 4 shards: single items,
//! batches that make several levels, info, expire and the levels made after it, clear, `WAIT`,
//! `bench`); each of those commands is needed by some operation, and so is each key pattern; a
//! user without access to the keys gets `Error::NoPermission` and writes nothing. The dense
//! add's `BITOP` is optional: without it big adds take the per-item script, with the same
//! answers. docs/security.md's growing paragraph is this file's grant list. The tests every
//! kind has are written once in `kinds/acl.rs`; this file describes the growing kind to them.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use kinds::acl::{self, assert_noperm, fresh_key, manager, set_user, user_url, AclKind, UserCli};
use kinds::{count, items};
use redbloom::kind::Growing;
use redbloom::{Bloom, GrowingBloom, KeyTtl};
use redis::aio::ConnectionManager;
use serde_json::json;
use std::time::Duration;

/// The dense add's grant beyond [`AclKind::COMMANDS`] (its scratch keys `{counts}:scratch:i`
/// are under [`AclKind::KEYS`]' level patterns): the merge script's `BITOP`. Optional: refused,
/// big batches go by the per-item script.
const DENSE_COMMANDS: &[&str] = &["bitop"];

impl AclKind for Growing {
    const PREFIX: &'static str = "gr";
    /// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
    const COMMANDS: &'static [(&'static str, &'static str)] = &[
        (
            "evalsha",
            "add (script); clear, expire; a sharded filter's parameters check",
        ),
        (
            "eval",
            "any script after NOSCRIPT; the dense add's merge (inside MULTI); WAIT's routing",
        ),
        (
            "hlen",
            "checks (the levels, beside the reads); add, clear, expire (in Lua)",
        ),
        (
            "hget",
            "add (in Lua: the newest level's count); exact answers across retries (a write's \
             record)",
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
            "add (in Lua: a new level, the newest level's count); exact answers across retries",
        ),
        (
            "hgetall",
            "info (the levels' counts); the dense add (the counts read)",
        ),
        (
            "getrange",
            "a check of a big batch (the levels read whole); the dense add",
        ),
        (
            "get",
            "the first check of a filter of one key (its stored parameters), add, clear, expire \
             (in Lua); a sharded filter's parameters check",
        ),
        (
            "set",
            "the first add (in Lua: stores the parameters); a new level after expire (SET PX \
             NX); a sharded filter's SET NX GET beside each write; the dense add's scratch keys",
        ),
        (
            "exists",
            "the first check and add of a filter of one key (the bare key); a sharded filter's \
             parameters check",
        ),
        (
            "type",
            "add (in Lua: a new level's key checked to hold no other type first)",
        ),
        (
            "bitfield_ro",
            "checks (GET u1 per level); add (in Lua: an item's bits in a level)",
        ),
        ("bitfield", "add (in Lua: sets an item's bits)"),
        (
            "pttl",
            "add (in Lua: a new level gets the filter's TTL); info",
        ),
        ("bitcount", "info (bits set per level)"),
        ("strlen", "info (bytes per level)"),
        ("del", "clear (in Lua; a sharded filter's parameters)"),
        (
            "pexpire",
            "expire (in Lua; a sharded filter's parameters); exact answers (a ring slot's TTL)",
        ),
        (
            "multi",
            "adds of a big batch (the dense add: the levels read, then the merge, each a \
             transaction); refused, redis-rs loses the connection instead of reporting NOPERM",
        ),
        ("exec", "with multi"),
        ("wait", "wait_for_replicas"),
        ("info", "the eviction check before the first write"),
        (
            "unlink",
            "exact answers across retries (in Lua: a ring slot of an older epoch)",
        ),
    ];
    /// Without one of these every operation works, but writes no longer record their answers
    /// across retries ([`Bloom::exact_retries`](redbloom::Bloom::exact_retries)).
    const EXACT_ONLY: &'static [&'static str] = &["time", "hmget", "hdel", "unlink"];
    /// The bare key (declared by the scripts of a filter of one key, which refuse another
    /// kind's bits there), the stored parameters `{KEY}:redbloom:LEN:KEY:params` (of either),
    /// the levels and their counts of a filter of one key `{KEY}:redbloom:LEN:KEY:grow:HASH[:i]`,
    /// and a sharded filter's `{rbI.N}:redbloom:LEN:{rbI.N}:KEY:shard:I/S:grow:HASH[:i]`.
    const KEYS: &'static [&'static str] = &[
        "~gr:*",
        "~{gr:*}:redbloom:*:gr:*:params",
        "~{gr:*}:redbloom:*:gr:*:grow:*",
        "~{rb*}:redbloom:*:gr:*:shard:*:grow:*",
    ];
    const OPTIONAL: &'static [&'static str] = &[];
    const DOCUMENTED: &'static str =
        "ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:*:KEY:params ~{KEY}:redbloom:*:KEY:grow:*";
    const DOCUMENTED_KEY: &'static str = "crawl:frontier";
    const FLAGS: &'static [&'static str] = &["--growth", "2"];
    const CAPACITY: &'static str = "1000";
    const BIG: &'static str = "big";
    const REFUSED_CLI_KEYS: &'static str = "*gr:x*";
    const MINIMAL_PW: &'static str = "growing-minimal-PW-5772";
    const OTHER_PW: &'static str = "growing-otherkeys-PW-4669";

    /// A growing filter whose first level holds 1,000 items (all shards together).
    fn builder(key: &str, shards: u32) -> redbloom::Builder<Growing> {
        GrowingBloom::builder(key)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .growth(2)
            .shards(shards)
    }

    /// Of one key and then of 4 shards (each cleared after): checks of a new filter, single
    /// items, small batches, a batch of 20,000 items (five levels, several scripts per key),
    /// info, expire and a level made after it, clear, and writes with `WAIT`.
    async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
        let conn = manager(url).await;
        let small = items("s", 4);
        let big = items("b", 20_000);
        let more = items("m", 20_000);
        for shards in [1, 4] {
            let frontier = Self::build(conn.clone(), key, shards)?;
            assert!(!frontier.exists("one").await?);
            assert!(frontier.add("one").await?);
            assert!(frontier.exists("one").await?);
            assert!(!frontier.add("one").await?);
            assert_eq!(frontier.add_many(&small).await?, [true; 4]);
            assert_eq!(frontier.exists_many(&small).await?, [true; 4]);
            let new = count(&frontier.add_many(&big).await?);
            assert!(new > 19_700, "{new}");
            assert_eq!(count(&frontier.exists_many(&big).await?), big.len());
            let info = frontier.info().await?;
            assert!(info.levels >= 5, "{info:?}");
            assert_eq!(info.items, new as u64 + 5, "{info:?}");
            assert!(
                info.filter.bits_set > 0 && info.filter.bytes > 0,
                "{info:?}"
            );
            assert_eq!(info.filter.ttl, KeyTtl::Persistent);
            assert!(frontier.expire(Duration::from_secs(600)).await?);
            // Another 20,000: at least one level more, made with the filter's TTL.
            assert!(count(&frontier.add_many(&more).await?) > 19_700);
            let grown = frontier.info().await?;
            assert!(grown.levels > info.levels, "{grown:?}");
            let ttl = grown.filter.ttl.as_secs().unwrap();
            assert!((590..=600).contains(&ttl), "{ttl}");
            assert!(frontier.clear().await?);
            assert!(!frontier.exists("one").await?);
        }
        for shards in [1, 4] {
            let waiting = Self::builder(key, shards)
                .wait_for_replicas(0, Duration::from_millis(100))
                .build(conn.clone())?;
            assert!(waiting.add("x").await?);
            assert!(count(&waiting.add_many(&big).await?) > 19_700);
            assert!(waiting.clear().await?);
        }
        Ok(())
    }

    fn cli_end_to_end(cli: &UserCli, file: &str) {
        cli.answers(&["exists", "x"], 1, "absent", json!(1));
        cli.loads_checks_adds(file, 20_000, "line:7");
        let out = cli.info();
        assert!(out["levels"].as_u64().unwrap() >= 5, "{out}");
        cli.expires(false);
        let bench = ["bench", "--items", "3000", "--concurrency", "2", "--op"];
        let adds = [&bench[..], &["add", "--batch", "10"]].concat();
        cli.answers(&adds, 0, "items", json!(3_000));
        let checks = [&bench[..], &["exists"]].concat();
        cli.answers(&checks, 0, "items", json!(3_000));
        let wait = ["--wait-replicas", "0", "--timeout", "1", "add", "z"];
        cli.answers(&wait, 0, "new", json!(1));
        cli.clears();
    }

    async fn refused_too(bloom: &Bloom<ConnectionManager, Growing>, what: &str, _: &[String]) {
        let result = bloom.exists_many(&["a", "b"]).await;
        assert_noperm(&format!("{what} exists_many"), result, Self::OTHER_PW);
    }

    async fn own_keys_work(conn: ConnectionManager) {
        let own = Self::build(conn, "other:frontier", 1).unwrap();
        assert!(own.add("a").await.unwrap());
        assert!(own.exists("a").await.unwrap());
    }

    fn refused_verbs(file: &str) -> Vec<Vec<&str>> {
        let bench = [
            "bench",
            "--op",
            "add",
            "--items",
            "10",
            "--concurrency",
            "1",
        ];
        vec![
            vec!["add", "a"],
            vec!["exists", "a"],
            vec!["load", file],
            vec!["check", file],
            vec!["info"],
            vec!["expire", "60"],
            vec!["clear"],
            bench.to_vec(),
        ]
    }
}

/// See [`acl::each_command_is_needed_and_together_they_are_enough`]; and without MULTI and
/// EXEC, which that cannot test one by one, big adds fail.
#[tokio::test]
async fn each_command_is_needed_and_together_they_are_enough() {
    let (_server, mut admin, url) =
        acl::each_command_is_needed_and_together_they_are_enough::<Growing>().await;

    // Without MULTI and EXEC, big adds fail (the dense add's transactions), whatever the
    // error redis-rs makes of the refused MULTI.
    let rules = Growing::grant(Growing::MINIMAL_PW, &["multi", "exec"], None);
    set_user(&mut admin, "minimal", &rules).await;
    for shards in [1, 4] {
        let frontier =
            Growing::build(manager(&url).await, &fresh_key("gr", "nomulti"), shards).unwrap();
        let result = frontier.add_many(&items("b", 20_000)).await;
        assert!(
            result.is_err(),
            "{shards} shard(s): a big add without MULTI and EXEC: {:?}",
            result.map(|flags| count(&flags))
        );
    }
}

/// See [`acl::the_documented_line_is_the_tested_one_and_works`].
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    acl::the_documented_line_is_the_tested_one_and_works::<Growing>().await;
}

/// See [`acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing`].
#[tokio::test]
async fn a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing() {
    acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing::<Growing>().await;
}

/// With the dense grant ([`DENSE_COMMANDS`]) a big add goes dense (its bits merged by
/// `BITOP`); without it, by the per-item script, with the same answers, counts, levels and
/// bits; either way every item is found, and a level made after `expire` keeps the TTL.
#[tokio::test]
async fn the_dense_grant_is_optional() {
    let (server, mut admin) = acl::acl_server().await;
    let url = user_url(&server, "dense", Growing::MINIMAL_PW);
    let big = items("b", 20_000);
    let more = items("m", 20_000);
    let grant = || Growing::grant(Growing::MINIMAL_PW, &[], None);
    let mut full = grant();
    full.extend(DENSE_COMMANDS.iter().map(|c| format!("+{c}")));
    let cases = [("every grant", full), ("without the dense grant", grant())];
    let mut outcomes = Vec::new();
    for (what, rules) in cases {
        set_user(&mut admin, "dense", &rules).await;
        for shards in [1, 4] {
            let what = format!("{what}, {shards} shard(s)");
            let frontier =
                Growing::build(manager(&url).await, &fresh_key("gr", "dense"), shards).unwrap();
            let merges = common::calls(&mut admin, "bitop").await;
            let answers = frontier.add_many(&big).await.unwrap();
            let new = count(&answers);
            assert!(new > 19_700, "{what}: {new} new");
            let merged = common::calls(&mut admin, "bitop").await - merges;
            match what.starts_with("every") {
                true => assert!(merged >= u64::from(shards), "{what}: {merged} BITOP"),
                false => assert_eq!(merged, 0, "{what}"),
            }
            assert_eq!(count(&frontier.exists_many(&big).await.unwrap()), big.len());
            let info = frontier.info().await.unwrap();
            assert_eq!(info.items, new as u64, "{what}: {info:?}");
            assert!(info.levels >= 5, "{what}: {info:?}");
            assert!(frontier.expire(Duration::from_secs(600)).await.unwrap());
            assert!(count(&frontier.add_many(&more).await.unwrap()) > 19_700);
            let grown = frontier.info().await.unwrap();
            assert!(grown.levels > info.levels, "{what}: {grown:?}");
            let ttl = grown.filter.ttl.as_secs();
            assert!(
                ttl.is_some_and(|t| (590..=600).contains(&t)),
                "{what}: {ttl:?}"
            );
            outcomes.push((
                shards,
                answers,
                (info.levels, info.items, info.filter.bits_set),
                (grown.levels, grown.items, grown.filter.bits_set),
            ));
            assert!(frontier.clear().await.unwrap());
        }
    }
    let (dense, per_item) = outcomes.split_at(2);
    assert!(
        dense == per_item,
        "the same answers, counts and bits either way: {:?} vs {:?}",
        dense.iter().map(|o| (o.0, &o.2, &o.3)).collect::<Vec<_>>(),
        per_item
            .iter()
            .map(|o| (o.0, &o.2, &o.3))
            .collect::<Vec<_>>()
    );
}

/// A dense add refused by the ACL (no `BITOP`: the merge script stops there) leaves nothing
/// behind, as the counting filter's refused swap leaves no scratch key: the batch goes by the
/// per-item script, and no `{counts}:scratch:i` key is left.
#[tokio::test]
async fn a_refused_merge_leaves_no_scratch_key() {
    let (server, mut admin) = acl::acl_server().await;
    let url = user_url(&server, "dense", Growing::MINIMAL_PW);
    let rules = Growing::grant(Growing::MINIMAL_PW, &[], None);
    set_user(&mut admin, "dense", &rules).await;
    let big = items("b", 20_000);
    for shards in [1, 4] {
        let frontier =
            Growing::build(manager(&url).await, &fresh_key("gr", "refused"), shards).unwrap();
        assert!(count(&frontier.add_many(&big).await.unwrap()) > 19_700);
        let scratch = acl::keys(&mut admin, "*scratch*").await;
        assert!(scratch.is_empty(), "{shards} shard(s): left {scratch:?}");
        assert!(frontier.clear().await.unwrap());
    }
}
