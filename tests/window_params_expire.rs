//! A window filter's parameters expire with its generations (SPEC.md §3, "Names, losses and
//! records"; issue 51 point 6): a window whose generations have all left the window holds no
//! key at all, while a deadline given by `expire` still bounds the generations made later.

mod common;

use redbloom::{KeyTtl, WindowBloom};
use std::time::{Duration, Instant};

const W: Duration = Duration::from_secs(2);

#[tokio::test]
async fn the_parameters_go_with_the_last_generation() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("window-params-expire");
    let recent = WindowBloom::builder(&key, W)
        .generations(4)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(recent.add("a").await.unwrap());
    let params = common::companion(&key, "params");
    let pattern = format!("{}*", common::companion(&key, ""));
    let generations =
        common::keys_like(&mut conn, &format!("{}*", common::companion(&key, "gen:"))).await;
    assert_eq!(generations.len(), 1, "{generations:?}");
    let expiry = |conn: &mut redis::aio::MultiplexedConnection, key: &str| {
        let mut conn = conn.clone();
        let key = key.to_owned();
        async move {
            let at: i64 = redis::cmd("PEXPIRETIME")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .unwrap();
            at
        }
    };
    let params_at = expiry(&mut conn, &params).await;
    assert!(params_at > 0, "the parameters expire");
    let generation_at = expiry(&mut conn, &generations[0]).await;
    assert!(
        (params_at - generation_at).abs() <= 5,
        "with the newest generation: {params_at} against {generation_at}"
    );
    // Every key of the filter is gone within W·G/(G-1) and a margin, by the server's clock.
    let started = Instant::now();
    while !common::keys_like(&mut conn, &pattern).await.is_empty() {
        assert!(
            started.elapsed() < W * 4 / 3 + Duration::from_secs(2),
            "left: {:?}",
            common::keys_like(&mut conn, &pattern).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A new add starts a new filter.
    assert!(recent.add("a").await.unwrap());
}

/// `expire` gives a window a deadline that generations made later keep too: a generation
/// made in the next epoch expires by it, not when it would leave the window.
#[tokio::test]
async fn a_deadline_from_expire_bounds_later_generations() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("window-params-deadline");
    // Generations of 1 s: the next two epochs begin within 2 s of the deadline's 3 s.
    let recent = WindowBloom::builder(&key, Duration::from_secs(3))
        .generations(4)
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    assert!(recent.add("a").await.unwrap());
    let generations = format!("{}*", common::companion(&key, "gen:"));
    let first = common::keys_like(&mut conn, &generations).await;
    assert_eq!(first.len(), 1);
    let ttl = Duration::from_secs(3);
    assert!(recent.expire(ttl).await.unwrap());
    // (The server's clock after the expire: the deadline is no later than this.)
    let deadline = common::server_ms(&mut conn).await + 3_000;
    // Adds until they have made the next two epochs' generations: the second is made after
    // the first gave the parameters its own expiry. (The second would leave the window at
    // least 4 s after the expire: only the deadline makes it go sooner.)
    let started = Instant::now();
    let mut made = first.clone();
    while made.len() < 3 {
        recent.add("b").await.unwrap();
        made = common::keys_like(&mut conn, &generations).await;
        assert!(
            started.elapsed() < Duration::from_millis(2_900),
            "no later generations: {made:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for later in made.iter().filter(|k| !first.contains(k)) {
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg(later)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            at > 0 && at as u64 <= deadline,
            "{later} expires by the deadline: {at} > {deadline}"
        );
    }
    let info = recent.info().await.unwrap();
    assert!(matches!(info.filter.ttl, KeyTtl::Expires(t) if t <= ttl));
}
