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
        Self::start_with_replicas(1)
    }

    /// Three masters and no replica.
    pub fn start_without_replicas() -> std::io::Result<Self> {
        Self::start_with_replicas(0)
    }

    /// Three masters and no replica, each loading the module at `module` (`--loadmodule`):
    /// a cluster with RedisBloom's `BF.*`.
    pub fn start_with_module(module: &std::path::Path) -> std::io::Result<Self> {
        let module = module.to_string_lossy();
        Self::start_nodes(0, &["--loadmodule", &module])
    }

    fn start_with_replicas(replicas: usize) -> std::io::Result<Self> {
        Self::start_nodes(replicas, &[])
    }

    fn start_nodes(replicas: usize, extra: &[&str]) -> std::io::Result<Self> {
        let mut nodes = Vec::new();
        for _ in 0..3 * (1 + replicas) {
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
                    // A replica is listed in CLUSTER SLOTS only once its replication offset is
                    // not zero; the master's pings advance it, every 10 s by default.
                    "--repl-ping-replica-period",
                    "1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]
                .iter()
                .chain(extra)
                .copied()
                .collect::<Vec<_>>(),
            )?);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_until_ok(Duration::from_secs(30))?;
        if replicas > 0 {
            // Two clusters may start at once on a busy machine: generous.
            cluster.wait_for_replicas(Duration::from_secs(90))?;
        }
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

    /// A client builder for every node as a seed, with short timeouts and retries, so that a
    /// filter's own `Retry` (not redis-rs's long defaults: no response timeout, 16 retries at
    /// least 1.28 s apart) carries calls through a failover or a slot move.
    pub fn client_builder(&self) -> redis::cluster::ClusterClientBuilder {
        redis::cluster::ClusterClient::builder(self.urls())
            .connection_timeout(Duration::from_millis(500))
            .response_timeout(Duration::from_secs(1))
            .overall_response_timeout(Some(Duration::from_secs(5)))
            .retries(10)
            .min_retry_wait(50)
            .max_retry_wait(500)
    }

    /// Kills the node on `port` (as `kill -9`).
    pub fn kill(&mut self, port: u16) {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no node on port {port}"))
            .kill();
    }

    /// Waits until the replica of the master on `master` has everything the master has
    /// written so far (its replication offset caught up). (`WAIT` from a new connection would
    /// not do: it waits only for that connection's own writes.)
    pub fn wait_replicated(&self, master: u16) {
        let offset = |port: u16, field: &str| -> u64 {
            cli(port, &["info", "replication"])
                .lines()
                .find_map(|line| line.strip_prefix(field)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let replica = self.replica_of(master).expect("the master has a replica");
        let target = offset(master, "master_repl_offset:");
        let deadline = Instant::now() + Duration::from_secs(10);
        while offset(replica, "slave_repl_offset:") < target {
            assert!(
                Instant::now() < deadline,
                "replica {replica} did not catch up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
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

    /// Waits until every master has a replica whose link is up and every node lists every
    /// replica in CLUSTER SLOTS, so that clients that read the topology now see the replicas.
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
                    })
                && self.slots_list_every_node();
            if linked {
                return Ok(());
            }
            if Instant::now() > deadline {
                // What was missing, for the failure message.
                let state: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|node| {
                        let info = cli(node.port(), &["info", "replication"]);
                        let role: Vec<&str> = info
                            .lines()
                            .map(str::trim)
                            .filter(|l| {
                                l.starts_with("role:")
                                    || l.starts_with("connected_slaves:")
                                    || l.starts_with("master_link_status:")
                            })
                            .collect();
                        format!("{}: {}", node.port(), role.join(" "))
                    })
                    .collect();
                return Err(std::io::Error::other(format!(
                    "the replicas did not attach within {timeout:?}: masters {masters:?}, \
                     every node listed in CLUSTER SLOTS: {}; {state:?}",
                    self.slots_list_every_node()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether every live node's CLUSTER SLOTS names every live node (masters and replicas).
    fn slots_list_every_node(&self) -> bool {
        let live: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .map(RedisServer::port)
            .collect();
        live.iter().all(|&port| {
            let slots = cli(port, &["cluster", "slots"]);
            let listed: Vec<&str> = slots.lines().map(str::trim).collect();
            live.iter()
                .all(|p| listed.contains(&p.to_string().as_str()))
        })
    }

    /// The port of the replica of the master on `master`, from `ROLE` on every other live node.
    pub fn replica_of(&self, master: u16) -> Option<u16> {
        self.nodes
            .iter()
            .filter(|n| n.is_running() && n.port() != master)
            .map(RedisServer::port)
            .find(|&port| {
                let role = cli(port, &["role"]);
                let lines: Vec<&str> = role.lines().map(str::trim).collect();
                lines.first() == Some(&"slave")
                    && lines.get(2) == Some(&master.to_string().as_str())
            })
    }

    /// `key`'s hash slot, from `CLUSTER KEYSLOT` on a live node.
    pub fn slot_of(&self, key: &str) -> u16 {
        let node = self
            .nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a live node");
        cli(node.port(), &["cluster", "keyslot", key])
            .trim()
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// The port of the master that serves `key`'s slot now.
    pub fn master_of(&self, key: &str) -> u16 {
        let slot = self.slot_of(key);
        self.master_ports()
            .into_iter()
            .find(|&port| owns_slot(port, slot))
            .expect("a master serves every slot")
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

/// Calls of `command` the nodes on `ports` served since their statistics were last reset
/// (commands that scripts call count too).
pub fn calls(ports: &[u16], command: &str) -> u64 {
    ports
        .iter()
        .map(|&port| super::commandstats_calls(&cli(port, &["info", "commandstats"]), command))
        .sum()
}

/// The statistics of every running node of `cluster` reset (`CONFIG RESETSTAT`).
pub fn reset_stats(cluster: &RedisCluster) {
    for node in cluster.nodes.iter().filter(|n| n.is_running()) {
        assert_eq!(cli(node.port(), &["config", "resetstat"]).trim(), "OK");
    }
}

/// Whether the node on `port` serves `slot`, from its own line of CLUSTER NODES (slot ranges
/// such as `0-5460` or single slots after the link state).
fn owns_slot(port: u16, slot: u16) -> bool {
    let nodes = cli(port, &["cluster", "nodes"]);
    let Some(me) = nodes.lines().find(|line| line.contains("myself")) else {
        return false;
    };
    me.split_whitespace().skip(8).any(|range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        match (first.parse::<u16>(), last.parse::<u16>()) {
            (Ok(first), Ok(last)) => (first..=last).contains(&slot),
            _ => false,
        }
    })
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
