//! Redis Sentinel: a connection to the master (or a replica) of a group the sentinels monitor,
//! which follows the group across failovers (feature `sentinel`).
//!
//! redis-rs's `sentinel` module finds the master once: a [`SentinelClient`] hands out a
//! [`Client`](redis::Client) for the node the sentinels name at that moment, and a connection
//! from it stays with that node. [`SentinelConnection`] is the smallest layer on top: it holds
//! one multiplexed connection to the node the sentinels named, and when a command meets a lost
//! connection, a timeout, or `READONLY` (the master was demoted), it drops that connection; the
//! next command asks the sentinels again, connects, and confirms the node's role with `ROLE`
//! before using it. It also listens to a sentinel's `+switch-master`, so that after a failover
//! the next command goes to the new master at once. It does not retry by itself: the failed
//! command's error goes back to the filter, whose [`Retry`](crate::Retry) policy sends it again
//! once the sentinels name the new master (a write retried so is answered exactly, as after any
//! lost reply, or fails with [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when the new
//! master cannot prove that its first attempt, sent to the old one, was not applied).
//!
//! ```no_run
//! # async fn run() -> redbloom::Result<()> {
//! use redbloom::sentinel::{Node, SentinelConnection, SentinelUrl};
//! use redbloom::{Builder, Retry};
//! use std::time::Duration;
//!
//! let url: SentinelUrl = "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster".parse()?;
//! let client = url.client(Node::Master)?.build()?;
//! let conn = SentinelConnection::connect(client, Node::Master, Default::default()).await?;
//! let filter = Builder::new("seen")
//!     .expected_items(1_000_000)
//!     .false_positive_rate(0.01)
//!     // A failover takes the sentinels' down-after-milliseconds plus an election: a few seconds.
//!     .retry(Retry::for_duration(Duration::from_secs(30)))
//!     .build(conn)?;
//! filter.add(b"event-1").await?;
//! # Ok(())
//! # }
//! ```

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, Cmd, ConnectionAddr, Pipeline, RedisError, RedisFuture};
use redis::{RedisResult, TlsMode, Value};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Which node of the group a [`SentinelConnection`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// The master: every command of a filter (the default).
    Master,
    /// A replica the sentinels list (chosen at random), for reads only: a filter built on it
    /// answers checks; its writes fail with `READONLY`.
    Replica,
}

impl Node {
    fn server_type(self) -> SentinelServerType {
        match self {
            Node::Master => SentinelServerType::Master,
            Node::Replica => SentinelServerType::Replica,
        }
    }

    /// The first word of this node's `ROLE` reply.
    fn role(self) -> &'static str {
        match self {
            Node::Master => "master",
            Node::Replica => "slave",
        }
    }
}

/// A connection to the master (or a replica) that a group of sentinels names, following it
/// across failovers; see the [module docs](self). Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    /// redis-rs's client, which asks the sentinels (and caches its connections to them).
    sentinels: tokio::sync::Mutex<SentinelClient>,
    node: Node,
    config: AsyncConnectionConfig,
    /// The connection in use, with its generation; `None` once a fault dropped it.
    current: Mutex<Option<Current>>,
    /// Generations handed out.
    generations: AtomicU64,
    /// Whether the task that listens for the sentinels' `+switch-master` runs.
    watching: AtomicBool,
}

#[derive(Clone)]
struct Current {
    generation: u64,
    conn: MultiplexedConnection,
    addr: String,
}

impl SentinelConnection {
    /// Asks the sentinels of `client` for the `node` of its group, connects to it with `config`
    /// (its connection and response timeouts), and confirms its role with `ROLE`.
    ///
    /// `client` must have been built for the same kind of node (`SentinelServerType::Master`
    /// for [`Node::Master`]); [`SentinelUrl::client`] builds one.
    ///
    /// # Errors
    /// No sentinel answers, none knows the group, or the node it names cannot be reached or
    /// does not have the role asked for (a failover under way: try again).
    pub async fn connect(
        client: SentinelClient,
        node: Node,
        config: AsyncConnectionConfig,
    ) -> RedisResult<Self> {
        let conn = SentinelConnection::new(client, node, config);
        conn.ensure_connected().await?;
        Ok(conn)
    }

    /// The same as [`connect`](SentinelConnection::connect), connecting at the first command
    /// (or at [`ensure_connected`](SentinelConnection::ensure_connected)).
    pub fn new(client: SentinelClient, node: Node, config: AsyncConnectionConfig) -> Self {
        SentinelConnection {
            shared: Arc::new(Shared {
                sentinels: tokio::sync::Mutex::new(client),
                node,
                config,
                current: Mutex::new(None),
                generations: AtomicU64::new(0),
                watching: AtomicBool::new(false),
            }),
        }
    }

    /// Connects now, unless connected: asks the sentinels, connects to the node they name and
    /// confirms its role.
    ///
    /// # Errors
    /// As [`connect`](SentinelConnection::connect).
    pub async fn ensure_connected(&self) -> RedisResult<()> {
        self.current().await.map(drop)
    }

    /// Opens a connection to the `node` of the group `url` names, as
    /// [`connect`](SentinelConnection::connect) does with the client [`SentinelUrl::client`]
    /// builds (no credentials of the sentinels' own: build the client yourself for those).
    ///
    /// # Errors
    /// As [`connect`](SentinelConnection::connect).
    pub async fn open(
        url: &SentinelUrl,
        node: Node,
        config: AsyncConnectionConfig,
    ) -> RedisResult<Self> {
        SentinelConnection::connect(url.client(node)?.build()?, node, config).await
    }

    /// The address (`host:port`) of the node in use, if connected.
    pub fn node_address(&self) -> Option<String> {
        self.lock().as_ref().map(|current| current.addr.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Current>> {
        // A panic while holding the lock leaves nothing half-written: the value is replaced
        // whole.
        self.shared
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection in use, or a new one to the node the sentinels name now (one caller asks
    /// them; the others wait for its answer).
    async fn current(&self) -> RedisResult<Current> {
        if let Some(current) = self.lock().clone() {
            return Ok(current);
        }
        let mut sentinels = self.shared.sentinels.lock().await;
        if let Some(current) = self.lock().clone() {
            return Ok(current);
        }
        let client = sentinels
            .async_get_client()
            .await
            .map_err(|err| none_named(err, self.shared.node))?;
        if !self.shared.watching.swap(true, Ordering::Relaxed) {
            // A sentinel to listen to, found now that the sentinels answer.
            match sentinels.async_get_sentinel_client().await {
                Ok(sentinel) => {
                    tokio::spawn(watch(Arc::downgrade(&self.shared), sentinel));
                }
                Err(_) => self.shared.watching.store(false, Ordering::Relaxed),
            }
        }
        drop(sentinels);
        let addr = client.get_connection_info().addr().to_string();
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&self.shared.config)
            .await?;
        // redis-rs checked the role on a connection of its own; this one may have reached the
        // node after a failover moved on.
        let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut conn).await?;
        let role = match role.first() {
            Some(Value::BulkString(word)) => String::from_utf8_lossy(word).into_owned(),
            Some(Value::SimpleString(word)) => word.clone(),
            _ => String::new(),
        };
        if role != self.shared.node.role() {
            return Err(not_yet(&addr, &role, self.shared.node));
        }
        let current = Current {
            generation: self.shared.generations.fetch_add(1, Ordering::Relaxed) + 1,
            conn,
            addr,
        };
        *self.lock() = Some(current.clone());
        tracing::debug!(target: "redbloom::sentinel", node = %current.addr, "connected");
        Ok(current)
    }

    /// After a command's error: a fault that a new node (or a new connection to it) may mend
    /// drops the connection of `generation`, so that the next command asks the sentinels again.
    fn after(&self, generation: u64, err: &RedisError) {
        if !moves_on(err) {
            return;
        }
        let mut current = self.lock();
        if current.as_ref().is_some_and(|c| c.generation == generation) {
            tracing::info!(
                target: "redbloom::sentinel",
                node = %current.as_ref().map(|c| c.addr.as_str()).unwrap_or_default(),
                error = %err,
                "asking the sentinels again"
            );
            *current = None;
        }
    }
}

/// Listens to a sentinel's `+switch-master` for as long as the connection lives: a failover
/// drops the connection to the old master (or to a replica, which may have been promoted) before
/// the next command, so that it goes to the new master as a first attempt, not as a retry after
/// the old master closed the connection (the sentinels close its clients when they demote it).
/// Commands in flight during a failover fail and are retried as ever. The subscription is
/// opened again (after a second) when its connection is lost.
async fn watch(shared: Weak<Shared>, sentinel: redis::Client) {
    use futures_util::StreamExt;
    loop {
        if shared.strong_count() == 0 {
            return;
        }
        if let Ok(mut pubsub) = sentinel.get_async_pubsub().await {
            if pubsub.subscribe("+switch-master").await.is_ok() {
                let mut messages = pubsub.into_on_message();
                while let Some(message) = messages.next().await {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    // "<name> <old ip> <old port> <new ip> <new port>": any group's failover
                    // (a sentinel may watch several; redis-rs's client does not say which group
                    // this one is) makes the next command ask the sentinels again, which costs
                    // one lookup.
                    let text: String = message.get_payload().unwrap_or_default();
                    tracing::info!(target: "redbloom::sentinel", switch = %text, "failover");
                    *shared
                        .current
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Whether `err` is a fault after which the connection's node may no longer be the one to use:
/// the connection lost or timed out (the node down, stopped, or cut off), or `READONLY` (a master
/// demoted to a replica by a failover).
fn moves_on(err: &RedisError) -> bool {
    let readonly = |code: &str| code == "READONLY";
    err.is_io_error()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_timeout()
        || err.is_unrecoverable_error()
        || err.code().is_some_and(readonly)
        || err
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, e)| readonly(e.code())))
}

/// The sentinels' "no such master" (or no valid replica), which they answer while a failover
/// is under way as well as for a group they do not know: a connection refusal (nothing was
/// sent; the filter's retries ask again), naming the node asked for.
fn none_named(err: RedisError, node: Node) -> RedisError {
    use redis::ErrorKind;
    match err.kind() {
        ErrorKind::MasterNameNotFoundBySentinel | ErrorKind::NoValidReplicasFoundBySentinel => {
            RedisError::from(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                format!(
                    "no sentinel names a valid {} of the group now (a failover under way, or a \
                     group they do not monitor): {err}",
                    match node {
                        Node::Master => "master",
                        Node::Replica => "replica",
                    }
                ),
            ))
        }
        _ => err,
    }
}

/// The error of a node that does not (yet) have the role asked for: a connection refusal, so
/// that the filter retries it as a command that was not run (nothing was sent).
fn not_yet(addr: &str, role: &str, node: Node) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!(
            "the sentinels name {addr} as the {}, but its ROLE is {role:?} (a failover under \
             way?)",
            match node {
                Node::Master => "master",
                Node::Replica => "replica",
            }
        ),
    ))
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut current = self.current().await?;
            let result = current.conn.req_packed_command(cmd).await;
            if let Err(err) = &result {
                self.after(current.generation, err);
            }
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
            let mut current = self.current().await?;
            let result = current
                .conn
                .req_packed_commands(pipeline, offset, count)
                .await;
            if let Err(err) = &result {
                self.after(current.generation, err);
            }
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.lock()
            .as_ref()
            .map_or(0, |current| current.conn.get_db())
    }
}

impl fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("node", &self.shared.node)
            .field("address", &self.node_address())
            .finish()
    }
}

/// A parsed `redis+sentinel://[USER:PASS@]HOST:PORT[,HOST:PORT…]/MASTER[/DB]` URL (or
/// `rediss+sentinel://`, TLS to the sentinels and the nodes): SPEC.md §3.
///
/// The credentials are the data nodes' (the master's and replicas'); sentinels that need
/// their own take them on the client builder ([`SentinelUrl::client`], then
/// `set_client_to_sentinel_username`/`_password`). A port left out is 26379.
///
/// ```
/// use redbloom::sentinel::SentinelUrl;
///
/// let url: SentinelUrl = "redis+sentinel://app:s%40cret@10.0.0.1,10.0.0.2:26380/mymaster/2"
///     .parse()
///     .unwrap();
/// assert_eq!(url.sentinels, [("10.0.0.1".to_owned(), 26379), ("10.0.0.2".to_owned(), 26380)]);
/// assert_eq!((url.master.as_str(), url.db), ("mymaster", 2));
/// assert_eq!(url.password.as_deref(), Some("s@cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelUrl {
    /// The sentinels' hosts and ports, in the URL's order.
    pub sentinels: Vec<(String, u16)>,
    /// The monitored group's name (`sentinel monitor NAME …`).
    pub master: String,
    /// The data nodes' database.
    pub db: i64,
    /// The data nodes' ACL user.
    pub username: Option<String>,
    /// The data nodes' password.
    pub password: Option<String>,
    /// `rediss+sentinel://`: TLS to the sentinels and to the nodes they name.
    pub tls: bool,
}

impl fmt::Debug for SentinelUrl {
    /// Never shows the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelUrl")
            .field("sentinels", &self.sentinels)
            .field("master", &self.master)
            .field("db", &self.db)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("tls", &self.tls)
            .finish()
    }
}

/// Why a `redis+sentinel://` URL did not parse (never quoting it: it may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a redis+sentinel://[USER:PASS@]HOST:PORT[,HOST:PORT...]/MASTER[/DB] URL: {0}")]
pub struct SentinelUrlError(&'static str);

impl From<SentinelUrlError> for crate::Error {
    fn from(err: SentinelUrlError) -> Self {
        crate::Error::InvalidConfig(err.to_string())
    }
}

impl SentinelUrl {
    /// Whether `url` is a Sentinel URL (by its scheme), to tell it from a `redis://` one.
    pub fn is_sentinel(url: &str) -> bool {
        let lower = url.trim_start().to_ascii_lowercase();
        lower.starts_with("redis+sentinel://") || lower.starts_with("rediss+sentinel://")
    }

    /// A redis-rs client builder for the `node` of this URL's group, its credentials, database
    /// and TLS set; add the sentinels' own credentials or certificates before `build()`.
    ///
    /// # Errors
    /// From redis-rs's builder (none today for these settings).
    pub fn client(&self, node: Node) -> RedisResult<SentinelClientBuilder> {
        let addrs = self.sentinels.iter().map(|(host, port)| match self.tls {
            true => ConnectionAddr::TcpTls {
                host: host.clone(),
                port: *port,
                insecure: false,
                tls_params: None,
            },
            false => ConnectionAddr::Tcp(host.clone(), *port),
        });
        let mut builder = SentinelClientBuilder::new(addrs, &self.master, node.server_type())?
            .set_client_to_redis_db(self.db);
        if let Some(user) = &self.username {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = &self.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if self.tls {
            builder = builder
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure);
        }
        Ok(builder)
    }
}

impl FromStr for SentinelUrl {
    type Err = SentinelUrlError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let url = url.trim();
        let (scheme, rest) = url.split_once("://").ok_or(SentinelUrlError("no scheme"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "redis+sentinel" => false,
            "rediss+sentinel" => true,
            _ => {
                return Err(SentinelUrlError(
                    "the scheme is not redis+sentinel or rediss+sentinel",
                ))
            }
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(info) => {
                let (user, password) = match info.split_once(':') {
                    Some((user, password)) => (user, Some(password)),
                    None => (info, None),
                };
                let user = decode(user)?;
                (
                    (!user.is_empty()).then_some(user),
                    password.map(decode).transpose()?,
                )
            }
        };
        let sentinels = hosts
            .split(',')
            .map(host_port)
            .collect::<Result<Vec<_>, _>>()?;
        let mut parts = path.split('/').filter(|part| !part.is_empty());
        let master = decode(parts.next().ok_or(SentinelUrlError("no MASTER name"))?)?;
        let db = match parts.next() {
            Some(db) => db
                .parse()
                .map_err(|_| SentinelUrlError("DB is not a number"))?,
            None => 0,
        };
        if parts.next().is_some() {
            return Err(SentinelUrlError("more than MASTER and DB after the hosts"));
        }
        Ok(SentinelUrl {
            sentinels,
            master,
            db,
            username,
            password,
            tls,
        })
    }
}

/// One `HOST[:PORT]` of the list (`[v6]:PORT` too); the port defaults to 26379.
fn host_port(text: &str) -> Result<(String, u16), SentinelUrlError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(SentinelUrlError("an empty sentinel address"));
    }
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or(SentinelUrlError("an unclosed [ in an address"))?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(port) => port
            .parse()
            .map_err(|_| SentinelUrlError("a port is not a number from 1 to 65535"))?,
        None => 26379,
    };
    if host.is_empty() || port == 0 {
        return Err(SentinelUrlError("an address without host or port"));
    }
    Ok((host.to_owned(), port))
}

/// Percent-decoding of a URL part.
fn decode(text: &str) -> Result<String, SentinelUrlError> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| SentinelUrlError("a percent-encoded part is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_forms() {
        let url: SentinelUrl = "redis+sentinel://127.0.0.1:26379/mymaster".parse().unwrap();
        assert_eq!(url.sentinels, [("127.0.0.1".to_owned(), 26379)]);
        assert_eq!(
            (url.master.as_str(), url.db, url.tls),
            ("mymaster", 0, false)
        );
        assert_eq!((url.username.clone(), url.password.clone()), (None, None));

        let url: SentinelUrl = "rediss+sentinel://u:p%3Aw@a:1,[::1]:2,b/m/3"
            .parse()
            .unwrap();
        assert_eq!(
            url.sentinels,
            [
                ("a".to_owned(), 1),
                ("::1".to_owned(), 2),
                ("b".to_owned(), 26379)
            ]
        );
        assert_eq!((url.master.as_str(), url.db, url.tls), ("m", 3, true));
        assert_eq!(url.username.as_deref(), Some("u"));
        assert_eq!(url.password.as_deref(), Some("p:w"));
        let shown = format!("{url:?}");
        assert!(!shown.contains("p:w"), "{shown}");

        let url: SentinelUrl = "redis+sentinel://:secret@h:5/g".parse().unwrap();
        assert_eq!(
            (url.username, url.password.as_deref()),
            (None, Some("secret"))
        );
    }

    #[test]
    fn refuses_what_is_not_one_without_quoting_it() {
        for bad in [
            "redis://h:1/m",
            "redis+sentinel://h:1",
            "redis+sentinel://h:1/",
            "redis+sentinel://h:x/m",
            "redis+sentinel://h:0/m",
            "redis+sentinel://h:1,,h:2/m",
            "redis+sentinel://u:secret@h:1/m/zero",
            "redis+sentinel://h:1/m/0/extra",
            "redis+sentinel",
        ] {
            let err = bad.parse::<SentinelUrl>().unwrap_err().to_string();
            assert!(!err.contains("secret"), "{err}");
            assert!(err.contains("redis+sentinel://"), "{bad}: {err}");
        }
        assert!(SentinelUrl::is_sentinel(" Rediss+Sentinel://h/m"));
        assert!(!SentinelUrl::is_sentinel("redis://h"));
    }

    #[test]
    fn lost_connections_timeouts_and_readonly_move_on() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(moves_on(&io));
        let timeout = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(moves_on(&timeout));
        let readonly = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(moves_on(&readonly), "{readonly:?} {:?}", readonly.code());
        let other = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "ERR wrong number of arguments",
        ));
        assert!(!moves_on(&other));
    }
}
