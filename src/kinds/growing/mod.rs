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
//! touches them. Every add is one script per slot group ([`add`]): an add tests the levels
//! newest first and sets the item's bits in the newest level, making the next level when the
//! newest has taken its capacity, all in one atomic step. The client computes every level's
//! bit offsets (Lua's numbers are exact only to 2^53) and names the levels it expects the step
//! to need; a step that needs more says so, and the rest goes again.
//!
//! Large batches take the dense paths: an add reads the levels whole and merges the batch's
//! bits by a compare-and-set on the counts ([`merge`]); a check reads them whole ([`read`]).
//! Here: the public type, the kind's state and what the core asks of it.

mod add;
mod info;
mod merge;
mod near;
mod read;
mod shape;
mod snapshot;

use self::shape::Level;
use crate::core::kind::{
    self, Answers, Cached, Fields, Items, Made, Op, Seam, Sections, Setup, Sizes,
};
use crate::core::sharded::Shards;
use crate::core::{Bloom, Conn, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::hash::ItemHash;
use crate::info::{GrowingInfo, GrowingLevel};
use crate::io::guard::{self, Guard};
use crate::io::lease::Turns;
use crate::io::removal::Removal;
use crate::layout::Layout;
use crate::scripts::{lua, script};
use crate::snapshot::{Group, ImportMode, SectionHeader, Staged, Stored};
use crate::{keys, Builder};
use redis::Value;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The default growth factor: each level twice the capacity of the one before.
const DEFAULT_GROWTH: u32 = 2;

/// The default tightening ratio r: each level's rate r times the one before. Almeida et al.
/// find 0.8 to 0.9 uses the least memory for a growth of 2; docs/design.md "Growing filters"
/// compares 0.5 (RedisBloom's), 0.8 and 0.9.
const DEFAULT_TIGHTENING: f64 = 0.8;

/// The default and the largest number of levels.
const DEFAULT_MAX_LEVELS: u32 = 32;
const MAX_LEVELS: u32 = 64;

script! {
    /// `clear` and `expire`, checked.
    GROW_DROP = lua!["grow_drop"];
}

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
/// [`Error::FilterFull`] and writes nothing for it; a batch adds the items before that one.
///
/// A batch of 64 items or more whose levels fit 64 MiB is added dense: the levels read whole,
/// the batch applied here as the script would, and its bits merged by one script that writes
/// nothing if another client changed the counts meanwhile (then read again, three times at
/// most, before the batch goes item by item). A batch to check large enough reads the levels
/// whole instead of sending every level's words. A sharded filter grows each shard by itself:
/// each holds its share of every level. `expire` also reaches the levels made later.
///
/// ```no_run
/// # async fn demo(conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let seen = redbloom::GrowingBloom::builder("crawler:seen")
///     .expected_items(100_000) // the first level; it grows from there
///     .false_positive_rate(0.01)
///     .growth(2)
///     .build(conn)?;
/// if seen.add("https://example.com/").await? {
///     // a URL not seen before: crawl it
/// }
/// # Ok(()) }
/// ```
pub type GrowingBloom<C> = Bloom<C, Growing>;

/// The growing kind (see [`GrowingBloom`]): its levels' shapes in one part (a shard's share),
/// where they lie, and the parameters they were sized from.
#[derive(Debug)]
pub struct Growing {
    /// Each level's shape in one part.
    levels: Vec<Level>,
    /// Each segment's size in bits (the end of its last level).
    segments: Vec<u64>,
    growth: u32,
    tightening: f64,
    fpr: f64,
    /// The parameters, stored beside the filter and checked by its scripts.
    fingerprint: String,
}

/// A growing builder's own options (`None`: the default).
#[derive(Debug, Clone, Default)]
pub struct GrowingOptions {
    growth: Option<u32>,
    tightening: Option<f64>,
    max_levels: Option<u32>,
}

/// One slot group's levels, and what this client has learned of them.
#[derive(Debug)]
pub struct Part {
    /// The counts' key; segment s is `{counts}:{s}`.
    counts: String,
    /// Segment s's key, for every segment the filter can have: named once, not on every call.
    segment_keys: Vec<String>,
    /// The key of level i's segment, for every level (levels share segments).
    level_keys: Vec<String>,
    /// The levels this client last heard the part has, and the newest one's count.
    known: AtomicU32,
    newest_count: AtomicU64,
    /// Turns at the dense add's read and merge: this handle's batches in flight, and other
    /// writers' (the lease).
    turns: Turns,
}

kind::kind!(Growing = Growing);

impl Bloom<(), Growing> {
    /// A [`Builder`] for a growing filter at `key`, sized by
    /// [`expected_items`](Builder::expected_items) (the first level's capacity, all shards
    /// together) and [`false_positive_rate`](Builder::false_positive_rate) (the whole filter's
    /// bound); it uses the native layout's hashing. The connection comes last, in
    /// [`Builder::build`].
    ///
    /// ```
    /// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
    /// let frontier = redbloom::GrowingBloom::builder("crawl:frontier")
    ///     .expected_items(10_000)
    ///     .false_positive_rate(0.01)
    ///     .growth(2)
    ///     .build(conn)?;
    /// assert_eq!(frontier.max_levels(), 32);
    /// # Ok(()) }
    /// let sized = || {
    ///     redbloom::GrowingBloom::builder("k")
    ///         .expected_items(10_000)
    ///         .false_positive_rate(0.01)
    /// };
    /// assert!(sized().growth(1).validate().is_ok());
    /// assert!(sized().growth(0).validate().is_err()); // checked without a connection
    /// ```
    ///
    /// A growing filter is not sized in bits:
    ///
    /// ```compile_fail
    /// let _ = redbloom::GrowingBloom::builder("k").bits(1 << 20);
    /// ```
    ///
    /// [`build`](Builder::build) and [`validate`](Builder::validate) refuse, besides what every
    /// kind's builder refuses, a size not given by items and a rate in (0, 1), a growth of 0, a
    /// tightening ratio not in (0, 1), most levels not in 1..=64, and a first level that would
    /// need more than one key's 2^32 bits.
    pub fn builder(key: impl Into<String>) -> Builder<Growing> {
        Builder::of_kind(key, GrowingOptions::default())
    }
}

impl Builder<Growing> {
    /// Each new level's capacity over the one before: its first level holds
    /// [`expected_items`](Builder::expected_items), and each new level `growth` times as many
    /// (a whole number of at least 1; default 2), so that no capacity needs guessing.
    pub fn growth(mut self, growth: u32) -> Self {
        self.kind.growth = Some(growth);
        self
    }

    /// The tightening ratio r, in (0, 1): each level's false-positive rate is r times the one
    /// before, and the first level's is `rate·(1−r)`, so that all of them together stay below
    /// the rate given. Default 0.8: smaller ratios spend more bits per item on later levels,
    /// larger ones on the first (docs/design.md "Growing filters").
    pub fn tightening(mut self, ratio: f64) -> Self {
        self.kind.tightening = Some(ratio);
        self
    }

    /// The most levels, 1 to 64 (default 32); fewer when a level would need more than one
    /// key's 2^32 bits. Past them, an add of a new item fails with [`Error::FilterFull`].
    pub fn max_levels(mut self, levels: u32) -> Self {
        self.kind.max_levels = Some(levels);
        self
    }
}

impl<C> Bloom<C, Growing> {
    /// Each level's capacity over the one before.
    pub fn growth(&self) -> u32 {
        self.0.kind.growth
    }

    /// Each level's false-positive rate over the one before.
    pub fn tightening(&self) -> f64 {
        self.0.kind.tightening
    }

    /// The whole filter's false-positive rate bound.
    pub fn false_positive_rate(&self) -> f64 {
        self.0.kind.fpr
    }

    /// The most levels the filter can have: as asked of the builder, or fewer when a level
    /// would need more than one key's 2^32 bits (shards raise that).
    pub fn max_levels(&self) -> u32 {
        self.0.kind.levels.len() as u32
    }

    /// Every level the filter can have, in one shard (each shard has the same), as sized:
    /// capacity, rate, bits, and where it lies in Redis.
    pub fn levels(&self) -> Vec<GrowingLevel> {
        self.0
            .kind
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| GrowingLevel {
                dense: merge::level_merges(&self.0.kind, i),
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
        let per_part: u64 = self.0.kind.levels.iter().map(|l| l.capacity).sum();
        per_part.saturating_mul(u64::from(self.shards()))
    }
}

/// The levels' name beside a filter's key: `redbloom:grow:HASH`, HASH naming the parameters.
fn levels_of(fingerprint: &str) -> String {
    let (h1, _) = crate::hash::murmur3_x64_128(fingerprint.as_bytes());
    format!("redbloom:grow:{:08x}", h1 >> 32)
}

/// The parameters key and the bare key that the scripts check, when the guard lives in the
/// part's slot group (a filter of one key).
fn params_keys(guard: Option<&Guard>) -> Option<[&str; 2]> {
    guard.map(|guard| [guard.key(), guard.bits_key()])
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

impl Growing {
    /// The filter `setup` describes: checked, its levels sized and placed.
    fn new(setup: &Setup<'_, Self>) -> Result<Self> {
        let (Some(capacity), Some(fpr), None) = (setup.items, setup.fpr, setup.bits) else {
            return Err(Error::InvalidConfig(
                "a growing filter is sized by its first level's items and the rate, not in bits"
                    .into(),
            ));
        };
        let growth = setup.kind.growth.unwrap_or(DEFAULT_GROWTH);
        let tightening = setup.kind.tightening.unwrap_or(DEFAULT_TIGHTENING);
        let max_levels = setup.kind.max_levels.unwrap_or(DEFAULT_MAX_LEVELS);
        if growth == 0 {
            return Err(Error::InvalidConfig(
                "the growth factor is a whole number of at least 1".into(),
            ));
        }
        crate::sizing::between_0_and_1("the tightening ratio", tightening)?;
        if !(1..=MAX_LEVELS).contains(&max_levels) {
            return Err(Error::InvalidConfig(format!(
                "a growing filter has 1 to {MAX_LEVELS} levels, not {max_levels}"
            )));
        }
        crate::sizing::check_items_and_rate(capacity, fpr)?;
        let shards = setup.shards.max(1);
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
        Ok(Growing {
            levels,
            segments,
            growth,
            tightening,
            fpr,
            fingerprint,
        })
    }

    /// A part whose counts are at `counts`, its segments beside them.
    fn part(&self, counts: String) -> Part {
        Part {
            level_keys: self
                .levels
                .iter()
                .map(|l| format!("{counts}:{}", l.segment))
                .collect(),
            segment_keys: (0..self.segments.len())
                .map(|s| format!("{counts}:{s}"))
                .collect(),
            counts,
            known: AtomicU32::new(0),
            newest_count: AtomicU64::new(0),
            turns: Turns::default(),
        }
    }

    /// The levels `part` is known to have, at least one (the first is always read).
    fn known(&self, part: &Part) -> usize {
        (part.known.load(Ordering::Relaxed) as usize).clamp(1, self.levels.len())
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

    /// Whether `item` is in some of the first `levels` levels (newest first: it holds the
    /// most items).
    fn in_levels(&self, levels: usize, segments: &[Vec<u8>], hash: &ItemHash) -> bool {
        (0..levels)
            .rev()
            .any(|level| self.in_level(segments, level, hash))
    }

    /// Per item: whether it is in some of the first `levels` levels.
    fn test_levels(&self, levels: usize, segments: &[Vec<u8>], hashes: &[ItemHash]) -> Vec<bool> {
        hashes
            .iter()
            .map(|hash| self.in_levels(levels, segments, hash))
            .collect()
    }

    /// The filter `key` is full: a new item needed a level past the most, after `added` items
    /// of the part's batch were answered.
    fn full(&self, key: &str, added: usize) -> Error {
        let capacity: u64 = self.levels.iter().map(|l| l.capacity).sum();
        Error::FilterFull {
            key: key.to_owned(),
            added: added as u64,
            reason: format!(
                "a growing filter whose {} levels have all taken their {capacity} items per \
                 shard",
                self.levels.len()
            ),
        }
    }

    /// The mismatch a script's `{"params", STORED}` reply means, or the loss its `{"lost",
    /// KEY}` reply names, if it is one.
    fn refused(&self, key: &str, reply: &Value) -> Option<Error> {
        if let Some(gone) = guard::refused_lost(reply) {
            return Some(Error::Lost {
                filter: key.to_owned(),
                key: gone,
            });
        }
        guard::refused_params(reply).map(|stored| self.mismatch(key, stored))
    }

    /// The mismatch error for the filter `key` of one key whose stored parameters differ
    /// (`None`: none stored, and the bare key holds something).
    fn mismatch(&self, key: &str, stored: Option<String>) -> Error {
        Error::ParamsMismatch {
            key: key.to_owned(),
            stored: stored.unwrap_or_else(|| {
                "no parameters: the key holds another kind of filter (or other data)".into()
            }),
            requested: self.fingerprint.clone(),
        }
    }
}

#[allow(private_interfaces, private_bounds)]
impl Seam for Growing {
    type Options = GrowingOptions;
    type Part = Part;
    type PartInfo = info::PartInfo;
    type Info = GrowingInfo;

    // Each step is a script over the levels whose own cost its items share: two larger steps
    // in flight cost the server less per item than four smaller ones (BENCHMARKS.md "Group
    // commit").
    const STEPS_IN_FLIGHT: usize = 2;
    // A check is a pipeline of `HLEN` and a `BITFIELD_RO` per segment, whatever its items: 64
    // tasks' single checks ran 1.28-1.58x faster grouped, at 0.71-0.80x the server CPU per
    // item (BENCHMARKS.md "Grouped checks of a growing filter").
    const GROUPS_CHECKS: bool = true;

    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>> {
        let kind = Growing::new(&setup)?;
        let (key, shards) = (setup.key, setup.shards.max(1));
        let levels = levels_of(&kind.fingerprint);
        let shape = (Layout::Native, kind.levels[0].bits());
        // A filter of one key: the scripts check the parameters beside the levels, and the bare
        // key.
        let guard = Guard::of(key, shards, kind.fingerprint.clone(), shape);
        let parts = match shards {
            1 => vec![kind.part(keys::sidecar(key, &levels))],
            _ => (0..shards)
                .map(|i| kind.part(keys::sidecar(&keys::shard_key(key, i, shards), &levels)))
                .collect(),
        };
        Ok(Made { kind, parts, guard })
    }

    /// The stored capacity (all shards'), rate, growth, tightening and levels (as many as the
    /// filter could have: asked for again, the same).
    fn reopen(stored: &Fields<'_>) -> Option<Sizes<Self>> {
        Some(Sizes {
            bits: None,
            items: Some(stored.number("capacity")?),
            fpr: Some(stored.number("fpr")?),
            hashes: None,
            kind: GrowingOptions {
                growth: Some(stored.number("growth")?),
                tightening: Some(stored.number("tightening")?),
                max_levels: Some(stored.number("max_levels")?),
            },
        })
    }

    /// One part's items: a large add by the dense merge, a large check by the levels read
    /// whole (each retried as one read, or one merge); otherwise in steps of a bounded size,
    /// in order, each retried, and a write's `WAIT` after them all (the whole part retried
    /// with it when replicas are asked).
    async fn batch<'a, C: Conn>(ctx: Ctx<'a, C, Self>, op: Op, items: Items<'a>) -> Answers {
        let hashes: Vec<ItemHash> = items
            .iter()
            .map(|item| ItemHash::of(item, Layout::Native))
            .collect();
        let write = op.writes();
        if write {
            if let Some(new) = merge::add(ctx, &hashes).await? {
                return Ok(new);
            }
        } else if read::whole_pays(ctx, hashes.len()) {
            return read::whole(ctx, &hashes).await;
        }
        let steps = || async {
            let mut answers = Vec::with_capacity(hashes.len());
            while answers.len() < hashes.len() {
                let rest = &hashes[answers.len()..];
                answers.extend(match write {
                    true => add::step(ctx, rest)
                        .await
                        .map_err(|err| err.full_after(answers.len()))?,
                    false => read::step(ctx, rest).await?,
                });
            }
            Ok(answers)
        };
        // A write by the per-item script shares this handle's turn: never during one of its
        // merges, whose compare-and-set it would fail.
        let _beside = match write {
            true => Some(ctx.part().turns.beside().await),
            false => None,
        };
        match write && ctx.exec().options().replicas.is_some() {
            true => {
                ctx.written(&ctx.part().counts, Engine::Scripts, steps)
                    .await
            }
            false => steps().await,
        }
    }

    async fn part_info<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<info::PartInfo> {
        info::part(ctx).await
    }

    async fn info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        parts: Vec<info::PartInfo>,
    ) -> Result<GrowingInfo> {
        ctx.kind().total(ctx.key(), parts)
    }

    /// The part's counts, every segment its levels use and (a filter of one key) the
    /// parameters, deleted or given a TTL by one script that checks them first.
    async fn drop_part<'a, C: Conn>(ctx: Ctx<'a, C, Self>, how: Removal) -> Result<bool> {
        let (kind, part) = (ctx.kind(), ctx.part());
        let how = match how {
            Removal::Delete => "del".to_owned(),
            Removal::Expire(ms) => ms.to_string(),
        };
        let most = kind.levels.len();
        let mut keys = vec![part.counts.as_str()];
        keys.extend(part.level_keys[..most].iter().map(String::as_str));
        keys.extend(params_keys(ctx.guard()).into_iter().flatten());
        let args: [&dyn crate::scripts::Arg; 3] = [&kind.fingerprint, &most, &how];
        let reply = ctx
            .exec()
            .script(&part.counts, &GROW_DROP, &keys, &args)
            .await?;
        if let Some(refusal) = kind.refused(ctx.key(), &reply) {
            return Err(refusal);
        }
        match reply {
            Value::Int(any) => Ok(any == 1),
            other => Err(Error::UnexpectedReply(format!("{other:?}"))),
        }
    }

    /// After a clear or an import: no level known.
    fn forget(&self, parts: &Shards<Part>) {
        for part in parts.parts() {
            part.known.store(0, Ordering::Relaxed);
            part.newest_count.store(0, Ordering::Relaxed);
        }
    }

    fn part_keys(&self, parts: &Shards<Part>) -> Vec<String> {
        parts.parts().iter().map(|p| p.counts.clone()).collect()
    }

    /// Large enough that the dense add (the levels read whole, the batch's bits merged) pays
    /// for its reads.
    fn bulk_add_batch_size(&self, parts: &Shards<Part>) -> usize {
        100_000 * parts.count() as usize
    }

    /// Large enough to read the levels whole (up to 64 MiB per shard) rather than send every
    /// level's offsets.
    fn bulk_check_batch_size(&self, parts: &Shards<Part>) -> usize {
        100_000 * parts.count() as usize
    }
}

#[allow(private_interfaces, private_bounds)]
impl Cached for Growing {
    type Copy = near::Copy;

    fn copy_bytes(&self, parts: &Shards<Part>) -> Result<u64> {
        Ok(self.first_copy_bytes(parts))
    }

    async fn read_copy<'a, C: Conn>(ctx: Ctx<'a, C, Self>, budget: u64) -> Result<near::Copy> {
        near::read(ctx, budget).await
    }

    fn in_copy(&self, parts: &Shards<Part>, copy: &near::Copy, item: &[u8]) -> bool {
        self.found_in(parts, copy, item)
    }
}

#[allow(private_interfaces, private_bounds)]
impl Sections for Growing {
    fn merge_allowed(&self) -> Result<()> {
        Err(Error::InvalidConfig(
            "a growing filter's file cannot be merged into it (its levels and counts do not add \
             up): import it whole, or load its items"
                .into(),
        ))
    }

    async fn sections<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<Vec<Stored>> {
        snapshot::sections(ctx).await
    }

    fn too_long(core_key: &str, guard: &Guard, stored: &Stored, len: u64) -> Error {
        snapshot::too_long(core_key, guard, stored, len)
    }

    fn place(&self, parts: &Shards<Part>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
        self.place_section(parts, nonce, section)
    }

    async fn groups<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        staged: &'a [Staged],
        _: ImportMode,
    ) -> Result<Vec<Group>> {
        snapshot::groups(ctx, staged).await
    }
}
