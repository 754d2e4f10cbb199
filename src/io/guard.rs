//! The parameters stored beside a filter (`{KEY}:redbloom:params`): checked once per filter
//! (again after a clear), and for the native layout stored again with every write, so that a
//! client with another size, layout or shard count gets [`Error::ParamsMismatch`] instead of
//! wrong answers.

use super::exec::Exec;
use super::removal::Removal;
use super::tx::{Replies, Slot, Tx};
use crate::error::{Error, Result};
use crate::keys;
use crate::layout::Layout;
use crate::retry::Clock;
use crate::scripts;
use redis::aio::ConnectionLike;
use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// Where a [`Tx`] holds the replies of the guard's step ([`Guard::step`]): its `SET ... NX`,
/// then its `GET`.
#[derive(Debug)]
pub(crate) struct StepSlot {
    set: Slot<Value>,
    get: Slot<Value>,
}

impl StepSlot {
    /// The step's reply as one `SET ... NX GET` gives it: nil when nothing was stored (now
    /// ours is), else what was stored.
    pub(crate) fn take(self, replies: &mut Replies) -> Result<Value> {
        let set = replies.take(self.set)?;
        let stored = replies.take(self.get)?;
        Ok(if set == Value::Nil {
            stored
        } else {
            Value::Nil
        })
    }
}

/// A filter's stored parameters and how they are checked.
#[derive(Debug)]
pub(crate) struct Guard {
    /// The filter's name, for errors.
    name: String,
    /// Where the parameters live (`{name}:redbloom:params`, in the name's slot).
    key: String,
    /// The key whose existence tells bits without parameters (written by another program)
    /// from a new filter: the bits of a one-key filter; the parameters key itself for a
    /// sharded one, whose bits are in other slots.
    bits_key: String,
    fingerprint: String,
    layout: Layout,
    /// The size of the bits key: it holds at most `bits / 8` bytes.
    bits: u64,
    /// Whether bits without stored parameters (a string another program wrote) may be written
    /// into, cleared or given a TTL as a go-zero filter shared with Go.
    shared_with_go: bool,
    checked: AtomicBool,
    /// The length of the bits without stored parameters the last check found (-1: it found
    /// none): reads may go on, writes are checked again (and refused unless
    /// `shared_with_go`).
    foreign: AtomicI64,
    /// The ACL refused the check's script (go-zero's layout goes without it).
    unchecked: AtomicBool,
    /// A sharded filter's step stored the parameters again (after another client's clear or
    /// an expiry): its parts are to be made again ([`restored`](Guard::restored)).
    restored: AtomicBool,
    /// Whether the bits key is made (an empty string) in the step that stores the parameters
    /// of a filter of one key, so that it exists whenever they do (SPEC.md §3: lost data is an
    /// error).
    keeps_bits: bool,
}

/// Why [`clear`](crate::RedisBloom::clear) or another checked step refused: the server's
/// evidence, compared by [`Guard::refusal`].
#[derive(Debug)]
pub(crate) enum Evidence {
    /// The stored parameters (`None`: bits without any).
    Stored(Option<String>),
    /// The bits' length in bytes.
    Length(i64),
    /// A string of this many bytes without stored parameters, refused for a write.
    Foreign(i64),
}

impl Guard {
    /// The guard of the filter `name` over `shards` parts, whose parameters are `fingerprint`
    /// and whose bits key (of `layout`) holds at most `bits` bits. Its parameters live beside it,
    /// `{name}:redbloom:params`: for a filter of one key, in its slot, the bare key telling a
    /// new filter from bits without parameters; for a sharded one, in a slot of their own, the
    /// parameters key itself telling a new filter (the shards are in other slots, and the bare
    /// name is not the filter's).
    pub(crate) fn of(
        name: &str,
        shards: u32,
        fingerprint: String,
        (layout, bits): (Layout, u64),
    ) -> Self {
        let params = keys::sidecar(name, "redbloom:params");
        let bits_key = match shards {
            0 | 1 => name.to_owned(),
            _ => params.clone(),
        };
        Guard {
            name: name.to_owned(),
            key: params,
            bits_key,
            fingerprint,
            layout,
            bits,
            shared_with_go: false,
            checked: AtomicBool::new(false),
            foreign: AtomicI64::new(-1),
            unchecked: AtomicBool::new(false),
            restored: AtomicBool::new(false),
            keeps_bits: false,
        }
    }

    /// The same guard, making the bits key of a filter of one key when it stores the
    /// parameters (`keeps`).
    pub(crate) fn keeps_bits(mut self, keeps: bool) -> Self {
        self.keeps_bits = keeps && self.bits_key != self.key;
        self
    }

    /// The same guard, taking bits without stored parameters for a go-zero filter shared with
    /// Go when `shared` (they are read either way).
    pub(crate) fn shared_with_go(mut self, shared: bool) -> Self {
        self.shared_with_go = shared;
        self
    }

    /// Whether bits without stored parameters may be written as a go-zero filter: when the
    /// filter says it is shared with Go, or when the ACL refused its check (it then stores no
    /// parameters, and cannot tell its own bits from Go's).
    pub(crate) fn writes_foreign_strings(&self) -> bool {
        self.layout == Layout::GoZero
            && (self.shared_with_go || self.unchecked.load(Ordering::Acquire))
    }

    /// The length of the bits without stored parameters that the last check found.
    fn foreign_bytes(&self) -> Option<i64> {
        let bytes = self.foreign.load(Ordering::Acquire);
        (bytes >= 0).then_some(bytes)
    }

    /// `Ok` unless the last check found bits without stored parameters that this filter may
    /// not write (for a step that writes without the check, as an import's swap does).
    pub(crate) fn writable(&self) -> Result<()> {
        match self.foreign_bytes() {
            Some(bytes) => self.compare_foreign(bytes, true),
            None => Ok(()),
        }
    }

    /// The filter's loss: its parameters are stored, its key `key` is gone.
    pub(crate) fn lost(&self, key: &str) -> Error {
        Error::Lost {
            filter: self.name.clone(),
            key: key.to_owned(),
        }
    }

    /// Where the parameters live.
    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    pub(crate) fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Forget the check (after a clear: the next call checks and stores again).
    pub(crate) fn reset(&self) {
        self.checked.store(false, Ordering::Release);
    }

    /// Whether this client has seen its parameters stored (kinds whose scripts check them
    /// leave them out of reads from then on).
    pub(crate) fn is_checked(&self) -> bool {
        self.checked.load(Ordering::Acquire)
    }

    /// This client has seen its parameters stored.
    pub(crate) fn mark_checked(&self) {
        self.checked.store(true, Ordering::Release);
    }

    /// The key whose existence tells bits without parameters from a new filter.
    pub(crate) fn bits_key(&self) -> &str {
        &self.bits_key
    }

    /// What an import's swap checks and stores: for a filter of one key (`inline`), its
    /// parameters beside its bits (none for a go-zero filter that writes bits without them,
    /// as Go's own); for a sharded one, its parameters in their own slot. An imported filter
    /// thus opens again as this client's, not as a string another program wrote.
    pub(crate) fn swap_params(&self, inline: bool) -> Option<crate::snapshot::Params<'_>> {
        if inline && self.writes_foreign_strings() {
            return None;
        }
        Some(crate::snapshot::Params {
            key: &self.key,
            bare: &self.bits_key,
            fingerprint: &self.fingerprint,
        })
    }

    /// A copy that has checked nothing yet.
    pub(crate) fn unchecked(&self) -> Self {
        Guard {
            name: self.name.clone(),
            key: self.key.clone(),
            bits_key: self.bits_key.clone(),
            fingerprint: self.fingerprint.clone(),
            layout: self.layout,
            bits: self.bits,
            shared_with_go: self.shared_with_go,
            checked: AtomicBool::new(false),
            foreign: AtomicI64::new(-1),
            unchecked: AtomicBool::new(false),
            restored: AtomicBool::new(false),
            keeps_bits: self.keeps_bits,
        }
    }

    /// Whether writes carry the guard's step (a native filter with a parameters key).
    pub(crate) fn step_needed(&self) -> bool {
        self.layout == Layout::Native
    }

    /// `SET params FINGERPRINT NX`, then `GET params`, in `tx`, sent with every write of a
    /// native filter: it stores the parameters again when they went away with the bits (a
    /// `clear`, an expiry) and tells when another client has since stored different ones.
    /// (Two commands: `SET ... NX GET` needs Redis 7, and fails on Redis 6.2 as a syntax error.)
    pub(crate) fn step(&self, tx: &mut Tx) -> Option<StepSlot> {
        if self.layout != Layout::Native {
            return None;
        }
        let mut set = redis::cmd("SET");
        set.arg(&self.key).arg(&self.fingerprint).arg("NX");
        Some(StepSlot {
            set: tx.add(set),
            get: tx.add(redis::cmd("GET").arg(&self.key).to_owned()),
        })
    }

    /// The step's reply ([`StepSlot::take`]): nothing was stored (now ours is), or what was
    /// stored must be ours.
    pub(crate) fn check_step(&self, reply: Value) -> Result<()> {
        match reply {
            Value::Nil => Ok(()),
            stored => {
                let stored: String = redis::from_redis_value(stored)
                    .map_err(|e| Error::UnexpectedReply(e.to_string()))?;
                self.compare(Some(stored))
            }
        }
    }

    /// `Ok` when `stored` equals this filter's parameters; `None` means bits without any.
    pub(crate) fn compare(&self, stored: Option<String>) -> Result<()> {
        match stored {
            Some(stored) if stored == self.fingerprint => Ok(()),
            stored => Err(Error::ParamsMismatch {
                key: self.name.clone(),
                stored: stored.unwrap_or_else(|| {
                    "none (the key holds bits written without stored parameters)".to_owned()
                }),
                requested: self.fingerprint.clone(),
            }),
        }
    }

    /// Bits of `bytes` bytes without stored parameters: a native filter never takes them; a
    /// go-zero one reads them when they fit its size, and writes them only when shared with Go.
    fn compare_foreign(&self, bytes: i64, write: bool) -> Result<()> {
        if self.layout == Layout::Native {
            return self.compare(None);
        }
        self.compare_length(bytes)?;
        if write && !self.shared_with_go {
            return Err(Error::ForeignString {
                key: self.name.clone(),
                bytes,
            });
        }
        Ok(())
    }

    /// `Ok` when bits of `bytes` bytes fit this filter's size: longer bits were written by
    /// another program, or by a filter of another size.
    pub(crate) fn compare_length(&self, bytes: i64) -> Result<()> {
        check_length(&self.name, self.bits, bytes, &self.fingerprint)
    }

    /// The mismatch a script's refusal `{"params", STORED}` means, if `reply` is one.
    pub(crate) fn refused(&self, reply: &Value) -> Option<Error> {
        if let Some(key) = refused_lost(reply) {
            return Some(self.lost(&key));
        }
        refused_params(reply).map(|stored| self.refusal(Evidence::Stored(stored)))
    }

    /// The error the server's evidence proves; an `Err` always.
    pub(crate) fn refusal(&self, evidence: Evidence) -> Error {
        let checked = match evidence {
            Evidence::Stored(stored) => self.compare(stored),
            Evidence::Length(bytes) => self.compare_length(bytes),
            Evidence::Foreign(bytes) => self.compare_foreign(bytes, true),
        };
        checked.err().unwrap_or_else(|| {
            Error::UnexpectedReply("a refusal for parameters that match".to_owned())
        })
    }

    /// The parameters check, once per filter (again after a clear); `write` lets it store
    /// them on a new filter.
    pub(crate) async fn ensure<C>(&self, exec: &Exec<C>, write: bool) -> Result<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let refused_before = write && self.foreign_bytes().is_some() && !self.shared_with_go;
        if self.checked.load(Ordering::Acquire) && !refused_before {
            return Ok(());
        }
        let key = &self.key;
        let stored = exec
            .script(
                &self.bits_key,
                &scripts::PARAMS,
                &[key, &self.bits_key],
                &[
                    &self.fingerprint,
                    &(if write { "1" } else { "0" }),
                    &(if self.keeps_bits { "1" } else { "0" }),
                ],
            )
            .await;
        let checked = match (self.layout, stored) {
            // Nothing exists yet, and a read stores nothing: check again next time.
            (_, Ok(Value::BulkString(stored))) if stored.is_empty() => false,
            (_, Ok(stored @ (Value::BulkString(_) | Value::SimpleString(_)))) => {
                let stored: String = redis::from_redis_value(stored)
                    .map_err(|e| Error::UnexpectedReply(e.to_string()))?;
                self.compare(Some(stored))?;
                self.foreign.store(-1, Ordering::Release);
                true
            }
            // go-zero's own filters carry no parameters; their length must fit the size, and
            // only a client that says the filter is shared with Go writes them.
            (Layout::GoZero, Ok(Value::Int(bytes))) => {
                self.compare_length(bytes)?;
                self.foreign.store(bytes, Ordering::Release);
                self.checked.store(true, Ordering::Release);
                return self.compare_foreign(bytes, write);
            }
            (Layout::Native, Ok(Value::Int(_))) => return self.compare(None),
            // A user allowed the bits but not the check's script: go-zero's layout does without.
            (Layout::GoZero, Err(Error::NoPermission(_))) => {
                let fallback = (
                    "parameters check",
                    "no check (go-zero layout)",
                    "the ACL refused the check's script",
                );
                exec.fell_back(&self.name, fallback, true);
                self.unchecked.store(true, Ordering::Release);
                true
            }
            (_, Ok(other)) => {
                return Err(Error::UnexpectedReply(format!(
                    "{other:?} from the parameters check"
                )))
            }
            (_, Err(err)) => return Err(err),
        };
        self.checked.store(checked, Ordering::Release);
        Ok(())
    }

    /// A sharded filter's guard, sent beside each write (its key is in another slot than the
    /// parts'): the parameters are stored again after a clear or an expiry, and another
    /// client's since then are reported, as for a filter of one key.
    pub(crate) async fn beside<C>(&self, exec: &Exec<C>, clock: &Clock) -> Result<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        if !self.step_needed() {
            return Ok(());
        }
        let key = self.key();
        exec.retried(clock, || async {
            let mut tx = Tx::plain();
            let Some(slot) = self.step(&mut tx) else {
                return Ok(());
            };
            let stored = slot.take(&mut exec.run(key, &tx).await?)?;
            if stored == Value::Nil {
                self.restored.store(true, Ordering::Release);
            }
            self.check_step(stored)
        })
        .await
    }

    /// Whether a step beside the parts stored the parameters again, and the parts have not
    /// been made again since ([`parts_made`](Guard::parts_made)).
    pub(crate) fn restored(&self) -> bool {
        self.restored.load(Ordering::Acquire)
    }

    /// The parts were made again after [`restored`](Guard::restored).
    pub(crate) fn parts_made(&self) {
        self.restored.store(false, Ordering::Release);
    }

    /// A sharded filter's `clear` or `expire` of its parameters key (the last step, after the
    /// parts: never the bare name, which may hold someone else's filter).
    pub(crate) async fn remove_stored<C>(
        &self,
        exec: &Exec<C>,
        clock: &Clock,
        how: Removal,
    ) -> Result<()>
    where
        C: ConnectionLike + Clone + Send + Sync,
    {
        let key = self.key();
        let mut cmd = match how {
            Removal::Delete => redis::cmd("DEL"),
            Removal::Expire(_) => redis::cmd("PEXPIRE"),
        };
        cmd.arg(key);
        if let Removal::Expire(millis) = how {
            cmd.arg(millis);
        }
        let _: i64 = exec.retried(clock, || exec.query(key, &cmd)).await?;
        Ok(())
    }
}

/// `Ok` when bits of `bytes` bytes fit a filter of `bits` bits; else the mismatch, for the
/// filter `name` with parameters `requested`. Also for a shard, which has no guard of its own.
pub(crate) fn check_length(name: &str, bits: u64, bytes: i64, requested: &str) -> Result<()> {
    let most = bits.div_ceil(8);
    if u64::try_from(bytes).is_ok_and(|bytes| bytes <= most) {
        return Ok(());
    }
    Err(Error::ParamsMismatch {
        key: name.to_owned(),
        stored: format!("{bytes} bytes of bits (more than the {most} bytes that {bits} bits take)"),
        requested: requested.to_owned(),
    })
}

/// The key a script's refusal `{"lost", KEY}` names (the filter's parameters are stored, its
/// key is gone: nothing was written), if `reply` is one.
pub(crate) fn refused_lost(reply: &Value) -> Option<String> {
    let Value::Array(values) = reply else {
        return None;
    };
    let [Value::BulkString(what), Value::BulkString(key)] = values.as_slice() else {
        return None;
    };
    (what == b"lost").then(|| String::from_utf8_lossy(key).into_owned())
}

/// The stored parameters a script's refusal `{"params", STORED}` names (`Some(None)`: bits
/// without any, which the scripts reply as `""`); `None` when `reply` is not that refusal.
pub(crate) fn refused_params(reply: &Value) -> Option<Option<String>> {
    let Value::Array(values) = reply else {
        return None;
    };
    let [Value::BulkString(what), Value::BulkString(stored)] = values.as_slice() else {
        return None;
    };
    (what == b"params").then(|| {
        let stored = String::from_utf8_lossy(stored).into_owned();
        (!stored.is_empty()).then_some(stored)
    })
}
