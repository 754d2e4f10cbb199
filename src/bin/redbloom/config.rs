//! From the command line to a filter's configuration, checked before any I/O: what the fuzz
//! target `cli_args` drives with arbitrary arguments.

use crate::args::{Cli, LayoutArg, Size};
use anyhow::{anyhow, bail, Result};
use redbloom::{Builder, Layout, RedisBloom, Retry};
use std::time::Duration;

/// The filter's builder for these flags, already validated (a `build` without a connection
/// succeeded), or the one-line reason it is not valid.
pub(crate) fn builder(cli: &Cli) -> Result<Builder> {
    let key = cli
        .key
        .clone()
        .ok_or_else(|| anyhow!("missing --key KEY: the filter's key"))?;
    let mut builder = sized(RedisBloom::builder(key), &cli.size, cli.layout)?
        .retry(Retry::for_duration(Duration::from_secs_f64(cli.retry_for)))
        .shards(cli.shards);
    if cli.read_from_replicas && cli.cluster.is_none() {
        bail!(
            "--read-from-replicas needs --cluster SEEDS; to read a standalone replica, give its \
             URL with --url"
        );
    }
    if let Some(replicas) = cli.wait_replicas {
        builder = builder.wait_for_replicas(replicas, timeout(cli));
    }
    builder.clone().build(())?;
    Ok(builder)
}

/// `--timeout` as a duration.
pub(crate) fn timeout(cli: &Cli) -> Duration {
    Duration::from_secs_f64(cli.timeout)
}

fn sized(builder: Builder, size: &Size, layout: LayoutArg) -> Result<Builder> {
    let builder = match layout {
        LayoutArg::Gozero => builder,
        LayoutArg::Native => builder.layout(Layout::Native),
    };
    Ok(match (size.bits, size.capacity, size.fpr) {
        (Some(_), None, None) if layout == LayoutArg::Native => {
            bail!("--layout native is sized with --capacity N --fpr P, not --bits")
        }
        (Some(bits), None, None) => builder.bits(bits),
        (None, Some(items), Some(fpr)) => builder.expected_items(items).false_positive_rate(fpr),
        _ => bail!("give the filter's size: --bits N, or --capacity N with --fpr P"),
    })
}
