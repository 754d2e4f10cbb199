//! The filter: a Bloom filter in one Redis string, in go-zero's layout.

use crate::bitfield::{self, Fold};
use crate::builder::Builder;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::hash::GOZERO_HASHES;
use crate::info::{FilterInfo, KeyTtl};
use crate::layout::Layout;
use crate::retry::{self, Retry};
use crate::scripts::{self, LuaScript};
use crate::sizing::{current_fpr, estimate_items, MAX_BITS};
mod params;
mod shards;

use crate::{dense, keys};
use futures_util::StreamExt;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most bits per item a filter may use: far beyond any useful rate (k = 64 is a rate of
/// about 1e-20), and a bound on the work one item can ask of the server.
pub(crate) const MAX_HASHES: u32 = 64;

/// The most bit offsets one command carries (1,170 items of the go-zero layout): a batch
/// larger than that goes as several commands, so that no command holds the server for long,
/// nor its memory (one command of 1M items took a server to 3 GB), nor outlasts a response
/// timeout. Measured in BENCHMARKS.md.
pub const MAX_OFFSETS_PER_COMMAND: usize = 1 << 14;

/// Commands of one batch in flight at once on the connection.
const COMMANDS_IN_FLIGHT: usize = 4;

/// A Bloom filter whose bits live in a Redis string, shared by every process that opens the
/// same key with the same size.
///
/// The default layout is go-zero's `core/bloom` (SPEC.md §1): the key is used as given, and
/// each item sets 14 bits at `murmur3(item ‖ i) mod bits`. A Go service using go-zero and a
/// Rust service using this type read and write the same filter. [`Layout::Native`] is an
/// opt-in layout with fewer bits per item for the same rate.
///
/// `C` is any redis-rs async connection that can be cloned and shared: a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection) or a
/// [`ConnectionManager`](redis::aio::ConnectionManager). Methods take `&self`; clone the filter
/// (cheap) or share a reference to use it from many tasks at once. Concurrent calls on one
/// multiplexed connection are pipelined by redis-rs.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let seen = redbloom::RedisBloom::new(conn, "events:seen", 20 * 1_000_000)?;
/// if seen.add("event-42").await? {
///     // certainly the first time this event was added
/// }
/// assert!(seen.exists("event-42").await?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RedisBloom<C> {
    conn: C,
    key: String,
    bits: u64,
    hashes: u32,
    layout: Layout,
    engine: Engine,
    /// Where the filter's parameters live; `None` for a go-zero filter whose key allows no
    /// sidecar (it then goes unguarded, as go-zero's own filters do).
    params_key: Option<String>,
    options: Options,
    /// For a filter over several keys (shards): one single-key filter per shard, each holding
    /// `bits / shards` bits; this filter then only checks the parameters and routes.
    shards: Option<Vec<RedisBloom<C>>>,
    /// The dense path's scratch key; `None` when the key's name allows no sidecar.
    scratch_key: Option<String>,
    /// For a go-zero filter whose key allows no stored parameters (not a shard): check once
    /// that its bits are not longer than this size holds.
    check_length: bool,
    shared: Arc<Shared>,
}

/// What clones of one filter learn about the server together.
#[derive(Debug, Default)]
struct Shared {
    /// Set once the server has answered that it has no `BITFIELD_RO` (Redis < 6.2).
    no_bitfield_ro: AtomicBool,
    /// Set once the ACL has refused the dense merge (its scratch key or its commands): adds
    /// then go by `BITFIELD` only.
    no_merge: AtomicBool,
    /// Set once the stored parameters have been found equal to this filter's; cleared by
    /// [`RedisBloom::clear`].
    params_checked: AtomicBool,
}

/// How calls wait, retry and confirm; set by the [`Builder`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// The most one call may take, retries included.
    pub(crate) timeout: Option<Duration>,
    /// Retries after passing faults.
    pub(crate) retry: Retry,
    /// Replicas that must confirm every write, and how long to wait for them.
    pub(crate) replicas: Option<(u32, Duration)>,
}

impl<C> RedisBloom<C> {
    /// A filter of `bits` bits at `key`, in go-zero's layout (k = 14), with the default
    /// [`Engine`]. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bits` is not in `1..=2^32`, the key is empty, or the key
    /// is one that a filter keeps for itself (a name holding `:redbloom:`, or a shard's key).
    pub fn new(conn: C, key: impl Into<String>, bits: u64) -> Result<Self> {
        let key = key.into();
        keys::check_not_reserved(&key)?;
        Self::with_layout(conn, key, bits, Layout::GoZero, GOZERO_HASHES as u32)
    }

    /// A filter in `layout` with `hashes` bits per item (go-zero's layout takes only 14); what
    /// [`new`](RedisBloom::new) and the [`Builder`] both come down to.
    pub(crate) fn with_layout(
        conn: C,
        key: String,
        bits: u64,
        layout: Layout,
        hashes: u32,
    ) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        if !(1..=MAX_BITS).contains(&bits) {
            return Err(Error::InvalidConfig(format!(
                "bits must be between 1 and 2^32 (4294967296), not {bits}"
            )));
        }
        if !(1..=MAX_HASHES).contains(&hashes) || layout.fixed_hashes().is_some_and(|k| k != hashes)
        {
            return Err(Error::InvalidConfig(format!(
                "{hashes} hashes per item do not fit the {} layout",
                layout.name()
            )));
        }
        let params_key = match layout {
            Layout::GoZero => keys::sidecar(&key, "redbloom:params").ok(),
            Layout::Native => Some(keys::sidecar(&key, "redbloom:params")?),
        };
        Ok(RedisBloom {
            check_length: params_key.is_none(),
            scratch_key: keys::sidecar(&key, "redbloom:scratch").ok(),
            conn,
            key,
            bits,
            hashes,
            layout,
            engine: Engine::default(),
            params_key,
            options: Options::default(),
            shards: None,
            shared: Arc::default(),
        })
    }

    /// The same filter using `engine`'s commands.
    #[must_use]
    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        if let Some(shards) = self.shards.take() {
            self.shards = Some(shards.into_iter().map(|s| s.with_engine(engine)).collect());
        }
        self
    }

    pub(crate) fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        if let Some(shards) = self.shards.take() {
            self.shards = Some(
                shards
                    .into_iter()
                    .map(|s| s.with_options(options))
                    .collect(),
            );
        }
        self
    }

    /// The filter's key in Redis.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The filter's size in bits.
    pub fn bits(&self) -> u64 {
        self.bits
    }

    /// Bit locations per item (14 in go-zero's layout).
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// How items map to bits.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The commands this filter uses.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Items per [`add_many`](RedisBloom::add_many) call that load fastest: large enough for
    /// the dense path on filters of up to 4 MiB, else 1,000. What `redbloom load` uses by
    /// default.
    pub fn bulk_add_batch_size(&self) -> usize {
        let shards = self.shards() as usize;
        dense::batch_size(self.bits / shards as u64, self.hashes, dense::MAX_BYTES) * shards
    }

    /// Items per [`exists_many`](RedisBloom::exists_many) call that check fastest: large enough
    /// to read the whole filter once on filters of up to 64 MiB, else 1,000. What
    /// `redbloom check` uses by default.
    pub fn bulk_check_batch_size(&self) -> usize {
        let shards = self.shards() as usize;
        dense::batch_size(
            self.bits / shards as u64,
            self.hashes,
            dense::MAX_READ_BYTES,
        ) * shards
    }

    /// Every item's bit offsets, item after item, checked against the filter's size before
    /// anything is sent.
    fn offsets<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<u64>> {
        let mut offsets = Vec::with_capacity(items.len() * self.hashes as usize);
        for item in items {
            self.layout
                .push_offsets(item.as_ref(), self.bits, self.hashes, &mut offsets);
        }
        check_offsets(&offsets, self.bits)?;
        Ok(offsets)
    }

    /// The scratch key when a batch of `items` is cheaper as a whole bitmap.
    fn dense_scratch(&self, items: usize) -> Option<&str> {
        let dense = self.engine == Engine::Fast
            && !self.shared.no_merge.load(Ordering::Relaxed)
            && dense::worth_it(self.bits, items, self.hashes);
        self.scratch_key.as_deref().filter(|_| dense)
    }

    fn redis_error(&self, err: redis::RedisError) -> Error {
        Error::from_redis(err, &self.key)
    }
}

impl RedisBloom<()> {
    /// A [`Builder`] for a filter at `key`, sized in bits or from items and a rate; the
    /// connection comes last, in [`Builder::build`].
    pub fn builder(key: impl Into<String>) -> Builder {
        Builder::new(key.into())
    }
}

impl<C> RedisBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds `item`. Returns `true` when at least one of its bits flipped from 0 to 1, so the
    /// item was certainly not in the filter before; `false` when all its bits were already set
    /// (it was added before, or this is a false positive). Atomic: of many concurrent adds of
    /// one item, exactly one returns `true`.
    ///
    /// Adding is idempotent, so retrying after a timeout or a lost connection is safe. A
    /// timeout does not mean the add failed: it may have been applied.
    ///
    /// # Errors
    /// [`Error::WrongType`] when the key holds a non-string; [`Error::ParamsMismatch`] when a
    /// native filter's stored parameters differ from this one's; [`Error::Timeout`] and
    /// [`Error::Connection`] for network faults; [`Error::Redis`] for other server errors.
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let items = [item.as_ref()];
        let Some(shard) = self.shard_for(items[0], true).await? else {
            let new = self.call(|| self.write(&items)).await?;
            return Ok(new[0]);
        };
        let (guarded, new) =
            futures_util::future::join(self.guard_shards(), shard.call(|| shard.write(&items)))
                .await;
        guarded?;
        Ok(new?[0])
    }

    /// Whether `item` may be in the filter: `false` means certainly never added; `true` means
    /// added, or a false positive. A missing key holds no items.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let items = [item.as_ref()];
        let filter = self.shard_for(items[0], false).await?.unwrap_or(self);
        let present = filter.call(|| filter.read(&items)).await?;
        Ok(present[0])
    }

    /// Adds every item; the result for each item, in input order, means what
    /// [`add`](RedisBloom::add)'s does. An item repeated in the batch is new only at its first
    /// occurrence. An empty slice sends nothing.
    ///
    /// A batch of up to [`MAX_OFFSETS_PER_COMMAND`] bit offsets (1,170 items of the go-zero
    /// layout) is one atomic command and one round trip. A larger batch is split into commands
    /// of that size, sent a few at a time in order on the connection: each command is atomic,
    /// the batch as a whole is not (another client may see part of it). So no batch holds the
    /// server for long or takes its memory, and no command outlasts a response timeout. A
    /// batch that takes the dense path (a filter of up to 4 MiB and a batch large enough to
    /// cover it) is one transaction, however many items it holds.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add). On error, some, all or none of the items may be added:
    /// a timeout does not mean nothing was written. Retrying the whole batch is safe, since
    /// adds are idempotent.
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(shards) = &self.shards {
            return self.per_shard(shards, items, true).await;
        }
        self.call(|| self.write(items)).await
    }

    /// Checks every item; the result for each item, in input order, means what
    /// [`exists`](RedisBloom::exists)'s does. An empty slice sends nothing. Split into commands
    /// of at most [`MAX_OFFSETS_PER_COMMAND`] offsets as [`add_many`](RedisBloom::add_many)
    /// is, unless the whole filter is read at once (up to 64 MiB, for batches large enough).
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(shards) = &self.shards {
            return self.per_shard(shards, items, false).await;
        }
        self.call(|| self.read(items)).await
    }

    /// Runs one call under the filter's timeout and retry policy.
    async fn call<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        match retry::run(self.options.retry, self.options.timeout, attempt).await {
            Err(Error::WrongType { key, source, .. }) => Err(Error::WrongType {
                found: self.type_of(&key).await,
                key,
                source,
            }),
            done => done,
        }
    }

    /// What `key` holds, as `TYPE` names it, for an error message.
    async fn type_of(&self, key: &str) -> String {
        let kind: redis::RedisResult<String> = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await;
        kind.unwrap_or_else(|_| "value of another type".to_owned())
    }

    /// `WAIT` for the replicas the filter asks for, after a write.
    async fn confirm(&self) -> Result<()> {
        let Some((wanted, timeout)) = self.options.replicas else {
            return Ok(());
        };
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        // Alone, WAIT goes to every master of a cluster, which answers the smallest count: a
        // master without replicas would fail every write. Behind a command on the filter's key
        // that changes nothing (a write command, so never routed to a replica), it goes to the
        // key's master, on the connection that carried the write. The command is one the
        // engine needs anyway, so that it needs no other ACL grant.
        let mut pipe = redis::pipe();
        match self.engine {
            Engine::Fast => pipe.cmd("BITFIELD").arg(&self.key),
            Engine::Scripts => pipe.cmd("EVAL").arg("return 0").arg(1).arg(&self.key),
        };
        pipe.ignore().cmd("WAIT").arg(wanted).arg(millis);
        let (acked,): (u32,) = self.query_pipe(&pipe).await?;
        if acked < wanted {
            return Err(Error::NotReplicated { acked, wanted });
        }
        Ok(())
    }

    /// Sets every item's bits; true for each item one of whose bits flipped.
    async fn write<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.ensure_params(true).await?;
        let new = self.write_bits(items).await?;
        self.confirm().await?;
        Ok(new)
    }

    /// The write itself, by the dense path (one transaction, bounded by the filter's size) or
    /// by the engine's commands, at most [`MAX_OFFSETS_PER_COMMAND`] offsets each.
    async fn write_bits<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if let Some(scratch) = self.dense_scratch(items.len()) {
            let offsets = self.offsets(items)?;
            match self.merge(scratch, &offsets).await {
                // A user granted the filter's key but not the scratch key or the merge's
                // commands: the same write by BITFIELD.
                Err(Error::NoPermission(_)) => self.shared.no_merge.store(true, Ordering::Relaxed),
                done => return done,
            }
        }
        self.in_commands(items, Direction::Write).await
    }

    /// Runs `command` over `items` split into parts of at most [`MAX_OFFSETS_PER_COMMAND`]
    /// offsets, [`COMMANDS_IN_FLIGHT`] at a time, in order on the connection; the answers in
    /// input order.
    async fn in_commands<T: AsRef<[u8]>>(
        &self,
        items: &[T],
        direction: Direction,
    ) -> Result<Vec<bool>> {
        let command = |part| async move {
            match direction {
                Direction::Write => self.write_command(part).await,
                Direction::Read => self.read_command(part).await,
            }
        };
        let per_command = (MAX_OFFSETS_PER_COMMAND / self.hashes as usize).max(1);
        if items.len() <= per_command {
            return command(items).await;
        }
        let mut answers = Vec::with_capacity(items.len());
        // Futures do nothing until polled: each part's offsets are computed when it is sent.
        let parts: Vec<_> = items.chunks(per_command).map(command).collect();
        let mut parts = futures_util::stream::iter(parts).buffered(COMMANDS_IN_FLIGHT);
        while let Some(part) = parts.next().await {
            answers.extend(part?);
        }
        Ok(answers)
    }

    /// One write command (or script, or transaction with the guard) for `items`.
    async fn write_command<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let offsets = self.offsets(items)?;
        let k = self.hashes as usize;
        match self.engine {
            Engine::Fast => {
                let reply = self
                    .query_guarded(bitfield::set(&self.key, &offsets))
                    .await?;
                fold(&reply, k, items.len(), Fold::AnyZero)
            }
            Engine::Scripts => self.write_scripts(items.len(), &offsets).await,
        }
    }

    /// The scripts engine's write: the guard first (a pipeline would not reload a script on
    /// `NOSCRIPT`), then go-zero's set script or its batch form.
    async fn write_scripts(&self, items: usize, offsets: &[u64]) -> Result<Vec<bool>> {
        if let Some(guard) = self.params_guard() {
            let reply: Value = self.query(&guard).await?;
            self.check_guard(&reply)?;
        }
        match items {
            1 => {
                // go-zero's set script, replying 1 when a bit flipped.
                let reply = self.script(&scripts::ADD, offsets, false).await?;
                Ok(vec![reply == Value::Int(1)])
            }
            _ => {
                // One flag per item, 1 when new.
                let reply = self.script(&scripts::ADD_MANY, offsets, true).await?;
                fold(&reply, 1, items, Fold::AllOne)
            }
        }
    }

    /// Reads every item's bits; true for each item whose bits are all set.
    async fn read<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.ensure_params(false).await?;
        if self.engine == Engine::Fast && dense::read_worth_it(self.bits, items.len(), self.hashes)
        {
            let bitmap = self.read_whole().await?;
            let offsets = self.offsets(items)?;
            return Ok(dense::present(&bitmap, &offsets, self.hashes as usize));
        }
        self.in_commands(items, Direction::Read).await
    }

    /// One read command (or script) for `items`.
    async fn read_command<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let offsets = self.offsets(items)?;
        let k = self.hashes as usize;
        match self.engine {
            Engine::Fast => {
                let reply = self.read_bitfield(&offsets).await?;
                fold(&reply, k, items.len(), Fold::AllOne)
            }
            Engine::Scripts if items.len() == 1 => {
                // go-zero's test script replies Lua true (1) or false (nil).
                let reply = self.script(&scripts::EXISTS, &offsets, false).await?;
                Ok(vec![reply == Value::Int(1)])
            }
            Engine::Scripts => {
                // One flag per item, 1 when present.
                let reply = self.script(&scripts::EXISTS_MANY, &offsets, true).await?;
                fold(&reply, 1, items.len(), Fold::AllOne)
            }
        }
    }

    /// The dense add: the batch's bits as one bitmap ORed into the filter in one transaction;
    /// "new" from the bytes before.
    async fn merge(&self, scratch: &str, offsets: &[u64]) -> Result<Vec<bool>> {
        // One transaction: the bytes from before, the batch's bitmap into the scratch key,
        // the OR (sent as EVAL so that NOSCRIPT cannot happen inside EXEC), the scratch
        // key gone even if the OR failed.
        let mut pipe = redis::pipe();
        pipe.atomic();
        let guarded = self
            .params_guard()
            .map(|guard| pipe.add_command(guard))
            .is_some();
        pipe.cmd("GET")
            .arg(&self.key)
            .cmd("SET")
            .arg(scratch)
            .arg(dense::bitmap(offsets))
            .ignore()
            .cmd("EVAL")
            .arg(scripts::MERGE.source())
            .arg(2)
            .arg(&self.key)
            .arg(scratch)
            .ignore()
            .cmd("DEL")
            .arg(scratch)
            .ignore();
        let mut replies: Vec<Value> = self.query_pipe(&pipe).await?;
        let old = replies.pop().unwrap_or(Value::Nil);
        if guarded {
            self.check_guard(replies.first().unwrap_or(&Value::Nil))?;
        }
        let old: Option<Vec<u8>> = redis::from_redis_value(old).map_err(unexpected)?;
        Ok(dense::new_flags(
            old.unwrap_or_default(),
            offsets,
            self.hashes as usize,
        ))
    }

    /// The filter's bytes, in chunks of a few MiB, in one round trip (the dense check).
    async fn read_whole(&self) -> Result<Vec<u8>> {
        let mut pipe = redis::pipe();
        for (first, last) in dense::read_ranges(self.bits) {
            pipe.cmd("GETRANGE").arg(&self.key).arg(first).arg(last);
        }
        let chunks: Vec<Vec<u8>> = self.query_pipe(&pipe).await?;
        Ok(chunks.concat())
    }

    /// `BITFIELD_RO`, or plain `BITFIELD` once the server has said it lacks `BITFIELD_RO`.
    async fn read_bitfield(&self, offsets: &[u64]) -> Result<Value> {
        if !self.shared.no_bitfield_ro.load(Ordering::Relaxed) {
            let cmd = bitfield::get(&self.key, offsets, true);
            match cmd.query_async::<Value>(&mut self.conn.clone()).await {
                Err(err) if is_unknown_command(&err) => {
                    self.shared.no_bitfield_ro.store(true, Ordering::Relaxed);
                }
                reply => return reply.map_err(|e| self.redis_error(e)),
            }
        }
        self.query(&bitfield::get(&self.key, offsets, false)).await
    }

    /// Runs a script on the filter's key; the batch scripts take k before the offsets.
    async fn script(&self, script: &LuaScript, offsets: &[u64], batch: bool) -> Result<Value> {
        let mut conn = self.conn.clone();
        let reply = if batch {
            script
                .invoke(&mut conn, &[&self.key], &[&self.hashes, &offsets])
                .await
        } else {
            script.invoke(&mut conn, &[&self.key], &[&offsets]).await
        };
        reply.map_err(|e| self.redis_error(e))
    }

    /// Runs a pipeline or a transaction on the filter's slot.
    ///
    /// A cluster client follows `MOVED` only when a single command gets it, not when it comes
    /// inside a batch's replies; the retry would then go to the old node again and again. So
    /// when a command of the batch was moved, one single-key command on the filter's key makes
    /// the client follow the redirect and reload the slots before the error goes to the retry.
    async fn query_pipe<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T> {
        match pipe.query_async(&mut self.conn.clone()).await {
            Ok(reply) => Ok(reply),
            Err(err) => {
                let err = self.redis_error(err);
                if err.was_moved() {
                    let _: redis::RedisResult<Value> = redis::cmd("EXISTS")
                        .arg(&self.key)
                        .query_async(&mut self.conn.clone())
                        .await;
                }
                Err(err)
            }
        }
    }

    /// Runs `cmd`; `query_async` turns a server error reply into an `Err`.
    async fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Result<T> {
        cmd.query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.redis_error(e))
    }

    /// Reads the filter's fill, size and TTL in one atomic round trip.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    pub async fn info(&self) -> Result<FilterInfo> {
        match &self.shards {
            Some(shards) => self.sharded_info(shards).await,
            None => self.call(|| self.info_once()).await,
        }
    }

    async fn info_once(&self) -> Result<FilterInfo> {
        self.ensure_params(false).await?;
        let last_byte = (self.bits - 1) / 8;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("BITCOUNT")
            .arg(&self.key)
            .arg(0)
            .arg(last_byte)
            .cmd("STRLEN")
            .arg(&self.key)
            .cmd("PTTL")
            .arg(&self.key);
        let (bits_set, bytes, pttl): (u64, u64, i64) = self.query_pipe(&pipe).await?;
        let hashes = self.hashes;
        Ok(FilterInfo {
            key: self.key.clone(),
            bits: self.bits,
            hashes,
            bits_set,
            bytes,
            estimated_items: estimate_items(self.bits, hashes, bits_set),
            estimated_fpr: current_fpr(self.bits, hashes, bits_set),
            ttl: KeyTtl::from_pttl(pttl),
        })
    }

    /// Deletes the filter: its bits (every shard's) and its stored parameters. Returns whether
    /// the bits existed.
    ///
    /// Checked first, in the same atomic step as the delete: a key of another type, a filter
    /// stored with other parameters, or bits longer than this size holds are left untouched
    /// and reported, as [`add`](RedisBloom::add) reports them. A sharded filter checks its
    /// parameters, then each shard as it deletes it, then deletes the parameters.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::ParamsMismatch`], [`Error::Timeout`],
    /// [`Error::Connection`] or [`Error::Redis`].
    pub async fn clear(&self) -> Result<bool> {
        self.shared.params_checked.store(false, Ordering::Release);
        self.remove_filter(Removal::Delete).await
    }

    /// Makes the filter (its bits and its stored parameters, every shard's) expire after `ttl`,
    /// checked as [`clear`](RedisBloom::clear) checks. Millisecond precision; a TTL shorter
    /// than 1 ms is refused (Redis would delete the filter at once: use `clear` for that).
    /// Returns `false` when the bits do not exist, since nothing has been added yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL below 1 ms or too long for Redis; otherwise as for
    /// [`clear`](RedisBloom::clear).
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        let millis = i64::try_from(ttl.as_millis())
            .ok()
            .filter(|ms| *ms < i64::MAX / 2)
            .ok_or_else(|| Error::InvalidConfig(format!("a TTL of {ttl:?} is too long")))?;
        if millis == 0 {
            return Err(Error::InvalidConfig(format!(
                "a TTL of {ttl:?} rounds to 0 ms, which would delete the filter at once; \
                 clear it to delete it"
            )));
        }
        self.remove_filter(Removal::Expire(millis)).await
    }

    /// `clear` or `expire`: one checked step for one key; for a sharded filter, its parameters
    /// checked, each shard in a checked step, then the parameters (never the bare logical key,
    /// which may hold someone else's filter).
    async fn remove_filter(&self, how: Removal) -> Result<bool> {
        let Some(shards) = &self.shards else {
            return self.call(|| self.remove_once(how)).await;
        };
        self.call(|| self.ensure_params(false)).await?;
        let all = shards
            .iter()
            .map(|shard| shard.call(|| shard.remove_once(how)));
        let all = futures_util::future::join_all(all).await;
        let any = all.into_iter().collect::<Result<Vec<_>>>()?.contains(&true);
        if let Some(params_key) = &self.params_key {
            let mut cmd = match how {
                Removal::Delete => redis::cmd("DEL"),
                Removal::Expire(_) => redis::cmd("PEXPIRE"),
            };
            cmd.arg(params_key);
            if let Removal::Expire(millis) = how {
                cmd.arg(millis);
            }
            let _: i64 = self.call(|| self.query(&cmd)).await?;
        }
        Ok(any)
    }

    /// The checked delete or TTL of one key (and its parameters), in one script.
    async fn remove_once(&self, how: Removal) -> Result<bool> {
        let mut keys = vec![self.key.as_str()];
        keys.extend(self.params_key.as_deref());
        let (op, millis) = match how {
            Removal::Delete => ("del", 0),
            Removal::Expire(millis) => ("pexpire", millis),
        };
        let bare_bits_are_a_filter = if self.layout == Layout::GoZero {
            "1"
        } else {
            "0"
        };
        let reply: Value = scripts::DROP
            .invoke(
                &mut self.conn.clone(),
                &keys,
                &[
                    &op,
                    &millis,
                    &self.fingerprint(),
                    &self.bits.div_ceil(8),
                    &bare_bits_are_a_filter,
                ],
            )
            .await
            .map_err(|e| self.redis_error(e))?;
        match &reply {
            Value::Int(done) => return Ok(*done > 0),
            Value::Array(refusal) => match refusal.as_slice() {
                [Value::BulkString(what), Value::BulkString(stored)] if what == b"params" => {
                    let stored = String::from_utf8_lossy(stored).into_owned();
                    self.compare_params((!stored.is_empty()).then_some(stored))?;
                }
                [Value::BulkString(what), Value::Int(bytes)] if what == b"length" => {
                    self.compare_length(*bytes)?;
                }
                _ => {}
            },
            _ => {}
        }
        Err(unexpected(format!("{reply:?} from clear or expire")))
    }
}

/// Whether a batch's commands set bits or read them.
#[derive(Debug, Clone, Copy)]
enum Direction {
    Write,
    Read,
}

/// What [`RedisBloom::clear`] and [`RedisBloom::expire`] do to a filter's keys.
#[derive(Debug, Clone, Copy)]
enum Removal {
    Delete,
    /// `PEXPIRE` with these milliseconds.
    Expire(i64),
}

/// `k` bit replies per item folded into one answer per item.
fn fold(reply: &Value, k: usize, items: usize, how: Fold) -> Result<Vec<bool>> {
    bitfield::fold(reply, k, items, how)
        .ok_or_else(|| Error::UnexpectedReply(format!("{reply:?} for {items} items of {k} bits")))
}

/// A reply of the wrong shape.
fn unexpected(err: impl std::fmt::Display) -> Error {
    Error::UnexpectedReply(err.to_string())
}

/// A server that does not know a command (here: `BITFIELD_RO` before Redis 6.2).
fn is_unknown_command(err: &redis::RedisError) -> bool {
    err.code() == Some("ERR")
        && err
            .detail()
            .is_some_and(|d| d.starts_with("unknown command"))
}

/// go-zero's `ErrTooLargeOffset` check: every offset must be below the filter's size.
pub(crate) fn check_offsets(offsets: &[u64], bits: u64) -> Result<()> {
    match offsets.iter().find(|&&offset| offset >= bits) {
        Some(&offset) => Err(Error::OffsetOutOfRange { offset, bits }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gozero_locations;

    #[test]
    fn offsets_at_or_past_the_size_are_rejected() {
        assert!(check_offsets(&[0, 63], 64).is_ok());
        let err = check_offsets(&[3, 64, 65], 64).unwrap_err();
        assert!(
            matches!(
                err,
                Error::OffsetOutOfRange {
                    offset: 64,
                    bits: 64
                }
            ),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "bit offset 64 is out of range for a filter of 64 bits"
        );
    }

    #[test]
    fn construction_rejects_bad_sizes_without_io() {
        for bits in [0, MAX_BITS + 1, u64::MAX] {
            let err = RedisBloom::new((), "k", bits).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig(_)), "{bits}: {err}");
        }
        assert!(RedisBloom::new((), "", 64).is_err());
        assert_eq!(RedisBloom::new((), "k", MAX_BITS).unwrap().bits(), MAX_BITS);
    }

    #[test]
    fn offsets_are_each_items_locations_in_order() {
        let bloom = RedisBloom::new((), "k", 64).unwrap();
        let offsets = bloom.offsets(&["hello", "world"]).unwrap();
        assert_eq!(offsets[..14], gozero_locations(b"hello", 64));
        assert_eq!(offsets[14..], gozero_locations(b"world", 64));
    }
}
