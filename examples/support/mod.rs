//! What every example needs: a Redis to talk to, and setup errors that print as one clean line.
//!
//! Not an example itself: each example includes it with `mod support;`.
#![allow(dead_code)] // each example uses a different part

// The throwaway server of the integration tests, included by path so the code exists once.
#[path = "../../tests/common/server.rs"]
mod server;

use redbloom::redis;
use redbloom::redis::aio::MultiplexedConnection;
use std::fmt;

pub use server::RedisServer;

/// Answers `--help` (or `-h`) anywhere among the arguments: prints `usage` and where the
/// example finds its Redis, and exits with status 0.
pub fn answer_help(usage: &str) {
    if std::env::args()
        .skip(1)
        .any(|arg| arg == "--help" || arg == "-h")
    {
        println!("{usage}");
        println!(
            "Redis: $REDIS_URL (redis://HOST:PORT), or else a throwaway redis-server from PATH."
        );
        std::process::exit(0);
    }
}

/// An example that takes no arguments: its usage line when it was given some.
///
/// # Errors
/// A [`Fatal`] naming the first argument and the usage.
pub fn no_arguments(usage: &str) -> Result<(), Fatal> {
    answer_help(usage);
    match std::env::args().nth(1) {
        Some(arg) => Err(Fatal(format!("unexpected argument {arg:?}; {usage}"))),
        None => Ok(()),
    }
}

/// Returns a connection URL and, when a throwaway server was started, its guard (the server
/// stops when the guard is dropped): `$REDIS_URL` when set, else a private `redis-server` from
/// `PATH` on a free loopback port.
///
/// # Errors
/// A [`Fatal`] saying how to get a Redis when neither works.
pub fn redis_url() -> Result<(String, Option<RedisServer>), Fatal> {
    if let Some(url) = std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
    {
        // The URL may hold a password: do not print it.
        eprintln!("(using the Redis at $REDIS_URL)");
        return Ok((url, None));
    }
    match RedisServer::start() {
        Ok(server) => {
            eprintln!("(REDIS_URL is not set: started a throwaway redis-server for this run)");
            Ok((server.url(), Some(server)))
        }
        Err(err) => Err(Fatal(format!(
            "set REDIS_URL=redis://HOST:PORT or install redis-server \
             (starting redis-server failed: {err})"
        ))),
    }
}

/// Opens a new client on `url` and one multiplexed connection from it.
///
/// # Errors
/// A [`Fatal`] when the URL is invalid or the server cannot be reached.
pub async fn connect(url: &str) -> Result<MultiplexedConnection, Fatal> {
    let client = redis::Client::open(url)
        .map_err(|err| Fatal(format!("REDIS_URL is not a valid Redis URL: {err}")))?;
    client
        .get_multiplexed_async_connection()
        .await
        .map_err(|err| Fatal(format!("cannot connect to Redis: {err}")))
}

/// An error whose `Debug` is its message, so `main` returning it prints one line
/// (`Error: <message>`) and exits with status 1, without a panic or a backtrace.
pub struct Fatal(pub String);

impl fmt::Debug for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Fatal {}
