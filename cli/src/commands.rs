//! Runs one parsed command line against Redis.

mod snapshot;
mod stream;

use stream::Emit;

use crate::args::{CheckEmit, Cli, Command, FileArgs, LoadEmit};
use crate::bench;
use crate::config;
use crate::connect::SentinelAuth;
use crate::connect::{connect, connect_cluster, connect_sentinel, tracking_client, Connection};
use crate::kinds::{self, CliKind, Kept, WithKind};
use crate::output::{self, print};
use anyhow::{bail, Result};
use futures_util::future::LocalBoxFuture;
use redbloom::kind::Module;
use redbloom::sentinel::{Node, SentinelUrl};
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
    if let Command::Import { file, merge, .. } = &cli.command {
        // The file's header gives the kind and every parameter (SPEC.md §3).
        return snapshot::import_file(&cli, key, file, *merge).await;
    }
    let build = matches!(cli.command, Command::Build { .. });
    let mut conn = None;
    if Module::chosen(&cli) && !build {
        // A module filter another client made stores no parameters: what the server reports
        // opens it, and the flags given must agree with that (SPEC.md §7).
        let opened = open(&cli).await?;
        if StoredParams::read(&mut opened.clone(), &key)
            .await?
            .is_none()
        {
            let found = kinds::made_elsewhere(&cli, &key, &mut opened.clone()).await?;
            if let Some(builder) = found {
                let builder = config::options(&cli, builder)?;
                builder.validate()?;
                return execute(&cli, builder, opened).await;
            }
        }
        conn = Some(opened);
    }
    if kinds::sized(&cli) {
        let work = FromFlags {
            cli: &cli,
            key,
            conn,
        };
        return kinds::by_flags(&cli, work)?.await;
    }
    if build {
        bail!(
            "build makes a filter without Redis: give its size, --bits N or --capacity N --fpr P"
        );
    }
    let conn = match conn {
        Some(conn) => conn,
        None => open(&cli).await?,
    };
    let stored = StoredParams::read(&mut conn.clone(), &key).await?;
    let Some(stored) = stored else {
        if matches!(cli.command, Command::Clear) && holds_nothing(&mut conn.clone(), &key).await? {
            // Nothing to clear: a success that writes nothing (no size is needed to delete
            // nothing).
            print(&output::Cleared { deleted: false }, cli.json);
            return Ok(ExitCode::SUCCESS);
        }
        bail!(unstored(&mut conn.clone(), &key).await);
    };
    // The kind as stored: one a later version made is not opened.
    let kind = stored.kind().map_or_else(
        |_| stored.field("kind").unwrap_or_default().to_owned(),
        |kind| kind.to_string(),
    );
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

/// Whether `key` holds nothing (a read of its `TYPE`): with no parameters stored beside it,
/// no filter is there.
async fn holds_nothing(conn: &mut Connection, key: &str) -> Result<bool> {
    let found: String = redis::cmd("TYPE").arg(key).query_async(conn).await?;
    Ok(found == "none")
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
             parameters: open it with --module (BF.INFO and the module's dump header give its \
             size; --capacity N --fpr P given must agree)"
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

/// A filter of the kind and size the flags give (on `conn`, when connected already).
struct FromFlags<'a> {
    cli: &'a Cli,
    key: String,
    conn: Option<Connection>,
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
            let conn = match self.conn {
                Some(conn) => conn,
                None => open(cli).await?,
            };
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
        let kept = Kept::stored(stored);
        kinds::kind_agrees::<K>(cli, kept)?;
        K::agrees(cli, kept)?;
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
                    // Reads from a replica the sentinels list when asked; writes (and a
                    // command that may write) from the master.
                    let node = match cli.read_from_replicas && cli.command.only_reads() {
                        true => Node::Replica,
                        false => Node::Master,
                    };
                    connect_sentinel(url, tls_ca, auth, node, timeout).await?
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
        Command::Add { items, if_absent } => {
            let items = raw_items(items);
            let flags = match if_absent {
                true => K::add_many_if_absent(bloom, &items).await?,
                false => bloom.add_many(&items).await?,
            };
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
            let emit = args.emit.map(|LoadEmit::New| Emit::Hits);
            let run = stream_file(bloom, &args.lines, Op::Add, emit).await?;
            report(
                &output::Loaded {
                    items: run.items,
                    new: run.hits,
                    unknown: run.unknown,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
                emit,
            );
            return Ok(interrupted(&run, "acknowledged as added"));
        }
        Command::Check(args) => {
            let emit = args.emit.map(|emit| match emit {
                CheckEmit::Absent => Emit::Misses,
                CheckEmit::Present => Emit::Hits,
            });
            let run = stream_file(bloom, &args.lines, Op::Exists, emit).await?;
            report(
                &output::CheckedFile {
                    items: run.items,
                    present: run.hits,
                    absent: run.items - run.hits,
                    seconds: run.seconds,
                    interrupted: run.interrupted.map(|stop| stop.signal),
                },
                json,
                emit,
            );
            return Ok(interrupted(&run, "checked"));
        }
        Command::Remove { items } => {
            if !K::removes() {
                return Err(cannot_remove::<K>(cli));
            }
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
                return Err(cannot_remove::<K>(cli));
            }
            let run = stream_file(bloom, args, Op::Remove, None).await?;
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
        Command::Info => print(&K::report(bloom, bloom.info().await?), json),
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
        Command::Import { .. } => {
            bail!("import opens the filter its file holds (it runs before one is opened)")
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

/// Why `remove` or `unload` cannot run on a filter of kind `K`: only a counting filter removes
/// items. Opened as Redis stores it, the filter is of another kind (no flag can change that);
/// made or opened by the flags, `--counting` may be missing.
fn cannot_remove<K: CliKind>(cli: &Cli) -> anyhow::Error {
    let kind = <K as redbloom::kind::Kind>::NAME;
    match (kinds::sized(cli), kinds::flag_given(cli)) {
        (false, _) => anyhow::anyhow!(
            "{:?} is a {kind} filter, which cannot remove items: only a counting filter (one \
             made with --counting) can",
            cli.key.as_deref().unwrap_or_default()
        ),
        (true, Some(flag)) => anyhow::anyhow!(
            "a {kind} filter ({flag}) cannot remove items: only a counting filter (one made \
             with --counting) can"
        ),
        (true, None) => anyhow::anyhow!(
            "a plain filter cannot remove items, only a counting filter can: give --counting \
             (or leave the size flags out to open the filter as Redis stores it)"
        ),
    }
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

/// Prints a run's summary: on standard error when its standard output carries lines (`--emit`).
fn report(report: &impl output::Report, json: bool, emit: Option<Emit>) {
    match emit {
        Some(_) => output::eprint(report, json),
        None => print(report, json),
    }
}

/// Sends every line of the file in batches (see the `stream` module for the bounds); with
/// `emit`, writes the lines so answered to standard output.
async fn stream_file<K: CliKind>(
    bloom: &Bloom<Connection, K>,
    args: &FileArgs,
    op: Op,
    emit: Option<Emit>,
) -> Result<stream::Streamed> {
    let batch = match (args.batch, op) {
        (Some(batch), _) => batch as usize,
        (None, Op::Add | Op::Remove) => bloom.bulk_add_batch_size(),
        (None, Op::Exists) => bloom.bulk_check_batch_size(),
    };
    stream::stream_file(bloom, &args.file, batch, args.pipeline as usize, op, emit).await
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
