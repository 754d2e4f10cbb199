//! From the command line to a filter's configuration, checked before any I/O: what the fuzz
//! target `cli_args` drives with arbitrary arguments.

use crate::args::{BenchOp, Cli, Command, Size};
use anyhow::{anyhow, bail, Result};
use redbloom::redis::IntoConnectionInfo;
use redbloom::{Builder, Layout, NearCache, RedisBloom, Retry};
use std::time::Duration;

/// The filter's builder for these flags, already validated (a `build` without a connection
/// succeeded), or the one-line reason it is not valid.
pub(crate) fn builder(cli: &Cli) -> Result<Builder> {
    let key = cli
        .key
        .clone()
        .ok_or_else(|| anyhow!("missing --key KEY: the filter's key"))?;
    let builder = match (cli.window, cli.counting, cli.growth) {
        (Some(window), _, _) => windowed(RedisBloom::builder(key), cli, window)?,
        (None, true, _) => counted(RedisBloom::builder(key), cli)?,
        (None, false, Some(growth)) => grown(RedisBloom::builder(key), cli, growth)?,
        (None, false, None) => sized(RedisBloom::builder(key), &cli.size, cli.layout)?,
    };
    let mut builder = builder
        .retry(Retry::for_duration(Duration::from_secs_f64(cli.retry_for)))
        .shards(cli.shards);
    if cli.read_from_replicas && cli.cluster.is_none() {
        bail!(
            "--read-from-replicas needs --cluster SEEDS; to read a standalone replica, give its \
             URL with --url"
        );
    }
    if let (Some(url), None) = (&cli.url, &cli.cluster) {
        // redis-rs's messages about a URL never quote it, so they cannot leak its password.
        let flag = if cli.url_from_env {
            "$REDIS_URL"
        } else {
            "--url"
        };
        url.as_str()
            .into_connection_info()
            .map_err(|err| anyhow!("invalid {flag}: {err}"))?;
    }
    if let Some(replicas) = cli.wait_replicas {
        builder = builder.wait_for_replicas(replicas, wait_timeout(cli));
    }
    if let Some(bytes) = cli.merge_chunk {
        builder = builder.merge_chunk_bytes(bytes);
    }
    if let Some(refresh) = cli.near_cache {
        near_cache_applies(cli)?;
        // Without tracking here, so that the copy's budget is checked before any I/O; the
        // command adds the tracking connection's client once it knows the server.
        builder = builder.near_cache(NearCache::new(refresh));
    }
    match (cli.counting, cli.growth) {
        (true, _) => builder.clone().build_counting(()).map(drop)?,
        (false, Some(_)) => builder.clone().build_growing(()).map(drop)?,
        (false, None) => builder.validate()?,
    }
    Ok(builder)
}

/// `--near-cache` answers lookups from a copy: only `bench --op exists` takes it.
fn near_cache_applies(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Bench(bench) if bench.op == BenchOp::Exists => Ok(()),
        Command::Bench(bench) => bail!(
            "--near-cache needs bench --op exists: the copy answers lookups, and --op {} writes",
            match bench.op {
                BenchOp::Add => "add",
                _ => "remove",
            }
        ),
        _ => bail!("--near-cache is a bench option: use it with bench --op exists"),
    }
}

/// The connection's time limits, from `--timeout`, `--retry-for` and `--wait-replicas`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Timeouts {
    /// For connecting (TCP, TLS and the first commands): `--timeout`.
    pub(crate) connect: Duration,
    /// For a reply: `--timeout`, and with `--wait-replicas` the WAIT timeout on top, since the
    /// server holds a write's reply until its replicas confirm or WAIT times out. (Were it only
    /// `--timeout`, the client would give up first, with a timeout retried for `--retry-for`
    /// instead of the "not replicated" error.)
    pub(crate) response: Duration,
    /// How long connecting keeps retrying a server that is down or starting: `--retry-for`
    /// (the filter's calls retry for as long, each).
    pub(crate) retry_for: Duration,
}

/// The connection's time limits for these flags.
pub(crate) fn timeout(cli: &Cli) -> Timeouts {
    let timeout = Duration::from_secs_f64(cli.timeout);
    let response = match cli.wait_replicas {
        Some(_) => timeout + wait_timeout(cli),
        None => timeout,
    };
    Timeouts {
        connect: timeout,
        response,
        retry_for: Duration::from_secs_f64(cli.retry_for),
    }
}

/// How long a write waits for `--wait-replicas` replicas (Redis WAIT): `--timeout`.
fn wait_timeout(cli: &Cli) -> Duration {
    Duration::from_secs_f64(cli.timeout)
}

fn sized(builder: Builder, size: &Size, layout: Layout) -> Result<Builder> {
    let builder = builder.layout(layout);
    Ok(match (size.bits, size.capacity, size.fpr) {
        (Some(_), None, None) if layout == Layout::Native => {
            bail!("--layout native is sized with --capacity N --fpr P, not --bits")
        }
        (Some(bits), None, None) => builder.bits(bits),
        (None, Some(items), Some(fpr)) => builder.expected_items(items).false_positive_rate(fpr),
        _ => bail!("give the filter's size: --bits N, or --capacity N with --fpr P"),
    })
}

/// A window filter's builder: sized by --capacity and --fpr, in the native layout.
fn windowed(builder: Builder, cli: &Cli, window: Duration) -> Result<Builder> {
    if cli.layout_given && cli.layout != Layout::Native {
        bail!("--window filters use the native layout; drop --layout gozero");
    }
    let builder = builder
        .window(window)
        .generations(cli.generations.unwrap_or(4));
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (None, Some(items), Some(fpr)) => {
            Ok(builder.expected_items(items).false_positive_rate(fpr))
        }
        _ => bail!(
            "--window is sized with --capacity N (the most items added in any one window) and \
             --fpr P, not --bits"
        ),
    }
}

/// A counting filter's builder: --capacity and --fpr, or --bits N counters (7 per item).
fn counted(builder: Builder, cli: &Cli) -> Result<Builder> {
    if cli.layout_given && cli.layout != Layout::Native {
        bail!("--counting filters use the native layout; drop --layout gozero");
    }
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (Some(counters), None, None) => Ok(builder.bits(counters)),
        (None, Some(items), Some(fpr)) => {
            Ok(builder.expected_items(items).false_positive_rate(fpr))
        }
        _ => bail!("give the filter's size: --bits N (counters), or --capacity N with --fpr P"),
    }
}

/// A growing filter's builder: --capacity (the first level's items) and --fpr (the bound).
fn grown(builder: Builder, cli: &Cli, growth: u32) -> Result<Builder> {
    if cli.layout_given && cli.layout != Layout::Native {
        bail!("--growth filters use the native layout; drop --layout gozero");
    }
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (None, Some(items), Some(fpr)) => Ok(builder
            .growth(growth)
            .expected_items(items)
            .false_positive_rate(fpr)),
        _ => bail!(
            "--growth is sized with --capacity N (the first level's items) and --fpr P, not \
             --bits"
        ),
    }
}
