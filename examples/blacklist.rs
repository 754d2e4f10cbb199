//! A blacklist HTTP service (axum) backed by a Bloom filter in Redis.
//!
//! ```text
//! GET  /check/{item}  ->  {"item":"...","blocked":true|false}
//! POST /block/{item}  ->  {"item":"...","blocked":true,"new":true|false}
//!
//! cargo run --example blacklist                          # calls itself in-process, then exits
//! cargo run --example blacklist -- --serve 127.0.0.1:3000
//! curl -X POST 127.0.0.1:3000/block/mallory; curl 127.0.0.1:3000/check/mallory
//! ```
//!
//! "blocked": false is certain (the item was never blocked); "blocked": true may, rarely, be a
//! false positive. Every instance of the service pointed at the same key shares the blacklist.

mod support;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{Method, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use redbloom::redis::aio::MultiplexedConnection;
use redbloom::RedisBloom;
use serde_json::{json, Value};
use tower::ServiceExt; // for `oneshot`

/// The shared state: cloning a filter is cheap (the multiplexed connection is shared).
type Blacklist = RedisBloom<MultiplexedConnection>;

fn app(blacklist: Blacklist) -> Router {
    Router::new()
        .route("/check/{item}", get(check))
        .route("/block/{item}", post(block))
        .with_state(blacklist)
}

/// GET /check/{item}: whether the item is blocked.
async fn check(
    State(blacklist): State<Blacklist>,
    Path(item): Path<String>,
) -> Result<Json<Value>, AppError> {
    let blocked = blacklist.exists(&item).await?;
    Ok(Json(json!({ "item": item, "blocked": blocked })))
}

/// POST /block/{item}: blocks the item; "new" is false when it was (probably) blocked already.
async fn block(
    State(blacklist): State<Blacklist>,
    Path(item): Path<String>,
) -> Result<Json<Value>, AppError> {
    let new = blacklist.add(&item).await?;
    Ok(Json(json!({ "item": item, "blocked": true, "new": new })))
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve_addr = match std::env::args().skip(1).collect::<Vec<_>>().as_slice() {
        [] => None,
        [flag, addr] if flag == "--serve" => Some(addr.clone()),
        _ => return Err(support::Fatal("usage: blacklist [--serve ADDR]".into()).into()),
    };

    // A Redis: $REDIS_URL, or a throwaway redis-server that stops when `_server` is dropped.
    let (url, _server) = support::redis_url()?;
    let conn = support::connect(&url).await?;

    let blacklist = RedisBloom::builder("redbloom:example:blacklist")
        .expected_items(1_000_000)
        .false_positive_rate(1e-6)
        .build(conn)?;
    blacklist.clear().await?; // start empty, even if an earlier run was interrupted
    let app = app(blacklist.clone());

    match serve_addr {
        // Without arguments: send a few requests straight to the router, no port opened.
        None => {
            let requests = [
                (Method::GET, "/check/mallory"),
                (Method::POST, "/block/mallory"),
                (Method::POST, "/block/mallory"),
                (Method::GET, "/check/mallory"),
                (Method::POST, "/block/spam%40example.com"), // percent-decoded by `Path`
                (Method::GET, "/check/spam@example.com"),
                (Method::GET, "/check/alice"),
            ];
            for (method, uri) in requests {
                let request = Request::builder()
                    .method(method.clone())
                    .uri(uri)
                    .body(Body::empty())?;
                let response = app.clone().oneshot(request).await?;
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await?;
                println!(
                    "{:<4} {uri:<26} -> {} {}",
                    method.as_str(),
                    status.as_u16(),
                    String::from_utf8_lossy(&body)
                );
            }
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
