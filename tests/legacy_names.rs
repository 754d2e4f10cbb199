//! Filters made by earlier builds, under the older companion names `{K}:redbloom:NAME` that the
//! keys `K` and `{K}` both produced (SPEC.md §3, "Names"): read where they are unambiguously a
//! key's and moved to today's names at a handle's first call; refused with one line
//! (`Error::LegacyNames`) where they may be either key's, until `adopt_legacy_names` says whose.
//! The older state is made as an earlier build left it: today's companions renamed to the older
//! names.

mod common;

use redbloom::{Error, Layout, RedisBloom, StoredParams, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// Today's companion prefix of `key` (`{TAG}:redbloom:LEN:KEY:`), for a key without a tag.
fn today(key: &str) -> String {
    format!("{{{key}}}:redbloom:{}:{key}:", key.len())
}

/// Every key whose name starts with `prefix` (no glob characters in it).
async fn keys_from(conn: &mut MultiplexedConnection, prefix: &str) -> Vec<String> {
    common::keys_like(conn, &format!("{prefix}*")).await
}

/// Moves `key`'s companions back to the older names, as an earlier build named them: today's
/// `{TAG}:redbloom:LEN:KEY:NAME` to `{K}:redbloom:NAME`, where `K` is `key` without its braces
/// (`key` is `K` or `{K}`). Returns how many moved.
async fn make_legacy(conn: &mut MultiplexedConnection, key: &str) -> usize {
    let bare = key.trim_start_matches('{').trim_end_matches('}');
    let prefix = format!("{{{bare}}}:redbloom:{}:{key}:", key.len());
    let found = keys_from(conn, &prefix).await;
    for name in &found {
        let old = format!("{{{bare}}}:redbloom:{}", &name[prefix.len()..]);
        let _: () = redis::cmd("RENAME")
            .arg(name)
            .arg(&old)
            .query_async(conn)
            .await
            .unwrap();
    }
    found.len()
}

fn window(conn: &MultiplexedConnection, key: &str) -> WindowBloom<MultiplexedConnection> {
    WindowBloom::builder(key, Duration::from_secs(3600))
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap()
}

fn native(conn: &MultiplexedConnection, key: &str) -> RedisBloom<MultiplexedConnection> {
    RedisBloom::builder(key)
        .layout(Layout::Native)
        .expected_items(10_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap()
}

fn items(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("item:{i}")).collect()
}

#[track_caller]
fn assert_legacy<T: std::fmt::Debug>(result: redbloom::Result<T>, key: &str, other: &str) {
    match result {
        Err(err @ Error::LegacyNames { .. }) => {
            let text = err.to_string();
            assert!(
                text.contains(&format!("redbloom --key {key} migrate")),
                "{text}"
            );
            assert!(text.contains(&format!("{other:?}")), "{text}");
            assert!(!text.contains('\n'), "one line: {text}");
        }
        other => panic!("expected Error::LegacyNames for {key}, got {other:?}"),
    }
}

/// The case: `{q}`'s window filter, made under `{q}:redbloom:…`, holds no bare key:
/// nothing tells `q` from `{q}`. Both are refused (nothing read, nothing written, nothing
/// deleted: `q`'s `clear` no longer deletes `{q}`'s filter) until `{q}` adopts the names; then
/// `{q}` finds its items under today's names and `q` is a key of its own.
#[tokio::test]
async fn a_window_filter_under_shared_names_is_refused_until_adopted() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let q = common::unique_key("legacy-window");
    let braced = format!("{{{q}}}");
    let all = items(500);
    window(&conn, &braced).add_many(&all).await.unwrap();
    assert!(
        make_legacy(&mut conn, &braced).await >= 3,
        "params, a generation, its ledger"
    );
    let legacy = keys_from(&mut conn, &format!("{{{q}}}:redbloom:")).await;

    assert_legacy(window(&conn, &q).exists_many(&all).await, &q, &braced);
    assert_legacy(window(&conn, &q).clear().await, &q, &braced);
    assert_legacy(window(&conn, &q).add("x").await, &q, &braced);
    assert_legacy(window(&conn, &braced).exists("x").await, &braced, &q);
    assert_legacy(StoredParams::read(&mut conn, &q).await, &q, &braced);
    assert_eq!(
        keys_from(&mut conn, &format!("{{{q}}}:redbloom:")).await,
        legacy,
        "nothing written or deleted"
    );

    let adopted = window(&conn, &braced);
    adopted.adopt_legacy_names().await.unwrap();
    assert!(
        adopted.exists_many(&all).await.unwrap().iter().all(|&f| f),
        "every item found under today's names"
    );
    let moved = keys_from(
        &mut conn,
        &format!("{{{q}}}:redbloom:{}:{braced}:", braced.len()),
    )
    .await;
    assert!(moved.len() >= 3, "{moved:?}");
    assert!(
        keys_from(&mut conn, &format!("{{{q}}}:redbloom:"))
            .await
            .iter()
            .all(|k| k.starts_with(&format!("{{{q}}}:redbloom:{}:", braced.len()))),
        "no older name is left"
    );
    // `q` is its own key now: nothing stored, nothing of `{q}`'s found or deleted.
    assert_eq!(StoredParams::read(&mut conn, &q).await.unwrap(), None);
    let other = window(&conn, &q);
    assert!(!other.exists(&all[0]).await.unwrap());
    assert!(!other.clear().await.unwrap(), "q held nothing");
    assert!(
        adopted.exists(&all[0]).await.unwrap(),
        "{{q}}'s filter stays"
    );
}

/// A filter whose bits live at its key tells whose the older names are: `{s}`'s native filter
/// moves to today's names at its first call, and `s` (another program's string) is neither
/// described as `{s}`'s filter nor written or cleared.
#[tokio::test]
async fn a_filter_whose_key_tells_whose_it_is_moves_by_itself() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let s = common::unique_key("legacy-native");
    let braced = format!("{{{s}}}");
    let all = items(300);
    native(&conn, &braced).add_many(&all).await.unwrap();
    assert_eq!(make_legacy(&mut conn, &braced).await, 1, "the parameters");
    let _: () = redis::cmd("SET")
        .arg(&s)
        .arg("session-token-xyz")
        .query_async(&mut conn)
        .await
        .unwrap();
    // `s` holds a string but `{s}` holds the bits: still ambiguous by the data keys alone.
    assert_legacy(native(&conn, &s).add("x").await, &s, &braced);
    let _: () = redis::cmd("DEL")
        .arg(&s)
        .query_async(&mut conn)
        .await
        .unwrap();

    // `s` has no key: the older parameters are `{s}`'s, and `s` is a filter of its own.
    assert_eq!(StoredParams::read(&mut conn, &s).await.unwrap(), None);
    let stored = StoredParams::read(&mut conn, &braced)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.kind().unwrap(), redbloom::kind::KindName::Plain);
    let mine = native(&conn, &braced);
    assert!(mine.exists_many(&all).await.unwrap().iter().all(|&f| f));
    assert!(
        keys_from(
            &mut conn,
            &today(&braced).replace(&format!("{{{braced}}}"), &format!("{{{s}}}"))
        )
        .await
        .iter()
        .any(|k| k.ends_with(":params")),
        "moved to today's names"
    );
    let theirs = native(&conn, &s);
    assert!(theirs.add("x").await.unwrap());
    assert!(mine.exists_many(&all).await.unwrap().iter().all(|&f| f));
    theirs.clear().await.unwrap();
    assert!(
        mine.exists(&all[0]).await.unwrap(),
        "s's clear left {{s}} alone"
    );
}

/// A key with a hash tag had older names of its own (`{t}:x:redbloom:…`): they move at the
/// first call, with nothing to ask.
#[tokio::test]
async fn a_tagged_key_moves_with_nothing_to_ask() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = format!("{{{}}}:x", common::unique_key("legacy-tagged"));
    let all = items(200);
    window(&conn, &key).add_many(&all).await.unwrap();
    let prefix = format!(
        "{}:redbloom:{}:{key}:",
        &key[..key.find('}').unwrap() + 1],
        key.len()
    );
    let found = keys_from(&mut conn, &prefix).await;
    assert!(found.len() >= 3, "{found:?}");
    for name in &found {
        let old = format!("{key}:redbloom:{}", &name[prefix.len()..]);
        let _: () = redis::cmd("RENAME")
            .arg(name)
            .arg(old)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let stored = StoredParams::read(&mut conn, &key).await.unwrap().unwrap();
    assert_eq!(stored.kind().unwrap(), redbloom::kind::KindName::Window);
    let bloom = window(&conn, &key);
    assert!(bloom.exists_many(&all).await.unwrap().iter().all(|&f| f));
    assert_eq!(keys_from(&mut conn, &prefix).await.len(), found.len());
    assert!(keys_from(&mut conn, &format!("{key}:redbloom:"))
        .await
        .is_empty());
}

/// A key with a filter under today's names and older names beside it: the older names are left
/// alone (a move would overwrite today's filter), and taking them needs today's cleared first.
#[tokio::test]
async fn a_filter_under_todays_names_is_never_overwritten_by_older_ones() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = format!("{{{}}}:x", common::unique_key("legacy-both"));
    native(&conn, &key).add_many(&items(100)).await.unwrap();
    // Older parameters of another size beside today's filter.
    let _: () = redis::cmd("SET")
        .arg(format!("{key}:redbloom:params"))
        .arg("layout=native-v1 bits=8 hashes=1 hash=murmur3_x64_128")
        .query_async(&mut conn)
        .await
        .unwrap();
    let bloom = native(&conn, &key);
    assert!(bloom
        .exists_many(&items(100))
        .await
        .unwrap()
        .iter()
        .all(|&f| f));
    assert!(bloom.add("more").await.unwrap());
    match redbloom::adopt_legacy_names(&mut conn, &key).await {
        Err(Error::InvalidConfig(text)) => assert!(text.contains("clear it"), "{text}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    assert!(
        bloom.exists("more").await.unwrap(),
        "today's filter as it was"
    );
}
