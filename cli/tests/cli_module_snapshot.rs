//! `redbloom --module export` and `import` through the binary (SPEC.md §5, §7 "Snapshots"),
//! against private servers with RedisBloom (tests/common/module.rs): a round trip between two
//! servers (one key and sharded) whose copy answers the same through the binary and through
//! `BF.EXISTS`; a module file into a plain filter, a plain file into a module filter, other
//! flags, `import --merge`, a corrupted file and a server without the module: one line each,
//! exit 2, nothing written.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::module::{redis_with_bloom, redis_without_bloom};
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use std::path::Path;

const MODULE: &[&str] = &["--module", "--capacity", "2000", "--fpr", "0.01"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut all: Vec<&str> = MODULE.to_vec();
    all.extend_from_slice(extra);
    all
}

/// Runs, asserting exit 0; the JSON line.
fn ok_json(cmd: assert_cmd::Command) -> Value {
    let (code, json, err) = run(cmd);
    assert_eq!(code, 0, "{err}");
    json
}

fn items_file(dir: &Path, name: &str, prefix: &str, n: usize) -> String {
    let path = dir.join(name);
    let text: String = (0..n).map(|i| format!("{prefix}:{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Every key's name and `DUMP`: what any write changes.
async fn keyspace(conn: &mut MultiplexedConnection) -> Vec<(String, Vec<u8>)> {
    common::dumps(conn, "*").await
}

/// `--json export` from one server and `--json import` into another, for a filter scaled
/// over several sub-filters and for one of 4 shards: the reports name the key and the file's
/// bytes; the copy finds every item (`check`), answers the same for items never added, and
/// `BF.EXISTS` from another client finds the items of the filter of one key.
#[tokio::test]
async fn export_and_import_between_two_servers() {
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let (url_a, url_b) = (a.url().to_owned(), b.url().to_owned());
    let mut conn_b = b.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), "items.txt", "in", 5_000);
    let absent = items_file(dir.path(), "absent.txt", "out", 5_000);
    for shards in ["1", "4"] {
        let key = common::unique_key("cli-module-snap");
        let flags = |extra: &[&'static str]| {
            let mut all = args(&["--shards", shards, "--json"]);
            all.extend_from_slice(extra);
            all
        };
        let load = [flags(&["load"]), vec![items.as_str()]].concat();
        ok_json(redbloom(&url_a, &key, &load));
        let file = dir.path().join(format!("module-{shards}.rbloom"));
        let file = file.to_str().unwrap();
        let out = ok_json(redbloom(
            &url_a,
            &key,
            &[flags(&["export"]), vec![file]].concat(),
        ));
        let size = std::fs::metadata(file).unwrap().len();
        assert_eq!(
            (&out["key"], &out["bytes"]),
            (&key.as_str().into(), &size.into())
        );

        let out = ok_json(redbloom(
            &url_b,
            &key,
            &[flags(&["import"]), vec![file]].concat(),
        ));
        assert_eq!(
            (&out["key"], &out["bytes"]),
            (&key.as_str().into(), &size.into())
        );
        let check = [flags(&["check"]), vec![items.as_str()]].concat();
        let out = ok_json(redbloom(&url_b, &key, &check));
        assert_eq!(
            (&out["present"], &out["absent"]),
            (&5_000.into(), &0.into())
        );
        let check = [flags(&["check"]), vec![absent.as_str()]].concat();
        let there = ok_json(redbloom(&url_a, &key, &check));
        let here = ok_json(redbloom(&url_b, &key, &check));
        assert_eq!(
            there["present"], here["present"],
            "the same false positives"
        );
        if shards == "1" {
            for item in ["in:0", "in:4999"] {
                let found: i64 = redis::cmd("BF.EXISTS")
                    .arg(&key)
                    .arg(item)
                    .query_async(&mut conn_b)
                    .await
                    .unwrap();
                assert_eq!(found, 1, "{item}");
            }
        }
    }
}

/// Each refusal is one line, exit 2, and writes nothing: a module file into a plain filter or
/// under other flags, a plain file into a module filter, `import --merge` of a module file, a
/// corrupted file, and `--module` export from a server without the module.
#[tokio::test]
async fn refusals_are_one_line_and_write_nothing() {
    let redis = redis_with_bloom();
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), "items.txt", "in", 3_000);
    let source = common::unique_key("cli-module-snap-src");
    ok_json(redbloom(&url, &source, &args(&["--json", "load", &items])));
    let file = dir.path().join("module.rbloom");
    let file = file.to_str().unwrap();
    ok_json(redbloom(&url, &source, &args(&["--json", "export", file])));
    let plain_file = dir.path().join("plain.rbloom");
    let plain_file = plain_file.to_str().unwrap();
    let plain_src = common::unique_key("cli-module-snap-plain");
    ok_json(redbloom(&url, &plain_src, &["--bits", "65536", "add", "p"]));
    ok_json(redbloom(
        &url,
        &plain_src,
        &["--bits", "65536", "export", plain_file],
    ));
    let mut corrupt = std::fs::read(file).unwrap();
    let middle = corrupt.len() / 2;
    corrupt[middle] ^= 1;
    let corrupt_file = dir.path().join("corrupt.rbloom");
    std::fs::write(&corrupt_file, corrupt).unwrap();
    let corrupt_file = corrupt_file.to_str().unwrap();

    let key = common::unique_key("cli-module-snap-target");
    ok_json(redbloom(&url, &key, &args(&["add", "old"])));
    let before = keyspace(&mut conn).await;
    let other_flags = [
        "--module",
        "--capacity",
        "4000",
        "--fpr",
        "0.01",
        "import",
        file,
    ];
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec!["--bits", "65536", "import", file], &["module"]),
        (other_flags.to_vec(), &["capacity=2000"]),
        (args(&["import", plain_file]), &["plain"]),
        (args(&["import", "--merge", file]), &["merge", "not items"]),
        (args(&["import", corrupt_file]), &["corrupt"]),
    ];
    for (argv, words) in cases {
        assert_fails(redbloom(&url, &key, &argv), words, None);
        assert_eq!(
            keyspace(&mut conn).await,
            before,
            "{argv:?}: nothing written"
        );
    }

    let bare = redis_without_bloom();
    let line = assert_fails(
        redbloom(bare.url(), &key, &args(&["export", "-"])),
        &["BF."],
        None,
    );
    assert!(line.contains("--module"), "{line}");
}
