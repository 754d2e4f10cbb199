//! The records of exact answers follow the server's clock (SPEC.md §3, "Names, losses and
//! records"; issue 51 point 3): writers whose own clocks are a year ahead and a year behind load
//! into one filter, and every ring slot's epoch is the server's time over its width, every slot
//! has a TTL of at most the ring's turn, and the records hold only what is in flight.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run, with_clock_off};

#[tokio::test]
async fn records_follow_the_servers_clock_whatever_the_writers_clocks() {
    let redis = common::redis().await;
    let url = redis.url();
    let mut conn = redis.connection().await;
    let key = common::unique_key("skewed-records");
    // Three writers, their clocks a year ahead, a year behind and right, each adding 10
    // batches of 50 new items (`add`: recorded; a `load` goes bare).
    let mut writers = Vec::new();
    for (w, offset) in ["+365d", "-365d", "+0"].into_iter().enumerate() {
        let (url, key) = (url.to_owned(), key.clone());
        writers.push(std::thread::spawn(move || {
            for call in 0..10 {
                let items: Vec<String> = (0..50).map(|n| format!("{w}:{call}:{n}")).collect();
                let mut args = vec![
                    "--layout",
                    "native",
                    "--capacity",
                    "200000",
                    "--fpr",
                    "0.01",
                    "--json",
                    "add",
                ];
                args.extend(items.iter().map(String::as_str));
                let mut cmd = redbloom(&url, &key, &args);
                with_clock_off(&mut cmd, offset);
                let (code, json, err) = run(cmd);
                assert_eq!(code, 0, "{err}");
                assert_eq!(json["new"], 50, "{json}");
            }
        }));
    }
    for writer in writers {
        writer.join().unwrap();
    }
    let server_ms = common::server_ms(&mut conn).await;
    let slots =
        common::keys_like(&mut conn, &format!("{}*", common::companion(&key, "once:"))).await;
    assert!(!slots.is_empty(), "the loads recorded their steps");
    let mut records = 0;
    for slot in &slots {
        // `…:once:WIDTH.INDEX`: the CLI's 30 s budget makes a ring of 4 s slots.
        let (width, index) = slot.rsplit(':').next().unwrap().split_once('.').unwrap();
        let (width, index): (u64, u64) = (width.parse().unwrap(), index.parse().unwrap());
        assert_eq!(width, 4_000, "{slot}");
        let fields: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(slot)
            .query_async(&mut conn)
            .await
            .unwrap();
        let field = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| f == name)
                .map(|(_, v)| v.parse::<u64>().unwrap())
                .unwrap_or_else(|| panic!("{slot} has no {name}: {fields:?}"))
        };
        let (epoch, started) = (field("e"), field("t"));
        assert_eq!(epoch % 10, index, "{slot}: epoch {epoch} in slot {index}");
        let now_epoch = server_ms / width;
        assert!(
            epoch + 10 > now_epoch && epoch <= now_epoch + 1,
            "{slot}: epoch {epoch}, the server's {now_epoch}"
        );
        assert!(
            started <= server_ms && started + 60_000 > server_ms,
            "{slot} started at {started}, the server's time {server_ms}"
        );
        let ttl = common::pttl(&mut conn, slot).await;
        assert!((1..=40_000).contains(&ttl), "{slot}: PTTL {ttl}");
        records += fields
            .iter()
            .filter(|(f, _)| !matches!(f.as_str(), "e" | "t" | "n" | "q"))
            .count();
    }
    // A process's answered ids travel with its own next write, and each `add` is a process of
    // its own: each leaves its record until its slot's TTL (30 at most).
    assert!(records <= 30, "{records} records left");
}
