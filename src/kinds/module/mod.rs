//! The module filter (SPEC.md §7): the server's own Bloom filter (`BF.*`: Redis 8, RedisBloom,
//! valkey-bloom) behind the same API as every kind. A filter of one key is the key as given,
//! made with `BF.RESERVE KEY P N [EXPANSION F]` by the first add (or by any other client), read
//! and written with `BF.MADD` and `BF.MEXISTS` in commands of at most [`PER_COMMAND`] items
//! (adds that need no record across retries, into a key known to exist: bare `BF.INSERT KEY
//! NOCREATE`).
//! A filter redbloom makes stores its parameters beside it, as the other kinds do; one that
//! another client made is compared with what `BF.INFO` reports before this client writes into
//! it ([`steps`]). A sharded filter is N module keys in N slot groups, each item routed by
//! redbloom's seeded hash, each key holding its share of the capacity.
//!
//! Snapshots go through `BF.SCANDUMP`/`BF.LOADCHUNK` ([`snapshot`]). Not offered (each
//! refused with a typed error naming why): a near cache (the server's hashing is its own), a
//! merge of a snapshot, and the counting filter's operations.

mod info;
mod params;
mod snapshot;
mod steps;
mod window;

pub use self::info::ModuleInfo;
pub use self::params::ModuleParams;

use crate::core::kind::{
    self, Answers, Cached, Fields, Items, Made, Op, Seam, Sections, Setup, Sizes,
};
use crate::core::sharded::Shards;
use crate::core::{Bloom, Conn, Ctx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::guard::Guard;
use crate::io::removal::Removal;
use crate::layout::Layout;
use crate::near;
use crate::snapshot::{Group, ImportMode, SectionHeader, Staged, Stored};
use crate::{keys, Builder};
use std::sync::atomic::{AtomicU8, Ordering};

/// The names `TYPE` gives a module filter's key: RedisBloom's (Redis 8's too), then
/// valkey-bloom's. What `TYPE` says of a key tells a module filter from a plain string before
/// opening it, as `redbloom` (the CLI) does for a key given alone.
///
/// ```
/// assert!(redbloom::MODULE_KEY_TYPES.contains(&"MBbloom--"));
/// assert!(!redbloom::MODULE_KEY_TYPES.contains(&"string"));
/// ```
pub const MODULE_KEY_TYPES: [&str; 2] = ["MBbloom--", "bloomfltr"];

/// Items per `BF.MADD` or `BF.MEXISTS` command: a batch goes as commands of at most this many
/// items, a few in flight, so that one command never holds the server long.
pub(crate) const PER_COMMAND: usize = 1_000;

/// The server's own Bloom filter (SPEC.md §7, `--module` in the CLI): a filter that every
/// client of the server shares through `BF.ADD`/`BF.MADD`/`BF.EXISTS`/`BF.MEXISTS`, with what
/// redbloom adds around it: the same verbs as every kind, retries under one deadline, `WAIT`,
/// group commit of single adds, exact answers across retries (a retried add still says "new"
/// for the items its lost attempt added), sharding over several module keys, tracing and
/// metrics.
///
/// The first add makes the filter with `BF.RESERVE KEY P N` (with `EXPANSION F` given
/// [`growth`](Builder::growth), else the module's default expansion) and stores redbloom's
/// parameters beside it (`{KEY}:redbloom:params`). A filter another client made (with
/// `BF.RESERVE`, or `BF.ADD`'s defaults) is read as it is, and written once `BF.INFO` agrees
/// with this client's parameters: its expansion when [`growth`](Builder::growth) is given, and
/// the capacity of a non-scaling one (the module does not report its error rate); otherwise
/// [`Error::ParamsMismatch`] and nothing written. A non-scaling filter that holds its capacity
/// refuses new items: [`Error::FilterFull`].
///
/// A server without the module's commands gives [`Error::MissingCommands`] naming them. A near
/// cache is refused when the filter is built (the server hashes items its own way).
/// [`export`](Bloom::export) and [`import`](Bloom::import) go through the module's
/// `BF.SCANDUMP`/`BF.LOADCHUNK` (a server without them: [`Error::MissingCommands`]; a
/// window's: its live generations, each imported one expiring with its epoch); a
/// module file imports only into a module filter, and never as a merge
/// ([`Error::InvalidConfig`]).
///
/// ```no_run
/// # async fn demo(conn: redbloom::redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let seen = redbloom::ModuleBloom::builder("crawler:seen")
///     .expected_items(1_000_000)
///     .false_positive_rate(0.001)
///     .build(conn)?;
/// if seen.add("https://example.com/").await? {
///     // new to the filter: `redis-cli BF.EXISTS crawler:seen https://example.com/` says 1 now
/// }
/// # Ok(()) }
/// ```
pub type ModuleBloom<C> = Bloom<C, Module>;

/// The module kind (see [`ModuleBloom`]): the parameters its keys are made with.
#[derive(Debug)]
pub struct Module {
    /// The capacity asked for, all shards together.
    capacity: u64,
    /// Each key's share of it (`BF.RESERVE`'s capacity).
    per_part: u64,
    fpr: f64,
    growth: Option<u32>,
    fingerprint: String,
    /// Its window, for a windowed module filter ([`window`]).
    window: Option<window::Spec>,
    /// Whether the server was found to have every `BF.*` command the filter uses (asked once,
    /// by the calls that may send none: `info` and `clear` of a filter with no key yet).
    has_commands: std::sync::atomic::AtomicBool,
    /// Whether the filter is sharded: its parts are made together before its parameters are
    /// stored ([`Seam::keeps_parts`]).
    sharded: bool,
    /// Whether adds into a key known to exist may go as bare `BF.INSERT KEY NOCREATE ITEMS …`
    /// when they need no record: cleared for good when the server (or the ACL) refuses it.
    inserts: std::sync::atomic::AtomicBool,
}

/// A module builder's own options.
#[derive(Debug, Clone, Default)]
pub struct ModuleOptions {
    growth: Option<u32>,
    window: Option<std::time::Duration>,
    generations: Option<u32>,
}

/// One module key and what this client has learned of it.
#[derive(Debug)]
pub struct Part {
    key: String,
    /// [`UNKNOWN`], [`OURS`] (its parameters are stored, and they are this client's) or
    /// [`FOREIGN`] (another client made it, and `BF.INFO` agrees with this client's).
    state: AtomicU8,
    /// Another client made it non-scaling (`BF.INFO` reports no expansion): adds go item by
    /// item (`lua/module_add.lua`).
    nonscaling: std::sync::atomic::AtomicBool,
}

const UNKNOWN: u8 = 0;
const OURS: u8 = 1;
const FOREIGN: u8 = 2;

impl Part {
    fn new(key: String) -> Self {
        Part {
            key,
            state: AtomicU8::new(UNKNOWN),
            nonscaling: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    fn learn(&self, state: u8) {
        self.state.store(state, Ordering::Release);
    }

    /// What the add script is told of the part (`lua/module_add.lua`'s ARGV[2]): "0" not
    /// compared, "1" another client's, compared, "N" that and non-scaling.
    fn compared(&self) -> &'static str {
        match self.state() {
            FOREIGN if self.nonscaling.load(Ordering::Acquire) => "N",
            FOREIGN => "1",
            _ => "0",
        }
    }
}

kind::kind!(Module = Module);

impl Bloom<(), Module> {
    /// A [`Builder`] for a module filter at `key`, sized by
    /// [`expected_items`](Builder::expected_items) (`BF.RESERVE`'s capacity, all shards
    /// together) and [`false_positive_rate`](Builder::false_positive_rate) (its error rate).
    /// The connection comes last, in [`Builder::build`].
    ///
    /// ```
    /// let sized = || {
    ///     redbloom::ModuleBloom::builder("k")
    ///         .expected_items(10_000)
    ///         .false_positive_rate(0.01)
    /// };
    /// assert!(sized().validate().is_ok());
    /// assert!(sized().growth(4).validate().is_ok());
    /// assert!(sized().growth(0).validate().is_err()); // checked without a connection
    /// ```
    ///
    /// A module filter is not sized in bits (the module sizes its own):
    ///
    /// ```compile_fail
    /// let _ = redbloom::ModuleBloom::builder("k").bits(1 << 20);
    /// ```
    ///
    /// [`build`](Builder::build) and [`validate`](Builder::validate) refuse, besides what every
    /// kind's builder refuses, a size not given by items and a rate in (0, 1), a growth of 0,
    /// a capacity whose first sub-filter would take more than 2^32 bits (512 MiB) a shard (the
    /// module allocates it whole, and a server asked for more memory than it has aborts), and
    /// a near cache.
    ///
    /// ```
    /// let huge = redbloom::ModuleBloom::builder("k").expected_items(10_000_000_000);
    /// assert!(huge.false_positive_rate(0.01).validate().is_err());
    /// ```
    pub fn builder(key: impl Into<String>) -> Builder<Module> {
        Builder::of_kind(key, ModuleOptions::default())
    }
}

impl Builder<Module> {
    /// The module's expansion (`BF.RESERVE … EXPANSION F`): when the filter holds its
    /// capacity, the module adds a sub-filter `growth` times larger (a whole number of at
    /// least 1). Defaults to the module's own default (2 in RedisBloom), as `BF.RESERVE`
    /// without options; given, a filter another client made must have this expansion.
    pub fn growth(mut self, growth: u32) -> Self {
        self.kind.growth = Some(growth);
        self
    }
}

impl<C> Bloom<C, Module> {
    /// The capacity the filter was made for, all shards together.
    pub fn capacity(&self) -> u64 {
        self.0.kind.capacity
    }

    /// The error rate the filter was made for.
    pub fn false_positive_rate(&self) -> f64 {
        self.0.kind.fpr
    }

    /// The expansion asked for (`None`: the module's default).
    pub fn growth(&self) -> Option<u32> {
        self.0.kind.growth
    }
}

/// The refusal of a near cache.
const NO_NEAR: &str = "a module filter has no near cache: the server hashes items its own way, \
                       so a copy in the process could not answer for it";

/// The refusal of a counting filter's operations.
const NO_REMOVE: &str = "a module filter cannot remove items: the module's Bloom filter does not \
                         count (its cuckoo filter is another structure)";

#[allow(private_interfaces, private_bounds)]
impl Seam for Module {
    type Options = ModuleOptions;
    type Part = Part;
    type PartInfo = info::PartInfo;
    type Info = ModuleInfo;

    fn make(setup: Setup<'_, Self>) -> Result<Made<Self>> {
        let (Some(capacity), Some(fpr), None, None) =
            (setup.items, setup.fpr, setup.bits, setup.hashes)
        else {
            return Err(Error::InvalidConfig(
                "a module filter is sized by its capacity (expected items) and its error rate, \
                 not in bits or hashes: the module sizes its own"
                    .into(),
            ));
        };
        crate::sizing::check_items_and_rate(capacity, fpr)?;
        let growth = setup.kind.growth;
        if growth == Some(0) {
            return Err(Error::InvalidConfig(
                "the module's expansion (growth) is a whole number of at least 1".into(),
            ));
        }
        let (key, shards) = (setup.key, setup.shards.max(1));
        let per_part = capacity.div_ceil(u64::from(shards));
        // The module allocates the first sub-filter whole at `BF.RESERVE`, and a server asked
        // for more memory than it has aborts: each shard's holds at most one key's 2^32 bits,
        // as every kind's keys do.
        let bits = crate::sizing::optimal_bits(per_part, fpr);
        if !bits.is_ok_and(|bits| bits <= crate::sizing::MAX_BITS) {
            let room = (crate::sizing::MAX_BITS, "bits");
            return Err(crate::sizing::too_many_items(
                capacity, fpr, None, shards, room,
            ));
        }
        let window = window::Spec::of(setup.kind)?;
        let fingerprint = format!(
            "kind=module capacity={capacity} fpr={fpr} growth={}{}{}",
            growth.map_or_else(|| "default".to_owned(), |g| g.to_string()),
            window
                .as_ref()
                .map(window::Spec::fingerprint)
                .unwrap_or_default(),
            match shards {
                1 => String::new(),
                n => format!(" shards={n}"),
            }
        );
        let parts = match shards {
            1 => vec![Part::new(key.to_owned())],
            _ => (0..shards)
                .map(|i| Part::new(keys::shard_key(key, i, shards)))
                .collect(),
        };
        // The guard stores and checks the parameters (a sharded filter's, in their own slot);
        // a filter of one key checks them in its own steps, against a module key.
        let guard = Guard::of(key, shards, fingerprint.clone(), (Layout::Native, 0));
        Ok(Made {
            kind: Module {
                capacity,
                per_part,
                fpr,
                growth,
                window: window.map(|window| window.named(&fingerprint)),
                fingerprint,
                has_commands: std::sync::atomic::AtomicBool::new(false),
                inserts: std::sync::atomic::AtomicBool::new(true),
                sharded: shards > 1,
            },
            parts,
            guard,
        })
    }

    fn reopen(stored: &Fields<'_>) -> Option<Sizes<Self>> {
        let growth = match stored.field("growth")? {
            "default" => None,
            growth => Some(growth.parse().ok()?),
        };
        let window = stored.number("window_ms");
        Some(Sizes {
            bits: None,
            items: Some(stored.number("capacity")?),
            fpr: Some(stored.number("fpr")?),
            hashes: None,
            kind: ModuleOptions {
                growth,
                ..window::Spec::reopen(window, stored.number("generations"))
            },
        })
    }

    async fn batch<'a, C: Conn>(ctx: Ctx<'a, C, Self>, op: Op, items: Items<'a>) -> Answers {
        match op {
            Op::Add | Op::Exists if ctx.kind().window.is_some() => {
                window::batch(ctx, op, items).await
            }
            Op::Add => steps::add(ctx, items).await,
            Op::Exists => steps::exists(ctx, items).await,
            Op::AddIfAbsent | Op::Remove => Err(Error::InvalidConfig(NO_REMOVE.into())),
        }
    }

    async fn part_info<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<info::PartInfo> {
        match ctx.kind().window {
            Some(_) => window::part_info(ctx).await,
            None => info::part(ctx).await,
        }
    }

    async fn info<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        parts: Vec<info::PartInfo>,
    ) -> Result<ModuleInfo> {
        Ok(info::total(ctx, parts))
    }

    async fn drop_part<'a, C: Conn>(ctx: Ctx<'a, C, Self>, how: Removal) -> Result<bool> {
        match ctx.kind().window {
            Some(_) => window::drop_part(ctx, how).await,
            None => steps::drop_part(ctx, how).await,
        }
    }

    fn forget(&self, parts: &Shards<Part>) {
        for part in parts.parts() {
            part.learn(UNKNOWN);
        }
    }

    fn expiring(&self) -> bool {
        self.window.is_some()
    }

    /// A sharded filter's module keys (not a window's generations, which go by design): all
    /// made by its first write, before its parameters are stored, so that a check finding one
    /// gone fails with [`Error::Lost`]. A filter of one key keeps the rule in its own steps
    /// (its add script makes the key and stores the parameters together).
    fn keeps_parts(&self) -> bool {
        self.sharded && self.window.is_none()
    }

    /// `BF.RESERVE` with this filter's parameters, when the key does not exist
    /// (lua/module_make.lua).
    fn make_part(&self, key: &str) -> redis::Cmd {
        let expansion = self.growth.map(|g| g.to_string()).unwrap_or_default();
        redis::cmd("EVAL")
            .arg(crate::scripts::lua!["module_make"])
            .arg(1)
            .arg(key)
            .arg(self.fpr)
            .arg(self.per_part)
            .arg(expansion)
            .to_owned()
    }

    fn route_engine(&self) -> Engine {
        Engine::Scripts
    }

    fn part_keys(&self, parts: &Shards<Part>) -> Vec<String> {
        parts.parts().iter().map(|p| p.key.clone()).collect()
    }

    fn bulk_add_batch_size(&self, parts: &Shards<Part>) -> usize {
        PER_COMMAND * crate::io::exec::COMMANDS_IN_FLIGHT * parts.count() as usize
    }

    fn bulk_check_batch_size(&self, parts: &Shards<Part>) -> usize {
        self.bulk_add_batch_size(parts)
    }
}

#[allow(private_interfaces, private_bounds)]
impl Cached for Module {
    type Copy = near::Strings;

    fn copy_bytes(&self, _: &Shards<Part>) -> Result<u64> {
        Err(Error::InvalidConfig(NO_NEAR.into()))
    }

    async fn read_copy<'a, C: Conn>(_: Ctx<'a, C, Self>, _: u64) -> Result<near::Strings> {
        Err(Error::InvalidConfig(NO_NEAR.into()))
    }

    fn in_copy(&self, _: &Shards<Part>, _: &near::Strings, _: &[u8]) -> bool {
        false
    }
}

#[allow(private_interfaces, private_bounds)]
impl Sections for Module {
    const DUMPED: bool = true;

    fn merge_allowed(&self) -> Result<()> {
        Err(Error::InvalidConfig(snapshot::NO_MERGE.into()))
    }

    async fn sections<'a, C: Conn>(ctx: Ctx<'a, C, Self>) -> Result<Vec<Stored>> {
        snapshot::sections(ctx).await
    }

    fn too_long(key: &str, guard: &Guard, stored: &Stored, len: u64) -> Error {
        crate::snapshot::too_long(key, guard.fingerprint(), "module key", stored, len)
    }

    fn place(&self, parts: &Shards<Part>, nonce: &str, section: &SectionHeader) -> Result<Staged> {
        snapshot::place(self, parts, nonce, section)
    }

    async fn groups<'a, C: Conn>(
        ctx: Ctx<'a, C, Self>,
        staged: &'a [Staged],
        mode: ImportMode,
    ) -> Result<Vec<Group>> {
        snapshot::groups(ctx, staged, mode).await
    }
}
