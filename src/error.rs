//! The crate's one error type.

use redis::RedisError;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong when using a [`RedisBloom`](crate::RedisBloom).
///
/// `Display` says what went wrong in this crate's terms; the server's or the client library's
/// own words are in [`source`](std::error::Error::source), so print the chain (for example
/// `anyhow`'s `{:#}`) to see both.
///
/// Match on the variants to tell a caller's mistake ([`Error::InvalidConfig`],
/// [`Error::OffsetOutOfRange`], [`Error::WrongType`]) from a passing fault worth retrying
/// ([`Error::Timeout`], [`Error::Connection`]). Every variant that comes from Redis keeps the
/// [`RedisError`] as its [`source`](std::error::Error::source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The filter's configuration is invalid (bits, items, rate or key); nothing was sent.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// A bit offset is not below the filter's size; nothing was sent.
    ///
    /// The mirror of go-zero's `ErrTooLargeOffset`.
    #[error("bit offset {offset} is out of range for a filter of {bits} bits")]
    OffsetOutOfRange {
        /// The offending offset.
        offset: u64,
        /// The filter's size in bits.
        bits: u64,
    },

    /// The parameters stored beside a native filter differ from the ones this client was built
    /// with; using it anyway would give wrong answers. Nothing was written.
    #[error("filter {key:?} was created with {stored}, not {requested}")]
    ParamsMismatch {
        /// The filter's key.
        key: String,
        /// The stored parameters, as `field=value` pairs.
        stored: String,
        /// This client's parameters.
        requested: String,
    },

    /// The key exists but does not hold a string (Redis `WRONGTYPE`).
    #[error("key {key:?} holds a value that is not a string, so it is not a Bloom filter")]
    WrongType {
        /// The filter's key.
        key: String,
        /// The server's reply.
        #[source]
        source: RedisError,
    },

    /// No reply came within the connection's response timeout.
    ///
    /// Adding is idempotent (setting a bit that is already 1 changes nothing), so retrying an
    /// `add` after a timeout is safe.
    #[error("timed out waiting for Redis")]
    Timeout(#[source] RedisError),

    /// The connection to Redis could not be made or was lost.
    #[error("cannot reach Redis")]
    Connection(#[source] RedisError),

    /// Redis answered something this crate did not expect (another program changed the key, or a
    /// proxy altered the reply).
    #[error("unexpected reply from Redis: {0}")]
    UnexpectedReply(String),

    /// Any other error reported by Redis or by the client library.
    #[error("Redis answered with an error")]
    Redis(#[source] RedisError),
}

impl Error {
    /// Classifies an error from an operation on `key`.
    pub(crate) fn from_redis(err: RedisError, key: &str) -> Self {
        if has_server_code(&err, "WRONGTYPE") {
            Error::WrongType {
                key: key.to_owned(),
                source: err,
            }
        } else {
            Self::from(err)
        }
    }

    /// True for faults of the network or server that may pass: timeouts and lost connections.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::Connection(_))
    }
}

/// Whether the server answered `code`, directly or for any command of a pipeline or transaction
/// (redis-rs wraps those in one error whose own `code()` is `None`).
fn has_server_code(err: &RedisError, code: &str) -> bool {
    err.code() == Some(code)
        || err
            .clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, e)| e.code() == code))
}

impl From<RedisError> for Error {
    /// Sorts a [`RedisError`] into [`Error::Timeout`], [`Error::Connection`] or [`Error::Redis`].
    fn from(err: RedisError) -> Self {
        if err.is_timeout() {
            Error::Timeout(err)
        } else if err.is_io_error() || err.is_connection_dropped() || err.is_connection_refusal() {
            Error::Connection(err)
        } else {
            Error::Redis(err)
        }
    }
}
