//! The plain filter: fixed size, items never forgotten (SPEC.md §1-§3). One key in go-zero's
//! layout by default, bit-compatible with go-zero's `core/bloom`; or several keys (shards).

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::{ItemHash, GOZERO_HASHES};
use crate::info::FilterInfo;
use crate::io::bits::{Batch, Bits, Ctx, Direction, Removal};
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::layout::Layout;
use crate::near::{self, Near, NearCache, NearCacheStats};
use crate::options::Options;
use crate::retry::Clock;
use crate::sharded::{self, Shards};
use crate::{dense, keys};
use futures_util::future::join_all;
use redis::aio::ConnectionLike;
use std::sync::Arc;
use std::time::Duration;

/// A Bloom filter whose bits live in a Redis string, shared by every process that opens the
/// same key with the same size.
///
/// The default layout is go-zero's `core/bloom` ([SPEC.md §1](../docs/SPEC.md)): the key is
/// used as given, and each item sets 14 bits at `murmur3(item ‖ i) mod bits`. A Go service
/// using go-zero and a Rust service using this type read and write the same filter.
/// [`Layout::Native`] is an opt-in layout with fewer bits per item for the same rate.
///
/// `C` is any redis-rs async connection that can be cloned and shared: a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), a
/// [`ConnectionManager`](redis::aio::ConnectionManager) or a cluster connection. Methods take
/// `&self`; cloning a filter is one reference count, so clone it freely to use it from many
/// tasks at once. Concurrent calls on one multiplexed connection are pipelined by redis-rs.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use redbloom::redis;
/// let client = redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let seen = redbloom::RedisBloom::new(conn, "events:seen", 20 * 1_000_000)?;
/// if seen.add("event-42").await? {
///     // certainly the first time this event was added
/// }
/// assert!(seen.exists("event-42").await?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedisBloom<C>(Arc<Plain<C>>);

impl<C> Clone for RedisBloom<C> {
    /// Another handle on the same filter: one reference count.
    fn clone(&self) -> Self {
        RedisBloom(Arc::clone(&self.0))
    }
}

/// What the handles of one filter share.
#[derive(Debug)]
struct Plain<C> {
    exec: Exec<C>,
    key: String,
    /// The whole filter's shape (all shards' bits together).
    geometry: Geometry,
    engine: Engine,
    guard: Guard,
    shards: Shards<Bits>,
    /// The copy that answers checks, when the builder asked for one.
    near: Option<Near<Copy>>,
}

/// The copy of its near cache: each shard's bytes.
type Copy = near::Strings;

impl<C> RedisBloom<C> {
    /// A filter of `bits` bits at `key`, in go-zero's layout (k = 14), with the default
    /// [`Engine`]. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `bits` is not in `1..=2^32`, the key is empty, or the key
    /// is one that a filter keeps for itself (a name holding `:redbloom:`, or a shard's key).
    pub fn new(conn: C, key: impl Into<String>, bits: u64) -> Result<Self> {
        Self::from_parts(
            conn,
            key.into(),
            Geometry {
                layout: Layout::GoZero,
                bits,
                hashes: GOZERO_HASHES as u32,
            },
            1,
            Engine::default(),
            Options::default(),
        )
    }

    /// The filter the [`Builder`](crate::Builder) describes: `geometry` is the whole filter's,
    /// over `shards` keys (one: the key as given), checked here, per key, and nowhere else.
    pub(crate) fn from_parts(
        conn: C,
        key: String,
        geometry: Geometry,
        shards: u32,
        engine: Engine,
        options: Options,
    ) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        keys::check_not_reserved(&key)?;
        let Geometry {
            layout,
            bits,
            hashes,
        } = geometry;
        let (geometry, guard, parts) = if shards <= 1 {
            let geometry = Geometry::new(layout, bits, hashes)?;
            let params = match layout {
                // go-zero's own filters go unguarded when the name allows no key beside it.
                Layout::GoZero => keys::sidecar(&key, "redbloom:params").ok(),
                Layout::Native => Some(keys::sidecar(&key, "redbloom:params")?),
            };
            let guard = Guard::new(
                key.clone(),
                params,
                key.clone(),
                geometry.fingerprint(1),
                layout,
                bits,
            );
            let scratch = keys::sidecar(&key, "redbloom:scratch").ok();
            (
                geometry,
                guard,
                vec![Bits::new(key.clone(), scratch, geometry)],
            )
        } else {
            let per_shard = Geometry::new(layout, bits.div_ceil(u64::from(shards)), hashes)?;
            let geometry = per_shard.total(per_shard.bits * u64::from(shards));
            let parts = (0..shards)
                .map(|i| {
                    let shard = keys::shard_key(&key, i, shards);
                    let scratch = keys::sidecar(&shard, "redbloom:scratch").ok();
                    Bits::new(shard, scratch, per_shard)
                })
                .collect();
            // The parameters are checked once, for the whole filter, in a slot of their own:
            // the key that tells a new filter from bits without parameters is the parameters
            // key itself (the shards are in other slots, and the bare name is not the filter's).
            let params = keys::sidecar(&key, "redbloom:params")?;
            let guard = Guard::new(
                key.clone(),
                Some(params.clone()),
                params,
                geometry.fingerprint(shards),
                layout,
                geometry.bits,
            );
            (geometry, guard, parts)
        };
        Ok(RedisBloom(Arc::new(Plain {
            exec: Exec::new(conn, options),
            key,
            geometry,
            engine,
            guard,
            shards: Shards::new(parts),
            near: None,
        })))
    }

    /// Gives a filter just made its near cache ([`Builder::near_cache`](crate::Builder::near_cache)).
    pub(crate) fn attach_near(&mut self, config: NearCache) -> Result<()> {
        let plain = Arc::get_mut(&mut self.0).expect("a filter just made has one handle");
        let bytes = plain.geometry.bits.div_ceil(8);
        let keys = plain.shards.parts().iter().map(|p| p.key.clone()).collect();
        plain.near = Some(Near::new(&plain.key, config, bytes, near::prefixes(keys))?);
        Ok(())
    }

    /// What the near cache has done (`None`: the filter has none).
    pub fn near_cache_stats(&self) -> Option<NearCacheStats> {
        self.0.near.as_ref().map(Near::stats)
    }

    /// The same filter using `engine`'s commands.
    #[must_use]
    pub fn with_engine(self, engine: Engine) -> Self
    where
        C: Clone,
    {
        let plain = match Arc::try_unwrap(self.0) {
            Ok(plain) => plain,
            Err(shared) => shared.fork(),
        };
        RedisBloom(Arc::new(Plain { engine, ..plain }))
    }

    /// The filter's key in Redis (for a sharded filter, the name its shards' keys derive from).
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The filter's size in bits (all shards together).
    pub fn bits(&self) -> u64 {
        self.0.geometry.bits
    }

    /// Bit locations per item (14 in go-zero's layout).
    pub fn hashes(&self) -> u32 {
        self.0.geometry.hashes
    }

    /// How items map to bits.
    pub fn layout(&self) -> Layout {
        self.0.geometry.layout
    }

    /// The commands this filter uses.
    pub fn engine(&self) -> Engine {
        self.0.engine
    }

    /// How many keys hold the filter (1 unless built with
    /// [`Builder::shards`](crate::Builder::shards)).
    pub fn shards(&self) -> u32 {
        self.0.shards.count()
    }

    /// Items per [`add_many`](RedisBloom::add_many) call that load fastest: large enough for
    /// the dense path (the batch's bits merged as a bitmap: whole on filters of up to 4 MiB,
    /// by ranges beyond). What `redbloom load` uses by default.
    pub fn bulk_add_batch_size(&self) -> usize {
        self.bulk_batch_size(dense::add_batch_size)
    }

    /// Items per [`exists_many`](RedisBloom::exists_many) call that check fastest: large enough
    /// to read the whole filter once on filters of up to 4 MiB, or the ranges the batch
    /// touches beyond. What `redbloom check` uses by default.
    pub fn bulk_check_batch_size(&self) -> usize {
        self.bulk_batch_size(dense::check_batch_size)
    }

    fn bulk_batch_size(&self, size: fn(u64, u32) -> usize) -> usize {
        let part = &self.0.shards.parts()[0].geometry;
        size(part.bits, part.hashes) * self.shards() as usize
    }
}

impl<C: Clone> Plain<C> {
    /// A copy on the same connection that has learned nothing yet.
    fn fork(&self) -> Self {
        Plain {
            exec: Exec::new(self.exec.conn().clone(), self.exec.options()),
            key: self.key.clone(),
            geometry: self.geometry,
            engine: self.engine,
            guard: self.guard.unchecked(),
            shards: self.shards.clone(),
            near: None,
        }
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
    /// [`Error::WrongType`] when the key holds a non-string; [`Error::ParamsMismatch`] when the
    /// stored parameters differ from this filter's; [`Error::Timeout`], [`Error::Deadline`]
    /// and [`Error::Connection`] for network faults; [`Error::Redis`] for other server errors.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add", kind = "plain", key = self.key(), items = 1, attempts))]
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let clock = self.0.exec.clock();
        let item = [item.as_ref()];
        let new = self.0.per_part(&clock, &item, Direction::Write).await?;
        if let Some(near) = &self.0.near {
            near.added(&item);
        }
        Ok(new[0])
    }

    /// Whether `item` may be in the filter: `false` means certainly never added; `true` means
    /// added, or a false positive. A missing key holds no items.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists", kind = "plain", key = self.key(), items = 1, attempts))]
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        if let Some(near) = &self.0.near {
            if let Some(found) = near.answer_now(item, |copy, item| self.0.in_copy(copy, item)) {
                return Ok(found);
            }
        }
        // Boxed: a call answered from the copy does not carry the way to Redis.
        Ok(Box::pin(self.0.check(&[item])).await?[0])
    }

    /// Adds every item; the result for each item, in input order, means what
    /// [`add`](RedisBloom::add)'s does. An item repeated in the batch is new only at its first
    /// occurrence. An empty slice sends nothing.
    ///
    /// A batch of up to [`MAX_OFFSETS_PER_COMMAND`](crate::MAX_OFFSETS_PER_COMMAND) bit
    /// offsets (1,170 items of the go-zero layout) is one atomic command and one round trip. A
    /// larger batch is split into commands of that size, sent a few at a time in order on the
    /// connection: each command is atomic, the batch as a whole is not (another client may see
    /// part of it). So no batch holds the server for long or takes its memory, and no command
    /// outlasts a response timeout. A batch that takes the dense path (a batch large enough to
    /// cover the filter) is one transaction on a filter of up to 4 MiB, however many items it
    /// holds; on a larger one it is merged one range of the key at a time
    /// ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), 128 KiB, about
    /// 0.5 ms of server time each), each range atomic: an item whose bits fall in two ranges
    /// may be reported new by two clients adding it at the same moment, and no bit is ever
    /// lost. Large batches of one handle take turns (and share their passes over the key), so
    /// among themselves they answer as sequential calls. A sharded filter sends each shard its
    /// items at once.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add). On error, some, all or none of the items may be added:
    /// a timeout does not mean nothing was written. Retrying the whole batch is safe, since
    /// adds are idempotent.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_many", kind = "plain", key = self.key(), items = items.len(), attempts))]
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let new = self
            .0
            .per_part(&self.0.exec.clock(), items, Direction::Write)
            .await?;
        if let Some(near) = &self.0.near {
            near.added(items);
        }
        Ok(new)
    }

    /// Checks every item; the result for each item, in input order, means what
    /// [`exists`](RedisBloom::exists)'s does. An empty slice sends nothing. Split into commands
    /// as [`add_many`](RedisBloom::add_many) is, unless a batch large enough reads the filter
    /// instead: whole up to 4 MiB, beyond that the ranges the batch touches.
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists_many", kind = "plain", key = self.key(), items = items.len(), attempts))]
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.0.check(items).await
    }

    /// Checks the parameters stored beside the filter against this client's now (storing them
    /// when the filter is new), instead of on the first operation.
    ///
    /// Both layouts store their parameters (`layout`, `bits`, `hashes`) beside the bits, so
    /// that a client with another size gets [`Error::ParamsMismatch`] instead of wrong answers.
    /// A go-zero filter written by go-zero itself has none; it opens with whatever bits the
    /// client gives, as in go-zero, as long as they are not longer than that size holds. A
    /// native filter must have them.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when they differ, or for a native filter over bits without
    /// parameters; otherwise as for [`add`](RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "check_params", kind = "plain", key = self.key(), attempts))]
    pub async fn check_params(&self) -> Result<()> {
        let p = &*self.0;
        let clock = p.exec.clock();
        p.exec
            .retried(&clock, || p.guard.ensure(&p.exec, true))
            .await
    }

    /// Reads the filter's fill, size and TTL in one atomic round trip (one per shard).
    ///
    /// # Errors
    /// As for [`add`](RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "info", kind = "plain", key = self.key(), attempts))]
    pub async fn info(&self) -> Result<FilterInfo> {
        let p = &*self.0;
        let clock = p.exec.clock();
        match p.shards.parts() {
            [one] => {
                let ctx = p.ctx(Some(&p.guard));
                p.exec
                    .retried(&clock, || async {
                        p.guard.ensure(&p.exec, false).await?;
                        one.info(ctx, &p.key).await
                    })
                    .await
            }
            parts => {
                p.exec
                    .retried(&clock, || p.guard.ensure(&p.exec, false))
                    .await?;
                let ctx = p.ctx(None);
                let infos = parts
                    .iter()
                    .map(|part| p.exec.retried(&clock, move || part.info(ctx, &part.key)));
                let infos = join_all(infos)
                    .await
                    .into_iter()
                    .collect::<Result<Vec<_>>>()?;
                let Geometry { bits, hashes, .. } = p.geometry;
                Ok(sharded::sum_info(&p.key, bits, hashes, &infos))
            }
        }
    }

    /// Deletes the filter: its bits (every shard's) and its stored parameters. Returns whether
    /// the bits existed.
    ///
    /// Checked first, in the same atomic step as the delete: a key of another type, a filter
    /// stored with other parameters, or bits longer than this size holds are left untouched
    /// and reported, as [`add`](RedisBloom::add) reports them. A sharded filter checks its
    /// parameters, then each shard as it deletes it, then deletes the parameters; it never
    /// touches the bare key of its name.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::ParamsMismatch`], [`Error::Timeout`],
    /// [`Error::Deadline`], [`Error::Connection`] or [`Error::Redis`].
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "clear", kind = "plain", key = self.key(), attempts))]
    pub async fn clear(&self) -> Result<bool> {
        self.0.guard.reset();
        let done = self.0.remove(Removal::Delete).await;
        if let Some(near) = &self.0.near {
            near.cleared();
        }
        done
    }

    /// Makes the filter (its bits and its stored parameters, every shard's) expire after `ttl`,
    /// checked as [`clear`](RedisBloom::clear) checks. Millisecond precision; a TTL shorter
    /// than 1 ms is refused (Redis would delete the filter at once: use `clear` for that).
    /// Returns `false` when the bits do not exist, since nothing has been added yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL below 1 ms or too long for Redis; otherwise as for
    /// [`clear`](RedisBloom::clear).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "expire", kind = "plain", key = self.key(), attempts))]
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        self.0.remove(Removal::expire(ttl)?).await
    }
}

impl<C> Plain<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Whether `item` is in the near cache's copy.
    fn in_copy(&self, copy: &Copy, item: &[u8]) -> bool {
        let parts = self.shards.parts();
        let i = self.shards.part_of(item);
        let geometry = &parts[i].geometry;
        let bytes = &copy.0[i];
        geometry.all(&ItemHash::of(item, geometry.layout), |offset| {
            dense::test(bytes, offset)
        })
    }

    /// Checks `items`: from the near cache's copy when there is one and it is fresh, else
    /// from Redis.
    async fn check<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let clock = self.exec.clock();
        let Some(near) = &self.near else {
            return self.per_part(&clock, items, Direction::Read).await;
        };
        let parts = self.shards.parts();
        let answer = |copy: &Copy, item: &[u8]| self.in_copy(copy, item);
        let read = || async {
            self.exec
                .retried(&clock, || self.guard.ensure(&self.exec, false))
                .await?;
            let mut copy = near::Strings(Vec::with_capacity(parts.len()));
            for part in parts {
                let max = part.geometry.max_bytes();
                let bytes = self
                    .exec
                    .retried(&clock, || near::read_key(&self.exec, &part.key, max))
                    .await?;
                copy.0.push(bytes);
            }
            Ok(copy)
        };
        let remote = || self.per_part(&clock, items, Direction::Read);
        near.check(items, answer, read, remote).await
    }

    fn ctx<'a>(&'a self, guard: Option<&'a Guard>) -> Ctx<'a, C> {
        Ctx {
            exec: &self.exec,
            engine: self.engine,
            guard,
        }
    }

    /// Sets (`Direction::Write`) or reads every item's bits: true for each item one of whose
    /// bits flipped, or whose bits are all set. A filter of one key runs one part with its
    /// guard inline; a sharded one checks its parameters, then runs the parts that hold items
    /// at once (beside the guard, for writes) and puts the answers back in input order.
    async fn per_part<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        items: &[T],
        direction: Direction,
    ) -> Result<Vec<bool>> {
        let write = matches!(direction, Direction::Write);
        let parts = match self.shards.parts() {
            [one] => {
                return self
                    .part_call(clock, one, Some(&self.guard), items, direction)
                    .await
            }
            parts => parts,
        };
        let check = match write {
            true => sharded::Check::Write,
            false => sharded::Check::Read,
        };
        self.shards
            .fan_out(
                &self.exec,
                clock,
                &self.guard,
                items,
                check,
                |part, items| async move {
                    self.part_call(clock, &parts[part], None, &items, direction)
                        .await
                },
            )
            .await
    }

    /// One part's call, retried as a whole: the parameters check (when the guard lives in
    /// this part's slot group), then the bits, and after a write `WAIT`.
    async fn part_call<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        part: &Bits,
        guard: Option<&Guard>,
        items: &[T],
        direction: Direction,
    ) -> Result<Vec<bool>> {
        let batch = Batch::new(items, part.geometry);
        let ctx = self.ctx(guard);
        self.exec
            .retried(clock, || async {
                let write = matches!(direction, Direction::Write);
                if let Some(guard) = guard {
                    guard.ensure(&self.exec, write).await?;
                }
                if !write {
                    return part.read(ctx, &batch).await;
                }
                let new = part.write(ctx, &batch).await?;
                self.exec.confirm(&part.key, self.engine).await?;
                Ok(new)
            })
            .await
    }

    /// `clear` or `expire`: one checked step for one key; for a sharded filter, its parameters
    /// checked, each shard in a checked step, then the parameters (never the bare name, which
    /// may hold someone else's filter).
    async fn remove(&self, how: Removal) -> Result<bool> {
        let clock = self.exec.clock();
        let parts = match self.shards.parts() {
            [one] => {
                let ctx = self.ctx(Some(&self.guard));
                return self.exec.retried(&clock, || one.remove(ctx, how)).await;
            }
            parts => parts,
        };
        self.exec
            .retried(&clock, || self.guard.ensure(&self.exec, false))
            .await?;
        let ctx = self.ctx(None);
        let all = parts
            .iter()
            .map(|part| self.exec.retried(&clock, move || part.remove(ctx, how)));
        let any = join_all(all)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?
            .contains(&true);
        self.guard.remove_stored(&self.exec, &clock, how).await?;
        Ok(any)
    }
}

/// What a snapshot of a plain filter needs from it (src/snapshot/strings.rs).
pub(crate) struct PlainParts<'a, C> {
    pub(crate) exec: &'a Exec<C>,
    pub(crate) guard: &'a Guard,
    /// Each shard's bits key and its shape.
    pub(crate) parts: &'a [Bits],
}

impl<C> RedisBloom<C> {
    pub(crate) fn plain_parts(&self) -> PlainParts<'_, C> {
        PlainParts {
            exec: &self.0.exec,
            guard: &self.0.guard,
            parts: self.0.shards.parts(),
        }
    }
}
