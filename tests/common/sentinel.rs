//! A Redis Sentinel group of private processes: one master and two replicas (`redis-server`,
//! AOF with `appendfsync always`) and three sentinels (`redis-server --sentinel`, quorum 2,
//! down after 1 s), all on loopback, killed when dropped.
#![allow(dead_code)]

use super::server::RedisServer;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The group's name, as the sentinels monitor it.
pub const MASTER: &str = "mymaster";

/// A master, its replicas and the sentinels that watch them.
pub struct SentinelGroup {
    /// The data nodes; which one is the master changes with failovers ([`master`](Self::master)).
    pub nodes: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
    /// With TLS ([`start_tls`](Self::start_tls)): each node's TLS port, which the sentinels
    /// monitor and announce (the plain ports serve this harness only).
    tls_ports: Option<Vec<u16>>,
}

struct Sentinel {
    child: Child,
    port: u16,
    /// With TLS: the port clients reach it on.
    tls_port: Option<u16>,
    _dir: tempfile::TempDir,
}

/// PEM files for a group over TLS: the nodes' and sentinels' certificate and key, and the CA
/// they trust (clients need no certificate of their own).
pub struct TlsFiles {
    pub cert: String,
    pub key: String,
    pub ca: String,
}

impl TlsFiles {
    /// The node's and sentinel's TLS settings (as `name value` pairs), `tls-replication` on:
    /// replicas and sentinels reach the nodes over TLS, and announce their TLS ports.
    fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("tls-cert-file", self.cert.clone()),
            ("tls-key-file", self.key.clone()),
            ("tls-ca-cert-file", self.ca.clone()),
            ("tls-auth-clients", "no".to_owned()),
            ("tls-replication", "yes".to_owned()),
        ]
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The data nodes' persistence: every acknowledged write is on disk before the reply.
const NODE: [&str; 6] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];

impl SentinelGroup {
    /// Starts the group and waits until every sentinel knows the master, both replicas (linked)
    /// and the other two sentinels.
    pub fn start() -> std::io::Result<Self> {
        Self::start_with(&[])
    }

    /// The same, with `extra` arguments for every data node (`--loadmodule PATH`).
    pub fn start_with(extra: &[&str]) -> std::io::Result<Self> {
        Self::start_group(extra, None)
    }

    /// The same over TLS with `files`: every node and sentinel also listens on a TLS port,
    /// replication and the sentinels' links go over TLS, and the sentinels announce the
    /// nodes' TLS ports ([`url`](Self::url) is `rediss+sentinel://`). Each also keeps a plain
    /// port, for this harness's own commands.
    pub fn start_tls(files: &TlsFiles) -> std::io::Result<Self> {
        Self::start_group(&[], Some(files))
    }

    fn start_group(extra: &[&str], tls: Option<&TlsFiles>) -> std::io::Result<Self> {
        let mut node: Vec<String> = [&NODE[..], extra]
            .concat()
            .iter()
            .map(|a| a.to_string())
            .collect();
        if let Some(files) = tls {
            for (name, value) in files.settings() {
                node.extend([format!("--{name}"), value]);
            }
        }
        let mut tls_ports = Vec::new();
        let mut nodes = vec![start_node(node.clone(), tls.is_some(), &mut tls_ports)?];
        // The port the sentinels monitor, and replicas replicate from.
        let master = tls_ports.first().copied().unwrap_or(nodes[0].port());
        for _ in 0..2 {
            let mut args = node.clone();
            args.extend([
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                master.to_string(),
            ]);
            nodes.push(start_node(args, tls.is_some(), &mut tls_ports)?);
        }
        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(Sentinel::start(master, tls)?);
        }
        let group = SentinelGroup {
            nodes,
            sentinels,
            tls_ports: tls.map(|_| tls_ports),
        };
        group.wait_settled(Duration::from_secs(30))?;
        Ok(group)
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster` (with TLS:
    /// `rediss+sentinel://` and the sentinels' TLS ports).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.tls_port.unwrap_or(s.port)))
            .collect();
        let scheme = match self.tls_ports {
            Some(_) => "rediss+sentinel",
            None => "redis+sentinel",
        };
        format!("{scheme}://{}/{MASTER}", hosts.join(","))
    }

    /// The plain port of the node the sentinels announce as `port`.
    fn plain(&self, port: u16) -> u16 {
        match &self.tls_ports {
            Some(tls) => tls
                .iter()
                .position(|&p| p == port)
                .map_or(port, |i| self.nodes[i].port()),
            None => port,
        }
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The master's port, as the first sentinel that answers names it.
    pub fn master_port(&self) -> Option<u16> {
        self.sentinels.iter().find_map(|s| named_master(s.port))
    }

    /// The index in [`nodes`](Self::nodes) of the current master.
    pub fn master(&self) -> Option<usize> {
        let port = self.plain(self.master_port()?);
        self.nodes.iter().position(|n| n.port() == port)
    }

    /// `SENTINEL FAILOVER`, then waits until the group has settled on a new master.
    pub fn failover(&self) -> std::io::Result<()> {
        let old = self.master_port();
        let reply = command(self.sentinels[0].port, &["SENTINEL", "FAILOVER", MASTER])?;
        if !reply.starts_with('+') {
            return Err(std::io::Error::other(format!("SENTINEL FAILOVER: {reply}")));
        }
        self.wait_moved_from(old, Duration::from_secs(30))?;
        self.wait_settled(Duration::from_secs(60))
    }

    /// Kills the master (SIGKILL) and waits until the sentinels have promoted a replica;
    /// returns the killed node's index (start it again with
    /// [`restart`](Self::restart), and it rejoins as a replica).
    pub fn kill_master(&mut self) -> std::io::Result<usize> {
        let old = self.master_port();
        let index = self
            .master()
            .ok_or_else(|| std::io::Error::other("no master named"))?;
        self.nodes[index].kill();
        self.wait_moved_from(old, Duration::from_secs(30))?;
        Ok(index)
    }

    /// Starts node `index` again (from its AOF) and waits until it is a linked replica of the
    /// master and the whole group has settled.
    pub fn restart(&mut self, index: usize) -> std::io::Result<()> {
        self.nodes[index].restart()?;
        self.wait_settled(Duration::from_secs(60))
    }

    /// Waits until every sentinel names the same master, that master says it is one with both
    /// other nodes online as its replicas, and each sentinel sees the two replicas and
    /// the two other sentinels.
    pub fn wait_settled(&self, within: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < deadline {
            match self.settled() {
                Ok(()) => return Ok(()),
                Err(why) => last = why,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(std::io::Error::other(format!(
            "the Sentinel group did not settle within {within:?}: {last}"
        )))
    }

    fn settled(&self) -> Result<(), String> {
        let named: Vec<Option<u16>> = self
            .sentinels
            .iter()
            .map(|s| named_master(s.port))
            .collect();
        let master = named[0].ok_or("a sentinel names no master")?;
        if named.iter().any(|n| *n != Some(master)) {
            return Err(format!("the sentinels disagree: {named:?}"));
        }
        let info =
            command(self.plain(master), &["INFO", "replication"]).map_err(|e| e.to_string())?;
        if !info.contains("role:master") {
            return Err(format!("{master} is not a master yet"));
        }
        let replicas: Vec<&str> = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .collect();
        if replicas.len() != self.nodes.len() - 1 {
            return Err(format!("{master} has {} online replicas", replicas.len()));
        }
        for s in &self.sentinels {
            let line =
                command(s.port, &["SENTINEL", "MASTER", MASTER]).map_err(|e| e.to_string())?;
            for (name, want) in [("num-slaves", 2), ("num-other-sentinels", 2)] {
                if pair(&line, name) != Some(want.to_string()) {
                    return Err(format!("sentinel {}: {name} is not {want}", s.port));
                }
            }
            if pair(&line, "flags").is_none_or(|f| f != "master") {
                return Err(format!(
                    "sentinel {}: the master's flags are not plain",
                    s.port
                ));
            }
        }
        Ok(())
    }

    fn wait_moved_from(&self, old: Option<u16>, within: Duration) -> std::io::Result<()> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let named: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .map(|s| named_master(s.port))
                .collect();
            if let Some(new) = named[0] {
                if Some(new) != old
                    && named.iter().all(|n| *n == Some(new))
                    && command(self.plain(new), &["ROLE"]).is_ok_and(|r| r.contains("master"))
                {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(format!(
            "the sentinels did not move the master from {old:?} within {within:?}"
        )))
    }
}

impl Sentinel {
    fn start(master: u16, tls: Option<&TlsFiles>) -> std::io::Result<Sentinel> {
        let dir = tempfile::Builder::new()
            .prefix("redbloom-sentinel-")
            .tempdir()?;
        let mut attempts = 0;
        loop {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let conf: PathBuf = dir.path().join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                 sentinel monitor {MASTER} 127.0.0.1 {master} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 10000\n\
                 sentinel parallel-syncs {MASTER} 2\n",
                dir = dir.path().display()
            );
            let tls_port = match tls {
                Some(files) => {
                    let tls_port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
                    text.push_str(&format!("tls-port {tls_port}\n"));
                    for (name, value) in files.settings() {
                        text.push_str(&format!("{name} {value}\n"));
                    }
                    Some(tls_port)
                }
                None => None,
            };
            std::fs::write(&conf, text)?;
            let mut child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut up = false;
            while Instant::now() < deadline {
                if command(port, &["PING"]).is_ok_and(|r| r == "+PONG") {
                    up = true;
                    break;
                }
                if child.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if up {
                return Ok(Sentinel {
                    child,
                    port,
                    tls_port,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            attempts += 1;
            if attempts == 5 {
                return Err(std::io::Error::other("a sentinel did not start"));
            }
        }
    }
}

/// A data node with `args`; with `tls`, also on a free TLS port (pushed on `tls_ports`).
fn start_node(
    mut args: Vec<String>,
    tls: bool,
    tls_ports: &mut Vec<u16>,
) -> std::io::Result<RedisServer> {
    if tls {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        args.extend(["--tls-port".to_owned(), port.to_string()]);
        tls_ports.push(port);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    RedisServer::start_with(&args)
}

/// The master's port as the sentinel on `port` names it.
fn named_master(port: u16) -> Option<u16> {
    let reply = command(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER]).ok()?;
    reply.lines().nth(1)?.parse().ok()
}

/// `name`'s value in a flat reply of name/value lines.
fn pair(flat: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = flat.lines().collect();
    lines
        .iter()
        .position(|l| *l == name)
        .and_then(|i| lines.get(i + 1))
        .map(|v| v.to_string())
}

/// Sends one command to the server on `port` (1 s timeouts) and returns its reply flattened:
/// a status or error as its line (`+OK`, `-ERR …`), an integer as `:N`, a bulk string as its
/// text, an array as its elements' lines (nested arrays flattened).
pub fn command(port: u16, args: &[&str]) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.set_write_timeout(Some(Duration::from_secs(1)))?;
    let mut wire = format!("*{}\r\n", args.len());
    for a in args {
        wire.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    stream.write_all(wire.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut out = Vec::new();
    read_reply(&mut reader, &mut out)?;
    Ok(out.join("\n"))
}

fn read_reply(reader: &mut impl BufRead, out: &mut Vec<String>) -> std::io::Result<()> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let line = line.trim_end().to_owned();
    let (kind, rest) = line.split_at(line.len().min(1));
    match kind {
        "$" => {
            let n: i64 = rest.parse().map_err(std::io::Error::other)?;
            if n >= 0 {
                let mut body = vec![0u8; n as usize + 2];
                reader.read_exact(&mut body)?;
                body.truncate(n as usize);
                out.extend(String::from_utf8_lossy(&body).lines().map(str::to_owned));
            }
        }
        "*" => {
            let n: i64 = rest.parse().map_err(std::io::Error::other)?;
            for _ in 0..n.max(0) {
                read_reply(reader, out)?;
            }
        }
        _ => out.push(line),
    }
    Ok(())
}
