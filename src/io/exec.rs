//! The one place commands go out: retries under one deadline per public call, errors sorted
//! into [`Error`], a cluster's `MOVED` inside a batch, scripts loaded again on `NOSCRIPT`,
//! `WAIT` for replicas, and what a filter learns the server (or its ACL) lacks ([`Cap`]):
//! decided, recorded and reported here, once per filter.

use super::eviction::Eviction;
use super::once::{self, Step};
use super::tx::{Replies, Tx};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::retry::{self, Clock};
use crate::scripts::{Arg, LuaScript};
use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

tokio::task_local! {
    /// The replicas a `WAIT` of this call found too few ([`Exec::confirm`], as `(acked,
    /// wanted)`), within [`one_wait_failure`].
    static NOT_REPLICATED: std::cell::Cell<Option<(u32, u32)>>;
}

/// `write` (a sharded write's parts, each of which waits for replicas after its own write)
/// with one `WAIT` failure for all: once a part's `WAIT` finds too few replicas, the other
/// parts' writes still go (the call's [`Error::NotReplicated`] says the write is on the
/// primary) but their own `WAIT`s are not sent: each would hold the shared connection for its
/// whole timeout, one after the other, to fail the same way.
pub(crate) async fn one_wait_failure<F: Future>(write: F) -> F::Output {
    NOT_REPLICATED
        .scope(std::cell::Cell::new(None), write)
        .await
}

/// Forgets the failure of a `WAIT` this call sent (within [`one_wait_failure`]): a write
/// retried after [`Error::NotReplicated`] waits for its replicas again.
pub(crate) fn forget_wait_failure() {
    let _ = NOT_REPLICATED.try_with(|failed| failed.set(None));
}

/// The failure of a `WAIT` already sent by this call (within [`one_wait_failure`]).
fn not_replicated() -> Result<()> {
    match NOT_REPLICATED.try_with(std::cell::Cell::get) {
        Ok(Some((acked, wanted))) => Err(Error::NotReplicated { acked, wanted }),
        _ => Ok(()),
    }
}

/// The connections a filter takes: any redis-rs async connection that can be cloned and
/// shared (a `MultiplexedConnection`, a `ConnectionManager`, a cluster connection).
pub(crate) trait Conn: ConnectionLike + Clone + Send + Sync {}

impl<C: ConnectionLike + Clone + Send + Sync> Conn for C {}

/// A filter's connection, its call options, and what it has learned about the server: shared
/// by every slot group of the filter (learned once per filter, not once per shard).
#[derive(Debug)]
pub(crate) struct Exec<C> {
    conn: C,
    options: Options,
    /// The filter's kind, for its calls' clocks and metrics.
    kind: &'static str,
    caps: Caps,
    /// One `WAIT` at a time: it blocks the connection that sends it, so concurrent ones (a
    /// sharded write's, one per part) would queue behind each other on the server while each
    /// one's response timeout runs from its sending, and the later ones would time out (and be
    /// retried) instead of reporting how many replicas confirmed.
    wait_turn: tokio::sync::Mutex<()>,
    /// The connections that carried this filter's `WAIT`s, per part key ([`Carriers`]).
    carriers: Carriers,
    /// Whether the servers may evict the filter's keys (asked before the first write).
    eviction: Eviction,
    /// Whether the record's commands were proven before the first recorded write
    /// ([`prove_records`](Exec::prove_records)).
    records_proven: AtomicBool,
    /// What the records' steps share: the server's clock, the ids of answered steps.
    records_shared: std::sync::Arc<once::Shared>,
    /// The bytes of commands in flight at once on the connection.
    gate: Gate,
}

/// What a server (or its ACL) may lack, each with what a filter does instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    /// `BITFIELD_RO` (Redis < 6.2): reads go by `BITFIELD`.
    BitfieldRo,
    /// `EVALSHA_RO` and `EVAL_RO` (Redis < 7): read-only scripts go as `EVALSHA`/`EVAL`.
    EvalRo,
    /// A dense path refused by the ACL (its scratch keys or commands): batches go `to` the
    /// per-item commands.
    Merge {
        from: &'static str,
        to: &'static str,
    },
    /// Scripts refused by the ACL, for exact answers across retries: writes go as commands,
    /// without a record of their answers.
    Exact,
}

impl Cap {
    fn flag(self, caps: &Caps) -> &AtomicBool {
        match self {
            Cap::BitfieldRo => &caps.no_bitfield_ro,
            Cap::EvalRo => &caps.no_eval_ro,
            Cap::Merge { .. } => &caps.no_merge,
            Cap::Exact => &caps.no_exact,
        }
    }

    /// Whether `err` says the server (or its ACL) lacks this.
    fn lacking(self, err: &Error) -> bool {
        match (self, err) {
            (Cap::BitfieldRo, Error::Redis(err)) => {
                is_unknown_command(err) || lacks_bitfield_ro(err)
            }
            (Cap::EvalRo, Error::Redis(err)) => is_unknown_command(err),
            (Cap::Merge { .. }, Error::NoPermission(_)) => true,
            (Cap::Exact, err) => err.refuses_record(),
            _ => false,
        }
    }

    /// What is given up, what is used instead, and why.
    fn describe(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Cap::BitfieldRo => ("BITFIELD_RO", "BITFIELD", "unknown command (Redis < 6.2)"),
            Cap::EvalRo => ("EVAL_RO", "EVAL", "unknown command (Redis < 7)"),
            Cap::Merge { from, to } => (
                from,
                to,
                "the ACL refused it (its scratch keys or its commands)",
            ),
            Cap::Exact => (
                "exact answers across retries",
                "writes without a record: after a retry an add may answer \"not new\" for an \
                 item it added, and a counting write may repeat",
                "the ACL refused the recording script (EVALSHA or its keys)",
            ),
        }
    }
}

/// What a filter has learned its server (and its ACL) lacks: shared by all its parts.
#[derive(Debug, Default)]
struct Caps {
    no_bitfield_ro: AtomicBool,
    no_merge: AtomicBool,
    no_eval_ro: AtomicBool,
    no_exact: AtomicBool,
    /// The ACL refuses `CLIENT ID` ([`Exec::confirm`]).
    no_client_id: AtomicBool,
}

/// Which connection carried each part's `WAIT`s: the last `CLIENT ID` seen with one, and how
/// many times that changed (a reconnect, a failover).
#[derive(Debug, Default)]
struct Carriers(std::sync::Mutex<std::collections::HashMap<String, (i64, u64)>>);

/// A part's connection changes counted when a write step began ([`Exec::carrier`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Carrier(u64);

impl Carriers {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (i64, u64)>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The changes counted so far for `key`.
    fn now(&self, key: &str) -> Carrier {
        Carrier(self.lock().get(key).map_or(0, |&(_, changes)| changes))
    }

    /// Notes that a `WAIT` for `key` went on the connection `id`; whether the connection is
    /// the one of the write begun under `since`: no change seen since. (The first `WAIT` of a
    /// part only learns its connection.)
    fn still(&self, key: &str, since: Carrier, id: i64) -> bool {
        let mut carriers = self.lock();
        let entry = carriers.entry(key.to_owned()).or_insert((id, 0));
        if entry.0 != id {
            *entry = (id, entry.1 + 1);
        }
        entry.1 == since.0
    }
}

impl<C> Exec<C> {
    pub(crate) fn new(conn: C, options: Options, kind: &'static str) -> Self {
        Exec {
            conn,
            options,
            kind,
            caps: Caps::default(),
            wait_turn: tokio::sync::Mutex::new(()),
            carriers: Carriers::default(),
            eviction: Eviction::new(options.accept_eviction),
            records_proven: AtomicBool::new(false),
            records_shared: Default::default(),
            gate: Gate::default(),
        }
    }

    /// The filter's eviction check.
    pub(crate) fn eviction(&self) -> &Eviction {
        &self.eviction
    }

    /// The clock of a public call starting now.
    pub(crate) fn clock(&self) -> Clock {
        Clock::start(self.options.timeout, self.kind)
    }

    pub(crate) fn conn(&self) -> &C {
        &self.conn
    }

    pub(crate) fn options(&self) -> Options {
        self.options
    }

    /// A new write step with exact answers across retries ([`once`](super::once)), when the
    /// filter retries, has not turned them off, and its ACL has not refused their script.
    pub(crate) fn step(&self) -> Option<Step> {
        if !self.records() {
            return None;
        }
        let kept = self.eviction.keeps_ttl_keys();
        once::width(self.options.retry)
            .map(|width| Step::new(width, self.records_shared.clone(), kept))
    }

    /// Whether a recorded write should first ask the server's time ([`learn_time`]): never
    /// asked, or long ago.
    ///
    /// [`learn_time`]: Exec::learn_time
    pub(crate) fn time_stale(&self) -> bool {
        self.records() && self.records_shared.clock.stale()
    }

    /// Whether the record's commands need no proving before a write: proven, or not recorded.
    pub(crate) fn records_proven(&self) -> bool {
        !self.records() || self.records_proven.load(Ordering::Acquire)
    }

    /// Before the filter's first recorded write, once: on a server whose scripts cannot ask
    /// the ACL (Redis 6: `lua/once_probe.lua`), the record's commands proven on a key of each
    /// slot group's ring (`groups`: a key of each), so that a user the ACL refuses them writes
    /// without records from the start (a WARN event, as when the ACL refuses the recording
    /// script), rather than recording steps whose record the ACL refuses after their write.
    /// Where scripts can ask the ACL, one round trip says so for every group.
    pub(crate) async fn prove_records(&self, clock: &Clock, groups: &[String]) -> Result<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        if self.records_proven() {
            return Ok(());
        }
        for key in groups {
            let probe = once::probe(key);
            let keys = [probe.as_str()];
            let proven = self
                .retried(clock, || self.script(key, &once::PROBE, &keys, &[]))
                .await;
            match proven {
                // The server's scripts ask the ACL in every recorded step (Redis 7, Valkey):
                // so do the other masters of a cluster, which run the same server.
                Ok(Value::Int(0)) => break,
                Ok(_) => {}
                // The script itself refused (`EVALSHA`, or the ring's keys): the recorded
                // steps meet the same refusal first thing, and go without records from there.
                Err(err) if err.is_command_refusal() => break,
                // One of the record's commands refused: every refusal here is the record's.
                Err(Error::NoPermission(_)) => {
                    self.learn(Cap::Exact, key);
                    break;
                }
                Err(err) => return Err(err),
            }
        }
        self.records_proven.store(true, Ordering::Release);
        Ok(())
    }

    /// Asks the server holding `key` its time (`TIME`, in a script on `key` so that a cluster
    /// routes it there), for the lower bound of a step's first sending that its retries carry
    /// ([`once`](super::once)). A failure is ignored: the retries of steps sent meanwhile find
    /// their outcome unknown unless their record is there.
    pub(crate) async fn learn_time(&self, key: &str)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let reply = self.script(key, &once::TIME, &[key], &[]).await;
        let at = std::time::Instant::now();
        if let Ok(Value::Array(time)) = reply {
            let parts: Vec<u64> = time
                .iter()
                .filter_map(|part| redis::from_redis_value::<u64>(part.clone()).ok())
                .collect();
            if let [secs, micros] = parts[..] {
                self.records_shared
                    .clock
                    .learn(secs * 1_000 + micros / 1_000, at);
            }
        }
    }

    /// Whether write steps record their replies across retries (see [`step`](Exec::step)).
    pub(crate) fn records(&self) -> bool {
        !self.options.inexact_retries
            && self.has(Cap::Exact)
            && !self.options.retry.budget.is_zero()
    }

    /// Whether the server (and its ACL) may have `cap`: not yet found lacking.
    pub(crate) fn has(&self, cap: Cap) -> bool {
        !cap.flag(&self.caps).load(Ordering::Relaxed)
    }

    /// Whether `err` shows the server (or its ACL) lacks `cap`; if so the filter learns it,
    /// once (an INFO event `fallback` naming `key`, and a metric), and the caller goes the
    /// other way, as it will from now on.
    pub(crate) fn lacks(&self, cap: Cap, key: &str, err: &Error) -> bool {
        if !cap.lacking(err) {
            return false;
        }
        self.learn(cap, key);
        true
    }

    /// The filter learns that the server (or its ACL) lacks `cap`: once, an INFO event
    /// `fallback` naming `key` (a WARN one for exact answers) and a metric.
    fn learn(&self, cap: Cap, key: &str) {
        if !cap.flag(&self.caps).swap(true, Ordering::Relaxed) {
            let (from, to, cause) = cap.describe();
            if cap == Cap::Exact {
                tracing::warn!(target: "redbloom", key, from, to, cause, "fallback");
                crate::metrics::fallback(self.kind, from, "inexact");
            } else {
                self.fell_back(key, (from, to, cause), true);
            }
        }
    }

    /// Reports a fallback on `key`: `from` given up for `to` because of `cause`; `learned` for
    /// good (an INFO event `fallback`), or for this batch only (a DEBUG one). Counted either
    /// way (`redbloom_fallbacks_total`).
    pub(crate) fn fell_back(
        &self,
        key: &str,
        (from, to, cause): (&'static str, &'static str, &'static str),
        learned: bool,
    ) {
        macro_rules! event {
            ($level:ident) => {
                tracing::$level!(target: "redbloom", key, from, to, cause, "fallback")
            };
        }
        match learned {
            true => event!(info),
            false => event!(debug),
        }
        crate::metrics::fallback(self.kind, from, to);
    }
}

impl<C> Exec<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// Runs `attempt` under the filter's retry policy and the call's deadline; a
    /// [`Error::WrongType`] gets the type the key holds and the one the filter keeps there.
    pub(crate) async fn retried<T, F, Fut>(&self, clock: &Clock, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        match retry::run(self.options.retry, clock, attempt).await {
            Err(err @ Error::WrongType { .. }) => {
                Err(err.typed(&mut self.conn.clone(), self.kind).await)
            }
            done => done,
        }
    }

    /// Runs one step on the slot group of `key` (the key errors are reported for).
    ///
    /// A cluster client follows `MOVED` only when a single command gets it, not when it comes
    /// inside a batch's replies; the retry would then go to the old node again and again. So
    /// when a command of the batch was moved, one single-key command on `key` makes the client
    /// follow the redirect and reload the slots before the error goes to the retry.
    pub(crate) async fn run(&self, key: &str, tx: &Tx) -> Result<Replies> {
        if let Some(cmd) = tx.single() {
            return Ok(Replies::new(vec![self.query(key, cmd).await?]));
        }
        let turn = self
            .gate
            .enter(&tx.pipeline().cmd_iter().collect::<Vec<_>>())
            .await;
        let replies = tx.pipeline().query_async(&mut self.conn.clone()).await;
        drop(turn);
        match replies {
            Ok(replies) => Ok(Replies::new(replies)),
            Err(err) => {
                let err = Error::from_redis(err, key);
                if err.was_moved() {
                    let _: redis::RedisResult<Value> = redis::cmd("EXISTS")
                        .arg(key)
                        .query_async(&mut self.conn.clone())
                        .await;
                }
                Err(err)
            }
        }
    }

    /// Runs `cmd` on `key`'s slot; a server error reply is an `Err`.
    pub(crate) async fn query<T: FromRedisValue>(&self, key: &str, cmd: &Cmd) -> Result<T> {
        let _turn = self.gate.enter(&[cmd]).await;
        cmd.query_async(&mut self.conn.clone())
            .await
            .map_err(|e| Error::from_redis(e, key))
    }

    /// `cmd`'s reply as the server sent it: an error inside an array stays a value
    /// ([`Value::ServerError`]), where [`query`](Exec::query) would fail the whole reply; an
    /// error as the whole reply is an error.
    pub(crate) async fn query_raw(&self, key: &str, cmd: &Cmd) -> Result<Value> {
        let _turn = self.gate.enter(&[cmd]).await;
        match self.conn.clone().req_packed_command(cmd).await {
            Ok(Value::ServerError(err)) => Err(Error::from_redis(err.into(), key)),
            Ok(value) => Ok(value),
            Err(err) => Err(Error::from_redis(err, key)),
        }
    }

    /// Runs `script` (`EVALSHA`, and `EVAL` after `NOSCRIPT`) on `keys`; errors are reported
    /// for `key`, the filter's bits.
    pub(crate) async fn script(
        &self,
        key: &str,
        script: &LuaScript,
        keys: &[&str],
        args: &[&dyn Arg],
    ) -> Result<Value> {
        self.invoke(key, false, (script, keys, args)).await
    }

    /// Runs a script that only reads (`EVALSHA_RO`, so that replicas may serve it), as plain
    /// `EVALSHA` on servers older than Redis 7, which lack the read-only form.
    pub(crate) async fn script_ro(&self, key: &str, (lua, keys, args): Eval<'_>) -> Result<Value> {
        if self.has(Cap::EvalRo) {
            match self.invoke(key, true, (lua, keys, args)).await {
                Err(err) if self.lacks(Cap::EvalRo, key, &err) => {}
                reply => return reply,
            }
        }
        self.script(key, lua, keys, args).await
    }

    /// `EVALSHA`, and `EVAL` with the source after `NOSCRIPT` (after a restart, a failover or
    /// a `SCRIPT FLUSH`; redis-rs's `Script` loads and retries `EVALSHA`, which a concurrent
    /// `SCRIPT FLUSH` can beat).
    async fn invoke(
        &self,
        key: &str,
        read_only: bool,
        (lua, keys, args): Eval<'_>,
    ) -> Result<Value> {
        let conn = &mut self.conn.clone();
        let by_sha = lua.call(read_only, false, keys, args);
        let _turn = self.gate.enter(&[&by_sha]).await;
        let reply = match by_sha.query_async(conn).await {
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
            {
                lua.call(read_only, true, keys, args)
                    .query_async(conn)
                    .await
            }
            reply => reply,
        };
        reply.map_err(|e| Error::from_redis(e, key))
    }

    /// The mark of the connection that carries writes to `key` now, to take before a write
    /// step and give to [`confirm`](Exec::confirm) after it.
    pub(crate) fn carrier(&self, key: &str) -> Carrier {
        match self.options.replicas {
            Some(_) => self.carriers.now(key),
            None => Carrier(0),
        }
    }

    /// `WAIT` for the replicas the filter asks for, after a write to `key` begun under
    /// `since` ([`carrier`](Exec::carrier)).
    ///
    /// `WAIT` confirms the writes made on the connection that sends it. A connection that
    /// reconnects (a `ConnectionManager`, a cluster's, redbloom's Sentinel connection) may
    /// carry the `WAIT` on another connection than the write, even to another server after a
    /// failover, where it would confirm at once a write the failover dropped. So the `WAIT`
    /// goes with `CLIENT ID`: when the connection changed since the write began, the step
    /// fails as not replicated and its retry writes again (the answers of its first attempt
    /// kept, as after any lost reply).
    pub(crate) async fn confirm(&self, key: &str, engine: Engine, since: Carrier) -> Result<()> {
        let Some((wanted, timeout)) = self.options.replicas else {
            return Ok(());
        };
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        // Alone, WAIT goes to every master of a cluster, which answers the smallest count: a
        // master without replicas would fail every write. Behind a command on the filter's key
        // that changes nothing (a write command, so never routed to a replica), it goes to the
        // key's master, on the connection that carried the write. The command is one the
        // engine needs anyway, so that it needs no other ACL grant.
        let identify = !self.caps.no_client_id.load(Ordering::Relaxed);
        let mut tx = Tx::plain();
        tx.add_unread(self.route(key, engine));
        let id = identify.then(|| tx.add::<i64>(redis::cmd("CLIENT").arg("ID").to_owned()));
        let acked = tx.add::<u32>({
            let mut wait = redis::cmd("WAIT");
            wait.arg(wanted).arg(millis);
            wait
        });
        not_replicated()?;
        let turn = self.wait_turn.lock().await;
        not_replicated()?;
        let mut replies = match self.run(key, &tx).await {
            Err(Error::NoPermission(err)) if identify => {
                // An ACL without CLIENT ID: WAIT alone, as before the check (the switch of a
                // connection between a write and its WAIT goes unseen).
                tracing::warn!(target: "redbloom::fallback", key, error = %err,
                    "CLIENT ID refused by the ACL: WAIT without the check of its connection");
                self.caps.no_client_id.store(true, Ordering::Relaxed);
                drop(turn);
                return Box::pin(self.confirm(key, engine, since)).await;
            }
            replies => replies?,
        };
        let acked = replies.take(acked)?;
        if let Some(id) = id {
            let id = replies.take(id)?;
            if !self.carriers.still(key, since, id) {
                let _ = NOT_REPLICATED.try_with(|failed| failed.set(Some((0, wanted))));
                return Err(Error::NotReplicated { acked: 0, wanted });
            }
        }
        if acked < wanted {
            let _ = NOT_REPLICATED.try_with(|failed| failed.set(Some((acked, wanted))));
            return Err(Error::NotReplicated { acked, wanted });
        }
        Ok(())
    }
}

impl<C> Exec<C> {
    /// A command on `key` that changes nothing, to send first in a pipeline so that the
    /// commands behind it (which name no key, or only read) go to `key`'s master on a
    /// cluster: a write command, never routed to a replica. One that `engine` needs anyway,
    /// so that it needs no other ACL grant: `BITFIELD` without operations, or `EVAL` of
    /// `return 0`.
    pub(crate) fn route(&self, key: &str, engine: Engine) -> redis::Cmd {
        let mut route = match engine {
            Engine::Fast => redis::cmd("BITFIELD"),
            Engine::Scripts => {
                let mut eval = redis::cmd("EVAL");
                eval.arg("return 0").arg(1);
                eval
            }
        };
        route.arg(key);
        route
    }
}

/// The most bytes of commands a filter has in flight at once on its connection: a handful of
/// the largest commands (a batch's commands of [`MAX_OFFSETS_PER_COMMAND`] offsets are about
/// 700 KB each). A response timeout counts the time a command waits on the connection behind
/// the commands sent before it; with this bound, that is the server's time for at most these
/// bytes, not for everything the filter's concurrent batches have queued (the CLI's `load`
/// keeps 8 batches of 4 commands in flight: 22 MB).
///
/// [`MAX_OFFSETS_PER_COMMAND`]: crate::bitfield::MAX_OFFSETS_PER_COMMAND
pub(crate) const IN_FLIGHT_BYTES: usize = 4 << 20;

/// Commands under 1 KiB (single items, reads of a few keys) pass without a turn.
const SMALL: usize = 1 << 10;

/// The bound of [`IN_FLIGHT_BYTES`]: a command (or pipeline) of more waits for its turn
/// before it goes to the connection, where no response timeout runs yet.
#[derive(Debug)]
struct Gate(tokio::sync::Semaphore);

impl Default for Gate {
    fn default() -> Self {
        Gate(tokio::sync::Semaphore::new(IN_FLIGHT_BYTES / SMALL))
    }
}

impl Gate {
    /// Waits until `cmds` may go; their turn ends when the returned permit drops.
    async fn enter(&self, cmds: &[&Cmd]) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let bytes: usize = cmds.iter().map(|cmd| bytes_of(cmd)).sum();
        if bytes < SMALL {
            return None;
        }
        let units = (bytes / SMALL).min(IN_FLIGHT_BYTES / SMALL);
        // Never closed: an error cannot come, and would only let the command go at once.
        self.0.acquire_many(units as u32).await.ok()
    }
}

/// A command's size on the wire, near enough (its arguments' bytes).
fn bytes_of(cmd: &Cmd) -> usize {
    cmd.args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes.len() + 16,
            _ => 16,
        })
        .sum()
}

/// A script call: the script, its keys, its arguments.
pub(crate) type Eval<'a> = (&'a LuaScript, &'a [&'a str], &'a [&'a dyn Arg]);

/// Commands of one batch in flight at once on the connection.
pub(crate) const COMMANDS_IN_FLIGHT: usize = 4;

/// A batch's commands, [`COMMANDS_IN_FLIGHT`] at a time, in order on the connection; every
/// command's answers, in order. Boxed: the compiler cannot yet prove a future held in a stream
/// `Send` for every lifetime it borrows (rust-lang/rust#110338), so the kinds' steps box each
/// command of a batch of several (one allocation per command, not per item).
pub(crate) async fn in_order<T>(
    commands: Vec<futures_util::future::BoxFuture<'_, Result<Vec<T>>>>,
) -> Result<Vec<T>> {
    use futures_util::StreamExt;
    let mut answers = Vec::new();
    let mut all = futures_util::stream::iter(commands).buffered(COMMANDS_IN_FLIGHT);
    while let Some(part) = all.next().await {
        answers.extend(part?);
    }
    Ok(answers)
}

/// A script's error for a server without `BITFIELD_RO` (before Redis 6.2).
fn lacks_bitfield_ro(err: &redis::RedisError) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("unknown") && text.contains("command") && text.contains("bitfield_ro")
        || text.contains("unknown redis command called from")
}

/// A server that does not know a command (`BITFIELD_RO` before Redis 6.2, `EVALSHA_RO` before
/// Redis 7), sent alone or in a pipeline.
fn is_unknown_command(err: &redis::RedisError) -> bool {
    crate::error::server_errors(err)
        .iter()
        .any(|(code, detail)| code == "ERR" && detail.starts_with("unknown command"))
}
