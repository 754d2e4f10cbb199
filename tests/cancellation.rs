//! What a dropped call leaves behind (the crate's docs, "Cancellation"): `add_many`,
//! `load_many` and a counting filter's `remove_many` futures dropped at many points (a
//! deadline growing from nothing, so that each is dropped after one more step of its way: its
//! first poll, a command sent, a reply read, a dense write's read or its merge), beside calls
//! that complete, for every kind, against a real server. Then:
//! - every item of a call that completed is found, and the filter's `info` and `exists` work;
//! - a counting filter never undercounts: items never removed are found, and once every item
//!   known to be in is removed exactly once, every counter is back to 0;
//! - no key is left but the filter's own and the companions its kind documents
//!   (docs/design.md "The keys beside a filter"), those of a call in flight (records, scratch,
//!   swap, lease, staging) with a TTL, so that a dropped call's expire by themselves.

mod common;

use redbloom::kind::Kind;
use redbloom::{Bloom, CountingBloom, GrowingBloom, ModuleBloom, RedisBloom, Retry, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

/// Rounds of drops per kind, each dropped later than the one before ([`deadline`]).
const ROUNDS: u32 = 60;

/// When round `round`'s calls are dropped: from 25 µs (a first poll, a command sent) growing
/// by a sixth each round to a quarter of a second (past the end of most calls), so that the
/// drops fall at every step of a call, small or large.
fn deadline(round: u32) -> Duration {
    Duration::from_micros(25).mul_f64(1.17f64.powi(round as i32))
}

/// The items of one round's call: `len` fresh items.
fn items(tag: &str, round: u32, len: usize) -> Vec<String> {
    (0..len).map(|i| format!("{tag}:{round}:{i}")).collect()
}

/// The batch sizes of the rounds, in turn: small ones (a step or two), and large ones (many
/// commands, or a kind's dense path: the filters are small enough).
const SIZES: [usize; 4] = [3, 200, 2_500, 10_000];

/// The last rounds, whose deadlines (64 ms to a quarter of a second) most calls meet.
const LATE: u32 = 10;

/// What the rounds did: the items of calls that completed, and those of calls dropped.
#[derive(Default)]
struct Outcome {
    done: Vec<String>,
    dropped: Vec<String>,
    /// Of the [`LATE`] rounds, those whose calls all completed.
    late: u32,
}

/// Rounds of `add_many` and `load_many` dropped at a deadline growing from nothing, each beside
/// an `add_many` and single `add`s (grouped) that complete; the batches dropped are of `sizes`
/// in turn.
async fn adds_dropped<K: Kind>(
    bloom: &Bloom<MultiplexedConnection, K>,
    sizes: [usize; 4],
) -> Outcome {
    let len = |round: u32| sizes[round as usize % sizes.len()];
    let mut outcome = Outcome::default();
    for round in 0..ROUNDS {
        let deadline = deadline(round);
        let (added, loaded) = (
            items("a", round, len(round)),
            items("l", round, len(round + 1)),
        );
        let (beside, single) = (items("b", round, 50), items("s", round, 8));
        let dropped_add = tokio::time::timeout(deadline, bloom.add_many(&added));
        let dropped_load = tokio::time::timeout(deadline, bloom.load_many(&loaded));
        let completed = bloom.add_many(&beside);
        let singles = futures_util::future::join_all(single.iter().map(|item| async move {
            // Half of them dropped too: group commit hands their steps on.
            match item.ends_with(['0', '2', '4', '6']) {
                true => tokio::time::timeout(deadline, bloom.add(item)).await.ok(),
                false => Some(bloom.add(item).await),
            }
        }));
        let (add, load, completed, singles) =
            tokio::join!(dropped_add, dropped_load, completed, singles);
        // The last rounds' deadlines are past a call's end: nothing left by a call dropped
        // before holds the next ones up (a dense write's lease was, for 5 s).
        if round >= ROUNDS - LATE && add.is_ok() && load.is_ok() {
            outcome.late += 1;
        }
        completed.unwrap_or_else(|err| panic!("round {round}: {err}"));
        outcome.done.extend(beside);
        for (answer, item) in [
            (add.map(|a| a.map(drop)), added),
            (load.map(|l| l.map(drop)), loaded),
        ] {
            match answer {
                Ok(Ok(())) => outcome.done.extend(item),
                Ok(Err(err)) => panic!("round {round}: a call not dropped failed: {err}"),
                Err(_) => outcome.dropped.extend(item),
            }
        }
        for (answer, item) in singles.into_iter().zip(single) {
            match answer {
                Some(Ok(_)) => outcome.done.push(item),
                // A grouped caller whose leader was dropped with its item in the step.
                Some(Err(redbloom::Error::OutcomeUnknown { .. })) | None => {
                    outcome.dropped.push(item)
                }
                Some(Err(err)) => panic!("round {round}: a single add failed: {err}"),
            }
        }
    }
    assert!(
        !outcome.dropped.is_empty() && !outcome.done.is_empty(),
        "calls both dropped and completed"
    );
    assert!(
        outcome.late >= LATE / 2,
        "{} of the last {LATE} rounds completed: calls held up by what dropped ones left",
        outcome.late
    );
    outcome
}

/// Every item of a completed call is found; `info` and `exists` work.
async fn assert_found<K: Kind>(bloom: &Bloom<MultiplexedConnection, K>, outcome: &Outcome) {
    for chunk in outcome.done.chunks(50_000) {
        let found = bloom.exists_many(chunk).await.unwrap();
        let missing: Vec<_> = chunk.iter().zip(found).filter(|(_, f)| !f).collect();
        assert!(
            missing.is_empty(),
            "{} lost: {:?}",
            missing.len(),
            &missing[..missing.len().min(5)]
        );
    }
    bloom.info().await.unwrap();
    bloom.exists("never added").await.unwrap();
    // Calls were dropped before anything of them was sent, and after some of their steps.
    let found = bloom.exists_many(&outcome.dropped).await.unwrap();
    let applied = found.iter().filter(|&&f| f).count();
    assert!(
        0 < applied && applied < found.len(),
        "{applied} of {} items of dropped calls in",
        found.len()
    );
}

/// Every key on the server is the filter's (`filter`), one of its shards', or a companion of
/// them the kind keeps (`kept`: `params`, `gen:`, …); the companions of a call in flight have a
/// TTL.
async fn assert_keys(conn: &mut MultiplexedConnection, filter: &str, kept: &[&str]) {
    const IN_FLIGHT: [&str; 5] = ["once:", "scratch", "swap:", "import:", "lease"];
    let shard = format!(":{filter}:shard:");
    let ours = |key: &str| key == filter || key.contains(&shard) && key.starts_with("{rb");
    for key in common::keys_like(conn, "*").await {
        if ours(&key) {
            continue;
        }
        // A companion's owner: the filter, a shard, or a companion (a window's generation and
        // a growing filter's counts keep records of their own).
        let mut name = &key[..];
        let mut owner = &key[..];
        while let Some((of, what)) = common::companion_of(owner) {
            (owner, name) = (of, if name == key { what } else { name });
            if ours(owner) {
                break;
            }
        }
        assert!(ours(owner), "{key}: not one of {filter}'s keys");
        let (_, own) = common::companion_of(&key).unwrap();
        if IN_FLIGHT.iter().any(|part| own.contains(part)) {
            let ttl = common::pttl(conn, &key).await;
            assert!(ttl > 0, "{key}: left by a call, with no TTL ({ttl})");
        } else {
            assert!(
                kept.iter().any(|prefix| name.starts_with(prefix)),
                "{key}: {name:?} is none of {kept:?}"
            );
        }
    }
}

fn retry() -> Retry {
    Retry::for_duration(Duration::from_secs(5))
}

#[tokio::test]
async fn a_dropped_plain_call_leaves_a_consistent_filter() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("cancel-plain");
    let bloom = RedisBloom::builder(&key)
        .layout(redbloom::Layout::Native)
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .shards(2)
        .retry(retry())
        .build(conn.clone())
        .unwrap();
    let outcome = adds_dropped(&bloom, SIZES).await;
    assert_found(&bloom, &outcome).await;
    assert_keys(&mut conn, &key, &["params"]).await;
}

#[tokio::test]
async fn a_dropped_window_call_leaves_a_consistent_filter() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("cancel-window");
    let bloom = WindowBloom::builder(&key, Duration::from_secs(3600))
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .retry(retry())
        .build(conn.clone())
        .unwrap();
    let outcome = adds_dropped(&bloom, SIZES).await;
    assert_found(&bloom, &outcome).await;
    assert_keys(&mut conn, &key, &["params", "gen:", "made:"]).await;
}

#[tokio::test]
async fn a_dropped_growing_call_leaves_a_consistent_filter() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("cancel-growing");
    // Small first levels: the rounds make new levels, some in calls that are dropped.
    let bloom = GrowingBloom::builder(&key)
        .expected_items(5_000)
        .false_positive_rate(0.001)
        .growth(2)
        .retry(retry())
        .build(conn.clone())
        .unwrap();
    let outcome = adds_dropped(&bloom, SIZES).await;
    assert_found(&bloom, &outcome).await;
    let levels = bloom.info().await.unwrap().levels;
    assert!(
        levels > 2,
        "{levels} levels, {} items added",
        outcome.done.len()
    );
    assert_keys(&mut conn, &key, &["params", "grow:"]).await;
}

#[tokio::test]
async fn a_dropped_module_call_leaves_a_consistent_filter() {
    let redis = common::module::redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("cancel-module");
    let bloom = ModuleBloom::builder(&key)
        .expected_items(50_000)
        .false_positive_rate(0.01)
        .retry(retry())
        .build(conn.clone())
        .unwrap();
    let outcome = adds_dropped(&bloom, SIZES).await;
    assert_found(&bloom, &outcome).await;
    assert_keys(&mut conn, &key, &["params"]).await;
}

/// A counting filter's adds and removes dropped: never an undercount.
#[tokio::test]
async fn a_dropped_counting_call_never_undercounts() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("cancel-counting");
    // Few false positives among the checks below (each a removal of the wrong item).
    let bloom = CountingBloom::builder(&key)
        .expected_items(50_000)
        .false_positive_rate(1e-7)
        .retry(retry())
        .build(conn.clone())
        .unwrap();
    let added = adds_dropped(&bloom, [3, 100, 1_000, 2_500]).await;
    assert_found(&bloom, &added).await;

    // Removes of items known to be in, dropped at growing deadlines; the rest never removed.
    let (mut removed, mut maybe_removed) = (Vec::new(), Vec::new());
    let mut kept: Vec<String> = Vec::new();
    let mut done = added
        .done
        .chunks((added.done.len() / ROUNDS as usize).max(2));
    for round in 0..ROUNDS {
        let Some(batch) = done.next() else { break };
        let (to_remove, keep) = batch.split_at(batch.len() / 2);
        kept.extend_from_slice(keep);
        match tokio::time::timeout(deadline(round), bloom.remove_many(to_remove)).await {
            Ok(answers) => {
                let answers = answers.unwrap();
                assert!(
                    answers.iter().all(|&r| r),
                    "round {round}: present, so removed"
                );
                removed.extend_from_slice(to_remove);
            }
            Err(_) => maybe_removed.extend_from_slice(to_remove),
        }
    }
    assert!(
        !maybe_removed.is_empty() && !removed.is_empty(),
        "{} removed, {} maybe",
        removed.len(),
        maybe_removed.len()
    );
    kept.extend(done.flatten().cloned());
    // Never an undercount: what was added and never removed is found.
    let found = bloom.exists_many(&kept).await.unwrap();
    assert!(
        found.iter().all(|&f| f),
        "an item never removed tests absent"
    );
    bloom.info().await.unwrap();

    // Each item in the filter once removed once more: the items of a dropped add or remove
    // that are found (the call's step that carried them was applied, or not), and those kept.
    let unsure: Vec<&String> = added.dropped.iter().chain(&maybe_removed).collect();
    let found = bloom.exists_many(&unsure).await.unwrap();
    let present: Vec<&String> = unsure
        .iter()
        .zip(found)
        .filter(|(_, f)| *f)
        .map(|(i, _)| *i)
        .collect();
    for chunk in present.chunks(10_000) {
        assert!(bloom.remove_many(chunk).await.unwrap().iter().all(|&r| r));
    }
    for chunk in kept.chunks(10_000) {
        assert!(bloom.remove_many(chunk).await.unwrap().iter().all(|&r| r));
    }
    // Every count went back to 0: none applied twice, none lost.
    let info = bloom.info().await.unwrap();
    assert_eq!(info.counters_in_use, 0, "{info:?}");
    assert_keys(&mut conn, &key, &["params"]).await;
}
