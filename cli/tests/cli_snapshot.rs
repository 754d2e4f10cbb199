//! `redbloom export`, `import [--merge]` and `build` through the binary (SPEC.md §5): the
//! `--json` outputs, round trips between servers, `-` for standard output and input; every
//! kind of damage to a file (each part of it changed, cut short, or extended) refused with one
//! line naming it and nothing written; mismatched flags, missing files and bad output paths
//! refused; `kill -9` of an importer at random moments leaves the old filter; and export and
//! import of a 64 MiB filter stay far below 100 MiB of RSS (scripts/bench_snapshot.sh measures
//! 512 MiB). Every test runs its own private `redis-server`s.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::server::RedisServer;
use redis::aio::MultiplexedConnection;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;

/// Items enough to reach every one of 4 shards.
const SPREAD: [&str; 16] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p",
];

fn server() -> RedisServer {
    RedisServer::start().expect("redis-server on PATH")
}

/// `redbloom --url URL --key KEY ARGS...` with a time limit.
fn rb(url: &str, key: &str, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = redbloom(url, key, args);
    cmd.timeout(Duration::from_secs(120));
    cmd
}

/// The arguments of several slices, in order.
fn argv<'a>(parts: &[&[&'a str]]) -> Vec<&'a str> {
    parts.concat()
}

/// `load ITEMS` into `key`, then `export OUT`, with `flags`: both succeed.
fn load_and_export(url: &str, key: &str, flags: &[&str], items: &Path, out: &Path) {
    for (verb, path) in [("load", items), ("export", out)] {
        rb(url, key, &argv(&[flags, &[verb, path.to_str().unwrap()]]))
            .assert()
            .success();
    }
}

/// Runs and expects exit status 0 and one JSON line; returns it.
fn ok_json(cmd: assert_cmd::Command) -> Value {
    let shown = format!("{cmd:?}");
    let (code, json, stderr) = run(cmd);
    assert_eq!(code, 0, "{shown}: {stderr}");
    assert!(json.is_object(), "{shown}: {json}");
    json
}

/// The JSON object's field names, sorted.
fn fields(json: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names
}

/// Deterministic noise (xorshift64*).
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `SET key bytes`.
async fn set(conn: &mut MultiplexedConnection, key: &str, bytes: &[u8]) {
    common::set_bytes(conn, key, bytes).await;
}

/// A key's bytes written in 1 MiB `SETRANGE`s of noise, `len` bytes in all (the test never
/// holds more than a MiB of it).
async fn fill_noise(conn: &mut MultiplexedConnection, key: &str, len: usize, seed: u64) {
    let () = redis::cmd("DEL").arg(key).query_async(conn).await.unwrap();
    for (i, at) in (0..len).step_by(MIB).enumerate() {
        let piece = noise(MIB.min(len - at), seed.wrapping_add(i as u64 * 7919));
        let _: i64 = redis::cmd("SETRANGE")
            .arg(key)
            .arg(at)
            .arg(piece)
            .query_async(conn)
            .await
            .unwrap();
    }
}

/// SHA-1 of a key's bytes, computed by the server.
async fn sha1(conn: &mut MultiplexedConnection, key: &str) -> String {
    redis::cmd("EVAL")
        .arg("return redis.sha1hex(redis.call('get', KEYS[1]) or '')")
        .arg(1)
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

/// The keys of a sharded filter's shards (`{rbI.N}:KEY:shard:I/S`), in shard order.
async fn shard_keys(conn: &mut MultiplexedConnection, key: &str, shards: u32) -> Vec<String> {
    let mut found: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{rb*}}:{key}:shard:*/{shards}"))
        .query_async(conn)
        .await
        .unwrap();
    found.sort_by_key(|k| {
        let tail = k.rsplit(":shard:").next().unwrap();
        tail.split('/').next().unwrap().parse::<u32>().unwrap()
    });
    assert_eq!(found.len(), shards as usize, "{found:?}");
    found
}

/// A file of `n` items, one per line.
fn items_file(dir: &Path, name: &str, prefix: &str, n: usize) -> std::path::PathBuf {
    let path = dir.join(name);
    let text: String = (0..n).map(|i| format!("{prefix}:{i}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

type Keyspace = BTreeMap<String, (Vec<u8>, bool)>;

/// The server's keys but for staging keys, whose TTLs must be set and at most 120 s: those are
/// checked, then deleted (they would expire within 120 s; the tests cannot wait).
async fn settled(conn: &mut MultiplexedConnection, context: &str) -> (Keyspace, usize) {
    let staged = common::staging_keys(conn).await;
    for (key, ttl) in &staged {
        assert!(
            *ttl > 0 && *ttl <= 120_000,
            "{context}: staging key {key} has PTTL {ttl}"
        );
        let () = redis::cmd("DEL").arg(key).query_async(conn).await.unwrap();
    }
    (common::keyspace(conn).await, staged.len())
}

/// Asserts the failure `cmd` (exit 2, one line with `words`), and that afterwards every key of
/// the server is as `before` and no staging key is left.
async fn fails_and_writes_nothing(
    conn: &mut MultiplexedConnection,
    before: &Keyspace,
    cmd: assert_cmd::Command,
    words: &[&str],
    context: &str,
) -> String {
    let line = assert_fails(cmd, words, None);
    let staged = common::staging_keys(conn).await;
    assert!(
        staged.is_empty(),
        "{context}: staging keys left: {staged:?}"
    );
    let changed = common::changed_keys(before, &common::keyspace(conn).await);
    assert!(
        changed.is_empty(),
        "{context}: changed {changed:?} ({line})"
    );
    line
}

// ---------------------------------------------------------------------------------------------
// The file's layout, read back to aim the damage (docs/snapshot-format.md).

/// A block: tag (1), len (4), crc (4), content, crc (4).
#[derive(Debug, Clone, Copy)]
struct Block {
    start: usize,
    content: usize,
}

impl Block {
    fn end(&self) -> usize {
        self.start + 13 + self.content
    }
}

/// A chunk: raw_len (4), encoding (1), stored_len (4), raw_crc (4), crc (4), payload, crc (4).
#[derive(Debug, Clone, Copy)]
struct Chunk {
    start: usize,
    encoding: u8,
    stored: usize,
}

impl Chunk {
    fn payload(&self) -> usize {
        self.start + 17
    }

    fn end(&self) -> usize {
        self.start + 21 + self.stored
    }
}

#[derive(Debug)]
struct Parsed {
    header: Block,
    sections: Vec<(Block, Vec<Chunk>)>,
    end: Block,
}

fn be32(file: &[u8], at: usize) -> usize {
    u32::from_be_bytes(file[at..at + 4].try_into().unwrap()) as usize
}

/// The positions of a snapshot's parts; the whole file must be one snapshot (nothing after it).
fn parse(file: &[u8]) -> Parsed {
    assert_eq!(&file[..8], b"RBLOOMSN");
    let block = |at: usize| Block {
        start: at,
        content: be32(file, at + 1),
    };
    let header = block(14);
    assert_eq!(file[header.start], b'H');
    let mut at = header.end();
    let mut sections = Vec::new();
    loop {
        let b = block(at);
        match file[at] {
            b'E' => {
                assert_eq!(b.end(), file.len(), "bytes after the end block");
                return Parsed {
                    header,
                    sections,
                    end: b,
                };
            }
            b'S' => {
                // shard (4), role (u16 + bytes), meta (u16 + bytes), len (8), ttl (8)
                let c = at + 9;
                let role = u16::from_be_bytes([file[c + 4], file[c + 5]]) as usize;
                let m = c + 6 + role;
                let meta = u16::from_be_bytes([file[m], file[m + 1]]) as usize;
                let l = m + 2 + meta;
                let mut left = u64::from_be_bytes(file[l..l + 8].try_into().unwrap());
                at = b.end();
                let mut chunks = Vec::new();
                while left > 0 {
                    let chunk = Chunk {
                        start: at,
                        encoding: file[at + 4],
                        stored: be32(file, at + 5),
                    };
                    left -= be32(file, at) as u64;
                    at = chunk.end();
                    chunks.push(chunk);
                }
                sections.push((b, chunks));
            }
            other => panic!("unexpected tag {other:#x} at {at}"),
        }
    }
}

/// CRC-32 (IEEE), as the format uses, to forge a valid preamble of another version.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn flipped(file: &[u8], at: usize) -> Vec<u8> {
    let mut damaged = file.to_vec();
    damaged[at] ^= 0x01;
    damaged
}

// ---------------------------------------------------------------------------------------------

/// `--json export` then `--json import` into another server: the outputs name the key, the
/// file's size and the seconds; the copy holds the same bytes and answers; `import --merge`
/// adds the file's items to a filter holding others. The same for a sharded native filter.
#[tokio::test]
async fn export_and_import_round_trip_with_json_reports() {
    let (a, b) = (server(), server());
    let (mut ca, mut cb) = (
        common::connect(&a.url()).await,
        common::connect(&b.url()).await,
    );
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), "items.txt", "in", 5_000);
    let others = items_file(dir.path(), "others.txt", "other", 5_000);
    let (items, others) = (items.to_str().unwrap(), others.to_str().unwrap());

    for flags in [
        &["--bits", "4194304", "--json"][..],
        &[
            "--layout",
            "native",
            "--capacity",
            "100000",
            "--fpr",
            "0.01",
            "--shards",
            "4",
            "--json",
        ][..],
    ] {
        let shards = if flags.contains(&"--shards") { 4 } else { 1 };
        let key = common::unique_key("cli-snap");
        ok_json(rb(&a.url(), &key, &argv(&[flags, &["load", items]])));

        let file = dir.path().join(format!("{shards}.rbloom"));
        let file_arg = file.to_str().unwrap();
        let out = ok_json(rb(&a.url(), &key, &argv(&[flags, &["export", file_arg]])));
        let size = std::fs::metadata(&file).unwrap().len();
        assert_eq!(fields(&out), ["bytes", "key", "seconds"], "{out}");
        assert_eq!(out["key"], key.as_str());
        assert_eq!(out["bytes"], size, "{out}");
        assert!(out["seconds"].as_f64().unwrap() >= 0.0, "{out}");
        assert!(!Path::new(&format!("{file_arg}.partial")).exists());

        let copy = common::unique_key("cli-snap-copy");
        let out = ok_json(rb(&b.url(), &copy, &argv(&[flags, &["import", file_arg]])));
        assert_eq!(fields(&out), ["bytes", "key", "seconds"], "{out}");
        assert_eq!(out["key"], copy.as_str());
        assert_eq!(out["bytes"], size, "{out}");
        let out = ok_json(rb(&b.url(), &copy, &argv(&[flags, &["check", items]])));
        assert_eq!(
            (&out["present"], &out["absent"]),
            (&5_000.into(), &0.into()),
            "{out}"
        );
        let (src, dst) = match shards {
            1 => (vec![key.clone()], vec![copy.clone()]),
            n => (
                shard_keys(&mut ca, &key, n).await,
                shard_keys(&mut cb, &copy, n).await,
            ),
        };
        for (s, d) in src.iter().zip(&dst) {
            assert_eq!(sha1(&mut ca, s).await, sha1(&mut cb, d).await, "{s} -> {d}");
        }

        // --merge into a filter holding other items: both sets found.
        let merged = common::unique_key("cli-snap-merge");
        ok_json(rb(&b.url(), &merged, &argv(&[flags, &["load", others]])));
        let merge = argv(&[flags, &["import", "--merge", file_arg]]);
        let out = ok_json(rb(&b.url(), &merged, &merge));
        assert_eq!(out["key"], merged.as_str());
        assert_eq!(out["bytes"], size, "{out}");
        for list in [items, others] {
            let out = ok_json(rb(&b.url(), &merged, &argv(&[flags, &["check", list]])));
            assert_eq!(out["absent"], 0, "{list} after the merge: {out}");
        }
    }
}

/// `build ITEMS --out FILE` needs no Redis and reports `{"items","new","bytes","seconds"}` as
/// `load` counts them (blank lines skipped, `\r\n` taken as `\n`, repeats not new); imported,
/// the file gives the bytes `load` writes. `build -` reads standard input.
#[tokio::test]
async fn build_reports_json_and_imports_to_the_bytes_of_load() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..3_000 {
        text.push_str(&format!("item:{i}\n"));
        if i % 10 == 0 {
            text.push_str(&format!("item:{}\r\n\n", i / 2)); // a repeat, CRLF, a blank line
        }
    }
    let items = dir.path().join("items.txt");
    std::fs::write(&items, &text).unwrap();
    let items = items.to_str().unwrap();
    let out = dir.path().join("built.rbloom");
    let flags = ["--bits", "8388608", "--json"];

    // No server: build works offline.
    let mut build = rb("redis://127.0.0.1:1", "built", &flags);
    build.args(["build", items, "--out", out.to_str().unwrap()]);
    let built = ok_json(build);
    assert_eq!(
        fields(&built),
        ["bytes", "items", "new", "seconds"],
        "{built}"
    );
    assert_eq!(built["bytes"], std::fs::metadata(&out).unwrap().len());
    let mut load = rb(&redis.url(), "loaded", &flags);
    load.args(["load", items]);
    let loaded = ok_json(load);
    assert_eq!(built["items"], 3_300);
    assert_eq!(
        (&built["items"], &built["new"]),
        (&loaded["items"], &loaded["new"])
    );
    assert!(built["new"].as_u64().unwrap() > 2_990, "{built}");

    let mut import = rb(&redis.url(), "built", &flags);
    import.args(["import", out.to_str().unwrap()]);
    ok_json(import);
    assert_eq!(
        sha1(&mut conn, "built").await,
        sha1(&mut conn, "loaded").await
    );

    // The text line: items/s and where the time went (reading, hashing, writing).
    let mut build = rb("redis://127.0.0.1:1", "built", &["--bits", "8388608"]);
    build.args(["build", items, "--out", out.to_str().unwrap()]);
    let done = build.output().unwrap();
    assert!(done.status.success(), "{done:?}");
    let line = String::from_utf8(done.stdout).unwrap();
    assert!(line.starts_with("3300 items, "), "{line:?}");
    assert!(line.ends_with(" s)\n"), "{line:?}");
    let spent = line
        .split_once(" items/s; waiting for lines ")
        .map(|(_, spent)| spent)
        .unwrap_or_else(|| panic!("{line:?}"));
    let parts: Vec<&str> = spent.trim_end_matches(" s)\n").split(" s, ").collect();
    assert_eq!(parts.len(), 3, "{line:?}");
    assert!(
        parts[1].starts_with("hashing and setting bits "),
        "{line:?}"
    );
    assert!(parts[2].starts_with("writing the file "), "{line:?}");
    for part in parts {
        let seconds = part.rsplit(' ').next().unwrap();
        assert!(seconds.parse::<f64>().is_ok(), "{line:?}");
    }

    // From standard input.
    let out2 = dir.path().join("stdin.rbloom");
    let mut build = rb(&redis.url(), "built2", &flags);
    build
        .args(["build", "-", "--out", out2.to_str().unwrap()])
        .write_stdin(text.clone());
    assert_eq!(ok_json(build)["new"], loaded["new"]);
    let mut import = rb(&redis.url(), "built2", &flags);
    import.args(["import", out2.to_str().unwrap()]);
    ok_json(import);
    assert_eq!(
        sha1(&mut conn, "built2").await,
        sha1(&mut conn, "loaded").await
    );
}

/// `export -` writes the snapshot, and only it, to standard output, and `import -` reads one
/// from standard input: `redbloom export - | redbloom import -` copies a filter. The same for
/// `build ITEMS --out -`. With or without `--json`, the report must not go into the stream.
#[tokio::test]
async fn dash_streams_the_file_through_stdout_and_stdin() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let items = items_file(dir.path(), "items.txt", "in", 2_000);
    let items = items.to_str().unwrap();
    rb(&redis.url(), "src", &["--bits", "1048576", "load", items])
        .assert()
        .success();
    for json in [false, true] {
        let mut flags = vec!["--bits", "1048576"];
        if json {
            flags.push("--json");
        }
        let mut args = flags.clone();
        args.extend(["export", "-"]);
        let exported = rb(&redis.url(), "src", &args).output().unwrap();
        assert!(exported.status.success(), "{exported:?}");
        let mut args = flags.clone();
        args.extend(["build", items, "--out", "-"]);
        let built = rb(&redis.url(), "src", &args).output().unwrap();
        assert!(built.status.success(), "{built:?}");

        for (what, stream) in [
            ("export -", &exported.stdout),
            ("build --out -", &built.stdout),
        ] {
            let copy = format!("copy-{json}-{}", what.len());
            let mut args = flags.clone();
            args.extend(["import", "-"]);
            let mut import = rb(&redis.url(), &copy, &args);
            import.write_stdin(stream.clone());
            let out = import.output().unwrap();
            assert!(
                out.status.success(),
                "{what} (--json {json}) piped to import -: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                sha1(&mut conn, &copy).await,
                sha1(&mut conn, "src").await,
                "{what}"
            );
            // Standard output held exactly one snapshot.
            parse(stream);
        }
    }
}

/// Every part of a file damaged — the magic, the version, the preamble's checksum, the header
/// block, a section header, each chunk's header, its raw, zeros and LZ4 payloads and its
/// checksums, the end block — and the file cut at several points or extended: `import` exits 2
/// with one line naming the problem (and where), the target filter and every other key are
/// unchanged, and no staging key is left. The same for a sharded filter damaged in its last
/// section, after the others were staged.
#[tokio::test]
async fn every_damaged_or_truncated_file_is_refused_and_changes_nothing() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    // 4 MiB less 1000 bytes: a chunk of noise (raw), one of zeros, a sparse one (LZ4), and a
    // short one of noise (raw). The keys are written by hand, as by another program: the
    // switch that writes such strings as go-zero filters.
    let flags = ["--bits", "33554432", "--shared-with-go"];
    let mut bytes = noise(MIB, 1);
    bytes.extend(vec![0u8; MIB]);
    bytes.extend((0..MIB).map(|i| if i % 64 == 0 { (i / 64) as u8 | 1 } else { 0 }));
    bytes.extend(noise(MIB - 1000, 2));
    set(&mut conn, "source", &bytes).await;
    let path = dir.path().join("source.rbloom");
    let file_arg = path.to_str().unwrap();
    rb(
        &redis.url(),
        "source",
        &argv(&[&flags, &["export", file_arg]]),
    )
    .assert()
    .success();
    let file = std::fs::read(&path).unwrap();
    let parsed = parse(&file);
    let chunks = &parsed.sections[0].1;
    assert_eq!(parsed.sections.len(), 1);
    assert_eq!(
        chunks.iter().map(|c| c.encoding).collect::<Vec<_>>(),
        [0, 1, 2, 0],
        "raw, zeros, LZ4, raw"
    );
    let () = redis::cmd("DEL")
        .arg("source")
        .query_async(&mut conn)
        .await
        .unwrap();

    // The target: a filter of the same size holding other bits; and a bystander.
    set(&mut conn, "target", &noise(100_000, 3)).await;
    rb(&redis.url(), "target", &argv(&[&flags, &["add", "a", "b"]]))
        .assert()
        .success();
    set(&mut conn, "bystander", b"unrelated").await;
    let before = common::keyspace(&mut conn).await;

    let section = parsed.sections[0].0;
    let end = parsed.end;
    let corrupt = |at: usize, place: &str| vec![format!("corrupt snapshot at byte {at}: {place}")];
    let mut cases: Vec<(String, Vec<u8>, Vec<String>)> = vec![
        (
            "magic".into(),
            flipped(&file, 0),
            vec!["not a redbloom snapshot".into()],
        ),
        (
            "magic end".into(),
            flipped(&file, 7),
            vec!["not a redbloom snapshot".into()],
        ),
        (
            "version".into(),
            flipped(&file, 9),
            corrupt(0, "the preamble"),
        ),
        (
            "preamble crc".into(),
            flipped(&file, 12),
            corrupt(0, "the preamble"),
        ),
    ];
    let mut newer = file.clone();
    newer[9] = 2;
    let crc = crc32(&newer[..10]);
    newer[10..14].copy_from_slice(&crc.to_be_bytes());
    cases.push((
        "version 2".into(),
        newer,
        vec!["version 2 is not supported".into()],
    ));
    let h = parsed.header;
    for (what, at) in [
        ("tag", h.start),
        ("length", h.start + 4),
        ("prefix crc", h.start + 6),
        ("kind", h.start + 11),
        ("params", h.start + 20),
        ("writer", h.end() - 5),
        ("crc", h.end() - 1),
    ] {
        cases.push((
            format!("header {what}"),
            flipped(&file, at),
            corrupt(h.start, "the header block"),
        ));
    }
    for (what, at, place) in [
        ("tag", section.start, "the first section or the end block"),
        (
            "length",
            section.start + 4,
            "the first section or the end block",
        ),
        (
            "prefix crc",
            section.start + 5,
            "the first section or the end block",
        ),
        ("shard", section.start + 12, "section 1's header"),
        ("role", section.start + 15, "section 1's header"),
        ("length field", section.end() - 14, "section 1's header"),
        ("ttl", section.end() - 6, "section 1's header"),
        ("crc", section.end() - 2, "section 1's header"),
    ] {
        cases.push((
            format!("section {what}"),
            flipped(&file, at),
            corrupt(section.start, place),
        ));
    }
    for (n, chunk) in chunks.iter().enumerate() {
        let place = format!("chunk {} of section 1", n + 1);
        let mut spots = vec![
            ("raw_len", chunk.start + 2),
            ("encoding", chunk.start + 4),
            ("stored_len", chunk.start + 8),
            ("raw_crc", chunk.start + 10),
            ("prefix crc", chunk.start + 14),
            ("crc", chunk.end() - 1),
        ];
        if chunk.stored > 0 {
            spots.push(("payload start", chunk.payload()));
            spots.push(("payload middle", chunk.payload() + chunk.stored / 2));
            spots.push(("payload end", chunk.payload() + chunk.stored - 1));
        }
        for (what, at) in spots {
            cases.push((
                format!("chunk {} ({}) {what}", n + 1, chunk.encoding),
                flipped(&file, at),
                corrupt(chunk.start, &place),
            ));
        }
    }
    for (what, at, place) in [
        ("tag", end.start, "section 2 or the end block"),
        ("length", end.start + 4, "section 2 or the end block"),
        ("section count", end.start + 12, "the end block"),
        ("total", end.start + 20, "the end block"),
        ("crc", end.end() - 1, "the end block"),
    ] {
        cases.push((
            format!("end {what}"),
            flipped(&file, at),
            corrupt(end.start, place),
        ));
    }
    let truncated = |at: usize, place: &str| {
        vec![format!(
            "truncated snapshot: it ends at byte {at}, in {place}"
        )]
    };
    for (what, at, place) in [
        ("empty", 0, "the magic"),
        ("in the magic", 5, "the magic"),
        ("in the preamble", 12, "the preamble"),
        ("in the header", h.start + 20, "the header block"),
        (
            "in a section header",
            section.start + 20,
            "section 1's header",
        ),
        (
            "mid-chunk",
            chunks[0].payload() + 1000,
            "chunk 1 of section 1",
        ),
        ("between chunks", chunks[1].start, "chunk 2 of section 1"),
        (
            "in the last chunk",
            chunks[3].end() - 3,
            "chunk 4 of section 1",
        ),
        (
            "just before the end block",
            end.start,
            "section 2 or the end block",
        ),
        ("without the last byte", file.len() - 1, "the end block"),
    ] {
        cases.push((
            format!("cut {what}"),
            file[..at].to_vec(),
            truncated(at, place),
        ));
    }
    let mut longer = file.clone();
    longer.push(0);
    cases.push((
        "a byte after the end".into(),
        longer,
        vec![format!(
            "unexpected bytes after the snapshot's end block, from byte {}",
            file.len()
        )],
    ));

    let damaged = dir.path().join("damaged.rbloom");
    let damaged_arg = damaged.to_str().unwrap();
    for (what, bytes, words) in &cases {
        std::fs::write(&damaged, bytes).unwrap();
        for merge in [false, true] {
            let mut args = flags.to_vec();
            args.push("import");
            if merge {
                args.push("--merge");
            }
            args.push(damaged_arg);
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let cmd = rb(&redis.url(), "target", &args);
            fails_and_writes_nothing(&mut conn, &before, cmd, &words, what).await;
        }
    }
    // The undamaged file imports (the cases above were refused for their damage alone).
    rb(
        &redis.url(),
        "target",
        &argv(&[&flags, &["import", file_arg]]),
    )
    .assert()
    .success();
    assert_eq!(sha1(&mut conn, "target").await, {
        set(&mut conn, "expected", &bytes).await;
        sha1(&mut conn, "expected").await
    });

    // A sharded file damaged in its last section, or cut before its end block, after the other
    // sections were staged.
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let flags = ["--bits", "16777216", "--shards", "4"];
    let items = items_file(dir.path(), "items.txt", "in", 3_000);
    let others = items_file(dir.path(), "others.txt", "other", 3_000);
    let spath = dir.path().join("sharded.rbloom");
    load_and_export(&redis.url(), "ssource", &flags, &items, &spath);
    rb(
        &redis.url(),
        "starget",
        &argv(&[&flags, &["load", others.to_str().unwrap()]]),
    )
    .assert()
    .success();
    let before = common::keyspace(&mut conn).await;
    let file = std::fs::read(&spath).unwrap();
    let parsed = parse(&file);
    assert_eq!(parsed.sections.len(), 4);
    let last = *parsed.sections[3].1.last().unwrap();
    let cases = [
        (
            "last section's payload",
            flipped(&file, last.payload() + last.stored / 2),
            format!("corrupt snapshot at byte {}: chunk", last.start),
        ),
        (
            "cut before the end block",
            file[..parsed.end.start].to_vec(),
            "truncated snapshot".to_owned(),
        ),
        (
            "end block",
            flipped(&file, parsed.end.start + 12),
            "corrupt snapshot".to_owned(),
        ),
    ];
    for (what, bytes, word) in &cases {
        std::fs::write(&damaged, bytes).unwrap();
        let cmd = rb(
            &redis.url(),
            "starget",
            &argv(&[&flags, &["import", damaged_arg]]),
        );
        fails_and_writes_nothing(&mut conn, &before, cmd, &[word.as_str()], what).await;
    }
}

/// A missing file, a directory, and a file of another filter's flags (size, layout, shard
/// count, kind; or `--merge` into a counting filter): exit 2, one line, nothing written (no
/// parameters stored for a new key either).
#[tokio::test]
async fn missing_files_and_mismatched_flags_write_nothing() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--bits", "1048576"];
    rb(&redis.url(), "source", &argv(&[&flags, &["add", "x", "y"]]))
        .assert()
        .success();
    let file = dir.path().join("source.rbloom");
    let file_arg = file.to_str().unwrap();
    rb(
        &redis.url(),
        "source",
        &argv(&[&flags, &["export", file_arg]]),
    )
    .assert()
    .success();
    rb(&redis.url(), "target", &argv(&[&flags, &["add", "z"]]))
        .assert()
        .success();
    let before = common::keyspace(&mut conn).await;

    let missing = dir.path().join("missing.rbloom");
    let missing = missing.to_str().unwrap();
    let directory = dir.path().to_str().unwrap();
    for (path, word) in [(missing, "cannot open"), (directory, "directory")] {
        for key in ["target", "new-key"] {
            let cmd = rb(&redis.url(), key, &argv(&[&flags, &["import", path]]));
            fails_and_writes_nothing(&mut conn, &before, cmd, &[word, path], path).await;
        }
    }

    let others: [&[&str]; 7] = [
        &["--bits", "2097152"],
        &["--layout", "native", "--capacity", "50000", "--fpr", "0.01"],
        &["--bits", "1048576", "--shards", "4"],
        &["--counting", "--bits", "1048576"],
        &["--growth", "2", "--capacity", "1000", "--fpr", "0.01"],
        &["--window", "1h", "--capacity", "1000", "--fpr", "0.01"],
        &["--bits", "1048576", "--layout", "gozero", "--shards", "2"],
    ];
    for other in others {
        for key in ["target", "new-key"] {
            for merge in [false, true] {
                let mut args = other.to_vec();
                args.push("import");
                if merge {
                    args.push("--merge");
                }
                args.push(file_arg);
                let cmd = rb(&redis.url(), key, &args);
                let context = format!("{other:?} into {key}, merge {merge}");
                // The file's filter and the flags' both named (counting and growing filters
                // refuse any merge first).
                let unmergeable = other.contains(&"--counting") || other.contains(&"--growth");
                let words: &[&str] = match merge && unmergeable {
                    true => &["cannot import", "cannot be merged"],
                    false => &["cannot import", "the file holds", "nothing was imported"],
                };
                fails_and_writes_nothing(&mut conn, &before, cmd, words, &context).await;
            }
        }
    }
}

/// `export` that cannot complete leaves neither FILE nor FILE.partial: a directory that does
/// not exist, a FILE that is a directory, a key of another type.
#[tokio::test]
async fn a_failed_export_leaves_no_file() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--bits", "1048576"];
    rb(&redis.url(), "filter", &argv(&[&flags, &["add", "x"]]))
        .assert()
        .success();
    let () = redis::cmd("RPUSH")
        .arg("list")
        .arg("a")
        .query_async(&mut conn)
        .await
        .unwrap();

    let in_missing = dir.path().join("no/such/dir/out.rbloom");
    let is_dir = dir.path().join("a-directory");
    std::fs::create_dir(&is_dir).unwrap();
    let plain = dir.path().join("list.rbloom");
    for (key, path, words) in [
        ("filter", &in_missing, &["cannot create"][..]),
        ("filter", &is_dir, &["a-directory"][..]),
        ("list", &plain, &["another type"][..]),
    ] {
        let arg = path.to_str().unwrap();
        assert_fails(
            rb(&redis.url(), key, &argv(&[&flags, &["export", arg]])),
            words,
            None,
        );
        let partial = format!("{arg}.partial");
        assert!(!Path::new(&partial).exists(), "{partial} was left behind");
        assert!(path == &is_dir || !path.exists(), "{arg} was written");
    }
    assert!(is_dir.is_dir(), "the directory is still a directory");
}

// ---------------------------------------------------------------------------------------------

/// `kill -9` of `redbloom import -` at random moments while a throttled writer feeds it the
/// file (a 16 MiB filter, and one of 4 shards of 4 MiB): after every kill the server holds
/// exactly the old filters (or, when the import had finished, exactly the new one) and nothing
/// else but staging keys, each with a TTL of at most 120 s.
#[tokio::test]
async fn kill_9_of_an_importer_at_random_moments_leaves_the_old_filter() {
    const RUNS: u64 = 12;
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let single = ["--bits", "134217728"];
    let sharded = ["--bits", "134217728", "--shards", "4"];

    // The files: filters of noise, exported, then deleted.
    fill_noise(&mut conn, "src1", 16 * MIB, 11).await;
    let file1 = dir.path().join("single.rbloom");
    rb(
        &redis.url(),
        "src1",
        &argv(&[&single, &["export", file1.to_str().unwrap()]]),
    )
    .assert()
    .success();
    rb(&redis.url(), "src4", &argv(&[&sharded, &["add"], &SPREAD]))
        .assert()
        .success();
    for (i, key) in shard_keys(&mut conn, "src4", 4).await.iter().enumerate() {
        fill_noise(&mut conn, key, 4 * MIB, 20 + i as u64).await;
    }
    let file4 = dir.path().join("sharded.rbloom");
    rb(
        &redis.url(),
        "src4",
        &argv(&[&sharded, &["export", file4.to_str().unwrap()]]),
    )
    .assert()
    .success();
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    // The old filters: other noise.
    rb(&redis.url(), "one", &argv(&[&single, &["add", "x"]]))
        .assert()
        .success();
    fill_noise(&mut conn, "one", 16 * MIB, 12).await;
    rb(&redis.url(), "four", &argv(&[&sharded, &["add"], &SPREAD]))
        .assert()
        .success();
    for (i, key) in shard_keys(&mut conn, "four", 4).await.iter().enumerate() {
        fill_noise(&mut conn, key, 4 * MIB, 40 + i as u64).await;
    }
    // The records of the adds' exact answers expire by themselves (a TTL from their ring
    // slot's start): not part of the state compared, and an import deletes them anyway.
    let records = common::keys_like(&mut conn, "*:once:*").await;
    if !records.is_empty() {
        let _: i64 = redis::cmd("DEL")
            .arg(&records)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let old = common::keyspace(&mut conn).await;
    // What a complete import of each leaves, then the old state back.
    let mut complete = Vec::new();
    for (key, flags, file) in [("one", &single[..], &file1), ("four", &sharded[..], &file4)] {
        rb(
            &redis.url(),
            key,
            &argv(&[flags, &["import", file.to_str().unwrap()]]),
        )
        .assert()
        .success();
        complete.push(common::keyspace(&mut conn).await);
        restore(&mut conn, &old).await;
    }
    assert_ne!(complete[0], old);
    assert_ne!(complete[1], old);

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    println!("kill -9 runs, seed {seed}");
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut mid_stream, mut with_staging, mut finished) = (0, 0, 0);
    for run in 0..RUNS {
        let (key, flags, file, done_state) = match run % 2 {
            0 => ("one", &single[..], &file1, &complete[0]),
            _ => ("four", &sharded[..], &file4, &complete[1]),
        };
        let bytes = Arc::new(std::fs::read(file).unwrap());
        let len = bytes.len() as u64;
        // Spread over the stream; the last two runs just after its end (the end block's
        // check, the swap, the exit).
        let slot = match run < RUNS - 2 {
            true => (run * 1_000 + next() % 1_000) * len / ((RUNS - 2) * 1_000),
            false => len,
        };
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
            .env_remove("REDIS_URL")
            .args(["--url", &redis.url(), "--key", key])
            .args(flags)
            .args(["import", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let written = Arc::new(AtomicU64::new(0));
        let all_written = Arc::new(AtomicBool::new(false));
        let writer = {
            let (bytes, written, all_written) = (
                Arc::clone(&bytes),
                Arc::clone(&written),
                Arc::clone(&all_written),
            );
            std::thread::spawn(move || throttled(stdin, &bytes, &written, &all_written))
        };
        let started = Instant::now();
        while written.load(Ordering::SeqCst) < slot.min(len)
            && !all_written.load(Ordering::SeqCst)
            && started.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let extra = match slot >= len {
            true => next() % 25,
            false => next() % 20,
        };
        std::thread::sleep(Duration::from_millis(extra));
        let _ = child.kill();
        let status = child.wait().unwrap();
        writer.join().unwrap();
        let streamed = all_written.load(Ordering::SeqCst);

        let context = format!("run {run} ({key}, kill at byte {slot} of {len} + {extra} ms)");
        let (now, staged) = settled(&mut conn, &context).await;
        let state = if now == old {
            "old"
        } else if &now == done_state {
            "new"
        } else {
            "mixed"
        };
        println!("{context}: exit {status}, streamed {streamed}, {staged} staging keys, {state}");
        assert_ne!(
            state,
            "mixed",
            "{context}: the filter is neither the old nor the new one: changed {:?}",
            common::changed_keys(&old, &now)
        );
        if !streamed {
            assert_eq!(
                state, "old",
                "{context}: changed before the file was read whole"
            );
            mid_stream += 1;
        }
        with_staging += usize::from(staged > 0);
        if state == "new" {
            finished += 1;
            restore(&mut conn, &old).await;
        }
    }
    println!(
        "{mid_stream} killed mid-stream, {with_staging} left staging keys, {finished} finished"
    );
    assert!(
        mid_stream >= RUNS as usize / 2,
        "too few kills landed mid-stream"
    );
    assert!(with_staging >= 3, "too few kills landed while staging");
}

/// Writes `bytes` in 64 KiB pieces, 2 ms apart (about 30 MiB/s), counting them in `written`,
/// until done (`all_written`) or the reader is gone.
fn throttled(
    mut out: std::process::ChildStdin,
    bytes: &[u8],
    written: &AtomicU64,
    all_written: &AtomicBool,
) {
    for piece in bytes.chunks(64 << 10) {
        if out.write_all(piece).is_err() {
            return;
        }
        written.fetch_add(piece.len() as u64, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
    }
    all_written.store(true, Ordering::SeqCst);
}

/// Puts a [`common::keyspace`] back (none of its keys has a TTL).
async fn restore(conn: &mut MultiplexedConnection, keys: &Keyspace) {
    let () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
    for (key, (dump, ttl)) in keys {
        assert!(!ttl, "{key} has a TTL");
        let () = redis::cmd("RESTORE")
            .arg(key)
            .arg(0)
            .arg(dump)
            .query_async(conn)
            .await
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------

/// Address space the child may map (`ulimit -v`): room for the runtime and its thread stacks,
/// far below what holding a 64 MiB filter several times over would need.
const CAP_KIB: u64 = 1 << 20;
/// The bound on the CLI's peak RSS for export and import, whatever the filter's size.
const RSS_KIB: u64 = 100 << 10;

/// Exit status, stderr, peak RSS (KiB) and seconds of `redbloom ARGS` under [`CAP_KIB`].
///
/// The peak is `VmHWM` from `/proc/PID/status`, polled every 2 ms until the child exits (it is a
/// high-water mark: any poll after the peak sees it). Not `wait4`'s `ru_maxrss`: that mark
/// survives `exec` and starts from the address space the child was spawned with, this test
/// process's (measured: 157 MiB reported for an export whose own peak was 19 MiB, when the
/// other tests of this file ran beside it).
fn measured(url: &str, key: &str, args: &[&str]) -> (i32, String, u64, f64) {
    let bin = assert_cmd::cargo::cargo_bin("redbloom");
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {CAP_KIB} && exec \"$0\" \"$@\""))
        .arg(bin)
        .env_remove("REDIS_URL")
        .args(["--url", url, "--key", key])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut peak = 0u64;
    let status = loop {
        peak = peak.max(vm_hwm_kib(child.id()).unwrap_or(0));
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let seconds = started.elapsed().as_secs_f64();
    let stderr = drain.join().unwrap();
    let code = status
        .code()
        .unwrap_or_else(|| panic!("killed by {status} (the memory cap?): {stderr}"));
    (code, stderr, peak, seconds)
}

/// `VmHWM` (peak RSS, KiB) of a running process.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Export and import of a 64 MiB filter of noise (every chunk raw), to a file and from it, keep
/// the CLI's peak RSS under 100 MiB (it streams 1 MiB chunks), and the copy is exact.
#[tokio::test]
async fn export_and_import_of_64_mib_stay_under_100_mib_of_rss() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--bits", "536870912"];
    fill_noise(&mut conn, "big", 64 * MIB, 99).await;
    let file = dir.path().join("big.rbloom");
    let file_arg = file.to_str().unwrap();

    let (code, stderr, peak, seconds) =
        measured(&redis.url(), "big", &argv(&[&flags, &["export", file_arg]]));
    assert_eq!(code, 0, "{stderr}");
    println!("export of 64 MiB: peak RSS {peak} KiB, {seconds:.2} s");
    assert!(peak < RSS_KIB, "export: peak RSS {peak} KiB");
    assert!(std::fs::metadata(&file).unwrap().len() > 64 * MIB as u64);

    let (code, stderr, peak, seconds) = measured(
        &redis.url(),
        "copy",
        &argv(&[&flags, &["import", file_arg]]),
    );
    assert_eq!(code, 0, "{stderr}");
    println!("import of 64 MiB: peak RSS {peak} KiB, {seconds:.2} s");
    assert!(peak < RSS_KIB, "import: peak RSS {peak} KiB");
    assert_eq!(sha1(&mut conn, "copy").await, sha1(&mut conn, "big").await);
}

/// `import -` from a pipe that stalls gives up after `--idle`: exit 2 with one line saying so,
/// nothing written, no staging key left (the pipe is still open).
#[tokio::test]
async fn an_import_from_a_stalled_pipe_gives_up() {
    let redis = server();
    let mut conn = common::connect(&redis.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--layout",
        "native",
        "--capacity",
        "100000",
        "--fpr",
        "0.01",
    ];
    let items = items_file(dir.path(), "items.txt", "in", 2_000);
    let path = dir.path().join("source.rbloom");
    load_and_export(&redis.url(), "source", &flags, &items, &path);
    let file = std::fs::read(&path).unwrap();
    let before = common::keyspace(&mut conn).await;

    let started = Instant::now();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", &redis.url(), "--key", "target"])
        .args(flags)
        .args(["import", "--idle", "1s", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&file[..file.len() / 2]).unwrap();
    stdin.flush().unwrap();
    // The pipe stays open: the child must give up by itself.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the import still waits on a stalled pipe"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    drop(stdin);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no input for 1s"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let changed = common::changed_keys(&before, &common::keyspace(&mut conn).await);
    assert!(changed.is_empty(), "changed {changed:?}");
}
