//! Errors that say what went wrong, and a `--help` that says how to go right:
//! - a connection failure says what it most likely is, fast, without retrying what waiting
//!   cannot mend: TLS to a plain Redis port, plain to a TLS port, a port that is not Redis, a
//!   refused password;
//! - a negative number gets the flag's range, not "unexpected argument";
//! - a bad `$REDIS_URL` is called that, not `--url`;
//! - the help groups the options, shows ranges, the required `--key`, and examples.

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use assert_cmd::Command;
use common::cli::{assert_fails, redbloom};
use common::server::RedisServer;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A TCP server on a free loopback port that is not Redis: it sends `greeting` on accepting (as
/// SSH does), or answers `reply` to whatever it reads first (as HTTP does), then hangs up.
/// Returns its port; the thread ends with the test process.
fn not_redis(greeting: &'static [u8], reply: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.write_all(greeting);
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(reply);
        }
    });
    port
}

/// Runs `cmd`, expecting a one-line failure with `words` within `limit`; returns the line.
fn fails_within(limit: Duration, cmd: Command, words: &[&str]) -> String {
    let started = Instant::now();
    let stderr = assert_fails(cmd, words, None);
    let took = started.elapsed();
    assert!(took < limit, "took {took:?}: {stderr}");
    stderr
}

/// A TLS-only redis-server with a self-signed certificate for 127.0.0.1.
fn tls_server(dir: &tempfile::TempDir) -> RedisServer {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let (cert_file, key_file) = (cert_file.to_str().unwrap(), key_file.to_str().unwrap());
    RedisServer::start_tls(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-cert-file",
        cert_file,
        "--tls-key-file",
        key_file,
        "--tls-ca-cert-file",
        cert_file,
        "--tls-auth-clients",
        "no",
    ])
    .expect("redis-server (built with TLS) on PATH")
}

/// With the default `--retry-for` (30 s): none of these is retried, each names its likely cause.
#[test]
fn a_connection_failure_says_what_it_most_likely_is() {
    let plain = RedisServer::start().expect("redis-server on PATH");
    let info = ["--bits", "64", "--timeout", "1", "info"];
    let fast = Duration::from_secs(4);

    // rediss:// to a plain Redis: the handshake gets no answer; the port answers plain Redis.
    let url = format!("rediss://127.0.0.1:{}", plain.port());
    let stderr = fails_within(
        fast,
        redbloom(&url, "k", &info),
        &["may not speak TLS", "redis://"],
    );
    assert!(
        stderr.contains(&format!("127.0.0.1:{}", plain.port())),
        "{stderr}"
    );

    // --cluster to a server that is not a cluster: said so, and what to use instead.
    fails_within(
        fast,
        common::cli::redbloom_cluster(&plain.url(), "k", &info),
        &["not a Redis Cluster", "--url instead of --cluster"],
    );

    // redis:// to a TLS port.
    let dir = tempfile::tempdir().unwrap();
    let tls = tls_server(&dir);
    let url = format!("redis://127.0.0.1:{}", tls.port());
    fails_within(
        fast,
        redbloom(&url, "k", &info),
        &["speaks TLS", "rediss://"],
    );

    // A port that is not Redis, plain or TLS: an HTTP server, an SSH-like greeter.
    let http = not_redis(
        b"",
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
    );
    let ssh = not_redis(b"SSH-2.0-OpenSSH_9.6\r\n", b"");
    for (port, said) in [(http, "HTTP/1.1 400 Bad Request"), (ssh, "SSH-2.0")] {
        for scheme in ["redis", "rediss"] {
            let url = format!("{scheme}://127.0.0.1:{port}");
            let stderr = fails_within(
                fast,
                redbloom(&url, "k", &info),
                &[
                    &format!("127.0.0.1:{port}"),
                    "did not answer as Redis",
                    "is it a Redis port?",
                ],
            );
            assert!(stderr.contains(said), "{url}: {stderr}");
            assert!(!stderr.contains("Parse error"), "{url}: {stderr}");
        }
    }

    // A refused password is not waited on either.
    let mut conn = redis::Client::open(plain.url().as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-one")
        .query(&mut conn)
        .unwrap();
    let url = format!("redis://:wrong-one@127.0.0.1:{}", plain.port());
    let started = Instant::now();
    assert_fails(
        redbloom(&url, "k", &info),
        &["authentication failed"],
        Some("wrong-one"),
    );
    assert!(started.elapsed() < fast, "{:?}", started.elapsed());
}

#[test]
fn a_negative_number_gets_the_range() {
    let url = "redis://127.0.0.1:1";
    for (args, words) in [
        (
            &["--bits", "-1", "info"][..],
            &[
                "invalid value '-1' for '--bits <N>'",
                "expected 1..=4294967296",
            ][..],
        ),
        (
            &["--capacity", "1000", "--fpr", "-0.1", "info"],
            &["'--fpr <P>'", "between 0 and 1"],
        ),
        (
            &["--capacity", "-5", "--fpr", "0.1", "info"],
            &["'--capacity <N>'", "1 or more"],
        ),
        (
            &["--bits", "64", "--timeout", "-1", "info"],
            &["'--timeout <SECONDS>'", "more than 0 and at most 86400"],
        ),
        (
            &["--bits", "64", "--retry-for", "-2", "info"],
            &["'--retry-for <SECONDS>'", "between 0 and 86400"],
        ),
        (
            &["--bits", "64", "--shards", "-3", "info"],
            &["'--shards <N>'", "expected 1..=1024"],
        ),
        (
            &["--bits", "64", "--shards", "0", "info"],
            &["'--shards <N>'", "expected 1..=1024"],
        ),
        (
            &["--bits", "64", "--wait-replicas", "-1", "add", "x"],
            &["'--wait-replicas <N>'", "expected 0..="],
        ),
        (
            &["--bits", "64", "expire", "-1"],
            &["invalid value '-1'", "SECONDS", "whole number of seconds"],
        ),
        (
            &["--bits", "64", "load", "-", "--batch", "-10"],
            &["'--batch <N>'", "expected 1..=1000000"],
        ),
        (
            &["--bits", "64", "check", "-", "--pipeline", "-1"],
            &["'--pipeline <N>'", "expected 1..=1024"],
        ),
        (
            &[
                "--bits",
                "64",
                "bench",
                "--op",
                "add",
                "--items",
                "-1",
                "--concurrency",
                "1",
            ],
            &["'--items <N>'", "expected 1 or more"],
        ),
    ] {
        let stderr = assert_fails(redbloom(url, "k", args), words, None);
        assert!(
            !stderr.contains("unexpected argument"),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_bad_redis_url_from_the_environment_is_called_redis_url() {
    let mut cmd = Command::cargo_bin("redbloom").unwrap();
    cmd.env("REDIS_URL", "garbage")
        .args(["--key", "k", "--bits", "64", "info"]);
    let stderr = assert_fails(cmd, &["invalid $REDIS_URL"], None);
    assert!(!stderr.contains("--url"), "{stderr}");

    // The flag wins over the environment, and is named when it is the bad one; after the
    // command too.
    let mut cmd = Command::cargo_bin("redbloom").unwrap();
    cmd.env("REDIS_URL", "redis://127.0.0.1:1")
        .args(["--key", "k", "--bits", "64", "info", "--url", "garbage"]);
    let stderr = assert_fails(cmd, &["invalid --url"], None);
    assert!(!stderr.contains("REDIS_URL"), "{stderr}");
}

/// The lines of `text` from the one that starts with `heading` to the next blank line.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|line| !line.starts_with(heading))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .collect()
}

/// The text from the line that starts with `heading` to the next "... options:" heading.
fn section_text(text: &str, heading: &str) -> String {
    text.lines()
        .skip_while(|line| !line.starts_with(heading))
        .skip(1)
        .take_while(|line| !line.ends_with("options:"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn help(args: &[&str]) -> String {
    let out = Command::cargo_bin("redbloom")
        .unwrap()
        .env_remove("REDIS_URL")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_help_groups_options_shows_ranges_and_examples() {
    let top = help(&["--help"]);
    let load = help(&["load", "--help"]);
    for text in [&top, &load] {
        // The required key and size are in the usage line.
        let usage = text.lines().find(|l| l.starts_with("Usage:")).unwrap();
        assert!(usage.contains("--key KEY"), "{usage}");
        assert!(usage.contains("--bits N | --capacity N --fpr P"), "{usage}");
        // The options every command takes, under their own headings.
        for heading in ["Connection options:", "Filter options:", "Output options:"] {
            assert!(text.contains(heading), "{heading} in {text}");
        }
        let connection = section(text, "Connection options:").join("\n");
        assert!(connection.contains("--url"), "{connection}");
        let filter = section(text, "Filter options:").join("\n");
        assert!(filter.contains("--key"), "{filter}");
        assert!(text.contains("Examples:"), "{text}");
    }
    // SPEC.md §3: the three safety switches are named in --help, with every other option and
    // its range.
    for switch in ["--accept-eviction", "--shared-with-go", "--inexact-retries"] {
        assert!(top.contains(switch), "{switch} in {top}");
    }
    let connection = section(&top, "Connection options:").join("\n");
    assert!(connection.contains("--retry-for"), "{connection}");
    assert!(
        connection.contains("more than 0 and at most 86400"),
        "--timeout's range: {connection}"
    );
    let filter = section(&top, "Filter options:").join("\n");
    assert!(filter.contains("1..=1024"), "shards' range: {filter}");
    assert!(filter.contains("1..=4294967296"), "bits' range: {filter}");
    // Examples: a file, standard input, info --json, a cluster with shards.
    for example in [
        "load items.txt",
        "check -",
        "info --json",
        "--cluster redis://",
        "--shards 16",
    ] {
        assert!(top.contains(example), "{example} in {top}");
    }

    // load's own options alone under "Options:" (up to the next heading: --emit's possible
    // values make the help the long one, an empty line between options), with their ranges.
    let own: Vec<&str> = load
        .lines()
        .skip_while(|line| !line.starts_with("Options:"))
        .skip(1)
        .take_while(|line| !line.ends_with("options:"))
        .filter(|line| line.starts_with("  -"))
        .collect();
    assert!(own.len() <= 5, "{own:#?}");
    let own = section_text(&load, "Options:");
    assert!(
        own.contains("--batch") && own.contains("1..=1000000"),
        "{own}"
    );
    assert!(
        own.contains("--pipeline") && own.contains("1..=1024"),
        "{own}"
    );
    assert!(own.contains("[default: 8]"), "{own}");
    assert!(own.contains("--emit"), "{own}");
    assert!(!own.contains("--url") && !own.contains("--key"), "{own}");
    assert!(load.contains("load items.txt"), "{load}");
}

/// Issue 53, point 7: a subcommand's help lists its own options and the few global ones it
/// uses (every option stays in `redbloom --help`, and is taken after the subcommand too).
#[test]
fn a_subcommand_help_lists_its_own_options_and_the_few_it_uses() {
    let top = help(&["--help"]);
    let load = help(&["load", "--help"]);
    // Of 131 lines before; what is left is load's own options (--emit's values described),
    // --key, --url, --cluster, --json and the examples.
    assert!(
        load.lines().count() < 60,
        "{}: {load}",
        load.lines().count()
    );
    for own in [
        "--emit",
        "--batch",
        "--pipeline",
        "--key",
        "--url",
        "--json",
    ] {
        assert!(load.contains(own), "{own} in {load}");
    }
    let hidden = [
        "--tls-ca",
        "--timeout",
        "--retry-for",
        "--sentinel-user",
        "--wait-replicas",
        "--accept-eviction",
        "--inexact-retries",
        "--merge-chunk",
        "--near-cache",
        "--window",
    ];
    for flag in hidden {
        assert!(!load.contains(flag), "{flag} in {load}");
        assert!(top.contains(flag), "{flag} in redbloom --help");
    }
    assert!(
        load.contains("redbloom --help"),
        "where the rest is: {load}"
    );
    // Commands without options of their own are shorter still.
    for command in ["add", "exists", "info", "clear", "expire"] {
        let text = help(&[command, "--help"]);
        assert!(text.lines().count() < 30, "{command}: {text}");
        assert!(!text.contains("--tls-ca"), "{command}: {text}");
    }
    // build never connects: no connection option at all, its size flags instead (its example
    // imports the file it makes elsewhere: the options are what is looked at).
    let build = help(&["build", "--help"]);
    let build = build.split("Example").next().unwrap();
    for flag in [
        "--url",
        "--cluster",
        "--tls-ca",
        "--sentinel",
        "--timeout",
        "--retry-for",
        "--wait-replicas",
        "--read-from-replicas",
        "--accept-eviction",
        "Connection options",
    ] {
        assert!(!build.contains(flag), "{flag} in {build}");
    }
    for flag in ["--out", "--capacity", "--layout", "--shards"] {
        assert!(build.contains(flag), "{flag} in {build}");
    }
    // remove lists --counting, bench --near-cache: the global options they need.
    assert!(help(&["remove", "--help"]).contains("--counting"));
    assert!(help(&["bench", "--help"]).contains("--near-cache"));
}

/// Global options, listed or not in a subcommand's help, are taken after it (SPEC.md §3).
#[test]
fn global_options_are_taken_after_the_subcommand() {
    let redis = RedisServer::start().expect("redis-server on PATH");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    std::fs::write(&file, "a\nb\n").unwrap();
    let file = file.to_str().unwrap();
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("redbloom")
            .unwrap()
            .env_remove("REDIS_URL")
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let url = redis.url();
    let loaded = run(&[
        "load", "--url", &url, "--key", "after", "--bits", "1024", "--json", file,
    ]);
    assert!(loaded.contains("\"items\":2"), "{loaded}");
    // Options hidden from the subcommand's help, after it.
    let checked = run(&[
        "check",
        file,
        "--url",
        &url,
        "--key",
        "after",
        "--timeout",
        "3",
        "--retry-for",
        "1",
        "--accept-eviction",
        "--inexact-retries",
        "--json",
    ]);
    assert!(checked.contains("\"present\":2"), "{checked}");
    let added = run(&[
        "add",
        "x",
        "--url",
        &url,
        "--key",
        "sharded",
        "--layout",
        "native",
        "--shards",
        "2",
        "--capacity",
        "100",
        "--fpr",
        "0.01",
        "--json",
    ]);
    assert!(added.contains("\"new\":1"), "{added}");
}
