//! A private Redis Cluster on loopback: 3 masters and 3 replicas started from `redis-server`
//! binaries, created with `redis-cli --cluster create`, killed when dropped.
#![allow(dead_code)]

use super::server::RedisServer;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

/// The cluster's nodes (the first three start as masters).
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts six nodes and joins them into a cluster of 3 masters with a replica each; fails
    /// loudly when `redis-server` or `redis-cli` is missing.
    pub fn start() -> std::io::Result<Self> {
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let port = cluster_port()?;
            nodes.push(RedisServer::start_on(
                port,
                &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
            )?);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_until_ok(Duration::from_secs(30))?;
        cluster.wait_for_replicas(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// A cluster connection through every node as a seed.
    pub async fn connection(&self) -> redis::cluster_async::ClusterConnection {
        redis::cluster::ClusterClient::new(self.urls())
            .expect("valid node URLs")
            .get_async_connection()
            .await
            .expect("the cluster answers")
    }

    /// Seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Waits until every live node reports `cluster_state:ok` and agrees on 3 masters.
    pub fn wait_until_ok(&self, timeout: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let ok = self.nodes.iter().filter(|n| n.is_running()).all(|node| {
                let info = cli(node.port(), &["cluster", "info"]);
                info.contains("cluster_state:ok") && info.contains("cluster_size:3")
            });
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other("the cluster did not become ok"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every master has a replica whose link is up, so that clients that read the
    /// topology now see the replicas too.
    pub fn wait_for_replicas(&self, timeout: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let masters = self.master_ports();
            let linked = masters.len() == 3
                && masters.iter().all(|&port| {
                    cli(port, &["info", "replication"]).contains("connected_slaves:1")
                })
                && self
                    .nodes
                    .iter()
                    .filter(|n| !masters.contains(&n.port()))
                    .all(|node| {
                        cli(node.port(), &["info", "replication"]).contains("master_link_status:up")
                    });
            if linked {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other("the replicas did not attach"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The ports of the nodes that are masters now.
    pub fn master_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .filter(|n| cli(n.port(), &["role"]).starts_with("master"))
            .map(RedisServer::port)
            .collect()
    }
}

/// `redis-cli -p PORT ARGS...`'s output, empty on failure.
pub fn cli(port: u16, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

/// A free port whose cluster bus port (port + 10000) is free too.
fn cluster_port() -> std::io::Result<u16> {
    for _ in 0..100 {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::other(
        "no free port pair for a cluster node",
    ))
}
