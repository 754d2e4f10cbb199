//! Exact answers across retries (SPEC.md §3): a write step that may be retried applies and
//! records its reply in one script, under a unique step id, in a ring of hash keys beside the
//! filter (its slot group); a retry of the step reads the record back instead of applying
//! again. So a retried add still says "new" for the items it added, and a retried counting
//! write is applied once.
//!
//! The ring: [`SLOTS`] hashes `…:redbloom:LEN:KEY:once:W.I` per part, for a width of `W`
//! milliseconds ([`width`]: the smallest of [`WIDTHS`] whose ring keeps a record for the retry
//! budget and [`MARGIN`]). Every slot goes in the script's `KEYS`; the script takes the time
//! from the server (`TIME`), so that no client's clock decides anything: the epoch is the
//! server's time divided by `W`, and a record goes in slot `epoch mod SLOTS`. A slot starts
//! (is reset: its older records go) at the first recorded write of the epoch before its own
//! (or of its own, after a quiet spell), with fields `e` (its epoch) and `t` (when it started)
//! and a TTL of `SLOTS × W` set then and never extended, shorter when the filter's key has a
//! shorter one (after `expire`): records go by themselves, whatever the server's memory policy,
//! and at the latest `SLOTS × W` after the last write (`clear` deletes them at once).
//!
//! Records go as soon as they are not needed: once a step's call is answered, its ids travel
//! with the next recorded write to the same part, whose script deletes them ([`Acks`]); a
//! healthy run holds the records of the writes in flight, not of the retry budget. A dense
//! step's large record (its bytes from before) is deleted at once ([`Step::acknowledge`]).
//!
//! A retry that finds no record proves the step was not applied before it applies it: every
//! slot the first attempt could have recorded in (from a lower bound of its sending on the
//! server's clock, [`ServerClock`], to now) must have lived since before it was sent, or be
//! older than its epoch. A slot gone, moved on or unreadable means the record could be gone:
//! the retry fails with [`Error::OutcomeUnknown`] naming the step, and applies nothing. A ring
//! not made at all, or a slot started after the sending (a young ring), may only mean that the
//! first attempt is still on its way (on a connection the client has replaced): the retry is
//! "pending" and asks again until the retry budget is spent ([`Error::settled`]).
//!
//! A record is the step's reply (its answers), or for a dense step that compares and sets (a
//! counting swap, a growing merge) the answers the client computed before it.
//!
//! Only steps that may be retried pay: with no retry budget, or with exact answers turned off
//! ([`Builder::exact_retries`](crate::Builder::exact_retries)), steps go as before.

use crate::error::{Error, Result};
use crate::io::exec::{Conn, Exec};
use crate::io::guard::Guard;
use crate::keys;
use crate::retry::Retry;
use crate::scripts::{lua, once_lua, script, Arg};
use redis::aio::ConnectionLike;
use redis::Value;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Slots in a ring.
pub(crate) const SLOTS: u64 = 10;

/// The ring widths a filter may use, in milliseconds: a ring per width, so that handles with
/// different retry budgets never reset each other's slots early.
const WIDTHS: [u64; 14] = [
    250, 500, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 12_000, 16_000, 24_000, 32_000, 48_000,
    64_000,
];

/// The widths of earlier builds' rings (seconds, 8 slots each, no TTL): deleted by `clear`.
const LEGACY_WIDTHS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// What a record must outlive beyond the retry budget: the last retry's own time in flight.
pub(crate) const MARGIN: Duration = Duration::from_secs(2);

/// The ring width for `retry`, in milliseconds: `None` when steps are never retried (nothing
/// to record). A slot is reset at the earliest in the epoch before its own comes again, so a
/// record lives at least `(SLOTS - 2) × width`.
pub(crate) fn width(retry: Retry) -> Option<u64> {
    if retry.budget.is_zero() {
        return None;
    }
    let need = (retry.budget + MARGIN).as_millis();
    let width = WIDTHS
        .iter()
        .copied()
        .find(|&w| u128::from((SLOTS - 2) * w) >= need)
        .unwrap_or(WIDTHS[WIDTHS.len() - 1]);
    Some(width)
}

/// How long a record is kept at least, for a ring of `width` milliseconds.
#[cfg(test)]
fn kept(width: u64) -> Duration {
    Duration::from_millis((SLOTS - 2) * width)
}

/// Every ring key beside `key` (every width, every slot, and earlier builds' rings), for
/// `clear` and `expire`.
pub(crate) fn all_rings(key: &str) -> Vec<String> {
    let today = WIDTHS
        .iter()
        .flat_map(|&w| (0..SLOTS).map(move |slot| ring(key, w, slot)));
    let legacy = LEGACY_WIDTHS
        .iter()
        .flat_map(|&w| (0..8).map(move |slot| ring(key, w, slot)));
    today.chain(legacy).collect()
}

/// Slot `slot` of the ring of `width` beside a part's key (`Seam::part_keys`, which for a
/// window filter is a prefix ending in `:`).
fn ring(key: &str, width: u64, slot: u64) -> String {
    once_key(key, &format!("{width}.{slot}"))
}

/// The record's key `name` beside `key` (in its slot group): `…:redbloom:once:NAME`.
fn once_key(key: &str, name: &str) -> String {
    let key = key.strip_suffix(':').unwrap_or(key);
    keys::sidecar(key, &format!("redbloom:once:{name}"))
}

/// A key of the pattern of `key`'s ring slots that holds nothing (in `key`'s slot group), on
/// which [`PROBE`] proves the record's commands.
pub(crate) fn probe(key: &str) -> String {
    once_key(key, "probe")
}

/// How long a learned server time serves before it is asked again.
const CLOCK_REFRESH: Duration = Duration::from_secs(60);

/// What this client knows of the server's clock: a `TIME` reply and the moment it arrived.
/// From it, a lower bound of the server's time at any later moment: the reply was made before
/// it arrived, and time passes on the server at least as fast as here, less a drift of 1,000
/// parts per million (NTP slews by 500 at most) and a millisecond of rounding.
#[derive(Debug, Default)]
pub(crate) struct ServerClock(Mutex<Option<(u64, Instant)>>);

impl ServerClock {
    /// Whether the server's time should be asked (never asked, or long ago).
    pub(crate) fn stale(&self) -> bool {
        let known = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        known.is_none_or(|(_, at)| at.elapsed() > CLOCK_REFRESH)
    }

    /// The server said its time was `millis` (since 1970) in a reply that arrived at `at`.
    pub(crate) fn learn(&self, millis: u64, at: Instant) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some((millis, at));
    }

    /// A lower bound of the server's time now, in milliseconds since 1970; 0 when unknown.
    pub(crate) fn floor(&self) -> u64 {
        let known = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((millis, at)) = known else {
            return 0;
        };
        let since = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        (millis + since).saturating_sub(1 + since / 1_000)
    }
}

/// The ids of recorded steps whose calls were answered, per part's ring: the next recorded
/// write to that part carries them, and its script deletes their records.
#[derive(Debug, Default)]
pub(crate) struct Acks(Mutex<HashMap<String, Vec<String>>>);

/// The most ids one write carries.
const ACKS_PER_WRITE: usize = 64;

/// The most ids kept for a part: beyond, the oldest are left to the ring's TTL.
const ACKS_KEPT: usize = 4_096;

impl Acks {
    fn push(&self, ring: String, ids: impl IntoIterator<Item = String>) {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let pending = all.entry(ring).or_default();
        pending.extend(ids);
        if pending.len() > ACKS_KEPT {
            let over = pending.len() - ACKS_KEPT;
            pending.drain(..over);
        }
    }

    /// Up to [`ACKS_PER_WRITE`] ids for `ring`, taken.
    fn take(&self, ring: &str) -> Vec<String> {
        let mut all = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pending) = all.get_mut(ring) else {
            return Vec::new();
        };
        let from = pending.len().saturating_sub(ACKS_PER_WRITE);
        let taken = pending.split_off(from);
        if pending.is_empty() {
            all.remove(ring);
        }
        taken
    }
}

/// What a step shares with its filter: the server's clock and the ids to drop.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) clock: ServerClock,
    acks: Acks,
}

/// One write step across its attempts: its id, its ring's width, and for each of its
/// commands whether it went out before and a lower bound of its first sending on the
/// server's clock. A step of several commands (a batch over
/// [`MAX_OFFSETS_PER_COMMAND`](crate::bitfield::MAX_OFFSETS_PER_COMMAND)) records each under
/// the step's id and the command's index.
#[derive(Debug)]
pub(crate) struct Step {
    id: u64,
    width: u64,
    shared: Arc<Shared>,
    /// The server was found to evict no key with a TTL (the ring's slots have one): a slot
    /// started in its own epoch that proved no recorded write of its epoch came before it is
    /// proof for a retry (lua/once_tail.lua), as it could not have been evicted and made again.
    kept: bool,
    /// Per command: `None` before its first sending, else the server's time (a lower bound)
    /// then, and the part it went to.
    sent: Mutex<Vec<Option<(u64, String)>>>,
    /// Records acknowledged while a `WAIT` behind them may still fail ([`acknowledge`]):
    /// deleted by [`settle`].
    ///
    /// [`acknowledge`]: Step::acknowledge
    /// [`settle`]: Step::settle
    pending: Mutex<Vec<(String, usize)>>,
}

impl Step {
    /// A new step in a ring of `width` milliseconds; `kept` when the servers were found to
    /// evict no key with a TTL.
    pub(crate) fn new(width: u64, shared: Arc<Shared>, kept: bool) -> Self {
        Step {
            id: unique(),
            width,
            shared,
            kept,
            sent: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The ring beside `key` (in `key`'s slot group): its slots in order, every one the script
    /// may touch.
    pub(crate) fn rings(&self, key: &str) -> Vec<String> {
        (0..SLOTS).map(|slot| ring(key, self.width, slot)).collect()
    }

    /// The acknowledgements' key for the ring beside `key`.
    fn acks_key(&self, key: &str) -> String {
        format!("{}/{key}", self.width)
    }

    /// The script's last five arguments for sending command `index` of the step to the ring
    /// beside `key` ([`rings`](Step::rings) of the same `key` among its keys): its id; its
    /// clock (`WIDTH SLOTS FLOOR` and the ids of answered steps whose records go); whether the
    /// command went out before (a retry); "1": a new slot takes the TTL of the script's first
    /// key when shorter (a window filter's script sets it to "0"); and "" (no answers given:
    /// the body replies them).
    pub(crate) fn args(&self, key: &str, index: usize) -> [String; 5] {
        self.args_answering(key, index, String::new())
    }

    /// [`args`](Step::args) of a step whose body compares and sets, replying 1 when it wrote:
    /// `answers` (computed before the write) are replied and recorded instead.
    pub(crate) fn args_answering(&self, key: &str, index: usize, answers: String) -> [String; 5] {
        let (retry, floor) = {
            let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
            if sent.len() <= index {
                sent.resize(index + 1, None);
            }
            match &sent[index] {
                // The last attempt was refused before it ran: this is a first one again.
                Some((floor, _)) if !crate::retry::last_attempt_not_run() => (true, *floor),
                _ => {
                    let floor = self.shared.clock.floor();
                    sent[index] = Some((floor, key.to_owned()));
                    (false, floor)
                }
            }
        };
        let kept = u8::from(self.kept);
        let mut clock = format!("{} {SLOTS} {floor} {kept}", self.width);
        for ack in self.shared.acks.take(&self.acks_key(key)) {
            clock.push(' ');
            clock.push_str(&ack);
        }
        [
            self.id(index),
            clock,
            if retry { "1" } else { "0" }.to_owned(),
            "1".to_owned(),
            answers,
        ]
    }

    /// Whether command `index` went out before (its next sending would be a retry).
    pub(crate) fn sent(&self, index: usize) -> bool {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.get(index).is_some_and(Option::is_some) && !crate::retry::last_attempt_not_run()
    }

    /// Command `index`'s last sending was answered with nothing applied (a refusal: the
    /// server's epoch was not the one guessed, a command the server lacks): its next sending
    /// is a first attempt again.
    pub(crate) fn unsent(&self, index: usize) {
        let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sent) = sent.get_mut(index) {
            *sent = None;
        }
    }

    fn id(&self, index: usize) -> String {
        format!("{:016x}.{index}", self.id)
    }

    /// The record of command `index` (a large one: a dense step's bytes from before) may go,
    /// its reply in hand: deleted now, or, when a `WAIT` for replicas follows the write, once
    /// the step is over ([`settle`](Step::settle)). A `WAIT` that fails sends the command
    /// again with it, and only its record keeps that retry from applying it twice (a counting
    /// filter's counts taken down again, "new" answered "seen").
    pub(crate) async fn acknowledge<C>(&self, exec: &Exec<C>, key: &str, index: usize)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        if exec.options().replicas.is_some() {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.push((key.to_owned(), index));
            return;
        }
        self.forget(exec, key, index).await;
    }

    /// The step is over: `answered` (its call has every reply), its records go with the next
    /// writes to their parts; and the records [`acknowledge`](Step::acknowledge) kept for the
    /// `WAIT` are deleted now. A step that failed leaves its records to the ring's TTL: an
    /// attempt of it may still be on its way to the server.
    pub(crate) async fn settle<C, T>(&self, exec: &Exec<C>, answered: &Result<T>)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        if answered.is_ok() {
            let sent =
                std::mem::take(&mut *self.sent.lock().unwrap_or_else(PoisonError::into_inner));
            let mut by_part: HashMap<String, Vec<String>> = HashMap::new();
            for (index, sent) in sent.into_iter().enumerate() {
                if let Some((_, key)) = sent {
                    by_part.entry(key).or_default().push(self.id(index));
                }
            }
            for (key, ids) in by_part {
                self.shared.acks.push(self.acks_key(&key), ids);
            }
        }
        let pending =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        for (key, index) in pending {
            self.forget(exec, &key, index).await;
        }
    }

    /// Deletes the record of command `index` now, from every slot of its ring (the server's
    /// clock chose the slot): its reply is in hand and the caller never sends the command
    /// again (it keeps the answers). A failure is ignored: the ring's TTL drops it in time.
    pub(crate) async fn forget<C>(&self, exec: &Exec<C>, key: &str, index: usize)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let mut tx = crate::io::tx::Tx::plain();
        for ring in self.rings(key) {
            tx.add_unread(redis::cmd("HDEL").arg(ring).arg(self.id(index)).to_owned());
        }
        let _: Result<_> = exec.run(key, &tx).await;
    }
}

/// One flag per item from a recorded step's reply of `0` and `1` characters.
///
/// # Errors
/// [`Error::UnexpectedReply`] for any other reply.
pub(crate) fn flags(reply: &Value, items: usize) -> Result<Vec<bool>> {
    match reply {
        Value::BulkString(flags) if flags.len() == items => {
            Ok(flags.iter().map(|&flag| flag == b'1').collect())
        }
        _ => Err(Error::UnexpectedReply(format!(
            "{reply:?} for the flags of {items} items"
        ))),
    }
}

/// Answers as a record holds them: `1` for each true, `0` for each false (read back by
/// [`flags`]).
pub(crate) fn answers_text(answers: &[bool]) -> String {
    answers.iter().map(|&a| if a { '1' } else { '0' }).collect()
}

/// The guard's step carried inside a recorded write script (`GET params`, then `SET` when
/// missing, a native filter of one key: lua/once_bitfield.lua, once_merge.lua), so that the write, its
/// guard and its record are one round trip.
#[derive(Clone, Copy)]
pub(crate) struct GuardStep<'a> {
    /// The guard of a filter of one key, when its writes carry one.
    inline: Option<&'a Guard>,
    /// The guard of a sharded filter whose parameters this client has seen stored, for a
    /// write to one of its shards: the shard must exist (SPEC.md §3: a write never makes a lost
    /// part again).
    shard_of: Option<&'a Guard>,
}

impl<'a> GuardStep<'a> {
    /// The step of `guard` (a filter of one key), when its writes carry one.
    pub(crate) fn of(guard: Option<&'a Guard>) -> Self {
        GuardStep {
            inline: guard.filter(|g| g.step_needed()),
            shard_of: None,
        }
    }

    /// The same step, for a shard of the filter whose guard is `shard_of` (when the shard
    /// must exist).
    pub(crate) fn shard_of(self, shard_of: Option<&'a Guard>) -> Self {
        GuardStep { shard_of, ..self }
    }

    /// Whether the write goes to a shard that must exist (its filter's parameters seen stored).
    pub(crate) fn shard_must_exist(self) -> bool {
        self.shard_of.is_some()
    }

    /// The parameters' key, the script's key after its own.
    pub(crate) fn key(self) -> Option<&'a str> {
        self.inline.map(Guard::key)
    }

    /// The client's parameters for the script's arguments; without a step, "1" when the key
    /// must exist already (a shard), else "".
    pub(crate) fn fingerprint(self) -> &'a str {
        match (self.inline, self.shard_of) {
            (Some(guard), _) => guard.fingerprint(),
            (None, Some(_)) => "1",
            (None, None) => "",
        }
    }

    /// The script's reply checked: `{"params", STORED}` (other parameters stored, nothing
    /// written) is the guard's mismatch, `{"lost", KEY}` the filter's loss
    /// ([`Guard::refused`]).
    pub(crate) fn check(self, reply: &Value) -> Result<()> {
        if let Some(mismatch) = self.inline.and_then(|guard| guard.refused(reply)) {
            return Err(mismatch);
        }
        match (self.shard_of, crate::io::guard::refused_lost(reply)) {
            (Some(guard), Some(key)) => Err(guard.lost(&key)),
            _ => Ok(()),
        }
    }
}

/// A 64-bit id unique with high probability across processes: a per-process random key
/// (the standard library's, as `HashMap` seeds itself) hashing a counter.
fn unique() -> u64 {
    static SEED: LazyLock<std::collections::hash_map::RandomState> =
        LazyLock::new(std::collections::hash_map::RandomState::new);
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut hasher = SEED.build_hasher();
    hasher.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

/// A recorded `BITFIELD` step ([`BITFIELD`]): `op` (`"set"`, a plain filter's bits, or
/// `"incr"`, a counting filter's counters) at `offsets`, `k` an item, on `key`, the guard's step
/// in the same script where its writes carry one (one round trip); `index` is the step's
/// command. The items' flags (1 new), as applied now or as an earlier attempt recorded them.
pub(crate) async fn bitfield<C: Conn>(
    exec: &Exec<C>,
    (key, guard): (&str, GuardStep<'_>),
    (op, k): (&str, usize),
    offsets: &[u64],
    (step, index): (&Step, usize),
) -> Result<Vec<bool>> {
    let rings = step.rings(key);
    let mut keys = vec![key];
    keys.extend(guard.key());
    keys.extend(rings.iter().map(String::as_str));
    let fingerprint = guard.fingerprint();
    let [id, epoch, retry, keep, answer] = step.args(key, index);
    let args: [&dyn Arg; 9] = [
        &op,
        &k,
        &fingerprint,
        &offsets,
        &id,
        &epoch,
        &retry,
        &keep,
        &answer,
    ];
    let reply = exec.script(key, &BITFIELD, &keys, &args).await?;
    guard.check(&reply)?;
    flags(&reply, offsets.len() / k.max(1))
}

/// A `BITFIELD` step not recorded ([`BITFIELD_GUARDED`]): of a filter of one key whose guard
/// lives beside it, its parameters stored when missing, compared, and its key proven there; of
/// a shard that must exist, the shard proven there (SPEC.md §3: a write never makes a lost
/// filter again); in the same script as the write.
pub(crate) async fn bitfield_guarded<C: Conn>(
    exec: &Exec<C>,
    (key, guard): (&str, GuardStep<'_>),
    (op, k): (&str, usize),
    offsets: &[u64],
) -> Result<Vec<bool>> {
    let mut keys = vec![key];
    keys.extend(guard.key());
    let fingerprint = guard.fingerprint();
    let args: [&dyn Arg; 4] = [&op, &k, &fingerprint, &offsets];
    let reply = exec.script(key, &BITFIELD_GUARDED, &keys, &args).await?;
    guard.check(&reply)?;
    flags(&reply, offsets.len() / k.max(1))
}

script! {
    /// [`BITFIELD`]'s body alone, not recorded: a native filter of one key's write without a
    /// retry budget, its guard and the check that its key is there in the same script.
    BITFIELD_GUARDED = lua!["bare", "once_bitfield"];
    /// A plain filter's `BITFIELD` set, or a counting filter's increments, recorded.
    BITFIELD = once_lua!(lua!["once_bitfield"]);
    /// A plain filter's dense add (its bytes from before), recorded until acknowledged (a
    /// batch that sets no new bit: 0, nothing written or recorded).
    MERGE = once_lua!(lua!["probe", "once_merge"]);
    /// One range of a plain filter's merge by ranges (its bytes from before), recorded until
    /// acknowledged (a range that sets no new bit: 0, nothing written or recorded).
    MERGE_RANGE = once_lua!(lua!["stage_range", "merge_range"]);
    /// go-zero's set script, recorded (an item seen before: not recorded).
    ADD = once_lua!(quiet(1, 0) lua!["add"]);
    /// go-zero's set script over a batch, recorded (a batch of items seen before: not
    /// recorded).
    ADD_MANY = once_lua!(quiet(1, 0) lua!["add_many"]);
    /// A counting filter's remove, recorded (a step that removed nothing wrote nothing: not
    /// recorded).
    COUNTING_REMOVE = once_lua!(quiet(1, 0) lua!["counting_remove"]);
    /// A counting filter's add-if-absent, recorded (a step that added nothing wrote nothing:
    /// not recorded).
    COUNTING_ADD_ABSENT = once_lua!(quiet(1, 0) lua!["counting_add_absent"]);
    /// Before a filter's first recorded write, on a server without `redis.acl_check_cmd`
    /// (Redis 6): the record's commands proven on [`probe`]'s key (1), or nothing (0: the
    /// steps ask the ACL themselves).
    PROBE = lua!["once_probe"];
    /// Each ring slot of `KEYS` that exists gets the TTL `ARGV[1]` (ms) unless it has a
    /// shorter one: `expire` of the filter, which never extends a slot's.
    EXPIRE = "for _, key in ipairs(KEYS) do local ttl = redis.call('pttl', key) if ttl == -1 or ttl > tonumber(ARGV[1]) then redis.call('pexpire', key, ARGV[1]) end end return 0";
    /// The server's time (`TIME`), on the node of `KEYS[1]`.
    TIME = "return redis.call('time')";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_records_for_the_budget_and_a_margin() {
        assert_eq!(width(Retry::none()), None, "no retry, nothing recorded");
        for secs in [1, 5, 20, 30, 100, 400] {
            let budget = Duration::from_secs(secs);
            let w = width(Retry::for_duration(budget)).unwrap();
            assert!(
                kept(w) >= budget + MARGIN || w == 64_000,
                "{secs} s: width {w}"
            );
            let smaller = WIDTHS.iter().rev().find(|&&s| s < w);
            if let Some(&smaller) = smaller {
                assert!(
                    kept(smaller) < budget + MARGIN,
                    "{secs} s: width {w} not the smallest"
                );
            }
        }
        assert_eq!(
            width(Retry::for_duration(Duration::from_secs(5))),
            Some(1_000)
        );
        // The CLI's default budget: its records go at the latest 40 s after the last write.
        let cli = width(Retry::for_duration(Duration::from_secs(30))).unwrap();
        assert_eq!(cli * SLOTS, 40_000);
    }

    #[test]
    fn steps_have_unique_ids_and_know_their_retries() {
        let shared = Arc::new(Shared::default());
        let (a, b) = (
            Step::new(1_000, shared.clone(), false),
            Step::new(1_000, shared, false),
        );
        assert_ne!(a.args("k", 0)[0], b.args("k", 0)[0]);
        assert_eq!(a.args("k", 3)[2], "0", "command 3's first sending");
        assert_eq!(a.args("k", 3)[2], "1", "command 3 again: a retry");
        assert!(a.args("k", 3)[0].ends_with(".3"));
        assert_eq!(a.args("k", 2)[2], "0", "command 2's first sending");
        assert_eq!(a.args("k", 2)[1], "1000 10 0 0", "no clock known: floor 0");
        let kept = Step::new(1_000, Arc::new(Shared::default()), true);
        assert_eq!(kept.args("k", 0)[1], "1000 10 0 1", "no eviction: kept");
        assert!(a.rings("{f}x")[3].starts_with("{f}:redbloom:4:{f}x:once:1000.3"));
        assert_eq!(a.rings("f").len(), SLOTS as usize);
        assert_eq!(all_rings("f").len(), 14 * 10 + 7 * 8);
        assert!(BITFIELD.source().contains("once_rings") && ADD.source().contains("setbit"));
    }

    #[test]
    fn answered_steps_travel_with_the_next_write_to_their_part() {
        let shared = Arc::new(Shared::default());
        let a = Step::new(1_000, shared.clone(), false);
        let id = a.id(0);
        shared.acks.push(a.acks_key("p"), [id.clone()]);
        let b = Step::new(1_000, shared.clone(), false);
        assert!(!b.args("q", 0)[1].contains(&id), "another part's write");
        let clock = &b.args("p", 1)[1];
        assert!(clock.ends_with(&format!(" {id}")), "{clock}");
        assert!(!b.args("p", 2)[1].contains(&id), "taken once");
    }

    #[test]
    fn the_servers_time_bounds_from_below() {
        let clock = ServerClock::default();
        assert!(clock.stale());
        assert_eq!(clock.floor(), 0);
        clock.learn(1_000_000, Instant::now() - Duration::from_secs(10));
        let floor = clock.floor();
        assert!((1_009_980..=1_010_000).contains(&floor), "{floor}");
        assert!(!clock.stale());
    }
}
