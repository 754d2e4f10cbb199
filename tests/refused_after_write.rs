//! A command the ACL refuses inside a write's script is refused before the script writes, so
//! that an add's "new" stays exact (SPEC.md §3: "new" counts the items whose bits flipped).
//! Redis does not undo a script's writes when a call in it fails, and the client takes a
//! refusal for a path that wrote nothing: it writes again by another path (without a record of
//! exact answers, or by `BITFIELD` instead of the dense merge), which then finds the items'
//! bits set and answers "seen" for items nobody had added, or, for a counting filter, counts
//! them twice. Each case is a user lacking one command a script calls after its first write
//! (the TTL given back after a merge, the record of exact answers, the scratch key's `DEL`,
//! the counts of a growing filter, the read of older generations, an import's TTLs): its adds
//! of new items answer new, once, and leave the bytes an unrefused user leaves; or fail,
//! writing nothing.

mod common;

use common::server::RedisServer;
use redbloom::{Builder, CountingBloom, Error, GrowingBloom, RedisBloom, Retry, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// A private server (its ACL is changed) with one user per refused command: `no-CMD`, allowed
/// everything else on every key.
async fn server(refused: &[&str]) -> (RedisServer, MultiplexedConnection) {
    let server = RedisServer::start().expect("redis-server on PATH");
    let mut admin = common::connect(&server.url()).await;
    for command in refused {
        let () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(format!("no-{command}"))
            .arg(&["reset", "on", ">pw", "~*", "+@all"])
            .arg(format!("-{command}"))
            .query_async(&mut admin)
            .await
            .unwrap();
    }
    (server, admin)
}

async fn user(server: &RedisServer, command: &str) -> MultiplexedConnection {
    let url = format!("redis://no-{command}:pw@127.0.0.1:{}", server.port());
    common::connect(&url).await
}

fn items(tag: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{tag}-{i}")).collect()
}

/// The keys whose names contain `part`, sorted, each with its type, and a string's length and
/// a hash of its bytes (short enough to read in a failure).
async fn keys(admin: &mut MultiplexedConnection, part: &str) -> Vec<String> {
    use std::hash::{Hash, Hasher};
    let mut out = Vec::new();
    for key in common::keys_like(admin, &format!("*{part}*")).await {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(admin)
            .await
            .unwrap();
        if kind == "string" {
            let bytes: Vec<u8> = redis::cmd("GET")
                .arg(&key)
                .query_async(admin)
                .await
                .unwrap();
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            bytes.hash(&mut hasher);
            out.push(format!(
                "{key}: {} bytes, {:016x}",
                bytes.len(),
                hasher.finish()
            ));
        } else {
            out.push(format!("{key}: {kind}"));
        }
    }
    out
}

/// Exact answers across retries on (a retry budget) or off.
fn exact<K: redbloom::kind::Kind>(builder: Builder<K>, on: bool) -> Builder<K> {
    builder
        .retry(Retry::for_duration(Duration::from_secs(5)))
        .exact_retries(on)
}

const ONE_HOUR: Duration = Duration::from_secs(3600);

/// The dense merges give the filter its TTL back after `BITOP` (which drops it): a user who
/// may not `PEXPIRE` was refused after the OR, and the batch, sent again by `BITFIELD`,
/// answered "seen" for every item. And the record of exact answers takes the TTL of a filter
/// that has one.
#[tokio::test]
async fn no_pexpire_a_dense_add_of_a_filter_with_a_ttl_answers_new() {
    let (server, mut admin) = server(&["pexpire"]).await;
    let conn = user(&server, "pexpire").await;
    for on in [false, true] {
        let plain = |key: &str, conn: &MultiplexedConnection| {
            exact(RedisBloom::builder(key), on)
                .expected_items(1_000)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        let growing = |key: &str, conn: &MultiplexedConnection| {
            exact(GrowingBloom::builder(key), on)
                .expected_items(1_000)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        let batch = items(&format!("ttl-{on}"), 600);
        // Plain: the filter made, and given a TTL, by an unrefused client.
        let key = format!("plain-ttl-{on}");
        let setup = plain(&key, &admin);
        setup.add("first").await.unwrap();
        assert!(setup.expire(ONE_HOUR).await.unwrap());
        let bitops = common::calls(&mut admin, "bitop").await;
        let answers = plain(&key, &conn).add_many(&batch).await.unwrap();
        assert!(
            answers.iter().all(|&new| new),
            "plain, exact {on}: {} of {} new",
            answers.iter().filter(|&&new| new).count(),
            answers.len()
        );
        assert!(
            common::calls(&mut admin, "bitop").await > bitops,
            "dense path"
        );
        assert!(common::pttl(&mut admin, &key).await > 0, "the TTL kept");
        assert!(setup.exists_many(&batch).await.unwrap().iter().all(|&b| b));
        // Growing: levels made and given a TTL by an unrefused client.
        let key = format!("growing-ttl-{on}");
        let setup = growing(&key, &admin);
        setup.add("first").await.unwrap();
        assert!(setup.expire(ONE_HOUR).await.unwrap());
        let answers = growing(&key, &conn).add_many(&batch).await.unwrap();
        assert!(
            answers.iter().all(|&new| new),
            "growing, exact {on}: {} of {} new",
            answers.iter().filter(|&&new| new).count(),
            answers.len()
        );
        assert!(setup.exists_many(&batch).await.unwrap().iter().all(|&b| b));
        for name in common::keys_like(&mut admin, &format!("*{key}*")).await {
            assert!(
                common::pttl(&mut admin, &name).await > 0,
                "growing, exact {on}: {name} kept a TTL"
            );
        }
    }
}

/// The commands of the record of exact answers, which a recorded write's script calls on its
/// ring (`…:once:*`): `TIME` and `HGET` (the record's read) first in every step, `HMGET` (a
/// ring slot's epoch), `HDEL` (the records of answered steps), `HSET` with every record,
/// `UNLINK`, `PEXPIRE` and `PTTL` (the filter's TTL, which caps the slot's) with the start of
/// a ring slot.
const RECORD: &[&str] = &[
    "time", "hget", "hmget", "hset", "hdel", "unlink", "pexpire", "pttl",
];

/// The record of exact answers is written after the write it records: its commands refused
/// there failed the step with its write applied, and the step sent again without a record
/// answered "seen". Now each of [`RECORD`] is asked of the ACL before the step writes: refused,
/// writes go without records. Every kind's single and batch adds, which go without records
/// and answer new, once.
#[tokio::test]
async fn no_record_command_recorded_adds_answer_new() {
    let (server, _admin) = server(RECORD).await;
    for &command in RECORD {
        let conn = user(&server, command).await;
        let batch = items(command, 40);
        let what = |kind: &str| format!("{kind}, no {command}");
        let all_new = |kind: &str, answers: Vec<bool>| {
            assert!(
                answers.iter().all(|&new| new),
                "{}: {answers:?}",
                what(kind)
            );
        };
        let plain = exact(RedisBloom::builder(format!("plain-{command}")), true)
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        all_new("plain", vec![plain.add("one").await.unwrap()]);
        all_new("plain", plain.add_many(&batch).await.unwrap());
        assert!(!plain.exact_retries(), "{}: records on", what("plain"));
        let native = exact(RedisBloom::builder(format!("native-{command}")), true)
            .layout(redbloom::Layout::Native)
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        all_new("native", vec![native.add("one").await.unwrap()]);
        all_new("native", native.add_many(&batch).await.unwrap());
        assert!(!native.exact_retries(), "{}: records on", what("native"));
        // A window filter's scripts need TIME and PTTL for its generations: without them, its
        // adds fail.
        if !["time", "pttl"].contains(&command) {
            let window = exact(
                WindowBloom::builder(format!("window-{command}"), ONE_HOUR),
                true,
            )
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
            all_new("window", vec![window.add("one").await.unwrap()]);
            all_new("window", window.add_many(&batch).await.unwrap());
            assert!(!window.exact_retries(), "{}: records on", what("window"));
        }
        let counting = exact(CountingBloom::builder(format!("counting-{command}")), true)
            .expected_items(100_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        all_new("counting", vec![counting.add("one").await.unwrap()]);
        all_new("counting", counting.add_many(&batch).await.unwrap());
        all_new(
            "counting remove",
            vec![counting.remove("one").await.unwrap()],
        );
        assert!(
            !counting.exists("one").await.unwrap(),
            "{}",
            what("counting")
        );
        assert!(
            !counting.exact_retries(),
            "{}: records on",
            what("counting")
        );
        // A growing filter needs HSET and HGET for its counts (without them, its adds fail:
        // no_hset_a_growing_add_fails_writing_nothing) and PTTL for a new level's TTL.
        if !["hset", "hget", "pttl"].contains(&command) {
            let growing = exact(GrowingBloom::builder(format!("growing-{command}")), true)
                .expected_items(100_000)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap();
            all_new("growing", vec![growing.add("one").await.unwrap()]);
            all_new("growing", growing.add_many(&batch).await.unwrap());
            assert!(!growing.exact_retries(), "{}: records on", what("growing"));
        }
    }
}

/// A refusal of a recorded step's own work is not one of its record: a user who may not run
/// `BITFIELD` gets an error that names it (where scripts can ask the ACL: Redis 7, Valkey),
/// nothing is written, and the filter keeps its records on. Any refusal in a recorded step was
/// taken for the record's: a growing filter turned its records off (a WARN event, and the CLI's
/// warning), failed again without them, and on Redis 7.0 named nothing.
#[tokio::test]
async fn no_bitfield_the_refusal_is_the_callers_and_records_stay_on() {
    let (server, mut admin) = server(&["bitfield"]).await;
    let conn = user(&server, "bitfield").await;
    let asks: i64 = redis::cmd("EVAL")
        .arg("return redis.acl_check_cmd and 1 or 0")
        .arg(0)
        .query_async(&mut admin)
        .await
        .unwrap();
    async fn refused<K: redbloom::kind::Kind>(
        what: &str,
        builder: Builder<K>,
        conn: &MultiplexedConnection,
        admin: &mut MultiplexedConnection,
        named: bool,
    ) {
        let bloom = exact(builder, true)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        for (how, result) in [
            ("add", bloom.add("one").await.map(|new| vec![new])),
            ("add_many", bloom.add_many(&items(what, 5)).await),
        ] {
            let Err(err @ Error::NoPermission(_)) = result else {
                panic!("{what} {how}: {result:?}");
            };
            if named {
                assert!(
                    err.to_string().ends_with("this user may not run BITFIELD"),
                    "{what} {how}: {err}"
                );
            }
            assert!(bloom.exact_retries(), "{what} {how}: records turned off");
        }
        assert_eq!(keys(admin, what).await, Vec::<String>::new(), "{what}");
    }
    let named = asks == 1;
    refused(
        "native",
        RedisBloom::builder("native").layout(redbloom::Layout::Native),
        &conn,
        &mut admin,
        named,
    )
    .await;
    refused(
        "counting",
        CountingBloom::builder("counting"),
        &conn,
        &mut admin,
        named,
    )
    .await;
    refused(
        "window",
        WindowBloom::builder("window", ONE_HOUR),
        &conn,
        &mut admin,
        named,
    )
    .await;
    refused(
        "growing",
        GrowingBloom::builder("growing"),
        &conn,
        &mut admin,
        named,
    )
    .await;
}

/// A growing filter counts each level's new items (`HSET`) after setting their bits: a user
/// who may not `HSET` got an error with the bits written (the step sent again without a record
/// then answered "seen"). Now the step fails before it writes; and one who may not read the
/// counts (`HGET`) too.
#[tokio::test]
async fn no_hset_a_growing_add_fails_writing_nothing() {
    let (server, mut admin) = server(&["hset", "hget"]).await;
    for (command, on) in [
        ("hset", false),
        ("hset", true),
        ("hget", false),
        ("hget", true),
    ] {
        let conn = user(&server, command).await;
        let key = format!("growing-{command}-{on}");
        let builder = || {
            exact(GrowingBloom::builder(&key), on)
                .expected_items(1_000)
                .false_positive_rate(0.01)
        };
        // Levels made by an unrefused client.
        builder()
            .build(admin.clone())
            .unwrap()
            .add("first")
            .await
            .unwrap();
        let before = keys(&mut admin, &key).await;
        let growing = builder().build(conn.clone()).unwrap();
        // (The dense add reads the counts whole, HGETALL: a user refused HGET alone may load.)
        let dense = match command {
            "hset" => 600,
            _ => 0,
        };
        for (what, batch) in [
            ("add", items("one", 1)),
            ("add_many", items("hset", 5)),
            ("dense", items("dense", dense)),
        ] {
            if batch.is_empty() {
                continue;
            }
            let result = match batch.len() {
                1 => growing.add(&batch[0]).await.map(|new| vec![new]),
                _ => growing.add_many(&batch).await,
            };
            assert!(
                matches!(result, Err(Error::NoPermission(_))),
                "no {command}, exact {on}, {what}: {result:?}"
            );
            assert_eq!(
                keys(&mut admin, &key).await,
                before,
                "no {command}, exact {on}, {what}"
            );
        }
    }
}

/// The counting filter's dense path swaps the counters in (`RENAME`), then deletes its other
/// scratch key: a user who may not `DEL` was refused after the swap, and the batch, sent
/// again by commands, counted every item twice (and answered it "seen").
#[tokio::test]
async fn no_del_a_dense_counting_add_counts_once() {
    let (server, mut admin) = server(&["del"]).await;
    let conn = user(&server, "del").await;
    for on in [false, true] {
        let counting = |key: &str, conn: &MultiplexedConnection| {
            exact(CountingBloom::builder(key), on)
                .expected_items(1_000)
                .false_positive_rate(0.01)
                .build(conn.clone())
                .unwrap()
        };
        let batch = items(&format!("del-{on}"), 600);
        let reference = counting(&format!("reference-{on}"), &admin);
        reference.add_many(&batch).await.unwrap();
        let key = format!("counting-{on}");
        let renames = common::calls(&mut admin, "rename").await;
        let answers = counting(&key, &conn).add_many(&batch).await.unwrap();
        assert!(
            answers.iter().all(|&new| new),
            "exact {on}: {} of {} new",
            answers.iter().filter(|&&new| new).count(),
            answers.len()
        );
        assert!(
            common::calls(&mut admin, "rename").await > renames,
            "dense path"
        );
        let bytes = |key: String| {
            let mut admin = admin.clone();
            async move {
                let bytes: Vec<u8> = redis::cmd("GET")
                    .arg(key)
                    .query_async(&mut admin)
                    .await
                    .unwrap();
                bytes
            }
        };
        assert!(
            bytes(key.clone()).await == bytes(reference.key().to_owned()).await,
            "exact {on}: the counters of one add of each item"
        );
        // Plain filters' dense merges delete their scratch key after the OR too.
        let plain = exact(RedisBloom::builder(format!("plain-del-{on}")), on)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap();
        let answers = plain.add_many(&batch).await.unwrap();
        assert!(answers.iter().all(|&new| new), "plain, exact {on}");
    }
}

/// A window add sets its items' bits in the current generation, then reads the older ones for
/// the items new to it: a user who may not `BITFIELD_RO` was refused after the write, and the
/// step sent again without a record answered "seen". Now the read is proven first: the add
/// fails, writing nothing.
#[tokio::test]
async fn no_bitfield_ro_a_window_add_fails_writing_nothing() {
    let (server, mut admin) = server(&["bitfield_ro"]).await;
    let conn = user(&server, "bitfield_ro").await;
    for on in [false, true] {
        let key = format!("window-{on}");
        // Generations of 1 s: the older one holds an item. Sized so that a batch of 5 goes by
        // the per-item script (one of 1,000 items would take its whole generations, reading
        // them with GET).
        let builder = || {
            exact(WindowBloom::builder(&key, Duration::from_secs(2)), on)
                .generations(2)
                .expected_items(100_000)
                .false_positive_rate(0.01)
        };
        let setup = builder().build(admin.clone()).unwrap();
        setup.add("older").await.unwrap();
        let first = keys(&mut admin, &key).await;
        // Until the next generation starts (the item's generation then older, still live).
        let started = std::time::Instant::now();
        let before = loop {
            setup.add("older").await.unwrap();
            let now = keys(&mut admin, &key).await;
            if now.len() > first.len() {
                break now;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "no new generation"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let window = builder().build(conn.clone()).unwrap();
        let result = window.add_many(&items("window", 5)).await;
        assert!(
            matches!(result, Err(Error::NoPermission(_))),
            "exact {on}: {result:?}"
        );
        let after = keys(&mut admin, &key).await;
        // Nothing written, unless a generation passed meanwhile (then the test says so).
        assert_eq!(after, before, "exact {on}: nothing written");
    }
}

/// An import puts a file's keys in place in one script, renaming each staged key over the
/// filter's and then giving it the file's TTL: `PERSIST` for a key without one (the staged key
/// has a TTL), `PEXPIREAT` for a window's generations. A user who may not was refused after
/// the first rename: other clients saw a mix of the old filter and the file's, and a key left
/// with the staging TTL, which then vanished. Now every write is asked of the ACL first: the
/// import fails, the filter as it was.
#[tokio::test]
async fn no_persist_or_pexpireat_an_import_fails_leaving_the_filter_as_it_was() {
    let (server, mut admin) = server(&[]).await;
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("no-ttl")
        .arg(&[
            "reset",
            "on",
            ">pw",
            "~*",
            "+@all",
            "-persist",
            "-pexpireat",
        ])
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://no-ttl:pw@127.0.0.1:{}", server.port());
    let conn = common::connect(&url).await;
    let plain = |conn: &MultiplexedConnection| {
        RedisBloom::builder("plain")
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    let window = |conn: &MultiplexedConnection| {
        WindowBloom::builder("window", ONE_HOUR)
            .expected_items(10_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    // Files of the filters, then the filters changed (other items).
    let (mut plain_file, mut window_file) = (Vec::new(), Vec::new());
    let setup = plain(&admin);
    setup.add_many(&items("file", 3_000)).await.unwrap();
    setup.export(&mut plain_file).await.unwrap();
    setup.clear().await.unwrap();
    setup.add_many(&items("later", 3_000)).await.unwrap();
    let setup = window(&admin);
    setup.add_many(&items("file", 3_000)).await.unwrap();
    setup.export(&mut window_file).await.unwrap();
    setup.clear().await.unwrap();
    setup.add_many(&items("later", 3_000)).await.unwrap();
    let before = (
        keys(&mut admin, "plain").await,
        keys(&mut admin, "window").await,
    );
    let mode = redbloom::ImportMode::Replace;
    for (kind, result) in [
        ("plain", plain(&conn).import(&plain_file[..], mode).await),
        ("window", window(&conn).import(&window_file[..], mode).await),
    ] {
        assert!(
            matches!(result, Err(Error::NoPermission(_))),
            "{kind}: {result:?}"
        );
    }
    let now = (
        keys(&mut admin, "plain").await,
        keys(&mut admin, "window").await,
    );
    assert_eq!(now, before);
    // What the imports write, allowed: not the filters as they were.
    plain(&admin).import(&plain_file[..], mode).await.unwrap();
    window(&admin).import(&window_file[..], mode).await.unwrap();
    let now = (
        keys(&mut admin, "plain").await,
        keys(&mut admin, "window").await,
    );
    assert!(now.0 != before.0 && now.1 != before.1);
}
