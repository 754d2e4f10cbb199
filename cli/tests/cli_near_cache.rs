//! `bench --op exists --near-cache DURATION` (SPEC.md §6) end to end: the bench's answers are
//! right and come from the copy (the server's command statistics show no command per lookup),
//! for every kind, on one server (with tracking) and on a cluster (without); the flag is refused
//! where it does not apply.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, redbloom_cluster, run};
use common::cluster::RedisCluster;
use common::server::RedisServer;
use serde_json::Value;

/// Concurrency of the benches below (the 64 tasks).
const TASKS: &str = "64";

/// `bench --op OP --items N --concurrency 64` with `size` (the kind and size flags) and
/// `extra`; returns its JSON, asserting success.
fn bench(url: &str, key: &str, size: &[&str], op: &str, items: u64, extra: &[&str]) -> Value {
    let items = items.to_string();
    let args = [
        "--json",
        "bench",
        "--op",
        op,
        "--items",
        &items,
        "--concurrency",
        TASKS,
    ];
    let (code, out, err) = run(redbloom(url, key, &[size, &args[..], extra].concat()));
    assert_eq!(code, 0, "bench --op {op} {extra:?}: {err}");
    out
}

/// Fills the filter with bench:0..N-1 (batches of 500).
fn fill(url: &str, key: &str, size: &[&str], items: u64) {
    let out = bench(url, key, size, "add", items, &["--batch", "500"]);
    assert_eq!(out["items"], items, "{out}");
}

/// The near cache's statistics of a bench report, checked for a run that found every one of
/// `items` items: every item answered once (from the copy, or by Redis while none was in
/// place), at least one copy read, and most answers from the copy.
fn checked_stats(out: &Value, items: u64) -> &Value {
    assert_eq!(out["present"], items, "every item added is found: {out}");
    let near = &out["near_cache"];
    let count = |field: &str| {
        near[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field}: {out}"))
    };
    assert_eq!(
        count("hits") + count("stale_hits") + count("misses"),
        items,
        "each lookup counted once: {out}"
    );
    assert!(count("refreshes") >= 1, "a copy was read: {out}");
    assert_eq!(count("failed_refreshes"), 0, "{out}");
    assert!(
        count("hits") > items / 2,
        "most lookups are answered from the copy: {out}"
    );
    assert_eq!(count("stale_hits"), 0, "Redis was up all along: {out}");
    assert_eq!(near["stale"], false, "{out}");
    assert_eq!(near["over_budget"], false, "{out}");
    assert!(count("bytes") > 0, "{out}");
    assert!(near["age_seconds"].as_f64().is_some(), "{out}");
    near
}

/// `total_commands_processed` of the server (`INFO stats`).
fn commands_processed(port: u16) -> u64 {
    let info = common::cluster::cli(port, &["info", "stats"]);
    info.lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no total_commands_processed in {info:?}"))
}

/// The bench answers each lookup right, almost all from the copy: the server serves the
/// copy's read, the lookups made while it was being read, and the connections' setup, not one
/// command per lookup (as the same bench without the cache does). Tracking is on (one server).
#[tokio::test]
async fn a_cached_bench_answers_right_without_a_command_per_lookup() {
    // A server of its own: its command count must not include other tests' commands.
    let server = RedisServer::start().expect("redis-server on PATH");
    let url = server.url();
    let key = common::unique_key("cli-near-cache");
    let size = ["--capacity", "20000", "--fpr", "0.01"];
    const N: u64 = 20_000;
    fill(&url, &key, &size, N);

    let before = commands_processed(server.port());
    let out = bench(&url, &key, &size, "exists", N, &["--near-cache", "1s"]);
    let served = commands_processed(server.port()) - before;
    let near = checked_stats(&out, N);
    assert_eq!(
        near["tracking"], true,
        "one server: invalidations on: {out}"
    );
    assert_eq!(near["refresh_seconds"], 1.0, "{out}");
    let misses = near["misses"].as_u64().unwrap();
    // Beyond the lookups Redis answered (one command each): the connections' setup, the
    // parameters' check of each task's first call, the copy's reads, this test's INFO.
    assert!(
        served <= misses + 4 * 64 + 50,
        "{served} commands for {N} lookups, {misses} of them by Redis: {out}"
    );
    assert!(served < N / 4, "{served} commands for {N} lookups: {out}");

    // The same bench without the cache: a command per lookup at least, and no statistics.
    let before = commands_processed(server.port());
    let out = bench(&url, &key, &size, "exists", N, &[]);
    let served = commands_processed(server.port()) - before;
    assert_eq!(out["present"], N, "{out}");
    assert!(out.get("near_cache").is_none(), "no near cache: {out}");
    assert!(served >= N, "{served} commands for {N} lookups: {out}");

    // Items never added: absent from the copy too (but for false positives, at 1%).
    let (code, out, err) = run(redbloom(
        &url,
        "never-filled",
        &[
            &size[..],
            &[
                "--json",
                "bench",
                "--op",
                "exists",
                "--items",
                "5000",
                "--concurrency",
                TASKS,
                "--near-cache",
                "1s",
            ],
        ]
        .concat(),
    ));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["present"], 0, "an empty filter finds nothing: {out}");
    assert!(out["near_cache"]["hits"].as_u64().unwrap() > 0, "{out}");
}

/// Every kind takes the flag: window, counting, growing (with levels added by the fill), each
/// sharded too, and the text output names the copy's work.
#[tokio::test]
async fn every_kind_benches_from_its_copy() {
    let redis = common::redis().await;
    let url = redis.url();
    const N: u64 = 6_000;
    let kinds: [&[&str]; 5] = [
        &["--window", "1h", "--capacity", "10000", "--fpr", "0.01"],
        &["--counting", "--capacity", "10000", "--fpr", "0.01"],
        // Three levels: 1,500 + 3,000 + 6,000 items.
        &["--growth", "2", "--capacity", "1500", "--fpr", "0.01"],
        &[
            "--layout",
            "native",
            "--capacity",
            "10000",
            "--fpr",
            "0.01",
            "--shards",
            "3",
        ],
        &[
            "--counting",
            "--capacity",
            "10000",
            "--fpr",
            "0.01",
            "--shards",
            "2",
        ],
    ];
    for size in kinds {
        let key = common::unique_key("cli-near-cache-kind");
        fill(url, &key, size, N);
        let out = bench(url, &key, size, "exists", N, &["--near-cache", "2s"]);
        let near = checked_stats(&out, N);
        assert_eq!(near["tracking"], true, "{size:?}: {out}");
    }

    // Text: one line that names the copy's hits and misses.
    let key = common::unique_key("cli-near-cache-text");
    let size = ["--bits", "100000"];
    fill(url, &key, &size, 1_000);
    let out = redbloom(
        url,
        &key,
        &[
            &size[..],
            &[
                "bench",
                "--op",
                "exists",
                "--items",
                "1000",
                "--concurrency",
                "4",
                "--near-cache",
                "500ms",
            ],
        ]
        .concat(),
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("1000 present")
            && text.contains("near cache (0.5 s)")
            && text.contains("hits"),
        "{text}"
    );
}

/// On a cluster the copy is read every interval (a node's invalidations cover only its own
/// keys): tracking stays off, the answers are right and come from the copy.
#[tokio::test]
async fn a_cluster_bench_reads_its_copy_without_tracking() {
    let cluster = RedisCluster::start_without_replicas().expect("redis-server and redis-cli");
    let seeds = cluster.urls().join(",");
    let key = common::unique_key("cli-near-cache-cluster");
    let size = [
        "--layout",
        "native",
        "--capacity",
        "10000",
        "--fpr",
        "0.01",
        "--shards",
        "3",
        "--json",
    ];
    const N: u64 = 5_000;
    let args = |op: &'static str, extra: &'static [&'static str]| {
        let mut args: Vec<&str> = size.to_vec();
        args.extend([
            "bench",
            "--op",
            op,
            "--items",
            "5000",
            "--concurrency",
            TASKS,
        ]);
        args.extend(extra);
        args
    };
    let (code, out, err) = run(redbloom_cluster(
        &seeds,
        &key,
        &args("add", &["--batch", "500"]),
    ));
    assert_eq!(code, 0, "{err}: {out}");
    let (code, out, err) = run(redbloom_cluster(
        &seeds,
        &key,
        &args("exists", &["--near-cache", "1s"]),
    ));
    assert_eq!(code, 0, "{err}");
    let near = checked_stats(&out, N);
    assert_eq!(near["tracking"], false, "no tracking on a cluster: {out}");
    assert_eq!(near["invalidations"], 0, "{out}");
}

/// Over TLS with `--tls-ca`, the tracking connection trusts the same CA as the CLI's own: a
/// server certificate signed by a CA gets invalidations; answers are right either way.
#[tokio::test]
async fn a_tls_bench_tracks_with_the_tls_ca() {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let mut params = CertificateParams::new(Vec::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "near cache test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca = write("ca.pem", &params.self_signed(&ca_key).unwrap().pem());
    let issuer = Issuer::new(params, ca_key);
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().unwrap();
    let cert = write(
        "server.pem",
        &params.signed_by(&key, &issuer).unwrap().pem(),
    );
    let key = write("server.key", &key.serialize_pem());
    let server = RedisServer::start_tls(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ])
    .expect("redis-server (built with TLS) on PATH");
    let url = server.url();
    let key = common::unique_key("cli-near-cache-tls");
    let size = ["--tls-ca", ca.as_str(), "--bits", "100000"];
    fill(&url, &key, &size, 2_000);
    let out = bench(&url, &key, &size, "exists", 2_000, &["--near-cache", "1s"]);
    let near = checked_stats(&out, 2_000);
    assert_eq!(near["tracking"], true, "{out}");
}

/// `--near-cache` only with `bench --op exists`, a valid DURATION, and a copy within its
/// budget: otherwise status 2 and one line naming the cause, before any I/O (the URL below
/// has no server).
#[test]
fn near_cache_is_refused_where_it_does_not_apply() {
    let nowhere = "redis://127.0.0.1:1";
    let size = ["--bits", "100000"];
    let bench = |op: &'static str, near: &'static str| {
        let mut args = size.to_vec();
        args.extend([
            "bench",
            "--op",
            op,
            "--items",
            "10",
            "--concurrency",
            "1",
            "--near-cache",
            near,
        ]);
        redbloom(nowhere, "k", &args)
    };
    for (args, words) in [
        (
            &["exists", "x", "--near-cache", "1s"][..],
            &["--near-cache", "bench --op exists"][..],
        ),
        (
            &["--near-cache", "1s", "add", "x"][..],
            &["--near-cache", "bench"][..],
        ),
        (
            &["--near-cache", "1s", "load", "-"][..],
            &["--near-cache", "bench"][..],
        ),
        (
            &["--near-cache", "1s", "check", "-"][..],
            &["--near-cache", "bench"][..],
        ),
        (
            &["--near-cache", "1s", "info"][..],
            &["--near-cache", "bench"][..],
        ),
    ] {
        assert_fails(
            redbloom(nowhere, "k", &[&size[..], args].concat()),
            words,
            None,
        );
    }
    assert_fails(
        bench("add", "1s"),
        &["--near-cache", "--op exists", "add"],
        None,
    );
    let mut remove = bench("remove", "1s");
    remove.arg("--counting");
    assert_fails(remove, &["--near-cache", "--op exists", "remove"], None);
    for bad in ["0", "-1s", "1w", "soon", "", "0ms"] {
        assert_fails(bench("exists", bad), &["--near-cache", "duration"], None);
    }
    // 2^32 bits: a copy of 512 MiB, over the 256 MiB budget.
    let mut big = redbloom(
        nowhere,
        "big",
        &[
            "--bits",
            "4294967296",
            "bench",
            "--op",
            "exists",
            "--items",
            "10",
            "--concurrency",
            "1",
            "--near-cache",
            "1s",
        ],
    );
    big.env("RUST_BACKTRACE", "1");
    assert_fails(big, &["near cache", "536870912 bytes", "budget"], None);
}
