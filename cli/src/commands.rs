//! Runs one parsed command line against Redis.

mod snapshot;
mod stream;

use crate::args::{Cli, Command, FileArgs};
use crate::bench;
use crate::config;
use crate::connect::{connect, connect_cluster, tracking_client, Connection};
use crate::filter::{Filter, Kind};
use crate::output::{self, print};
use anyhow::Result;
use redbloom::NearCache;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

type Bloom = Filter<Connection>;

/// Checks the flags, connects, runs the command and prints its report; returns the exit status.
pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    // The configuration is checked before any I/O.
    let mut builder = config::builder(&cli)?;
    let kind = match (cli.window.is_some(), cli.counting, cli.growth.is_some()) {
        (true, _, _) => Kind::Window,
        (false, true, _) => Kind::Counting,
        (false, false, true) => Kind::Growing,
        (false, false, false) => Kind::Plain,
    };
    // `build` needs no Redis.
    if let Command::Build { items, out } = &cli.command {
        let built = snapshot::build(builder, kind, items, out).await?;
        match out.as_os_str() == "-" {
            true => output::eprint(&built, cli.json),
            false => print(&built, cli.json),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let timeout = config::timeout(&cli);
    let conn = match &cli.cluster {
        Some(seeds) => {
            Connection::Cluster(connect_cluster(seeds, timeout, cli.read_from_replicas).await?)
        }
        None => {
            let url = cli.url.as_deref().unwrap_or(DEFAULT_URL);
            let server = connect(url, cli.tls_ca.as_deref(), timeout).await?;
            if let Some(refresh) = cli.near_cache {
                // One server: its invalidations tell the copy when to read again. (A cluster
                // node sees only its own keys: there the copy is read every interval.)
                let client = tracking_client(url, cli.tls_ca.as_deref())?;
                builder = builder.near_cache(NearCache::new(refresh).tracking(client));
            }
            Connection::Single(server)
        }
    };
    let bloom = Filter::build(builder, kind, conn)?;
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
            let run = stream_file(&bloom, &args, Op::Add).await?;
            print(
                &output::Loaded {
                    items: run.items,
                    new: run.hits,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
            );
            return Ok(interrupted(&run, "acknowledged as added"));
        }
        Command::Check(args) => {
            let run = stream_file(&bloom, &args, Op::Exists).await?;
            print(
                &output::CheckedFile {
                    items: run.items,
                    present: run.hits,
                    absent: run.items - run.hits,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
            );
            return Ok(interrupted(&run, "checked"));
        }
        Command::Remove { items } => {
            let flags = bloom.remove_many(&raw_items(&items)).await?;
            print(
                &output::Removed {
                    items: flags.len() as u64,
                    removed: count(&flags),
                },
                json,
            );
        }
        Command::Unload(args) => {
            if kind != Kind::Counting {
                anyhow::bail!("unload removes items: only a counting filter can (give --counting)");
            }
            let run = stream_file(&bloom, &args, Op::Remove).await?;
            print(
                &output::Unloaded {
                    items: run.items,
                    removed: run.hits,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
            );
            return Ok(interrupted(&run, "removed"));
        }
        Command::Info => print(&bloom.info().await?, json),
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
        Command::Export { file } => {
            let moved = snapshot::export(&bloom, &file).await?;
            // The file went to standard output: the report goes beside it.
            match file.as_os_str() == "-" {
                true => output::eprint(&moved, json),
                false => print(&moved, json),
            }
        }
        Command::Import { file, merge } => {
            print(&snapshot::import(&bloom, &file, merge).await?, json)
        }
        // Handled before connecting.
        Command::Build { .. } => {}
        Command::Bench(args) => print(&bench::run(bloom, &args, cli.near_cache).await?, json),
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
    Remove,
}

/// Sends every line of the file in batches (see the `stream` module for the bounds).
async fn stream_file(bloom: &Bloom, args: &FileArgs, op: Op) -> Result<stream::Streamed> {
    let batch = match (args.batch, op) {
        (Some(batch), _) => batch as usize,
        (None, Op::Add | Op::Remove) => bloom.bulk_add_batch_size(),
        (None, Op::Exists) => bloom.bulk_check_batch_size(),
    };
    stream::stream_file(bloom, &args.file, batch, args.pipeline as usize, op).await
}

/// Exit status 0, or after SIGINT/SIGTERM a line on stderr and 130/143, so that a script
/// knows the run stopped early and how far it got.
fn interrupted(run: &stream::Streamed, done: &str) -> ExitCode {
    let Some(stop) = run.interrupted else {
        return ExitCode::SUCCESS;
    };
    let abandoned = match run.abandoned {
        0 => String::new(),
        n => format!("; {n} batches in flight were abandoned (they may have been applied)"),
    };
    eprintln!(
        "redbloom: interrupted by {}: {} items {done}{abandoned}",
        stop.signal, run.items
    );
    ExitCode::from(stop.status)
}
