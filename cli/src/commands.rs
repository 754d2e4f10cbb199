//! Runs one parsed command line against Redis.

mod snapshot;
mod stream;

use crate::args::{Cli, Command, FileArgs};
use crate::bench;
use crate::config;
use crate::connect::SentinelAuth;
use crate::connect::{connect, connect_cluster, connect_sentinel, tracking_client, Connection};
use crate::kinds::{self, CliKind, WithKind};
use crate::output::{self, print};
use anyhow::{bail, Result};
use futures_util::future::LocalBoxFuture;
use redbloom::sentinel::SentinelUrl;
use redbloom::{Bloom, Builder, NearCache, StoredParams};
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Checks the flags, connects, opens the filter (from the flags, or as Redis stores it when
/// they give no size), runs the command and prints its report; returns the exit status.
pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    // The configuration is checked before any I/O.
    let key = config::key(&cli)?;
    config::check(&cli)?;
    if matches!(cli.command, Command::Migrate) {
        // Whatever the flags say: the kind and size are those stored under the older names.
        let moved = redbloom::adopt_legacy_names(&mut open(&cli).await?, &key).await?;
        print(&output::Migrated { moved }, cli.json);
        return Ok(ExitCode::SUCCESS);
    }
    if kinds::sized(&cli) {
        return kinds::by_flags(&cli, FromFlags { cli: &cli, key })?.await;
    }
    if matches!(cli.command, Command::Build { .. }) {
        bail!(
            "build makes a filter without Redis: give its size, --bits N or --capacity N --fpr P"
        );
    }
    let conn = open(&cli).await?;
    let stored = StoredParams::read(&mut conn.clone(), &key).await?;
    let Some(stored) = stored else {
        bail!(unstored(&mut conn.clone(), &key).await);
    };
    let kind = stored.kind().to_owned();
    let work = FromStored {
        cli: &cli,
        stored: &stored,
        conn,
    };
    let Some(work) = kinds::by_name(&kind, work) else {
        bail!("{key:?} holds a {kind} filter, which this version of redbloom does not know");
    };
    let status = work?.await;
    status
}

/// Why a filter with no stored parameters cannot be opened by its key alone, by what the key
/// holds (its `TYPE`: a read of the filter's own key).
async fn unstored(conn: &mut Connection, key: &str) -> String {
    let found: String = redis::cmd("TYPE")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap_or_default();
    match found.as_str() {
        found if redbloom::MODULE_KEY_TYPES.contains(&found) => format!(
            "{key:?} holds a module filter (BF.*) that another client made, which stores no \
             parameters: open it with --module and its size, --capacity N --fpr P (BF.INFO \
             names its capacity)"
        ),
        "none" => format!(
            "no filter at {key:?} (the key holds nothing, and no parameters are stored beside \
             it): give the size of one to make, --bits N, or --capacity N with --fpr P (and the \
             flags of its kind)"
        ),
        "string" | "" => format!(
            "{key:?} holds no filter with stored parameters (a go-zero filter made by Go stores \
             none): give its size, --bits N, or --capacity N with --fpr P (and the flags of its \
             kind)"
        ),
        other => format!("key {key:?} holds a {other}, not a string, so it is not a Bloom filter"),
    }
}

/// A filter of the kind and size the flags give.
struct FromFlags<'a> {
    cli: &'a Cli,
    key: String,
}

impl<'a> WithKind for FromFlags<'a> {
    type Output = Result<LocalBoxFuture<'a, Result<ExitCode>>>;

    fn with<K: CliKind>(self) -> Self::Output {
        let cli = self.cli;
        let builder = K::from_flags(cli, self.key)?.shards(cli.shards);
        let builder = config::options(cli, builder)?;
        builder.validate()?;
        Ok(Box::pin(async move {
            if let Command::Build { items, out } = &cli.command {
                return build(cli, builder, items, out).await;
            }
            let conn = open(cli).await?;
            let done = execute(cli, tracked(cli, builder)?, conn.clone()).await;
            match done {
                Err(err) if kinds::is_mismatch(&err) => {
                    let key = config::key(cli)?;
                    let stored = StoredParams::read(&mut conn.clone(), &key).await;
                    Err(match stored {
                        Ok(Some(stored)) => kinds::mismatch::<K>(cli, &stored, err),
                        _ => err,
                    })
                }
                done => done,
            }
        }))
    }
}

/// A filter as Redis stores it: the flags given must agree.
struct FromStored<'a> {
    cli: &'a Cli,
    stored: &'a StoredParams,
    conn: Connection,
}

impl<'a> WithKind for FromStored<'a> {
    type Output = Result<LocalBoxFuture<'a, Result<ExitCode>>>;

    fn with<K: CliKind>(self) -> Self::Output {
        let (cli, stored) = (self.cli, self.stored);
        if kinds::flag_given(cli).is_some() && !K::chosen(cli) {
            return Err(kinds::other_kind(cli, stored));
        }
        K::agrees(cli, stored)?;
        let builder = config::options(cli, stored.builder::<K>()?)?;
        builder.validate()?;
        let builder = tracked(cli, builder)?;
        Ok(Box::pin(execute(cli, builder, self.conn)))
    }
}

/// `build`: a plain filter without Redis.
async fn build<K: CliKind>(
    cli: &Cli,
    builder: Builder<K>,
    items: &std::path::Path,
    out: &std::path::Path,
) -> Result<ExitCode> {
    let built = snapshot::build(builder, items, out).await?;
    match out.as_os_str() == "-" {
        true => output::eprint(&built, cli.json),
        false => print(&built, cli.json),
    }
    Ok(ExitCode::SUCCESS)
}

/// The connection the flags name: a cluster's, or one server's.
async fn open(cli: &Cli) -> Result<Connection> {
    let timeout = config::timeout(cli);
    Ok(match &cli.cluster {
        Some(seeds) => {
            Connection::Cluster(connect_cluster(seeds, timeout, cli.read_from_replicas).await?)
        }
        None => {
            let url = cli.url.as_deref().unwrap_or(DEFAULT_URL);
            let tls_ca = cli.tls_ca.as_deref();
            Connection::Single(match SentinelUrl::is_sentinel(url) {
                true => {
                    let auth = SentinelAuth {
                        user: cli.sentinel_user.as_deref(),
                        password: cli.sentinel_password.as_deref(),
                    };
                    connect_sentinel(url, tls_ca, auth, timeout).await?
                }
                false => connect(url, tls_ca, timeout).await?,
            })
        }
    })
}

/// The builder with its near cache tracking one server's invalidations (a cluster node sees
/// only its own keys: there the copy is read every interval).
fn tracked<K: CliKind>(cli: &Cli, builder: Builder<K>) -> Result<Builder<K>> {
    let (Some(refresh), None) = (cli.near_cache, &cli.cluster) else {
        return Ok(builder);
    };
    let url = cli.url.as_deref().unwrap_or(DEFAULT_URL);
    if SentinelUrl::is_sentinel(url) {
        // The tracking connection would stay with one node across failovers: the copy is
        // read every interval instead, as on a cluster.
        return Ok(builder.near_cache(NearCache::new(refresh)));
    }
    let client = tracking_client(url, cli.tls_ca.as_deref())?;
    Ok(builder.near_cache(NearCache::new(refresh).tracking(client)))
}

/// Runs the command on the filter `builder` makes on `conn`.
async fn execute<K: CliKind>(cli: &Cli, builder: Builder<K>, conn: Connection) -> Result<ExitCode> {
    let bloom = builder.build(conn)?;
    let done = command(cli, &bloom).await;
    if !cli.inexact_retries && cli.retry_for > 0.0 && !bloom.exact_retries() {
        eprintln!(
            "warning: the ACL refused the script that records each write's answers (EVALSHA, \
             its HGET, HSET or UNLINK, or the keys {{KEY}}:redbloom:*:KEY:once:*): after a retry, \
             \"new\" may count an item as seen and a counting write may repeat \
             (docs/security.md)"
        );
    }
    done
}

/// Runs the command on `bloom`.
async fn command<K: CliKind>(cli: &Cli, bloom: &Bloom<Connection, K>) -> Result<ExitCode> {
    let json = cli.json;
    match &cli.command {
        Command::Add { items } => {
            let flags = bloom.add_many(&raw_items(items)).await?;
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
            let flags = bloom.exists_many(&raw_items(items)).await?;
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
            if let Some(note) = K::load_note(bloom) {
                eprintln!("{note}");
            }
            let run = stream_file(bloom, args, Op::Add).await?;
            print(
                &output::Loaded {
                    items: run.items,
                    new: run.hits,
                    unknown: run.unknown,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
            );
            return Ok(interrupted(&run, "acknowledged as added"));
        }
        Command::Check(args) => {
            let run = stream_file(bloom, args, Op::Exists).await?;
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
            let flags = K::remove_many(bloom, &raw_items(items)).await?;
            print(
                &output::Removed {
                    items: flags.len() as u64,
                    removed: count(&flags),
                },
                json,
            );
        }
        Command::Unload(args) => {
            if !K::removes() {
                bail!("unload removes items: only a counting filter can (give --counting)");
            }
            let run = stream_file(bloom, args, Op::Remove).await?;
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
        Command::Info => print(&K::report(bloom.info().await?), json),
        Command::Migrate => bail!("migrate opens no filter (it runs before one is opened)"),
        Command::Clear => print(
            &output::Cleared {
                deleted: bloom.clear().await?,
            },
            json,
        ),
        Command::Expire { seconds } => {
            let set = bloom.expire(Duration::from_secs(*seconds)).await?;
            print(
                &output::Expiry {
                    ttl_seconds: set.then_some(*seconds),
                },
                json,
            );
        }
        Command::Export { file } => {
            let moved = snapshot::export(bloom, file).await?;
            // The file went to standard output: the report goes beside it.
            match file.as_os_str() == "-" {
                true => output::eprint(&moved, json),
                false => print(&moved, json),
            }
        }
        Command::Import { file, merge, .. } => {
            print(&snapshot::import(bloom, file, *merge).await?, json)
        }
        // Handled before connecting.
        Command::Build { .. } => {}
        Command::Bench(args) => print(
            &bench::run(bloom.clone(), args, cli.near_cache).await?,
            json,
        ),
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
async fn stream_file<K: CliKind>(
    bloom: &Bloom<Connection, K>,
    args: &FileArgs,
    op: Op,
) -> Result<stream::Streamed> {
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
