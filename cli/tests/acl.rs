//! ACL users (`user:password@` in the URL) on a private redis-server: a user granted the
//! filter's commands and keys works end to end (library and CLI); one without access to the
//! key, or without scripts where the filter needs them, gets `Error::NoPermission` (the CLI:
//! one line naming NOPERM, exit status 2); a wrong password is one line about authentication.
//! No error, message or debug output ever shows a password.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;
mod kinds;

use assert_cmd::Command;
use common::cli::{redbloom, run};
use kinds::acl::{self, acl_server, manager, set_user, user_url, UserCli};
use redbloom::{Engine, Error, Layout, RedisBloom};
use redis::aio::ConnectionManagerConfig;
use serde_json::json;
use std::io::Write;
use std::time::Duration;

const WRITER_PW: &str = "SECRETPW";
const NOEVAL_PW: &str = "noeval-PW-4711";
const OTHER_PW: &str = "otherkeys-PW-0815";
const MINIMAL_PW: &str = "minimal-PW-2718";
const NOBITFIELD_PW: &str = "nobitfield-PW-1414";

/// Every command some part of redbloom sends, directly or from its Lua scripts (`redis.call`
/// is checked against the ACL too), with what needs it. The ACL paragraph of the docs is this
/// table; [`each_command_is_needed_and_together_they_are_enough`] proves both directions.
const COMMANDS: &[(&str, &str)] = &[
    ("bitfield", "add (Fast engine); exists before Redis 6.2"),
    ("bitfield_ro", "exists (Fast engine)"),
    ("getrange", "exists of a big batch (dense read)"),
    ("get", "dense add (bytes before); parameters script"),
    (
        "set",
        "dense add (scratch key); native guard (SET NX GET); parameters script",
    ),
    ("del", "dense add (scratch key); clear (in Lua)"),
    (
        "type",
        "clear, expire (in Lua: the key's type checked first)",
    ),
    ("exists", "parameters script"),
    ("setbit", "Scripts engine add (in Lua)"),
    ("getbit", "Scripts engine exists (in Lua)"),
    (
        "bitop",
        "dense add (in Lua); optional: refused, adds fall back to BITFIELD",
    ),
    (
        "pttl",
        "info; dense add (in Lua, keeps the TTL); exact answers (in Lua: a TTL caps a ring \
         slot's)",
    ),
    (
        "pexpire",
        "expire (in Lua); dense add (in Lua); exact answers (in Lua: a ring slot's TTL)",
    ),
    (
        "bitcount",
        "info; dense add (in Lua, its probe for a new bit; optional there)",
    ),
    ("strlen", "info; clear, expire, parameters script (in Lua)"),
    (
        "eval",
        "dense add (merge script); any script after NOSCRIPT",
    ),
    ("evalsha", "parameters check; clear, expire; Scripts engine"),
    (
        "multi",
        "dense add, native write (with its guard), info, clear, expire",
    ),
    (
        "exec",
        "dense add, native write (with its guard), info, clear, expire",
    ),
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
        "hset",
        "exact answers across retries (in Lua: a write's record, a ring slot's start)",
    ),
    (
        "unlink",
        "exact answers across retries (in Lua: a ring slot of an older epoch)",
    ),
    (
        "hdel",
        "exact answers across retries (in Lua: the records of answered writes; a dense add's \
         once acknowledged)",
    ),
];

/// Without one of these everything works, but writes no longer record their answers across
/// retries ([`records`]). (`PEXPIRE` and `PTTL`, which the record's script calls too, are
/// needed by expire and info anyway.)
const EXACT_ONLY: &[&str] = &["time", "hget", "hmget", "hset", "hdel", "unlink"];

/// The records in the ring of the filter `key`: the fields of its slots but a slot's own `e`,
/// `t`, `n`.
async fn ring_records(admin: &mut redis::aio::MultiplexedConnection, key: &str) -> usize {
    let mut records = 0;
    for slot in acl::keys(admin, &format!("{}*", common::companion(key, "once:"))).await {
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg(&slot)
            .query_async(admin)
            .await
            .unwrap();
        records += fields
            .iter()
            .filter(|f| !matches!(f.as_str(), "e" | "t" | "n" | "q"))
            .count();
    }
    records
}

/// A new native filter through `url`, retrying: an add, then a dense add (400 items). Whether it
/// still records its writes' answers across retries, and how many records its ring holds after
/// the add (its own) and after the dense add (the add's record went with it, answered; the
/// dense add's is deleted once acknowledged).
async fn records(url: &str, admin: &mut redis::aio::MultiplexedConnection) -> (bool, usize, usize) {
    let key = acl::fresh_key("bf", "exact");
    let bloom = RedisBloom::builder(&key)
        .layout(Layout::Native)
        .expected_items(2_000)
        .false_positive_rate(0.01)
        .retry(redbloom::Retry::for_duration(Duration::from_secs(5)))
        .build(manager(url).await)
        .unwrap();
    bloom.add("probe").await.unwrap();
    let after_add = ring_records(admin, &key).await;
    let big: Vec<String> = (0..400).map(|i| format!("b{i}")).collect();
    bloom.add_many(&big).await.unwrap();
    let after_dense = ring_records(admin, &key).await;
    (bloom.exact_retries(), after_add, after_dense)
}

/// The key patterns of a filter at `bf:*`: the bits, and the sidecar keys
/// `{KEY}:redbloom:LEN:KEY:params` and `…:scratch` in the same cluster slot.
const KEYS: &[&str] = &["~bf:*", "~{bf:*}:redbloom:*"];

/// Asserts that no rendering of `err` (its message, its debug form, its causes) shows
/// `password`.
fn assert_hides(err: &dyn std::error::Error, password: &str) {
    let mut texts = vec![format!("{err}"), format!("{err:?}")];
    let mut source = err.source();
    while let Some(cause) = source {
        texts.push(format!("{cause}"));
        texts.push(format!("{cause:?}"));
        source = cause.source();
    }
    for text in texts {
        assert!(!text.contains(password), "the password shows in {text:?}");
    }
}

/// Asserts `result` is `Error::NoPermission` whose causes name NOPERM, and hides `password`.
#[track_caller]
fn assert_noperm<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, password: &str) {
    match result {
        Err(err @ Error::NoPermission(_)) => {
            assert_hides(&err, password);
            acl::assert_names_the_acl(what, &err);
        }
        other => panic!("{what}: expected Error::NoPermission, got {other:?}"),
    }
}

/// Asserts `result` is an error of the ACL: `Error::NoPermission`, or (a command refused inside
/// a Lua script, which Redis 7.0 answers with `ERR The user executing the script can't run this
/// command`) an `Error::Redis` saying so.
#[track_caller]
fn assert_denied<T: std::fmt::Debug>(what: &str, result: redbloom::Result<T>, password: &str) {
    assert_noperm(what, result, password);
}

/// Every operation of every engine and layout, on new keys, through `url`: single items and
/// `BITFIELD` batches, dense adds and reads, go-zero's scripts, the native layout's stored
/// parameters, info, expire, clear and `WAIT`. The first error, if any.
async fn exercise(url: &str) -> redbloom::Result<()> {
    let conn = manager(url).await;
    let small: Vec<String> = (0..4).map(|i| format!("s{i}")).collect();
    let big: Vec<String> = (0..400).map(|i| format!("b{i}")).collect();
    for (layout, engine) in [
        (Layout::GoZero, Engine::Fast),
        (Layout::GoZero, Engine::Scripts),
        (Layout::Native, Engine::Fast),
        (Layout::Native, Engine::Scripts),
    ] {
        let builder = RedisBloom::builder(acl::fresh_key("bf", "all"))
            .layout(layout)
            .engine(engine);
        let builder = match layout {
            Layout::GoZero => builder.bits(20_000),
            _ => builder.expected_items(2_000).false_positive_rate(0.01),
        };
        let bloom = builder.build(conn.clone())?;
        assert!(bloom.add("one").await?);
        assert!(bloom.exists("one").await?);
        assert_eq!(bloom.add_many(&small).await?, [true; 4]);
        assert_eq!(bloom.exists_many(&small).await?, [true; 4]);
        // Batches large enough for the dense path (Fast engine).
        assert!(bloom.add_many(&big).await?.iter().filter(|&&n| n).count() > 390);
        assert!(bloom.exists_many(&big).await?.iter().all(|&p| p));
        assert!(bloom.info().await?.bits_set > 0);
        assert!(bloom.expire(Duration::from_secs(600)).await?);
        let ttl = bloom.info().await?.ttl.as_secs().unwrap();
        assert!((590..=600).contains(&ttl), "{ttl}");
        // The dense merge keeps the TTL.
        let more: Vec<String> = (0..400).map(|i| format!("m{i}")).collect();
        bloom.add_many(&more).await?;
        assert!(bloom.info().await?.ttl.as_secs().unwrap() > 590);
        assert!(bloom.clear().await?);
    }
    let bloom = RedisBloom::builder(acl::fresh_key("bf", "wait"))
        .bits(1_000)
        .wait_for_replicas(0, Duration::from_millis(100))
        .build(conn)?;
    assert!(bloom.add("x").await?);
    Ok(())
}

#[tokio::test]
async fn a_user_granted_the_filters_commands_on_its_keys_works_end_to_end() {
    let (server, mut admin) = acl_server().await;
    let writer_pw = format!(">{WRITER_PW}");
    set_user(
        &mut admin,
        "writer",
        &[writer_pw.as_str(), KEYS[0], KEYS[1], "+@all"],
    )
    .await;
    let url = user_url(&server, "writer", WRITER_PW);
    exercise(&url).await.unwrap();

    // The filter's bytes are go-zero's (SPEC.md §1).
    let bloom = RedisBloom::new(manager(&url).await, "bf:hello", 64).unwrap();
    assert_eq!(
        bloom.add_many(&["hello", "world"]).await.unwrap(),
        [true, true]
    );
    let hex = common::key_hex(&mut admin, "bf:hello").await;
    assert_eq!(hex, "a52c9b5aa00a14");
    assert!(!format!("{bloom:?}").contains(WRITER_PW), "{bloom:?}");

    // The CLI, every command.
    let mut file = tempfile::NamedTempFile::new().unwrap();
    for i in 0..2_000 {
        writeln!(file, "line-{i}").unwrap();
    }
    let path = file.path().to_str().unwrap();
    let cli = UserCli::new(&url, "bf:cli", &["--bits", "40000", "--json"]);
    cli.loads_checks_adds(path, 2_000, "line-7");
    cli.info();
    cli.expires(true);
    let native = [
        "--capacity",
        "1000",
        "--fpr",
        "0.01",
        "--layout",
        "native",
        "--json",
    ];
    let cli = UserCli::new(&url, "bf:cli", &native);
    cli.answers_exactly(&["add", "a"], json!({"items": 1, "new": 1}));
}

/// The commands of [`COMMANDS`] on the keys of [`KEYS`] are enough for every operation, and
/// each is needed by one: without it some operation gets `Error::NoPermission`.
#[tokio::test]
async fn each_command_is_needed_and_together_they_are_enough() {
    let (server, mut admin) = acl_server().await;
    let url = user_url(&server, "minimal", MINIMAL_PW);
    let grant = |skip: &[&str]| acl::grant(MINIMAL_PW, KEYS, COMMANDS, skip, None);
    set_user(&mut admin, "minimal", &grant(&[])).await;
    exercise(&url).await.unwrap();
    assert_eq!(
        records(&url, &mut admin).await,
        (true, 1, 0),
        "exact answers: the add's record, then none (the add's answered, the dense add's \
         deleted once acknowledged)"
    );

    for (command, needed_by) in COMMANDS {
        if ["multi", "exec"].contains(command) {
            // Needed, but not testable this way: when MULTI is refused, Redis runs the commands
            // meant for the transaction at once, and redis-rs 1.8.1 overflows counting the
            // replies (a panic in its connection task in debug builds); when EXEC is refused,
            // the connection stays inside MULTI and queues every later command. Grant both.
            continue;
        }
        set_user(&mut admin, "minimal", &grant(&[command])).await;
        if EXACT_ONLY.contains(command) {
            exercise(&url)
                .await
                .unwrap_or_else(|e| panic!("everything works without {command}: {e}"));
            assert_eq!(
                records(&url, &mut admin).await,
                (false, 0, 0),
                "without {command}: no records"
            );
            continue;
        }
        if *command == "bitop" {
            // Only the dense merge uses it, and a refused merge falls back to BITFIELD.
            exercise(&url)
                .await
                .expect("everything works without BITOP");
            continue;
        }
        if *command == "eval" {
            // Scripts go as EVALSHA and as EVAL only after NOSCRIPT: empty the cache first.
            acl::flush_scripts(&mut admin).await;
        }
        if *command == "info" {
            let what = format!("without {command} ({needed_by})");
            acl::assert_refused_without_info(&what, exercise(&url).await);
            continue;
        }
        let result = exercise(&url).await;
        // What the error names the user may not run is the command refused.
        if let Err(err) = &result {
            let text = err.to_string();
            if let Some((_, named)) = text.split_once("may not run ") {
                assert!(
                    named.contains(&command.to_uppercase()),
                    "without {command}: {text}"
                );
            }
        }
        assert_denied(
            &format!("without {command} ({needed_by})"),
            result,
            MINIMAL_PW,
        );
    }

    // Without the sidecar keys' pattern, a go-zero filter still works: it skips its parameters
    // check, and the dense add, refused its scratch key, falls back to BITFIELD.
    let rules = acl::grant(MINIMAL_PW, KEYS, COMMANDS, &[], Some(KEYS[1]));
    set_user(&mut admin, "minimal", &rules).await;
    let bloom = RedisBloom::new(
        manager(&url).await,
        acl::fresh_key("bf", "nosidecar"),
        20_000,
    )
    .unwrap();
    assert!(bloom.add("a").await.unwrap());
    assert_eq!(bloom.add_many(&["b", "c"]).await.unwrap(), [true, true]);
    let big: Vec<String> = (0..400).map(|i| format!("b{i}")).collect();
    assert!(
        bloom.exists_many(&big).await.is_ok(),
        "the dense read uses the key only"
    );
    let new = bloom.add_many(&big).await.unwrap();
    assert!(
        new.iter().filter(|&&n| n).count() > 390,
        "the dense add fell back"
    );
    assert!(bloom.exists_many(&big).await.unwrap().iter().all(|&p| p));
}

#[tokio::test]
async fn a_user_without_access_to_the_key_gets_no_permission() {
    let (server, mut admin) = acl_server().await;
    let pw = format!(">{OTHER_PW}");
    set_user(&mut admin, "otherkeys", &[pw.as_str(), "~other:*", "+@all"]).await;
    let url = user_url(&server, "otherkeys", OTHER_PW);
    let conn = manager(&url).await;

    for (layout, engine) in [
        (Layout::GoZero, Engine::Fast),
        (Layout::GoZero, Engine::Scripts),
        (Layout::Native, Engine::Fast),
    ] {
        let what = format!("{layout:?}/{engine:?}");
        let builder = RedisBloom::builder("bf:x").layout(layout).engine(engine);
        let bloom = match layout {
            Layout::GoZero => builder.bits(1_000),
            _ => builder.expected_items(100).false_positive_rate(0.01),
        }
        .build(conn.clone())
        .unwrap();
        let big: Vec<String> = (0..400).map(|i| format!("b{i}")).collect();
        assert_noperm(&format!("{what} add"), bloom.add("a").await, OTHER_PW);
        assert_noperm(&format!("{what} exists"), bloom.exists("a").await, OTHER_PW);
        assert_noperm(
            &format!("{what} add_many"),
            bloom.add_many(&big).await,
            OTHER_PW,
        );
        assert_noperm(
            &format!("{what} exists_many"),
            bloom.exists_many(&big).await,
            OTHER_PW,
        );
        assert_noperm(&format!("{what} info"), bloom.info().await, OTHER_PW);
        assert_noperm(&format!("{what} clear"), bloom.clear().await, OTHER_PW);
        let expiry = bloom.expire(Duration::from_secs(5)).await;
        assert_noperm(&format!("{what} expire"), expiry, OTHER_PW);
    }
    // Not a passing fault: no retries, at once.
    let bloom = RedisBloom::builder("bf:x")
        .bits(1_000)
        .retry(redbloom::Retry::for_duration(Duration::from_secs(30)))
        .build(conn)
        .unwrap();
    let started = std::time::Instant::now();
    assert_noperm("add with retries", bloom.add("a").await, OTHER_PW);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // Its own keys work.
    let bloom = RedisBloom::new(manager(&url).await, "other:y", 1_000).unwrap();
    assert!(bloom.add("a").await.unwrap());

    // The CLI: one line naming NOPERM, status 2, no password.
    for args in [&["add", "a"][..], &["exists", "a"], &["info"]] {
        let cmd = redbloom(&url, "bf:x", &[&["--bits", "1000"][..], args].concat());
        assert_fails(
            cmd,
            &[
                "NOPERM",
                "permission",
                "may not access one of the filter's keys",
            ],
            OTHER_PW,
        );
    }
}

#[tokio::test]
async fn a_user_without_bitfield_uses_the_scripts_engine_even_with_wait() {
    let (server, mut admin) = acl_server().await;
    let pw = format!(">{NOBITFIELD_PW}");
    let rules = [pw.as_str(), "~*", "+@all", "-bitfield", "-bitfield_ro"];
    set_user(&mut admin, "nobitfield", &rules).await;
    let url = user_url(&server, "nobitfield", NOBITFIELD_PW);
    let conn = manager(&url).await;

    let fast = RedisBloom::builder("bf:nobitfield")
        .bits(100_000)
        .wait_for_replicas(0, Duration::from_millis(100))
        .build(conn)
        .unwrap();
    assert_noperm("Fast engine add", fast.add("a").await, NOBITFIELD_PW);
    // go-zero's scripts, and the WAIT routed without BITFIELD.
    let scripts = fast.with_engine(Engine::Scripts);
    assert!(scripts.add("a").await.unwrap());
    assert!(scripts.exists("a").await.unwrap());
    assert_eq!(scripts.add_many(&["a", "b"]).await.unwrap(), [false, true]);
    assert_eq!(
        scripts.exists_many(&["b", "c"]).await.unwrap(),
        [true, false]
    );
}

/// A refusal of the filter's own write is one line that names it, for every kind, with no
/// warning about records: it is not the record's (a growing filter took it for one, warned
/// that its records were off, and on Redis 7.0 named nothing). A refusal of the record's read
/// (`HGET`) is the record's: the add goes without records, and the CLI says so.
#[tokio::test]
async fn a_refused_write_is_named_and_only_a_refused_record_warns() {
    let (server, mut admin) = acl_server().await;
    set_user(
        &mut admin,
        "nobf",
        &[">nobf-PW", "~*", "+@all", "-bitfield"],
    )
    .await;
    set_user(
        &mut admin,
        "nohget",
        &[">nohget-PW", "~*", "+@all", "-hget"],
    )
    .await;
    let refused = user_url(&server, "nobf", "nobf-PW");
    let unrecorded = user_url(&server, "nohget", "nohget-PW");
    let kinds: [&[&str]; 5] = [
        &["--bits", "10000"],
        &["--capacity", "1000", "--fpr", "0.01"],
        &["--counting", "--capacity", "1000", "--fpr", "0.01"],
        &["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
        &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
    ];
    for (i, flags) in kinds.into_iter().enumerate() {
        let key = format!("refused-write-{i}");
        let args = [flags, &["add", "a"]].concat();
        assert_fails(
            common::cli::redbloom(&refused, &key, &args),
            &["NOPERM", "may not run BITFIELD"],
            "nobf-PW",
        );
        let key = format!("unrecorded-{i}");
        let (code, _, stderr) = run(common::cli::redbloom(&unrecorded, &key, &args));
        assert_eq!(code, 0, "{flags:?}: {stderr}");
        assert!(
            stderr.starts_with("warning: the ACL refused the script that records"),
            "{flags:?}: {stderr}"
        );
    }
}

#[tokio::test]
async fn a_user_without_scripts_needs_the_default_engine_and_the_gozero_layout() {
    let (server, mut admin) = acl_server().await;
    let pw = format!(">{NOEVAL_PW}");
    let rules = [
        pw.as_str(),
        "~*",
        "+@all",
        "-eval",
        "-evalsha",
        "-evalsha_ro",
        "-eval_ro",
    ];
    set_user(&mut admin, "noeval", &rules).await;
    let url = user_url(&server, "noeval", NOEVAL_PW);
    let conn = manager(&url).await;

    // go-zero's layout, default engine: the parameters check is skipped, BITFIELD does it all
    // (batches small for the filter's size).
    let bloom = RedisBloom::new(conn.clone(), "bf:noeval", 100_000).unwrap();
    assert!(bloom.add("a").await.unwrap());
    assert!(bloom.exists("a").await.unwrap());
    assert_eq!(bloom.add_many(&["b", "c"]).await.unwrap(), [true, true]);
    assert_eq!(bloom.exists_many(&["b", "d"]).await.unwrap(), [true, false]);
    assert!(bloom.info().await.unwrap().bits_set > 0);
    // ... and a batch large enough for the dense merge, whose OR is a script: refused, the
    // write falls back to BITFIELD.
    let big: Vec<String> = (0..400).map(|i| format!("b{i}")).collect();
    assert!(
        bloom
            .add_many(&big)
            .await
            .unwrap()
            .iter()
            .filter(|&&n| n)
            .count()
            > 390
    );
    assert!(bloom.exists_many(&big).await.unwrap().iter().all(|&p| p));

    // go-zero's own scripts.
    let scripts = bloom.clone().with_engine(Engine::Scripts);
    assert_noperm("Scripts add", scripts.add("a").await, NOEVAL_PW);
    assert_noperm("Scripts exists", scripts.exists("a").await, NOEVAL_PW);

    // The native layout checks its parameters with a script.
    let native = RedisBloom::builder("bf:native")
        .expected_items(100)
        .false_positive_rate(0.01)
        .layout(Layout::Native)
        .build(conn)
        .unwrap();
    assert_noperm("native add", native.add("a").await, NOEVAL_PW);
    assert_noperm("native exists", native.exists("a").await, NOEVAL_PW);

    // The CLI: the default works, --layout native names NOPERM.
    let (code, out, err) = run(redbloom(
        &url,
        "bf:noeval-cli",
        &["--bits", "1000", "--json", "add", "a"],
    ));
    assert_eq!((code, out), (0, json!({"items": 1, "new": 1})), "{err}");
    let native = [
        "--capacity",
        "100",
        "--fpr",
        "0.01",
        "--layout",
        "native",
        "add",
        "a",
    ];
    let line = assert_fails(
        redbloom(&url, "bf:native-cli", &native),
        &["NOPERM", "this user may not run EVALSHA"],
        NOEVAL_PW,
    );
    assert!(!line.contains("Pipeline failures"), "{line}");
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_error_that_never_shows_it() {
    let (server, mut admin) = acl_server().await;
    let pw = format!(">{WRITER_PW}");
    set_user(&mut admin, "writer", &[pw.as_str(), "~bf:*", "+@all"]).await;
    let wrong = "SECRETPW-wrong";
    let url = user_url(&server, "writer", wrong);

    let stderr = assert_fails(
        redbloom(&url, "bf:x", &["--bits", "64", "add", "a"]),
        &["authentication failed", "WRONGPASS", "\"writer\""],
        wrong,
    );
    assert!(
        stderr.contains(&format!("127.0.0.1:{}", server.port())),
        "{stderr}"
    );
    // Through $REDIS_URL too.
    let mut cmd = Command::cargo_bin("redbloom").unwrap();
    cmd.env("REDIS_URL", &url)
        .args(["--key", "bf:x", "--bits", "64", "info"]);
    assert_fails(cmd, &["authentication"], wrong);
    // An unknown user, and the password alone (the default user has none).
    let unknown = user_url(&server, "nobody", wrong);
    assert_fails(
        redbloom(&unknown, "bf:x", &["--bits", "64", "info"]),
        &["authentication"],
        wrong,
    );
    let password_only = format!("redis://:{wrong}@127.0.0.1:{}", server.port());
    let (code, _, stderr) = run(redbloom(&password_only, "bf:x", &["--bits", "64", "info"]));
    assert!(!stderr.contains(wrong), "{stderr}");
    assert!(code == 0 || code == 2, "{stderr}");

    // The library's errors: redis-rs's, and redbloom's from it.
    let client = redis::Client::open(url.as_str()).unwrap();
    assert!(!format!("{client:?}").contains(wrong));
    let err = client.get_multiplexed_async_connection().await.unwrap_err();
    assert_hides(&err, wrong);
    assert_hides(&Error::from(err), wrong);
    let config = ConnectionManagerConfig::new().set_number_of_retries(1);
    let err = client
        .get_connection_manager_with_config(config)
        .await
        .unwrap_err();
    assert_hides(&err, wrong);
    assert_hides(&Error::from(err), wrong);

    // No credentials where the default user is disabled: the first command names it.
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "default", "off"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let anonymous = format!("redis://127.0.0.1:{}", server.port());
    assert_fails(
        redbloom(&anonymous, "bf:x", &["--bits", "64", "add", "a"]),
        &["authentication"],
        wrong,
    );
}

/// [`common::cli::assert_fails`], and the password never shows.
fn assert_fails(cmd: Command, words: &[&str], password: &str) -> String {
    common::cli::assert_fails(cmd, words, Some(password))
}
