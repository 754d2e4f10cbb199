//! A blacklist HTTP service (axum) backed by a counting Bloom filter in Redis
//! ([`CountingBloom`]): items are blocked, looked up, and unblocked.
//!
//! ```text
//! POST   /block/{item}  ->  {"item":"...","blocked":true,"new":true|false}
//! DELETE /block/{item}  ->  {"item":"...","blocked":false,"removed":true|false}
//! GET    /check/{item}  ->  {"item":"...","blocked":true|false}
//!
//! cargo run --example blacklist                          # calls itself in-process, checks, exits
//! cargo run --example blacklist -- --serve 127.0.0.1:3000
//! curl -X POST   127.0.0.1:3000/block/mallory   # {"item":"mallory","blocked":true,"new":true}
//! curl -X POST   127.0.0.1:3000/block/mallory   # ...,"new":false}: blocking is idempotent
//! curl           127.0.0.1:3000/check/mallory   # {"item":"mallory","blocked":true}
//! curl -X DELETE 127.0.0.1:3000/block/mallory   # {"item":"mallory","blocked":false,"removed":true}
//! curl           127.0.0.1:3000/check/mallory   # {"item":"mallory","blocked":false}
//! curl -X DELETE 127.0.0.1:3000/block/alice     # ...,"removed":false}: never blocked, no change
//! ```
//!
//! Every instance of the service pointed at the same key shares the blacklist. Without
//! arguments the example sends the requests above (and a few more) straight to its router, no
//! port opened, and asserts the answers; `--serve ADDR` listens until Ctrl-C.
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

mod support;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redbloom::redis;
use redbloom::redis::aio::MultiplexedConnection;
use redbloom::{CountingBloom, RedisBloom};
use serde_json::{json, Value};
use tower::ServiceExt; // for `oneshot`

/// The filter's key in Redis.
const KEY: &str = "redbloom:example:blocked";

/// The shared state: cloning a filter is cheap (one reference count; the multiplexed
/// connection is shared).
type Blacklist = CountingBloom<MultiplexedConnection>;

fn app(blacklist: Blacklist) -> Router {
    Router::new()
        .route("/check/{item}", get(check))
        .route("/block/{item}", post(block).delete(unblock))
        .with_state(blacklist)
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

/// Sends one request straight to the router, prints it and its answer, and returns the JSON
/// body (asserting a 200).
async fn call(
    app: &Router,
    method: Method,
    uri: &str,
) -> Result<Value, Box<dyn std::error::Error>> {
    let request = Request::builder()
        .method(method.clone())
        .uri(uri)
        .body(Body::empty())?;
    let response = app.clone().oneshot(request).await?;
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await?;
    println!(
        "{:<6} {uri:<26} -> {} {}",
        method.as_str(),
        status.as_u16(),
        String::from_utf8_lossy(&body)
    );
    assert_eq!(status, StatusCode::OK, "{} {uri}", method.as_str());
    Ok(serde_json::from_slice(&body)?)
}

/// The filter's counters as Redis holds them (one string: the filter has one shard).
async fn counters(conn: &mut MultiplexedConnection) -> redis::RedisResult<Vec<u8>> {
    let bytes: Option<Vec<u8>> = redis::cmd("GET").arg(KEY).query_async(conn).await?;
    Ok(bytes.unwrap_or_default())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve_addr = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => None,
        [flag, addr] if flag == "--serve" => Some(addr.clone()),
        _ => return Err(support::Fatal("usage: blacklist [--serve ADDR]".into()).into()),
    };

    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let mut conn = support::connect(&url).await?;

    // 100,000 entries at 1e-6: about 2.9 million 4-bit counters, 1.4 MiB in Redis. A low rate
    // matters doubly here: a false positive that is unblocked lifts other blocks (module docs).
    let blacklist = RedisBloom::builder(KEY)
        .expected_items(100_000)
        .false_positive_rate(1e-6)
        .build_counting(conn.clone())?;
    blacklist.clear().await?; // start empty, even if an earlier run was interrupted
    let app = app(blacklist.clone());

    match serve_addr {
        // Without arguments: send requests straight to the router, no port opened, and check
        // the answers.
        None => {
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
            let before = counters(&mut conn).await?;
            assert!(!before.is_empty(), "no counters at {KEY}"); // spam@example.com is blocked
            let answer = call(&app, Method::DELETE, "/block/alice").await?;
            assert_eq!(answer["removed"], json!(false), "{answer}");
            assert!(
                counters(&mut conn).await? == before,
                "a DELETE of a never-blocked item changed the counters"
            );
            let answer = call(&app, Method::GET, "/check/spam@example.com").await?;
            assert_eq!(answer["blocked"], json!(true), "{answer}");
            println!("ok: blocked twice, unblocked once; a never-blocked unblock changed nothing");
        }
        // With --serve ADDR: a real server, until Ctrl-C.
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr)
                .await
                .map_err(|err| support::Fatal(format!("cannot listen on {addr}: {err}")))?;
            println!(
                "listening on http://{}; Ctrl-C stops",
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

    // Clean up, so a rerun prints the same (a real service would of course keep its list).
    blacklist.clear().await?;
    Ok(())
}
