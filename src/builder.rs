//! Configuring a [`RedisBloom`] and checking the configuration before any I/O.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::kinds::counting::CountingBloom;
use crate::kinds::growing::GrowingBloom;
use crate::kinds::plain::RedisBloom;
use crate::kinds::window::WindowBloom;
use crate::layout::Layout;
use crate::near::NearCache;
use crate::options::Options;
use crate::retry::Retry;
use crate::sizing::{
    bits_for_fixed_k, optimal_bits, optimal_hashes, window_generation_fpr, MAX_BITS,
};
use std::time::Duration;

/// Builds a [`RedisBloom`]: either from a size in bits, or from the number of items you expect
/// and the false-positive rate you accept (SPEC.md §2, with go-zero's k = 14).
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
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    key: String,
    bits: Option<u64>,
    items: Option<u64>,
    fpr: Option<f64>,
    /// `None`: the default (go-zero's for a plain filter, native for the other kinds).
    layout: Option<Layout>,
    hashes: Option<u32>,
    engine: Engine,
    options: Options,
    shards: u32,
    window: Option<Duration>,
    generations: Option<u32>,
    growth: Option<u32>,
    tightening: Option<f64>,
    max_levels: Option<u32>,
    near: Option<NearCache>,
}

impl Builder {
    /// A builder for a filter at `key`; the same as [`RedisBloom::builder`].
    ///
    /// ```
    /// let config = redbloom::Builder::new("seen").bits(1 << 20);
    /// assert!(config.validate().is_ok());
    /// assert!(redbloom::Builder::new("seen").bits(0).validate().is_err());
    /// ```
    pub fn new(key: impl Into<String>) -> Self {
        Builder {
            key: key.into(),
            bits: None,
            items: None,
            fpr: None,
            layout: None,
            hashes: None,
            engine: Engine::default(),
            options: Options::default(),
            shards: 1,
            window: None,
            generations: None,
            growth: None,
            tightening: None,
            max_levels: None,
            near: None,
        }
    }

    /// Sets the filter's size in bits, in `1..=2^32`. Exclusive with
    /// [`expected_items`](Builder::expected_items). No default.
    pub fn bits(mut self, bits: u64) -> Self {
        self.bits = Some(bits);
        self
    }

    /// Sizes the filter for this many items; needs
    /// [`false_positive_rate`](Builder::false_positive_rate) too. No default.
    pub fn expected_items(mut self, items: u64) -> Self {
        self.items = Some(items);
        self
    }

    /// The false-positive rate to reach at [`expected_items`](Builder::expected_items), in
    /// (0, 1). No default.
    pub fn false_positive_rate(mut self, fpr: f64) -> Self {
        self.fpr = Some(fpr);
        self
    }

    /// How items map to bits. Defaults to [`Layout::GoZero`] (k = 14). With [`Layout::Native`],
    /// [`expected_items`](Builder::expected_items) and
    /// [`false_positive_rate`](Builder::false_positive_rate) choose both the bits and k
    /// (SPEC.md §2, free k); with [`bits`](Builder::bits), give [`hashes`](Builder::hashes) too.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Bit locations per item for [`Layout::Native`], in `1..=64`. Defaults to the value the
    /// rate calls for; go-zero's layout always uses 14.
    pub fn hashes(mut self, hashes: u32) -> Self {
        self.hashes = Some(hashes);
        self
    }

    /// The commands the filter uses. Defaults to [`Engine::Fast`].
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// Splits the filter over `shards` keys (1..=1024) whose hash slots spread evenly over a
    /// Redis Cluster, for filters beyond one key's 2^32 bits or one node's memory: each item
    /// goes to one shard by a hash independent of its bits, so single-item calls stay atomic;
    /// batches go to each shard at once. The size is the total (each shard holds
    /// `bits / shards`, at most 2^32). The shard count is stored with the filter, and a client
    /// with another count gets [`Error::ParamsMismatch`]. Defaults to 1: one key, named as
    /// given (go-zero's format with the go-zero layout).
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
    /// adds must survive a failover. `WAIT` holds the connection, so calls sharing it queue
    /// behind. Defaults to not waiting.
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
    /// Given, it also makes [`import`](RedisBloom::import) with
    /// [`ImportMode::Merge`](crate::ImportMode::Merge) OR the file in by ranges of this size,
    /// each atomic, instead of one atomic `BITOP` of each whole key (about 1.6 ms of server time
    /// per MiB).
    pub fn merge_chunk_bytes(mut self, bytes: u64) -> Self {
        self.options.merge_chunk = Some(bytes);
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

    /// Makes the filter a window filter ([`WindowBloom`], built by
    /// [`build_window`](Builder::build_window)): items are found for at least `window` after
    /// they were added, and forgotten by `window·G/(G-1)`. Size it with
    /// [`expected_items`](Builder::expected_items) as the most items added in any one window.
    pub fn window(mut self, window: Duration) -> Self {
        self.window = Some(window);
        self
    }

    /// A window filter's number of generations G, in `2..=64`. Defaults to 4: items are
    /// forgotten by 4/3 of the window. More generations forget closer to the window but take
    /// more memory (G generations, each sized for the whole window's items) and more work per
    /// call (a check tests every live generation).
    pub fn generations(mut self, generations: u32) -> Self {
        self.generations = Some(generations);
        self
    }

    /// Makes the filter a growing filter ([`GrowingBloom`], built by
    /// [`build_growing`](Builder::build_growing)): its first level holds
    /// [`expected_items`](Builder::expected_items), and each new level `growth` times as many
    /// (a whole number of at least 1; default 2), so that no capacity needs guessing.
    pub fn growth(mut self, growth: u32) -> Self {
        self.growth = Some(growth);
        self
    }

    /// A growing filter's tightening ratio r, in (0, 1): each level's false-positive rate is
    /// r times the one before, and the first level's is `rate·(1−r)`, so that all of them
    /// together stay below the rate given. Default 0.8: smaller ratios spend more bits per
    /// item on later levels, larger ones on the first (docs/design.md "Growing filters").
    pub fn tightening(mut self, ratio: f64) -> Self {
        self.tightening = Some(ratio);
        self
    }

    /// A growing filter's most levels, 1 to 64 (default 32); fewer when a level would need
    /// more than one key's 2^32 bits. Past them, an add of a new item fails with
    /// [`Error::Full`].
    pub fn max_levels(mut self, levels: u32) -> Self {
        self.max_levels = Some(levels);
        self
    }

    /// Checks the configuration and makes a growing filter on `conn`. Sends nothing to Redis.
    /// Sized with [`expected_items`](Builder::expected_items) (the first level's capacity) and
    /// [`false_positive_rate`](Builder::false_positive_rate) (the whole filter's bound); uses
    /// the native layout's hashing.
    ///
    /// ```
    /// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
    /// let frontier = redbloom::RedisBloom::builder("crawl:frontier")
    ///     .expected_items(10_000)
    ///     .false_positive_rate(0.01)
    ///     .growth(2)
    ///     .build_growing(conn)?;
    /// assert_eq!(frontier.max_levels(), 32);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the key is empty or reserved, the size is given in bits
    /// or not at all, the rate is not in (0, 1), a window or a layout other than native was
    /// given, the growth is 0, the tightening ratio is not in (0, 1), the most levels are not
    /// in 1..=64, or the first level would need more than one key's 2^32 bits.
    pub fn build_growing<C>(self, conn: C) -> Result<GrowingBloom<C>> {
        if self.window.is_some() {
            return Err(Error::InvalidConfig(
                "a filter is either a window or a growing filter, not both".into(),
            ));
        }
        if self.layout == Some(Layout::GoZero) {
            return Err(Error::InvalidConfig(
                "growing filters use the native layout, not go-zero's".into(),
            ));
        }
        let (Some(items), Some(fpr), None) = (self.items, self.fpr, self.bits) else {
            return Err(Error::InvalidConfig(
                "a growing filter is sized by its first level's items and the rate, not in bits"
                    .into(),
            ));
        };
        let mut filter = GrowingBloom::from_parts(
            conn,
            self.key,
            items,
            fpr,
            self.growth.unwrap_or(crate::kinds::growing::DEFAULT_GROWTH),
            self.tightening
                .unwrap_or(crate::kinds::growing::DEFAULT_TIGHTENING),
            self.max_levels
                .unwrap_or(crate::kinds::growing::DEFAULT_MAX_LEVELS),
            self.shards,
            self.options,
        )?;
        if let Some(near) = self.near {
            filter.attach_near(near)?;
        }
        Ok(filter)
    }

    /// Checks the configuration without a connection: `Ok` exactly when
    /// [`build`](Builder::build) (or [`build_window`](Builder::build_window), for a builder
    /// given a [`window`](Builder::window)) would succeed.
    ///
    /// # Errors
    /// As for [`build`](Builder::build).
    pub fn validate(&self) -> Result<()> {
        match self.window {
            Some(_) => self.clone().build_window(()).map(drop),
            None => self.clone().build(()).map(drop),
        }
    }

    /// Checks the configuration and makes a counting filter ([`CountingBloom`]) on `conn`:
    /// items can be removed. Sizes count counters of 4 bits: with
    /// [`expected_items`](Builder::expected_items) and a rate, as many counters as a native
    /// filter has bits; with [`bits`](Builder::bits), that many counters, and
    /// [`hashes`](Builder::hashes) (default 7). Uses the native layout's hashing. Sends
    /// nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as for [`build`](Builder::build), and when a window was given,
    /// the layout asked for is go-zero's, or a key would hold more than 2^30 counters.
    pub fn build_counting<C>(self, conn: C) -> Result<CountingBloom<C>> {
        if self.window.is_some() {
            return Err(Error::InvalidConfig(
                "a filter is either a window or a counting filter, not both".into(),
            ));
        }
        if self.layout == Some(Layout::GoZero) {
            return Err(Error::InvalidConfig(
                "counting filters use the native layout, not go-zero's".into(),
            ));
        }
        let sized = Builder {
            hashes: self.hashes.or(self.bits.map(|_| 7)),
            ..self.clone()
        };
        let (counters, hashes) = sized.sized(Layout::Native, |fpr| fpr)?;
        let mut filter = CountingBloom::from_parts(
            conn,
            self.key,
            Geometry {
                layout: Layout::Native,
                bits: counters,
                hashes,
            },
            self.shards,
            self.options,
        )?;
        if let Some(near) = self.near {
            filter.attach_near(near)?;
        }
        Ok(filter)
    }

    /// Checks the configuration and makes the window filter on `conn`. Sends nothing to
    /// Redis. Uses the native layout; the sizes are one generation's.
    ///
    /// ```
    /// # async fn demo(conn: redis::aio::MultiplexedConnection) -> redbloom::Result<()> {
    /// use std::time::Duration;
    /// let recent = redbloom::RedisBloom::builder("orders:recent")
    ///     .window(Duration::from_secs(15 * 60))
    ///     .expected_items(100_000)
    ///     .false_positive_rate(0.001)
    ///     .build_window(conn)?;
    /// assert_eq!(recent.generations(), 4);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as for [`build`](Builder::build), and when no
    /// [`window`](Builder::window) was given, the layout asked for is go-zero's, the number
    /// of generations is not in `2..=64`, or the window is shorter than 1 ms per generation
    /// after the first or longer than ten years.
    pub fn build_window<C>(self, conn: C) -> Result<WindowBloom<C>> {
        let Some(window) = self.window else {
            return Err(Error::InvalidConfig(
                "a window filter needs its window".into(),
            ));
        };
        if self.layout == Some(Layout::GoZero) {
            return Err(Error::InvalidConfig(
                "window filters use the native layout, not go-zero's".into(),
            ));
        }
        let (bits, hashes) = self.sized(Layout::Native, window_generation_fpr)?;
        let mut filter = WindowBloom::from_parts(
            conn,
            self.key,
            Geometry {
                layout: Layout::Native,
                bits,
                hashes,
            },
            window,
            self.generations.unwrap_or(4),
            self.shards,
            self.options,
        )?;
        if let Some(near) = self.near {
            filter.attach_near(near)?;
        }
        Ok(filter)
    }

    /// Checks the configuration and makes the filter on `conn`. Sends nothing to Redis.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the key is empty, when neither or both of `bits` and
    /// `expected_items` are given, when `bits` is not in `1..=2^32`, or when the items and
    /// rate are invalid or need more than 2^32 bits, or when the key is one that a filter
    /// keeps for itself (a name holding `:redbloom:`, or a shard's key).
    pub fn build<C>(self, conn: C) -> Result<RedisBloom<C>> {
        if self.window.is_some() {
            return Err(Error::InvalidConfig(
                "a builder given a window makes a window filter: call build_window".into(),
            ));
        }
        let layout = self.layout.unwrap_or_default();
        let (bits, hashes) = self.sized(layout, |fpr| fpr)?;
        let mut filter = RedisBloom::from_parts(
            conn,
            self.key,
            // Checked there, per key: a sharded filter's total may pass one key's 2^32 bits.
            Geometry {
                layout,
                bits,
                hashes,
            },
            self.shards,
            self.engine,
            self.options,
        )?;
        if let Some(near) = self.near {
            filter.attach_near(near)?;
        }
        Ok(filter)
    }

    /// The size in bits (all shards together) and the bits per item of a filter (a window's
    /// generation) in `layout`, whose items and rate size it at the rate `rate(fpr)`; and the
    /// checks that do not depend on the kind.
    fn sized(&self, layout: Layout, rate: impl Fn(f64) -> f64) -> Result<(u64, u32)> {
        let fixed = layout.fixed_hashes();
        let (bits, hashes) = match (self.bits, self.items, self.fpr) {
            (Some(bits), None, None) => match self.hashes.or(fixed) {
                Some(k) => (bits, k),
                None => {
                    return Err(Error::InvalidConfig(
                        "the native layout sized in bits needs the number of hashes too".into(),
                    ))
                }
            },
            (None, Some(items), Some(fpr)) => {
                let fpr = match fpr > 0.0 && fpr < 1.0 {
                    true => rate(fpr),
                    false => fpr,
                };
                let bits = match fixed {
                    Some(k) => bits_for_fixed_k(items, fpr, k)?,
                    None => optimal_bits(items, fpr)?,
                };
                if bits.div_ceil(u64::from(self.shards.max(1))) > MAX_BITS {
                    return Err(Error::InvalidConfig(format!(
                        "{items} items at a false-positive rate of {fpr} need {bits} bits, \
                         more than {} key(s) of 2^32 bits hold; use more shards",
                        self.shards.max(1)
                    )));
                }
                let k = self.hashes.or(fixed);
                (bits, k.unwrap_or_else(|| optimal_hashes(bits, items)))
            }
            (None, None, None) => {
                return Err(Error::InvalidConfig(
                    "give the size in bits, or the expected items and a false-positive rate".into(),
                ))
            }
            (None, Some(_), None) | (None, None, Some(_)) => {
                return Err(Error::InvalidConfig(
                    "expected items and a false-positive rate go together".into(),
                ))
            }
            (Some(_), _, _) => {
                return Err(Error::InvalidConfig(
                    "give the size in bits or the expected items with a rate, not both".into(),
                ))
            }
        };
        if self.options.timeout == Some(Duration::ZERO) {
            return Err(Error::InvalidConfig(
                "the timeout must be longer than zero".into(),
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
        let bits_per_shard = bits.div_ceil(u64::from(self.shards));
        if self.shards > 1 && !(1..=MAX_BITS).contains(&bits_per_shard) {
            return Err(Error::InvalidConfig(format!(
                "{bits} bits over {} shards is more than 2^32 bits per shard",
                self.shards
            )));
        }
        Ok((bits, hashes))
    }
}

impl RedisBloom<()> {
    /// A [`Builder`] for a filter at `key`, sized in bits or from items and a rate; the
    /// connection comes last, in [`Builder::build`].
    pub fn builder(key: impl Into<String>) -> Builder {
        Builder::new(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(builder: Builder) -> Result<u64> {
        builder.build(()).map(|bloom| bloom.bits())
    }

    #[test]
    fn sizes_from_items_and_rate_with_k_14() {
        let builder = RedisBloom::builder("k").expected_items(10_000_000);
        assert_eq!(
            build(builder.false_positive_rate(1e-4)).unwrap(),
            191_859_095
        );
        assert_eq!(build(RedisBloom::builder("k").bits(64)).unwrap(), 64);
    }

    #[test]
    fn native_layout_takes_k_from_the_rate() {
        let bloom = RedisBloom::builder("k")
            .layout(Layout::Native)
            .expected_items(1_000_000)
            .false_positive_rate(0.01)
            .build(())
            .unwrap();
        assert_eq!((bloom.bits(), bloom.hashes()), (9_585_059, 7));
        let bloom = RedisBloom::builder("k")
            .layout(Layout::Native)
            .bits(1000)
            .hashes(3);
        let bloom = bloom.build(()).unwrap();
        assert_eq!(
            (bloom.bits(), bloom.hashes(), bloom.layout()),
            (1000, 3, Layout::Native)
        );
    }

    #[test]
    fn rejects_every_incomplete_or_invalid_configuration() {
        let cases = [
            RedisBloom::builder("k"),
            RedisBloom::builder("k").expected_items(10),
            RedisBloom::builder("k").false_positive_rate(0.1),
            RedisBloom::builder("k").bits(64).expected_items(10),
            RedisBloom::builder("k").bits(0),
            RedisBloom::builder("k").bits(MAX_BITS + 1),
            RedisBloom::builder("k")
                .expected_items(0)
                .false_positive_rate(0.1),
            RedisBloom::builder("k")
                .expected_items(10)
                .false_positive_rate(1.5),
            RedisBloom::builder("k")
                .expected_items(1_000_000_000)
                .false_positive_rate(1e-9),
            RedisBloom::builder("").bits(64),
            RedisBloom::builder("k").bits(64).hashes(7),
            RedisBloom::builder("k").bits(64).merge_chunk_bytes(0),
            RedisBloom::builder("k").bits(64).merge_chunk_bytes(512),
            RedisBloom::builder("k").bits(64).merge_chunk_bytes(3 << 10),
            RedisBloom::builder("k")
                .bits(64)
                .merge_chunk_bytes(128 << 20),
            RedisBloom::builder("k").layout(Layout::Native).bits(64),
            RedisBloom::builder("k")
                .layout(Layout::Native)
                .bits(64)
                .hashes(0),
            RedisBloom::builder("k")
                .layout(Layout::Native)
                .bits(64)
                .hashes(65),
            RedisBloom::builder("a}b")
                .layout(Layout::Native)
                .bits(64)
                .hashes(3),
        ];
        for builder in cases {
            let debug = format!("{builder:?}");
            assert!(
                matches!(build(builder), Err(Error::InvalidConfig(_))),
                "{debug}"
            );
        }
    }
}
