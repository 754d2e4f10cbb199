//! Snapshots of module filters (SPEC.md §5, §7 "Snapshots"), against private redis-servers with
//! RedisBloom (tests/common/module.rs): round trips between two servers (one key, scaling over
//! several sub-filters, sharded, made by raw `BF.*` commands) answer the same for every item
//! and through `BF.EXISTS`; a truncated or corrupted file, chunks that do not make a dump, a
//! mismatch of kind or parameters and a merge are refused writing nothing; an export taken
//! while another task adds imports cleanly with every item added before it began.

mod common;

use common::module::redis_with_bloom;
use redbloom::{
    Builder, Error, ImportMode, ModuleBloom, RedisBloom, SectionHeader, SnapshotHeader,
    SnapshotReader, SnapshotWriter,
};
use redis::aio::MultiplexedConnection;
use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

type Conn = MultiplexedConnection;

fn module(key: &str, capacity: u64) -> Builder<redbloom::kind::Module> {
    ModuleBloom::builder(key)
        .expected_items(capacity)
        .false_positive_rate(0.01)
}

fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}:{i}")).collect()
}

/// Every key holding `key` in its name, with its `DUMP` (the module's keys too): what any
/// write changes.
async fn keyspace(conn: &mut Conn, key: &str) -> Vec<(String, u64, i64)> {
    let mut out = Vec::new();
    for (name, bytes) in common::dumps(conn, &format!("*{key}*")).await {
        let ttl = common::pttl(conn, &name).await;
        let digest = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        out.push((name, digest, ttl.min(0)));
    }
    out
}

/// `BF.INFO key` as (name, integer) pairs.
async fn bf_info(conn: &mut Conn, key: &str) -> Vec<(String, i64)> {
    let reply: Vec<Value> = redis::cmd("BF.INFO")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    reply
        .chunks(2)
        .map(|pair| {
            let name: String = redis::from_redis_value(pair[0].clone()).unwrap();
            let value = match &pair[1] {
                Value::Int(n) => *n,
                _ => -1,
            };
            (name, value)
        })
        .collect()
}

/// `BF.MEXISTS key items` from a plain client: what every other client sees.
async fn bf_mexists(conn: &mut Conn, key: &str, items: &[String]) -> Vec<bool> {
    let found: Vec<i64> = redis::cmd("BF.MEXISTS")
        .arg(key)
        .arg(items)
        .query_async(conn)
        .await
        .unwrap();
    found.into_iter().map(|f| f == 1).collect()
}

async fn export(bloom: &ModuleBloom<Conn>) -> Vec<u8> {
    let mut file = Vec::new();
    let moved = bloom.export(&mut file).await.unwrap();
    assert_eq!(moved.file_bytes, file.len() as u64);
    file
}

/// A file's sections and their bytes (its header has the moment it was taken).
async fn sections(file: &[u8]) -> Vec<(SectionHeader, Vec<u8>)> {
    let (mut reader, _) = SnapshotReader::open(file).await.unwrap();
    let mut out = Vec::new();
    while let Some(section) = reader.next_section().await.unwrap() {
        let mut data = Vec::new();
        while let Some(chunk) = reader.next_chunk().await.unwrap() {
            data.extend_from_slice(chunk);
        }
        out.push((section, data));
    }
    out
}

/// A filter scaled over several sub-filters (capacity 1,000, 3,000 items) exported from one
/// server and imported into another, under the same key and another: the same answers for
/// the items added and 3,000 never added (through the library and `BF.MEXISTS`), the same
/// `BF.INFO`; exported again, the same file.
#[tokio::test]
async fn round_trip_between_two_servers() {
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let key = common::unique_key("module-snap");
    let (mut conn_a, mut conn_b) = (a.connection().await, b.connection().await);
    let source = module(&key, 1_000).build(conn_a.clone()).unwrap();
    let added = items("in", 3_000);
    source.add_many(&added).await.unwrap();
    let info = bf_info(&mut conn_a, &key).await;
    assert!(
        info.iter()
            .any(|(n, v)| n == "Number of filters" && *v >= 2),
        "{info:?}"
    );
    let file = export(&source).await;
    let absent = items("out", 3_000);
    let expected = source.exists_many(&absent).await.unwrap();
    for target_key in [key.clone(), format!("{key}:copy")] {
        let target = module(&target_key, 1_000).build(conn_b.clone()).unwrap();
        let moved = target.import(&file[..], ImportMode::Replace).await.unwrap();
        assert_eq!(moved.file_bytes, file.len() as u64);
        assert!(target.exists_many(&added).await.unwrap().iter().all(|&f| f));
        assert_eq!(target.exists_many(&absent).await.unwrap(), expected);
        assert!(bf_mexists(&mut conn_b, &target_key, &added)
            .await
            .iter()
            .all(|&f| f));
        assert_eq!(
            bf_mexists(&mut conn_b, &target_key, &absent).await,
            expected
        );
        assert_eq!(bf_info(&mut conn_b, &target_key).await, info);
        // The imported filter is this client's: it adds, and exports the same file.
        assert_eq!(
            sections(&export(&target).await).await,
            sections(&file).await
        );
        assert!(target.add("one more").await.unwrap());
        // No staging key left.
        let left = common::keys_like(&mut conn_b, &format!("*{target_key}*import*")).await;
        assert!(left.is_empty(), "{left:?}");
    }
    // A second client of the imported filter opens it by its stored parameters.
    let reopened = module(&key, 1_000).build(conn_b.clone()).unwrap();
    assert!(reopened.exists("in:7").await.unwrap());
    let stored = redbloom::StoredParams::read(&mut conn_b, &key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.kind().unwrap(), redbloom::kind::KindName::Module);
}

/// A filter of 8 shards (four of them never given an item, made empty by its first add) round
/// trips into another server, over a filter there that held other items: the same answers; its
/// shards are the file's, every one of them.
#[tokio::test]
async fn sharded_round_trip() {
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let key = common::unique_key("module-snap-sharded");
    let (conn_a, mut conn_b) = (a.connection().await, b.connection().await);
    let build = |conn: Conn| module(&key, 8_000).shards(8).build(conn).unwrap();
    let source = build(conn_a.clone());
    let added = items("in", 4);
    source.add_many(&added).await.unwrap();
    let file = export(&source).await;
    let target = build(conn_b.clone());
    let before = items("before", 500);
    target.add_many(&before).await.unwrap();
    target.import(&file[..], ImportMode::Replace).await.unwrap();
    assert!(target.exists_many(&added).await.unwrap().iter().all(|&f| f));
    let absent = items("out", 2_000);
    assert_eq!(
        target.exists_many(&absent).await.unwrap(),
        source.exists_many(&absent).await.unwrap()
    );
    let found = target.exists_many(&before).await.unwrap();
    assert!(
        found.iter().filter(|&&f| f).count() < 20,
        "the target's old items are gone"
    );
    let shards = common::keys_like(&mut conn_b, &format!("*{key}*")).await;
    let module_keys = shards.len() - 1; // the parameters
    assert_eq!(module_keys, 8, "the file's shards: {shards:?}");
    for shard in shards.iter().filter(|key| key.contains(":shard:")) {
        let items: i64 = redis::cmd("BF.INFO")
            .arg(shard)
            .arg("ITEMS")
            .query_async::<Vec<i64>>(&mut conn_b)
            .await
            .unwrap()[0];
        assert!(
            items <= 4,
            "{shard}: {items} items, not the target's old ones"
        );
    }
    // The copy exports the same file.
    assert_eq!(
        sections(&export(&target).await).await,
        sections(&file).await
    );
}

/// A filter made by `redis-cli BF.RESERVE`/`BF.ADD` (no parameters stored) exports with flags
/// that agree with its `BF.INFO`, and imports into another server where `BF.EXISTS` and the
/// library both find its items; one made by `BF.ADD`'s defaults too.
#[tokio::test]
async fn raw_filters_export_and_import() {
    let (a, b) = (redis_with_bloom(), redis_with_bloom());
    let (mut conn_a, mut conn_b) = (a.connection().await, b.connection().await);
    for (reserve, capacity) in [(true, 5_000u64), (false, 100)] {
        let key = common::unique_key("module-snap-raw");
        if reserve {
            let () = redis::cmd("BF.RESERVE")
                .arg(&key)
                .arg(0.01)
                .arg(capacity)
                .query_async(&mut conn_a)
                .await
                .unwrap();
        }
        let added = items("raw", 300);
        for item in &added {
            let _: i64 = redis::cmd("BF.ADD")
                .arg(&key)
                .arg(item)
                .query_async(&mut conn_a)
                .await
                .unwrap();
        }
        let source = module(&key, capacity).build(conn_a.clone()).unwrap();
        let file = export(&source).await;
        let target = module(&key, capacity).build(conn_b.clone()).unwrap();
        target.import(&file[..], ImportMode::Replace).await.unwrap();
        assert!(bf_mexists(&mut conn_b, &key, &added)
            .await
            .iter()
            .all(|&f| f));
        assert!(target.exists_many(&added).await.unwrap().iter().all(|&f| f));
        assert_eq!(
            bf_info(&mut conn_b, &key).await,
            bf_info(&mut conn_a, &key).await
        );
        // Flags that disagree with the raw filter's BF.INFO (its expansion): a mismatch.
        let other = module(&key, capacity)
            .growth(4)
            .build(conn_a.clone())
            .unwrap();
        let err = other.export(&mut Vec::new()).await.unwrap_err();
        assert!(matches!(err, Error::ParamsMismatch { .. }), "{err:?}");
        // Importing over the raw filter (another client's) is refused, writing nothing.
        let before = keyspace(&mut conn_a, &key).await;
        let err = source
            .import(&file[..], ImportMode::Replace)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::ParamsMismatch { .. }), "{err:?}");
        assert_eq!(keyspace(&mut conn_a, &key).await, before);
    }
}

/// A file cut anywhere, or with a byte changed, is refused naming the problem, and the filter
/// it was imported over is as it was, with no staging key left.
#[tokio::test]
async fn truncated_or_corrupted_files_write_nothing() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-snap-bad");
    let src = common::unique_key("module-snap-src");
    let source = module(&src, 500).build(conn.clone()).unwrap();
    source.add_many(&items("in", 2_000)).await.unwrap();
    let file = export(&source).await;
    let target = module(&key, 500).build(conn.clone()).unwrap();
    target.add_many(&items("old", 100)).await.unwrap();
    let before = keyspace(&mut conn, &key).await;
    let mut bad: Vec<Vec<u8>> = [1, 40, file.len() / 3, file.len() / 2, file.len() - 1]
        .iter()
        .map(|&at| file[..at].to_vec())
        .collect();
    for at in [50, file.len() / 2, file.len() - 10] {
        let mut flipped = file.clone();
        flipped[at] ^= 0x40;
        bad.push(flipped);
    }
    for (i, bytes) in bad.iter().enumerate() {
        let err = target
            .import(&bytes[..], ImportMode::Replace)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Snapshot(_)), "{i}: {err:?}");
        assert_eq!(
            keyspace(&mut conn, &key).await,
            before,
            "{i}: nothing written"
        );
    }
    assert!(target.exists("old:1").await.unwrap());
}

/// Files whose checksums hold but whose chunks do not make the module's dump (a data chunk
/// first, chunks that skip or overlap, a header the module refuses, a dump cut short) are
/// refused writing nothing.
#[tokio::test]
async fn chunks_that_do_not_make_a_dump_are_refused() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-snap-chunks");
    let src = common::unique_key("module-snap-src");
    let source = module(&src, 500).build(conn.clone()).unwrap();
    source.add_many(&items("in", 2_000)).await.unwrap();
    let target = module(&key, 500).build(conn.clone()).unwrap();
    target.add("old").await.unwrap();
    let fingerprint = redbloom::StoredParams::read(&mut conn, &key)
        .await
        .unwrap()
        .unwrap();
    // The real chunks, through BF.SCANDUMP.
    let mut chunks: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut iter = 0u64;
    loop {
        let (next, data): (u64, Vec<u8>) = redis::cmd("BF.SCANDUMP")
            .arg(&src)
            .arg(iter)
            .query_async(&mut conn)
            .await
            .unwrap();
        if next == 0 {
            break;
        }
        chunks.push((next, data));
        iter = next;
    }
    assert!(chunks.len() >= 3, "a header and two links at least");
    let file_of = |chunks: Vec<(u64, Vec<u8>)>| {
        let fingerprint = fingerprint.fingerprint().to_owned();
        async move {
            let header = SnapshotHeader::new("module", fingerprint, 1);
            let mut writer = SnapshotWriter::new(Vec::new(), &header).await.unwrap();
            for (iter, data) in chunks {
                let mut section = SectionHeader::new(0, "chunk", data.len() as u64);
                section.meta = iter.to_string();
                writer.begin_section(&section).await.unwrap();
                writer.write(&data).await.unwrap();
            }
            writer.finish().await.unwrap()
        }
    };
    // The real chunks make a file that imports (the test's files are right).
    let good = file_of(chunks.clone()).await;
    let other = module(&common::unique_key("module-snap-good"), 500)
        .build(conn.clone())
        .unwrap();
    other.import(&good[..], ImportMode::Replace).await.unwrap();
    assert!(other.exists("in:5").await.unwrap());

    let before = keyspace(&mut conn, &key).await;
    let mut garbled = chunks[0].1.clone();
    garbled[8] = 0xff; // the number of links
    let mut bad_header = chunks.clone();
    bad_header[0].1 = garbled;
    let mut skips = chunks.clone();
    skips.remove(1);
    let mut overlaps = chunks.clone();
    overlaps[1].0 += 1;
    let mut cut = chunks.clone();
    cut.pop();
    let mut twice = chunks.clone();
    twice.push(chunks[1].clone());
    let cases = [
        ("data first", chunks[1..].to_vec()),
        ("bad header", bad_header),
        ("a chunk skipped", skips),
        ("overlapping", overlaps),
        ("cut short", cut),
        ("a chunk twice", twice),
        ("nothing", Vec::new()),
    ];
    for (what, chunks) in cases {
        let file = file_of(chunks).await;
        let err = target
            .import(&file[..], ImportMode::Replace)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Snapshot(_)), "{what}: {err:?}");
        assert_eq!(
            keyspace(&mut conn, &key).await,
            before,
            "{what}: nothing written"
        );
    }
    assert!(target.exists("old").await.unwrap());
}

/// A module file into a module filter of other parameters, into a plain filter, a plain file
/// into a module filter, and `import --merge` of a module file: each refused, nothing written.
#[tokio::test]
async fn mismatches_and_merges_are_refused() {
    let redis = redis_with_bloom();
    let mut conn = redis.connection().await;
    let key = common::unique_key("module-snap-mismatch");
    let source = module(&common::unique_key("module-snap-src"), 1_000)
        .build(conn.clone())
        .unwrap();
    source.add_many(&items("in", 100)).await.unwrap();
    let file = export(&source).await;
    let plain = RedisBloom::builder(common::unique_key("module-snap-plain"))
        .expected_items(1_000)
        .false_positive_rate(0.01)
        .build(conn.clone())
        .unwrap();
    plain.add("p").await.unwrap();
    let mut plain_file = Vec::new();
    plain.export(&mut plain_file).await.unwrap();
    let target = module(&key, 2_000).build(conn.clone()).unwrap();
    target.add("old").await.unwrap();
    let same = module(&key, 1_000).build(conn.clone()).unwrap();
    let before = keyspace(&mut conn, &key).await;

    let err = target.import(&file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = target.import(&plain_file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = plain.import(&file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = plain.import(&file[..], ImportMode::Merge).await;
    assert!(matches!(err, Err(Error::FileMismatch { .. })), "{err:?}");
    let err = target.import(&file[..], ImportMode::Merge).await;
    assert!(matches!(err, Err(Error::InvalidConfig(_))), "{err:?}");
    // The same parameters, but the filter at the key is another's: a mismatch too.
    let err = same.import(&file[..], ImportMode::Replace).await;
    assert!(matches!(err, Err(Error::ParamsMismatch { .. })), "{err:?}");
    assert_eq!(keyspace(&mut conn, &key).await, before);
}

/// Exports taken while another task adds (the filter scaling meanwhile, from one sub-filter to
/// many: with an expansion of 1 a new one every 100 items, so that sub-filters are added while
/// exports run) each import cleanly, with every item whose add returned before the export
/// began.
#[tokio::test]
async fn export_while_another_task_adds() {
    for (capacity, growth, most) in [(200u64, 2u32, 60_000usize), (100, 1, 15_000)] {
        exports_while_adding(capacity, growth, most).await;
    }
}

async fn exports_while_adding(capacity: u64, growth: u32, most: usize) {
    let redis = redis_with_bloom();
    let conn = redis.connection().await;
    let key = common::unique_key("module-snap-busy");
    let build = |key: &str| module(key, capacity).growth(growth);
    let source = build(&key).build(conn.clone()).unwrap();
    let acked = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let adder = {
        let (source, acked, stop) = (source.clone(), acked.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Acquire) && n < most {
                let batch: Vec<String> = (n..n + 50).map(|i| format!("busy:{i}")).collect();
                source.add_many(&batch).await.unwrap();
                n += 50;
                acked.store(n, Ordering::Release);
            }
        })
    };
    let mut conn = conn;
    let mut behind = 0;
    for exports in 0..12 {
        let before = acked.load(Ordering::Acquire);
        let file = export(&source).await;
        // The file's dump header: how many sub-filters it describes, against the filter's.
        let header = &sections(&file).await[0].1;
        let in_file = u32::from_le_bytes(header[8..12].try_into().unwrap());
        let now = bf_info(&mut conn, &key).await;
        let now = now
            .iter()
            .find(|(n, _)| n == "Number of filters")
            .unwrap()
            .1;
        behind += usize::from(i64::from(in_file) < now);
        let copy = build(&format!("{key}:copy{exports}"))
            .build(conn.clone())
            .unwrap();
        copy.import(&file[..], ImportMode::Replace).await.unwrap();
        let wanted: Vec<String> = (0..before).map(|i| format!("busy:{i}")).collect();
        let found = copy.exists_many(&wanted).await.unwrap();
        assert!(
            found.iter().all(|&f| f),
            "export {exports}: all of {before}"
        );
    }
    stop.store(true, Ordering::Release);
    adder.await.unwrap();
    let filters = bf_info(&mut conn, &key).await;
    assert!(
        filters
            .iter()
            .any(|(n, v)| n == "Number of filters" && *v >= 3),
        "it scaled while exported: {filters:?}"
    );
    eprintln!("growth {growth}: {behind} of 12 files describe fewer sub-filters than the filter had just after");
}

/// A filter deleted and made again by another client while it is exported: the export either
/// succeeds with a file that imports cleanly, or fails naming the change; never a file that
/// `BF.LOADCHUNK` refuses.
#[tokio::test]
async fn a_filter_made_again_during_an_export_fails_it_or_exports_cleanly() {
    let redis = redis_with_bloom();
    let conn = redis.connection().await;
    let key = common::unique_key("module-snap-remade");
    let source = module(&key, 1_000).growth(2).build(conn.clone()).unwrap();
    let added = items("in", 20_000);
    source.add_many(&added).await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let remaker = {
        let (mut conn, key, stop) = (conn.clone(), key.clone(), stop.clone());
        tokio::spawn(async move {
            let mut rounds = 0;
            while !stop.load(Ordering::Acquire) {
                let () = redis::pipe()
                    .atomic()
                    .cmd("DEL")
                    .arg(&key)
                    .ignore()
                    .cmd("BF.RESERVE")
                    .arg(&key)
                    .arg(0.01)
                    .arg(1_000)
                    .arg("EXPANSION")
                    .arg(2)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: Vec<i64> = redis::cmd("BF.MADD")
                    .arg(&key)
                    .arg(&added[..3_000])
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                rounds += 1;
                tokio::task::yield_now().await;
            }
            rounds
        })
    };
    let (mut good, mut changed) = (0, 0);
    for round in 0..30 {
        let mut file = Vec::new();
        match source.export(&mut file).await {
            Ok(_) => {
                let copy = module(&format!("{key}:copy{round}"), 1_000)
                    .growth(2)
                    .build(conn.clone())
                    .unwrap();
                copy.import(&file[..], ImportMode::Replace).await.unwrap();
                good += 1;
            }
            Err(Error::Snapshot(err)) if err.to_string().contains("changed while") => {
                changed += 1;
            }
            Err(other) => panic!("round {round}: {other:?}"),
        }
    }
    stop.store(true, Ordering::Release);
    let rounds = remaker.await.unwrap();
    assert!(rounds > 0);
    assert_eq!(good + changed, 30);
    eprintln!("{good} exports clean, {changed} refused as changed, over {rounds} remakes");
}
