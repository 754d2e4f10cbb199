//! ACL users and counting filters (SPEC.md §4 "counting"), on a private redis-server: a user
//! granted only the counting filter's key patterns and the commands of [`COMMANDS`] works end
//! to end (library and CLI, a filter of one key and a sharded one: single items, the
//! idempotent insert, removes, batches of several commands, info, expire, clear, `WAIT`); each
//! of those commands is needed by some operation, and so is each key pattern; a user without
//! access to the keys gets `Error::NoPermission` and writes nothing. docs/security.md's
//! counting paragraph is this file's grant list.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{CountingBloom, Error, KeyTtl};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const MINIMAL_PW: &str = "counting-minimal-PW-2718";
const OTHER_PW: &str = "counting-otherkeys-PW-1618";

/// Every command a counting filter sends, directly or from its Lua scripts (`redis.call` is
/// checked against the ACL too), with what needs it.
/// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
const COMMANDS: &[(&str, &str)] = &[
    (
        "bitfield",
        "add (OVERFLOW SAT INCRBY u4); remove, add_if_absent (in Lua); WAIT's routing",
    ),
    ("bitfield_ro", "exists (GET u4)"),
    (
        "getrange",
        "info (the counters read whole); exists of a big batch (whole reads)",
    ),
    ("pttl", "info"),
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
        "adds of a filter of one key and of a sharded one (SET NX GET); the parameters check on \
         a new filter and add_if_absent (in Lua)",
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
    ("pexpire", "expire (in Lua; a sharded filter's parameters)"),
    (
        "multi",
        "adds of a filter of one key (with the parameters' SET NX GET)",
    ),
    ("exec", "adds of a filter of one key"),
    ("wait", "wait_for_replicas"),
];

/// The key patterns of counting filters at `bf:*`: the counters of a filter of one key (the
/// key itself), the stored parameters `{KEY}:redbloom:params` (of either), and a sharded
/// filter's counters `{rbI.N}:KEY:shard:I/S`.
const KEYS: &[&str] = &["~bf:*", "~{bf:*}:redbloom:params", "~{rb*}:bf:*:shard:*"];

/// The dense path's grants, beyond [`KEYS`] and [`COMMANDS`]: its scratch keys beside a
/// filter of one key (a sharded filter's are under [`KEYS`]' shard pattern already) and the
/// commands its swap script calls. Optional: refused, big batches go by `BITFIELD`.
const DENSE_KEYS: &[&str] = &["~{bf:*}:redbloom:swap:*"];
const DENSE_COMMANDS: &[&str] = &["bitop", "bitcount", "rename", "persist"];

/// A private server (the users change the server's ACL) and an admin connection.
async fn acl_server() -> (RedisServer, MultiplexedConnection) {
    let server = RedisServer::start().expect("redis-server on PATH");
    let admin = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (server, admin)
}

async fn set_user(admin: &mut MultiplexedConnection, user: &str, rules: &[String]) {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(rules)
        .query_async(admin)
        .await
        .unwrap_or_else(|err| panic!("ACL SETUSER {user} {rules:?}: {err}"));
}

/// `redis://USER:PASSWORD@127.0.0.1:PORT`.
fn user_url(server: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}", server.port())
}

/// A connection manager, as the CLI makes.
async fn manager(url: &str) -> ConnectionManager {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(10)))
        .set_number_of_retries(1);
    redis::Client::open(url)
        .unwrap()
        .get_connection_manager_with_config(config)
        .await
        .unwrap_or_else(|err| panic!("cannot connect: {err}"))
}

/// Asserts `result` is `Error::NoPermission` naming the ACL, and never shows `password`.
#[track_caller]
fn assert_noperm<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, password: &str) {
    match result {
        Err(err @ Error::NoPermission(_)) => {
            let source = std::error::Error::source(&err).unwrap().to_string();
            let acl = source.contains("no permissions")
                || source.contains("The user executing the script can't");
            assert!(
                err.to_string().contains("NOPERM") && acl,
                "{what}: {err}: {source}"
            );
            for text in [format!("{err}"), format!("{err:?}"), source] {
                assert!(!text.contains(password), "{what}: the password shows");
            }
        }
        other => panic!("{what}: expected Error::NoPermission, got {other:?}"),
    }
}

/// A key under `bf:` that no other filter of this test run uses.
fn fresh_key(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("bf:{name}:{}", N.fetch_add(1, Ordering::Relaxed))
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}

/// A counting filter for 20,000 items, of `shards` shards.
fn counting(key: &str, shards: u32) -> redbloom::Builder<redbloom::kind::Counting> {
    CountingBloom::builder(key)
        .expected_items(20_000)
        .false_positive_rate(0.01)
        .shards(shards)
}

fn build<C>(conn: C, key: &str, shards: u32) -> redbloom::Result<CountingBloom<C>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    counting(key, shards).build(conn)
}

/// Every operation of a counting filter of one key and of 4 shards, on new keys, through
/// `url`: see [`exercise_key`].
async fn exercise(url: &str) -> redbloom::Result<()> {
    exercise_key(url, &fresh_key("all")).await
}

/// Every operation of a counting filter at `key`, of one key and then of 4 shards (each
/// cleared after): single items, the idempotent insert, removes, small batches, batches of
/// 20,000 items (140,000 counters: several commands on each key), info, expire, clear, and
/// writes with `WAIT`. The first error, if any.
async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
    let conn = manager(url).await;
    let small = items("s", 4);
    let big = items("b", 20_000);
    for shards in [1, 4] {
        let blocked = build(conn.clone(), key, shards)?;
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
        let waiting = counting(key, shards)
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

/// The rules of a user with `password`, the key patterns but `skip_key`, and the commands of
/// [`COMMANDS`] but `skip`.
fn grant(password: &str, skip: Option<&str>, skip_key: Option<&str>) -> Vec<String> {
    let mut rules = vec![format!(">{password}")];
    rules.extend(
        KEYS.iter()
            .filter(|k| Some(**k) != skip_key)
            .map(|k| k.to_string()),
    );
    rules.push("-@all".to_owned());
    for (command, _) in COMMANDS {
        if Some(*command) != skip {
            rules.push(format!("+{command}"));
        }
    }
    rules
}

/// The CLI, every verb of a counting filter, on one of `shards` shards through `url`.
fn cli_end_to_end(url: &str, shards: &str, file: &str) {
    let key = fresh_key("cli");
    let size = [
        "--counting",
        "--capacity",
        "20000",
        "--fpr",
        "0.01",
        "--shards",
        shards,
        "--json",
    ];
    let cli = |args: &[&str]| run(redbloom(url, &key, &[&size[..], args].concat()));
    let (code, out, err) = cli(&["load", file]);
    assert_eq!((code, &out["items"]), (0, &json!(20_000)), "{err}");
    let (code, out, err) = cli(&["check", file]);
    assert_eq!((code, &out["present"]), (0, &json!(20_000)), "{err}");
    let (code, out, err) = cli(&["add", "x", "y"]);
    assert_eq!((code, &out["items"]), (0, &json!(2)), "{err}");
    let (code, out, err) = cli(&["exists", "x", "line:7"]);
    assert_eq!((code, &out["present"]), (0, &json!(2)), "{err}");
    let (code, out, err) = cli(&["remove", "x", "y", "x"]);
    assert_eq!((code, &out["removed"]), (0, &json!(2)), "{err}");
    let (code, out, err) = cli(&["info"]);
    assert_eq!((code, &out["key"]), (0, &json!(key)), "{err}");
    assert!(out["counters_in_use"].as_u64().unwrap() > 50_000, "{out}");
    let (code, out, err) = cli(&["unload", file]);
    assert_eq!((code, &out["removed"]), (0, &json!(20_000)), "{err}");
    let (code, out, err) = cli(&["--wait-replicas", "0", "--timeout", "1", "add", "z"]);
    assert_eq!((code, &out["new"]), (0, &json!(1)), "{err}");
    let (code, out, err) = cli(&["expire", "60"]);
    assert_eq!((code, out), (0, json!({"ttl_seconds": 60})), "{err}");
    let (code, out, err) = cli(&["clear"]);
    assert_eq!((code, out), (0, json!({"deleted": true})), "{err}");
}

/// The commands of [`COMMANDS`] on the keys of [`KEYS`] are enough for every operation (the
/// library's and the CLI's), and each is needed by one: without it some operation gets
/// `Error::NoPermission`; so is each key pattern.
#[tokio::test]
async fn each_command_is_needed_and_together_they_are_enough() {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "minimal", MINIMAL_PW);

    set_user(&mut admin, "minimal", &grant(MINIMAL_PW, None, None)).await;
    exercise(&url).await.unwrap();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..20_000 {
        writeln!(file, "line:{i}").unwrap();
    }
    for shards in ["1", "4"] {
        cli_end_to_end(&url, shards, file.path().to_str().unwrap());
    }

    for (command, needed_by) in COMMANDS {
        if ["multi", "exec"].contains(command) {
            // Needed, but not testable this way (see acl.rs): when MULTI is refused, Redis runs
            // the commands meant for the transaction at once and redis-rs miscounts the
            // replies; when EXEC is refused, the connection stays inside MULTI. Grant both.
            continue;
        }
        set_user(
            &mut admin,
            "minimal",
            &grant(MINIMAL_PW, Some(command), None),
        )
        .await;
        if *command == "eval" {
            // Scripts go as EVALSHA, and as EVAL only after NOSCRIPT: empty the cache first.
            let () = redis::cmd("SCRIPT")
                .arg("FLUSH")
                .query_async(&mut admin)
                .await
                .unwrap();
        }
        assert_noperm(
            &format!("without {command} ({needed_by})"),
            exercise(&url).await,
            MINIMAL_PW,
        );
    }

    for key in KEYS {
        set_user(&mut admin, "minimal", &grant(MINIMAL_PW, None, Some(key))).await;
        assert_noperm(
            &format!("without the keys {key}"),
            exercise(&url).await,
            MINIMAL_PW,
        );
    }
}

/// The counting paragraph of docs/security.md gives this file's grants: its one line is
/// [`KEYS`] (for the key `KEY`) and [`COMMANDS`], and taken literally for a key it works end to
/// end.
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let start = docs
        .find("ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:params ~{rb*}")
        .expect("the counting filter's line in docs/security.md");
    let end = start + docs[start..].find("```").unwrap();
    let words: Vec<&str> = docs[start..end].split_whitespace().collect();
    assert_eq!(words[..5], ["ACL", "SETUSER", "app", "on", ">PW"]);
    let rules = &words[5..];
    let keys: Vec<String> = KEYS.iter().map(|k| k.replace("bf:*", "KEY")).collect();
    assert_eq!(rules[..keys.len()], keys, "the key patterns");
    assert_eq!(rules[keys.len()], "-@all");
    let documented: Vec<&str> = rules[keys.len() + 1..]
        .iter()
        .map(|r| r.strip_prefix('+').expect("+command"))
        .collect();
    let tested: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).collect();
    assert_eq!(documented, tested, "the commands");

    let (server, mut admin) = acl_server().await;
    let key = "users:blocked";
    let literal: Vec<String> = words[4..]
        .iter()
        .map(|w| w.replace("PW", MINIMAL_PW).replace("KEY", key))
        .collect();
    set_user(&mut admin, "app", &literal).await;
    exercise_key(&user_url(&server, "app", MINIMAL_PW), key)
        .await
        .unwrap();
}

/// A user whose keys are elsewhere: every operation of a counting filter, of one key and
/// sharded, is `Error::NoPermission`, at once (no retries), and writes nothing; the CLI says
/// NOPERM in one line.
#[tokio::test]
async fn a_user_without_access_to_the_keys_gets_no_permission_and_writes_nothing() {
    let (server, mut admin) = acl_server().await;
    set_user(
        &mut admin,
        "otherkeys",
        &[
            format!(">{OTHER_PW}"),
            "~other:*".into(),
            "~{other:*}:redbloom:*".into(),
            "+@all".into(),
        ],
    )
    .await;
    let url = user_url(&server, "otherkeys", OTHER_PW);
    let conn = manager(&url).await;
    let big = items("b", 20_000);
    for shards in [1, 4] {
        let what = format!("{shards} shard(s)");
        let blocked = counting("bf:x", shards)
            .retry(redbloom::Retry::for_duration(Duration::from_secs(30)))
            .build(conn.clone())
            .unwrap();
        let started = std::time::Instant::now();
        let noperm = |op: &str, result: redbloom::Result<Vec<bool>>| {
            assert_noperm(&format!("{what} {op}"), result, OTHER_PW);
        };
        noperm("add", blocked.add("a").await.map(|f| vec![f]));
        noperm(
            "add_if_absent",
            blocked.add_if_absent("a").await.map(|f| vec![f]),
        );
        noperm("exists", blocked.exists("a").await.map(|f| vec![f]));
        noperm("remove", blocked.remove("a").await.map(|f| vec![f]));
        noperm("add_many", blocked.add_many(&["a", "b"]).await);
        noperm("big add_many", blocked.add_many(&big).await);
        noperm("add_many_if_absent", blocked.add_many_if_absent(&big).await);
        noperm("exists_many", blocked.exists_many(&["a", "b"]).await);
        noperm("big exists_many", blocked.exists_many(&big).await);
        noperm("remove_many", blocked.remove_many(&big).await);
        assert_noperm(&format!("{what} info"), blocked.info().await, OTHER_PW);
        let expiry = blocked.expire(Duration::from_secs(5)).await;
        assert_noperm(&format!("{what} expire"), expiry, OTHER_PW);
        assert_noperm(&format!("{what} clear"), blocked.clear().await, OTHER_PW);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: not retried: {:?}",
            started.elapsed()
        );
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(keys.is_empty(), "refused calls wrote {keys:?}");

    // Its own keys work.
    let own = build(conn, "other:blocked", 1).unwrap();
    assert!(own.add_if_absent("a").await.unwrap());
    assert!(own.remove("a").await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 100).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    for shards in ["1", "4"] {
        let verbs: [&[&str]; 8] = [
            &["add", "a"],
            &["exists", "a"],
            &["remove", "a"],
            &["load", file],
            &["unload", file],
            &["info"],
            &["expire", "60"],
            &["clear"],
        ];
        for args in verbs {
            let size = [
                "--counting",
                "--capacity",
                "1000",
                "--fpr",
                "0.01",
                "--shards",
                shards,
            ];
            let cmd = redbloom(&url, "bf:x", &[&size[..], args].concat());
            common::cli::assert_fails(cmd, &["NOPERM", "permission"], Some(OTHER_PW));
        }
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("bf*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(keys.is_empty(), "refused CLI calls wrote {keys:?}");
}

/// With the dense grants ([`DENSE_KEYS`], [`DENSE_COMMANDS`]) big batches go dense (one swap,
/// a `RENAME`, per key), keep the filter's TTL and leave no scratch key. Without any one of
/// them the swap is refused before it writes, and the batch goes by `BITFIELD` with the same
/// answers: an add counted once (a remove of every item then leaves no counter in use) and
/// no scratch key left.
#[tokio::test]
async fn the_dense_grants_are_optional_and_a_refused_swap_writes_nothing() {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "dense", MINIMAL_PW);
    let big = items("b", 20_000);
    let full = || {
        let mut rules = grant(MINIMAL_PW, None, None);
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
            let blocked = build(manager(&url).await, &fresh_key("dense"), shards).unwrap();
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
            let scratch: Vec<String> = redis::cmd("KEYS")
                .arg("*redbloom:swap*")
                .query_async(&mut admin)
                .await
                .unwrap();
            assert!(scratch.is_empty(), "{what}: {scratch:?}");
            assert!(blocked.clear().await.unwrap());
        }
    }
}
