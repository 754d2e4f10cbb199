//! One connection type over the three topologies, each the kind a production client would use:
//! a `ConnectionManager` (reconnects) for one server, a `SentinelConnection` (follows the
//! master) for a Sentinel group, a cluster connection (follows the slots) for a Cluster.

use crate::topology::Target;
use redbloom::redis;
use redbloom::sentinel::{Node, SentinelConnection, SentinelUrl};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, Value};
use std::time::Duration;

/// A connection to one of the topologies.
#[derive(Clone)]
pub enum Conn {
    /// One server.
    Single(ConnectionManager),
    /// The master a Sentinel group names.
    Sentinel(SentinelConnection),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Sentinel(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Sentinel(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Opens a connection to `target`. Timeouts are short, so that the filter's own retry budget
/// and deadline (not the client's defaults) carry calls through faults; a Sentinel
/// connection's response timeout outlasts `WAIT`'s (the filters there wait for 2 replicas).
pub async fn connect(target: &Target) -> Result<Conn, String> {
    match target {
        Target::Single(url) => {
            let client = redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(1)))
                .set_response_timeout(Some(Duration::from_secs(2)))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_secs(1));
            let conn = client
                .get_connection_manager_with_config(config)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            Ok(Conn::Single(conn))
        }
        Target::Sentinel(url) => {
            let parsed: SentinelUrl = url.parse().map_err(|e| format!("{e}"))?;
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(1)))
                .set_response_timeout(Some(Duration::from_secs(3)));
            let conn = SentinelConnection::open(&parsed, Node::Master, config)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            Ok(Conn::Sentinel(conn))
        }
        Target::Cluster(urls) => {
            let client = ClusterClient::builder(urls.clone())
                .connection_timeout(Duration::from_millis(500))
                .response_timeout(Duration::from_secs(1))
                .overall_response_timeout(Some(Duration::from_secs(5)))
                .retries(10)
                .min_retry_wait(50)
                .max_retry_wait(500)
                .build()
                .map_err(|e| e.to_string())?;
            let conn = client
                .get_async_connection()
                .await
                .map_err(|e| format!("the cluster: {e}"))?;
            Ok(Conn::Cluster(conn))
        }
    }
}
