//! Snapshots of the kinds other than plain (SPEC.md §5), against real redis-servers: counting,
//! growing and window filters, of one key and sharded, exported and imported under another key
//! and into another server answer the same for every item added and for items never added,
//! with the same info; a file of another kind or other parameters is a mismatch that writes
//! nothing; merges refused where they cannot add up; a growing filter's levels past the
//! file's are deleted by the import.

mod common;

use redbloom::{CountingBloom, Error, GrowingBloom, ImportMode, RedisBloom, WindowBloom};
use redis::aio::MultiplexedConnection;
use std::time::Duration;

type Conn = MultiplexedConnection;

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// Every key whose name holds `key`, with its DUMP: what any write changes.
async fn dump(conn: &mut Conn, key: &str) -> Vec<(String, Vec<u8>)> {
    common::dumps(conn, &format!("*{key}*")).await
}

/// The kinds, each with one builder per key.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Counting,
    Growing,
    Window,
}

/// One filter of any of the kinds, behind the verbs the test needs.
enum Any {
    Counting(redbloom::CountingBloom<Conn>),
    Growing(redbloom::GrowingBloom<Conn>),
    Window(redbloom::WindowBloom<Conn>),
}

impl Any {
    fn new(kind: Kind, key: &str, shards: u32, conn: Conn) -> Self {
        match kind {
            Kind::Counting => Any::Counting(
                CountingBloom::builder(key)
                    .expected_items(20_000)
                    .false_positive_rate(0.01)
                    .shards(shards)
                    .build(conn)
                    .unwrap(),
            ),
            Kind::Growing => Any::Growing(
                GrowingBloom::builder(key)
                    .expected_items(2_000)
                    .false_positive_rate(0.01)
                    .shards(shards)
                    .growth(2)
                    .build(conn)
                    .unwrap(),
            ),
            Kind::Window => Any::Window(
                WindowBloom::builder(key, Duration::from_secs(3_600))
                    .expected_items(20_000)
                    .false_positive_rate(0.01)
                    .shards(shards)
                    .build(conn)
                    .unwrap(),
            ),
        }
    }

    async fn add_many(&self, items: &[String]) -> Vec<bool> {
        match self {
            Any::Counting(f) => f.add_many(items).await.unwrap(),
            Any::Growing(f) => f.add_many(items).await.unwrap(),
            Any::Window(f) => f.add_many(items).await.unwrap(),
        }
    }

    async fn exists_many(&self, items: &[String]) -> Vec<bool> {
        match self {
            Any::Counting(f) => f.exists_many(items).await.unwrap(),
            Any::Growing(f) => f.exists_many(items).await.unwrap(),
            Any::Window(f) => f.exists_many(items).await.unwrap(),
        }
    }

    async fn export(&self) -> Vec<u8> {
        let mut file = Vec::new();
        match self {
            Any::Counting(f) => f.export(&mut file).await.unwrap(),
            Any::Growing(f) => f.export(&mut file).await.unwrap(),
            Any::Window(f) => f.export(&mut file).await.unwrap(),
        };
        file
    }

    async fn import(&self, file: &[u8], mode: ImportMode) -> redbloom::Result<()> {
        match self {
            Any::Counting(f) => f.import(file, mode).await.map(drop),
            Any::Growing(f) => f.import(file, mode).await.map(drop),
            Any::Window(f) => f.import(file, mode).await.map(drop),
        }
    }

    /// The info fields that must survive a round trip.
    async fn summary(&self) -> (u64, u64, u64) {
        match self {
            Any::Counting(f) => {
                let i = f.info().await.unwrap();
                (i.filter.bits, i.filter.bits_set, i.filter.bytes)
            }
            Any::Growing(f) => {
                let i = f.info().await.unwrap();
                (u64::from(i.levels), i.items, i.filter.bits_set)
            }
            Any::Window(f) => {
                let i = f.info().await.unwrap();
                (i.parts.len() as u64, i.filter.bits_set, i.filter.bytes)
            }
        }
    }
}

#[tokio::test]
async fn every_kind_round_trips_under_another_key_and_into_another_server() {
    let redis = common::redis().await;
    let other = common::server::RedisServer::start().expect("a second redis-server");
    let mut conn = redis.connection().await;
    let other_conn = redis::Client::open(other.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let added = items("in", 12_000);
    let absent = items("out", 12_000);
    for kind in [Kind::Counting, Kind::Growing, Kind::Window] {
        for shards in [1, 3] {
            let what = format!("{kind:?}, {shards} shard(s)");
            let key = common::unique_key("snap-kind");
            let source = Any::new(kind, &key, shards, conn.clone());
            source.add_many(&added).await;
            let want_in = source.exists_many(&added).await;
            assert!(want_in.iter().all(|&f| f), "{what}: no false negative");
            let want_out = source.exists_many(&absent).await;
            let want_info = source.summary().await;
            let file = source.export().await;

            for (place, c) in [
                ("another key", conn.clone()),
                ("another server", other_conn.clone()),
            ] {
                let copy_key = common::unique_key("snap-kind-copy");
                let copy = Any::new(kind, &copy_key, shards, c);
                copy.import(&file, ImportMode::Replace).await.unwrap();
                assert_eq!(copy.exists_many(&added).await, want_in, "{what}, {place}");
                assert_eq!(copy.exists_many(&absent).await, want_out, "{what}, {place}");
                assert_eq!(copy.summary().await, want_info, "{what}, {place}: info");
            }

            // Another kind's filter at the same key refuses the file and writes nothing.
            let before = dump(&mut conn, &key).await;
            let plain = RedisBloom::builder(&key)
                .expected_items(20_000)
                .false_positive_rate(0.01)
                .shards(shards)
                .build(conn.clone())
                .unwrap();
            let err = plain
                .import(&file[..], ImportMode::Replace)
                .await
                .unwrap_err();
            assert!(matches!(err, Error::FileMismatch { .. }), "{what}: {err}");
            assert_eq!(
                dump(&mut conn, &key).await,
                before,
                "{what}: nothing written"
            );
        }
    }
}

#[tokio::test]
async fn merges_that_cannot_add_up_are_refused_and_write_nothing() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    for kind in [Kind::Counting, Kind::Growing] {
        let key = common::unique_key("snap-merge");
        let filter = Any::new(kind, &key, 1, conn.clone());
        filter.add_many(&items("m", 500)).await;
        let file = filter.export().await;
        let before = dump(&mut conn, &key).await;
        let err = filter.import(&file, ImportMode::Merge).await.unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{kind:?}: {err}");
        assert_eq!(dump(&mut conn, &key).await, before, "{kind:?}");
    }
    // A window filter merges generation by generation: both sets found.
    let key = common::unique_key("snap-merge-window");
    let a = Any::new(Kind::Window, &key, 1, conn.clone());
    a.add_many(&items("a", 2_000)).await;
    let other_key = common::unique_key("snap-merge-window-b");
    let b = Any::new(Kind::Window, &other_key, 1, conn.clone());
    b.add_many(&items("b", 2_000)).await;
    a.import(&b.export().await, ImportMode::Merge)
        .await
        .unwrap();
    assert!(a.exists_many(&items("a", 2_000)).await.iter().all(|&f| f));
    assert!(a.exists_many(&items("b", 2_000)).await.iter().all(|&f| f));
}

/// A growing filter that grew past the file's levels: the import leaves only the file's
/// levels (the counts hash has their number), and the filter keeps growing from there.
#[tokio::test]
async fn a_growing_import_drops_the_levels_past_the_file() {
    let redis = common::redis().await;
    let conn = redis.connection().await;
    let key = common::unique_key("snap-grow-shrink");
    let small = Any::new(Kind::Growing, &key, 1, conn.clone());
    small.add_many(&items("s", 1_000)).await;
    let Any::Growing(g) = &small else {
        unreachable!()
    };
    let levels_in_file = g.info().await.unwrap().levels;
    let file = small.export().await;
    small.add_many(&items("more", 30_000)).await;
    assert!(g.info().await.unwrap().levels > levels_in_file);
    small.import(&file, ImportMode::Replace).await.unwrap();
    let info = g.info().await.unwrap();
    assert_eq!(info.levels, levels_in_file);
    assert!(small
        .exists_many(&items("s", 1_000))
        .await
        .iter()
        .all(|&f| f));
    let later = small.exists_many(&items("more", 30_000)).await;
    let found = later.iter().filter(|&&f| f).count();
    assert!(
        found < 3_000,
        "{found} of 30,000 items added after the export still found"
    );
    small.add_many(&items("again", 10_000)).await;
    assert!(
        g.info().await.unwrap().levels > levels_in_file,
        "keeps growing"
    );
}

/// A window filter's generation keys.
async fn generations(conn: &mut Conn, key: &str) -> Vec<String> {
    common::keys_like(conn, &format!("{}*", common::companion(key, "gen:"))).await
}

/// A window's generations keep the expiry of their epoch through a snapshot: imported a while
/// after the export, a generation expires when the source's does (not the file's TTL later);
/// a file whose generations have all left the window is refused and changes nothing.
#[tokio::test]
async fn a_window_snapshot_keeps_its_generations_expiry() {
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    // W = 2 s, G = 2: a generation lives at most 4 s.
    let window = |key: &str| {
        WindowBloom::builder(key, Duration::from_secs(2))
            .generations(2)
            .expected_items(1_000)
            .false_positive_rate(0.01)
            .build(conn.clone())
            .unwrap()
    };
    let (source_key, target_key) = (
        common::unique_key("snap-window-src"),
        common::unique_key("snap-window-dst"),
    );
    let (source, target) = (window(&source_key), window(&target_key));
    source.add_many(&items("w", 100)).await.unwrap();
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();
    let live = generations(&mut conn, &source_key).await;
    assert!(!live.is_empty());
    let source_pttl = common::pttl(&mut conn, &live[0]).await;
    // Time passes between the export and the import: what is measured.
    tokio::time::sleep(Duration::from_millis(800)).await;
    target.import(&file[..], ImportMode::Replace).await.unwrap();
    let epoch = live[0].rsplit(':').next().unwrap();
    let imported = generations(&mut conn, &target_key)
        .await
        .into_iter()
        .find(|k| k.rsplit(':').next() == Some(epoch))
        .expect("the generation imported");
    let target_pttl = common::pttl(&mut conn, &imported).await;
    assert!(
        target_pttl <= source_pttl - 500,
        "the imported generation expires with its epoch: PTTL {target_pttl} ms, the source's \
         was {source_pttl} ms 800 ms before"
    );

    // Once every generation has left the window, the file is refused: nothing is written.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !generations(&mut conn, &source_key).await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "generations expire");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    target.add("kept").await.unwrap();
    let before = dump(&mut conn, &target_key).await;
    let err = target
        .import(&file[..], ImportMode::Replace)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Snapshot(e) if e.to_string().contains("left the window")),
        "{err:?}"
    );
    assert_eq!(
        dump(&mut conn, &target_key).await,
        before,
        "nothing written"
    );
    assert!(target.exists("kept").await.unwrap());
}
