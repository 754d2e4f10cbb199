//! `export`, `import` and `build` (SPEC.md §5): snapshot files of a filter.
//!
//! Files are written to `FILE.partial` and renamed when complete, so that a failed or
//! interrupted export never leaves a file that looks whole at FILE (a file that is cut short
//! is refused by `import` anyway: its end block is missing).

use super::stream::open;
use crate::kinds::CliKind;
use crate::lines::{LineBatches, MAX_ITEM_BYTES};
use crate::output::{Built, Moved};
use anyhow::{bail, Context, Result};
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, ImportMode};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, BufReader};

/// Items per batch read by `build`.
const BUILD_BATCH: usize = 10_000;

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

/// `import [--merge] FILE`.
pub(crate) async fn import<C, K>(bloom: &Bloom<C, K>, path: &Path, merge: bool) -> Result<Moved>
where
    C: ConnectionLike + Clone + Send + Sync,
    K: CliKind,
{
    let started = Instant::now();
    let mode = match merge {
        true => ImportMode::Merge,
        false => ImportMode::Replace,
    };
    let moved = bloom.import(input(path).await?, mode).await;
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
    let mut lines = LineBatches::with_limits(reader, BUILD_BATCH, MAX_ITEM_BYTES, usize::MAX);
    let (mut count, mut new) = (0u64, 0u64);
    for batch in lines.by_ref() {
        let batch = batch.map_err(|e| anyhow::anyhow!(e.describe(&name)))?;
        for item in &batch {
            new += u64::from(offline.add(item));
        }
        count += batch.len() as u64;
    }
    let (output, file) = Output::create(out).await?;
    let written = offline.write_snapshot(file).await?;
    output.done().await?;
    Ok(Built {
        items: count,
        new,
        bytes: written.file_bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}
