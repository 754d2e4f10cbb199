//! The blacklist example blocks and unblocks through real HTTP: its built binary runs with
//! `--serve 127.0.0.1:PORT` against the test's Redis, and requests go over TCP.

mod common;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The example binary `cargo test` built beside this test's (`target/<profile>/examples/`).
fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile = deps.parent().and_then(|d| d.parent()).unwrap();
    let path = profile.join("examples").join(name);
    assert!(
        path.exists(),
        "{} was not built: run the tests with `cargo test`, which builds the examples \
         (or `cargo build --features http --example {name}` first)",
        path.display()
    );
    path
}

/// The running service, killed (and reaped) when dropped, also when the test panics.
struct Service {
    child: Child,
    port: u16,
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Service {
    /// Starts the example on a free loopback port, with `args` after `--serve ADDR`, and waits
    /// until the port answers. A port found free can be taken before the example binds it:
    /// then it exits, and another port is tried.
    fn start(redis_url: &str, args: &[&str]) -> Service {
        let mut failures = Vec::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|listener| listener.local_addr())
                .unwrap()
                .port();
            let child = Command::new(example("blacklist"))
                .args(["--serve", &format!("127.0.0.1:{port}")])
                .args(args)
                .env("REDIS_URL", redis_url)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the example starts");
            let mut service = Service { child, port };
            match service.wait_until_listening(Duration::from_secs(30)) {
                Ok(()) => return service,
                Err(why) => failures.push(why),
            }
        }
        panic!("the example did not start listening: {failures:?}");
    }

    /// Waits until a TCP connection to the port succeeds; fails when the example exits first
    /// (with what it wrote to stderr) or after `timeout`.
    fn wait_until_listening(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut stderr = String::new();
                if let Some(mut pipe) = self.child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return Err(format!("exited with {status}: {}", stderr.trim()));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "port {} did not answer within {timeout:?}",
                    self.port
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `METHOD PATH HTTP/1.1` (no body, `Connection: close`) and returns the status code
    /// and the body parsed as JSON.
    fn request(&self, method: &str, path: &str) -> (u16, Value) {
        let (status, body) = self.request_text(method, path);
        let json = serde_json::from_str(&body)
            .unwrap_or_else(|err| panic!("{method} {path}: body {body:?} is not JSON: {err}"));
        (status, json)
    }

    /// Sends `METHOD PATH HTTP/1.1` and returns the status code and the body as text.
    fn request_text(&self, method: &str, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let response = String::from_utf8(response).expect("a UTF-8 response");
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{method} {path}: no end of headers in {response:?}"));
        let status = head
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: no status line in {head:?}"));
        (status, body.to_owned())
    }

    /// A request that must succeed (200) and answer about `item`; returns the body.
    fn ok(&self, method: &str, path: &str, item: &str) -> Value {
        let (status, body) = self.request(method, path);
        assert_eq!(status, 200, "{method} {path}: {body}");
        assert_eq!(body["item"], item, "{method} {path}: {body}");
        body
    }
}

#[tokio::test]
async fn blacklist_blocks_and_unblocks_over_http() {
    let redis = common::redis().await;
    // A key of its own: a service keeps the list it finds (other instances may share it).
    let key = common::unique_key("blacklist-http");
    let service = Service::start(redis.url(), &["--key", &key]);

    // Blocking twice counts once.
    let first = service.ok("POST", "/block/mallory", "mallory");
    assert_eq!(first["blocked"], true, "{first}");
    assert_eq!(first["new"], true, "{first}");
    let second = service.ok("POST", "/block/mallory", "mallory");
    assert_eq!(second["blocked"], true, "{second}");
    assert_eq!(second["new"], false, "blocking again is not new: {second}");
    let check = service.ok("GET", "/check/mallory", "mallory");
    assert_eq!(check["blocked"], true, "{check}");

    // Another blocked item, to see that unblocks leave it alone.
    let eve = service.ok("POST", "/block/eve", "eve");
    assert_eq!(eve["new"], true, "{eve}");

    // One unblock is enough.
    let unblock = service.ok("DELETE", "/block/mallory", "mallory");
    assert_eq!(unblock["blocked"], false, "{unblock}");
    assert_eq!(unblock["removed"], true, "{unblock}");
    let check = service.ok("GET", "/check/mallory", "mallory");
    assert_eq!(
        check["blocked"], false,
        "one unblock after two blocks: {check}"
    );

    // Unblocking a never-blocked item removes nothing, and other blocks stay.
    let never = service.ok("DELETE", "/block/alice", "alice");
    assert_eq!(never["blocked"], false, "{never}");
    assert_eq!(never["removed"], false, "{never}");
    let check = service.ok("GET", "/check/alice", "alice");
    assert_eq!(check["blocked"], false, "{check}");
    let check = service.ok("GET", "/check/eve", "eve");
    assert_eq!(check["blocked"], true, "{check}");

    // Unblocking again removes nothing either.
    let again = service.ok("DELETE", "/block/mallory", "mallory");
    assert_eq!(again["removed"], false, "{again}");

    drop(service); // kills the example before its Redis goes away
}

/// Built with the crate's `metrics` feature, the example serves the library's metrics at
/// `GET /metrics` in Prometheus's text format: its calls counted by kind, op and outcome.
#[cfg(feature = "metrics")]
#[tokio::test]
async fn blacklist_serves_its_metrics() {
    let redis = common::redis().await;
    let key = common::unique_key("blacklist-metrics");
    let service = Service::start(redis.url(), &["--key", &key]);
    service.ok("POST", "/block/mallory", "mallory");
    service.ok("POST", "/block/mallory", "mallory");
    service.ok("GET", "/check/mallory", "mallory");
    let (status, text) = service.request_text("GET", "/metrics");
    assert_eq!(status, 200, "{text}");
    let line = |op: &str| {
        text.lines()
            .find(|line| {
                line.starts_with("redbloom_calls_total{")
                    && line.contains("kind=\"counting\"")
                    && line.contains(&format!("op=\"{op}\""))
                    && line.contains("outcome=\"ok\"")
            })
            .unwrap_or_else(|| panic!("no {op} counter in {text}"))
            .to_owned()
    };
    assert!(line("add_if_absent").ends_with(" 2"), "{text}");
    assert!(line("exists").ends_with(" 1"), "{text}");
    assert!(
        text.contains("redbloom_call_duration_seconds"),
        "latencies: {text}"
    );
    drop(service);
}

/// How long after a change is acknowledged its invalidation may take to reach the other
/// service's copy (a loopback message, a busy test machine): allowed on top of the interval.
const DELIVERY: Duration = Duration::from_millis(300);

/// Polls `GET /check/{item}` on `service` until it answers `blocked`; every answer sent more
/// than `refresh` (plus [`DELIVERY`]) after `acknowledged` must. Returns how long it took.
fn seen(
    service: &Service,
    item: &str,
    blocked: bool,
    acknowledged: Instant,
    refresh: Duration,
) -> Duration {
    loop {
        let asked = Instant::now();
        let answer = service.ok("GET", &format!("/check/{item}"), item);
        if answer["blocked"] == blocked {
            return asked.duration_since(acknowledged);
        }
        let late = asked.duration_since(acknowledged);
        assert!(
            late < refresh + DELIVERY,
            "{item}: blocked={blocked} not seen {late:?} after it was acknowledged (refresh \
             interval {refresh:?}): {answer}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Two services share one blacklist, each answering checks from its near cache: a block by one
/// and an unblock by the other reach the other's checks within the refresh interval, and
/// repeated checks are answered from the copy (its hits grow, Redis answers none of them).
#[tokio::test]
async fn two_services_with_near_caches_share_one_blacklist() {
    let redis = common::redis().await;
    let key = common::unique_key("blacklist-near");
    let refresh = Duration::from_secs(1);
    let args = ["--key", &key, "--near-cache", "1s"];
    let (a, b) = (
        Service::start(redis.url(), &args),
        Service::start(redis.url(), &args),
    );
    for service in [&a, &b] {
        // Each reads its copy.
        assert_eq!(service.ok("GET", "/check/trudy", "trudy")["blocked"], false);
    }

    let block = a.ok("POST", "/block/trudy", "trudy");
    let acknowledged = Instant::now();
    assert_eq!(block["new"], true, "{block}");
    let lag = seen(&b, "trudy", true, acknowledged, refresh);
    println!("a block by one service seen by the other after {lag:?}");

    let unblock = b.ok("DELETE", "/block/trudy", "trudy");
    let acknowledged = Instant::now();
    assert_eq!(unblock["removed"], true, "{unblock}");
    let lag = seen(&a, "trudy", false, acknowledged, refresh);
    println!("an unblock by one service seen by the other after {lag:?}");
    // And by the service that made it, within the interval too.
    seen(&b, "trudy", false, acknowledged, refresh);

    // Checks of an unchanged list come from the copy: hits grow by one each, misses not at all.
    let stats = |service: &Service| {
        let (status, body) = service.request("GET", "/stats");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["key"], key.as_str(), "{body}");
        body["near_cache"].clone()
    };
    let before = stats(&a);
    for i in 0..100 {
        let item = format!("user{i}");
        assert_eq!(
            a.ok("GET", &format!("/check/{item}"), &item)["blocked"],
            false
        );
    }
    let after = stats(&a);
    assert_eq!(
        after["tracking"], true,
        "invalidations come from Redis: {after}"
    );
    assert_eq!(after["stale"], false, "{after}");
    let count = |stats: &Value, field: &str| stats[field].as_u64().unwrap();
    assert_eq!(
        count(&after, "hits") - count(&before, "hits"),
        100,
        "{before} -> {after}"
    );
    assert_eq!(
        count(&after, "misses"),
        count(&before, "misses"),
        "{before} -> {after}"
    );
    assert!(
        count(&after, "invalidations") >= 2,
        "the block and the unblock: {after}"
    );

    drop((a, b)); // kills the services before their Redis goes away
}
