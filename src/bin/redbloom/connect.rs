//! The connection to Redis: one server (`--url`) or a Redis Cluster (`--cluster`), TLS
//! (`rediss://`, optionally trusting a private CA given by `--tls-ca`) and ACL users
//! (`user:password@`).
//!
//! Errors name the server's address and the CA file, never the URL itself, which may hold a
//! password.

use anyhow::{anyhow, bail, Context, Result};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_read_routing::RandomReplicaStrategy;
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use redis::{ConnectionAddr, ErrorKind, RedisError, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::Path;
use std::time::Duration;

/// One server, through a connection that reconnects by itself, or a Redis Cluster, whose
/// connection follows the slots (MOVED/ASK) and reconnects to its nodes.
#[derive(Clone)]
pub(crate) enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(conn) => conn.req_packed_command(cmd),
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
            Connection::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(conn) => conn.get_db(),
            Connection::Cluster(conn) => conn.get_db(),
        }
    }
}

/// Connects to the Redis Cluster whose nodes include `seeds` (comma-separated URLs); with
/// `read_from_replicas`, read-only commands go to a random replica of their slot.
pub(crate) async fn connect_cluster(
    seeds: &str,
    timeout: Duration,
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
    // redis-rs's messages about a URL never quote it, so they cannot leak its password.
    let mut builder = ClusterClient::builder(nodes)
        .connection_timeout(timeout)
        .response_timeout(timeout);
    if read_from_replicas {
        builder = builder.read_routing_strategy(RandomReplicaStrategy);
    }
    let client = builder
        .build()
        .map_err(|err| anyhow!("invalid --cluster: {err}"))?;
    let mut conn = client
        .get_async_connection()
        .await
        .map_err(|err| anyhow!("cannot connect to the Redis Cluster: {err}"))?;
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
/// filter's retries then succeed once the server is back). `tls_ca` is a PEM file of CA
/// certificates trusted, instead of the system's, for a `rediss://` URL.
pub(crate) async fn connect(
    url: &str,
    tls_ca: Option<&Path>,
    timeout: Duration,
) -> Result<ConnectionManager> {
    let client = client(url, tls_ca)?;
    let info = client.get_connection_info();
    let addr = info.addr().to_string();
    let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
    let user = info.redis_settings().username().map(str::to_owned);
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        // Reconnection attempts per lost connection; the filter's retry budget bounds the rest.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1));
    client
        .get_connection_manager_with_config(config)
        .await
        .map_err(|err| connect_error(&err, &addr, tls, user.as_deref(), tls_ca.is_some()))
}

/// The client for `url`, with `tls_ca` as its only trusted CA when given.
fn client(url: &str, tls_ca: Option<&Path>) -> Result<redis::Client> {
    // redis-rs's messages about a URL never quote it, so they cannot leak its password.
    let invalid_url = |err: RedisError| anyhow!("invalid --url: {err}");
    let client = redis::Client::open(url).map_err(invalid_url)?;
    let tls = matches!(
        client.get_connection_info().addr(),
        ConnectionAddr::TcpTls { .. }
    );
    if tls {
        // rustls needs a crypto provider; pick ring even when another crate's features made
        // more than one available.
        install_crypto_provider();
    }
    let Some(ca) = tls_ca else {
        return Ok(client);
    };
    if !tls {
        bail!("--tls-ca needs a rediss:// URL (TLS); --url is not one");
    }
    let pem = read_ca(ca)?;
    redis::Client::build_with_tls(
        url,
        TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        },
    )
    .with_context(|| format!("cannot use the CA certificates of {}", ca.display()))
}

/// The PEM file's bytes, once it is known to hold at least one well-formed certificate.
fn read_ca(path: &Path) -> Result<Vec<u8>> {
    let shown = path.display();
    let pem = std::fs::read(path).with_context(|| format!("cannot read --tls-ca {shown}"))?;
    let mut certificates = 0;
    for cert in CertificateDer::pem_slice_iter(&pem) {
        cert.map_err(|err| anyhow!("invalid --tls-ca {shown}: not a PEM certificate: {err}"))?;
        certificates += 1;
    }
    if certificates == 0 {
        bail!("invalid --tls-ca {shown}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it");
    }
    Ok(pem)
}

fn install_crypto_provider() {
    // Fails only when a provider is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// One line naming the cause: the address, the user for an authentication failure, a hint for
/// an untrusted certificate; never the password.
fn connect_error(
    err: &RedisError,
    addr: &str,
    tls: bool,
    user: Option<&str>,
    custom_ca: bool,
) -> anyhow::Error {
    if err.kind() == ErrorKind::AuthenticationFailed || err.code() == Some("WRONGPASS") {
        // redis-rs keeps only "authentication failed"; Redis 6+ answers WRONGPASS to all three.
        let user = user.unwrap_or("default");
        return anyhow!(
            "authentication failed at {addr} as user {user:?}: the server refused the password \
             (WRONGPASS: wrong password, unknown user, or user disabled)"
        );
    }
    let text = err.to_string();
    if tls {
        if let Some(problem) = certificate_problem(&text, custom_ca) {
            return anyhow!(
                "cannot connect to Redis at {addr}: TLS handshake failed ({problem}): {text}"
            );
        }
    }
    anyhow!("cannot connect to Redis at {addr}: {text}")
}

/// What was wrong with the server's certificate, when rustls refused it (`text` is its error).
fn certificate_problem(text: &str, custom_ca: bool) -> Option<&'static str> {
    let text = text.to_ascii_lowercase().replace(' ', "");
    Some(if text.contains("notvalidforname") {
        "the server's certificate does not name the host of --url"
    } else if text.contains("unknownissuer") && custom_ca {
        "the server's certificate is not signed by the --tls-ca CA"
    } else if text.contains("unknownissuer") {
        "the server's certificate is signed by a CA this machine does not trust: give it with --tls-ca FILE"
    } else if text.contains("expired") {
        "the server's certificate has expired"
    } else if text.contains("certificate") {
        "the server's certificate was refused"
    } else {
        return None;
    })
}
