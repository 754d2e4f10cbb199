//! A server out of memory (`maxmemory` with `noeviction`): a failed add is a typed error that
//! names the cause, everything acknowledged before it is still found, and `redbloom load`
//! fails with one line naming the cause and the items acknowledged.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use assert_cmd::Command;
use common::server::RedisServer;
use redbloom::{Engine, Error, RedisBloom};
use redis::aio::MultiplexedConnection;
use std::error::Error as _;

/// Other data added per round: `PADS` values of `PAD` bytes.
const PAD: usize = 512;
const PADS: usize = 64;

/// A private server that refuses writes past 2 MB.
fn small_server() -> RedisServer {
    RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        "2mb",
        "--maxmemory-policy",
        "noeviction",
    ])
    .expect("redis-server on PATH")
}

async fn connect(server: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The error's message and every source's, joined.
fn chain(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn names_oom(text: &str) -> bool {
    text.contains("OOM") || text.contains("maxmemory")
}

/// An out-of-memory refusal is `Error::OutOfMemory`: not a caller's mistake, not a network
/// fault, and not retried.
fn assert_oom(err: &Error, what: &str) {
    assert!(
        matches!(err, Error::OutOfMemory(_)),
        "{what}: an OOM refusal reported as {err:?}"
    );
    assert!(!err.is_transient(), "{what}");
    let text = chain(err);
    assert!(
        names_oom(&text),
        "{what}: the error does not name the cause: {text}"
    );
}

#[tokio::test]
async fn bitfield_adds_fail_with_oom_and_lose_nothing() {
    fills_until_an_add_fails(Engine::Fast, 1_000_000, 20).await;
}

#[tokio::test]
async fn script_adds_fail_with_oom_and_lose_nothing() {
    fills_until_an_add_fails(Engine::Scripts, 1_000_000, 20).await;
}

/// Batches of 500 on a 50 KB filter take the dense path (one `MULTI` ... `EXEC`).
#[tokio::test]
async fn dense_adds_fail_with_oom_and_lose_nothing() {
    fills_until_an_add_fails(Engine::Fast, 400_000, 500).await;
}

/// Adds a batch of `batch` items and one single item, then 32 KiB of other data, until an add
/// fails; checks the failure and that every acknowledged item is still there.
async fn fills_until_an_add_fails(engine: Engine, bits: u64, batch: usize) {
    let server = small_server();
    let mut conn = connect(&server).await;
    let key = common::unique_key("oom");
    let bloom = RedisBloom::new(connect(&server).await, &key, bits)
        .unwrap()
        .with_engine(engine);

    let mut acknowledged: Vec<String> = Vec::new();
    let mut failure = None;
    for round in 0..200 {
        let items: Vec<String> = (0..batch).map(|i| format!("r{round}:i{i}")).collect();
        match bloom.add_many(&items).await {
            Ok(flags) => {
                assert_eq!(flags.len(), batch);
                acknowledged.extend(items);
            }
            Err(err) => {
                failure = Some(("add_many", err));
                break;
            }
        }
        let single = format!("r{round}:single");
        match bloom.add(&single).await {
            Ok(_) => acknowledged.push(single),
            Err(err) => {
                failure = Some(("add", err));
                break;
            }
        }
        // Other data fills the server, in small values: a command's own bytes count against
        // maxmemory while it waits, so large ones are refused long before the server is full.
        for i in 0..PADS {
            let pad: redis::RedisResult<()> = redis::cmd("SET")
                .arg(format!("pad:{round}:{i}"))
                .arg(vec![b'p'; PAD])
                .query_async(&mut conn)
                .await;
            if let Err(err) = pad {
                assert!(names_oom(&err.to_string()), "SET refused: {err}");
            }
        }
    }
    let (what, err) = failure.expect("200 rounds of 32 KiB never filled a 2 MB server");
    eprintln!(
        "{} items acknowledged, then {what} failed: {}",
        acknowledged.len(),
        chain(&err)
    );
    assert_oom(&err, what);
    assert!(
        acknowledged.len() > 10 * batch,
        "only {} items went in before the server was full",
        acknowledged.len()
    );

    // Every way of adding is refused while the server is full. Memory near the limit moves
    // (idle clients' buffers shrink), so the limit is now set well below what is used.
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await
        .unwrap();
    let used: u64 = info
        .lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used - 256 * 1024)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_oom(&bloom.add("one more").await.unwrap_err(), "add");
    let more: Vec<String> = (0..batch).map(|i| format!("more:{i}")).collect();
    assert_oom(&bloom.add_many(&more).await.unwrap_err(), "add_many");

    // Reading still works, and finds everything acknowledged.
    let mut missing = 0;
    for chunk in acknowledged.chunks(1_000) {
        let found = bloom.exists_many(chunk).await.unwrap();
        missing += found.iter().filter(|f| !**f).count();
    }
    assert_eq!(
        missing,
        0,
        "{missing} of {} acknowledged items are missing",
        acknowledged.len()
    );
    assert!(bloom.exists(&acknowledged[0]).await.unwrap());
    assert!(bloom.exists(acknowledged.last().unwrap()).await.unwrap());
}

/// `redbloom --url URL --key KEY --bits 16000000 load FILE [ARGS]`: (status, stderr).
fn load(url: &str, key: &str, file: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = Command::cargo_bin("redbloom")
        .unwrap()
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key, "--bits", "16000000", "load"])
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The N in "(N items acknowledged as added before the error)" of a one-line message.
fn acknowledged(stderr: &str) -> u64 {
    assert_eq!(stderr.lines().count(), 1, "one line on stderr: {stderr:?}");
    assert!(names_oom(stderr), "the message names the cause: {stderr:?}");
    let (before, _) = stderr
        .split_once(" items acknowledged as added before the error")
        .unwrap_or_else(|| panic!("no acknowledged count in {stderr:?}"));
    before
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("no acknowledged count in {stderr:?}"))
}

#[tokio::test]
async fn load_reports_oom_and_the_items_acknowledged() {
    let server = small_server();
    let mut conn = connect(&server).await;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let lines: Vec<String> = (0..100).map(|i| format!("line-{i}")).collect();
    std::io::Write::write_all(&mut file, lines.join("\n").as_bytes()).unwrap();

    // One 2 MB filter string is more than the server has room for: the first batch of one item
    // creates it, every later one is refused. The batches in flight fail; one line says so.
    let key = common::unique_key("oom-load");
    let (code, stderr) = load(server.url().as_str(), &key, file.path(), &["--batch", "1"]);
    assert_eq!(code, 2, "{stderr}");
    let n = acknowledged(&stderr);
    assert!((1..100).contains(&n), "{n} items acknowledged: {stderr}");
    let bloom = RedisBloom::new(connect(&server).await, &key, 16_000_000).unwrap();
    let found = bloom.exists_many(&lines[..n as usize]).await.unwrap();
    assert!(
        found.iter().all(|f| *f),
        "the {n} acknowledged lines are all present"
    );

    // With the server already full, nothing goes in, and the count says so.
    let key = common::unique_key("oom-load-full");
    let (code, stderr) = load(server.url().as_str(), &key, file.path(), &[]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(acknowledged(&stderr), 0, "{stderr}");
    assert!(!common::key_exists(&mut conn, &key).await);
}
