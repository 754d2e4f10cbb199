//! The counting filter on the command line: `--counting`, sized with `--capacity N --fpr P`
//! or `--bits N` counters; the only kind that removes (`remove`, `unload`).

use super::{native_only, shards_agree, CliKind};
use crate::args::{Cli, FILTER};
use crate::output;
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Counting;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, CountingBloom, StoredParams};
use std::future::Future;

/// A counting filter's flags.
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct Flags {
    /// A counting filter: items can be removed (`remove`, `unload`); 4-bit counters, sized
    /// with --capacity N --fpr P, or --bits N (N counters, 7 per item).
    #[arg(long, global = true, conflicts_with = "window", help_heading = FILTER)]
    pub(crate) counting: bool,
}

impl CliKind for Counting {
    const FLAG: &'static str = "--counting";

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.counting.counting
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Counting>> {
        native_only(cli, Self::FLAG)?;
        let builder = CountingBloom::builder(key);
        match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
            (Some(counters), None, None) => Ok(builder.bits(counters)),
            (None, Some(items), Some(fpr)) => {
                Ok(builder.expected_items(items).false_positive_rate(fpr))
            }
            _ => bail!("give the filter's size: --bits N (counters), or --capacity N with --fpr P"),
        }
    }

    fn agrees(cli: &Cli, stored: &StoredParams) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        shards_agree(cli, stored)
    }

    fn report(info: redbloom::CountingInfo) -> output::Info {
        output::Info::from(info)
    }

    fn remove_many<C, T>(
        bloom: &Bloom<C, Counting>,
        items: &[T],
    ) -> impl Future<Output = redbloom::Result<Vec<bool>>> + Send
    where
        C: ConnectionLike + Clone + Send + Sync,
        T: AsRef<[u8]> + Sync,
    {
        bloom.remove_many(items)
    }

    fn removes() -> bool {
        true
    }
}
