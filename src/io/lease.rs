//! A part's lease for dense compare-and-set writes (a growing filter's merge, a counting
//! filter's swap): concurrent writers take it in turn (`SET NX PX`, deleted when the write is
//! done), so that their writes stop failing each other's compare-and-set. Each failure had read
//! the part whole for nothing, and after three a batch went by the per-item script, which held
//! the server for milliseconds per command and made the others' writes fail in turn (two
//! concurrent loads of 1M items into one growing filter took 22 s and 43 s, four 82-143 s,
//! where one alone takes 0.4 s). It only saves work: the compare-and-set keeps writes correct
//! without it, so a lease that cannot be had in [`WAIT_MS`] (held by a live queue of writers,
//! or refused by the ACL) is done without; one left by a writer that died goes in [`LEASE_MS`].
//! One left by a write whose call was dropped (cancelled) is deleted by the next dense write of
//! the same handle before it asks for the lease: else every dense write of the handle would
//! wait for it, and one dropped in turn leave it again.

use crate::error::Result;
use crate::io::exec::{Conn, Exec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a lease lasts at most: long enough for a dense write's read and compare-and-set
/// (about 0.1 s for a batch of 100,000 items), short enough that a writer that died holding
/// it delays the others little.
pub(crate) const LEASE_MS: u64 = 5_000;

/// How long a writer waits for the lease before it goes without.
pub(crate) const WAIT_MS: u64 = 30_000;

/// The longest pause between two polls for a lease held by another writer.
const POLL_MS: u64 = 4;

/// A part's turns at its dense writes: this handle's own batches one at a time (so that they do
/// not make each other's compare-and-set fail), and whether its last [`Lease`] had to be waited
/// for. A writer that waited lets a poll go by before it asks again: else its next batch, ready
/// the moment it gives the lease back, takes it again before the others' polls come, and
/// concurrent loaders finish one after another instead of together (four loads of 2M items:
/// 9.7 to 18 s; BENCHMARKS.md "Levels past 4 MiB").
#[derive(Debug, Default)]
pub(crate) struct Turns {
    /// Held alone by a dense write ([`local`](Self::local)), shared by this handle's other
    /// writes ([`beside`](Self::beside)).
    local: tokio::sync::RwLock<()>,
    waited: AtomicBool,
    /// When a dense write of this handle was dropped holding the lease (it was not given back).
    left: Mutex<Option<Instant>>,
}

impl Turns {
    /// This handle's turn (held through a dense write's read and compare-and-set): once no
    /// other write of this handle is in flight.
    pub(crate) async fn local(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        self.local.write().await
    }

    /// Held by a write of this handle that does not go dense (commands or scripts per item),
    /// shared with the others, never during a dense write of this handle: each would change
    /// what the dense write's compare-and-set compares. Without it a load's last, partial batch
    /// (too small to go dense, so sent by `BITFIELD`) failed the three swaps of the batch
    /// beside it, which then went by `BITFIELD` too (a counting `load` of 200,000 items into
    /// 4.8 MB: all by `BITFIELD`, 1.4-2.1 s, against 0.23 s).
    pub(crate) async fn beside(&self) -> tokio::sync::RwLockReadGuard<'_, ()> {
        self.local.read().await
    }
}

/// The lease at `key`, held or not. Dropped held (its write's call dropped before
/// [`release`](Lease::release), or while its `SET` was unanswered), it is noted in its
/// [`Turns`], for the handle's next dense write to delete.
pub(crate) struct Lease<'a, C> {
    exec: &'a Exec<C>,
    key: &'a str,
    turns: &'a Turns,
    held: bool,
}

impl<C> Drop for Lease<'_, C> {
    fn drop(&mut self) {
        if self.held {
            *self
                .turns
                .left
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
    }
}

impl<'a, C: Conn> Lease<'a, C> {
    /// Waits for the lease at `key` (at most [`WAIT_MS`]), polling every few milliseconds; a
    /// first poll's pause too when `turns`' last lease was waited for.
    pub(crate) async fn take(exec: &'a Exec<C>, key: &'a str, turns: &'a Turns) -> Self {
        let mut lease = Lease {
            exec,
            key,
            turns,
            held: false,
        };
        // This handle's lease, left by a dense write whose call was dropped: given back now
        // (once expired it may be another writer's, which is left alone). Noted until the DEL
        // is answered: this call may be dropped too.
        let left = *turns.left.lock().unwrap_or_else(PoisonError::into_inner);
        if left.is_some_and(|at| at.elapsed() < Duration::from_millis(LEASE_MS)) {
            let del = redis::cmd("DEL").arg(key).to_owned();
            let _: Result<i64> = exec.query(key, &del).await;
        }
        *turns.left.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let set = redis::cmd("SET")
            .arg(key)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(LEASE_MS)
            .to_owned();
        if turns.waited.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
        let start = Instant::now();
        let mut waited = false;
        while start.elapsed() < Duration::from_millis(WAIT_MS) {
            // Held once the SET is sent, for all a drop knows: its reply may be lost with the
            // call.
            lease.held = true;
            match exec.query::<Option<String>>(key, &set).await {
                Ok(Some(_)) => break,
                Ok(None) => {
                    lease.held = false;
                    waited = true;
                    // 1 to 4 ms, so that waiting writers do not poll in step.
                    let jitter = u64::from(start.elapsed().subsec_nanos()) % POLL_MS;
                    tokio::time::sleep(Duration::from_millis(1 + jitter)).await;
                }
                Err(_) => {
                    lease.held = false;
                    break;
                }
            }
        }
        turns.waited.store(waited, Ordering::Relaxed);
        lease
    }

    /// Gives the lease back (when held).
    pub(crate) async fn release(mut self) {
        if self.held {
            let del = redis::cmd("DEL").arg(self.key).to_owned();
            let _: Result<i64> = self.exec.query(self.key, &del).await;
            // Given back (or, when the DEL failed, expiring by itself): not left by a drop.
            self.held = false;
        }
    }
}
