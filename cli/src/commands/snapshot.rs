//! `export`, `import` and `build` (SPEC.md §5): snapshot files of a filter.
//!
//! Files are written to `FILE.partial` and renamed when complete, so that a failed or
//! interrupted export never leaves a file that looks whole at FILE (a file that is cut short
//! is refused by `import` anyway: its end block is missing).

use super::stream::open;
use crate::args::{Cli, Command};
use crate::config;
use crate::kinds::{self, CliKind, Kept, WithKind};
use crate::lines::{LineBatches, MAX_ITEM_BYTES};
use crate::output::{print, BuildTimes, Built, Moved};
use anyhow::{anyhow, bail, Context, Result};
use futures_util::future::LocalBoxFuture;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, ImportMode, SnapshotHeader, SnapshotReader, StoredParams};
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, BufReader, ReadBuf};

/// What a batch of `build` may hold beyond the filter's bits, in bytes: its offsets (4 bytes
/// each, `OfflineBloom::add_batch`) and, twice (the batch set and the one read ahead), its
/// lines; within the 256 MiB over the filter's size that `build` may take, with room for the
/// rest (measured: BENCHMARKS.md "`build` on every core").
const BUILD_OFFSETS_BYTES: usize = 80 << 20;
const BUILD_LINES_BYTES: usize = 56 << 20;

/// Items per batch of `build` for `hashes` bits per item: about a million at k = 20, enough
/// that the batch's bits are set region by region with several offsets per cache line of a
/// large filter.
fn build_batch(hashes: u32) -> usize {
    (BUILD_OFFSETS_BYTES / (4 * hashes.max(1) as usize)).clamp(1 << 16, 1 << 20)
}

/// Where a file goes while it is written, and renames it into place once complete.
struct Output {
    path: PathBuf,
    partial: Option<PathBuf>,
}

impl Output {
    async fn create(path: &Path) -> Result<(Self, Box<dyn AsyncWrite + Unpin + Send>)> {
        if path.as_os_str() == "-" {
            let out = Output {
                path: path.to_owned(),
                partial: None,
            };
            return Ok((out, Box::new(tokio::io::stdout())));
        }
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let file = tokio::fs::File::create(&partial)
            .await
            .with_context(|| format!("cannot create {}", partial.display()))?;
        let out = Output {
            path: path.to_owned(),
            partial: Some(partial),
        };
        Ok((
            out,
            Box::new(tokio::io::BufWriter::with_capacity(1 << 20, file)),
        ))
    }

    /// The file complete: renamed into place.
    async fn done(mut self) -> Result<()> {
        if let Some(partial) = &self.partial {
            tokio::fs::rename(partial, &self.path)
                .await
                .with_context(|| {
                    format!(
                        "cannot rename {} to {}",
                        partial.display(),
                        self.path.display()
                    )
                })?;
        }
        self.partial = None;
        Ok(())
    }
}

impl Drop for Output {
    /// A file left incomplete is removed.
    fn drop(&mut self) {
        if let Some(partial) = &self.partial {
            let _ = std::fs::remove_file(partial);
        }
    }
}

async fn input(path: &Path) -> Result<Box<dyn AsyncRead + Unpin + Send>> {
    if path.as_os_str() == "-" {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            tokio::io::stdin(),
        )));
    }
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    if file.metadata().await.is_ok_and(|m| m.is_dir()) {
        bail!("cannot read {}: it is a directory", path.display());
    }
    Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
}

/// `export FILE`.
pub(crate) async fn export<C, K>(bloom: &Bloom<C, K>, path: &Path) -> Result<Moved>
where
    C: ConnectionLike + Clone + Send + Sync,
    K: CliKind,
{
    let started = Instant::now();
    let (output, out) = Output::create(path).await?;
    let moved = bloom.export(out).await?;
    output.done().await?;
    Ok(Moved {
        key: bloom.key().to_owned(),
        bytes: moved.file_bytes,
        seconds: started.elapsed().as_secs_f64(),
        verb: "exported",
    })
}

/// How long `import` waits for its file's next byte unless `--idle` says (the library's
/// default).
const IDLE: Duration = Duration::from_secs(60);

/// `import [--merge] FILE` (SPEC.md §3, §5): the filter of the kind and parameters the file's
/// header holds, at `key`; the flags given must agree with them (else one line naming the
/// flag, the file's value and the given one, exit 2, nothing written).
pub(crate) async fn import_file(
    cli: &Cli,
    key: String,
    path: &Path,
    merge: bool,
) -> Result<ExitCode> {
    if merge {
        if let (Some(flag), Some(why)) = (kinds::flag_given(cli), kinds::by_flags(cli, NoMerge)) {
            bail!(
                "cannot import {}: --merge cannot go with {flag}: {why}; nothing was imported",
                path.display()
            );
        }
    }
    let idle = match &cli.command {
        Command::Import {
            idle: Some(idle), ..
        } => *idle,
        _ => IDLE,
    };
    let (header, input) = header_of(path, idle)
        .await
        .with_context(|| format!("cannot import {}", path.display()))?;
    let params = StoredParams::from_snapshot(key, &header);
    let work = FromFile {
        cli,
        kept: Kept {
            params: &params,
            file: true,
        },
        input,
        path,
        merge,
    };
    let Some(work) = kinds::by_name(&header.kind, work) else {
        bail!(
            "cannot import {}: the file holds a {} filter, which this version of redbloom does \
             not know; nothing was imported",
            path.display(),
            header.kind
        );
    };
    let status = work?.await;
    status
}

/// Why the kind the flags give refuses `import --merge`, if it does.
struct NoMerge;

impl WithKind for NoMerge {
    type Output = Option<&'static str>;

    fn with<K: CliKind>(self) -> Self::Output {
        K::NO_MERGE
    }
}

/// The filter a snapshot file holds (`kept`), imported from `input` (the whole file).
struct FromFile<'a> {
    cli: &'a Cli,
    kept: Kept<'a>,
    input: Box<dyn AsyncRead + Unpin + Send>,
    path: &'a Path,
    merge: bool,
}

impl<'a> WithKind for FromFile<'a> {
    type Output = Result<LocalBoxFuture<'a, Result<ExitCode>>>;

    fn with<K: CliKind>(self) -> Self::Output {
        let (cli, kept, path) = (self.cli, self.kept, self.path);
        file_agrees::<K>(cli, kept).map_err(|err| {
            anyhow!(
                "cannot import {}: {err}; nothing was imported",
                path.display()
            )
        })?;
        let builder = config::options(cli, K::with_switches(cli, kept.builder::<K>()?))?;
        builder.validate()?;
        Ok(Box::pin(async move {
            let bloom = builder.build(super::open(cli).await?)?;
            print(
                &import(&bloom, self.input, path, self.merge).await?,
                cli.json,
            );
            Ok(ExitCode::SUCCESS)
        }))
    }
}

/// `Ok` when every flag given (kind, shape, size) agrees with the file's filter `kept`; else
/// the line naming the first that does not, with the file's value and the given one.
fn file_agrees<K: CliKind>(cli: &Cli, kept: Kept<'_>) -> Result<()> {
    kinds::kind_agrees::<K>(cli, kept)?;
    K::agrees(cli, kept)?;
    if !kinds::sized(cli) {
        return Ok(());
    }
    let given = K::resized(cli, kept)?.fingerprint()?;
    if given == kept.params.fingerprint() {
        return Ok(());
    }
    Err(kinds::size_differs(cli, kept, &given).unwrap_or_else(|| {
        anyhow!(
            "{} with other parameters than the size flags make ({given}): leave them out to {} \
             ({})",
            kept.made(),
            kept.left_out(),
            kept.shown()
        )
    }))
}

/// The file's header, and the whole file to import: the bytes read to learn the header, then
/// the rest. Gives up when the file gives no byte for `idle` (a stalled pipe).
async fn header_of(
    path: &Path,
    idle: Duration,
) -> Result<(SnapshotHeader, Box<dyn AsyncRead + Unpin + Send>)> {
    let mut recorded = Recorded {
        inner: input(path).await?,
        seen: Vec::new(),
    };
    let opened = tokio::time::timeout(idle, SnapshotReader::open(&mut recorded)).await;
    let header = match opened {
        Err(_) => {
            bail!("no input for {idle:?}: the import stopped waiting, and nothing was written")
        }
        Ok(Err(err)) => return Err(redbloom::Error::Snapshot(err).into()),
        Ok(Ok((_, header))) => header,
    };
    let Recorded { inner, seen } = recorded;
    Ok((header, Box::new(io::Cursor::new(seen).chain(inner))))
}

/// A reader that keeps the bytes read through it (a file's header: at most 64 KiB and a few
/// bytes), so that they can be read again.
struct Recorded<R> {
    inner: R,
    seen: Vec<u8>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Recorded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.seen.extend_from_slice(&buf.filled()[before..]);
        }
        polled
    }
}

/// `import [--merge] FILE`, the file read from `input`.
pub(crate) async fn import<C, K>(
    bloom: &Bloom<C, K>,
    input: Box<dyn AsyncRead + Unpin + Send>,
    path: &Path,
    merge: bool,
) -> Result<Moved>
where
    C: ConnectionLike + Clone + Send + Sync,
    K: CliKind,
{
    let started = Instant::now();
    let mode = match merge {
        true => ImportMode::Merge,
        false => ImportMode::Replace,
    };
    let moved = bloom.import(input, mode).await;
    let moved = moved.with_context(|| format!("cannot import {}", path.display()))?;
    Ok(Moved {
        key: bloom.key().to_owned(),
        bytes: moved.file_bytes,
        seconds: started.elapsed().as_secs_f64(),
        verb: "imported",
    })
}

/// `build ITEMS --out FILE`: no Redis.
pub(crate) async fn build<K: CliKind>(
    builder: Builder<K>,
    items: &Path,
    out: &Path,
) -> Result<Built> {
    let Some(mut offline) = K::offline(builder)? else {
        bail!("build makes plain filters only so far (not with --window, --counting or --growth)");
    };
    let started = Instant::now();
    let (reader, _) = open(items)?;
    let name = items.display().to_string();
    let batch = build_batch(offline.hashes());
    let lines = LineBatches::with_limits(reader, batch, MAX_ITEM_BYTES, BUILD_LINES_BYTES);
    // Lines are read (and split) on a thread of their own while the last batch is hashed and
    // set: one batch read ahead, handed over when the last is done.
    let (batches, read) = std::sync::mpsc::sync_channel(0);
    std::thread::spawn(move || {
        for batch in lines {
            let failed = batch.is_err();
            if batches.send(batch).is_err() || failed {
                break;
            }
        }
    });
    let (mut count, mut new) = (0u64, 0u64);
    let mut spent = BuildTimes::default();
    let mut since = Instant::now();
    let mut lap = |into: &mut f64| {
        let now = Instant::now();
        *into += (now - since).as_secs_f64();
        since = now;
    };
    for batch in read {
        lap(&mut spent.reading);
        let batch = batch.map_err(|e| anyhow::anyhow!(e.describe(&name)))?;
        new += offline.add_batch(&batch);
        count += batch.len() as u64;
        lap(&mut spent.hashing);
    }
    lap(&mut spent.reading);
    let (output, file) = Output::create(out).await?;
    let written = offline.write_snapshot(file).await?;
    output.done().await?;
    lap(&mut spent.writing);
    Ok(Built {
        items: count,
        new,
        bytes: written.file_bytes,
        seconds: started.elapsed().as_secs_f64(),
        spent,
    })
}
