//! Configuring a filter of one kind, and checking the configuration before any I/O.

use super::kind::{Kind, Made, Setup, SizedInBits};
use super::{Bloom, Core};
use crate::error::{Error, Result};
use crate::keys;
use crate::near::NearCache;
use crate::options::Options;
use crate::retry::Retry;
use std::sync::Arc;
use std::time::Duration;

/// Builds a filter of the kind `K`, chosen first: [`RedisBloom::builder`](crate::RedisBloom)
/// (a plain filter; also [`Builder::new`]), [`WindowBloom::builder`](crate::WindowBloom),
/// [`CountingBloom::builder`](crate::CountingBloom) or
/// [`GrowingBloom::builder`](crate::GrowingBloom). The options below are every kind's; each
/// kind's own (a plain filter's [`layout`](Builder::layout), a window's
/// [`generations`](Builder::generations), a growing filter's [`growth`](Builder::growth), …)
/// exist only on its builder, so that an option of another kind does not compile.
///
/// Nothing is validated until [`build`](Builder::build) (or [`validate`](Builder::validate),
/// which needs no connection), which returns a typed error and never panics, so the values may
/// come straight from configuration.
///
/// ```
/// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
/// let seen = redbloom::RedisBloom::builder("crawler:seen")
///     .expected_items(10_000_000)
///     .false_positive_rate(1e-4)
///     .build(conn)?;
/// println!("{} bits", seen.bits()); // 191859095: about 23 MiB
/// # Ok(()) }
/// ```
///
/// Options of another kind, and connections that are not connections, do not compile:
///
/// ```compile_fail
/// // A plain filter does not grow: `growth` is a growing filter's option.
/// let _ = redbloom::RedisBloom::builder("k").bits(64).growth(2);
/// ```
/// ```compile_fail
/// // `generations` is a window filter's option.
/// let _ = redbloom::RedisBloom::builder("k").bits(64).generations(8);
/// ```
/// ```compile_fail
/// // A window filter does not grow.
/// use std::time::Duration;
/// let _ = redbloom::WindowBloom::builder("k", Duration::from_secs(60)).growth(2);
/// ```
/// ```compile_fail
/// // Window, counting and growing filters use the native layout only.
/// let _ = redbloom::CountingBloom::builder("k").layout(redbloom::Layout::GoZero);
/// ```
/// ```compile_fail
/// // A number is not a connection.
/// let _ = redbloom::RedisBloom::builder("k").bits(64).build(42u32);
/// ```
#[must_use]
pub struct Builder<K: Kind> {
    pub(crate) key: String,
    pub(crate) bits: Option<u64>,
    pub(crate) items: Option<u64>,
    pub(crate) fpr: Option<f64>,
    pub(crate) hashes: Option<u32>,
    pub(crate) options: Options,
    pub(crate) shards: u32,
    pub(crate) near: Option<NearCache>,
    /// The kind's own options.
    pub(crate) kind: K::Options,
}

impl<K: Kind> Clone for Builder<K> {
    fn clone(&self) -> Self {
        Builder {
            key: self.key.clone(),
            bits: self.bits,
            items: self.items,
            fpr: self.fpr,
            hashes: self.hashes,
            options: self.options,
            shards: self.shards,
            near: self.near.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl<K: Kind> std::fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("kind", &K::NAME)
            .field("key", &self.key)
            .field("bits", &self.bits)
            .field("items", &self.items)
            .field("fpr", &self.fpr)
            .field("hashes", &self.hashes)
            .field("options", &self.options)
            .field("shards", &self.shards)
            .field("near", &self.near)
            .field("options of the kind", &self.kind)
            .finish()
    }
}

impl<K: Kind> Builder<K> {
    /// A builder of kind `K` at `key` with the kind's options `kind` (each kind's `builder`).
    pub(crate) fn of_kind(key: impl Into<String>, kind: K::Options) -> Self {
        Builder {
            key: key.into(),
            bits: None,
            items: None,
            fpr: None,
            hashes: None,
            options: Options::default(),
            shards: 1,
            near: None,
            kind,
        }
    }

    /// Sizes the filter for this many items (a window filter: the most added in any one
    /// window; a growing filter: its first level's); needs
    /// [`false_positive_rate`](Builder::false_positive_rate) too. No default.
    pub fn expected_items(mut self, items: u64) -> Self {
        self.items = Some(items);
        self
    }

    /// The false-positive rate to reach at [`expected_items`](Builder::expected_items), in
    /// (0, 1) (a growing filter: the bound over all its levels). No default.
    pub fn false_positive_rate(mut self, fpr: f64) -> Self {
        self.fpr = Some(fpr);
        self
    }

    /// Splits the filter over `shards` slot groups (1..=1024) whose hash slots spread evenly
    /// over a Redis Cluster, for filters beyond one key's 2^32 bits or one node's memory: each
    /// item goes to one shard by a hash independent of its bits, so single-item calls stay
    /// atomic; batches go to each shard at once. The size is the total (each shard holds its
    /// share). The shard count is stored with the filter, and a client with another count gets
    /// [`Error::ParamsMismatch`]. Defaults to 1: one key, named as given (go-zero's format
    /// with the go-zero layout).
    pub fn shards(mut self, shards: u32) -> Self {
        self.shards = shards;
        self
    }

    /// The deadline of every public call: the most one call may take, every step, shard and
    /// retry included; past it the call fails with [`Error::Deadline`]. Defaults to no limit
    /// beyond the connection's own response timeout per command (redis-rs: 500 ms by default),
    /// whose expiry is [`Error::Timeout`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = Some(timeout);
        self
    }

    /// Retries after passing faults (timeouts, lost connections, a server loading its data).
    /// Defaults to [`Retry::none`]. Use a reconnecting connection such as
    /// [`ConnectionManager`](redis::aio::ConnectionManager) so that a retry can succeed.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.options.retry = retry;
        self
    }

    /// After every write, waits (`WAIT`) until `replicas` replicas have it, for at most
    /// `timeout`, and fails with [`Error::NotReplicated`] when fewer confirm: for filters whose
    /// adds must survive a failover. With a [`retry`](Builder::retry) policy, a write that too
    /// few replicas confirmed is sent again (answering as its first attempt did) and waits
    /// again, until its budget is spent: a replica resyncing after a failover confirms soon.
    /// `WAIT` holds the connection, so calls sharing it queue behind. Defaults to not waiting.
    ///
    /// Give the connection a response timeout longer than `timeout` (redis-rs's default is
    /// 500 ms): otherwise the client stops waiting for `WAIT`'s answer first, and the write
    /// fails with [`Error::Timeout`], which a [`retry`](Builder::retry) policy then repeats,
    /// instead of [`Error::NotReplicated`] naming how many replicas confirmed.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.options.replicas = Some((replicas, timeout));
        self
    }

    /// Bytes per step of a large batch on a plain filter too big to move whole (adds: a key
    /// over 4 MiB; checks: over 64 MiB): such a batch is merged into the key one range of
    /// `bytes` bytes at a time, each range one atomic transaction (and a check reads only the
    /// ranges it needs, `bytes` per `GETRANGE`). This bounds how long one command holds the
    /// server: a merge step costs Redis about 4 ns per byte (0.5 ms for 128 KiB, 4 ms for
    /// 1 MiB; BENCHMARKS.md, "Bulk loads at any size"), so smaller steps pause it less, at more
    /// round trips. A power of two from 1 KiB to 64 MiB (`1024..=67108864`). Defaults to 128 KiB.
    ///
    /// Given, it also makes [`import`](Bloom::import) with
    /// [`ImportMode::Merge`](crate::ImportMode::Merge) OR the file in by ranges of this size,
    /// each atomic, instead of one atomic `BITOP` of each whole key (about 1.6 ms of server time
    /// per MiB).
    pub fn merge_chunk_bytes(mut self, bytes: u64) -> Self {
        self.options.merge_chunk = Some(bytes);
        self
    }

    /// Writes even when the server may evict the filter's keys. Off by default.
    ///
    /// A filter that loses a key to eviction forgets its items: checks answer "absent" for
    /// items that were added. So before its first write a filter asks the master of each of
    /// its slot groups for `maxmemory` and `maxmemory-policy` (`INFO memory`) and refuses to
    /// write with [`Error::Evictable`](crate::Error::Evictable) when a set `maxmemory` goes with
    /// an `allkeys-*` policy, or a `volatile-*` one while the filter's keys carry a TTL (a
    /// window filter's generations; any filter after [`expire`](Bloom::expire), which a
    /// `volatile-*` policy refuses too). An ACL that refuses `INFO` counts as "may evict".
    /// `maxmemory 0` evicts nothing; a server whose policy or `maxmemory` is changed after the
    /// filter's first write is not asked again. With `true`, such a filter writes, and a WARN
    /// event says so once.
    ///
    /// ```
    /// let config = redbloom::RedisBloom::builder("seen").bits(1 << 20).accept_eviction(true);
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn accept_eviction(mut self, accept: bool) -> Self {
        self.options.accept_eviction = accept;
        self
    }

    /// Exact answers across retries: on by default. A write retried after a lost reply (with
    /// [`retry`](Builder::retry)) reads back what its first attempt did instead of applying
    /// again: "new" stays true for the items the lost attempt added, and a counting filter's
    /// increments and decrements are applied once. Each write step that may be retried goes
    /// as a script that records its reply beside the filter (`…:redbloom:LEN:KEY:once:*`, 10
    /// keys per part, placed by the server's clock): kept until the call has its reply, and at
    /// most 10 ring widths by each key's TTL (a width is at least an eighth of the retry budget
    /// and 2 s: 40 s in all for a 30 s budget), removed by
    /// [`clear`](Bloom::clear); a retry after its record could be gone fails with
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) and applies nothing. Bulk
    /// loads ([`load_many`](Bloom::load_many)) of kinds whose adds only set bits go without
    /// records either way. Every
    /// kind keeps its dense path for large batches, recorded (a plain filter over 4 MiB per
    /// key: range by range, each batch passing over the key alone, where `false` lets
    /// concurrent batches share a pass: about half the load throughput of `false`).
    ///
    /// With `false`, retried writes go as before: cheaper, but after a lost reply an add may
    /// answer "not new" for an item it added, and a counting filter may count an add or a
    /// remove twice. Without a retry budget nothing is recorded either way. Where the ACL
    /// refuses scripts (`EVALSHA`), writes go as with `false` and a WARN event says so once.
    ///
    /// ```
    /// let config = redbloom::RedisBloom::builder("seen").bits(1 << 20).exact_retries(false);
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn exact_retries(mut self, exact: bool) -> Self {
        self.options.inexact_retries = !exact;
        self
    }

    /// Group commit of single-item writes ([`add`](Bloom::add), a counting filter's `remove`
    /// and `add_if_absent`; a window or growing filter's [`exists`](Bloom::exists) too).
    /// Defaults to `true`: while 4 steps of single items are in flight to a slot group (2 for
    /// a window or growing filter, whose every step is a script with a large cost of its own),
    /// the calls arriving for it wait and go together as the next step (one command or script
    /// call over all of them), as one batch would; a lone call goes at once, with no timer.
    /// Each caller gets its own answer, as sequential calls would give it, and its own
    /// deadline: a caller whose deadline passes while it waits is withdrawn
    /// ([`Error::Deadline`], nothing sent), one whose item was sent in a step that has not
    /// answered gets [`Error::OutcomeUnknown`] while the step goes on (the item may or may not
    /// be applied: a counting `remove` sent again may then remove twice). A step that fails
    /// gives every caller in it the error; it runs under its leader's deadline, the earliest of
    /// its callers' (they share one timeout), so a caller that came later may get
    /// [`Error::Deadline`] that much before its own. `false` sends each call as its own step.
    ///
    /// ```
    /// let config = redbloom::RedisBloom::builder("seen")
    ///     .expected_items(1_000)
    ///     .false_positive_rate(0.01)
    ///     .group_commit(false);
    /// # let _ = config;
    /// ```
    pub fn group_commit(mut self, group: bool) -> Self {
        self.options.no_group_commit = !group;
        self
    }

    /// How long [`import`](Bloom::import) waits for its input's next byte before it gives up
    /// (`Error::Snapshot` of a timed-out read; nothing is written, no staging key is left).
    /// Defaults to 60 s. A stalled pipe would otherwise hold the import for ever. Time spent
    /// on Redis between reads does not count.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = redbloom::RedisBloom::builder("seen")
    ///     .bits(1 << 20)
    ///     .import_idle_timeout(Duration::from_secs(5));
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn import_idle_timeout(mut self, idle: Duration) -> Self {
        self.options.input_idle = Some(idle);
        self
    }

    /// Keeps a copy of the filter in the process that answers `exists` and `exists_many` with
    /// no round trip (SPEC.md §6): any change by any client reaches it within
    /// [`NearCache::refresh`]'s interval, which is the only staleness. The copy's size (the
    /// filter's bytes, every shard's; a window filter's live generations; a growing filter's
    /// levels) must fit [`NearCache::budget`]: building the filter fails otherwise. Writes go
    /// to Redis as usual, and this handle's adds reach its copy at once.
    ///
    /// ```
    /// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
    /// use std::time::Duration;
    /// let blocked = redbloom::RedisBloom::builder("blacklist")
    ///     .expected_items(1_000_000)
    ///     .false_positive_rate(1e-4)
    ///     .near_cache(redbloom::NearCache::new(Duration::from_secs(1)))
    ///     .build(conn)?;
    /// let _ = blocked.exists("10.0.0.1").await?; // reads the copy, then answers from it
    /// println!("{:?}", blocked.near_cache_stats());
    /// # Ok(()) }
    /// ```
    pub fn near_cache(mut self, cache: NearCache) -> Self {
        self.near = Some(cache);
        self
    }

    /// Checks the configuration without a connection: `Ok` exactly when
    /// [`build`](Builder::build) would succeed.
    ///
    /// # Errors
    /// As for [`build`](Builder::build).
    pub fn validate(&self) -> Result<()> {
        let made = self.made()?;
        if let Some(near) = &self.near {
            let bytes = made
                .kind
                .copy_bytes(&super::sharded::Shards::new(made.parts))?;
            crate::near::check_budget(&self.key, near, bytes)?;
        }
        Ok(())
    }

    /// The parameters the filter stores beside it, and a snapshot of it holds in its header
    /// ([`SnapshotHeader::params`](crate::SnapshotHeader::params)): what
    /// [`StoredParams::fingerprint`](crate::StoredParams::fingerprint) reads back. Two
    /// builders with the same fingerprint open the same filter. Sends nothing to Redis.
    ///
    /// ```
    /// let sized = redbloom::RedisBloom::builder("k").bits(1024);
    /// assert_eq!(
    ///     sized.fingerprint()?,
    ///     "layout=gozero bits=1024 hashes=14 hash=murmur3_x64_128"
    /// );
    /// # Ok::<(), redbloom::Error>(())
    /// ```
    ///
    /// # Errors
    /// As for [`validate`](Builder::validate).
    pub fn fingerprint(&self) -> Result<String> {
        Ok(self.made()?.guard.fingerprint().to_owned())
    }

    /// Checks the configuration and makes the filter on `conn`. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming what is wrong: the key is empty or one that a filter
    /// keeps for itself (a name holding `:redbloom:`, or a shard's key); the size is missing,
    /// given twice, out of range or needs more than its keys' 2^32 bits; the shards are not in
    /// 1..=1024; the timeout is zero; the merge chunk is not a power of two in range; an
    /// option of the kind is out of its range (each kind's setter says which).
    /// [`Error::NearCacheBudget`] when the near cache's copy would not fit its budget.
    pub fn build<C: redis::aio::ConnectionLike + Clone + Send + Sync>(
        self,
        conn: C,
    ) -> Result<Bloom<C, K>> {
        let made = self.made()?;
        let core = Core::new(conn, self.key, made, self.options, self.near)?;
        Ok(Bloom(Arc::new(core)))
    }

    /// The kind made of this configuration, after the checks every kind shares.
    pub(crate) fn made(&self) -> Result<Made<K>> {
        if self.key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        keys::check_not_reserved(&self.key)?;
        if self.options.timeout == Some(Duration::ZERO) {
            return Err(Error::InvalidConfig(
                "the timeout must be longer than zero".into(),
            ));
        }
        if self.options.input_idle.is_some_and(|idle| idle.is_zero()) {
            return Err(Error::InvalidConfig(
                "import_idle_timeout must be more than zero".into(),
            ));
        }
        if let Some(bytes) = self.options.merge_chunk {
            let (min, max) = (crate::dense::MIN_RANGE_BYTES, crate::dense::MAX_RANGE_BYTES);
            if !(min..=max).contains(&bytes) || !bytes.is_power_of_two() {
                return Err(Error::InvalidConfig(format!(
                    "merge_chunk_bytes must be a power of two from {min} to {max} bytes, not \
                     {bytes}"
                )));
            }
        }
        if !(1..=1024).contains(&self.shards) {
            return Err(Error::InvalidConfig(format!(
                "shards must be between 1 and 1024, not {}",
                self.shards
            )));
        }
        K::make(Setup {
            key: &self.key,
            bits: self.bits,
            items: self.items,
            fpr: self.fpr,
            hashes: self.hashes,
            shards: self.shards,
            kind: &self.kind,
        })
    }
}

impl<K: SizedInBits> Builder<K> {
    /// Sets the filter's size in bits (a counting filter: counters; a window filter: one
    /// generation's), in `1..=2^32` per key. Exclusive with
    /// [`expected_items`](Builder::expected_items). No default.
    pub fn bits(mut self, bits: u64) -> Self {
        self.bits = Some(bits);
        self
    }

    /// Bit locations (counters) per item, in `1..=64`, for a filter of the native layout.
    /// Defaults to the value the rate calls for (a counting filter sized in counters: 7);
    /// go-zero's layout always uses 14.
    pub fn hashes(mut self, hashes: u32) -> Self {
        self.hashes = Some(hashes);
        self
    }
}
