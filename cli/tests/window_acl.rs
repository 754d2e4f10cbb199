//! ACL users and window filters (SPEC.md §4 "window"), on a private redis-server: a user granted
//! only the window filter's key patterns and the commands of its [`AclKind::COMMANDS`] works end
//! to end (library and CLI, a filter of one key and a sharded one: single items, small batches,
//! dense batches, info, expire, clear, `WAIT`); each of those commands is needed by some
//! operation, and so is each key pattern; a user without access to the keys gets
//! `Error::NoPermission` and writes nothing. docs/security.md's window paragraph is this file's
//! grant list. The tests every kind has are written once in `kinds/acl.rs`; this file
//! describes the window kind to them.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use kinds::acl::{self, fresh_key, manager, set_user, user_url, AclKind, UserCli};
use kinds::items;
use redbloom::kind::Window;
use redbloom::{Bloom, Error, KeyTtl, WindowBloom};
use redis::aio::ConnectionManager;
use serde_json::json;
use std::time::Duration;

const NOEXPIRY_PW: &str = "window-noexpiry-PW-6022";

/// A window of `window` for 10,000 items per window, of `shards` shards.
fn window_of(key: &str, window: Duration, shards: u32) -> redbloom::Builder<Window> {
    WindowBloom::builder(key, window)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(shards)
}

impl AclKind for Window {
    const PREFIX: &'static str = "bf";
    /// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
    const COMMANDS: &'static [(&'static str, &'static str)] = &[
        (
            "evalsha",
            "add (script); clear, expire; a sharded filter's parameters check",
        ),
        (
            "eval",
            "dense add (merge script, inside MULTI); any script after NOSCRIPT; WAIT's routing",
        ),
        ("evalsha_ro", "exists, info (read-only scripts)"),
        (
            "eval_ro",
            "exists of a big batch (the dense check's script); read-only scripts after NOSCRIPT",
        ),
        (
            "time",
            "every script (in Lua: the server's clock; the record's ring epoch)",
        ),
        (
            "get",
            "every script (in Lua: the stored parameters); dense add (generations before)",
        ),
        (
            "set",
            "first write (in Lua: stores the parameters); dense add (scratch key); sharded SET NX \
             GET",
        ),
        (
            "exists",
            "exists, add (in Lua: which generations exist); first write (in Lua: the bare key); \
             info, clear, expire (in Lua)",
        ),
        ("bitfield", "add (in Lua: sets the items' bits)"),
        (
            "bitfield_ro",
            "exists, add (in Lua: the items' bits in a generation)",
        ),
        (
            "pttl",
            "add (in Lua: a new generation's expiry, capped by the filter's TTL); info",
        ),
        (
            "pexpireat",
            "dense add (in Lua: the expiry again after BITOP); optional: refused, adds go by the \
             per-item script, which creates a generation with SET ... PXAT",
        ),
        (
            "pexpire",
            "expire (in Lua); a sharded filter's parameters; exact answers (a ring slot's TTL)",
        ),
        (
            "del",
            "clear (in Lua; a sharded filter's parameters); dense add (scratch key)",
        ),
        (
            "type",
            "clear, expire (in Lua: the keys' type checked first)",
        ),
        ("bitcount", "info (in Lua)"),
        ("strlen", "info (in Lua)"),
        (
            "bitop",
            "dense add (in Lua); optional: refused, adds go by the per-item script",
        ),
        ("getrange", "exists of a big batch (dense read)"),
        ("multi", "dense add"),
        ("exec", "dense add"),
        ("wait", "wait_for_replicas"),
        ("info", "the eviction check before the first write"),
        (
            "hget",
            "exact answers across retries (in Lua: a write's record and its ring slot's epoch)",
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
    const EXACT_ONLY: &'static [&'static str] = &["hget", "hmget", "hdel", "hset", "unlink"];
    /// The bare key (declared by the scripts of a filter of one key, which must not hold another
    /// kind's bits), the companions `{KEY}:redbloom:*` (the parameters, the generations
    /// `…:gen:HASH:<epoch>` and the dense add's scratch key of a filter of one key; a sharded
    /// filter's parameters), and a sharded filter's shards' companions
    /// `{rbI.N}:redbloom:LEN:{rbI.N}:KEY:shard:I/S:*`.
    const KEYS: &'static [&'static str] = &[
        "~bf:*",
        "~{bf:*}:redbloom:*",
        "~{rb*}:redbloom:*:bf:*:shard:*",
    ];
    /// Only the dense merge uses them, and a merge refused (before it writes anything) goes by
    /// the per-item script.
    const OPTIONAL: &'static [&'static str] = &["bitop", "pexpireat"];
    const DOCUMENTED: &'static str = "ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:* ~{rb*}";
    const DOCUMENTED_KEY: &'static str = "orders:recent";
    const FLAGS: &'static [&'static str] = &["--window", "60s"];
    const CAPACITY: &'static str = "10000";
    const BIG: &'static str = "dense";
    const REFUSED_CLI_KEYS: &'static str = "bf*";
    const MINIMAL_PW: &'static str = "window-minimal-PW-3141";
    const OTHER_PW: &'static str = "window-otherkeys-PW-1729";

    /// A window of 60 s for 10,000 items per window.
    fn builder(key: &str, shards: u32) -> redbloom::Builder<Window> {
        window_of(key, Duration::from_secs(60), shards)
    }

    /// Of one key and then of 4 shards (each cleared after): single items, small batches (the
    /// per-item scripts), batches of twice the capacity (the dense add and check), info, expire,
    /// a dense add after it, clear, and writes with `WAIT`.
    async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
        let conn = manager(url).await;
        let small = items("s", 4);
        let big = items("b", 20_000);
        for shards in [1, 4] {
            let recent = Self::build(conn.clone(), key, shards)?;
            assert!(recent.add("one").await?);
            assert!(recent.exists("one").await?);
            assert_eq!(recent.add_many(&small).await?, [true; 4]);
            assert_eq!(recent.exists_many(&small).await?, [true; 4]);
            let new = recent.add_many(&big).await?;
            assert!(new.iter().filter(|&&n| n).count() > 19_000);
            assert!(recent.exists_many(&big).await?.iter().all(|&p| p));
            let info = recent.info().await?;
            assert!(
                info.filter.bits_set > 0 && !info.parts.is_empty(),
                "{info:?}"
            );
            // The parameters of a filter of one key expire with its newest generation; a
            // sharded filter's, in a slot of their own, do not.
            match shards {
                1 => assert!(matches!(info.filter.ttl, KeyTtl::Expires(_)), "{info:?}"),
                _ => assert_eq!(info.filter.ttl, KeyTtl::Persistent),
            }
            assert!(recent.expire(Duration::from_secs(600)).await?);
            let ttl = recent.info().await?.filter.ttl.as_secs().unwrap();
            assert!((590..=600).contains(&ttl), "{ttl}");
            // A dense add after expire keeps every generation expiring.
            recent.add_many(&items("m", 20_000)).await?;
            let info = recent.info().await?;
            assert!(
                info.parts
                    .iter()
                    .all(|p| matches!(p.ttl, KeyTtl::Expires(_))),
                "{info:?}"
            );
            assert!(recent.clear().await?);
            assert!(!recent.exists("one").await?);
        }
        for shards in [1, 4] {
            let waiting = Self::builder(key, shards)
                .wait_for_replicas(0, Duration::from_millis(100))
                .build(conn.clone())?;
            assert!(waiting.add("x").await?);
            let new = waiting.add_many(&big).await?;
            assert!(new.iter().filter(|&&n| n).count() > 19_000);
            assert!(waiting.clear().await?);
        }
        Ok(())
    }

    fn cli_end_to_end(cli: &UserCli, file: &str) {
        cli.loads_checks_adds(file, 20_000, "line:7");
        let out = cli.info();
        assert_eq!(out["generations"], json!(4), "{out}");
        cli.expires(true);
    }

    async fn refused_too(_: &Bloom<ConnectionManager, Window>, _: &str, _: &[String]) {}

    async fn own_keys_work(conn: ConnectionManager) {
        let own = Self::build(conn, "other:recent", 1).unwrap();
        assert!(own.add("a").await.unwrap());
    }

    fn refused_verbs(_: &str) -> Vec<Vec<&str>> {
        vec![
            vec!["add", "a"],
            vec!["exists", "a"],
            vec!["info"],
            vec!["clear"],
        ]
    }
}

/// See [`acl::each_command_is_needed_and_together_they_are_enough`].
#[tokio::test]
async fn each_command_is_needed_and_together_they_are_enough() {
    acl::each_command_is_needed_and_together_they_are_enough::<Window>().await;
}

/// See [`acl::the_documented_line_is_the_tested_one_and_works`].
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    acl::the_documented_line_is_the_tested_one_and_works::<Window>().await;
}

/// See [`acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing`].
#[tokio::test]
async fn a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing() {
    acl::a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing::<Window>().await;
}

/// A dense add refused by the ACL (here: without `PEXPIREAT`, or without `PTTL`) is refused
/// before it writes anything (the merge script proves `PEXPIREAT` on its scratch key first),
/// so its fallback to the per-item script reports the right flags, and every generation it
/// leaves expires. (Before the fix, the merge had ORed the batch in when `PEXPIREAT` was
/// refused: the fallback then found every bit set, returned `Ok` with no item new, and the
/// generation never expired.)
#[tokio::test]
async fn a_merge_refused_after_its_bitop_is_not_taken_for_one_refused_before() {
    let (server, mut admin) = acl::acl_server().await;
    let url = user_url(&server, "noexpiry", NOEXPIRY_PW);
    let mut failures = Vec::new();
    for missing in ["pexpireat", "pttl"] {
        let rules = Window::grant(NOEXPIRY_PW, &[missing], None);
        set_user(&mut admin, "noexpiry", &rules).await;
        for shards in [1, 4] {
            let key = fresh_key("bf", &format!("no-{missing}"));
            // Generations of 20 minutes: the batch and its retry land in one.
            let recent = window_of(&key, Duration::from_secs(3600), shards)
                .build(manager(&url).await)
                .unwrap();
            let big = items("first", 20_000);
            let result = recent.add_many(&big).await;
            let pattern = match shards {
                1 => format!("{}*", common::companion(&key, "gen:")),
                _ => format!("{{rb*}}:redbloom:*:{key}:shard:*:gen:*"),
            };
            let mut persistent = Vec::new();
            for gen in acl::keys(&mut admin, &pattern).await {
                if common::pttl(&mut admin, &gen).await == -1 {
                    persistent.push(gen);
                }
            }
            let what = format!("without {missing}, {shards} shard(s)");
            match &result {
                // Told: what a single add gets (its script fails after setting the bits too).
                Err(Error::NoPermission(_)) => {}
                Ok(new) if new.iter().filter(|&&n| n).count() > 19_000 && persistent.is_empty() => {
                }
                Ok(new) => failures.push(format!(
                    "{what}: Ok with {} of 20000 new, generations without a TTL: {persistent:?}",
                    new.iter().filter(|&&n| n).count()
                )),
                Err(err) => failures.push(format!("{what}: {err:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
