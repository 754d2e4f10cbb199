//! The counting filter on the command line: `--counting`, sized with `--capacity N --fpr P`
//! or `--bits N` counters; the only kind that removes (`remove`, `unload`).

use super::plain::in_keys;
use super::{native_only, shards_agree, CliKind, Kept};
use crate::args::{Cli, FILTER};
use crate::{config, output};
use anyhow::{bail, Result};
use clap::Args;
use redbloom::kind::Counting;
use redbloom::redis::aio::ConnectionLike;
use redbloom::{Bloom, Builder, CountingBloom};
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

/// `builder` sized by the flags: `--bits N` counters, or `--capacity N --fpr P`.
fn sized(cli: &Cli, builder: Builder<Counting>) -> Result<Builder<Counting>> {
    match (cli.size.bits, cli.size.capacity, cli.size.fpr) {
        (Some(counters), None, None) => Ok(builder.bits(counters)),
        (None, Some(items), Some(fpr)) => Ok(builder.expected_items(items).false_positive_rate(fpr)),
        _ => bail!("give the filter's size: --bits N (counters), or --capacity N with --fpr P"),
    }
}

impl CliKind for Counting {
    const FLAG: &'static str = "--counting";
    const NO_MERGE: Option<&'static str> = Some(
        "a counting filter's file cannot be merged into it (its counters are no bits to OR): \
         import it whole, or load its items",
    );

    fn chosen(cli: &Cli) -> bool {
        cli.kinds.counting.counting
    }

    fn from_flags(cli: &Cli, key: String) -> Result<Builder<Counting>> {
        native_only(cli, Self::FLAG)?;
        sized(cli, CountingBloom::builder(key))
    }

    fn agrees(cli: &Cli, kept: Kept<'_>) -> Result<()> {
        native_only(cli, Self::FLAG)?;
        shards_agree(cli, kept)
    }

    fn resized(cli: &Cli, kept: Kept<'_>) -> Result<Builder<Counting>> {
        let builder = CountingBloom::builder(config::key(cli)?);
        Ok(sized(cli, builder)?.shards(kept.shards()))
    }

    fn report<C>(bloom: &Bloom<C, Counting>, info: redbloom::CountingInfo) -> output::Info {
        let (counters, k) = (bloom.counters(), bloom.hashes());
        let (bytes, planned) = in_keys(counters, bloom.shards(), 2, "counters");
        let planned = format!("{planned}, 4 bits a counter, k = {k}");
        output::Info::from(info).planned(Some(bytes), planned)
    }

    fn add_many_if_absent<C, T>(
        bloom: &Bloom<C, Counting>,
        items: &[T],
    ) -> impl Future<Output = redbloom::Result<Vec<bool>>> + Send
    where
        C: ConnectionLike + Clone + Send + Sync,
        T: AsRef<[u8]> + Sync,
    {
        bloom.add_many_if_absent(items)
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
