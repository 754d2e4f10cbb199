//! `load` and `check`: every line of a file to Redis in batches, in bounded memory, promptly
//! for slow streams, and stopping cleanly on SIGINT or SIGTERM.
//!
//! A reader thread cuts the input into small chunks of items (what its buffer held, at most
//! [`CHUNK_BYTES`]) and hands each over as soon as it is read; the async side assembles the
//! chunks into batches and keeps up to `--pipeline` of them in flight. The bounds, fixed
//! constants rather than flags:
//!
//! - one item: at most [`MAX_ITEM_BYTES`] (64 KiB; see the `lines` module for why), else the
//!   command fails naming the line, after the items before it were sent and acknowledged
//!   (the error says how many);
//! - one batch: at most `--batch` items and [`BATCH_BYTES`] (64 MiB) of items, an item counting
//!   its length plus [`ITEM_OVERHEAD_BYTES`] for its `Vec` and allocation (about 900,000 short
//!   lines: with exact answers across retries a batch into a filter past 4 MiB passes over the
//!   key alone, so fewer, larger batches make fewer passes; at 16 MiB, 1M lines into a 120 MB
//!   filter took 6.8 s against 2.5 s, 10M 50.6 s against 16.9 s);
//! - all items read but not yet acknowledged (in the channel, in the batch being assembled, in
//!   calls awaiting their reply): at most [`IN_FLIGHT_BYTES`] (128 MiB) counted the same way;
//!   the reader waits while that budget is spent (unless nothing is in flight), whatever
//!   `--batch` and `--pipeline` say. With the reader's 1 MiB buffer, one line and one chunk
//!   besides, the CLI's items stay under about 131 MiB; what the library holds per call is the
//!   library's bound. Measured (cli/tests/cli_memory.rs, 300 MiB of 4 KiB lines with `--batch
//!   1000000 --pipeline 1024`): a peak RSS of 165-200 MiB for the whole process, against 333
//!   MiB and growing with the input before these bounds.
//! - a batch that is not full is sent [`FLUSH_AFTER`] (250 ms) after its first item arrived, so
//!   a slow pipe's items reach the filter promptly;
//! - on SIGINT or SIGTERM: reading stops, batches not yet sent are dropped, the calls in flight
//!   get up to [`GRACE`] (5 s; a second signal cuts it short) to be acknowledged, and the summary
//!   counts what was acknowledged. The caller exits 130 (SIGINT) or 143 (SIGTERM).
//!
//! With `--emit` ([`Emit`]) the lines answered as asked go to standard output, in input order,
//! as their batches are answered: each call copies the lines to write into one buffer when it
//! is answered (its items are freed then, as without `--emit`), the calls yield in input order,
//! and a writer thread writes each buffer at once. A buffer keeps its bytes taken from the
//! in-flight budget until written, so a slow reader of the output slows the run down instead
//! of filling memory. The lines of every batch answered are written before the command ends,
//! however it ends; a closed standard output (`EPIPE`) stops the run at once with an error
//! that says how many items were answered.

use super::{count, Op};
use crate::connect::Connection;
use crate::kinds::CliKind;
use crate::lines::{cost, LineBatches, LineError, ITEM_OVERHEAD_BYTES, MAX_ITEM_BYTES};
use crate::progress;
use anyhow::{anyhow, bail, Context, Result};
use futures_util::stream::{FuturesOrdered, StreamExt};
use redbloom::Bloom;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The most bytes of items (see [`cost`]) read but not yet acknowledged.
pub(crate) const IN_FLIGHT_BYTES: usize = 128 << 20;
/// The most bytes of items (see [`cost`]) in one batch (see the module's docs).
pub(crate) const BATCH_BYTES: usize = 64 << 20;
/// The most bytes of items (see [`cost`]) the reader hands over at once.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;
/// How long a batch that is not full waits for more items before it is sent.
pub(crate) const FLUSH_AFTER: Duration = Duration::from_millis(250);
/// How long the calls in flight may take to be acknowledged after SIGINT or SIGTERM.
pub(crate) const GRACE: Duration = Duration::from_secs(5);
/// A `check` answered from a copy of the filter in memory ([`MemoryCopy`]) reads the copy again
/// once it is this old.
pub(crate) const COPY_REFRESH: Duration = Duration::from_secs(10);
/// The largest filter a `check` copies into memory (bytes).
pub(crate) const COPY_MAX_BYTES: u64 = 4 << 30;
/// The smallest filter a `check` copies into memory (bytes): up to this size the library reads
/// the whole filter for a batch in one command (its dense check), as fast as from a copy and
/// at the moment of the batch.
pub(crate) const COPY_MIN_BYTES: u64 = 4 << 20;
/// The reader's buffer (files and standard input).
const READ_BUFFER: usize = 1 << 20;

// A batch one item short of full and a chunk fit the budget together, so the reader never
// waits on a batch that waits for it.
const _: () =
    assert!(BATCH_BYTES + CHUNK_BYTES + MAX_ITEM_BYTES + ITEM_OVERHEAD_BYTES <= IN_FLIGHT_BYTES);

/// Which answered lines a run writes to standard output (`--emit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Emit {
    /// Those answered true: new (and, for a load, those whose answers could not be known:
    /// written at least once), or present.
    Hits,
    /// Those answered false: absent.
    Misses,
}

impl Emit {
    /// Whether a line answered `answer` is written; `unknown`: its answer could not be known.
    fn writes(self, answer: bool, unknown: bool) -> bool {
        match self {
            Emit::Hits => answer || unknown,
            Emit::Misses => !answer,
        }
    }
}

/// A signal that stopped the run: its name and the exit status it calls for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Interrupt {
    pub(crate) signal: &'static str,
    pub(crate) status: u8,
}

/// What a run did: items acknowledged, those answered true, seconds, and how it stopped early.
pub(crate) struct Streamed {
    pub(crate) items: u64,
    pub(crate) hits: u64,
    /// Of a load: items answered "seen" whose answers could not be known
    /// (`redbloom::Loaded::unknown`).
    pub(crate) unknown: u64,
    pub(crate) seconds: f64,
    pub(crate) interrupted: Option<Interrupt>,
    /// Batches still unanswered when the run stopped (they may have been applied).
    pub(crate) abandoned: usize,
}

/// A byte budget shared by the reader thread, which takes, and the calls, which give back.
struct Budget {
    state: Mutex<BudgetState>,
    freed: Condvar,
    limit: usize,
}

struct BudgetState {
    used: usize,
    closed: bool,
}

impl Budget {
    fn new(limit: usize) -> Self {
        Budget {
            state: Mutex::new(BudgetState {
                used: 0,
                closed: false,
            }),
            freed: Condvar::new(),
            limit,
        }
    }

    /// Takes `bytes`, waiting while the budget is spent unless nothing is taken; `false` once
    /// the budget is closed.
    fn take(&self, bytes: usize) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !state.closed && state.used > 0 && state.used + bytes > self.limit {
            state = self
                .freed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.used += bytes;
        !state.closed
    }

    fn give(&self, bytes: usize) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.used = state.used.saturating_sub(bytes);
        self.freed.notify_all();
    }

    /// Wakes and stops the reader for good.
    fn close(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.freed.notify_all();
    }
}

/// Closes the budget when the run ends however it ends, so the reader never waits forever.
struct CloseOnDrop(Arc<Budget>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// What the reader thread hands over.
enum Read {
    /// Items (their cost taken from the budget) and the bytes read so far (for progress).
    Chunk(Vec<Vec<u8>>, u64),
    /// Reading stopped on this error (after the items before it).
    Failed(LineError),
}

/// Items being assembled into, or sent as, one call.
#[derive(Default)]
struct Batch {
    items: Vec<Vec<u8>>,
    cost: usize,
    /// Bytes of input read up to its last item, for progress.
    bytes: u64,
}

/// Sends every line of `file` in batches of up to `batch` items, `pipeline` batches in flight;
/// with `emit`, writes the lines so answered to standard output.
pub(crate) async fn stream_file<K: CliKind>(
    bloom: &Bloom<Connection, K>,
    file: &Path,
    batch: usize,
    pipeline: usize,
    op: Op,
    emit: Option<Emit>,
) -> Result<Streamed> {
    let (reader, size) = open(file)?;
    let name = file.display().to_string();
    let mut signals = Signals::new()?;
    let started = Instant::now();
    let progress = progress::bar(size);
    let budget = Arc::new(Budget::new(IN_FLIGHT_BYTES));
    let _close = CloseOnDrop(budget.clone());
    // With --emit: joined (every line handed over written) however the run ends, see `Out`.
    let mut out = emit.map(|_| Out::start(budget.clone()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Reading runs on its own thread so that it overlaps with the round trips; it is not
    // joined when the run stops early, as it may be waiting on a pipe (the process exits).
    let reader_budget = budget.clone();
    let reader_thread = std::thread::spawn(move || {
        let mut lines =
            LineBatches::with_limits(reader, batch, MAX_ITEM_BYTES, CHUNK_BYTES).eager();
        while let Some(next) = lines.next() {
            let read = match next {
                Ok(items) => {
                    let cost = items.iter().map(|item| cost(item)).sum();
                    if !reader_budget.take(cost) {
                        break;
                    }
                    Read::Chunk(items, lines.bytes_read())
                }
                Err(err) => Read::Failed(err),
            };
            if tx.send(read).is_err() {
                break;
            }
        }
    });

    let done = match op {
        Op::Add => "acknowledged as added",
        Op::Exists => "checked",
        Op::Remove => "acknowledged as removed",
    };
    let copy = MemoryCopy::default();
    let mut copying = false;
    let mut calls = FuturesOrdered::new();
    let mut ready: std::collections::VecDeque<Batch> = Default::default();
    let mut pending = Batch::default();
    let mut pending_since: Option<Instant> = None;
    let mut read_error: Option<LineError> = None;
    let mut eof = false;
    let mut interrupted: Option<(Interrupt, Instant)> = None;
    let (mut items, mut hits, mut unknown) = (0u64, 0u64, 0u64);
    loop {
        if interrupted.is_none() {
            let now = Instant::now();
            while calls.len() < pipeline {
                let due = pending_since.is_some_and(|since| eof || now >= since + FLUSH_AFTER);
                let next = match ready.pop_front() {
                    Some(next) => next,
                    None if due => {
                        pending_since = None;
                        std::mem::take(&mut pending)
                    }
                    None => break,
                };
                let more = !eof || !ready.is_empty() || !pending.items.is_empty();
                copying = copying
                    || (matches!(op, Op::Exists)
                        && more
                        && next.items.len() >= batch
                        && copy_pays(bloom, batch));
                let copy = copying.then_some(&copy);
                calls.push_back(call(bloom, (op, copy), next, &budget, emit));
            }
            if eof && ready.is_empty() && pending_since.is_none() && calls.is_empty() {
                break;
            }
        } else if calls.is_empty() {
            break;
        }
        let flush_at = pending_since
            .filter(|_| interrupted.is_none() && calls.len() < pipeline)
            .map(|since| since + FLUSH_AFTER);
        let reading = interrupted.is_none() && !eof && ready.is_empty();
        tokio::select! {
            interrupt = signals.recv() => {
                if interrupted.is_some() {
                    break;
                }
                interrupted = Some((interrupt, Instant::now() + GRACE));
                budget.close();
                rx.close();
                ready.clear();
                pending = Batch::default();
                pending_since = None;
            }
            Some(Answered { flags, lines, bytes }) = calls.next(), if !calls.is_empty() => {
                let flags = flags.map(|(flags, not_known)| {
                    unknown += not_known;
                    flags
                });
                let flags = flags.map_err(|err| match err {
                    // Refused before anything was written: kept whole, so that the command
                    // names the flags that differ (kinds::mismatch).
                    err @ redbloom::Error::ParamsMismatch { .. } => anyhow!(err),
                    err => {
                        // A timed-out batch may still be applied: only acknowledged items
                        // count.
                        let err = crate::describe(&anyhow!(err));
                        anyhow!("{err} ({items} items {done} before the error)")
                    }
                })?;
                items += flags.len() as u64;
                hits += count(&flags);
                progress.update(bytes, items);
                if let (Some(out), Some(lines)) = (&out, lines) {
                    out.write(lines);
                }
            }
            err = write_failed(&mut out), if out.is_some() => {
                bail!("cannot write to standard output: {err} ({items} items {done} before it)");
            }
            read = rx.recv(), if reading => match read {
                None => eof = true,
                Some(Read::Failed(err)) => {
                    read_error = Some(err);
                    eof = true;
                }
                Some(Read::Chunk(chunk, bytes)) => {
                    for item in chunk {
                        let cost = cost(&item);
                        let full = pending.items.len() >= batch || pending.cost + cost > BATCH_BYTES;
                        if !pending.items.is_empty() && full {
                            ready.push_back(std::mem::take(&mut pending));
                            pending_since = None;
                        }
                        pending.items.push(item);
                        pending.cost += cost;
                        pending_since.get_or_insert_with(Instant::now);
                    }
                    pending.bytes = bytes;
                    if pending.items.len() >= batch || pending.cost >= BATCH_BYTES {
                        ready.push_back(std::mem::take(&mut pending));
                        pending_since = None;
                    }
                }
            },
            () = sleep_until(flush_at), if flush_at.is_some() => {}
            () = sleep_until(interrupted.map(|(_, end)| end)), if interrupted.is_some() => break,
        }
    }
    progress.finish();
    // Every answered batch's lines written, or the error that stopped the writer.
    if let Some(err) = out.take().and_then(Out::finish) {
        bail!("cannot write to standard output: {err} ({items} items {done} before it)");
    }
    if let Some((interrupt, _)) = interrupted {
        return Ok(Streamed {
            items,
            hits,
            unknown,
            seconds: started.elapsed().as_secs_f64(),
            interrupted: Some(interrupt),
            abandoned: calls.len(),
        });
    }
    if let Some(err) = read_error {
        bail!("{} ({items} items before it {done})", err.describe(&name));
    }
    let _ = reader_thread.join();
    Ok(Streamed {
        items,
        hits,
        unknown,
        seconds: started.elapsed().as_secs_f64(),
        interrupted: None,
        abandoned: 0,
    })
}

/// A batch's call, answered.
struct Answered {
    /// One answer per item, and how many answers could not be known (a load's).
    flags: redbloom::Result<(Vec<bool>, u64)>,
    /// With `--emit`: the lines to write, their cost still taken from the budget.
    lines: Option<Lines>,
    /// Bytes of input read up to the batch's last item, for progress.
    bytes: u64,
}

/// Items to write, each with its `\n`: what they take from the budget until written.
struct Lines(Vec<u8>);

/// One batch's call; gives its bytes back to the budget once answered, but for those of the
/// lines it keeps to write (`emit`).
async fn call<K: CliKind>(
    bloom: &Bloom<Connection, K>,
    (op, copy): (Op, Option<&MemoryCopy>),
    batch: Batch,
    budget: &Budget,
    emit: Option<Emit>,
) -> Answered {
    let Batch {
        mut items,
        cost: taken,
        bytes,
    } = batch;
    let known = |flags: redbloom::Result<Vec<bool>>| flags.map(|flags| (flags, 0, Vec::new()));
    let answered = match op {
        // A load's adds go bare where the kind allows (no records): honest counts, cheaper.
        Op::Add => bloom.load_many(&items).await.map(|loaded| {
            let unknown = match (emit, loaded.unknown) {
                (Some(_), 1..) => (0..loaded.answers.len())
                    .map(|i| loaded.is_unknown(i))
                    .collect(),
                _ => Vec::new(),
            };
            (loaded.answers, loaded.unknown, unknown)
        }),
        Op::Exists => match copy {
            Some(copy) => {
                let found;
                (found, items) = copy.check(bloom, items).await;
                known(found)
            }
            None => known(bloom.exists_many(&items).await),
        },
        Op::Remove => known(K::remove_many(bloom, &items).await),
    };
    let lines = match (emit, &answered) {
        (Some(emit), Ok((flags, _, unknown))) => {
            let writes = |i: usize| emit.writes(flags[i], unknown.get(i) == Some(&true));
            let kept = (0..flags.len().min(items.len())).filter(|&i| writes(i));
            let mut text = Vec::with_capacity(kept.clone().map(|i| items[i].len() + 1).sum());
            for i in kept {
                text.extend_from_slice(&items[i]);
                text.push(b'\n');
            }
            Some(Lines(text))
        }
        _ => None,
    };
    // The items are freed here, on the thread that runs the calls, as without --emit: freed
    // by the writer thread, which did not allocate them, they cost malloc 1.5x the CLI's CPU.
    drop(items);
    budget.give(taken - lines.as_ref().map_or(0, |lines| lines.0.len()));
    Answered {
        flags: answered.map(|(flags, unknown, _)| (flags, unknown)),
        lines,
        bytes,
    }
}

/// Whether a `check` is answered from a copy of the filter in memory ([`MemoryCopy`]) from now on:
/// the kind has one, the filter is over [`COPY_MIN_BYTES`] and at most [`COPY_MAX_BYTES`], and
/// a full batch (`batch` items)
/// has about two bits (or more) in each 128 KiB of it, so that checking it in Redis would read most of the
/// filter for each batch (the library's check by ranges) where the copy reads it once.
fn copy_pays<K: CliKind>(bloom: &Bloom<Connection, K>, batch: usize) -> bool {
    let Some((bits, k)) = K::copy_shape(bloom) else {
        return false;
    };
    let ranges = bits.div_ceil(1 << 20);
    let bytes = bits.div_ceil(8);
    (COPY_MIN_BYTES + 1..=COPY_MAX_BYTES).contains(&bytes)
        && batch as u64 * u64::from(k) >= 2 * ranges
}

/// A `check` answered from a copy of the filter's bits in memory ([`CliKind::memory_copy`]),
/// read when the first batch needs it and again once it is [`COPY_REFRESH`] old: every add
/// acknowledged before the command began is found, and adds made while it runs are seen
/// within that time. The batches take turns at the copy (each check uses every core).
#[derive(Default)]
struct MemoryCopy(tokio::sync::Mutex<Option<(redbloom::OfflineBloom, Instant)>>);

impl MemoryCopy {
    /// `items` checked against the copy (read first when there is none or it is due), and
    /// the items back.
    async fn check<K: CliKind>(
        &self,
        bloom: &Bloom<Connection, K>,
        items: Vec<Vec<u8>>,
    ) -> (redbloom::Result<Vec<bool>>, Vec<Vec<u8>>) {
        let mut held = self.0.lock().await;
        let (copy, read_at) = match held.take() {
            Some((copy, at)) if at.elapsed() < COPY_REFRESH => (copy, at),
            // The old copy is dropped before the new one is read: one copy in memory.
            _ => {
                let at = Instant::now();
                match K::memory_copy(bloom).await {
                    Some(Ok(copy)) => (copy, at),
                    Some(Err(err)) => return (Err(err), items),
                    None => return (bloom.exists_many(&items).await, items),
                }
            }
        };
        let checked = tokio::task::spawn_blocking(move || {
            let mut copy = copy;
            let found = copy.exists_batch(&items);
            (copy, items, found)
        })
        .await;
        let (copy, items, found) = match checked {
            Ok(checked) => checked,
            Err(err) => std::panic::resume_unwind(err.into_panic()),
        };
        *held = Some((copy, read_at));
        (Ok(found), items)
    }
}

/// Standard output of a run with `--emit`: a thread that writes the lines handed to it, in
/// order, and gives their cost back to the budget once written.
struct Out {
    to_writer: Option<std::sync::mpsc::Sender<Lines>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// The error that stopped the writer (a closed pipe); `None` once it has ended without one.
    failed: Option<tokio::sync::oneshot::Receiver<std::io::Error>>,
}

impl Out {
    fn start(budget: Arc<Budget>) -> Self {
        let (to_writer, lines) = std::sync::mpsc::channel::<Lines>();
        let (failure, failed) = tokio::sync::oneshot::channel();
        let writer = std::thread::spawn(move || {
            if let Err(err) = write_lines(&lines, &budget) {
                let _ = failure.send(err);
            }
        });
        Out {
            to_writer: Some(to_writer),
            writer: Some(writer),
            failed: Some(failed),
        }
    }

    /// Hands `lines` to the writer (nothing happens once it has failed: the run stops).
    fn write(&self, lines: Lines) {
        if let Some(to_writer) = &self.to_writer {
            let _ = to_writer.send(lines);
        }
    }

    /// Waits until every line handed over is written; the error that stopped the writer, if
    /// one did.
    fn finish(mut self) -> Option<std::io::Error> {
        self.join();
        self.failed.take()?.try_recv().ok()
    }

    fn join(&mut self) {
        self.to_writer = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Drop for Out {
    /// The lines of every answered batch are written however the run ends (an error, a
    /// signal): an item answered new whose line was dropped would never be answered new again.
    fn drop(&mut self) {
        self.join();
    }
}

/// The writer thread: writes the lines it receives to standard output until the run drops its
/// end of the channel, each batch's at once (so that they go out as they are answered), and
/// gives their bytes back to `budget` once written.
fn write_lines(lines: &std::sync::mpsc::Receiver<Lines>, budget: &Budget) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    while let Ok(Lines(text)) = lines.recv() {
        let written = stdout.write_all(&text).and_then(|()| stdout.flush());
        budget.give(text.len());
        written?;
    }
    Ok(())
}

/// The error that stopped the writer; pending while it writes.
async fn write_failed(out: &mut Option<Out>) -> std::io::Error {
    if let Some(failed) = out.as_mut().and_then(|out| out.failed.as_mut()) {
        match failed.await {
            Ok(err) => return err,
            // The writer ended without an error (it panicked): not polled again.
            Err(_) => out.as_mut().map(|out| out.failed.take()),
        };
    }
    std::future::pending().await
}

async fn sleep_until(deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        tokio::time::sleep_until(deadline).await;
    }
}

/// SIGINT and SIGTERM, caught from the start of the run.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    fn new() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            int: signal(SignalKind::interrupt()).context("cannot catch SIGINT")?,
            term: signal(SignalKind::terminate()).context("cannot catch SIGTERM")?,
        })
    }

    #[cfg(not(unix))]
    fn new() -> Result<Self> {
        Ok(Signals {})
    }

    #[cfg(unix)]
    async fn recv(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.int.recv() => Interrupt { signal: "SIGINT", status: 130 },
            _ = self.term.recv() => Interrupt { signal: "SIGTERM", status: 143 },
        }
    }

    #[cfg(not(unix))]
    async fn recv(&mut self) -> Interrupt {
        match tokio::signal::ctrl_c().await {
            Ok(()) => Interrupt {
                signal: "SIGINT",
                status: 130,
            },
            Err(_) => std::future::pending().await,
        }
    }
}

/// The file's reader and size (`None` for standard input and other streams).
pub(super) fn open(path: &Path) -> Result<(Box<dyn BufRead + Send>, Option<u64>)> {
    if path.as_os_str() == "-" {
        let stdin = std::io::BufReader::with_capacity(READ_BUFFER, std::io::stdin());
        return Ok((Box::new(stdin), None));
    }
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_dir() {
        bail!("cannot read {}: it is a directory", path.display());
    }
    let size = meta.is_file().then_some(meta.len());
    Ok((
        Box::new(std::io::BufReader::with_capacity(READ_BUFFER, file)),
        size,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_waits_while_spent_unless_nothing_is_taken() {
        let budget = Arc::new(Budget::new(100));
        assert!(budget.take(250), "alone, a chunk passes whatever its size");
        let taker = {
            let budget = budget.clone();
            std::thread::spawn(move || budget.take(10))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!taker.is_finished(), "waits while the budget is spent");
        budget.give(250);
        assert!(taker.join().unwrap());
        budget.close();
        assert!(!budget.take(1), "closed");
    }
}
