//! Snapshots of plain filters through the library (SPEC.md §5): `export` then `import` under
//! another key and into another server gives the same answers and the same bytes, the TTL
//! included; `ImportMode::Merge` ORs a file in, range by range (the bytes of one `BITOP OR`,
//! plain and window filters, no command on more than one range); a file of other parameters,
//! kind or shard count changes nothing; an offline build imports to the bytes `add_many`
//! writes; a key of another type is refused; an export taken while others add holds every add
//! acknowledged before it; and an import cut short after any one of its commands (a killed
//! importer) leaves the filter as it was. Every test runs its own private `redis-server`s.

mod common;

use common::server::RedisServer;
use redbloom::kind::Plain;
use redbloom::redis::aio::{ConnectionLike, MultiplexedConnection};
use redbloom::redis::{self, Cmd, Pipeline, RedisError, RedisFuture, Value};
use redbloom::{
    Builder, Error, ImportMode, Layout, RedisBloom, SectionHeader, SnapshotHeader, SnapshotReader,
    SnapshotWriter, WindowBloom,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A plain filter's shape.
#[derive(Debug, Clone, Copy)]
struct Shape {
    layout: Layout,
    shards: u32,
    bits: u64,
    /// Ignored by go-zero's layout (always 14).
    hashes: u32,
}

/// 2 MiB in one key: two 1 MiB chunks.
const GOZERO_1: Shape = Shape {
    layout: Layout::GoZero,
    shards: 1,
    bits: 1 << 24,
    hashes: 14,
};
/// Four shards of 768 KiB.
const GOZERO_4: Shape = Shape {
    layout: Layout::GoZero,
    shards: 4,
    bits: 3 << 23,
    hashes: 14,
};
/// 1 MiB and a few bytes in one key: a full chunk and a short one.
const NATIVE_1: Shape = Shape {
    layout: Layout::Native,
    shards: 1,
    bits: (1 << 23) + 12_345,
    hashes: 7,
};
/// Four shards of 128 KiB.
const NATIVE_4: Shape = Shape {
    layout: Layout::Native,
    shards: 4,
    bits: 1 << 22,
    hashes: 5,
};

fn builder(key: &str, shape: Shape) -> Builder<Plain> {
    let builder = RedisBloom::builder(key)
        .bits(shape.bits)
        .layout(shape.layout)
        .shards(shape.shards);
    match shape.layout {
        Layout::Native => builder.hashes(shape.hashes),
        _ => builder,
    }
}

fn filter<C>(key: &str, shape: Shape, conn: C) -> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    builder(key, shape).build(conn).unwrap()
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

fn server() -> RedisServer {
    RedisServer::start().expect("redis-server on PATH")
}

/// The keys holding a filter's bits, by shard: the key itself, or the shards' keys
/// (`{rbI.N}:KEY:shard:I/S`), found by `SCAN` (so every shard must exist).
async fn bit_keys(conn: &mut MultiplexedConnection, key: &str, shards: u32) -> Vec<String> {
    if shards == 1 {
        return vec![key.to_owned()];
    }
    let found: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{rb*}}:{key}:shard:*/{shards}"))
        .query_async(conn)
        .await
        .unwrap();
    let mut by_shard: Vec<(u32, String)> = found
        .into_iter()
        .map(|k| {
            let index = k.rsplit(":shard:").next().unwrap();
            (index.split('/').next().unwrap().parse().unwrap(), k)
        })
        .collect();
    by_shard.sort();
    assert_eq!(
        by_shard.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..shards).collect::<Vec<_>>(),
        "every shard of {key} exists"
    );
    by_shard.into_iter().map(|(_, k)| k).collect()
}

/// `GET` of each shard's key (empty when missing).
async fn shard_bytes(conn: &mut MultiplexedConnection, key: &str, shards: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for k in bit_keys(conn, key, shards).await {
        let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(&k).query_async(conn).await.unwrap();
        out.push(bytes.unwrap_or_default());
    }
    out
}

/// The sections of a snapshot file: (header, [(section header, bytes)]).
async fn read_sections(file: &[u8]) -> (SnapshotHeader, Vec<(SectionHeader, Vec<u8>)>) {
    let (mut reader, header) = SnapshotReader::open(file).await.unwrap();
    let mut sections = Vec::new();
    while let Some(section) = reader.next_section().await.unwrap() {
        let mut bytes = Vec::new();
        while let Some(chunk) = reader.next_chunk().await.unwrap() {
            bytes.extend_from_slice(chunk);
        }
        sections.push((section, bytes));
    }
    assert_eq!(reader.bytes_read(), file.len() as u64);
    (header, sections)
}

async fn add_all<C>(bloom: &RedisBloom<C>, items: &[String])
where
    C: ConnectionLike + Clone + Send + Sync,
{
    for batch in items.chunks(2_000) {
        bloom.add_many(batch).await.unwrap();
    }
}

/// The exported file holds the filter exactly, and imports under another key on the same
/// server (from memory) and under the same key on a second server (from a file on disk) give
/// the same answers, present and absent items alike, and the same bytes, shard by shard.
async fn round_trip(shape: Shape, added: usize) {
    let (a, b) = (server(), server());
    let (mut ca, mut cb) = (
        common::connect(&a.url()).await,
        common::connect(&b.url()).await,
    );
    let key = common::unique_key("snap-round-trip");
    let source = filter(&key, shape, ca.clone());
    let added = items("in", added);
    add_all(&source, &added).await;
    let absent = items("out", 5_000);
    assert!(source.exists_many(&added).await.unwrap().iter().all(|&p| p));
    let answers = source.exists_many(&absent).await.unwrap();
    let bytes = shard_bytes(&mut ca, &key, shape.shards).await;

    let mut file = Vec::new();
    let moved = source.export(&mut file).await.unwrap();
    assert_eq!(moved.file_bytes, file.len() as u64);
    assert_eq!(
        moved.filter_bytes,
        bytes.iter().map(|b| b.len() as u64).sum::<u64>()
    );
    // The file: the kind, the shard count, one `bits` section per shard holding its bytes.
    let (header, sections) = read_sections(&file).await;
    assert_eq!(
        (header.kind.as_str(), header.shards),
        ("plain", shape.shards)
    );
    assert_eq!(sections.len(), shape.shards as usize);
    for (i, (section, data)) in sections.iter().enumerate() {
        assert_eq!((section.shard, section.role.as_str()), (i as u32, "bits"));
        assert_eq!(section.ttl_ms, None);
        assert!(
            data == &bytes[i],
            "shard {i}: the file's bytes are the key's"
        );
    }

    // Under another key, same server, from memory.
    let other = common::unique_key("snap-round-trip-copy");
    let copy = filter(&other, shape, ca.clone());
    let moved_in = copy.import(&file[..], ImportMode::Replace).await.unwrap();
    assert_eq!(moved_in.file_bytes, file.len() as u64);
    assert_eq!(moved_in.filter_bytes, moved.filter_bytes);

    // The same key on another server, from a file on disk.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.rbloom");
    let on_disk = tokio::fs::File::create(&path).await.unwrap();
    source.export(on_disk).await.unwrap();
    let elsewhere = filter(&key, shape, cb.clone());
    let from_disk = tokio::fs::File::open(&path).await.unwrap();
    elsewhere
        .import(from_disk, ImportMode::Replace)
        .await
        .unwrap();

    for (name, target, conn, target_key) in [
        ("another key", &copy, &mut ca, &other),
        ("another server", &elsewhere, &mut cb, &key),
    ] {
        let present = target.exists_many(&added).await.unwrap();
        assert!(
            present.iter().all(|&p| p),
            "{name}: an added item is missing"
        );
        assert_eq!(
            target.exists_many(&absent).await.unwrap(),
            answers,
            "{name}: the absent items' answers (false positives included) differ"
        );
        let copied = shard_bytes(conn, target_key, shape.shards).await;
        for (i, (got, want)) in copied.iter().zip(&bytes).enumerate() {
            assert!(got == want, "{name}: shard {i} holds other bytes");
        }
        let first = bit_keys(conn, target_key, shape.shards).await.remove(0);
        assert_eq!(common::pttl(conn, &first).await, -1, "{name}: no TTL");
    }
    // The copies are filters like any other: a client with other parameters is refused.
    let wrong = RedisBloom::builder(&key)
        .bits(shape.bits * 2)
        .layout(shape.layout)
        .shards(shape.shards);
    let wrong = match shape.layout {
        Layout::Native => wrong.hashes(shape.hashes),
        _ => wrong,
    };
    if shape.layout == Layout::Native || shape.shards > 1 {
        let err = wrong.build(cb.clone()).unwrap().add("x").await.unwrap_err();
        assert!(matches!(err, Error::ParamsMismatch { .. }), "{err:?}");
    }
}

#[tokio::test]
async fn gozero_filter_round_trips() {
    round_trip(GOZERO_1, 4_000).await;
}

#[tokio::test]
async fn sharded_gozero_filter_round_trips() {
    round_trip(GOZERO_4, 4_000).await;
}

#[tokio::test]
async fn native_filter_round_trips_with_dense_bits() {
    // 100,000 items of 7 bits in 8.4 Mbit: about 8% of the bits set, not a sparse filter.
    round_trip(NATIVE_1, 100_000).await;
}

#[tokio::test]
async fn sharded_native_filter_round_trips() {
    round_trip(NATIVE_4, 4_000).await;
}

/// The TTL travels with the file (each shard's), and replacing a filter that had a TTL with a
/// file without one leaves none.
#[tokio::test]
async fn the_ttl_travels_with_the_file() {
    let (a, b) = (server(), server());
    let (ca, mut cb) = (
        common::connect(&a.url()).await,
        common::connect(&b.url()).await,
    );
    for shape in [GOZERO_1, NATIVE_4] {
        let key = common::unique_key("snap-ttl");
        let source = filter(&key, shape, ca.clone());
        add_all(&source, &items("in", 1_000)).await;
        assert!(source.expire(Duration::from_secs(1_000)).await.unwrap());
        let mut file = Vec::new();
        source.export(&mut file).await.unwrap();
        let (_, sections) = read_sections(&file).await;
        for (section, _) in &sections {
            let ttl = section.ttl_ms.expect("a TTL in the file");
            assert!((990_000..=1_000_000).contains(&ttl), "{ttl}");
        }

        let target = filter(&key, shape, cb.clone());
        target.import(&file[..], ImportMode::Replace).await.unwrap();
        for k in bit_keys(&mut cb, &key, shape.shards).await {
            let ttl = common::pttl(&mut cb, &k).await;
            assert!((980_000..=1_000_000).contains(&ttl), "{k}: PTTL {ttl}");
        }

        // A file without a TTL replaces a filter that has one: none left.
        source.clear().await.unwrap();
        add_all(&source, &items("in", 1_000)).await;
        let mut file = Vec::new();
        source.export(&mut file).await.unwrap();
        target.import(&file[..], ImportMode::Replace).await.unwrap();
        for k in bit_keys(&mut cb, &key, shape.shards).await {
            assert_eq!(common::pttl(&mut cb, &k).await, -1, "{k}");
        }
    }
}

/// `ImportMode::Merge` ORs the file into a filter holding other items: both sets are found,
/// the bytes are the OR of both, the filter keeps its own TTL; merged into a missing filter,
/// the file's bytes and TTL.
#[tokio::test]
async fn merge_ors_the_file_into_the_filter() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    for shape in [GOZERO_1, NATIVE_4] {
        let (ka, kb) = (
            common::unique_key("snap-merge-a"),
            common::unique_key("snap-merge-b"),
        );
        let (fa, fb) = (
            filter(&ka, shape, conn.clone()),
            filter(&kb, shape, conn.clone()),
        );
        let (ia, ib) = (items("a", 3_000), items("b", 3_000));
        add_all(&fa, &ia).await;
        add_all(&fb, &ib).await;
        fa.expire(Duration::from_secs(9_000)).await.unwrap();
        fb.expire(Duration::from_secs(500)).await.unwrap();
        let (ba, bb) = (
            shard_bytes(&mut conn, &ka, shape.shards).await,
            shard_bytes(&mut conn, &kb, shape.shards).await,
        );
        let mut file = Vec::new();
        fa.export(&mut file).await.unwrap();

        fb.import(&file[..], ImportMode::Merge).await.unwrap();
        let both: Vec<String> = ia.iter().chain(&ib).cloned().collect();
        assert!(fb.exists_many(&both).await.unwrap().iter().all(|&p| p));
        let merged = shard_bytes(&mut conn, &kb, shape.shards).await;
        for i in 0..shape.shards as usize {
            let len = ba[i].len().max(bb[i].len());
            let or: Vec<u8> = (0..len)
                .map(|j| ba[i].get(j).unwrap_or(&0) | bb[i].get(j).unwrap_or(&0))
                .collect();
            assert!(merged[i] == or, "shard {i}: the merge is not the OR");
        }
        for k in bit_keys(&mut conn, &kb, shape.shards).await {
            let ttl = common::pttl(&mut conn, &k).await;
            assert!((0..=500_000).contains(&ttl) && ttl > 450_000, "{k}: {ttl}");
        }

        // Into a filter that does not exist yet: the file's bytes, and its TTL.
        let kc = common::unique_key("snap-merge-new");
        let fc = filter(&kc, shape, conn.clone());
        fc.import(&file[..], ImportMode::Merge).await.unwrap();
        assert_eq!(shard_bytes(&mut conn, &kc, shape.shards).await, ba);
        for k in bit_keys(&mut conn, &kc, shape.shards).await {
            let ttl = common::pttl(&mut conn, &k).await;
            assert!(ttl > 8_000_000, "{k}: {ttl}");
        }
    }
}

/// The bytes of each of `targets` ORed by hand with the same key of `sources` (`COPY` of the
/// target, then one `BITOP OR` of the whole key, what `import --merge` did before it went by
/// ranges): the bytes a merge must leave. The copies are deleted.
async fn or_by_hand(
    conn: &mut MultiplexedConnection,
    targets: &[String],
    sources: &[String],
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (target, source) in targets.iter().zip(sources) {
        let copy = format!("{target}:by-hand");
        let _: i64 = redis::cmd("COPY")
            .arg(target)
            .arg(&copy)
            .query_async(conn)
            .await
            .unwrap();
        let _: i64 = redis::cmd("BITOP")
            .arg("OR")
            .arg(&copy)
            .arg(&copy)
            .arg(source)
            .query_async(conn)
            .await
            .unwrap();
        let bytes: Option<Vec<u8>> = redis::cmd("GET")
            .arg(&copy)
            .query_async(conn)
            .await
            .unwrap();
        let _: i64 = redis::cmd("DEL")
            .arg(&copy)
            .query_async(conn)
            .await
            .unwrap();
        out.push(bytes.unwrap_or_default());
    }
    out
}

/// A merge goes by ranges of `merge_chunk_bytes` (1 KiB here, so a shard of 128 KiB to 2 MiB
/// takes hundreds to thousands of steps, counted by the `BITOP`s the steps run): the bytes are
/// those of one `BITOP OR` of the whole key done by hand on a copy, go-zero and native, one key
/// and 4 shards; the filter keeps its TTL (or its lack of one); into a missing filter, the
/// file's bytes and TTL; no staging key left.
#[tokio::test]
async fn a_merge_by_ranges_leaves_the_bytes_of_one_bitop_or() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    for shape in [GOZERO_1, GOZERO_4, NATIVE_1, NATIVE_4] {
        let (ka, kb, kc, kd) = (
            common::unique_key("snap-ranges-a"),
            common::unique_key("snap-ranges-b"),
            common::unique_key("snap-ranges-new"),
            common::unique_key("snap-ranges-no-ttl"),
        );
        let plain = conn.clone();
        let by_ranges = move |key: &str| {
            builder(key, shape)
                .merge_chunk_bytes(1 << 10)
                .build(plain.clone())
                .unwrap()
        };
        let (fa, fb, fd) = (
            filter(&ka, shape, conn.clone()),
            by_ranges(&kb),
            by_ranges(&kd),
        );
        let (ia, ib) = (items("a", 6_000), items("b", 6_000));
        add_all(&fa, &ia).await;
        add_all(&fb, &ib).await;
        add_all(&fd, &items("d", 300)).await;
        fa.expire(Duration::from_secs(9_000)).await.unwrap();
        fb.expire(Duration::from_secs(500)).await.unwrap();
        let mut file = Vec::new();
        fa.export(&mut file).await.unwrap();
        let (a_keys, b_keys, d_keys) = (
            bit_keys(&mut conn, &ka, shape.shards).await,
            bit_keys(&mut conn, &kb, shape.shards).await,
            bit_keys(&mut conn, &kd, shape.shards).await,
        );
        let want_b = or_by_hand(&mut conn, &b_keys, &a_keys).await;
        let want_d = or_by_hand(&mut conn, &d_keys, &a_keys).await;

        let bitops = common::calls(&mut conn, "bitop").await;
        fb.import(&file[..], ImportMode::Merge).await.unwrap();
        let steps = common::calls(&mut conn, "bitop").await - bitops;
        let file_bytes: u64 = shard_bytes(&mut conn, &ka, shape.shards)
            .await
            .iter()
            .map(|b| b.len() as u64)
            .sum();
        assert!(
            steps >= file_bytes / 1024 * 9 / 10,
            "{shape:?}: {steps} range steps for {file_bytes} bytes of 1 KiB ranges"
        );
        let merged = shard_bytes(&mut conn, &kb, shape.shards).await;
        for (i, (got, want)) in merged.iter().zip(&want_b).enumerate() {
            assert_eq!(got.len(), want.len(), "{shape:?}, shard {i}: the length");
            assert!(
                got == want,
                "{shape:?}, shard {i}: not the bytes of BITOP OR"
            );
        }
        let both: Vec<String> = ia.iter().chain(&ib).cloned().collect();
        assert!(fb.exists_many(&both).await.unwrap().iter().all(|&p| p));
        for k in &b_keys {
            let ttl = common::pttl(&mut conn, k).await;
            assert!(
                (450_000..=500_000).contains(&ttl),
                "{shape:?}, {k}: kept its TTL: {ttl}"
            );
        }

        // Without a TTL: none after.
        fd.import(&file[..], ImportMode::Merge).await.unwrap();
        assert_eq!(
            shard_bytes(&mut conn, &kd, shape.shards).await,
            want_d,
            "{shape:?}"
        );
        for k in &d_keys {
            assert_eq!(common::pttl(&mut conn, k).await, -1, "{shape:?}, {k}");
        }

        // Into a filter that does not exist yet: the file's bytes, and its TTL.
        by_ranges(&kc)
            .import(&file[..], ImportMode::Merge)
            .await
            .unwrap();
        let file_shards = shard_bytes(&mut conn, &ka, shape.shards).await;
        assert_eq!(
            shard_bytes(&mut conn, &kc, shape.shards).await,
            file_shards,
            "{shape:?}"
        );
        for k in bit_keys(&mut conn, &kc, shape.shards).await {
            let ttl = common::pttl(&mut conn, &k).await;
            assert!(ttl > 8_000_000, "{shape:?}, {k}: the file's TTL: {ttl}");
        }
        let left = common::staging_keys(&mut conn).await;
        assert!(left.is_empty(), "{shape:?}: staging keys left: {left:?}");
        let scratch: Vec<String> = redis::cmd("KEYS")
            .arg("*:or")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            scratch.is_empty(),
            "{shape:?}: scratch keys left: {scratch:?}"
        );
    }
}

/// A file whose bytes are all zeros past some point, merged into a shorter key: the key grows
/// to the file's length (as `BITOP OR` leaves it) though no range there is staged; a file of
/// zeros only, into a missing key, makes it at the file's length.
#[tokio::test]
async fn a_merge_grows_the_key_to_the_files_length() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let shape = GOZERO_1;
    let (source, target, zeros, fresh) = (
        common::unique_key("snap-grow-src"),
        common::unique_key("snap-grow-dst"),
        common::unique_key("snap-grow-zeros"),
        common::unique_key("snap-grow-fresh"),
    );
    // A go-zero key written by another program: bits near its start, zeros to 1.5 MiB.
    let mut bytes = vec![0u8; 3 << 19];
    bytes[10] = 0x81;
    bytes[5_000] = 0x10;
    common::set_bytes(&mut conn, &source, &bytes).await;
    common::set_bytes(&mut conn, &target, &[0xff; 100]).await;
    common::set_bytes(&mut conn, &zeros, &vec![0u8; 70_000]).await;
    let plain = conn.clone();
    // Keys written by another program: the switch that writes them as go-zero filters.
    let by_ranges = move |key: &str| {
        builder(key, shape)
            .merge_chunk_bytes(1 << 12)
            .shared_with_go(true)
            .build(plain.clone())
            .unwrap()
    };
    let mut file = Vec::new();
    by_ranges(&source).export(&mut file).await.unwrap();
    let want = or_by_hand(
        &mut conn,
        std::slice::from_ref(&target),
        std::slice::from_ref(&source),
    )
    .await;
    by_ranges(&target)
        .import(&file[..], ImportMode::Merge)
        .await
        .unwrap();
    let got = shard_bytes(&mut conn, &target, 1).await;
    assert_eq!(got[0].len(), bytes.len());
    assert!(got == want, "not the bytes of BITOP OR");

    let mut file = Vec::new();
    by_ranges(&zeros).export(&mut file).await.unwrap();
    by_ranges(&fresh)
        .import(&file[..], ImportMode::Merge)
        .await
        .unwrap();
    assert_eq!(
        shard_bytes(&mut conn, &fresh, 1).await,
        vec![vec![0u8; 70_000]]
    );
    assert_eq!(common::pttl(&mut conn, &fresh).await, -1);
    assert!(common::staging_keys(&mut conn).await.is_empty());
}

/// A window filter's generations (`{KEY}:redbloom:LEN:KEY:gen:HASH:EPOCH`), by epoch.
async fn generations(conn: &mut MultiplexedConnection, key: &str) -> BTreeMap<i64, String> {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}*", common::companion(key, "gen:")))
        .query_async(conn)
        .await
        .unwrap();
    keys.into_iter()
        .filter(|k| !k.contains(":import:"))
        .filter_map(|k| Some((k.rsplit(':').next()?.parse().ok()?, k)))
        .collect()
}

/// A window filter's merge goes by ranges too: each of the file's generations ORed into the
/// same generation of the filter, with the bytes of one `BITOP OR` of the whole key, in 1 KiB
/// ranges; each generation keeps its TTL; no staging key left.
#[tokio::test]
async fn a_window_merge_by_ranges_leaves_the_bytes_of_one_bitop_or() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let plain = conn.clone();
    let window = move |key: &str| {
        WindowBloom::builder(key, Duration::from_secs(3_600))
            .expected_items(20_000)
            .false_positive_rate(0.01)
            .merge_chunk_bytes(1 << 10)
            .build(plain.clone())
            .unwrap()
    };
    let (ka, kb) = (
        common::unique_key("snap-window-ranges-a"),
        common::unique_key("snap-window-ranges-b"),
    );
    let (a, b) = (window(&ka), window(&kb));
    let (ia, ib) = (items("a", 4_000), items("b", 4_000));
    a.add_many(&ia).await.unwrap();
    b.add_many(&ib).await.unwrap();
    let mut file = Vec::new();
    b.export(&mut file).await.unwrap();
    let (ga, gb) = (
        generations(&mut conn, &ka).await,
        generations(&mut conn, &kb).await,
    );
    assert!(!gb.is_empty());
    let prefix = ga
        .values()
        .next()
        .unwrap()
        .rsplit_once(':')
        .unwrap()
        .0
        .to_owned();
    let targets: Vec<String> = gb.keys().map(|e| format!("{prefix}:{e}")).collect();
    let sources: Vec<String> = gb.values().cloned().collect();
    let want = or_by_hand(&mut conn, &targets, &sources).await;
    let mut ttls = Vec::new();
    for k in &targets {
        ttls.push(common::pttl(&mut conn, k).await);
    }
    let bitops = common::calls(&mut conn, "bitop").await;
    a.import(&file[..], ImportMode::Merge).await.unwrap();
    let steps = common::calls(&mut conn, "bitop").await - bitops;
    let mut bytes = 0;
    for ((k, want), ttl) in targets.iter().zip(&want).zip(ttls) {
        let got: Vec<u8> = redis::cmd("GET")
            .arg(k)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(&got == want, "{k}: not the bytes of BITOP OR");
        bytes += got.len() as u64;
        let now = common::pttl(&mut conn, k).await;
        assert!(
            now > 0 && (ttl < 0 || now <= ttl),
            "{k}: PTTL {ttl} before, {now} after"
        );
    }
    assert!(
        steps >= bytes / 1024 * 9 / 10,
        "{steps} range steps for {bytes} bytes"
    );
    assert!(a.exists_many(&ib).await.unwrap().iter().all(|&p| p));
    assert!(a.exists_many(&ia).await.unwrap().iter().all(|&p| p));
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*:import:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "staging keys left: {left:?}");
}

/// Every command of the server's `SLOWLOG` (logging every command): (microseconds, arguments).
async fn slowlog(conn: &mut MultiplexedConnection) -> Vec<(u64, Vec<Vec<u8>>)> {
    let entries: Vec<Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap();
    entries
        .into_iter()
        .map(|entry| {
            let Value::Array(fields) = entry else {
                panic!("a SLOWLOG entry: {entry:?}")
            };
            let micros: u64 = redis::from_redis_value(fields[2].clone()).unwrap();
            let args: Vec<Vec<u8>> = redis::from_redis_value(fields[3].clone()).unwrap();
            (micros, args)
        })
        .filter(|(_, args)| !args[0].eq_ignore_ascii_case(b"slowlog"))
        .collect()
}

/// The length of an argument as `SLOWLOG` shows it (past 128 bytes: the first 128 and
/// `... (N more bytes)`).
fn logged_len(arg: &[u8]) -> usize {
    let text = String::from_utf8_lossy(arg);
    match text.rsplit_once("... (") {
        Some((_, more)) if more.ends_with(" more bytes)") => {
            128 + more
                .trim_end_matches(" more bytes)")
                .parse::<usize>()
                .unwrap()
        }
        _ => arg.len(),
    }
}

/// `import --merge` of a 32 MiB filter (one key of noise into another) with 8 KiB ranges never
/// holds the server for the whole key. From `SLOWLOG` (every command logged, those scripts run
/// included): the file is staged in 4,096 `SET`s of at most 8 KiB (no staging string of the
/// key's size), each range ORed in by one step of `lua/import_merge.lua` (4,096 `BITOP`s, none
/// into the filter's key; every `GETRANGE` and `SETRANGE` on it of at most 8 KiB), with the
/// bytes of one `BITOP OR` of the whole key. And the longest command while the import runs is
/// under half of one `BITOP OR` of the whole key on the same server (what the merge was: 60-200
/// ms here, against tens of µs per step), in the best of three imports, so that a pause of the
/// machine itself (a busy 2-core machine stalls Redis for tens of ms now and then, whatever the
/// command) does not fail it.
#[tokio::test]
async fn a_merge_holds_the_server_one_range_at_a_time() {
    const RANGE: u64 = 8 << 10;
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    // SLOWLOG's replies here are tens of MB (about 50,000 commands logged per import): a
    // connection that waits for them however busy the machine.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut log_conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let shape = Shape {
        bits: 1 << 28,
        ..GOZERO_1
    };
    let (source, target) = (
        common::unique_key("snap-long-src"),
        common::unique_key("snap-long-dst"),
    );
    let noise = |seed: u64| {
        let mut x = seed;
        (0..4 << 20)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect::<Vec<u8>>()
    };
    common::set_bytes(&mut conn, &source, &noise(0x9e37_79b9_7f4a_7c15)).await;
    let mut file = Vec::new();
    filter(&source, shape, conn.clone())
        .export(&mut file)
        .await
        .unwrap();
    // The target's bytes are set by hand (as another program's): the switch writes them.
    let into = builder(&target, shape)
        .merge_chunk_bytes(RANGE)
        .shared_with_go(true)
        .build(conn.clone())
        .unwrap();
    let config = |name: &str, value: i64| {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("SET").arg(name).arg(value);
        cmd
    };
    let () = config("slowlog-max-len", 1_000_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut rounds = Vec::new();
    for round in 0..3 {
        common::set_bytes(&mut conn, &target, &noise(round + 1)).await;
        let want = or_by_hand(
            &mut conn,
            std::slice::from_ref(&target),
            std::slice::from_ref(&source),
        )
        .await;
        // One whole-key BITOP OR, timed by the server.
        let copy = format!("{target}:whole");
        let _: i64 = redis::cmd("COPY")
            .arg(&target)
            .arg(&copy)
            .query_async(&mut conn)
            .await
            .unwrap();
        let () = config("slowlog-log-slower-than", 0)
            .query_async(&mut conn)
            .await
            .unwrap();
        let () = redis::cmd("SLOWLOG")
            .arg("RESET")
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: i64 = redis::cmd("BITOP")
            .arg("OR")
            .arg(&copy)
            .arg(&copy)
            .arg(&source)
            .query_async(&mut conn)
            .await
            .unwrap();
        let whole = slowlog(&mut log_conn)
            .await
            .iter()
            .find(|(_, args)| args[0].eq_ignore_ascii_case(b"bitop"))
            .map(|(micros, _)| *micros)
            .unwrap();
        let _: i64 = redis::cmd("DEL")
            .arg(&copy)
            .query_async(&mut conn)
            .await
            .unwrap();

        let () = redis::cmd("SLOWLOG")
            .arg("RESET")
            .query_async(&mut conn)
            .await
            .unwrap();
        into.import(&file[..], ImportMode::Merge).await.unwrap();
        let log = slowlog(&mut log_conn).await;
        let () = config("slowlog-log-slower-than", 10_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            shard_bytes(&mut conn, &target, 1).await == want,
            "not the bytes of BITOP OR"
        );

        let sets: Vec<usize> = log
            .iter()
            .filter(|(_, args)| args[0].eq_ignore_ascii_case(b"set") && args.len() >= 3)
            .map(|(_, args)| logged_len(&args[2]))
            .collect();
        assert_eq!(
            sets.len(),
            4_096 * 2,
            "the pieces' SETs and the steps' scratch SETs"
        );
        assert!(
            sets.iter().all(|&len| len <= RANGE as usize),
            "a SET of more than one range"
        );
        let steps = log
            .iter()
            .filter(|(_, args)| args[0].eq_ignore_ascii_case(b"bitop"))
            .count();
        assert_eq!(steps, 4_096, "one BITOP per range of 8 KiB");
        // Each command on the filter's key touches one range at most: GETRANGE of 8 KiB,
        // SETRANGE of 8 KiB; no staging string made by SETRANGE.
        for (_, args) in &log {
            let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
            let number = |i: usize| -> u64 { String::from_utf8_lossy(&args[i]).parse().unwrap() };
            match name.as_str() {
                "setrange" => {
                    assert!(
                        args[1] == target.as_bytes(),
                        "a staging string made by SETRANGE"
                    );
                    assert!(
                        logged_len(&args[3]) <= RANGE as usize,
                        "a SETRANGE of more than one range"
                    );
                }
                "getrange" if args[1] == target.as_bytes() => {
                    assert!(
                        number(3) - number(2) < RANGE,
                        "a GETRANGE of more than one range"
                    );
                }
                "bitop" => assert!(
                    args[2] != target.as_bytes(),
                    "a BITOP into the filter's key"
                ),
                _ => {}
            }
        }
        let (longest, args) = log.iter().max_by_key(|(micros, _)| *micros).unwrap();
        let name: Vec<String> = args
            .iter()
            .take(7)
            .map(|a| String::from_utf8_lossy(&a[..a.len().min(40)]).into_owned())
            .collect();
        eprintln!(
            "round {round}: longest command {longest} µs ({name:?}) of {}; one BITOP OR of the \
             whole key: {whole} µs",
            log.len()
        );
        rounds.push((*longest, whole));
        if *longest * 2 < whole {
            return;
        }
    }
    panic!(
        "in every round a command held the server half as long as a whole-key BITOP or more \
         (longest, whole-key BITOP, µs): {rounds:?}"
    );
}

/// A snapshot with `header` and one `bits` section per shard of `shard_len` bytes of `fill`.
async fn forged(header: &SnapshotHeader, sections: &[(u32, u64)], fill: u8) -> Vec<u8> {
    forged_as(header, "bits", sections, fill).await
}

/// [`forged`], every section of `role`.
async fn forged_as(
    header: &SnapshotHeader,
    role: &str,
    sections: &[(u32, u64)],
    fill: u8,
) -> Vec<u8> {
    let mut writer = SnapshotWriter::new(Vec::new(), header).await.unwrap();
    for &(shard, len) in sections {
        writer
            .begin_section(&SectionHeader::new(shard, role, len))
            .await
            .unwrap();
        writer.write(&vec![fill; len as usize]).await.unwrap();
    }
    writer.finish().await.unwrap()
}

/// A file of other parameters, another kind, or another shard count, in either mode, is
/// `FileMismatch`; a file with a section the filter has no room for, or two sections for one
/// shard, is refused; in every case every key of the server is as before (`DUMP`), and no
/// staging key is left.
#[tokio::test]
async fn a_file_of_another_filter_changes_nothing() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let key = common::unique_key("snap-mismatch");
    let base = Shape {
        bits: 1 << 20,
        ..GOZERO_1
    };
    let source = filter(&key, base, conn.clone());
    add_all(&source, &items("in", 500)).await;
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();

    let others = [
        (
            "other bits",
            Shape {
                bits: 1 << 21,
                ..base
            },
        ),
        (
            "other layout",
            Shape {
                layout: Layout::Native,
                ..base
            },
        ),
        ("other shard count", Shape { shards: 4, ..base }),
        ("native", NATIVE_1),
        ("sharded native", NATIVE_4),
    ];
    for (name, shape) in others {
        let target_key = common::unique_key("snap-mismatch-target");
        let target = filter(&target_key, shape, conn.clone());
        add_all(&target, &items("target", 500)).await;
        let before = common::keyspace(&mut conn).await;
        for mode in [ImportMode::Replace, ImportMode::Merge] {
            let fresh = filter(&target_key, shape, conn.clone());
            let err = fresh.import(&file[..], mode).await.unwrap_err();
            assert!(
                matches!(err, Error::FileMismatch { .. }),
                "{name} {mode:?}: {err:?}"
            );
            let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
            assert!(changed.is_empty(), "{name} {mode:?}: changed {changed:?}");
        }

        // The target's own file under another kind's name, or another shard count.
        let mut own = Vec::new();
        target.export(&mut own).await.unwrap();
        let (header, sections) = read_sections(&own).await;
        let lens: Vec<(u32, u64)> = sections
            .iter()
            .map(|(s, b)| (s.shard, b.len() as u64))
            .collect();
        let counting = SnapshotHeader {
            kind: "counting".into(),
            ..header.clone()
        };
        let more_shards = SnapshotHeader {
            shards: header.shards + 1,
            ..header.clone()
        };
        let shard_bits = shape.bits.div_ceil(u64::from(shape.shards));
        let too_long = vec![(0, shard_bits.div_ceil(8) + 1)];
        let twice = vec![(0, 10), (0, 10)];
        let cases = [
            ("another kind", forged(&counting, &lens, 0xff).await, true),
            ("more shards", forged(&more_shards, &lens, 0xff).await, true),
            (
                "a section too long",
                forged(&header, &too_long, 0xff).await,
                false,
            ),
            (
                "two sections for a shard",
                forged(&header, &twice, 0xff).await,
                false,
            ),
            (
                "a section of a role the kind does not have",
                forged_as(&header, "mystery", &[(0, 10)], 0xff).await,
                false,
            ),
        ];
        for (case, file, mismatch) in &cases {
            let fresh = filter(&target_key, shape, conn.clone());
            let err = fresh
                .import(&file[..], ImportMode::Replace)
                .await
                .unwrap_err();
            match mismatch {
                true => assert!(
                    matches!(err, Error::FileMismatch { .. }),
                    "{name}, {case}: {err:?}"
                ),
                false => assert!(matches!(err, Error::Snapshot(_)), "{name}, {case}: {err:?}"),
            }
            // In the user's words: a section named by its fields, not by Rust's Debug output.
            let text = err.to_string();
            assert!(!text.contains("SectionHeader"), "{name}, {case}: {text}");
            if case.contains("role") {
                assert!(
                    text.contains("section \"mystery\" of shard 0"),
                    "{name}: {text}"
                );
            }
            let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
            assert!(changed.is_empty(), "{name}, {case}: changed {changed:?}");
        }
    }
}

/// `build_offline` + `add` + `write_snapshot`, imported, gives the bytes `add_many` of the same
/// items writes, shard by shard, and the same "new" answers.
#[tokio::test]
async fn an_offline_build_imports_to_the_bytes_of_add_many() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    for shape in [GOZERO_1, GOZERO_4, NATIVE_1, NATIVE_4] {
        let mut added = items("in", 6_000);
        added.extend(items("in", 100)); // repeats: not new
        let built_key = common::unique_key("snap-offline");
        let mut offline = builder(&built_key, shape).build_offline().unwrap();
        assert_eq!(offline.key(), built_key);
        let offline_new: Vec<bool> = added.iter().map(|item| offline.add(item)).collect();
        assert!(added.iter().all(|item| offline.exists(item)));
        assert!(
            !offline_new[6_000..].iter().any(|&n| n),
            "repeats are not new"
        );
        let mut file = Vec::new();
        let written = offline.write_snapshot(&mut file).await.unwrap();
        assert_eq!(written.file_bytes, file.len() as u64);

        let added_key = common::unique_key("snap-online");
        let online = filter(&added_key, shape, conn.clone());
        let mut online_new = Vec::new();
        for batch in added.chunks(2_000) {
            online_new.extend(online.add_many(batch).await.unwrap());
        }
        assert_eq!(offline_new, online_new, "{shape:?}: the new answers differ");

        let imported = filter(&built_key, shape, conn.clone());
        imported
            .import(&file[..], ImportMode::Replace)
            .await
            .unwrap();
        assert!(imported
            .exists_many(&added)
            .await
            .unwrap()
            .iter()
            .all(|&p| p));
        let want = shard_bytes(&mut conn, &added_key, shape.shards).await;
        let got = shard_bytes(&mut conn, &built_key, shape.shards).await;
        assert_eq!(
            written.filter_bytes,
            want.iter().map(|b| b.len() as u64).sum::<u64>()
        );
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            assert!(got == want, "{shape:?}: shard {i} differs from add_many's");
        }
    }
}

/// A key holding a list: `export` and `import` are `WrongType`, and the list is untouched;
/// so is a sharded filter one of whose shard keys holds a list.
#[tokio::test]
async fn a_key_of_another_type_is_refused() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let key = common::unique_key("snap-list");
    let () = redis::cmd("RPUSH")
        .arg(&key)
        .arg("a")
        .arg("b")
        .query_async(&mut conn)
        .await
        .unwrap();
    let good = common::unique_key("snap-list-file");
    let source = filter(&good, GOZERO_1, conn.clone());
    source.add("x").await.unwrap();
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();
    let before = common::keyspace(&mut conn).await;

    let list = filter(&key, GOZERO_1, conn.clone());
    let err = list.export(Vec::new()).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    for mode in [ImportMode::Replace, ImportMode::Merge] {
        let err = list.import(&file[..], mode).await.unwrap_err();
        assert!(matches!(err, Error::WrongType { .. }), "{mode:?}: {err:?}");
    }
    let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
    assert!(changed.is_empty(), "changed {changed:?}");

    // A file of other items for a sharded filter one of whose shard keys holds a list.
    let other = filter(
        &common::unique_key("snap-list-other"),
        GOZERO_4,
        conn.clone(),
    );
    add_all(&other, &items("other", 200)).await;
    let mut sharded_file = Vec::new();
    other.export(&mut sharded_file).await.unwrap();
    let sharded_key = common::unique_key("snap-list-sharded");
    let sharded = filter(&sharded_key, GOZERO_4, conn.clone());
    add_all(&sharded, &items("in", 200)).await;
    let third = bit_keys(&mut conn, &sharded_key, 4).await[2].clone();
    let () = redis::cmd("DEL")
        .arg(&third)
        .query_async(&mut conn)
        .await
        .unwrap();
    let () = redis::cmd("RPUSH")
        .arg(&third)
        .arg("a")
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = common::keyspace(&mut conn).await;
    let err = sharded.export(Vec::new()).await.unwrap_err();
    assert!(matches!(err, Error::WrongType { .. }), "{err:?}");
    let fresh = filter(&sharded_key, GOZERO_4, conn.clone());
    assert!(fresh
        .import(&sharded_file[..], ImportMode::Replace)
        .await
        .is_err());
    let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
    assert!(
        changed.is_empty(),
        "an import refused for one shard's type wrote the other shards: {changed:?}"
    );
}

/// An export taken while 4 tasks keep adding holds every item whose add was acknowledged
/// before `export()` was called: imported on another server, every one is found. Several
/// rounds, one key and four shards.
#[tokio::test]
async fn an_export_while_others_add_holds_every_acknowledged_add() {
    let (a, b) = (server(), server());
    let cb = common::connect(&b.url()).await;
    let shapes = [
        Shape {
            bits: 1 << 27,
            ..GOZERO_1
        },
        Shape {
            bits: 1 << 27,
            ..GOZERO_4
        },
        Shape {
            bits: 1 << 26,
            ..NATIVE_1
        },
    ];
    for (round, shape) in shapes.iter().cycle().take(4).enumerate() {
        let key = common::unique_key("snap-concurrent");
        let bloom = filter(&key, *shape, common::connect(&a.url()).await);
        // Bits set across the whole filter first, so that the export reads every piece.
        add_all(&bloom, &items("warm", 20_000)).await;
        let acked: Arc<Mutex<Vec<String>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for task in 0..4 {
            // Each task its own connection, so that adds really run beside the export.
            let bloom = filter(&key, *shape, common::connect(&a.url()).await);
            let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let batch: Vec<String> = (0..1 + n % 7)
                        .map(|j| format!("r{round}:t{task}:{n}:{j}"))
                        .collect();
                    if batch.len() == 1 {
                        bloom.add(&batch[0]).await.unwrap();
                    } else {
                        bloom.add_many(&batch).await.unwrap();
                    }
                    acked.lock().unwrap().extend(batch);
                    n += 1;
                }
            }));
        }
        // Until the adders have a few hundred acknowledged (a slow machine takes longer than
        // a fast one; a fixed sleep once saw 27).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while acked.lock().unwrap().len() < 300 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let before: Vec<String> = acked.lock().unwrap().clone();
        let mut file = Vec::new();
        bloom.export(&mut file).await.unwrap();
        let during = acked.lock().unwrap().len() - before.len();
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.unwrap();
        }
        assert!(
            before.len() > 100,
            "round {round}: {} adds before",
            before.len()
        );
        assert!(during > 0, "round {round}: no add ran during the export");

        let copy = filter(&key, *shape, cb.clone());
        copy.import(&file[..], ImportMode::Replace).await.unwrap();
        let found = copy.exists_many(&before).await.unwrap();
        let missing: Vec<&String> = before
            .iter()
            .zip(&found)
            .filter(|(_, &f)| !f)
            .map(|(i, _)| i)
            .collect();
        assert!(
            missing.is_empty(),
            "round {round} {shape:?}: {} of {} acknowledged adds missing from the file (e.g. {:?})",
            missing.len(),
            before.len(),
            missing.first()
        );
    }
}

/// A connection that forwards its first `left` requests (a command or a pipeline) to Redis
/// and fails every later one without sending it: the importer dies at that point, as after a
/// `kill -9` between two of its commands.
#[derive(Clone)]
struct Cut {
    inner: MultiplexedConnection,
    left: Arc<AtomicI64>,
}

impl Cut {
    fn passes(&self) -> bool {
        self.left.fetch_sub(1, Ordering::SeqCst) > 0
    }
}

fn killed() -> RedisError {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the importer died here",
    )
    .into()
}

impl ConnectionLike for Cut {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self.passes() {
            true => self.inner.req_packed_command(cmd),
            false => Box::pin(async { Err(killed()) }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self.passes() {
            true => self.inner.req_packed_commands(pipeline, offset, count),
            false => Box::pin(async { Err(killed()) }),
        }
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }
}

/// Imports a file over a filter holding other items, the importer dying after its 0th, 1st,
/// 2nd... request, until one import completes: every interrupted import leaves every key of the
/// server as it was (`DUMP`) but for staging keys, each with a TTL of at most 120 s; the one
/// that completes leaves exactly the file's bytes.
async fn cut_after_every_request(shape: Shape, mode: ImportMode) {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let source_key = common::unique_key("snap-cut-source");
    let source = filter(&source_key, shape, conn.clone());
    add_all(&source, &items("new", 5_000)).await;
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();
    let mut want = shard_bytes(&mut conn, &source_key, shape.shards).await;
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    let key = common::unique_key("snap-cut");
    add_all(&filter(&key, shape, conn.clone()), &items("old", 5_000)).await;
    let old = common::keyspace(&mut conn).await;
    let restore = |mut conn: MultiplexedConnection, old: BTreeMap<String, (Vec<u8>, bool)>| async move {
        let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        for (key, (dump, _)) in old {
            let () = redis::cmd("RESTORE")
                .arg(&key)
                .arg(0)
                .arg(dump)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    };

    if mode == ImportMode::Merge {
        // What a merge that runs to its end makes of the old filter.
        filter(&key, shape, conn.clone())
            .import(&file[..], mode)
            .await
            .unwrap();
        want = shard_bytes(&mut conn, &key, shape.shards).await;
    }

    for allowed in 0i64..500 {
        restore(conn.clone(), old.clone()).await;
        let cut = Cut {
            inner: conn.clone(),
            left: Arc::new(AtomicI64::new(allowed)),
        };
        let result = filter(&key, shape, cut).import(&file[..], mode).await;
        let staged = common::staging_keys(&mut conn).await;
        for (staging, ttl) in &staged {
            assert!(
                *ttl > 0 && *ttl <= 120_000,
                "{shape:?}, cut after {allowed}: staging key {staging} has PTTL {ttl}"
            );
            let () = redis::cmd("DEL")
                .arg(staging)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let now = common::keyspace(&mut conn).await;
        match result {
            Err(err) => {
                let changed = common::changed_keys(&old, &now);
                assert!(
                    changed.is_empty(),
                    "{shape:?} {mode:?}: an import that died after {allowed} requests ({err}) \
                     changed the filter: keys whose DUMP changed: {changed:?}"
                );
            }
            Ok(_) => {
                assert!(allowed >= 3, "{shape:?}: done in {allowed} requests");
                assert_eq!(shard_bytes(&mut conn, &key, shape.shards).await, want);
                assert!(staged.is_empty(), "a complete import left {staged:?}");
                return;
            }
        }
    }
    panic!("{shape:?}: no import completed in 500 requests");
}

#[tokio::test]
async fn an_import_that_dies_after_any_request_leaves_the_filter_as_it_was() {
    for shape in [GOZERO_1, NATIVE_1] {
        cut_after_every_request(shape, ImportMode::Replace).await;
    }
}

/// The same for a merge (without a merge chunk: one atomic step per slot group).
#[tokio::test]
async fn a_merge_that_dies_after_any_request_leaves_the_filter_as_it_was() {
    for shape in [GOZERO_1, GOZERO_4] {
        cut_after_every_request(shape, ImportMode::Merge).await;
    }
}

/// SPEC.md §5: "A kill -9 of the importer at any moment leaves the old filter as it was" -
/// for a sharded filter too, whose shards are swapped in one script each.
#[tokio::test]
async fn a_sharded_import_that_dies_after_any_request_leaves_the_filter_as_it_was() {
    for shape in [GOZERO_4, NATIVE_4] {
        cut_after_every_request(shape, ImportMode::Replace).await;
    }
}

/// The staging keys of sections already written keep a fresh TTL while later sections are
/// staged: the 120 s is meant as the longest pause between two of the importer's writes
/// (transfer.rs: "a TTL ... renewed at every piece"), not the time to stage the sections that
/// follow. A file of 4 shards is fed slowly (about 1.25 s per section, each section one chunk),
/// and every staging key's PTTL is sampled while the import runs: none may fall more than 2.5 s
/// below 120 s. (A key renewed only when its own section is written falls by the time the
/// later sections take: for a sharded filter of a few GiB over a network, past 120 s, and the
/// import then fails at the swap although it never paused.)
#[tokio::test]
async fn staging_keys_stay_fresh_while_later_sections_are_staged() {
    use tokio::io::AsyncWriteExt;
    let redis = server();
    let conn = common::connect(&redis.url()).await;
    let shape = Shape {
        bits: 1 << 25,
        ..GOZERO_4
    };
    let source = filter(
        &common::unique_key("snap-fresh-source"),
        shape,
        conn.clone(),
    );
    add_all(&source, &items("in", 20_000)).await;
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();
    let (_, sections) = read_sections(&file).await;
    assert_eq!(sections.len(), 4);

    let (mut feed, input) = tokio::io::duplex(1 << 12);
    let feeder = tokio::spawn(async move {
        let piece = file.len().div_ceil(100);
        for bytes in file.chunks(piece) {
            feed.write_all(bytes).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, mut conn) = (Arc::clone(&done), conn.clone());
        tokio::spawn(async move {
            let mut lowest: BTreeMap<String, i64> = BTreeMap::new();
            while !done.load(Ordering::SeqCst) {
                for (key, ttl) in common::staging_keys(&mut conn).await {
                    if ttl > 0 {
                        let low = lowest.entry(key).or_insert(ttl);
                        *low = (*low).min(ttl);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            lowest
        })
    };
    let target = filter(&common::unique_key("snap-fresh"), shape, conn.clone());
    target.import(input, ImportMode::Replace).await.unwrap();
    done.store(true, Ordering::SeqCst);
    feeder.await.unwrap();
    let lowest = sampler.await.unwrap();
    assert_eq!(
        lowest.len(),
        4,
        "a staging key per section was seen: {lowest:?}"
    );
    let stale: Vec<_> = lowest.iter().filter(|(_, &ttl)| ttl < 117_500).collect();
    assert!(
        stale.is_empty(),
        "staging keys whose TTL ran down while the importer kept writing (lowest PTTL seen, \
         ms): {stale:?}; all: {lowest:?}"
    );
}

/// An import from an input that stalls gives up after the idle limit (a timed-out read),
/// writes nothing and leaves no staging key; one whose bytes keep coming, however slowly in
/// all, is not cut short: only waiting for the next byte counts.
#[tokio::test]
async fn a_stalled_input_gives_up_and_writes_nothing() {
    use tokio::io::AsyncWriteExt;
    let redis = common::redis().await;
    let mut conn = redis.connection().await;
    let key = common::unique_key("snap-stalled");
    let source = filter(&key, NATIVE_4, conn.clone());
    add_all(&source, &items("in", 2_000)).await;
    let mut file = Vec::new();
    source.export(&mut file).await.unwrap();
    let target_key = common::unique_key("snap-stalled-dst");
    let idle = Duration::from_millis(400);
    let target = builder(&target_key, NATIVE_4)
        .import_idle_timeout(idle)
        .build(conn.clone())
        .unwrap();
    add_all(&target, &items("kept", 100)).await;
    let before = common::keyspace(&mut conn).await;

    // Half the file, then nothing (the writer stays open).
    let (mut writer, reader) = tokio::io::duplex(1 << 16);
    let half = file.len() / 2;
    let feed = async {
        writer.write_all(&file[..half]).await.unwrap();
        std::future::pending::<()>().await
    };
    let started = std::time::Instant::now();
    let import = tokio::time::timeout(idle * 20, target.import(reader, ImportMode::Replace));
    let err = tokio::select! {
        result = import => result.expect("the import gave up on its own").unwrap_err(),
        () = feed => unreachable!(),
    };
    let waited = started.elapsed();
    assert!(err.to_string().contains("snapshot"), "{err}");
    let source_text = std::error::Error::source(&err).map(|e| e.to_string());
    let chain = format!("{err:?} {source_text:?}");
    assert!(
        chain.contains("TimedOut") || chain.contains("no input"),
        "{chain}"
    );
    assert!(waited < idle * 10, "gave up after {waited:?}");
    let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
    assert!(changed.is_empty(), "changed {changed:?}");

    // The whole file in small pieces, each within the limit, longer than it in all.
    let (mut writer, reader) = tokio::io::duplex(1 << 16);
    let pieces = 6;
    let feed = async {
        for piece in file.chunks(file.len().div_ceil(pieces)) {
            writer.write_all(piece).await.unwrap();
            tokio::time::sleep(idle / 2).await;
        }
        drop(writer);
    };
    let (imported, ()) = tokio::join!(target.import(reader, ImportMode::Replace), feed);
    imported.unwrap();
    assert!(target.exists("in:1").await.unwrap());
}
