//! ACL users and window filters (SPEC.md §4 "window"), on a private redis-server: a user granted
//! only the window filter's key patterns and the commands of [`COMMANDS`] works end to end
//! (library and CLI, a filter of one key and a sharded one: single items, small batches, dense
//! batches, info, expire, clear, `WAIT`); each of those commands is needed by some operation,
//! and so is each key pattern; a user without access to the keys gets `Error::NoPermission` and
//! writes nothing. docs/security.md's window paragraph is this file's grant list.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::server::RedisServer;
use redbloom::{Error, KeyTtl, WindowBloom};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use serde_json::json;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const MINIMAL_PW: &str = "window-minimal-PW-3141";
const OTHER_PW: &str = "window-otherkeys-PW-1729";
const NOEXPIRY_PW: &str = "window-noexpiry-PW-6022";

/// Every command a window filter sends, directly or from its Lua scripts (`redis.call` is
/// checked against the ACL too), with what needs it.
/// [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
const COMMANDS: &[(&str, &str)] = &[
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
    ("time", "every script (in Lua: the server's clock)"),
    (
        "get",
        "every script (in Lua: the stored parameters); dense add (generations before)",
    ),
    (
        "set",
        "first write (in Lua: stores the parameters); dense add (scratch key); sharded SET NX GET",
    ),
    (
        "exists",
        "first write (in Lua: the bare key); info, clear, expire (in Lua)",
    ),
    ("bitfield", "add (in Lua: sets an item's bits)"),
    (
        "bitfield_ro",
        "exists, add (in Lua: an item's other bits in a generation)",
    ),
    (
        "getbit",
        "exists, add (in Lua: an item's first bit in a generation)",
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
    ("pexpire", "expire (in Lua); a sharded filter's parameters"),
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
];

/// The key patterns of window filters at `bf:*`: the bare key (declared by the scripts of a
/// filter of one key, which must not hold another kind's bits), the companions
/// `{KEY}:redbloom:*` (the parameters, the generations `…:gen:<epoch>` and the dense add's
/// scratch key of a filter of one key; a sharded filter's parameters), and a sharded filter's
/// shards `{rbI.N}:KEY:shard:I/S:redbloom:*`.
const KEYS: &[&str] = &["~bf:*", "~{bf:*}:redbloom:*", "~{rb*}:bf:*:shard:*"];

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

/// A window of 60 s for 10,000 items per window, of `shards` shards.
fn window(key: &str, shards: u32) -> redbloom::Builder<redbloom::kind::Window> {
    window_of(key, Duration::from_secs(60), shards)
}

/// A window of `window` for 10,000 items per window, of `shards` shards.
fn window_of(
    key: &str,
    window: Duration,
    shards: u32,
) -> redbloom::Builder<redbloom::kind::Window> {
    WindowBloom::builder(key, window)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .shards(shards)
}

fn build<C>(conn: C, key: &str, shards: u32) -> redbloom::Result<WindowBloom<C>>
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    window(key, shards).build(conn)
}

/// Every operation of a window filter of one key and of 4 shards, on new keys, through `url`:
/// see [`exercise_key`].
async fn exercise(url: &str) -> redbloom::Result<()> {
    exercise_key(url, &fresh_key("all")).await
}

/// Every operation of a window filter at `key`, of one key and then of 4 shards (each cleared
/// after): single items, small batches (the per-item scripts), batches of twice the capacity
/// (the dense add and check), info, expire, a dense add after it, clear, and writes with
/// `WAIT`. The first error, if any.
async fn exercise_key(url: &str, key: &str) -> redbloom::Result<()> {
    let conn = manager(url).await;
    let small = items("s", 4);
    let big = items("b", 20_000);
    for shards in [1, 4] {
        let recent = build(conn.clone(), key, shards)?;
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
        assert_eq!(info.filter.ttl, KeyTtl::Persistent);
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
        let waiting = window(key, shards)
            .wait_for_replicas(0, Duration::from_millis(100))
            .build(conn.clone())?;
        assert!(waiting.add("x").await?);
        let new = waiting.add_many(&big).await?;
        assert!(new.iter().filter(|&&n| n).count() > 19_000);
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

/// The CLI, every verb, on a window filter of `shards` shards through `url`.
fn cli_end_to_end(url: &str, shards: &str, file: &str) {
    let key = fresh_key("cli");
    let size = [
        "--window",
        "60s",
        "--capacity",
        "10000",
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
    let (code, out, err) = cli(&["info"]);
    assert_eq!((code, &out["key"]), (0, &json!(key)), "{err}");
    assert_eq!(out["generations"], json!(4), "{out}");
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
        if ["bitop", "pexpireat"].contains(command) {
            // Only the dense merge uses them, and a merge refused (before it writes anything)
            // goes by the per-item script.
            exercise(&url)
                .await
                .unwrap_or_else(|e| panic!("everything works without {command}: {e}"));
            continue;
        }
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

/// The window paragraph of docs/security.md gives this file's grants: its one line is
/// [`KEYS`] (for the key `KEY`) and [`COMMANDS`], and taken literally for a key it works end to
/// end.
#[tokio::test]
async fn the_documented_line_is_the_tested_one_and_works() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md"))
        .unwrap();
    let start = docs
        .find("ACL SETUSER app on >PW ~KEY ~{KEY}:redbloom:* ~{rb*}")
        .expect("the window filter's line in docs/security.md");
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
    let key = "orders:recent";
    let literal: Vec<String> = words[4..]
        .iter()
        .map(|w| w.replace("PW", MINIMAL_PW).replace("KEY", key))
        .collect();
    set_user(&mut admin, "app", &literal).await;
    exercise_key(&user_url(&server, "app", MINIMAL_PW), key)
        .await
        .unwrap();
}

/// A user whose keys are elsewhere: every operation of a window filter, of one key and
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
        let recent = window("bf:x", shards)
            .retry(redbloom::Retry::for_duration(Duration::from_secs(30)))
            .build(conn.clone())
            .unwrap();
        let started = std::time::Instant::now();
        assert_noperm(&format!("{what} add"), recent.add("a").await, OTHER_PW);
        assert_noperm(
            &format!("{what} exists"),
            recent.exists("a").await,
            OTHER_PW,
        );
        assert_noperm(
            &format!("{what} add_many"),
            recent.add_many(&["a", "b"]).await,
            OTHER_PW,
        );
        assert_noperm(
            &format!("{what} dense add_many"),
            recent.add_many(&big).await,
            OTHER_PW,
        );
        assert_noperm(
            &format!("{what} dense exists_many"),
            recent.exists_many(&big).await,
            OTHER_PW,
        );
        assert_noperm(&format!("{what} info"), recent.info().await, OTHER_PW);
        let expiry = recent.expire(Duration::from_secs(5)).await;
        assert_noperm(&format!("{what} expire"), expiry, OTHER_PW);
        assert_noperm(&format!("{what} clear"), recent.clear().await, OTHER_PW);
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
    let own = build(conn, "other:recent", 1).unwrap();
    assert!(own.add("a").await.unwrap());

    for shards in ["1", "4"] {
        for args in [&["add", "a"][..], &["exists", "a"], &["info"], &["clear"]] {
            let size = [
                "--window",
                "60s",
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

/// A dense add refused by the ACL (here: without `PEXPIREAT`, or without `PTTL`) is refused
/// before it writes anything (the merge script proves `PEXPIREAT` on its scratch key first),
/// so its fallback to the per-item script reports the right flags, and every generation it
/// leaves expires. (Before the fix, the merge had ORed the batch in when `PEXPIREAT` was
/// refused: the fallback then found every bit set, returned `Ok` with no item new, and the
/// generation never expired.)
#[tokio::test]
async fn a_merge_refused_after_its_bitop_is_not_taken_for_one_refused_before() {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "noexpiry", NOEXPIRY_PW);
    let mut failures = Vec::new();
    for missing in ["pexpireat", "pttl"] {
        set_user(
            &mut admin,
            "noexpiry",
            &grant(NOEXPIRY_PW, Some(missing), None),
        )
        .await;
        for shards in [1, 4] {
            let key = fresh_key(&format!("no-{missing}"));
            // Generations of 20 minutes: the batch and its retry land in one.
            let recent = window_of(&key, Duration::from_secs(3600), shards)
                .build(manager(&url).await)
                .unwrap();
            let big = items("first", 20_000);
            let result = recent.add_many(&big).await;
            let pattern = match shards {
                1 => format!("{{{key}}}:redbloom:gen:*"),
                _ => format!("{{rb*}}:{key}:shard:*:redbloom:gen:*"),
            };
            let gens: Vec<String> = redis::cmd("KEYS")
                .arg(&pattern)
                .query_async(&mut admin)
                .await
                .unwrap();
            let mut persistent = Vec::new();
            for gen in &gens {
                if common::pttl(&mut admin, gen).await == -1 {
                    persistent.push(gen.clone());
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
