//! A server that may evict the filter's keys: a write exits 2 with one line naming the policy,
//! the server-side fix and `--accept-eviction`; with that switch it writes (docs/guarantees.md
//! "A server that may evict the filter is refused").

// The integration-test harness of the library package, shared: a real Redis for every test.
#[path = "../../tests/common/mod.rs"]
mod common;

use common::cli::{assert_fails, redbloom, run};
use common::server::RedisServer;

#[tokio::test]
async fn writes_to_an_evicting_server_exit_2_unless_accepted() {
    // This test configures its server: a server of its own, even with REDIS_URL set.
    let server = RedisServer::start_evicting("volatile-lru").expect("redis-server on PATH");
    let url = server.url();
    let size = ["--capacity", "1000", "--fpr", "0.01", "--json"];
    let with = |key: &str, args: &[&str]| {
        let all: Vec<&str> = size.iter().chain(args).copied().collect();
        redbloom(&url, key, &all)
    };
    // volatile-lru with no TTL on a plain filter: it writes; expire would give it one.
    let (code, out, err) = run(with("plain", &["add", "x"]));
    assert_eq!((code, out["new"].as_u64()), (0, Some(1)), "{err}");
    assert_fails(
        with("plain", &["expire", "60"]),
        &["volatile-lru", "noeviction", "--accept-eviction"],
        None,
    );
    // A window filter's generations carry a TTL.
    let window = ["--window", "1h", "add", "x"];
    assert_fails(
        with("window", &window),
        &["volatile-lru", "noeviction", "--accept-eviction"],
        None,
    );
    let accepted = ["--window", "1h", "--accept-eviction", "add", "x"];
    let (code, out, err) = run(with("window", &accepted));
    assert_eq!((code, out["new"].as_u64()), (0, Some(1)), "{err}");
    // Reads need no switch.
    let (code, out, err) = run(redbloom(&url, "window", &["--json", "exists", "x"]));
    assert_eq!((code, out["present"].as_u64()), (0, Some(1)), "{err}");
}
