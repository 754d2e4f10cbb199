//! Every public async method's future is `Send`, so that a filter can be used from
//! `tokio::spawn` and axum handlers: checked at compile time (this file does not build if one
//! is not).

use redbloom::RedisBloom;
use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use std::time::Duration;

fn is_send<T: Send>(_: T) {}

/// Never run: it only has to compile.
#[allow(dead_code)]
fn futures_are_send<C>(bloom: &RedisBloom<C>)
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    let items = ["a", "b"];
    is_send(bloom.add("a"));
    is_send(bloom.exists("a"));
    is_send(bloom.add_many(&items));
    is_send(bloom.exists_many(&items));
    is_send(bloom.info());
    is_send(bloom.clear());
    is_send(bloom.expire(Duration::from_secs(1)));
    is_send(bloom.check_params());
}

#[test]
fn the_futures_of_every_public_async_method_are_send() {
    // Instantiated for each connection type redbloom documents.
    let _ = futures_are_send::<MultiplexedConnection>;
    let _ = futures_are_send::<ConnectionManager>;
    let _ = futures_are_send::<ClusterConnection>;
}
