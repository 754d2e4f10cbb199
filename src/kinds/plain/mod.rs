//! The plain filter: fixed size, items never forgotten (SPEC.md §1-§3). One key in go-zero's
//! layout by default, bit-compatible with go-zero's `core/bloom`; or several keys (shards).
//!
//! Its parts are keys of bits (`bits`); large batches on large keys go by ranges (`ranges`
//! takes the turns, `merge` makes the passes); `offline` builds one without Redis.

mod bits;
mod bulk;
mod merge;
mod offline;
mod ranges;

pub use self::offline::OfflineBloom;

use self::bits::{Batch, Bits, Run};
use crate::core::call::{self, Call};
use crate::core::kind::{
    self, Answers, Cached, Fields, Items, Made, Op, Seam, Sections, Setup, Sizes,
};
use crate::core::sharded::{self, Shards};
use crate::core::{Bloom, Conn, Core, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::info::FilterInfo;
use crate::io::guard::{Evidence, Guard};
use crate::io::removal::Removal;
use crate::io::strings;
use crate::layout::Layout;
use crate::near;
use crate::snapshot::{self, Group, ImportMode, SectionHeader, Staged, Stored};
use crate::{dense, keys, Builder};
use std::sync::Arc;

/// A Bloom filter whose bits live in a Redis string, shared by every process that opens the
/// same key with the same size.
///
/// The default layout is go-zero's `core/bloom` (SPEC.md §1): the key is used as given, and
/// each item sets 14 bits at `murmur3(item ‖ i) mod bits`. A Go service using go-zero and a
/// Rust service using this type read and write the same filter. [`Layout::Native`] is an
/// opt-in layout with fewer bits per item for the same rate.
///
/// A batch that takes the dense path (a batch large enough to cover the filter) is one
/// transaction on a filter of up to 4 MiB, however many items it holds; on a larger one it is
/// merged one range of the key at a time
/// ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes), 128 KiB, about 0.5 ms
/// of server time each), each range atomic: an item whose bits fall in two ranges may be
/// reported new by two clients adding it at the same moment, and no bit is ever lost. Large
/// batches of one handle take turns (and share their passes over the key), so among
/// themselves they answer as sequential calls. Checks read the filter whole up to 4 MiB, and
/// beyond that the ranges the batch touches.
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
pub type RedisBloom<C> = Bloom<C, Plain>;

/// The plain kind (see [`RedisBloom`]): its shape (the whole filter's, all shards together)
/// and the commands it uses.
#[derive(Debug, Clone)]
pub struct Plain {
    geometry: Geometry,
    engine: Engine,
}

/// A plain builder's own options.
#[derive(Debug, Clone, Default)]
pub struct PlainOptions {
    /// `None`: go-zero's.
    layout: Option<Layout>,
    engine: Engine,
    shared_with_go: bool,
}

kind::kind!(Plain = Plain, in bits);

impl Bloom<(), Plain> {
    /// A [`Builder`] for a plain filter at `key`, sized in bits or from items and a rate; the
    /// connection comes last, in [`Builder::build`].
    pub fn builder(key: impl Into<String>) -> Builder<Plain> {
        Builder::new(key)
    }
}

impl Builder<Plain> {
    /// A builder for a plain filter at `key`; the same as [`RedisBloom::builder`].
    ///
    /// ```
    /// let config = redbloom::Builder::new("seen").bits(1 << 20);
    /// assert!(config.validate().is_ok());
    /// assert!(redbloom::Builder::new("seen").bits(0).validate().is_err());
    /// ```
    pub fn new(key: impl Into<String>) -> Self {
        Builder::of_kind(key, PlainOptions::default())
    }

    /// How items map to bits. Defaults to [`Layout::GoZero`] (k = 14). With [`Layout::Native`],
    /// [`expected_items`](Builder::expected_items) and
    /// [`false_positive_rate`](Builder::false_positive_rate) choose both the bits and k
    /// (SPEC.md §2, free k); with [`bits`](Builder::bits), give [`hashes`](Builder::hashes) too.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.kind.layout = Some(layout);
        self
    }

    /// The commands the filter uses. Defaults to [`Engine::Fast`].
    pub fn engine(mut self, engine: Engine) -> Self {
        self.kind.engine = engine;
        self
    }

    /// Whether the key may be a go-zero filter that a Go service wrote (the go-zero layout
    /// only). Off by default.
    ///
    /// A filter that redbloom made stores its parameters beside its bits; go-zero stores none.
    /// So a string at the key with no stored parameters may be Go's filter, or another
    /// program's value that happens to be a string (a session token, a name). Such a key is
    /// always read as a go-zero filter (when its length fits the size); it is written into,
    /// cleared, given a TTL or imported over only when `shared` is `true`, and otherwise
    /// refused with [`Error::ForeignString`](crate::Error::ForeignString), nothing changed.
    /// A key that does not exist yet, or a filter redbloom made, needs no word.
    ///
    /// ```
    /// use redbloom::{Layout, RedisBloom};
    /// // The filter a Go service keeps with go-zero's core/bloom, 2^20 bits.
    /// let shared = RedisBloom::builder("go:seen").bits(1 << 20).shared_with_go(true);
    /// assert!(shared.validate().is_ok());
    /// // go-zero writes only its own layout, of one key.
    /// let native = RedisBloom::builder("seen").bits(1 << 20).hashes(7).layout(Layout::Native);
    /// assert!(native.shared_with_go(true).validate().is_err());
    /// ```
    pub fn shared_with_go(mut self, shared: bool) -> Self {
        self.kind.shared_with_go = shared;
        self
    }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync> Bloom<C, Plain> {
    /// A filter of `bits` bits at `key`, in go-zero's layout (k = 14), with the default
    /// [`Engine`]. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) when `bits` is not in
    /// `1..=2^32`, the key is empty, or the key is one that a filter keeps for itself (a name
    /// holding `:redbloom:`, or a shard's key).
    pub fn new(conn: C, key: impl Into<String>, bits: u64) -> Result<Self> {
        Builder::new(key).bits(bits).build(conn)
    }

    /// Checks the parameters stored beside the filter against this client's now (storing them
    /// when the filter is new), instead of on the first operation.
    ///
    /// Both layouts store their parameters (`layout`, `bits`, `hashes`) beside the bits, so
    /// that a client with another size gets
    /// [`Error::ParamsMismatch`](crate::Error::ParamsMismatch) instead of wrong answers. A
    /// go-zero filter written by go-zero itself has none; it opens with whatever bits the
    /// client gives, as in go-zero, as long as they are not longer than that size holds. A
    /// native filter must have them.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`](crate::Error::ParamsMismatch) when they differ, or for a
    /// native filter over bits without parameters; otherwise as for [`add`](Bloom::add).
    pub async fn check_params(&self) -> Result<()> {
        let core = &*self.0;
        call::run(Call::CheckParams, core, None, async {
            let clock = core.exec.clock();
            core.make_parts(&clock).await?;
            core.exec
                .retried(&clock, || core.guard.ensure(&core.exec, true))
                .await
        })
        .await
    }
}

impl<C> Bloom<C, Plain> {
    /// The same filter using `engine`'s commands.
    #[must_use]
    pub fn with_engine(self, engine: Engine) -> Self
    where
        C: Clone,
    {
        let core = match Arc::try_unwrap(self.0) {
            Ok(core) => core,
            Err(shared) => shared.fork(),
        };
        let kind = Plain {
            engine,
            ..core.kind
        };
        Bloom(Arc::new(Core { kind, ..core }))
    }

    /// How items map to bits.
    pub fn layout(&self) -> Layout {
        self.0.kind.geometry.layout
    }

    /// The commands this filter uses.
    pub fn engine(&self) -> Engine {
        self.0.kind.engine
    }
}

impl Plain {
    /// How a part's steps run.
    fn run<'a, C>(&self, ctx: &Ctx<'a, C, Plain>) -> Run<'a, C> {
        Run {
            exec: ctx.exec(),
            engine: self.engine,
            guard: ctx.guard(),
            seen: ctx.seen,
            step: None,
            shard_of: ctx.shard_of(),
        }
    }
}

#[allow(private_interfaces, private_bounds)]
impl Seam for Plain {
    type Options = PlainOptions;
    type Part = Bits;
    type PartInfo = FilterInfo;
    type Info = FilterInfo;

    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>> {
        let layout = setup.kind.layout.unwrap_or_default();
        let engine = setup.kind.engine;
        let (bits, hashes) = kind::sized(&setup, layout, |fpr| fpr)?;
        let key = setup.key;
        let shared_with_go = setup.kind.shared_with_go;
        if shared_with_go && (layout != Layout::GoZero || setup.shards > 1) {
            return Err(Error::InvalidConfig(
                "shared_with_go is for a go-zero filter of one key (go-zero's layout, no shards), \
                 as a Go service keeps it"
                    .into(),
            ));
        }
        if setup.shards <= 1 {
            let geometry = Geometry::new(layout, bits, hashes)?;
            let guard = Guard::of(key, 1, geometry.fingerprint(1), (layout, bits))
                .shared_with_go(shared_with_go);
            return Ok(Made {
                kind: Plain { geometry, engine },
                parts: vec![Bits::new(key.to_owned(), geometry)],
                guard,
            });
        }
        let shards = setup.shards;
        let (per_shard, geometry) = kind::split(layout, bits, hashes, shards)?;
        let parts = (0..shards)
            .map(|i| Bits::new(keys::shard_key(key, i, shards), per_shard))
            .collect();
        // The parameters are checked once, for the whole filter, in a slot of their own.
        let fingerprint = geometry.fingerprint(shards);
        let guard = Guard::of(key, shards, fingerprint, (layout, geometry.bits));
        Ok(Made {
            kind: Plain { geometry, engine },
            parts,
            guard,
        })
    }

    fn reopen(stored: &Fields<'_>) -> Option<Sizes<Self>> {
        stored.in_bits(PlainOptions {
            layout: Some(Layout::from_name(stored.field("layout")?)?),
            engine: Engine::default(),
            shared_with_go: false,
        })
    }

    /// One part's batch, retried as a whole: the parameters check (when the guard lives in
    /// this part's slot group), then the bits, and after a write `WAIT`.
    async fn batch<'a, C: Conn>(ctx: Ctx<'a, C, Self>, op: Op, items: Items<'a>) -> Answers {
        let part = ctx.part();
        let batch = Batch::new(items, part.geometry);
        let write = op.writes();
        let step = write.then(|| ctx.step()).flatten();
        let run = Run {
            step: step.as_ref(),
            ..ctx.kind().run(&ctx)
        };
        let answers = ctx
            .retried(|| async {
                let since = run.exec.carrier(&part.key);
                if let Some(guard) = run.guard {
                    guard.ensure(run.exec, write).await?;
                }
                if !write {
                    return part.read(run, &batch).await;
                }
                let new = part.write(run, &batch).await?;
                run.exec.confirm(&part.key, run.engine, since).await?;
                Ok(new)
            })
            .await;
        if let Some(step) = &step {
            step.settle(run.exec, &answers).await;
        }
        answers
    }

    async fn part_info<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<FilterInfo> {
        let run = ctx.kind().run(&ctx);
        if let Some(guard) = run.guard {
            guard.ensure(run.exec, false).await?;
        }
        let part = ctx.part();
        part.info(run, &part.key).await
    }

    async fn info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        mut parts: Vec<FilterInfo>,
    ) -> Result<FilterInfo> {
        if parts.len() == 1 {
            return Ok(parts.remove(0));
        }
        let Geometry { bits, hashes, .. } = ctx.kind().geometry;
        Ok(sharded::sum_info(ctx.key(), bits, hashes, &parts))
    }

    async fn drop_part<'a, C: Conn>(ctx: Ctx<'a, C, Self>, how: Removal) -> Result<bool> {
        let part = ctx.part();
        strings::drop_checked(ctx.exec(), &part.key, ctx.guard(), part.geometry, how).await
    }

    fn route_engine(&self) -> Engine {
        self.engine
    }

    /// The native layout's parts: go-zero's keep SPEC §1 (a missing key is an empty filter:
    /// a Go service may delete it).
    fn keeps_parts(&self) -> bool {
        self.geometry.layout == Layout::Native
    }

    fn part_keys(&self, parts: &Shards<Bits>) -> Vec<String> {
        parts.parts().iter().map(|p| p.key.clone()).collect()
    }

    fn bulk_add_batch_size(&self, parts: &Shards<Bits>) -> usize {
        let part = &parts.parts()[0].geometry;
        dense::add_batch_size(part.bits, part.hashes) * parts.count() as usize
    }

    fn bulk_check_batch_size(&self, parts: &Shards<Bits>) -> usize {
        let part = &parts.parts()[0].geometry;
        dense::check_batch_size(part.bits, part.hashes) * parts.count() as usize
    }
}

#[allow(private_interfaces, private_bounds)]
impl Cached for Plain {
    type Copy = near::Strings;

    fn copy_bytes(&self, _: &Shards<Bits>) -> Result<u64> {
        Ok(self.geometry.bits.div_ceil(8))
    }

    async fn read_copy<'a, C: Conn>(ctx: Ctx<'a, C, Self>, _: u64) -> Result<near::Strings> {
        let parts = ctx.parts.parts().iter();
        let parts = parts.map(|p| (p.key.as_str(), p.geometry.max_bytes()));
        let lost = (ctx.clock, ctx.key(), ctx.kind().keeps_parts());
        near::read_strings(ctx.exec(), lost, ctx.params(), parts).await
    }

    fn in_copy(&self, parts: &Shards<Bits>, copy: &near::Strings, item: &[u8]) -> bool {
        let i = parts.part_of(item);
        let geometry = &parts.parts()[i].geometry;
        let bytes = &copy.0[i];
        geometry.all(&ItemHash::of(item, geometry.layout), |offset| {
            dense::test(bytes, offset)
        })
    }
}

#[allow(private_interfaces, private_bounds)]
impl Sections for Plain {
    fn merge_allowed(&self) -> Result<()> {
        Ok(())
    }

    async fn sections<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<Vec<Stored>> {
        let part = ctx.part();
        let max_bytes = part.geometry.max_bytes();
        Ok(vec![snapshot::strings::section(
            ctx.index, &part.key, max_bytes,
        )])
    }

    fn too_long(_: &str, guard: &Guard, _: &Stored, len: u64) -> crate::Error {
        guard.refusal(Evidence::Length(len as i64))
    }

    fn place(&self, parts: &Shards<Bits>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
        snapshot::strings::place(section, nonce, |i| {
            let part = parts.parts().get(i)?;
            Some((part.key.as_str(), part.geometry.max_bytes()))
        })
    }

    async fn groups<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        staged: &'a [Staged],
        _: ImportMode,
    ) -> Result<Vec<Group>> {
        snapshot::strings::groups(staged, ctx.parts.parts().len())
    }
}
