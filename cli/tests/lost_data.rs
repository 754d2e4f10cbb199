//! Lost data through the CLI (SPEC.md §3): a native filter whose bits were deleted under its
//! stored parameters makes `exists` and `check` exit 2 with one line naming the key, never
//! "0 present"; `clear` starts again.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};

#[tokio::test]
async fn checks_of_a_filter_whose_bits_are_gone_exit_2_naming_the_key() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-lost");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let items: String = (0..1000).map(|i| format!("item:{i}\n")).collect();
    std::fs::write(&file, items).unwrap();
    let file = file.to_str().unwrap();
    let native = [
        "--layout",
        "native",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "--json",
    ];
    let with = |args: &[&str]| {
        let all: Vec<&str> = native.iter().chain(args).copied().collect();
        redbloom(&url, &key, &all)
    };
    let (code, out, err) = run(with(&["load", file]));
    assert_eq!((code, out["items"].as_u64()), (0, Some(1000)), "{err}");

    let deleted: i64 = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    for args in [&["exists", "item:1"][..], &["check", file]] {
        assert_fails(with(args), &[&key, "gone", "clear"], None);
    }
    // Opened from what Redis stores (no size flags): the same.
    assert_fails(
        redbloom(&url, &key, &["exists", "item:1"]),
        &[&key, "gone"],
        None,
    );

    let (code, _, err) = run(with(&["clear"]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(with(&["check", file]));
    assert_eq!((code, out["present"].as_u64()), (0, Some(0)), "{err}");
}

/// A growing filter whose level segment was deleted under its counts: `check` exits 2 naming
/// the segment.
#[tokio::test]
async fn checks_of_a_growing_filter_whose_levels_are_gone_exit_2() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-lost-growing");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let items: String = (0..1000).map(|i| format!("item:{i}\n")).collect();
    std::fs::write(&file, items).unwrap();
    let file = file.to_str().unwrap();
    let growing = [
        "--growth",
        "2",
        "--capacity",
        "100",
        "--fpr",
        "0.01",
        "--json",
    ];
    let with = |args: &[&str]| {
        let all: Vec<&str> = growing.iter().chain(args).copied().collect();
        redbloom(&url, &key, &all)
    };
    let (code, _, err) = run(with(&["load", file]));
    assert_eq!(code, 0, "{err}");
    let segments = common::keys_like(&mut conn, &format!("*:redbloom:*{key}*:grow:*:0")).await;
    assert_eq!(segments.len(), 1, "{segments:?}");
    let _: () = redis::cmd("DEL")
        .arg(&segments[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_fails(with(&["check", file]), &[&segments[0], "gone"], None);
}

/// A window filter whose live generation was deleted by hand: `exists` and `check` exit 2
/// naming the generation; after `clear`, checks answer again.
#[tokio::test]
async fn checks_of_a_window_filter_whose_generation_is_gone_exit_2() {
    let redis = common::redis().await;
    let url = redis.url().to_owned();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cli-lost-window");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let items: String = (0..1000).map(|i| format!("item:{i}\n")).collect();
    std::fs::write(&file, items).unwrap();
    let file = file.to_str().unwrap();
    let flags = [
        "--window",
        "1h",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "--json",
    ];
    let with = |args: &[&str]| {
        let all: Vec<&str> = flags.iter().chain(args).copied().collect();
        redbloom(&url, &key, &all)
    };
    let (code, out, err) = run(with(&["load", file]));
    assert_eq!((code, out["new"].as_u64()), (0, Some(1000)), "{err}");

    let generations =
        common::keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    // A generation's name ends with its epoch (a record ring's, beside them, does not).
    let generation: Vec<&String> = generations
        .iter()
        .filter(|k| {
            k.rsplit(':')
                .next()
                .is_some_and(|e| e.parse::<i64>().is_ok())
        })
        .collect();
    assert_eq!(generation.len(), 1, "{generations:?}");
    let deleted: i64 = redis::cmd("DEL")
        .arg(generation[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    for args in [&["exists", "item:1"][..], &["check", file]] {
        assert_fails(with(args), &[generation[0].as_str(), "gone"], None);
    }
    let (code, _, err) = run(with(&["clear"]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(with(&["check", file]));
    assert_eq!((code, out["present"].as_u64()), (0, Some(0)), "{err}");
}
