//! Exact answers across retries (SPEC.md §3): a write step that may be retried applies and
//! records its reply in one script, under a unique step id, in a ring of hash keys beside the
//! filter (its slot group); a retry of the step reads the record back instead of applying
//! again. So a retried add still says "new" for the items it added, and a retried counting
//! write is applied once.
//!
//! The ring: [`SLOTS`] hashes `{KEY}:redbloom:once:W.I` per part, for a width of `W` seconds
//! ([`width`]: the smallest power of two from 1 to 64 s that keeps a record for the retry
//! budget and [`MARGIN`]). A step's epoch is its first attempt's time (this client's clock)
//! divided by `W`; it is recorded in slot `epoch mod SLOTS`, whose field `e` holds the slot's
//! epoch. A write into a slot of an older epoch resets it first (the only way records go), so a
//! record lives at least `(SLOTS - 1) × W` seconds and the ring holds at most `SLOTS × W`
//! seconds of records, with no TTL (an eviction policy that spares keys without a TTL spares
//! it) unless the filter's keys have one (after `expire`): then its records go with it. A
//! retry whose slot has moved on to a later epoch may have been applied and lost its record:
//! it fails with [`Error::OutcomeUnknown`] and applies nothing. Clocks that disagree between
//! writers cost availability (more such errors), never a double apply.
//!
//! A record is the step's reply (its answers), or for a dense step that compares and sets (a
//! counting swap, a growing merge) the answers the client computed before it; a large record
//! (a plain filter's bytes from before, a dense step's answers) is deleted once its reply is in
//! hand ([`Step::acknowledge`]).
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
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Slots in a ring.
pub(crate) const SLOTS: u64 = 8;

/// The ring widths a filter may use, in seconds: a ring per width, so that handles with
/// different retry budgets never reset each other's slots early.
const WIDTHS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// What a record must outlive beyond the retry budget: the last retry's own time in flight,
/// and clocks that disagree between writers.
pub(crate) const MARGIN: Duration = Duration::from_secs(2);

/// The ring width for `retry`: `None` when steps are never retried (nothing to record).
pub(crate) fn width(retry: Retry) -> Option<u64> {
    if retry.budget.is_zero() {
        return None;
    }
    let need = (retry.budget + MARGIN).as_secs_f64();
    let width = WIDTHS
        .iter()
        .copied()
        .find(|&w| ((SLOTS - 1) * w) as f64 >= need)
        .unwrap_or(WIDTHS[WIDTHS.len() - 1]);
    Some(width)
}

/// How long a record is kept at least, for a ring of `width` seconds.
#[cfg(test)]
fn kept(width: u64) -> Duration {
    Duration::from_secs((SLOTS - 1) * width)
}

/// Every ring key beside `key` (every width, every slot), for `clear` and `expire`.
pub(crate) fn all_rings(key: &str) -> Vec<String> {
    WIDTHS
        .iter()
        .flat_map(|&w| (0..SLOTS).map(move |slot| ring(key, w, slot)))
        .collect()
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

/// One write step across its attempts: its id, its ring's width and epoch, and which of its
/// commands went out before. A step of several commands (a batch over
/// [`MAX_OFFSETS_PER_COMMAND`](crate::bitfield::MAX_OFFSETS_PER_COMMAND)) records each under
/// the step's id and the command's index.
#[derive(Debug)]
pub(crate) struct Step {
    id: u64,
    width: u64,
    epoch: u64,
    /// Whether command `i` was sent before: its next sending is a retry.
    sent: Mutex<Vec<bool>>,
    /// Records acknowledged while a `WAIT` behind them may still fail ([`acknowledge`]):
    /// deleted by [`settle`].
    ///
    /// [`acknowledge`]: Step::acknowledge
    /// [`settle`]: Step::settle
    pending: Mutex<Vec<(String, usize)>>,
}

impl Step {
    /// A new step in a ring of `width` seconds.
    pub(crate) fn new(width: u64) -> Self {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Step {
            id: unique(),
            width,
            epoch: now / width,
            sent: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The ring slot of this step beside `key` (in `key`'s slot group).
    pub(crate) fn ring(&self, key: &str) -> String {
        ring(key, self.width, self.epoch % SLOTS)
    }

    /// The script's last five arguments for sending command `index` of the step: its id, its
    /// epoch, whether the command went out before (a retry), "1": a new slot takes the TTL of
    /// the script's first key (a window filter's script sets it to "0"), and "" (no answers
    /// given: the body replies them).
    pub(crate) fn args(&self, index: usize) -> [String; 5] {
        self.args_answering(index, String::new())
    }

    /// [`args`](Step::args) of a step whose body compares and sets, replying 1 when it wrote:
    /// `answers` (computed before the write) are replied and recorded instead.
    pub(crate) fn args_answering(&self, index: usize, answers: String) -> [String; 5] {
        let retry = {
            let mut sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
            if sent.len() <= index {
                sent.resize(index + 1, false);
            }
            std::mem::replace(&mut sent[index], true)
        };
        [
            self.id(index),
            self.epoch.to_string(),
            if retry { "1" } else { "0" }.to_owned(),
            "1".to_owned(),
            answers,
        ]
    }

    /// Whether command `index` went out before (its next sending would be a retry).
    pub(crate) fn sent(&self, index: usize) -> bool {
        let sent = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        sent.get(index).copied().unwrap_or(false)
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

    /// Deletes the records [`acknowledge`](Step::acknowledge) kept for the `WAIT`: the step
    /// is over (answered, or failed for good).
    pub(crate) async fn settle<C>(&self, exec: &Exec<C>)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let pending =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        for (key, index) in pending {
            self.forget(exec, &key, index).await;
        }
    }

    /// Deletes the record of command `index` now: its reply is in hand and the caller never
    /// sends the command again (it keeps the answers). A failure is ignored: the ring drops it
    /// in time.
    pub(crate) async fn forget<C>(&self, exec: &Exec<C>, key: &str, index: usize)
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let del = redis::cmd("HDEL")
            .arg(self.ring(key))
            .arg(self.id(index))
            .to_owned();
        let _: Result<i64> = exec.query(key, &del).await;
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
    let ring = step.ring(key);
    let mut keys = vec![key];
    keys.extend(guard.key());
    keys.push(&ring);
    let fingerprint = guard.fingerprint();
    let [id, epoch, retry, keep, answer] = step.args(index);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_records_for_the_budget_and_a_margin() {
        assert_eq!(width(Retry::none()), None, "no retry, nothing recorded");
        for secs in [1, 5, 30, 100, 400] {
            let budget = Duration::from_secs(secs);
            let w = width(Retry::for_duration(budget)).unwrap();
            assert!(kept(w) >= budget + MARGIN, "{secs} s: width {w}");
            if w > 1 {
                assert!(
                    kept(w / 2) < budget + MARGIN,
                    "{secs} s: width {w} not the smallest"
                );
            }
        }
        assert_eq!(width(Retry::for_duration(Duration::from_secs(5))), Some(1));
        assert_eq!(width(Retry::for_duration(Duration::from_secs(30))), Some(8));
    }

    #[test]
    fn steps_have_unique_ids_and_know_their_retries() {
        let (a, b) = (Step::new(1), Step::new(1));
        assert_ne!(a.args(0)[0], b.args(0)[0]);
        assert_eq!(a.args(3)[2], "0", "command 3's first sending");
        assert_eq!(a.args(3)[2], "1", "command 3 again: a retry");
        assert!(a.args(3)[0].ends_with(".3"));
        assert_eq!(a.args(2)[2], "0", "command 2's first sending");
        assert!(a.ring("{f}x").starts_with("{f}:redbloom:4:{f}x:once:1."));
        assert_eq!(all_rings("f").len(), 56);
        assert!(BITFIELD.source().contains("once_ring") && ADD.source().contains("setbit"));
    }
}
