//! The window filter's dense path, for batches that outweigh the generations: move bitmaps
//! instead of running a script per item (the plain filter's dense path, `crate::dense`, over
//! every live generation).
//!
//! - **Add**: one transaction reads every declared generation (`GET`), writes the batch's
//!   bitmap to the scratch key, ORs it into the current generation in a script that runs the
//!   window head's checks (parameters, epoch) and keeps the expiry, and deletes the scratch
//!   key. "New" is computed here from the bytes before, exactly as the per-item script would
//!   answer.
//! - **Check**: one pipeline of the head's checks (a read-only script replying the epoch), then
//!   `GETRANGE` of every declared generation in chunks; the live ones are tested here.

use super::{classify, Reply, Window, WINDOW_AT, WINDOW_MERGE};
use crate::dense;
use crate::error::{Error, Result};
use crate::io::exec;
use crate::io::tx::{Slot, Tx};
use crate::retry::Clock;
use crate::scripts::LuaScript;
use redis::aio::ConnectionLike;
use redis::{Cmd, Value};
use std::sync::atomic::Ordering;

/// The most bytes of all live generations together a dense add reads and a dense check
/// reads: one add's transaction holds the server while it copies them (about 1 ms for 4 MiB
/// on the machine of BENCHMARKS.md), and every check in flight holds a copy here.
const MAX_ADD_BYTES: u64 = 16 << 20;
const MAX_READ_BYTES: u64 = dense::MAX_READ_BYTES;

/// A script runs about four times the server's work per bit of a `BITFIELD`: the bitmap pays
/// when the batch's bits outweigh the generations' bytes by a quarter of the plain filter's
/// ratio (`crate::dense::worth_it`).
fn outweighs(bytes: u64, generations: u32, items: usize, hashes: u32) -> bool {
    items as u64 * u64::from(hashes) * 32 >= bytes * u64::from(generations)
}

/// Items per bulk call: twice the batch that makes the dense path pay (so that partial
/// batches pay too) when the generations are small enough for it, else 4,096.
pub(super) fn batch_size(bytes: u64, generations: u32, hashes: u32) -> usize {
    let all = bytes * u64::from(generations);
    if bytes > dense::MAX_BYTES || all > MAX_ADD_BYTES {
        return 4096;
    }
    (all.div_ceil(32 * u64::from(hashes)) * 2).clamp(4096, 1_000_000) as usize
}

impl<C> Window<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// The batch by the dense path when it pays, else `None`; retried unless the caller
    /// retries the whole (`whole`).
    pub(super) async fn dense<T: AsRef<[u8]>>(
        &self,
        clock: &Clock,
        part: &super::Part,
        items: &[T],
        write: bool,
        whole: bool,
    ) -> Result<Option<Vec<bool>>> {
        let geometry = part.geometry;
        let bytes = geometry.max_bytes();
        let all = bytes * u64::from(self.generations);
        let caps = self.exec.caps();
        let pays = outweighs(bytes, self.generations, items.len(), geometry.hashes);
        let fits = match write {
            true => bytes <= dense::MAX_BYTES && all <= MAX_ADD_BYTES,
            false => all <= MAX_READ_BYTES,
        };
        if !pays || !fits || (write && caps.no_merge.load(Ordering::Relaxed)) {
            return Ok(None);
        }
        let offsets = geometry.offsets(items)?;
        let k = geometry.hashes as usize;
        let answers = match write {
            true => {
                let merged = self
                    .step(clock, whole, || self.dense_add(part, &offsets, k))
                    .await;
                match merged {
                    // A user granted the generations but not the scratch key or BITOP: the
                    // same add by the per-item script.
                    Err(Error::NoPermission(_)) => {
                        caps.no_merge.store(true, Ordering::Relaxed);
                        tracing::info!(
                            target: "redbloom",
                            key = %self.key,
                            from = "dense merge",
                            to = "per-item script",
                            cause = "the ACL refused the merge (its scratch key or BITOP)",
                            "fallback"
                        );
                        return Ok(None);
                    }
                    done => done?,
                }
            }
            false => {
                self.step(clock, whole, || self.dense_read(part, &offsets, k))
                    .await?
            }
        };
        Ok(Some(answers))
    }

    /// One attempt of the dense add (again with the server's epoch when the guess was off).
    async fn dense_add(&self, part: &super::Part, offsets: &[u64], k: usize) -> Result<Vec<bool>> {
        let g = self.generations as usize;
        for _ in 0..3 {
            let guess = self.guess();
            let mut keys = part.keys(guess, self.generations, true);
            keys.push(part.scratch.clone());
            let mut tx = Tx::atomic();
            let olds: Vec<Slot<Option<Vec<u8>>>> = keys[..g + 2]
                .iter()
                .map(|key| tx.add(redis::cmd("GET").arg(key).to_owned()))
                .collect();
            tx.add_unread(
                redis::cmd("SET")
                    .arg(&part.scratch)
                    .arg(dense::bitmap(offsets))
                    .to_owned(),
            );
            // EVAL, not EVALSHA: NOSCRIPT cannot be retried inside a transaction.
            let merged: Slot<Value> = tx.add(self.eval("EVAL", &WINDOW_MERGE, &keys, guess, true));
            tx.add_unread(redis::cmd("DEL").arg(&part.scratch).to_owned());
            let mut replies = self.exec.run(&keys[1], &tx).await?;
            let epoch = match self.epoch_from(replies.take(merged)?)? {
                Some(epoch) => epoch,
                None => continue,
            };
            let mut olds = olds
                .into_iter()
                .map(|slot| replies.take(slot))
                .collect::<Result<Vec<_>>>()?;
            let current = self.index(guess, epoch)?;
            let mut new = dense::new_flags(olds[current].take().unwrap_or_default(), offsets, k);
            for old in olds[current + 1..current + g].iter().flatten() {
                for (new, present) in new.iter_mut().zip(dense::present(old, offsets, k)) {
                    *new &= !present;
                }
            }
            return Ok(new);
        }
        Err(clock_moved())
    }

    /// One attempt of the dense check.
    async fn dense_read(&self, part: &super::Part, offsets: &[u64], k: usize) -> Result<Vec<bool>> {
        let g = self.generations as usize;
        for _ in 0..3 {
            let guess = self.guess();
            let keys = part.keys(guess, self.generations, true);
            let mut tx = Tx::plain();
            let by = match self.exec.caps().no_eval_ro.load(Ordering::Relaxed) {
                true => "EVAL",
                false => "EVAL_RO",
            };
            let head: Slot<Value> = tx.add(self.eval(by, &WINDOW_AT, &keys, guess, false));
            let chunks: Vec<dense::Whole> = keys[..g + 2]
                .iter()
                .map(|key| dense::read_whole(&mut tx, key, part.geometry.bits))
                .collect();
            let mut replies = match self.exec.run(&keys[1], &tx).await {
                Err(Error::Redis(err)) if exec::is_unknown_command(&err) && by == "EVAL_RO" => {
                    self.exec.caps().no_eval_ro.store(true, Ordering::Relaxed);
                    tracing::info!(
                        target: "redbloom",
                        key = %self.key,
                        from = "EVAL_RO",
                        to = "EVAL",
                        cause = "unknown command (Redis < 7)",
                        "fallback"
                    );
                    continue;
                }
                replies => replies?,
            };
            let epoch = match self.epoch_from(replies.take(head)?)? {
                Some(epoch) => epoch,
                None => continue,
            };
            let current = self.index(guess, epoch)?;
            let mut present = vec![false; offsets.len() / k];
            for (index, whole) in chunks.into_iter().enumerate() {
                let bytes = whole.take(&mut replies)?;
                if !(current..current + g).contains(&index) || bytes.is_empty() {
                    continue;
                }
                for (present, found) in present.iter_mut().zip(dense::present(&bytes, offsets, k)) {
                    *present |= found;
                }
            }
            return Ok(present);
        }
        Err(clock_moved())
    }

    /// `EVAL` (or `EVAL_RO`) of `script` with its source, the declared `keys` and the head's
    /// arguments.
    fn eval(&self, by: &str, script: &LuaScript, keys: &[String], guess: i64, store: bool) -> Cmd {
        let mut cmd = redis::cmd(by);
        cmd.arg(script.source()).arg(keys.len()).arg(keys);
        for arg in self.head_args(&guess, store) {
            arg.write(&mut cmd);
        }
        cmd
    }

    /// The epoch a `{"at", EPOCH}` reply names; `None` after learning the server's time from
    /// a refused guess.
    fn epoch_from(&self, reply: Value) -> Result<Option<i64>> {
        match classify(reply)? {
            Reply::Done(Value::Array(at)) => match at.as_slice() {
                [Value::BulkString(what), Value::Int(epoch)] if what == b"at" => Ok(Some(*epoch)),
                other => Err(Error::UnexpectedReply(format!("{other:?} for an epoch"))),
            },
            Reply::Done(other) => Err(Error::UnexpectedReply(format!("{other:?} for an epoch"))),
            Reply::Epoch(now) => {
                self.server.learn(now);
                Ok(None)
            }
            Reply::Params(stored) => Err(self.mismatch(stored)),
        }
    }

    /// Where the generation of `epoch` is among the keys declared for `guess`.
    fn index(&self, guess: i64, epoch: i64) -> Result<usize> {
        usize::try_from(guess + 1 - epoch)
            .ok()
            .filter(|&i| i <= 2)
            .ok_or_else(|| Error::UnexpectedReply(format!("epoch {epoch} for a guess of {guess}")))
    }
}

pub(super) fn clock_moved() -> Error {
    Error::UnexpectedReply(
        "the server's clock moved by more than a generation three times in a row".into(),
    )
}
