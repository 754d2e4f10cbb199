//! Runs one parsed command line against Redis.

use crate::args::{Cli, Command, FileArgs};
use crate::config;
use crate::connect::{connect, connect_cluster, Connection};
use crate::lines::LineBatches;
use crate::output::{self, print};
use crate::{bench, progress};
use anyhow::{anyhow, bail, Context, Result};
use futures_util::StreamExt;
use redbloom::RedisBloom;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

type Bloom = RedisBloom<Connection>;

/// Checks the flags, connects, runs the command and prints its report; returns the exit status.
pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    // The configuration is checked before any I/O.
    let builder = config::builder(&cli)?;
    let timeout = config::timeout(&cli);
    let conn = match &cli.cluster {
        Some(seeds) => {
            Connection::Cluster(connect_cluster(seeds, timeout, cli.read_from_replicas).await?)
        }
        None => {
            let url = cli.url.as_deref().unwrap_or(DEFAULT_URL);
            Connection::Single(connect(url, cli.tls_ca.as_deref(), timeout).await?)
        }
    };
    let bloom = builder.build(conn)?;
    let json = cli.json;

    match cli.command {
        Command::Add { items } => {
            let flags = bloom.add_many(&raw_items(&items)).await?;
            let new = count(&flags);
            print(
                &output::Added {
                    items: flags.len() as u64,
                    new,
                },
                json,
            );
        }
        Command::Exists { items } => {
            let flags = bloom.exists_many(&raw_items(&items)).await?;
            let present = count(&flags);
            let report = output::Checked {
                items: flags.len() as u64,
                present,
                absent: flags.len() as u64 - present,
            };
            print(&report, json);
            if report.absent > 0 {
                return Ok(ExitCode::from(1));
            }
        }
        Command::Load(args) => {
            let (items, new, seconds) = stream_file(&bloom, &args, Op::Add).await?;
            print(
                &output::Loaded {
                    items,
                    new,
                    seconds,
                },
                json,
            );
        }
        Command::Check(args) => {
            let (items, present, seconds) = stream_file(&bloom, &args, Op::Exists).await?;
            let absent = items - present;
            print(
                &output::CheckedFile {
                    items,
                    present,
                    absent,
                    seconds,
                },
                json,
            );
        }
        Command::Info => print(&output::Info::from(bloom.info().await?), json),
        Command::Clear => print(
            &output::Cleared {
                deleted: bloom.clear().await?,
            },
            json,
        ),
        Command::Expire { seconds } => {
            let set = bloom.expire(Duration::from_secs(seconds)).await?;
            print(
                &output::Expiry {
                    ttl_seconds: set.then_some(seconds),
                },
                json,
            );
        }
        Command::Bench(args) => print(&bench::run(bloom, &args).await?, json),
    }
    Ok(ExitCode::SUCCESS)
}

fn raw_items(items: &[OsString]) -> Vec<Vec<u8>> {
    items.iter().map(os_bytes).collect()
}

#[cfg(unix)]
fn os_bytes(item: &OsString) -> Vec<u8> {
    std::os::unix::ffi::OsStrExt::as_bytes(item.as_os_str()).to_vec()
}

#[cfg(not(unix))]
fn os_bytes(item: &OsString) -> Vec<u8> {
    item.to_string_lossy().into_owned().into_bytes()
}

fn count(flags: &[bool]) -> u64 {
    flags.iter().filter(|&&flag| flag).count() as u64
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Exists,
}

/// Sends every line of the file in batches, `args.pipeline` batches in flight; returns
/// (items, items answered true, seconds).
async fn stream_file(bloom: &Bloom, args: &FileArgs, op: Op) -> Result<(u64, u64, f64)> {
    let (reader, size) = open(&args.file)?;
    let started = Instant::now();
    let progress = progress::bar(size);
    let (tx, mut rx) = tokio::sync::mpsc::channel(args.pipeline as usize * 2);
    let batch = match (args.batch, op) {
        (Some(batch), _) => batch as usize,
        (None, Op::Add) => bloom.bulk_add_batch_size(),
        (None, Op::Exists) => bloom.bulk_check_batch_size(),
    };
    // Reading runs on its own thread so that it overlaps with the round trips.
    let reader_thread = std::thread::spawn(move || {
        let mut batches = LineBatches::new(reader, batch);
        while let Some(next) = batches.next() {
            if tx
                .blocking_send(next.map(|b| (b, batches.bytes_read())))
                .is_err()
            {
                break;
            }
        }
    });
    let file = args.file.display().to_string();
    let calls = futures_util::stream::poll_fn(|cx| rx.poll_recv(cx)).map(|next| {
        let file = &file;
        async move {
            let (items, bytes) = next.with_context(|| format!("cannot read {file}"))?;
            let flags = match op {
                Op::Add => bloom.add_many(&items).await,
                Op::Exists => bloom.exists_many(&items).await,
            };
            Ok::<_, anyhow::Error>((flags, bytes))
        }
    });
    let mut calls = calls.buffered(args.pipeline as usize);
    let (mut items, mut hits) = (0u64, 0u64);
    while let Some(result) = calls.next().await {
        let (flags, bytes) = result?;
        let flags = flags.map_err(|err| {
            // A timed-out batch may still be applied: only acknowledged items are counted.
            let done = match op {
                Op::Add => "acknowledged as added",
                Op::Exists => "checked",
            };
            let err = crate::describe(&anyhow!(err));
            anyhow!("{err} ({items} items {done} before the error)")
        })?;
        items += flags.len() as u64;
        hits += count(&flags);
        progress.update(bytes, items);
    }
    drop(calls);
    progress.finish();
    let _ = reader_thread.join();
    Ok((items, hits, started.elapsed().as_secs_f64()))
}

/// The file's reader and size (`None` for standard input and other streams).
fn open(path: &std::path::Path) -> Result<(Box<dyn std::io::BufRead + Send>, Option<u64>)> {
    if path.as_os_str() == "-" {
        return Ok((Box::new(std::io::BufReader::new(std::io::stdin())), None));
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
        Box::new(std::io::BufReader::with_capacity(1 << 20, file)),
        size,
    ))
}
