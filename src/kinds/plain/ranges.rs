//! Large batches on keys too large to move whole (over 4 MiB), by ranges of the key
//! ([`Builder::merge_chunk_bytes`](crate::Builder::merge_chunk_bytes)): the batches of one key
//! take turns ([`Queue`], one for adds and one for checks), and a pass (the `merge` module's)
//! serves every batch waiting. docs/design.md, "Merges by ranges", says why and what it costs.
//!
//! **Gathering.** A pass takes every batch waiting for the key (up to
//! [`MAX_PASS_OFFSETS`](dense::MAX_PASS_OFFSETS) offsets), in the order they came, and serves
//! them in one pass over the key, adds as if one after the other. So a CLI `load` with 8
//! batches in flight moves each range once per pass instead of once per batch, and the
//! answers of one handle's concurrent adds are those of sequential adds.

use crate::dense::{self, Grouped};
use crate::error::Result;
use futures_util::future::Either;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::oneshot;

/// Whether a batch's commands set bits or read them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Direction {
    Write,
    Read,
}

/// A pass over one key (the `merge` module's, on a key of bits): whether the offsets waiting
/// pay for one, and the pass itself over the batches taken.
pub(super) trait Pass {
    /// Whether `offsets` offsets pay for a pass over the key.
    fn pays(&self, direction: Direction, offsets: usize) -> bool;

    /// One pass over the key for `batches` (grouped with the same ranges), in order: one
    /// answer per batch.
    async fn run(&self, direction: Direction, batches: &[&Grouped]) -> Result<Vec<Answer>>;
}

/// The batches waiting for a pass over one key, and whose turn it is to make one.
#[derive(Default)]
pub(crate) struct Queue {
    waiting: Mutex<VecDeque<Waiting>>,
    turn: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let waiting = self.lock().len();
        f.debug_struct("Queue").field("waiting", &waiting).finish()
    }
}

/// A batch waiting for a pass, and where its answer goes.
struct Waiting {
    batch: Arc<Grouped>,
    answer: oneshot::Sender<Answer>,
}

/// What a pass tells a batch it took.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Done: for each item, whether it was new (adds) or is present (checks).
    Done(Vec<bool>),
    /// Not done: the batches gathered were too small to pay for a pass over the key, or the
    /// ACL refused the merge. Nothing was written; the batch goes by `BITFIELD`.
    PerItem,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `batch` (adds or checks) by `pass` with whichever batches wait beside it: when
    /// its turn comes, either an earlier pass took it (and answered), or this call makes a pass
    /// with every batch waiting then.
    pub(super) async fn serve(
        &self,
        pass: &impl Pass,
        direction: Direction,
        batch: Arc<Grouped>,
    ) -> Result<Answer> {
        let (answer, mut answered) = oneshot::channel();
        self.lock().push_back(Waiting {
            batch: batch.clone(),
            answer,
        });
        loop {
            // The answer (a pass took the batch) or the turn, whichever comes first: a caller
            // must not wait for the turn to learn its answer (a CLI takes its answers in order).
            let lock = std::pin::pin!(self.turn.lock());
            let _turn = match futures_util::future::select(&mut answered, lock).await {
                Either::Left((Ok(answer), _)) => return Ok(answer),
                // The pass that took it failed, or its caller went away: it goes again, first.
                Either::Left((Err(_), _)) => {
                    let (answer, again) = oneshot::channel();
                    answered = again;
                    self.lock().push_front(Waiting {
                        batch: batch.clone(),
                        answer,
                    });
                    continue;
                }
                Either::Right((turn, _)) => turn,
            };
            // A pass ends (and answers) before it gives up the turn.
            match answered.try_recv() {
                Ok(answer) => return Ok(answer),
                Err(oneshot::error::TryRecvError::Empty) => {}
                Err(oneshot::error::TryRecvError::Closed) => {
                    let (answer, again) = oneshot::channel();
                    answered = again;
                    self.lock().push_front(Waiting {
                        batch: batch.clone(),
                        answer,
                    });
                }
            }
            // Let the batches that are ready to go (a CLI load's others) join this pass, and
            // while those waiting do not yet pay for a pass, wait a little for more: at most a
            // tenth of what their BITFIELD commands would cost the server.
            tokio::task::yield_now().await;
            let pays = |offsets: usize| pass.pays(direction, offsets);
            let started = tokio::time::Instant::now();
            loop {
                let offsets = self.waiting_offsets();
                let patience = dense::gather_wait(offsets);
                if pays(offsets) || started.elapsed() >= patience {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let taken = self.take();
            if taken.is_empty() {
                continue;
            }
            let batches: Vec<&Grouped> = taken.iter().map(|w| &*w.batch).collect();
            let answers = pass.run(direction, &batches).await;
            // On an error the batches taken run again by themselves (and meet it themselves).
            for (waiting, answer) in taken.into_iter().zip(answers?) {
                let _ = waiting.answer.send(answer);
            }
            if let Ok(answer) = answered.try_recv() {
                return Ok(answer);
            }
        }
    }

    /// The offsets of the batches waiting whose callers are still there.
    fn waiting_offsets(&self) -> usize {
        self.lock()
            .iter()
            .filter(|w| !w.answer.is_closed())
            .map(|w| w.batch.offsets())
            .sum()
    }

    /// The batches a pass takes: in the order they came, up to
    /// [`MAX_PASS_OFFSETS`](dense::MAX_PASS_OFFSETS) offsets (at least one batch); those whose
    /// caller went away (a deadline passed) are dropped.
    fn take(&self) -> Vec<Waiting> {
        let mut waiting = self.lock();
        let mut taken = Vec::new();
        let mut offsets = 0;
        while let Some(next) = waiting.front() {
            if next.answer.is_closed() {
                waiting.pop_front();
                continue;
            }
            if !taken.is_empty() && offsets + next.batch.offsets() > dense::MAX_PASS_OFFSETS {
                break;
            }
            offsets += next.batch.offsets();
            taken.extend(waiting.pop_front());
        }
        taken
    }
}
