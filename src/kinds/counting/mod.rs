//! The counting filter (SPEC.md §4 "counting"): items can be removed. Each position is a 4-bit
//! counter (`BITFIELD ... u4 #i`, two per byte) that saturates at 15; an add increments the
//! item's k counters, a remove decrements them, in one atomic step that does nothing unless
//! every one is above zero, and never decrements a saturated counter.

use crate::bitfield::{self, Fold};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::info::{CountingInfo, FilterInfo, KeyTtl};
use crate::io::bits::{Bits, Ctx, Removal, MAX_OFFSETS_PER_COMMAND};
use crate::io::exec::{self, Exec};
use crate::io::guard::Guard;
use crate::io::tx::{Slot, Tx};
use crate::layout::Layout;
use crate::near::{self, Near, NearCache, NearCacheStats};
use crate::options::Options;
use crate::retry::Clock;
use crate::scripts::script;
use crate::sharded::{self, Shards};
use crate::sizing::{current_fpr, estimate_items};
use crate::{dense, keys, Engine};
use futures_util::future::join_all;
use futures_util::StreamExt;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Commands of one batch in flight at once on the connection.
const COMMANDS_IN_FLIGHT: usize = 4;

script!(
    /// Removes items: nothing unless every counter is above zero; saturated counters stay.
    COUNTING_REMOVE = include_str!("../../../lua/counting_remove.lua")
);
script!(
    /// Adds items only if absent (`CF.ADDNX`).
    COUNTING_ADD_ABSENT = include_str!("../../../lua/counting_add_absent.lua")
);
/// The dense path's compare-and-set of a whole key of counters (run with `EVAL` inside a
/// `MULTI`, where `EVALSHA`'s `NOSCRIPT` could not be answered by loading it).
const COUNTING_SWAP: &str = include_str!("../../../lua/counting_swap.lua");

mod swap;

/// A Bloom filter whose items can be removed (SPEC.md §4 "counting"): each of its positions is
/// a 4-bit counter in a Redis string (half a byte each), for blacklists whose entries are
/// lifted.
///
/// [`add`](CountingBloom::add) increments the item's k counters (saturating at 15);
/// [`remove`](CountingBloom::remove) decrements them in one atomic step that does nothing
/// unless every one is above zero, and never decrements a saturated counter. An item added
/// more often than removed is always found, whatever other clients do concurrently,
/// **provided only items that were added are removed**: removing an item that was never added
/// but tests present (a false positive) decrements counters that other items hold, and can make
/// them absent. Use [`add_if_absent`](CountingBloom::add_if_absent) so that an item is counted
/// once however often it is added, and remove only what you know you added.
///
/// ```no_run
/// # async fn demo(conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let blocked = redbloom::RedisBloom::builder("blocked:users")
///     .expected_items(100_000)
///     .false_positive_rate(0.001)
///     .build_counting(conn)?;
/// blocked.add_if_absent("user:42").await?; // blocking twice counts once
/// assert!(blocked.exists("user:42").await?);
/// blocked.remove("user:42").await?;       // unblocked
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CountingBloom<C>(Arc<Counting<C>>);

impl<C> Clone for CountingBloom<C> {
    /// Another handle on the same filter: one reference count.
    fn clone(&self) -> Self {
        CountingBloom(Arc::clone(&self.0))
    }
}

#[derive(Debug)]
struct Counting<C> {
    exec: Exec<C>,
    key: String,
    /// The counters (`bits` counts counters) and hashes, all shards together.
    geometry: Geometry,
    guard: Guard,
    parts: Shards<Counters>,
    /// Per part: held through a dense batch's read and swap, so that this handle's own
    /// batches in flight do not make each other's swaps fail.
    swaps: Vec<tokio::sync::Mutex<()>>,
    /// The copy that answers checks, when the builder asked for one.
    near: Option<Near<Copy>>,
}

/// The copy of its near cache: each shard's bytes.
type Copy = near::Strings;

/// One key of counters.
#[derive(Debug, Clone)]
struct Counters {
    key: String,
    /// The dense path's scratch keys in its slot (the bytes as read, the bytes to write);
    /// `None` when the key's name allows no key in its slot.
    scratch: Option<(String, String)>,
    /// `bits` is the number of counters of this key.
    geometry: Geometry,
}

impl Counters {
    fn new(key: String, geometry: Geometry) -> Self {
        let scratch = keys::sidecar(&key, "redbloom:swap:old")
            .and_then(|old| Ok((old, keys::sidecar(&key, "redbloom:swap:new")?)))
            .ok();
        Counters {
            key,
            scratch,
            geometry,
        }
    }

    /// The same key seen as bits (4 per counter), for the checked `clear` and `expire`.
    fn as_bits(&self) -> Bits {
        Bits::new(
            self.key.clone(),
            None,
            self.geometry.total(self.geometry.bits * 4),
        )
    }
}

/// What a batch does to the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    AddIfAbsent,
    Exists,
    Remove,
}

impl<C> CountingBloom<C> {
    /// The filter the [`Builder`](crate::Builder) describes: `geometry.bits` counts counters
    /// (all shards together).
    pub(crate) fn from_parts(
        conn: C,
        key: String,
        geometry: Geometry,
        shards: u32,
        options: Options,
    ) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        keys::check_not_reserved(&key)?;
        let shards = shards.max(1);
        // A key holds at most 2^32 bits: 2^30 counters.
        let per_part = Geometry::new(
            Layout::Native,
            geometry.bits.div_ceil(u64::from(shards)),
            geometry.hashes,
        )?;
        if per_part.bits > crate::sizing::MAX_BITS / 4 {
            return Err(Error::InvalidConfig(format!(
                "{} counters per key are more than one key's 2^30 (4 bits each); use more shards",
                per_part.bits
            )));
        }
        let geometry = per_part.total(per_part.bits * u64::from(shards));
        let fingerprint = format!(
            "kind=counting counter_bits=4 {}",
            geometry.fingerprint(shards)
        );
        let params = keys::sidecar(&key, "redbloom:params")?;
        let (guard, parts) = if shards == 1 {
            let guard = Guard::new(
                key.clone(),
                Some(params),
                key.clone(),
                fingerprint,
                Layout::Native,
                geometry.bits * 4,
            );
            let part = Counters::new(key.clone(), per_part);
            (guard, vec![part])
        } else {
            let guard = Guard::new(
                key.clone(),
                Some(params.clone()),
                params,
                fingerprint,
                Layout::Native,
                geometry.bits * 4,
            );
            let parts = (0..shards)
                .map(|i| Counters::new(keys::shard_key(&key, i, shards), per_part))
                .collect();
            (guard, parts)
        };
        Ok(CountingBloom(Arc::new(Counting {
            exec: Exec::new(conn, options),
            key,
            geometry,
            guard,
            swaps: (0..shards).map(|_| tokio::sync::Mutex::new(())).collect(),
            parts: Shards::new(parts),
            near: None,
        })))
    }

    /// Gives a filter just made its near cache ([`Builder::near_cache`](crate::Builder::near_cache)).
    pub(crate) fn attach_near(&mut self, config: NearCache) -> Result<()> {
        let counting = Arc::get_mut(&mut self.0).expect("a filter just made has one handle");
        let bytes = counting
            .parts
            .parts()
            .iter()
            .map(|p| p.geometry.bits.div_ceil(2))
            .sum();
        let keys = counting
            .parts
            .parts()
            .iter()
            .map(|p| p.key.clone())
            .collect();
        counting.near = Some(Near::new(
            &counting.key,
            config,
            bytes,
            near::prefixes(keys),
        )?);
        Ok(())
    }

    /// What the near cache has done (`None`: the filter has none).
    pub fn near_cache_stats(&self) -> Option<NearCacheStats> {
        self.0.near.as_ref().map(Near::stats)
    }

    /// The filter's key in Redis (for a sharded filter, the name its shards' keys derive from).
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// How many 4-bit counters the filter has (all shards together).
    pub fn counters(&self) -> u64 {
        self.0.geometry.bits
    }

    /// Counters per item.
    pub fn hashes(&self) -> u32 {
        self.0.geometry.hashes
    }

    /// How many keys hold the filter.
    pub fn shards(&self) -> u32 {
        self.0.parts.count()
    }

    /// Items per batch that `redbloom load` and `unload` use: large enough for the dense path
    /// (the counters read, changed here and swapped back whole) on keys of up to 8 MiB of
    /// counters, else a few commands' worth.
    pub fn bulk_batch_size(&self) -> usize {
        let part = &self.0.parts.parts()[0].geometry;
        let per_item = (MAX_OFFSETS_PER_COMMAND / part.hashes as usize).max(1) * COMMANDS_IN_FLIGHT;
        swap::batch_size(part.bits.div_ceil(2), part.hashes, per_item) * self.shards() as usize
    }

    /// Items per batch that `redbloom check` uses: large enough to read the counters whole
    /// (up to 64 MiB per key), else as [`bulk_batch_size`](CountingBloom::bulk_batch_size).
    pub fn bulk_check_batch_size(&self) -> usize {
        let part = &self.0.parts.parts()[0].geometry;
        let bytes = part.bits.div_ceil(2);
        if bytes > dense::MAX_READ_BYTES {
            return self.bulk_batch_size();
        }
        // Twice the break-even, so that the last, partial batches read whole too.
        (bytes.div_ceil(8 * u64::from(part.hashes)) * 2).clamp(1_000, 1_000_000) as usize
            * self.shards() as usize
    }
}

impl<C> CountingBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds `item`: increments its counters (a counter at 15 stays at 15). Returns `true` when
    /// one of them went from 0 to 1, so the item was certainly absent before. Adding twice
    /// counts twice: it then takes two removes to remove it (see
    /// [`add_if_absent`](CountingBloom::add_if_absent)).
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the filter was created with another size, shard count
    /// or kind (nothing is written); [`Error::WrongType`]; network faults as for
    /// [`RedisBloom::add`](crate::RedisBloom::add). Not idempotent: a retried add after a lost
    /// reply may count twice.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add", kind = "counting", key = self.key(), items = 1, attempts))]
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.one(item.as_ref(), Op::Add).await
    }

    /// Adds `item` only if it is absent (all its counters above zero means present), in one
    /// atomic step, like RedisBloom's `CF.ADDNX`: of concurrent calls for one absent item,
    /// exactly one adds it and returns `true`. Idempotent, so a blacklist entry blocked twice
    /// is unblocked by one [`remove`](CountingBloom::remove).
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_if_absent", kind = "counting", key = self.key(), items = 1, attempts))]
    pub async fn add_if_absent(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.one(item.as_ref(), Op::AddIfAbsent).await
    }

    /// Whether `item` may be in the filter: all its counters are above zero.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists", kind = "counting", key = self.key(), items = 1, attempts))]
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        if let Some(near) = &self.0.near {
            if let Some(found) = near.answer_now(item, |copy, item| self.0.in_copy(copy, item)) {
                return Ok(found);
            }
        }
        // Boxed: a call answered from the copy does not carry the way to Redis.
        Box::pin(self.one(item, Op::Exists)).await
    }

    /// Removes `item` once: in one atomic step, nothing unless every counter of the item is
    /// above zero; then each is decremented, but a saturated counter (15) stays. Returns
    /// whether it was present and removed. Removing an absent item changes nothing.
    ///
    /// Remove only items that were added: removing a false positive decrements counters of
    /// other items, which may then test absent.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add). Not idempotent: a retried remove after a lost reply
    /// may remove twice.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "remove", kind = "counting", key = self.key(), items = 1, attempts))]
    pub async fn remove(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.one(item.as_ref(), Op::Remove).await
    }

    /// [`add`](CountingBloom::add) for every item, in order; answers in input order. Up to
    /// [`MAX_OFFSETS_PER_COMMAND`](crate::MAX_OFFSETS_PER_COMMAND) counters per command, each
    /// atomic; a few commands in flight at once.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_many", kind = "counting", key = self.key(), items = items.len(), attempts))]
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.0.many(items, Op::Add).await
    }

    /// [`add_if_absent`](CountingBloom::add_if_absent) for every item, in order.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_many_if_absent", kind = "counting", key = self.key(), items = items.len(), attempts))]
    pub async fn add_many_if_absent<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.0.many(items, Op::AddIfAbsent).await
    }

    /// [`exists`](CountingBloom::exists) for every item.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists_many", kind = "counting", key = self.key(), items = items.len(), attempts))]
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.0.many(items, Op::Exists).await
    }

    /// [`remove`](CountingBloom::remove) for every item, in order; an item repeated in the
    /// batch is removed as many times as it appears (while present).
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "remove_many", kind = "counting", key = self.key(), items = items.len(), attempts))]
    pub async fn remove_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.0.many(items, Op::Remove).await
    }

    /// The counters in use (above zero) and saturated (at 15), with the usual totals: reads
    /// the whole filter, in 4 MiB chunks.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "info", kind = "counting", key = self.key(), attempts))]
    pub async fn info(&self) -> Result<CountingInfo> {
        self.0.info().await
    }

    /// Deletes the filter (every shard and the stored parameters), checked as
    /// [`RedisBloom::clear`](crate::RedisBloom::clear) is. Returns whether it existed.
    ///
    /// # Errors
    /// As for [`add`](CountingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "clear", kind = "counting", key = self.key(), attempts))]
    pub async fn clear(&self) -> Result<bool> {
        let done = self.0.remove_keys(Removal::Delete).await;
        self.0.guard.reset();
        if let Some(near) = &self.0.near {
            near.cleared();
        }
        done
    }

    /// Makes the filter expire after `ttl`, checked as
    /// [`RedisBloom::expire`](crate::RedisBloom::expire) is.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL below 1 ms or too long for Redis; otherwise as for
    /// [`clear`](CountingBloom::clear).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "expire", kind = "counting", key = self.key(), attempts))]
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        self.0.remove_keys(Removal::expire(ttl)?).await
    }

    async fn one(&self, item: &[u8], op: Op) -> Result<bool> {
        Ok(self.0.many(&[item], op).await?[0])
    }
}

impl<C> Counting<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// A batch, through the near cache when there is one: checks from its copy, writes
    /// told to it.
    async fn many<T: AsRef<[u8]>>(&self, items: &[T], op: Op) -> Result<Vec<bool>> {
        let Some(near) = &self.near else {
            return self.direct(items, op).await;
        };
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if op == Op::Exists {
            return self.check_near(near, items).await;
        }
        let answers = self.direct(items, op).await;
        match op {
            Op::Add | Op::AddIfAbsent if answers.is_ok() => near.added(items),
            _ => near.changed(),
        }
        answers
    }

    /// Whether `item` is in the near cache's copy (all its counters above zero).
    fn in_copy(&self, copy: &Copy, item: &[u8]) -> bool {
        let parts = self.parts.parts();
        let i = self.parts.part_of(item);
        let counters = &copy.0[i];
        parts[i]
            .geometry
            .all(&ItemHash::of(item, Layout::Native), |cell| {
                swap::counter(counters, cell) > 0
            })
    }

    /// Checks `items` from the near cache's copy while it is fresh, else from Redis.
    async fn check_near<T: AsRef<[u8]>>(
        &self,
        near: &Near<Copy>,
        items: &[T],
    ) -> Result<Vec<bool>> {
        let clock = self.exec.clock();
        let parts = self.parts.parts();
        let answer = |copy: &Copy, item: &[u8]| self.in_copy(copy, item);
        let read = || async {
            self.exec
                .retried(&clock, || self.guard.ensure(&self.exec, false))
                .await?;
            let mut copy = near::Strings(Vec::with_capacity(parts.len()));
            for part in parts {
                let max = part.geometry.bits.div_ceil(2);
                let bytes = self
                    .exec
                    .retried(&clock, || near::read_key(&self.exec, &part.key, max))
                    .await?;
                copy.0.push(bytes);
            }
            Ok(copy)
        };
        let remote = || self.direct_on(&clock, items, Op::Exists);
        near.check(items, answer, read, remote).await
    }

    /// A batch: the parameters checked (once per filter, stored by writes), each part's items
    /// at once, the answers in input order.
    async fn direct<T: AsRef<[u8]>>(&self, items: &[T], op: Op) -> Result<Vec<bool>> {
        self.direct_on(&self.exec.clock(), items, op).await
    }

    /// [`direct`](Counting::direct) on a call's clock (one deadline and one count of
    /// attempts for the whole call).
    async fn direct_on<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        items: &[T],
        op: Op,
    ) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if self.parts.count() == 1 {
            let write = op != Op::Exists;
            self.exec
                .retried(clock, || self.guard.ensure(&self.exec, write))
                .await?;
            let items: Vec<&[u8]> = items.iter().map(AsRef::as_ref).collect();
            return self.part_call(clock, 0, &items, op).await;
        }
        let check = match op {
            // A remove cannot be undone and takes other items with it: a sharded filter's
            // parameters (in their own slot) are checked again before any shard is touched,
            // not beside the writes as for adds.
            Op::Remove => sharded::Check::WriteFirst,
            Op::Add | Op::AddIfAbsent => sharded::Check::Write,
            Op::Exists => sharded::Check::Read,
        };
        self.parts
            .fan_out(
                &self.exec,
                clock,
                &self.guard,
                items,
                check,
                |part, items| async move { self.part_call(clock, part, &items, op).await },
            )
            .await
    }

    /// One part's items in commands of at most `MAX_OFFSETS_PER_COMMAND` counters, a few in
    /// flight, in order; a write and its `WAIT` retried together.
    async fn part_call(
        &self,
        clock: &Clock,
        index: usize,
        items: &[&[u8]],
        op: Op,
    ) -> Result<Vec<bool>> {
        let part = &self.parts.parts()[index];
        let k = part.geometry.hashes as usize;
        let per_command = (MAX_OFFSETS_PER_COMMAND / k).max(1);
        let one_key = self.parts.count() == 1;
        // A check that outweighs the counters reads them whole (as the plain filter's dense
        // check reads its bits) and tests them here.
        let bytes = part.geometry.bits.div_ceil(2);
        if op == Op::Exists
            && bytes <= dense::MAX_READ_BYTES
            && items.len() as u64 * part.geometry.hashes as u64 * 8 >= bytes
        {
            let cells = part.geometry.offsets(items)?;
            return self
                .exec
                .retried(clock, || async {
                    let counters = self.read_whole(part).await?;
                    Ok(cells
                        .chunks(k)
                        .map(|item| item.iter().all(|&cell| swap::counter(&counters, cell) > 0))
                        .collect())
                })
                .await;
        }
        // A write that outweighs the counters reads them, changes them here and swaps them
        // back whole, unless other writers keep changing them meanwhile.
        if op != Op::Exists
            && part.scratch.is_some()
            && !self.exec.caps().no_merge.load(Ordering::Relaxed)
            && swap::worth_it(
                bytes,
                items.len(),
                part.geometry.hashes,
                swap::MAX_SWAP_BYTES,
            )
        {
            let cells = part.geometry.offsets(items)?;
            match self.swap(clock, index, &cells, op, one_key).await {
                Ok(Some(answers)) => return Ok(answers),
                Ok(None) => tracing::debug!(
                    target: "redbloom",
                    key = %part.key,
                    from = "dense swap",
                    to = "BITFIELD",
                    cause = "other writers changed the counters during every swap",
                    "fallback"
                ),
                // A user granted the counters but not the scratch keys or the swap's
                // commands: the same batch by BITFIELD.
                Err(Error::NoPermission(_)) => {
                    self.exec.caps().no_merge.store(true, Ordering::Relaxed);
                    tracing::info!(
                        target: "redbloom",
                        key = %part.key,
                        from = "dense swap",
                        to = "BITFIELD",
                        cause = "the ACL refused the swap (its scratch keys or commands)",
                        "fallback"
                    );
                }
                Err(err) => return Err(err),
            }
        }
        let attempt = || async move {
            let command = |chunk: &[&[u8]]| {
                let cells = part.geometry.offsets(chunk);
                let len = chunk.len();
                async move { self.command(part, &cells?, len, op, one_key).await }
            };
            if items.len() <= per_command {
                return command(items).await;
            }
            let mut answers = Vec::with_capacity(items.len());
            let mut commands = futures_util::stream::iter(items.chunks(per_command).map(command))
                .buffered(COMMANDS_IN_FLIGHT);
            while let Some(flags) = commands.next().await {
                answers.extend(flags?);
            }
            Ok(answers)
        };
        self.exec
            .retried(clock, || async {
                let answers = attempt().await?;
                if op != Op::Exists {
                    self.exec.confirm(&part.key, Engine::Fast).await?;
                }
                Ok(answers)
            })
            .await
    }

    /// One command on one part.
    async fn command(
        &self,
        part: &Counters,
        cells: &[u64],
        items: usize,
        op: Op,
        one_key: bool,
    ) -> Result<Vec<bool>> {
        let k = part.geometry.hashes as usize;
        let unexpected = |reply: &Value| {
            Error::UnexpectedReply(format!("{reply:?} for {items} items of {k} counters"))
        };
        match op {
            Op::Add => {
                // The guard's step and the increments in one transaction (a filter of one key).
                let guard = one_key.then_some(&self.guard);
                let mut tx = match guard {
                    Some(_) => Tx::atomic(),
                    None => Tx::plain(),
                };
                let step = guard.and_then(|g| g.step(&mut tx).map(|slot| (g, slot)));
                let incr: Slot<Value> = tx.add(bitfield::increment(&part.key, cells));
                let mut replies = self.exec.run(&part.key, &tx).await?;
                if let Some((g, slot)) = step {
                    g.check_step(replies.take(slot)?)?;
                }
                let reply = replies.take(incr)?;
                bitfield::fold_counters(&reply, k, items, Fold::AnyZero)
                    .ok_or_else(|| unexpected(&reply))
            }
            Op::Exists => {
                let caps = self.exec.caps();
                let read_only = !caps.no_bitfield_ro.load(Ordering::Relaxed);
                let reply = match self
                    .exec
                    .query::<Value>(
                        &part.key,
                        &bitfield::get_counters(&part.key, cells, read_only),
                    )
                    .await
                {
                    Err(Error::Redis(err)) if read_only && exec::is_unknown_command(&err) => {
                        caps.no_bitfield_ro.store(true, Ordering::Relaxed);
                        tracing::info!(
                            target: "redbloom",
                            key = %part.key,
                            from = "BITFIELD_RO",
                            to = "BITFIELD",
                            cause = "unknown command (Redis < 6.2)",
                            "fallback"
                        );
                        self.exec
                            .query(&part.key, &bitfield::get_counters(&part.key, cells, false))
                            .await?
                    }
                    reply => reply?,
                };
                bitfield::fold_counters(&reply, k, items, Fold::AllOne)
                    .ok_or_else(|| unexpected(&reply))
            }
            Op::Remove | Op::AddIfAbsent => {
                // The scripts of a filter of one key check its parameters in the same step.
                let mut keys = vec![part.key.as_str()];
                if one_key {
                    keys.extend(self.guard.key());
                }
                let script = match op {
                    Op::Remove => &COUNTING_REMOVE,
                    _ => &COUNTING_ADD_ABSENT,
                };
                let reply = self
                    .exec
                    .script(
                        &part.key,
                        script,
                        &keys,
                        &[&self.guard.fingerprint(), &k, &bit_offsets(cells)],
                    )
                    .await?;
                if let Some(refusal) = self.refusal(&reply) {
                    return Err(refusal);
                }
                flags(&reply, items).ok_or_else(|| unexpected(&reply))
            }
        }
    }

    /// A write batch the dense way: the counters read whole, the batch applied here, and the
    /// result swapped in by one script that writes nothing if they changed since the read
    /// (tried [`swap::SWAP_ATTEMPTS`] times). `None` when every swap found them changed: the
    /// batch then goes the per-item way.
    async fn swap(
        &self,
        clock: &Clock,
        index: usize,
        cells: &[u64],
        op: Op,
        one_key: bool,
    ) -> Result<Option<Vec<bool>>> {
        let part = &self.parts.parts()[index];
        let Some((old_key, new_key)) = &part.scratch else {
            return Ok(None);
        };
        let k = part.geometry.hashes as usize;
        let _turn = self.swaps[index].lock().await;
        let mut keys = vec![part.key.as_str(), old_key, new_key];
        if one_key {
            keys.extend(self.guard.key());
        }
        let adds = if op == Op::Remove { "0" } else { "1" };
        for _ in 0..swap::SWAP_ATTEMPTS {
            let swapped = self
                .exec
                .retried(clock, || async {
                    let old = self.read_whole(part).await?;
                    let mut new = old.clone();
                    let answers = swap::apply(op, &mut new, cells, k);
                    let changed = if new == old { "0" } else { "1" };
                    let mut tx = Tx::atomic();
                    for (scratch, bytes) in [(old_key, &old), (new_key, &new)] {
                        tx.add_unread(
                            redis::cmd("SET")
                                .arg(scratch)
                                .arg(bytes)
                                .arg("PX")
                                .arg(swap::SCRATCH_TTL_MS)
                                .to_owned(),
                        );
                    }
                    let reply: Slot<Value> = tx.add(
                        redis::cmd("EVAL")
                            .arg(COUNTING_SWAP)
                            .arg(keys.len())
                            .arg(&keys)
                            .arg(self.guard.fingerprint())
                            .arg(adds)
                            .arg(changed)
                            .to_owned(),
                    );
                    let reply = self.exec.run(&part.key, &tx).await?.take(reply)?;
                    if let Some(refusal) = self.refusal(&reply) {
                        return Err(refusal);
                    }
                    match reply {
                        Value::Int(1) => {
                            self.exec.confirm(&part.key, Engine::Fast).await?;
                            Ok(Some(answers))
                        }
                        Value::Int(0) => Ok(None),
                        reply => Err(Error::UnexpectedReply(format!(
                            "{reply:?} from the counters' swap"
                        ))),
                    }
                })
                .await?;
            if swapped.is_some() {
                return Ok(swapped);
            }
        }
        Ok(None)
    }

    /// The error a script's `{"params", STORED}` reply means, if it is one.
    fn refusal(&self, reply: &Value) -> Option<Error> {
        let Value::Array(refusal) = reply else {
            return None;
        };
        let [Value::BulkString(what), Value::BulkString(stored)] = refusal.as_slice() else {
            return None;
        };
        (what == b"params").then(|| {
            let stored = String::from_utf8_lossy(stored).into_owned();
            self.guard.refusal(crate::io::guard::Evidence::Stored(
                (!stored.is_empty()).then_some(stored),
            ))
        })
    }

    /// A key's counters, in chunks of a few MiB, in one round trip.
    async fn read_whole(&self, part: &Counters) -> Result<Vec<u8>> {
        let mut tx = Tx::plain();
        let whole = dense::read_whole(&mut tx, &part.key, part.geometry.bits * 4);
        let mut replies = self.exec.run(&part.key, &tx).await?;
        whole.take(&mut replies)
    }

    async fn info(&self) -> Result<CountingInfo> {
        let clock = self.exec.clock();
        self.exec
            .retried(&clock, || self.guard.ensure(&self.exec, false))
            .await?;
        let reads = self.parts.parts().iter().map(|part| {
            self.exec.retried(&clock, move || async move {
                let mut tx = Tx::plain();
                let whole = dense::read_whole(&mut tx, &part.key, part.geometry.bits * 4);
                let pttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(&part.key).to_owned());
                let mut replies = self.exec.run(&part.key, &tx).await?;
                let counters = whole.take(&mut replies)?;
                let (mut in_use, mut saturated) = (0u64, 0u64);
                let bytes = counters.len() as u64;
                for byte in counters {
                    for nibble in [byte >> 4, byte & 0x0f] {
                        in_use += u64::from(nibble > 0);
                        saturated += u64::from(nibble == 15);
                    }
                }
                Ok((
                    in_use,
                    saturated,
                    bytes,
                    KeyTtl::from_pttl(replies.take(pttl)?),
                ))
            })
        });
        let mut totals = (0, 0, 0, KeyTtl::Missing);
        for read in join_all(reads).await {
            let (in_use, saturated, bytes, ttl) = read?;
            totals.0 += in_use;
            totals.1 += saturated;
            totals.2 += bytes;
            totals.3 = totals.3.longest_lived(ttl);
        }
        let Geometry { bits, hashes, .. } = self.geometry;
        let (in_use, saturated, bytes, ttl) = totals;
        Ok(CountingInfo {
            filter: FilterInfo {
                key: self.key.clone(),
                bits,
                hashes,
                bits_set: in_use,
                bytes,
                estimated_items: estimate_items(bits, hashes, in_use),
                estimated_fpr: current_fpr(bits, hashes, in_use),
                ttl,
            },
            counters_in_use: in_use,
            counters_saturated: saturated,
        })
    }

    /// `clear` or `expire`, each key checked in the same atomic step (the plain filter's
    /// `lua/drop.lua`); a sharded filter's parameters checked first and removed last.
    async fn remove_keys(&self, how: Removal) -> Result<bool> {
        let clock = self.exec.clock();
        let one_key = self.parts.count() == 1;
        if !one_key {
            self.exec
                .retried(&clock, || self.guard.ensure(&self.exec, false))
                .await?;
        }
        let ctx = Ctx {
            exec: &self.exec,
            engine: Engine::Fast,
            guard: one_key.then_some(&self.guard),
        };
        let clock = &clock;
        let all = self.parts.parts().iter().map(|part| {
            let bits = part.as_bits();
            async move { self.exec.retried(clock, || bits.remove(ctx, how)).await }
        });
        let any = join_all(all)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?
            .contains(&true);
        if !one_key {
            self.guard.remove_stored(&self.exec, clock, how).await?;
        }
        Ok(any)
    }
}

/// The counters' bit offsets (counter i starts at bit 4i), which the scripts pass on to
/// `BITFIELD ... u4 OFFSET`: numbers, not a string per counter.
fn bit_offsets(cells: &[u64]) -> Vec<u64> {
    cells.iter().map(|cell| cell * 4).collect()
}

/// One flag per item from a script's array of 0/1.
fn flags(reply: &Value, items: usize) -> Option<Vec<bool>> {
    let Value::Array(values) = reply else {
        return None;
    };
    if values.len() != items {
        return None;
    }
    values
        .iter()
        .map(|v| match v {
            Value::Int(flag) => Some(*flag == 1),
            _ => None,
        })
        .collect()
}

impl<C> CountingBloom<C> {
    /// What a snapshot needs (src/snapshot/strings.rs): the executor, the guard, and each
    /// shard's key and most bytes (two counters a byte).
    pub(crate) fn snapshot_parts(&self) -> (&Exec<C>, &Guard, Vec<(String, u64)>) {
        let parts = self
            .0
            .parts
            .parts()
            .iter()
            .map(|p| (p.key.clone(), p.geometry.bits.div_ceil(2)))
            .collect();
        (&self.0.exec, &self.0.guard, parts)
    }
}
