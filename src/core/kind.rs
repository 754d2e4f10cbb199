//! The seam between the core and a kind of filter: what a kind says, and nothing else.
//!
//! The core (`core/mod.rs`) owns what every kind does: the handle, the key checks, the
//! parameters guard and the shards, fan-out and gather, retries and `WAIT` under the call's
//! clock, clear and expire, the near cache and the snapshot file, and the span and metrics of
//! every public call. A kind says what happens inside one slot group ([`Seam`]): how a batch
//! of items is added or checked there, what its info and its keys are, how its near-cache copy
//! is read and asked, and which keys make its snapshot sections. A kind that does not offer a
//! part (a module filter has no near cache) says so with a typed error from that part's hook.

use super::sharded::{Check, Shards};
use crate::engine::Engine;
use crate::error::Result;
use crate::geometry::Geometry;
use crate::io::exec::{Conn, Exec};
use crate::io::guard::Guard;
use crate::io::removal::Removal;
use crate::near;
use crate::retry::Clock;
use crate::snapshot::{Group, ImportMode, SectionHeader, Staged, Stored};
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::AtomicBool;

/// A kind of filter: [`Plain`](crate::kind::Plain), [`Window`](crate::kind::Window),
/// [`Counting`](crate::kind::Counting), [`Growing`](crate::kind::Growing) or
/// [`Module`](crate::kind::Module). It is the `K` of
/// [`Bloom<C, K>`](crate::Bloom) and [`Builder<K>`](crate::Builder), which choose the methods
/// each kind has. Sealed: the kinds are this crate's.
pub trait Kind: Seam + Cached + Sections {
    /// The kind's name: the `kind` of spans, metrics, snapshot files and
    /// [`StoredParams::kind`](crate::StoredParams::kind).
    const NAME: KindName;
}

/// The name of a kind of filter, as a filter stores it beside itself
/// ([`StoredParams::kind`](crate::StoredParams::kind)), a snapshot file's header holds it
/// ([`SnapshotHeader::kind`](crate::SnapshotHeader::kind)) and spans and metrics label it:
/// `Display` and `FromStr` give and take those words (`plain`, `window`, `counting`,
/// `growing`, `module`), [`Kind::NAME`] is each kind's.
///
/// ```
/// use redbloom::kind::{Kind, KindName, Window};
/// assert_eq!(Window::NAME, KindName::Window);
/// assert_eq!(KindName::Window.to_string(), "window");
/// assert_eq!("window".parse::<KindName>()?, KindName::Window);
/// assert!("bitset".parse::<KindName>().is_err());
/// # Ok::<(), redbloom::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KindName {
    /// A plain Bloom filter ([`RedisBloom`](crate::RedisBloom)), in go-zero's layout or the
    /// native one.
    Plain,
    /// A sliding-window filter ([`WindowBloom`](crate::WindowBloom)).
    Window,
    /// A counting filter ([`CountingBloom`](crate::CountingBloom)).
    Counting,
    /// A growing filter ([`GrowingBloom`](crate::GrowingBloom)).
    Growing,
    /// The server's own Bloom filter ([`ModuleBloom`](crate::ModuleBloom)).
    Module,
}

impl KindName {
    /// Every kind this version knows.
    pub const ALL: [KindName; 5] = [
        KindName::Plain,
        KindName::Window,
        KindName::Counting,
        KindName::Growing,
        KindName::Module,
    ];

    /// The name as stored: `plain`, `window`, `counting`, `growing` or `module`.
    pub const fn as_str(self) -> &'static str {
        match self {
            KindName::Plain => "plain",
            KindName::Window => "window",
            KindName::Counting => "counting",
            KindName::Growing => "growing",
            KindName::Module => "module",
        }
    }
}

impl std::fmt::Display for KindName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for KindName {
    type Err = crate::Error;

    /// The kind named `name` as stored.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a name this version does not
    /// know (a later version's kind).
    fn from_str(name: &str) -> Result<KindName> {
        KindName::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| {
                crate::Error::InvalidConfig(format!(
                    "unknown kind of filter {name:?}: this version knows plain, window, \
                     counting, growing and module"
                ))
            })
    }
}

/// The kinds sized in bits as well as by items and a rate: plain, counting and window
/// filters (a growing filter's levels are sized by items).
pub trait SizedInBits: Kind + InBits {}

/// Makes a kind's state type a [`Kind`] named `KindName::$name` (and, `in bits`, one sized in
/// bits whose state holds its `geometry`): the kind's identity, in its own folder.
macro_rules! kind {
    ($kind:ty = $name:ident) => {
        impl $crate::core::kind::Kind for $kind {
            const NAME: $crate::core::kind::KindName = $crate::core::kind::KindName::$name;
        }
    };
    ($kind:ty = $name:ident, in bits) => {
        $crate::core::kind::kind!($kind = $name);
        impl $crate::core::kind::SizedInBits for $kind {}
        impl $crate::core::kind::InBits for $kind {
            fn size(&self) -> (u64, u32) {
                (self.geometry.bits, self.geometry.hashes)
            }
        }
    };
}
pub(crate) use kind;

/// A kind's size (all shards together) and bits per item, for [`SizedInBits`]'s methods.
#[allow(unreachable_pub)]
pub trait InBits {
    fn size(&self) -> (u64, u32);
}

/// A batch's items, as a kind's steps get them.
pub(crate) type Items<'a> = &'a [&'a [u8]];

/// A batch's answers: one per item, in input order.
pub(crate) type Answers = Result<Vec<bool>>;

/// What a batch does to the items of one slot group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Adds them; true for each that was certainly new.
    Add,
    /// Checks them; true for each that may be present.
    Exists,
    /// Adds each only if absent (counting filters); true for each added.
    AddIfAbsent,
    /// Removes each once (counting filters); true for each removed.
    Remove,
}

impl Op {
    /// Whether the batch writes.
    pub(crate) fn writes(self) -> bool {
        self != Op::Exists
    }
}

/// What a builder hands a kind to make a filter: checked common settings and the kind's own
/// options. Nothing is sent to Redis.
#[derive(Debug)]
pub(crate) struct Setup<'a, K: Seam> {
    /// The filter's name (checked: not empty, not reserved).
    pub(crate) key: &'a str,
    /// Its size as given: in bits, or by items and a rate (at most one of the two).
    pub(crate) bits: Option<u64>,
    pub(crate) items: Option<u64>,
    pub(crate) fpr: Option<f64>,
    pub(crate) hashes: Option<u32>,
    /// Its number of shards (checked: 1..=1024).
    pub(crate) shards: u32,
    pub(crate) kind: &'a K::Options,
}

/// A filter's stored parameters (`field=value` pairs), as a kind reads them back.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a>(pub(crate) &'a str);

impl<'a> Fields<'a> {
    /// The value of `field`.
    pub(crate) fn field(&self, field: &str) -> Option<&'a str> {
        self.0
            .split_ascii_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .find_map(|(name, value)| (name == field).then_some(value))
    }

    /// A number field; `None` when missing or not a number.
    pub(crate) fn number<T: std::str::FromStr>(&self, field: &str) -> Option<T> {
        self.field(field)?.parse().ok()
    }

    /// The sizes of a filter sized in bits (`bits`, `hashes`) with the kind's `options`.
    pub(crate) fn in_bits<K: Seam>(&self, options: K::Options) -> Option<Sizes<K>> {
        Some(Sizes {
            bits: Some(self.number("bits")?),
            items: None,
            fpr: None,
            hashes: Some(self.number("hashes")?),
            kind: options,
        })
    }
}

/// A filter's sizes and kind options, as read back from its stored parameters.
#[derive(Debug)]
pub(crate) struct Sizes<K: Seam> {
    pub(crate) bits: Option<u64>,
    pub(crate) items: Option<u64>,
    pub(crate) fpr: Option<f64>,
    pub(crate) hashes: Option<u32>,
    pub(crate) kind: K::Options,
}

/// What a kind makes of a [`Setup`]: itself, its parts (one per slot group) and its guard.
#[derive(Debug)]
pub(crate) struct Made<K: Seam> {
    pub(crate) kind: K,
    pub(crate) parts: Vec<K::Part>,
    pub(crate) guard: Guard,
}

/// What a kind supplies to the core (see the module docs). Crate-private in all but name: the
/// public [`Kind`] is sealed by it.
#[allow(unreachable_pub, private_interfaces, private_bounds)]
pub trait Seam: Sized + Send + Sync + Debug + 'static {
    /// The builder's options of this kind.
    type Options: Debug + Clone + Send + Sync;
    /// One slot group's keys and state.
    type Part: Debug + Send + Sync;
    /// What one part's info read gives.
    type PartInfo: Send;
    /// What `info` reports.
    type Info: Debug + Send;

    /// The filter a builder describes.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) naming what is wrong.
    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>>;

    /// The items of one batch of `op` on the part of `ctx`, in input order, one attempt or
    /// retried as the kind's steps need (through `ctx`).
    fn batch<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        op: Op,
        items: Items<'a>,
    ) -> impl Future<Output = Answers> + Send + 'a;

    /// The sizes and options of the filter whose parameters are `stored` (they are this
    /// kind's): what [`make`](Seam::make) makes the same fingerprint of. `None` when they are
    /// not parameters of this kind that this version can read.
    fn reopen(_stored: &Fields<'_>) -> Option<Sizes<Self>> {
        None
    }

    /// When a sharded filter checks its parameters for `op`: adds beside the parts' writes; a
    /// write that cannot be undone before any part is touched.
    fn check(op: Op) -> Check {
        match op {
            Op::Exists => Check::Read,
            Op::Add | Op::AddIfAbsent => Check::Write,
            Op::Remove => Check::WriteFirst,
        }
    }

    /// One part's info (retried by the core).
    fn part_info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
    ) -> impl Future<Output = Result<Self::PartInfo>> + Send + 'a;

    /// The filter's info from every part's (`ctx`: the filter, at its first part).
    fn info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        parts: Vec<Self::PartInfo>,
    ) -> impl Future<Output = Result<Self::Info>> + Send + 'a;

    /// Deletes the part's keys or sets their TTL, checked in the same step (one attempt).
    fn drop_part<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        how: Removal,
    ) -> impl Future<Output = Result<bool>> + Send + 'a;

    /// Forgets what the filter learned of its keys (after a clear or an import replaced them).
    fn forget(&self, _parts: &Shards<Self::Part>) {}

    /// Whether every part exists while the filter's parameters are stored (SPEC.md §3): a
    /// check that finds a part gone fails with [`Error::Lost`](crate::Error::Lost) instead of
    /// answering "absent" ([`lost`](super::lost)). The kind makes each part before its
    /// parameters are stored. Not for filters whose keys may go by design (a window's
    /// generations) or that another program writes (go-zero's layout).
    fn keeps_parts(&self) -> bool {
        false
    }

    /// The command that makes an empty part at `key` when it does not exist, leaving one that
    /// exists as it is ([`keeps_parts`](Seam::keeps_parts): a sharded filter's parts, made
    /// before its parameters are stored): an empty string (`SET key "" NX`) unless the kind's
    /// parts are of another type.
    fn make_part(&self, key: &str) -> redis::Cmd {
        redis::cmd("SET").arg(key).arg("").arg("NX").to_owned()
    }

    /// Whether the filter's keys carry a TTL by design (a window filter's generations), so
    /// that a `volatile-*` eviction policy may evict them.
    const EXPIRING: bool = false;

    /// Whether an add applied twice is applied once (it only sets bits): a bulk load's adds
    /// may then go without records ([`Bloom::load_many`](crate::Bloom::load_many)). Not a
    /// counting filter's (increments).
    const IDEMPOTENT_ADDS: bool = true;

    /// Whether this filter's keys carry a TTL by design: the kind's
    /// [`EXPIRING`](Seam::EXPIRING), or the filter's own (a module filter with a window).
    fn expiring(&self) -> bool {
        Self::EXPIRING
    }

    /// Whether single-item checks go by group commit too (writes always do): for a kind whose
    /// check costs the server per call (a window filter's script over its generations, a
    /// growing filter's pipeline over its levels). A check by one `BITFIELD_RO` costs the
    /// server little per call, and 64 tasks' single checks pipelined on the connection ran as
    /// fast alone (go-zero 0.98x, native 1.00x, counting 1.02x grouped; at first go-zero 260,000
    /// items/s alone against 155,000 grouped; BENCHMARKS.md "Group commit", "Grouped checks of
    /// a growing filter").
    const GROUPS_CHECKS: bool = false;

    /// Steps a lane of this kind keeps in flight at most ([`group::STEPS_IN_FLIGHT`] unless
    /// the kind says otherwise): a kind whose step is a script with a large cost of its own
    /// (a window filter's, over its generations; a growing filter's, over its levels) does
    /// better with fewer, larger steps (BENCHMARKS.md "Group commit").
    ///
    /// [`group::STEPS_IN_FLIGHT`]: crate::core::group::STEPS_IN_FLIGHT
    const STEPS_IN_FLIGHT: usize = crate::core::group::STEPS_IN_FLIGHT;

    /// The command that routes a question to a part's master on a cluster
    /// ([`Exec::route`](crate::io::exec::Exec::route)): `BITFIELD` without operations
    /// ([`Engine::Fast`]) where the part's key from [`part_keys`](Seam::part_keys) is a string
    /// or nothing and the filter's commands include `BITFIELD` (it caches no script), else
    /// `EVAL` of `return 0` ([`Engine::Scripts`]): the filter's ACL grants it either way.
    fn route_engine(&self) -> Engine {
        Engine::Scripts
    }

    /// A key name in each part's slot group, one per part, under the filter's ACL key
    /// patterns: what questions to each server are routed by (whether it may evict the
    /// filter), and the prefixes of the keys a near copy tracks.
    fn part_keys(&self, parts: &Shards<Self::Part>) -> Vec<String>;

    /// Items per add batch that load fastest.
    fn bulk_add_batch_size(&self, parts: &Shards<Self::Part>) -> usize;

    /// Items per check batch that check fastest.
    fn bulk_check_batch_size(&self, parts: &Shards<Self::Part>) -> usize;
}

/// What a kind supplies to the near cache (src/near/ holds the generic copy and its policy): its
/// copy's type and size, how it is read and asked. A kind without a near cache says so from
/// `copy_bytes`.
#[allow(unreachable_pub, private_interfaces, private_bounds)]
pub trait Cached: Seam {
    /// The near cache's copy of the filter.
    type Copy: near::Copy + Debug;

    /// The bytes the copy takes (checked against the budget when the filter is built).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) when the kind offers no near cache.
    fn copy_bytes(&self, parts: &Shards<Self::Part>) -> Result<u64>;

    /// Reads a new copy of at most `budget` bytes, after the parameters check (`ctx`: the
    /// filter, at its first part).
    fn read_copy<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        budget: u64,
    ) -> impl Future<Output = Result<Self::Copy>> + Send + 'a;

    /// Whether `item` is in `copy` (with no I/O and no allocation: the fast path).
    fn in_copy(&self, parts: &Shards<Self::Part>, copy: &Self::Copy, item: &[u8]) -> bool;
}

/// What a kind supplies to snapshots (src/snapshot/ holds the file format and the generic
/// transfer): which keys are its sections and where a file's sections go back. A kind whose
/// files cannot be merged says so from `merge_allowed`.
#[allow(unreachable_pub, private_interfaces, private_bounds)]
pub trait Sections: Seam {
    /// `Ok` when a file may be merged into the filter ([`ImportMode::Merge`]); else the
    /// refusal.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) saying why not.
    fn merge_allowed(&self) -> Result<()>;

    /// Whether the kind's keys are the module's Bloom filters, moved by their dump chunks
    /// (`BF.SCANDUMP`, `BF.LOADCHUNK`: src/snapshot/dump.rs) rather than as strings; such a
    /// kind checks its parameters in [`sections`](Sections::sections) and
    /// [`groups`](Sections::groups) (the guard's check reads strings).
    const DUMPED: bool = false;

    /// The part's keys as sections of a snapshot, in order (the parameters checked).
    fn sections<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
    ) -> impl Future<Output = Result<Vec<Stored>>> + Send + 'a;

    /// The mismatch a key longer than its section may be means.
    fn too_long(core_key: &str, guard: &Guard, stored: &Stored, len: u64) -> crate::Error;

    /// Where a section of a file goes back: its target key and staging key.
    ///
    /// # Errors
    /// [`Error::Snapshot`](crate::Error::Snapshot) for a section the filter has no place for.
    fn place(
        &self,
        parts: &Shards<Self::Part>,
        nonce: &str,
        section: &SectionHeader,
    ) -> Result<Staged>;

    /// The staged sections by slot group, with the keys each replace deletes (`ctx`: the
    /// filter, at its first part).
    fn groups<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        staged: &'a [Staged],
        mode: ImportMode,
    ) -> impl Future<Output = Result<Vec<Group>>> + Send + 'a;
}

/// A kind's sizing in bits for the layout it uses: `rate` maps the rate given to the rate a
/// key is sized for (a window's generation is sized at about half).
pub(crate) fn sized<K: Seam>(
    setup: &Setup<'_, K>,
    layout: crate::layout::Layout,
    rate: impl Fn(f64) -> f64,
) -> Result<(u64, u32)> {
    crate::sizing::for_builder(
        setup.bits,
        setup.items,
        setup.fpr,
        setup.hashes,
        setup.shards,
        layout,
        rate,
    )
}

/// The shape of each of `shards` parts of a filter of `bits` bits (checked: at most one key's
/// 2^32 bits), and the whole filter's (every part's bits together).
pub(crate) fn split(
    layout: crate::layout::Layout,
    bits: u64,
    hashes: u32,
    shards: u32,
) -> Result<(Geometry, Geometry)> {
    let shards = shards.max(1);
    let per_part = Geometry::new(layout, bits.div_ceil(u64::from(shards)), hashes)?;
    Ok((per_part, per_part.total(per_part.bits * u64::from(shards))))
}

/// One slot group of one call, or (at its first part) the whole filter: what a kind's steps
/// get from the core. Copied freely: references and a number.
pub(crate) struct Ctx<'a, C, K: Seam> {
    pub(crate) exec: &'a Exec<C>,
    /// The filter's name.
    pub(crate) key: &'a str,
    /// The filter's parameters guard, whatever slot it lives in.
    pub(crate) params: &'a Guard,
    pub(crate) parts: &'a Shards<K::Part>,
    /// The kind's own state.
    pub(crate) kind: &'a K,
    pub(crate) clock: &'a Clock,
    /// The part this step is about.
    pub(crate) index: usize,
    /// Set by a read that saw a bit (or counter) set in its part: the part exists, so its
    /// "absent" answers need no asking whether it was lost ([`lost`](super::lost)).
    pub(crate) seen: Option<&'a AtomicBool>,
}

impl<C, K: Seam> Clone for Ctx<'_, C, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C, K: Seam> Copy for Ctx<'_, C, K> {}

impl<'a, C, K: Seam> Ctx<'a, C, K> {
    /// A new write step with exact answers across retries, when the filter records them
    /// ([`Exec::step`]) and this call is not a bulk load of a kind whose adds are idempotent.
    pub(crate) fn step(&self) -> Option<crate::io::once::Step> {
        if self.clock.is_bare() && K::IDEMPOTENT_ADDS {
            return None;
        }
        self.exec.step()
    }

    pub(crate) fn exec(&self) -> &'a Exec<C> {
        self.exec
    }

    /// The kind's own state.
    pub(crate) fn kind(&self) -> &'a K {
        self.kind
    }

    /// This slot group's keys and state.
    pub(crate) fn part(&self) -> &'a K::Part {
        &self.parts.parts()[self.index]
    }

    /// The filter's name.
    pub(crate) fn key(&self) -> &'a str {
        self.key
    }

    /// The filter's parameters guard, whatever slot it lives in.
    pub(crate) fn params(&self) -> &'a Guard {
        self.params
    }

    /// Whether the parameters live in the part's slot group (a filter of one key).
    pub(crate) fn inline(&self) -> bool {
        self.parts.count() == 1
    }

    /// The parameters guard when it lives in this part's slot group (a filter of one key), so
    /// that each step checks the parameters in the same transaction or script; `None` for a
    /// shard, whose filter checks them beside.
    pub(crate) fn guard(&self) -> Option<&'a Guard> {
        self.inline().then_some(self.params)
    }

    /// The filter's guard, for a write to one of its shards that must exist: a sharded
    /// filter of a kind that makes its parts before storing its parameters, whose parameters
    /// this client has seen stored (SPEC.md §3: a write never makes a lost part again; a part
    /// gone because another client cleared the filter is made again by the caller,
    /// `Core::write`).
    pub(crate) fn shard_of(&self) -> Option<&'a Guard> {
        let keeps = self.kind.keeps_parts() && self.params.step_needed();
        (!self.inline() && keeps && self.params.is_checked()).then_some(self.params)
    }

    /// The same call on part `index`.
    pub(crate) fn at(self, index: usize) -> Self {
        Ctx { index, ..self }
    }

    /// A read saw a bit or counter set (`set`): proof that the part exists.
    pub(crate) fn saw(&self, set: bool) {
        super::lost::saw(self.seen, set);
    }
}

impl<'a, C: Conn, K: Seam> Ctx<'a, C, K> {
    /// `attempt` under the filter's retry policy and the call's clock.
    pub(crate) async fn retried<T, F, Fut>(&self, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.exec.retried(self.clock, attempt).await
    }

    /// `attempt` retried as [`retried`](Ctx::retried) does, or run once when the caller
    /// retries around it (`outer`: a write retried whole with its `WAIT`).
    pub(crate) async fn retried_unless<T, F, Fut>(&self, outer: bool, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match outer {
            true => attempt().await,
            false => self.retried(attempt).await,
        }
    }

    /// A write step: `attempt`, then `WAIT` for the replicas the filter asks for (on the
    /// connection that carried the write, routed by a command on `key` that `engine` allows),
    /// retried as one: after a reconnect a `WAIT` alone would confirm nothing. Retried after
    /// its write went through (too few replicas, or the connection changed before `WAIT`), the
    /// step writes again and answers as its first write did: a kind whose attempts record under
    /// new steps would otherwise answer "seen" for what the first one added.
    pub(crate) async fn written<T, F, Fut>(
        &self,
        key: &str,
        engine: Engine,
        mut attempt: F,
    ) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let exec = self.exec;
        let first: std::sync::Mutex<Option<T>> = std::sync::Mutex::new(None);
        let first = &first;
        exec.retried(self.clock, || {
            let since = exec.carrier(key);
            let done = attempt();
            async move {
                let done = done.await?;
                let kept = || {
                    first
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                };
                let done = kept().take().unwrap_or(done);
                match exec.confirm(key, engine, since).await {
                    Ok(()) => Ok(done),
                    Err(err) => {
                        *kept() = Some(done);
                        Err(err)
                    }
                }
            }
        })
        .await
    }

    /// A sharded filter's parameters check (its guard in a slot of its own), retried; a
    /// filter of one key checks them in its parts' steps.
    pub(crate) async fn ensure_beside(&self, write: bool) -> Result<()> {
        if self.inline() {
            return Ok(());
        }
        self.retried(|| self.params.ensure(self.exec, write)).await
    }

    /// `f` on every part at once, each retried; the results in part order.
    pub(crate) async fn each_part<T, F, Fut>(&self, f: F) -> Result<Vec<T>>
    where
        F: Fn(Ctx<'a, C, K>) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let (f, this) = (&f, *self);
        let all = (0..self.parts.parts().len())
            .map(|index| async move { this.retried(|| f(this.at(index))).await });
        futures_util::future::try_join_all(all).await
    }
}
