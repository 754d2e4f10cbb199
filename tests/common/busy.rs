//! Another client's long script: the server answers `BUSY` to everyone else while it runs past
//! its `busy-reply-threshold`.
#![allow(dead_code)]

use std::time::Duration;
use tokio::task::JoinHandle;

/// A script that spins on the server's clock for ARGV[1] microseconds.
const SPIN: &str = "local t = redis.call('TIME') \
    local start = t[1] * 1000000 + t[2] \
    repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) \
    return 1";

/// Starts a script on its own connection to `url` that keeps the server busy for `length`, and
/// returns once the server answers `BUSY` to another client (the server must run with a small
/// `busy-reply-threshold`). The handle ends with the script.
pub async fn hold_busy(url: &str, length: Duration) -> JoinHandle<()> {
    let mut spinner = super::connect(url).await;
    let mut probe = super::connect(url).await;
    let micros = u64::try_from(length.as_micros()).unwrap();
    let script = tokio::spawn(async move {
        let config = redis::cmd("EVAL")
            .arg(SPIN)
            .arg(0)
            .arg(micros)
            .query_async::<i64>(&mut spinner)
            .await;
        assert_eq!(config.unwrap(), 1, "the long script ended");
    });
    let started = std::time::Instant::now();
    loop {
        match redis::cmd("PING").query_async::<String>(&mut probe).await {
            Err(err) if err.code() == Some("BUSY") => return script,
            _ if started.elapsed() > length => panic!("the server never answered BUSY"),
            _ => tokio::task::yield_now().await,
        }
    }
}
