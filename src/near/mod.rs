//! The near cache (SPEC.md §6): a copy of a filter's keys in the process, so that `exists`
//! answers with no round trip.
//!
//! - **Staleness.** A copy is read (every key of the filter, in bounded pieces) and stamped
//!   with the moment its read began: it holds every change acknowledged before. With tracking
//!   ([`NearCache::tracking`]: `CLIENT TRACKING ON BCAST PREFIX …` on a connection of its own),
//!   the copy answers until an invalidation of one of the filter's keys has been known for the
//!   refresh interval (and at most [`NearCache::floor`] after its read); without, until the
//!   interval has passed since its read. Past that the call goes to Redis, as without a near
//!   cache, and a new copy is read. So an answer from the copy never misses a change
//!   acknowledged more than the interval ago (plus the time an invalidation takes to arrive):
//!   both ways, adds as removes and clears.
//! - **Reads.** A new copy is read by the call that finds the old one due (one call at a time;
//!   the others keep answering from the old copy while it is fresh), never more often than
//!   once per interval: the next read may start early by the time the last one took, so that
//!   the new copy is in place when the old one's interval ends.
//! - **Redis down.** A copy past its interval keeps answering when Redis cannot be reached
//!   (the call's own request failed, or the last read did): [`NearCacheStats::stale`] says so,
//!   and a new read is tried once per interval until one succeeds.
//! - **Memory.** A copy takes the filter's bytes; over [`NearCache::budget`], building the
//!   filter fails with [`Error::NearCacheBudget`] (a filter whose size grows turns its copy off
//!   at the first read over the budget and answers from Redis).
//! - **This handle's writes** reach its copy at once: items added are kept beside the copy
//!   until a copy read after them is in place (at most 65,536; past that the copy is
//!   treated as invalidated); a clear drops the copy; any other write (a removal) counts as an
//!   invalidation.
//!
//! Nothing here knows a kind: a kind gives its copy's type and reads it (`core/kind.rs`).

mod config;
mod local;
mod read;
mod tracking;

use crate::error::{Error, Result};
use crate::metrics::{self, NearEvent};
use arc_swap::ArcSwapOption;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use self::config::check_budget;
pub use self::config::{NearCache, NearCacheStats};
pub(crate) use self::read::{read_key, read_strings};
pub(crate) use tracking::prefixes;

use self::local::{Overlay, Striped, Turn};

/// A copy of a filter's keys, as a kind reads it.
#[allow(unreachable_pub)]
pub trait Copy: Send + Sync {
    /// The bytes it holds.
    fn bytes(&self) -> u64;
}

/// The copy of a filter that is one string per part: each part's bytes, in part order.
#[derive(Debug)]
pub struct Strings(pub(crate) Vec<Vec<u8>>);

impl Copy for Strings {
    fn bytes(&self) -> u64 {
        self.0.iter().map(|part| part.len() as u64).sum()
    }
}

/// A copy and when its read began.
#[derive(Debug)]
struct Held<S> {
    state: S,
    /// Nanoseconds since the cache's base (see [`Near::now`]) when the read began.
    read_at: u64,
    /// Tracking was up when the read began: invalidations cover every change since.
    tracked: bool,
}

/// Invalidations heard, shared with the tracking connection's push sender.
#[derive(Debug)]
pub(crate) struct Signal {
    base: Instant,
    /// The earliest invalidation the current copy has not seen (`u64::MAX`: none).
    dirty_since: AtomicU64,
    /// The latest invalidation heard (0: none).
    last: AtomicU64,
    /// Tracking is on and its connection up.
    up: AtomicBool,
    invalidations: AtomicU64,
    /// The filter's kind, for the metrics.
    kind: &'static str,
}

impl Signal {
    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// A change the copy may lack happened now.
    pub(crate) fn invalidate(&self) {
        let now = self.now();
        self.last.fetch_max(now, Ordering::SeqCst);
        self.dirty_since.fetch_min(now, Ordering::SeqCst);
    }
}

/// A filter's near cache: its copy (`S`, as the kind reads it), what decides when it is read
/// again, and its statistics.
#[derive(Debug)]
pub(crate) struct Near<S> {
    key: String,
    /// The filter's kind, for the metrics.
    kind: &'static str,
    config: NearCache,
    signal: Arc<Signal>,
    tracker: Option<tracking::Tracker>,
    copy: ArcSwapOption<Held<S>>,
    /// A call is reading a new copy.
    refreshing: AtomicBool,
    /// When the last read began (0: never), and how long the last good one took.
    last_attempt: AtomicU64,
    last_took: AtomicU64,
    /// The last read, or a call's own request, could not reach Redis.
    failing: AtomicBool,
    over_budget: AtomicBool,
    overlay: Overlay,
    hits: Striped,
    stale_hits: AtomicU64,
    misses: AtomicU64,
    refreshes: AtomicU64,
    failed: AtomicU64,
}

impl<S: Copy> Near<S> {
    /// A near cache for the filter `key` of `kind`, whose copy takes `bytes` (checked against
    /// the budget) and whose keys all start with one of `prefixes` (for tracking).
    pub(crate) fn new(
        key: &str,
        kind: &'static str,
        config: NearCache,
        bytes: u64,
        prefixes: Vec<String>,
    ) -> Result<Self> {
        check_budget(key, &config, bytes)?;
        let signal = Arc::new(Signal {
            base: Instant::now(),
            dirty_since: AtomicU64::new(u64::MAX),
            last: AtomicU64::new(0),
            up: AtomicBool::new(false),
            invalidations: AtomicU64::new(0),
            kind,
        });
        let tracker = config
            .tracking
            .as_ref()
            .map(|client| tracking::Tracker::new(client, prefixes, Arc::clone(&signal)));
        Ok(Near {
            key: key.to_owned(),
            kind,
            config,
            signal,
            tracker,
            copy: ArcSwapOption::empty(),
            refreshing: AtomicBool::new(false),
            last_attempt: AtomicU64::new(0),
            last_took: AtomicU64::new(0),
            failing: AtomicBool::new(false),
            over_budget: AtomicBool::new(false),
            overlay: Overlay::default(),
            hits: Striped::default(),
            stale_hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            refreshes: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// The most bytes a copy may take.
    pub(crate) fn budget(&self) -> u64 {
        self.config.budget
    }

    fn now(&self) -> u64 {
        self.signal.now()
    }

    fn interval(&self) -> u64 {
        nanos(self.config.refresh)
    }

    fn current(&self) -> Option<Arc<Held<S>>> {
        self.copy.load_full()
    }

    /// Whether `held` may answer at `now`: no change it lacks is older than the interval.
    fn fresh(&self, held: &Held<S>, now: u64) -> bool {
        let interval = self.interval();
        if held.tracked && self.signal.up.load(Ordering::SeqCst) {
            let floor = nanos(self.config.floor.max(self.config.refresh));
            let dirty = self.signal.dirty_since.load(Ordering::SeqCst);
            now < held.read_at.saturating_add(floor)
                && (dirty == u64::MAX || now < dirty.saturating_add(interval))
        } else {
            now < held.read_at.saturating_add(interval)
        }
    }

    /// Whether a new copy should be read at `now`.
    fn due(&self, held: Option<&Held<S>>, now: u64) -> bool {
        if self.over_budget.load(Ordering::Relaxed) || self.refreshing.load(Ordering::Relaxed) {
            return false;
        }
        let interval = self.interval();
        let last = self.last_attempt.load(Ordering::Relaxed);
        if self.failing.load(Ordering::Relaxed) && last != 0 && now < last + interval {
            return false;
        }
        let Some(held) = held else {
            return true;
        };
        // Early by the time a read takes, so that the new copy is in place in time.
        let lead = self.last_took.load(Ordering::Relaxed).min(interval / 2);
        if now < held.read_at + interval - lead {
            return false;
        }
        if held.tracked && self.signal.up.load(Ordering::SeqCst) {
            let floor = nanos(self.config.floor.max(self.config.refresh));
            let dirty = self.signal.dirty_since.load(Ordering::SeqCst);
            dirty != u64::MAX || now + lead >= held.read_at.saturating_add(floor)
        } else {
            true
        }
    }

    /// The answer for `item` from the copy, when the copy may give it now and no read is
    /// due: the fast path, with no await and no allocation. `None`: take [`check`](Near::check).
    pub(crate) fn answer_now(
        &self,
        item: &[u8],
        answer: impl Fn(&S, &[u8]) -> bool,
    ) -> Option<bool> {
        let guard = self.copy.load();
        let held = guard.as_deref()?;
        let now = self.now();
        if self.due(Some(held), now) || !self.fresh(held, now) {
            return None;
        }
        self.hits.add(1);
        metrics::near(self.kind, NearEvent::Hit, 1);
        Some(answer(&held.state, item) || self.overlay.contains(item))
    }

    /// Answers `items`: from the copy while it is fresh (`answer(copy, item)`), else by
    /// `remote()`, the filter's own check; reads a new copy with `read()` when one is due.
    /// While Redis cannot be reached, the copy answers past its interval.
    pub(crate) async fn check<T, A, R, RF, Q, QF>(
        &self,
        items: &[T],
        answer: A,
        read: R,
        remote: Q,
    ) -> Result<Vec<bool>>
    where
        T: AsRef<[u8]>,
        A: Fn(&S, &[u8]) -> bool,
        R: FnOnce() -> RF,
        RF: Future<Output = Result<S>>,
        Q: FnOnce() -> QF,
        QF: Future<Output = Result<Vec<bool>>>,
    {
        let mut held = self.current();
        let mut now = self.now();
        if self.due(held.as_deref(), now) {
            if let Some(_turn) = Turn::take(&self.refreshing) {
                // Boxed: the future of a call answered from the copy stays small.
                let refreshed = Box::pin(self.refresh(read)).await;
                now = self.now();
                match refreshed {
                    Ok(()) => held = self.current(),
                    Err(Error::NearCacheBudget { .. }) => held = None,
                    Err(err) if err.is_transient() => {}
                    Err(err) => return Err(err),
                }
            }
        }
        let count = items.len() as u64;
        let from_copy = |held: &Held<S>| -> Vec<bool> {
            items
                .iter()
                .map(|item| {
                    let item = item.as_ref();
                    answer(&held.state, item) || self.overlay.contains(item)
                })
                .collect()
        };
        if let Some(held) = &held {
            if self.fresh(held, now) {
                self.hits.add(count);
                metrics::near(self.kind, NearEvent::Hit, count);
                return Ok(from_copy(held));
            }
            if self.failing.load(Ordering::Relaxed) {
                self.stale_hits.fetch_add(count, Ordering::Relaxed);
                metrics::near(self.kind, NearEvent::StaleHit, count);
                return Ok(from_copy(held));
            }
        }
        match Box::pin(remote()).await {
            Ok(answers) => {
                self.misses.fetch_add(count, Ordering::Relaxed);
                metrics::near(self.kind, NearEvent::Miss, count);
                Ok(answers)
            }
            Err(err) if err.is_transient() && held.is_some() => {
                self.failing.store(true, Ordering::Relaxed);
                tracing::warn!(target: "redbloom", key = %self.key, error = %err, "near cache: Redis unreachable, answering from the copy");
                self.stale_hits.fetch_add(count, Ordering::Relaxed);
                metrics::near(self.kind, NearEvent::StaleHit, count);
                Ok(from_copy(held.as_deref().expect("checked")))
            }
            Err(err) => Err(err),
        }
    }

    /// Reads a new copy (tracking turned on first, so that no change between the two goes
    /// unheard) and puts it in place.
    async fn refresh<R, RF>(&self, read: R) -> Result<()>
    where
        R: FnOnce() -> RF,
        RF: Future<Output = Result<S>>,
    {
        if let Some(tracker) = &self.tracker {
            tracker.ensure(self.config.refresh).await;
        }
        let tracked = self.signal.up.load(Ordering::SeqCst);
        let began = self.now();
        self.last_attempt.store(began, Ordering::Relaxed);
        let read = read().await;
        let took = self.now().saturating_sub(began);
        match read {
            Ok(state) => {
                let bytes = state.bytes();
                self.install(state, began, tracked);
                self.last_took.store(took, Ordering::Relaxed);
                self.failing.store(false, Ordering::Relaxed);
                self.refreshes.fetch_add(1, Ordering::Relaxed);
                metrics::near(self.kind, NearEvent::Refresh, 1);
                tracing::debug!(
                    target: "redbloom",
                    key = %self.key,
                    bytes,
                    tracked,
                    micros = took / 1_000,
                    "near cache: copy read"
                );
                Ok(())
            }
            Err(err @ Error::NearCacheBudget { .. }) => {
                self.over_budget.store(true, Ordering::Relaxed);
                self.copy.store(None);
                tracing::warn!(target: "redbloom", key = %self.key, error = %err, "near cache: turned off");
                Err(err)
            }
            Err(err) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                metrics::near(self.kind, NearEvent::FailedRefresh, 1);
                if err.is_transient() {
                    self.failing.store(true, Ordering::Relaxed);
                }
                tracing::warn!(target: "redbloom", key = %self.key, error = %err, "near cache: reading the copy failed");
                Err(err)
            }
        }
    }

    /// Puts a copy read from `began` in place: the invalidations heard since stay pending.
    fn install(&self, state: S, began: u64, tracked: bool) {
        let held = Arc::new(Held {
            state,
            read_at: began,
            tracked,
        });
        self.copy.store(Some(held));
        self.signal.dirty_since.store(u64::MAX, Ordering::SeqCst);
        let last = self.signal.last.load(Ordering::SeqCst);
        if last >= began {
            self.signal.dirty_since.fetch_min(last, Ordering::SeqCst);
        }
        self.overlay.prune(began);
    }

    /// This handle added `items` (acknowledged by Redis).
    pub(crate) fn added<T: AsRef<[u8]>>(&self, items: &[T]) {
        if !self.overlay.add(items, self.now()) {
            // Too many to keep: the copy is out of date from now on.
            self.signal.invalidate();
        }
    }

    /// This handle changed the filter in a way the copy cannot follow (a removal).
    pub(crate) fn changed(&self) {
        self.signal.invalidate();
    }

    /// This handle cleared (or replaced) the filter: the copy is dropped.
    pub(crate) fn cleared(&self) {
        self.copy.store(None);
        self.overlay.clear();
        self.signal.invalidate();
    }

    pub(crate) fn stats(&self) -> NearCacheStats {
        let held = self.current();
        let now = self.now();
        let stale = match &held {
            Some(held) => !self.fresh(held, now) && self.failing.load(Ordering::Relaxed),
            None => self.failing.load(Ordering::Relaxed),
        };
        NearCacheStats {
            hits: self.hits.sum(),
            stale_hits: self.stale_hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            refreshes: self.refreshes.load(Ordering::Relaxed),
            failed_refreshes: self.failed.load(Ordering::Relaxed),
            invalidations: self.signal.invalidations.load(Ordering::Relaxed),
            age: held
                .as_ref()
                .map(|held| Duration::from_nanos(now.saturating_sub(held.read_at))),
            stale,
            tracking: self.signal.up.load(Ordering::SeqCst),
            bytes: held.as_ref().map_or(0, |held| held.state.bytes()),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX / 4)
}

#[cfg(test)]
mod tests {
    use super::config::DEFAULT_FLOOR;
    use super::local::OVERLAY_ITEMS;
    use super::*;

    #[derive(Debug)]
    struct Bytes(u64);

    impl Copy for Bytes {
        fn bytes(&self) -> u64 {
            self.0
        }
    }

    fn near(refresh: Duration) -> Near<Bytes> {
        Near::new("k", "test", NearCache::new(refresh), 10, vec!["k".into()]).unwrap()
    }

    #[test]
    fn a_copy_over_the_budget_is_refused_naming_both() {
        let err = Near::<Bytes>::new(
            "k",
            "test",
            NearCache::new(Duration::from_secs(1)).budget(9),
            10,
            vec![],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("10 bytes") && err.to_string().contains("budget of 9"),
            "{err}"
        );
        assert!(
            Near::<Bytes>::new("k", "test", NearCache::new(Duration::ZERO), 1, vec![]).is_err()
        );
    }

    #[test]
    fn an_untracked_copy_is_fresh_for_the_interval_from_its_read() {
        let near = near(Duration::from_millis(100));
        let t0 = near.now();
        near.install(Bytes(1), t0, false);
        let held = near.current().unwrap();
        assert!(near.fresh(&held, t0 + nanos(Duration::from_millis(99))));
        assert!(!near.fresh(&held, t0 + nanos(Duration::from_millis(100))));
        assert!(!near.due(Some(&held), t0 + nanos(Duration::from_millis(50))));
        assert!(near.due(Some(&held), t0 + nanos(Duration::from_millis(100))));
    }

    #[test]
    fn a_tracked_copy_is_fresh_until_an_invalidation_is_an_interval_old() {
        let near = near(Duration::from_millis(100));
        near.signal.up.store(true, Ordering::SeqCst);
        let t0 = near.now();
        near.install(Bytes(1), t0, true);
        let held = near.current().unwrap();
        let ms = |m: u64| t0 + nanos(Duration::from_millis(m));
        assert!(near.fresh(&held, ms(10_000)), "no invalidation: fresh");
        assert!(!near.due(Some(&held), ms(10_000)));
        near.signal.invalidate();
        let dirty = near.signal.dirty_since.load(Ordering::SeqCst);
        assert!(near.fresh(&held, dirty + nanos(Duration::from_millis(99))));
        assert!(!near.fresh(&held, dirty + nanos(Duration::from_millis(100))));
        // A new read is due, no sooner than an interval after the last.
        assert!(near.due(Some(&held), ms(100).max(dirty)));
        // An invalidation heard while a read ran stays pending after it.
        let began = near.now();
        near.signal.invalidate();
        near.install(Bytes(1), began, true);
        assert_ne!(near.signal.dirty_since.load(Ordering::SeqCst), u64::MAX);
        // One heard before the read began does not.
        let began = near.now() + 1;
        near.install(Bytes(1), began, true);
        assert_eq!(near.signal.dirty_since.load(Ordering::SeqCst), u64::MAX);
        // The floor: read again after it even without invalidations.
        assert!(!near.fresh(&near.current().unwrap(), began + nanos(DEFAULT_FLOOR)));
    }

    #[test]
    fn the_overlay_keeps_added_items_until_a_later_read() {
        let near = near(Duration::from_secs(1));
        near.added(&["a", "b"]);
        assert!(near.overlay.contains(b"a") && !near.overlay.contains(b"c"));
        near.install(Bytes(1), 0, false);
        assert!(
            near.overlay.contains(b"a"),
            "a read begun before the add lacks it"
        );
        near.install(Bytes(1), near.now(), false);
        assert!(!near.overlay.contains(b"a"));
        // Too many: the copy counts as invalidated instead.
        let many: Vec<String> = (0..=OVERLAY_ITEMS).map(|i| i.to_string()).collect();
        near.added(&many);
        assert!(!near.overlay.contains(b"0"));
        assert_ne!(near.signal.dirty_since.load(Ordering::SeqCst), u64::MAX);
    }
}
