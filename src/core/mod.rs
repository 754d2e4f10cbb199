//! The one core under every kind of filter: [`Bloom<C, K>`] and what every kind does with it.
//!
//! A filter is one `Arc` ([`Core`]) holding its connection and executor, its name, its stored
//! parameters' guard, its parts (one slot group each: one for a filter of one key, one per
//! shard), the kind's own state, and its near cache. The public calls below are written once
//! for every kind; each runs in a span with metrics ([`call`]), under one clock, and reaches the
//! kind only through the [`Seam`](kind::Seam) for what happens inside one slot group.

pub(crate) mod builder;
pub(crate) mod call;
pub(crate) mod group;
pub(crate) mod kind;
pub(crate) mod legacy;
pub(crate) mod lost;
pub(crate) mod sharded;
pub(crate) mod stored;
mod transfer;

pub(crate) use self::call::Call;
pub(crate) use self::kind::{Ctx, Made, Op};
pub(crate) use crate::io::exec::Conn;

use self::kind::{Kind, SizedInBits};
use self::sharded::Shards;
use crate::error::Result;
use crate::io::eviction::Groups;
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::io::once;
use crate::io::removal::Removal;
use crate::near::{Near, NearCache, NearCacheStats};
use crate::retry::Clock;
use redis::aio::ConnectionLike;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A Bloom filter kept in Redis, of the kind `K`, on the connection `C`: the type behind
/// [`RedisBloom`](crate::RedisBloom), [`WindowBloom`](crate::WindowBloom),
/// [`CountingBloom`](crate::CountingBloom) and [`GrowingBloom`](crate::GrowingBloom).
///
/// Every kind has the verbs below (`add`, `exists`, `add_many`, `exists_many`, `info`,
/// `clear`, `expire`, `export`, `import`); each kind's page adds its own (a counting filter's
/// `remove`, a window's `window()`, …). Made by a [`Builder`](crate::Builder) of the kind.
///
/// `C` is any redis-rs async connection that can be cloned and shared: a
/// [`MultiplexedConnection`](redis::aio::MultiplexedConnection), a
/// [`ConnectionManager`](redis::aio::ConnectionManager) or a cluster connection. Methods take
/// `&self`; cloning a filter is one reference count, so clone it freely to use it from many
/// tasks at once. Concurrent calls on one multiplexed connection are pipelined by redis-rs.
///
/// A call's future may be dropped at any point (cancelled: a timeout, a `select!`): the filter
/// stays consistent. Each of the call's steps is atomic on the server, so a dropped call may
/// have applied some of them, as a call that fails may: each of its items is in the filter or
/// not (a counting filter's counted once or not at all), and what it leaves beside the filter
/// (records, scratch keys, a lease) expires by itself. The crate's docs, "Cancellation", say
/// more.
pub struct Bloom<C, K: Kind>(pub(crate) Arc<Core<C, K>>);

/// What a bulk load's add answered ([`Bloom::load_many`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Loaded {
    /// One answer per item, in input order: `true` when the item was new.
    pub answers: Vec<bool>,
    /// How many items answered `false` ("seen") could have been new: a step that carried them
    /// was retried without a record of its lost attempt, which may have added them. 0 when no
    /// step was retried, and always for a kind that records (counting).
    pub unknown: u64,
}

impl Loaded {
    /// Whether the answer for the item at `index` could not be known: it answered "seen"
    /// (`false`) in a call a step of which was retried without a record of its lost attempt,
    /// which may have added it. Such an item may have been new: a caller that must not drop a
    /// new item (a crawler fetching each new URL) takes it as new, so that it is handled at
    /// least once. `false` for a known answer and for an index past the answers;
    /// [`unknown`](Loaded::unknown) counts the items for which it is `true`.
    ///
    /// ```no_run
    /// # async fn run(bloom: redbloom::RedisBloom<redis::aio::ConnectionManager>) -> redbloom::Result<()> {
    /// let urls = ["https://a.example/", "https://b.example/"];
    /// let loaded = bloom.load_many(&urls).await?;
    /// for (i, url) in urls.iter().enumerate() {
    ///     if loaded.answers[i] || loaded.is_unknown(i) {
    ///         println!("{url}"); // new, or perhaps new: fetched rather than dropped
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_unknown(&self, index: usize) -> bool {
        // Retries are known per call: once one of its steps was retried, every "seen" answer
        // of the call is unknown (`Bloom::load_many`).
        self.unknown > 0 && self.answers.get(index) == Some(&false)
    }
}

impl<C, K: Kind> Clone for Bloom<C, K> {
    /// Another handle on the same filter: one reference count.
    fn clone(&self) -> Self {
        Bloom(Arc::clone(&self.0))
    }
}

impl<C, K: Kind> std::fmt::Debug for Bloom<C, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bloom")
            .field("kind", &K::NAME)
            .field("key", &self.0.key)
            .field("shards", &self.0.parts.count())
            .field("state", &self.0.kind)
            .finish_non_exhaustive()
    }
}

/// What the handles of one filter share.
pub(crate) struct Core<C, K: Kind> {
    pub(crate) exec: Exec<C>,
    /// The filter's name (for a sharded filter, the name its shards' keys derive from).
    pub(crate) key: String,
    /// The parameters stored beside the filter: in the part's slot group for a filter of one
    /// key, in a slot of their own for a sharded one.
    pub(crate) guard: Guard,
    pub(crate) parts: Shards<K::Part>,
    pub(crate) kind: K,
    /// The copy that answers checks, when the builder asked for one.
    pub(crate) near: Option<Near<K::Copy>>,
    /// A key in each slot group of the filter (its own, or each shard's), for asking each
    /// master whether it may evict them.
    pub(crate) groups: Vec<String>,
    /// Single-item calls waiting for a step of their op and part ([`group`]).
    pub(crate) lanes: group::Lanes,
    /// Set once this handle has asked whether the filter was made under older names
    /// ([`legacy`]).
    pub(crate) names: tokio::sync::OnceCell<()>,
}

impl<C, K: Kind> Core<C, K> {
    /// A filter of what `made` holds, on `conn`, with `near` (its budget checked here).
    pub(crate) fn new(
        conn: C,
        key: String,
        made: Made<K>,
        options: crate::options::Options,
        near: Option<NearCache>,
    ) -> Result<Self> {
        let parts = Shards::new(made.parts);
        let near = match near {
            Some(config) => {
                let bytes = made.kind.copy_bytes(&parts)?;
                let keys = made.kind.part_keys(&parts);
                Some(Near::new(
                    &key,
                    K::NAME.as_str(),
                    config,
                    bytes,
                    crate::near::prefixes(keys),
                )?)
            }
            None => None,
        };
        Ok(Core {
            exec: Exec::new(conn, options, K::NAME.as_str()),
            groups: made.kind.part_keys(&parts),
            lanes: lanes::<K>(parts.count()),
            names: tokio::sync::OnceCell::new(),
            key,
            // A kind that keeps its parts makes a filter of one key's bits with its
            // parameters (SPEC.md §3: lost data is an error).
            guard: made.guard.keeps_bits(made.kind.keeps_parts()),
            parts,
            kind: made.kind,
            near,
        })
    }

    /// A copy on the same connection that has learned nothing yet (no near cache).
    pub(crate) fn fork(&self) -> Self
    where
        C: Clone,
        K: Clone,
        K::Part: Clone,
    {
        Core {
            exec: Exec::new(
                self.exec.conn().clone(),
                self.exec.options(),
                K::NAME.as_str(),
            ),
            key: self.key.clone(),
            guard: self.guard.unchecked(),
            parts: self.parts.clone(),
            kind: self.kind.clone(),
            near: None,
            groups: self.groups.clone(),
            lanes: lanes::<K>(self.parts.count()),
            names: tokio::sync::OnceCell::new(),
        }
    }

    /// Whether the parameters live in the part's slot group (a filter of one key), so that
    /// each step checks them in the same transaction or script.
    pub(crate) fn inline(&self) -> bool {
        self.parts.count() == 1
    }

    /// Part `index` of a call whose clock is `clock` (part 0: also the whole filter).
    pub(crate) fn ctx<'a>(&'a self, clock: &'a Clock, index: usize) -> Ctx<'a, C, K> {
        Ctx {
            exec: &self.exec,
            key: &self.key,
            params: &self.guard,
            parts: &self.parts,
            kind: &self.kind,
            clock,
            index,
            seen: None,
        }
    }
}

impl<C: Conn, K: Kind> Core<C, K> {
    /// A batch of `op` on every part that holds items of it: a filter of one key in its part
    /// (the guard inline); a sharded one checks its parameters as the kind says, runs the
    /// parts at once and puts the answers back in input order.
    pub(crate) async fn batch(&self, clock: &Clock, op: Op, items: &[&[u8]]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        if let (true, [item]) = (self.goes_grouped(op, items), items) {
            return Ok(vec![self.grouped(clock, op, item).await?]);
        }
        // Boxed, as the step of a group is: the future of a call that waits for its group
        // holds neither, so it stays small (a future of some kilobytes was copied whole at
        // every call: BENCHMARKS.md "Group commit").
        Box::pin(self.batch_now(clock, op, items)).await
    }

    /// Whether `items` of `op` go by group commit: a single item, when the filter groups
    /// (writes always, checks when the kind groups them).
    fn goes_grouped(&self, op: Op, items: &[&[u8]]) -> bool {
        items.len() == 1 && self.exec.options().group_commit() && (op.writes() || K::GROUPS_CHECKS)
    }

    /// A single item's `op` by group commit ([`group`]): in the next step of its op and part,
    /// with every other single item waiting for it.
    async fn grouped(&self, clock: &Clock, op: Op, item: &[u8]) -> Result<bool> {
        let part = self.parts.part_of(item);
        let lane = op_index(op) * self.parts.count() as usize + part;
        let deadline = (clock.deadline(), clock.timeout().unwrap_or_default());
        let step = |items: Vec<Vec<u8>>| {
            Box::pin(async move {
                let items: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
                self.batch_now(clock, op, &items).await
            })
        };
        self.lanes.call(lane, item, deadline, &self.key, step).await
    }

    /// [`batch`](Core::batch), sent at once.
    async fn batch_now(&self, clock: &Clock, op: Op, items: &[&[u8]]) -> Result<Vec<bool>> {
        if self.inline() {
            return self.part_batch(clock, 0, op, items).await;
        }
        self.parts
            .fan_out(
                &self.exec,
                clock,
                &self.guard,
                items,
                K::check(op),
                |index, items| async move { self.part_batch(clock, index, op, &items).await },
            )
            .await
    }

    /// A batch of `op` on part `index`. A check or removal of a kind that keeps its parts,
    /// answering "absent" for some item while every bit it read was clear (a part that is gone
    /// reads as zeros), then asks whether the part exists: "absent" from a part that is gone
    /// while the parameters are stored is [`Error::Lost`](crate::Error::Lost). A bit seen set
    /// proves the part is there: most checks of a filter in use ask nothing more (asked
    /// beside every read, single-item checks ran at 0.64-0.75x).
    ///
    /// "Absent" from nothing of the filter (its part missing, no parameters stored) is an
    /// error when the server is a replica that has not synced with its master
    /// ([`Error::ReplicaNotSynced`](crate::Error::ReplicaNotSynced), SPEC.md §3 "Replicas"):
    /// a kind that keeps its parts asks once the part is missing ([`lost::confirm`]); any other
    /// kind asks only while this handle has not seen the filter's parameters (or a go-zero
    /// filter's bits) stored, which a filter in use has from its first call on.
    async fn part_batch(
        &self,
        clock: &Clock,
        index: usize,
        op: Op,
        items: &[&[u8]],
    ) -> Result<Vec<bool>> {
        let ctx = self.ctx(clock, index);
        if !matches!(op, Op::Exists | Op::Remove) {
            return K::batch(ctx, op, items).await;
        }
        let seen = AtomicBool::new(false);
        let ctx = Ctx {
            seen: Some(&seen),
            ..ctx
        };
        let answers = K::batch(ctx, op, items).await?;
        if seen.load(Ordering::Relaxed) || answers.iter().all(|&found| found) {
            return Ok(answers);
        }
        let part = &self.groups[index];
        if !self.kind.keeps_parts() {
            if !self.guard.is_checked() {
                let (exec, key) = (&self.exec, self.key.as_str());
                exec.retried(clock, || lost::synced(exec, key, part))
                    .await?;
            }
            return Ok(answers);
        }
        let exists = self
            .exec
            .retried(clock, || lost::exists(&self.exec, part))
            .await?;
        let names = (self.key.as_str(), part.as_str(), self.guard.key());
        lost::confirm(&self.exec, names, answers, exists).await
    }

    /// Each part's key, and the kind's command that makes it ([`Seam::make_part`]).
    fn part_makers(&self) -> Vec<(&str, redis::Cmd)> {
        self.groups
            .iter()
            .map(|part| (part.as_str(), self.kind.make_part(part)))
            .collect()
    }

    /// A sharded filter of a kind that keeps its parts, about to write for the first time on
    /// this handle: when no parameters are stored yet (a new filter, or one cleared), every
    /// part is made before the write stores them, so that a part is never merely unwritten.
    pub(crate) async fn make_parts(&self, clock: &Clock) -> Result<()> {
        if self.inline() || !self.kind.keeps_parts() || self.guard.is_checked() {
            return Ok(());
        }
        let guard = &self.guard;
        self.exec
            .retried(clock, || guard.ensure(&self.exec, false))
            .await?;
        if guard.is_checked() {
            return Ok(());
        }
        let parts = &self.part_makers();
        self.exec
            .retried(clock, || lost::make_parts(&self.exec, parts))
            .await
    }

    /// Whether the filter may write: `Ok` unless a server holding it may evict its keys (keys
    /// with a TTL too when `ttl`) and the builder did not accept that (asked once); then, once,
    /// the record of exact answers proven where the server cannot ask the ACL
    /// ([`Exec::prove_records`]).
    pub(crate) async fn writable(&self, clock: &Clock, ttl: bool) -> Result<()> {
        let groups = Groups {
            keys: &self.groups,
            params: self.guard.key(),
            engine: self.kind.route_engine(),
        };
        let ttl = ttl || self.kind.expiring();
        let eviction = self.exec.eviction();
        eviction
            .ensure(&self.exec, clock, &self.key, groups, ttl)
            .await?;
        self.exec.prove_records(clock, &self.groups).await
    }

    /// A write batch, told to the near cache: adds reach its copy, anything else (a removal,
    /// a failed write that may have been applied) counts as an invalidation.
    pub(crate) async fn write(&self, op: Op, items: &[&[u8]]) -> Result<Vec<bool>> {
        self.write_on(&self.exec.clock(), op, items).await
    }

    /// [`write`](Core::write) under the call's `clock` (a bulk load's, [`Clock::bare`]).
    ///
    /// [`Clock::bare`]: crate::retry::Clock::bare
    pub(crate) async fn write_on(
        &self,
        clock: &Clock,
        op: Op,
        items: &[&[u8]],
    ) -> Result<Vec<bool>> {
        // What a write asks first, once per filter, boxed: a call's future stays small (see
        // `batch`).
        let ttl = self.kind.expiring();
        let made = self.inline() || !self.kind.keeps_parts() || self.guard.is_checked();
        let asked = made && self.exec.eviction().passed(ttl) && self.exec.records_proven();
        if !items.is_empty() && !asked {
            Box::pin(async {
                self.writable(clock, false).await?;
                self.make_parts(clock).await
            })
            .await?;
        }
        if !items.is_empty() && self.exec.time_stale() {
            Box::pin(self.exec.learn_time(&self.key)).await;
        }
        let mut answers = self.batch(clock, op, items).await;
        let restored = self.guard.restored();
        if self.kind.keeps_parts() && restored {
            // The parameters were stored again beside this write (another client cleared the
            // filter, or it expired): the parts this write did not touch are made again (by
            // the next write, should this one fail).
            Box::pin(async {
                let parts = &self.part_makers();
                self.exec
                    .retried(clock, || lost::make_parts(&self.exec, parts))
                    .await
            })
            .await?;
            self.guard.parts_made();
        }
        if matches!(answers, Err(crate::Error::Lost { .. }))
            && self.lost_to_a_clear(restored).await?
        {
            // A shard refused as gone, because another client cleared the filter since this
            // one saw its parameters: the filter starts again (its parts made, then the
            // write), as a write to a cleared filter does.
            Box::pin(async {
                self.guard.reset();
                self.make_parts(clock).await
            })
            .await?;
            answers = self.batch(clock, op, items).await;
        }
        if let Some(near) = &self.near {
            match (&answers, op) {
                (Ok(_), Op::Add | Op::AddIfAbsent) => near.added(items),
                _ => near.changed(),
            }
        }
        answers
    }

    /// Whether a write refused as lost ([`Error::Lost`](crate::Error::Lost)) by one of a
    /// sharded filter's shards met a filter another client cleared (its parameters gone, or
    /// stored again beside this write: `restored`) rather than a lost one.
    async fn lost_to_a_clear(&self, restored: bool) -> Result<bool> {
        if self.inline() || !self.kind.keeps_parts() {
            return Ok(false);
        }
        if restored {
            return Ok(true);
        }
        let params = self.guard.key();
        let stored: bool = self
            .exec
            .query(params, redis::cmd("EXISTS").arg(params))
            .await?;
        Ok(!stored)
    }

    /// A check: from the near cache's copy while it is fresh (a new copy read when one is
    /// due), else from Redis.
    async fn check(&self, items: &[&[u8]]) -> Result<Vec<bool>> {
        let clock = self.exec.clock();
        let Some(near) = &self.near else {
            // A single check is boxed by its caller (`Bloom::exists`) already: a check that
            // does not wait for a group goes at once, not boxed again.
            if !self.goes_grouped(Op::Exists, items) && !items.is_empty() {
                return self.batch_now(&clock, Op::Exists, items).await;
            }
            return self.batch(&clock, Op::Exists, items).await;
        };
        let answer = |copy: &K::Copy, item: &[u8]| self.kind.in_copy(&self.parts, copy, item);
        let read = || K::read_copy(self.ctx(&clock, 0), near.budget());
        let remote = || self.batch(&clock, Op::Exists, items);
        near.check(items, answer, read, remote).await
    }

    /// The answer for one item from the near cache's copy, when it may give it now.
    fn answer_now(&self, item: &[u8]) -> Option<bool> {
        self.near.as_ref()?.answer_now(item, |copy, item| {
            self.kind.in_copy(&self.parts, copy, item)
        })
    }

    async fn info(&self) -> Result<K::Info> {
        let clock = self.exec.clock();
        let ctx = self.ctx(&clock, 0);
        ctx.ensure_beside(false).await?;
        let parts = ctx.each_part(K::part_info).await?;
        K::info(ctx, parts).await
    }

    /// `clear` or `expire`: a sharded filter's parameters checked first, every part in a
    /// checked step, then the parameters themselves (never the bare name, which may hold
    /// someone else's filter); a filter of one key checks them in its part's step.
    async fn drop_keys(&self, how: Removal) -> Result<bool> {
        let clock = self.exec.clock();
        if let Removal::Expire(_) = how {
            // A TTL makes the keys evictable under a `volatile-*` policy.
            self.writable(&clock, true).await?;
        }
        let ctx = self.ctx(&clock, 0);
        ctx.ensure_beside(false).await?;
        let dropped = ctx.each_part(|ctx| K::drop_part(ctx, how)).await?;
        // The records of exact answers across retries go with the filter, or get its TTL.
        let keys = self.kind.part_keys(&self.parts);
        let exec = &self.exec;
        ctx.each_part(|ctx| {
            let key = &keys[ctx.index];
            async move {
                let rings = once::all_rings(key);
                let done = match how {
                    Removal::Delete => {
                        let del = redis::cmd("DEL").arg(rings).to_owned();
                        exec.query::<i64>(key, &del).await.map(drop)
                    }
                    // A slot's TTL is never extended: only one longer than the filter's is cut.
                    Removal::Expire(millis) => {
                        let rings: Vec<&str> = rings.iter().map(String::as_str).collect();
                        let args: [&dyn crate::scripts::Arg; 1] = [&millis];
                        exec.script(key, &once::EXPIRE, &rings, &args)
                            .await
                            .map(drop)
                    }
                };
                match done {
                    // An ACL that refuses the rings' keys refused their writes too: the
                    // filter's writes kept no records.
                    Err(crate::Error::NoPermission(_)) => Ok(()),
                    done => done,
                }
            }
        })
        .await?;
        if !self.inline() {
            self.guard.remove_stored(&self.exec, &clock, how).await?;
        }
        Ok(dropped.contains(&true))
    }

    /// Forgets what this handle knows of the filter's keys: its checks, the kind's state, its
    /// near cache's copy.
    fn forget(&self) {
        self.guard.reset();
        self.kind.forget(&self.parts);
        if let Some(near) = &self.near {
            near.cleared();
        }
    }
}

/// The items as byte slices.
fn slices<T: AsRef<[u8]>>(items: &[T]) -> Vec<&[u8]> {
    items.iter().map(AsRef::as_ref).collect()
}

impl<C, K: SizedInBits> Bloom<C, K> {
    /// The filter's size in bits, all shards together (a counting filter: its counters; a
    /// window filter: one generation's).
    pub fn bits(&self) -> u64 {
        self.0.kind.size().0
    }

    /// Bit locations (a counting filter: counters) per item; 14 in go-zero's layout.
    pub fn hashes(&self) -> u32 {
        self.0.kind.size().1
    }
}

impl<C, K: Kind> Bloom<C, K> {
    /// The filter's key in Redis (for a sharded filter, the name its shards' keys derive from).
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// How many slot groups hold the filter (1 unless built with
    /// [`Builder::shards`](crate::Builder::shards)).
    pub fn shards(&self) -> u32 {
        self.0.parts.count()
    }

    /// Whether this filter's writes record their answers across retries
    /// ([`Builder::exact_retries`](crate::Builder::exact_retries)): `false` when turned off,
    /// without a retry budget, or once the ACL refused the recording script (then a WARN event
    /// said so).
    pub fn exact_retries(&self) -> bool {
        self.0.exec.records()
    }

    /// What the near cache has done (`None`: the filter has none).
    pub fn near_cache_stats(&self) -> Option<NearCacheStats> {
        self.0.near.as_ref().map(Near::stats)
    }

    /// Items per [`add_many`](Bloom::add_many) call that load fastest: large enough for the
    /// kind's dense path where it has one. What `redbloom load` uses by default.
    pub fn bulk_add_batch_size(&self) -> usize {
        self.0.kind.bulk_add_batch_size(&self.0.parts)
    }

    /// Items per [`exists_many`](Bloom::exists_many) call that check fastest. What
    /// `redbloom check` uses by default.
    pub fn bulk_check_batch_size(&self) -> usize {
        self.0.kind.bulk_check_batch_size(&self.0.parts)
    }
}

impl<C: ConnectionLike + Clone + Send + Sync, K: Kind> Bloom<C, K> {
    /// Adds `item`. Returns `true` when the item was certainly new to the filter: a plain
    /// filter's bit flipped from 0 to 1, a window filter's item was in no live generation, a
    /// counting filter's counter went from 0 to 1, a growing filter's item was in no level;
    /// `false` when it was added before (or this is a false positive). Atomic: of many
    /// concurrent adds of one item, exactly one returns `true`.
    ///
    /// Adding is idempotent (but for a counting filter, which counts), so retrying after a
    /// timeout or a lost connection is safe. A timeout does not mean the add failed: it may
    /// have been applied.
    ///
    /// # Errors
    /// [`Error::WrongType`](crate::Error::WrongType) when a key of the filter holds a
    /// non-string; [`Error::ParamsMismatch`](crate::Error::ParamsMismatch) when the stored
    /// parameters differ from this filter's (nothing is written);
    /// [`Error::FilterFull`](crate::Error::FilterFull) for a growing filter past its levels (or
    /// a full non-scaling module filter);
    /// [`Error::Timeout`](crate::Error::Timeout), [`Error::Deadline`](crate::Error::Deadline)
    /// and [`Error::Connection`](crate::Error::Connection) for network faults;
    /// [`Error::Redis`](crate::Error::Redis) for other server errors.
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        let core = &*self.0;
        let one = std::slice::from_ref(&item);
        call::run(Call::Add, core, Some(1), async {
            Ok(core.write(Op::Add, one).await?[0])
        })
        .await
    }

    /// Whether `item` may be in the filter: `false` means certainly never added (a window
    /// filter: not added within the window); `true` means added, or a false positive. A
    /// missing filter holds no items.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        let core = &*self.0;
        call::run(Call::Exists, core, Some(1), async {
            if let Some(found) = core.answer_now(item) {
                return Ok(found);
            }
            // Boxed: a call answered from the copy does not carry the way to Redis.
            Ok(Box::pin(core.check(std::slice::from_ref(&item))).await?[0])
        })
        .await
    }

    /// Adds every item; the result for each item, in input order, means what
    /// [`add`](Bloom::add)'s does. An item repeated in the batch is new only at its first
    /// occurrence. An empty slice sends nothing.
    ///
    /// A batch is split into commands of a bounded size (at most
    /// [`MAX_OFFSETS_PER_COMMAND`](crate::MAX_OFFSETS_PER_COMMAND) bits each), a few in
    /// flight at a time, in order: each command is atomic, the batch as a whole is not
    /// (another client may see part of it). A batch large enough to outweigh the filter takes
    /// the kind's dense path (the batch as a bitmap merged into the keys; see each kind's
    /// page). A sharded filter sends each shard its items at once.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add). On error, some, all or none of the items may be added.
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let core = &*self.0;
        call::run(Call::AddMany, core, Some(items.len()), async {
            core.write(Op::Add, &slices(items)).await
        })
        .await
    }

    /// Adds every item as a bulk load does: like [`add_many`](Bloom::add_many), but a kind
    /// whose adds only set bits (plain, window, growing, module; not counting) writes without
    /// records of its answers across retries, which cost the server a script per step (the
    /// CLI's `load`). The answers stay honest: each item answered new is new, and
    /// [`Loaded::unknown`] counts the items answered "seen" whose answers could not be known
    /// (a step that carried them was retried, and its lost attempt may have added them): 0
    /// when no step was retried. So a load's new items, counted cleanly, lie between
    /// `new` and `new + unknown`, and [`Loaded::is_unknown`] says which items' answers those
    /// are. Counting filters keep their records (exact, `unknown` 0).
    ///
    /// ```no_run
    /// # async fn run(bloom: redbloom::RedisBloom<redis::aio::ConnectionManager>) -> redbloom::Result<()> {
    /// let loaded = bloom.load_many(&["a", "b", "c"]).await?;
    /// let new = loaded.answers.iter().filter(|&&new| new).count();
    /// println!("{new} new, {} unknown", loaded.unknown);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As for [`add_many`](Bloom::add_many).
    pub async fn load_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Loaded> {
        let core = &*self.0;
        call::run(Call::AddMany, core, Some(items.len()), async {
            let clock = core.exec.clock().bare();
            let answers = core.write_on(&clock, Op::Add, &slices(items)).await?;
            let unrecorded = K::IDEMPOTENT_ADDS || !core.exec.records();
            let unknown = match clock.retried() && unrecorded {
                true => answers.iter().filter(|&&new| !new).count() as u64,
                false => 0,
            };
            Ok(Loaded { answers, unknown })
        })
        .await
    }

    /// Checks every item; the result for each item, in input order, means what
    /// [`exists`](Bloom::exists)'s does. An empty slice sends nothing. A batch large enough
    /// reads the filter's keys instead of sending every item's bits.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        let core = &*self.0;
        call::run(Call::ExistsMany, core, Some(items.len()), async {
            match items.is_empty() {
                true => Ok(Vec::new()),
                false => core.check(&slices(items)).await,
            }
        })
        .await
    }

    /// Reads the filter's fill, size and TTL (one round trip per shard; see each kind's info
    /// type for what it adds).
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn info(&self) -> Result<K::Info> {
        let core = &*self.0;
        call::run(Call::Info, core, None, core.info()).await
    }

    /// Deletes the filter: every key it has (every shard's) and its stored parameters.
    /// Returns whether it had anything.
    ///
    /// Checked first, in the same atomic step as the delete: a key of another type, a filter
    /// stored with other parameters, or bits longer than this size holds are left untouched
    /// and reported, as [`add`](Bloom::add) reports them. A sharded filter checks its
    /// parameters, then each shard as it deletes it, then deletes the parameters; it never
    /// touches the bare key of its name.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add); a mismatch leaves every key as it was.
    pub async fn clear(&self) -> Result<bool> {
        let core = &*self.0;
        call::run(Call::Clear, core, None, async {
            core.guard.reset();
            let done = core.drop_keys(Removal::Delete).await;
            core.forget();
            done
        })
        .await
    }

    /// Makes the whole filter (every key it has, and its stored parameters) expire after
    /// `ttl`, checked as [`clear`](Bloom::clear) checks. Millisecond precision; a TTL shorter
    /// than 1 ms is refused (Redis would delete the filter at once: use `clear` for that).
    /// Returns `false` when the filter has no keys yet. A window filter's generations that
    /// leave the window sooner keep their own expiry, and those made later expire by then
    /// too; a growing filter's levels made later as well.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a TTL below 1 ms or too long
    /// for Redis; otherwise as for [`clear`](Bloom::clear).
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        let core = &*self.0;
        call::run(Call::Expire, core, None, async {
            core.drop_keys(Removal::expire(ttl)?).await
        })
        .await
    }
}

/// The lanes of a filter of `parts` parts: one per op and part, steps of at most
/// [`MAX_OFFSETS_PER_COMMAND`](crate::MAX_OFFSETS_PER_COMMAND) / 16 items (one command's worth
/// for 16 bits an item), at most the kind's [`STEPS_IN_FLIGHT`](kind::Seam::STEPS_IN_FLIGHT) steps
/// in flight per lane.
fn lanes<K: Kind>(parts: u32) -> group::Lanes {
    let max_items = crate::MAX_OFFSETS_PER_COMMAND / 16;
    group::Lanes::new(4, parts as usize, max_items, K::STEPS_IN_FLIGHT)
}

/// The lane of `op` among a part's four.
fn op_index(op: Op) -> usize {
    match op {
        Op::Add => 0,
        Op::Exists => 1,
        Op::AddIfAbsent => 2,
        Op::Remove => 3,
    }
}
