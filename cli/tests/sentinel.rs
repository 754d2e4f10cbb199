//! `--url redis+sentinel://…` (SPEC.md §3 "Sentinel and lines out", issue 52): a load of 1M
//! items through the CLI, paced over at least 60 s, with `SENTINEL FAILOVER` twice and the
//! master killed once (started again once the failover is done, so that it rejoins as a
//! replica), finishes with exit 0 and every item found, with `--wait-replicas 2` (and a
//! `--retry-for` that outlasts the old master's return: until then two replicas cannot
//! confirm). The URL and the sentinels' own credential flags are checked before any
//! connection, never quoting a password.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::sentinel::SentinelGroup;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ITEMS: usize = 1_000_000;

#[test]
fn a_paced_load_survives_two_failovers_and_a_killed_master() {
    let mut group = SentinelGroup::start().expect("a Sentinel group");
    let url = group.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("items.txt");
    let lines: String = (0..ITEMS).map(|i| format!("url-{i}\n")).collect();
    std::fs::write(&file, &lines).unwrap();

    let mut load = Command::new(assert_cmd::cargo::cargo_bin("redbloom"))
        .env_remove("REDIS_URL")
        .args(["--url", &url, "--key", "crawl", "--capacity", "1000000"])
        // --retry-for: above a killed master's return as a replica (15-20 s here) plus the
        // batches' `WAIT`s in flight, which take turns on the connection (5 s each, --timeout).
        .args(["--fpr", "0.01", "--wait-replicas", "2", "--retry-for", "90"])
        .args(["--json", "load", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = load.stdin.take().unwrap();
    let started = Instant::now();
    // 100 chunks of 10,000 lines, one every 0.65 s: 65 s of input.
    let writer = std::thread::spawn(move || {
        for (n, chunk) in lines.as_bytes().chunks(lines.len() / 100 + 1).enumerate() {
            let at = Duration::from_millis(650 * n as u64);
            std::thread::sleep(at.saturating_sub(started.elapsed()));
            if stdin.write_all(chunk).is_err() {
                return;
            }
        }
    });
    let mut faults = Vec::new();
    let at = |secs: u64| {
        std::thread::sleep(Duration::from_secs(secs).saturating_sub(started.elapsed()));
    };
    at(10);
    group.failover().expect("the first failover");
    faults.push(format!(
        "failover done at {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    at(25);
    group.failover().expect("the second failover");
    faults.push(format!(
        "failover done at {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    at(40);
    let killed = group.kill_master().expect("a master killed and replaced");
    faults.push(format!(
        "new master at {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    group
        .restart(killed)
        .expect("the old master back as a replica");
    faults.push(format!(
        "old master rejoined at {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    writer.join().unwrap();
    let out = load.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        started.elapsed() >= Duration::from_secs(60),
        "paced to last a minute"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{faults:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(summary["items"], ITEMS as u64, "{summary}");

    let (code, check, stderr) = run(redbloom(
        &url,
        "crawl",
        &["--json", "check", &file.to_string_lossy()],
    ));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        check["present"], ITEMS as u64,
        "every item found after {faults:?}: {check}"
    );
    eprintln!("load: {summary}; check: {check}; {faults:?}");
}

/// Commands through the sentinels reach the master before and after `SENTINEL FAILOVER` and a
/// killed master: each process asks the sentinels which node it is.
#[test]
fn commands_reach_the_master_the_sentinels_name() {
    let mut group = SentinelGroup::start().expect("a Sentinel group");
    let url = group.url();
    let size = ["--layout", "native", "--capacity", "10000", "--fpr", "0.01"];
    let add = |item: &str| {
        let args = [&size[..], &["--wait-replicas", "2", "--json", "add", item]].concat();
        run(redbloom(&url, "cli-sentinel", &args))
    };
    let (code, out, err) = add("a");
    assert_eq!(
        (code, out["new"].clone()),
        (0, serde_json::json!(1)),
        "{err}"
    );
    group.failover().expect("a failover");
    let (code, out, err) = add("b");
    assert_eq!(
        (code, out["new"].clone()),
        (0, serde_json::json!(1)),
        "{err}"
    );
    let killed = group.kill_master().expect("a master killed and replaced");
    group
        .restart(killed)
        .expect("the old master back as a replica");
    let mut check = redbloom(&url, "cli-sentinel", &["--json", "check", "-"]);
    check.write_stdin("a\nb\nc\n");
    let (code, out, err) = run(check);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        (out["present"].clone(), out["absent"].clone()),
        (2.into(), 1.into()),
        "{out}"
    );

    // --read-from-replicas: the reads go to a replica the sentinels list, not to the master.
    let before = reads(&group);
    let mut check = redbloom(
        &url,
        "cli-sentinel",
        &["--read-from-replicas", "--json", "check", "-"],
    );
    check.write_stdin("a\nb\nc\n");
    let (code, out, err) = run(check);
    assert_eq!((code, &out["present"]), (0, &serde_json::json!(2)), "{err}");
    let after = reads(&group);
    let master = group.master().expect("a master");
    let served: Vec<u64> = (0..group.nodes.len())
        .map(|node| after[node] - before[node])
        .collect();
    assert_eq!(served[master], 0, "the master served reads: {served:?}");
    assert!(
        served.iter().sum::<u64>() > 0,
        "no replica served: {served:?}"
    );
    // A write with the flag still goes to the master.
    let args = [&size[..], &["--read-from-replicas", "--json", "add", "d"]].concat();
    let (code, out, err) = run(redbloom(&url, "cli-sentinel", &args));
    assert_eq!((code, &out["new"]), (0, &serde_json::json!(1)), "{err}");
}

/// Per node, the calls of the commands a filter's reads send (what the replication link,
/// the sentinels and the harness send left out).
fn reads(group: &SentinelGroup) -> Vec<u64> {
    const OTHERS: [&str; 14] = [
        "ping",
        "replconf",
        "info",
        "role",
        "client",
        "hello",
        "subscribe",
        "publish",
        "config",
        "command",
        "select",
        "psync",
        "sync",
        "auth",
    ];
    group
        .nodes
        .iter()
        .map(|node| {
            let stats = common::sentinel::command(node.port(), &["INFO", "commandstats"])
                .expect("INFO commandstats");
            stats
                .lines()
                .filter_map(|line| {
                    let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                    let calls = rest.strip_prefix("calls=")?.split(',').next()?;
                    (!OTHERS.contains(&name.split('|').next()?))
                        .then(|| calls.parse::<u64>().ok())?
                })
                .sum()
        })
        .collect()
}

#[test]
fn sentinel_urls_and_flags_are_checked_before_connecting() {
    let bad = redbloom(
        "redis+sentinel://u:hunter2@127.0.0.1:1",
        "k",
        &["--capacity", "10", "--fpr", "0.01", "exists", "x"],
    );
    let err = common::cli::assert_fails(bad, &["invalid --url", "MASTER"], Some("hunter2"));
    assert_eq!(err.lines().count(), 1, "{err}");
    let flags = redbloom(
        "redis://127.0.0.1:1",
        "k",
        &[
            "--sentinel-user",
            "s",
            "--capacity",
            "10",
            "--fpr",
            "0.01",
            "exists",
            "x",
        ],
    );
    common::cli::assert_fails(flags, &["--sentinel-user", "redis+sentinel://"], None);
}
