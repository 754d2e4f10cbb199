//! `--url redis+sentinel://…` (SPEC.md §3 "Sentinel and lines out", issue 52): the URL and the
//! sentinels' own credential flags are checked before any connection, never quoting a password.

#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{redbloom, run};
use common::sentinel::SentinelGroup;

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
