//! Bounded retries with backoff for passing faults, and a deadline for every call.

use crate::error::{Error, Result};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long a call keeps retrying after a passing fault ([`Error::Timeout`] or
/// [`Error::Connection`]: a lost connection, a restarting server), and how long it waits
/// between tries (doubling from `first_delay` up to `max_delay`).
///
/// A retry after a lost connection passes only over a connection that reconnects: a
/// `redis::aio::ConnectionManager` does, a `MultiplexedConnection` never does, and a call over
/// one found closed at every try fails with [`Error::Closed`] once the budget is spent.
///
/// Retrying is safe for every operation: checks read, and each write step records its reply
/// beside the filter, so that its retry after a lost reply reads it back instead of applying
/// again ("new" stays true for the items the lost attempt added; a counting write is applied
/// once: [`Builder::exact_retries`](crate::Builder::exact_retries)).
///
/// ```
/// use std::time::Duration;
/// let policy = redbloom::Retry::for_duration(Duration::from_secs(30));
/// assert_eq!(policy.budget, Duration::from_secs(30));
/// assert_eq!(redbloom::Retry::default(), redbloom::Retry::none());
/// ```
///
/// `#[non_exhaustive]`: build one with [`none`](Retry::none) or
/// [`for_duration`](Retry::for_duration), then [`with_delays`](Retry::with_delays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Retry {
    /// No retry starts once this long has passed since the step began (its first attempt:
    /// one command, transaction or script, or the steps retried together): a call of many
    /// steps that each succeed is never failed by its total length, and an outage longer than
    /// this fails the step it meets. [`Builder::timeout`](crate::Builder::timeout) bounds a
    /// call as a whole.
    pub budget: Duration,
    /// The wait before the first retry.
    pub first_delay: Duration,
    /// The longest wait between two tries.
    pub max_delay: Duration,
}

impl Retry {
    /// Never retry. The default.
    pub const fn none() -> Self {
        Retry {
            budget: Duration::ZERO,
            first_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
        }
    }

    /// Retry for up to `budget`, waiting 50 ms, then twice as long each time, at most 1 s.
    pub const fn for_duration(budget: Duration) -> Self {
        Retry {
            budget,
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(1),
        }
    }

    /// The same budget, waiting `first` before the first retry, then twice as long each time,
    /// at most `max`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let policy = redbloom::Retry::for_duration(Duration::from_secs(5))
    ///     .with_delays(Duration::from_millis(10), Duration::from_millis(200));
    /// assert_eq!(policy.max_delay, Duration::from_millis(200));
    /// ```
    #[must_use]
    pub const fn with_delays(mut self, first: Duration, max: Duration) -> Self {
        self.first_delay = first;
        self.max_delay = max;
        self
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::none()
    }
}

/// When a public call began and the most it may take: one per call, shared by every step and
/// every retry of the call, so that the call as a whole ends within
/// [`Builder::timeout`](crate::Builder::timeout) however many steps it takes. It also counts
/// the call's retries (all steps together), for its span's `attempts`.
#[derive(Debug)]
pub(crate) struct Clock {
    started: Instant,
    timeout: Option<Duration>,
    retries: AtomicU32,
    /// The filter's kind, for the retries' metrics.
    kind: &'static str,
    /// A bulk load's call ([`Bloom::load_many`](crate::Bloom::load_many)): the writes of a
    /// kind whose adds may be applied again go without records.
    bare: bool,
}

impl Clock {
    /// A call of a filter of `kind` starting now, with `timeout` for all of it.
    pub(crate) fn start(timeout: Option<Duration>, kind: &'static str) -> Self {
        Clock {
            started: Instant::now(),
            timeout,
            retries: AtomicU32::new(0),
            kind,
            bare: false,
        }
    }

    /// The same call, a bulk load's ([`Clock::bare`]).
    pub(crate) fn bare(self) -> Self {
        Clock { bare: true, ..self }
    }

    /// Whether this is a bulk load's call: its idempotent writes go without records.
    pub(crate) fn is_bare(&self) -> bool {
        self.bare
    }

    /// Whether a step of the call was retried.
    pub(crate) fn retried(&self) -> bool {
        self.retries.load(Ordering::Relaxed) > 0
    }

    /// The call's timeout, if it has one.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// When the call's timeout passes, if it has one.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.timeout.map(|timeout| self.started + timeout)
    }

    /// The tries of the call so far: its first, and every retry of any of its steps.
    fn attempts(&self) -> u32 {
        self.retries.load(Ordering::Relaxed).saturating_add(1)
    }
}

/// The target of the crate's spans and events.
const TARGET: &str = "redbloom";

/// Records the call's tries so far in its span (`attempts`): the whole call's count, so a
/// later step that needed no retry never lowers it. Nothing at all without a subscriber that
/// takes debug spans; only the crate's own spans are written to.
fn record_attempts(clock: &Clock) {
    if !tracing::level_enabled!(tracing::Level::DEBUG) {
        return;
    }
    let span = tracing::Span::current();
    if span.metadata().is_some_and(|m| m.target() == TARGET) {
        span.record("attempts", clock.attempts());
    }
}

/// Runs `attempt` until it succeeds, fails for good, or `policy`'s budget (counted from the
/// call's start) is spent; no attempt runs past the call's deadline, and the call fails with
/// [`Error::Deadline`] then.
pub(crate) async fn run<T, F, Fut>(policy: Retry, clock: &Clock, attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    LAST_NOT_RUN
        .scope(
            std::cell::Cell::new(false),
            attempts(policy, clock, attempt),
        )
        .await
}

tokio::task_local! {
    /// Whether the last attempt of the innermost [`run`] failed without running
    /// ([`Error::not_run`]): a write step's next sending is then a first attempt again
    /// ([`last_attempt_not_run`]).
    static LAST_NOT_RUN: std::cell::Cell<bool>;
}

/// Whether the attempt before this one, in the innermost [`run`], failed without running:
/// `false` outside one.
pub(crate) fn last_attempt_not_run() -> bool {
    LAST_NOT_RUN.try_with(std::cell::Cell::get).unwrap_or(false)
}

/// [`run`]'s attempts.
async fn attempts<T, F, Fut>(policy: Retry, clock: &Clock, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    // The budget counts from this step's first attempt, so that progress counts: a long call
    // whose steps succeed keeps the whole budget for its next fault.
    let started = Instant::now();
    let timeout = clock.timeout;
    let deadline = clock.deadline();
    let mut delay = policy.first_delay;
    let mut retried = false;
    // Whether every try so far found the connection closed: over two tries or more, it does
    // not reconnect by itself (a connection that does is refused or times out while the
    // server is down, and passes once it is back).
    let mut closed_at_every_try = true;
    loop {
        let result = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, attempt())
                .await
                .unwrap_or_else(|_| Err(Error::Deadline(timeout.unwrap_or_default()))),
            None => attempt().await,
        };
        let err = match result {
            Err(err) if err.is_transient() => err,
            done => {
                record_attempts(clock);
                return done;
            }
        };
        let _ = LAST_NOT_RUN.try_with(|last| last.set(err.not_run()));
        closed_at_every_try &= err.is_closed_connection();
        let retry_at = Instant::now() + delay;
        let within_budget = retry_at.duration_since(started) < policy.budget;
        let before_deadline = deadline.is_none_or(|deadline| retry_at < deadline);
        if !(within_budget && before_deadline) {
            record_attempts(clock);
            let err = err.settled(retried && closed_at_every_try);
            if retried {
                tracing::warn!(
                    target: TARGET,
                    attempts = clock.attempts(),
                    error = %err,
                    "giving up: the retry budget or the call's deadline is spent"
                );
            }
            return Err(err);
        }
        tracing::warn!(
            target: TARGET,
            attempt = clock.attempts(),
            error = %err,
            retry_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "retrying after a passing fault"
        );
        clock.retries.fetch_add(1, Ordering::Relaxed);
        crate::metrics::retry(clock.kind);
        retried = true;
        tokio::time::sleep_until(retry_at).await;
        // A write retried after too few replicas confirmed it waits for them again.
        crate::io::exec::forget_wait_failure();
        delay = (delay * 2).min(policy.max_delay);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lost() -> Error {
        io_error(std::io::ErrorKind::ConnectionReset)
    }

    /// What a connection that reconnects meets while the server is down.
    fn refused() -> Error {
        io_error(std::io::ErrorKind::ConnectionRefused)
    }

    /// What every call over a `MultiplexedConnection` whose server went away meets.
    fn closed() -> Error {
        io_error(std::io::ErrorKind::BrokenPipe)
    }

    fn io_error(kind: std::io::ErrorKind) -> Error {
        Error::from(redis::RedisError::from(std::io::Error::from(kind)))
    }

    #[tokio::test(start_paused = true)]
    async fn retries_passing_faults_within_the_budget() {
        let tries = AtomicU32::new(0);
        let policy = Retry::for_duration(Duration::from_secs(5));
        let result = run(policy, &Clock::start(None, "test"), || async {
            match tries.fetch_add(1, Ordering::Relaxed) {
                0..=2 => Err(lost()),
                _ => Ok(7),
            }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        assert_eq!(tries.load(Ordering::Relaxed), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_counts_the_tries_of_every_step_of_a_call() {
        let clock = Clock::start(None, "test");
        let policy = Retry::for_duration(Duration::from_secs(5));
        let tries = AtomicU32::new(0);
        // Two steps of one call: the first retried twice, the second not at all; a later step
        // never lowers the count.
        let first = run(policy, &clock, || async {
            match tries.fetch_add(1, Ordering::Relaxed) {
                0..=1 => Err(lost()),
                _ => Ok(()),
            }
        });
        first.await.unwrap();
        assert_eq!(clock.attempts(), 3);
        run(policy, &clock, || async { Ok(()) }).await.unwrap();
        assert_eq!(clock.attempts(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_counts_from_the_step_not_the_call() {
        // A call that has run for a minute of successful steps still rides out a fault.
        let clock = Clock::start(None, "test");
        tokio::time::advance(Duration::from_secs(60)).await;
        let policy = Retry::for_duration(Duration::from_secs(5));
        let tries = AtomicU32::new(0);
        let result = run(policy, &clock, || async {
            match tries.fetch_add(1, Ordering::Relaxed) {
                0..=1 => Err(lost()),
                _ => Ok(1),
            }
        })
        .await;
        assert_eq!(result.unwrap(), 1);
        assert_eq!(tries.load(Ordering::Relaxed), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_when_the_budget_is_spent() {
        let tries = AtomicU32::new(0);
        let started = Instant::now();
        let policy = Retry::for_duration(Duration::from_secs(3));
        let result: Result<()> = run(policy, &Clock::start(None, "test"), || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err(refused())
        })
        .await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        assert!(err.is_transient(), "the server may come back: {err:?}");
        // 50 + 100 + 200 + 400 + 800 + 1000 ms = 2.55 s; the next would start past 3 s.
        assert_eq!(tries.load(Ordering::Relaxed), 7);
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    /// A connection found closed at every try does not reconnect (a `MultiplexedConnection`
    /// whose server restarted): once the budget is spent the error says so, not transient.
    #[tokio::test(start_paused = true)]
    async fn a_connection_closed_at_every_try_is_closed_for_good() {
        for fault in [closed, lost] {
            let tries = AtomicU32::new(0);
            let policy = Retry::for_duration(Duration::from_secs(1));
            let result: Result<()> = run(policy, &Clock::start(None, "test"), || async {
                tries.fetch_add(1, Ordering::Relaxed);
                Err(fault())
            })
            .await;
            let err = result.unwrap_err();
            assert!(matches!(err, Error::Closed(_)), "{err:?}");
            assert!(!err.is_transient(), "{err:?}");
            assert!(!err.not_run(), "{err:?}");
            assert!(err.to_string().contains("ConnectionManager"), "{err}");
            let source = std::error::Error::source(&err).expect("the RedisError");
            assert!(
                source.downcast_ref::<redis::RedisError>().is_some(),
                "{source:?}"
            );
            // 50 + 100 + 200 + 400 ms; the next would start past 1 s.
            assert_eq!(tries.load(Ordering::Relaxed), 5);
        }
    }

    /// A connection that reconnects is refused (or times out) while the server is down: its
    /// error stays a passing one, whatever came before and after.
    #[tokio::test(start_paused = true)]
    async fn a_closed_connection_refused_on_a_retry_stays_a_passing_fault() {
        type Fault = fn() -> Error;
        let timed_out: Fault = || io_error(std::io::ErrorKind::TimedOut);
        // The faults of the first try, the second, and every later one.
        let runs: [[Fault; 3]; 2] = [[closed, refused, lost], [closed, timed_out, closed]];
        for faults in runs {
            let tries = AtomicU32::new(0);
            let policy = Retry::for_duration(Duration::from_secs(1));
            let result: Result<()> = run(policy, &Clock::start(None, "test"), || async {
                let n = tries.fetch_add(1, Ordering::Relaxed) as usize;
                Err(faults[n.min(2)]())
            })
            .await;
            let err = result.unwrap_err();
            assert!(matches!(err, Error::Connection(_)), "{err:?}");
            assert!(err.is_transient(), "{err:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_lasting_errors_or_without_a_policy() {
        let tries = AtomicU32::new(0);
        let policy = Retry::for_duration(Duration::from_secs(5));
        let result: Result<()> = run(policy, &Clock::start(None, "test"), || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err(Error::InvalidConfig("no".into()))
        })
        .await;
        assert!(matches!(result, Err(Error::InvalidConfig(_))));
        // One try cannot tell a connection that reconnects from one that does not: a closed
        // one is a passing fault then.
        let result: Result<()> = run(Retry::none(), &Clock::start(None, "test"), || async {
            tries.fetch_add(1, Ordering::Relaxed);
            Err(closed())
        })
        .await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Connection(_)), "{err:?}");
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(tries.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_bounds_the_whole_call() {
        let started = Instant::now();
        let policy = Retry::for_duration(Duration::from_secs(60));
        let result: Result<()> = run(
            policy,
            &Clock::start(Some(Duration::from_secs(2)), "test"),
            || async {
                tokio::time::sleep(Duration::from_millis(700)).await;
                Err(lost())
            },
        )
        .await;
        assert!(result.is_err());
        assert!(
            started.elapsed() <= Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let hung: Result<()> = run(
            Retry::none(),
            &Clock::start(Some(Duration::from_secs(1)), "test"),
            || async { std::future::pending().await },
        )
        .await;
        assert!(matches!(hung, Err(Error::Deadline(_))), "{hung:?}");
    }
}
