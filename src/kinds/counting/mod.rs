//! The counting filter (SPEC.md §4 "counting"): items can be removed. Each position is a 4-bit
//! counter (`BITFIELD ... u4 #i`, two per byte) that saturates at 15; an add increments the
//! item's k counters, a remove decrements them, in one atomic step that does nothing unless
//! every one is above zero, and never decrements a saturated counter.
//!
//! `steps` runs a part's batch (per-item commands and scripts, the dense read), `swap` the
//! dense write (the counters read, changed here, swapped back whole).

mod steps;
mod swap;

use crate::core::call::{self, Call};
use crate::core::kind::{
    self, Answers, Cached, Fields, Items, Made, Op, Seam, Sections, Setup, Sizes,
};
use crate::core::sharded::Shards;
use crate::core::{Bloom, Conn, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::hash::ItemHash;
use crate::info::{CountingInfo, FilterInfo, KeyTtl};
use crate::io::guard::{Evidence, Guard};
use crate::io::lease::Turns;
use crate::io::removal::Removal;
use crate::io::strings;
use crate::io::tx::{Slot, Tx};
use crate::layout::Layout;
use crate::near;
use crate::sizing::{current_fpr, estimate_items};
use crate::snapshot::{self, Group, ImportMode, SectionHeader, Staged, Stored};
use crate::{bitfield, dense, keys, Builder};

/// A Bloom filter whose items can be removed (SPEC.md §4 "counting"): each of its positions is
/// a 4-bit counter in a Redis string (half a byte each), for blacklists whose entries are
/// lifted.
///
/// [`add`](Bloom::add) increments the item's k counters (saturating at 15);
/// [`remove`](Bloom::remove) decrements them in one atomic step that does nothing unless
/// every one is above zero, and never decrements a saturated counter. An item added more often
/// than removed is always found, whatever other clients do concurrently, **provided only items
/// that were added are removed**: removing an item that was never added but tests present (a
/// false positive) decrements counters that other items hold, and can make them absent. Use
/// [`add_if_absent`](Bloom::add_if_absent) so that an item is counted once however often it is
/// added, and remove only what you know you added.
///
/// Adding twice counts twice (it then takes two removes to remove it), so `add` and `remove`
/// are not idempotent. A retried write is still applied once: with a retry budget each write
/// step records its reply beside the counters, and a retry after a lost reply reads it back
/// ([`Builder::exact_retries`](crate::Builder::exact_retries); turned off, a retried add may
/// count twice and a retried remove remove twice). Batches of up to
/// [`MAX_OFFSETS_PER_COMMAND`](crate::MAX_OFFSETS_PER_COMMAND) counters go as one atomic
/// command each, a few in flight; a batch that outweighs the counters reads them whole,
/// applies the batch here and swaps them back in one compare-and-set step, which records the
/// answers it computed so that a retry reads them back.
///
/// ```no_run
/// # async fn demo(conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let blocked = redbloom::CountingBloom::builder("blocked:users")
///     .expected_items(100_000)
///     .false_positive_rate(0.001)
///     .build(conn)?;
/// blocked.add_if_absent("user:42").await?; // blocking twice counts once
/// assert!(blocked.exists("user:42").await?);
/// blocked.remove("user:42").await?;       // unblocked
/// # Ok(()) }
/// ```
pub type CountingBloom<C> = Bloom<C, Counting>;

/// The counting kind (see [`CountingBloom`]): its counters and counters per item, all shards
/// together (`bits` counts counters).
#[derive(Debug)]
pub struct Counting {
    geometry: Geometry,
}

/// A counting builder's own options: none beyond every kind's.
#[derive(Debug, Clone, Default)]
pub struct CountingOptions {}

/// One key of counters.
#[derive(Debug)]
pub struct Counters {
    key: String,
    /// The dense path's scratch keys in its slot (the bytes as read, the bytes to write).
    scratch: (String, String),
    /// `bits` is the number of counters of this key.
    geometry: Geometry,
    /// Turns at the dense batch's read and swap: this handle's batches in flight, and other
    /// writers' (the lease).
    turns: Turns,
    /// The dense swap's lease in its slot, which concurrent writers take in turn
    /// ([`Lease`](crate::io::lease::Lease)).
    lease: String,
}

impl Counters {
    fn new(key: String, geometry: Geometry) -> Self {
        let scratch = (
            keys::sidecar(&key, "redbloom:swap:old"),
            keys::sidecar(&key, "redbloom:swap:new"),
        );
        let lease = keys::sidecar(&key, "redbloom:swap:lease");
        Counters {
            key,
            scratch,
            geometry,
            turns: Turns::default(),
            lease,
        }
    }

    /// The bytes its counters take (two a byte).
    fn max_bytes(&self) -> u64 {
        self.geometry.bits.div_ceil(2)
    }

    /// The key seen as bits (4 per counter): for the checked `clear` and `expire`.
    fn as_bits(&self) -> Geometry {
        self.geometry.total(self.geometry.bits * 4)
    }
}

kind::kind!(Counting = Counting, in bits);

impl Bloom<(), Counting> {
    /// A [`Builder`] for a counting filter at `key`: sized with
    /// [`expected_items`](Builder::expected_items) and a rate (as many counters as a native
    /// filter has bits), or with [`bits`](Builder::bits) counters and
    /// [`hashes`](Builder::hashes) (default 7). Uses the native layout's hashing.
    pub fn builder(key: impl Into<String>) -> Builder<Counting> {
        Builder::of_kind(key, CountingOptions::default())
    }
}

impl<C> Bloom<C, Counting> {
    /// How many 4-bit counters the filter has (all shards together).
    pub fn counters(&self) -> u64 {
        self.0.kind.geometry.bits
    }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync> Bloom<C, Counting> {
    /// Adds `item` only if it is absent (all its counters above zero means present), in one
    /// atomic step, like RedisBloom's `CF.ADDNX`: of concurrent calls for one absent item,
    /// exactly one adds it and returns `true`. Idempotent, so a blacklist entry blocked twice
    /// is unblocked by one [`remove`](Bloom::remove).
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn add_if_absent(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.one(Call::AddIfAbsent, Op::AddIfAbsent, item.as_ref())
            .await
    }

    /// [`add_if_absent`](Bloom::add_if_absent) for every item, in order.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn add_many_if_absent<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.many(Call::AddManyIfAbsent, Op::AddIfAbsent, items)
            .await
    }

    /// Removes `item` once: in one atomic step, nothing unless every counter of the item is
    /// above zero; then each is decremented, but a saturated counter (15) stays. Returns
    /// whether it was present and removed. Removing an absent item changes nothing.
    ///
    /// Remove only items that were added: removing a false positive decrements counters of
    /// other items, which may then test absent.
    ///
    /// # Errors
    /// As for [`add`](Bloom::add). A remove retried after a lost reply is applied once (see
    /// the type's docs), or fails with [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)
    /// when its record could be gone.
    pub async fn remove(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.one(Call::Remove, Op::Remove, item.as_ref()).await
    }

    /// [`remove`](Bloom::remove) for every item, in order; an item repeated in the batch is
    /// removed as many times as it appears (while present).
    ///
    /// # Errors
    /// As for [`add`](Bloom::add).
    pub async fn remove_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.many(Call::RemoveMany, Op::Remove, items).await
    }

    async fn one(&self, call: Call, op: Op, item: &[u8]) -> Result<bool> {
        let core = &*self.0;
        call::run(call, core, Some(1), async {
            Ok(core.write(op, &[item]).await?[0])
        })
        .await
    }

    async fn many<T: AsRef<[u8]>>(&self, call: Call, op: Op, items: &[T]) -> Result<Vec<bool>> {
        let core = &*self.0;
        call::run(call, core, Some(items.len()), async {
            let items: Vec<&[u8]> = items.iter().map(AsRef::as_ref).collect();
            core.write(op, &items).await
        })
        .await
    }
}

/// A counting filter's refusal of a merge of its file.
const NO_MERGE: &str = "a counting filter's file cannot be merged into it (its counters are \
                        not bits to OR); import it whole, or load its items";

#[allow(private_interfaces, private_bounds)]
impl Seam for Counting {
    /// An add increments counters: applied twice, it counts twice.
    const IDEMPOTENT_ADDS: bool = false;
    type Options = CountingOptions;
    type Part = Counters;
    type PartInfo = PartInfo;
    type Info = CountingInfo;

    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>> {
        // Sized in counters, a counting filter takes 7 per item unless told.
        let setup = Setup {
            hashes: setup.hashes.or(setup.bits.map(|_| 7)),
            ..setup
        };
        // A key holds at most 2^32 bits: 2^30 counters.
        const PER_KEY: u64 = crate::sizing::MAX_BITS / 4;
        if let (Some(items), Some(fpr), None) = (setup.items, setup.fpr, setup.bits) {
            crate::sizing::check_items_and_rate(items, fpr)?;
            let shards = setup.shards.max(1);
            // Past 2^64 counters too.
            let fits = crate::sizing::optimal_bits(items, fpr)
                .is_ok_and(|c| c.div_ceil(u64::from(shards)) <= PER_KEY);
            if !fits {
                let room = (PER_KEY, "counters");
                return Err(crate::sizing::too_many_items(
                    items, fpr, None, shards, room,
                ));
            }
        }
        let (counters, hashes) = kind::sized(&setup, Layout::Native, |fpr| fpr)?;
        let (key, shards) = (setup.key, setup.shards);
        let (per_part, geometry) = kind::split(Layout::Native, counters, hashes, shards)?;
        if per_part.bits > PER_KEY {
            return Err(Error::InvalidConfig(format!(
                "{} counters per key are more than one key's 2^30 (4 bits each); use more shards",
                per_part.bits
            )));
        }
        let fingerprint = format!(
            "kind=counting counter_bits=4 {}",
            geometry.fingerprint(shards)
        );
        let parts = match shards {
            1 => vec![Counters::new(key.to_owned(), per_part)],
            _ => (0..shards)
                .map(|i| Counters::new(keys::shard_key(key, i, shards), per_part))
                .collect(),
        };
        let guard = Guard::of(
            key,
            shards,
            fingerprint,
            (Layout::Native, geometry.bits * 4),
        );
        Ok(Made {
            kind: Counting { geometry },
            parts,
            guard,
        })
    }

    fn reopen(stored: &Fields<'_>) -> Option<Sizes<Self>> {
        stored.in_bits(CountingOptions {})
    }

    async fn batch<'a, C: Conn>(ctx: Ctx<'a, C, Self>, op: Op, items: Items<'a>) -> Answers {
        if let Some(guard) = ctx.guard() {
            ctx.retried(|| guard.ensure(ctx.exec(), op.writes()))
                .await?;
        }
        steps::part(ctx, items, op).await
    }

    async fn part_info<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<PartInfo> {
        if let Some(guard) = ctx.guard() {
            guard.ensure(ctx.exec(), false).await?;
        }
        let part = ctx.part();
        let mut tx = Tx::plain();
        let whole = dense::read_whole(&mut tx, &part.key, part.geometry.bits * 4);
        let pttl: Slot<i64> = tx.add(redis::cmd("PTTL").arg(&part.key).to_owned());
        let mut replies = ctx.exec().run(&part.key, &tx).await?;
        let counters = whole.take(&mut replies)?;
        let mut info = PartInfo {
            in_use: 0,
            saturated: 0,
            bytes: counters.len() as u64,
            ttl: KeyTtl::from_pttl(replies.take(pttl)?),
        };
        for byte in counters {
            for nibble in [byte >> 4, byte & 0x0f] {
                info.in_use += u64::from(nibble > 0);
                info.saturated += u64::from(nibble == 15);
            }
        }
        Ok(info)
    }

    async fn info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        parts: Vec<PartInfo>,
    ) -> Result<CountingInfo> {
        let mut total = PartInfo {
            in_use: 0,
            saturated: 0,
            bytes: 0,
            ttl: KeyTtl::Missing,
        };
        for part in parts {
            total.in_use += part.in_use;
            total.saturated += part.saturated;
            total.bytes += part.bytes;
            total.ttl = total.ttl.longest_lived(part.ttl);
        }
        let Geometry { bits, hashes, .. } = ctx.kind().geometry;
        Ok(CountingInfo {
            filter: FilterInfo {
                key: ctx.key().to_owned(),
                bits,
                hashes,
                bits_set: total.in_use,
                bytes: total.bytes,
                estimated_items: estimate_items(bits, hashes, total.in_use),
                estimated_fpr: current_fpr(bits, hashes, total.in_use),
                ttl: total.ttl,
            },
            counters_in_use: total.in_use,
            counters_saturated: total.saturated,
        })
    }

    async fn drop_part<'a, C: Conn>(ctx: Ctx<'a, C, Self>, how: Removal) -> Result<bool> {
        let part = ctx.part();
        strings::drop_checked(ctx.exec(), &part.key, ctx.guard(), part.as_bits(), how).await
    }

    fn keeps_parts(&self) -> bool {
        true
    }

    fn route_engine(&self) -> Engine {
        Engine::Fast
    }

    fn part_keys(&self, parts: &Shards<Counters>) -> Vec<String> {
        parts.parts().iter().map(|p| p.key.clone()).collect()
    }

    fn bulk_add_batch_size(&self, parts: &Shards<Counters>) -> usize {
        let part = &parts.parts()[0];
        let hashes = part.geometry.hashes;
        let per_item = (bitfield::MAX_OFFSETS_PER_COMMAND / hashes as usize).max(1)
            * crate::io::exec::COMMANDS_IN_FLIGHT;
        swap::batch_size(part.max_bytes(), hashes, per_item) * parts.count() as usize
    }

    fn bulk_check_batch_size(&self, parts: &Shards<Counters>) -> usize {
        let part = &parts.parts()[0];
        let bytes = part.max_bytes();
        if bytes > dense::MAX_READ_BYTES {
            return self.bulk_add_batch_size(parts);
        }
        // A counter per 4 bytes (32 times the break-even: few whole reads).
        let hashes = u64::from(part.geometry.hashes);
        (bytes.div_ceil(8 * hashes) * 2).clamp(1_000, 1_000_000) as usize * parts.count() as usize
    }
}

#[allow(private_interfaces, private_bounds)]
impl Cached for Counting {
    type Copy = near::Strings;

    fn copy_bytes(&self, parts: &Shards<Counters>) -> Result<u64> {
        Ok(parts.parts().iter().map(Counters::max_bytes).sum())
    }

    async fn read_copy<'a, C: Conn>(ctx: Ctx<'a, C, Self>, _: u64) -> Result<near::Strings> {
        let parts = ctx.parts.parts().iter();
        let parts = parts.map(|p| (p.key.as_str(), p.max_bytes()));
        let lost = (ctx.clock, ctx.key(), ctx.kind().keeps_parts());
        near::read_strings(ctx.exec(), lost, ctx.params(), parts).await
    }

    /// All its counters above zero.
    fn in_copy(&self, parts: &Shards<Counters>, copy: &near::Strings, item: &[u8]) -> bool {
        let i = parts.part_of(item);
        let counters = &copy.0[i];
        let hash = ItemHash::of(item, Layout::Native);
        parts.parts()[i]
            .geometry
            .all(&hash, |cell| swap::counter(counters, cell) > 0)
    }
}

#[allow(private_interfaces, private_bounds)]
impl Sections for Counting {
    fn merge_allowed(&self) -> Result<()> {
        Err(Error::InvalidConfig(NO_MERGE.into()))
    }

    async fn sections<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<Vec<Stored>> {
        let part = ctx.part();
        Ok(vec![snapshot::strings::section(
            ctx.index,
            &part.key,
            part.max_bytes(),
        )])
    }

    fn too_long(_: &str, guard: &Guard, _: &Stored, len: u64) -> Error {
        guard.refusal(Evidence::Length(len as i64))
    }

    fn place(
        &self,
        parts: &Shards<Counters>,
        nonce: &str,
        section: &SectionHeader,
    ) -> Result<Staged> {
        snapshot::strings::place(section, nonce, |i| {
            let part = parts.parts().get(i)?;
            Some((part.key.as_str(), part.max_bytes()))
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

/// One part's counters in use and saturated, bytes and TTL.
#[derive(Debug)]
pub struct PartInfo {
    in_use: u64,
    saturated: u64,
    bytes: u64,
    ttl: KeyTtl,
}
