//! The growing filter (SPEC.md §4 "growing"), after Almeida, Baquero, Preguiça and Hutchison,
//! "Scalable Bloom Filters" (2007): levels of plain Bloom filters, each F times the capacity
//! of the one before at a rate r times tighter, so that the whole filter's false-positive rate
//! stays at or below P however many items it holds.
//!
//! Level i (from 0) holds `N·F^i` items at `P·(1−r)·r^i`; the rates sum to less than
//! `P·(1−r)·1/(1−r) = P`, and a check's false-positive rate is at most that sum. Each level is
//! word-blocked ([`shape`]), and the levels share Redis strings (segments) of up to 4 MiB,
//! `{KEY}:redbloom:grow:HASH:s`, so that a check reads every level with one command per
//! segment; a hash `{KEY}:redbloom:grow:HASH` counts the new items each level took (its length
//! is the number of levels); HASH names the parameters, so that a client with others never
//! touches them. Every add is one script per slot group: an add tests the levels newest first and sets the item's bits in the newest level, making
//! the next level when the newest has taken its capacity, all in one atomic step. The client
//! computes every level's bit offsets (Lua's numbers are exact only to 2^53) and names the
//! levels it expects the step to need; a step that needs more says so, and the rest goes again.

use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::info::{FilterInfo, GrowingInfo, GrowingLevel, KeyTtl};
use crate::io::bits::{Removal, MAX_OFFSETS_PER_COMMAND};
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::io::tx::{Replies, Slot, Tx};
use crate::layout::Layout;
use crate::options::Options;
use crate::retry::Clock;
use crate::scripts::script;
use crate::sharded::{self, Shards};
use crate::{dense, keys, Engine};
use futures_util::future::join_all;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod near;
mod shape;
use shape::Level;

/// The default growth factor: each level twice the capacity of the one before.
pub(crate) const DEFAULT_GROWTH: u32 = 2;

/// The default tightening ratio r: each level's rate r times the one before. Almeida et al.
/// find 0.8 to 0.9 uses the least memory for a growth of 2; docs/design.md "Growing filters"
/// compares 0.5 (RedisBloom's), 0.8 and 0.9.
pub(crate) const DEFAULT_TIGHTENING: f64 = 0.8;

/// The default and the largest number of levels.
pub(crate) const DEFAULT_MAX_LEVELS: u32 = 32;
pub(crate) const MAX_LEVELS: u32 = 64;

script!(
    /// Adds items: tests every level, sets the newest, makes the next one when it is full.
    GROW_ADD = include_str!("../../../lua/grow_add.lua")
);
script!(
    /// `clear` and `expire`, checked.
    GROW_DROP = include_str!("../../../lua/grow_drop.lua")
);

/// The dense add's compare-and-set merge (run with `EVAL` inside a `MULTI`, where
/// `EVALSHA`'s `NOSCRIPT` could not be answered by loading it).
const GROW_MERGE: &str = include_str!("../../../lua/grow_merge.lua");

/// Merges tried before a batch goes the per-item way: each fails only when another client
/// added a new item between the read and the merge.
const MERGE_ATTEMPTS: usize = 3;

/// The scratch keys' TTL: the merge deletes them; they expire if a transaction fails between
/// the `SET`s and the script.
const SCRATCH_TTL_MS: u64 = 60_000;

/// A Bloom filter that grows (SPEC.md §4 "growing"): no capacity to guess, and the
/// false-positive rate held at or below the rate given however many items it takes.
///
/// The first level holds [`expected_items`](crate::Builder::expected_items) items; when the
/// newest level has taken its capacity of new items, the next add makes a level
/// [`growth`](crate::Builder::growth) times larger at a rate
/// [`tightening`](crate::Builder::tightening) times tighter (Almeida et al.'s scalable Bloom
/// filter). An add that finds the item in any level writes nothing and uses no capacity;
/// concurrent clients never make two levels for one fill (each add is one atomic script).
/// Past [`max_levels`](GrowingBloom::max_levels) levels, an add of a new item fails with
/// [`Error::Full`] and writes nothing for it.
///
/// A sharded filter grows each shard by itself: each holds its share of every level.
///
/// ```no_run
/// # async fn demo(conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let seen = redbloom::RedisBloom::builder("crawler:seen")
///     .expected_items(100_000) // the first level; it grows from there
///     .false_positive_rate(0.01)
///     .growth(2)
///     .build_growing(conn)?;
/// if seen.add("https://example.com/").await? {
///     // a URL not seen before: crawl it
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct GrowingBloom<C>(Arc<Growing<C>>);

impl<C> Clone for GrowingBloom<C> {
    /// Another handle on the same filter: one reference count.
    fn clone(&self) -> Self {
        GrowingBloom(Arc::clone(&self.0))
    }
}

#[derive(Debug)]
struct Growing<C> {
    exec: Exec<C>,
    key: String,
    fingerprint: String,
    /// A sharded filter's parameters, in a slot of their own; a filter of one key has its
    /// scripts check them.
    guard: Option<Guard>,
    parts: Shards<Part>,
    /// Each level's shape in one part (a shard's share).
    levels: Vec<Level>,
    /// Each segment's size in bits (the end of its last level).
    segments: Vec<u64>,
    growth: u32,
    tightening: f64,
    fpr: f64,
    /// This client has seen its parameters stored (a filter of one key): checks leave them out.
    verified: AtomicBool,
    /// The copy that answers checks, when the builder asked for one.
    near: Option<crate::near::Near<near::Copy>>,
}

/// One slot group's levels.
#[derive(Debug)]
struct Part {
    /// The counts' key; level i is `{counts}:{i}`.
    counts: String,
    /// Segment s's key, `{counts}:{s}`, for every segment the filter can have: named once,
    /// not on every call.
    segment_keys: Vec<String>,
    /// The key of level i's segment, for every level (levels share segments).
    level_keys: Vec<String>,
    /// The parameters key and the bare key, checked by the scripts (a filter of one key).
    checked: Option<[String; 2]>,
    /// The levels this client last heard the part has, and the newest one's count.
    known: AtomicU32,
    newest_count: AtomicU64,
    /// Held through a dense add's read and merge, so that this handle's own batches in flight
    /// do not make each other's merges fail.
    turn: tokio::sync::Mutex<()>,
}

impl Part {
    fn level_key(&self, level: usize) -> &str {
        &self.level_keys[level]
    }
}

/// The levels' name beside a filter's key: `redbloom:grow:HASH`, HASH naming the parameters.
fn levels_of(fingerprint: &str) -> String {
    let (h1, _) = crate::hash::murmur3_x64_128(fingerprint.as_bytes());
    format!("redbloom:grow:{:08x}", h1 >> 32)
}

impl<C> GrowingBloom<C> {
    /// The filter the [`Builder`](crate::Builder) describes: `capacity` items in the first
    /// level (all shards together) at most `fpr` in all.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        conn: C,
        key: String,
        capacity: u64,
        fpr: f64,
        growth: u32,
        tightening: f64,
        max_levels: u32,
        shards: u32,
        options: Options,
    ) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        keys::check_not_reserved(&key)?;
        if growth == 0 {
            return Err(Error::InvalidConfig(
                "the growth factor is a whole number of at least 1".into(),
            ));
        }
        if !(tightening > 0.0 && tightening < 1.0) {
            return Err(Error::InvalidConfig(format!(
                "the tightening ratio must be between 0 and 1 (exclusive), not {tightening}"
            )));
        }
        if !(1..=MAX_LEVELS).contains(&max_levels) {
            return Err(Error::InvalidConfig(format!(
                "a growing filter has 1 to {MAX_LEVELS} levels, not {max_levels}"
            )));
        }
        if !(fpr > 0.0 && fpr < 1.0) || capacity == 0 {
            return Err(Error::InvalidConfig(
                "a growing filter needs its first level's items (at least 1) and a rate in (0, 1)"
                    .into(),
            ));
        }
        let shards = shards.max(1);
        let levels = shape::levels(
            capacity.div_ceil(u64::from(shards)),
            fpr,
            growth,
            tightening,
            max_levels,
        )?;
        let fingerprint = format!(
            "kind=growing capacity={capacity} fpr={fpr} growth={growth} tightening={tightening} \
             max_levels={} layout=blocked-v1 shape={} hash=murmur3_x64_128{}",
            levels.len(),
            shape::digest(&levels),
            match shards {
                1 => String::new(),
                n => format!(" shards={n}"),
            }
        );
        let mut segments = Vec::new();
        for level in &levels {
            match segments.get_mut(level.segment) {
                Some(end) => *end = level.end(),
                None => segments.push(level.end()),
            }
        }
        let params = keys::sidecar(&key, "redbloom:params")?;
        let part = |counts: String, checked| Part {
            level_keys: levels
                .iter()
                .map(|l| format!("{counts}:{}", l.segment))
                .collect(),
            segment_keys: (0..segments.len())
                .map(|s| format!("{counts}:{s}"))
                .collect(),
            counts,
            checked,
            known: AtomicU32::new(0),
            newest_count: AtomicU64::new(0),
            turn: tokio::sync::Mutex::new(()),
        };
        let (guard, parts) = if shards == 1 {
            let counts = keys::sidecar(&key, &levels_of(&fingerprint))?;
            (None, vec![part(counts, Some([params, key.clone()]))])
        } else {
            let first = levels[0].bits();
            let guard = Guard::new(
                key.clone(),
                Some(params.clone()),
                params,
                fingerprint.clone(),
                Layout::Native,
                first,
            );
            let parts = (0..shards)
                .map(|i| {
                    let shard = keys::shard_key(&key, i, shards);
                    Ok(part(keys::sidecar(&shard, &levels_of(&fingerprint))?, None))
                })
                .collect::<Result<Vec<_>>>()?;
            (Some(guard), parts)
        };
        Ok(GrowingBloom(Arc::new(Growing {
            exec: Exec::new(conn, options),
            key,
            fingerprint,
            guard,
            parts: Shards::new(parts),
            levels,
            segments,
            growth,
            tightening,
            fpr,
            verified: AtomicBool::new(false),
            near: None,
        })))
    }

    /// Gives a filter just made its near cache ([`Builder::near_cache`](crate::Builder::near_cache)).
    pub(crate) fn attach_near(&mut self, config: crate::NearCache) -> Result<()> {
        let growing = Arc::get_mut(&mut self.0).expect("a filter just made has one handle");
        near::attach(growing, config)
    }

    /// What the near cache has done (`None`: the filter has none).
    pub fn near_cache_stats(&self) -> Option<crate::NearCacheStats> {
        self.0.near.as_ref().map(crate::near::Near::stats)
    }

    /// The filter's key in Redis: the name its levels' keys derive from.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// Each level's capacity over the one before.
    pub fn growth(&self) -> u32 {
        self.0.growth
    }

    /// Each level's false-positive rate over the one before.
    pub fn tightening(&self) -> f64 {
        self.0.tightening
    }

    /// The whole filter's false-positive rate bound.
    pub fn false_positive_rate(&self) -> f64 {
        self.0.fpr
    }

    /// The most levels the filter can have: as asked of the builder, or fewer when a level
    /// would need more than one key's 2^32 bits (shards raise that).
    pub fn max_levels(&self) -> u32 {
        self.0.levels.len() as u32
    }

    /// Every level the filter can have, in one shard (each shard has the same), as sized:
    /// capacity, rate, bits, and where it lies in Redis.
    pub fn levels(&self) -> Vec<GrowingLevel> {
        self.0
            .levels
            .iter()
            .map(|l| GrowingLevel {
                capacity: l.capacity,
                false_positive_rate: l.fpr_with(l.capacity),
                bits: l.bits(),
                words_per_item: l.per_item,
                bits_per_word: l.per_word,
                segment: l.segment as u32,
                offset: l.base,
            })
            .collect()
    }

    /// The most new items the filter takes, all levels together (all shards together).
    pub fn max_capacity(&self) -> u64 {
        let per_part: u64 = self.0.levels.iter().map(|l| l.capacity).sum();
        per_part.saturating_mul(u64::from(self.shards()))
    }

    /// How many slot groups hold the filter.
    pub fn shards(&self) -> u32 {
        self.0.parts.count()
    }

    /// Items per batch that `redbloom load` uses: large enough that the dense add (the levels
    /// read whole, the batch's bits merged) pays for its reads.
    pub fn bulk_batch_size(&self) -> usize {
        100_000 * self.shards() as usize
    }

    /// Items per batch that `redbloom check` uses: large enough to read the levels whole
    /// (up to 64 MiB per shard) rather than send every level's offsets.
    pub fn bulk_check_batch_size(&self) -> usize {
        100_000 * self.shards() as usize
    }
}

/// The 64-bit word at bit `offset` (a multiple of 64) of `bytes`, as a `GET i64` reads it:
/// bytes past the end are 0, as in Redis.
fn word_at(bytes: &[u8], offset: u64) -> u64 {
    let start = (offset / 8) as usize;
    let mut word = [0u8; 8];
    if let Some(tail) = bytes.get(start..) {
        let n = tail.len().min(8);
        word[..n].copy_from_slice(&tail[..n]);
    }
    u64::from_be_bytes(word)
}

/// A pipeline's check of a filter of one key's stored parameters.
struct ParamsCheck {
    stored: Slot<Option<String>>,
    bare: Slot<bool>,
}

/// A batch applied in memory by the dense add.
struct Applied {
    /// Per item handled (those before a full stop): whether it was new.
    answers: Vec<bool>,
    /// Each level's count after the batch.
    counts: Vec<u64>,
    /// Per segment, the offsets the batch set.
    added: Vec<Vec<u64>>,
    /// An item needed a level past the most.
    full: bool,
}

/// What a growing script answered.
struct Answer {
    levels: u32,
    count: u64,
    verified: bool,
    flags: Vec<bool>,
    full: bool,
}

impl<C> GrowingBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds `item`. Returns `true` when it was in no level (certainly new); a new item goes to
    /// the newest level, and uses one item of its capacity. Atomic: of concurrent adds of one
    /// item, exactly one returns `true`. Idempotent, so retrying is safe.
    ///
    /// # Errors
    /// [`Error::Full`] when the item is new and every level is full (nothing written);
    /// [`Error::ParamsMismatch`] when the filter was created with other parameters (nothing
    /// written); [`Error::WrongType`]; network faults as for
    /// [`RedisBloom::add`](crate::RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add", kind = "growing", key = self.key(), items = 1, attempts))]
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = [item.as_ref()];
        let new = self.0.per_part(&item, true).await?;
        if let Some(near) = &self.0.near {
            near.added(&item);
        }
        Ok(new[0])
    }

    /// Whether `item` may be in the filter (in any level).
    ///
    /// # Errors
    /// As for [`add`](GrowingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists", kind = "growing", key = self.key(), items = 1, attempts))]
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        if let Some(found) = self.0.answer_now(item) {
            return Ok(found);
        }
        // Boxed: a call answered from the copy does not carry the way to Redis.
        Ok(Box::pin(self.0.check(&[item])).await?[0])
    }

    /// Adds every item, in order; answers in input order, each as [`add`](GrowingBloom::add)'s.
    /// An item repeated in the batch is new only at its first occurrence.
    ///
    /// # Errors
    /// As for [`add`](GrowingBloom::add); on error, the items before the failing one may have
    /// been added.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_many", kind = "growing", key = self.key(), items = items.len(), attempts))]
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let new = self.0.per_part(items, true).await?;
        if let Some(near) = &self.0.near {
            near.added(items);
        }
        Ok(new)
    }

    /// Checks every item; answers in input order.
    ///
    /// # Errors
    /// As for [`add`](GrowingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists_many", kind = "growing", key = self.key(), items = items.len(), attempts))]
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.0.check(items).await
    }

    /// The levels, their capacity and the new items they took, with the usual totals.
    ///
    /// # Errors
    /// As for [`add`](GrowingBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "info", kind = "growing", key = self.key(), attempts))]
    pub async fn info(&self) -> Result<GrowingInfo> {
        self.0.info().await
    }

    /// Deletes every level and the stored parameters, checked in the same step. Returns
    /// whether the filter had a level.
    ///
    /// # Errors
    /// As for [`add`](GrowingBloom::add); a mismatch leaves every key as it was.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "clear", kind = "growing", key = self.key(), attempts))]
    pub async fn clear(&self) -> Result<bool> {
        let done = self.0.drop_keys(Removal::Delete).await;
        if let Some(guard) = &self.0.guard {
            guard.reset();
        }
        self.0.verified.store(false, Ordering::Relaxed);
        for part in self.0.parts.parts() {
            part.known.store(0, Ordering::Relaxed);
        }
        if let Some(near) = &self.0.near {
            near.cleared();
        }
        done
    }

    /// Makes the whole filter expire after `ttl`: its levels, its counts, its parameters, and
    /// the levels made later.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL below 1 ms or too long for Redis; otherwise as for
    /// [`clear`](GrowingBloom::clear).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "expire", kind = "growing", key = self.key(), attempts))]
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        self.0.drop_keys(Removal::expire(ttl)?).await
    }
}

impl<C> Growing<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds or checks the items, each part's at once; a sharded filter's parameters checked
    /// first (and beside, for writes).
    async fn per_part<T: AsRef<[u8]>>(&self, items: &[T], write: bool) -> Result<Vec<bool>> {
        let clock = self.exec.clock();
        let parts = self.parts.parts();
        let Some(guard) = &self.guard else {
            return self.part_items(&clock, &parts[0], items, write).await;
        };
        let check = match write {
            true => sharded::Check::Write,
            false => sharded::Check::Read,
        };
        let clock = &clock;
        self.parts
            .fan_out(&self.exec, clock, guard, items, check, |part, items| async move {
                self.part_items(clock, &parts[part], &items, write).await
            })
            .await
    }

    /// One part's items, in commands of a bounded size, in order; after a write, `WAIT`
    /// when asked (retried together with the write).
    async fn part_items<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        part: &Part,
        items: &[T],
        write: bool,
    ) -> Result<Vec<bool>> {
        let hashes: Vec<ItemHash> = items
            .iter()
            .map(|item| ItemHash::of(item.as_ref(), Layout::Native))
            .collect();
        if write && self.merge_pays(part, hashes.len()) {
            match self.merge(clock, part, &hashes).await {
                Ok(Some((answers, full))) => {
                    self.exec.confirm(&part.counts, Engine::Scripts).await?;
                    return match full {
                        true => Err(self.full()),
                        false => Ok(answers),
                    };
                }
                Ok(None) => tracing::debug!(
                    target: "redbloom",
                    key = %self.key,
                    from = "dense merge",
                    to = "per-item script",
                    cause = "other clients changed the levels during every merge",
                    "fallback"
                ),
                // A user granted the levels but not the scratch keys or the merge's commands:
                // the same batch by the per-item script.
                Err(Error::NoPermission(_)) => {
                    self.exec.caps().no_merge.store(true, Ordering::Relaxed);
                    tracing::info!(
                        target: "redbloom",
                        key = %self.key,
                        from = "dense merge",
                        to = "per-item script",
                        cause = "the ACL refused the merge (its scratch keys or commands)",
                        "fallback"
                    );
                }
                Err(err) => return Err(err),
            }
        }
        if !write && self.read_whole_pays(part, hashes.len()) {
            return self
                .exec
                .retried(clock, || async {
                    let (levels, segments) = self.read_levels(part).await?;
                    Ok(self.test_levels(levels, &segments, &hashes))
                })
                .await;
        }
        let run = || async {
            let mut answers = Vec::with_capacity(items.len());
            while answers.len() < hashes.len() {
                let rest = &hashes[answers.len()..];
                let flags = match write {
                    true => self.step(clock, part, rest, write).await?,
                    false => self.read_step(clock, part, rest).await?,
                };
                answers.extend(flags);
            }
            if write {
                self.exec.confirm(&part.counts, Engine::Scripts).await?;
            }
            Ok(answers)
        };
        match write && self.exec.options().replicas.is_some() {
            true => self.exec.retried(clock, run).await,
            false => run().await,
        }
    }

    /// How many segments hold the first `levels` levels.
    fn segments_of(&self, levels: usize) -> usize {
        self.levels[levels.clamp(1, self.levels.len()) - 1].segment + 1
    }

    /// The bits of segment `s` that the first `levels` levels use.
    fn segment_bits(&self, s: usize, levels: usize) -> u64 {
        let last = &self.levels[levels.clamp(1, self.levels.len()) - 1];
        match s == last.segment {
            true => last.end(),
            false => self.segments[s],
        }
    }

    /// The bytes that reading the first `levels` levels whole moves.
    fn bytes_of(&self, levels: usize) -> u64 {
        (0..self.segments_of(levels))
            .map(|s| self.segment_bits(s, levels).div_ceil(8))
            .sum()
    }

    /// Whether a check of `items` items is cheaper by reading the part's known levels whole
    /// (at most `dense::MAX_READ_BYTES` together) than by sending their words' offsets.
    fn read_whole_pays(&self, part: &Part, items: usize) -> bool {
        let known = (part.known.load(Ordering::Relaxed) as usize).clamp(1, self.levels.len());
        let bytes = self.bytes_of(known);
        let width: u64 = self.levels[..known]
            .iter()
            .map(|l| u64::from(l.hashes()))
            .sum();
        bytes <= dense::MAX_READ_BYTES && items as u64 * width * 8 >= bytes
    }

    /// Whether an add of `items` items is cheaper by reading the part's levels whole and
    /// merging the batch's bits: the levels known are at most `dense::MAX_READ_BYTES`
    /// together, the segments the batch may write at most `dense::MAX_BYTES` each (the merge's
    /// `BITOP` holds the server while it copies them), and the batch is more than a few items.
    fn merge_pays(&self, part: &Part, items: usize) -> bool {
        if items < 64 || self.exec.caps().no_merge.load(Ordering::Relaxed) {
            return false;
        }
        let named = self.levels_to_name(part, items, true);
        let known = (part.known.load(Ordering::Relaxed) as usize).clamp(1, named);
        let first = self.levels[known - 1].segment;
        let biggest = (first..self.segments_of(named))
            .map(|s| self.segments[s].div_ceil(8))
            .max()
            .unwrap_or(0);
        self.bytes_of(named) <= dense::MAX_READ_BYTES && biggest <= dense::MAX_BYTES
    }

    fn full(&self) -> Error {
        Error::Full {
            key: self.key.clone(),
            levels: self.levels.len() as u32,
            capacity: self.levels.iter().map(|l| l.capacity).sum(),
        }
    }

    /// The dense add: the counts and the segments read in one transaction, the batch applied
    /// here as the add script would (newest level first; a new item to the newest level, the
    /// next made when it is full), and the bits merged with the counts set by one script that
    /// writes nothing if the counts changed since the read (tried [`MERGE_ATTEMPTS`] times).
    /// `None` when every merge found them changed; else the answers, and whether an item
    /// needed a level past the most (the items before it were added, it and the rest not).
    async fn merge(
        &self,
        clock: &Clock,
        part: &Part,
        hashes: &[ItemHash],
    ) -> Result<Option<(Vec<bool>, bool)>> {
        let _turn = part.turn.lock().await;
        for _ in 0..MERGE_ATTEMPTS {
            let merged = self
                .exec
                .retried(clock, || async {
                    let (counts, mut segments) = self.snapshot(part).await?;
                    let applied = self.apply(&counts, &mut segments, hashes);
                    let changed: Vec<usize> = (0..applied.counts.len())
                        .filter(|&i| counts.get(i) != Some(&applied.counts[i]))
                        .collect();
                    if changed.is_empty() {
                        // Nothing new: the answers hold for the transaction's snapshot.
                        return Ok(Some(applied));
                    }
                    let expected = counts
                        .iter()
                        .enumerate()
                        .map(|(i, n)| format!("{i}={n}"))
                        .collect::<Vec<_>>()
                        .join(",");
                    let touched: Vec<usize> = (0..applied.added.len())
                        .filter(|&s| !applied.added[s].is_empty())
                        .collect();
                    let mut tx = Tx::atomic();
                    let mut keys = vec![part.counts.clone()];
                    keys.extend(touched.iter().map(|&s| part.segment_keys[s].clone()));
                    for &s in &touched {
                        let scratch = format!("{}:scratch:{s}", part.counts);
                        tx.add_unread(
                            redis::cmd("SET")
                                .arg(&scratch)
                                .arg(dense::bitmap(&applied.added[s]))
                                .arg("PX")
                                .arg(SCRATCH_TTL_MS)
                                .to_owned(),
                        );
                        keys.push(scratch);
                    }
                    keys.extend(part.checked.iter().flatten().cloned());
                    let mut script = redis::cmd("EVAL");
                    script
                        .arg(GROW_MERGE)
                        .arg(keys.len())
                        .arg(&keys)
                        .arg(&self.fingerprint)
                        .arg(touched.len())
                        .arg(&expected)
                        .arg(changed.len());
                    for &i in &changed {
                        script.arg(i);
                    }
                    for &i in &changed {
                        script.arg(applied.counts[i]);
                    }
                    let reply: Slot<Value> = tx.add(script);
                    let reply = self.exec.run(&part.counts, &tx).await?.take(reply)?;
                    if let Some(refusal) = self.refused(&reply) {
                        return Err(refusal);
                    }
                    match reply {
                        Value::Int(1) => Ok(Some(applied)),
                        Value::Int(0) => Ok(None),
                        other => Err(Error::UnexpectedReply(format!(
                            "{other:?} from a growing filter's merge"
                        ))),
                    }
                })
                .await?;
            if let Some(applied) = merged {
                let levels = applied.counts.len();
                part.known.store(levels as u32, Ordering::Relaxed);
                let newest = applied.counts.last().copied().unwrap_or(0);
                part.newest_count.store(newest, Ordering::Relaxed);
                return Ok(Some((applied.answers, applied.full)));
            }
        }
        Ok(None)
    }

    /// The counts (per level) and the segments' bytes, read in one transaction; again with
    /// more levels when the part has more than known.
    async fn snapshot(&self, part: &Part) -> Result<(Vec<u64>, Vec<Vec<u8>>)> {
        loop {
            let known = (part.known.load(Ordering::Relaxed) as usize).clamp(1, self.levels.len());
            let mut tx = Tx::atomic();
            let counts: Slot<Vec<(usize, u64)>> =
                tx.add(redis::cmd("HGETALL").arg(&part.counts).to_owned());
            let chunks = self.read_segments(part, &mut tx, known);
            let mut replies = self.exec.run(&part.counts, &tx).await?;
            let mut pairs = replies.take(counts)?;
            pairs.sort_unstable();
            if pairs.iter().enumerate().any(|(i, (level, _))| *level != i)
                || pairs.len() > self.levels.len()
            {
                return Err(Error::UnexpectedReply(format!(
                    "the levels' counts of {:?} are not levels 0..n: {pairs:?}",
                    self.key
                )));
            }
            if pairs.len() > known {
                part.known.store(pairs.len() as u32, Ordering::Relaxed);
                continue;
            }
            let mut segments = Vec::with_capacity(chunks.len());
            for segment in chunks {
                segments.push(segment.take(&mut replies)?);
            }
            return Ok((pairs.into_iter().map(|(_, n)| n).collect(), segments));
        }
    }

    /// The reads of the segments that hold the first `levels` levels, whole, added to `tx`.
    fn read_segments(&self, part: &Part, tx: &mut Tx, levels: usize) -> Vec<dense::Whole> {
        (0..self.segments_of(levels))
            .map(|s| dense::read_whole(tx, &part.segment_keys[s], self.segment_bits(s, levels)))
            .collect()
    }

    /// Whether `item` is in level `level` of `segments` (the segments' bytes as read).
    fn in_level(&self, segments: &[Vec<u8>], level: usize, hash: &ItemHash) -> bool {
        let shape = &self.levels[level];
        let bytes = segments.get(shape.segment).map_or(&[][..], Vec::as_slice);
        let mut all = true;
        shape.for_each_word(hash, |offset, mask| {
            all &= word_at(bytes, offset) & mask == mask;
        });
        all
    }

    /// The batch applied to the segments read, item after item as the add script does.
    fn apply(&self, counts: &[u64], segments: &mut Vec<Vec<u8>>, hashes: &[ItemHash]) -> Applied {
        let mut counts = counts.to_vec();
        let mut added: Vec<Vec<u64>> = vec![Vec::new(); segments.len()];
        let mut answers = Vec::with_capacity(hashes.len());
        let mut offsets = Vec::new();
        let mut full = false;
        for hash in hashes {
            let present = (0..counts.len())
                .rev()
                .any(|level| self.in_level(segments, level, hash));
            if !present {
                let newest = counts.len();
                if newest == 0 || counts[newest - 1] >= self.levels[newest - 1].capacity {
                    if newest >= self.levels.len() {
                        full = true;
                        break;
                    }
                    counts.push(0);
                }
                let level = &self.levels[counts.len() - 1];
                if segments.len() <= level.segment {
                    segments.resize(level.segment + 1, Vec::new());
                    added.resize(level.segment + 1, Vec::new());
                }
                offsets.clear();
                level.push_offsets(hash, &mut offsets);
                let bits = &mut segments[level.segment];
                let len = level.end().div_ceil(8) as usize;
                if bits.len() < len {
                    bits.resize(len, 0);
                }
                for &offset in &offsets {
                    bits[(offset / 8) as usize] |= 0x80 >> (offset & 7);
                }
                added[level.segment].extend_from_slice(&offsets);
                *counts.last_mut().expect("a level was made") += 1;
            }
            answers.push(!present);
        }
        Applied {
            answers,
            counts,
            added,
            full,
        }
    }

    /// A part's number of levels (`HLEN`) and its segments, each read whole (`GETRANGE` in
    /// 4 MiB pieces), in one round trip; two when the part has more levels than known.
    async fn read_levels(&self, part: &Part) -> Result<(usize, Vec<Vec<u8>>)> {
        loop {
            let known = (part.known.load(Ordering::Relaxed) as usize).clamp(1, self.levels.len());
            let mut tx = Tx::plain();
            let check = self.check_in(part, &mut tx);
            let count: Slot<usize> = tx.add(redis::cmd("HLEN").arg(&part.counts).to_owned());
            let chunks = self.read_segments(part, &mut tx, known);
            let mut replies = self.exec.run(&part.counts, &tx).await?;
            self.checked(check, &mut replies)?;
            let levels = replies.take(count)?;
            if levels > known {
                part.known.store(levels as u32, Ordering::Relaxed);
                continue;
            }
            let mut segments = Vec::with_capacity(chunks.len());
            for segment in chunks {
                segments.push(segment.take(&mut replies)?);
            }
            return Ok((levels, segments));
        }
    }

    /// For a filter of one key whose parameters this client has not yet seen stored: their
    /// `GET` and the bare key's `EXISTS`, added to a pipeline of reads.
    fn check_in(&self, part: &Part, tx: &mut Tx) -> Option<ParamsCheck> {
        let [params, bare] = part.checked.as_ref()?;
        if self.verified.load(Ordering::Relaxed) {
            return None;
        }
        Some(ParamsCheck {
            stored: tx.add(redis::cmd("GET").arg(params).to_owned()),
            bare: tx.add(redis::cmd("EXISTS").arg(bare).to_owned()),
        })
    }

    /// The answer to [`check_in`](Growing::check_in)'s commands: a mismatch when other
    /// parameters are stored, or none and the bare key holds something.
    fn checked(&self, check: Option<ParamsCheck>, replies: &mut Replies) -> Result<()> {
        let Some(check) = check else {
            return Ok(());
        };
        match replies.take(check.stored)? {
            Some(stored) if stored == self.fingerprint => {
                self.verified.store(true, Ordering::Relaxed);
                Ok(())
            }
            Some(stored) => Err(self.mismatch(Some(stored))),
            None if replies.take(check.bare)? => Err(self.mismatch(None)),
            None => Ok(()),
        }
    }

    /// Per item: whether it is in some of the first `levels` levels (newest first).
    fn test_levels(&self, levels: usize, segments: &[Vec<u8>], hashes: &[ItemHash]) -> Vec<bool> {
        hashes
            .iter()
            .map(|hash| {
                (0..levels)
                    .rev()
                    .any(|level| self.in_level(segments, level, hash))
            })
            .collect()
    }

    /// The levels a step names: those the part is known to have (at least one), and for a
    /// write as many more as `items` new items could fill, up to the most.
    fn levels_to_name(&self, part: &Part, items: usize, write: bool) -> usize {
        let most = self.levels.len();
        let known = (part.known.load(Ordering::Relaxed) as usize).min(most);
        if !write {
            return known.max(1);
        }
        let (mut named, mut room) = match known {
            0 => (1, self.levels[0].capacity),
            n => (
                n,
                self.levels[n - 1]
                    .capacity
                    .saturating_sub(part.newest_count.load(Ordering::Relaxed)),
            ),
        };
        while room < items as u64 && named < most {
            room = room.saturating_add(self.levels[named].capacity);
            named += 1;
        }
        named
    }

    /// The levels to name and the items that fit one command with their offsets (a write's
    /// script takes every bit's, a check one 64-bit read per word).
    fn plan(&self, part: &Part, items: usize, write: bool) -> (usize, usize) {
        let width = |named: usize| -> usize {
            self.levels[..named]
                .iter()
                .map(|l| match write {
                    true => l.hashes() as usize,
                    false => l.per_item as usize,
                })
                .sum()
        };
        let named = self.levels_to_name(part, items, write);
        let take = (MAX_OFFSETS_PER_COMMAND / width(named)).clamp(1, items);
        // Fewer items may need fewer levels (and then fit more items a command).
        let fewer = self.levels_to_name(part, take, write);
        (
            fewer,
            (MAX_OFFSETS_PER_COMMAND / width(fewer)).clamp(1, take),
        )
    }

    /// A check of as many of `items` as one round trip takes (at most
    /// `MAX_OFFSETS_PER_COMMAND` reads), without a script: `HLEN` of the counts and one
    /// `BITFIELD_RO` per segment known (one in all for a filter under 4 MiB), reading each
    /// item's words in every level with `GET i64`, in one pipeline (read-only commands:
    /// replicas may serve them). The stored parameters come along until they have been seen.
    /// Again with more levels when an item was found nowhere and the part has more than known.
    async fn read_step(&self, clock: &Clock, part: &Part, items: &[ItemHash]) -> Result<Vec<bool>> {
        loop {
            let (named, take) = self.plan(part, items.len(), false);
            let found = self
                .exec
                .retried(clock, || async {
                    let caps = self.exec.caps();
                    let read_only = !caps.no_bitfield_ro.load(Ordering::Relaxed);
                    let mut tx = Tx::plain();
                    let check = self.check_in(part, &mut tx);
                    let count: Slot<u32> = tx.add(redis::cmd("HLEN").arg(&part.counts).to_owned());
                    // Per segment: its read, and the masks its words must match, in order.
                    let mut reads = Vec::new();
                    for s in 0..self.segments_of(named) {
                        let levels = || self.levels[..named].iter().filter(|l| l.segment == s);
                        let mut cmd = redis::cmd(match read_only {
                            true => "BITFIELD_RO",
                            false => "BITFIELD",
                        });
                        cmd.arg(&part.segment_keys[s]);
                        let mut masks = Vec::new();
                        for hash in &items[..take] {
                            for level in levels() {
                                level.for_each_word(hash, |offset, mask| {
                                    cmd.arg("GET").arg("i64").arg(offset);
                                    masks.push(mask);
                                });
                            }
                        }
                        let widths: Vec<usize> = levels().map(|l| l.per_item as usize).collect();
                        reads.push((tx.add(cmd), masks, widths));
                    }
                    let mut replies = match self.exec.run(&part.counts, &tx).await {
                        Err(Error::Redis(err))
                            if read_only && crate::io::exec::is_unknown_command(&err) =>
                        {
                            caps.no_bitfield_ro.store(true, Ordering::Relaxed);
                            tracing::info!(
                                target: "redbloom",
                                key = %self.key,
                                from = "BITFIELD_RO",
                                to = "BITFIELD",
                                cause = "unknown command (Redis < 6.2)",
                                "fallback"
                            );
                            return Ok(None);
                        }
                        replies => replies?,
                    };
                    self.checked(check, &mut replies)?;
                    let count = replies.take(count)?;
                    let mut present = vec![false; take];
                    for (read, masks, widths) in reads {
                        let reply: Value = replies.take(read)?;
                        let words = match &reply {
                            Value::Array(words) if words.len() == masks.len() => words,
                            _ => {
                                return Err(Error::UnexpectedReply(format!(
                                    "{reply:?} for {} words",
                                    masks.len()
                                )))
                            }
                        };
                        let mut at = 0;
                        for found in present.iter_mut() {
                            for &width in &widths {
                                let level = (at..at + width).all(|i| match words[i] {
                                    Value::Int(word) => (word as u64) & masks[i] == masks[i],
                                    _ => false,
                                });
                                *found |= level;
                                at += width;
                            }
                        }
                    }
                    part.known.store(count, Ordering::Relaxed);
                    // A level past those read matters only to an item found nowhere.
                    match count as usize > named && present.contains(&false) {
                        true => Ok(None),
                        false => Ok(Some(present)),
                    }
                })
                .await?;
            if let Some(found) = found {
                return Ok(found);
            }
        }
    }

    /// One script: as many of `items` as one command takes (at most
    /// `MAX_OFFSETS_PER_COMMAND` bits), retried; their answers, at least one item's.
    async fn step(
        &self,
        clock: &Clock,
        part: &Part,
        items: &[ItemHash],
        write: bool,
    ) -> Result<Vec<bool>> {
        loop {
            let (named, take) = self.plan(part, items.len(), write);
            let levels = &self.levels[..named];
            let mut offsets = Vec::new();
            for hash in &items[..take] {
                for level in levels {
                    level.push_offsets(hash, &mut offsets);
                }
            }
            let answer = self
                .exec
                .retried(clock, || self.script(part, levels, &offsets))
                .await?;
            part.known.store(answer.levels, Ordering::Relaxed);
            part.newest_count.store(answer.count, Ordering::Relaxed);
            if answer.verified {
                self.verified.store(true, Ordering::Relaxed);
            }
            if answer.full {
                return Err(self.full());
            }
            if !answer.flags.is_empty() {
                return Ok(answer.flags);
            }
            // The part has more levels than named: name them.
        }
    }

    /// Runs the add script once.
    async fn script(&self, part: &Part, levels: &[Level], offsets: &[u64]) -> Result<Answer> {
        let mut keys = vec![part.counts.as_str()];
        keys.extend(part.level_keys[..levels.len()].iter().map(String::as_str));
        keys.extend(part.checked.iter().flatten().map(String::as_str));
        let read = match self.exec.caps().no_bitfield_ro.load(Ordering::Relaxed) {
            true => "bitfield",
            false => "bitfield_ro",
        };
        let hashes: Vec<u32> = levels.iter().map(Level::hashes).collect();
        let capacities: Vec<u64> = levels.iter().map(|l| l.capacity).collect();
        let reply = self
            .exec
            .script(
                &part.counts,
                &GROW_ADD,
                &keys,
                &[
                    &self.fingerprint,
                    &read,
                    &levels.len(),
                    &self.levels.len(),
                    &hashes,
                    &capacities,
                    &offsets,
                ],
            )
            .await;
        let reply = match reply {
            Err(Error::Redis(err))
                if read == "bitfield_ro" && crate::io::exec::is_unknown_command(&err) =>
            {
                self.exec
                    .caps()
                    .no_bitfield_ro
                    .store(true, Ordering::Relaxed);
                tracing::info!(
                    target: "redbloom",
                    key = %self.key,
                    from = "BITFIELD_RO",
                    to = "BITFIELD",
                    cause = "unknown command in the add script (Redis < 6.2)",
                    "fallback"
                );
                return Box::pin(self.script(part, levels, offsets)).await;
            }
            reply => reply?,
        };
        self.answer(reply)
    }

    /// Reads the add script's reply.
    fn answer(&self, reply: Value) -> Result<Answer> {
        let unexpected = |reply: &Value| {
            Error::UnexpectedReply(format!("{reply:?} from a growing filter's script"))
        };
        if let Some(refusal) = self.refused(&reply) {
            return Err(refusal);
        }
        let Value::Array(values) = &reply else {
            return Err(unexpected(&reply));
        };
        let int = |i: usize| match values.get(i) {
            Some(Value::Int(n)) if *n >= 0 => Some(*n as u64),
            _ => None,
        };
        let (head, levels, count, verified, full) = (5, int(0), int(1), int(2), int(4));
        let (Some(levels), Some(count), Some(verified), Some(full)) =
            (levels, count, verified, full)
        else {
            return Err(unexpected(&reply));
        };
        let flags = values[head.min(values.len())..]
            .iter()
            .map(|v| match v {
                Value::Int(flag) => Some(*flag == 1),
                _ => None,
            })
            .collect::<Option<Vec<bool>>>()
            .ok_or_else(|| unexpected(&reply))?;
        Ok(Answer {
            levels: levels as u32,
            count,
            verified: verified == 1,
            flags,
            full: full == 1,
        })
    }

    /// The mismatch a script's `{"params", STORED}` reply means, if it is one.
    fn refused(&self, reply: &Value) -> Option<Error> {
        let Value::Array(values) = reply else {
            return None;
        };
        let [Value::BulkString(what), Value::BulkString(stored)] = values.as_slice() else {
            return None;
        };
        (what == b"params").then(|| {
            let stored = String::from_utf8_lossy(stored).into_owned();
            self.mismatch((!stored.is_empty()).then_some(stored))
        })
    }

    /// The mismatch error for a filter of one key whose stored parameters differ.
    fn mismatch(&self, stored: Option<String>) -> Error {
        Error::ParamsMismatch {
            key: self.key.clone(),
            stored: stored.unwrap_or_else(|| {
                "no parameters: the key holds another kind of filter (or other data)".into()
            }),
            requested: self.fingerprint.clone(),
        }
    }

    async fn info(&self) -> Result<GrowingInfo> {
        let clock = self.exec.clock();
        if let Some(guard) = &self.guard {
            self.exec
                .retried(&clock, || guard.ensure(&self.exec, false))
                .await?;
        }
        let reads = self.parts.parts().iter().map(|part| {
            self.exec.retried(&clock, move || async move {
                let mut tx = Tx::plain();
                let check = part.checked.as_ref().map(|[params, bare]| ParamsCheck {
                    stored: tx.add(redis::cmd("GET").arg(params).to_owned()),
                    bare: tx.add(redis::cmd("EXISTS").arg(bare).to_owned()),
                });
                let counts: Slot<Vec<(u32, u64)>> =
                    tx.add(redis::cmd("HGETALL").arg(&part.counts).to_owned());
                let pttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(&part.counts).to_owned());
                let mut replies = self.exec.run(&part.counts, &tx).await?;
                self.checked(check, &mut replies)?;
                let mut counts = replies.take(counts)?;
                counts.sort_unstable();
                let ttl = KeyTtl::from_pttl(replies.take(pttl)?);
                if counts
                    .last()
                    .is_some_and(|&(level, _)| level as usize >= self.levels.len())
                {
                    return Err(Error::UnexpectedReply(format!(
                        "{:?} has a level past its {} levels: {counts:?}",
                        self.key,
                        self.levels.len()
                    )));
                }
                let mut tx = Tx::plain();
                // Each level's bits set (its byte range of its segment), each segment's bytes.
                let set: Vec<Slot<u64>> = counts
                    .iter()
                    .map(|&(level, _)| {
                        let shape = &self.levels[level as usize];
                        tx.add(
                            redis::cmd("BITCOUNT")
                                .arg(part.level_key(level as usize))
                                .arg(shape.base / 8)
                                .arg(shape.end() / 8 - 1)
                                .to_owned(),
                        )
                    })
                    .collect();
                let strlen: Vec<Slot<u64>> = (0..self.segments_of(counts.len()))
                    .map(|s| tx.add(redis::cmd("STRLEN").arg(&part.segment_keys[s]).to_owned()))
                    .collect();
                let mut replies = match counts.is_empty() {
                    true => Replies::new(Vec::new()),
                    false => self.exec.run(&part.counts, &tx).await?,
                };
                let mut levels = Vec::new();
                for ((level, items), set) in counts.into_iter().zip(set) {
                    levels.push((level, items, replies.take(set)?));
                }
                let mut bytes = 0;
                if !levels.is_empty() {
                    for len in strlen {
                        bytes += replies.take(len)?;
                    }
                }
                Ok((levels, bytes, ttl))
            })
        });
        let mut filter = FilterInfo {
            key: self.key.clone(),
            bits: 0,
            hashes: 0,
            bits_set: 0,
            bytes: 0,
            estimated_items: 0.0,
            estimated_fpr: 0.0,
            ttl: KeyTtl::Missing,
        };
        let (mut levels, mut capacity, mut items, mut fpr) = (0u32, 0u64, 0u64, 0.0f64);
        let parts = self.parts.count();
        for read in join_all(reads).await {
            let (part_levels, bytes, ttl) = read?;
            filter.bytes += bytes;
            filter.ttl = filter.ttl.longest_lived(ttl);
            levels = levels.max(part_levels.len() as u32);
            // An absent item goes to one part: a check's rate is the parts' average.
            let mut absent = 1.0f64;
            for (level, taken, set) in part_levels {
                let Some(shape) = self.levels.get(level as usize) else {
                    return Err(Error::UnexpectedReply(format!(
                        "{:?} has a level {level}, past its {} levels",
                        self.key,
                        self.levels.len()
                    )));
                };
                filter.bits += shape.bits();
                filter.hashes = filter.hashes.max(shape.hashes());
                filter.bits_set += set;
                capacity += shape.capacity;
                items += taken;
                absent *= 1.0 - shape.fpr_with(taken);
            }
            fpr += (1.0 - absent) / f64::from(parts);
        }
        filter.estimated_items = items as f64;
        filter.estimated_fpr = fpr;
        Ok(GrowingInfo {
            filter,
            levels,
            capacity,
            items,
            max_levels: self.levels.len() as u32,
        })
    }

    /// `clear` or `expire` of every part, each checked in its step; a sharded filter's
    /// parameters checked first and removed last.
    async fn drop_keys(&self, how: Removal) -> Result<bool> {
        let clock = self.exec.clock();
        if let Some(guard) = &self.guard {
            self.exec
                .retried(&clock, || guard.ensure(&self.exec, false))
                .await?;
        }
        let how_arg = match how {
            Removal::Delete => "del".to_owned(),
            Removal::Expire(ms) => ms.to_string(),
        };
        let most = self.levels.len();
        let all = self.parts.parts().iter().map(|part| {
            let mut keys = vec![part.counts.as_str()];
            keys.extend(part.level_keys[..most].iter().map(String::as_str));
            keys.extend(part.checked.iter().flatten().map(String::as_str));
            let how_arg = &how_arg;
            let clock = &clock;
            async move {
                let reply = self
                    .exec
                    .retried(clock, || async {
                        self.exec
                            .script(
                                &part.counts,
                                &GROW_DROP,
                                &keys,
                                &[&self.fingerprint, &most, how_arg],
                            )
                            .await
                    })
                    .await?;
                if let Some(refusal) = self.refused(&reply) {
                    return Err(refusal);
                }
                match reply {
                    Value::Int(any) => Ok(any == 1),
                    other => Err(Error::UnexpectedReply(format!("{other:?}"))),
                }
            }
        });
        let any = join_all(all)
            .await
            .into_iter()
            .collect::<Result<Vec<_>>>()?
            .contains(&true);
        if let Some(guard) = &self.guard {
            guard.remove_stored(&self.exec, &clock, how).await?;
        }
        Ok(any)
    }
}

/// A part's counts key, its segments' keys, and (a filter of one key) the parameters key and
/// the bare key.
pub(crate) type PartKeys<'a> = (&'a str, &'a [String], Option<&'a [String; 2]>);

/// What a snapshot of a growing filter needs from it (src/snapshot/growing.rs).
pub(crate) struct GrowingParts<'a, C> {
    pub(crate) exec: &'a Exec<C>,
    /// A sharded filter's parameters guard; a filter of one key has its scripts check them.
    pub(crate) guard: Option<&'a Guard>,
    pub(crate) fingerprint: &'a str,
    /// Per part: its counts key, its segments' keys, and (a filter of one key) the
    /// parameters key and the bare key.
    pub(crate) parts: Vec<PartKeys<'a>>,
    /// Per level: its segment and capacity.
    pub(crate) levels: Vec<(usize, u64)>,
    /// Per segment: its size in bytes.
    pub(crate) segment_bytes: Vec<u64>,
}

impl<C> GrowingBloom<C> {
    pub(crate) fn growing_parts(&self) -> GrowingParts<'_, C> {
        let g = &self.0;
        GrowingParts {
            exec: &g.exec,
            guard: g.guard.as_ref(),
            fingerprint: &g.fingerprint,
            parts: g
                .parts
                .parts()
                .iter()
                .map(|p| {
                    (
                        p.counts.as_str(),
                        p.segment_keys.as_slice(),
                        p.checked.as_ref(),
                    )
                })
                .collect(),
            levels: g.levels.iter().map(|l| (l.segment, l.capacity)).collect(),
            segment_bytes: g.segments.iter().map(|bits| bits.div_ceil(8)).collect(),
        }
    }

    /// Forget what this handle knew of its levels (after an import replaced them).
    pub(crate) fn forget_levels(&self) {
        self.0.verified.store(false, Ordering::Relaxed);
        for part in self.0.parts.parts() {
            part.known.store(0, Ordering::Relaxed);
            part.newest_count.store(0, Ordering::Relaxed);
        }
        if let Some(guard) = &self.0.guard {
            guard.reset();
        }
    }
}
