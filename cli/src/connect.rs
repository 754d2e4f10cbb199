//! The connection to Redis: one server (`--url`) or a Redis Cluster (`--cluster`), TLS
//! (`rediss://`, optionally trusting a private CA or a self-signed certificate given by
//! `--tls-ca`) and ACL users (`user:password@`).
//!
//! The first connection is retried like any call (`--retry-for`) while the server is down or
//! starting; what waiting cannot mend fails at once, saying what it most likely is: a refused
//! password or certificate, a server that does not speak Redis, TLS to a plain port or plain to
//! a TLS port (found by a second look at the port, see [`probe`]).
//!
//! Errors name the server's address and the CA file, never the URL itself, which may hold a
//! password.

use crate::config::Timeouts;
use crate::tls::{self, TlsConnection};
use anyhow::{anyhow, bail, Context, Result};
use redbloom::sentinel::{Node, SentinelConnection, SentinelUrl};
use redbloom::Retry;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisFuture, RedisResult, Value};
use redis::{ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo, RedisError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::future::Future;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// One server or a Redis Cluster, whose connection follows the slots (MOVED/ASK) and
/// reconnects to its nodes.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(Server),
    Cluster(ClusterConnection),
}

/// One server, through a connection that reconnects by itself: redis-rs's, or with `--tls-ca`
/// the CLI's own TLS (see `tls.rs`).
#[derive(Clone)]
pub(crate) enum Server {
    Managed(ConnectionManager),
    OwnTls(TlsConnection),
    /// The master a group of sentinels names, followed across failovers.
    Sentinel(SentinelConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(Server::Managed(conn)) => conn.req_packed_command(cmd),
            Connection::Single(Server::OwnTls(conn)) => conn.req_packed_command(cmd),
            Connection::Single(Server::Sentinel(conn)) => conn.req_packed_command(cmd),
            Connection::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(Server::Managed(conn)) => {
                conn.req_packed_commands(pipeline, offset, count)
            }
            Connection::Single(Server::OwnTls(conn)) => {
                conn.req_packed_commands(pipeline, offset, count)
            }
            Connection::Single(Server::Sentinel(conn)) => {
                conn.req_packed_commands(pipeline, offset, count)
            }
            Connection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(Server::Managed(conn)) => conn.get_db(),
            Connection::Single(Server::OwnTls(conn)) => conn.get_db(),
            Connection::Single(Server::Sentinel(conn)) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Connects to the Redis Cluster whose nodes include `seeds` (comma-separated URLs); with
/// `read_from_replicas`, read-only commands go to a random replica of their slot. A cluster that
/// cannot be reached yet is tried again for `timeouts.retry_for`.
pub(crate) async fn connect_cluster(
    seeds: &str,
    timeouts: Timeouts,
    read_from_replicas: bool,
) -> Result<ClusterConnection> {
    let nodes: Vec<&str> = seeds
        .split(',')
        .map(str::trim)
        .filter(|seed| !seed.is_empty())
        .collect();
    if nodes.is_empty() {
        bail!("--cluster needs at least one seed URL");
    }
    let infos = nodes
        .iter()
        .map(|node| node.into_connection_info())
        .collect::<RedisResult<Vec<_>>>()
        .map_err(|err| anyhow!("invalid --cluster: {err}"))?;
    // The first seed is the one looked at when a failure is diagnosed.
    let mut target = Target::new(&infos[0], false, "the Redis Cluster");
    target.addr = infos
        .iter()
        .map(|info| info.addr().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    // redis-rs's messages about a URL never quote it, so they cannot leak its password.
    let mut builder = ClusterClient::builder(nodes)
        .connection_timeout(timeouts.connect)
        .response_timeout(timeouts.response);
    if read_from_replicas {
        builder = builder.read_routing_strategy(RandomReplicaStrategy);
    }
    let client = builder
        .build()
        .map_err(|err| anyhow!("invalid --cluster: {err}"))?;
    let mut conn = retry_first(timeouts, &target, || client.get_async_connection()).await?;
    if read_from_replicas && !lists_replicas(&mut conn).await {
        eprintln!(
            "warning: --read-from-replicas: the cluster lists no replica (CLUSTER SLOTS), so reads \
             go to the masters"
        );
    }
    Ok(conn)
}

/// Whether CLUSTER SLOTS names a replica for any slot range: the topology the connection read.
/// (Redis leaves out a replica whose replication offset is still 0, as on a new, idle cluster.)
async fn lists_replicas(conn: &mut ClusterConnection) -> bool {
    let ranges: RedisResult<Vec<Vec<Value>>> =
        redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await;
    // Each range: start, end, the master, then its replicas.
    ranges.is_ok_and(|ranges| ranges.iter().any(|range| range.len() > 3))
}

/// Connects to `url` with a connection that reconnects by itself after a lost connection (the
/// filter's retries then succeed once the server is back). `tls_ca` is a PEM file of
/// certificates trusted, instead of the system's CAs, for a `rediss://` URL: a CA, or the
/// server's own self-signed certificate. A server that is down or starting is tried again for
/// `timeouts.retry_for`.
pub(crate) async fn connect(
    url: &str,
    tls_ca: Option<&Path>,
    timeouts: Timeouts,
) -> Result<Server> {
    // redis-rs's messages about a URL never quote it, so they cannot leak its password.
    let client = redis::Client::open(url).map_err(|err| anyhow!("invalid --url: {err}"))?;
    let info = client.get_connection_info().clone();
    let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
    if tls {
        // rustls needs a crypto provider; pick ring even when another crate's features made
        // more than one available.
        install_crypto_provider();
    }
    let target = Target::new(&info, tls_ca.is_some(), "Redis");
    if let Some(ca) = tls_ca {
        if !tls {
            bail!("--tls-ca needs a rediss:// URL (TLS); --url is not one");
        }
        let certs = read_ca(ca)?;
        let config = tls::client_config(certs)
            .with_context(|| format!("cannot use the CA certificates of {}", ca.display()))?;
        let ConnectionAddr::TcpTls { host, port, .. } = info.addr() else {
            bail!("--tls-ca needs a rediss:// URL (TLS); --url is not one");
        };
        let conn = retry_first(timeouts, &target, || {
            TlsConnection::connect(
                host,
                *port,
                config.clone(),
                info.redis_settings().clone(),
                timeouts,
            )
        })
        .await?;
        not_a_cluster_node(&mut conn.clone(), &target).await?;
        return Ok(Server::OwnTls(conn));
    }
    // The manager tries a few times itself, each try as long as the timeout: one connection
    // tried once tells sooner whether the server is there (and what it is).
    let once = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.connect));
    retry_first(timeouts, &target, || {
        client.get_multiplexed_async_connection_with_config(&once)
    })
    .await?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.response))
        // Reconnection attempts per lost connection; the filter's retry budget bounds the rest.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1));
    let conn = client
        .get_connection_manager_with_config(config)
        .await
        .map_err(|err| connect_error(&err, &target))?;
    not_a_cluster_node(&mut conn.clone(), &target).await?;
    Ok(Server::Managed(conn))
}

/// Refuses a `--url` that names one node of a Redis Cluster whose slots are served by more
/// than one master: a filter's keys live on the node of their hash slot, which one server's
/// connection does not follow (every command for another node's slot would answer `MOVED`,
/// retried for `--retry-for`). A server that is no cluster node, a cluster of one master, and
/// an ACL that refuses `INFO` or `CLUSTER SLOTS` pass.
async fn not_a_cluster_node<C: ConnectionLike>(conn: &mut C, target: &Target) -> Result<()> {
    let info: RedisResult<String> = redis::cmd("INFO").arg("cluster").query_async(conn).await;
    if !info.is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_enabled:1")) {
        return Ok(());
    }
    let ranges: RedisResult<Vec<Vec<Value>>> =
        redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await;
    // Each range: start, end, then its master as [host, port, id, ...].
    let mut masters: Vec<&Value> = Vec::new();
    let ranges = ranges.unwrap_or_default();
    for master in ranges.iter().filter_map(|range| range.get(2)) {
        if !masters.contains(&master) {
            masters.push(master);
        }
    }
    if masters.len() > 1 {
        bail!(
            "the server at {} is a node of a Redis Cluster ({} masters share its slots), and a \
             filter's keys live on the node of their slot: give its URL (or any node's) with \
             --cluster instead of --url",
            target.addr,
            masters.len(),
        );
    }
    Ok(())
}

/// The sentinels' own credentials (`--sentinel-user`, `--sentinel-password`).
#[derive(Clone, Copy, Default)]
pub(crate) struct SentinelAuth<'a> {
    pub(crate) user: Option<&'a str>,
    pub(crate) password: Option<&'a str>,
}

/// Connects to the `node` (the master, or a replica) that the sentinels of `url`
/// (`redis+sentinel://…`) name, with a connection that asks them again after a lost
/// connection, a timeout or `READONLY` (`redbloom::sentinel`). `tls_ca` is trusted for the
/// sentinels and the nodes alike (`rediss+sentinel://`): the sentinels announce the nodes by
/// IP address, so the nodes' certificates must name those addresses. Sentinels that cannot be reached yet, or that name
/// no master yet, are tried again for `timeouts.retry_for`.
pub(crate) async fn connect_sentinel(
    url: &str,
    tls_ca: Option<&Path>,
    auth: SentinelAuth<'_>,
    node: Node,
    timeouts: Timeouts,
) -> Result<Server> {
    let parsed: SentinelUrl = url.parse().map_err(|err| anyhow!("invalid --url: {err}"))?;
    if tls_ca.is_some() && !parsed.tls {
        bail!("--tls-ca needs a rediss:// or rediss+sentinel:// URL (TLS); --url is not one");
    }
    if parsed.tls {
        install_crypto_provider();
    }
    let mut builder = parsed
        .client(node)
        .map_err(|err| anyhow!("invalid --url: {err}"))?;
    if let Some(user) = auth.user {
        builder = builder.set_client_to_sentinel_username(user);
    }
    if let Some(password) = auth.password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    if let Some(ca) = tls_ca {
        let pem = read_ca_pem(ca)?;
        let certs = |pem: &[u8]| redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem.to_vec()),
        };
        builder = builder
            .set_client_to_redis_certificates(certs(&pem))
            .set_client_to_sentinel_certificates(certs(&pem));
    }
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeouts.connect))
        .set_response_timeout(Some(timeouts.response));
    let (host, port) = parsed.sentinels[0].clone();
    let target = Target {
        addr: parsed
            .sentinels
            .iter()
            .map(|(host, port)| format!("{host}:{port}"))
            .collect::<Vec<_>>()
            .join(", "),
        tcp: Some((host, port)),
        tls: parsed.tls,
        user: parsed.username.clone(),
        custom_ca: tls_ca.is_some(),
        what: "the sentinels",
    };
    let client = builder
        .build()
        .map_err(|err| anyhow!("invalid --url: {err}"))?;
    let conn = SentinelConnection::new(client, node, config);
    retry_first(timeouts, &target, || conn.ensure_connected()).await?;
    Ok(Server::Sentinel(conn))
}

/// What a connection failure is reported against: the server's address (never the URL, which
/// may hold a password) and what was asked of it.
struct Target {
    /// `host:port`, or a socket's path.
    addr: String,
    /// Host and port to probe, for TCP.
    tcp: Option<(String, u16)>,
    tls: bool,
    user: Option<String>,
    custom_ca: bool,
    /// "Redis", or "the Redis Cluster" (whose `addr` lists the seeds).
    what: &'static str,
}

impl Target {
    fn new(info: &ConnectionInfo, custom_ca: bool, what: &'static str) -> Target {
        let tcp = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                Some((host.clone(), *port))
            }
            _ => None,
        };
        Target {
            addr: info.addr().to_string(),
            tcp,
            tls: matches!(info.addr(), ConnectionAddr::TcpTls { .. }),
            user: info.redis_settings().username().map(str::to_owned),
            custom_ca,
            what,
        }
    }
}

/// Runs `attempt` (one try at connecting) until it succeeds, fails in a way that waiting cannot
/// mend (see [`diagnose`]), or `budget` is spent: a server that is down or starting is waited
/// for, with the library's backoff (`Retry::for_duration`: 50 ms, doubling, at most 1 s).
///
/// On a terminal (`timeouts.tell_waiting`), the first wait says at once, on stderr, what it
/// waits for (the address and the cause) and for how long at most; the error at the end, if
/// any, is the one line as ever.
async fn retry_first<T, F, Fut>(timeouts: Timeouts, target: &Target, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = RedisResult<T>>,
{
    let budget = timeouts.retry_for;
    let mut told = !timeouts.tell_waiting;
    let policy = Retry::for_duration(budget);
    let started = Instant::now();
    let mut delay = policy.first_delay;
    loop {
        let err = match attempt().await {
            Ok(conn) => return Ok(conn),
            Err(err) => err,
        };
        if let Some(lasting) = diagnose(&err, target).await {
            return Err(lasting);
        }
        let retry_at = Instant::now() + delay;
        if retry_at.duration_since(started) >= policy.budget {
            let err = connect_error(&err, target);
            return Err(match budget.is_zero() {
                true => err,
                false => anyhow!(
                    "{err} (still failing after {:.1} s of --retry-for)",
                    started.elapsed().as_secs_f64()
                ),
            });
        }
        if !told {
            told = true;
            eprintln!(
                "redbloom: {}; waiting for it, at most {} (--retry-for; Ctrl-C stops)",
                connect_error(&err, target),
                seconds(budget)
            );
        }
        tokio::time::sleep_until(retry_at).await;
        delay = (delay * 2).min(policy.max_delay);
    }
}

/// `30 s`, `1.5 s`: a duration as `--retry-for` takes it.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// The error to stop at, when waiting cannot mend `err`: a refused password, a certificate, a
/// server that does not speak Redis or not the URL's TLS-or-plain, a refusal by the server.
/// `None` for what passes: a server that is down, starting, loading its data or slow.
async fn diagnose(err: &RedisError, target: &Target) -> Option<anyhow::Error> {
    if is_auth_failure(err) {
        return Some(connect_error(err, target));
    }
    let text = err.to_string();
    if target.tls && certificate_problem(&text, target.custom_ca).is_some() {
        return Some(connect_error(err, target));
    }
    let garbled = err.kind() == ErrorKind::Parse
        || (target.tls && is_tls_garbled(&text))
        || (!target.tls && err.kind() == ErrorKind::UnexpectedReturnType);
    let lost = err.is_timeout() || err.is_connection_dropped() && !err.is_connection_refusal();
    if garbled || lost {
        if let Some(found) = probe(target).await {
            return Some(found.explain(target, &text));
        }
        if garbled {
            return Some(anyhow!(
                "cannot connect to {} at {}: the server did not answer as {} (is it a Redis \
                 port?): {text}",
                target.what,
                target.addr,
                if target.tls {
                    "Redis over TLS"
                } else {
                    "Redis"
                }
            ));
        }
        return None;
    }
    if err.is_io_error()
        || err.kind() == ErrorKind::ClusterConnectionNotFound
        || ["LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"]
            .iter()
            .any(|code| err.code() == Some(code))
    {
        return None;
    }
    Some(connect_error(err, target))
}

/// Whether rustls's error says the bytes received were not TLS.
fn is_tls_garbled(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    [
        "corrupt message",
        "invalidcontenttype",
        "invalid message",
        "peer misbehaved",
    ]
    .iter()
    .any(|sign| text.contains(sign))
}

fn is_auth_failure(err: &RedisError) -> bool {
    // redis-rs keeps only "authentication failed"; Redis 6+ answers WRONGPASS to all three.
    err.kind() == ErrorKind::AuthenticationFailed || err.code() == Some("WRONGPASS")
}

/// What a second look at the server's port found.
enum Found {
    /// A TLS server, to a redis:// URL.
    Tls,
    /// A plain Redis, to a rediss:// URL.
    PlainRedis,
    /// Something that is not Redis, which answered this first line.
    NotRedis(String),
}

impl Found {
    fn explain(&self, target: &Target, text: &str) -> anyhow::Error {
        let (what, addr) = (target.what, &target.addr);
        match self {
            Found::Tls => anyhow!(
                "cannot connect to {what} at {addr}: the server speaks TLS; use a rediss:// URL \
                 ({text})"
            ),
            Found::PlainRedis => anyhow!(
                "cannot connect to {what} at {addr}: the server may not speak TLS: it answers \
                 plain Redis (use a redis:// URL, or the server's TLS port) ({text})"
            ),
            Found::NotRedis(said) => anyhow!(
                "cannot connect to {what} at {addr}: the server did not answer as Redis (is it a \
                 Redis port?); it said {said:?}"
            ),
        }
    }
}

/// Looks again at the target's port, the other way round from the URL: a TLS hello for a
/// redis:// URL, a plain PING for rediss:// (and for redis:// when the hello gets nothing that
/// looks like TLS). `None` when nothing tells.
async fn probe(target: &Target) -> Option<Found> {
    let (host, port) = target.tcp.as_ref()?;
    if !target.tls {
        let hello = client_hello(host)?;
        let reply = exchange(host, *port, &hello).await;
        if reply.len() >= 2 && matches!(reply[0], 0x15 | 0x16) && reply[1] == 0x03 {
            return Some(Found::Tls);
        }
    }
    let reply = exchange(host, *port, b"PING\r\n").await;
    let line = reply.split(|&b| b == b'\n').next().unwrap_or_default();
    match reply.first() {
        None => None,
        Some(b'+' | b'-') if target.tls => Some(Found::PlainRedis),
        Some(b'+' | b'-') => None,
        Some(_) => {
            let said = String::from_utf8_lossy(line);
            let said: String = said.trim_end().chars().take(60).collect();
            Some(Found::NotRedis(said))
        }
    }
}

/// Sends `bytes` to `host:port` and returns the first bytes of the answer (empty when there is
/// none within a second, or the connection fails).
async fn exchange(host: &str, port: u16, bytes: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let talk = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await?;
        stream.write_all(bytes).await?;
        let mut reply = vec![0; 256];
        let n = stream.read(&mut reply).await?;
        reply.truncate(n);
        Ok::<_, std::io::Error>(reply)
    };
    match tokio::time::timeout(Duration::from_secs(1), talk).await {
        Ok(Ok(reply)) => reply,
        _ => Vec::new(),
    }
}

/// The bytes of a TLS ClientHello to `host`, as rustls sends it (nothing is verified: the
/// answer is only looked at, never used).
fn client_hello(host: &str) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = ServerName::try_from(host.to_owned())
        .unwrap_or_else(|_| ServerName::try_from("localhost").expect("a valid name"));
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).ok()?;
    Some(hello)
}

/// The client a near cache opens its tracking connection with (`CLIENT TRACKING`, see
/// `redbloom::NearCache::tracking`): the address, user, password and database of `url`, as
/// the CLI's own connection has them. With `tls_ca`, redis-rs's TLS trusts the file's
/// certificates as roots: a CA works; a server's own self-signed certificate, which rustls
/// does not take as a root of itself, leaves the copy without tracking (it is then read
/// every interval), and says so in the bench's `"tracking": false`.
pub(crate) fn tracking_client(url: &str, tls_ca: Option<&Path>) -> Result<redis::Client> {
    let Some(ca) = tls_ca else {
        return redis::Client::open(url).map_err(|err| anyhow!("invalid --url: {err}"));
    };
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(read_ca_pem(ca)?),
    };
    redis::Client::build_with_tls(url, certs).map_err(|err| {
        anyhow!(
            "cannot use the CA certificates of {} for the near cache's tracking connection: {err}",
            ca.display()
        )
    })
}

/// The most bytes read from `--tls-ca`: a bundle of hundreds of certificates (the system's
/// whole store is about 200 KiB).
const MAX_CA_BYTES: u64 = 4 << 20;

/// The bytes of the `--tls-ca` file, at most [`MAX_CA_BYTES`].
fn read_ca_pem(path: &Path) -> Result<Vec<u8>> {
    let shown = path.display();
    // Read at most a bound, so that `--tls-ca /dev/zero` (or any endless file) is an error,
    // not a process that grows until the machine runs out of memory.
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_CA_BYTES + 1).read_to_end(&mut pem))
        .with_context(|| format!("cannot read --tls-ca {shown}"))?;
    if pem.len() as u64 > MAX_CA_BYTES {
        bail!("invalid --tls-ca {shown}: longer than {MAX_CA_BYTES} bytes, too long for a PEM file of certificates");
    }
    Ok(pem)
}

/// The certificates of the PEM file, once it is known to hold at least one.
fn read_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let shown = path.display();
    let pem = read_ca_pem(path)?;
    let mut certificates = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        certificates.push(
            cert.map_err(|err| anyhow!("invalid --tls-ca {shown}: not a PEM certificate: {err}"))?,
        );
    }
    if certificates.is_empty() {
        bail!("invalid --tls-ca {shown}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it");
    }
    Ok(certificates)
}

fn install_crypto_provider() {
    // Fails only when a provider is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// One line naming the cause: the address, the user for an authentication failure, a hint for
/// an untrusted certificate; never the password.
fn connect_error(err: &RedisError, target: &Target) -> anyhow::Error {
    let (what, addr) = (target.what, &target.addr);
    if is_auth_failure(err) {
        let user = target.user.as_deref().unwrap_or("default");
        return anyhow!(
            "authentication failed at {addr} as user {user:?}: the server refused the password \
             (WRONGPASS: wrong password, unknown user, or user disabled)"
        );
    }
    let text = err.to_string();
    if target.tls {
        if let Some(problem) = certificate_problem(&text, target.custom_ca) {
            return anyhow!(
                "cannot connect to {what} at {addr}: TLS handshake failed ({problem}): {text}"
            );
        }
    }
    if text.contains("cluster support disabled") {
        return anyhow!(
            "cannot connect to {what} at {addr}: the server is not a Redis Cluster (cluster \
             support disabled); for a single server use --url instead of --cluster"
        );
    }
    anyhow!("cannot connect to {what} at {addr}: {text}")
}

/// What was wrong with the server's certificate, when rustls refused it (`text` is its error).
fn certificate_problem(text: &str, custom_ca: bool) -> Option<&'static str> {
    let text = text.to_ascii_lowercase().replace(' ', "");
    Some(if text.contains("notvalidforname") {
        "the server's certificate does not name the host of --url"
    } else if text.contains("causedasendentity") && custom_ca {
        "the server's certificate is a self-signed one that --tls-ca does not hold, nor a CA of"
    } else if text.contains("causedasendentity") {
        "the server's certificate is self-signed: trust it with --tls-ca FILE"
    } else if text.contains("unknownissuer") && custom_ca {
        "the server's certificate is not signed by the --tls-ca CA"
    } else if text.contains("unknownissuer") {
        "the server's certificate is signed by a CA this machine does not trust: give it with --tls-ca FILE"
    } else if text.contains("expired") {
        "the server's certificate has expired"
    } else if text.contains("notvalidyet") {
        "the server's certificate is not valid yet"
    } else if text.contains("certificate") {
        "the server's certificate was refused"
    } else {
        return None;
    })
}
