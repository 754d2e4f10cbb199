//! A batch of any size goes as bounded commands: each at most `MAX_OFFSETS_PER_COMMAND`
//! offsets, so none outlasts redis-rs's default 500 ms response timeout or takes the server's
//! memory; the answers still come back in input order.

mod common;

use common::server::RedisServer;
use redbloom::{RedisBloom, MAX_OFFSETS_PER_COMMAND};
use redis::aio::MultiplexedConnection;

/// A field of `INFO`'s answer, as a number.
async fn info_field(conn: &mut MultiplexedConnection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .map(|value| {
            // cmdstat lines are "calls=N,usec=...".
            let value = value.strip_prefix("calls=").unwrap_or(value);
            value.split(',').next().unwrap().trim().parse().unwrap()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_batch_of_60k_items_goes_as_bounded_commands_within_the_default_timeout() {
    // A private server: the test reads its command statistics.
    let server = RedisServer::start().expect("redis-server on PATH");
    let client = redis::Client::open(server.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    // A response timeout of 2 s: one command of the whole batch took longer on this 2-core
    // machine under load.
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(2)));
    let conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let bits: u64 = 1 << 30;
    let bloom = RedisBloom::new(conn, "big-batch", bits).unwrap();
    // The first write also probes the route and asks INFO memory (the eviction check): not
    // what is counted below.
    bloom.add("warm-up").await.unwrap();
    // The filter's 128 MiB allocated ahead, as for a filter in use: the first write's
    // allocation is not what is measured.
    let () = redis::cmd("SETBIT")
        .arg("big-batch")
        .arg(bits - 1)
        .arg(0)
        .query_async::<i64>(&mut admin)
        .await
        .map(drop)
        .unwrap();
    let n = 60_000;
    let items: Vec<String> = (0..n).map(|i| format!("item:{i}")).collect();

    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut admin)
        .await
        .unwrap();
    let used_before = info_field(&mut admin, "memory", "used_memory").await;
    let new = bloom.add_many(&items).await.expect("no timeout");
    assert_eq!(new.len(), n);
    assert!(new.iter().filter(|&&b| b).count() > n - 10, "new items");
    let present = bloom.exists_many(&items).await.expect("no timeout");
    assert!(present.iter().all(|&p| p), "no false negative");
    // Answers in input order: absent items interleaved with present ones.
    let mixed: Vec<String> = (0..n)
        .map(|i| match i % 2 {
            0 => format!("item:{i}"),
            _ => format!("absent:{i}"),
        })
        .collect();
    let answers = bloom.exists_many(&mixed).await.unwrap();
    let evens_present = answers.iter().step_by(2).all(|&p| p);
    let odd_hits = answers.iter().skip(1).step_by(2).filter(|&&p| p).count();
    assert!(evens_present && odd_hits < 10, "{odd_hits} false positives");

    let per_command = MAX_OFFSETS_PER_COMMAND / 14;
    let commands = n.div_ceil(per_command) as u64;
    let writes = info_field(&mut admin, "commandstats", "cmdstat_bitfield").await;
    let reads = info_field(&mut admin, "commandstats", "cmdstat_bitfield_ro").await;
    assert_eq!(
        writes, commands,
        "writes split into commands of {per_command} items"
    );
    assert_eq!(reads, 2 * commands, "reads split too");
    // The server's memory: a few commands' worth beyond the filter, not the whole batch at
    // once (one command of 60k items took 133 MiB beyond the filter).
    let peak = info_field(&mut admin, "memory", "used_memory_peak").await;
    eprintln!(
        "peak: {} MiB beyond the filter",
        (peak.saturating_sub(used_before)) >> 20
    );
    assert!(
        peak < used_before + (32 << 20),
        "peak {peak} bytes, {used_before} before"
    );
}

#[tokio::test]
async fn an_item_repeated_across_commands_is_new_only_at_its_first_occurrence() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    // Large enough that 3,000 items take the BITFIELD path, in three commands.
    let bloom = RedisBloom::new(conn, common::unique_key("repeat"), 1 << 27).unwrap();
    let per_command = MAX_OFFSETS_PER_COMMAND / 14;
    let mut items: Vec<String> = (0..3 * per_command).map(|i| format!("i:{i}")).collect();
    let last = items.len() - 1;
    items[0] = "dup".into();
    items[last] = "dup".into();
    items[per_command + 5] = "dup".into();
    let new = bloom.add_many(&items).await.unwrap();
    assert!(new[0], "the first occurrence is new");
    assert!(
        !new[per_command + 5] && !new[last],
        "later ones, in later commands, are not"
    );
    assert_eq!(new.iter().filter(|&&n| n).count(), items.len() - 2);
}
