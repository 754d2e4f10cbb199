//! Property: `redbloom load` and `check` read any file of raw bytes as SPEC.md §3 says (a
//! line's bytes without its `\n` and one `\r` before it, empty lines skipped), and the items
//! they add are the ones the library then finds.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use assert_cmd::Command;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use redbloom::RedisBloom;
use redis::aio::MultiplexedConnection;
use serde_json::{json, Value};
use std::path::Path;

const BITS: u64 = 100_000;

/// `redbloom --url URL --key KEY --bits 100000 --json COMMAND FILE`: (status, JSON, stderr).
fn run(url: &str, key: &str, command: &str, file: &Path) -> (i32, Value, String) {
    let out = Command::cargo_bin("redbloom")
        .unwrap()
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key, "--bits", "100000", "--json"])
        .arg(command)
        .arg(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code().unwrap(),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The items SPEC.md §3 reads from `file`, written independently of the tool's reader: split at
/// every `\n`; a line ended by `\n` loses one `\r` before it; the last, unended piece is kept
/// as it is; empty items are skipped.
fn expected_items(file: &[u8]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<&[u8]> = file.split(|b| *b == b'\n').collect();
    let last = pieces.pop().unwrap_or_default();
    let mut items: Vec<Vec<u8>> = pieces
        .into_iter()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line).to_vec())
        .collect();
    items.push(last.to_vec());
    items.retain(|item| !item.is_empty());
    items
}

/// Loads `file` under a new key, checks it, and checks each expected item with the library;
/// returns the key.
async fn load_and_check(
    url: &str,
    conn: &MultiplexedConnection,
    file: &[u8],
) -> Result<String, TestCaseError> {
    let expected = expected_items(file);
    let n = expected.len();
    let mut tmp = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut tmp, file).unwrap();
    let key = common::unique_key("prop-cli");

    let (code, out, stderr) = run(url, &key, "load", tmp.path());
    prop_assert_eq!(code, 0, "load failed: {}", stderr);
    prop_assert_eq!(&out["items"], &json!(n), "load: {}", out);
    let (code, out, stderr) = run(url, &key, "check", tmp.path());
    prop_assert_eq!(code, 0, "check failed: {}", stderr);
    prop_assert_eq!(
        (&out["items"], &out["present"], &out["absent"]),
        (&json!(n), &json!(n), &json!(0)),
        "check: {}",
        out
    );

    let bloom = RedisBloom::new(conn.clone(), &key, BITS).unwrap();
    for item in &expected {
        prop_assert!(
            bloom.exists(item).await.unwrap(),
            "{:?} of the file is not in the filter",
            String::from_utf8_lossy(item)
        );
    }
    let found = bloom.exists_many(&expected).await.unwrap();
    prop_assert!(found.iter().all(|f| *f));
    if n == 0 {
        prop_assert!(
            !common::key_exists(&mut conn.clone(), &key).await,
            "no items, no filter"
        );
    }
    Ok(key)
}

/// A file of up to 160 lines of any bytes but `\n` (often `\r`, spaces, empty lines), each
/// ended by `\n` or `\r\n`, the last one sometimes not ended at all.
fn files() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        6 => any::<u8>().prop_map(|b| if b == b'\n' { b'\r' } else { b }),
        1 => Just(b'\r'),
        1 => Just(b' '),
    ];
    let line = (vec(byte, 0..24), any::<bool>());
    (vec(line, 0..160), any::<bool>()).prop_map(|(lines, ended)| {
        let mut file = Vec::new();
        let count = lines.len();
        for (i, (content, crlf)) in lines.into_iter().enumerate() {
            file.extend(content);
            if i + 1 < count || ended {
                file.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
        }
        file
    })
}

#[test]
fn load_and_check_read_any_bytes_as_lines() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let redis = runtime.block_on(common::redis());
    let conn = runtime.block_on(redis.connection());
    let config = Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new(config)
        .run(&files(), |file| {
            runtime
                .block_on(load_and_check(redis.url(), &conn, &file))
                .map(drop)
        })
        .unwrap();
}

#[test]
fn the_reference_model_follows_the_spec() {
    let items = |file: &[u8]| expected_items(file);
    assert_eq!(items(b""), Vec::<Vec<u8>>::new());
    assert_eq!(items(b"\n\r\n\n"), Vec::<Vec<u8>>::new());
    assert_eq!(
        items(b"a\r\nb\n\nc"),
        [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    assert_eq!(items(b"\r\r\na\rb\n"), [b"\r".to_vec(), b"a\rb".to_vec()]);
    assert_eq!(
        items(b"x\r"),
        [b"x\r".to_vec()],
        "no \\n, so no \\r is taken"
    );
}

/// One fixed file through `load` and `check`: `n` items, all present. Returns the server (it
/// lives as long as this value) and the filter.
async fn fixed_case(
    file: &[u8],
    n: usize,
) -> (common::TestRedis, RedisBloom<MultiplexedConnection>) {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    assert_eq!(expected_items(file).len(), n);
    let key = load_and_check(redis.url(), &conn, file)
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    (redis, RedisBloom::new(conn, key, BITS).unwrap())
}

#[tokio::test]
async fn an_empty_file_is_no_items() {
    fixed_case(b"", 0).await;
}

#[tokio::test]
async fn a_file_of_empty_lines_is_no_items() {
    fixed_case(b"\n\r\n\n", 0).await;
}

#[tokio::test]
async fn the_last_line_counts_without_a_newline() {
    fixed_case(b"first\nsecond\r\nlast", 3).await;
}

/// Items may be as long as the CLI's limit (64 KiB, `lines::MAX_ITEM_BYTES`); a `\r` beyond it
/// goes with the `\n`. Longer lines are refused: see tests/cli_memory.rs.
#[tokio::test]
async fn a_line_at_the_64_kib_limit_is_one_item() {
    let line = vec![b'x'; 64 * 1024];
    let file = [&line[..], b"\r\n"].concat();
    let (_redis, bloom) = fixed_case(&file, 1).await;
    // The item is the whole line, not a prefix of it.
    assert!(bloom.exists(&line).await.unwrap());
    assert!(!bloom.exists(&line[..line.len() - 1]).await.unwrap());
    assert!(!bloom.exists(b"x").await.unwrap());
}
