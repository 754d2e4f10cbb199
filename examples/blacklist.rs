//! A blacklist HTTP service (axum) backed by a counting Bloom filter in Redis
//! ([`CountingBloom`]): items are blocked, looked up, and unblocked.
//!
//! ```text
//! POST   /block/{item}  ->  {"item":"...","blocked":true,"new":true|false}
//! DELETE /block/{item}  ->  {"item":"...","blocked":false,"removed":true|false}
//! GET    /check/{item}  ->  {"item":"...","blocked":true|false}
//! GET    /stats         ->  {"key":"...","near_cache":null|{"hits":..,"misses":..,...}}
//! GET    /metrics       ->  redbloom_calls_total{kind="counting",op="add_if_absent",...} ...
//!
//! cargo run --features http --example blacklist           # calls itself in-process, checks, exits
//! cargo run --features http --example blacklist -- --serve 127.0.0.1:3000
//! cargo run --features http --example blacklist -- --serve 127.0.0.1:3001 --near-cache 1s
//! curl -X POST   127.0.0.1:3000/block/mallory   # {"item":"mallory","blocked":true,"new":true}
//! curl -X POST   127.0.0.1:3000/block/mallory   # ...,"new":false}: blocking is idempotent
//! curl           127.0.0.1:3000/check/mallory   # {"item":"mallory","blocked":true}
//! curl -X DELETE 127.0.0.1:3000/block/mallory   # {"item":"mallory","blocked":false,"removed":true}
//! curl           127.0.0.1:3000/check/mallory   # {"item":"mallory","blocked":false}
//! curl -X DELETE 127.0.0.1:3000/block/alice     # ...,"removed":false}: never blocked, no change
//! ```
//!
//! Every instance of the service pointed at the same key (`--key KEY`, default
//! `redbloom:example:blocked`) shares the blacklist. Without `--serve` the example sends the
//! requests above (and a few more) straight to its router, no port opened, and asserts the
//! answers; then it starts three instances in the process, each with its own connection and
//! near cache, and checks that a block and an unblock through one reach the others' checks
//! within the refresh interval. `--serve ADDR` listens until Ctrl-C (and, unlike the
//! self-test, neither clears the list when it starts nor when it stops: other instances may
//! share it).
//!
//! # The near cache (`--near-cache DURATION`)
//!
//! With `--near-cache 1s` (or `500ms`, `2m`...), the instance keeps a copy of the filter's
//! counters in its memory ([`NearCache`]) and answers `GET /check` from it, with no round trip
//! to Redis. The copy learns of changes from Redis itself (`CLIENT TRACKING`, on a connection
//! of its own): a block or unblock by any instance reaches every other instance's checks
//! within DURATION, and an idle blacklist costs Redis nothing. POST and DELETE still go to
//! Redis; this instance's own blocks are in its answers at once, its own unblocks (like
//! everyone else's) within DURATION. While Redis is down, checks keep being answered from the
//! copy, and `GET /stats` says `"stale": true`. The copy takes the filter's bytes (1.4 MiB here).
//!
//! # What is guaranteed
//!
//! - **Blocking is idempotent.** POST uses [`add_if_absent`](CountingBloom::add_if_absent)
//!   (like RedisBloom's `CF.ADDNX`): in one atomic step it adds the item only if it tests
//!   absent, so an item is counted once however often (and by however many instances at once)
//!   it is blocked, and one DELETE unblocks it: block twice, unblock once, and it is unblocked.
//!   `"new": false` means it tested present already: blocked before, or (rarely) a false
//!   positive. Of concurrent POSTs for one item, exactly one answers `"new": true`.
//! - **`"blocked": false` is certain**: the item is not blocked. `"blocked": true` may, rarely,
//!   be a false positive (at most about the configured rate while the list holds no more than
//!   `expected_items`).
//! - **A blocked item stays blocked until it is itself unblocked**, whatever other items are
//!   blocked or unblocked meanwhile, provided the caveat below does not strike.
//!
//! # Unblocking, and the caveat
//!
//! DELETE calls [`remove`](CountingBloom::remove), which in one atomic step does nothing unless
//! the item tests present (all its counters above zero), and otherwise decrements its counters.
//! So the service removes only what `exists` would say is present, and it needs no separate
//! `exists` call first (one would add a round trip and a gap in which another instance could
//! unblock the item). A DELETE of an item that tests absent (never blocked, or unblocked
//! already) changes nothing and answers `"removed": false`.
//!
//! Note what makes that safe: the item *tested absent*, not that it was never blocked. The
//! service cannot tell a blocked item from a false positive. A DELETE of a never-blocked item
//! that happens to test present is carried out (`"removed": true`), and its decrements take
//! counts that belong to other, blocked items, which may then test absent: unblocked without
//! anyone asking. (A POST of such an item answers `"new": false` and adds nothing.) The same
//! goes for a DELETE retried after a lost reply, if the item tests present once more. Hence:
//!
//! - keep the false-positive rate low (1e-6 here) and `expected_items` above the real size of
//!   the list (past it, the rate climbs);
//! - where a wrongly lifted block is unacceptable, keep the authoritative list elsewhere (a
//!   Redis set, a database) and send DELETE only for items it holds; the filter then answers
//!   the fast lookups.
//!
//! # Metrics (`--features metrics`)
//!
//! Built with the examples' `metrics` feature, which turns on the library's (`cargo run
//! --features metrics --example blacklist -- --serve ...`), the service installs a Prometheus
//! recorder (`metrics-exporter-prometheus`) and serves every `redbloom_…` metric
//! (docs/operations.md "Metrics") at `GET /metrics` in Prometheus's text format: calls by kind, op and outcome with their
//! latencies, retries, fallbacks, and the near cache's hits and misses. Without the feature,
//! `/metrics` answers 404 and the library records nothing.
//!
//! ```text
//! blacklist [--serve ADDR] [--near-cache DURATION] [--key KEY]
//! ```

mod support;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redbloom::redis;
use redbloom::redis::aio::MultiplexedConnection;
use redbloom::{CountingBloom, NearCache};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tower::ServiceExt; // for `oneshot`

/// The filter's key in Redis, unless `--key` says otherwise.
const KEY: &str = "redbloom:example:blocked";

/// The self-test's refresh interval for its instances with a near cache, unless
/// `--near-cache` says otherwise.
const SELF_TEST_REFRESH: Duration = Duration::from_millis(500);

/// The shared state: cloning a filter is cheap (one reference count; the multiplexed
/// connection, and the near cache's copy, are shared).
type Blacklist = CountingBloom<MultiplexedConnection>;

fn app(blacklist: Blacklist) -> Router {
    let router = Router::new()
        .route("/check/{item}", get(check))
        .route("/block/{item}", post(block).delete(unblock))
        .route("/stats", get(stats));
    metrics::route(router).with_state(blacklist)
}

/// `GET /metrics` (with the crate's `metrics` feature): the library's metrics, through a
/// Prometheus recorder installed once for the process.
#[cfg(feature = "metrics")]
mod metrics {
    use super::Blacklist;
    use axum::routing::get;
    use axum::Router;
    use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
    use std::sync::OnceLock;

    fn handle() -> &'static PrometheusHandle {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        HANDLE.get_or_init(|| {
            PrometheusBuilder::new()
                .install_recorder()
                .expect("no other metrics recorder is installed")
        })
    }

    pub(super) fn route(router: Router<Blacklist>) -> Router<Blacklist> {
        let handle = handle();
        router.route("/metrics", get(move || async move { handle.render() }))
    }
}

/// Without the `metrics` feature: no `/metrics`.
#[cfg(not(feature = "metrics"))]
mod metrics {
    pub(super) fn route(router: axum::Router<super::Blacklist>) -> axum::Router<super::Blacklist> {
        router
    }
}

/// One instance's blacklist: its own connection to `url` and, with `near_cache`, a copy in
/// its memory that answers checks, told of changes by Redis's invalidation messages.
async fn blacklist(
    url: &str,
    key: &str,
    near_cache: Option<Duration>,
) -> Result<Blacklist, Box<dyn std::error::Error>> {
    let conn = support::connect(url).await?;
    // 100,000 entries at 1e-6: about 2.9 million 4-bit counters, 1.4 MiB in Redis. A low rate
    // matters doubly here: a false positive that is unblocked lifts other blocks (module docs).
    let mut builder = CountingBloom::builder(key)
        .expected_items(100_000)
        .false_positive_rate(1e-6);
    if let Some(refresh) = near_cache {
        // The tracking connection is opened with the same URL (address, user, password, TLS).
        let client = redis::Client::open(url)?;
        builder = builder.near_cache(NearCache::new(refresh).tracking(client));
    }
    Ok(builder.build(conn)?)
}

/// GET /check/{item}: whether the item is blocked (`false` is certain).
async fn check(
    State(blacklist): State<Blacklist>,
    Path(item): Path<String>,
) -> Result<Json<Value>, AppError> {
    let blocked = blacklist.exists(&item).await?;
    Ok(Json(json!({ "item": item, "blocked": blocked })))
}

/// POST /block/{item}: blocks the item, once however often it is called; "new" is false when
/// it tested present already.
async fn block(
    State(blacklist): State<Blacklist>,
    Path(item): Path<String>,
) -> Result<Json<Value>, AppError> {
    let new = blacklist.add_if_absent(&item).await?;
    Ok(Json(json!({ "item": item, "blocked": true, "new": new })))
}

/// DELETE /block/{item}: unblocks the item if it tests present ("removed": true), else changes
/// nothing. A false positive tests present too: see the module docs.
async fn unblock(
    State(blacklist): State<Blacklist>,
    Path(item): Path<String>,
) -> Result<Json<Value>, AppError> {
    // `remove` tests presence and decrements in one atomic step: no separate `exists` first.
    let removed = blacklist.remove(&item).await?;
    Ok(Json(
        json!({ "item": item, "blocked": false, "removed": removed }),
    ))
}

/// GET /stats: what this instance's near cache has done (`null` without one).
async fn stats(State(blacklist): State<Blacklist>) -> Json<Value> {
    let near = blacklist.near_cache_stats().map(|stats| {
        json!({
            "hits": stats.hits,
            "stale_hits": stats.stale_hits,
            "misses": stats.misses,
            "refreshes": stats.refreshes,
            "failed_refreshes": stats.failed_refreshes,
            "invalidations": stats.invalidations,
            "age_seconds": stats.age.map(|age| age.as_secs_f64()),
            "stale": stats.stale,
            "tracking": stats.tracking,
            "bytes": stats.bytes,
        })
    });
    Json(json!({ "key": blacklist.key(), "near_cache": near }))
}

/// A Redis failure, answered with 503 and the error as JSON.
struct AppError(redbloom::Error);

impl From<redbloom::Error> for AppError {
    fn from(err: redbloom::Error) -> Self {
        AppError(err)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = Json(json!({ "error": self.0.to_string() }));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

/// Sends one request straight to the router and returns its status and JSON body.
async fn send(
    app: &Router,
    method: Method,
    uri: &str,
) -> Result<(StatusCode, Value), Box<dyn std::error::Error>> {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())?;
    let response = app.clone().oneshot(request).await?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await?;
    Ok((status, serde_json::from_slice(&body)?))
}

/// Sends one request straight to the router, prints it and its answer, and returns the JSON
/// body (asserting a 200).
async fn call(
    app: &Router,
    method: Method,
    uri: &str,
) -> Result<Value, Box<dyn std::error::Error>> {
    let (status, body) = send(app, method.clone(), uri).await?;
    println!(
        "{:<6} {uri:<26} -> {} {body}",
        method.as_str(),
        status.as_u16(),
    );
    assert_eq!(status, StatusCode::OK, "{} {uri}", method.as_str());
    Ok(body)
}

/// The filter's counters as Redis holds them (one string: the filter has one shard).
async fn counters(conn: &mut MultiplexedConnection, key: &str) -> redis::RedisResult<Vec<u8>> {
    let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(key).query_async(conn).await?;
    Ok(bytes.unwrap_or_default())
}

/// How long after a change is acknowledged its invalidation may take to reach an instance
/// (a loopback message, and a busy machine's scheduling): the staleness allowed on top of the
/// refresh interval.
const DELIVERY: Duration = Duration::from_millis(200);

/// Several instances share one blacklist, each answering checks from its own copy: a block
/// and an unblock through one instance reach the others' checks within the refresh interval.
/// Every check sent more than `refresh` (plus [`DELIVERY`]) after the change was acknowledged
/// must see it; those sent earlier may still see the copy from before.
async fn shared_instances(
    url: &str,
    key: &str,
    refresh: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("three instances, each with a near cache refreshed within {refresh:?}:");
    let mut instances = Vec::new();
    for _ in 0..3 {
        instances.push(app(blacklist(url, key, Some(refresh)).await?));
    }
    let (writer, readers) = instances.split_first().expect("three instances");
    for reader in readers {
        // Each reads its copy now: its later checks are answered from it.
        let answer = call(reader, Method::GET, "/check/trudy").await?;
        assert_eq!(answer["blocked"], json!(false), "{answer}");
    }
    for (method, blocked) in [(Method::POST, true), (Method::DELETE, false)] {
        call(writer, method.clone(), "/block/trudy").await?;
        let acknowledged = Instant::now();
        for (i, reader) in readers.iter().enumerate() {
            let mut stale = 0;
            let seen = loop {
                let asked = Instant::now();
                let (status, answer) = send(reader, Method::GET, "/check/trudy").await?;
                assert_eq!(status, StatusCode::OK, "{answer}");
                if answer["blocked"] == json!(blocked) {
                    break asked.duration_since(acknowledged);
                }
                stale += 1;
                let late = asked.duration_since(acknowledged);
                assert!(
                    late < refresh + DELIVERY,
                    "instance {}: {} /block/trudy by instance 0 not seen {late:?} after it was                      acknowledged (refresh interval {refresh:?})",
                    i + 1,
                    method.as_str()
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            println!(
                "  {} /block/trudy by instance 0: seen by instance {} after {seen:.0?} \
                 ({stale} stale answer(s) from its copy before)",
                method.as_str(),
                i + 1
            );
        }
    }
    for (i, reader) in readers.iter().enumerate() {
        let stats = call(reader, Method::GET, "/stats").await?;
        let near = &stats["near_cache"];
        assert!(
            near["hits"].as_u64() > Some(0),
            "instance {}: {stats}",
            i + 1
        );
        assert!(
            near["refreshes"].as_u64() >= Some(1),
            "instance {}: {stats}",
            i + 1
        );
    }
    println!("ok: a block and an unblock by one instance reached the others within {refresh:?}");
    Ok(())
}

/// The command line: `[--serve ADDR] [--near-cache DURATION] [--key KEY]`.
struct Args {
    serve: Option<String>,
    near_cache: Option<Duration>,
    key: String,
}

const USAGE: &str = "usage: blacklist [--serve ADDR] [--near-cache DURATION] [--key KEY]";

fn parse_args() -> Result<Args, support::Fatal> {
    support::answer_help(USAGE);
    let mut args = Args {
        serve: None,
        near_cache: None,
        key: KEY.to_owned(),
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let Some(value) = words.next() else {
            return Err(support::Fatal(format!(
                "{flag}: a value is missing; {USAGE}"
            )));
        };
        match flag.as_str() {
            "--serve" => args.serve = Some(value),
            "--near-cache" => args.near_cache = Some(duration(&value)?),
            "--key" => args.key = value,
            _ => return Err(support::Fatal(format!("unknown {flag:?}; {USAGE}"))),
        }
    }
    Ok(args)
}

/// A duration: seconds, or a number with a unit (`500ms`, `1s`, `2m`, `1h`), above zero.
fn duration(text: &str) -> Result<Duration, support::Fatal> {
    let bad = || {
        support::Fatal(format!(
            "--near-cache {text:?}: expected a duration such as 500ms, 1s or 2m"
        ))
    };
    let at = text
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(at);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let secs = number.parse::<f64>().map_err(|_| bad())? * scale;
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Args {
        serve: serve_addr,
        near_cache,
        key,
    } = parse_args()?;

    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let mut conn = support::connect(&url).await?;

    match serve_addr {
        // Without --serve: send requests straight to the router, no port opened, and check
        // the answers.
        None => {
            // An instance without a near cache: each answer is Redis's of the moment.
            let blacklist = blacklist(&url, &key, None).await?;
            blacklist.clear().await?; // start empty, even if an earlier run was interrupted
            let app = app(blacklist.clone());
            // (method, path, field of the answer, its expected value)
            let steps = [
                (Method::GET, "/check/mallory", "blocked", false),
                (Method::POST, "/block/mallory", "new", true),
                (Method::POST, "/block/mallory", "new", false), // blocking twice counts once
                (Method::GET, "/check/mallory", "blocked", true),
                (Method::POST, "/block/spam%40example.com", "new", true), // percent-decoded
                (Method::DELETE, "/block/mallory", "removed", true),      // one unblock is enough
                (Method::GET, "/check/mallory", "blocked", false),
                (Method::GET, "/check/spam@example.com", "blocked", true), // others stay
                (Method::DELETE, "/block/mallory", "removed", false),      // unblocked already
            ];
            for (method, uri, field, expected) in steps {
                let answer = call(&app, method.clone(), uri).await?;
                assert_eq!(
                    answer[field],
                    json!(expected),
                    "{} {uri}: {answer}",
                    method.as_str()
                );
            }

            // Unblocking an item that was never blocked (and tests absent) changes nothing:
            // not one counter.
            let before = counters(&mut conn, &key).await?;
            assert!(!before.is_empty(), "no counters at {key}"); // spam@example.com is blocked
            let answer = call(&app, Method::DELETE, "/block/alice").await?;
            assert_eq!(answer["removed"], json!(false), "{answer}");
            assert!(
                counters(&mut conn, &key).await? == before,
                "a DELETE of a never-blocked item changed the counters"
            );
            let answer = call(&app, Method::GET, "/check/spam@example.com").await?;
            assert_eq!(answer["blocked"], json!(true), "{answer}");
            println!("ok: blocked twice, unblocked once; a never-blocked unblock changed nothing");

            shared_instances(&url, &key, near_cache.unwrap_or(SELF_TEST_REFRESH)).await?;

            // Clean up, so a rerun prints the same (a real service would of course keep its
            // list).
            blacklist.clear().await?;
        }
        // With --serve ADDR: a real server, until Ctrl-C. The list is kept as it is: other
        // instances may share it.
        Some(addr) => {
            let app = app(blacklist(&url, &key, near_cache).await?);
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|err| support::Fatal(format!("cannot listen on {addr}: {err}")))?;
            let cache = match near_cache {
                Some(refresh) => format!("checks from a near cache refreshed within {refresh:?}"),
                None => "checks from Redis".to_owned(),
            };
            println!(
                "listening on http://{} ({cache}); Ctrl-C stops",
                listener.local_addr()?
            );
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
            println!("stopped");
        }
    }
    Ok(())
}
