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
/// ([`Error::Timeout`], [`Error::Connection`]: [`Error::is_transient`]) and from a connection
/// that will not come back ([`Error::Closed`]). Every variant that comes from Redis keeps the
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

    /// A part of the filter is gone though its stored parameters say it exists: evicted,
    /// deleted by hand, or expired apart from them. Its items are lost, so a check cannot say
    /// "absent"; nothing was written. Clear the filter to start again, or import a snapshot.
    /// (A go-zero layout filter has no such promise: there a missing key is an empty filter.)
    #[error(
        "key {key:?} of filter {filter:?} is gone, though the filter's stored parameters say \
         it exists (evicted, deleted, or expired apart from them): its items are lost; clear \
         the filter to start again, or import a snapshot"
    )]
    Lost {
        /// The filter's name.
        filter: String,
        /// The key that vanished.
        key: String,
    },

    /// The server that answered a check is a replica that is not in sync with its master
    /// (`ROLE` does not say `connected`: it has never synced, or is syncing, or lost its link),
    /// and it holds nothing of the filter: its "absent" would say nothing of the filter on the
    /// master, so the check fails instead (SPEC.md §3, "Replicas"). Read from the master, or
    /// from a replica once it has synced. Nothing was written.
    #[error(
        "the server answering for filter {key:?} is a replica that has not synced with its \
         master (replication state: {state}) and holds nothing of the filter, so it cannot say \
         absent: read from the master, or wait until the replica has synced"
    )]
    ReplicaNotSynced {
        /// The filter's name.
        key: String,
        /// The replica's replication state as `ROLE` names it (`connect`, `connecting`,
        /// `handshake`, `sync`), or, when the ACL refuses `ROLE`, as `INFO replication` tells
        /// it (`sync`, or `link down`).
        state: String,
    },

    /// The filter was made by a build of redbloom before 0.1's names (SPEC.md §3, "Names"),
    /// under companion keys (`{K}:redbloom:…`) that the keys `key` and `other` both produced,
    /// and nothing tells which of them it is: nothing was read or written. Take the filter for
    /// `key` with [`Bloom::adopt_legacy_names`](crate::Bloom::adopt_legacy_names) (the CLI:
    /// `redbloom --key KEY migrate`), or open it by `other`.
    #[error(
        "filter {key:?} may be one an earlier redbloom made under the names {legacy}* that the          keys {key:?} and {other:?} shared, and nothing tells which key it belongs to: nothing          was read or written; if it is {key:?}'s, run `redbloom --key {key} migrate`          (Bloom::adopt_legacy_names), else open it as {other:?}"
    )]
    LegacyNames {
        /// The filter's key.
        key: String,
        /// The other key that produced the same older names.
        other: String,
        /// The older names' common start.
        legacy: String,
    },

    /// A write was retried after its record could be gone (exact answers across retries keep
    /// a record of each write step for at least the retry budget and two seconds, by the
    /// server's clock, until its caller has the reply), so it may or may not have been applied
    /// before: its answers are unknown, and it was not applied again. The items it carried may
    /// be present; a counting write may have counted once, never twice.
    #[error(
        "a write to {key:?} was retried after its record could be gone ({step}): it may or may \
         not have been applied before, so its answers are unknown; it was not applied again"
    )]
    OutcomeUnknown {
        /// The key the write went to.
        key: String,
        /// The step and why its record could be gone (from the server), or what was lost.
        step: String,
    },

    /// A snapshot file holds another filter than the one it is imported into: another kind,
    /// other parameters or another shard count. Nothing was written.
    #[error("the file holds {file}, but filter {key:?} is {filter}: nothing was imported")]
    FileMismatch {
        /// The filter's key.
        key: String,
        /// What the file's header says it holds.
        file: String,
        /// What the filter is.
        filter: String,
    },

    /// The key holds a string with no stored parameters: not a filter that redbloom made. It
    /// may be a go-zero filter that a Go service wrote, or another program's value. Such a key
    /// is read as a go-zero filter, but written into, cleared or given a TTL only by a client
    /// that says it is a go-zero filter shared with Go
    /// ([`shared_with_go`](crate::Builder::shared_with_go); the CLI's `--shared-with-go`).
    /// Nothing was changed.
    #[error(
        "key {key:?} holds a string of {bytes} bytes with no stored parameters: not a filter \
         redbloom made, so it is left alone; if it is a go-zero filter shared with Go, say so \
         (shared_with_go(true), or --shared-with-go)"
    )]
    ForeignString {
        /// The key.
        key: String,
        /// The string's length.
        bytes: i64,
    },

    /// The server may evict the filter's keys (`maxmemory` with an `allkeys-*` policy, or a
    /// `volatile-*` one while the filter's keys carry a TTL: a window filter's generations,
    /// any filter after `expire`), and a filter that loses a key forgets its items: nothing
    /// was written. Set `maxmemory-policy noeviction` on the server (`volatile-*` policies
    /// suit filters without a TTL), or accept the risk with
    /// [`Builder::accept_eviction`](crate::Builder::accept_eviction) (the CLI's
    /// `--accept-eviction`).
    #[error(
        "the server holding filter {key:?} may evict its keys ({policy}{}), and a filter that \
         loses keys forgets items; nothing was written: set maxmemory-policy noeviction on the \
         server, or accept the risk (accept_eviction(true), or --accept-eviction)",
        if *ttl { ", which evicts keys with a TTL such as this filter's" } else { "" }
    )]
    Evictable {
        /// The filter's key.
        key: String,
        /// What the server said: its `maxmemory-policy` and `maxmemory`, or that the ACL
        /// refused `INFO`.
        policy: String,
        /// The filter's keys carry a TTL (or are about to).
        ttl: bool,
    },

    /// The server lacks commands the filter's kind needs: a module filter
    /// ([`ModuleBloom`](crate::ModuleBloom)) on a server without Bloom filters' `BF.*`
    /// commands (Redis 8 bundles them; RedisBloom and valkey-bloom add them). Nothing was
    /// written.
    #[error(
        "the server holding filter {key:?} lacks the commands {}: {instead}",
        missing.join(", ")
    )]
    MissingCommands {
        /// The filter's key.
        key: String,
        /// The commands the server does not know.
        missing: Vec<String>,
        /// What to do instead.
        instead: String,
    },

    /// The filter is full: it refused a new item, and nothing was written for it or for the
    /// items after it in the call (of its shard, for a sharded filter); the items before it
    /// went in (new, or there already). Which filters fill: a growing filter
    /// ([`GrowingBloom`](crate::GrowingBloom)) whose levels have all taken their capacity
    /// (raise [`max_levels`](crate::Builder::max_levels) or the growth factor, or start a new
    /// filter), and a module filter ([`ModuleBloom`](crate::ModuleBloom)) made by another
    /// client as non-scaling (`BF.RESERVE … NONSCALING`) that holds its capacity, or one the
    /// module cannot scale further.
    #[error(
        "filter {key:?} is full ({reason}): {added} items of the call went in (new or there \
         already) before it refused the rest"
    )]
    FilterFull {
        /// The filter's key.
        key: String,
        /// The items of the call (of its shard, for a sharded filter) answered before the
        /// refusal: added, or found there already.
        added: u64,
        /// Why it is full: a growing filter's levels and their capacity, or the server's words.
        reason: String,
    },

    /// A key of the filter holds another type than the filter keeps there (Redis
    /// `WRONGTYPE`): a hash where a filter's bits go, a string where a module filter or a
    /// growing filter's counts go; nothing was changed.
    #[error("{}", wrong_type(key, found, expected))]
    WrongType {
        /// The key: the filter's, or one it keeps beside it.
        key: String,
        /// What the key holds, as Redis's `TYPE` names it (`hash`, `list`, `set`, `zset`,
        /// `stream`, `MBbloom--`, ...).
        found: String,
        /// What the filter keeps at the key, as `TYPE` names it: `string` (a filter's bits,
        /// its parameters), `hash` (a growing filter's counts, the records of exact answers),
        /// a module type (`MBbloom--`: a module filter), `none` (nothing); alternatives joined
        /// by ` or `.
        expected: String,
        /// The server's reply.
        #[source]
        source: RedisError,
    },

    /// No reply to one command came within the connection's own response timeout (set on the
    /// redis-rs connection; 500 ms by default). Not to be confused with [`Error::Deadline`],
    /// the filter's limit on a whole call.
    ///
    /// A write that timed out may have been applied, in whole or in part: the command may have
    /// reached the server and run. Adding is idempotent (setting a bit that is already 1
    /// changes nothing), so retrying it is safe; only its "new" flags may then say `false`
    /// for items the first attempt added.
    #[error("timed out waiting for Redis")]
    Timeout(#[source] RedisError),

    /// The call did not finish within the filter's deadline,
    /// [`Builder::timeout`](crate::Builder::timeout): one limit for the whole public call,
    /// every step, shard and retry included. Not to be confused with [`Error::Timeout`], one
    /// command's reply overdue on the connection.
    #[error("the call did not finish within its deadline of {0:?} (retries included)")]
    Deadline(std::time::Duration),

    /// The user has no permission for a command or key (Redis ACL `NOPERM`): grant the filter's
    /// commands (see the README) on its keys.
    #[error("permission denied by the server's ACL (NOPERM){}", refused(.0))]
    NoPermission(#[source] RedisError),

    /// Redis refused a write because it reached `maxmemory` (`OOM`). The refused command wrote
    /// nothing, but a batch goes as several commands, and those sent before it may have been
    /// applied: their items are then in the filter (a repeated add finds them), and a counting
    /// filter's increments or decrements there are applied (repeating them counts twice).
    #[error("Redis is out of memory (OOM: used memory > maxmemory); the write was refused")]
    OutOfMemory(#[source] RedisError),

    /// Fewer replicas than asked for by [`Builder::wait_for_replicas`](crate::Builder::wait_for_replicas)
    /// confirmed a write in time. The write is on the primary; a failover now may lose it.
    #[error("only {acked} of {wanted} replicas confirmed the write in time")]
    NotReplicated {
        /// Replicas that confirmed.
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
    },

    /// The connection to Redis could not be made or was lost. It passes once the server is
    /// back if the connection reconnects (a `redis::aio::ConnectionManager` does); a
    /// `MultiplexedConnection` never reconnects, and with a retry budget its loss ends as
    /// [`Error::Closed`] instead.
    #[error("cannot reach Redis")]
    Connection(#[source] RedisError),

    /// The connection to Redis is closed and every try of the call until its retry budget
    /// ([`Builder::retry`](crate::Builder::retry)) was spent found it closed: it does not
    /// reconnect by itself, as a `redis::aio::MultiplexedConnection` never does, so every later
    /// call over it fails too, even once the server is back. Not transient: retrying over the
    /// same connection cannot help. Open the filter over a `redis::aio::ConnectionManager`,
    /// which reconnects, with a retry budget that spans the gap, as the README's first example
    /// does. (A connection that does reconnect ends so too when every new connection is closed
    /// at once, as by a proxy in front of a server that is down.)
    ///
    /// A call with no retry budget makes one try, which cannot tell a connection that
    /// reconnects from one that does not: it fails with [`Error::Connection`].
    #[error(
        "the connection to Redis is closed and does not reconnect by itself (every retry found \
         it closed): open it with redis::aio::ConnectionManager, which reconnects, and give \
         the filter a retry budget (README \"In your own code\")"
    )]
    Closed(#[source] RedisError),

    /// Redis answered something this crate did not expect (another program changed the key, or a
    /// proxy altered the reply).
    #[error("unexpected reply from Redis: {0}")]
    UnexpectedReply(String),

    /// A snapshot file could not be written or read, or is not a valid one; see
    /// [`SnapshotError`](crate::SnapshotError).
    #[error(transparent)]
    Snapshot(#[from] crate::SnapshotError),

    /// A filter's near cache would hold more bytes than its budget
    /// ([`NearCache::budget`](crate::NearCache::budget)); nothing was sent.
    #[error(
        "the near cache of filter {key:?} needs {bytes} bytes, over its budget of {budget} bytes"
    )]
    NearCacheBudget {
        /// The filter's key.
        key: String,
        /// The bytes its copy takes.
        bytes: u64,
        /// The budget.
        budget: u64,
    },

    /// Any other error reported by Redis or by the client library.
    #[error("Redis answered with an error")]
    Redis(#[source] RedisError),
}

impl Error {
    /// The same error for another caller of a step that failed (group commit: every caller of
    /// the step gets it). A snapshot error, which no grouped step meets, becomes its message.
    pub(crate) fn duplicate(&self) -> Error {
        use Error::*;
        match self {
            InvalidConfig(text) => InvalidConfig(text.clone()),
            OffsetOutOfRange { offset, bits } => OffsetOutOfRange {
                offset: *offset,
                bits: *bits,
            },
            ParamsMismatch {
                key,
                stored,
                requested,
            } => ParamsMismatch {
                key: key.clone(),
                stored: stored.clone(),
                requested: requested.clone(),
            },
            Lost { filter, key } => Lost {
                filter: filter.clone(),
                key: key.clone(),
            },
            ReplicaNotSynced { key, state } => ReplicaNotSynced {
                key: key.clone(),
                state: state.clone(),
            },
            OutcomeUnknown { key, step } => OutcomeUnknown {
                key: key.clone(),
                step: step.clone(),
            },
            LegacyNames { key, other, legacy } => LegacyNames {
                key: key.clone(),
                other: other.clone(),
                legacy: legacy.clone(),
            },
            FileMismatch { key, file, filter } => FileMismatch {
                key: key.clone(),
                file: file.clone(),
                filter: filter.clone(),
            },
            ForeignString { key, bytes } => ForeignString {
                key: key.clone(),
                bytes: *bytes,
            },
            Evictable { key, policy, ttl } => Evictable {
                key: key.clone(),
                policy: policy.clone(),
                ttl: *ttl,
            },
            MissingCommands {
                key,
                missing,
                instead,
            } => MissingCommands {
                key: key.clone(),
                missing: missing.clone(),
                instead: instead.clone(),
            },
            FilterFull { key, added, reason } => FilterFull {
                key: key.clone(),
                added: *added,
                reason: reason.clone(),
            },
            WrongType {
                key,
                found,
                expected,
                source,
            } => WrongType {
                key: key.clone(),
                found: found.clone(),
                expected: expected.clone(),
                source: source.clone(),
            },
            Timeout(err) => Timeout(err.clone()),
            Deadline(after) => Deadline(*after),
            NoPermission(err) => NoPermission(err.clone()),
            OutOfMemory(err) => OutOfMemory(err.clone()),
            NotReplicated { acked, wanted } => NotReplicated {
                acked: *acked,
                wanted: *wanted,
            },
            Connection(err) => Connection(err.clone()),
            Closed(err) => Closed(err.clone()),
            UnexpectedReply(text) => UnexpectedReply(text.clone()),
            Snapshot(err) => UnexpectedReply(err.to_string()),
            NearCacheBudget { key, bytes, budget } => NearCacheBudget {
                key: key.clone(),
                bytes: *bytes,
                budget: *budget,
            },
            Redis(err) => Redis(err.clone()),
        }
    }

    /// Classifies an error from an operation on `key`.
    pub(crate) fn from_redis(err: RedisError, key: &str) -> Self {
        if has_server_code(&err, "WRONGTYPE") {
            // Our scripts name the key and what it holds where they need a string; a command's
            // own refusal names neither until the key's `TYPE` is asked (`Exec::retried`).
            let (key, found, expected) = match named_wrong_type(&err) {
                Some((key, found)) => (key, found, "string".to_owned()),
                None => (
                    key.to_owned(),
                    UNNAMED_TYPE.to_owned(),
                    UNNAMED_TYPE.to_owned(),
                ),
            };
            Error::WrongType {
                key,
                found,
                expected,
                source: err,
            }
        } else if has_server_code(&err, "NOPERM") || is_script_acl_refusal(&err) {
            Error::NoPermission(err)
        } else if has_server_code(&err, "OUTCOMEUNKNOWN") {
            let step = server_errors(&err)
                .into_iter()
                .find(|(code, _)| code == "OUTCOMEUNKNOWN")
                .map(|(_, detail)| detail)
                .unwrap_or_default();
            Error::OutcomeUnknown {
                key: key.to_owned(),
                step,
            }
        } else if has_server_code(&err, "OOM") {
            Error::OutOfMemory(err)
        } else {
            Self::from(err)
        }
    }

    /// True for faults of the network or server that may pass: timeouts, lost connections, a
    /// server still loading its data after a restart (`LOADING`), a server busy running another
    /// client's script past its `busy-reply-threshold` (`BUSY`), and a Redis Cluster in the
    /// middle of a failover or resharding (`MOVED`/`ASK` that the client could not follow,
    /// `CLUSTERDOWN`, `MASTERDOWN`, `READONLY`, no connection to a slot's node), and too few
    /// replicas confirming a write ([`Error::NotReplicated`]: a replica resyncing after a
    /// failover). [`Retry`](crate::Retry) retries these; every operation of a filter is safe to
    /// repeat (a write retried with exact answers answers as its first attempt did).
    ///
    /// False for an error that retrying cannot pass, [`Error::Closed`] included: a connection
    /// found closed at every try of a retry budget, which does not reconnect by itself. A lost
    /// connection after a single try ([`Error::Connection`], no retry budget) says true: over a
    /// connection that reconnects, the next call may pass.
    pub fn is_transient(&self) -> bool {
        const PASSING: [&str; 8] = [
            "LOADING",
            "BUSY",
            "TRYAGAIN",
            "MOVED",
            "ASK",
            "CLUSTERDOWN",
            "MASTERDOWN",
            "READONLY",
        ];
        match self {
            Error::Timeout(_) | Error::Connection(_) | Error::NotReplicated { .. } => true,
            Error::OutcomeUnknown { step, .. } => step.starts_with(PENDING),
            Error::Redis(err) => {
                err.kind() == redis::ErrorKind::ClusterConnectionNotFound
                    || PASSING.iter().any(|code| has_server_code(err, code))
            }
            _ => false,
        }
    }
}

impl Error {
    /// Whether the attempt that failed so was not run: the server answered a passing refusal
    /// (`LOADING`, `BUSY`, `TRYAGAIN`, `MOVED`, `ASK`, `CLUSTERDOWN`, `MASTERDOWN`,
    /// `READONLY`: a refused script runs none of its writes, and a transaction with one refused
    /// command runs none), or no connection could be made. Its next sending is no retry of a
    /// step that may have been applied ([`once`](crate::io::once)).
    pub(crate) fn not_run(&self) -> bool {
        match self {
            Error::Connection(err) => err.is_connection_refusal(),
            Error::Redis(_) => self.is_transient(),
            _ => false,
        }
    }

    /// Whether the connection was found closed (dropped: a broken pipe, a reset, the end of
    /// its stream), not refused nor timed out. Every call over a `MultiplexedConnection` whose
    /// server went away meets it, for good; a `ConnectionManager` meets it once, then
    /// reconnects (or, while the server is down, is refused or times out).
    pub(crate) fn is_closed_connection(&self) -> bool {
        matches!(self, Error::Connection(err)
            if err.is_connection_dropped() && !err.is_connection_refusal())
    }

    /// The error a retry budget spent leaves: a connection found closed at every one of two
    /// or more tries (`closed_at_every_try`: [`Error::is_closed_connection`]) does not
    /// reconnect, [`Error::Closed`]; an outcome that could not be proven yet ([`PENDING`]) is
    /// unknown for good.
    pub(crate) fn settled(self, closed_at_every_try: bool) -> Self {
        match self {
            Error::Connection(err) if closed_at_every_try => Error::Closed(err),
            Error::OutcomeUnknown { key, step } if step.starts_with(PENDING) => {
                Error::OutcomeUnknown {
                    key,
                    step: step[PENDING.len()..].to_owned(),
                }
            }
            err => err,
        }
    }

    /// A [`Error::WrongType`] whose command named neither type, with the type the key holds
    /// (asked with `TYPE` on `conn`) and the one a filter of `kind` keeps there
    /// ([`expected_type`]); any other error as it is.
    pub(crate) async fn typed<C: redis::aio::ConnectionLike>(
        self,
        conn: &mut C,
        kind: &str,
    ) -> Self {
        let Error::WrongType {
            key,
            found,
            expected,
            source,
        } = self
        else {
            return self;
        };
        if found != UNNAMED_TYPE {
            return Error::WrongType {
                key,
                found,
                expected,
                source,
            };
        }
        let asked: redis::RedisResult<String> =
            redis::cmd("TYPE").arg(&key).query_async(conn).await;
        let found = asked.unwrap_or_else(|_| UNNAMED_TYPE.to_owned());
        let expected = match expected == UNNAMED_TYPE && found != UNNAMED_TYPE {
            true => expected_type(kind, &key, &found).to_owned(),
            false => expected,
        };
        Error::WrongType {
            key,
            found,
            expected,
            source,
        }
    }

    /// A [`Error::FilterFull`] of a step that came after `before` items of its batch were
    /// answered: they went in too. Any other error as it is.
    pub(crate) fn full_after(self, before: usize) -> Self {
        match self {
            Error::FilterFull { key, added, reason } => Error::FilterFull {
                key,
                added: added + before as u64,
                reason,
            },
            err => err,
        }
    }

    /// Whether the cluster answered `MOVED` to the call or to one command of its batch.
    pub(crate) fn was_moved(&self) -> bool {
        matches!(self, Error::Redis(err) if has_server_code(err, "MOVED"))
    }
}

/// Every server error in `err`, as (code, detail): itself, or each command's of a pipeline or
/// transaction (redis-rs wraps those in one error whose own `code()` is `None`).
pub(crate) fn server_errors(err: &RedisError) -> Vec<(String, String)> {
    let detail = |d: Option<&str>| d.unwrap_or_default().to_owned();
    let mut errors: Vec<(String, String)> = err
        .clone()
        .into_server_errors()
        .map(|errors| {
            errors
                .iter()
                .map(|(_, e)| (e.code().to_owned(), detail(e.details())))
                .collect()
        })
        .unwrap_or_default();
    if let Some(code) = err.code() {
        errors.push((code.to_owned(), detail(err.detail())));
    }
    let within: Vec<_> = errors
        .iter()
        .filter(|(code, _)| code == "ERR")
        .filter_map(|(_, detail)| raised_in_script(detail))
        .collect();
    errors.extend(within);
    errors
}

/// The error a script raised (a `redis.call` that failed), as Redis 6 wraps it: `ERR Error
/// running script (call to f_SHA): @user_script:L: CODE detail` gives `(CODE, detail)`, as
/// Redis 7 and Valkey give it unwrapped (`WRONGTYPE Operation against a key ...`; an ACL
/// refusal comes as `@user_script: L: The user executing the script can't ...`).
fn raised_in_script(detail: &str) -> Option<(String, String)> {
    let rest = detail.strip_prefix("Error running script")?;
    let (_, rest) = rest.split_once("): @user_script:")?;
    let rest = rest
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .strip_prefix(": ")?;
    // An error reply the call got, which Redis 6.2 passes on as `@user_script: L: -CODE detail`
    // (an ACL refusal, no reply of the command, keeps its `@user_script:` words).
    let rest = rest
        .strip_prefix("@user_script: ")
        .map(|inner| inner.trim_start_matches(|c: char| c.is_ascii_digit()))
        .and_then(|inner| inner.strip_prefix(": -"))
        .unwrap_or(rest);
    let (code, detail) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((code.to_owned(), detail.to_owned()))
}

/// What a [`Error::WrongType`] says the key holds, and the filter keeps there, until the key's
/// `TYPE` is asked.
pub(crate) const UNNAMED_TYPE: &str = "value of another type";

/// [`Error::WrongType`]'s message: what `key` holds and what the filter keeps there, as far as
/// they are known.
fn wrong_type(key: &str, found: &str, expected: &str) -> String {
    match (found == UNNAMED_TYPE, expected == UNNAMED_TYPE) {
        (false, false) => format!(
            "key {key:?} holds {}, where the filter keeps {}",
            type_words(found, true),
            type_words(expected, false)
        ),
        (false, true) => format!(
            "key {key:?} holds {}, not what the filter keeps there",
            type_words(found, true)
        ),
        (true, _) => format!("key {key:?} holds another type than the filter keeps there"),
    }
}

/// A type as `TYPE` names it (or alternatives joined by ` or `), in words: `a hash`, `nothing`,
/// `a Bloom filter of the server's module (BF.*)` (`held`: what a key holds, with the module
/// and its own name of the type, which differs from one module to another).
fn type_words(types: &str, held: bool) -> String {
    types
        .split(" or ")
        .map(|found| match found {
            "none" => "nothing".to_owned(),
            // Redis 8 bundles RedisBloom; valkey-bloom names its type otherwise.
            "MBbloom--" if held => "a RedisBloom filter (BF.*, type MBbloom--)".to_owned(),
            module if crate::MODULE_KEY_TYPES.contains(&module) => match held {
                true => format!("a Bloom filter of the server's module (BF.*, type {module})"),
                false => "a Bloom filter of the server's module (BF.*)".to_owned(),
            },
            other => format!("a {other}"),
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// What a filter of `kind` keeps at `key` (the filter's own key, a shard's, or a companion's),
/// by its name, for a `WRONGTYPE` that found `found` there and whose command named neither:
/// [`Error::WrongType::expected`](Error::WrongType).
pub(crate) fn expected_type(kind: &str, key: &str, found: &str) -> &'static str {
    const MODULE: &str = crate::MODULE_KEY_TYPES[0];
    // A companion's name: what follows `:redbloom:LEN:KEY:` (`params`, `once:…`, `gen:…`).
    let companion = key.split_once(crate::keys::RESERVED).map(|(_, rest)| {
        let (len, rest) = rest.split_once(':').unwrap_or(("", rest));
        let len: usize = len.parse().unwrap_or(0);
        rest.get(len..)
            .and_then(|name| name.strip_prefix(':'))
            .unwrap_or(rest)
    });
    match companion {
        // The filter's own key, or a shard's.
        None if kind == "module" => MODULE,
        None => "string",
        // The records of exact answers.
        Some(name) if name.starts_with("once:") => "hash",
        Some("params") => "string",
        // A module window's generations.
        Some(_) if kind == "module" => MODULE,
        // The only other hash: a growing filter's counts, beside its levels' strings.
        Some(_) if found == "string" => "hash",
        Some(_) => "string",
    }
}

/// The key and type that one of our scripts named in its refusal, `WRONGTYPE the key KEY holds
/// a TYPE, not a string` (the filter's own name, where the command's first key is another).
fn named_wrong_type(err: &RedisError) -> Option<(String, String)> {
    server_errors(err).iter().find_map(|(code, detail)| {
        let rest = detail.strip_prefix("the key ")?;
        let (key, found) = rest
            .strip_suffix(", not a string")?
            .rsplit_once(" holds a ")?;
        (code == "WRONGTYPE").then(|| (key.to_owned(), found.to_owned()))
    })
}

/// The words of a recorded step's own refusal of its record's commands (lua/once_tail.lua).
pub(crate) const ON_THE_RECORD: &str = "on the record of exact answers";

impl Error {
    /// An ACL refusal of the command sent (`NOPERM`: the command, or one of its keys), not of
    /// a call inside a script.
    pub(crate) fn is_command_refusal(&self) -> bool {
        matches!(self, Error::NoPermission(err) if has_server_code(err, "NOPERM"))
    }

    /// Whether an ACL refusal of a recorded write step (exact answers across retries) may be a
    /// refusal of its record: of the script (`EVALSHA`), of one of the step's keys (the record's
    /// ring is one), or of a command of the record, which the step asks the ACL for before it
    /// writes and names [`ON_THE_RECORD`] (on Redis 6, proven before the filter's first recorded
    /// write: lua/once_probe.lua). Any other refusal is of the step's own work (a `BITFIELD`,
    /// a `BF.MADD`, named or, inside a script on Redis 6 and 7.0, not): the same step without
    /// a record meets it too, so records stay on and the error is the caller's.
    pub(crate) fn refuses_record(&self) -> bool {
        let Error::NoPermission(err) = self else {
            return false;
        };
        let (commands, keys) = refusals(err);
        let scripts = ["EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO"];
        keys || commands.iter().any(|c| scripts.contains(&c.as_str()))
            || server_errors(err)
                .iter()
                .any(|(_, detail)| detail.contains(ON_THE_RECORD))
    }
}

/// Whether the server answered `code`, directly or for any command of a pipeline or transaction.
fn has_server_code(err: &RedisError, code: &str) -> bool {
    server_errors(err).iter().any(|(c, _)| c == code)
}

/// Inside a script, Redis 7 reports an ACL refusal as `ERR The user executing the script can't
/// run this command ...` (or `... can't access at least one of the keys ...`), Redis 6.2 as
/// `ERR Error running script (call to f_SHA): @user_script:L: @user_script: L: The user
/// executing the script can't ...` (and one a script caught with `pcall` and replied as
/// `@user_script: L: The user executing ...`, the code being `@user_script:`), and Valkey as
/// `ERR ACL failure in script: User U has no permissions to ...`; never `NOPERM`.
fn is_script_acl_refusal(err: &RedisError) -> bool {
    server_errors(err).iter().any(|(code, detail)| {
        let redis = (code == "ERR" || code.starts_with("@user_script"))
            && detail.contains("The user executing the script can't");
        redis || (code == "ERR" && detail.starts_with("ACL failure in script:"))
    })
}

/// What ACL refusals name: the commands (upper-cased, each once) that the server's `NOPERM`
/// replies, a script's own refusals (`NOPERM … run the 'hset' command on …`, lua/acl.lua) and
/// a refusal inside a script on Redis 7.2 and Valkey (`ERR ACL failure in script: User U has
/// no permissions to run the 'bitfield' command …`) name; and whether one refused a key (`No
/// permissions to access a key`). A refusal inside a script on Redis 6 and 7.0 (`The user
/// executing the script can't …`) names neither.
fn refusals(err: &RedisError) -> (Vec<String>, bool) {
    let mut commands: Vec<String> = Vec::new();
    let mut keys = false;
    for (code, detail) in server_errors(err) {
        let in_script = code == "ERR" && detail.starts_with("ACL failure in script:");
        if code != "NOPERM" && !in_script {
            continue;
        }
        let named = detail
            .split_once("run the '")
            .and_then(|(_, rest)| rest.split_once('\''))
            .map(|(command, _)| command.to_ascii_uppercase());
        match named {
            Some(command) if !commands.contains(&command) => commands.push(command),
            Some(_) => {}
            None => keys |= detail.to_ascii_lowercase().contains("key"),
        }
    }
    (commands, keys)
}

/// What an ACL refusal names, for its message: `: this user may not run BITFIELD, INFO` (the
/// commands the refusals name, each once: [`refusals`]), `…, nor access one of the filter's
/// keys` when a key was refused; empty when the replies name neither (a refusal inside a
/// script on Redis 6 and 7.0, which names nothing).
fn refused(err: &RedisError) -> String {
    let (commands, keys) = refusals(err);
    match (commands.is_empty(), keys) {
        (true, false) => String::new(),
        (true, true) => ": this user may not access one of the filter's keys".to_owned(),
        (false, false) => format!(": this user may not run {}", commands.join(", ")),
        (false, true) => format!(
            ": this user may not run {}, nor access one of the filter's keys",
            commands.join(", ")
        ),
    }
}

/// How a retry's reply starts when it could not prove its first attempt absent yet (that
/// attempt may still be on its way, `lua/once_tail.lua`): transient until the retry budget is
/// spent ([`Error::settled`]).
const PENDING: &str = "pending: ";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_outcome_passes_until_the_budget_is_spent() {
        let pending = replied(
            "OUTCOMEUNKNOWN pending: step 1f.0: the ring slot of its first attempt started after \
             it was sent",
        );
        assert!(pending.is_transient(), "{pending:?}");
        assert!(!pending.not_run(), "its first attempt may have run");
        let settled = pending.settled(false);
        assert!(!settled.is_transient(), "{settled:?}");
        assert!(
            matches!(&settled, Error::OutcomeUnknown { key, step }
                if key == "f" && step.starts_with("step 1f.0: ")),
            "{settled:?}"
        );
    }

    #[test]
    fn an_error_a_script_raised_is_known_in_redis_6_words() {
        let wrapped = "Error running script (call to f_7a7b): @user_script:15: WRONGTYPE \
                       Operation against a key holding the wrong kind of value";
        assert_eq!(
            raised_in_script(wrapped),
            Some((
                "WRONGTYPE".to_owned(),
                "Operation against a key holding the wrong kind of value".to_owned()
            ))
        );
        let refused = "Error running script (call to f_86ba): @user_script:193: @user_script: \
                       193: The user executing the script can't run this command or subcommand";
        let (code, detail) = raised_in_script(refused).unwrap();
        assert_eq!(code, "@user_script:");
        assert!(detail.contains("The user executing the script can't"));
        let oom = "Error running script (call to f_23b3): @user_script:12: @user_script: 12: \
                   -OOM command not allowed when used memory > 'maxmemory'.";
        assert_eq!(
            raised_in_script(oom),
            Some((
                "OOM".to_owned(),
                "command not allowed when used memory > 'maxmemory'.".to_owned()
            ))
        );
        assert_eq!(raised_in_script("unknown command `EVAL_RO`"), None);
    }

    #[test]
    fn a_wrong_type_says_what_the_key_holds_and_what_the_filter_keeps_there() {
        let companion = |name: &str| crate::keys::sidecar("k", name);
        let cases = [
            // The filter's own key, a shard's: the kind's bits, or a module's filter.
            ("plain", "k".to_owned(), "hash", "string"),
            ("module", "k".to_owned(), "string", "MBbloom--"),
            (
                "module",
                crate::keys::shard_key("k", 1, 4),
                "hash",
                "MBbloom--",
            ),
            // Companions: records and growing counts are hashes, parameters strings, a module
            // window's generations module filters.
            ("counting", companion("once:7.1"), "string", "hash"),
            ("growing", companion("grow:abc"), "string", "hash"),
            ("growing", companion("grow:abc:0"), "hash", "string"),
            ("module", companion("params"), "hash", "string"),
            ("module", companion("gen:abc:12"), "string", "MBbloom--"),
        ];
        for (kind, key, found, expected) in cases {
            assert_eq!(
                expected_type(kind, &key, found),
                expected,
                "{kind} {key} {found}"
            );
        }
        assert_eq!(
            wrong_type("m", "string", "MBbloom--"),
            "key \"m\" holds a string, where the filter keeps a Bloom filter of the server's \
             module (BF.*)"
        );
        assert_eq!(
            wrong_type("m", "MBbloom--", "string"),
            "key \"m\" holds a RedisBloom filter (BF.*, type MBbloom--), where the filter keeps \
             a string"
        );
        assert_eq!(
            wrong_type("m", "list", "string or hash"),
            "key \"m\" holds a list, where the filter keeps a string or a hash"
        );
        assert_eq!(
            wrong_type("m", UNNAMED_TYPE, UNNAMED_TYPE),
            "key \"m\" holds another type than the filter keeps there"
        );
    }

    /// The error a server replies, as redis-rs makes it of the reply's bytes.
    fn replied(text: &str) -> Error {
        let value = redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).unwrap();
        Error::from_redis(value.extract_error().unwrap_err(), "f")
    }

    #[test]
    fn refusals_name_their_commands_and_tell_the_records_own() {
        let cases = [
            // A script's own refusal of its record (lua/once_tail.lua).
            (
                "NOPERM this user has no permissions to run the 'hset' command on the record of \
                 exact answers",
                ": this user may not run HSET",
                true,
            ),
            // Of its own work.
            (
                "NOPERM this user has no permissions to run the 'bitfield' command on the \
                 growing filter's levels",
                ": this user may not run BITFIELD",
                false,
            ),
            // The script itself.
            (
                "NOPERM User u has no permissions to run the 'evalsha' command",
                ": this user may not run EVALSHA",
                true,
            ),
            // A key of the step (the record's ring is one).
            (
                "NOPERM No permissions to access a key",
                ": this user may not access one of the filter's keys",
                true,
            ),
            // Inside a script, Redis 7.2 and Valkey: named; Redis 7.0: not, and not the
            // record's (whose commands are asked of the ACL first).
            (
                "ERR ACL failure in script: User u has no permissions to run the 'bitfield' \
                 command script: 3e5f, on @user_script:245.",
                ": this user may not run BITFIELD",
                false,
            ),
            (
                "ERR The user executing the script can't run this command or subcommand \
                 script: 3e5f, on @user_script:245.",
                "",
                false,
            ),
        ];
        // The words the client looks for are the ones the record's script says.
        let tail = crate::scripts::lua!["once_tail"];
        let said = format!("local once_on = \"{ON_THE_RECORD}\"");
        assert_eq!(tail.matches(&said).count(), 1, "{tail}");
        assert!(tail.matches("acl_refusal(once_on").count() >= 3, "{tail}");
        for (text, names, record) in cases {
            let err = replied(text);
            assert!(matches!(err, Error::NoPermission(_)), "{text}: {err:?}");
            assert_eq!(
                err.to_string(),
                format!("permission denied by the server's ACL (NOPERM){names}"),
                "{text}"
            );
            assert_eq!(err.refuses_record(), record, "{text}");
        }
    }
}
