//! Many tokio tasks sharing one filter (one multiplexed connection): no lost writes, atomic adds.

mod common;

use redbloom::RedisBloom;
use std::sync::Arc;
use tokio::sync::Barrier;

const TASKS: usize = 64;
const PER_TASK: usize = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn sixty_four_tasks_lose_nothing() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bloom = RedisBloom::builder(common::unique_key("concurrent"))
        .expected_items((TASKS * PER_TASK) as u64)
        .false_positive_rate(1e-3)
        .build(conn)
        .unwrap();
    let start = Arc::new(Barrier::new(TASKS));

    let mut handles = Vec::with_capacity(TASKS);
    for task in 0..TASKS {
        let bloom = bloom.clone();
        let start = Arc::clone(&start);
        handles.push(tokio::spawn(async move {
            start.wait().await;
            let mut new = 0usize;
            for i in 0..PER_TASK {
                let item = format!("task:{task}:item:{i}");
                if bloom.add(&item).await.unwrap() {
                    new += 1;
                }
                assert!(
                    bloom.exists(&item).await.unwrap(),
                    "{item} not found right after its add"
                );
            }
            new
        }));
    }
    let mut new = 0;
    for handle in handles {
        new += handle.await.expect("task panicked");
    }
    // Distinct items at a final rate of 0.1%: almost all are new (false positives at insertion
    // time are the only exception; expected well under 32).
    assert!(
        new >= TASKS * PER_TASK - 100,
        "only {new} of {} adds reported new",
        TASKS * PER_TASK
    );

    let all: Vec<String> = (0..TASKS)
        .flat_map(|task| (0..PER_TASK).map(move |i| format!("task:{task}:item:{i}")))
        .collect();
    assert_eq!(all.len(), 32_000);
    let mut missing = 0;
    for chunk in all.chunks(1_000) {
        missing += bloom
            .exists_many(chunk)
            .await
            .unwrap()
            .into_iter()
            .filter(|p| !p)
            .count();
    }
    assert_eq!(missing, 0, "false negatives after concurrent adds");

    // The filter's fill agrees with 32,000 distinct items (no writes were lost or misplaced).
    let info = bloom.info().await.unwrap();
    let estimate = info.estimated_items;
    assert!(
        (estimate - 32_000.0).abs() < 32_000.0 * 0.05,
        "estimated {estimate} items"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_adds_of_one_item_have_exactly_one_winner() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let bloom = RedisBloom::new(conn, common::unique_key("one-winner"), 1 << 20).unwrap();

    for round in 0..10 {
        let item = format!("contended:{round}");
        assert!(!bloom.exists(&item).await.unwrap(), "{item} is new");
        let start = Arc::new(Barrier::new(TASKS));
        let mut handles = Vec::with_capacity(TASKS);
        for _ in 0..TASKS {
            let bloom = bloom.clone();
            let start = Arc::clone(&start);
            let item = item.clone();
            handles.push(tokio::spawn(async move {
                start.wait().await;
                bloom.add(&item).await.unwrap()
            }));
        }
        let mut winners = 0;
        for handle in handles {
            if handle.await.expect("task panicked") {
                winners += 1;
            }
        }
        assert_eq!(
            winners, 1,
            "round {round}: {winners} tasks saw {item} as new"
        );
        assert!(bloom.exists(&item).await.unwrap());
    }
}
