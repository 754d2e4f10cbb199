//! ACL users and growing filters (SPEC.md §4 "growing"), on a private redis-server: a user
//! granted only the growing filter's key patterns and the commands of [`COMMANDS`] works end
//! to end (library and CLI, a filter of one key and one of 4 shards: single items, batches
//! that make several levels, info, expire and the levels made after it, clear, `WAIT`,
//! `bench`); each of those commands is needed by some operation, and so is each key pattern; a
//! user without access to the keys gets `Error::NoPermission` and writes nothing. The dense
//! add's `BITOP` is optional: without it big adds take the per-item script, with the same
//! answers. docs/security.md's growing paragraph is this file's grant list.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{Error, GrowingBloom, KeyTtl};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const MINIMAL_PW: &str = "growing-minimal-PW-5772";
const OTHER_PW: &str = "growing-otherkeys-PW-4669";

/// Every command a growing filter sends, directly or from its Lua scripts (`redis.call` is
/// checked against the ACL too), with what needs it.
/// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
const COMMANDS: &[(&str, &str)] = &[
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
    ("hget", "add (in Lua: the newest level's count)"),
    (
        "hset",
        "add (in Lua: a new level, the newest level's count)",
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
        "the first add (in Lua: stores the parameters); a new level after expire (SET PX NX); \
         a sharded filter's SET NX GET beside each write; the dense add's scratch keys",
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
    ("pexpire", "expire (in Lua; a sharded filter's parameters)"),
    (
        "multi",
        "adds of a big batch (the dense add: the levels read, then the merge, each a \
         transaction); refused, redis-rs loses the connection instead of reporting NOPERM",
    ),
    ("exec", "with multi"),
    ("wait", "wait_for_replicas"),
];

/// The dense add's grant beyond [`COMMANDS`] (its scratch keys `{counts}:scratch:i` are under
/// [`KEYS`]' level patterns): the merge script's `BITOP`. Optional: refused, big batches go by
/// the per-item script.
const DENSE_COMMANDS: &[&str] = &["bitop"];

/// The key patterns of growing filters at `gr:*`: the bare key (declared by the scripts of a
/// filter of one key, which refuse another kind's bits there), the stored parameters
/// `{KEY}:redbloom:params` (of either), the levels and their counts of a filter of one key
/// `{KEY}:redbloom:grow:HASH[:i]`, and a sharded filter's
/// `{rbI.N}:KEY:shard:I/S:redbloom:grow:HASH[:i]`.
const KEYS: &[&str] = &[
    "~gr:*",
    "~{gr:*}:redbloom:params",
    "~{gr:*}:redbloom:grow:*",
    "~{rb*}:gr:*:shard:*:redbloom:grow:*",
];

/// The start of the growing paragraph's line in docs/security.md.
const DOCUMENTED: &str =
    "ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:params ~{KEY}:redbloom:grow:*";

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

/// A key under `gr:` that no other filter of this test run uses.
fn fresh_key(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("gr:{name}:{}", N.fetch_add(1, Ordering::Relaxed))
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn count(flags: &[bool]) -> usize {
    flags.iter().filter(|&&f| f).count()
}

/// A growing filter whose first level holds 1,000 items (all shards together), of `shards`
/// shards.
fn growing(key: &str, shards: u32) -> redbloom::Builder<redbloom::kind::Growing> {
    GrowingBloom::builder(key)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .growth(2)
        .shards(shards)
}

fn build<C>(conn: C, key: &str, shards: u32) -> redbloom::Result<GrowingBloom<C>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    growing(key, shards).build(conn)
}

/// Every operation of a growing filter of one key and of 4 shards, on a new key, through
/// `url`: see [`exercise_key`].
async fn exercise(url: &str) -> redbloom::Result<()> {
    exercise_key(url, &fresh_key("all")).await
}

/// Every operation of a growing filter at `key`, of one key and then of 4 shards (each
/// cleared after): checks of a new filter, single items, small batches, a batch of 20,000
/// items (five levels, several scripts per key), info, expire and a level made after it,
/// clear, and writes with `WAIT`. The first error, if any.
async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
    let conn = manager(url).await;
    let small = items("s", 4);
    let big = items("b", 20_000);
    let more = items("m", 20_000);
    for shards in [1, 4] {
        let frontier = build(conn.clone(), key, shards)?;
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
        let waiting = growing(key, shards)
            .wait_for_replicas(0, Duration::from_millis(100))
            .build(conn.clone())?;
        assert!(waiting.add("x").await?);
        assert!(count(&waiting.add_many(&big).await?) > 19_700);
        assert!(waiting.clear().await?);
    }
    Ok(())
}

/// The rules of a user with `password`, the key patterns but `skip_key`, and the commands of
/// [`COMMANDS`] but those of `skip`.
fn grant(password: &str, skip: &[&str], skip_key: Option<&str>) -> Vec<String> {
    let mut rules = vec![format!(">{password}")];
    rules.extend(
        KEYS.iter()
            .filter(|k| Some(**k) != skip_key)
            .map(|k| k.to_string()),
    );
    rules.push("-@all".to_owned());
    for (command, _) in COMMANDS {
        if !skip.contains(command) {
            rules.push(format!("+{command}"));
        }
    }
    rules
}

/// The CLI, every verb of a growing filter, on one of `shards` shards through `url`.
fn cli_end_to_end(url: &str, shards: &str, file: &str) {
    let key = fresh_key("cli");
    let size = [
        "--growth",
        "2",
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "--shards",
        shards,
        "--json",
    ];
    let cli = |args: &[&str]| run(redbloom(url, &key, &[&size[..], args].concat()));
    let (code, out, err) = cli(&["exists", "x"]);
    assert_eq!((code, &out["absent"]), (1, &json!(1)), "{err}");
    let (code, out, err) = cli(&["load", file]);
    assert_eq!((code, &out["items"]), (0, &json!(20_000)), "{err}");
    let (code, out, err) = cli(&["check", file]);
    assert_eq!((code, &out["present"]), (0, &json!(20_000)), "{err}");
    let (code, out, err) = cli(&["add", "x", "y"]);
    assert_eq!((code, &out["items"]), (0, &json!(2)), "{err}");
    let (code, out, err) = cli(&["exists", "x", "line:7"]);
    assert_eq!((code, &out["present"]), (0, &json!(2)), "{err}");
    let (code, out, err) = cli(&["info"]);
    assert_eq!((code, &out["key"]), (0, &json!(key)), "{err}");
    assert!(out["levels"].as_u64().unwrap() >= 5, "{out}");
    let (code, out, err) = cli(&["expire", "60"]);
    assert_eq!((code, out), (0, json!({"ttl_seconds": 60})), "{err}");
    let bench = ["bench", "--items", "3000", "--concurrency", "2", "--op"];
    let (code, out, err) = cli(&[&bench[..], &["add", "--batch", "10"]].concat());
    assert_eq!((code, &out["items"]), (0, &json!(3_000)), "{err}");
    let (code, out, err) = cli(&[&bench[..], &["exists"]].concat());
    assert_eq!((code, &out["items"]), (0, &json!(3_000)), "{err}");
    let (code, out, err) = cli(&["--wait-replicas", "0", "--timeout", "1", "add", "z"]);
    assert_eq!((code, &out["new"]), (0, &json!(1)), "{err}");
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

    set_user(&mut admin, "minimal", &grant(MINIMAL_PW, &[], None)).await;
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
            // replies; when EXEC is refused, the connection stays inside MULTI. Below: without
            // both, a big add fails.
            continue;
        }
        set_user(&mut admin, "minimal", &grant(MINIMAL_PW, &[command], None)).await;
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
        set_user(&mut admin, "minimal", &grant(MINIMAL_PW, &[], Some(key))).await;
        assert_noperm(
            &format!("without the keys {key}"),
            exercise(&url).await,
            MINIMAL_PW,
        );
    }

    // Without MULTI and EXEC, big adds fail (the dense add's transactions), whatever the
    // error redis-rs makes of the refused MULTI.
    set_user(
        &mut admin,
        "minimal",
        &grant(MINIMAL_PW, &["multi", "exec"], None),
    )
    .await;
    for shards in [1, 4] {
        let frontier = build(manager(&url).await, &fresh_key("nomulti"), shards).unwrap();
        let result = frontier.add_many(&items("b", 20_000)).await;
        assert!(
            result.is_err(),
            "{shards} shard(s): a big add without MULTI and EXEC: {:?}",
            result.map(|flags| count(&flags))
        );
    }
}

/// The growing paragraph of docs/security.md gives this file's grants: its one line (it
/// starts with [`DOCUMENTED`]) is [`KEYS`] (for the key `KEY`) and [`COMMANDS`], and taken
/// literally for a key it works end to end.
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let start = docs
        .find(DOCUMENTED)
        .expect("the growing filter's line in docs/security.md");
    let end = start + docs[start..].find("```").unwrap();
    let words: Vec<&str> = docs[start..end].split_whitespace().collect();
    assert_eq!(words[..5], ["ACL", "SETUSER", "app", "on", ">PW"]);
    let rules = &words[5..];
    let keys: Vec<String> = KEYS.iter().map(|k| k.replace("gr:*", "KEY")).collect();
    assert_eq!(rules[..keys.len()], keys, "the key patterns");
    assert_eq!(rules[keys.len()], "-@all");
    let documented: Vec<&str> = rules[keys.len() + 1..]
        .iter()
        .map(|r| r.strip_prefix('+').expect("+command"))
        .collect();
    let tested: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).collect();
    assert_eq!(documented, tested, "the commands");

    let (server, mut admin) = acl_server().await;
    let key = "crawl:frontier";
    let literal: Vec<String> = words[4..]
        .iter()
        .map(|w| w.replace("PW", MINIMAL_PW).replace("KEY", key))
        .collect();
    set_user(&mut admin, "app", &literal).await;
    exercise_key(&user_url(&server, "app", MINIMAL_PW), key)
        .await
        .unwrap();
}

/// A user whose keys are elsewhere: every operation of a growing filter, of one key and
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
        let frontier = growing("gr:x", shards)
            .retry(redbloom::Retry::for_duration(Duration::from_secs(30)))
            .build(conn.clone())
            .unwrap();
        let started = std::time::Instant::now();
        let noperm = |op: &str, result: redbloom::Result<Vec<bool>>| {
            assert_noperm(&format!("{what} {op}"), result, OTHER_PW);
        };
        noperm("add", frontier.add("a").await.map(|f| vec![f]));
        noperm("exists", frontier.exists("a").await.map(|f| vec![f]));
        noperm("add_many", frontier.add_many(&["a", "b"]).await);
        noperm("big add_many", frontier.add_many(&big).await);
        noperm("exists_many", frontier.exists_many(&["a", "b"]).await);
        noperm("big exists_many", frontier.exists_many(&big).await);
        assert_noperm(&format!("{what} info"), frontier.info().await, OTHER_PW);
        let expiry = frontier.expire(Duration::from_secs(5)).await;
        assert_noperm(&format!("{what} expire"), expiry, OTHER_PW);
        assert_noperm(&format!("{what} clear"), frontier.clear().await, OTHER_PW);
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
    let own = build(conn, "other:frontier", 1).unwrap();
    assert!(own.add("a").await.unwrap());
    assert!(own.exists("a").await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, items("line", 100).join("\n")).unwrap();
    let file = file.to_str().unwrap();
    for shards in ["1", "4"] {
        let verbs: [&[&str]; 8] = [
            &["add", "a"],
            &["exists", "a"],
            &["load", file],
            &["check", file],
            &["info"],
            &["expire", "60"],
            &["clear"],
            &[
                "bench",
                "--op",
                "add",
                "--items",
                "10",
                "--concurrency",
                "1",
            ],
        ];
        for args in verbs {
            let size = [
                "--growth",
                "2",
                "--capacity",
                "1000",
                "--fpr",
                "0.01",
                "--shards",
                shards,
            ];
            let cmd = redbloom(&url, "gr:x", &[&size[..], args].concat());
            common::cli::assert_fails(cmd, &["NOPERM", "permission"], Some(OTHER_PW));
        }
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*gr:x*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(keys.is_empty(), "refused CLI calls wrote {keys:?}");
}

/// With the dense grant ([`DENSE_COMMANDS`]) a big add goes dense (its bits merged by
/// `BITOP`); without it, by the per-item script, with the same answers, counts, levels and
/// bits; either way every item is found, and a level made after `expire` keeps the TTL.
#[tokio::test]
async fn the_dense_grant_is_optional() {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "dense", MINIMAL_PW);
    let big = items("b", 20_000);
    let more = items("m", 20_000);
    let mut full = grant(MINIMAL_PW, &[], None);
    full.extend(DENSE_COMMANDS.iter().map(|c| format!("+{c}")));
    let cases = [
        ("every grant", full),
        ("without the dense grant", grant(MINIMAL_PW, &[], None)),
    ];
    let mut outcomes = Vec::new();
    for (what, rules) in cases {
        set_user(&mut admin, "dense", &rules).await;
        for shards in [1, 4] {
            let what = format!("{what}, {shards} shard(s)");
            let frontier = build(manager(&url).await, &fresh_key("dense"), shards).unwrap();
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
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "dense", MINIMAL_PW);
    set_user(&mut admin, "dense", &grant(MINIMAL_PW, &[], None)).await;
    let big = items("b", 20_000);
    for shards in [1, 4] {
        let frontier = build(manager(&url).await, &fresh_key("refused"), shards).unwrap();
        assert!(count(&frontier.add_many(&big).await.unwrap()) > 19_700);
        let scratch: Vec<String> = redis::cmd("KEYS")
            .arg("*scratch*")
            .query_async(&mut admin)
            .await
            .unwrap();
        assert!(scratch.is_empty(), "{shards} shard(s): left {scratch:?}");
        assert!(frontier.clear().await.unwrap());
    }
}
