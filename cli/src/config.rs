//! From the command line to a filter's configuration, checked before any I/O: what the fuzz
//! target `cli_args` drives with arbitrary arguments.

use crate::args::{BenchOp, Cli, Command};
use anyhow::{anyhow, bail, Result};
use redbloom::kind::Kind;
use redbloom::redis::IntoConnectionInfo;
use redbloom::sentinel::SentinelUrl;
use redbloom::{Builder, NearCache, Retry};
use std::time::Duration;

/// The filter's key (`--key`, required).
pub(crate) fn key(cli: &Cli) -> Result<String> {
    cli.key
        .clone()
        .ok_or_else(|| anyhow!("missing --key KEY: the filter's key"))
}

/// The checks of the flags that need no kind and no I/O: the connection's and the near cache's.
pub(crate) fn check(cli: &Cli) -> Result<()> {
    let sentinel = cli.url.as_deref().is_some_and(SentinelUrl::is_sentinel);
    if cli.read_from_replicas && cli.cluster.is_none() && !sentinel {
        bail!(
            "--read-from-replicas needs --cluster SEEDS or a redis+sentinel:// URL; to read a \
             standalone replica, give its URL with --url"
        );
    }
    if let (Some(url), None) = (&cli.url, &cli.cluster) {
        // redis-rs's messages about a URL never quote it, so they cannot leak its password.
        let flag = if cli.url_from_env {
            "$REDIS_URL"
        } else {
            "--url"
        };
        if SentinelUrl::is_sentinel(url) {
            url.parse::<SentinelUrl>()
                .map_err(|err| anyhow!("invalid {flag}: {err}"))?;
        } else {
            url.as_str()
                .into_connection_info()
                .map_err(|err| anyhow!("invalid {flag}: {err}"))?;
        }
    }
    if (cli.sentinel_user.is_some() || cli.sentinel_password.is_some())
        && (!sentinel || cli.cluster.is_some())
    {
        bail!(
            "--sentinel-user and --sentinel-password go with a redis+sentinel:// URL (--url); \
             a plain server's credentials go in its URL"
        );
    }
    if cli.near_cache.is_some() {
        near_cache_applies(cli)?;
    }
    Ok(())
}

/// `builder` (of any kind) with the options every kind takes from the flags: retries,
/// replicas, the merge chunk, the near cache (the shards are the size's: given with it, or
/// stored). The caller validates it (no I/O).
pub(crate) fn options<K: Kind>(cli: &Cli, builder: Builder<K>) -> Result<Builder<K>> {
    let mut builder = builder.retry(Retry::for_duration(Duration::from_secs_f64(cli.retry_for)));
    if let Some(replicas) = cli.wait_replicas {
        builder = builder.wait_for_replicas(replicas, wait_timeout(cli));
    }
    if let Some(bytes) = cli.merge_chunk {
        builder = builder.merge_chunk_bytes(bytes);
    }
    builder = builder.accept_eviction(cli.accept_eviction);
    builder = builder.exact_retries(!cli.inexact_retries);
    if let Command::Import {
        idle: Some(idle), ..
    } = &cli.command
    {
        builder = builder.import_idle_timeout(*idle);
    }
    if let Some(refresh) = cli.near_cache {
        // Without tracking here, so that the copy's budget is checked before any I/O; the
        // command adds the tracking connection's client once it knows the server.
        builder = builder.near_cache(NearCache::new(refresh));
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
    /// Whether connecting says at once, on stderr, that it waits for a server that is down:
    /// stderr is a terminal and the output is not `--json`.
    pub(crate) tell_waiting: bool,
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
        tell_waiting: !cli.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    }
}

/// How long a write waits for `--wait-replicas` replicas (Redis WAIT): `--timeout`.
fn wait_timeout(cli: &Cli) -> Duration {
    Duration::from_secs_f64(cli.timeout)
}
