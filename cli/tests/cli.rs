//! The `redbloom` command line end to end (SPEC.md §3): each command's `--json` line, exit
//! statuses, and one-line errors with status 2.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use assert_cmd::Command;
use common::cli::{redbloom, run};
use serde_json::{json, Value};
use std::io::Write;

#[tokio::test]
async fn add_and_exists_write_gozeros_bytes_and_report_counts() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-add");
    let url = redis.url();

    let (code, out, _) = run(redbloom(
        url,
        &key,
        &["--bits", "64", "--json", "add", "hello", "world"],
    ));
    assert_eq!((code, out), (0, json!({"items": 2, "new": 2})));
    assert_eq!(common::key_hex(&mut conn, &key).await, "a52c9b5aa00a14");

    // Flags may follow the command too.
    let (code, out, _) = run(redbloom(
        url,
        &key,
        &["add", "hello", "--json", "--bits", "64"],
    ));
    assert_eq!((code, out), (0, json!({"items": 1, "new": 0})));

    let (code, out, _) = run(redbloom(
        url,
        &key,
        &["--bits", "64", "--json", "exists", "hello", "world"],
    ));
    assert_eq!(
        (code, out),
        (0, json!({"items": 2, "present": 2, "absent": 0}))
    );
    let (code, out, _) = run(redbloom(
        url,
        &key,
        &["--bits", "64", "--json", "exists", "hello", "absent"],
    ));
    assert_eq!(
        (code, out),
        (1, json!({"items": 2, "present": 1, "absent": 1}))
    );
}

#[tokio::test]
async fn load_and_check_read_raw_lines_in_batches() {
    let redis = common::redis().await;
    let key = common::unique_key("cli-load");
    let url = redis.url();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    // 2,500 items over several batches, CRLF endings, empty lines and non-UTF-8 bytes.
    for i in 0..2_500 {
        write!(file, "item-{i}\r\n\n").unwrap();
    }
    file.write_all(b"\xff\xfe raw\n").unwrap();
    let path = file.path().to_str().unwrap();
    let size = ["--capacity", "3000", "--fpr", "0.001", "--json"];

    let (code, out, _) = run(redbloom(
        url,
        &key,
        &[&size[..], &["load", path, "--batch", "300"]].concat(),
    ));
    assert_eq!(code, 0);
    assert_eq!(out["items"], 2_501);
    assert!(out["new"].as_u64().unwrap() >= 2_495, "{out}");
    assert!(out["seconds"].as_f64().unwrap() > 0.0);

    let (code, out, _) = run(redbloom(url, &key, &[&size[..], &["check", path]].concat()));
    assert_eq!(
        (code, &out["items"], &out["present"], &out["absent"]),
        (0, &json!(2_501), &json!(2_501), &json!(0))
    );

    // The items were stored without their line endings: `exists` finds them by their bytes.
    let (code, _, _) = run(redbloom(
        url,
        &key,
        &[&size[..], &["exists", "item-0", "item-2499"]].concat(),
    ));
    assert_eq!(code, 0);

    // Standard input, and `check` exits 0 even when items are absent.
    let mut check = redbloom(url, &key, &[&size[..], &["check", "-"]].concat());
    check.write_stdin("never-1\nnever-2\nitem-7\n");
    let (code, out, _) = run(check);
    assert_eq!(code, 0);
    assert_eq!(out["items"], 3);
    assert_eq!(
        out["present"].as_u64().unwrap() + out["absent"].as_u64().unwrap(),
        3
    );
    assert!(out["present"].as_u64().unwrap() >= 1);

    // An empty file is zero items, not an error.
    let empty = tempfile::NamedTempFile::new().unwrap();
    let (code, out, _) = run(redbloom(
        url,
        &key,
        &[&size[..], &["load", empty.path().to_str().unwrap()]].concat(),
    ));
    assert_eq!(
        (code, &out["items"], &out["new"]),
        (0, &json!(0), &json!(0))
    );
}

#[tokio::test]
async fn info_clear_and_expire() {
    let redis = common::redis().await;
    let key = common::unique_key("cli-info");
    let url = redis.url();
    let bits = ["--bits", "64", "--json"];

    let (code, out, _) = run(redbloom(url, &key, &[&bits[..], &["info"]].concat()));
    assert_eq!(code, 0);
    assert_eq!(
        out,
        json!({"key": key, "bits": 64, "k": 14, "bits_set": 0, "bytes": 0,
               "estimated_items": 0, "estimated_fpr": 0.0, "ttl_seconds": null,
               "exists": false, "planned_bytes": 8})
    );
    let (code, out, _) = run(redbloom(
        url,
        &key,
        &[&bits[..], &["expire", "100"]].concat(),
    ));
    assert_eq!(
        (code, out),
        (0, json!({"ttl_seconds": null})),
        "no key, no TTL"
    );

    run(redbloom(
        url,
        &key,
        &[&bits[..], &["add", "hello", "world"]].concat(),
    ));
    let (_, out, _) = run(redbloom(url, &key, &[&bits[..], &["info"]].concat()));
    // a52c9b5aa00a14 has 22 bits set in 7 bytes.
    assert_eq!(
        (&out["bits_set"], &out["bytes"], &out["ttl_seconds"]),
        (&json!(22), &json!(7), &json!(-1))
    );
    assert_eq!(out["estimated_items"], 2);

    let (code, out, _) = run(redbloom(
        url,
        &key,
        &[&bits[..], &["expire", "100"]].concat(),
    ));
    assert_eq!((code, out), (0, json!({"ttl_seconds": 100})));
    let (_, out, _) = run(redbloom(url, &key, &[&bits[..], &["info"]].concat()));
    let ttl = out["ttl_seconds"].as_i64().unwrap();
    assert!((98..=100).contains(&ttl), "{ttl}");

    let (code, out, _) = run(redbloom(url, &key, &[&bits[..], &["clear"]].concat()));
    assert_eq!((code, out), (0, json!({"deleted": true})));
    let (code, out, _) = run(redbloom(url, &key, &[&bits[..], &["clear"]].concat()));
    assert_eq!((code, out), (0, json!({"deleted": false})));
}

#[tokio::test]
async fn bench_adds_then_finds_every_item() {
    let redis = common::redis().await;
    let key = common::unique_key("cli-bench");
    let url = redis.url();
    let size = ["--bits", "200000", "--json"];

    for (op, batch) in [("add", "1"), ("exists", "1"), ("exists", "64")] {
        let args = [
            "bench",
            "--op",
            op,
            "--items",
            "2000",
            "--concurrency",
            "16",
            "--batch",
            batch,
        ];
        let (code, out, err) = run(redbloom(url, &key, &[&size[..], &args].concat()));
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            (&out["op"], &out["items"], &out["concurrency"]),
            (&json!(op), &json!(2000), &json!(16))
        );
        assert_eq!(out["batch"], batch.parse::<u64>().unwrap());
        let (p50, p99) = (
            out["p50_us"].as_u64().unwrap(),
            out["p99_us"].as_u64().unwrap(),
        );
        assert!(0 < p50 && p50 <= p99, "{out}");
        assert!(
            out["items_per_sec"].as_f64().unwrap() > 0.0 && out["seconds"].as_f64().unwrap() > 0.0
        );
    }
    // The bench wrote bench:0..1999 into the filter.
    let (code, out, _) = run(redbloom(
        url,
        &key,
        &[&size[..], &["exists", "bench:0", "bench:1999"]].concat(),
    ));
    assert_eq!((code, &out["present"]), (0, &json!(2)));
}

#[tokio::test]
async fn errors_are_one_line_with_status_2() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let url = redis.url();
    let key = common::unique_key("cli-errors");
    let hash_key = common::unique_key("cli-hash");
    let () = redis::cmd("HSET")
        .arg(&hash_key)
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();

    let dead = "redis://:hunter2secret@127.0.0.1:1";
    let cases: Vec<(Command, &str)> = vec![
        (
            redbloom(dead, &key, &["--bits", "64", "info"]),
            "cannot connect to Redis at 127.0.0.1:1",
        ),
        (
            redbloom(url, &key, &["--bits", "64", "load", "/no/such/file"]),
            "cannot open /no/such/file",
        ),
        (
            redbloom(url, &key, &["--bits", "abc", "info"]),
            "invalid value 'abc' for '--bits <N>'",
        ),
        (
            redbloom(url, &key, &["--bits", "0", "info"]),
            "bits must be between 1 and 2^32",
        ),
        (
            redbloom(url, &key, &["--bits", "4294967297", "add", "x"]),
            "bits must be between 1 and 2^32",
        ),
        (
            redbloom(url, &key, &["--capacity", "10", "--fpr", "2", "info"]),
            "false-positive rate",
        ),
        (redbloom(url, &key, &["--capacity", "10", "info"]), "--fpr"),
        (
            redbloom(url, &key, &["info"]),
            "--bits N, or --capacity N with --fpr P",
        ),
        (redbloom(url, &key, &["--bits", "64"]), "missing command"),
        (
            redbloom(
                url,
                &key,
                &[
                    "--bits",
                    "64",
                    "bench",
                    "--op",
                    "add",
                    "--items",
                    "0",
                    "--concurrency",
                    "1",
                ],
            ),
            "--items",
        ),
        (
            redbloom(url, &hash_key, &["--bits", "64", "add", "x"]),
            "holds a hash, where the filter keeps a string",
        ),
        (
            redbloom("http://nope", &key, &["--bits", "64", "info"]),
            "invalid --url",
        ),
    ];
    for (cmd, cause) in cases {
        let shown = format!("{cmd:?}");
        let (code, out, stderr) = run(cmd);
        assert_eq!(code, 2, "{shown}: {stderr}");
        assert_eq!(out, Value::Null, "{shown}: nothing on stdout");
        assert_eq!(stderr.lines().count(), 1, "{shown}: one line: {stderr:?}");
        assert!(
            stderr.starts_with("redbloom: ") && stderr.contains(cause),
            "{shown}: {stderr:?}"
        );
        assert!(
            !stderr.contains("hunter2secret") && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
    let hash: Vec<String> = redis::cmd("HGETALL")
        .arg(&hash_key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(hash, ["f", "v"], "the wrong-type key is untouched");

    let mut missing_key = Command::cargo_bin("redbloom").unwrap();
    missing_key
        .env_remove("REDIS_URL")
        .args(["--url", url, "--bits", "64", "info"]);
    let (code, _, stderr) = run(missing_key);
    assert_eq!(code, 2);
    assert!(stderr.contains("missing --key"), "{stderr}");
}

#[tokio::test]
async fn cli_writes_the_same_bytes_as_gozero_for_the_spec_vectors() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    // SPEC.md §1's location table, computed by Go's spaolacci/murmur3 (the literal numbers, not
    // this crate's hashing), fed to go-zero's own set script.
    let vectors: [(&str, u64, [u64; 14]); 4] = [
        (
            "hello",
            64,
            [51, 34, 34, 19, 23, 2, 10, 0, 20, 32, 13, 25, 51, 53],
        ),
        (
            "",
            1000,
            [
                669, 862, 706, 449, 229, 392, 35, 359, 702, 853, 632, 167, 457, 838,
            ],
        ),
        (
            "hello",
            20000,
            [
                14195, 7778, 19938, 2931, 6359, 11362, 18058, 10240, 12212, 1248, 5389, 7865,
                10195, 6485,
            ],
        ),
        (
            "user:10086",
            20000000,
            [
                16762202, 11372775, 9831452, 14171817, 685721, 16954092, 3545453, 7740777,
                11964456, 11867116, 4502049, 4479283, 325787, 4794232,
            ],
        ),
    ];
    for (item, bits, locations) in vectors {
        let gozero_key = common::unique_key("gozero-vector");
        common::gozero::set(&mut conn, &gozero_key, &locations).await;

        let cli_key = common::unique_key("cli-vector");
        let bits_arg = bits.to_string();
        let (code, out, err) = run(redbloom(
            redis.url(),
            &cli_key,
            &["--bits", &bits_arg, "--json", "add", item],
        ));
        assert_eq!((code, out), (0, json!({"items": 1, "new": 1})), "{err}");

        let want = common::key_hex(&mut conn, &gozero_key).await;
        assert!(!want.is_empty());
        assert_eq!(
            common::key_hex(&mut conn, &cli_key).await,
            want,
            "{item:?} with {bits} bits"
        );
    }
}
