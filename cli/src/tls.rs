//! `--tls-ca FILE` as SPEC.md §3 has it: FILE holds either a CA that signed the server's
//! certificate, or the server's own self-signed certificate — which `openssl req -x509` marks
//! a CA (basicConstraints CA:TRUE), so that webpki refuses it as the server's certificate
//! (`CaUsedAsEndEntity`) although `redis-cli --tls --cacert FILE` accepts it.
//!
//! redis-rs builds its rustls configuration itself, from root certificates only, and takes no
//! certificate verifier (`TlsCertificates` has a client identity and roots; no hook reaches the
//! `ClientConfig`). So with `--tls-ca` the CLI opens its TLS connections itself (tokio-rustls,
//! ring) and hands each stream to redis-rs's `MultiplexedConnection`, which does the rest (AUTH,
//! SELECT, pipelining); [`TlsConnection`] reconnects on the next call after a lost connection,
//! as redis-rs's `ConnectionManager` does for other URLs.

use crate::config::Timeouts;
use anyhow::{anyhow, Result};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Cmd, Pipeline, RedisConnectionInfo, RedisFuture, RedisResult};
use redis::{RedisError, Value};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, WebPkiServerVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls::{Error as TlsError, SignatureScheme};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_rustls::TlsConnector;

/// The rustls configuration trusting `certs` (from `--tls-ca`) as [`PinnedOrSignedBy`] does.
pub(crate) fn client_config(certs: Vec<CertificateDer<'static>>) -> Result<Arc<ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for cert in &certs {
        roots
            .add(cert.clone())
            .map_err(|err| anyhow!("not a usable CA certificate: {err}"))?;
    }
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|err| anyhow!("{err}"))?;
    let verifier = PinnedOrSignedBy {
        pinned: certs,
        webpki,
        provider: provider.clone(),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| anyhow!("{err}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts the server's certificate when webpki does with `--tls-ca`'s certificates as roots
/// (a CA that signed it, or a self-signed certificate without the CA mark), or when it is
/// byte for byte one of those certificates and webpki's only objection is that it is marked a
/// CA.
///
/// The exact certificate still has to name the host of the URL, as with a CA: one rule for both
/// kinds of FILE, and the recipe SPEC.md gives (`subjectAltName=DNS:localhost,IP:127.0.0.1`)
/// passes it. Its validity period is checked too: webpki checks the dates before the CA mark
/// (an expired or not yet valid certificate is refused with that reason, never reaching here).
/// Signatures of the handshake are checked against its key, with ring's algorithms.
#[derive(Debug)]
struct PinnedOrSignedBy {
    pinned: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedOrSignedBy {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(refused) => refused,
        };
        let pinned = self
            .pinned
            .iter()
            .any(|cert| cert.as_ref() == end_entity.as_ref());
        if !(pinned && is_ca_used_as_end_entity(&refused)) {
            return Err(refused);
        }
        verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Whether webpki refused the certificate only for being marked a CA (rustls passes this
/// error on as webpki's own, inside `CertificateError::Other`).
fn is_ca_used_as_end_entity(err: &TlsError) -> bool {
    let TlsError::InvalidCertificate(CertificateError::Other(other)) = err else {
        return false;
    };
    matches!(
        other.0.downcast_ref::<webpki::Error>(),
        Some(webpki::Error::CaUsedAsEndEntity)
    )
}

/// One server over TLS opened here (see the module docs); after a lost connection the next call
/// opens a new one, and the filter's retries give it the time to.
#[derive(Clone)]
pub(crate) struct TlsConnection(Arc<Inner>);

struct Inner {
    host: String,
    port: u16,
    server_name: ServerName<'static>,
    connector: TlsConnector,
    redis: RedisConnectionInfo,
    timeouts: Timeouts,
    /// The open connection, numbered so that a failed call forgets only the one it used.
    current: Mutex<Option<(u64, MultiplexedConnection)>>,
}

impl TlsConnection {
    /// Opens the first connection to `host:port`, failing with its error.
    pub(crate) async fn connect(
        host: &str,
        port: u16,
        config: Arc<ClientConfig>,
        redis: RedisConnectionInfo,
        timeouts: Timeouts,
    ) -> RedisResult<Self> {
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|err| RedisError::from(std::io::Error::other(err)))?;
        let conn = TlsConnection(Arc::new(Inner {
            host: host.to_owned(),
            port,
            server_name,
            connector: TlsConnector::from(config),
            redis,
            timeouts,
            current: Mutex::new(None),
        }));
        conn.current().await?;
        Ok(conn)
    }

    /// The open connection, opened now when there is none.
    async fn current(&self) -> RedisResult<(u64, MultiplexedConnection)> {
        let mut current = self.0.current.lock().await;
        if let Some(open) = &*current {
            return Ok(open.clone());
        }
        let generation = next_generation();
        let open = (generation, self.0.open().await?);
        *current = Some(open.clone());
        Ok(open)
    }

    /// Forgets connection `generation` after an error that leaves it unusable.
    async fn forget_if_lost<T>(&self, generation: u64, result: &RedisResult<T>) {
        if result
            .as_ref()
            .is_err_and(RedisError::is_unrecoverable_error)
        {
            let mut current = self.0.current.lock().await;
            if current
                .as_ref()
                .is_some_and(|(open, _)| *open == generation)
            {
                *current = None;
            }
        }
    }
}

/// Numbers connections in the order they were opened.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Inner {
    /// TCP, the TLS handshake and redis-rs's setup (AUTH, SELECT), within the connect timeout.
    async fn open(&self) -> RedisResult<MultiplexedConnection> {
        let open = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port)).await?;
            tcp.set_nodelay(true)?;
            let tls = self
                .connector
                .connect(self.server_name.clone(), tcp)
                .await?;
            let config =
                AsyncConnectionConfig::new().set_response_timeout(Some(self.timeouts.response));
            let (conn, driver) =
                MultiplexedConnection::new_with_config(&self.redis, tls, config).await?;
            tokio::spawn(driver);
            Ok(conn)
        };
        tokio::time::timeout(self.timeouts.connect, open)
            .await
            .unwrap_or_else(|_| Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()))
    }
}

impl ConnectionLike for TlsConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (generation, mut conn) = self.current().await?;
            let result = conn.req_packed_command(cmd).await;
            self.forget_if_lost(generation, &result).await;
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (generation, mut conn) = self.current().await?;
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            self.forget_if_lost(generation, &result).await;
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.0.redis.db()
    }
}
