//! Lines out (SPEC.md §3, issue 53): `load --emit new` writes each line whose item was new,
//! `check --emit absent|present` each such line, to stdout, in input order, as the batches are
//! answered; the summary goes to stderr. A line repeated in the input is written at its first
//! new occurrence only, whatever the batches; concurrent loaders write each line once between
//! them; a line whose answer could not be known (a retried batch) is written too; a closed
//! stdout stops the run with exit status 2 and the count of items loaded.
//!
//! The tests that need nothing of their own share one server (started by the first that
//! needs it, stopped when the last of those running at once is done).

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, redbloom_cluster};
use common::TestRedis;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::Child;
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The server the tests share (see the module's docs).
fn shared() -> Arc<TestRedis> {
    static SHARED: Mutex<Weak<TestRedis>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(redis) = shared.upgrade() {
        return redis;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let redis = Arc::new(runtime.block_on(common::redis()));
    *shared = Arc::downgrade(&redis);
    redis
}

/// `"{prefix}{i}\n"` for each `i` of `range`.
fn numbered(prefix: &str, range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("{prefix}{i}\n")).collect()
}

/// The lines of `text` (each without its `\n` and a `\r` before it), empty lines left out.
fn items(text: &str) -> Vec<&str> {
    text.lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.is_empty())
        .collect()
}

/// Each of `lines` not in `before` at its first occurrence, one per line: what `load --emit
/// new` writes into a filter that holds `before` (false positives aside).
fn first_new(lines: &[&str], before: &HashSet<String>) -> String {
    let mut seen = before.clone();
    lines
        .iter()
        .filter(|line| seen.insert(line.to_string()))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Exit status, stdout and stderr of `cmd` fed `input`.
fn output(mut cmd: assert_cmd::Command, input: &[u8]) -> (i32, String, String) {
    let out = cmd.write_stdin(input).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A file holding `text`, in `dir`.
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A native filter at 10^-6 for `capacity` items, as flags.
fn native_flags(capacity: &'static str) -> [&'static str; 6] {
    [
        "--layout",
        "native",
        "--capacity",
        capacity,
        "--fpr",
        "1e-6",
    ]
}

/// Loads `text`'s lines into the filter at `key` (`flags` its size) by `load -`.
fn load_lines(url: &str, key: &str, flags: &[&str], text: &str) {
    let args = [flags, &["load", "-"]].concat();
    let (code, _, stderr) = output(redbloom(url, key, &args), text.as_bytes());
    assert_eq!(code, 0, "{stderr}");
}

/// The exit status of `child`, waiting at most `within` (then it is killed and the test fails).
fn exit_within(child: &mut Child, within: Duration) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        if started.elapsed() > within {
            let _ = child.kill();
            panic!("redbloom did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A thread reading `child`'s stdout line by line into a channel.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    rx
}

/// The done-when scenario of issue 53 at a smaller size, into a filter past 4 MiB (merged by
/// ranges, as the 48 MB filter is): 100,000 lines, then 150,000 of which the first
/// 50,000 were in the first file. Each load writes its new lines in order and nothing else (no
/// false positive at this fill: the output is exact).
#[test]
fn a_second_file_writes_only_the_lines_the_first_did_not_have() {
    let redis = shared();
    let key = common::unique_key("emit-two-files");
    let dir = tempfile::tempdir().unwrap();
    let a = file(&dir, "a", &numbered("u", 0..100_000));
    let b = file(&dir, "b", &numbered("u", 50_000..200_000));
    let flags = ["--layout", "native", "--capacity", "2e6", "--fpr", "1e-4"];
    for (path, want, summary) in [
        (&a, numbered("u", 0..100_000), "100000 items, 100000 new,"),
        (
            &b,
            numbered("u", 100_000..200_000),
            "150000 items, 100000 new,",
        ),
    ] {
        let args = [&flags[..], &["load", "--emit", "new", path]].concat();
        let (code, stdout, stderr) = output(redbloom(redis.url(), &key, &args), b"");
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout == want,
            "{path}: {} lines written",
            stdout.lines().count()
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with(summary), "{stderr}");
    }
}

/// Lines repeated near each other and far apart, some ending in `\r\n`, and empty lines: each
/// line is written once, at its first occurrence, whether the repeats share a batch (the
/// default batch, which goes by the dense path: BITOP on the server) or fall in batches of 7
/// (BITFIELD), and a line ending in `\r\n` is written with `\n` alone.
#[tokio::test]
async fn a_repeated_line_is_written_at_its_first_new_occurrence_only() {
    // A server of its own: the test counts the server's BITOPs.
    let server = common::server::RedisServer::start().unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut state = 12_345u64;
    let mut input = String::new();
    for i in 0..3_000 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        let n = (state >> 33) % 700;
        input += &match i % 97 {
            0 => "\n".to_owned(),
            1 => format!("r{n}\r\n"),
            _ => format!("r{n}\n"),
        };
    }
    let lines = items(&input).len();
    let want = first_new(&items(&input), &HashSet::new());
    assert!(
        want.lines().count() < 700 && want.lines().count() > 600,
        "repeats near and far"
    );
    for (layout, batch, dense) in [
        ("gozero", None, true),
        ("gozero", Some("7"), false),
        ("native", None, true),
        ("native", Some("7"), false),
    ] {
        let key = common::unique_key(&format!("emit-repeats-{layout}"));
        let mut args = vec!["--layout", layout, "--capacity", "100000", "--fpr", "1e-6"];
        args.extend(["load", "--emit", "new", "-"]);
        if let Some(batch) = batch {
            args.extend(["--batch", batch]);
        }
        let run = async { output(redbloom(&server.url(), &key, &args), input.as_bytes()) };
        let ((code, stdout, stderr), merges) = common::calls_during(&mut conn, "bitop", run).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, want, "{layout} --batch {batch:?}");
        assert_eq!(
            merges > 0,
            dense,
            "{layout} --batch {batch:?}: {merges} BITOP"
        );
        assert!(
            stderr.starts_with(&format!("{} items, {} new,", lines, want.lines().count())),
            "{stderr}"
        );
    }
}

/// `check --emit absent` and `--emit present` write every such line, repeats included, in
/// input order, and add nothing.
#[test]
fn check_writes_the_absent_or_the_present_lines() {
    let redis = shared();
    let key = common::unique_key("emit-check");
    let flags = native_flags("100000");
    load_lines(redis.url(), &key, &flags, &numbered("s", 0..1_000));
    let input: String = (0..2_000)
        .map(|i| match i % 3 {
            0 => format!("s{}\n", (i * 7) % 1_000),
            _ => format!("t{}\n", i % 50),
        })
        .collect();
    let lines = items(&input);
    let of = |prefix: char| -> String {
        let kept = lines.iter().filter(|line| line.starts_with(prefix));
        kept.map(|line| format!("{line}\n")).collect()
    };
    for (which, prefix) in [("absent", 't'), ("present", 's'), ("absent", 't')] {
        let args = [
            &flags[..],
            &["check", "--emit", which, "--batch", "64", "-"],
        ]
        .concat();
        let (code, stdout, stderr) = output(redbloom(redis.url(), &key, &args), input.as_bytes());
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(stdout, of(prefix), "--emit {which}");
        assert!(
            stderr.starts_with("2000 items, 667 present, 1333 absent,"),
            "{stderr}"
        );
    }
}

/// Every kind, sharded or not, the module's included: a load from stdin with repeats (the
/// default batch), a second load from a file in batches of 7, then checks.
#[test]
fn every_kind_writes_its_lines() {
    let redis = common::module::redis_with_bloom();
    let url = redis.url();
    let dir = tempfile::tempdir().unwrap();
    let pick = |seed: u64, n: usize, from: u64, span: u64| -> String {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                format!("k{}\n", from + (state >> 33) % span)
            })
            .collect()
    };
    let a = pick(1, 1_500, 0, 1_000);
    let b = pick(2, 1_500, 500, 1_000);
    let c = pick(3, 400, 0, 2_000);
    let b_path = file(&dir, "b", &b);
    let c_path = file(&dir, "c", &c);
    let want_a = first_new(&items(&a), &HashSet::new());
    let after_a: HashSet<String> = items(&a).into_iter().map(str::to_owned).collect();
    let want_b = first_new(&items(&b), &after_a);
    let loaded: HashSet<&str> = items(&a).into_iter().chain(items(&b)).collect();
    let checked = |present: bool| -> String {
        let lines = items(&c).into_iter();
        let kept = lines.filter(|line| loaded.contains(line) == present);
        kept.map(|line| format!("{line}\n")).collect()
    };
    let sized = ["--capacity", "100000", "--fpr", "1e-6"];
    let kinds: [(&str, Vec<&str>); 10] = [
        ("gozero", vec!["--bits", "4000000"]),
        ("native", [&["--layout", "native"][..], &sized].concat()),
        (
            "native, 4 shards",
            [&["--layout", "native", "--shards", "4"][..], &sized].concat(),
        ),
        ("window", [&["--window", "1h"][..], &sized].concat()),
        (
            "window, 3 shards",
            [&["--window", "1h", "--shards", "3"][..], &sized].concat(),
        ),
        ("counting", [&["--counting"][..], &sized].concat()),
        // A first level of 500: the loads add levels.
        (
            "growing",
            vec!["--growth", "2", "--capacity", "500", "--fpr", "1e-6"],
        ),
        ("module", [&["--module"][..], &sized].concat()),
        (
            "module, 2 shards",
            [&["--module", "--shards", "2"][..], &sized].concat(),
        ),
        (
            "module window",
            [&["--module", "--window", "1h"][..], &sized].concat(),
        ),
    ];
    for (kind, flags) in &kinds {
        let key = common::unique_key("emit-kinds");
        let runs: [(&[&str], &str, &String, &str); 4] = [
            (&["load", "--emit", "new", "-"], &a, &want_a, "1500 items"),
            (
                &["load", "--emit", "new", "--batch", "7", &b_path],
                "",
                &want_b,
                "1500 items",
            ),
            (
                &["check", "--emit", "absent", &c_path],
                "",
                &checked(false),
                "400 items",
            ),
            (
                &["check", "--emit", "present", "--batch", "7", &c_path],
                "",
                &checked(true),
                "400 items",
            ),
        ];
        for (args, input, want, summary) in runs {
            let args = [&flags[..], args].concat();
            let (code, stdout, stderr) = output(redbloom(url, &key, &args), input.as_bytes());
            assert_eq!(code, 0, "{kind} {args:?}: {stderr}");
            assert!(
                stdout == *want,
                "{kind} {args:?}: {} lines written, {} expected",
                stdout.lines().count(),
                want.lines().count()
            );
            let summary_line = stderr.lines().last().unwrap_or("");
            assert!(summary_line.starts_with(summary), "{kind}: {stderr}");
        }
    }
}

/// The done-when scenario over a Redis Cluster (3 masters), the filter in 4 shards.
#[test]
fn a_cluster_writes_the_new_lines_of_each_file() {
    let cluster = common::cluster::RedisCluster::start_without_replicas()
        .expect("redis-server and redis-cli on PATH");
    cluster.wait_until_ok(Duration::from_secs(20)).unwrap();
    let seeds = cluster.urls().join(",");
    let dir = tempfile::tempdir().unwrap();
    let a = file(&dir, "a", &numbered("u", 0..20_000));
    let b = file(&dir, "b", &numbered("u", 10_000..30_000));
    let flags = ["--shards", "4", "--layout", "native", "--capacity", "1e5"];
    for (path, want) in [
        (&a, numbered("u", 0..20_000)),
        (&b, numbered("u", 20_000..30_000)),
    ] {
        let args = [
            &flags[..],
            &["--fpr", "1e-6", "load", "--emit", "new", path],
        ]
        .concat();
        let (code, stdout, stderr) = output(redbloom_cluster(&seeds, "emit-cluster", &args), b"");
        assert_eq!(code, 0, "{stderr}");
        assert!(
            stdout == want,
            "{path}: {} lines written",
            stdout.lines().count()
        );
    }
}

/// Lines from a slow pipe are written as their batches are answered, before the input ends.
#[test]
fn lines_go_out_before_the_input_ends() {
    let redis = shared();
    let key = common::unique_key("emit-streaming");
    let mut child = common::cli::spawn(
        redis.url(),
        &key,
        &["--bits", "1000000", "load", "--emit", "new", "-"],
    );
    let mut stdin = child.stdin.take().unwrap();
    let lines = lines_of(&mut child);
    let within = Duration::from_secs(10);
    stdin.write_all(b"first\nsecond\n").unwrap();
    stdin.flush().unwrap();
    // The input stays open: the batch (thousands of items) is far from full.
    assert_eq!(lines.recv_timeout(within).as_deref(), Ok("first"));
    assert_eq!(lines.recv_timeout(within).as_deref(), Ok("second"));
    stdin.write_all(b"first\nthird\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(lines.recv_timeout(within).as_deref(), Ok("third"));
    drop(stdin);
    assert_eq!(exit_within(&mut child, within), 0);
    assert_eq!(
        lines.recv_timeout(within),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.starts_with("4 items, 3 new,"), "{stderr}");
}

/// A reader that stops reading (`head`): the load stops at once, exit status 2, one line on
/// stderr saying how many items were loaded; those are the first lines, all in the filter.
#[test]
fn a_closed_stdout_stops_the_load_and_says_how_many_items_were_loaded() {
    let redis = shared();
    let key = common::unique_key("emit-epipe");
    let flags = ["--bits", "20000000"];
    let args = [&flags[..], &["load", "--emit", "new", "-"]].concat();
    let mut child = common::cli::spawn(redis.url(), &key, &args);
    // An endless input: only the closed stdout can stop the run.
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let mut i = 0u64;
        loop {
            let chunk: String = (i..i + 1_000).map(|n| format!("p{n}\n")).collect();
            if stdin.write_all(chunk.as_bytes()).is_err() {
                return i;
            }
            i += 1_000;
        }
    });
    let lines = lines_of(&mut child);
    for n in 0..10 {
        let line = lines.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(line, format!("p{n}"));
    }
    // Closes the read end of the pipe (the reader thread ends with it).
    drop(lines);
    let code = exit_within(&mut child, Duration::from_secs(30));
    let fed = feeder.join().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
    let loaded: u64 = stderr
        .strip_prefix("redbloom: cannot write to standard output: Broken pipe")
        .and_then(|rest| rest.split(" (").nth(2))
        .and_then(|rest| rest.strip_suffix(" items acknowledged as added before it)\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr:?}"));
    assert!((10..=fed).contains(&loaded), "{loaded} of {fed}: {stderr}");
    // The first `loaded` lines, all of them in the filter.
    let first = numbered("p", 0..loaded as usize);
    let args = [&flags[..], &["check", "--emit", "absent", "-"]].concat();
    let (code, stdout, stderr) = output(redbloom(redis.url(), &key, &args), first.as_bytes());
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
}

/// Four loaders of the same lines at once, each in its own order: between them each line is
/// written once, and each loader writes its lines in its input's order.
#[test]
fn concurrent_loaders_write_each_line_once_between_them() {
    let redis = shared();
    let key = common::unique_key("emit-concurrent");
    let n = 20_000usize;
    let orders: Vec<Vec<usize>> = vec![
        (0..n).collect(),
        (0..n).rev().collect(),
        (0..n).map(|i| (i * 7_919) % n).collect(),
        (0..n).map(|i| (i % 2) * (n / 2) + i / 2).collect(),
    ];
    let batches = ["100", "1000", "37", "250"];
    let mut children: Vec<(Child, std::thread::JoinHandle<()>)> = orders
        .iter()
        .zip(batches)
        .map(|(order, batch)| {
            let args = [
                "--layout",
                "native",
                "--capacity",
                "100000",
                "--fpr",
                "1e-6",
                "load",
                "--emit",
                "new",
                "--batch",
                batch,
                "-",
            ];
            let mut child = common::cli::spawn(redis.url(), &key, &args);
            let mut stdin = child.stdin.take().unwrap();
            let input: String = order.iter().map(|i| format!("c{i}\n")).collect();
            let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
            (child, feeder)
        })
        .collect();
    let mut written: Vec<Vec<usize>> = Vec::new();
    for (child, feeder) in children.drain(..) {
        feeder.join().unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let lines = String::from_utf8(out.stdout).unwrap();
        let numbers = lines
            .lines()
            .map(|line| line[1..].parse().unwrap())
            .collect();
        written.push(numbers);
    }
    let mut all = HashSet::new();
    for (loader, (lines, order)) in written.iter().zip(&orders).enumerate() {
        for &line in lines {
            assert!(all.insert(line), "c{line} written twice (loader {loader})");
        }
        let position: std::collections::HashMap<usize, usize> =
            order.iter().enumerate().map(|(at, &i)| (i, at)).collect();
        assert!(
            lines.windows(2).all(|w| position[&w[0]] < position[&w[1]]),
            "loader {loader} wrote its lines out of order"
        );
    }
    let counts: Vec<usize> = written.iter().map(Vec::len).collect();
    assert_eq!(all.len(), n, "every line once between them: {counts:?}");
}

/// With `--json` the summary is one line of JSON on stderr; stdout holds the lines alone.
#[test]
fn with_json_the_summary_goes_to_stderr() {
    let redis = shared();
    let key = common::unique_key("emit-json");
    let flags = ["--bits", "1000000", "--json"];
    let runs: [(&[&str], &str, &str); 3] = [
        (&["load", "--emit", "new", "-"], "a\nb\na\n", "a\nb\n"),
        (&["check", "--emit", "absent", "-"], "a\nc\n", "c\n"),
        (&["check", "--emit", "present", "-"], "a\nc\n", "a\n"),
    ];
    let mut summaries = Vec::new();
    for (args, input, want) in runs {
        let args = [&flags[..], args].concat();
        let (code, stdout, stderr) = output(redbloom(redis.url(), &key, &args), input.as_bytes());
        assert_eq!((code, stdout.as_str()), (0, want), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr:?}");
        let json: serde_json::Value = serde_json::from_str(&stderr).unwrap();
        summaries.push(json);
    }
    let fields = |json: &serde_json::Value, names: &[&str]| -> Vec<u64> {
        names
            .iter()
            .map(|name| json[*name].as_u64().unwrap())
            .collect()
    };
    assert_eq!(
        fields(&summaries[0], &["items", "new", "unknown"]),
        [3, 2, 0]
    );
    assert_eq!(
        fields(&summaries[1], &["items", "present", "absent"]),
        [2, 1, 1]
    );
    assert_eq!(
        fields(&summaries[2], &["items", "present", "absent"]),
        [2, 1, 1]
    );
}

/// `--emit` where it means nothing is a usage error: exit status 2, one line.
#[test]
fn emit_elsewhere_is_a_usage_error() {
    let url = "redis://127.0.0.1:1";
    for (args, words) in [
        (
            &["load", "--emit", "absent", "-"][..],
            &["absent", "new"][..],
        ),
        (
            &["check", "--emit", "new", "-"],
            &["new", "absent", "present"],
        ),
        (&["--counting", "unload", "--emit", "new", "-"], &["--emit"]),
        (&["add", "--emit", "new", "x"], &["--emit"]),
        (&["exists", "--emit", "absent", "x"], &["--emit"]),
    ] {
        let args = [&["--bits", "1000", "--retry-for", "0"][..], args].concat();
        assert_fails(redbloom(url, "k", &args), words, None);
    }
}

/// A batch retried after its lost attempt was applied answers "seen" for the items that
/// attempt added: those lines are written anyway (at least once), and counted as unknown.
/// The server is stopped for 3 s with the batch in flight (`--timeout 1`).
#[test]
fn lines_whose_answers_could_not_be_known_are_written() {
    let server = common::server::RedisServer::start().unwrap();
    let args = [
        "--layout",
        "native",
        "--capacity",
        "1e6",
        "--fpr",
        "0.01",
        "--json",
        "--timeout",
        "1",
        "load",
        "--emit",
        "new",
        "-",
    ];
    let mut child = common::cli::spawn(&server.url(), "unknown", &args);
    let mut stdin = child.stdin.take().unwrap();
    let lines = lines_of(&mut child);
    stdin.write_all(b"first\n").unwrap();
    stdin.flush().unwrap();
    assert_eq!(
        lines.recv_timeout(Duration::from_secs(10)).as_deref(),
        Ok("first")
    );
    server.pause();
    stdin.write_all(numbered("n", 0..1_000).as_bytes()).unwrap();
    drop(stdin);
    std::thread::sleep(Duration::from_secs(3));
    server.resume();
    assert_eq!(exit_within(&mut child, Duration::from_secs(30)), 0);
    let written: HashSet<String> = lines.iter().collect();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    let json: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    let (new, unknown) = (
        json["new"].as_u64().unwrap(),
        json["unknown"].as_u64().unwrap(),
    );
    assert!(unknown > 0, "the stall met no applied batch: {json}");
    let want: HashSet<String> = items(&numbered("n", 0..1_000))
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(written, want, "every line written: {json}");
    assert_eq!(1 + written.len() as u64, new + unknown, "{json}");
}

/// A `check` of many batches against a filter past 4 MiB reads the filter once into memory
/// and answers there (SPEC.md §3 `check`; the CLI's `stream` module): the same lines and
/// counts as checks in Redis, one pass over the key (its 1 MiB pieces) for the whole run where
/// checks in Redis read it for every batch; an item added before the command began is found.
#[test]
fn a_large_check_reads_the_filter_once() {
    let server = common::server::RedisServer::start().expect("a private redis-server");
    let url = server.url();
    let key = "check-copy";
    // 12.6 MB: past the library's dense check, 97 ranges of 128 KiB.
    let flags = native_flags("3500000");
    load_lines(&url, key, &flags, &numbered("s", 0..3_000));
    let input: String = (0..3_000).map(|i| format!("s{i}\nt{i}\n")).collect();
    let stats =
        || common::sentinel::command(server.port(), &["INFO", "commandstats"]).expect("INFO");
    let reads = |info: &str| {
        [
            "getrange",
            "get",
            "bitfield_ro",
            "evalsha_ro",
            "eval_ro",
            "evalsha",
            "eval",
        ]
        .map(|command| common::commandstats_calls(info, command))
    };
    let before = reads(&stats());
    let args = [
        &flags[..],
        &["check", "--emit", "absent", "--batch", "1000", "-"],
    ]
    .concat();
    let (code, stdout, stderr) = output(redbloom(&url, key, &args), input.as_bytes());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        numbered("t", 0..3_000),
        "the absent lines, in order"
    );
    assert!(
        stderr.starts_with("6000 items, 3000 present, 3000 absent,"),
        "{stderr}"
    );
    let after = reads(&stats());
    let sent: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    // One pass: the key's pieces of 1 MiB, and no check of a batch in Redis.
    let len = common::sentinel::command(server.port(), &["STRLEN", key]).expect("STRLEN");
    let len: u64 = len.trim_start_matches(':').parse().expect("a length");
    assert!(len > 12_000_000, "{len} bytes");
    let pieces = len.div_ceil(1 << 20);
    assert_eq!(
        sent[0], pieces,
        "GETRANGE calls (one pass over {len} bytes): {sent:?}"
    );
    // (One script may open the filter; a check in Redis would send one per batch at least.)
    let checks: u64 = sent[2..].iter().sum();
    assert!(checks <= 1, "checks sent to Redis: {sent:?}");
}

/// A long `check` answered from its copy of the filter reads the copy again once it is 10 s
/// old: an item added while the check runs is answered absent by the batch right after the
/// add (the copy read before it) and present by a batch sent once the copy is 10 s old.
#[test]
fn a_long_check_reads_its_copy_again() {
    let redis = shared();
    let key = common::unique_key("check-refresh");
    // 12.6 MB: a copy pays for batches of 1,000 (see a_large_check_reads_the_filter_once).
    let flags = native_flags("3500000");
    load_lines(redis.url(), &key, &flags, &numbered("s", 0..3_000));
    let args = [
        &flags[..],
        &["check", "--emit", "absent", "--batch", "1000", "-"],
    ]
    .concat();
    let mut child = common::cli::spawn(redis.url(), &key, &args);
    let mut stdin = child.stdin.take().unwrap();
    let lines = lines_of(&mut child);
    let within = Duration::from_secs(20);
    let expect = |want: String| {
        for want in items(&want) {
            assert_eq!(lines.recv_timeout(within).as_deref(), Ok(want));
        }
    };
    // Two full batches while the input stays open: the copy is read for the first.
    stdin.write_all(numbered("t", 0..2_000).as_bytes()).unwrap();
    stdin.flush().unwrap();
    expect(numbered("t", 0..2_000));
    let copied = Instant::now();
    let args = [&flags[..], &["add", "late"]].concat();
    let (code, _, stderr) = output(redbloom(redis.url(), &key, &args), b"");
    assert_eq!(code, 0, "{stderr}");
    let batch = |first: usize| format!("late\n{}", numbered("t", first..first + 999));
    stdin.write_all(batch(2_000).as_bytes()).unwrap();
    stdin.flush().unwrap();
    expect(batch(2_000));
    // Once the copy is 10 s old (COPY_REFRESH), the next batch reads it again.
    std::thread::sleep(Duration::from_millis(10_300).saturating_sub(copied.elapsed()));
    stdin.write_all(batch(3_000).as_bytes()).unwrap();
    drop(stdin);
    expect(numbered("t", 3_000..3_999));
    assert_eq!(exit_within(&mut child, within), 0);
    assert_eq!(
        lines.recv_timeout(within),
        Err(mpsc::RecvTimeoutError::Disconnected),
        "nothing more: `late` is present for the last batch"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.starts_with("4000 items, 1 present, 3999 absent,"),
        "{stderr}"
    );
}
