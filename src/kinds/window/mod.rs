//! The window filter (SPEC.md §4 "window"): "seen in the last W?" for streams that never end.
//!
//! The filter is G generations, one Redis string each, named by epoch: generation E holds the
//! items added while the server's clock was in `[E·W/(G-1), (E+1)·W/(G-1))` ms. A check tests
//! the G live generations (E, E-1, …, E-G+1), so an item added at t is found until at least
//! t + W and forgotten from t + W·G/(G-1) on at the latest. Each generation gets its absolute
//! expiry in the atomic step that creates it; nothing rotates.
//!
//! The epoch comes from the server's clock (`TIME`, inside each script). Since a script must
//! declare its keys (Redis Cluster), the client names the generations of the epoch it guesses,
//! plus one on either side; a guess further off is refused with the server's time, and the
//! call goes again with the right one (an extra round trip, once, when the client's clock is
//! off by more than a generation).
//!
//! Here: the public type and its options, and the kind's side of the seam; `part` names a
//! part's generations and keeps the guess of the server's clock, `scripts` runs the window
//! scripts, `step` a batch's per-item scripts, `dense` its dense path, `info` the info and
//! drop scripts, `near` the near cache's copy and `snapshot` the snapshot sections.

mod dense;
mod info;
mod near;
mod newest;
mod part;
mod ranges;
mod scripts;
mod snapshot;
mod step;

use self::info::PartInfo;
use self::part::{generations_of, Part};
use crate::core::kind::{
    self, Answers, Cached, Fields, Items, Made, Op, Seam, Sections, Setup, Sizes,
};
use crate::core::sharded::Shards;
use crate::core::{Bloom, Conn, Ctx};
use crate::engine::Engine;
use crate::epochs::{millis, ServerClock};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::info::WindowInfo;
use crate::io::guard::Guard;
use crate::io::removal::Removal;
use crate::layout::Layout;

use crate::sizing::window_generation_fpr;
use crate::snapshot::{Group, ImportMode, SectionHeader, Staged, Stored};
use crate::{keys, Builder};
use std::time::Duration;

/// The fewest and the most generations: each check reads every live one.
const GENERATIONS: std::ops::RangeInclusive<u32> = 2..=64;

/// The generations of a builder that names none.
const DEFAULT_GENERATIONS: u32 = 4;

/// The longest window: ten years (the scripts' arithmetic stays exact far beyond).
const MAX_WINDOW: Duration = Duration::from_secs(10 * 365 * 86_400);

/// A Bloom filter that forgets: "was this item added in the last `window`?" (SPEC.md §4
/// "window"), for deduplicating streams that never end.
///
/// An item added at time t is found by every check until at least t + window, and forgotten
/// (found only as a false positive) from t + window·G/(G-1) on at the latest, G being the
/// number of generations (default 4). Time is the Redis server's clock: clients whose clocks
/// disagree get the same answers. Generations that leave the window expire in Redis by
/// themselves: nothing rotates, and no coordinator or background task is needed.
///
/// Sized by [`Builder::expected_items`](crate::Builder::expected_items) as the most items
/// added in any one window: as long as no window holds more, a check's false-positive rate
/// stays at or below the rate given. Memory: G generations, each sized for all those items
/// at about half the rate ([`window_generation_fpr`](crate::window_generation_fpr)).
///
/// Every call is one round trip (per shard): `add` tests the live generations and sets the
/// current one in one atomic script, and checks run read-only scripts (`EVALSHA_RO`) that
/// replicas can serve. `add` returns `true` when the item was in no live generation: not
/// seen within the window; `exists` returns `false` when the item was surely not added in the
/// last `window`, `true` when it was added within `window·G/(G-1)` (or for a false positive).
/// Batches large enough to outweigh the live generations take the dense path: one
/// transaction reads them and merges the batch's bitmap into the current one (an add), or
/// reads them back (a check). `info` describes the live generations; `expire` leaves a
/// generation that leaves the window sooner its own expiry. Uses the native layout's hashing.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let client = redbloom::redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let recent = redbloom::WindowBloom::builder("events:last-hour", Duration::from_secs(3600))
///     .expected_items(1_000_000) // at most this many events in any one hour
///     .false_positive_rate(0.001)
///     .build(conn)?;
/// if recent.add("event-42").await? {
///     // not seen in the last hour: handle it
/// }
/// # Ok(()) }
/// ```
pub type WindowBloom<C> = Bloom<C, Window>;

/// The window kind (see [`WindowBloom`]): one generation's shape (all shards together), the
/// window and its generations, the parameters the generations are named by, and this client's
/// guess of the server's clock.
#[derive(Debug)]
pub struct Window {
    geometry: Geometry,
    window_ms: u64,
    generations: u32,
    fingerprint: String,
    server: ServerClock,
}

/// A window builder's own options.
#[derive(Debug, Clone)]
pub struct WindowOptions {
    window: Duration,
    generations: Option<u32>,
}

kind::kind!(Window = Window, in bits);

impl Bloom<(), Window> {
    /// A [`Builder`] for a window filter at `key` whose items are found for at least `window`
    /// after they were added, and forgotten by `window·G/(G-1)`. Size it with
    /// [`expected_items`](Builder::expected_items) as the most items added in any one window
    /// (or in bits: one generation's); the connection comes last, in [`Builder::build`].
    ///
    /// ```
    /// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
    /// use std::time::Duration;
    /// let recent = redbloom::WindowBloom::builder("orders:recent", Duration::from_secs(15 * 60))
    ///     .expected_items(100_000)
    ///     .false_positive_rate(0.001)
    ///     .build(conn)?;
    /// assert_eq!(recent.generations(), 4);
    /// # Ok(()) }
    /// ```
    ///
    /// Building fails with [`Error::InvalidConfig`] when the number of generations is not in
    /// `2..=64`, or the window is shorter than 1 ms per generation after the first or longer
    /// than ten years.
    pub fn builder(key: impl Into<String>, window: Duration) -> Builder<Window> {
        Builder::of_kind(
            key,
            WindowOptions {
                window,
                generations: None,
            },
        )
    }
}

impl Builder<Window> {
    /// A window filter's number of generations G, in `2..=64`. Defaults to 4: items are
    /// forgotten by 4/3 of the window. More generations forget closer to the window but take
    /// more memory (G generations, each sized for the whole window's items) and more work per
    /// call (a check tests every live generation).
    pub fn generations(mut self, generations: u32) -> Self {
        self.kind.generations = Some(generations);
        self
    }
}

impl<C> Bloom<C, Window> {
    /// How long an item is surely remembered.
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.0.kind.window_ms)
    }

    /// How many generations are live at once.
    pub fn generations(&self) -> u32 {
        self.0.kind.generations
    }
}

impl Window {
    /// The checks of a window's options: `Ok((window_ms, generations))`.
    fn checked(options: &WindowOptions) -> Result<(u64, u32)> {
        let generations = options.generations.unwrap_or(DEFAULT_GENERATIONS);
        if !GENERATIONS.contains(&generations) {
            return Err(Error::InvalidConfig(format!(
                "a window filter has {} to {} generations, not {generations}",
                GENERATIONS.start(),
                GENERATIONS.end()
            )));
        }
        let window = options.window;
        let window_ms = millis(window);
        if window > MAX_WINDOW || window_ms < u64::from(generations - 1) {
            return Err(Error::InvalidConfig(format!(
                "a window of {window:?} over {generations} generations: give at least 1 ms per \
                 generation after the first, and at most ten years"
            )));
        }
        Ok((window_ms, generations))
    }

    /// Items per bulk call, for adds and checks alike.
    fn bulk_batch_size(&self, parts: &Shards<Part>) -> usize {
        let part = &parts.parts()[0].geometry;
        dense::batch_size(part.max_bytes(), self.generations, part.hashes) * parts.count() as usize
    }
}

#[allow(private_interfaces, private_bounds)]
impl Seam for Window {
    type Options = WindowOptions;
    type Part = Part;
    type PartInfo = PartInfo;
    type Info = WindowInfo;

    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>> {
        let (bits, hashes) = kind::sized(&setup, Layout::Native, window_generation_fpr)?;
        let (window_ms, generations) = Window::checked(setup.kind)?;
        let (key, shards) = (setup.key, setup.shards.max(1));
        let (per_part, geometry) = kind::split(Layout::Native, bits, hashes, shards)?;
        let fingerprint = format!(
            "kind=window window_ms={window_ms} generations={generations} {}",
            geometry.fingerprint(shards)
        );
        let named = generations_of(&fingerprint);
        let part = |name: &str| -> Result<Part> {
            Ok(Part {
                prefix: keys::sidecar(name, &named),
                made: keys::sidecar(name, &named.replacen(":gen:", ":made:", 1)),
                scratch: keys::sidecar(name, "redbloom:scratch"),
                scratch_or: keys::sidecar(name, "redbloom:scratch:or"),
                geometry: per_part,
                dense_seen: Default::default(),
                newest: Default::default(),
            })
        };
        // A filter of one key: its scripts check the parameters beside it and the bare key;
        // a sharded one: in a slot of their own, the parameters key telling a new filter.
        let parts = match shards {
            1 => vec![part(key)?],
            _ => (0..shards)
                .map(|i| part(&keys::shard_key(key, i, shards)))
                .collect::<Result<Vec<_>>>()?,
        };
        let shape = (Layout::Native, geometry.bits);
        let guard = Guard::of(key, shards, fingerprint.clone(), shape);
        let kind = Window {
            geometry,
            window_ms,
            generations,
            fingerprint,
            server: ServerClock::default(),
        };
        Ok(Made { kind, parts, guard })
    }

    fn reopen(stored: &Fields<'_>) -> Option<Sizes<Self>> {
        let window_ms: u64 = stored.number("window_ms")?;
        stored.in_bits(WindowOptions {
            window: Duration::from_millis(window_ms),
            generations: Some(stored.number("generations")?),
        })
    }

    async fn batch<'a, C: Conn>(ctx: Ctx<'a, C, Self>, op: Op, items: Items<'a>) -> Answers {
        step::batch(ctx, items, op.writes()).await
    }

    async fn part_info<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<PartInfo> {
        info::part_info(ctx).await
    }

    async fn info<'a, C: Conn>(ctx: Ctx<'a, C, Self>, parts: Vec<PartInfo>) -> Result<WindowInfo> {
        info::info(ctx, parts).await
    }

    async fn drop_part<'a, C: Conn>(ctx: Ctx<'a, C, Self>, how: Removal) -> Result<bool> {
        info::drop_part(ctx, how).await
    }

    const EXPIRING: bool = true;
    const GROUPS_CHECKS: bool = true;
    // Each step is a script over the generations whose own cost (about 30 µs of server time
    // on Redis 7.0, against 8 µs an item) its items share: two larger steps in flight cost the
    // server less per item than four smaller ones, and ran faster (BENCHMARKS.md "Group commit").
    const STEPS_IN_FLIGHT: usize = 2;

    fn route_engine(&self) -> Engine {
        Engine::Fast
    }

    fn part_keys(&self, parts: &Shards<Part>) -> Vec<String> {
        parts
            .parts()
            .iter()
            .map(|p| format!("{}:", p.prefix))
            .collect()
    }

    fn bulk_add_batch_size(&self, parts: &Shards<Part>) -> usize {
        self.bulk_batch_size(parts)
    }

    fn bulk_check_batch_size(&self, parts: &Shards<Part>) -> usize {
        self.bulk_batch_size(parts)
    }
}

#[allow(private_interfaces, private_bounds)]
impl Cached for Window {
    type Copy = near::Copy;

    fn copy_bytes(&self, parts: &Shards<Part>) -> Result<u64> {
        Ok(near::bytes(self, parts))
    }

    async fn read_copy<'a, C: Conn>(ctx: Ctx<'a, C, Self>, _: u64) -> Result<near::Copy> {
        ctx.retried(|| near::read(ctx)).await
    }

    fn in_copy(&self, parts: &Shards<Part>, copy: &near::Copy, item: &[u8]) -> bool {
        near::contains(self, parts, copy, item)
    }
}

#[allow(private_interfaces, private_bounds)]
impl Sections for Window {
    fn merge_allowed(&self) -> Result<()> {
        Ok(())
    }

    async fn sections<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<Vec<Stored>> {
        snapshot::sections(ctx).await
    }

    fn too_long(core_key: &str, guard: &Guard, stored: &Stored, len: u64) -> Error {
        snapshot::too_long(core_key, guard, stored, len)
    }

    fn place(&self, parts: &Shards<Part>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
        snapshot::place(parts, nonce, section)
    }

    async fn groups<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        staged: &'a [Staged],
        mode: ImportMode,
    ) -> Result<Vec<Group>> {
        snapshot::groups(ctx, staged, mode).await
    }
}
