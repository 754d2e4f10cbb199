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

mod dense;
mod near;

use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::info::{FilterInfo, GenerationInfo, KeyTtl, WindowInfo};
use crate::io::bits::{Removal, MAX_OFFSETS_PER_COMMAND};
use crate::io::exec::Exec;
use crate::io::guard::Guard;
use crate::layout::Layout;
use crate::options::Options;
use crate::retry::Clock;
use crate::scripts::{script, Arg, LuaScript};
use crate::sharded::{self, Shards};
use crate::sizing::{current_fpr, estimate_items};
use crate::{keys, Engine};
use futures_util::future::join_all;
use futures_util::StreamExt;
use redis::aio::ConnectionLike;
use redis::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The fewest and the most generations: each check reads every live one.
pub(crate) const GENERATIONS: std::ops::RangeInclusive<u32> = 2..=64;

/// The longest window: ten years (the scripts' arithmetic stays exact far beyond).
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(10 * 365 * 86_400);

/// Commands of one batch in flight at once on the connection.
const COMMANDS_IN_FLIGHT: usize = 4;

/// Declares a window script: `lua/window_args.lua`, then the parts named, from `lua/`.
macro_rules! window_script {
    ($(#[$doc:meta])* $name:ident = [$($part:literal),+]) => {
        script!($(#[$doc])* $name = concat!(
            include_str!("../../../lua/window_args.lua"),
            $(include_str!(concat!("../../../lua/", $part, ".lua"))),+
        ));
    };
}

window_script!(
    /// Adds items to the current generation; new when in no live generation. The parameters
    /// are checked when the step creates the generation.
    WINDOW_ADD = ["window_epoch", "window_add_head", "window_check", "window_add"]
);
window_script!(
    /// Checks items against the live generations (read-only; the clock only when needed).
    WINDOW_EXISTS = ["window_check", "window_exists"]
);
window_script!(
    /// Describes the live generations (read-only).
    WINDOW_INFO = ["window_check", "window_epoch", "window_info"]
);
window_script!(
    /// The dense add's merge of a batch's bitmap into the current generation.
    WINDOW_MERGE = ["window_check", "window_epoch", "window_merge"]
);
window_script!(
    /// The dense check's head: the checks and the current epoch (read-only).
    WINDOW_AT = ["window_check", "window_epoch", "window_at"]
);
window_script!(
    /// `clear` and `expire` of every generation and the parameters.
    WINDOW_DROP = ["window_check", "window_epoch", "window_drop"]
);

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
/// replicas can serve. Uses the native layout's hashing.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// let client = redbloom::redis::Client::open("redis://127.0.0.1:6379")?;
/// let conn = client.get_multiplexed_async_connection().await?;
/// let recent = redbloom::RedisBloom::builder("events:last-hour")
///     .window(Duration::from_secs(3600))
///     .expected_items(1_000_000) // at most this many events in any one hour
///     .false_positive_rate(0.001)
///     .build_window(conn)?;
/// if recent.add("event-42").await? {
///     // not seen in the last hour: handle it
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct WindowBloom<C>(Arc<Window<C>>);

impl<C> Clone for WindowBloom<C> {
    /// Another handle on the same filter: one reference count.
    fn clone(&self) -> Self {
        WindowBloom(Arc::clone(&self.0))
    }
}

#[derive(Debug)]
struct Window<C> {
    exec: Exec<C>,
    key: String,
    /// One generation's shape (all shards together).
    geometry: Geometry,
    window_ms: u64,
    generations: u32,
    fingerprint: String,
    /// A sharded filter's parameters, in a slot of their own; a filter of one key has its
    /// scripts check them.
    guard: Option<Guard>,
    parts: Shards<Part>,
    server: ServerClock,
    /// This client has seen its parameters stored (a filter of one key): checks leave them
    /// out (writes, info, clear and expire never do). Forgotten by a clear.
    verified: AtomicBool,
    /// The copy that answers checks, when the builder asked for one.
    near: Option<crate::near::Near<near::Copy>>,
}

/// One slot group's generations.
#[derive(Debug, Clone)]
struct Part {
    /// Generation E is the key `{prefix}:{E}`.
    prefix: String,
    /// The parameters key and the bare key, checked by the scripts (a filter of one key).
    checked: Option<[String; 2]>,
    /// The dense add's scratch key, in the same slot group.
    scratch: String,
    geometry: Geometry,
}

impl Part {
    /// The keys a script declares when the client guesses epoch `guess`: generations
    /// `guess + 1` down to `guess - G`, then (`checked`) the checked keys.
    fn keys(&self, guess: i64, generations: u32, checked: bool) -> Vec<String> {
        let mut keys: Vec<String> = (-1..=i64::from(generations))
            .map(|back| format!("{}:{}", self.prefix, guess - back))
            .collect();
        if checked {
            keys.extend(self.checked.iter().flatten().cloned());
        }
        keys
    }
}

/// The client's guess of the server's clock: its own clock until the server has said
/// otherwise, then the server's time it last heard plus the time elapsed since.
#[derive(Debug, Default)]
struct ServerClock(Mutex<Option<(Instant, u64)>>);

impl ServerClock {
    fn now_ms(&self) -> u64 {
        let heard = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match heard {
            Some((at, ms)) => ms.saturating_add(millis(at.elapsed())),
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, millis),
        }
    }

    fn learn(&self, server_ms: u64) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), server_ms));
    }
}

/// The generations' name beside a filter's key: `redbloom:gen:HASH`, HASH naming the filter's
/// parameters, so that a client with other parameters can never touch this filter's
/// generations (an add checks the stored parameters only when it creates a generation).
fn generations_of(fingerprint: &str) -> String {
    let (h1, _) = crate::hash::murmur3_x64_128(fingerprint.as_bytes());
    format!("redbloom:gen:{:08x}", h1 >> 32)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The generation of the time `ms`, as the scripts compute it.
pub(crate) fn epoch_of(ms: u64, window_ms: u64, generations: u32) -> i64 {
    let epoch = u128::from(ms) * u128::from(generations - 1) / u128::from(window_ms);
    i64::try_from(epoch).unwrap_or(i64::MAX)
}

/// What a window script answered.
enum Reply {
    Done(Value),
    /// The guess was off; the server's time in ms.
    Epoch(u64),
    /// The stored parameters differ ("" when the bare key holds bits without any).
    Params(String),
}

fn classify(reply: Value) -> Result<Reply> {
    if let Value::Array(items) = &reply {
        match items.as_slice() {
            [Value::BulkString(what), Value::Int(now)] if what == b"epoch" => {
                return Ok(Reply::Epoch(u64::try_from(*now).unwrap_or(0)));
            }
            [Value::BulkString(what), Value::BulkString(stored)] if what == b"params" => {
                return Ok(Reply::Params(String::from_utf8_lossy(stored).into_owned()));
            }
            _ => {}
        }
    }
    Ok(Reply::Done(reply))
}

/// What a script run does besides its own arguments.
#[derive(Clone, Copy)]
struct Run<'a> {
    script: &'a LuaScript,
    read_only: bool,
    /// Stores the parameters of a new filter.
    store: bool,
    /// Replies its flags and whether the parameters were seen (adds and checks).
    flags: bool,
}

impl<C> WindowBloom<C> {
    /// The filter the [`Builder`](crate::Builder) describes: `geometry` is one generation's
    /// (all shards together), checked here.
    pub(crate) fn from_parts(
        conn: C,
        key: String,
        geometry: Geometry,
        window: Duration,
        generations: u32,
        shards: u32,
        options: Options,
    ) -> Result<Self> {
        if key.is_empty() {
            return Err(Error::InvalidConfig("the key must not be empty".into()));
        }
        keys::check_not_reserved(&key)?;
        if !GENERATIONS.contains(&generations) {
            return Err(Error::InvalidConfig(format!(
                "a window filter has {} to {} generations, not {generations}",
                GENERATIONS.start(),
                GENERATIONS.end()
            )));
        }
        let window_ms = millis(window);
        if window > MAX_WINDOW || window_ms < u64::from(generations - 1) {
            return Err(Error::InvalidConfig(format!(
                "a window of {window:?} over {generations} generations: give at least 1 ms per \
                 generation after the first, and at most ten years"
            )));
        }
        let shards = shards.max(1);
        let per_part = Geometry::new(
            Layout::Native,
            geometry.bits.div_ceil(u64::from(shards)),
            geometry.hashes,
        )?;
        let geometry = per_part.total(per_part.bits * u64::from(shards));
        let fingerprint = format!(
            "kind=window window_ms={window_ms} generations={generations} {}",
            geometry.fingerprint(shards)
        );
        let params = keys::sidecar(&key, "redbloom:params")?;
        let (guard, parts) = if shards == 1 {
            let part = Part {
                prefix: keys::sidecar(&key, &generations_of(&fingerprint))?,
                checked: Some([params, key.clone()]),
                scratch: keys::sidecar(&key, "redbloom:scratch")?,
                geometry: per_part,
            };
            (None, vec![part])
        } else {
            let guard = Guard::new(
                key.clone(),
                Some(params.clone()),
                params,
                fingerprint.clone(),
                Layout::Native,
                geometry.bits,
            );
            let parts = (0..shards)
                .map(|i| {
                    let shard = keys::shard_key(&key, i, shards);
                    Ok(Part {
                        prefix: keys::sidecar(&shard, &generations_of(&fingerprint))?,
                        checked: None,
                        scratch: keys::sidecar(&shard, "redbloom:scratch")?,
                        geometry: per_part,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            (Some(guard), parts)
        };
        Ok(WindowBloom(Arc::new(Window {
            exec: Exec::new(conn, options),
            key,
            geometry,
            window_ms,
            generations,
            fingerprint,
            guard,
            parts: Shards::new(parts),
            server: ServerClock::default(),
            verified: AtomicBool::new(false),
            near: None,
        })))
    }

    /// Gives a filter just made its near cache ([`Builder::near_cache`](crate::Builder::near_cache)).
    pub(crate) fn attach_near(&mut self, config: crate::NearCache) -> Result<()> {
        let window = Arc::get_mut(&mut self.0).expect("a filter just made has one handle");
        near::attach(window, config)
    }

    /// What the near cache has done (`None`: the filter has none).
    pub fn near_cache_stats(&self) -> Option<crate::NearCacheStats> {
        self.0.near.as_ref().map(crate::near::Near::stats)
    }

    /// The filter's key in Redis: the name its generations' keys derive from.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// How long an item is surely remembered.
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.0.window_ms)
    }

    /// How many generations are live at once.
    pub fn generations(&self) -> u32 {
        self.0.generations
    }

    /// One generation's size in bits (all shards together); the filter holds at most
    /// [`generations`](WindowBloom::generations) of them.
    pub fn bits(&self) -> u64 {
        self.0.geometry.bits
    }

    /// Bit locations per item.
    pub fn hashes(&self) -> u32 {
        self.0.geometry.hashes
    }

    /// How many slot groups hold the filter (1 unless built with
    /// [`Builder::shards`](crate::Builder::shards)).
    pub fn shards(&self) -> u32 {
        self.0.parts.count()
    }

    /// Items per [`add_many`](WindowBloom::add_many) or
    /// [`exists_many`](WindowBloom::exists_many) call that load and check fastest: large
    /// enough for the dense path when the generations allow it, else 4,096. What
    /// `redbloom load` and `check` use by default.
    pub fn bulk_batch_size(&self) -> usize {
        let part = &self.0.parts.parts()[0].geometry;
        dense::batch_size(part.max_bytes(), self.0.generations, part.hashes)
            * self.shards() as usize
    }
}

impl<C> WindowBloom<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds `item` to the current generation. Returns `true` when the item was in no live
    /// generation: not seen within the window. Atomic: of many concurrent adds of one item,
    /// exactly one returns `true`. Idempotent, so retrying is safe.
    ///
    /// # Errors
    /// [`Error::ParamsMismatch`] when the filter was created with another window, number of
    /// generations, size, shard count or kind (nothing is written); [`Error::WrongType`] when
    /// one of its keys holds a non-string; network faults as for
    /// [`RedisBloom::add`](crate::RedisBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add", kind = "window", key = self.key(), items = 1, attempts))]
    pub async fn add(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let clock = self.0.exec.clock();
        let item = [item.as_ref()];
        let new = self.0.per_part(&clock, &item, true).await?;
        if let Some(near) = &self.0.near {
            near.added(&item);
        }
        Ok(new[0])
    }

    /// Whether `item` was added within the window: `false` means not added in the last
    /// `window` (surely); `true` means added within `window·G/(G-1)`, or a false positive.
    ///
    /// # Errors
    /// As for [`add`](WindowBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists", kind = "window", key = self.key(), items = 1, attempts))]
    pub async fn exists(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        let item = item.as_ref();
        if let Some(found) = self.0.answer_now(item) {
            return Ok(found);
        }
        // Boxed: a call answered from the copy does not carry the way to Redis.
        Ok(Box::pin(self.0.check(&[item])).await?[0])
    }

    /// Adds every item; each result, in input order, means what [`add`](WindowBloom::add)'s
    /// does. An item repeated in the batch is new only at its first occurrence. Up to a few
    /// thousand items go as one atomic script; larger batches as several, a few in flight at a
    /// time. An empty slice sends nothing.
    ///
    /// # Errors
    /// As for [`add`](WindowBloom::add); on error, some of the items may have been added.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "add_many", kind = "window", key = self.key(), items = items.len(), attempts))]
    pub async fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let new = self.0.per_part(&self.0.exec.clock(), items, true).await?;
        if let Some(near) = &self.0.near {
            near.added(items);
        }
        Ok(new)
    }

    /// Checks every item; each result, in input order, means what
    /// [`exists`](WindowBloom::exists)'s does. An empty slice sends nothing.
    ///
    /// # Errors
    /// As for [`add`](WindowBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "exists_many", kind = "window", key = self.key(), items = items.len(), attempts))]
    pub async fn exists_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        self.0.check(items).await
    }

    /// The live generations (their start by the server's clock, bits set and TTL) and the
    /// filter's totals over them, read in one round trip per shard.
    ///
    /// # Errors
    /// As for [`add`](WindowBloom::add).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "info", kind = "window", key = self.key(), attempts))]
    pub async fn info(&self) -> Result<WindowInfo> {
        self.0.info().await
    }

    /// Deletes every generation and the stored parameters, after checking in the same atomic
    /// step that they are this filter's. Returns whether any live generation existed.
    ///
    /// # Errors
    /// As for [`add`](WindowBloom::add); a mismatch leaves every key as it was.
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "clear", kind = "window", key = self.key(), attempts))]
    pub async fn clear(&self) -> Result<bool> {
        let done = self.0.remove(Removal::Delete).await;
        if let Some(guard) = &self.0.guard {
            guard.reset();
        }
        self.0.verified.store(false, Ordering::Relaxed);
        if let Some(near) = &self.0.near {
            near.cleared();
        }
        done
    }

    /// Makes the whole filter expire after `ttl`: its parameters, and the live generations
    /// that would outlive `ttl` (a generation leaving the window sooner keeps its own expiry).
    /// Generations created later expire by then too. Returns whether any live generation
    /// existed.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a TTL below 1 ms or too long for Redis; otherwise as for
    /// [`clear`](WindowBloom::clear).
    #[tracing::instrument(target = "redbloom", level = "debug", skip_all, err(level = "debug"),
        fields(op = "expire", kind = "window", key = self.key(), attempts))]
    pub async fn expire(&self, ttl: Duration) -> Result<bool> {
        self.0.remove(Removal::expire(ttl)?).await
    }
}

impl<C> Window<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Adds or checks the items: a filter of one key in its part; a sharded one checks its
    /// parameters, then sends each part its items at once (beside the parameters step, for
    /// writes) and puts the answers back in input order.
    async fn per_part<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        items: &[T],
        write: bool,
    ) -> Result<Vec<bool>> {
        let (parts, Some(guard)) = (self.parts.parts(), &self.guard) else {
            return self
                .part_items(clock, &self.parts.parts()[0], items, write)
                .await;
        };
        let check = match write {
            true => sharded::Check::Write,
            false => sharded::Check::Read,
        };
        self.parts
            .fan_out(&self.exec, clock, guard, items, check, |part, items| async move {
                self.part_items(clock, &parts[part], &items, write).await
            })
            .await
    }

    /// One part's items; after a write, `WAIT` when asked. A write and its `WAIT` are
    /// retried together: `WAIT` confirms the writes of its own connection, so after a
    /// reconnect a `WAIT` alone would confirm nothing.
    async fn part_items<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        part: &Part,
        items: &[T],
        write: bool,
    ) -> Result<Vec<bool>> {
        if !write || self.exec.options().replicas.is_none() {
            return self.part_attempt(clock, part, items, write, false).await;
        }
        self.exec
            .retried(clock, || async {
                let answers = self.part_attempt(clock, part, items, write, true).await?;
                self.exec.confirm(&part.prefix, Engine::Scripts).await?;
                Ok(answers)
            })
            .await
    }

    /// Runs `attempt` under the retry policy, or once when the caller retries around it
    /// (`whole`).
    async fn step<T, F, Fut>(&self, clock: &Clock, whole: bool, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        match whole {
            true => {
                let mut attempt = attempt;
                attempt().await
            }
            false => self.exec.retried(clock, attempt).await,
        }
    }

    /// One part's items by the dense path, or in commands of a bounded size (a few in
    /// flight at once, in order), each retried unless the caller retries the whole.
    async fn part_attempt<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        part: &Part,
        items: &[T],
        write: bool,
        whole: bool,
    ) -> Result<Vec<bool>> {
        if let Some(answers) = self.dense(clock, part, items, write, whole).await? {
            return Ok(answers);
        }
        let k = part.geometry.hashes as usize;
        // Each item may test every generation: a command's work is bounded as a plain
        // filter's is (MAX_OFFSETS_PER_COMMAND bits).
        let per_command = (MAX_OFFSETS_PER_COMMAND / (k * self.generations as usize)).max(1);
        let run = Run {
            script: if write { &WINDOW_ADD } else { &WINDOW_EXISTS },
            read_only: !write,
            store: write,
            flags: true,
        };
        let command = |chunk: &[T]| {
            let offsets = part.geometry.offsets(chunk);
            let len = chunk.len();
            async move {
                let offsets = offsets?;
                let (k, offsets): (&dyn Arg, &dyn Arg) = (&k, &offsets);
                let reply = self
                    .step(clock, whole, || async move {
                        self.call(part, run, &[k, offsets]).await
                    })
                    .await?;
                let (flags, verified) = flags(&reply, len)?;
                if verified {
                    self.verified.store(true, Ordering::Relaxed);
                }
                Ok::<_, Error>(flags)
            }
        };
        if items.len() <= per_command {
            return command(items).await;
        }
        let mut answers = Vec::with_capacity(items.len());
        let mut commands = futures_util::stream::iter(items.chunks(per_command).map(command))
            .buffered(COMMANDS_IN_FLIGHT);
        while let Some(flags) = commands.next().await {
            answers.extend(flags?);
        }
        Ok(answers)
    }

    /// One script on one part, with the head's arguments; again with the server's epoch when
    /// the guess was off (the server's clock may also cross a generation meanwhile).
    async fn call(&self, part: &Part, run: Run<'_>, tail: &[&dyn Arg]) -> Result<Value> {
        for _ in 0..3 {
            let guess = self.guess();
            let checked = !(run.read_only && run.flags && self.verified.load(Ordering::Relaxed));
            let keys = part.keys(guess, self.generations, checked);
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            let mut args = self.head_args(&guess, run.store);
            args.extend_from_slice(tail);
            let route = keys[1];
            let reply = match run.read_only {
                true => self.exec.script_ro(route, run.script, &keys, &args).await,
                false => self.exec.script(route, run.script, &keys, &args).await,
            };
            let reply = match reply {
                // A server before Redis 6.2: the scripts read bits with BITFIELD instead.
                Err(Error::Redis(err))
                    if lacks_bitfield_ro(&err)
                        && !self.exec.caps().no_bitfield_ro.load(Ordering::Relaxed) =>
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
                        cause = "unknown command in the window scripts (Redis < 6.2)",
                        "fallback"
                    );
                    continue;
                }
                reply => reply?,
            };
            match classify(reply)? {
                Reply::Done(reply) => return Ok(reply),
                Reply::Epoch(now) => self.server.learn(now),
                Reply::Params(stored) => return Err(self.mismatch(stored)),
            }
        }
        Err(dense::clock_moved())
    }

    /// The client's guess of the server's current epoch.
    fn guess(&self) -> i64 {
        epoch_of(self.server.now_ms(), self.window_ms, self.generations)
    }

    /// The arguments every window script starts with (see `lua/window_params.lua`).
    fn head_args<'a>(&'a self, guess: &'a i64, store: bool) -> Vec<&'a dyn Arg> {
        let read = match self.exec.caps().no_bitfield_ro.load(Ordering::Relaxed) {
            true => &"bitfield",
            false => &"bitfield_ro",
        };
        vec![
            guess,
            &self.window_ms,
            &self.generations,
            &self.fingerprint,
            if store { &"1" } else { &"0" },
            read,
        ]
    }

    fn mismatch(&self, stored: String) -> Error {
        Error::ParamsMismatch {
            key: self.key.clone(),
            stored: match stored.is_empty() {
                true => format!(
                    "none (the key {:?} holds a filter without stored parameters: another kind)",
                    self.key
                ),
                false => stored,
            },
            requested: self.fingerprint.clone(),
        }
    }

    async fn info(&self) -> Result<WindowInfo> {
        let clock = self.exec.clock();
        let run = Run {
            script: &WINDOW_INFO,
            read_only: true,
            store: false,
            flags: false,
        };
        let mut params_ttl = None;
        if let Some(guard) = &self.guard {
            self.exec
                .retried(&clock, || guard.ensure(&self.exec, false))
                .await?;
            let key = guard.key().unwrap_or(&self.key);
            let pttl: i64 = self
                .exec
                .retried(&clock, || async move {
                    self.exec.query(key, redis::cmd("PTTL").arg(key)).await
                })
                .await?;
            params_ttl = Some(pttl);
        }
        let replies = self
            .parts
            .parts()
            .iter()
            .map(|part| self.exec.retried(&clock, move || self.call(part, run, &[])));
        let mut generations: BTreeMap<i64, GenerationInfo> = BTreeMap::new();
        for reply in join_all(replies).await {
            let reply = reply?;
            let parsed = parse_info(&reply)
                .ok_or_else(|| Error::UnexpectedReply(format!("{reply:?} from window info")))?;
            params_ttl = params_ttl.or(Some(parsed.params_pttl));
            for (epoch, bits_set, bytes, pttl) in parsed.generations {
                let start_ms = u64::try_from(epoch)
                    .unwrap_or(0)
                    .saturating_mul(self.window_ms)
                    .div_ceil(u64::from(self.generations - 1));
                let entry = generations.entry(epoch).or_insert(GenerationInfo {
                    start: UNIX_EPOCH + Duration::from_millis(start_ms),
                    bits_set: 0,
                    bytes: 0,
                    ttl: KeyTtl::Missing,
                });
                entry.bits_set += bits_set;
                entry.bytes += bytes;
                entry.ttl = entry.ttl.longest_lived(KeyTtl::from_pttl(pttl));
            }
        }
        let Geometry { bits, hashes, .. } = self.geometry;
        let parts: Vec<GenerationInfo> = generations.into_values().rev().collect();
        let miss: f64 = parts
            .iter()
            .map(|g| 1.0 - current_fpr(bits, hashes, g.bits_set))
            .product();
        let filter = FilterInfo {
            key: self.key.clone(),
            bits,
            hashes,
            bits_set: parts.iter().map(|g| g.bits_set).sum(),
            bytes: parts.iter().map(|g| g.bytes).sum(),
            estimated_items: parts
                .iter()
                .map(|g| estimate_items(bits, hashes, g.bits_set))
                .sum(),
            estimated_fpr: 1.0 - miss,
            ttl: KeyTtl::from_pttl(params_ttl.unwrap_or(-2)),
        };
        Ok(WindowInfo {
            filter,
            window: Duration::from_millis(self.window_ms),
            generations: self.generations,
            parts,
        })
    }

    /// `clear` or `expire`: one checked script per part; for a sharded filter, its
    /// parameters checked first and removed last (never the bare name).
    async fn remove(&self, how: Removal) -> Result<bool> {
        let clock = self.exec.clock();
        let run = Run {
            script: &WINDOW_DROP,
            read_only: false,
            store: false,
            flags: false,
        };
        let (op, millis) = match how {
            Removal::Delete => ("del", 0),
            Removal::Expire(ms) => ("pexpire", ms),
        };
        if let Some(guard) = &self.guard {
            self.exec
                .retried(&clock, || guard.ensure(&self.exec, false))
                .await?;
        }
        let (op, millis): (&dyn Arg, &dyn Arg) = (&op, &millis);
        let all = self.parts.parts().iter().map(|part| {
            self.exec.retried(&clock, move || async move {
                self.call(part, run, &[op, millis]).await
            })
        });
        let mut alive = false;
        for reply in join_all(all).await {
            match reply? {
                Value::Int(n) => alive |= n > 0,
                other => {
                    return Err(Error::UnexpectedReply(format!(
                        "{other:?} from clear or expire"
                    )))
                }
            }
        }
        if let Some(guard) = &self.guard {
            guard.remove_stored(&self.exec, &clock, how).await?;
        }
        Ok(alive)
    }
}

/// A script's error for a server without `BITFIELD_RO` (before Redis 6.2).
fn lacks_bitfield_ro(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("unknown") && text.contains("command") && text.contains("bitfield_ro")
        || text.contains("unknown redis command called from")
}

/// One flag per item from a script's array of 0/1, and the last element: whether the script
/// saw the filter's parameters stored.
fn flags(reply: &Value, items: usize) -> Result<(Vec<bool>, bool)> {
    let unexpected = || Error::UnexpectedReply(format!("{reply:?} for {items} items"));
    let Value::Array(values) = reply else {
        return Err(unexpected());
    };
    if values.len() != items + 1 {
        return Err(unexpected());
    }
    let mut flags = values
        .iter()
        .map(|v| match v {
            Value::Int(flag) => Ok(*flag == 1),
            _ => Err(unexpected()),
        })
        .collect::<Result<Vec<_>>>()?;
    let verified = flags.pop().unwrap_or(false);
    Ok((flags, verified))
}

/// The info script's reply.
struct ParsedInfo {
    params_pttl: i64,
    /// (epoch, bits set, bytes, PTTL) per live generation that exists.
    generations: Vec<(i64, u64, u64, i64)>,
}

fn parse_info(reply: &Value) -> Option<ParsedInfo> {
    let Value::Array(values) = reply else {
        return None;
    };
    let ints: Vec<i64> = values
        .iter()
        .skip(1)
        .map(|v| match v {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (&[_now, params_pttl], rest) = ints.split_first_chunk::<2>()?;
    if rest.len() % 4 != 0 {
        return None;
    }
    let generations = rest
        .chunks_exact(4)
        .map(|g| {
            (
                g[0],
                u64::try_from(g[1]).unwrap_or(0),
                u64::try_from(g[2]).unwrap_or(0),
                g[3],
            )
        })
        .collect();
    Some(ParsedInfo {
        params_pttl,
        generations,
    })
}

/// What a snapshot of a window filter needs from it (src/snapshot/window.rs).
pub(crate) struct WindowParts<'a, C> {
    pub(crate) exec: &'a Exec<C>,
    /// A sharded filter's parameters guard; a filter of one key has its scripts check them.
    pub(crate) guard: Option<&'a Guard>,
    pub(crate) fingerprint: &'a str,
    /// Per part: the prefix of its generations' keys (`{prefix}:{EPOCH}`), the parameters
    /// key and the bare key (a filter of one key), and a generation's most bytes.
    pub(crate) parts: Vec<(&'a str, Option<&'a [String; 2]>, u64)>,
    pub(crate) generations: u32,
    pub(crate) window_ms: u64,
}

impl<C> WindowBloom<C> {
    pub(crate) fn window_parts(&self) -> WindowParts<'_, C> {
        let w = &self.0;
        WindowParts {
            exec: &w.exec,
            guard: w.guard.as_ref(),
            fingerprint: &w.fingerprint,
            parts: w
                .parts
                .parts()
                .iter()
                .map(|p| {
                    (
                        p.prefix.as_str(),
                        p.checked.as_ref(),
                        p.geometry.max_bytes(),
                    )
                })
                .collect(),
            generations: w.generations,
            window_ms: w.window_ms,
        }
    }

    /// Forget the parameters check (after an import replaced the keys).
    pub(crate) fn forget_checks(&self) {
        self.0.verified.store(false, Ordering::Relaxed);
        if let Some(guard) = &self.0.guard {
            guard.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_names_the_generations_around_its_guess() {
        let part = Part {
            prefix: "{k}:redbloom:gen".into(),
            checked: Some(["{k}:redbloom:params".into(), "k".into()]),
            scratch: "{k}:redbloom:scratch".into(),
            geometry: Geometry::new(Layout::Native, 64, 3).unwrap(),
        };
        let keys = part.keys(100, 4, true);
        assert_eq!(keys.len(), 4 + 2 + 2);
        assert_eq!(keys[0], "{k}:redbloom:gen:101");
        assert_eq!(keys[5], "{k}:redbloom:gen:96");
        assert_eq!(&keys[6..], ["{k}:redbloom:params", "k"]);
        assert!(keys.iter().all(|k| keys::slot(k) == keys::slot("k")));
    }

    #[test]
    fn generations_are_named_by_their_parameters() {
        let a = generations_of("kind=window window_ms=2000 generations=4");
        let b = generations_of("kind=window window_ms=3000 generations=4");
        assert!(a.starts_with("redbloom:gen:") && a.len() == "redbloom:gen:".len() + 8);
        assert_ne!(a, b);
        assert_eq!(
            a,
            generations_of("kind=window window_ms=2000 generations=4")
        );
    }

    #[test]
    fn epochs_are_whole_generations_of_the_window() {
        // W = 3000 ms over 4 generations: 1000 ms each.
        assert_eq!(epoch_of(0, 3000, 4), 0);
        assert_eq!(epoch_of(999, 3000, 4), 0);
        assert_eq!(epoch_of(1000, 3000, 4), 1);
        // W = 2000 ms over 4 generations: 666.67 ms each.
        assert_eq!(epoch_of(666, 2000, 4), 0);
        assert_eq!(epoch_of(667, 2000, 4), 1);
        assert_eq!(epoch_of(1_795_382_209_000, 3_600_000, 4), 1_496_151);
    }

    #[test]
    fn replies_are_told_apart() {
        let epoch = Value::Array(vec![Value::BulkString(b"epoch".to_vec()), Value::Int(5)]);
        assert!(matches!(classify(epoch), Ok(Reply::Epoch(5))));
        let params = Value::Array(vec![
            Value::BulkString(b"params".to_vec()),
            Value::BulkString(b"x".to_vec()),
        ]);
        assert!(matches!(classify(params), Ok(Reply::Params(p)) if p == "x"));
        let done = Value::Array(vec![Value::Int(1), Value::Int(0), Value::Int(1)]);
        let Ok(Reply::Done(done)) = classify(done) else {
            panic!("flags are an answer");
        };
        assert_eq!(flags(&done, 2).unwrap(), (vec![true, false], true));
        assert!(flags(&done, 3).is_err());
    }
}
